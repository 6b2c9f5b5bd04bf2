/**
 * The SQL functions (`vcuda_reserve`, migration 0002) against the specification in
 * capacity-check.ts: for random card and quota states and random pods, the function must accept
 * exactly what the pure rules accept and refuse with exactly their code and message.
 */

import { sql } from 'drizzle-orm';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VcudaError } from '../contract/index.js';
import { createTestDatabase, type TestDatabase } from '../test/support/db/test-databases.js';
import { type CardCapacity, checkCards, checkQuotas, type QuotaCapacity, sumDemandByCard } from './capacity-check.js';
import { createLedger } from './ledger.js';
import { cards, quotas, teamNamespaces } from './schema.js';

const CARDS = ['GPU-a', 'GPU-b', 'GPU-c'];
const MODEL: Record<string, string> = { 'GPU-a': 'A100', 'GPU-b': 'T4', 'GPU-c': 'T4' };

const cardState = fc.record({
  coreUsed: fc.integer({ min: 0, max: 100 }),
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

describe('vcuda_reserve agrees with capacity-check.ts', () => {
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

        const demand = sumDemandByCard(s.items);
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
