/**
 * Local mode's preemption (the simulated scheduler calling vcuda's preempt verb): on gpu-node-0's
 * 8 cards, 16 low-priority 50-core pods, then a priority-1000 pod asking a whole card runs within
 * 30 s after exactly the two pods of one card were evicted (preemption-scenario.ts).
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import { preemptAroundBudget, preemptOneCard } from './preemption-scenario.js';
import { createNamespace, emptyNamespace, localClusterRig, type Rig } from './scheduling-scenarios.js';

const NS = 'preemption';

describe('preemption on the simulator', () => {
  let lc: LocalCluster;
  let rig: Rig;
  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({ name: 'preemption', nodes: [{ count: 1, cards: 8 }] }),
      logLevel: (process.env['VCUDA_TEST_LOG_LEVEL'] as 'info' | undefined) ?? 'silent',
    });
    rig = localClusterRig(lc);
    await createNamespace(rig, NS);
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  it('evicts exactly the two pods of one card for a whole-card pod of higher priority', async () => {
    await preemptOneCard(rig, NS, 'gpu-node-0', 8, lc.url);
  }, 240_000);

  it('spares the pods a PodDisruptionBudget protects, choosing another card', async () => {
    await emptyNamespace(rig, NS);
    await preemptAroundBudget(rig, NS, 'gpu-node-0', 8);
  }, 240_000);
});
