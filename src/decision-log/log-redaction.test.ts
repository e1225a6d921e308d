import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEFAULT_REDACTION, parseRedaction } from '../config/redaction-rules.ts';
import { createRedactor, truncateIp } from './log-redaction.ts';

const line = {
  kind: 'decision',
  request: { accountId: 'alice', ip: '203.0.113.77', userAgent: 'Mozilla/5.0', context: { email: 'a@x' } },
  inputs: {
    user: { user_id: 'U1', username: 'alice', display_name: 'Alice Liddell' },
    devices: [
      { device_id: 'D1', display_name: "Alice's phone" },
      { device_id: 'D2', display_name: 'Work phone' },
    ],
  },
};

const rules = (text: string) => {
  const r = parseRedaction(text);
  if (typeof r === 'string') throw new Error(r);
  return r;
};

describe('decision log redaction', () => {
  it('drops, hashes and truncates the configured fields, through arrays, without touching the original', () => {
    const before = JSON.stringify(line);
    const redact = createRedactor(
      rules(
        'request.ip:truncate,request.userAgent:hash,request.context:drop,inputs.user.username:hash,inputs.devices.display_name:drop',
      ),
      'k-0123456789abcdef',
    );
    const out = redact(line) as typeof line;
    expect(out.request).toEqual({
      accountId: 'alice',
      ip: '203.0.113.0/24',
      userAgent: expect.stringMatching(/^hmac:[0-9a-f]{16}$/),
    });
    expect(out.inputs.user.username).toMatch(/^hmac:[0-9a-f]{16}$/);
    expect(out.inputs.user.display_name).toBe('Alice Liddell');
    expect(out.inputs.devices).toEqual([{ device_id: 'D1' }, { device_id: 'D2' }]);
    expect(JSON.stringify(line)).toBe(before);
    // The same value under the same key hashes the same (lines correlate); another key does not.
    expect((redact(line) as typeof line).inputs.user.username).toBe(out.inputs.user.username);
    const other = createRedactor(
      rules('inputs.user.username:hash'),
      'another-key-0123456',
    )(line) as typeof line;
    expect(other.inputs.user.username).not.toBe(out.inputs.user.username);
  });

  it('by default drops the display names only', () => {
    const out = createRedactor(rules(DEFAULT_REDACTION), undefined)(line) as typeof line;
    expect(out.inputs.user).toEqual({ user_id: 'U1', username: 'alice' });
    expect(out.inputs.devices).toEqual([{ device_id: 'D1' }, { device_id: 'D2' }]);
    expect(out.request).toBe(line.request);
  });

  it('writes the same JSON line, and its copies stay fast-properties objects (never `delete`)', () => {
    const out = createRedactor(rules(DEFAULT_REDACTION), undefined)(line);
    expect(JSON.stringify(out)).toBe(
      '{"kind":"decision","request":{"accountId":"alice","ip":"203.0.113.77","userAgent":"Mozilla/5.0","context":{"email":"a@x"}},"inputs":{"user":{"user_id":"U1","username":"alice"},"devices":[{"device_id":"D1"},{"device_id":"D2"}]}}',
    );
    // A dictionary-mode copy (what `delete` makes) serialises at half the speed (issue 32): asked
    // of V8 itself in a process of its own (natives syntax), not timed.
    const probe = `
      import { createRedactor } from ${JSON.stringify(fileURLToPath(new URL('./log-redaction.ts', import.meta.url)))};
      const user = { user_id: 'U1', username: 'alice', display_name: 'A', status: 'active', failed_attempts: 0 };
      const out = createRedactor([{ path: ['inputs', 'user', 'display_name'], mode: 'drop' }], undefined)({ inputs: { user } });
      console.log(%HasFastProperties(out.inputs.user), %HasFastProperties(out.inputs));`;
    const fast = execFileSync(
      process.execPath,
      ['--allow-natives-syntax', '--import', 'tsx', '--input-type=module', '--eval', probe],
      { encoding: 'utf8' },
    );
    expect(fast.trim()).toBe('true true');
  });

  it('leaves a line without the path as it is, and none turns redaction off', () => {
    const action = { kind: 'action', userId: 'U1' };
    expect(createRedactor(rules('request.ip:drop'), undefined)(action)).toBe(action);
    expect(createRedactor(rules('none'), undefined)(line)).toBe(line);
  });

  it('truncates IPv4 to /24 and IPv6 to /48, and drops a non-IP under truncate', () => {
    expect(truncateIp('198.51.100.23')).toBe('198.51.100.0/24');
    expect(truncateIp('2001:db8:abcd:12::1')).toBe('2001:db8:abcd::/48');
    expect(truncateIp('2001:db8::1')).toBe('2001:db8:0::/48');
    expect(truncateIp('::1')).toBe('0:0:0::/48');
    expect(truncateIp('not-an-ip')).toBeUndefined();
    const out = createRedactor(rules('request.ip:truncate'), undefined)({ request: { ip: 'bogus' } });
    expect(out).toEqual({ request: {} });
  });

  it('names a bad entry', () => {
    expect(parseRedaction('request.ip:blur')).toMatch(/^"request.ip:blur" is not path:mode/);
    expect(parseRedaction('request.ip')).toMatch(/is not path:mode/);
    expect(parseRedaction('request..ip:drop')).toMatch(/is not path:mode/);
  });
});
