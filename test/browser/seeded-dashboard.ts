/**
 * A small cluster for the browser test, in a real ledger (embedded PGlite): two nodes of cards,
 * pods reserved and bound through the ledger's own API, quotas, usage samples. The numbers the
 * page must show are computed here from the placements, independently of the dashboard's code.
 */

import { claimHolderId } from '../../contract/index.js';
import { createLedgerDashboardSource } from '../../control-plane/dashboard/ledger-source.js';
import type { DashboardSource, Preemption, Refusal } from '../../control-plane/dashboard/source.js';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { createLedger } from '../../db/ledger.js';
import { migrate } from '../../db/migrate.js';
import { createReportRunner } from '../../db/reports.js';

type Placement = {
  namespace: string;
  pod: string;
  container: string;
  cardUuid: string;
  core: number;
  memoryMiB: number;
};

const CLUSTER = 'local';
/** The one pod that bursts, by how much (its latest sample): the page must badge it and no other. */
export const BURSTING = { pod: 'research/share-30', card: 'GPU-a0000000-0000-0000-0000-000000000000', mib: 2048 };
const HOUR = 3_600_000;
/** A DRA claim's share, charged as the claim hook does: the page must list it on its card as a claim. */
export const CLAIM = {
  namespace: 'research',
  name: 'finetune',
  uid: 'c0ffee00-0000-4000-8000-000000000001',
  card: 'GPU-a1111111-1111-1111-1111-111111111111',
  core: 25,
  memoryMiB: 6144,
};

const cards = [
  {
    node: 'gpu-node-a',
    uuid: 'GPU-a0000000-0000-0000-0000-000000000000',
    index: 0,
    model: 'NVIDIA A100-SXM4-40GB',
    memoryMiB: 40960,
  },
  {
    node: 'gpu-node-a',
    uuid: 'GPU-a1111111-1111-1111-1111-111111111111',
    index: 1,
    model: 'NVIDIA A100-SXM4-40GB',
    memoryMiB: 40960,
  },
  {
    node: 'gpu-node-b',
    uuid: 'GPU-b0000000-0000-0000-0000-000000000000',
    index: 0,
    model: 'Tesla T4',
    memoryMiB: 15360,
  },
  {
    node: 'gpu-node-b',
    uuid: 'GPU-b1111111-1111-1111-1111-111111111111',
    index: 1,
    model: 'Tesla T4',
    memoryMiB: 15360,
  },
] as const;

export type ExpectedCard = { uuid: string; coreUsed: number; memoryUsedMiB: number; memoryMiB: number; pods: string[] };

export function seededDashboard(opts: {
  readRefusals: (limit: number) => Promise<Refusal[]>;
  readPreemptions?: (limit: number) => Promise<Preemption[]>;
}) {
  const placements: Placement[] = [];
  let db: VcudaDb | undefined;
  // Pods were placed three hours ago; the clock then moves to now so GPU-hours accrue.
  let clockMs = Date.now() - 3 * HOUR;
  const clock = () => new Date(clockMs);

  const ledgerOf = () => createLedger(db as VcudaDb, { clock });

  async function place(pod: string, namespace: string, items: Omit<Placement, 'pod' | 'namespace'>[]) {
    const node = cards.find((c) => c.uuid === items[0]?.cardUuid)?.node as string;
    const ledger = ledgerOf();
    await ledger.reserve({ cluster: CLUSTER, podUid: `uid-${pod}`, namespace, pod, node, items });
    await ledger.confirm(CLUSTER, `uid-${pod}`);
    for (const i of items) placements.push({ pod, namespace, ...i });
  }

  /** Charges a claim's share as control-plane/claim-ledger does: holder claim:<uid>, one row per share. */
  async function chargeClaim(c: typeof CLAIM) {
    const ledger = ledgerOf();
    const holder = claimHolderId(c.uid);
    const item = { container: 'gpu/share-1', cardUuid: c.card, core: c.core, memoryMiB: c.memoryMiB };
    await ledger.reserve({
      cluster: CLUSTER,
      podUid: holder,
      namespace: c.namespace,
      pod: c.name,
      node: 'gpu-node-a',
      items: [item],
    });
    await ledger.confirm(CLUSTER, holder);
    placements.push({ pod: c.name, namespace: c.namespace, ...item });
  }

  let source: DashboardSource | undefined;

  return {
    get source(): DashboardSource {
      if (!source) throw new Error('start() first');
      return source;
    },
    async start() {
      db = await connectDb({});
      await migrate(db);
      const ledger = ledgerOf();
      for (const node of new Set(cards.map((c) => c.node))) {
        await ledger.upsertNode(
          CLUSTER,
          node,
          cards
            .filter((c) => c.node === node)
            .map(({ uuid, index, model, memoryMiB }) => ({ uuid, index, model, memoryMiB })),
        );
      }
      for (const ns of ['research', 'serving']) {
        await ledger.setQuota({
          name: ns,
          scope: 'namespace',
          cluster: CLUSTER,
          namespace: ns,
          coreLimit: 200,
          memoryLimitMiB: 40960,
        });
      }
      await ledger.setTeam('vision', [{ cluster: CLUSTER, namespace: 'research' }]);
      await place('share-30', 'research', [{ container: 'main', cardUuid: cards[0].uuid, core: 30, memoryMiB: 8192 }]);
      await place('notebook', 'research', [{ container: 'main', cardUuid: cards[0].uuid, core: 20, memoryMiB: 4096 }]);
      await place('two-cards', 'serving', [
        { container: 'main', cardUuid: cards[2].uuid, core: 100, memoryMiB: 15360 },
        { container: 'main', cardUuid: cards[3].uuid, core: 100, memoryMiB: 15360 },
      ]);
      await chargeClaim(CLAIM);
      clockMs = Date.now();
      // The notebook sat idle for its last half hour; the others worked.
      const sample = (pod: string, ns: string, card: string, smPct: number, burstMiB = 0) => ({
        cluster: CLUSTER,
        namespace: ns,
        podUid: `uid-${pod}`,
        container: 'main',
        cardUuid: card,
        sampledAt: new Date(clockMs - 20 * 60_000),
        periodS: 1200,
        smPct,
        memoryUsedMiB: 1024,
        // share-30 bursts above its request (vcuda-memory-limit), a quarter of it on the host.
        memoryBurstMiB: burstMiB,
        memoryBurstEvictedMiB: burstMiB / 4,
        burstEvicted: burstMiB > 0,
      });
      await ledger.recordUsage([
        sample('notebook', 'research', cards[0].uuid, 0.5),
        sample('share-30', 'research', cards[0].uuid, 25, BURSTING.mib),
        sample('two-cards', 'serving', cards[2].uuid, 90),
        sample('two-cards', 'serving', cards[3].uuid, 80),
      ]);
      source = createLedgerDashboardSource({
        db,
        reports: createReportRunner(db, { clock: () => new Date() }),
        clock: () => new Date(),
        readRefusals: opts.readRefusals,
        ...(opts.readPreemptions ? { readPreemptions: opts.readPreemptions } : {}),
      });
    },
    async stop() {
      if (db) await closeDb(db);
    },
    expectedCards(): ExpectedCard[] {
      return cards.map((c) => {
        const on = placements.filter((p) => p.cardUuid === c.uuid);
        return {
          uuid: c.uuid,
          memoryMiB: c.memoryMiB,
          coreUsed: on.reduce((s, p) => s + p.core, 0),
          memoryUsedMiB: on.reduce((s, p) => s + p.memoryMiB, 0),
          pods: [...new Set(on.map((p) => `${p.namespace}/${p.pod}`))],
        };
      });
    },
    /** Places one more pod through the ledger and returns its card's new numbers. */
    async placeOnePod(): Promise<ExpectedCard> {
      clockMs = Date.now();
      await place('late-arrival', 'research', [
        { container: 'main', cardUuid: cards[1].uuid, core: 40, memoryMiB: 2048 },
      ]);
      return this.expectedCards().find((c) => c.uuid === cards[1].uuid) as ExpectedCard;
    },
  };
}
