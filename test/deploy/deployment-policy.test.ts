/**
 * The manifests fit together and fit the code: replicas, probes, security, names the code
 * expects (Service, namespace, ConfigMaps), environment variables the config loaders know, and
 * the same resource domain and memory unit on both sides.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { KNOWN_MIG_PROFILES, migResourceName, resourceNames } from '../../contract/index.js';
import { envKeys, loadControlPlaneConfig } from '../../control-plane/config.js';
import { JWKS_CONFIGMAP_KEY, JWKS_CONFIGMAP_NAME } from '../../control-plane/signing-keys.js';
import { parseConfig as parseNodeAgentConfig } from '../../node-agent/config.js';
import { webhookConfigSchema } from '../../webhooks/config.js';
import {
  deployDir,
  type K8sObject,
  kustomizationDirs,
  nameOf,
  objectsOfKustomization,
  readYamlDocs,
} from './manifests.js';

type Container = {
  name: string;
  args?: string[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: { name: string } };
  }[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  ports?: { name?: string; containerPort: number }[];
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: Record<string, unknown> & { capabilities?: { drop?: string[] } };
};
type PodSpec = {
  serviceAccountName?: string;
  securityContext?: Record<string, unknown>;
  containers: Container[];
  initContainers?: Container[];
  volumes?: {
    name: string;
    configMap?: { name: string };
    secret?: { secretName: string; items?: { key: string; path: string }[] };
  }[];
};
type Workload = K8sObject & {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: { metadata: { labels: Record<string, string> }; spec: PodSpec };
  };
};

const base = objectsOfKustomization(join(deployDir, 'base')).map((o) => o.object);
const find = <T extends K8sObject>(objects: K8sObject[], kind: string, name: string) =>
  objects.find((o) => o.kind === kind && o.metadata.name === name) as T | undefined;
const controlPlane = find<Workload>(base, 'Deployment', 'vcuda-control-plane') as Workload;
const container = controlPlane.spec.template.spec.containers[0] as Container;
const webhook = webhookConfigSchema.parse({});
type ServiceObject = K8sObject & {
  spec: { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string }[] };
};
const service = () => find<ServiceObject>(base, 'Service', webhook.registration.serviceName);

/** The control plane's config as the Deployment builds it: its config file, then its environment. */
function manifestControlPlaneConfig() {
  const env = find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', 'vcuda-control-plane')?.data ?? {};
  const file = find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', 'vcuda-control-plane-file')?.data[
    'config.yaml'
  ];
  return loadControlPlaneConfig({
    file: parseYaml(file ?? '{}'),
    env: { ...env, DATABASE_URL: 'postgres://x@db/vcuda', VCUDA_NAMESPACE: 'vcuda-system', VCUDA_INSTANCE_ID: 'p' },
  });
}

const clusterScoped = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
]);

describe('control plane Deployment', () => {
  it('runs at least two replicas and never drops below them in a rollout', () => {
    expect(controlPlane.spec.replicas).toBeGreaterThanOrEqual(2);
    expect(
      (controlPlane.spec as { strategy?: { rollingUpdate?: { maxUnavailable?: number } } }).strategy?.rollingUpdate
        ?.maxUnavailable,
    ).toBe(0);
  });

  it('probes /healthz (liveness) and /readyz (readiness) on its HTTP port', () => {
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'http' });
  });

  it('declares resources and runs non-root, read-only, without privileges', () => {
    expect(container.resources?.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(container.resources?.limits?.memory).toBeTruthy();
    expect(controlPlane.spec.template.spec.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    expect(container.securityContext?.capabilities?.drop).toEqual(['ALL']);
  });

  it('listens where the config says (HTTP and HTTPS ports)', () => {
    const cfg = loadControlPlaneConfig({});
    expect(container.ports).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'http', containerPort: cfg.port }),
        expect.objectContaining({ name: 'https', containerPort: cfg.httpsPort }),
      ]),
    );
  });

  it('sets only environment variables the config loader reads', () => {
    const cm = find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', 'vcuda-control-plane');
    const patches = kustomizationDirs()
      .flatMap((d) => {
        const p = join(d, 'control-plane-certificate-patch.yaml');
        return existsSync(p) ? readYamlDocs(p) : [];
      })
      .flatMap((doc) => ((doc as Workload).spec.template.spec.containers ?? []).flatMap((c) => c.env ?? []));
    const names = [...(container.env ?? []), ...patches].map((e) => e.name).concat(Object.keys(cm?.data ?? {}));
    expect(names.filter((n) => !(n in envKeys))).toEqual([]);
  });

  it('builds a valid config from exactly what the manifests set (file and environment)', () => {
    const cfg = manifestControlPlaneConfig();
    expect(cfg.namespace).toBe('vcuda-system');
    expect(cfg.kube.mode).toBe('in-cluster');
    expect(cfg.webhook.schedulerName).toBe('vcuda-scheduler');
    expect(cfg.webhook.registration?.exemptNamespaces).toEqual(expect.arrayContaining(['kube-system', 'vcuda-system']));
  });

  it('reads its config file from the mounted ConfigMap', () => {
    const args = container.args ?? [];
    const file = args[args.indexOf('--config') + 1] ?? '';
    const mounts = (container as { volumeMounts?: { name: string; mountPath: string }[] }).volumeMounts ?? [];
    const mount = mounts.find((m) => file.startsWith(`${m.mountPath}/`));
    const volume = controlPlane.spec.template.spec.volumes?.find((v) => v.name === mount?.name);
    const cm = find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', volume?.configMap?.name ?? '');
    expect(args[0]).toBe('control-plane');
    expect(cm?.data[file.slice((mount?.mountPath.length ?? 0) + 1)]).toBeTruthy();
  });

  it('takes the database url from the vcuda-postgres Secret', () => {
    const db = container.env?.find((e) => e.name === 'DATABASE_URL');
    expect(db?.valueFrom?.secretKeyRef).toEqual({ name: 'vcuda-postgres', key: 'url' });
    // The operator creates it (the base never ships a password); the example shows its shape.
    expect(find(base, 'Secret', 'vcuda-postgres')).toBeUndefined();
    const example = parseYaml(
      readFileSync(join(deployDir, 'examples', 'postgres-secret.yaml'), 'utf8'),
    ) as K8sObject & {
      stringData: Record<string, string>;
    };
    expect(example.metadata).toMatchObject({ name: 'vcuda-postgres', namespace: 'vcuda-system' });
    expect(example.stringData.url).toMatch(/^postgres:\/\//);
  });
});

describe('Service, PDB and names the code expects', () => {
  const service = find<
    K8sObject & {
      spec: { selector: Record<string, string>; ports: { name: string; port: number; targetPort: string }[] };
    }
  >(base, 'Service', webhook.registration.serviceName);

  it('is the Service the webhook registration points the API server at', () => {
    expect(service?.metadata.namespace).toBe(webhook.registration.serviceNamespace);
    const https = service?.spec.ports.find((p) => p.name === 'https');
    expect(https?.port).toBe(webhook.registration.servicePort);
    expect(https?.targetPort).toBe('https');
  });

  it('selects the control-plane pods and targets ports they declare', () => {
    expect(controlPlane.spec.template.metadata.labels).toMatchObject(service?.spec.selector ?? { missing: 'selector' });
    const portNames = (container.ports ?? []).map((p) => p.name);
    for (const p of service?.spec.ports ?? []) expect(portNames).toContain(p.targetPort);
  });

  it('keeps one replica through voluntary disruptions', () => {
    const pdb = find<K8sObject & { spec: { minAvailable: number; selector: { matchLabels: Record<string, string> } } }>(
      base,
      'PodDisruptionBudget',
      'vcuda-control-plane',
    );
    expect(controlPlane.spec.template.metadata.labels).toMatchObject(
      pdb?.spec.selector.matchLabels ?? { missing: 'pdb' },
    );
    expect(pdb?.spec.minAvailable).toBeGreaterThanOrEqual(1);
    expect(pdb?.spec.minAvailable).toBeLessThan(controlPlane.spec.replicas ?? 0);
  });

  it('ships the JWKS ConfigMap node agents mount, empty until the control plane publishes (fail closed)', () => {
    const cm = find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', JWKS_CONFIGMAP_NAME);
    expect(JSON.parse(cm?.data[JWKS_CONFIGMAP_KEY] ?? 'null')).toEqual({ keys: [] });
  });

  it('puts every namespaced object in a namespace, and vcuda’s own in vcuda-system', () => {
    for (const o of base) {
      if (clusterScoped.has(o.kind)) continue;
      expect(o.metadata.namespace, nameOf(o)).toBeTruthy();
      if (!(o.kind === 'RoleBinding' && o.metadata.namespace === 'kube-system'))
        expect(o.metadata.namespace, nameOf(o)).toBe('vcuda-system');
    }
  });

  it('references only ConfigMaps, Secrets and service accounts that the build creates', () => {
    // The one Secret a workload mounts that the control plane itself creates at start (or
    // cert-manager, in its overlay): the scheduler's client certificate for the extender.
    // And the one the operator creates before applying (deploy/README.md step 3), so that applying
    // the base again never overwrites the database password.
    const createdAtStart = new Set([loadControlPlaneConfig({}).extender.certificates.secretName, 'vcuda-postgres']);
    const has = (kind: string, name: string) =>
      base.some((o) => o.kind === kind && o.metadata.name === name) || (kind === 'Secret' && createdAtStart.has(name));
    for (const w of base.filter((o) => o.kind === 'Deployment' || o.kind === 'DaemonSet') as Workload[]) {
      const spec = w.spec.template.spec;
      if (spec.serviceAccountName) expect(has('ServiceAccount', spec.serviceAccountName), nameOf(w)).toBe(true);
      for (const v of spec.volumes ?? []) {
        if (v.configMap) expect(has('ConfigMap', v.configMap.name), `${nameOf(w)} volume ${v.name}`).toBe(true);
        if (v.secret) expect(has('Secret', v.secret.secretName), `${nameOf(w)} volume ${v.name}`).toBe(true);
      }
      for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
        for (const e of c.envFrom ?? []) if (e.configMapRef) expect(has('ConfigMap', e.configMapRef.name)).toBe(true);
        for (const e of c.env ?? []) {
          const ref = e.valueFrom?.secretKeyRef;
          if (ref) expect(has('Secret', ref.name), `${nameOf(w)} env ${e.name}`).toBe(true);
        }
      }
    }
  });
});

const daemonSet = find<Workload>(base, 'DaemonSet', 'vcuda-node-agent');

describe.skipIf(!daemonSet)('node agent against the control plane', () => {
  const agentCm = find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', 'vcuda-node-agent-config');
  const agentConfig = () =>
    parseNodeAgentConfig({ file: parseYaml(agentCm?.data['config.yaml'] ?? '{}'), env: { NODE_NAME: 'gpu-1' } });
  const cpConfig = () =>
    loadControlPlaneConfig({
      env: find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', 'vcuda-control-plane')?.data ?? {},
    });

  it('runs under the node agent account this base grants', () => {
    expect(daemonSet?.spec.template.spec.serviceAccountName).toBe('vcuda-node-agent');
  });

  it('uses the same resource domain and memory unit as the control plane', () => {
    expect(agentConfig().resourceDomain).toBe(cpConfig().resourceDomain);
    expect(agentConfig().memoryUnitMiB).toBe(cpConfig().memoryUnitMiB);
  });

  it('reports to the control plane’s Service on its HTTP port', () => {
    const url = new URL(agentConfig().controlPlaneUrl ?? 'http://missing');
    expect(url.hostname.split('.').slice(0, 2)).toEqual([
      webhook.registration.serviceName,
      webhook.registration.serviceNamespace,
    ]);
    expect(Number(url.port || 80)).toBe(80);
  });

  it('exposes the metrics port the PodMonitor scrapes', () => {
    const monitor = objectsOfKustomization(join(deployDir, 'overlays/monitoring')).find(
      (o) => o.object.kind === 'PodMonitor',
    )?.object as K8sObject & {
      spec: { podMetricsEndpoints: { port: string }[]; selector: { matchLabels: Record<string, string> } };
    };
    const ports = (daemonSet?.spec.template.spec.containers ?? []).flatMap((c) => c.ports ?? []).map((p) => p.name);
    for (const e of monitor.spec.podMetricsEndpoints) expect(ports).toContain(e.port);
    expect(daemonSet?.spec.template.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
  });
});

const schedulerConfigPath = join(deployDir, 'scheduler/kube-scheduler-config.yaml');

describe.skipIf(!existsSync(schedulerConfigPath))('second scheduler wiring', () => {
  type SchedulerConfig = {
    kind?: string;
    leaderElection?: { leaderElect?: boolean; resourceName?: string; resourceNamespace?: string };
    profiles?: { schedulerName: string }[];
    extenders?: {
      urlPrefix: string;
      enableHTTPS?: boolean;
      tlsConfig?: { certFile?: string; keyFile?: string; caFile?: string };
      bindVerb?: string;
      managedResources?: { name: string }[];
    }[];
  };
  const scheduler = find<Workload>(base, 'Deployment', 'vcuda-scheduler');
  const cfg = () => parseYaml(readFileSync(schedulerConfigPath, 'utf8')) as SchedulerConfig;

  it('is a KubeSchedulerConfiguration whose extender calls the Service’s extender port over HTTPS', () => {
    expect(cfg().kind).toBe('KubeSchedulerConfiguration');
    const ext = cfg().extenders?.[0];
    const url = new URL(ext?.urlPrefix ?? 'http://missing');
    expect(url.hostname.split('.').slice(0, 2)).toEqual([
      webhook.registration.serviceName,
      webhook.registration.serviceNamespace,
    ]);
    expect(url.protocol).toBe('https:');
    expect(ext?.enableHTTPS).toBe(true);
    const port = service()?.spec.ports.find((p) => p.port === Number(url.port || 443));
    expect(port?.targetPort).toBe('extender');
    expect(container.ports).toContainEqual(
      expect.objectContaining({ name: 'extender', containerPort: loadControlPlaneConfig({}).extender.port }),
    );
    expect(url.pathname.replace(/\/$/, '')).toBe('/scheduler');
  });

  it('presents the client certificate from the Secret the control plane keeps, and never mounts its CA key', () => {
    const tls = cfg().extenders?.[0]?.tlsConfig ?? {};
    const spec = scheduler?.spec.template.spec as PodSpec;
    const mounts = (spec.containers[0] as { volumeMounts?: { name: string; mountPath: string }[] }).volumeMounts ?? [];
    const secretName = loadControlPlaneConfig({}).extender.certificates.secretName;
    for (const file of [tls.certFile, tls.keyFile, tls.caFile]) {
      const mount = mounts.find((m) => (file ?? '').startsWith(`${m.mountPath}/`));
      const volume = spec.volumes?.find((v) => v.name === mount?.name);
      expect(volume?.secret?.secretName, file).toBe(secretName);
      const key = (file ?? '').slice((mount?.mountPath.length ?? 0) + 1);
      expect(volume?.secret?.items?.map((i) => i.path)).toContain(key);
    }
    const volume = spec.volumes?.find((v) => v.secret?.secretName === secretName);
    expect(volume?.secret?.items?.map((i) => i.key).sort()).toEqual(['ca.crt', 'tls.crt', 'tls.key']);
    // The key file is group-readable only: the pod's fsGroup must be the group kube-scheduler runs as.
    expect(spec.securityContext?.['fsGroup']).toBe(spec.securityContext?.['runAsGroup']);
  });

  it('gets, from cert-manager in its overlay, a client certificate the extender accepts', () => {
    const overlay = objectsOfKustomization(join(deployDir, 'overlays/cert-manager')).map((o) => o.object);
    const cert = overlay.find(
      (o) =>
        o.kind === 'Certificate' &&
        (o as { spec?: { secretName?: string } }).spec?.secretName ===
          loadControlPlaneConfig({}).extender.certificates.secretName,
    ) as (K8sObject & { spec: { commonName: string; usages: string[] } }) | undefined;
    expect(loadControlPlaneConfig({}).extender.allowedClients).toContain(cert?.spec.commonName);
    expect(cert?.spec.usages).toContain('client auth');
  });

  it('has the profile the webhook sends vcuda pods to', () => {
    expect(cfg().profiles?.map((p) => p.schedulerName)).toContain(manifestControlPlaneConfig().webhook.schedulerName);
  });

  it('manages both vcuda resources and the MIG profiles, and leaves their accounting to the extender', () => {
    const cp = manifestControlPlaneConfig();
    const managed = cfg().extenders?.[0]?.managedResources ?? [];
    const names = resourceNames(cp.resourceDomain);
    expect(managed.map((m) => m.name).sort()).toEqual(
      [names.core, names.memory, ...KNOWN_MIG_PROFILES.map((p) => migResourceName(names, p))].sort(),
    );
    expect(cfg().extenders?.[0]?.bindVerb).toBeTruthy();
  });

  it('takes its own leader-election Lease, the one its Role grants', () => {
    const le = cfg().leaderElection;
    const role = find<K8sObject & { rules: { resources: string[]; resourceNames?: string[] }[] }>(
      base,
      'Role',
      'vcuda-scheduler-leader-election',
    );
    const leaseNames = role?.rules.flatMap((r) => r.resourceNames ?? []) ?? [];
    expect(leaseNames).toContain(le?.resourceName);
    expect(role?.metadata.namespace).toBe(le?.resourceNamespace);
  });
});
