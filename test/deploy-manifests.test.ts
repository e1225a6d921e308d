import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../src/config/riskgate-config.ts';
import { deployVariants } from './support/deploy-variants.ts';
import { type K8sObject, podContainers, renderKustomization } from './support/kustomize-render.ts';
import { LAUNCHER_TEST_MS, runLauncher } from './support/launcher.ts';
import { restrictedViolations } from './support/pod-security.ts';

/**
 * deploy/: the Kubernetes manifests as `kubectl apply -k deploy/` renders them (and with the
 * policy-configmap component on), checked for what a pod needs to start and run: the policy the
 * init container checks is there and passes, an image reference set in one place, Pod Security
 * "restricted" for every container, topology spread, no `replicas` under the HPA, probes on the
 * routes riskgate serves, a grace period that covers its drain, and only variables riskgate reads.
 * test/deploy-schemas.test.ts validates the same renders against the Kubernetes API schemas.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'riskgate-deploy-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const variants = deployVariants(scratch);
type Variant = keyof typeof variants;

const rendered = Object.fromEntries(
  Object.entries(variants).map(([name, v]) => [
    name,
    renderKustomization(v.dir, { loadRestrictor: v.restrictor }),
  ]),
) as Record<Variant, K8sObject[]>;

const base = rendered["the image's policy"]!;
const byKind = (docs: K8sObject[], kind: string) => docs.filter((d) => d.kind === kind);
const deploymentOf = (docs: K8sObject[]) => byKind(docs, 'Deployment')[0]!;
const deployment = deploymentOf(base);
const pod = deployment.spec.template;
const container = pod.spec.containers.find((c: K8sObject) => c.name === 'riskgate');
const secret = parse(readFileSync(join(ROOT, 'deploy/riskgate-secrets.example.yaml'), 'utf8')) as K8sObject;
const databaseSecret = parse(
  readFileSync(join(ROOT, 'deploy/database-secret.example.yaml'), 'utf8'),
) as K8sObject;
/** The example Secrets by name, as the operator creates them (neither is in the render). */
const exampleSecrets: Record<string, K8sObject> = Object.fromEntries(
  [secret, databaseSecret].map((s) => [s.metadata.name, s]),
);

/** A container's variables as the kubelet sets them: each value, or the Secret key it names. */
function envOf(c: K8sObject): Record<string, string> {
  return Object.fromEntries(
    (c.env ?? []).map((e: K8sObject) => {
      const ref = e.valueFrom?.secretKeyRef;
      if (ref === undefined) return [e.name, e.value];
      const value = exampleSecrets[ref.name]?.stringData?.[ref.key];
      expect(value, `${e.name}: Secret ${ref.name} key ${ref.key} in an example`).toBeDefined();
      return [e.name, value];
    }),
  );
}
const env = envOf(container);

/** The files a container sees at `path`: a ConfigMap mounted there as the kubelet lays it out, or the image's. */
function materialize(docs: K8sObject[], c: K8sObject, path: string, into: string): string {
  const spec = deploymentOf(docs).spec.template.spec;
  const mount = (c.volumeMounts ?? []).find((m: K8sObject) => m.mountPath === path);
  if (mount === undefined) return imagePolicies(into);
  const volume = spec.volumes.find((v: K8sObject) => v.name === mount.name);
  expect(volume?.configMap, `${path} is mounted from a ConfigMap`).toBeDefined();
  const configMap = byKind(docs, 'ConfigMap').find((m) => m.metadata.name === volume.configMap.name);
  expect(configMap, `ConfigMap ${volume.configMap.name} is in the render`).toBeDefined();
  // The kubelet's layout: the files in a timestamped directory, ..data linking to it, a link per key.
  const stamp = '..2025_01_01_00_00_00.000000001';
  mkdirSync(join(into, stamp), { recursive: true });
  for (const [key, text] of Object.entries(configMap!.data ?? {})) {
    writeFileSync(join(into, stamp, key), String(text));
    symlinkSync(join('..data', key), join(into, key));
  }
  symlinkSync(stamp, join(into, '..data'));
  return into;
}

/**
 * /app/policies in the image: the final stage of the Dockerfile copies policies/ there (WORKDIR
 * /app) and links the CLI as `riskgate`, the init container's command.
 */
function imagePolicies(into: string): string {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const final = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const workdir = [...final.matchAll(/^WORKDIR (\S+)$/gm)].at(-1)?.[1] ?? '/';
  const copies = [...final.matchAll(/^COPY (?!--from)(\S+) (\S+)$/gm)].map((m) => ({
    from: m[1]!.replace(/\/$/, ''),
    to: posix.resolve(workdir, m[2]!),
  }));
  expect(copies, 'the image copies policies/ to /app/policies').toContainEqual({
    from: 'policies',
    to: '/app/policies',
  });
  expect(final).toMatch(/ln -s \/app\/bin\/riskgate\.js \/usr\/local\/bin\/riskgate\b/);
  cpSync(join(ROOT, 'policies'), into, { recursive: true });
  return into;
}

async function runCli(args: string[]): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await runLauncher(args);
  return { code, out: `${stdout}${stderr}` };
}

describe.each(Object.keys(variants) as Variant[])('deploy/ with %s', (variant) => {
  const docs = rendered[variant]!;
  const spec = deploymentOf(docs).spec.template.spec;

  it(
    "starts: the init container's command passes on the policy files the pod sees",
    async () => {
      const init = spec.initContainers[0];
      const [command, ...args] = init.command as string[];
      expect(command).toBe('riskgate');
      const path = args.at(-1)!;
      // The service loads what the init container checked.
      const service = spec.containers.find((c: K8sObject) => c.name === 'riskgate');
      const policyPath = service.env.find((e: K8sObject) => e.name === 'RISKGATE_POLICY_PATH').value;
      expect(policyPath).toBe(path);
      const serviceMount = (service.volumeMounts ?? []).find((m: K8sObject) => m.mountPath === path);
      const initMount = (init.volumeMounts ?? []).find((m: K8sObject) => m.mountPath === path);
      expect(initMount?.name).toBe(serviceMount?.name);

      const dir = join(scratch, `${variant.replaceAll(/\W/g, '-')}-policies`);
      mkdirSync(dir, { recursive: true });
      const seen = materialize(docs, init, path, dir);
      const result = await runCli([...args.slice(0, -1), seen]);
      expect(result.out).toMatch(/1 file\(s\), 0 error\(s\)/);
      expect(result.code).toBe(0);
    },
    LAUNCHER_TEST_MS,
  );

  it('names its image in one place: kustomization.yaml', () => {
    const images = podContainers(deploymentOf(docs)).map((c) => c.image as string);
    const kustomization = parse(readFileSync(join(ROOT, 'deploy/kustomization.yaml'), 'utf8')) as K8sObject;
    const [image] = kustomization.images;
    const expected = image.digest ? `${image.newName}@${image.digest}` : `${image.newName}:${image.newTag}`;
    expect(images).toEqual(images.map(() => expected));
    // A tag that moves (or none, which means latest) is not a reference anyone can roll back to.
    expect(expected).not.toMatch(/:latest$/);
    expect(expected).toMatch(/[:@]/);
    // The manifest itself names only the placeholder kustomize replaces.
    const raw = readFileSync(join(ROOT, 'deploy/riskgate.yaml'), 'utf8');
    expect([...raw.matchAll(/^\s*image: (\S+)$/gm)].map((m) => m[1])).toEqual(images.map(() => image.name));
  });

  it('meets Pod Security "restricted" in every container, the init container too', () => {
    expect(restrictedViolations(spec)).toEqual([]);
    // The read-only root of each container, and the state dir the service writes mounted writable.
    for (const c of podContainers(deploymentOf(docs))) {
      expect(c.securityContext?.readOnlyRootFilesystem, c.name).toBe(true);
    }
  });

  it('spreads its pods over nodes and zones, and leaves the replica count to the HPA', () => {
    const labels = deploymentOf(docs).spec.template.metadata.labels;
    const constraints = spec.topologySpreadConstraints ?? [];
    for (const key of ['kubernetes.io/hostname', 'topology.kubernetes.io/zone']) {
      const c = constraints.find((t: K8sObject) => t.topologyKey === key);
      expect(c, key).toBeDefined();
      expect(c.maxSkew).toBe(1);
      for (const [k, v] of Object.entries(c.labelSelector.matchLabels)) expect(labels[k], k).toBe(v);
    }
    const hpa = byKind(docs, 'HorizontalPodAutoscaler')[0]!;
    expect(hpa.spec.scaleTargetRef.name).toBe(deploymentOf(docs).metadata.name);
    expect(deploymentOf(docs).spec.replicas).toBeUndefined();
  });
});

describe('deploy/ rendering', () => {
  const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  it.skipIf(kubectl.status !== 0)("renders as kubectl's kustomize does (where kubectl is installed)", () => {
    for (const [name, v] of Object.entries(variants)) {
      const args = [
        'kustomize',
        ...(v.restrictor === 'none' ? ['--load-restrictor=LoadRestrictionsNone'] : []),
        v.dir,
      ];
      const theirs = spawnSync('kubectl', args, { encoding: 'utf8' });
      expect(theirs.stderr, name).toBe('');
      const key = (d: K8sObject) => `${d.kind}/${d.metadata.name}`;
      const sort = (docs: K8sObject[]) => [...docs].sort((a, b) => key(a).localeCompare(key(b)));
      const parsed = parseAllDocuments(theirs.stdout).map((d) => d.toJS() as K8sObject);
      expect(sort(rendered[name as Variant] ?? []), name).toEqual(sort(parsed));
    }
  });

  it('refuses the ConfigMap component without the load restrictor off, as kustomize does', () => {
    expect(() => renderKustomization(variants['the policy ConfigMap']!.dir)).toThrow(/not in or below/);
  });
});

describe('deploy/ manifests', () => {
  it('set only variables riskgate reads, and a configuration it accepts', () => {
    for (const name of [...Object.keys(env), ...Object.keys(secret.stringData)]) {
      expect(CONFIG_VARIABLES, name).toContain(name);
    }
    // The image's own settings plus these load without error, as the pod would start.
    const config = loadConfig({ RISKGATE_STATE_DIR: '/var/lib/riskgate', ...secret.stringData, ...env });
    expect(config).toMatchObject({ workers: 1, port: 8080, opsPort: 9090, host: '0.0.0.0' });
    // Replaced pods lose their local disk: every kind of state is the shared one.
    expect(config.outbox.kind).toBe('database');
    expect(config.featureStore.kind).toBe('redis');
    expect(config.database.kind).toBe('postgres');
  });

  it('probe the routes riskgate keeps open, on the ports it listens on', () => {
    const ports = Object.fromEntries(container.ports.map((p: K8sObject) => [p.name, p.containerPort]));
    expect(ports).toEqual({ http: Number(env.RISKGATE_PORT), ops: Number(env.RISKGATE_OPS_PORT) });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    for (const service of byKind(base, 'Service')) {
      for (const p of service.spec.ports) expect(Object.keys(ports)).toContain(p.targetPort);
    }
  });

  it('give the drain its time and the process what it writes', () => {
    // preStop (5 s) + in-flight answers and due actions (10 s) + the decision log flush (5 s).
    const preStop = Number(container.lifecycle.preStop.exec.command.at(-1));
    expect(pod.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStop + 10 + 5);
    for (const c of podContainers(deployment)) {
      expect(c.resources.requests.cpu, c.name).toBeDefined();
      expect(c.resources.limits.memory, c.name).toBeDefined();
    }
  });

  it('keep no state on the pod: nothing writable is mounted, and each kind of state is the shared one', () => {
    // A read-only root and no writable volume: an emptyDir state dir kept lists, lock-outs and the
    // audit trail per pod, lost with it. Only read-only mounts (a policy ConfigMap) may be added.
    for (const [name, docs] of Object.entries(rendered)) {
      for (const c of podContainers(deploymentOf(docs))) {
        for (const m of c.volumeMounts ?? [])
          expect(m.readOnly, `${name}: ${c.name} ${m.mountPath}`).toBe(true);
      }
      for (const v of deploymentOf(docs).spec.template.spec.volumes ?? []) {
        expect(
          v.emptyDir ?? v.persistentVolumeClaim ?? v.ephemeral,
          `${name}: volume ${v.name}`,
        ).toBeUndefined();
      }
    }
    const config = loadConfig({ RISKGATE_STATE_DIR: '/var/lib/riskgate', ...secret.stringData, ...env });
    expect(config.decisionLog.kind).not.toBe('file');
    expect(config.outbox.kind).not.toBe('sqlite');
    expect(config.database.kind).toBe('postgres');
    expect(config.featureStore.kind).toBe('redis');
  });

  it('select the pods from the PDB, the HPA, the Services and the NetworkPolicy', () => {
    const labels = pod.metadata.labels;
    const matches = (selector: Record<string, string>) =>
      Object.entries(selector).every(([k, v]) => labels[k] === v);
    expect(matches(deployment.spec.selector.matchLabels)).toBe(true);
    expect(matches(byKind(base, 'PodDisruptionBudget')[0]!.spec.selector.matchLabels)).toBe(true);
    for (const s of byKind(base, 'Service')) expect(matches(s.spec.selector)).toBe(true);
    const np = byKind(base, 'NetworkPolicy')[0]!;
    expect(matches(np.spec.podSelector.matchLabels)).toBe(true);
    const ingressPorts = np.spec.ingress.flatMap((r: K8sObject) => r.ports.map((p: K8sObject) => p.port));
    expect(ingressPorts.sort()).toEqual([8080, 9090]);
    const hpa = byKind(base, 'HorizontalPodAutoscaler')[0]!;
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: deployment.metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThan(byKind(base, 'PodDisruptionBudget')[0]!.spec.minAvailable);
  });
});

describe.each(Object.keys(variants) as Variant[])('deploy/ with %s: replicated means shared', (variant) => {
  const docs = rendered[variant]!;
  const workloads = docs.filter((d) => d.spec?.template?.spec !== undefined);
  const services = workloads.flatMap((w) =>
    w.spec.template.spec.containers.filter((c: K8sObject) => c.name === 'riskgate'),
  );

  it('gives every riskgate pod the same RISKGATE_DATABASE, a PostgreSQL, from one Secret it must have', () => {
    expect(services.length).toBeGreaterThan(0);
    const refs = services.map((c: K8sObject) => {
      const entry = (c.env ?? []).find((e: K8sObject) => e.name === 'RISKGATE_DATABASE');
      expect(entry?.value, 'never a literal (a credential in a manifest)').toBeUndefined();
      return entry?.valueFrom?.secretKeyRef;
    });
    for (const ref of refs) {
      expect(ref).toEqual(refs[0]);
      // Not optional: a pod without the Secret does not start (rather than keep a database of its own).
      expect(ref.optional).not.toBe(true);
    }
    expect(refs[0]).toEqual({ name: databaseSecret.metadata.name, key: 'url' });
    // The env entry is the one source: no Secret or ConfigMap the pods read sets it too.
    expect(Object.keys(secret.stringData)).not.toContain('RISKGATE_DATABASE');
    const url = new URL(databaseSecret.stringData.url);
    expect(url.protocol).toBe('postgres:');
    // A placeholder: the example names the password to replace, never one.
    expect(url.password).toMatch(/^replace/);
  });

  it('lets every riskgate pod reach that PostgreSQL, its Redis and DNS through the NetworkPolicy', () => {
    const labels = deploymentOf(docs).spec.template.metadata.labels;
    const policies = byKind(docs, 'NetworkPolicy').filter(
      (np) =>
        np.spec.policyTypes?.includes('Egress') &&
        Object.entries(np.spec.podSelector.matchLabels ?? {}).every(([k, v]) => labels[k] === v),
    );
    expect(policies.length).toBeGreaterThan(0);
    /** Whether some egress rule of every policy selecting the pods allows TCP to `port` (to anywhere or to `peer`). */
    const allows = (port: number, protocol: string, peer?: Record<string, string>) =>
      policies.every((np) =>
        (np.spec.egress ?? []).some(
          (rule: K8sObject) =>
            (rule.ports ?? []).some(
              (p: K8sObject) => p.port === port && (p.protocol ?? 'TCP') === protocol,
            ) &&
            (rule.to === undefined ||
              (peer !== undefined &&
                rule.to.some((t: K8sObject) =>
                  Object.entries(t.podSelector?.matchLabels ?? {}).every(([k, v]) => peer[k] === v),
                ))),
        ),
      );
    const database = new URL(databaseSecret.stringData.url);
    expect(allows(Number(database.port || 5432), 'TCP'), `egress to PostgreSQL port ${database.port}`).toBe(
      true,
    );
    const redis = new URL(secret.stringData.RISKGATE_FEATURE_STORE);
    expect(allows(Number(redis.port || 6379), 'TCP', { 'app.kubernetes.io/name': redis.hostname })).toBe(
      true,
    );
    expect(allows(53, 'UDP') && allows(53, 'TCP'), 'DNS, to find them').toBe(true);
  });
});
