import { describe, expect, it } from 'vitest';
import type { PolicyVersion } from '../policy-versions/policy-version-store.ts';
import { EvidenceView, VersionState } from './policy-version-views.tsx';

const html = (node: unknown) => String(node);

const version = (id: string, state: PolicyVersion['state']): PolicyVersion => ({
  id,
  name: 'login',
  yaml: '',
  revision: '0123456789abcdef',
  author: 'alice',
  createdMs: 0,
  message: 'm',
  parentId: null,
  restoresId: null,
  state,
  stateChangedMs: 0,
  stateChangedBy: 'alice',
});

describe('a policy version’s state on the Policies pages', () => {
  it('tags the version staged to a share of accounts, and the one scheduled, with when and by whom', () => {
    const v = version('v2', 'approved');
    const served = {
      generation: 3,
      active: version('v1', 'active'),
      staged: { version: v, stage: 'percent' as const, basisPoints: 1000 },
      scheduled: { versionId: 'v2', atMs: Date.UTC(2026, 10, 29, 6), by: 'bob' },
    };
    const text = html(VersionState({ v, served }));
    expect(text).toContain('staged: 10 % of accounts');
    expect(text).toContain('scheduled for <time datetime="2026-11-29T06:00:00.000Z"');
    expect(text).toContain('by bob');
    expect(html(VersionState({ v: version('v1', 'active'), served }))).not.toContain('staged');
    const shadow = { ...served, staged: { ...served.staged, stage: 'shadow' as const, basisPoints: 0 } };
    expect(html(VersionState({ v, served: shadow }))).toContain('staged: shadow');
  });
});

describe('the evidence of a policy version', () => {
  it('shows whatever it carries, key by key, escaped, a long list cut with a count', () => {
    const text = html(
      EvidenceView({
        evidence: {
          check: { ok: true, issues: [] },
          suites: { passed: 12, failed: 1, failures: ['<script>alert(1)</script>'] },
          backtest: { decisions: 1000, changed: 42, samples: Array.from({ length: 25 }, (_, i) => `d${i}`) },
        },
      }),
    );
    expect(text).toMatch(/<dt>check<\/dt><dd><dl class="facts"><dt>ok<\/dt><dd><span class="mono">true/);
    expect(text).toMatch(/<dt>changed<\/dt><dd><span class="mono">42</);
    expect(text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(text).not.toContain('<script>');
    expect(text).toContain('d19');
    expect(text).not.toContain('d20');
    expect(text).toContain('and 5 more');
  });

  it('says so when there is none', () => {
    expect(html(EvidenceView({ evidence: undefined }))).toContain('No evidence is attached to this version.');
  });
});
