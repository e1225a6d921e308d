import { describe, expect, it } from 'vitest';

describe('runtime', () => {
  // npm scripts put node_modules/.bin first on PATH, where the `node` devDependency (24.x) lives,
  // so the machine's own Node 20 never runs riskgate, its tests or its bench.
  it('runs the tests on Node 24 LTS, the node devDependency, whatever the machine has installed', () => {
    expect(process.versions.node).toMatch(/^24\./);
  });
});
