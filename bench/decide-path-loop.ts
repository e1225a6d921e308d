import { median } from './bench-median.ts';
import { loadShippedCases, type ShippedCase } from './shipped-cases.ts';

/**
 * The CPU of /decide's own path per decision, in process, without HTTP or the vendor: the input
 * table's fetches (`runDecision`: which rows, `gather`, each row's landing), the evaluation and the
 * answer (`buildDecideResponse`: each input's report, `degraded`), over the shipped policy's test
 * inputs with clients that answer at once. 5 runs of 20,000 decisions after a warm-up of as many;
 * prints CPU microseconds per decision (user + system) of each run and their median.
 *
 * `--root <dir>` runs another checkout's src/ and policies/ (read only), so a change is measured
 * against its base in turns on the same machine:
 *
 *   npx tsx bench/decide-path-loop.ts                    # this checkout
 *   npx tsx bench/decide-path-loop.ts --root /work/main  # another one
 */

const DECISIONS = 20_000;
const RUNS = 5;
const at = process.argv.indexOf('--root');
const root =
  at > 0 ? `${process.argv[at + 1]!.replace(/\/$/, '')}/` : new URL('..', import.meta.url).pathname;

const { runDecision } = await import(`${root}src/decide/run-decision.ts`);
const { buildDecideResponse } = await import(`${root}src/decide/decide-response.ts`);
const { ErrorCode, UpstreamError } = await import(`${root}src/errors/riskgate-error.ts`);

const { policy, cases } = await loadShippedCases(root);

const failed = () => ({
  ok: false,
  error: new UpstreamError(ErrorCode.UPSTREAM_SERVER_ERROR, 'bench: unavailable', { upstream: 'signals' }),
  durationMs: 0,
});

/** Clients that answer at once with what the case's input says (an unavailable input fails). */
function depsFor(given: ShippedCase) {
  return {
    policies: { current: () => policy },
    deadlineMs: 300,
    subjectBinding: 'off',
    signals: (name: string) => {
      const o = given.signals[name];
      return Promise.resolve(o?.status === 'ok' ? { ok: true, value: o.response, durationMs: 0 } : failed());
    },
    admin: {
      getUserCached: () =>
        Promise.resolve(
          given.user === undefined || given.adminUnavailable?.user !== undefined
            ? failed()
            : { ok: true, value: given.user, durationMs: 0 },
        ),
      getUserDevicesCached: () =>
        Promise.resolve(
          given.adminUnavailable?.devices !== undefined
            ? failed()
            : { ok: true, value: { devices: given.devices }, durationMs: 0 },
        ),
      updateUser: () => Promise.reject(new Error('no action in this bench')),
      deleteDevice: () => Promise.reject(new Error('no action in this bench')),
      createOneTimeCode: () => Promise.resolve(failed()),
    },
  };
}

const work = cases.map((given) => ({
  deps: depsFor(given),
  request: {
    ...given.request,
    context: given.request.context ?? {},
    baseline: { unitId: 'bench-phone', verificationStatus: 'verified' },
  },
}));

let sink = 0;
async function decide(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const w = work[i % work.length]!;
    const run = await runDecision(w.deps, w.request);
    sink += buildDecideResponse(run, []).score;
  }
}

await decide(DECISIONS);
const usPerDecision: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const before = process.cpuUsage();
  await decide(DECISIONS);
  const used = process.cpuUsage(before);
  usPerDecision.push(Math.round(((used.user + used.system) / DECISIONS) * 100) / 100);
}
usPerDecision.sort((a, b) => a - b);
console.log(
  JSON.stringify({
    root,
    cases: work.length,
    usPerDecision,
    medianUs: median(usPerDecision),
    checksum: sink,
  }),
);
