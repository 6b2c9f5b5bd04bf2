/**
 * Group commit through `vcuda_ledger_apply`: operations that queue while a batch is in flight
 * share the next one, and each keeps its own outcome, exactly as if it had gone alone.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VcudaError } from '../contract/index.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../test/support/db/test-databases.js';
import { rowsOf } from './connect.js';
import { createLedger, type ReserveRequest } from './ledger.js';
import { findCardDrift, findOvercommit } from './ledger-audit.js';

const kinds = await testDbKinds();

const pod = (uid: string, core: number, namespace = 'ml'): ReserveRequest => ({
  cluster: 'c1',
  podUid: uid,
  namespace,
  pod: `pod-${uid}`,
  node: 'n1',
  items: [{ container: 'main', cardUuid: 'GPU-a', core, memoryMiB: 1_000 }],
});

/** The error's message and its causes' (drizzle wraps the driver's error). */
function messagesOf(err: unknown): string {
  const out: string[] = [];
  for (let e = err; e instanceof Error; e = e.cause) out.push(e.message);
  return out.join(' <- ');
}

const outcomeOf = (r: PromiseSettledResult<{ reused: boolean }>) =>
  r.status === 'fulfilled' ? (r.value.reused ? 'reused' : 'ok') : (r.reason as VcudaError).code;

describe.each(kinds)('ledger group commit on %s', (kind) => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('gives each pod of a batch its own outcome: a refusal undoes only its own rows', async () => {
    const ledger = createLedger(t.db, { clock: () => new Date(), groupCommit: { maxBatch: 16 } });
    await ledger.upsertNode('c1', 'n1', [{ uuid: 'GPU-a', index: 0, model: 'A100', memoryMiB: 40_000 }]);
    await ledger.setQuota({
      name: 'q-ml',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ml',
      coreLimit: 60,
      memoryLimitMiB: 100_000,
    });
    // They share one batch; p1's second reservation waits for the next one and finds p1 held.
    const results = await Promise.allSettled([
      ledger.reserve(pod('p0', 30)),
      ledger.reserve(pod('p1', 20)),
      ledger.reserve(pod('p2', 20)), // the namespace quota has 10 left
      ledger.reserve(pod('p3', 10)),
      ledger.reserve(pod('p1', 20)), // the same pod again: held already
      ledger.reserve(pod('p4', 41, 'other')), // the card has 40 left once p3 took 10
    ]);
    expect(results.map(outcomeOf), JSON.stringify(results.map(outcomeOf))).toEqual([
      'ok',
      'ok',
      'quota-exceeded',
      'ok',
      'reused',
      'capacity-conflict',
    ]);
    expect((results[2] as PromiseRejectedResult).reason.message).toMatch(
      /quota q-ml .*in use 50, pod asks 20 \(over by 10\)/,
    );
    const live = rowsOf<{ pod_uid: string }>(
      await t.db.execute(sql`select pod_uid from allocations where state <> 'released' order by pod_uid`),
    );
    expect(live.map((r) => r.pod_uid)).toEqual(['p0', 'p1', 'p3']);
    expect((await ledger.listQuotas())[0]).toMatchObject({ coreUsed: 60 });

    const released = await Promise.all(['p0', 'p1', 'p3', 'p1', 'nope'].map((uid) => ledger.release('c1', uid)));
    expect(released.map((r) => r.released)).toEqual([1, 1, 1, 0, 0]);
    expect((await ledger.listQuotas())[0]).toMatchObject({ coreUsed: 0 });
    expect(await findOvercommit(t.db)).toEqual([]);
    expect(await findCardDrift(t.db)).toEqual([]);
  });

  it('applies a batch in one call of vcuda_ledger_apply: releases first, then reservations in order', async () => {
    const at = new Date().toISOString();
    const reserve = (uid: string, core: number) => ({ op: 'reserve', ...pod(uid, core), at });
    const release = (uid: string) => ({ op: 'release', cluster: 'c1', podUid: uid, at, onlyState: null });
    const apply = async (ops: unknown[]) => {
      const [row] = rowsOf<{ r: unknown }>(
        await t.db.execute(sql`select vcuda_ledger_apply(${JSON.stringify(ops)}::jsonb) as r`),
      );
      return (typeof row?.r === 'string' ? JSON.parse(row.r) : row?.r) as Record<string, unknown>[];
    };
    expect(await apply([reserve('b0', 40)])).toEqual([{ reused: false }]);
    // q-ml allows 60: b0's 40 comes back before b1 and b2 take 30 each, and b3 finds it full.
    const results = await apply([
      reserve('b1', 30),
      release('b0'),
      reserve('b2', 30),
      reserve('b3', 10),
      release('nope'),
    ]);
    expect(results).toEqual([
      { reused: false },
      { released: 1 },
      { reused: false },
      {
        violations: [
          {
            code: 'quota-exceeded',
            message: expect.stringMatching(/quota q-ml .*in use 60, pod asks 10 \(over by 10\)/),
          },
        ],
      },
      { released: 0 },
    ]);
    const ledger = createLedger(t.db, { clock: () => new Date() });
    expect((await ledger.listQuotas())[0]).toMatchObject({ coreUsed: 60 });
    // One pod twice in one batch is refused as a whole (the ledger never sends it).
    const twice = await apply([release('b1'), reserve('b1', 30)]).catch((err: unknown) => err);
    expect(messagesOf(twice)).toMatch(/appears twice/);
    expect(await apply([release('b1'), release('b2'), release('b3')])).toEqual([
      { released: 1 },
      { released: 1 },
      { released: 0 },
    ]);
    expect((await ledger.listQuotas())[0]).toMatchObject({ coreUsed: 0 });
    expect(await findCardDrift(t.db)).toEqual([]);
  });

  it('refuses a bad request before it reaches a batch', async () => {
    const ledger = createLedger(t.db, { clock: () => new Date(), groupCommit: { maxBatch: 16 } });
    const err = await ledger.reserve({ ...pod('bad', 0) }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VcudaError);
    expect((err as VcudaError).code).toBe('invalid');
    expect((err as Error).message).toMatch(/core/);
  });
});
