import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * The console's stylesheet and script: files of the package (src/console/assets/, copied to dist
 * by `npm run build`), never a CDN. Each is served under a name carrying a hash of its content
 * (`console.3f2a9c1b0d.css`), so it can be cached for a year and a new release is fetched at once.
 */

export interface ConsoleAsset {
  /** The hashed name, under /console/assets/. */
  name: string;
  contentType: string;
  body: string;
}

export interface ConsoleAssets {
  css: ConsoleAsset;
  js: ConsoleAsset;
  /** The asset of a hashed name, if any. */
  byName(name: string): ConsoleAsset | undefined;
}

function load(file: string, contentType: string): ConsoleAsset {
  const url = new URL(`./assets/${file}`, import.meta.url);
  let body: string;
  try {
    body = readFileSync(url, 'utf8');
  } catch (error) {
    // A build that left them out (they are files, not modules: `npm run build` copies them).
    throw new Error(`the console's ${file} is missing from the package (${url.pathname})`, { cause: error });
  }
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 10);
  const dot = file.lastIndexOf('.');
  return { name: `${file.slice(0, dot)}.${hash}${file.slice(dot)}`, contentType, body };
}

/** Reads the assets (once per console: they are a few kilobytes). */
export function loadConsoleAssets(): ConsoleAssets {
  const css = load('console.css', 'text/css; charset=utf-8');
  const js = load('console.js', 'text/javascript; charset=utf-8');
  const all = new Map([css, js].map((a) => [a.name, a]));
  return { css, js, byName: (name) => all.get(name) };
}
