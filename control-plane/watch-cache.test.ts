import { afterEach, describe, expect, it } from 'vitest';
import { assignedPod, cardUuid, gpuNode, testState } from '../test/support/control-plane/builders.js';
import { type FakeKubeApi, startFakeKubeApi } from '../test/support/control-plane/fake-kube-api.js';
import { createWatchCache, type WatchCache } from './watch-cache.js';

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('watch cache over the Kubernetes API', () => {
  let api: FakeKubeApi | undefined;
  let cache: WatchCache | undefined;
  afterEach(async () => {
    await cache?.stop();
    await api?.close();
  });

  it('lists at start, follows watch events, and rebuilds the same view from scratch', async () => {
    api = await startFakeKubeApi();
    api.putNode(gpuNode({ name: 'n1', cards: 2 }));
    api.putPod(assignedPod('a', 'n1', [{ core: 40, memoryMiB: 1000, cards: [0] }]));
    cache = createWatchCache(api.kubeConfig, testState());
    await cache.start();
    expect(cache.isSynced()).toBe(true);
    const card0 = () =>
      cache?.state
        .snapshot()
        .nodes.get('n1')
        ?.cards.find((c) => c.uuid === cardUuid('n1', 0));
    expect(card0()?.usedCore).toBe(40);

    api.putPod(assignedPod('b', 'n1', [{ core: 20, memoryMiB: 500, cards: [0] }]));
    await until(() => card0()?.usedCore === 60, 'pod b to count');
    api.deletePod('default', 'a');
    await until(() => card0()?.usedCore === 20, 'pod a to be released');

    // A fresh replica (restart) sees exactly the same use.
    await cache.stop();
    cache = createWatchCache(api.kubeConfig, testState());
    await cache.start();
    expect(card0()).toMatchObject({ usedCore: 20, usedMemoryMiB: 500 });
  });
});
