import type { Child } from 'hono/jsx';
import type { Operator } from '../operators/operator.ts';
import type { ConsoleAssets } from './console-assets.ts';
import { CSRF_FIELD } from './console-session.ts';

/**
 * The frame of every console page: a skip link, the navigation (the current page marked for
 * screen readers), who is signed in with a sign-out form, the stylesheet and the script module.
 * No inline script or style anywhere: the CSP allows only the package's own files.
 */

export const NAV = [
  { key: 'decisions', href: '/console/decisions', label: 'Decisions' },
  { key: 'review', href: '/console/review', label: 'Review' },
  { key: 'rules', href: '/console/rules', label: 'Rules' },
  { key: 'policies', href: '/console/policies', label: 'Policies' },
  { key: 'lists', href: '/console/lists', label: 'Lists' },
  { key: 'lockouts', href: '/console/lockouts', label: 'Lock-outs' },
  { key: 'actions', href: '/console/actions', label: 'Actions' },
  { key: 'health', href: '/console/health', label: 'Health' },
  { key: 'audit', href: '/console/audit', label: 'Audit' },
] as const;
export type NavKey = (typeof NAV)[number]['key'];

export interface Frame {
  assets: ConsoleAssets;
  /** The signed-in operator and their forms' CSRF token (absent on the sign-in page). */
  session?: { operator: Operator; csrf: string } | undefined;
}

/** The hidden CSRF field every form carries. */
export function CsrfField(props: { token: string }) {
  return <input type="hidden" name={CSRF_FIELD} value={props.token} />;
}

/** A card of a page: a section named by its heading (`id`, the `<h2>`'s, for `aria-labelledby`). */
export function ConsoleCard(props: { id: string; title: Child; children?: Child }) {
  return (
    <section class="card" aria-labelledby={props.id}>
      <h2 id={props.id}>{props.title}</h2>
      {props.children}
    </section>
  );
}

interface FormProps {
  action: string;
  csrf: string;
  /** The button's text. */
  submit: Child;
  /** A change hard to undo (a lock-out, an unlock): the button in the danger colour. */
  danger?: boolean;
  children?: Child;
}

/** A change's form: posted to `action` with the CSRF field, its fields, then its submit button. */
export function ConsoleForm(props: FormProps) {
  return (
    <form method="post" action={props.action}>
      <CsrfField token={props.csrf} />
      {props.children}
      <p>
        <button type="submit" class={props.danger === true ? 'danger' : undefined}>
          {props.submit}
        </button>
      </p>
    </form>
  );
}

/** A card holding one change's form: `intro` between its heading and the form. */
export function ConsoleFormCard(props: FormProps & { id: string; title: Child; intro?: Child }) {
  return (
    <ConsoleCard id={props.id} title={props.title}>
      {props.intro}
      <ConsoleForm action={props.action} csrf={props.csrf} submit={props.submit} danger={props.danger}>
        {props.children}
      </ConsoleForm>
    </ConsoleCard>
  );
}

/** The unlock forms' reason label (a lock-out's page, a review case's). */
export const UNLOCK_REASON = 'Why unlock (kept on the record and in the audit trail)';

/** A change's required reason, one line of at most 500 characters, kept on its record and in the audit trail. */
export function ReasonField(props: { id: string; label: string }) {
  return (
    <>
      <label for={props.id}>{props.label}</label>
      <input type="text" id={props.id} name="reason" required maxlength={500} />
    </>
  );
}

function Header(props: { frame: Frame; current?: NavKey | undefined }) {
  const session = props.frame.session;
  return (
    <header class="top">
      <span class="brand">riskgate console</span>
      {session !== undefined && (
        <nav aria-label="Console">
          <ul>
            {NAV.map((item) => (
              <li>
                <a href={item.href} aria-current={item.key === props.current ? 'page' : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      )}
      {session !== undefined && (
        <div class="who">
          <span>
            {session.operator.name} <span class="tag">{session.operator.role}</span>
          </span>
          <form method="post" action="/console/sign-out" class="inline-form">
            <CsrfField token={session.csrf} />
            <button type="submit">Sign out</button>
          </form>
        </div>
      )}
    </header>
  );
}

/** A whole page: `<!doctype html>` and the frame around `children`. */
export function renderPage(o: {
  frame: Frame;
  title: string;
  current?: NavKey | undefined;
  children: Child;
}): string {
  const page = (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="no-referrer" />
        {/* No favicon request (a 404 in every browser console): an empty one, inline. */}
        <link rel="icon" href="data:," />
        <title>{`${o.title} · riskgate console`}</title>
        <link rel="stylesheet" href={`/console/assets/${o.frame.assets.css.name}`} />
        <script type="module" src={`/console/assets/${o.frame.assets.js.name}`} />
      </head>
      <body>
        <a class="skip-link" href="#main">
          Skip to content
        </a>
        <Header frame={o.frame} current={o.current} />
        <main id="main" tabindex={-1}>
          {o.children}
        </main>
      </body>
    </html>
  );
  return `<!doctype html>${page.toString()}`;
}

/** A verdict as a coloured badge (its word is the text: colour is never the only cue). */
export function VerdictBadge(props: { verdict: string }) {
  return <span class={`verdict verdict-${props.verdict}`}>{props.verdict}</span>;
}

/** An RFC 3339 time, readable, with the full value for a machine. */
/**
 * A moment, in UTC as sent; the console's script shows it in the reader's zone and keeps UTC on
 * hover (the `title`), so without script it still reads right.
 */
export function Time(props: { at: string }) {
  const utc = `${props.at.replace('T', ' ').slice(0, 19)} UTC`;
  return (
    <time datetime={props.at} title={utc}>
      {utc}
    </time>
  );
}

/** A notice box: the outcome of a change, or why something cannot be shown. */
export function Notice(props: { kind?: 'ok' | 'error' | 'warn'; children: Child }) {
  const kind = props.kind ?? 'warn';
  return (
    <div class={kind === 'warn' ? 'notice' : `notice ${kind}`} role={kind === 'error' ? 'alert' : 'status'}>
      {props.children}
    </div>
  );
}
