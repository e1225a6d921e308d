import { createHash } from 'node:crypto';
import { invalidParameter } from '../vendor-api-errors.ts';
import { checkCallbackUrl } from './admin-input.ts';
import type { ServiceInfo } from './admin-records.ts';
import type { AdminState } from './admin-state.ts';

/** Admin API service settings (`/info`) and logo. */

export function getInfo(s: AdminState): ServiceInfo {
  return { ...s.info };
}

/** PUT /info: answers both settings, or undefined for 304. */
export function updateInfo(
  s: AdminState,
  body: { accounts_migration_callback_url?: string; session_timeout?: number },
) {
  let changed = false;
  if (body.accounts_migration_callback_url !== undefined) {
    checkCallbackUrl(
      'accounts_migration_callback_url',
      body.accounts_migration_callback_url,
      s.opts.allowInsecureCallbacks,
    );
    if (body.accounts_migration_callback_url !== s.info.accounts_migration_callback_url) {
      s.info.accounts_migration_callback_url = body.accounts_migration_callback_url;
      changed = true;
    }
  }
  if (body.session_timeout !== undefined && body.session_timeout !== s.info.session_timeout) {
    s.info.session_timeout = body.session_timeout;
    changed = true;
  }
  if (!changed) return undefined;
  return {
    accounts_migration_callback_url: s.info.accounts_migration_callback_url ?? '',
    session_timeout: s.info.session_timeout,
  };
}

export function getLogo(s: AdminState): { id: string; bytes: Buffer } | undefined {
  return s.logo;
}

/** POST /logo: Base64 PNG; replaces any earlier logo. */
export function setLogo(s: AdminState, base64: string): string {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0) {
    throw invalidParameter('logo', 'must be Base64');
  }
  const bytes = Buffer.from(base64, 'base64');
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (bytes.length < 8 || !bytes.subarray(0, 8).equals(signature)) {
    throw invalidParameter('logo', 'must be PNG image data');
  }
  const id = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
  s.logo = { id, bytes };
  return id;
}

export function deleteLogo(s: AdminState): boolean {
  const had = s.logo !== undefined;
  s.logo = undefined;
  return had;
}
