/**
 * A stand-in kubelet for control planes without one (the simulated API server alone, or a real
 * kube-apiserver + kube-controller-manager): one step per tick, every Pending pod a Job owns
 * succeeds (fails when the Job's name starts with `fail`), every other runs and turns Ready, and a
 * pod being deleted is confirmed gone (grace 0).
 */
import { controllerOf } from '../../../sim/controllers/workload-objects.js';
import { type KubeClient, type KubeObj, podPath } from '../../../sim/kube-client.js';

/** Starts the loop; the returned function stops it. `onTick` sees every list it acts on. */
export function runPods(client: KubeClient, onTick: (pods: KubeObj[]) => void = () => {}): () => Promise<void> {
  let stopped = false;
  const step = async (p: KubeObj) => {
    const ns = p.metadata.namespace ?? 'default';
    if (p.metadata.deletionTimestamp) {
      await client.request('DELETE', podPath(ns, p.metadata.name), { gracePeriodSeconds: 0 }).catch(() => {});
      return;
    }
    if ((p['status'] as { phase?: string } | undefined)?.phase !== 'Pending') return;
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const owner = controllerOf(p);
    const status =
      owner?.kind === 'Job'
        ? { phase: owner.name.startsWith('fail') ? 'Failed' : 'Succeeded' }
        : { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }] };
    await client.mergePatch(`${podPath(ns, p.metadata.name)}/status`, { status }).catch(() => {});
  };
  const loop = async () => {
    while (!stopped) {
      const pods = await client.list('/api/v1/pods').then(
        (l) => l.items,
        () => [],
      );
      onTick(pods);
      for (const p of pods) await step(p);
      await new Promise((r) => setTimeout(r, 30));
    }
  };
  const done = loop();
  return async () => {
    stopped = true;
    await done;
  };
}
