import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Names the run; at its end fails it if a process it started is alive or it wrote .riskgate/.
    globalSetup: ['test/global-setup.ts'],
    // Two noisy cores: more workers only adds contention.
    maxWorkers: 2,
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-report.json' },
  },
});
