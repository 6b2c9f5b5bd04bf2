/**
 * The status manager writes what the kubelet's would: the latest status of each pod, never a
 * stale one after a newer, and never onto a namesake created after the pod it reports on.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type SimApiServer, startApiServer } from '../apiserver/api-server.js';
import { KubeClient, podPath } from '../kube-client.js';
import { StatusManager } from './status-manager.js';

describe('kubelet status manager', () => {
  let api: SimApiServer;
  let client: KubeClient;

  beforeEach(async () => {
    api = await startApiServer();
    client = new KubeClient(api.url);
  });
  afterEach(async () => api.close());

  const create = async (name: string) =>
    client.create(podPath('default'), {
      metadata: { name },
      spec: { nodeName: 'n1', containers: [{ name: 'main', image: 'x:1' }] },
    });
  const phaseOf = async (name: string) =>
    ((await client.get(podPath('default', name))).status as { phase?: string } | undefined)?.phase;

  it('sends the latest status of a pod, in the order the reports were made', async () => {
    const pod = await create('p');
    const ref = { uid: pod.metadata.uid!, namespace: 'default', name: 'p' };
    const status = new StatusManager(client);
    status.set(ref, { status: { phase: 'Running' } });
    status.set(ref, { status: { phase: 'Failed', reason: 'Error' } });
    await status.idle();
    expect(await phaseOf('p')).toBe('Failed');
  });

  it('leaves alone a pod recreated under the same name, and a pod that is gone', async () => {
    const old = await create('same');
    await client.request('DELETE', podPath('default', 'same'), {
      kind: 'DeleteOptions',
      apiVersion: 'v1',
      gracePeriodSeconds: 0,
    });
    await create('same');
    const status = new StatusManager(client);
    status.set({ uid: old.metadata.uid!, namespace: 'default', name: 'same' }, { status: { phase: 'Failed' } });
    status.set({ uid: 'never-existed', namespace: 'default', name: 'absent' }, { status: { phase: 'Running' } });
    await status.idle();
    expect(await phaseOf('same')).not.toBe('Failed');
  });
});
