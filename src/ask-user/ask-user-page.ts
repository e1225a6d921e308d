import { createHash } from 'node:crypto';
import { html } from 'hono/html';

/**
 * The public "was this you?" pages (docs/ask-user.md): server-rendered, no script, one inline
 * stylesheet allowed by its hash, nothing else loaded. What a page shows is what its token's
 * holder may know: when the sign-in was, never the decision, the rules or the verdict.
 */

const STYLE =
  'body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#222}' +
  'h1{font-size:1.4rem}form{display:flex;gap:1rem;flex-wrap:wrap}' +
  'button{font:inherit;padding:.6rem 1.4rem;border-radius:.4rem;border:1px solid #666;background:#fff;cursor:pointer}' +
  'button[value=no]{border-color:#a00;color:#a00}';

const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');

/**
 * The headers of every page: a CSP allowing only the stylesheet and a form posted back here; the
 * token in the URL never leaves as a Referer, is never cached, never indexed.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`,
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-robots-tag': 'noindex, nofollow',
  'x-content-type-options': 'nosniff',
};

/** Why a token is not answered. */
export type RefusedReason = 'used' | 'expired' | 'invalid' | 'busy' | 'unavailable' | 'bad_answer';

function page(title: string, body: ReturnType<typeof html>): string {
  return String(html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title}</title><style>${STYLE}</style></head>
<body><main><h1>${title}</h1>${body}</main></body></html>`);
}

/** The question (GET): a form posting yes or no back to the same address. */
export function questionPage(attemptAtMs: number): string {
  const at = new Date(attemptAtMs).toISOString().replace('T', ' ').slice(0, 16);
  return page(
    'Was this you?',
    html`<p>Someone tried to sign in to your account on ${at} UTC, and we were not sure it was you.</p>
<form method="post"><button name="answer" value="yes">Yes, it was me</button><button name="answer" value="no">No, it was not me</button></form>
<p>If it was not you, we will protect your account. This link works once.</p>`,
  );
}

/** After an answer: what it did. */
export function answeredPage(answer: 'yes' | 'no', actionQueued: boolean): string {
  if (answer === 'yes')
    return page('Thank you', html`<p>Thanks for confirming it was you. Nothing else to do.</p>`);
  return page(
    'Thank you for telling us',
    actionQueued
      ? html`<p>We are locking your account to protect it. Contact support to get back in.</p>`
      : html`<p>We recorded that it was not you. Please contact support to secure your account.</p>`,
  );
}

const REFUSALS: Record<
  RefusedReason,
  { status: 400 | 404 | 409 | 410 | 429 | 503; title: string; text: string }
> = {
  used: {
    status: 409,
    title: 'This link was already used',
    text: 'An answer was already given with this link. Nothing was changed.',
  },
  expired: {
    status: 410,
    title: 'This link has expired',
    text: 'This link can no longer be answered. Nothing was changed. If you did not try to sign in, contact support.',
  },
  invalid: {
    status: 404,
    title: 'This link is not valid',
    text: 'This link is incomplete or was changed. Nothing was changed. Open the link exactly as you received it.',
  },
  busy: {
    status: 429,
    title: 'Please try again shortly',
    text: 'Too many requests right now. Nothing was changed. Please try again in a moment.',
  },
  unavailable: {
    status: 503,
    title: 'Please try again later',
    text: 'We cannot take your answer right now. Nothing was changed. Please try again later.',
  },
  bad_answer: {
    status: 400,
    title: 'Please choose yes or no',
    text: 'The answer was neither yes nor no. Nothing was changed. Go back and press one of the buttons.',
  },
};

/** A refusal: its status and page. Every one says nothing was changed. */
export function refusedPage(reason: RefusedReason): {
  status: 400 | 404 | 409 | 410 | 429 | 503;
  body: string;
} {
  const r = REFUSALS[reason];
  return { status: r.status, body: page(r.title, html`<p>${r.text}</p>`) };
}
