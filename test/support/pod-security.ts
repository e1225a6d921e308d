import type { K8sObject } from './kustomize-render.ts';

/**
 * Pod Security Standards, profile "restricted" (which includes "baseline"), as the admission
 * controller enforces it on a pod spec: every violation as `container: what`, empty when the pod
 * would be admitted to a namespace labelled `pod-security.kubernetes.io/enforce: restricted`.
 * Windows-only and AppArmor/SELinux fields riskgate never sets are checked for being absent or default.
 */
export function restrictedViolations(spec: K8sObject): string[] {
  const out: string[] = [];
  const pod = spec.securityContext ?? {};
  for (const field of ['hostNetwork', 'hostPID', 'hostIPC'] as const) {
    if (spec[field] === true) out.push(`pod: ${field} is true`);
  }
  const allowedVolumes = [
    'configMap',
    'csi',
    'downwardAPI',
    'emptyDir',
    'ephemeral',
    'persistentVolumeClaim',
    'projected',
    'secret',
  ];
  for (const v of spec.volumes ?? []) {
    const type = Object.keys(v).find((k) => k !== 'name');
    if (type === undefined || !allowedVolumes.includes(type)) out.push(`volume ${v.name}: type ${type}`);
  }
  const safeSysctls =
    /^(kernel\.shm_rmid_forced|net\.ipv4\.ip_local_port_range|net\.ipv4\.tcp_syncookies|net\.ipv4\.ping_group_range|net\.ipv4\.ip_unprivileged_port_start|net\.ipv4\.ip_local_reserved_ports|net\.ipv4\.tcp_keepalive_time|net\.ipv4\.tcp_fin_timeout|net\.ipv4\.tcp_keepalive_intvl|net\.ipv4\.tcp_keepalive_probes)$/;
  for (const s of pod.sysctls ?? []) if (!safeSysctls.test(s.name)) out.push(`pod: sysctl ${s.name}`);
  if (pod.runAsUser === 0) out.push('pod: runAsUser is 0');
  checkCommon('pod', pod, out);

  const containers: K8sObject[] = [
    ...(spec.initContainers ?? []),
    ...(spec.containers ?? []),
    ...(spec.ephemeralContainers ?? []),
  ];
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    const at = `container ${c.name}`;
    if (sc.privileged === true) out.push(`${at}: privileged`);
    if (sc.windowsOptions?.hostProcess === true) out.push(`${at}: hostProcess`);
    if (sc.procMount !== undefined && sc.procMount !== 'Default')
      out.push(`${at}: procMount ${sc.procMount}`);
    for (const p of c.ports ?? []) if (p.hostPort) out.push(`${at}: hostPort ${p.hostPort}`);
    if (sc.allowPrivilegeEscalation !== false) out.push(`${at}: allowPrivilegeEscalation is not false`);
    if (sc.runAsNonRoot === false || (sc.runAsNonRoot !== true && pod.runAsNonRoot !== true)) {
      out.push(`${at}: runAsNonRoot is not true (in the container or the pod)`);
    }
    if (sc.runAsUser === 0) out.push(`${at}: runAsUser is 0`);
    const seccomp = sc.seccompProfile?.type ?? pod.seccompProfile?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') {
      out.push(
        `${at}: seccompProfile is ${seccomp ?? 'unset'} (in the container or the pod), not RuntimeDefault or Localhost`,
      );
    }
    if (!(sc.capabilities?.drop ?? []).includes('ALL')) out.push(`${at}: capabilities do not drop ALL`);
    for (const cap of sc.capabilities?.add ?? []) {
      if (cap !== 'NET_BIND_SERVICE') out.push(`${at}: adds capability ${cap}`);
    }
    checkCommon(at, sc, out);
  }
  return out;
}

/** The fields pod and container security contexts share: AppArmor, SELinux, seccomp not Unconfined. */
function checkCommon(at: string, sc: K8sObject, out: string[]): void {
  if (sc.seccompProfile?.type === 'Unconfined') out.push(`${at}: seccompProfile Unconfined`);
  const appArmor = sc.appArmorProfile?.type;
  if (appArmor !== undefined && appArmor !== 'RuntimeDefault' && appArmor !== 'Localhost') {
    out.push(`${at}: appArmorProfile ${appArmor}`);
  }
  const se = sc.seLinuxOptions;
  if (se !== undefined) {
    if (se.user !== undefined || se.role !== undefined) out.push(`${at}: seLinuxOptions user or role`);
    if (
      se.type !== undefined &&
      !['container_t', 'container_init_t', 'container_kvm_t', 'container_engine_t'].includes(se.type)
    ) {
      out.push(`${at}: seLinuxOptions type ${se.type}`);
    }
  }
}
