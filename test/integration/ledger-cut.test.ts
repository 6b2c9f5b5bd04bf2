/**
 * The ledger cut mid-run. A TCP proxy the test controls sits between the control plane and a real
 * PostgreSQL; once the control plane runs, the proxy either refuses connections (the server is
 * gone) or black-holes them (a partition: accepted, nothing passes). Each hook must answer within
 * its deadline with the documented behaviour:
 *
 * - mutate: admitted and patched without the quota pre-check, with a warning (the pre-check
 *   fails open; the reservation at bind is the real gate);
 * - validate and filter: never read the ledger, unaffected;
 * - bind: fails with an error for kube-scheduler (which retries), leaving nothing behind: the
 *   pod unbound, no assignment written, and a reservation that commits late released;
 * - /readyz: 503 naming the ledger while it is cut, 200 again once it is back.
 *
 * Needs PostgreSQL (PGlite has no network to cut); skipped, and says so, when unreachable.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { vcudaAnnotations } from '../../contract/index.js';
import type { ClusterState } from '../../control-plane/cluster-state.js';
import { loadControlPlaneConfig } from '../../control-plane/config.js';
import { type RunningControlPlane, startControlPlane } from '../../control-plane/server.js';
import { closeDb, connectDb, rowsOf } from '../../db/connect.js';
import type { AdmissionReviewOut } from '../../webhooks/admission-review.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { pod } from '../builders/pod.js';
import { gpuNode, gpuPod } from '../support/control-plane/builders.js';
import { postTls, type TlsClient } from '../support/control-plane/tls-request.js';
import { createTestDatabase, postgresForTests, type TestDatabase } from '../support/db/test-databases.js';
import { type ProxyMode, startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const CALL_TIMEOUT_MS = 400;
/** Each answer's bound: its deadline(s) plus room for a busy two-core test machine. */
const MUTATE_WITHIN_MS = CALL_TIMEOUT_MS + 1500;
/** Bind may meet two deadlines: the node's registration and the reservation. */
const BIND_WITHIN_MS = 2 * CALL_TIMEOUT_MS + 1500;
const QUICK_MS = 1000;

const reachable = await postgresForTests();

async function timed<T>(run: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await run();
  return { value, ms: performance.now() - started };
}

/** Admission on the webhook's HTTPS port, the extender verbs on theirs with the scheduler's certificate. */
async function post(url: string, body: unknown, client: TlsClient): Promise<Record<string, unknown>> {
  const res = await postTls(url, body, client);
  expect(res.status).toBe(200);
  return res.json() as Record<string, unknown>;
}

/** The webhook's serving certificate, trusted through its CA, as the API server would. */
async function webhookFiles(): Promise<{ certificates: Record<string, string>; caPem: string }> {
  const issued = await issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 30, new Date());
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-cut-tls-'));
  const files = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key'), caFile: join(dir, 'ca.crt') };
  writeFileSync(files.certFile, issued.certPem);
  writeFileSync(files.keyFile, issued.keyPem);
  writeFileSync(files.caFile, issued.caPem);
  return { certificates: { mode: 'files', ...files }, caPem: issued.caPem };
}

function review(operation: 'CREATE' | 'UPDATE', object: object, oldObject?: object) {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `review-${operation}`,
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace: 'team-a',
      operation,
      userInfo: { username: 'alice', groups: ['system:authenticated'] },
      object,
      ...(oldObject ? { oldObject } : {}),
      dryRun: false,
    },
  };
}

async function waitFor(what: string, withinMs: number, check: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < withinMs) {
    if (await check()) return performance.now() - started;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what}: not within ${withinMs} ms`);
}

describe.skipIf(!reachable)('the ledger cut mid-run', () => {
  let t: TestDatabase;
  let proxy: TcpProxy;
  let cp: RunningControlPlane | undefined;
  let cluster = '';

  beforeAll(async () => {
    t = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await t?.drop();
  });
  afterEach(async () => {
    await cp?.close();
    await proxy?.close();
    cp = undefined;
  });

  async function start(): Promise<{
    cp: RunningControlPlane;
    state: ClusterState;
    webhook: TlsClient;
    extender: TlsClient;
  }> {
    const tls = await webhookFiles();
    const upstream = new URL(t.url as string);
    proxy = await startTcpProxy({ host: upstream.hostname, port: Number(upstream.port || 5432) });
    const viaProxy = new URL(upstream);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    cluster = `cut-${Math.random().toString(36).slice(2, 8)}`;
    const config = loadControlPlaneConfig({
      flags: {
        logLevel: 'silent',
        port: 0,
        // Served; the server binds any free port (the override below).
        httpsPort: 8443,
        host: '127.0.0.1',
        extender: { port: 0 },
        webhook: { certificates: tls.certificates },
        clusterName: cluster,
        kube: { mode: 'none' },
        signingKeys: { source: 'ephemeral' },
        database: {
          url: viaProxy.toString(),
          maxConnections: 4,
          connectTimeoutSeconds: 1,
          callTimeoutMs: CALL_TIMEOUT_MS,
        },
      },
    });
    cp = await startControlPlane(config, { httpsPort: 0 });
    const state = cp.state;
    // Card ids are global in the ledger: each run gets its own node, so its own cards.
    state.upsertNode(gpuNode({ name: cluster, cards: 2, heartbeat: new Date() }));
    return { cp, state, webhook: { caPem: tls.caPem }, extender: cp.extenderClient as TlsClient };
  }

  const bindArgs = (name: string) => ({ PodName: name, PodNamespace: 'default', PodUID: `uid-${name}`, Node: cluster });

  async function liveRows(podUid: string): Promise<number> {
    const rows = rowsOf<{ n: number }>(
      await t.db.execute(
        sql`select count(*)::int as n from allocations
            where cluster = ${cluster} and pod_uid = ${podUid} and state <> 'released'`,
      ),
    );
    return rows[0]?.n ?? 0;
  }

  it.each<ProxyMode>(['refuse', 'blackhole'])(
    '%s: every hook answers in time as documented, readiness follows',
    async (cut) => {
      const { cp, state, webhook, extender } = await start();
      const mutateUrl = `${cp.httpsUrl}/admission/mutate`;
      const gpu = pod('trainer').share(30, 1024).obj();

      // Before the cut: ready, the pre-check runs, a bind lands in the ledger.
      await waitFor('ready before the cut', 5000, async () => (await fetch(`${cp.url}/readyz`)).status === 200);
      const before = (await post(mutateUrl, review('CREATE', gpu), webhook)) as unknown as AdmissionReviewOut;
      expect(before.response.allowed).toBe(true);
      expect(before.response.warnings ?? []).toEqual([]);
      state.upsertPod(gpuPod('a', [{ core: 30, memoryMiB: 1024 }]));
      expect(await post(`${cp.extenderUrl}/scheduler/bind`, bindArgs('a'), extender)).toEqual({ Error: '' });
      expect(await liveRows('uid-a')).toBe(1);

      await proxy.setMode(cut);

      // mutate: admitted and patched within its deadline, without the pre-check, saying so. (A
      // pod of another size: the same size's "ok" from before the cut may be reused for 1 s.)
      const other = pod('trainer').share(40, 1024).obj();
      const mutate = await timed(() => post(mutateUrl, review('CREATE', other), webhook));
      expect(mutate.ms).toBeLessThan(MUTATE_WITHIN_MS);
      const mutated = mutate.value as unknown as AdmissionReviewOut;
      expect(mutated.response.allowed).toBe(true);
      expect(mutated.response.patch).toBeTruthy();
      // Refused connections fail at once, silent ones meet the deadline.
      const why =
        cut === 'refuse'
          ? 'the ledger failed|no answer from the ledger within \\d+ ms'
          : 'no answer from the ledger within \\d+ ms';
      expect(mutated.response.warnings).toHaveLength(1);
      expect(mutated.response.warnings?.[0]).toMatch(
        new RegExp(`^quota pre-check skipped \\((${why})\\); the ledger checks the quota at bind$`),
      );

      // validate: no ledger involved; a forged assignment is still refused at once.
      const forged = pod('trainer').share(30, 1024).annotate(vcudaAnnotations.assignment, 'x.y.z').obj();
      const validate = await timed(() =>
        post(`${cp.httpsUrl}/admission/validate`, review('UPDATE', forged, gpu), webhook),
      );
      expect(validate.ms).toBeLessThan(QUICK_MS);
      expect((validate.value as unknown as AdmissionReviewOut).response.allowed).toBe(false);

      // filter: answered from the watch cache, unaffected.
      const b = gpuPod('b', [{ core: 50, memoryMiB: 1024 }]);
      state.upsertPod(b);
      const filter = await timed(() =>
        post(`${cp.extenderUrl}/scheduler/filter`, { Pod: b, Nodes: null, NodeNames: [cluster] }, extender),
      );
      expect(filter.ms).toBeLessThan(QUICK_MS);
      expect(filter.value.NodeNames).toEqual([cluster]);

      // bind: a clean failure within its deadlines; nothing written on the pod, nothing bound.
      const bind = await timed(() => post(`${cp.extenderUrl}/scheduler/bind`, bindArgs('b'), extender));
      expect(bind.ms).toBeLessThan(BIND_WITHIN_MS);
      expect(bind.value.Error).toMatch(
        cut === 'refuse'
          ? /ECONNREFUSED|no answer from the ledger/
          : new RegExp(`no answer from the ledger within ${CALL_TIMEOUT_MS} ms`),
      );
      const afterFailedBind = state.pod('default', 'b');
      expect(afterFailedBind?.spec?.nodeName).toBeUndefined();
      expect(afterFailedBind?.metadata?.annotations?.[vcudaAnnotations.assignment]).toBeUndefined();

      // readiness: 503 naming the ledger, while liveness stays up.
      await waitFor('not ready while cut', 5000, async () => (await fetch(`${cp.url}/readyz`)).status === 503);
      const notReady = await fetch(`${cp.url}/readyz`);
      expect(await notReady.text()).toMatch(/^not ready: ledger unreachable/);
      expect((await fetch(`${cp.url}/healthz`)).status).toBe(200);

      await proxy.setMode('forward');

      // Back: ready again, and the failed bind left nothing behind: the reservation it sent (which
      // may commit now, late) is released, so kube-scheduler's retry binds the pod.
      await waitFor(
        'ready after the ledger is back',
        15_000,
        async () => (await fetch(`${cp.url}/readyz`)).status === 200,
      );
      let retry: Record<string, unknown> = {};
      await waitFor('the retried bind succeeds', 10_000, async () => {
        retry = await post(`${cp.extenderUrl}/scheduler/bind`, bindArgs('b'), extender);
        return retry.Error === '';
      }).catch((err) => {
        throw new Error(`${String(err)}; last answer ${JSON.stringify(retry)}`);
      });
      expect(state.pod('default', 'b')?.spec?.nodeName).toBe(cluster);
      expect(await liveRows('uid-b')).toBe(1);
      expect(await liveRows('uid-a')).toBe(1);
      const after = (await post(mutateUrl, review('CREATE', gpu), webhook)) as unknown as AdmissionReviewOut;
      expect(after.response.warnings ?? []).toEqual([]);
    },
  );

  it('postgres.js gives up a silent connection after connectTimeoutSeconds, and uses a recovered server within seconds', async () => {
    const upstream = new URL(t.url as string);
    proxy = await startTcpProxy({ host: upstream.hostname, port: Number(upstream.port || 5432) });
    const viaProxy = new URL(upstream);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const db = await connectDb({ url: viaProxy.toString(), maxConnections: 1, connectTimeoutSeconds: 1 });
    try {
      await proxy.setMode('blackhole');
      const silent = await timed(() =>
        db.execute(sql`select 1`).then(
          () => 'answered',
          (err: unknown) => `${String(err)} ${String((err as Error).cause)}`,
        ),
      );
      expect(silent.value).toMatch(/CONNECT_TIMEOUT/);
      expect(silent.ms).toBeLessThan(3000);
      // Many refused attempts in a row: postgres.js's own backoff would now wait up to 20 s.
      await proxy.setMode('refuse');
      for (let i = 0; i < 8; i++) await db.execute(sql`select 1`).catch(() => undefined);
      await proxy.setMode('forward');
      const back = await timed(() => db.execute(sql`select 1`));
      expect(back.ms).toBeLessThan(4000);
    } finally {
      await closeDb(db);
    }
  });
});
