/**
 * Plays a workload trace into the simulated cluster as a user would with kubectl: creates each
 * pod at its arrival time through the API server (so admission and scheduling see it exactly as
 * they would), deletes it when its duration ends, and counts what admission refused and why.
 */
import { KubeApiError, type KubeClient, podPath } from '../kube-client.js';
import type { TraceEntry } from './workload-spec.js';

export type GeneratorStats = { created: number; refused: number; deleted: number; lastRefusal?: string };

export type WorkloadGenerator = { stats(): GeneratorStats; done: Promise<void>; stop(): void };

export function startWorkloadGenerator(
  client: KubeClient,
  trace: readonly TraceEntry[],
  opts: { timeScale?: number; onRefusal?: (pod: string, message: string) => void } = {},
): WorkloadGenerator {
  const scale = opts.timeScale ?? 1;
  const stats: GeneratorStats = { created: 0, refused: 0, deleted: 0 };
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  const after = (seconds: number, fn: () => Promise<void>) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(
        () => {
          timers.delete(t);
          if (stopped) return resolve();
          fn().finally(resolve);
        },
        seconds * 1000 * scale,
      );
      t.unref();
      timers.add(t);
    });
  const jobs = trace.map((entry) =>
    after(entry.arriveAtSeconds, async () => {
      const ns = entry.pod.metadata.namespace;
      try {
        await client.create(podPath(ns), entry.pod);
        stats.created++;
      } catch (e) {
        if (e instanceof KubeApiError && e.code >= 400 && e.code < 500 && e.code !== 409) {
          stats.refused++;
          stats.lastRefusal = `${ns}/${entry.pod.metadata.name}: ${e.message}`;
          opts.onRefusal?.(`${ns}/${entry.pod.metadata.name}`, e.message);
        }
        return;
      }
      if (entry.durationSeconds) {
        await after(entry.durationSeconds, async () => {
          await client.delete(podPath(ns, entry.pod.metadata.name)).catch(() => undefined);
          stats.deleted++;
        });
      }
    }),
  );
  return {
    stats: () => ({ ...stats }),
    done: Promise.all(jobs).then(() => undefined),
    stop: () => {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
}
