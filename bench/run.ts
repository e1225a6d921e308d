/**
 * `npm run bench [-- --quick | --smoke] [flags]`: starts the sandbox, riskgate and a load generator
 * as separate processes, runs every scenario, writes `bench/results/<timestamp>.json` (and `.md`),
 * and prints the markdown report. See bench/README.md.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { medianOf } from './bench-median.ts';
import { parseBenchOptions, USAGE } from './bench-options.ts';
import { renderReport } from './bench-report.ts';
import { type BenchResult, runBench } from './bench-run.ts';
import { comparisonWrong } from './reference-comparison.ts';

/**
 * Every wrong verdict of a run (the bench fails on one): the overload probe's and steps' wrong
 * allows and denies, and the reference rounds' (a peer that disagrees with riskgate included).
 */
function wrongVerdicts(result: BenchResult): string[] {
  const wrong: string[] = [];
  const overload = result.scenarios.overload;
  const checked = [
    { name: 'overload capacity probe', v: overload?.capacity.verdictCheck },
    ...(overload?.steps ?? []).map((step) => ({
      name: `overload ${step.multiplier}x`,
      v: step.verdictCheck,
    })),
  ];
  for (const { name, v } of checked) {
    if (v !== undefined && v.wrongAllows + v.wrongDenies + v.otherWrong > 0) {
      wrong.push(
        `${name}: ${v.wrongAllows} wrong allows, ${v.wrongDenies} wrong denies, ${v.otherWrong} other wrong (${JSON.stringify(v.wrongByAccount)})`,
      );
    }
  }
  if (result.scenarios.references !== undefined) wrong.push(...comparisonWrong(result.scenarios.references));
  return wrong;
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  let options: ReturnType<typeof parseBenchOptions>;
  try {
    options = parseBenchOptions(argv);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (options === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  const command = `npm run bench${argv.length > 0 ? ` -- ${argv.join(' ')}` : ''}`;
  const runs: BenchResult[] = [];
  for (let i = 0; i < options.repeat; i++) {
    if (options.repeat > 1) process.stderr.write(`[bench] run ${i + 1} of ${options.repeat}\n`);
    runs.push(await runBench(options, command));
  }
  const result = runs.length === 1 ? runs[0]! : medianOf(runs);
  const title = runs.length === 1 ? 'riskgate bench' : `riskgate bench, median of ${runs.length} runs`;
  const report = renderReport(result, title);

  const dir = resolve(options.resultsDir);
  mkdirSync(dir, { recursive: true });
  const stamp = result.startedAt.replace(/[:.]/g, '-');
  const jsonPath = join(dir, `${stamp}.json`);
  writeFileSync(jsonPath, `${JSON.stringify(runs.length === 1 ? result : { ...result, runs }, null, 2)}\n`);
  writeFileSync(join(dir, `${stamp}.md`), `${report}\n`);
  process.stdout.write(`${report}\nResults: ${jsonPath}\n`);
  const wrong = runs.flatMap(wrongVerdicts);
  if (wrong.length > 0) {
    process.stderr.write(`bench failed: wrong verdicts\n${wrong.map((w) => `- ${w}`).join('\n')}\n`);
    process.exitCode = 1;
  }
}

main().catch((error: unknown) => {
  process.stderr.write(
    `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exitCode = 1;
});
