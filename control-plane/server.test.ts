import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { eventReasons, podEvent, vcudaAnnotations, verifyAssignment } from '../contract/index.js';
import { closeDb, connectDb, type VcudaDb } from '../db/connect.js';
import { migrate } from '../db/migrate.js';
import { forgedPlainPod, gpuNode, gpuPod } from '../test/support/control-plane/builders.js';
import { type FakeKubeApi, startFakeKubeApi } from '../test/support/control-plane/fake-kube-api.js';
import { postTls, type TlsClient } from '../test/support/control-plane/tls-request.js';
import { loadControlPlaneConfig } from './config.js';
import type { Overview } from './dashboard/overview.js';
import { type RunningControlPlane, startControlPlane } from './server.js';
import { JWKS_CONFIGMAP_NAME, SIGNING_SECRET_NAME } from './signing-keys.js';

const now = new Date('2026-11-22T04:00:30Z');
const silent = { logLevel: 'silent' as const, port: 0, httpsPort: 0, host: '127.0.0.1', extender: { port: 0 } };

async function postJson(url: string, body: unknown, client: TlsClient) {
  const res = await postTls(url, body, client);
  return { status: res.status, json: res.json() as Record<string, unknown> };
}

describe('startControlPlane', () => {
  // One migrated database for the file: migrating PGlite is the slow part of a start.
  let db: VcudaDb;
  beforeAll(async () => {
    db = await connectDb({});
    await migrate(db);
  });
  afterAll(async () => {
    await closeDb(db);
  });
  let cp: RunningControlPlane | undefined;
  let api: FakeKubeApi | undefined;
  afterEach(async () => {
    await cp?.close();
    await api?.close();
    cp = undefined;
    api = undefined;
  });

  it('runs without a cluster: filter and bind over TLS with its ephemeral client certificate, metrics, clean close', async () => {
    const config = loadControlPlaneConfig({
      flags: { ...silent, kube: { mode: 'none' }, signingKeys: { source: 'ephemeral' } },
    });
    cp = await startControlPlane(config, { db, clock: () => now });
    const state = cp.state;
    state.upsertNode(gpuNode({ name: 'n1', cards: 1 }));
    const pod = gpuPod('p', [{ core: 30, memoryMiB: 1024 }]);
    state.upsertPod(pod);
    const client = cp.extenderClient as TlsClient;
    expect(client).toBeDefined();

    const filter = await postJson(
      `${cp.extenderUrl}/scheduler/filter`,
      { Pod: pod, Nodes: null, NodeNames: ['n1'] },
      client,
    );
    expect(filter.json.NodeNames).toEqual(['n1']);
    const bind = await postJson(
      `${cp.extenderUrl}/scheduler/bind`,
      { PodName: 'p', PodNamespace: 'default', PodUID: 'uid-p', Node: 'n1' },
      client,
    );
    expect(bind.json).toEqual({ Error: '' });
    const bound = state.pod('default', 'p');
    expect(bound?.spec?.nodeName).toBe('n1');
    const a = await verifyAssignment(bound?.metadata?.annotations?.[vcudaAnnotations.assignment] as string, cp.jwks, {
      podUid: 'uid-p',
      node: 'n1',
      nowSeconds: now.getTime() / 1000,
    });
    expect(a.containers[0]?.cards[0]?.core).toBe(30);

    const metrics = await (await fetch(`${cp.url}/metrics`)).text();
    expect(metrics).toContain('vcuda_extender_binds_total{result="bound"} 1');
    expect(metrics).toContain('vcuda_extender_request_duration_seconds_bucket');
    expect(metrics).toContain('vcuda_watch_cache_nodes 1');
    expect((await fetch(`${cp.url}/readyz`)).status).toBe(200);
    expect((await fetch(`${cp.url}/api/v1/reports`)).status).toBe(200);
  });

  it('in a cluster: creates the shared signing keys once and publishes the JWKS ConfigMap', async () => {
    api = await startFakeKubeApi();
    api.putNode(gpuNode({ name: 'n1', cards: 1 }));
    const config = loadControlPlaneConfig({
      flags: { ...silent, kube: { mode: 'kubeconfig' }, namespace: 'vcuda-system' },
    });
    cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig, clock: () => now });
    expect(api.secrets.has(`vcuda-system/${SIGNING_SECRET_NAME}`)).toBe(true);
    const cm = api.configMaps.get(`vcuda-system/${JWKS_CONFIGMAP_NAME}`) as unknown as { data: Record<string, string> };
    expect(JSON.parse(cm.data['jwks.json'] as string)).toEqual(cp.jwks);
    const first = cp.jwks;
    await cp.close();
    // A second replica (or a restart) signs with the same keys.
    cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig, clock: () => now });
    expect(cp.jwks).toEqual(first);
    for (let i = 0; i < 100 && (await fetch(`${cp.url}/readyz`)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(cp.state.snapshot().nodes.has('n1')).toBe(true);
  });
  it('in a cluster: a forged assignment holds nothing, gets one Warning Event and is counted', async () => {
    api = await startFakeKubeApi();
    api.putNode(gpuNode({ name: 'n8', cards: 8 }));
    const forged = forgedPlainPod('n8');
    api.putPod(forged);
    const config = loadControlPlaneConfig({
      flags: { ...silent, kube: { mode: 'kubeconfig' }, namespace: 'vcuda-system' },
    });
    cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig, clock: () => now });
    for (let i = 0; i < 100 && (await fetch(`${cp.url}/readyz`)).status !== 200; i++)
      await new Promise((r) => setTimeout(r, 20));
    const warnings = () =>
      api?.events.filter((e) => (e as { reason?: string }).reason === eventReasons.assignmentUnverified) ?? [];
    for (let i = 0; i < 100 && warnings().length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    // The pod changes again (another annotation): judged again, reported no more.
    const annotations = { ...forged.metadata?.annotations, touched: 'yes' };
    api.putPod({ ...forged, metadata: { ...forged.metadata, annotations } });
    for (let i = 0; i < 100 && cp.state.pod('default', 'forger')?.metadata?.annotations?.touched !== 'yes'; i++)
      await new Promise((r) => setTimeout(r, 20));
    await cp.state.settled();
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({
      type: 'Warning',
      involvedObject: { namespace: 'default', name: 'forger', uid: 'uid-forger' },
      message: expect.stringMatching(/^assignment ignored \(malformed\): .*it holds no GPU capacity$/),
    });
    expect(cp.state.snapshot().nodes.get('n8')?.totals.usedCore).toBe(0);
    const metrics = await (await fetch(`${cp.url}/metrics`)).text();
    expect(metrics).toContain('vcuda_unverified_assignments_total{reason="malformed"} 1');
  });

  it('in a cluster: keeps the scheduler’s client certificate in a Secret, and serves the extender to it', async () => {
    api = await startFakeKubeApi();
    api.putNode(gpuNode({ name: 'n1', cards: 1 }));
    const config = loadControlPlaneConfig({
      flags: { ...silent, kube: { mode: 'kubeconfig' }, namespace: 'vcuda-system' },
    });
    cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig, clock: () => now });
    expect(cp.extenderClient).toBeUndefined();
    const secret = api.secrets.get('vcuda-system/vcuda-extender-tls') as unknown as { data: Record<string, string> };
    expect(Object.keys(secret.data).sort()).toEqual(['ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
    const pem = (k: string) => Buffer.from(secret.data[k] as string, 'base64').toString('utf8');
    // What the scheduler mounts (tls.crt, tls.key, ca.crt), reaching the Service by its DNS name.
    const client = {
      certPem: pem('tls.crt'),
      keyPem: pem('tls.key'),
      caPem: pem('ca.crt'),
      servername: 'vcuda-control-plane.vcuda-system.svc',
    };
    const filter = await postJson(
      `${cp.extenderUrl}/scheduler/filter`,
      { Pod: gpuPod('p', [{ core: 30, memoryMiB: 1024 }]), Nodes: null, NodeNames: ['n1'] },
      client,
    );
    expect(filter.status).toBe(200);
    const first = secret.data['tls.crt'];
    await cp.close();
    // Another replica (or a restart) adopts the same CA and client certificate.
    cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig, clock: () => now });
    const again = api.secrets.get('vcuda-system/vcuda-extender-tls') as unknown as { data: Record<string, string> };
    expect(again.data['tls.crt']).toBe(first);
    expect((await postTls(`${cp.extenderUrl}/scheduler/bind`, {}, client)).status).toBe(400);
  });
  it('in a cluster: the dashboard lists refusals other processes emitted and idle nodes from the watch cache', async () => {
    api = await startFakeKubeApi();
    // A node that never had a bind: the ledger does not know it, only the watch cache does.
    api.putNode(gpuNode({ name: 'idle-1', cards: 2 }));
    const config = loadControlPlaneConfig({
      flags: { ...silent, kube: { mode: 'kubeconfig' }, namespace: 'vcuda-system', clusterName: 'east' },
    });
    // The overview is cached per clock second; a moving clock lets each poll load afresh.
    let tick = now.getTime();
    const clock = () => {
      tick += 2000;
      return new Date(tick);
    };
    cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig, clock });
    // The node agent, not this replica, reports a refused Allocate.
    const event = podEvent(
      { namespace: 'team-a', name: 'trainer-0', uid: 'uid-trainer-0' },
      eventReasons.allocateFailed,
      'Allocate of 30 core on node idle-1 is ambiguous',
      { type: 'Warning', component: 'vcuda-node-agent', host: 'idle-1', now, nameSuffix: 'a1' },
    );
    const posted = await fetch(`${api.url}/api/v1/namespaces/team-a/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(event),
    });
    expect(posted.status).toBe(201);

    let overview: Overview | undefined;
    for (let i = 0; i < 200; i++) {
      overview = (await (await fetch(`${cp.url}/ui/overview`)).json()) as Overview;
      const hasNode = overview.clusters.some((c) => c.nodes.some((n) => n.name === 'idle-1'));
      if (hasNode && overview.refusals.length > 0) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(overview?.refusals).toContainEqual(
      expect.objectContaining({
        stage: 'allocate',
        cluster: 'east',
        namespace: 'team-a',
        pod: 'trainer-0',
        reason: 'VcudaAllocateFailed',
      }),
    );
    const east = overview?.clusters.find((c) => c.name === 'east');
    const idle = east?.nodes.find((n) => n.name === 'idle-1');
    expect(idle?.cards.map((c) => c.healthy)).toEqual([true, true]);
  });
});
