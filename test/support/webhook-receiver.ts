import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * A webhook receiver for tests: a node:http server on a port of its own (0 at first, the same one
 * when reopened after `close`), recording each request's headers and exact body bytes, answering
 * what `answer` says (default 204).
 */

export interface ReceivedDelivery {
  headers: IncomingHttpHeaders;
  /** The body's bytes exactly as received. */
  body: Buffer;
  path: string;
}

export interface WebhookReceiver {
  /** `http://127.0.0.1:<port>/hook` (or another `path`). */
  url(path?: string): string;
  readonly port: number;
  readonly received: ReceivedDelivery[];
  /** How each request is answered (may write nothing: a receiver that hangs). */
  answer: (res: ServerResponse, delivery: ReceivedDelivery) => void;
  /** Stops listening and cuts open connections (the receiver is down). */
  close(): Promise<void>;
  /** Listens again on the same port. */
  open(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  let server: Server | undefined;
  let port = 0;
  const receiver: WebhookReceiver = {
    url: (path = '/hook') => `http://127.0.0.1:${port}${path}`,
    get port() {
      return port;
    },
    received: [],
    answer: (res) => {
      res.statusCode = 204;
      res.end();
    },
    async close() {
      const s = server;
      server = undefined;
      if (s === undefined) return;
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    },
    async open() {
      const s = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const delivery = { headers: req.headers, body: Buffer.concat(chunks), path: req.url ?? '' };
          receiver.received.push(delivery);
          receiver.answer(res, delivery);
        });
      });
      await new Promise<void>((resolve, reject) => {
        s.once('error', reject);
        s.listen(port, '127.0.0.1', () => resolve());
      });
      port = (s.address() as AddressInfo).port;
      server = s;
    },
  };
  await receiver.open();
  return receiver;
}

/** The recipe's `verifyWebhook`, as docs/webhooks.md prints it (its one `js` block). */
export type VerifyWebhook = (
  secrets: string | string[],
  headers: IncomingHttpHeaders,
  rawBody: Buffer,
  seen: { has(id: string): boolean; add(id: string): unknown },
  nowSeconds?: number,
) => { id: string; type: string; at: string; data: Record<string, unknown> } | null;

/** Loads the verification recipe from docs/webhooks.md: tests verify with the documented code. */
export async function loadRecipe(): Promise<VerifyWebhook> {
  const page = readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
  const code = /```js\n([\s\S]*?)```/.exec(page)?.[1];
  if (code === undefined) throw new Error('docs/webhooks.md has no js block');
  const file = join(mkdtempSync(join(tmpdir(), 'riskgate-recipe-')), 'verify-webhook.mjs');
  writeFileSync(file, code);
  const mod = (await import(pathToFileURL(file).href)) as { verifyWebhook: VerifyWebhook };
  return mod.verifyWebhook;
}
