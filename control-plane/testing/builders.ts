/**
 * Builders for control-plane tests: nodes with a vcuda inventory, pods asking for GPUs, and pods
 * already carrying an assignment. Test-only; product code never imports this folder.
 */
import * as jose from 'jose';
import {
  type Assignment,
  type CardLink,
  MIB,
  type NodeInventory,
  type PcieLevel,
  resourceNames,
  vcudaAnnotations,
} from '../../contract/index.js';
import type { NodeLike, PodWithStatus } from '../placement/cluster-snapshot.js';

export const names = resourceNames();
export const policy = { names, memoryUnitMiB: 1 } as const;

export type CardSpec = {
  model?: string;
  memoryMiB?: number;
  numaNode?: number | null;
  healthy?: boolean;
  healthReason?: string;
};

export function cardUuid(node: string, index: number): string {
  // A stable, valid GPU UUID from the node name and index.
  let h = 0;
  for (const ch of node) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  return `GPU-${h.toString(16).padStart(8, '0')}-${index.toString(16).padStart(4, '0')}`;
}

export type NodeSpec = {
  name: string;
  cards?: number | CardSpec[];
  /** Default card when `cards` is a count. */
  card?: CardSpec;
  /** links[i][j]; defaults to `node` (same NUMA) for every pair. */
  link?: (i: number, j: number) => CardLink;
  heartbeat?: Date;
  memoryUnitMiB?: number;
};

export function inventoryOf(spec: NodeSpec): NodeInventory {
  const list: CardSpec[] = Array.isArray(spec.cards)
    ? spec.cards
    : Array.from({ length: spec.cards ?? 8 }, () => spec.card ?? {});
  const cards = list.map((c, index) => ({
    uuid: cardUuid(spec.name, index),
    index,
    model: c.model ?? 'NVIDIA A100-SXM4-80GB',
    memoryMiB: c.memoryMiB ?? 81920,
    numaNode: c.numaNode === undefined ? 0 : c.numaNode,
    pciBusId: `0000:${(index + 1).toString(16).padStart(2, '0')}:00.0`,
    healthy: c.healthy ?? true,
    ...(c.healthReason ? { healthReason: c.healthReason } : {}),
  }));
  const link = spec.link ?? (() => ({ nvlinks: 0, pcie: 'node' as PcieLevel }));
  return {
    version: 1,
    node: spec.name,
    memoryUnitMiB: spec.memoryUnitMiB ?? 1,
    cards,
    links: cards.map((_, i) => cards.map((__, j) => (i === j ? { nvlinks: 0, pcie: 'internal' } : link(i, j)))),
    heartbeat: (spec.heartbeat ?? new Date('2026-11-22T04:00:00Z')).toISOString(),
  };
}

export function gpuNode(spec: NodeSpec): NodeLike & { apiVersion: string; kind: string } {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: spec.name, annotations: { [vcudaAnnotations.inventory]: JSON.stringify(inventoryOf(spec)) } },
  };
}

export type ContainerSpec = { name?: string; core: number; memoryMiB?: number; init?: boolean };

export function gpuPod(
  name: string,
  containers: ContainerSpec[],
  opts: { namespace?: string; uid?: string; annotations?: Record<string, string> } = {},
): PodWithStatus & { apiVersion: string; kind: string } {
  const toContainer = (c: ContainerSpec, i: number) => {
    const limits: Record<string, string> = { [names.core]: String(c.core) };
    if (c.memoryMiB !== undefined) limits[names.memory] = String(c.memoryMiB);
    return { name: c.name ?? `c${i}`, image: 'busybox', resources: { limits, requests: { ...limits } } };
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: opts.namespace ?? 'default',
      uid: opts.uid ?? `uid-${name}`,
      annotations: { ...(opts.annotations ?? {}) },
    },
    spec: {
      containers: containers.filter((c) => !c.init).map(toContainer),
      initContainers: containers.filter((c) => c.init).map(toContainer),
    },
    status: { phase: 'Pending' },
  };
}

/** An unsigned token carrying the assignment claims: enough for peekAssignment, never for verification. */
export function unsignedAssignment(a: Assignment): string {
  return new jose.UnsecuredJWT({ ...a }).encode();
}

/** A pod already assigned to `node` with the given grants per container (core, memory MiB, card indexes). */
export function assignedPod(
  name: string,
  node: string,
  grants: { name?: string; core: number; memoryMiB: number; cards: number[]; init?: boolean }[],
  opts: { allocated?: boolean; assignedAt?: Date; phase?: string; namespace?: string } = {},
): PodWithStatus {
  const ns = opts.namespace ?? 'default';
  const uid = `uid-${name}`;
  const token = unsignedAssignment({
    v: 1,
    pod: { uid, namespace: ns, name },
    node,
    cluster: 'test',
    containers: grants.map((g, i) => ({
      name: g.name ?? `c${i}`,
      isInit: g.init ?? false,
      cards: g.cards.map((idx) => ({ uuid: cardUuid(node, idx), core: g.core, memoryBytes: g.memoryMiB * MIB })),
      coreLimit: g.core,
      mode: 'hard' as const,
    })),
  });
  const annotations: Record<string, string> = {
    [vcudaAnnotations.assignment]: token,
    [vcudaAnnotations.assignedNode]: node,
    [vcudaAnnotations.assignedAt]: (opts.assignedAt ?? new Date('2026-11-22T04:00:00Z')).toISOString(),
  };
  if (opts.allocated ?? true) annotations[vcudaAnnotations.allocatedAt] = '2026-11-22T04:00:01Z';
  return {
    metadata: { name, namespace: ns, uid, annotations },
    spec: { nodeName: node, containers: [] },
    status: { phase: opts.phase ?? 'Running' },
  };
}
