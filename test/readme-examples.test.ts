import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runCli } from '../src/cli/main.ts';
import { printDemo } from '../src/dev/demo-requests.ts';
import { policyRevision } from '../src/policy/policy-compiler.ts';
import { compilePolicyFile } from '../src/policy/policy-loader.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The README's own examples are what riskgate does today: the policy revision it quotes, the CLI
 * output it shows, the banner line of `npm start`, and the answer to its mallory command. A change
 * to the shipped policy or to an output format fails here until the README says the same.
 */

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The fenced block of `lang` that follows the first occurrence of `marker`. */
function blockAfter(marker: string, lang: string): string {
  const at = README.indexOf(marker);
  if (at < 0) throw new Error(`README has no "${marker}"`);
  const block = new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``).exec(README.slice(at))?.[1];
  if (block === undefined) throw new Error(`README has no ${lang} block after "${marker}"`);
  return block;
}

async function cli(args: string[]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const io = {
    out: (l: string) => lines.push(...l.split('\n')),
    err: (l: string) => lines.push(...l.split('\n')),
  };
  const code = await runCli(args, io);
  return { code, lines };
}

/** `shown` lines appear in `actual` in order; a `…` line in `shown` stands for any lines. */
function expectShownIn(shown: string[], actual: string[]): void {
  const normal = (l: string) => l.replace(/\(\d+ suite\(s\), \d+ ms\)/, '(N suite(s), N ms)');
  let at = 0;
  let skipping = false;
  for (const line of shown.map(normal)) {
    if (line.trim() === '…') {
      skipping = true;
      continue;
    }
    const found = actual.map(normal).indexOf(line, at);
    expect(found, `README line not in the output (in order): ${line}`).toBeGreaterThanOrEqual(at);
    if (!skipping) expect(found, `README skips lines before: ${line}`).toBe(at);
    at = found + 1;
    skipping = false;
  }
}

describe('README examples', () => {
  it('quotes the shipped policy revision everywhere it names one', async () => {
    const { policy } = await compilePolicyFile('policies/login.yaml');
    expect(policy).toBeDefined();
    const quoted = [
      ...README.matchAll(/"revision":"([0-9a-f]{16})"/g),
      ...README.matchAll(/login @ ([0-9a-f]{16})/g),
    ].map((m) => m[1]);
    expect(quoted.length).toBeGreaterThan(2);
    expect(new Set(quoted)).toEqual(new Set([policy!.revision]));
  });

  it('shows `riskgate policy check` and `policy test` output as the CLI prints it', async () => {
    const text = blockAfter('### Policies: check and test', 'text').trimEnd().split('\n');
    const testAt = text.indexOf('$ npx riskgate policy test');
    expect(text[0]).toBe('$ npx riskgate policy check');
    expect(testAt).toBeGreaterThan(0);
    const check = await cli(['policy', 'check']);
    expect(check.code).toBe(0);
    expectShownIn(text.slice(1, testAt), check.lines);
    const test = await cli(['policy', 'test']);
    expect(test.code).toBe(0);
    expectShownIn(text.slice(testAt + 1), test.lines);
  });

  it("shows `npm start`'s caller-key line as the banner prints it", async () => {
    const written: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    try {
      printDemo({
        riskgateUrl: 'http://localhost:8080',
        sandboxUrl: 'http://127.0.0.1:4010',
        apiKey: 'rg_dev_…',
        keyFile: '.riskgate/dev-api-key',
        userIds: {},
      });
    } finally {
      spy.mockRestore();
    }
    const banner = written.join('').split('\n');
    const shown = blockAfter('## Quick start', 'text').split('\n');
    for (const line of shown.slice(0, 2)) expect(banner).toContain(line);
  });

  describe('the mallory command of the quick start', () => {
    // The shipped policy with patient timeouts: a busy machine must not make the answer degraded.
    // Its revision is the copy's; the README's is checked against policies/ above.
    const served = patientShippedPolicy();
    let h: Harness;
    beforeAll(async () => {
      h = await startHarness({ policy: { yaml: served }, deadlineMs: PATIENT_DEADLINE_MS });
    });
    afterAll(() => h.stop());

    it('answers what the README shows: deny by rat-confirmed, the lock-out queued, not degraded', async () => {
      const command = blockAfter('this command works\nas written', 'sh');
      const body = JSON.parse(/-d '(\{.*\})'/.exec(command)![1]!) as Record<string, unknown>;
      const shownText = blockAfter(`-d '${JSON.stringify(body)}'`, 'json');
      const shown = {
        verdict: /"verdict":"(\w+)"/.exec(shownText)![1],
        reasons: [...shownText.matchAll(/\{"id":"([\w-]+)","description"/g)].map((m) => m[1]),
        policy: {
          ...JSON.parse(/"policy":(\{[^}]*\})/.exec(shownText)![1]!),
          revision: policyRevision(served),
        },
        actions: JSON.parse(/"actions":(\[.*?\])/.exec(shownText)![1]!),
        degraded: /"degraded":(true|false)/.exec(shownText)![1] === 'true',
        explanation: JSON.parse(/"explanation":(\{.*\}),\n/.exec(shownText)![1]!),
      };
      const { status, body: answer } = await h.decide(body);
      expect(status).toBe(200);
      expect({
        verdict: answer.verdict,
        reasons: (answer.reasons as { id: string }[]).map((r) => r.id),
        policy: answer.policy,
        actions: answer.actions,
        degraded: answer.degraded,
        explanation: answer.explanation,
      }).toEqual(shown);
    });
  });
});
