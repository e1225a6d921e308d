import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';

/**
 * A small kustomize, enough for deploy/: `resources` (files and directories), `components`,
 * `configMapGenerator` (files and literals, with kustomize's content-hash name suffix), `images`,
 * JSON 6902 `patches` on a target, and the ConfigMap name references kustomize rewrites (volumes,
 * envFrom, env). Anything else in a kustomization is refused, so a feature this does not render can
 * never pass a test by being ignored. kubectl's kustomize is not a dependency of the tests (CI
 * machines need not have it); where it exists, test/deploy-manifests.test.ts renders with it too
 * and compares.
 */

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects of any kind; the tests check their shape.
export type K8sObject = Record<string, any>;

export interface RenderOptions {
  /**
   * `rootOnly` (kustomize's default): a generator may read files only inside its kustomization's
   * directory; `none`: anywhere (`--load-restrictor=LoadRestrictionsNone`). Default `rootOnly`.
   */
  loadRestrictor?: 'rootOnly' | 'none';
}

const KNOWN_FIELDS = new Set([
  'apiVersion',
  'kind',
  'resources',
  'components',
  'configMapGenerator',
  'images',
  'patches',
]);

/** Renders the kustomization in `dir` as `kustomize build dir` would (up to resource order). */
export function renderKustomization(dir: string, options: RenderOptions = {}): K8sObject[] {
  return accumulate(resolve(dir), options.loadRestrictor ?? 'rootOnly', 'Kustomization');
}

function readKustomization(dir: string): K8sObject {
  const file = join(dir, 'kustomization.yaml');
  const k = parse(readFileSync(file, 'utf8')) as K8sObject;
  for (const key of Object.keys(k)) {
    if (!KNOWN_FIELDS.has(key)) throw new Error(`${file}: ${key} is not rendered by this kustomize`);
  }
  return k;
}

function accumulate(dir: string, restrictor: 'rootOnly' | 'none', expected: string): K8sObject[] {
  const k = readKustomization(dir);
  if ((k.kind ?? 'Kustomization') !== expected) throw new Error(`${dir}: expected a ${expected}`);
  let objects: K8sObject[] = [];
  for (const entry of (k.resources ?? []) as string[]) {
    const path = resolve(dir, entry);
    if (statSync(path).isDirectory()) {
      if (!relative(path, dir).startsWith('..')) {
        // kustomize: "cycle detected: candidate root contains visited root"
        throw new Error(`${dir}: resource ${entry} contains this kustomization`);
      }
      objects.push(...accumulate(path, restrictor, 'Kustomization'));
    } else {
      for (const doc of parseAllDocuments(readFileSync(path, 'utf8'))) {
        if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors[0]!.message}`);
        const value = doc.toJS() as K8sObject | null;
        if (value !== null) objects.push(value);
      }
    }
  }
  // A component sees and changes what this kustomization has accumulated so far.
  for (const entry of (k.components ?? []) as string[]) {
    objects = applyLayer(resolve(dir, entry), objects, restrictor, 'Component');
  }
  return applyOwn(dir, k, objects, restrictor);
}

function applyLayer(
  dir: string,
  objects: K8sObject[],
  restrictor: 'rootOnly' | 'none',
  expected: string,
): K8sObject[] {
  const k = readKustomization(dir);
  if (k.kind !== expected) throw new Error(`${dir}: expected a ${expected}`);
  if (k.resources !== undefined || k.components !== undefined) {
    throw new Error(`${dir}: resources or components in a component are not rendered by this kustomize`);
  }
  return applyOwn(dir, k, objects, restrictor);
}

/** Generators, patches, images and name references of one kustomization, in kustomize's order. */
function applyOwn(
  dir: string,
  k: K8sObject,
  input: K8sObject[],
  restrictor: 'rootOnly' | 'none',
): K8sObject[] {
  const objects = structuredClone(input);
  const renamed = new Map<string, string>();
  for (const generator of (k.configMapGenerator ?? []) as K8sObject[]) {
    const data: Record<string, string> = {};
    for (const spec of (generator.files ?? []) as string[]) {
      const [key, path] = spec.includes('=') ? spec.split('=', 2) : [basename(spec), spec];
      const file = resolve(dir, path!);
      if (restrictor === 'rootOnly' && relative(dir, file).startsWith('..')) {
        throw new Error(`security; file '${file}' is not in or below '${dir}'`);
      }
      data[key!] = readFileSync(file, 'utf8');
    }
    for (const literal of (generator.literals ?? []) as string[]) {
      const at = literal.indexOf('=');
      data[literal.slice(0, at)] = literal.slice(at + 1);
    }
    const name = String(generator.name);
    const hashed = generator.options?.disableNameSuffixHash ? name : `${name}-${configMapHash(data)}`;
    renamed.set(name, hashed);
    objects.push({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: hashed }, data });
  }
  for (const p of (k.patches ?? []) as K8sObject[]) {
    const targets = objects.filter(
      (o) =>
        (p.target?.kind === undefined || o.kind === p.target.kind) &&
        (p.target?.name === undefined || o.metadata?.name === p.target.name),
    );
    if (targets.length === 0) throw new Error(`${dir}: a patch matches no resource`);
    const operations = parse(String(p.patch)) as K8sObject[];
    if (!Array.isArray(operations)) throw new Error(`${dir}: only JSON 6902 patches are rendered`);
    for (const target of targets) for (const op of operations) applyOperation(target, op);
  }
  for (const image of (k.images ?? []) as K8sObject[]) {
    for (const o of objects) {
      for (const c of podContainers(o)) {
        const [name, tag] = splitImage(String(c.image));
        if (name !== image.name) continue;
        const newName = image.newName ?? name;
        c.image = image.digest
          ? `${newName}@${image.digest}`
          : `${newName}${image.newTag !== undefined ? `:${image.newTag}` : tag !== undefined ? `:${tag}` : ''}`;
      }
    }
  }
  for (const o of objects) {
    const spec = o.spec?.template?.spec;
    if (spec === undefined) continue;
    const rename = (holder: K8sObject | undefined) => {
      if (holder?.name !== undefined && renamed.has(holder.name)) holder.name = renamed.get(holder.name);
    };
    for (const v of spec.volumes ?? []) rename(v.configMap);
    for (const c of podContainers(o)) {
      for (const e of c.envFrom ?? []) rename(e.configMapRef);
      for (const e of c.env ?? []) rename(e.valueFrom?.configMapKeyRef);
    }
  }
  return objects;
}

/** Every container of a workload's pod template, init containers included. */
export function podContainers(o: K8sObject): K8sObject[] {
  const spec = o.spec?.template?.spec;
  return spec === undefined ? [] : [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
}

function splitImage(image: string): [string, string | undefined] {
  const at = image.lastIndexOf(':');
  return at > image.lastIndexOf('/') ? [image.slice(0, at), image.slice(at + 1)] : [image, undefined];
}

function applyOperation(target: K8sObject, op: K8sObject): void {
  const path = String(op.path)
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'));
  const last = path.pop()!;
  let parent: K8sObject = target;
  for (const segment of path) {
    parent = parent[segment];
    if (parent === undefined) throw new Error(`patch ${op.op} ${op.path}: no such path`);
  }
  if (op.op === 'add' && Array.isArray(parent)) {
    if (last === '-') parent.push(op.value);
    else parent.splice(Number(last), 0, op.value);
  } else if (op.op === 'add' || (op.op === 'replace' && last in parent)) {
    parent[last] = op.value;
  } else if (op.op === 'remove' && last in parent) {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else {
    throw new Error(`patch ${op.op} ${op.path}: not rendered, or no such path`);
  }
}

/**
 * kustomize's name suffix for a generated ConfigMap: SHA-256 of Go's JSON encoding (keys sorted,
 * `<`, `>`, `&` escaped) of `{data, kind, name: ""}`, its first 10 hex digits with 0, 1, 3, a, e
 * spelled g, h, k, m, t (so the suffix never looks like a number or a word).
 */
export function configMapHash(data: Record<string, string>): string {
  const sorted = Object.fromEntries(Object.entries(data).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const json = JSON.stringify({ data: sorted, kind: 'ConfigMap', name: '' }).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  const spelled: Record<string, string> = { '0': 'g', '1': 'h', '3': 'k', a: 'm', e: 't' };
  return [...createHash('sha256').update(json).digest('hex').slice(0, 10)]
    .map((c) => spelled[c] ?? c)
    .join('');
}
