/**
 * The running summary `vcuda local` prints: pods by state, vcuda pods placed on cards, what
 * admission refused, what waits for capacity, how much of the cards is promised, and the nodes
 * whose agent stopped reporting (its heartbeat older than the control plane's limit), whose pods
 * the API server still calls Running.
 */
import { peekAssignment, vcudaAnnotations } from '../contract/index.js';
import { readNodeInventory } from '../control-plane/placement/cluster-snapshot.js';
import type { KubeClient, KubeObj } from './kube-client.js';

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
  nodes: number;
  /** Nodes whose agent's last heartbeat is older than the limit (or that never sent one). */
  nodesNotReporting: string[];
};

/** The limit the control plane judges heartbeats by (its `heartbeatStaleSeconds`, 60 by default). */
export const DEFAULT_HEARTBEAT_LIMIT_SECONDS = 60;

function silentNodes(nodes: readonly KubeObj[], limitSeconds: number, nowMs: number): string[] {
  return nodes
    .filter((n) => {
      const { heartbeatMs } = readNodeInventory(n as never);
      return heartbeatMs === 0 || nowMs - heartbeatMs > limitSeconds * 1000;
    })
    .map((n) => n.metadata.name);
}

export async function readSummary(
  client: KubeClient,
  capacity: { core: number; memoryMiB: number },
  heartbeat: { limitSeconds: number; nowMs: number } = {
    limitSeconds: DEFAULT_HEARTBEAT_LIMIT_SECONDS,
    nowMs: Date.now(),
  },
): Promise<LocalSummary> {
  const [pods, nodes] = await Promise.all([
    client.list('/api/v1/pods').then((l) => l.items),
    client.list('/api/v1/nodes').then((l) => l.items),
  ]);
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
    nodes: nodes.length,
    nodesNotReporting: silentNodes(nodes, heartbeat.limitSeconds, heartbeat.nowMs),
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
    ` | cards: core ${pct(s.coreUsed, s.coreCapacity)}, memory ${pct(s.memoryUsedMiB, s.memoryCapacityMiB)} promised` +
    (s.nodesNotReporting.length > 0
      ? ` | NOT REPORTING: ${s.nodesNotReporting.join(', ')} (node agent silent; its pods' status is stale, no new pods go there)`
      : ` | nodes ${s.nodes} reporting`)
  );
}
