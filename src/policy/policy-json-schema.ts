import { z } from 'zod';
import { policyFileSchema } from './policy-schema.ts';
import { policyTestFileSchema } from './policy-test-schema.ts';

/**
 * JSON Schemas of the policy and test-suite files, generated from the zod schemas so that editors
 * (yaml-language-server) autocomplete and flag the same things the loader does. Committed under
 * `policies/`; a test fails when the committed copies drift from these.
 */

export const POLICY_SCHEMA_FILE = 'policy.schema.json';
export const POLICY_TEST_SCHEMA_FILE = 'policy-test.schema.json';

function generate(schema: z.ZodType, title: string, id: string): string {
  const json = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
    reused: 'ref',
  });
  return `${JSON.stringify({ $id: id, title, ...json }, null, 2)}\n`;
}

/** The two schema files, by file name, as they should be committed. */
export function policyJsonSchemas(): Record<string, string> {
  return {
    [POLICY_SCHEMA_FILE]: generate(policyFileSchema, 'riskgate policy (riskgate/v1)', POLICY_SCHEMA_FILE),
    [POLICY_TEST_SCHEMA_FILE]: generate(
      policyTestFileSchema,
      'riskgate policy test suite (riskgate/v1)',
      POLICY_TEST_SCHEMA_FILE,
    ),
  };
}
