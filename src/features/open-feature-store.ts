import type { RiskgateConfig } from '../config/riskgate-config.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { FeatureStore } from './feature-store.ts';
import { MemoryFeatureStore } from './memory-feature-store.ts';

/** The feature store as configured (RISKGATE_FEATURE_STORE). */
export async function openFeatureStore(config: Pick<RiskgateConfig, 'featureStore'>): Promise<FeatureStore> {
  const f = config.featureStore;
  if (f.kind === 'memory') return new MemoryFeatureStore();
  // Loaded only when configured: the embedded default never loads a Redis client.
  const { RedisFeatureStore } = await import('./redis-feature-store.ts');
  try {
    return await RedisFeatureStore.connect({ url: f.url });
  } catch (error) {
    // The URL may carry a password: the message names the failure, never the URL.
    throw new RiskgateError(ErrorCode.INVALID_CONFIG, `RISKGATE_FEATURE_STORE: ${(error as Error).message}`);
  }
}
