import { createKeyring } from '../edge/caller-auth.ts';
import type { Operator } from '../operators/operator.ts';

/**
 * Operators from bare operator keys (RISKGATE_OPS_KEYS as it is today: keys without a name or a
 * role): each key is an admin named by its key id. The operators' own resolver (names and roles
 * per key) replaces it where it is configured.
 */
export function keyOperators(keys: readonly string[]): (key: string) => Operator | undefined {
  const identify = createKeyring(keys);
  return (key) => {
    const keyId = identify(key);
    return keyId === undefined ? undefined : { name: keyId, role: 'admin', keyId };
  };
}
