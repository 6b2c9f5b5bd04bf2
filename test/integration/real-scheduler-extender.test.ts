/**
 * The real kube-scheduler (v1.32, ../shared/kubernetes-1.32) with the shipped
 * KubeSchedulerConfiguration reaches the control plane's extender listener through `tlsConfig`:
 * it presents the client certificate the Secret volume holds, verifies the extender by the
 * Service's name, and filter and bind are answered. The same mechanism the simulated scheduler
 * uses, checked against the component it stands in for. Skipped where etcd is not installed.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import type { ClusterState } from '../../control-plane/cluster-state.js';
import type { PodWithStatus } from '../../control-plane/placement/cluster-snapshot.js';
import { type RunningControlPlane, startControlPlane } from '../../control-plane/server.js';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { issueCertificateAuthority, issueLeafCertificate, serviceDnsNames } from '../../webhooks/certificates.js';
import { deployDir } from '../deploy/manifests.js';
import { gpuNode } from '../support/control-plane/builders.js';
import { extenderFilesConfig } from '../support/control-plane/extender-config.js';
import { TEST_NOW } from '../support/control-plane/extender-harness.js';

const CLUSTER_SH = join(deployDir, '..', '..', 'shared', 'kubernetes-1.32', 'cluster.sh');
const canRun = existsSync(CLUSTER_SH) && ['/usr/bin/etcd', '/usr/local/bin/etcd'].some((p) => existsSync(p));
const SERVICE_HOST = 'vcuda-control-plane.vcuda-system.svc';

describe.skipIf(!canRun)('the real kube-scheduler calls the extender with its client certificate', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-real-scheduler-'));
  let db: VcudaDb;
  let cp: RunningControlPlane;
  let state: ClusterState;

  /** The CA, the extender's serving certificate and the scheduler's files (what the Secret volume holds). */
  async function writeCertificates(): Promise<{ serving: string; tls: string }> {
    const until = new Date(Date.now() + 86_400_000);
    const ca = await issueCertificateAuthority('test extender CA', new Date(), until);
    const dnsNames = serviceDnsNames({ name: 'vcuda-control-plane', namespace: 'vcuda-system' });
    const serving = await issueLeafCertificate(ca, { dnsNames, ipAddresses: [], usage: 'server' }, new Date(), until);
    const client = await issueLeafCertificate(
      ca,
      { commonName: 'vcuda-scheduler', dnsNames: ['vcuda-scheduler'], ipAddresses: [], usage: 'client' },
      new Date(),
      until,
    );
    const files = {
      serving: { 'tls.crt': serving.certPem, 'tls.key': serving.keyPem, 'ca.crt': ca.certPem },
      tls: { 'tls.crt': client.certPem, 'tls.key': client.keyPem, 'ca.crt': ca.certPem },
    };
    for (const [sub, content] of Object.entries(files)) {
      mkdirSync(join(dir, sub));
      for (const [name, text] of Object.entries(content)) writeFileSync(join(dir, sub, name), text, { mode: 0o600 });
    }
    return { serving: join(dir, 'serving'), tls: join(dir, 'tls') };
  }

  /** deploy/scheduler's configuration, pointed at this extender, with the volume's files where they lie here. */
  function schedulerConfig(extenderPort: number, tlsDir: string, kubeconfig: string): string {
    const cfg = parseYaml(readFileSync(join(deployDir, 'scheduler', 'kube-scheduler-config.yaml'), 'utf8'));
    const ext = cfg.extenders[0];
    expect(new URL(ext.urlPrefix).hostname).toBe(SERVICE_HOST);
    ext.urlPrefix = `https://127.0.0.1:${extenderPort}/scheduler`;
    const local = (p: string) => join(tlsDir, p.slice(p.lastIndexOf('/') + 1));
    ext.tlsConfig = {
      certFile: local(ext.tlsConfig.certFile),
      keyFile: local(ext.tlsConfig.keyFile),
      caFile: local(ext.tlsConfig.caFile),
      // DNS would have resolved the Service's name to this listener.
      serverName: SERVICE_HOST,
    };
    const path = join(dir, 'kube-scheduler-config.yaml');
    writeFileSync(
      path,
      stringify({ ...cfg, leaderElection: { leaderElect: false }, clientConnection: { kubeconfig } }),
    );
    return path;
  }

  beforeAll(async () => {
    db = await connectDb({});
    await migrate(db);
    const files = await writeCertificates();
    // Any free port, bound by the server itself; the scheduler is pointed at the one it got.
    const config = extenderFilesConfig(files.serving, 0);
    cp = await startControlPlane(config, { db, clock: () => TEST_NOW });
    const extenderPort = Number(new URL(cp.extenderUrl).port);
    state = cp.state;
    state.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const k8s = join(dir, 'k8s');
    const config2 = schedulerConfig(extenderPort, files.tls, join(k8s, 'scheduler.kubeconfig'));
    execFileSync(CLUSTER_SH, ['start', k8s, '--scheduler-config', config2], { stdio: 'ignore', timeout: 120_000 });
  }, 180_000);

  afterAll(async () => {
    if (existsSync(join(dir, 'k8s'))) execFileSync(CLUSTER_SH, ['stop', join(dir, 'k8s')], { stdio: 'ignore' });
    await cp?.close();
    await closeDb(db);
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('filters and binds a vcuda pod of the real scheduler’s queue', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(join(dir, 'k8s', 'admin.kubeconfig'));
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNode({ body: { metadata: { name: 'n1', labels: { 'kubernetes.io/hostname': 'n1' } } } });
    const resources = { 'nvidia.com/vcuda-core': '800', 'nvidia.com/vcuda-memory': '81920' };
    const allocatable = { cpu: '8', memory: '32Gi', pods: '110', ...resources };
    const ready = { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'ready' };
    await core.replaceNodeStatus({
      name: 'n1',
      body: {
        ...(await core.readNode({ name: 'n1' })),
        status: { capacity: allocatable, allocatable, conditions: [ready] },
      },
    });
    // No controller-manager removes the new node's not-ready taint.
    const node = await core.readNode({ name: 'n1' });
    await core.replaceNode({ name: 'n1', body: { ...node, spec: { ...node.spec, taints: [] } } });
    const limits = { 'nvidia.com/vcuda-core': '30', 'nvidia.com/vcuda-memory': '1024' };
    const pod = await core.createNamespacedPod({
      namespace: 'default',
      body: {
        metadata: { name: 'p' },
        spec: { schedulerName: 'vcuda-scheduler', containers: [{ name: 'c', image: 'x', resources: { limits } }] },
      },
    });
    // The extender's view of the pod (kube.mode none: no watch); its bind lands in this view.
    state.upsertPod(JSON.parse(JSON.stringify(pod)) as PodWithStatus);

    const metrics = async () => (await fetch(`${cp.url}/metrics`)).text();
    await expect
      .poll(metrics, { timeout: 30_000, interval: 250 })
      .toContain('vcuda_extender_binds_total{result="bound"} 1');
    expect(await metrics()).toMatch(/vcuda_extender_request_duration_seconds_count\{verb="filter"\} [1-9]/);
    expect(state.pod('default', 'p')?.spec?.nodeName).toBe('n1');
  }, 60_000);
});
