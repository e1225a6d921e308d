import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * No fixed sleep in a test (issue 31; the brief: "a driven clock or an awaited event, never a
 * fixed sleep"). A fixed sleep passes on a fast machine and flakes on a slow one; one before
 * asserting that nothing happened passes a bug that is merely late. A test waits for the event
 * (`once`, a promise the code hands back), polls for the condition (test/support/eventually.ts,
 * the one polling loop), or drives the time (`DrivenClock`, `vi.useFakeTimers`), and asserts
 * "nothing happened" after a drain.
 *
 * Scanned: test/ (its support too) and src/ test files. Flagged: a promise resolved by a bare timer
 * (`new Promise((r) => setTimeout(r, N))`), `node:timers/promises`, and riskgate's `sleep` awaited
 * in a test. A stub that answers after a delay (`setTimeout(() => resolve(x), N)`) is not a wait.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const FIXED_SLEEP: readonly { name: string; pattern: RegExp }[] = [
  {
    name: 'a promise resolved by a bare timer',
    pattern: /new Promise\s*(?:<[^>]*>)?\(\s*\(?\s*(\w+)\s*\)?\s*=>\s*setTimeout\(\s*\1\s*[,)]/g,
  },
  { name: 'node:timers/promises', pattern: /from\s+'node:timers\/promises'/g },
  { name: 'sleep awaited in a test', pattern: /await\s+sleep\(/g },
];

/**
 * The justified exceptions, by file: how many fixed sleeps it may hold, and why each is not a
 * wait for something the test could name. Keep it short; an entry that holds more or fewer than it
 * says fails the test, so a fixed one is taken off.
 */
const ALLOWED = new Map<string, { count: number; why: string }>([
  [
    'test/support/eventually.ts',
    { count: 2, why: 'the one polling loop: its pause between checks, on real time under fake timers' },
  ],
  [
    'test/sqlite-thread-dialect.test.ts',
    { count: 1, why: 'the timer turn is what is tested: a query on the thread leaves the loop free for it' },
  ],
  [
    'test/outbox-delivery.test.ts',
    {
      count: 1,
      why: 'the acceptance scenario is a real minute of Admin outage: retries, backoff and breaker on real timers against the real sandbox, none given up',
    },
  ],
  [
    'test/webhooks-receiver-outage.test.ts',
    {
      count: 1,
      why: "the acceptance scenario is a receiver down a real minute: each late delivery's signature timestamp is checked against the receiver's real clock",
    },
  ],
]);

function files(dir: string, test: (name: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : files(path, test);
    return test(entry.name) ? [relative(ROOT, path).split('\\').join('/')] : [];
  });
}

function scanned(): string[] {
  return [
    ...files(join(ROOT, 'test'), (name) => /\.tsx?$/.test(name)),
    ...files(join(ROOT, 'src'), (name) => /\.test\.tsx?$/.test(name)),
  ];
}

/** The fixed sleeps of one file's text: `line: what`. */
function fixedSleeps(text: string): string[] {
  const found: string[] = [];
  for (const { name, pattern } of FIXED_SLEEP) {
    for (const m of text.matchAll(pattern)) {
      found.push(`${text.slice(0, m.index).split('\n').length}: ${name}`);
    }
  }
  return found;
}

describe('fixed sleeps in tests', () => {
  it('flags each form, and not a stub that answers after a delay', () => {
    expect(fixedSleeps('await new Promise((r) => setTimeout(r, 50));')).toEqual([
      '1: a promise resolved by a bare timer',
    ]);
    expect(fixedSleeps('\nawait new Promise<void>((resolve) => setTimeout(resolve, 0));')).toEqual([
      '2: a promise resolved by a bare timer',
    ]);
    expect(fixedSleeps("import { setTimeout as wait } from 'node:timers/promises';")).toEqual([
      '1: node:timers/promises',
    ]);
    expect(fixedSleeps('await sleep(100);')).toEqual(['1: sleep awaited in a test']);
    expect(fixedSleeps('new Promise((resolve) => setTimeout(() => resolve(x), 5))')).toEqual([]);
  });

  it('none in test/ or src/ tests but the allowed ones, each with its reason', () => {
    const found = new Map<string, string[]>();
    for (const file of scanned()) {
      if (file === 'test/fixed-sleeps.test.ts') continue;
      const sleeps = fixedSleeps(readFileSync(join(ROOT, file), 'utf8'));
      if (sleeps.length > 0) found.set(file, sleeps);
    }
    const unexpected = [...found]
      .filter(([file, sleeps]) => sleeps.length !== ALLOWED.get(file)?.count)
      .map(([file, sleeps]) => `${file}: ${sleeps.join(', ')}`);
    expect(unexpected, 'a fixed sleep: wait for the event, poll with eventually, or drive the clock').toEqual(
      [],
    );
    const stale = [...ALLOWED.keys()].filter((file) => !found.has(file));
    expect(stale, 'allowed, and no longer there: take the entry off').toEqual([]);
    for (const { why } of ALLOWED.values()) expect(why.length).toBeGreaterThan(20);
  });
});
