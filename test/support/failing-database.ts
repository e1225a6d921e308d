import {
  type DatabaseTarget,
  type FeatureMigrations,
  openDatabase,
  type RiskgateDatabase,
} from '../../src/database/database.ts';
import { ALL_MIGRATIONS } from '../../src/service/database-migrations.ts';

/**
 * A database that does not answer, for the tests of "unavailable, never empty": opened at `target`
 * (in memory by default) with `migrations` (every one riskgate runs by default), then closed, so
 * that every statement on it fails as one on a server that went away does.
 */
export async function failingDatabase(
  migrations: FeatureMigrations = ALL_MIGRATIONS,
  target: DatabaseTarget = { kind: 'memory' },
): Promise<RiskgateDatabase> {
  const database = await openDatabase(target, { migrations });
  await database.close();
  return database;
}
