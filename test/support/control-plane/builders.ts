/**
 * Builders for control-plane tests: nodes with a vcuda inventory, pods asking for GPUs, and pods
 * already carrying an assignment. Test-only; product code never imports this folder.
 */
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as jose from 'jose';
import {
  type Assignment,
  type CardLink,
  type CardMigInventory,
  jwksOf,
  MIB,
  type NodeInventory,
  type PcieLevel,
  peekAssignment,
  resourceNames,
  type SigningKey,
  vcudaAnnotations,
} from '../../../contract/index.js';
import { grantsOf } from '../../../control-plane/api/usage-writer.js';
import { AssignmentTrust } from '../../../control-plane/assignment-trust.js';
import { ClusterState } from '../../../control-plane/cluster-state.js';
import {
  composeNodeSnapshot,
  type NodeLike,
  type NodeSnapshot,
  type PodWithStatus,
  readNodeInventory,
} from '../../../control-plane/placement/cluster-snapshot.js';
import { type CardHold, holdOfAssignment, isPodHoldingCards } from '../../../control-plane/placement/holds/index.js';
import { createEdDsaSigner, type KeySet } from '../../../control-plane/signing-keys.js';

export const names = resourceNames();
export const policy = { names, memoryUnitMiB: 1 } as const;

function makeTestKey(kid: string): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privateJwk = { ...privateKey.export({ format: 'jwk' }), kid, alg: 'EdDSA' } as jose.JWK;
  const publicJwk = { ...publicKey.export({ format: 'jwk' }), kid, alg: 'EdDSA', use: 'sig' } as jose.JWK;
  return { kid, alg: 'EdDSA', privateJwk, publicJwk };
}

/** The control plane's keys in tests: assignedPod signs with them, testState verifies with them. */
export const testKeySet: KeySet = (() => {
  const key = makeTestKey('test-1');
  return { active: key, all: [key], jwks: jwksOf([key]) };
})();

const signWithTestKey = createEdDsaSigner(testKeySet.active, 600);

/** A cluster view that trusts what testKeySet signed (or `keys`), judging pods as `policy` reads them. */
export function testState(
  opts: { keys?: KeySet; onUnverified?: ConstructorParameters<typeof AssignmentTrust>[0]['onUnverified'] } = {},
): ClusterState {
  const jwks = (opts.keys ?? testKeySet).jwks;
  const trust = new AssignmentTrust({
    jwks: () => jwks,
    ...(opts.onUnverified ? { onUnverified: opts.onUnverified } : {}),
  });
  return new ClusterState({ trust, quantity: policy });
}

/**
 * A node's snapshot from its Node and pods, for placement tests: each pod's assignment counts as if
 * it had verified (what verification admits is the holds module's subject, placement/holds/).
 */
export function buildNodeSnapshot(node: NodeLike, pods: Iterable<PodWithStatus>): NodeSnapshot {
  const holds: CardHold[] = [];
  for (const pod of pods) {
    const a = isPodHoldingCards(pod) && peekAssignment(pod.metadata?.annotations?.[vcudaAnnotations.assignment] ?? '');
    if (a) holds.push(holdOfAssignment(a, pod.metadata?.annotations ?? {}));
  }
  return composeNodeSnapshot(readNodeInventory(node), holds);
}

export type CardSpec = {
  model?: string;
  memoryMiB?: number;
  numaNode?: number | null;
  healthy?: boolean;
  healthReason?: string;
  /** MIG as the node agent publishes it. */
  mig?: CardMigInventory;
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
    ...(c.mig ? { mig: c.mig } : {}),
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

export type Grant = {
  name?: string;
  core: number;
  memoryMiB: number;
  cards: number[];
  init?: boolean;
  /** vcuda-memory-limit: the burst ceiling per card, above memoryMiB. */
  memoryLimitMiB?: number;
  /** The cards' UUIDs when not the node's cards by index (a shared MIG instance's `MIG-…`). */
  uuids?: string[];
};

/** The spec of a pod asking what `grants` give: per container, core per card times cards, memory per card. */
function specAsking(grants: Grant[]) {
  const asContainer = (g: Grant, i: number) => {
    const limits = { [names.core]: String(g.core * g.cards.length), [names.memory]: String(g.memoryMiB) };
    return { name: g.name ?? `c${i}`, image: 'busybox', resources: { limits, requests: { ...limits } } };
  };
  const all = grants.map((g, i) => ({ g, c: asContainer(g, i) }));
  return {
    containers: all.filter((x) => !x.g.init).map((x) => x.c),
    initContainers: all.filter((x) => x.g.init).map((x) => x.c),
  };
}

/** The assignment the control plane would sign for these grants on `node`. */
export function assignmentFor(
  pod: { uid: string; namespace: string; name: string },
  node: string,
  grants: Grant[],
): Assignment {
  return {
    v: 1 as const,
    pod,
    node,
    cluster: 'test',
    containers: grants.map((g, i) => ({
      name: g.name ?? `c${i}`,
      isInit: g.init ?? false,
      cards: g.cards.map((idx, j) => ({
        uuid: g.uuids?.[j] ?? cardUuid(node, idx),
        core: g.core,
        memoryBytes: g.memoryMiB * MIB,
        ...(g.memoryLimitMiB ? { memoryLimitBytes: g.memoryLimitMiB * MIB } : {}),
      })),
      coreLimit: g.core,
      mode: 'hard' as const,
    })),
  };
}

/** A token signed with testKeySet, as the control plane signs. */
export function signedAssignment(a: Assignment, now = new Date('2026-11-22T04:00:00Z')): string {
  return signWithTestKey(a, now);
}

/**
 * A pod already assigned to `node` with the given grants per container (core and memory MiB per
 * card, card indexes), whose spec asks exactly that, carrying a token signed with testKeySet.
 */
export function assignedPod(
  name: string,
  node: string,
  grants: Grant[],
  opts: {
    allocated?: boolean;
    assignedAt?: Date;
    phase?: string;
    namespace?: string;
    /** Leave the token unsigned (and unvalidated): for placement tests that build snapshots directly. */
    unsigned?: boolean;
  } = {},
): PodWithStatus {
  const ns = opts.namespace ?? 'default';
  const uid = `uid-${name}`;
  const assignment = assignmentFor({ uid, namespace: ns, name }, node, grants);
  const token = opts.unsigned ? unsignedAssignment(assignment) : signedAssignment(assignment);
  const annotations: Record<string, string> = {
    [vcudaAnnotations.assignment]: token,
    [vcudaAnnotations.assignedNode]: node,
    [vcudaAnnotations.assignedAt]: (opts.assignedAt ?? new Date('2026-11-22T04:00:00Z')).toISOString(),
  };
  if (opts.allocated ?? true) annotations[vcudaAnnotations.allocatedAt] = '2026-11-22T04:00:01Z';
  return {
    metadata: { name, namespace: ns, uid, annotations },
    spec: { nodeName: node, ...specAsking(grants) },
    status: { phase: opts.phase ?? 'Running' },
  };
}

/**
 * The real plain pod kube-apiserver 1.26 sent the webhook (no GPU resources, so admission never
 * judges it), running, carrying a hand-written unsigned assignment to every card of a `cards`-card
 * node: what anyone allowed to create pods can write.
 */
export function forgedPlainPod(
  node: string,
  opts: { name?: string; cards?: number; bound?: boolean; assignedAt?: Date } = {},
): PodWithStatus {
  const review = JSON.parse(
    readFileSync(
      new URL('../../../webhooks/testdata/kubernetes-1.26/admission-mutate-create-no-gpu.json', import.meta.url),
      'utf8',
    ),
  ) as { request: { object: PodWithStatus & { metadata: Record<string, unknown>; spec: Record<string, unknown> } } };
  const pod = review.request.object;
  const name = opts.name ?? 'forger';
  const ref = { uid: `uid-${name}`, namespace: 'default', name };
  const everyCard = Array.from({ length: opts.cards ?? 8 }, (_, i) => i);
  const token = unsignedAssignment(assignmentFor(ref, node, [{ core: 100, memoryMiB: 81920, cards: everyCard }]));
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      ...ref,
      annotations: {
        [vcudaAnnotations.assignment]: token,
        [vcudaAnnotations.assignedNode]: node,
        [vcudaAnnotations.assignedAt]: (opts.assignedAt ?? new Date('2026-11-22T04:00:00Z')).toISOString(),
        [vcudaAnnotations.allocatedAt]: '2026-11-22T04:00:01Z',
      },
    },
    spec: { ...pod.spec, ...(opts.bound === false ? {} : { nodeName: node }) },
    status: { phase: 'Running' },
  };
}

/**
 * What a pod's assignment grants, read as written. The control plane only grants from what its
 * cluster view verified (`heldAssignment`); tests of other rules stand in for that view with this.
 */
export function grantsAsWritten(pod: PodWithStatus) {
  return grantsOf(peekAssignment(pod.metadata?.annotations?.[vcudaAnnotations.assignment] ?? ''), pod.metadata?.uid);
}

/** The H100 80GB's GPU-instance profiles as its node agent publishes them (NVIDIA MIG user guide). */
export const H100_MIG_PROFILES: CardMigInventory['profiles'] = [
  ['1g.10gb', 19, 1, 1, 7, 16, 9984, [0, 1, 2, 3, 4, 5, 6]],
  ['1g.10gb+me', 20, 1, 1, 1, 16, 9984, [0, 1, 2, 3, 4, 5, 6]],
  ['1g.20gb', 15, 1, 2, 4, 26, 20096, [0, 2, 4, 6]],
  ['2g.20gb', 14, 2, 2, 3, 32, 20096, [0, 2, 4]],
  ['3g.40gb', 9, 3, 4, 2, 60, 40448, [0, 4]],
  ['4g.40gb', 5, 4, 4, 1, 64, 40448, [0]],
  ['7g.80gb', 0, 7, 8, 1, 132, 81152, [0]],
].map(([profile, profileId, computeSlices, memorySlices, maxInstances, sms, memoryMiB, placements]) => ({
  profile: profile as string,
  profileId: profileId as number,
  computeSlices: computeSlices as number,
  memorySlices: memorySlices as number,
  maxInstances: maxInstances as number,
  sms: sms as number,
  memoryMiB: memoryMiB as number,
  placements: placements as number[],
}));

/** A MIG instance's UUID, stable from a card tag and its placement start. */
export function migUuid(cardTag: number, start: number): string {
  return `MIG-${cardTag.toString(16).padStart(8, '0')}-0000-4000-8000-${start.toString(16).padStart(12, '0')}`;
}

/**
 * An H100 80GB in MIG mode with these instances (`[profile, start]`), as its node agent publishes
 * it; `cardTag` keeps instance UUIDs apart across cards.
 */
export function h100MigCard(cardTag: number, instances: [string, number][], extra: Partial<CardSpec> = {}): CardSpec {
  return {
    model: 'NVIDIA H100 80GB HBM3',
    memoryMiB: 81559,
    ...extra,
    mig: {
      mode: 'enabled',
      profiles: H100_MIG_PROFILES,
      instances: instances.map(([profile, start], i) => {
        const p = H100_MIG_PROFILES.find((x) => x.profile === profile);
        if (!p) throw new Error(`no H100 profile ${profile}`);
        return {
          uuid: migUuid(cardTag, start),
          profile,
          profileId: p.profileId,
          gpuInstanceId: i + 1,
          computeInstanceId: 0,
          placement: { start, size: p.memorySlices },
          memoryMiB: p.memoryMiB,
          sms: p.sms,
        };
      }),
    },
  };
}

/** An H100 80GB kept for dynamic MIG: the node agent cuts it on demand; `instances` exist already. */
export function h100DynamicMigCard(cardTag: number, instances: [string, number][] = []): CardSpec {
  const card = h100MigCard(cardTag, instances);
  return { ...card, mig: { ...(card.mig as CardMigInventory), dynamic: true } };
}

export type MigContainerSpec = { name?: string; profile: string; count?: number; init?: boolean };

/** A pod asking whole MIG instances per container (`<domain>/mig-<profile>`). */
export function migPod(
  name: string,
  containers: MigContainerSpec[],
  opts: { namespace?: string; uid?: string; annotations?: Record<string, string> } = {},
): PodWithStatus & { apiVersion: string; kind: string } {
  const base = gpuPod(name, [], opts);
  const toContainer = (c: MigContainerSpec, i: number) => {
    const limits = { [`${names.migPrefix}${c.profile.replace('+', '.')}`]: String(c.count ?? 1) };
    return { name: c.name ?? `m${i}`, image: 'busybox', resources: { limits, requests: { ...limits } } };
  };
  return {
    ...base,
    spec: {
      containers: containers.filter((c) => !c.init).map(toContainer),
      initContainers: containers.filter((c) => c.init).map(toContainer),
    },
  };
}

/** A running pod holding whole MIG instances of `node` (one container), with a token signed by testKeySet. */
export function migAssignedPod(
  name: string,
  node: string,
  instances: {
    uuid: string;
    parent: string;
    profile: string;
    start: number;
    size: number;
    memoryMiB: number;
    dynamic?: true;
  }[],
): PodWithStatus {
  const uid = `uid-${name}`;
  const profile = instances[0]?.profile ?? '1g.10gb';
  const assignment: Assignment = {
    v: 1,
    pod: { uid, namespace: 'default', name },
    node,
    cluster: 'test',
    containers: [
      {
        name: 'm0',
        isInit: false,
        cards: instances.map((i) => ({
          uuid: i.uuid,
          core: 100,
          memoryBytes: i.memoryMiB * MIB,
          mig: {
            parent: i.parent,
            profile: i.profile,
            start: i.start,
            size: i.size,
            ...(i.dynamic ? { dynamic: i.dynamic } : {}),
          },
        })),
        coreLimit: 100,
        mode: 'hard',
      },
    ],
  };
  const pod = migPod(name, [{ name: 'm0', profile, count: instances.length }]);
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      annotations: {
        [vcudaAnnotations.assignment]: signedAssignment(assignment),
        [vcudaAnnotations.assignedNode]: node,
        [vcudaAnnotations.assignedAt]: '2026-11-22T04:00:00Z',
        [vcudaAnnotations.allocatedAt]: '2026-11-22T04:00:01Z',
      },
    },
    spec: { ...pod.spec, nodeName: node },
    status: { phase: 'Running' },
  };
}
