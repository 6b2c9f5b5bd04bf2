/**
 * deploy/helm/vcuda installs what the kustomize base does: rendered with default values it yields
 * the base's objects (kind, namespace, name) with the same specs once Helm's bookkeeping labels
 * are set aside, and with `mode: dra` the DRA overlay's (as `kubectl kustomize` builds it); values
 * reach every place that must agree (domain, memory unit, namespace, driver name); bad values and
 * bad combinations are refused naming the value; and the rendering passes a real kube-apiserver's
 * server-side dry run (1.32 and 1.36, ../shared/kubernetes-*), with kube-scheduler's image at
 * that server's version (DRA mode on the real 1.36: test/deploy/dra-install-real.test.ts).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  draCardSelector,
  draMigClassName,
  draMigSelector,
  KNOWN_MIG_PROFILES,
  migResourceName,
  resourceNames,
} from '../../contract/index.js';
import { loadControlPlaneConfig } from '../../control-plane/config.js';
import { parseConfig } from '../../node-agent/config.js';
import {
  chartDir,
  helm,
  helmBinary,
  helmSkipReason,
  identities,
  parseManifest,
  render,
  renderText,
  templateArgs,
  withoutHelmBookkeeping,
} from './helm.js';
import { deployDir, type K8sObject, objectsOfKustomization, readKustomization, repoRoot } from './manifests.js';

type Container = {
  name: string;
  image: string;
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  volumeMounts?: { name: string; mountPath: string }[];
};
type PodSpec = {
  containers: Container[];
  initContainers?: Container[];
  nodeSelector?: Record<string, string>;
  volumes?: { name: string; secret?: { secretName: string }; hostPath?: { path: string } }[];
};
type Workload = K8sObject & { spec: { template: { spec: PodSpec } } };

const skip = helmSkipReason();
const base = join(deployDir, 'base');
/** The scheduler pin of the base, so a default rendering at that version must match it exactly. */
const BASE_SCHEDULER_TAG = (readKustomization(base) as { images?: { name: string; newTag?: string }[] }).images?.find(
  (i) => i.name === 'registry.k8s.io/kube-scheduler',
)?.newTag;

function find<T extends K8sObject = K8sObject>(objects: K8sObject[], kind: string, name: string): T {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name} in ${identities(objects).join(', ')}`);
  return o as T;
}

function podSpec(objects: K8sObject[], kind: string, name: string): PodSpec {
  return find<Workload>(objects, kind, name).spec.template.spec;
}

/** A file of a rendered ConfigMap, parsed (any: the tests read into nested configuration). */
// biome-ignore lint/suspicious/noExplicitAny: configuration documents of several shapes
function configFile(objects: K8sObject[], name: string, key: string): any {
  return parseYaml((find(objects, 'ConfigMap', name)['data'] as Record<string, string>)[key] as string);
}

/** The base's objects with its kustomization's `images:` applied, as `kubectl kustomize` does. */
function baseObjects(): K8sObject[] {
  const images = (readKustomization(base) as { images?: { name: string; newName?: string; newTag?: string }[] }).images;
  const objects = objectsOfKustomization(base).map((o) => structuredClone(o.object));
  for (const o of objects) {
    const spec = (o as Partial<Workload>).spec?.template?.spec;
    for (const c of [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]) {
      const entry = images?.find((i) => c.image === i.name || c.image.startsWith(`${i.name}:`));
      if (entry) c.image = `${entry.newName ?? entry.name}:${entry.newTag ?? c.image.split(':')[1]}`;
    }
  }
  return objects;
}

/** Fails a rendering: Helm's exit status and message. */
function renderFailure(values: Record<string, unknown>, kubeVersion?: string): string {
  const r = helm(templateArgs({ values, ...(kubeVersion ? { kubeVersion } : {}) }));
  expect(r.status, `rendering with ${JSON.stringify(values)} should fail`).not.toBe(0);
  return r.stderr;
}

/**
 * Every kustomize object (the Namespace aside: the release's namespace holds the chart) has its
 * chart twin with the same content, Helm's bookkeeping aside. The control plane's file ConfigMap
 * may say more: the chart also names its namespace where the control plane's defaults say
 * vcuda-system.
 */
function expectSameContent(rendered: K8sObject[], kustomized: K8sObject[]): void {
  for (const b of kustomized.filter((o) => o.kind !== 'Namespace')) {
    const c = withoutHelmBookkeeping(find(rendered, b.kind, b.metadata.name));
    const what = `${b.kind} ${b.metadata.name}`;
    if (b.kind === 'ConfigMap' && b.metadata.name === 'vcuda-control-plane-file') {
      const cfg = parseYaml((c['data'] as Record<string, string>)['config.yaml'] as string);
      const want = parseYaml((b['data'] as Record<string, string>)['config.yaml'] as string);
      expect(cfg, what).toMatchObject(want);
      expect(cfg.webhook.schedulerName, what).toBe(want.webhook.schedulerName);
      expect(cfg.webhook.registration.serviceNamespace).toBe('vcuda-system');
      continue;
    }
    if (b.kind === 'ConfigMap') {
      const parse = (d: Record<string, string>) =>
        Object.fromEntries(Object.entries(d).map(([k, v]) => [k, k.endsWith('.yaml') ? parseYaml(v) : v]));
      expect(parse(c['data'] as Record<string, string>), what).toEqual(parse(b['data'] as Record<string, string>));
      expect(c.metadata.labels, what).toEqual(b.metadata.labels);
      continue;
    }
    const { metadata: cm, ...cRest } = c;
    const { metadata: bm, ...bRest } = b;
    expect(cRest, what).toEqual(bRest);
    expect(cm.labels, what).toEqual(bm.labels);
    expect(cm.namespace, what).toEqual(bm.namespace);
  }
}

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;

/** An overlay as the real kustomize (kubectl's) builds it: patches and deletions applied. */
function kustomizeBuild(dir: string): K8sObject[] {
  return parseManifest(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 32 << 20 }));
}

/** A rendered Deployment's or DaemonSet's first container environment, name → value. */
function containerEnv(objects: K8sObject[], kind: string, name: string): Record<string, string | undefined> {
  return Object.fromEntries((podSpec(objects, kind, name).containers[0]?.env ?? []).map((e) => [e.name, e.value]));
}

describe.skipIf(skip !== undefined)(`the Helm chart${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('passes helm lint --strict', () => {
    const r = helm(['lint', '--strict', chartDir]);
    expect(`${r.stdout}${r.stderr}`).toMatch(/0 chart\(s\) failed/);
    expect(r.status).toBe(0);
  });

  it('ships the scheduler configuration of deploy/scheduler and the monitoring overlay unchanged', () => {
    const same = (inChart: string, inDeploy: string) =>
      expect(readFileSync(join(chartDir, 'files', inChart), 'utf8'), inChart).toBe(
        readFileSync(join(deployDir, inDeploy), 'utf8'),
      );
    same('kube-scheduler-config.yaml', 'scheduler/kube-scheduler-config.yaml');
    for (const f of ['service-monitor.yaml', 'pod-monitor.yaml', 'prometheus-rules.yaml']) {
      same(`monitoring/${f}`, `overlays/monitoring/${f}`);
    }
    for (const f of readdirSync(join(deployDir, 'overlays/dra')).filter(
      (n) => !/(kustomization|-patch)\.yaml$/.test(n),
    )) {
      same(`dra/${f}`, `overlays/dra/${f}`);
    }
    expect(readdirSync(join(chartDir, 'files', 'dra')).length).toBe(4);
  });

  it("with monitoring, yields the monitoring overlay's objects, in the release's namespace", () => {
    const overlay = objectsOfKustomization(join(deployDir, 'overlays/monitoring')).map((o) => o.object);
    const rendered = render({ values: { 'monitoring.enabled': true }, kubeVersion: BASE_SCHEDULER_TAG });
    expect(identities(rendered)).toEqual(identities(overlay.filter((o) => o.kind !== 'Namespace')));
    for (const kind of ['ServiceMonitor', 'PodMonitor', 'PrometheusRule']) {
      const o = overlay.find((x) => x.kind === kind) as K8sObject;
      expect(find(rendered, kind, o.metadata.name), kind).toEqual(o);
    }
    const moved = renderText({ namespace: 'gpu-system', values: { 'monitoring.enabled': true } });
    expect(moved).not.toContain('vcuda-system');
    expect(moved).toContain('up{job="gpu-system/vcuda-node-agent"}');
  });

  describe('with default values', () => {
    const chart = () => render({ kubeVersion: BASE_SCHEDULER_TAG });

    it("yields the kustomize base's objects, apart from the namespace the release lives in", () => {
      const expected = identities(baseObjects().filter((o) => o.kind !== 'Namespace'));
      expect(identities(chart())).toEqual(expected);
    });

    it('gives each object the same content as the base (Helm bookkeeping aside)', () => {
      expectSameContent(chart(), baseObjects());
    });

    it("runs kube-scheduler at the cluster's version, without a provider's suffix", () => {
      const image = (v: string) =>
        podSpec(render({ kubeVersion: v }), 'Deployment', 'vcuda-scheduler').containers[0]?.image;
      expect(image('v1.36.3')).toBe('registry.k8s.io/kube-scheduler:v1.36.3');
      expect(image('1.32.13')).toBe('registry.k8s.io/kube-scheduler:v1.32.13');
      expect(image('v1.33.4-eks-1234')).toBe('registry.k8s.io/kube-scheduler:v1.33.4');
    });
  });

  describe('with every value set', () => {
    const values = {
      'image.repository': 'registry.example.com/gpu/vcuda',
      'image.tag': '1.2.3',
      imagePullSecrets: [{ name: 'pull' }],
      clusterName: 'prod-eu',
      resourceDomain: 'tencent.com',
      memoryUnitMiB: 256,
      placement: 'spread',
      'database.url': 'postgres://vcuda:s3cret@db.example:5432/vcuda?sslmode=verify-full',
      'database.caSecret': 'ledger-ca',
      privilegedUsers: ['alice@example.com'],
      // Helm merges maps: null removes the default label.
      'nodeAgent.nodeSelector': { 'gpu.example.com/pool': 'shared', 'vcuda.io/node': null },
      'scheduler.image.tag': 'v1.34.2',
      'networkPolicy.webhookSources': ['10.0.0.10/32', '10.0.0.11/32'],
    };
    const text = () => renderText({ namespace: 'gpu-system', values, kubeVersion: '1.34.2' });
    const objects = () => parseManifest(text());

    it('puts everything in the release namespace, nothing in vcuda-system', () => {
      expect(text()).not.toContain('vcuda-system');
      const namespaced = objects().filter((o) => o.metadata.namespace !== undefined);
      expect(new Set(namespaced.map((o) => o.metadata.namespace))).toEqual(new Set(['gpu-system', 'kube-system']));
      const cfg = configFile(objects(), 'vcuda-scheduler-config', 'kube-scheduler-config.yaml');
      expect(cfg.extenders[0].urlPrefix).toBe('https://vcuda-control-plane.gpu-system.svc:8444/scheduler');
      expect(cfg.leaderElection.resourceNamespace).toBe('gpu-system');
    });

    it('gives the control plane, the node agents and the scheduler the same domain and memory unit', () => {
      const cp = find(objects(), 'ConfigMap', 'vcuda-control-plane')['data'] as Record<string, string>;
      expect(cp).toMatchObject({
        VCUDA_CLUSTER_NAME: 'prod-eu',
        VCUDA_RESOURCE_DOMAIN: 'tencent.com',
        VCUDA_MEMORY_UNIT_MIB: '256',
        VCUDA_PLACEMENT: 'spread',
      });
      const agent = configFile(objects(), 'vcuda-node-agent-config', 'config.yaml');
      expect(agent).toMatchObject({
        resourceDomain: 'tencent.com',
        memoryUnitMiB: 256,
        controlPlaneUrl: 'http://vcuda-control-plane.gpu-system.svc',
      });
      const sched = configFile(objects(), 'vcuda-scheduler-config', 'kube-scheduler-config.yaml');
      expect(sched.extenders[0].managedResources.map((r: { name: string }) => r.name)).toEqual([
        'tencent.com/vcuda-core',
        'tencent.com/vcuda-memory',
        ...KNOWN_MIG_PROFILES.map((p) => migResourceName(resourceNames('tencent.com'), p)),
      ]);
    });

    it('uses the image, the pull secret, the scheduler tag and the node selector given', () => {
      const agent = podSpec(objects(), 'DaemonSet', 'vcuda-node-agent');
      expect(agent.containers[0]?.image).toBe('registry.example.com/gpu/vcuda:1.2.3');
      expect(agent.initContainers?.[0]?.image).toBe('registry.example.com/gpu/vcuda:1.2.3');
      expect(agent.nodeSelector).toEqual({ 'gpu.example.com/pool': 'shared' });
      expect(podSpec(objects(), 'Deployment', 'vcuda-control-plane')).toMatchObject({
        imagePullSecrets: [{ name: 'pull' }],
      });
      expect(podSpec(objects(), 'Deployment', 'vcuda-scheduler').containers[0]?.image).toBe(
        'registry.k8s.io/kube-scheduler:v1.34.2',
      );
    });

    it('keeps the database url in a Secret and mounts its CA for verify-full', () => {
      const secret = find(objects(), 'Secret', 'vcuda-postgres');
      expect(secret['stringData']).toEqual({ url: values['database.url'] });
      const cp = podSpec(objects(), 'Deployment', 'vcuda-control-plane');
      const env = cp.containers[0]?.env ?? [];
      expect(env.find((e) => e.name === 'DATABASE_URL')?.valueFrom).toEqual({
        secretKeyRef: { name: 'vcuda-postgres', key: 'url' },
      });
      expect(env.find((e) => e.name === 'PGSSLROOTCERT')?.value).toBe('/etc/vcuda/database-ca/ca.crt');
      expect(cp.volumes?.find((v) => v.name === 'database-ca')?.secret?.secretName).toBe('ledger-ca');
    });

    it('renders configurations the control plane and the node agent accept, in the release namespace', () => {
      const env = find(objects(), 'ConfigMap', 'vcuda-control-plane')['data'] as Record<string, string>;
      const cp = loadControlPlaneConfig({
        file: configFile(objects(), 'vcuda-control-plane-file', 'config.yaml'),
        env: { ...env, DATABASE_URL: values['database.url'], VCUDA_NAMESPACE: 'gpu-system', VCUDA_INSTANCE_ID: 'p' },
      });
      expect(cp.clusterName).toBe('prod-eu');
      expect(cp.resourceDomain).toBe('tencent.com');
      expect(cp.memoryUnitMiB).toBe(256);
      expect(cp.webhook.registration?.serviceNamespace).toBe('gpu-system');
      expect(cp.webhook.certificates?.secretNamespace).toBe('gpu-system');
      const agent = parseConfig({
        file: configFile(objects(), 'vcuda-node-agent-config', 'config.yaml'),
        env: { NODE_NAME: 'n1' },
      });
      expect(agent.resourceDomain).toBe('tencent.com');
      expect(agent.memoryUnitMiB).toBe(256);
    });

    it("lets the privileged users change vcuda annotations, besides vcuda's own accounts", () => {
      const cfg = configFile(objects(), 'vcuda-control-plane-file', 'config.yaml');
      expect(cfg.webhook.privilegedUsernames).toEqual([
        'system:serviceaccount:gpu-system:vcuda-control-plane',
        'system:serviceaccount:gpu-system:vcuda-node-agent',
        'alice@example.com',
      ]);
      expect(cfg.webhook.registration.exemptNamespaces).toEqual(['kube-system', 'gpu-system']);
    });

    it('admits only the given sources to the webhook port', () => {
      const policy = find(objects(), 'NetworkPolicy', 'vcuda-control-plane') as K8sObject & {
        spec: { ingress: { from?: { ipBlock?: { cidr: string } }[]; ports: { port: string }[] }[] };
      };
      const webhook = policy.spec.ingress.find((r) => r.ports.some((p) => p.port === 'https'));
      expect(webhook?.from?.map((f) => f.ipBlock?.cidr)).toEqual(['10.0.0.10/32', '10.0.0.11/32']);
    });

    it('reads the url from an existing Secret when none is given, and creates no Secret', () => {
      const own = render({ values: { 'database.existingSecret': 'ledger', 'database.existingSecretKey': 'dsn' } });
      expect(own.some((o) => o.kind === 'Secret')).toBe(false);
      const env = podSpec(own, 'Deployment', 'vcuda-control-plane').containers[0]?.env ?? [];
      expect(env.find((e) => e.name === 'DATABASE_URL')?.valueFrom).toEqual({
        secretKeyRef: { name: 'ledger', key: 'dsn' },
      });
    });
  });

  it("with cert-manager, yields the overlay's certificates and serves from them", () => {
    const rendered = render({ values: { 'certManager.enabled': true } });
    const overlay = objectsOfKustomization(join(deployDir, 'overlays/cert-manager')).map((o) => o.object);
    expect(identities(rendered)).toEqual(identities(overlay.filter((o) => o.kind !== 'Namespace')));
    const cp = podSpec(rendered, 'Deployment', 'vcuda-control-plane');
    const env = Object.fromEntries((cp.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ VCUDA_WEBHOOK_CERT_MODE: 'files', VCUDA_EXTENDER_CERT_MODE: 'files' });
    expect(cp.volumes?.find((v) => v.name === 'webhook-tls')?.secret?.secretName).toBe('vcuda-webhook-serving');
  });

  it("recognises the API server's webhook calls by the cluster CA's client certificate or a mounted token", () => {
    const rendered = render({
      values: { 'webhookCallers.clusterCA': true, 'webhookCallers.tokenSecret': 'vcuda-webhook-caller' },
    });
    const cp = podSpec(rendered, 'Deployment', 'vcuda-control-plane');
    const env = Object.fromEntries((cp.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      VCUDA_WEBHOOK_CALLER_CA_FILE: '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
      VCUDA_WEBHOOK_CALLER_NAMES: 'kube-apiserver-kubelet-client',
      VCUDA_WEBHOOK_CALLER_TOKEN_FILE: '/etc/vcuda/webhook-caller/token',
    });
    expect(cp.volumes?.find((v) => v.name === 'webhook-caller')?.secret?.secretName).toBe('vcuda-webhook-caller');
    const plain = podSpec(render({}), 'Deployment', 'vcuda-control-plane').containers[0]?.env ?? [];
    expect(plain.filter((e) => e.name.startsWith('VCUDA_WEBHOOK_CALLER_'))).toEqual([]);
  });

  describe('in DRA mode', () => {
    const DRA = { mode: 'dra' };

    it.skipIf(!hasKubectl)(
      `yields the DRA overlay's objects as kubectl kustomize builds them, with the same content${hasKubectl ? '' : ' (skipped: no kubectl)'}`,
      () => {
        const overlay = kustomizeBuild(join(deployDir, 'overlays/dra'));
        const rendered = render({ values: DRA, kubeVersion: 'v1.36.3' });
        expect(identities(rendered)).toEqual(identities(overlay.filter((o) => o.kind !== 'Namespace')));
        expectSameContent(rendered, overlay);
      },
    );

    it('prints after an install the notes deploy/README.md shows', () => {
      const r = helm(['install', 'vcuda', chartDir, '-n', 'vcuda-system', '--set', 'mode=dra', '--dry-run=client']);
      expect(r.status, r.stderr).toBe(0);
      const notes = r.stdout.slice(r.stdout.indexOf('NOTES:\n')).trimEnd();
      expect(notes).toContain('kubectl get resourceslices --field-selector spec.driver=gpu.vcuda.io');
      expect(readFileSync(join(deployDir, 'README.md'), 'utf8')).toContain(`\`\`\`\n${notes}\n\`\`\``);
    });

    it('installs no second scheduler and routes no pod to one', () => {
      const names = (objects: K8sObject[]) =>
        objects.map((o) => o.metadata.name).filter((n) => n.includes('scheduler'));
      expect(names(render({ values: DRA }))).toEqual([]);
      expect(names(render({ values: { ...DRA, 'certManager.enabled': true } }))).toEqual([]);
      expect(names(render({}))).not.toEqual([]);
      expect(configFile(render({ values: DRA }), 'vcuda-control-plane-file', 'config.yaml').webhook).not.toHaveProperty(
        'schedulerName',
      );
    });

    describe('with another driver name, in another namespace', () => {
      const values = { ...DRA, 'dra.driverName': 'gpu.example.com', 'dra.convertPods': true };
      const text = () => renderText({ namespace: 'gpu-system', values });
      const objects = () => parseManifest(text());

      it('names the driver and the namespace everywhere, the defaults nowhere', () => {
        expect(text()).not.toMatch(/gpu\.vcuda\.io|vcuda-system/);
        const cls = find(objects(), 'DeviceClass', 'gpu.example.com');
        expect(cls['spec']).toEqual({ selectors: [{ cel: { expression: draCardSelector('gpu.example.com') } }] });
        const mig = find(objects(), 'DeviceClass', draMigClassName('gpu.example.com'));
        expect(mig['spec']).toEqual({ selectors: [{ cel: { expression: draMigSelector('gpu.example.com') } }] });
        const policy = find(
          objects(),
          'ValidatingAdmissionPolicy',
          'vcuda-node-agent-own-resourceslices',
        ) as K8sObject & {
          spec: { matchConditions: { expression: string }[]; validations: { expression: string }[] };
        };
        expect(policy.spec.matchConditions[0]?.expression).toBe(
          "request.userInfo.username == 'system:serviceaccount:gpu-system:vcuda-node-agent'",
        );
        expect(policy.spec.validations.map((v) => v.expression)).toContain(
          "variables.slice.spec.driver == 'gpu.example.com'",
        );
        const role = find(objects(), 'ClusterRole', 'vcuda-node-agent-dra') as K8sObject & {
          rules: { resources: string[]; resourceNames?: string[] }[];
        };
        expect(role.rules.find((r) => r.resources.includes('resourceclaims/driver'))?.resourceNames).toEqual([
          'gpu.example.com',
        ]);
      });

      it("renders a node agent that runs as that driver, in the kubelet's plugin directory for it", () => {
        const env = containerEnv(objects(), 'DaemonSet', 'vcuda-node-agent');
        const agent = parseConfig({
          file: configFile(objects(), 'vcuda-node-agent-config', 'config.yaml'),
          env: { ...env, NODE_NAME: 'n1' },
        });
        expect(agent.mode).toBe('dra');
        expect(agent.dra.driverName).toBe('gpu.example.com');
        const spec = podSpec(objects(), 'DaemonSet', 'vcuda-node-agent');
        const mounted = (name: string) => ({
          host: spec.volumes?.find((v) => v.name === name)?.hostPath?.path,
          container: spec.containers[0]?.volumeMounts?.find((m) => m.name === name)?.mountPath,
        });
        expect(mounted('dra-plugin')).toEqual({
          host: join(agent.dra.pluginsDir, 'gpu.example.com'),
          container: join(agent.dra.pluginsDir, 'gpu.example.com'),
        });
        expect(mounted('plugins-registry')).toEqual({
          host: agent.dra.pluginsRegistryDir,
          container: agent.dra.pluginsRegistryDir,
        });
      });

      it('renders a control plane that registers the claim hooks for that class and driver, and converts pods', () => {
        const env = find(objects(), 'ConfigMap', 'vcuda-control-plane')['data'] as Record<string, string>;
        const cp = loadControlPlaneConfig({
          file: configFile(objects(), 'vcuda-control-plane-file', 'config.yaml'),
          env: { ...env, VCUDA_NAMESPACE: 'gpu-system', VCUDA_INSTANCE_ID: 'p' },
        });
        expect(cp.webhook.claims).toEqual({
          register: true,
          deviceClassName: 'gpu.example.com',
          driverName: 'gpu.example.com',
        });
        expect(cp.webhook.dra?.convertPods).toBe(true);
        expect(cp.webhook.schedulerName).toBeUndefined();
        const plain = find(render({ values: DRA }), 'ConfigMap', 'vcuda-control-plane')['data'];
        expect(plain).not.toHaveProperty('VCUDA_WEBHOOK_DRA_CONVERT_PODS');
      });
    });
  });

  it("passes the node agent's sensor, MIG and DRA card settings through, and the pods' DRA label", () => {
    const values = {
      mode: 'dra',
      'nodeAgent.computeSensor': 'nvml',
      'nodeAgent.mig.shared': [{ profile: '3g.40gb' }, { card: 1, start: 4 }],
      'nodeAgent.mig.dynamicCards': [2, 3],
      'dra.unhealthyCards': 'withdraw',
      'dra.convertPods': true,
      'dra.modeLabel': 'gpu.vcuda.io/mode',
    };
    const objects = render({ values, kubeVersion: 'v1.36.3' });
    const agent = parseConfig({
      file: configFile(objects, 'vcuda-node-agent-config', 'config.yaml'),
      env: { ...containerEnv(objects, 'DaemonSet', 'vcuda-node-agent'), NODE_NAME: 'n1' },
    });
    expect(agent.computeSensor).toBe('nvml');
    expect(agent.mig.shared).toEqual([{ profile: '3g.40gb' }, { card: 1, start: 4 }]);
    expect(agent.mig.dynamicCards).toEqual([2, 3]);
    expect(agent.dra.unhealthyCards).toBe('withdraw');
    const all = parseConfig({
      file: configFile(
        render({ values: { 'nodeAgent.mig.dynamicCards': 'all' } }),
        'vcuda-node-agent-config',
        'config.yaml',
      ),
      env: { NODE_NAME: 'n1' },
    });
    expect(all.mig.dynamicCards).toBe('all');
    const env = find(objects, 'ConfigMap', 'vcuda-control-plane')['data'] as Record<string, string>;
    const cp = loadControlPlaneConfig({
      file: configFile(objects, 'vcuda-control-plane-file', 'config.yaml'),
      env: { ...env, VCUDA_NAMESPACE: 'vcuda-system', VCUDA_INSTANCE_ID: 'p' },
    });
    expect(cp.webhook.dra?.modeLabel).toBe('gpu.vcuda.io/mode');
    // A changed setting rolls the node agents.
    const checksum = (o: K8sObject[]) =>
      (
        find(o, 'DaemonSet', 'vcuda-node-agent') as K8sObject & {
          spec: { template: { metadata: { annotations: Record<string, string> } } };
        }
      ).spec.template.metadata.annotations['checksum/config'];
    expect(checksum(objects)).not.toBe(
      checksum(render({ values: { ...values, 'nodeAgent.computeSensor': 'in-process' }, kubeVersion: 'v1.36.3' })),
    );
  });

  describe('refuses values it cannot honour, naming them', () => {
    it.each([
      [{ mode: 'gpu' }, /\/mode': value must be one of 'extender', 'dra'/],
      [{ 'dra.convertPods': true }, /dra.convertPods: true needs mode: "dra" .*, and mode is "extender"/],
      [{ mode: 'dra', 'dra.driverName': 'GPU' }, /\/dra\/driverName': 'GPU' does not match pattern/],
      [{ mode: 'dra', 'dra.driver': 'gpu.example.com' }, /\/dra': additional properties 'driver' not allowed/],
      [{ memoryUnitMiB: 0 }, /\/memoryUnitMiB': minimum: got 0, want 1/],
      [{ resourceDomain: 'NVIDIA' }, /\/resourceDomain'/],
      [{ 'database.url': 'mysql://db/vcuda' }, /\/database\/url'/],
      [{ 'database.existingSecret': '' }, /database: the quota ledger needs PostgreSQL/],
      [{ 'networkPolicy.webhookSources': ['api-server'] }, /\/networkPolicy\/webhookSources\/0'/],
      [{ replicas: 3 }, /additional properties 'replicas' not allowed/],
      [{ 'nodeAgent.computeSensor': 'dcgm' }, /\/nodeAgent\/computeSensor': value must be one of 'in-process', 'nvml'/],
      [{ 'nodeAgent.mig.shared': [{ size: '3g' }] }, /\/nodeAgent\/mig\/shared\/0'/],
      [{ 'nodeAgent.mig.dynamicCards': 'some' }, /\/nodeAgent\/mig\/dynamicCards'/],
      [{ 'dra.unhealthyCards': 'drain' }, /\/dra\/unhealthyCards'/],
      [
        { mode: 'dra', 'dra.modeLabel': 'gpu.vcuda.io/mode' },
        /dra.modeLabel: "gpu.vcuda.io\/mode" chooses which pods are converted, so it needs dra.convertPods: true/,
      ],
    ])('%j', (values, message) => {
      expect(renderFailure(values)).toMatch(message);
    });

    it('mode: dra on a cluster without resource.k8s.io/v1', () => {
      expect(renderFailure({ mode: 'dra' }, 'v1.33.4')).toMatch(
        /mode: "dra" needs resource.k8s.io\/v1 .*, and this cluster is v1.33.4; use mode: extender/,
      );
      expect(helm(templateArgs({ values: { mode: 'dra' }, kubeVersion: 'v1.34.0' })).status).toBe(0);
    });
  });
});

/**
 * The real API servers: each started once for this file (~10-20 s), the namespace applied from the
 * base (its PodSecurity labels, as the install guide does), then the chart's default rendering
 * dry-run applied server-side. Helm reads the server's version itself (`--dry-run=server`).
 */
const RIGS = ['1.32', '1.36'].map((minor) => {
  const dir = join(repoRoot, '..', 'shared', `kubernetes-${minor}`);
  const etcd = spawnSync('sh', ['-c', 'command -v etcd'], { encoding: 'utf8' }).status === 0;
  const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
  const reason =
    skip ??
    (!existsSync(join(dir, 'cluster.sh'))
      ? `no ${dir}`
      : !kubectl
        ? 'no kubectl'
        : !etcd && process.getuid?.() !== 0
          ? 'no etcd (cluster.sh installs it only as root)'
          : undefined);
  return { minor, dir, reason };
});

describe.each(RIGS)('kube-apiserver $minor', ({ minor, dir, reason }) => {
  const work = mkdtempSync(join(tmpdir(), `vcuda-helm-k8s-${minor}-`));
  let kubeconfig = '';
  let serverVersion = '';
  const kubectl = (args: string[], input?: string) =>
    spawnSync('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8', input });

  beforeAll(() => {
    if (reason) return;
    // Only the API server answers a dry run: 1.36 starts a scheduler and controller-manager unless told not to.
    const only = minor === '1.32' ? [] : ['--no-scheduler', '--no-controller-manager'];
    const out = execFileSync(join(dir, 'cluster.sh'), ['start', work, ...only], { encoding: 'utf8', timeout: 150_000 });
    kubeconfig = /KUBECONFIG=(\S+)/.exec(out)?.[1] ?? join(work, 'admin.kubeconfig');
    const v = JSON.parse(kubectl(['version', '-o', 'json']).stdout) as { serverVersion: { gitVersion: string } };
    serverVersion = v.serverVersion.gitVersion;
    const ns = kubectl(['apply', '-f', join(base, 'namespace.yaml')]);
    if (ns.status !== 0) throw new Error(`namespace: ${ns.stderr}`);
  }, 180_000);

  afterAll(() => {
    if (!reason) spawnSync(join(dir, 'cluster.sh'), ['stop', work], { timeout: 60_000 });
    rmSync(work, { recursive: true, force: true });
  }, 90_000);

  it.skipIf(reason !== undefined)(
    `accepts the default rendering (server-side dry run)${reason ? ` (skipped: ${reason})` : ''}`,
    () => {
      const text = execFileSync(
        helmBinary(),
        templateArgs({ args: ['--dry-run=server', '--kubeconfig', kubeconfig] }),
        { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 },
      );
      const objects = parseManifest(text);
      expect(podSpec(objects, 'Deployment', 'vcuda-scheduler').containers[0]?.image).toBe(
        `registry.k8s.io/kube-scheduler:${serverVersion.replace(/[-+].*$/, '')}`,
      );
      const applied = kubectl(['apply', '--dry-run=server', '-f', '-'], text);
      expect(applied.stderr.replace(/^Warning: .*\n/gm, '')).toBe('');
      expect(applied.status).toBe(0);
      expect(applied.stdout.trim().split('\n')).toHaveLength(objects.length);
    },
    120_000,
  );

  it.skipIf(reason !== undefined)(
    minor === '1.32' ? 'refuses mode: dra, naming its version' : 'renders mode: dra against it',
    () => {
      const r = helm(templateArgs({ values: { mode: 'dra' }, args: ['--dry-run=server', '--kubeconfig', kubeconfig] }));
      if (minor === '1.32') {
        expect(r.status).not.toBe(0);
        expect(r.stderr).toContain(`needs resource.k8s.io/v1 with consumable capacity`);
        expect(r.stderr).toContain(`and this cluster is ${serverVersion}; use mode: extender`);
      } else {
        // What the 1.36 API server makes of it: test/deploy/dra-install-real.test.ts.
        expect(r.status, r.stderr).toBe(0);
      }
    },
    60_000,
  );

  it.skipIf(reason !== undefined)(
    'accepts the kustomize base too (server-side dry run)',
    () => {
      const applied = kubectl(['apply', '--dry-run=server', '-k', base]);
      expect(applied.stderr.replace(/^Warning: .*\n/gm, '')).toBe('');
      expect(applied.status).toBe(0);
    },
    120_000,
  );

  it.skipIf(reason !== undefined)(
    'installs, and an upgrade keeps the signing keys the control plane published',
    () => {
      const install = helm(['install', 'vcuda', chartDir, '-n', 'vcuda-system', '--kubeconfig', kubeconfig]);
      expect(install.status, install.stderr).toBe(0);
      const published =
        '{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"k1"}]}';
      const jwks = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'vcuda-jwks', namespace: 'vcuda-system' } };
      expect(
        kubectl(['replace', '-f', '-'], JSON.stringify({ ...jwks, data: { 'jwks.json': published } })).status,
      ).toBe(0);
      const upgrade = helm([
        'upgrade',
        'vcuda',
        chartDir,
        '-n',
        'vcuda-system',
        '--kubeconfig',
        kubeconfig,
        '--reuse-values',
        '--set',
        'logLevel=debug',
      ]);
      expect(upgrade.status, upgrade.stderr).toBe(0);
      const live = kubectl([
        '-n',
        'vcuda-system',
        'get',
        'configmap',
        'vcuda-jwks',
        '-o',
        'jsonpath={.data.jwks\\.json}',
      ]);
      expect(live.stdout).toBe(published);
      expect(helm(['uninstall', 'vcuda', '-n', 'vcuda-system', '--kubeconfig', kubeconfig]).status).toBe(0);
    },
    120_000,
  );
});
