/**
 * Invariants 1 and 5 under a real race: 8 clients fight over the last capacity of four cards and
 * of namespace and team quotas on real PostgreSQL: with a pool each, as 2 group-commit replicas,
 * and beside a replica of the previous release (which calls vcuda_reserve and vcuda_release, as
 * during a rolling upgrade). A checker reads the truth (sums of live allocations, not the running
 * totals) throughout and at the end.
 */
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VcudaError } from '../contract/index.js';
import { sumDemandByCard } from '../test/support/db/ledger-spec.js';
import { createTestDatabase, postgresForTests, type TestDatabase } from '../test/support/db/test-databases.js';
import { rowsOf, type VcudaDb } from './connect.js';
import { createLedger, type Ledger, type ReserveRequest, type Violation } from './ledger.js';
import { findCardDrift, findOvercommit } from './ledger-audit.js';
import { pgErrorCode, retryTransient } from './pg-errors.js';

const CLIENTS = 8;
const RESERVATIONS = 10_000;
const CARDS = ['GPU-r0', 'GPU-r1', 'GPU-r2', 'GPU-r3'];
const NAMESPACES = ['ns0', 'ns1', 'ns2', 'ns3'];

/** Small seeded generator (mulberry32) so a failing run can be replayed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Racer = Pick<Ledger, 'reserve' | 'release'>;

/** A replica of the previous release: one call of vcuda_reserve / vcuda_release per operation. */
function previousRelease(db: VcudaDb): Racer {
  const refuse = (violations: Violation[]) => {
    const codes = violations.map((v) => v.code);
    const code = (['invalid', 'not-found', 'capacity-conflict'] as const).find((c) => codes.includes(c));
    return new VcudaError(code ?? 'quota-exceeded', violations.map((v) => v.message).join('; '));
  };
  return {
    async reserve(req: ReserveRequest) {
      const p = JSON.stringify({ ...req, demand: sumDemandByCard(req.items) });
      try {
        const [row] = await retryTransient(async () =>
          rowsOf<{ r: unknown }>(await db.execute(sql`select vcuda_reserve(${p}::jsonb, now()) as r`)),
        );
        const r = (typeof row?.r === 'string' ? JSON.parse(row.r) : row?.r) as
          | { reused: boolean }
          | { violations: Violation[] };
        if ('violations' in r) throw refuse(r.violations);
        return { reused: r.reused };
      } catch (err) {
        if (pgErrorCode(err) === '23505') return { reused: true };
        if (pgErrorCode(err) !== 'VC001') throw err;
        let e: unknown = err;
        while (e instanceof Error && (e as { code?: string }).code !== 'VC001') e = e.cause;
        throw refuse(JSON.parse((e as Error).message) as Violation[]);
      }
    },
    async release(cluster: string, podUid: string) {
      const [row] = await retryTransient(async () =>
        rowsOf<{ n: number }>(await db.execute(sql`select vcuda_release(${cluster}, ${podUid}, now(), null) as n`)),
      );
      return { released: Number(row?.n ?? 0) };
    },
  };
}

const reachable = await postgresForTests();

describe.skipIf(!reachable)('ledger race on PostgreSQL', () => {
  let t: TestDatabase;
  beforeAll(async () => {
    t = await createTestDatabase('postgres');
    const admin = createLedger(t.db, { clock: () => new Date() });
    await admin.upsertNode('c1', 'n1', [
      { uuid: 'GPU-r0', index: 0, model: 'A100', memoryMiB: 16_000 },
      { uuid: 'GPU-r1', index: 1, model: 'A100', memoryMiB: 16_000 },
    ]);
    await admin.upsertNode('c1', 'n2', [
      { uuid: 'GPU-r2', index: 0, model: 'T4', memoryMiB: 16_000 },
      { uuid: 'GPU-r3', index: 1, model: 'T4', memoryMiB: 16_000 },
    ]);
    for (const ns of NAMESPACES) {
      await admin.setQuota({
        name: `q-${ns}`,
        scope: 'namespace',
        cluster: 'c1',
        namespace: ns,
        coreLimit: 120,
        memoryLimitMiB: 20_000,
      });
    }
    await admin.setTeam(
      'all',
      NAMESPACES.map((namespace) => ({ cluster: 'c1', namespace })),
    );
    await admin.setQuota({ name: 'team-all', scope: 'team', team: 'all', coreLimit: 330, memoryLimitMiB: 60_000 });
    await admin.setQuota({
      name: 'ns0-t4',
      scope: 'namespace',
      cluster: 'c1',
      namespace: 'ns0',
      gpuModel: 'T4',
      coreLimit: 50,
      memoryLimitMiB: 8_000,
    });
  });
  afterAll(async () => {
    await t?.drop();
  });

  // Group commit (the default): 2 replicas, each one ledger shared by 4 clients whose reservations
  // and releases go out in batches (one call of vcuda_ledger_apply each), two batches in flight
  // per replica, racing each other's batches.
  it.each([
    { setup: 'one transaction per call', kind: 'per-call' },
    { setup: 'group commit, 2 replicas', kind: 'grouped' },
    { setup: 'a replica of the previous release beside a group-commit one', kind: 'upgrade' },
  ])(
    `never overcommits a card or a quota over ${RESERVATIONS} contended reservations ($setup)`,
    async ({ kind }) => {
      let attempts = 0;
      const outcome = { ok: 0, reused: 0, 'capacity-conflict': 0, 'quota-exceeded': 0 } as Record<string, number>;
      const seenOvercommit: string[] = [];
      let running = true;

      const checker = (async () => {
        while (running) {
          seenOvercommit.push(...(await findOvercommit(t.db)));
          await new Promise((r) => setTimeout(r, 200));
        }
      })();

      async function client(id: number, ledger: Racer): Promise<void> {
        const random = seeded(1000 + id);
        const held: string[] = [];
        let n = 0;
        while (attempts < RESERVATIONS) {
          attempts += 1;
          const uid = `${kind}-c${id}-p${n++}`;
          const card = CARDS[Math.floor(random() * CARDS.length)] as string;
          const node = card === 'GPU-r0' || card === 'GPU-r1' ? 'n1' : 'n2';
          const sibling =
            card.endsWith('0') || card.endsWith('2') ? card.replace(/.$/, (d) => String(Number(d) + 1)) : undefined;
          const items = [
            {
              container: 'main',
              cardUuid: card,
              core: 10 + Math.floor(random() * 50),
              memoryMiB: 500 + Math.floor(random() * 5_000),
            },
          ];
          // Some pods take shares of two cards at once (all-or-nothing across cards).
          if (sibling && random() < 0.2)
            items.push({ container: 'side', cardUuid: sibling, core: 10, memoryMiB: 1_000 });
          const namespace = NAMESPACES[Math.floor(random() * NAMESPACES.length)] as string;
          try {
            const r = await ledger.reserve({ cluster: 'c1', podUid: uid, namespace, pod: uid, node, items });
            outcome[r.reused ? 'reused' : 'ok'] = (outcome[r.reused ? 'reused' : 'ok'] ?? 0) + 1;
            held.push(uid);
          } catch (err) {
            if (!(err instanceof VcudaError)) throw err;
            outcome[err.code] = (outcome[err.code] ?? 0) + 1;
          }
          // Churn: release now and then so the last capacity keeps changing hands.
          if (held.length > 0 && (random() < 0.35 || held.length > 4)) {
            const [victim] = held.splice(Math.floor(random() * held.length), 1);
            await ledger.release('c1', victim as string);
          }
        }
        // Leave the capacity free for the next setup's run.
        for (const uid of held) await ledger.release('c1', uid);
      }

      const grouped = async () =>
        createLedger(await t.open(2), { clock: () => new Date(), groupCommit: { maxBatch: 16, maxInFlight: 2 } });
      const replicas: Racer[] =
        kind === 'grouped'
          ? [await grouped(), await grouped()]
          : kind === 'upgrade'
            ? [previousRelease(await t.open(4)), await grouped()]
            : [];
      const ledgers: Racer[] =
        replicas.length > 0
          ? Array.from({ length: CLIENTS }, (_, id) => replicas[id % 2] as Racer)
          : await Promise.all(
              Array.from({ length: CLIENTS }, async () =>
                createLedger(await t.open(1), { clock: () => new Date(), groupCommit: false }),
              ),
            );
      await Promise.all(ledgers.map((ledger, id) => client(id, ledger)));
      running = false;
      await checker;

      expect(seenOvercommit).toEqual([]);
      expect(await findOvercommit(t.db)).toEqual([]);
      // The running totals equal the truth.
      expect(await findCardDrift(t.db)).toEqual([]);
      const quotasBefore = await createLedger(t.db, { clock: () => new Date() }).listQuotas();
      await createLedger(t.db, { clock: () => new Date() }).recomputeQuotaTotals();
      const quotasAfter = await createLedger(t.db, { clock: () => new Date() }).listQuotas();
      expect(quotasAfter.map((q) => [q.name, q.coreUsed, q.memoryUsedMiB])).toEqual(
        quotasBefore.map((q) => [q.name, q.coreUsed, q.memoryUsedMiB]),
      );
      // The race was real: capacity and quotas were both hit many times.
      expect(attempts).toBeGreaterThanOrEqual(RESERVATIONS);
      expect(outcome['capacity-conflict']).toBeGreaterThan(500);
      expect(outcome['quota-exceeded']).toBeGreaterThan(500);
      expect(outcome.ok).toBeGreaterThan(1_000);
      console.log(`ledger race: ${attempts} reservations`, outcome);
    },
    120_000,
  );
});
