import { readFileSync } from 'node:fs';

let cached: string | undefined;

/**
 * riskgate's version, from package.json (two levels up from this module both in src/ and in the
 * compiled dist/, and in the image, which keeps package.json beside dist/). `0.0.0` when it cannot
 * be read, so a version never stops the service.
 */
export function riskgateVersion(): string {
  if (cached !== undefined) return cached;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    cached = typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    cached = '0.0.0';
  }
  return cached;
}
