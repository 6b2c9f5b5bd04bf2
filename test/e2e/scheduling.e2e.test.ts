/**
 * The scheduling scenarios on the simulator (the same steps run against a real kube-apiserver and
 * kube-scheduler in scheduling-real.e2e.test.ts): identical pods on one node, a control-plane
 * restart mid-burst, a pod's whole life. The scheduler keeps the shipped configuration's backoff.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';
import {
  createNamespace,
  emptyNamespace,
  identicalPodsOnOneNode,
  podLife,
  type Rig,
  restartMidBurst,
} from './scheduling-scenarios.js';

const NS = 'scheduling';

describe('scheduling on the simulator', () => {
  let lc: LocalCluster;
  let rig: Rig;
  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'scheduling',
        nodes: [{ namePrefix: 'node', count: 2, cards: 2, memoryMiB: 8192 }],
      }),
      logLevel: (process.env['VCUDA_TEST_LOG_LEVEL'] as 'info' | undefined) ?? 'silent',
    });
    rig = {
      client: lc.client,
      db: lc.db,
      nodeNames: lc.nodes.map((n) => n.name),
      killControlPlane: () => lc.killReplica(0),
      startControlPlane: () => lc.startReplica(0),
    };
    await createNamespace(rig, NS);
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);
  afterEach(async () => emptyNamespace(rig, NS), 60_000);

  it('places identical pods on one node, each with its own share', async () => {
    await identicalPodsOnOneNode(rig, NS, 8);
  }, 120_000);

  it('binds the waiting pods within seconds of a control-plane restart with cards free', async () => {
    expect(await restartMidBurst(rig, NS, 4, 6)).toBeLessThan(15);
  }, 120_000);

  it("runs a pod's whole life", async () => {
    await podLife(rig, NS);
  }, 60_000);
});
