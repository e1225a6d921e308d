import { type Agent, type IncomingHttpHeaders, request } from 'node:http';

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The headers as sent, name and value in turn: their exact set and spelling. */
  rawHeaders: string[];
  text: string;
}

/**
 * A JSON POST with a caller key over node:http, not fetch: fetch hides the connection's own headers
 * (`connection`, `keep-alive`) that tests of keep-alive and draining read. Without `agent`, node's
 * global one (keep-alive).
 */
export function postRaw(url: string, key: string, body: string, agent?: Agent): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(agent !== undefined && { agent }),
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, rawHeaders: res.rawHeaders, text }),
      );
    });
    req.end(body);
  });
}
