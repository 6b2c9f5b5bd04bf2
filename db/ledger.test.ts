import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { VcudaError } from '../contract/index.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../test/support/db/test-databases.js';
import { rowsOf } from './connect.js';
import { createLedger, type Ledger, type ReserveRequest } from './ledger.js';

const kinds = await testDbKinds();

function pod(uid: string, items: ReserveRequest['items'], over: Partial<ReserveRequest> = {}): ReserveRequest {
  return { cluster: 'c1', podUid: uid, namespace: 'ml', pod: `pod-${uid}`, node: 'n1', items, ...over };
}
const share = (cardUuid: string, core: number, memoryMiB: number, container = 'main') => ({
  container,
  cardUuid,
  core,
  memoryMiB,
});

async function expectCode(promise: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, 'expected a VcudaError').toBeInstanceOf(VcudaError);
  expect((err as VcudaError).code).toBe(code);
  if (message) expect((err as VcudaError).message).toMatch(message);
}

describe.each(kinds)('ledger on %s', (kind) => {
  let t: TestDatabase;
  let ledger: Ledger;
  let now = new Date('2026-03-01T10:00:00Z');

  beforeAll(async () => {
    t = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await t?.drop();
  });
  beforeEach(async () => {
    await t.db.execute(
      sql`truncate allocations, pod_holds, cards, nodes, clusters, quotas, team_namespaces, usage_samples, replica_leases`,
    );
    now = new Date('2026-03-01T10:00:00Z');
    ledger = createLedger(t.db, { clock: () => now });
    await ledger.upsertNode('c1', 'n1', [
      { uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 },
      { uuid: 'GPU-b', index: 1, model: 'T4', memoryMiB: 16_000 },
    ]);
    await ledger.upsertNode('c2', 'm1', [{ uuid: 'GPU-z', index: 0, model: 'A100', memoryMiB: 40_000 }]);
  });

  async function cardTotals(uuid: string) {
    const r = rowsOf<{ core_used: number; memory_used_mib: number }>(
      await t.db.execute(sql`select core_used, memory_used_mib from cards where uuid = ${uuid}`),
    );
    return r[0];
  }

  it('reserves shares until the card is full, then names the card, the free core and the excess', async () => {
    expect(await ledger.reserve(pod('p1', [share('GPU-a', 60, 10_000)]))).toEqual({ reused: false });
    await expectCode(
      ledger.reserve(pod('p2', [share('GPU-a', 50, 1_000)])),
      'capacity-conflict',
      /card GPU-a has 40 core free, pod asks 50 \(over by 10\)/,
    );
    await expectCode(
      ledger.reserve(pod('p3', [share('GPU-a', 40, 30_001)])),
      'capacity-conflict',
      /GPU-a has 30000 MiB free, pod asks 30001 MiB \(over by 1 MiB\)/,
    );
    expect(await ledger.reserve(pod('p4', [share('GPU-a', 40, 30_000)]))).toEqual({ reused: false });
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 100, memory_used_mib: 40_000 });
  });

  it('is idempotent by pod UID and all-or-nothing across containers and cards', async () => {
    const twoCards = pod('p1', [share('GPU-a', 100, 40_000, 'a'), share('GPU-b', 100, 16_000, 'b')]);
    expect(await ledger.reserve(twoCards)).toEqual({ reused: false });
    expect(await ledger.reserve(twoCards)).toEqual({ reused: true });
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 100, memory_used_mib: 40_000 });
    await ledger.release('c1', 'p1');
    // Fits on GPU-a but not on GPU-b: nothing may be written to GPU-a.
    await ledger.reserve(pod('p2', [share('GPU-b', 90, 1_000)]));
    await expectCode(
      ledger.reserve(pod('p3', [share('GPU-a', 50, 1_000, 'x'), share('GPU-b', 20, 1_000, 'y')])),
      'capacity-conflict',
      /GPU-b has 10 core free/,
    );
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 0, memory_used_mib: 0 });
  });

  it('sums containers of one pod that share a card', async () => {
    await expectCode(
      ledger.reserve(pod('p1', [share('GPU-a', 60, 1, 'x'), share('GPU-a', 60, 1, 'y')])),
      'capacity-conflict',
      /pod asks 120 \(over by 20\)/,
    );
    await ledger.reserve(pod('p2', [share('GPU-a', 60, 1, 'x'), share('GPU-a', 40, 1, 'y')]));
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 100, memory_used_mib: 2 });
  });

  it('refuses unknown cards, cards of another node and bad requests with the field named', async () => {
    await expectCode(ledger.reserve(pod('p1', [share('GPU-nope', 10, 1)])), 'not-found', /GPU-nope/);
    await expectCode(ledger.reserve(pod('p1', [share('GPU-z', 10, 1)])), 'invalid', /c2\/m1, not on c1\/n1/);
    await expectCode(ledger.reserve(pod('p1', [share('GPU-a', 150, 1)])), 'invalid', /items\[0\]\.core/);
    await expectCode(ledger.reserve(pod('p1', [])), 'invalid', /items/);
  });

  it('refuses cards the node stopped reporting, and takes them back when it reports them again', async () => {
    await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-b', index: 1, model: 'T4', memoryMiB: 16_000 }]);
    await expectCode(ledger.reserve(pod('p1', [share('GPU-a', 10, 1)])), 'capacity-conflict', /no longer reported/);
    await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 }]);
    expect(await ledger.reserve(pod('p1', [share('GPU-a', 10, 1)]))).toEqual({ reused: false });
  });

  it('places identical pods on one node side by side: no pending container size rule', async () => {
    // What a binder used to send to keep one pending size per node; the ledger ignores it now.
    const old = (uid: string, card: string) =>
      ({ ...pod(uid, [share(card, 30, 1_000)]), pending: { coreAmounts: [30], ttlMs: 600_000 } }) as never;
    await ledger.reserve(old('p1', 'GPU-a'));
    // The same size on the same node while p1 has not started: the node agent ties by device IDs.
    await ledger.reserve(old('p2', 'GPU-b'));
    await ledger.reserve(old('p3', 'GPU-a'));
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 60, memory_used_mib: 2_000 });
    expect(await cardTotals('GPU-b')).toEqual({ core_used: 30, memory_used_mib: 1_000 });
  });

  it('lets every one of many same-size pods racing onto one node through while they fit', async () => {
    await ledger.upsertNode('c1', 'n2', [
      { uuid: 'GPU-n2-0', index: 0, model: 'A100', memoryMiB: 40_000 },
      { uuid: 'GPU-n2-1', index: 1, model: 'A100', memoryMiB: 40_000 },
      { uuid: 'GPU-n2-2', index: 2, model: 'A100', memoryMiB: 40_000 },
      { uuid: 'GPU-n2-3', index: 3, model: 'A100', memoryMiB: 40_000 },
    ]);
    const db = await t.open(8);
    const racers = Array.from({ length: 8 }, () => createLedger(db, { clock: () => now }));
    const outcomes = await Promise.allSettled(
      racers.map((l, i) => l.reserve(pod(`r${i}`, [share(`GPU-n2-${i % 4}`, 25, 100)], { node: 'n2' }))),
    );
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(8);
  });

  it('release is idempotent and gives the capacity back', async () => {
    await ledger.reserve(pod('p1', [share('GPU-a', 70, 5_000)]));
    expect(await ledger.release('c1', 'p1')).toEqual({ released: 1 });
    expect(await ledger.release('c1', 'p1')).toEqual({ released: 0 });
    expect(await ledger.release('c1', 'never')).toEqual({ released: 0 });
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 0, memory_used_mib: 0 });
    // The same pod may be reserved again after its release.
    expect(await ledger.reserve(pod('p1', [share('GPU-a', 70, 5_000)]))).toEqual({ reused: false });
  });

  it('confirms, and releases as unconfirmed only reservations never confirmed', async () => {
    await ledger.reserve(pod('p1', [share('GPU-a', 30, 100)]));
    await ledger.reserve(pod('p2', [share('GPU-a', 30, 100)]));
    await ledger.confirm('c1', 'p1');
    expect(await ledger.releaseUnconfirmed('c1', 'p1')).toBe(false); // bound: kept
    expect(await ledger.releaseUnconfirmed('c1', 'p2')).toBe(true);
    expect(await ledger.releaseUnconfirmed('c1', 'p2')).toBe(false);
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 30, memory_used_mib: 100 });
    await expectCode(ledger.confirm('c1', 'p2'), 'not-found', /expired/);
    await ledger.confirm('c1', 'p1'); // idempotent
  });

  it("lists a cluster's live holds with their cards, state and owner, whose lease it judges", async () => {
    const a = createLedger(t.db, { clock: () => now, replica: 'replica-a' });
    const b = createLedger(t.db, { clock: () => now, replica: 'replica-b' });
    await a.renewLease('replica-a', 'c1', 60_000);
    await b.renewLease('replica-b', 'c1', 1); // lapses at once
    await a.reserve(pod('p1', [share('GPU-a', 30, 100, 'x'), share('GPU-b', 10, 50, 'x')]));
    await b.reserve(pod('p2', [share('GPU-a', 20, 200, 'x'), share('GPU-a', 5, 10, 'y')]));
    await ledger.reserve(pod('p3', [share('GPU-b', 10, 10)])); // no owner
    await ledger.reserve(pod('z1', [share('GPU-z', 10, 10)], { cluster: 'c2', node: 'm1' }));
    await a.confirm('c1', 'p1');
    await new Promise((r) => setTimeout(r, 20));
    const since = new Date(now.getTime() - 60_000);
    const holds = (await ledger.liveHolds('c1', since)).sort((x, y) => x.podUid.localeCompare(y.podUid));
    expect(holds.map((h) => [h.podUid, h.node, h.isBound, h.owner, h.isOwnerLapsed])).toEqual([
      ['p1', 'n1', true, 'replica-a', false],
      ['p2', 'n1', false, 'replica-b', true],
      ['p3', 'n1', false, null, false],
    ]);
    expect(holds[0]?.cards.sort((x, y) => x.cardUuid.localeCompare(y.cardUuid))).toEqual([
      { cardUuid: 'GPU-a', core: 30, memoryMiB: 100 },
      { cardUuid: 'GPU-b', core: 10, memoryMiB: 50 },
    ]);
    expect(holds[1]?.cards).toEqual([{ cardUuid: 'GPU-a', core: 25, memoryMiB: 210 }]);
    expect(holds[0]?.reservedAt.getTime()).toBe(now.getTime());
    // Renewed, the lease holds again; released, a hold is listed no more.
    await b.renewLease('replica-b', 'c1', 60_000);
    expect((await ledger.liveHolds('c1', since)).find((h) => h.podUid === 'p2')?.isOwnerLapsed).toBe(false);
    await ledger.release('c1', 'p2');
    expect((await ledger.liveHolds('c1', since)).map((h) => h.podUid).sort()).toEqual(['p1', 'p3']);
    // A confirmed hold older than `since` is in every watch already: not read; an unconfirmed one is.
    const later = new Date(now.getTime() + 1);
    expect((await ledger.liveHolds('c1', later)).map((h) => h.podUid)).toEqual(['p3']);
  });

  it('confirms many pods of one cluster at once and names those without a reservation', async () => {
    await ledger.reserve(pod('p1', [share('GPU-a', 30, 100)]));
    await ledger.reserve(pod('p2', [share('GPU-a', 30, 100)]));
    await ledger.reserve(pod('p3', [share('GPU-a', 30, 100)]));
    await ledger.release('c1', 'p3');
    expect(await ledger.confirmMany('c1', ['p1', 'gone', 'p2', 'p3'])).toEqual({ missing: ['gone', 'p3'] });
    expect(await ledger.confirmMany('c2', ['p1'])).toEqual({ missing: ['p1'] }); // another cluster's pod
    expect(await ledger.confirmMany('c1', [])).toEqual({ missing: [] });
    // Bound pods are never released as unconfirmed, and confirming them again is harmless.
    expect(await ledger.releaseUnconfirmed('c1', 'p1')).toBe(false);
    expect(await ledger.confirmMany('c1', ['p1', 'p2'])).toEqual({ missing: [] });
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 60, memory_used_mib: 200 });
  });

  it('registers a node in one call: new, changed, moved and duplicated cards', async () => {
    await ledger.upsertNode('c1', 'n1', [
      { uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 },
      { uuid: 'GPU-b', index: 3, model: 'T4', memoryMiB: 1_000 },
      { uuid: 'GPU-b', index: 1, model: 'T4', memoryMiB: 16_000 }, // the last entry wins
      { uuid: 'GPU-c', index: 2, model: 'L4', memoryMiB: 24_000 },
    ]);
    // GPU-z moves from c2/m1 to c1/n1; m1 keeps no card.
    await ledger.upsertNode('c1', 'n1', [
      { uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 },
      { uuid: 'GPU-z', index: 4, model: 'A100', memoryMiB: 40_000 },
    ]);
    const rows = rowsOf<{
      uuid: string;
      cluster: string;
      node: string;
      index: number;
      memory_mib: number;
      is_present: boolean;
    }>(await t.db.execute(sql`select uuid, cluster, node, index, memory_mib, is_present from cards order by uuid`));
    expect(rows).toEqual([
      { uuid: 'GPU-a', cluster: 'c1', node: 'n1', index: 0, memory_mib: 40_000, is_present: true },
      { uuid: 'GPU-b', cluster: 'c1', node: 'n1', index: 1, memory_mib: 16_000, is_present: false },
      { uuid: 'GPU-c', cluster: 'c1', node: 'n1', index: 2, memory_mib: 24_000, is_present: false },
      { uuid: 'GPU-z', cluster: 'c1', node: 'n1', index: 4, memory_mib: 40_000, is_present: true },
    ]);
    expect(await ledger.reserve(pod('p1', [share('GPU-z', 10, 1)]))).toEqual({ reused: false });
    await expect(
      ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-a', index: -1, model: 'A100', memoryMiB: 1 }]),
    ).rejects.toThrow(/index/);
    // A node that reports no card any more keeps none present.
    await ledger.upsertNode('c1', 'n1', []);
    await expectCode(ledger.reserve(pod('p2', [share('GPU-a', 10, 1)])), 'capacity-conflict', /no longer reported/);
  });

  it('registers a node while it is registered again and reserved on, without deadlock or lost totals', async () => {
    const cardsOf = (memoryMiB: number) =>
      ['GPU-b', 'GPU-a'].map((uuid, index) => ({ uuid, index, model: 'A100', memoryMiB }));
    await Promise.all([
      ...Array.from({ length: 6 }, (_, i) => ledger.upsertNode('c1', 'n1', cardsOf(40_000 + i))),
      ...Array.from({ length: 6 }, (_, i) =>
        ledger.reserve(pod(`p${i}`, [share('GPU-a', 10, 100), share('GPU-b', 10, 100)])),
      ),
    ]);
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 60, memory_used_mib: 600 });
    expect(await cardTotals('GPU-b')).toEqual({ core_used: 60, memory_used_mib: 600 });
  });

  it('reconciles against the live pod list of one cluster', async () => {
    await ledger.reserve(pod('p1', [share('GPU-a', 30, 100)]));
    await ledger.reserve(pod('p2', [share('GPU-b', 30, 100)]));
    await ledger.reserve(pod('q1', [share('GPU-z', 30, 100)], { cluster: 'c2', node: 'm1' }));
    const live = [
      { uid: 'p1', namespace: 'ml', name: 'pod-p1' },
      { uid: 'p9', namespace: 'ml', name: 'pod-p9' },
    ];
    const result = await ledger.reconcile('c1', live);
    expect(result).toEqual({ released: ['p2'], missingFromLedger: [{ uid: 'p9', namespace: 'ml', name: 'pod-p9' }] });
    expect(await cardTotals('GPU-b')).toEqual({ core_used: 0, memory_used_mib: 0 });
    expect(await cardTotals('GPU-z')).toEqual({ core_used: 30, memory_used_mib: 100 }); // other cluster untouched
    // A reservation newer than the pod list is not released.
    const listedAt = new Date(now.getTime() - 1);
    expect((await ledger.reconcile('c1', [], { listedAt })).released).toEqual([]);
  });

  it('enforces namespace quotas, per model, naming the quota, the limit and the excess', async () => {
    await ledger.setQuota({
      name: 'ml-all',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 150,
      memoryLimitMiB: 50_000,
    });
    await ledger.setQuota({
      name: 'ml-t4',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      gpuModel: 'T4',
      coreLimit: 50,
      memoryLimitMiB: 8_000,
    });
    await ledger.reserve(pod('p1', [share('GPU-a', 100, 40_000)]));
    await expectCode(
      ledger.reserve(pod('p2', [share('GPU-b', 60, 1_000)])),
      'quota-exceeded',
      /quota ml-all \(namespace c1\/ml\): core limit 150, in use 100, pod asks 60 \(over by 10\).*quota ml-t4 \(namespace c1\/ml, model T4\): core limit 50, in use 0, pod asks 60 \(over by 10\)/s,
    );
    await ledger.reserve(pod('p3', [share('GPU-b', 50, 8_000)]));
    // Another namespace is not limited by ml's quotas.
    await ledger.release('c1', 'p1');
    await ledger.reserve(pod('p4', [share('GPU-a', 100, 40_000)], { namespace: 'other' }));
    const q = Object.fromEntries((await ledger.listQuotas()).map((r) => [r.name, [r.coreUsed, r.memoryUsedMiB]]));
    expect(q).toEqual({ 'ml-all': [50, 8_000], 'ml-t4': [50, 8_000] });
  });

  it('enforces team quotas across clusters and recomputes totals when quotas or teams change', async () => {
    await ledger.reserve(pod('p1', [share('GPU-a', 40, 1_000)]));
    await ledger.reserve(pod('q1', [share('GPU-z', 40, 1_000)], { cluster: 'c2', node: 'm1', namespace: 'ml2' }));
    await ledger.setTeam('vision', [
      { cluster: 'c1', namespace: 'ml' },
      { cluster: 'c2', namespace: 'ml2' },
    ]);
    await ledger.setQuota({ name: 'vision', scope: 'team', team: 'vision', coreLimit: 100, memoryLimitMiB: 100_000 });
    expect((await ledger.listQuotas())[0]).toMatchObject({ coreUsed: 80, memoryUsedMiB: 2_000 });
    await expectCode(
      ledger.reserve(pod('p2', [share('GPU-b', 30, 1_000)])),
      'quota-exceeded',
      /quota vision \(team vision\): core limit 100, in use 80, pod asks 30 \(over by 10\)/,
    );
    expect(await ledger.precheckQuota({ cluster: 'c2', namespace: 'ml2', core: 20, memoryMiB: 1 })).toEqual({
      ok: true,
    });
    const no = await ledger.precheckQuota({ cluster: 'c2', namespace: 'ml2', core: 21, memoryMiB: 1 });
    expect(no).toEqual({ ok: false, message: expect.stringMatching(/team vision.*over by 1/) });
    // ml2 leaves the team: its 40 no longer count.
    await ledger.setTeam('vision', [{ cluster: 'c1', namespace: 'ml' }]);
    expect((await ledger.listQuotas())[0]).toMatchObject({ coreUsed: 40, memoryUsedMiB: 1_000 });
    await ledger.reserve(pod('p2', [share('GPU-b', 30, 1_000)]));
    await ledger.release('c2', 'q1');
    expect((await ledger.listQuotas())[0]).toMatchObject({ coreUsed: 70, memoryUsedMiB: 2_000 });
  });

  it('lets an operator lower a quota below what is held: new pods are refused, held ones stay', async () => {
    await ledger.reserve(pod('p1', [share('GPU-a', 60, 1_000)]));
    await ledger.setQuota({
      name: 'tight',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 50,
      memoryLimitMiB: 500,
    });
    await expectCode(ledger.reserve(pod('p2', [share('GPU-a', 1, 0)])), 'quota-exceeded', /core limit 50, in use 60/);
    expect(await ledger.release('c1', 'p1')).toEqual({ released: 1 });
    await ledger.reserve(pod('p2', [share('GPU-a', 50, 500)]));
  });

  it('rejects malformed quotas with the field named', async () => {
    await expectCode(
      ledger.setQuota({ name: 'x', scope: 'team', cluster: 'c1', coreLimit: 10, memoryLimitMiB: 1 }),
      'invalid',
      /scope: a team quota names a team/,
    );
    await expectCode(
      ledger.setQuota({
        name: 'x',
        scope: 'namespace',
        cluster: 'c1',
        namespace: 'a',
        coreLimit: -1,
        memoryLimitMiB: 1,
      }),
      'invalid',
      /coreLimit/,
    );
    const quota = { name: 'x', scope: 'namespace' as const, cluster: 'c1', namespace: 'a', memoryLimitMiB: 1 };
    await expectCode(
      ledger.setQuota({ ...quota, coreLimit: 3_000_000_000 }),
      'invalid',
      /coreLimit: Too big: expected number to be <=2147483647/,
    );
    await expectCode(
      ledger.setQuota({ ...quota, namespace: 'ML_team', coreLimit: 1 }),
      'invalid',
      /namespace: must be a Kubernetes name \(RFC 1123 label\)/,
    );
    await expectCode(
      ledger.setTeam('t', [{ cluster: 'c1', namespace: 'x'.repeat(64) }]),
      'invalid',
      /\[0\]\.namespace: must be a Kubernetes name/,
    );
  });

  it('treats a pod racing itself as one reservation', async () => {
    const req = pod('p1', [share('GPU-a', 60, 1_000)]);
    const results = await Promise.all([ledger.reserve(req), ledger.reserve(req), ledger.reserve(req)]);
    expect(results.filter((r) => !r.reused)).toHaveLength(1);
    expect(await cardTotals('GPU-a')).toEqual({ core_used: 60, memory_used_mib: 1_000 });
  });

  it('holds a pod once when two binds race with different cards for it', async () => {
    const onA = pod('p1', [share('GPU-a', 60, 1_000)]);
    const onB = pod('p1', [share('GPU-b', 60, 1_000)]);
    const results = await Promise.all([ledger.reserve(onA), ledger.reserve(onB)]);
    expect(results.map((r) => r.reused).sort()).toEqual([false, true]);
    const a = await cardTotals('GPU-a');
    const b = await cardTotals('GPU-b');
    expect((a?.core_used ?? 0) + (b?.core_used ?? 0)).toBe(60);
    expect(await ledger.release('c1', 'p1')).toEqual({ released: 1 });
    expect(await ledger.reserve(onB)).toEqual({ reused: false });
  });
});
