import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { CONFIG_VARIABLES, loadConfig } from '../src/config/riskgate-config.ts';

/**
 * deploy/: the Kubernetes manifests, parsed and checked for what riskgate relies on (kubeconform is
 * not reachable here, so the structure is checked directly): probes on the routes riskgate serves,
 * ports that match its configuration, one process per pod, a grace period that covers its drain,
 * selectors that select the pods, and only variables riskgate reads.
 */

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML of any shape; the assertions check it.
type Doc = Record<string, any>;

function docs(path: string): Doc[] {
  return parseAllDocuments(readFileSync(path, 'utf8')).map((d) => {
    expect(d.errors, path).toEqual([]);
    return d.toJS() as Doc;
  });
}

const all = docs('deploy/riskgate.yaml');
const byKind = (kind: string) => all.filter((d) => d.kind === kind);
const deployment = byKind('Deployment')[0]!;
const pod = deployment.spec.template;
const container = pod.spec.containers.find((c: Doc) => c.name === 'riskgate');
const env = Object.fromEntries(container.env.map((e: Doc) => [e.name, e.value])) as Record<string, string>;
const secret = docs('deploy/riskgate-secrets.example.yaml')[0]!;

describe('deploy/ manifests', () => {
  it('set only variables riskgate reads, and a configuration it accepts', () => {
    for (const name of [...Object.keys(env), ...Object.keys(secret.stringData)]) {
      expect(CONFIG_VARIABLES, name).toContain(name);
    }
    // The image's own settings plus these load without error, as the pod would start.
    const config = loadConfig({ RISKGATE_STATE_DIR: '/var/lib/riskgate', ...secret.stringData, ...env });
    expect(config).toMatchObject({ workers: 1, port: 8080, opsPort: 9090, host: '0.0.0.0' });
    // Replaced pods lose their local disk: the outbox is the shared one.
    expect(config.outbox.kind).toBe('redis');
  });

  it('probe the routes riskgate keeps open, on the ports it listens on', () => {
    const ports = Object.fromEntries(container.ports.map((p: Doc) => [p.name, p.containerPort]));
    expect(ports).toEqual({ http: Number(env.RISKGATE_PORT), ops: Number(env.RISKGATE_OPS_PORT) });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    for (const service of byKind('Service')) {
      for (const p of service.spec.ports) expect(Object.keys(ports)).toContain(p.targetPort);
    }
  });

  it('give the drain its time and the process what it writes', () => {
    // preStop (5 s) + in-flight answers and due actions (10 s) + the decision log flush (5 s).
    const preStop = Number(container.lifecycle.preStop.exec.command.at(-1));
    expect(pod.spec.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(preStop + 10 + 5);
    expect(container.resources.requests.cpu).toBeDefined();
    expect(container.resources.limits.memory).toBeDefined();
    // A read-only root needs the state dir (the image's RISKGATE_STATE_DIR) mounted writable.
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    const state = container.volumeMounts.find((m: Doc) => m.mountPath === '/var/lib/riskgate');
    expect(state?.readOnly).not.toBe(true);
    expect(pod.spec.initContainers[0].command).toEqual(['riskgate', 'policy', 'check', '/app/policies']);
  });

  it('select the pods from the PDB, the HPA, the Services and the NetworkPolicy', () => {
    const labels = pod.metadata.labels;
    const matches = (selector: Record<string, string>) =>
      Object.entries(selector).every(([k, v]) => labels[k] === v);
    expect(matches(deployment.spec.selector.matchLabels)).toBe(true);
    expect(matches(byKind('PodDisruptionBudget')[0]!.spec.selector.matchLabels)).toBe(true);
    for (const s of byKind('Service')) expect(matches(s.spec.selector)).toBe(true);
    const np = byKind('NetworkPolicy')[0]!;
    expect(matches(np.spec.podSelector.matchLabels)).toBe(true);
    const ingressPorts = np.spec.ingress.flatMap((r: Doc) => r.ports.map((p: Doc) => p.port));
    expect(ingressPorts.sort()).toEqual([8080, 9090]);
    const hpa = byKind('HorizontalPodAutoscaler')[0]!;
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: deployment.metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThan(byKind('PodDisruptionBudget')[0]!.spec.minAvailable);
  });
});
