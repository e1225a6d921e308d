import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 30_000,
    // Two noisy cores: more workers only adds contention.
    maxWorkers: 2,
    reporters: ['default', 'json'],
    outputFile: { json: '.vitest-report.json' },
  },
});
