/**
 * DRA steps run the same way on the simulator and on a real kube-apiserver + kube-scheduler +
 * kube-controller-manager 1.36, each step reduced to what must agree: whether the pod was
 * scheduled, where, which devices its claim got with what consumedCapacity (and that each share
 * has a shareID), why a pod fits nowhere, and what became of the claims when their pods ended.
 * Nodes are objects (no kubelet): ResourceSlices are published here, as a node agent would.
 */
import { draMigClassName, draMigProfileSelector, draMigSelector } from '../../contract/index.js';
import { buildResourceSlices, type SliceCard } from '../../node-agent/dra/resource-slice.js';
import { type KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import { fakeCards } from '../support/node-agent/fake-gpu-source.js';
import { h100Mig } from '../support/node-agent/mig-layouts.js';
import { readyNode } from '../support/ready-node.js';

export const DRIVER = 'gpu.vcuda.io';
const GV = '/apis/resource.k8s.io/v1';
const NS = 'default';
const CLAIMS = `${GV}/namespaces/${NS}/resourceclaims`;

export type DraObservation = {
  step: string;
  scheduled: boolean;
  node?: string;
  /** Per result: `request device cores memory`, and whether it has a shareID. */
  results?: string[];
  /** The first sentence of the PodScheduled=False message. */
  reason?: string;
  /** After the pods ended: each claim's state (`allocated`, `free`, `gone`). */
  claims?: Record<string, string>;
  /** How many pods the claim is reserved for. */
  reservedFor?: number;
  /** A template-made claim: its name prefix, owner, annotation and the pod's status entry. */
  made?: Record<string, unknown>;
};

function card(name: string, memory: string) {
  const policy = (def: string, min: string, max: string, step: string) => ({
    default: def,
    validRange: { min, max, step },
  });
  return {
    name,
    allowMultipleAllocations: true,
    attributes: { uuid: { string: `GPU-${name}` }, productName: { string: 'Fake GPU' } },
    capacity: {
      cores: { value: '100', requestPolicy: policy('100', '1', '100', '1') },
      memory: { value: memory, requestPolicy: policy(memory, '1Mi', memory, '1Mi') },
    },
  };
}

/** Two nodes, vcuda's DeviceClass, and one slice: node-a's two cards (24Gi, 40Gi); node-b has none. */
export async function setUpCluster(client: KubeClient): Promise<void> {
  await readyNode(client, 'node-a');
  await readyNode(client, 'node-b');
  await client.create(`${GV}/deviceclasses`, {
    metadata: { name: DRIVER },
    spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] },
  });
  await client.create(`${GV}/resourceslices`, {
    metadata: { name: `node-a-${DRIVER}` },
    spec: {
      driver: DRIVER,
      nodeName: 'node-a',
      pool: { name: 'node-a', generation: 1, resourceSliceCount: 1 },
      devices: [card('gpu-0', '24Gi'), card('gpu-1', '40Gi')],
    },
  });
}

type Requests = Record<string, string>;
const exactly = (requests: Requests, extra: Record<string, unknown> = {}) => ({
  deviceClassName: DRIVER,
  capacity: { requests },
  ...extra,
});
const oneRequest = (requests: Requests, extra: Record<string, unknown> = {}) => ({
  devices: { requests: [{ name: 'gpu', exactly: exactly(requests, extra) }] },
});

function podWith(name: string, claim: { resourceClaimName?: string; resourceClaimTemplateName?: string }) {
  return {
    metadata: { name },
    spec: {
      resourceClaims: [{ name: 'gpu', ...claim }],
      containers: [{ name: 'c', image: 'cuda', resources: { claims: [{ name: 'gpu' }] } }],
      terminationGracePeriodSeconds: 0,
    },
  };
}

type PodState = { scheduled: boolean; node?: string; reason?: string };

/**
 * An Unschedulable verdict must hold this long before it is the answer: a scheduler whose cache has
 * not yet seen the previous step's claims freed says Unschedulable, then places the pod when the
 * claim's update requeues it (seen on the real 1.36 under load: once past 2 s, in a CI run whose
 * tests took twice their usual time on 2 cores).
 */
const UNSCHEDULABLE_HOLDS_MS = 6_000;

/** Waits (30 s at most) until the pod is bound or reported unschedulable for UNSCHEDULABLE_HOLDS_MS. */
async function settled(client: KubeClient, name: string): Promise<PodState> {
  const deadline = Date.now() + 30_000;
  let unschedulableSince: number | undefined;
  while (Date.now() < deadline) {
    const pod = await client.get(podPath(NS, name));
    const node = (pod['spec'] as { nodeName?: string }).nodeName;
    if (node) return { scheduled: true, node };
    const conditions =
      (pod['status'] as { conditions?: { type: string; status: string; reason?: string; message?: string }[] })
        .conditions ?? [];
    const failed = conditions.find(
      (c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable',
    );
    // A template's claim not made yet is a wait, not an answer (the controller and scheduler race for it).
    if (failed && !failed.message?.includes('waiting for dynamic resource controller')) {
      unschedulableSince ??= Date.now();
      if (Date.now() - unschedulableSince >= UNSCHEDULABLE_HOLDS_MS)
        return { scheduled: false, reason: `${(failed.message ?? '').split('.')[0]}.` };
    } else unschedulableSince = undefined;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`pod ${name}: neither bound nor unschedulable within 30 s`);
}

function resultsOf(claim: KubeObj): string[] {
  type Result = { request: string; device: string; shareID?: string; consumedCapacity?: Requests };
  const results = ((claim['status'] as { allocation?: { devices: { results: Result[] } } } | undefined)?.allocation
    ?.devices.results ?? []) as Result[];
  return results.map((r) => {
    const c = r.consumedCapacity ?? {};
    return `${r.request} ${r.device} cores=${c['cores']} memory=${c['memory']} share=${r.shareID ? 'yes' : 'no'}`;
  });
}

/** A claim and a pod using it; the step's observation once the pod is settled. */
async function claimStep(client: KubeClient, step: string, spec: unknown): Promise<DraObservation> {
  await client.create(CLAIMS, { metadata: { name: step }, spec });
  await client.create(podPath(NS), podWith(step, { resourceClaimName: step }));
  const state = await settled(client, step);
  const claim = await client.get(`${CLAIMS}/${step}`);
  return { step, ...state, ...(state.scheduled ? { results: resultsOf(claim) } : {}) };
}

/** A pod whose claim comes from a template: the made claim's name, owner and annotation, the pod's status entry. */
async function templateStep(client: KubeClient): Promise<DraObservation> {
  await client.create(`${GV}/namespaces/${NS}/resourceclaimtemplates`, {
    metadata: { name: 'share-template' },
    spec: { metadata: { labels: { made: 'by-template' } }, spec: oneRequest({ cores: '30', memory: '8Gi' }) },
  });
  await client.create(podPath(NS), podWith('template-pod', { resourceClaimTemplateName: 'share-template' }));
  const state = await settled(client, 'template-pod');
  const pod = await client.get(podPath(NS, 'template-pod'));
  const entry = ((pod['status'] as { resourceClaimStatuses?: { name: string; resourceClaimName: string }[] })
    .resourceClaimStatuses ?? [])[0];
  const claim = await client.get(`${CLAIMS}/${entry?.resourceClaimName}`);
  const owner = ((claim.metadata['ownerReferences'] ?? []) as Record<string, unknown>[])[0] ?? {};
  const made = {
    statusEntry: entry?.name,
    namePrefix: claim.metadata['generateName'],
    nameLength: claim.metadata.name.length,
    owner: {
      apiVersion: owner['apiVersion'],
      kind: owner['kind'],
      name: owner['name'],
      controller: owner['controller'],
      blockOwnerDeletion: owner['blockOwnerDeletion'],
      sameUid: owner['uid'] === pod.metadata.uid,
    },
    annotation: claim.metadata.annotations?.['resource.kubernetes.io/pod-claim-name'],
    labels: claim.metadata.labels,
  };
  return { step: 'template', ...state, results: resultsOf(claim), made };
}

/**
 * Deletes every pod with grace 0 and waits (30 s at most) until each claim (of `only`, when given)
 * is free and the made one gone.
 */
async function endPods(client: KubeClient, names: string[], only?: string[]): Promise<DraObservation> {
  // Pending pods first: one still waiting when a placed pod's devices are freed would take them
  // (the real 1.36 did, under load, and its claim was still allocated when the step was judged).
  const placed = new Set<string>();
  for (const name of names) {
    const pod = await client.get(podPath(NS, name));
    if ((pod['spec'] as { nodeName?: string }).nodeName) placed.add(name);
  }
  const order = [...names.filter((n) => !placed.has(n)), ...names.filter((n) => placed.has(n))];
  for (const name of order) await client.request('DELETE', podPath(NS, name), { gracePeriodSeconds: 0 });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const claims: Record<string, string> = {};
    for (const c of (await client.list(CLAIMS)).items) {
      if (only && !only.includes(c.metadata.name)) continue;
      const status = (c['status'] ?? {}) as { allocation?: unknown; reservedFor?: unknown[] };
      const key = c.metadata.annotations?.['resource.kubernetes.io/pod-claim-name']
        ? 'made-from-template'
        : c.metadata.name;
      const finalizers = (c.metadata['finalizers'] as string[] | undefined) ?? [];
      claims[key] = status.allocation || status.reservedFor?.length || finalizers.length ? 'allocated' : 'free';
    }
    // Settled: every claim free, and the template's claim gone with its pod (it is freed first, then deleted).
    const settledNow = Object.values(claims).every((s) => s === 'free') && !('made-from-template' in claims);
    if (settledNow || Date.now() > deadline) return { step: 'pods ended', scheduled: false, claims };
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A second pod on a claim allocated already: it joins the claim's consumers, the allocation unchanged. */
async function sharedStep(client: KubeClient, claimName: string): Promise<DraObservation> {
  const before = await client.get(`${CLAIMS}/${claimName}`);
  await client.create(podPath(NS), podWith('shared-pod', { resourceClaimName: claimName }));
  const state = await settled(client, 'shared-pod');
  const claim = await client.get(`${CLAIMS}/${claimName}`);
  const reserved = (claim['status'] as { reservedFor?: unknown[] } | undefined)?.reservedFor ?? [];
  const unchanged = JSON.stringify(resultsOf(before)) === JSON.stringify(resultsOf(claim));
  return {
    step: 'shared',
    ...state,
    results: unchanged ? ['allocation unchanged'] : resultsOf(claim),
    reservedFor: reserved.length,
  };
}

/** The whole scenario; each observation in order. */
export async function draScenario(client: KubeClient): Promise<DraObservation[]> {
  await setUpCluster(client);
  const out: DraObservation[] = [];
  const share = oneRequest({ cores: '30', memory: '8Gi' });
  for (const step of ['share-1', 'share-2', 'share-3']) out.push(await claimStep(client, step, share));
  out.push(await claimStep(client, 'share-4', share));
  out.push(await claimStep(client, 'share-rounded', oneRequest({ cores: '30', memory: '8000M' })));
  out.push(await templateStep(client));
  out.push(await claimStep(client, 'nowhere', oneRequest({ cores: '30', memory: '64Gi' })));
  const pods = ['share-1', 'share-2', 'share-3', 'share-4', 'share-rounded', 'template-pod', 'nowhere'];
  out.push(await endPods(client, pods));
  out.push(await claimStep(client, 'count-two', oneRequest({ cores: '10', memory: '1Gi' }, { count: 2 })));
  const pair = [
    { name: 'a', exactly: exactly({ cores: '10', memory: '1Gi' }) },
    { name: 'b', exactly: exactly({ cores: '10', memory: '1Gi' }) },
  ];
  out.push(await claimStep(client, 'two-requests', { devices: { requests: pair } }));
  const distinct = [{ requests: ['a', 'b'], distinctAttribute: `${DRIVER}/uuid` }];
  out.push(await claimStep(client, 'distinct', { devices: { requests: pair, constraints: distinct } }));
  out.push(await sharedStep(client, 'distinct'));
  return out;
}

/**
 * One H100 in MIG mode on node-m as its node agent publishes it (every profile at every legal
 * placement, each consuming the card's counter set: resource-slice.ts), and vcuda's MIG DeviceClass.
 */
async function setUpMigNode(client: KubeClient): Promise<void> {
  await readyNode(client, 'node-m');
  await client.create(`${GV}/deviceclasses`, {
    metadata: { name: draMigClassName(DRIVER) },
    spec: { selectors: [{ cel: { expression: draMigSelector(DRIVER) } }] },
  });
  const [card] = fakeCards({ cards: 1, memoryMiB: 81559 });
  const slices = buildResourceSlices({
    driver: DRIVER,
    nodeName: 'node-m',
    memoryUnitMiB: 1,
    cards: [{ ...(card as SliceCard), healthy: true, migMode: true, migDynamic: true, mig: h100Mig() }],
    link: () => ({ nvlinks: 0, pcie: 'system' }),
    unhealthy: 'taint',
    generation: 1,
    migCreatable: true,
  });
  for (const slice of slices) await client.create(`${GV}/resourceslices`, slice);
}

const migProfile = (profile: string) => ({
  devices: {
    requests: [
      {
        name: 'mig',
        exactly: {
          deviceClassName: draMigClassName(DRIVER),
          selectors: [{ cel: { expression: draMigProfileSelector(DRIVER, profile) } }],
        },
      },
    ],
  },
});

/**
 * MIG partitions (KEP-4815): two 3g.40gb fit on one card and a third does not; a 4g.40gb keeps a
 * 1g.10gb off slices 0..3 and a 7g.80gb off the card; a 7g.80gb alone keeps out everything; a
 * profile the card has not (an H200's 1g.18gb) stays unallocated.
 */
export async function draMigScenario(client: KubeClient): Promise<DraObservation[]> {
  await setUpMigNode(client);
  const out: DraObservation[] = [];
  const steps = async (list: [string, string][]) => {
    for (const [step, profile] of list) out.push(await claimStep(client, step, migProfile(profile)));
    const names = list.map(([step]) => step);
    out.push({ ...(await endPods(client, names, names)), step: `ended ${names.join(', ')}` });
  };
  await steps([
    ['mig-3g-a', '3g.40gb'],
    ['mig-3g-b', '3g.40gb'],
    ['mig-3g-c', '3g.40gb'],
  ]);
  await steps([
    ['mig-4g', '4g.40gb'],
    ['mig-1g', '1g.10gb'],
    ['mig-7g-blocked', '7g.80gb'],
  ]);
  await steps([
    ['mig-7g', '7g.80gb'],
    ['mig-1g-blocked', '1g.10gb'],
    ['mig-not-here', '1g.18gb'],
  ]);
  return out;
}
