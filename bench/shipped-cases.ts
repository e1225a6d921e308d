import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';

/** A case's inputs as the policy test runner builds them: what the vendor and the Admin API answer. */
export interface ShippedCase {
  signals: Record<string, { status: string; response?: unknown; reason?: string }>;
  user?: unknown;
  devices: unknown[];
  adminUnavailable?: { user?: string; devices?: string };
  request: Record<string, unknown>;
}

/**
 * The inputs the shipped policy's test suite (policies/login.test.yaml) builds, each case's, with
 * `counterNames` the policy's velocity counters; from the tree at `root` (ending in `/`), whose
 * src/ is imported rather than this checkout's, so a bench can run a change against its base in
 * turns on the same machine. `T`: the input type of the caller's tree.
 */
export async function shippedInputs<T = ShippedCase>(
  root: string,
  counterNames: readonly string[],
): Promise<T[]> {
  const { buildInput } = await import(`${root}src/policy/policy-test-runner.ts`);
  const { policyTestFileSchema } = await import(`${root}src/policy/policy-test-schema.ts`);
  const suite = policyTestFileSchema.parse(
    parseYaml(await readFile(`${root}policies/login.test.yaml`, 'utf8')),
  );
  return suite.cases.map((c: { given: unknown }) =>
    buildInput(suite.defaults, c.given, suite.now, counterNames),
  );
}

/** The shipped policy (policies/login.yaml), compiled by the tree at `root`, and its suite's inputs. */
export async function loadShippedCases(root: string): Promise<{ policy: unknown; cases: ShippedCase[] }> {
  const { loadPolicy } = await import(`${root}src/policy/policy-loader.ts`);
  const policy = await loadPolicy(`${root}policies/login.yaml`);
  const counters = (policy.velocityCounters ?? []).map((c: { name: string }) => c.name);
  return { policy, cases: await shippedInputs(root, counters) };
}
