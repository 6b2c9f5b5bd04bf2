/**
 * No stalls. kube-scheduler parks a pod the extender refused in its unschedulable pool and only
 * retries it on a cluster event, or after 5 minutes. The node agent allocating a pending pod (an
 * annotation on an assigned pod) is not such an event, and 1.26 does not count a pod finishing
 * either. So when capacity frees, we patch an annotation on the pods refused for capacity: an
 * update of a parked pod moves it out of the pool at once (verified on kube-scheduler 1.32). It
 * cannot beat the pod's backoff (`podInitialBackoffSeconds` doubling to `podMaxBackoffSeconds`):
 * a pod nudged while backing off is retried when its backoff ends. The pods to nudge are remembered
 * here on refusal and adopted from the watch cache at start and periodically (stalled-pods.ts).
 */
import type { CapacityFreed } from '../cluster-state.js';

/** The annotation the nudge writes; its value is the time, so each nudge is a real change. */
export const NUDGE_ANNOTATION = 'vcuda.io/capacity-freed-at';

export type NudgeTarget = { namespace: string; name: string; uid: string };

export type NudgerDeps = {
  patch: (t: NudgeTarget, annotations: Record<string, string>) => Promise<void>;
  clock: () => Date;
  onNudged?: (t: NudgeTarget) => void;
  onError?: (t: NudgeTarget, err: unknown) => void;
  /** Frees close together are handled once (default 100 ms). */
  debounceMs?: number;
  /** At most this many pods per round, oldest refusal first (default 200). */
  maxPerRound?: number;
};

export class Nudger {
  private readonly refused = new Map<string, NudgeTarget & { sinceMs: number }>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly deps: NudgerDeps) {}

  /** Remembers a pod that filter refused for lack of capacity. */
  rememberRefused(t: NudgeTarget): void {
    if (!this.refused.has(t.uid)) this.refused.set(t.uid, { ...t, sinceMs: this.deps.clock().getTime() });
  }

  /** Forgets a pod that was bound or deleted. */
  forget(uid: string): void {
    this.refused.delete(uid);
  }

  waiting(): number {
    return this.refused.size;
  }

  /** Capacity freed somewhere: nudge the refused pods soon (coalescing bursts of frees). */
  capacityFreed(_e?: CapacityFreed): void {
    if (this.closed || this.refused.size === 0 || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.running.then(async () => {
        await this.nudgeNow();
      });
    }, this.deps.debounceMs ?? 100);
    this.timer.unref();
  }

  /** Nudges now; returns how many pods were patched. */
  async nudgeNow(): Promise<number> {
    const batch = [...this.refused.values()]
      .sort((a, b) => a.sinceMs - b.sinceMs)
      .slice(0, this.deps.maxPerRound ?? 200);
    const value = this.deps.clock().toISOString();
    let done = 0;
    await Promise.all(
      batch.map(async (t) => {
        // Forget first: if the retry is refused again, filter remembers it again.
        this.refused.delete(t.uid);
        try {
          await this.deps.patch(t, { [NUDGE_ANNOTATION]: value });
          done += 1;
          this.deps.onNudged?.(t);
        } catch (err) {
          this.deps.onError?.(t, err);
        }
      }),
    );
    return done;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
