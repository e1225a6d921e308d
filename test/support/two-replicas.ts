import { type Harness, type HarnessOptions, OPS_KEY, startHarness } from '../decide-harness.ts';
import { type RunningPostgres, startPostgres } from './postgres-server.ts';

/** Two riskgates sharing one PostgreSQL (and one sandbox), as two replicas of a deployment. */
export interface TwoReplicas {
  pg: RunningPostgres;
  one: Harness;
  two: Harness;
  /** Stops both, then PostgreSQL. */
  stop(): Promise<void>;
}

/**
 * Starts a PostgreSQL and two riskgates on it, serving the policy `yaml`, with the operator key
 * {@link OPS_KEY} as the admin `olga`. The velocity counters stay in each process (memory), so
 * what the replicas share is the database's state alone. `two` takes `second`'s `riskgate` options
 * besides (a shorter staleness bound, say); `second.env` goes to both (other operators' keys).
 */
export async function startTwoReplicasOnPostgres(
  yaml: string,
  second: Pick<HarnessOptions, 'riskgate' | 'env'> = {},
): Promise<TwoReplicas> {
  const pg = await startPostgres();
  const env = {
    RISKGATE_DATABASE: pg.url,
    RISKGATE_FEATURE_STORE: 'memory',
    RISKGATE_OPS_KEYS: `olga:admin:${OPS_KEY}`,
    ...second.env,
  };
  let one: Harness | undefined;
  try {
    one = await startHarness({ policy: { yaml }, env });
    const two = await startHarness({ policy: { yaml }, sharedSandbox: one.sandbox, ...second, env });
    return {
      pg,
      one,
      two,
      async stop() {
        await two.stop();
        await one?.stop();
        await pg.stop();
      },
    };
  } catch (error) {
    await one?.stop();
    await pg.stop();
    throw error;
  }
}
