/**
 * A (re)started control plane wakes the pods kube-scheduler holds as unschedulable, although it
 * never refused them itself: they are found in the watch cache once it syncs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { gpuNode, gpuPod } from '../../test/support/control-plane/builders.js';
import { type FakeKubeApi, startFakeKubeApi } from '../../test/support/control-plane/fake-kube-api.js';
import { loadControlPlaneConfig } from '../config.js';
import { type RunningControlPlane, startControlPlane } from '../server.js';
import { NUDGE_ANNOTATION } from './nudger.js';

const parked = { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/1 nodes are available' };

describe('control plane start', () => {
  let db: VcudaDb;
  let api: FakeKubeApi;
  let cp: RunningControlPlane | undefined;
  beforeAll(async () => {
    db = await connectDb({});
    await migrate(db);
    api = await startFakeKubeApi();
  });
  afterAll(async () => {
    await cp?.close();
    await api.close();
    await closeDb(db);
  });

  it('nudges the vcuda pods kube-scheduler parked as unschedulable before it started, and no others', async () => {
    api.putNode(gpuNode({ name: 'n1', cards: 1 }));
    const waiting = gpuPod('waiting', [{ core: 50, memoryMiB: 1024 }]);
    api.putPod({ ...waiting, status: { phase: 'Pending', conditions: [parked] } });
    api.putPod({ ...gpuPod('fresh', [{ core: 50 }]), status: { phase: 'Pending' } });
    const plain = gpuPod('plain', [{ core: 50 }]);
    api.putPod({
      ...plain,
      spec: { containers: [{ name: 'c', image: 'busybox' }] },
      status: { phase: 'Pending', conditions: [parked] },
    });
    const config = loadControlPlaneConfig({
      flags: {
        logLevel: 'silent',
        port: 0,
        httpsPort: 0,
        host: '127.0.0.1',
        kube: { mode: 'kubeconfig' },
        namespace: 'vcuda-system',
      },
    });
    cp = await startControlPlane(config, { db, kubeConfig: api.kubeConfig });
    const annotations = (name: string) =>
      (api.pods.get(`default/${name}`)?.metadata.annotations ?? {}) as Record<string, string>;
    await expect.poll(() => annotations('waiting')[NUDGE_ANNOTATION], { timeout: 10_000 }).toBeTruthy();
    expect(annotations('fresh')[NUDGE_ANNOTATION]).toBeUndefined();
    expect(annotations('plain')[NUDGE_ANNOTATION]).toBeUndefined();
  });
});
