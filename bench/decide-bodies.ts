/**
 * The /decide bodies the bench sends: the sandbox's six demo accounts, each body its own login (a
 * distinct interaction on browser accounts), with the IP and the free `context` varied.
 * Deterministic (seeded), so two runs send the same sequence.
 */
import { mulberry32 } from './seeded-random.ts';

interface DemoAccount {
  name: string;
  platform: 'browser' | 'mobile';
}

/** The sandbox's demo accounts; browser ones log in from `<name>-web`, mobile ones from `<name>-app`. */
export const DEMO_ACCOUNTS: readonly DemoAccount[] = [
  { name: 'alice', platform: 'browser' },
  { name: 'bob', platform: 'browser' },
  { name: 'mallory', platform: 'browser' },
  { name: 'dave', platform: 'browser' },
  { name: 'trudy', platform: 'mobile' },
  { name: 'carol', platform: 'mobile' },
];

const USER_AGENTS = [
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15',
  'Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0',
];
const CHANNELS = ['web', 'ios', 'android', 'partner-portal'];
const COUNTRIES = ['US', 'DE', 'FR', 'GB', 'BR', 'JP', 'IN'];

/**
 * The interaction of an account's `k`-th login in the bench. Browser accounts get a distinct one per
 * login (`<name>-bench-00042`: fixed width, so none is a prefix of another, and the sandbox holds a
 * copy of the seeded login under each, see bench-scenario.ts); mobile ones keep their seeded
 * `<name>-login-1` (no remote-access-tool lookup, and their signals read the seeded login).
 */
export function loginInteractionId(name: string, platform: 'browser' | 'mobile', k: number): string {
  return platform === 'browser' ? `${name}-bench-${String(k).padStart(5, '0')}` : seededInteractionId(name);
}

/** The interaction of an account's current login in the sandbox's default scenario. */
export function seededInteractionId(name: string): string {
  return `${name}-login-1`;
}

/** Distinct logins per account in `count` bodies (the bodies cycle through the accounts). */
export function loginsPerAccount(count: number): number {
  return Math.ceil(count / DEMO_ACCOUNTS.length);
}

/**
 * One /decide request body (src/decide/decide-request.ts); `userId` is the account's Admin user id,
 * `login` the account's login number (its interaction, `loginInteractionId`).
 */
export function buildDecideBody(
  account: DemoAccount,
  userId: string | undefined,
  random: () => number,
  login: number,
): Record<string, unknown> {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const unitId = account.platform === 'browser' ? `${account.name}-web` : `${account.name}-app`;
  const body: Record<string, unknown> = {
    accountId: account.name,
    ...(userId === undefined ? {} : { userId }),
    platform: account.platform,
    unitId,
    verificationStatus: 'unverified',
    interactionId: loginInteractionId(account.name, account.platform, login),
    baseline: { unitId: `${account.name}-app`, verificationStatus: 'verified' },
    // The password checked, as the demo requests say: mallory's deny still locks her out, so the
    // outbox carries the lock-outs it always did.
    firstFactor: 'passed',
    // Three addresses per account (home, office, phone), as real users have: random ones would make
    // every account look password-sprayed to the shipped policy's velocity counters.
    ip: `192.0.${DEMO_ACCOUNTS.indexOf(account) + 2}.${1 + (login % 3)}`,
    context: {
      channel: pick(CHANNELS),
      country: pick(COUNTRIES),
      attempt: 1 + Math.floor(random() * 3),
      passwordless: random() < 0.3,
    },
  };
  if (account.platform === 'browser') body.userAgent = pick(USER_AGENTS);
  return body;
}

/**
 * `count` serialised bodies, cycling through the demo accounts in order (so every account is
 * exercised evenly at every rate) with the varied fields drawn from a PRNG seeded with `seed`.
 * `userIds` maps account names to Admin user ids (the sandbox generates them); an account without
 * one is sent without `userId`, which skips the Admin reads and actions for it.
 */
export function buildDecideBodies(
  count: number,
  userIds: Readonly<Record<string, string>> = {},
  seed = 20240102,
): string[] {
  const random = mulberry32(seed);
  const bodies: string[] = [];
  for (let i = 0; i < count; i++) {
    const account = DEMO_ACCOUNTS[i % DEMO_ACCOUNTS.length]!;
    const login = Math.floor(i / DEMO_ACCOUNTS.length);
    bodies.push(JSON.stringify(buildDecideBody(account, userIds[account.name], random, login)));
  }
  return bodies;
}
