/**
 * DRA claims in the ledger, on PGlite and PostgreSQL: an allocation is charged against the card
 * and the quotas all or nothing, a second claim past the namespace quota is refused in the
 * ledger's words, a release frees it, and the reconcile from the claims' status repairs what a
 * crash left (a charge whose write never landed, an allocation charged nowhere) without touching
 * pods' holds, while the pods' reconcile leaves claims alone.
 */
import { sql } from 'drizzle-orm';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimHolderId, type DraClaim, MIB as MiB } from '../../contract/index.js';
import { rowsOf } from '../../db/connect.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import {
  buildNodeSnapshot,
  gpuNode,
  h100DynamicMigCard,
  h100MigCard,
  migUuid,
} from '../../test/support/control-plane/builders.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../../test/support/db/test-databases.js';
import { ClaimBuilder } from '../../test/support/node-agent/dra-claim.js';
import { ledgerCardsOf } from '../extender/ledger-nodes.js';
import { decideClaimCharge } from './claim-charge.js';
import { type ClaimLedger, createClaimLedger } from './claim-ledger.js';

const CLUSTER = 'c1';
const DRIVER = 'gpu.vcuda.io';
const AT = new Date('2026-11-27T12:00:00Z');

/** A claim allocated by kube-scheduler: `cores` of card `device` and `memoryMiB` on node-1. */
function share(uid: string, cores: number, device = 'gpu-0', memoryMiB = 4096): DraClaim {
  return new ClaimBuilder(`claim-${uid}`, uid, 'ml', 'node-1', DRIVER)
    .share(device, cores, memoryMiB * MiB, { request: 'gpu', shareID: `s-${uid}` })
    .obj();
}
const unallocated = (c: DraClaim): DraClaim => ({ metadata: c.metadata });

describe.each(await testDbKinds())('DRA claims in the ledger on %s', (kind) => {
  let t: TestDatabase;
  let ledger: Ledger;
  let claims: ClaimLedger;
  const charge = (before: DraClaim | undefined, after: DraClaim | undefined) =>
    claims.apply(decideClaimCharge(before, after, DRIVER));

  beforeEach(async () => {
    t = await createTestDatabase(kind);
    ledger = createLedger(t.db, { clock: () => AT, groupCommit: false });
    claims = createClaimLedger({ ledger, cluster: CLUSTER, driver: DRIVER });
    await ledger.upsertNode(CLUSTER, 'node-1', [
      { uuid: 'GPU-a', index: 0, model: 'H100', memoryMiB: 81_920 },
      { uuid: 'GPU-b', index: 1, model: 'H100', memoryMiB: 81_920 },
    ]);
  });
  afterEach(async () => {
    await t?.drop();
  });

  it('charges an allocation bound at once, in one ledger call, on the card the allocation names', async () => {
    await charge(unallocated(share('a', 30, 'gpu-1')), share('a', 30, 'gpu-1'));
    const rows = sql`select card_uuid, core, memory_mib, state, bound_at = reserved_at as bound_at_once
      from allocations where pod_uid = ${claimHolderId('a')}`;
    expect(rowsOf(await t.db.execute(rows))).toEqual([
      { card_uuid: 'GPU-b', core: 30, memory_mib: 4096, state: 'bound', bound_at_once: true },
    ]);
    // Bound, not reserved: the holds nobody confirmed (a dead replica's) never include it.
    expect(await ledger.liveHolds(CLUSTER, new Date(0))).toMatchObject([{ pod: 'claim-a', isBound: true }]);
  });

  it('charges within the namespace quota and refuses past it, naming the quota; a release lets the next in', async () => {
    await ledger.setQuota({
      name: 'ml-50',
      scope: 'namespace',
      cluster: CLUSTER,
      namespace: 'ml',
      coreLimit: 50,
      memoryLimitMiB: 100_000,
    });
    await charge(unallocated(share('a', 30)), share('a', 30));
    const refused = charge(unallocated(share('b', 30, 'gpu-1')), share('b', 30, 'gpu-1'));
    await expect(refused).rejects.toThrow(
      'reserve ml/claim-b: quota ml-50 (namespace c1/ml): core limit 50, in use 30, claim asks 30 (over by 10)',
    );
    await expect(refused).rejects.toMatchObject({ code: 'quota-exceeded' });
    const quota = (await ledger.listQuotas()).find((q) => q.name === 'ml-50');
    expect(quota).toMatchObject({ coreUsed: 30, memoryUsedMiB: 4096 });

    await charge(share('a', 30), undefined);
    await charge(unallocated(share('b', 30, 'gpu-1')), share('b', 30, 'gpu-1'));
    expect((await ledger.listQuotas()).find((q) => q.name === 'ml-50')).toMatchObject({ coreUsed: 30 });
  });

  it('never overcommits a card: a claim that does not fit the card is refused, whatever the quota', async () => {
    await charge(undefined, share('a', 80));
    await expect(charge(undefined, share('b', 30))).rejects.toMatchObject({
      code: 'capacity-conflict',
      message: 'reserve ml/claim-b: card GPU-a has 20 core free, claim asks 30 (over by 10)',
    });
    await charge(undefined, share('c', 20));
  });

  it('charges a whole card with all its memory, and refuses a card the ledger does not know', async () => {
    const whole: DraClaim = {
      metadata: { name: 'whole', namespace: 'ml', uid: 'w' },
      status: {
        allocation: { devices: { results: [{ request: 'gpu', driver: DRIVER, pool: 'node-1', device: 'gpu-1' }] } },
      },
    };
    await charge(undefined, whole);
    const cardB = sql`select core_used, memory_used_mib from cards where uuid = 'GPU-b'`;
    expect(rowsOf(await t.db.execute(cardB))).toEqual([{ core_used: 100, memory_used_mib: 81_920 }]);
    await expect(charge(undefined, share('x', 1, 'gpu-1', 1))).rejects.toMatchObject({ code: 'capacity-conflict' });
    const unknown = charge(undefined, share('y', 10, 'gpu-7'));
    await expect(unknown).rejects.toThrow(
      'reserve ml/claim-y: no card of index 7 on node c1/node-1 is known to the ledger',
    );
    await expect(unknown).rejects.toMatchObject({ code: 'not-found' });
    expect(await ledger.liveClaimHolders(CLUSTER)).toHaveLength(1);
  });

  it("names a card by its index, never a MIG instance or slice registered under the card's index", async () => {
    // The card stopped being reported; an instance of it still is, under its index.
    await ledger.upsertNode(CLUSTER, 'node-1', [
      { uuid: 'GPU-b', index: 1, model: 'H100', memoryMiB: 81_920 },
      { uuid: 'MIG-a-1', index: 0, model: 'H100 MIG 3g.40gb', memoryMiB: 40_960 },
    ]);
    await expect(charge(undefined, share('a', 30, 'gpu-0'))).rejects.toThrow(
      'reserve ml/claim-a: card GPU-a is no longer reported by node-1',
    );
    // Reported again beside its instance and its dynamic-MIG memory slices, all under index 0.
    await ledger.upsertNode(CLUSTER, 'node-1', [
      { uuid: 'GPU-a', index: 0, model: 'H100', memoryMiB: 81_920 },
      { uuid: 'MIG-a-1', index: 0, model: 'H100 MIG 3g.40gb', memoryMiB: 40_960 },
      { uuid: 'GPU-a/mig-slice-0', index: 0, model: 'H100 slice', memoryMiB: 10_240 },
    ]);
    await charge(undefined, share('a', 30, 'gpu-0'));
    const held = sql`select card_uuid from allocations where pod_uid = ${claimHolderId('a')}`;
    expect(rowsOf(await t.db.execute(held))).toEqual([{ card_uuid: 'GPU-a' }]);
  });

  it('charges afresh when a claim already held is allocated again (a refused or lost write before)', async () => {
    await charge(undefined, share('a', 30, 'gpu-0'));
    // The scheduler's retry allocated the other card: the ledger must hold that one, not the first.
    await charge(undefined, share('a', 30, 'gpu-1'));
    await charge(undefined, share('b', 80, 'gpu-0'));
  });

  it('reconciles from the claims the API server holds, and the pods reconcile leaves claims alone', async () => {
    await charge(undefined, share('stale', 40));
    await charge(undefined, share('kept', 30));
    const pods = await ledger.reconcile(CLUSTER, [], { listedAt: new Date(AT.getTime() + 1) });
    expect(pods.released).toEqual([]);

    const result = await claims.reconcile(
      [share('kept', 30), share('new', 20, 'gpu-1'), unallocated(share('stale', 40))],
      new Date(AT.getTime() + 1),
    );
    expect(result).toEqual({ charged: [claimHolderId('new')], released: [claimHolderId('stale')], refused: [] });
    const live = (await ledger.liveClaimHolders(CLUSTER)).map((h) => h.holder).sort();
    expect(live).toEqual([claimHolderId('kept'), claimHolderId('new')]);
    // The stale claim's 40 cores are free again.
    await charge(undefined, share('d', 70));
  });
});

describe.each(await testDbKinds())('DRA claims of MIG partitions in the ledger on %s', (kind) => {
  let t: TestDatabase;
  let ledger: Ledger;
  let claims: ClaimLedger;
  // Card 0 in MIG mode with two 3g.40gb instances; card 1 kept for dynamic MIG (its 8 slice cards).
  const node = buildNodeSnapshot(
    gpuNode({
      name: 'node-1',
      cards: [
        h100MigCard(1, [
          ['3g.40gb', 0],
          ['3g.40gb', 4],
        ]),
        h100DynamicMigCard(2),
      ],
    }),
    [],
  );
  const partition = (uid: string, ...devices: string[]) => {
    const b = new ClaimBuilder(`claim-${uid}`, uid, 'ml', 'node-1', DRIVER);
    for (const d of devices) b.mig(d);
    return b.obj();
  };
  const charge = (after: DraClaim) => claims.apply(decideClaimCharge(undefined, after, DRIVER));
  const rowsOfClaim = async (uid: string) =>
    rowsOf(
      await t.db.execute(sql`select card_uuid, core, memory_mib from allocations
        where pod_uid = ${claimHolderId(uid)} and state = 'bound' order by card_uuid`),
    );

  beforeEach(async () => {
    t = await createTestDatabase(kind);
    ledger = createLedger(t.db, { clock: () => AT, groupCommit: false });
    claims = createClaimLedger({ ledger, cluster: CLUSTER, driver: DRIVER, partitionNode: () => node });
    await ledger.upsertNode(CLUSTER, 'node-1', ledgerCardsOf(node));
  });
  afterEach(async () => {
    await t?.drop();
  });

  it('charges a static instance and a dynamic placement the part of their card they span, all in one charge', async () => {
    await charge(partition('a', 'gpu-0-mig-3g-40gb-4', 'gpu-1-mig-2g-20gb-2'));
    expect(await rowsOfClaim('a')).toEqual([
      { card_uuid: `${node.dynamicMig[0]?.uuid}/mig-slice-2`, core: 13, memory_mib: 10195 },
      { card_uuid: `${node.dynamicMig[0]?.uuid}/mig-slice-3`, core: 12, memory_mib: 10195 },
      { card_uuid: migUuid(1, 4), core: 50, memory_mib: 40448 },
    ]);
  });

  it('never books one memory slice twice: overlapping placements, all or nothing, then free after release', async () => {
    await charge(partition('a', 'gpu-1-mig-3g-40gb-0'));
    // 4g.40gb at 0 overlaps 3g.40gb at 0; the claim's other partition (free) is not charged either.
    const refused = charge(partition('b', 'gpu-0-mig-3g-40gb-0', 'gpu-1-mig-4g-40gb-0'));
    await expect(refused).rejects.toMatchObject({ code: 'capacity-conflict' });
    await expect(refused).rejects.toThrow(
      `card ${node.dynamicMig[0]?.uuid}/mig-slice-0 has 0 MiB free, claim asks 10195 MiB`,
    );
    expect(await rowsOfClaim('b')).toEqual([]);
    await expect(charge(partition('c', 'gpu-0-mig-3g-40gb-0'))).resolves.toBeUndefined();
    // A second holder of one static instance: its 50 cores would fit the card, its memory does not.
    const second = charge(partition('d', 'gpu-0-mig-3g-40gb-0'));
    await expect(second).rejects.toMatchObject({ code: 'capacity-conflict' });
    await expect(second).rejects.toThrow(`card ${migUuid(1, 0)} has 0 MiB free, claim asks 40448 MiB`);

    await claims.apply(decideClaimCharge(partition('a', 'gpu-1-mig-3g-40gb-0'), undefined, DRIVER));
    await charge(partition('e', 'gpu-1-mig-4g-40gb-0'));
  });

  it('counts a partition against the namespace quota as the extender counts an instance, naming the quota', async () => {
    await ledger.setQuota({
      name: 'ml-75',
      scope: 'namespace',
      cluster: CLUSTER,
      namespace: 'ml',
      coreLimit: 75,
      memoryLimitMiB: 200_000,
    });
    await charge(partition('a', 'gpu-0-mig-3g-40gb-0'));
    const refused = charge(partition('b', 'gpu-0-mig-3g-40gb-4'));
    await expect(refused).rejects.toThrow(
      'reserve ml/claim-b: quota ml-75 (namespace c1/ml): core limit 75, in use 50, claim asks 50 (over by 25)',
    );
    await expect(refused).rejects.toMatchObject({ code: 'quota-exceeded' });
    expect((await ledger.listQuotas()).find((q) => q.name === 'ml-75')).toMatchObject({
      coreUsed: 50,
      memoryUsedMiB: 40448,
    });
    await claims.apply(decideClaimCharge(partition('a', 'gpu-0-mig-3g-40gb-0'), undefined, DRIVER));
    await charge(partition('b', 'gpu-0-mig-3g-40gb-4'));
  });

  it("counts a team's core: 100 as 100 cores of MIG in either mode: two halves of cards, then no 1g more", async () => {
    await ledger.setTeam('vision', [{ cluster: CLUSTER, namespace: 'ml' }]);
    await ledger.setQuota({ name: 'vision', scope: 'team', team: 'vision', coreLimit: 100, memoryLimitMiB: 200_000 });
    await charge(partition('dyn', 'gpu-1-mig-3g-40gb-0'));
    await charge(partition('static', 'gpu-0-mig-3g-40gb-0'));
    const refused = charge(partition('one-more', 'gpu-1-mig-1g-10gb-4'));
    await expect(refused).rejects.toThrow(
      'reserve ml/claim-one-more: quota vision (team vision): core limit 100, in use 100, claim asks 13 (over by 13)',
    );
    await expect(refused).rejects.toMatchObject({ code: 'quota-exceeded' });
    expect((await ledger.listQuotas()).find((q) => q.name === 'vision')).toMatchObject({ coreUsed: 100 });
  });

  it('reconciles partitions from the claims, and refuses one whose node it cannot read', async () => {
    await charge(partition('stale', 'gpu-1-mig-7g-80gb-0'));
    const r = await claims.reconcile(
      [partition('new', 'gpu-0-mig-3g-40gb-0'), unallocated(partition('stale', 'gpu-1-mig-7g-80gb-0'))],
      new Date(AT.getTime() + 1),
    );
    expect(r).toEqual({ charged: [claimHolderId('new')], released: [claimHolderId('stale')], refused: [] });
    await charge(partition('next', 'gpu-1-mig-7g-80gb-0'));

    const blind = createClaimLedger({ ledger, cluster: CLUSTER, driver: DRIVER });
    await expect(
      blind.apply(decideClaimCharge(undefined, partition('x', 'gpu-0-mig-3g-40gb-4'), DRIVER)),
    ).rejects.toThrow("resourceclaim ml/claim-x: node node-1's inventory is not known yet");
  });
});
