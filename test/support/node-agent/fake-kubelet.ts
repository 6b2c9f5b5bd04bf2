/**
 * The kubelet as node-agent tests meet it: the simulator's device manager (sim/kubelet/
 * device-manager.ts, the one model of the kubelet's Registration, ListAndWatch, Allocate,
 * PreStartContainer and PodResources) plus what tests read and break: a wait on registrations
 * and device updates, PodResources keyed by `namespace/name`, a counter of `List` calls and a hook
 * that rewrites what `List` reports. Test-only.
 */
import type { PodResources } from '../../../node-agent/kubelet/protocol.js';
import { DeviceManager, kubeletPaths } from '../../../sim/kubelet/device-manager.js';

export type { AdmitResult, KubeletContainer, KubeletPod } from '../../../sim/kubelet/device-manager.js';

/** Wall time of every RPC the fake kubelet made, by method (for benchmarks). */
export const rpcTimingsMs: Record<string, number[]> = {};

const recordRpc = (method: string, ms: number) => {
  rpcTimingsMs[method] ??= [];
  rpcTimingsMs[method].push(ms);
};

export class FakeKubelet extends DeviceManager {
  /** Test hook: rewrite what PodResources reports (to prove a mismatch fails loudly). */
  tamper: ((pods: PodResources[]) => PodResources[]) | undefined;
  /** PodResources List calls served (the real kubelet rate-limits them: 100 QPS, burst 10). */
  listCalls = 0;

  static override async start(root: string): Promise<FakeKubelet> {
    const { pluginDir, podResourcesSocket } = kubeletPaths(root);
    const k = new FakeKubelet(pluginDir, podResourcesSocket, recordRpc);
    await k.open();
    return k;
  }

  protected override servePodResources(): PodResources[] {
    this.listCalls++;
    const pods = this.listPodResources();
    return this.tamper ? this.tamper(pods) : pods;
  }

  /** `namespace/name` → container → resource → device IDs (what admission recorded). */
  get podDevices(): Map<string, Map<string, Map<string, string[]>>> {
    return this.assignments();
  }

  /** Resolves when `predicate` holds, re-checked on every registration and device update. */
  waitFor(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
    if (predicate()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        stopListening();
        reject(new Error(`fake kubelet: timed out waiting for ${what}`));
      }, timeoutMs);
      const stopListening = this.onChange(() => {
        if (!predicate()) return;
        clearTimeout(timer);
        stopListening();
        resolve();
      });
    });
  }
}
