/**
 * Invariant 1 under racing replicas: several extender instances, each blind to the others' binds
 * (no shared watch), bind the same pods onto the same cards against one ledger. The ledger must
 * refuse every overcommit, and what each bound pod carries must be exactly what the ledger holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MIB,
  migSliceCardsOf,
  migSliceCore,
  parseMigSliceCard,
  peekAssignment,
  vcudaAnnotations,
} from '../../contract/index.js';
import type { VcudaDb } from '../../db/connect.js';
import { allocations } from '../../db/schema.js';
import {
  gpuNode,
  gpuPod,
  H100_MIG_PROFILES,
  h100DynamicMigCard,
  h100MigCard,
  migPod,
  migUuid,
  testState,
} from '../../test/support/control-plane/builders.js';
import {
  type ExtenderHarness,
  post,
  startExtender,
  testKeys,
} from '../../test/support/control-plane/extender-harness.js';
import { type FakeKubeApi, startFakeKubeApi } from '../../test/support/control-plane/fake-kube-api.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../../test/support/db/test-databases.js';
import type { NodeLike, PodWithStatus } from '../placement/cluster-snapshot.js';

const REPLICAS = 3;
const PODS = 12;

describe.each(await testDbKinds())('concurrent binds on %s', (kind) => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await tdb.drop();
  });

  /** REPLICAS extender instances, each with its own view of the node (no shared watch), one ledger. */
  const startReplicas = async (into: ExtenderHarness[], api: FakeKubeApi, node: NodeLike, prefix: string) => {
    const keys = await testKeys();
    for (let r = 0; r < REPLICAS; r++) {
      const state = testState({ keys });
      state.upsertNode(node);
      const db: VcudaDb = await tdb.open(4);
      into.push(await startExtender({ api, db, keys, watch: false, state, instanceId: `${prefix}-${r}` }));
    }
  };

  /** `ext` binds `pod` onto `node`, as kube-scheduler asks it. */
  const bind = (ext: ExtenderHarness, pod: PodWithStatus | undefined, node: string) =>
    post(ext.app, '/bind', {
      PodName: pod?.metadata?.name,
      PodNamespace: 'default',
      PodUID: pod?.metadata?.uid,
      Node: node,
    });

  /** Every replica binds every pod onto `node` at once: each plans on its own view, the ledger arbitrates. */
  const bindEverywhere = (replicas: ExtenderHarness[], pods: PodWithStatus[], node: string) =>
    Promise.all(replicas.flatMap((ext) => pods.map((p) => bind(ext, p, node))));

  /** The ledger's rows of `pods` not released. */
  const liveRowsOf = async (pods: PodWithStatus[]) => {
    const uids = new Set(pods.map((p) => p.metadata?.uid));
    return (await tdb.db.select().from(allocations)).filter((r) => r.state !== 'released' && uids.has(r.podUid));
  };

  it('never overcommits a card, whatever the interleaving', async () => {
    const api: FakeKubeApi = await startFakeKubeApi();
    const node = gpuNode({ name: 'n1', cards: 2, card: { memoryMiB: 4000 } });
    api.putNode(node);
    // Distinct core amounts (30..41), so the one-pending-container-size rule does not hide the race.
    const pods = Array.from({ length: PODS }, (_, i) => gpuPod(`p${i}`, [{ core: 30 + i, memoryMiB: 900 }]));
    for (const p of pods) api.putPod(p);
    const replicas: ExtenderHarness[] = [];
    try {
      await startReplicas(replicas, api, node, 'replica');
      const results = await bindEverywhere(replicas, pods, 'n1');
      expect(results.every((r) => r.status === 200)).toBe(true);
      // A bind answers before its confirm commits.
      for (const r of replicas) await r.confirmed();

      const live = (await tdb.db.select().from(allocations)).filter((r) => r.state !== 'released');
      const perCard = new Map<string, { core: number; mem: number }>();
      for (const row of live) {
        const cur = perCard.get(row.cardUuid) ?? { core: 0, mem: 0 };
        perCard.set(row.cardUuid, { core: cur.core + row.core, mem: cur.mem + row.memoryMiB });
      }
      for (const use of perCard.values()) {
        expect(use.core).toBeLessThanOrEqual(100);
        expect(use.mem).toBeLessThanOrEqual(4000);
      }
      // Every bound pod carries exactly the cards the ledger holds for it; unbound pods hold nothing.
      let bound = 0;
      for (const p of pods) {
        const stored = api.pods.get(`default/${p.metadata?.name}`) as unknown as {
          spec: { nodeName?: string };
          metadata: { uid: string; annotations?: Record<string, string> };
        };
        const rows = live.filter((r) => r.podUid === stored.metadata.uid);
        if (!stored.spec.nodeName) {
          expect(rows).toEqual([]);
          continue;
        }
        bound += 1;
        const a = peekAssignment(stored.metadata.annotations?.[vcudaAnnotations.assignment] ?? '');
        const granted = a?.containers.flatMap((c) => c.cards.map((g) => `${g.uuid}:${g.core}:${g.memoryBytes / MIB}`));
        expect(rows.map((r) => `${r.cardUuid}:${r.core}:${r.memoryMiB}`)).toEqual(granted);
        expect(rows.every((r) => r.state === 'bound')).toBe(true);
      }
      // Capacity is used, not just protected: at least one pod per card got through.
      expect(bound).toBeGreaterThanOrEqual(2);
    } finally {
      for (const r of replicas) await r.close();
      await api.close();
    }
  });

  it('never gives one whole MIG instance to two pods, whatever the interleaving', async () => {
    const api: FakeKubeApi = await startFakeKubeApi();
    const card = h100MigCard(0, [
      ['3g.40gb', 0],
      ['3g.40gb', 4],
    ]);
    const node = gpuNode({ name: 'n3', cards: [card] });
    api.putNode(node);
    const pods = Array.from({ length: 6 }, (_, i) => migPod(`mig-${i}`, [{ profile: '3g.40gb' }]));
    for (const p of pods) api.putPod(p);
    const replicas: ExtenderHarness[] = [];
    try {
      await startReplicas(replicas, api, node, 'mig');
      await bindEverywhere(replicas, pods, 'n3');
      for (const r of replicas) await r.confirmed();
      const live = await liveRowsOf(pods);
      const granted = [...api.pods.values()].flatMap((p) => {
        const a = peekAssignment((p as PodWithStatus).metadata?.annotations?.[vcudaAnnotations.assignment] ?? '');
        return a?.containers.flatMap((c) => c.cards.map((g) => g.uuid)) ?? [];
      });
      // Both instances given, each once, and the ledger holds each for its one pod: all its memory,
      // charged half a card. Two holders' cores (50 + 50) would fit the card; its memory refuses the second.
      expect(granted.sort()).toEqual([migUuid(0, 0), migUuid(0, 4)]);
      expect(live.map((r) => [r.cardUuid, r.core, r.memoryMiB]).sort()).toEqual([
        [migUuid(0, 0), 50, 40448],
        [migUuid(0, 4), 50, 40448],
      ]);
    } finally {
      for (const r of replicas) await r.close();
      await api.close();
    }
  });

  it('never gives two pods overlapping dynamic MIG placements, whatever the interleaving', async () => {
    const api: FakeKubeApi = await startFakeKubeApi();
    const node = gpuNode({ name: 'n4', cards: [h100DynamicMigCard(0), h100DynamicMigCard(1)] });
    api.putNode(node);
    const profiles = ['3g.40gb', '3g.40gb', '3g.40gb', '2g.20gb', '2g.20gb', '1g.10gb', '1g.10gb', '4g.40gb'];
    const pods = profiles.map((profile, i) => migPod(`dyn-${i}`, [{ profile }]));
    for (const p of pods) api.putPod(p);
    const replicas: ExtenderHarness[] = [];
    try {
      await startReplicas(replicas, api, node, 'dyn');
      await bindEverywhere(replicas, pods, 'n4');
      for (const r of replicas) await r.confirmed();
      const live = await liveRowsOf(pods);
      const grants = [...api.pods.values()].flatMap((p) => {
        const pod = p as PodWithStatus & { spec: { nodeName?: string } };
        const a = peekAssignment(pod.metadata?.annotations?.[vcudaAnnotations.assignment] ?? '');
        return (a?.containers.flatMap((c) => c.cards) ?? []).map((g) => ({ uid: pod.metadata?.uid, g }));
      });
      expect(grants.length).toBeGreaterThanOrEqual(4);
      const compute = new Map<string, number>();
      for (const [i, { g }] of grants.entries()) {
        const mig = g.mig;
        expect(mig?.dynamic).toBe(true);
        const shape = H100_MIG_PROFILES.find((p) => p.profile === mig?.profile);
        // A legal placement, not overlapping any other pod's, and the card's compute not overspent.
        expect(shape?.placements).toContain(mig?.start);
        for (const { g: other } of grants.slice(i + 1)) {
          const o = other.mig;
          const disjoint =
            o?.parent !== mig?.parent ||
            (o?.start ?? 0) >= (mig?.start ?? 0) + (mig?.size ?? 0) ||
            (mig?.start ?? 0) >= (o?.start ?? 0) + (o?.size ?? 0);
          expect(disjoint).toBe(true);
        }
        compute.set(mig?.parent ?? '', (compute.get(mig?.parent ?? '') ?? 0) + (shape?.computeSlices ?? 0));
      }
      for (const used of compute.values()) expect(used).toBeLessThanOrEqual(7);
      // The ledger holds exactly the slices each bound pod's grant covers, each slice once.
      for (const { uid, g } of grants) {
        const rows = live.filter((r) => r.podUid === uid).map((r) => r.cardUuid);
        expect(rows.sort()).toEqual(migSliceCardsOf(g.mig as NonNullable<typeof g.mig>).sort());
      }
      // Each slice once, charged its part of the card: the slice's memory, not its core, keeps a second holder off.
      expect(new Set(live.map((r) => r.cardUuid)).size).toBe(live.length);
      expect(live.every((r) => r.core === migSliceCore(parseMigSliceCard(r.cardUuid)?.slice ?? -1))).toBe(true);
    } finally {
      for (const r of replicas) await r.close();
      await api.close();
    }
  });

  it('binds same-size pods on one node side by side across replicas: no pending size rule', async () => {
    const api: FakeKubeApi = await startFakeKubeApi();
    const node = gpuNode({ name: 'n2', cards: 4 });
    api.putNode(node);
    // Same-size pods, one per replica, all still starting: the node agent ties them by device IDs.
    const pods = Array.from({ length: REPLICAS }, (_, i) => gpuPod(`same-${i}`, [{ core: 25, memoryMiB: 100 }]));
    for (const p of pods) api.putPod(p);
    const replicas: ExtenderHarness[] = [];
    try {
      await startReplicas(replicas, api, node, 'tie');
      const results = await Promise.all(replicas.map((ext, i) => bind(ext, pods[i], 'n2')));
      expect(results.map((r) => (r.json as { Error?: string }).Error ?? '')).toEqual(pods.map(() => ''));
      const bound = [...api.pods.values()].filter(
        (p) => (p as unknown as { spec: { nodeName?: string } }).spec.nodeName,
      );
      expect(bound).toHaveLength(REPLICAS);
    } finally {
      for (const r of replicas) await r.close();
      await api.close();
    }
  });
});
