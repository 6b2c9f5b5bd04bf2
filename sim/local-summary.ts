/**
 * The running summary `vcuda local` prints: pods by state, vcuda pods placed on cards, what
 * admission refused, what waits for capacity, and how much of the cards is promised.
 */
import { peekAssignment, vcudaAnnotations } from '../contract/index.js';
import type { KubeClient } from './kube-client.js';

export type LocalSummary = {
  pods: number;
  running: number;
  pending: number;
  failed: number;
  placedOnCards: number;
  unschedulable: number;
  coreUsed: number;
  coreCapacity: number;
  memoryUsedMiB: number;
  memoryCapacityMiB: number;
};

export async function readSummary(
  client: KubeClient,
  capacity: { core: number; memoryMiB: number },
): Promise<LocalSummary> {
  const pods = (await client.list('/api/v1/pods')).items;
  const s: LocalSummary = {
    pods: pods.length,
    running: 0,
    pending: 0,
    failed: 0,
    placedOnCards: 0,
    unschedulable: 0,
    coreUsed: 0,
    coreCapacity: capacity.core,
    memoryUsedMiB: 0,
    memoryCapacityMiB: capacity.memoryMiB,
  };
  for (const p of pods) {
    const status = (p.status ?? {}) as {
      phase?: string;
      conditions?: { type: string; status: string; reason?: string }[];
    };
    if (status.phase === 'Running') s.running++;
    else if (status.phase === 'Pending') s.pending++;
    else if (status.phase === 'Failed') s.failed++;
    if (status.conditions?.some((c) => c.type === 'PodScheduled' && c.status === 'False')) s.unschedulable++;
    const token = p.metadata.annotations?.[vcudaAnnotations.assignment];
    const a = token ? peekAssignment(token) : undefined;
    if (!a || status.phase === 'Succeeded' || status.phase === 'Failed') continue;
    if (status.phase === 'Running') s.placedOnCards++;
    for (const c of a.containers) {
      if (c.isInit) continue;
      for (const g of c.cards) {
        s.coreUsed += g.core;
        s.memoryUsedMiB += Math.round(g.memoryBytes / 2 ** 20);
      }
    }
  }
  return s;
}

function pct(n: number, d: number): string {
  return d === 0 ? '0%' : `${Math.round((100 * n) / d)}%`;
}

export function formatSummary(s: LocalSummary, refused: number): string {
  return (
    `pods ${s.pods}: ${s.running} running (${s.placedOnCards} on vcuda cards), ${s.pending} pending` +
    ` (${s.unschedulable} waiting for capacity), ${s.failed} failed | refused at admission ${refused}` +
    ` | cards: core ${pct(s.coreUsed, s.coreCapacity)}, memory ${pct(s.memoryUsedMiB, s.memoryCapacityMiB)} promised`
  );
}
