/** One node with one card, and one pod's container holding it since `at`: usage needs an allocation. */

import type { VcudaDb } from '../../../db/connect.js';
import { createLedger } from '../../../db/ledger.js';

export async function seedAllocation(
  db: VcudaDb,
  a: {
    cluster: string;
    node: string;
    cardUuid: string;
    podUid: string;
    namespace: string;
    pod: string;
    container: string;
    core: number;
    at: Date;
  },
): Promise<void> {
  const ledger = createLedger(db, { clock: () => a.at });
  await ledger.upsertNode(a.cluster, a.node, [{ uuid: a.cardUuid, index: 0, model: 'A100', memoryMiB: 40_960 }]);
  const items = [{ container: a.container, cardUuid: a.cardUuid, core: a.core, memoryMiB: 1024 }];
  await ledger.reserve({
    cluster: a.cluster,
    podUid: a.podUid,
    namespace: a.namespace,
    pod: a.pod,
    node: a.node,
    items,
  });
}

/** The pod most usage tests report on: team-a/infer's container `model` on gpu-node-a's GPU-1. */
export const INFER_ON_NODE_A = {
  cluster: 'c1',
  node: 'gpu-node-a',
  cardUuid: 'GPU-1',
  podUid: 'uid-a',
  namespace: 'team-a',
  pod: 'infer',
  container: 'model',
} as const;
