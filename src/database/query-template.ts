import type { CompiledQuery } from 'kysely';

/**
 * A kysely query built and compiled once, its values left as holes that each call fills (issue
 * 32: building kysely's operation tree and compiling it on every call of the outbox's and the
 * lock-outs' hot statements cost the main thread ~4-5 % of its samples under a deny flood). The
 * builder still names the tables and columns (declared once, beside the schema), and the SQL text
 * is the one kysely compiles for that query, so the SQLite thread's prepared statement for it is
 * the same one.
 *
 * A hole is a value the builder passes along as a parameter (`$n` or `?`); only a value may be a
 * hole, never something that changes the text (an `IN` list's length: one template per length,
 * `queryTemplates`).
 */

const HOLE = Symbol('riskgate.queryHole');

interface Hole {
  readonly [HOLE]: string;
  /** The item of an array argument (`list`), or -1 for the argument itself. */
  readonly index: number;
}

function isHole(value: unknown): value is Hole {
  return typeof value === 'object' && value !== null && HOLE in value;
}

/** The holes a template's builder puts where its values go. */
export interface TemplateHoles<A> {
  /** The argument `name`, as one parameter. */
  value<K extends keyof A & string>(name: K): A[K];
  /** The `count` first items of the array argument `name`, one parameter each (an `IN` list). */
  list<K extends keyof A & string>(name: K, count: number): A[K];
}

const holes: TemplateHoles<Record<string, unknown>> = {
  value: (name) => ({ [HOLE]: name, index: -1 }) satisfies Hole,
  list: (name, count) =>
    Array.from({ length: count }, (_, index) => ({ [HOLE]: name, index }) satisfies Hole),
};

/** Anything kysely compiles: a query builder, or a `sql` template with `.compile(db)` bound. */
export interface Compilable<R> {
  compile(): CompiledQuery<R>;
}

/** `build`'s query compiled once; each call gives it with its holes filled from `args`. */
export function queryTemplate<A, R>(
  build: (holes: TemplateHoles<A>) => Compilable<R>,
): (args: A) => CompiledQuery<R> {
  const compiled = build(holes as TemplateHoles<A>).compile();
  const slots = compiled.parameters.map((p) => (isHole(p) ? p : undefined));
  if (!slots.some((s) => s !== undefined)) return () => compiled;
  return (args) => {
    const values = args as Record<string, unknown>;
    const parameters = compiled.parameters.map((p, i) => {
      const hole = slots[i];
      if (hole === undefined) return p;
      const value = values[hole[HOLE]];
      return hole.index < 0 ? value : (value as readonly unknown[])[hole.index];
    });
    return { ...compiled, parameters };
  };
}

/**
 * `queryTemplate` for a query whose text depends on a count (an `IN` list, rows of an insert):
 * one template per count, made at its first use, the first `cached` counts kept (beyond them a
 * template is compiled for the call, as the builder would have).
 */
export function queryTemplates<A, R>(
  build: (holes: TemplateHoles<A>, count: number) => Compilable<R>,
  cached = 64,
): (args: A, count: number) => CompiledQuery<R> {
  const byCount = new Map<number, (args: A) => CompiledQuery<R>>();
  return (args, count) => {
    let template = byCount.get(count);
    if (template === undefined) {
      template = queryTemplate<A, R>((h) => build(h, count));
      if (count <= cached) byCount.set(count, template);
    }
    return template(args);
  };
}
