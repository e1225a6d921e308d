import { defineConfig } from 'vitest/config';

/**
 * Three projects, one run (`npm test` runs all three into one JSON report; `npm run test:unit`,
 * `test:e2e`, `test:slow` run one). Where a file goes:
 * - `unit`: in process (no sandbox, riskgate or Redis of its own, no dist build): every
 *   `src/**\/*.test.ts`, beside the code it tests, and the test/ files in `UNIT` (the policy
 *   language, docs and config checks, the bench's pure helpers, the source-size check). Budget:
 *   the project runs in under 60 s (about 12 s here, 15 s with both cores busy).
 * - `slow`: the files in `SLOW`: crash matrices, the bench smoke and orphan runs, the stress test,
 *   the memory flood, and every file that compiles dist/ (`buildDist`) to run riskgate's
 *   production command.
 * - `e2e`: every other test/ file: real HTTP to the sandbox or riskgate on port 0, real processes.
 * test/test-projects.test.ts keeps the lists honest.
 */

export const UNIT = [
  'test/bench-median.test.ts',
  'test/bench-server-timing.test.ts',
  'test/config-documentation.test.ts',
  'test/docs-citations.test.ts',
  'test/eventually.test.ts',
  'test/function-size.test.ts',
  'test/outbox-deferred.test.ts',
  'test/patient-policy.test.ts',
  'test/policy-degraded.test.ts',
  'test/policy-evaluation.test.ts',
  'test/policy-loading-errors.test.ts',
  'test/policy-regex-safety.test.ts',
  'test/policy-reload.test.ts',
  'test/policy-shipped-suite.test.ts',
  'test/runtime.test.ts',
  'test/test-projects.test.ts',
];

export const SLOW = [
  'test/console-browser.test.ts',
  'test/console-every-page.test.ts',
  'test/console-loop-browser.test.ts',
  'test/console-policies-browser.test.ts',
  'test/console-policy-flow-browser.test.ts',
  'test/console-shipped-lists.test.ts',
  'test/console-snoozes-browser.test.ts',
  'test/bench-orphans.test.ts',
  'test/bench-smoke.test.ts',
  'test/cluster-start.test.ts',
  'test/feature-store-memory.test.ts',
  'test/lockout-transaction-crash.test.ts',
  'test/lockouts-process.test.ts',
  'test/metrics-prometheus.test.ts',
  'test/outbox-crash.test.ts',
  'test/readiness-warm-inputs.test.ts',
  'test/service-process.test.ts',
  'test/service-shutdown.test.ts',
  'test/startup-checks.test.ts',
  'test/state-faults.test.ts',
  'test/stress-verdicts.test.ts',
  'test/tracing-console-process.test.ts',
  'test/velocity-shared-store.test.ts',
  'test/webhooks-receiver-outage.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Names the run; at its end fails it if a process it started is alive or it wrote .riskgate/.
    // Only the root's global setup runs, once for the whole run, whatever projects run.
    globalSetup: ['test/global-setup.ts'],
    // Two noisy cores: more workers only adds contention.
    maxWorkers: 2,
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-report.json' },
    projects: [
      { extends: true, test: { name: 'unit', include: ['src/**/*.test.ts', ...UNIT] } },
      { extends: true, test: { name: 'e2e', include: ['test/**/*.test.ts'], exclude: [...UNIT, ...SLOW] } },
      { extends: true, test: { name: 'slow', include: SLOW } },
    ],
  },
});
