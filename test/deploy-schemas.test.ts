import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { deployVariants } from './support/deploy-variants.ts';
import { type K8sObject, renderKustomization } from './support/kustomize-render.ts';

/**
 * deploy/ as rendered, validated offline against the Kubernetes API's OpenAPI schemas (the
 * kubernetes-models package: types, required fields, enums and formats, as the API server checks
 * them on `kubectl apply`; like the server without `--validate=strict`, it lets an unknown field
 * pass, which test/deploy-manifests.test.ts covers for the fields that matter by reading them).
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));

// biome-ignore lint/suspicious/noExplicitAny: each model's constructor takes its own object type; YAML gives any.
type Model = new (data: any) => { validate(): void };

const MODELS: Record<string, Model> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};

function schemaErrors(doc: K8sObject): string | undefined {
  const Model = MODELS[`${doc.apiVersion}/${doc.kind}`];
  if (Model === undefined) return `no schema here for ${doc.apiVersion} ${doc.kind}`;
  try {
    new Model(doc).validate();
    return undefined;
  } catch (error) {
    return String((error as Error).message);
  }
}

describe('deploy/ against the Kubernetes API schemas', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'riskgate-deploy-schemas-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it.each(Object.entries(deployVariants(scratch)))('every object of deploy/ with %s is valid', (_, v) => {
    const docs = renderKustomization(v.dir, { loadRestrictor: v.restrictor });
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) expect(schemaErrors(doc), `${doc.kind} ${doc.metadata?.name}`).toBeUndefined();
  });

  it.each(['riskgate-secrets.example.yaml', 'database-secret.example.yaml'])(
    'the example Secret %s is valid',
    (file) => {
      const secret = parse(readFileSync(join(ROOT, 'deploy', file), 'utf8'));
      expect(secret.kind).toBe('Secret');
      expect(schemaErrors(secret)).toBeUndefined();
    },
  );

  it('a mistyped manifest is refused (the validator validates)', () => {
    const docs = renderKustomization(join(ROOT, 'deploy'));
    const deployment = structuredClone(docs.find((d) => d.kind === 'Deployment')!);
    deployment.spec.template.spec.securityContext.seccompProfile = { type: 'RuntimeDefualt' };
    deployment.spec.template.spec.topologySpreadConstraints[0].maxSkew = '1';
    const errors = schemaErrors(deployment);
    expect(errors).toMatch(/seccompProfile\/type must be equal to one of the allowed values/);
    expect(errors).toMatch(/maxSkew must be integer/);
  });
});
