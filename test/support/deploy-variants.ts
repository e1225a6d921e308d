import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

/** One way of deploying deploy/: the kustomization directory and the load restrictor it needs. */
export interface DeployVariant {
  dir: string;
  restrictor: 'rootOnly' | 'none';
}

/**
 * deploy/ as shipped (the image's policy), and with the policy-configmap component turned on as
 * deploy/kustomization.yaml says (uncommenting `components:`), in a copy of deploy/ and policies/
 * under `scratch`. Throws if the kustomization no longer offers the component that way.
 */
export function deployVariants(scratch: string): Record<string, DeployVariant> {
  const root = join(scratch, 'with-configmap');
  cpSync(join(ROOT, 'deploy'), join(root, 'deploy'), { recursive: true });
  cpSync(join(ROOT, 'policies'), join(root, 'policies'), { recursive: true });
  const file = join(root, 'deploy', 'kustomization.yaml');
  const text = readFileSync(file, 'utf8');
  const enabled = text.replace(
    /^# components:\n# {3}- policy-configmap$/m,
    'components:\n  - policy-configmap',
  );
  if (enabled === text)
    throw new Error('deploy/kustomization.yaml no longer offers the policy-configmap component');
  writeFileSync(file, enabled);
  return {
    "the image's policy": { dir: join(ROOT, 'deploy'), restrictor: 'rootOnly' },
    'the policy ConfigMap': { dir: join(root, 'deploy'), restrictor: 'none' },
  };
}
