import { parseArgs } from 'node:util';
import { z } from 'zod';
import { DEFAULT_WINDOW_MS, MAX_WINDOW_MS } from '../src/signals/rat-batcher.ts';

/** Which run the numbers default to: the published one, a short check (about 3.5 minutes), or the CI smoke. */
export type BenchMode = 'full' | 'quick' | 'smoke';

/** Every parameter of a bench run. Times in seconds unless the name says otherwise. */
export interface BenchOptions {
  mode: BenchMode;
  /** Open-model arrival rates, decisions per second. Default 250,500,1000,2000. */
  rates: number[];
  /** Measured seconds per rate. Default 20. */
  durationS: number;
  /** Unrecorded seconds at the same rate before each measured step. Default 5. */
  warmupS: number;
  /** Upstream latency profiles to run scenario 1 under. Default `zero,lognormal`. */
  profiles: ('zero' | 'lognormal')[];
  /** Lognormal profile median, milliseconds. Default 15. */
  latencyP50Ms: number;
  /** Lognormal profile 99th percentile, milliseconds. Default 60. */
  latencyP99Ms: number;
  /** Connections of the open-model generator's pool. Default 256. */
  connections: number;
  /** Per-request timeout of the generator, milliseconds; a timed-out request counts as an error. Default 5000. */
  timeoutMs: number;
  /** Requests in flight beyond which the generator drops (and counts) a send. Default 20000. */
  maxInFlight: number;
  /** Measured seconds of each autocannon run (decide and hello). Default 10. */
  cannonDurationS: number;
  /** autocannon connections (closed model). Default 32. */
  cannonConnections: number;
  /** Sustained memory run, seconds (0 skips it). Default 120. */
  memoryDurationS: number;
  /** Rate of the sustained memory run, decisions per second. Default 1000. */
  memoryRate: number;
  /** Sandbox access-token lifetime, seconds; 0 keeps the sandbox default (43200). Default 0. */
  tokenLifetimeS: number;
  /** Full repetitions; with more than one the report gives the median of each figure. Default 1. */
  repeat: number;
  /** Pin processes to cores with taskset when it exists. Default true. */
  pin: boolean;
  /** Policy file riskgate loads. Default `policies/login.yaml`. */
  policyPath: string;
  /** Where `<timestamp>.json` and `.md` are written. Default `bench/results`. */
  resultsDir: string;
  /** Distinct /decide bodies the generators cycle through. Default 1024. */
  bodyVariants: number;
  /** riskgate's `RISKGATE_RAT_BATCH_WINDOW_MS`. Default riskgate's own (`DEFAULT_WINDOW_MS`). */
  ratWindowMs: number;
  /**
   * riskgate's `RISKGATE_RAT_CACHE_MS`. Default 0: the bodies cycle through `bodyVariants` logins
   * within seconds, so the same interaction comes back inside the cache's lifetime, which real logins
   * never do; the cache would serve the lookups and hide the batching.
   */
  ratCacheMs: number;
  /** Seconds per step of the overload scenario (0 skips it). Default 20. */
  overloadStepS: number;
  /**
   * The smallest of three closed loops (this, 2x, 4x connections) whose best 2xx/s is the capacity
   * the overload steps are multiples of. Default 8.
   */
  overloadConnections: number;
  /** Extra environment for riskgate (`--riskgate-env KEY=VALUE,...`), e.g. admission limits. */
  riskgateEnv: Record<string, string>;
  /**
   * riskgate's CPU during the overload scenario, as a fraction of a core (cgroup quota; 0: uncapped).
   * Default 0.25: on 2 cores the generator and the emulator share the other core, and only a capped
   * riskgate can be driven to 5x its capacity without them becoming the bottleneck.
   */
  overloadCpu: number;
  /**
   * riskgate as the bench ran it before issue 32 (decision log off, one process) instead of as
   * shipped (decision log on to a file, the default process model, decision store on). Default false.
   */
  lean: boolean;
  /** Interleaved rounds of riskgate against the FLOOR and the peer (0 skips them). Default 5. */
  compareRounds: number;
  /** Measured seconds of each server's run in a round (closed and open loop each). Default 10. */
  compareDurationS: number;
  /** Unmeasured seconds before each of those runs. Default 2. */
  compareWarmupS: number;
  /** Open-loop rate of the rounds, decisions per second (issue 32 compares at 200/s). Default 200. */
  compareRate: number;
}

/** Options every mode shares (flags and env may still set them). */
type SharedOptionKey =
  | 'mode'
  | 'policyPath'
  | 'resultsDir'
  | 'pin'
  | 'ratWindowMs'
  | 'ratCacheMs'
  | 'riskgateEnv'
  | 'lean';

const PRESETS: Record<BenchMode, Omit<BenchOptions, SharedOptionKey>> = {
  full: {
    rates: [250, 500, 1000, 2000],
    durationS: 20,
    warmupS: 5,
    profiles: ['zero', 'lognormal'],
    latencyP50Ms: 15,
    latencyP99Ms: 60,
    connections: 256,
    timeoutMs: 5000,
    maxInFlight: 20_000,
    cannonDurationS: 10,
    cannonConnections: 32,
    memoryDurationS: 120,
    memoryRate: 1000,
    tokenLifetimeS: 0,
    repeat: 1,
    bodyVariants: 1024,
    overloadStepS: 20,
    overloadConnections: 8,
    overloadCpu: 0.25,
    compareRounds: 5,
    compareDurationS: 10,
    compareWarmupS: 2,
    compareRate: 200,
  },
  // About 3.5 minutes on 2 cores: two rates per profile, short steps, a short memory run, three reference rounds.
  quick: {
    rates: [250, 1000],
    durationS: 3,
    warmupS: 1,
    profiles: ['zero', 'lognormal'],
    latencyP50Ms: 15,
    latencyP99Ms: 60,
    connections: 256,
    timeoutMs: 2000,
    maxInFlight: 20_000,
    cannonDurationS: 2,
    cannonConnections: 32,
    memoryDurationS: 6,
    memoryRate: 500,
    tokenLifetimeS: 0,
    repeat: 1,
    bodyVariants: 256,
    overloadStepS: 5,
    overloadConnections: 8,
    overloadCpu: 0.25,
    // Issue 32: 2-second closed loops ranged 1.8x to 3.3x at load 3-9. Three interleaved rounds of
    // 5 s per server and loop, reported as the median with its spread.
    compareRounds: 3,
    compareDurationS: 5,
    compareWarmupS: 1,
    compareRate: 200,
  },
  // Only proves the harness works end to end (CI): every scenario runs, for a moment.
  smoke: {
    rates: [100],
    durationS: 2,
    warmupS: 0.5,
    profiles: ['zero'],
    latencyP50Ms: 15,
    latencyP99Ms: 60,
    connections: 32,
    timeoutMs: 5000,
    maxInFlight: 20_000,
    cannonDurationS: 1.5,
    cannonConnections: 8,
    memoryDurationS: 2,
    memoryRate: 100,
    tokenLifetimeS: 0,
    repeat: 1,
    bodyVariants: 64,
    overloadStepS: 1,
    overloadConnections: 16,
    overloadCpu: 0.25,
    compareRounds: 1,
    compareDurationS: 1,
    compareWarmupS: 0,
    compareRate: 100,
  },
};

const positive = z.coerce.number().positive();
const nonNegative = z.coerce.number().nonnegative();
const positiveInt = z.coerce.number().int().positive();
const numberList = z
  .string()
  .transform((s) => s.split(',').map((x) => Number(x.trim())))
  .pipe(z.array(z.number().positive()).min(1));
const profileList = z
  .string()
  .transform((s) => s.split(',').map((x) => x.trim()))
  .pipe(z.array(z.enum(['zero', 'lognormal'])).min(1));

/** Flag name → (env name, parser, option key). Every flag also reads `BENCH_<NAME>` from the env. */
const FIELDS = {
  rates: { parse: numberList, key: 'rates' },
  duration: { parse: positive, key: 'durationS' },
  warmup: { parse: nonNegative, key: 'warmupS' },
  profiles: { parse: profileList, key: 'profiles' },
  'latency-p50-ms': { parse: positive, key: 'latencyP50Ms' },
  'latency-p99-ms': { parse: positive, key: 'latencyP99Ms' },
  connections: { parse: positiveInt, key: 'connections' },
  'timeout-ms': { parse: positiveInt, key: 'timeoutMs' },
  'max-in-flight': { parse: positiveInt, key: 'maxInFlight' },
  'cannon-duration': { parse: positive, key: 'cannonDurationS' },
  'cannon-connections': { parse: positiveInt, key: 'cannonConnections' },
  'memory-duration': { parse: nonNegative, key: 'memoryDurationS' },
  'memory-rate': { parse: positive, key: 'memoryRate' },
  'token-lifetime': { parse: z.coerce.number().int().nonnegative(), key: 'tokenLifetimeS' },
  repeat: { parse: positiveInt, key: 'repeat' },
  'policy-path': { parse: z.string().min(1), key: 'policyPath' },
  'results-dir': { parse: z.string().min(1), key: 'resultsDir' },
  'body-variants': { parse: positiveInt, key: 'bodyVariants' },
  'rat-window-ms': { parse: z.coerce.number().min(0).max(MAX_WINDOW_MS), key: 'ratWindowMs' },
  'rat-cache-ms': { parse: z.coerce.number().int().nonnegative(), key: 'ratCacheMs' },
  'overload-step': { parse: nonNegative, key: 'overloadStepS' },
  'overload-connections': { parse: positiveInt, key: 'overloadConnections' },
  'overload-cpu': { parse: z.coerce.number().min(0).max(64), key: 'overloadCpu' },
  'compare-rounds': { parse: z.coerce.number().int().nonnegative(), key: 'compareRounds' },
  'compare-duration': { parse: positive, key: 'compareDurationS' },
  'compare-warmup': { parse: nonNegative, key: 'compareWarmupS' },
  'compare-rate': { parse: positive, key: 'compareRate' },
  'riskgate-env': {
    parse: z
      .string()
      .transform((s) => s.split(',').filter((kv) => kv.trim() !== ''))
      .pipe(z.array(z.string().regex(/^[A-Z][A-Z0-9_]*=.*$/, 'each entry is KEY=VALUE')))
      .transform((kvs) =>
        Object.fromEntries(kvs.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
      ),
    key: 'riskgateEnv',
  },
} as const satisfies Record<string, { parse: z.ZodType; key: keyof BenchOptions }>;

/** Flag help, printed by `--help`. */
export const USAGE = `npm run bench -- [--quick | --smoke] [flags]

Modes: (default) full run; --quick about 3.5 minutes; --smoke about a minute (CI).
Flags (each also read from BENCH_<FLAG> in the env, e.g. BENCH_RATES=500,1000):
  --rates 250,500,1000,2000   open-model arrival rates, decisions/s
  --duration 20               measured seconds per rate
  --warmup 5                  unrecorded seconds before each rate
  --profiles zero,lognormal   upstream latency profiles for scenario 1
  --latency-p50-ms 15         lognormal profile median
  --latency-p99-ms 60         lognormal profile p99
  --connections 256           generator pool connections
  --timeout-ms 5000           generator per-request timeout
  --max-in-flight 20000       generator drops (and counts) sends beyond this
  --cannon-duration 10        autocannon seconds per target
  --cannon-connections 32     autocannon connections
  --memory-duration 120       sustained memory run seconds (0 skips)
  --memory-rate 1000          sustained memory run rate
  --token-lifetime 0          sandbox token lifetime seconds (0: sandbox default)
  --repeat 1                  full repetitions; >1 reports the median of each figure
  --policy-path policies/login.yaml
  --results-dir bench/results
  --body-variants 1024        distinct /decide bodies cycled through
  --rat-window-ms 1           riskgate's remote-access-tool batch window (RISKGATE_RAT_BATCH_WINDOW_MS)
  --rat-cache-ms 0            riskgate's remote-access-tool answer cache (0: off, as for distinct logins)
  --overload-step 20          seconds per step of the overload scenario (0 skips it)
  --overload-connections 8    capacity = the most 2xx/s of closed loops of this, 2x and 4x as many
                              connections (few are latency-bound; many retry into the sheds)
  --overload-cpu 0.25         riskgate's CPU during the overload scenario, fraction of a core (0: uncapped)
  --compare-rounds 5          interleaved rounds against the FLOOR and the peer (0 skips them)
  --compare-duration 10       measured seconds per server, loop and round
  --compare-warmup 2          unmeasured seconds before each
  --compare-rate 200          open-loop rate of the rounds
  --lean                      riskgate as before issue 32: decision log off, one process
                              (default: as shipped, decision log to a file, default process model,
                              decision store on)
  --riskgate-env K=V,K=V      extra riskgate environment (e.g. RISKGATE_MAX_IN_FLIGHT=500)
  --no-pin                    do not pin processes with taskset
`;

/**
 * Reads options from argv and env (`BENCH_<FLAG>`); flags win over env, env over the mode's preset.
 * Throws a message naming the flag when a value is malformed.
 */
export function parseBenchOptions(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
): BenchOptions | 'help' {
  const flagSpec: Record<string, { type: 'string' | 'boolean' }> = {
    quick: { type: 'boolean' },
    smoke: { type: 'boolean' },
    'no-pin': { type: 'boolean' },
    lean: { type: 'boolean' },
    help: { type: 'boolean' },
  };
  for (const name of Object.keys(FIELDS)) flagSpec[name] = { type: 'string' };
  const { values } = parseArgs({ args: argv, options: flagSpec, strict: true, allowPositionals: false });
  if (values.help) return 'help';
  const mode: BenchMode = values.smoke ? 'smoke' : values.quick || env.BENCH_QUICK === '1' ? 'quick' : 'full';
  const options: BenchOptions = {
    mode,
    ...PRESETS[mode],
    pin: !(values['no-pin'] || env.BENCH_NO_PIN === '1'),
    policyPath: 'policies/login.yaml',
    resultsDir: 'bench/results',
    ratWindowMs: DEFAULT_WINDOW_MS,
    ratCacheMs: 0,
    riskgateEnv: {},
    lean: values.lean === true || env.BENCH_LEAN === '1',
  };
  const target = options as unknown as Record<string, unknown>;
  for (const [flag, field] of Object.entries(FIELDS)) {
    const envName = `BENCH_${flag.toUpperCase().replaceAll('-', '_')}`;
    const raw = values[flag] ?? env[envName];
    if (raw === undefined || typeof raw === 'boolean') continue;
    const parsed = field.parse.safeParse(raw);
    if (!parsed.success) {
      throw new Error(`--${flag} (${envName}): ${parsed.error.issues[0]?.message ?? 'invalid'}: ${raw}`);
    }
    target[field.key] = parsed.data;
  }
  return options;
}
