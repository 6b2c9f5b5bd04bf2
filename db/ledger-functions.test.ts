/**
 * The ledger's SQL function (`vcuda_ledger_apply`, migrations 0012, 0013 and 0020) against the
 * specification in test/support/db/ledger-spec.ts: for random card (quota weights among them) and
 * quota states and random pods, the function must accept
 * exactly what the pure rules accept and refuse with exactly their code and message, alone and
 * in batches (releases first, then each reservation against the totals the ones before it left).
 */

import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VcudaError } from '../contract/index.js';
import {
  type CardCapacity,
  type CardDemand,
  checkCards,
  checkQuotas,
  demandForQuota,
  type QuotaCapacity,
  sumDemandByCard,
  type Violation,
} from '../test/support/db/ledger-spec.js';
import { createTestDatabase, type TestDatabase, testDbKinds } from '../test/support/db/test-databases.js';
import { rowsOf } from './connect.js';
import { createLedger } from './ledger.js';
import { cards, quotas, teamNamespaces } from './schema.js';

const CARDS = ['GPU-a', 'GPU-b', 'GPU-c'];
const MODEL: Record<string, string> = { 'GPU-a': 'A100', 'GPU-b': 'T4', 'GPU-c': 'T4' };

const cardState = fc.record({
  coreUsed: fc.integer({ min: 0, max: 100 }),
  // 100: a card; 50 and 13: MIG instances shared as small cards (a 3g.40gb, a 1g.10gb).
  quotaWeight: fc.constantFrom(100, 100, 50, 13),
  memoryUsedMiB: fc.integer({ min: 0, max: 1_000 }),
  isPresent: fc.boolean(),
  node: fc.constantFrom('n1', 'n1', 'n1', 'n2'),
});
const quotaState = fc.record({
  scope: fc.constantFrom('namespace' as const, 'team' as const),
  gpuModel: fc.constantFrom('', 'A100', 'T4'),
  coreLimit: fc.integer({ min: 0, max: 300 }),
  memoryLimitMiB: fc.integer({ min: 0, max: 3_000 }),
  coreUsed: fc.integer({ min: 0, max: 300 }),
  memoryUsedMiB: fc.integer({ min: 0, max: 3_000 }),
});
const item = fc.record({
  container: fc.constantFrom('x', 'y'),
  cardUuid: fc.constantFrom(...CARDS, 'GPU-unknown'),
  core: fc.integer({ min: 1, max: 100 }),
  memoryMiB: fc.integer({ min: 0, max: 1_000 }),
});
const scenario = fc.record({
  cards: fc.array(cardState, { minLength: 3, maxLength: 3 }),
  quotas: fc.array(quotaState, { maxLength: 3 }),
  items: fc.uniqueArray(item, { minLength: 1, maxLength: 3, selector: (i) => `${i.container}/${i.cardUuid}` }),
});

describe('vcuda_reserve agrees with test/support/db/ledger-spec.ts', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('pglite');
  });
  afterAll(async () => {
    await t?.drop();
  });

  it('accepts and refuses exactly as the rules do, with the same message', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        n += 1;
        const now = new Date('2026-03-01T00:00:00Z');
        await t.db.execute(sql`truncate allocations, pod_holds, cards, quotas, team_namespaces`);
        const cardRows: CardCapacity[] = s.cards.map((c, i) => ({
          uuid: CARDS[i] as string,
          cluster: 'c1',
          model: MODEL[CARDS[i] as string] as string,
          memoryMiB: 1_000,
          ...c,
        }));
        await t.db.insert(cards).values(cardRows.map((c, i) => ({ ...c, index: i, updatedAt: now })));
        await t.db.insert(teamNamespaces).values({ team: 'tm', cluster: 'c1', namespace: 'ml' });
        const quotaRows: QuotaCapacity[] = s.quotas.map((q, i) => ({
          ...q,
          name: `q${i}`,
          cluster: q.scope === 'namespace' ? 'c1' : null,
          namespace: q.scope === 'namespace' ? 'ml' : null,
          team: q.scope === 'team' ? 'tm' : null,
        }));
        if (quotaRows.length > 0) await t.db.insert(quotas).values(quotaRows.map((q) => ({ ...q, updatedAt: now })));

        const demand = sumDemandByCard(s.items, (uuid) => cardRows.find((c) => c.uuid === uuid)?.quotaWeight);
        const where = { cluster: 'c1', node: 'n1' };
        const cardViolations = checkCards(where, cardRows, demand);
        const violations =
          cardViolations.length > 0 ? cardViolations : checkQuotas(quotaRows, demand, (uuid) => MODEL[uuid]);

        const ledger = createLedger(t.db, { clock: () => now });
        const got = await ledger
          .reserve({ cluster: 'c1', podUid: `p${n}`, namespace: 'ml', pod: 'p', node: 'n1', items: s.items })
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        if (violations.length === 0) {
          expect(got).toBeUndefined();
          return;
        }
        expect(got).toBeInstanceOf(VcudaError);
        const order = ['invalid', 'not-found', 'capacity-conflict', 'quota-exceeded'];
        const code = order.find((c) => violations.some((v) => v.code === c));
        expect((got as VcudaError).code).toBe(code);
        expect((got as VcudaError).message).toBe(`reserve ml/p: ${violations.map((v) => v.message).join('; ')}`);
      }),
      { numRuns: 80, seed: 5 },
    );
  }, 120_000);
});

/** Namespaces of the batch scenario: both in team tm, each may have its own quotas. */
const NAMESPACES = ['ml', 'dev'];
const batchQuota = fc.record({
  scope: fc.constantFrom('namespace' as const, 'team' as const),
  namespace: fc.constantFrom(...NAMESPACES),
  gpuModel: fc.constantFrom('', 'A100', 'T4'),
  coreLimit: fc.integer({ min: 0, max: 300 }),
  memoryLimitMiB: fc.integer({ min: 0, max: 3_000 }),
});
const batchPod = fc.record({
  namespace: fc.constantFrom(...NAMESPACES),
  node: fc.constantFrom('n1', 'n1', 'n2'),
  items: fc.uniqueArray(item, { minLength: 1, maxLength: 3, selector: (i) => `${i.container}/${i.cardUuid}` }),
});
const batchScenario = fc.record({
  cards: fc.array(fc.record({ isPresent: fc.boolean(), node: fc.constantFrom('n1', 'n1', 'n1', 'n2') }), {
    minLength: 3,
    maxLength: 3,
  }),
  quotas: fc.array(batchQuota, { maxLength: 4 }),
  first: fc.array(batchPod, { minLength: 1, maxLength: 8 }),
  second: fc.array(batchPod, { maxLength: 8 }),
  // Which pods of the first batch the second releases (by index, modulo its length).
  releases: fc.uniqueArray(fc.integer({ min: 0, max: 7 }), { maxLength: 4 }),
});

type Pod = { uid: string; namespace: string; node: string; demand: CardDemand[]; rows: number };
type Outcome = { reused: boolean } | { violations: Violation[] } | { released: number };

/** The specification applied one operation after another: releases first, then reservations in order. */
function specify(cards: CardCapacity[], quotas: QuotaCapacity[], releases: Pod[], reserves: Pod[]) {
  const modelOf = (uuid: string) => cards.find((c) => c.uuid === uuid)?.model;
  const applicable = (namespace: string) =>
    quotas.filter((q) => (q.scope === 'team' ? q.team === 'tm' : q.namespace === namespace));
  const apply = (pod: Pod, sign: 1 | -1) => {
    for (const d of pod.demand) {
      const card = cards.find((c) => c.uuid === d.cardUuid) as CardCapacity;
      card.coreUsed += sign * d.core;
      card.memoryUsedMiB += sign * d.memoryMiB;
    }
    for (const q of applicable(pod.namespace)) {
      const add = demandForQuota(q, pod.demand, modelOf);
      q.coreUsed += sign * add.core;
      q.memoryUsedMiB += sign * add.memoryMiB;
    }
  };
  const released = new Map<string, Outcome>();
  for (const pod of releases) {
    apply(pod, -1);
    released.set(pod.uid, { released: pod.rows });
  }
  const reserved = new Map<string, Outcome>();
  for (const pod of reserves) {
    const cardViolations = checkCards({ cluster: 'c1', node: pod.node }, cards, pod.demand);
    const violations =
      cardViolations.length > 0 ? cardViolations : checkQuotas(applicable(pod.namespace), pod.demand, modelOf);
    if (violations.length > 0) {
      reserved.set(pod.uid, { violations });
      continue;
    }
    apply(pod, 1);
    reserved.set(pod.uid, { reused: false });
  }
  return { released, reserved };
}

type BatchScenario = typeof batchScenario extends fc.Arbitrary<infer T> ? T : never;
type ScenarioPod = BatchScenario['first'][number];
const AT = '2026-03-01T00:00:00.000Z';

/** Cards (empty) and quotas (none used) of a scenario, as the specification sees them. */
function startingState(s: BatchScenario): { cardRows: CardCapacity[]; quotaRows: QuotaCapacity[] } {
  const cardRows: CardCapacity[] = s.cards.map((c, i) => ({
    uuid: CARDS[i] as string,
    cluster: 'c1',
    model: MODEL[CARDS[i] as string] as string,
    memoryMiB: 1_000,
    coreUsed: 0,
    memoryUsedMiB: 0,
    ...c,
  }));
  const quotaRows: QuotaCapacity[] = s.quotas.map((q, i) => ({
    name: `q${i}`,
    scope: q.scope,
    cluster: q.scope === 'namespace' ? 'c1' : null,
    namespace: q.scope === 'namespace' ? q.namespace : null,
    team: q.scope === 'team' ? 'tm' : null,
    gpuModel: q.gpuModel,
    coreLimit: q.coreLimit,
    memoryLimitMiB: q.memoryLimitMiB,
    coreUsed: 0,
    memoryUsedMiB: 0,
  }));
  return { cardRows, quotaRows };
}

const podsOf = (list: readonly ScenarioPod[], prefix: string): (Pod & { items: ScenarioPod['items'] })[] =>
  list.map((p, i) => ({
    uid: `${prefix}-${i}`,
    namespace: p.namespace,
    node: p.node,
    items: p.items,
    demand: sumDemandByCard(p.items),
    rows: p.items.length,
  }));
const reserveOp = (pod: Pod & { items: ScenarioPod['items'] }) => ({
  op: 'reserve',
  cluster: 'c1',
  podUid: pod.uid,
  namespace: pod.namespace,
  pod: pod.uid,
  node: pod.node,
  at: AT,
  items: pod.items,
});
const releaseOp = (pod: Pod) => ({ op: 'release', cluster: 'c1', podUid: pod.uid, at: AT, onlyState: null });

type ScenarioOp = { pod: Pod; op: { op: string }; unknown: Violation[] };

/**
 * Two of every three pods as charges (migration 0018): their cards named by index on their node
 * (a card of another node, or unknown, is an index the node lacks) and, every other one, memory
 * null, which is the card's whole memory (1,000 MiB), as the specification is told.
 */
function mixedOps(cards: readonly CardCapacity[], pods: ReturnType<typeof podsOf>): ScenarioOp[] {
  return pods.map((pod, i) => {
    if (i % 3 === 2) return { pod, op: reserveOp(pod), unknown: [] };
    const wholeMemory = i % 2 === 0;
    const items = pod.items.map((it) => ({ ...it, memoryMiB: wholeMemory ? 1_000 : it.memoryMiB }));
    const indexOf = (uuid: string) => (CARDS.includes(uuid) ? CARDS.indexOf(uuid) : 9);
    const unknown = items
      .filter((it) => cards.find((c) => c.uuid === it.cardUuid)?.node !== pod.node)
      .map((it) => ({
        code: 'not-found' as const,
        message: `no card of index ${indexOf(it.cardUuid)} on node c1/${pod.node} is known to the ledger`,
      }));
    const op = {
      ...reserveOp(pod),
      op: 'charge',
      items: items.map((it) => ({
        container: it.container,
        cardIndex: indexOf(it.cardUuid),
        core: it.core,
        memoryMiB: wholeMemory ? null : it.memoryMiB,
      })),
    };
    return { pod: { ...pod, demand: sumDemandByCard(items) }, op, unknown };
  });
}

/** The specification of a mixed batch: a charge naming an index its node lacks is refused alone. */
function specifyMixed(
  state: ReturnType<typeof startingState>,
  releases: Pod[],
  ops: readonly ScenarioOp[],
): Map<string, Outcome> {
  const known = ops.filter((o) => o.unknown.length === 0).map((o) => o.pod);
  const spec = specify(state.cardRows, state.quotaRows, releases, known);
  const out = new Map<string, Outcome>([...spec.released, ...spec.reserved]);
  for (const o of ops) if (o.unknown.length > 0) out.set(o.pod.uid, { violations: o.unknown });
  return out;
}

describe.each(await testDbKinds())(
  'vcuda_ledger_apply batches agree with test/support/db/ledger-spec.ts on %s',
  (kind) => {
    let t: TestDatabase;
    beforeAll(async () => {
      t = await createTestDatabase(kind);
    });
    afterAll(async () => {
      await t?.drop();
    });

    async function apply(ops: unknown[]): Promise<Outcome[]> {
      const [row] = rowsOf<{ r: unknown }>(
        await t.db.execute(sql`select vcuda_ledger_apply(${JSON.stringify(ops)}::jsonb) as r`),
      );
      return (typeof row?.r === 'string' ? JSON.parse(row.r) : row?.r) as Outcome[];
    }

    /** The same batch through the function that also takes charges (migration 0018). */
    async function applyCharges(ops: unknown[]): Promise<Outcome[]> {
      const [row] = rowsOf<{ r: unknown }>(
        await t.db.execute(sql`select vcuda_ledger_apply_charges(${JSON.stringify(ops)}::jsonb, null) as r`),
      );
      return (typeof row?.r === 'string' ? JSON.parse(row.r) : row?.r) as Outcome[];
    }

    async function seed(state: ReturnType<typeof startingState>): Promise<void> {
      const now = new Date(AT);
      await t.db.execute(sql`truncate allocations, pod_holds, cards, quotas, team_namespaces`);
      await t.db.insert(cards).values(state.cardRows.map((c, i) => ({ ...c, index: i, updatedAt: now })));
      await t.db
        .insert(teamNamespaces)
        .values(NAMESPACES.map((namespace) => ({ team: 'tm', cluster: 'c1', namespace })));
      if (state.quotaRows.length > 0) {
        await t.db.insert(quotas).values(state.quotaRows.map((q) => ({ ...q, updatedAt: now })));
      }
    }

    /** The running totals in the database equal the specification's. */
    async function expectTotals(state: ReturnType<typeof startingState>): Promise<void> {
      const cardTotals = rowsOf<{ uuid: string; core_used: number; memory_used_mib: number }>(
        await t.db.execute(sql`select uuid, core_used, memory_used_mib from cards order by uuid`),
      );
      expect(cardTotals).toEqual(
        state.cardRows.map((c) => ({ uuid: c.uuid, core_used: c.coreUsed, memory_used_mib: c.memoryUsedMiB })),
      );
      const quotaTotals = rowsOf<{ name: string; core_used: number; memory_used_mib: number }>(
        await t.db.execute(sql`select name, core_used, memory_used_mib from quotas order by id`),
      );
      expect(quotaTotals).toEqual(
        state.quotaRows.map((q) => ({ name: q.name, core_used: q.coreUsed, memory_used_mib: q.memoryUsedMiB })),
      );
    }

    it('decides every operation of a batch as the rules do one after another, with the same messages', async () => {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(batchScenario, async (s) => {
          n += 1;
          const state = startingState(s);
          await seed(state);
          // The first batch: reservations only, against empty cards and quotas.
          const first = podsOf(s.first, `a${n}`);
          const firstSpec = specify(state.cardRows, state.quotaRows, [], first);
          expect(await apply(first.map(reserveOp))).toEqual(first.map((pod) => firstSpec.reserved.get(pod.uid)));

          // The second: releases of some of the first batch's pods (a refused one releases nothing)
          // interleaved with new reservations.
          const releasing = [...new Set(s.releases.map((r) => first[r % first.length] as Pod))];
          const second = podsOf(s.second, `b${n}`);
          const held = releasing.filter((pod) => 'reused' in (firstSpec.reserved.get(pod.uid) as Outcome));
          const secondSpec = specify(state.cardRows, state.quotaRows, held, second);
          const ops = second.map((pod) => ({ uid: pod.uid, op: reserveOp(pod) as unknown }));
          releasing.forEach((pod, i) => {
            ops.splice(Math.min(2 * i, ops.length), 0, { uid: pod.uid, op: releaseOp(pod) });
          });
          expect(await apply(ops.map((o) => o.op))).toEqual(
            ops.map((o) => secondSpec.released.get(o.uid) ?? secondSpec.reserved.get(o.uid) ?? { released: 0 }),
          );
          await expectTotals(state);
        }),
        { numRuns: kind === 'pglite' ? 60 : 40, seed: 7 },
      );
    }, 120_000);

    it('decides a charge as the reservation it names, beside reservations and releases, and binds it', async () => {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(batchScenario, async (s) => {
          n += 1;
          const state = startingState(s);
          await seed(state);
          const first = mixedOps(state.cardRows, podsOf(s.first, `a${n}`));
          const firstSpec = specifyMixed(state, [], first);
          expect(await applyCharges(first.map((m) => m.op))).toEqual(first.map((m) => firstSpec.get(m.pod.uid)));
          const accepted = first.filter((m) => 'reused' in (firstSpec.get(m.pod.uid) as Outcome));
          expect(await liveStates()).toEqual(
            accepted.map((m) => `${m.pod.uid} ${m.op.op === 'charge' ? 'bound' : 'reserved'}`).sort(),
          );

          // Releases of some of them (a refused one releases nothing) beside new charges and reservations.
          const releasing = [...new Set(s.releases.map((r) => first[r % first.length] as (typeof first)[number]))];
          const second = mixedOps(state.cardRows, podsOf(s.second, `b${n}`));
          const held = releasing.filter((m) => accepted.includes(m)).map((m) => m.pod);
          const secondSpec = specifyMixed(state, held, second);
          const ops = second.map((m) => ({ uid: m.pod.uid, op: m.op as unknown }));
          releasing.forEach((m, i) => {
            ops.splice(Math.min(2 * i, ops.length), 0, { uid: m.pod.uid, op: releaseOp(m.pod) });
          });
          expect(await applyCharges(ops.map((o) => o.op))).toEqual(
            ops.map((o) => secondSpec.get(o.uid) ?? { released: 0 }),
          );
          await expectTotals(state);
        }),
        { numRuns: kind === 'pglite' ? 60 : 40, seed: 11 },
      );
    }, 120_000);

    /** Every live holder with the state of its rows, as `uid state`, sorted. */
    async function liveStates(): Promise<string[]> {
      const rows = rowsOf<{ s: string }>(
        await t.db.execute(
          sql`select distinct pod_uid || ' ' || state as s from allocations where state <> 'released' order by 1`,
        ),
      );
      return rows.map((r) => r.s);
    }
  },
);
