import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  generateSigningKey,
  MIB,
  type PodEvent,
  signAssignment,
  VcudaError,
  vcudaAnnotations,
  verifyAssignment,
} from '../../contract/index.js';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { allocations } from '../../db/schema.js';
import {
  assignedPod,
  assignmentFor,
  cardUuid,
  gpuNode,
  gpuPod,
  signedAssignment,
  unsignedAssignment,
} from '../../test/support/control-plane/builders.js';
import {
  type ExtenderHarness,
  post,
  startExtender,
  TEST_NOW,
  testKeys,
} from '../../test/support/control-plane/extender-harness.js';
import { type FakeKubeApi, startFakeKubeApi } from '../../test/support/control-plane/fake-kube-api.js';
import type { KeySet } from '../signing-keys.js';
import type { BindLedger } from './binder.js';
import { PodWriteBatcher } from './pod-write-batcher.js';
import { extenderRoutes } from './routes.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`./testdata/${name}`, import.meta.url), 'utf8'));
const filterArgs = fixture('extender-filter.json');
const prioritizeArgs = fixture('extender-prioritize.json');
const bindArgs = fixture('extender-bind.json');

async function until(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('extender routes on the real 1.26 payloads', () => {
  let api: FakeKubeApi;
  let db: VcudaDb;
  let keys: KeySet;
  let ext: ExtenderHarness;
  const liveRows = async () => (await db.select().from(allocations)).filter((r) => r.state !== 'released');

  beforeAll(async () => {
    keys = await testKeys();
    db = await connectDb({});
    await migrate(db);
  });
  afterAll(async () => {
    await closeDb(db);
  });
  beforeEach(async () => {
    api = await startFakeKubeApi();
    // node-a: every card 80 % used; node-b: free.
    api.putNode(gpuNode({ name: 'gpu-node-a', cards: 2 }));
    api.putNode(gpuNode({ name: 'gpu-node-b', cards: 2 }));
    for (const i of [0, 1])
      api.putPod(assignedPod(`busy-${i}`, 'gpu-node-a', [{ core: 80, memoryMiB: 1000, cards: [i] }]));
    api.putPod({ apiVersion: 'v1', kind: 'Pod', ...filterArgs.Pod });
    ext = await startExtender({ api, db, keys });
  });
  afterEach(async () => {
    await ext.close();
    await api.close();
    // The ledger keeps its own per-pod hold; give the fixture pod back the way the product does.
    await createLedger(db, { clock: () => TEST_NOW }).release('test', bindArgs.PodUID);
  });

  it('filter returns the feasible node and a readable reason for the other', async () => {
    const { status, json } = await post(ext.app, '/filter', filterArgs);
    expect(status).toBe(200);
    expect(json).toEqual({
      Nodes: null,
      NodeNames: ['gpu-node-b'],
      // Short of card capacity: kube-scheduler may preempt there (the preempt verb picks the victims).
      FailedNodes: { 'gpu-node-a': 'no card with 30 core free; best has 20' },
      FailedAndUnresolvableNodes: {},
      Error: '',
    });
  });

  it('filter refuses every node with an event when none fits', async () => {
    api.putNode(gpuNode({ name: 'gpu-node-b', cards: 1, card: { memoryMiB: 4096 } }));
    await until(() => ext.deps.state.snapshot().nodes.get('gpu-node-b')?.cards.length === 1, 'node-b update');
    const { json } = await post(ext.app, '/filter', filterArgs);
    expect(json.NodeNames).toEqual([]);
    expect((json.FailedNodes as Record<string, string>)['gpu-node-b']).toBe(
      'no card with 8192 MiB free; best has 4096 MiB',
    );
    await until(() => api.events.length > 0, 'an event');
    expect(api.events[0]).toMatchObject({ reason: 'VcudaUnschedulable', involvedObject: { name: 'share-30' } });
  });

  it('prioritize prefers the fuller node under binpack and answers Host/Score', async () => {
    api.putPod(assignedPod('some', 'gpu-node-a', [{ core: 10, memoryMiB: 100, cards: [0] }]));
    api.putNode(gpuNode({ name: 'gpu-node-c', cards: 2 }));
    api.putPod(assignedPod('half', 'gpu-node-c', [{ core: 60, memoryMiB: 60000, cards: [0] }]));
    await until(() => ext.deps.state.snapshot().nodes.has('gpu-node-c'), 'node-c');
    await until(() => (ext.deps.state.snapshot().nodes.get('gpu-node-c')?.cards[0]?.usedCore ?? 0) === 60, 'half');
    const { status, json } = await post(ext.app, '/prioritize', {
      ...prioritizeArgs,
      NodeNames: ['gpu-node-a', 'gpu-node-b', 'gpu-node-c'],
    });
    expect(status).toBe(200);
    const scores = Object.fromEntries((json as { Host: string; Score: number }[]).map((h) => [h.Host, h.Score]));
    expect(scores['gpu-node-a']).toBe(0); // refused
    expect(scores['gpu-node-c']).toBeGreaterThan(scores['gpu-node-b'] as number);
  });

  it('bind reserves, signs, annotates, binds and confirms; a retry changes nothing', async () => {
    const { json } = await post(ext.app, '/bind', bindArgs);
    expect(json).toEqual({ Error: '' });
    const pod = api.pods.get('team-a/share-30') as unknown as {
      spec: { nodeName?: string };
      metadata: { annotations: Record<string, string> };
    };
    expect(pod.spec.nodeName).toBe('gpu-node-b');
    const a = await verifyAssignment(pod.metadata.annotations[vcudaAnnotations.assignment] as string, keys.jwks, {
      podUid: bindArgs.PodUID,
      node: 'gpu-node-b',
      nowSeconds: TEST_NOW.getTime() / 1000,
    });
    expect(a.containers).toEqual([
      {
        name: 'model',
        isInit: false,
        cards: [{ uuid: expect.any(String), core: 30, memoryBytes: 8192 * 1048576 }],
        coreLimit: 60,
        mode: 'soft',
      },
    ]);
    expect(pod.metadata.annotations[vcudaAnnotations.assignedNode]).toBe('gpu-node-b');
    expect(pod.metadata.annotations[vcudaAnnotations.assignedAt]).toBe(TEST_NOW.toISOString());
    // The answer does not wait for the confirm (reserved -> bound); it follows at once.
    await ext.confirmed();
    const rows = await db.select().from(allocations);
    expect(rows.map((r) => [r.state, r.core, r.memoryMiB, r.cardUuid])).toEqual([
      ['bound', 30, 8192, a.containers[0]?.cards[0]?.uuid],
    ]);

    expect((await post(ext.app, '/bind', bindArgs)).json).toEqual({ Error: '' });
    expect(await liveRows()).toHaveLength(1);
    expect(api.calls.get('POST binding')).toBe(1);
    // Outcomes are reported after the answer (off the request path): wait for the retry's too.
    await until(
      async () => (await ext.registry.metrics()).includes('vcuda_extender_binds_total{result="bound"} 2'),
      'both binds counted',
    );
  });

  it('bind answers without waiting for its confirm, which lands after', async () => {
    let openConfirm = () => {};
    const gate = new Promise<void>((open) => {
      openConfirm = open;
    });
    const ledger = ext.deps.ledger;
    const confirms = new PodWriteBatcher(async (uids) => {
      await gate;
      return ledger.confirmMany('test', uids);
    });
    const app = extenderRoutes({ ...ext.deps, confirms });
    // With the confirm held back, an answer that waited for it would never come.
    const answer = await Promise.race([
      post(app, '/bind', bindArgs).then((r) => r.json),
      new Promise((r) => setTimeout(() => r('timed out'), 5000)),
    ]);
    expect(answer).toEqual({ Error: '' });
    expect((await liveRows()).map((r) => r.state)).toEqual(['reserved']);
    openConfirm();
    await confirms.drain();
    expect((await liveRows()).map((r) => r.state)).toEqual(['bound']);
  });

  it('a bind answers before its metrics are counted, and writes no Event of its own', async () => {
    const sent: string[] = [];
    const kube = {
      ...ext.deps.kube,
      createEvent: async (namespace: string, event: PodEvent) => {
        sent.push(event.reason);
        await ext.deps.kube.createEvent(namespace, event);
      },
    };
    const app = extenderRoutes({ ...ext.deps, kube });
    const answer = await post(app, '/bind', bindArgs);
    expect(answer.json).toEqual({ Error: '' });
    const boundCount = async () =>
      (await ext.deps.metrics.binds.get()).values.find((v) => v.labels.result === 'bound')?.value;
    expect(await boundCount()).toBeUndefined();
    await until(async () => (await boundCount()) === 1, 'the bind counted');
    // kube-scheduler's Scheduled and the node agent's VcudaAllocated say it; one more per pod cost.
    expect(sent).toEqual([]);
  });

  it('a failed Binding releases the reservation and removes the annotations', async () => {
    api.failNext('POST binding', 500);
    const { json } = await post(ext.app, '/bind', bindArgs);
    expect(json.Error).toContain('bind pod team-a/share-30 to gpu-node-b: HTTP 500');
    expect(await liveRows()).toEqual([]);
    const pod = api.pods.get('team-a/share-30') as unknown as { metadata: { annotations?: Record<string, string> } };
    expect(pod.metadata.annotations?.[vcudaAnnotations.assignment]).toBeUndefined();
    // kube-scheduler retries: now it works.
    expect((await post(ext.app, '/bind', bindArgs)).json).toEqual({ Error: '' });
  });

  it('bind refuses a node that can no longer hold the pod, as a conflict', async () => {
    const { json } = await post(ext.app, '/bind', { ...bindArgs, Node: 'gpu-node-a' });
    expect(json.Error).toBe('bind team-a/share-30 to gpu-node-a: no card with 30 core free; best has 20');
    // Counted just after the answer, off its path.
    const counted = 'vcuda_extender_bind_conflicts_total{code="capacity-conflict"} 1';
    await until(async () => (await ext.registry.metrics()).includes(counted), 'the conflict counted');
    expect(await liveRows()).toEqual([]);
  });

  it('a ledger refusal for lack of room has the ledger holds read at once; a refusal of its own view does not', async () => {
    const real = ext.deps.ledger;
    const full: BindLedger = {
      upsertNode: (...a) => real.upsertNode(...a),
      reserve: async () => {
        throw new VcudaError('capacity-conflict', 'reserve team-a/share-30: card GPU-b-0 has 0 core free');
      },
      confirmMany: (...a) => real.confirmMany(...a),
      release: (...a) => real.release(...a),
    };
    let reads = 0;
    const app = extenderRoutes({ ...ext.deps, ledger: full, ledgerRefused: () => reads++ });
    expect((await post(app, '/bind', bindArgs)).json.Error).toContain('has 0 core free');
    expect(reads).toBe(1);
    // This view already knew gpu-node-a is full: nothing the ledger holds was missed.
    expect((await post(app, '/bind', { ...bindArgs, Node: 'gpu-node-a' })).json.Error).toContain(
      'no card with 30 core free',
    );
    expect(reads).toBe(1);
  });

  it('nudges a pod refused for capacity when a vcuda pod ends', async () => {
    api.putNode(gpuNode({ name: 'gpu-node-b', cards: 1 }));
    api.putPod(assignedPod('hog', 'gpu-node-b', [{ core: 100, memoryMiB: 81920, cards: [0] }]));
    await until(() => ext.deps.state.snapshot().nodes.get('gpu-node-b')?.cards[0]?.usedCore === 100, 'hog');
    expect((await post(ext.app, '/filter', filterArgs)).json.NodeNames).toEqual([]);
    api.putPod({
      ...assignedPod('hog', 'gpu-node-b', [{ core: 100, memoryMiB: 81920, cards: [0] }]),
      status: { phase: 'Succeeded' },
    });
    await until(
      () =>
        Boolean(
          (api.pods.get('team-a/share-30') as { metadata: { annotations?: Record<string, string> } }).metadata
            .annotations?.['vcuda.io/capacity-freed-at'],
        ),
      'the nudge',
    );
    expect((await post(ext.app, '/filter', filterArgs)).json.NodeNames).toEqual(['gpu-node-b']);
  });

  it('binds a real multi-container pod: two NVLinked whole cards and a share elsewhere', async () => {
    // The 1.26 'two-cards' pod as the API server stored it (an init container without GPU, a
    // 200-core trainer given only requests=limits, a 10-core sidecar); the API server adds the uid.
    const pod = { ...fixture('pod-two-cards.json'), apiVersion: 'v1', kind: 'Pod' };
    pod.metadata = { ...pod.metadata, uid: 'uid-two-cards' };
    // Four cards: 0-1 and 2-3 NVLinked pairs, everything else across sockets.
    const link = (i: number, j: number) =>
      Math.floor(i / 2) === Math.floor(j / 2)
        ? { nvlinks: 4, pcie: 'system' as const }
        : { nvlinks: 0, pcie: 'system' as const };
    api.putNode(gpuNode({ name: 'gpu-node-c', cards: 4, link }));
    api.putPod(assignedPod('small', 'gpu-node-c', [{ core: 10, memoryMiB: 100, cards: [1] }]));
    api.putPod(pod);
    await until(
      () =>
        ext.deps.state.pod('team-a', 'two-cards') !== undefined &&
        ext.deps.state.snapshot().nodes.get('gpu-node-c')?.cards[1]?.usedCore === 10,
      'pods',
    );
    const args = { PodName: 'two-cards', PodNamespace: 'team-a', PodUID: 'uid-two-cards', Node: 'gpu-node-c' };
    expect(
      (await post(ext.app, '/filter', { Pod: pod, Nodes: null, NodeNames: ['gpu-node-c'] })).json.NodeNames,
    ).toEqual(['gpu-node-c']);
    expect((await post(ext.app, '/bind', args)).json).toEqual({ Error: '' });
    const stored = api.pods.get('team-a/two-cards') as unknown as { metadata: { annotations: Record<string, string> } };
    const a = await verifyAssignment(stored.metadata.annotations[vcudaAnnotations.assignment] as string, keys.jwks, {
      podUid: 'uid-two-cards',
      node: 'gpu-node-c',
      nowSeconds: TEST_NOW.getTime() / 1000,
    });
    const cardsOf = (name: string) => a.containers.find((c) => c.name === name)?.cards.map((g) => [g.uuid, g.core]);
    // Card 1 is partly used, so the only entirely free NVLinked pair is 2-3; the sidecar binpacks onto card 1.
    expect(cardsOf('train')).toEqual([
      [cardUuid('gpu-node-c', 2), 100],
      [cardUuid('gpu-node-c', 3), 100],
    ]);
    expect(cardsOf('sidecar')).toEqual([[cardUuid('gpu-node-c', 1), 10]]);
    const rows = (await liveRows()).filter((r) => r.podUid === 'uid-two-cards');
    expect(rows.map((r) => [r.container, r.cardUuid, r.core]).sort()).toEqual(
      [
        ['sidecar', cardUuid('gpu-node-c', 1), 10],
        ['train', cardUuid('gpu-node-c', 2), 100],
        ['train', cardUuid('gpu-node-c', 3), 100],
      ].sort(),
    );
    await createLedger(db, { clock: () => TEST_NOW }).release('test', 'uid-two-cards');
  });

  it('answers 400 with the field for a malformed body', async () => {
    const { status, json } = await post(ext.app, '/bind', { PodName: 'x' });
    expect(status).toBe(400);
    expect(String(json.Error)).toContain('PodNamespace');
    const names = await post(ext.app, '/filter', { ...filterArgs, NodeNames: ['gpu-node-a', 7] });
    expect(names.status).toBe(400);
    expect(String(names.json.Error)).toContain('NodeNames: entry [1] is not a string');
  });

  it('lets pods without GPU requests through untouched', async () => {
    const pod = gpuPod('plain', []);
    const { json } = await post(ext.app, '/filter', { Pod: pod, Nodes: null, NodeNames: ['gpu-node-a', 'x'] });
    expect(json.NodeNames).toEqual(['gpu-node-a', 'x']);
  });
  // A pod asking 30 core and 1 GiB, admitted unmutated, then patched with a forged assignment to
  // 60 GiB and a soft limit of 100: bind must sign what the pod asks, never what it carries.
  const forgeries = {
    unsigned: async (a: Parameters<typeof unsignedAssignment>[0]) => unsignedAssignment(a),
    'signed with a key of our kid': async (a: Parameters<typeof unsignedAssignment>[0]) =>
      signAssignment(a, await generateSigningKey('test-1'), { nowSeconds: TEST_NOW.getTime() / 1000, ttlSeconds: 600 }),
  };
  it.each(Object.keys(forgeries) as (keyof typeof forgeries)[])(
    'bind never re-signs a forged assignment (%s): the token it signs grants what the pod asks',
    async (kind) => {
      const ref = { uid: 'uid-forged', namespace: 'default', name: 'forged' };
      const forged = assignmentFor(ref, 'gpu-node-b', [{ core: 30, memoryMiB: 61440, cards: [0] }]);
      forged.containers[0] = {
        ...(forged.containers[0] as (typeof forged.containers)[0]),
        coreLimit: 100,
        mode: 'soft',
      };
      const pod = gpuPod('forged', [{ core: 30, memoryMiB: 1024 }], {
        annotations: { [vcudaAnnotations.assignment]: await forgeries[kind](forged) },
      });
      api.putPod(pod);
      const args = { PodName: 'forged', PodNamespace: 'default', PodUID: 'uid-forged', Node: 'gpu-node-b' };
      try {
        expect((await post(ext.app, '/bind', args)).json).toEqual({ Error: '' });
        const stored = api.pods.get('default/forged') as unknown as {
          metadata: { annotations: Record<string, string> };
        };
        const a = await verifyAssignment(
          stored.metadata.annotations[vcudaAnnotations.assignment] as string,
          keys.jwks,
          {
            podUid: 'uid-forged',
            node: 'gpu-node-b',
            nowSeconds: TEST_NOW.getTime() / 1000,
          },
        );
        expect(a.containers).toEqual([
          {
            name: 'c0',
            isInit: false,
            cards: [{ uuid: expect.any(String), core: 30, memoryBytes: 1024 * MIB }],
            coreLimit: 30,
            mode: 'hard',
          },
        ]);
        const rows = (await liveRows()).filter((r) => r.podUid === 'uid-forged');
        expect(rows.map((r) => [r.core, r.memoryMiB])).toEqual([[30, 1024]]);
      } finally {
        await createLedger(db, { clock: () => TEST_NOW }).release('test', 'uid-forged');
      }
    },
  );

  it('a bind retried after a crash keeps the verified assignment the pod already carries', async () => {
    const ref = { uid: 'uid-retried', namespace: 'default', name: 'retried' };
    // Card 1, where binpack planning afresh would pick card 0 of the empty node.
    const token = signedAssignment(assignmentFor(ref, 'gpu-node-b', [{ core: 30, memoryMiB: 1024, cards: [1] }]));
    api.putPod(
      gpuPod('retried', [{ core: 30, memoryMiB: 1024 }], { annotations: { [vcudaAnnotations.assignment]: token } }),
    );
    const args = { PodName: 'retried', PodNamespace: 'default', PodUID: 'uid-retried', Node: 'gpu-node-b' };
    try {
      expect((await post(ext.app, '/bind', args)).json).toEqual({ Error: '' });
      const rows = (await liveRows()).filter((r) => r.podUid === 'uid-retried');
      expect(rows.map((r) => r.cardUuid)).toEqual([cardUuid('gpu-node-b', 1)]);
    } finally {
      await createLedger(db, { clock: () => TEST_NOW }).release('test', 'uid-retried');
    }
  });

  // Last: it leaves a released row of its own pod, and earlier tests count every row.
  it('a bind that finds another attempt holding the pod reports no ended pod, so that attempt keeps its rows', async () => {
    const ledger = createLedger(db, { clock: () => TEST_NOW });
    api.putPod(gpuPod('twice', [{ core: 30, memoryMiB: 1024 }]));
    const args = { PodName: 'twice', PodNamespace: 'default', PodUID: 'uid-twice', Node: 'gpu-node-b' };
    const node = ext.deps.state.snapshot().nodes.get('gpu-node-b');
    if (!node) throw new Error('gpu-node-b not in view');
    const cards = node.cards.map(({ uuid, index, model, memoryMiB }) => ({ uuid, index, model, memoryMiB }));
    await ledger.upsertNode('test', 'gpu-node-b', cards);
    // Another replica's bind of this very pod reserved and has not written the pod yet.
    await ledger.reserve({
      cluster: 'test',
      podUid: args.PodUID,
      namespace: args.PodNamespace,
      pod: args.PodName,
      node: 'gpu-node-b',
      items: [{ container: 'other-attempt', cardUuid: cardUuid('gpu-node-b', 1), core: 10, memoryMiB: 10 }],
    });
    const ended: string[] = [];
    ext.deps.state.onCapacityFreed((e) => {
      if (e.why === 'pod-ended') ended.push(e.pod?.uid ?? '');
    });
    try {
      const { json } = await post(ext.app, '/bind', args);
      expect(json.Error).toMatch(/another bind of this pod is in progress/);
      // server.ts releases an ended pod's rows: the rollback of this attempt must not look like one.
      expect(ended).toEqual([]);
      expect((await liveRows()).filter((r) => r.podUid === args.PodUID)).toHaveLength(1);
    } finally {
      await ledger.release('test', args.PodUID);
    }
  });
});
