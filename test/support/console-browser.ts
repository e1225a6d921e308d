import { type BrowserContext, chromium, type Page } from 'playwright-core';

/**
 * The console in a real browser, one way for every browser test: Debian's chromium (the `chromium`
 * package; playwright-core drives it, no browser download), headless, each session a browser
 * context of its own (its own cookies), its page's problems recorded.
 */

const CHROMIUM = '/usr/bin/chromium';

/** Headless on a shared machine: no GPU, no sandbox (containers), nothing in the background. */
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * A CSP violation as a console error, so `problems` has it. Added through the DevTools protocol,
 * so the page's CSP does not apply to it. (A string: the tests compile without the DOM's types.)
 */
const CSP_VIOLATIONS_TO_CONSOLE =
  "document.addEventListener('securitypolicyviolation', (e) => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));";

export interface ConsoleBrowserOptions {
  /** The page's size, CSS px. Default 1280 × 860 (a laptop). */
  viewport?: { width: number; height: number };
  /** The browser's time zone (IANA name). Default the machine's. */
  timezoneId?: string;
  /** Console warnings are problems too, not only errors. Default false. */
  warnings?: boolean;
}

export interface ConsoleSession {
  context: BrowserContext;
  page: Page;
  /**
   * What went wrong in the page, in order: console errors (`error: text (url)`; warnings too with
   * `warnings`), CSP violations among them, uncaught exceptions (`pageerror: message`).
   */
  problems: string[];
  /** Signs in to the console at `url` with operator `key`; resolves on the Decisions page. */
  signIn(url: string, key: string): Promise<void>;
}

export interface ConsoleBrowser extends ConsoleSession {
  /** Another session in the same chromium, with the same options (a second operator). */
  newSession(): Promise<ConsoleSession>;
  /** Closes chromium, every session with it. */
  close(): Promise<void>;
}

/** Signs `page` in to the console at `url` with operator `key`; resolves on the Decisions page. */
export async function signInToConsole(page: Page, url: string, key: string): Promise<void> {
  await page.goto(`${url}/console/sign-in`);
  await page.getByLabel('Operator key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL('**/console/decisions');
}

/** Starts chromium with one session open; `close()` it in `afterAll`. */
export async function openConsoleBrowser(options: ConsoleBrowserOptions = {}): Promise<ConsoleBrowser> {
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  const newSession = async (): Promise<ConsoleSession> => {
    const context = await browser.newContext({
      viewport: options.viewport ?? { width: 1280, height: 860 },
      ...(options.timezoneId !== undefined && { timezoneId: options.timezoneId }),
    });
    await context.addInitScript({ content: CSP_VIOLATIONS_TO_CONSOLE });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || (options.warnings === true && m.type() === 'warning'))
        problems.push(`${m.type()}: ${m.text()} (${m.location().url})`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    return { context, page, problems, signIn: (url, key) => signInToConsole(page, url, key) };
  };
  try {
    return { ...(await newSession()), newSession, close: () => browser.close() };
  } catch (e) {
    await browser.close();
    throw e;
  }
}
