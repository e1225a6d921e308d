import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
} from 'kysely';
import { describe, expect, it } from 'vitest';
import { queryTemplate, queryTemplates } from './query-template.ts';

interface Tables {
  entry: { id: string; owner: string | null; status: string; updated_at: number };
}

/** kysely for compiling only, on either engine's compiler. */
function compiler(engine: 'sqlite' | 'postgres'): Kysely<Tables> {
  const sqlite = engine === 'sqlite';
  return new Kysely<Tables>({
    dialect: {
      createAdapter: () => (sqlite ? new SqliteAdapter() : new PostgresAdapter()),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => (sqlite ? new SqliteIntrospector(db) : new PostgresIntrospector(db)),
      createQueryCompiler: () => (sqlite ? new SqliteQueryCompiler() : new PostgresQueryCompiler()),
    },
  });
}

describe.each(['sqlite', 'postgres'] as const)('a query template on %s', (engine) => {
  const db = compiler(engine);
  const update = (ids: readonly string[], owner: string, nowMs: number) =>
    db
      .updateTable('entry')
      .set({ status: 'delivered', updated_at: nowMs })
      .where('id', 'in', ids)
      .where('owner', '=', owner)
      .where('status', '=', 'pending')
      .returning('id');

  it('gives the text and parameters kysely compiles for the same values, whatever the list length', () => {
    const template = queryTemplates<{ ids: readonly string[]; owner: string; nowMs: number }, { id: string }>(
      (h, count) => update(h.list('ids', count), h.value('owner'), h.value('nowMs')),
    );
    for (const ids of [['a'], ['b', 'c', 'd'], ['e']]) {
      const filled = template({ ids, owner: 'w1', nowMs: 1234 }, ids.length);
      const direct = update(ids, 'w1', 1234).compile();
      expect({ sql: filled.sql, parameters: filled.parameters }).toEqual({
        sql: direct.sql,
        parameters: direct.parameters,
      });
    }
  });

  it('fills a `sql` template’s repeated hole each time it appears, and keeps its constants', () => {
    const raw = (owner: unknown, nowMs: unknown) =>
      sql`UPDATE entry SET owner = ${owner} WHERE status = ${'pending'} AND updated_at <= ${nowMs} OR updated_at > ${nowMs}`;
    const template = queryTemplate<{ owner: string; nowMs: number }, unknown>((h) => {
      const q = raw(h.value('owner'), h.value('nowMs'));
      return { compile: () => q.compile(db) };
    });
    const direct = raw('w2', 99).compile(db);
    const filled = template({ owner: 'w2', nowMs: 99 });
    expect(filled.sql).toBe(direct.sql);
    expect(filled.parameters).toEqual(['w2', 'pending', 99, 99]);
    // Each call its own parameters: an earlier call's are left as they were.
    expect(template({ owner: 'w3', nowMs: 7 }).parameters).toEqual(['w3', 'pending', 7, 7]);
    expect(filled.parameters).toEqual(['w2', 'pending', 99, 99]);
  });
});
