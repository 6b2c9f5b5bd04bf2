/**
 * `vcuda doctor`'s DRA checks, pure: from what the API server says about resource.k8s.io/v1
 * (discovery, vcuda's DeviceClass, the driver's ResourceSlices, claims of the class that have no
 * allocation and the pods waiting on them) to findings. A cluster that does not serve
 * resource.k8s.io/v1, or has no vcuda DeviceClass and no slices, runs extender mode only: skipped.
 */
import { type Finding, failed, type Probed } from './finding.js';

/** One node's ResourceSlices of the driver: its devices, and those the API server kept shareable. */
export type DraSliceFacts = { node: string; devices: number; shareable: number };
/** A Pending pod that references a claim, with its PodScheduled condition (kube-scheduler's reason). */
export type DraWaitingPod = { name: string; reason?: string; message?: string };
export type DraClaimFacts = { namespace: string; name: string; createdAt?: string; waitingPods: DraWaitingPod[] };
export type DraFacts = {
  /** The driver and the name of its DeviceClass (the deploy overlay names the class after it). */
  driver: string;
  /** The versions of resource.k8s.io the API server serves (discovery); empty: none. */
  servedVersions: string[];
  /** The rest is read only when v1 is served. */
  deviceClass?: boolean;
  slices?: DraSliceFacts[];
  /** Claims asking the DeviceClass with no allocation. */
  unallocatedClaims?: DraClaimFacts[];
};
/**
 * What the DRA checks read of each Node (judge.ts's NodeFacts). Both modes' agents publish an
 * inventory; only the extender's device plugin gives the node allocatable vcuda-core.
 */
export type DraNode = { name: string; hasInventory: boolean; gpuLabelled: boolean; deviceResources?: boolean };

/** Claims (and nodes) named one by one; the rest are counted. */
const SHOWN = 5;

/** Nodes that publish a slice of the driver (DRA mode), from facts that may be missing. */
export function sliceNodesOf(dra: Probed<DraFacts> | undefined): Set<string> {
  if (!dra || failed(dra)) return new Set();
  return new Set((dra.slices ?? []).filter((s) => s.devices > 0).map((s) => s.node));
}

function judgeApi(dra: DraFacts): Finding {
  const check = 'DRA API';
  const served = dra.servedVersions.map((v) => `resource.k8s.io/${v}`);
  const slices = dra.slices ?? [];
  const devices = slices.reduce((n, s) => n + s.devices, 0);
  if (devices > 0 && slices.every((s) => s.shareable === 0)) {
    return {
      check,
      verdict: 'fail',
      summary:
        `resource.k8s.io/v1 served, but the API server stored ${dra.driver}'s devices without allowMultipleAllocations: ` +
        'consumable capacity is off, so a card cannot be shared between claims',
      fix: 'enable the DRAConsumableCapacity feature gate on kube-apiserver, kube-scheduler and every kubelet (Kubernetes 1.34+)',
    };
  }
  const capacity = devices > 0 ? '; consumable capacity on (devices shareable)' : '';
  return { check, verdict: 'ok', summary: `${served.join(', ')} served${capacity}` };
}

function judgeDeviceClass(dra: DraFacts): Finding {
  const check = 'DRA device class';
  if (dra.deviceClass) return { check, verdict: 'ok', summary: `DeviceClass ${dra.driver} present` };
  return {
    check,
    verdict: 'fail',
    summary: `no DeviceClass ${dra.driver}, yet node agents publish ResourceSlices for it: no claim can ask for vcuda cards`,
    fix: 'kubectl apply -k deploy/overlays/dra (its device-class.yaml), or helm upgrade with --set mode=dra',
  };
}

function judgeDrivers(dra: DraFacts, nodes: Probed<DraNode[]>, namespace: string): Finding[] {
  const check = 'DRA driver on nodes';
  const sliced = sliceNodesOf(dra);
  const named = [...sliced].sort();
  const list = named.slice(0, SHOWN).join(', ') + (named.length > SHOWN ? ` and ${named.length - SHOWN} more` : '');
  if (failed(nodes)) return [{ check, verdict: 'warn', summary: `cannot list nodes: ${nodes.error}` }];
  const logs = (node: string) =>
    `kubectl -n ${namespace} get pods -l app.kubernetes.io/name=vcuda-node-agent --field-selector spec.nodeName=${node}; ` +
    `kubectl logs on that pod; kubectl get resourceslices --field-selector spec.nodeName=${node}`;
  const out: Finding[] = [];
  for (const n of nodes) {
    const vcudaNode = n.gpuLabelled || n.hasInventory;
    if (vcudaNode && !n.deviceResources && !sliced.has(n.name)) {
      out.push({
        check,
        verdict: 'fail',
        summary: `${n.name} has vcuda cards but publishes no ResourceSlice for ${dra.driver} (nor the device plugin's vcuda-core): the driver is not registered there`,
        fix: logs(n.name),
      });
    } else if (n.deviceResources && sliced.has(n.name)) {
      out.push({
        check,
        verdict: 'warn',
        summary: `${n.name} is served both by the device plugin (allocatable vcuda-core) and by DRA (a slice): one mode per node`,
        fix: `run one node agent mode on ${n.name} (mode: dra or device-plugin), then restart it`,
      });
    }
  }
  if (out.length > 0) return out;
  const extender = nodes.filter((n) => n.deviceResources && !sliced.has(n.name)).length;
  const also = extender > 0 ? `; ${extender} node(s) in extender mode` : '';
  const summary = named.length
    ? `${named.length} node(s) publish a ResourceSlice for ${dra.driver}: ${list}${also}`
    : `no node publishes a ResourceSlice for ${dra.driver}${also}`;
  return [{ check, verdict: named.length || extender ? 'ok' : 'warn', summary }];
}

function stuckClaim(c: DraClaimFacts, now: Date): Finding {
  const age = c.createdAt ? ` for ${Math.round((now.getTime() - Date.parse(c.createdAt)) / 1000)} s` : '';
  const pod = c.waitingPods[0] as DraWaitingPod;
  const why =
    pod.reason || pod.message ? `${pod.reason ?? 'Unschedulable'}: ${pod.message ?? ''}`.trim() : 'no reason yet';
  const others = c.waitingPods.length > 1 ? ` (and ${c.waitingPods.length - 1} more pod(s))` : '';
  return {
    check: 'DRA claims',
    verdict: 'warn',
    summary: `${c.namespace}/${c.name} unallocated${age}; pod ${pod.name}${others} waits: ${why.slice(0, 300)}`,
    fix: `kubectl -n ${c.namespace} describe resourceclaim ${c.name}; kubectl -n ${c.namespace} describe pod ${pod.name}`,
  };
}

function judgeClaims(dra: DraFacts, now: Date): Finding[] {
  const check = 'DRA claims';
  const claims = dra.unallocatedClaims ?? [];
  const stuck = claims.filter((c) => c.waitingPods.length > 0);
  if (stuck.length === 0) {
    const idle = claims.length ? ` (${claims.length} unallocated, no pod asks for them yet)` : '';
    return [{ check, verdict: 'ok', summary: `no claim of ${dra.driver} waits for an allocation${idle}` }];
  }
  const more =
    stuck.length > SHOWN ? [{ check, verdict: 'warn' as const, summary: `and ${stuck.length - SHOWN} more` }] : [];
  return [...stuck.slice(0, SHOWN).map((c) => stuckClaim(c, now)), ...more];
}

/** Every DRA finding; none when DRA was not probed. */
export function judgeDra(
  dra: Probed<DraFacts> | undefined,
  nodes: Probed<DraNode[]>,
  ctx: { now: Date; namespace: string },
): Finding[] {
  if (dra === undefined) return [];
  if (failed(dra)) return [{ check: 'DRA API', verdict: 'warn', summary: `cannot read resource.k8s.io: ${dra.error}` }];
  if (!dra.servedVersions.includes('v1')) {
    const served = dra.servedVersions.length
      ? `only ${dra.servedVersions.map((v) => `resource.k8s.io/${v}`).join(', ')}`
      : 'no resource.k8s.io';
    const summary = `${served} served: vcuda's DRA driver needs resource.k8s.io/v1 (Kubernetes 1.34+); pods go through the extender`;
    return [{ check: 'DRA API', verdict: 'skip', summary }];
  }
  if (!dra.deviceClass && sliceNodesOf(dra).size === 0) {
    const summary = `resource.k8s.io/v1 served; no DeviceClass ${dra.driver} and no slices: DRA mode not installed`;
    return [{ check: 'DRA API', verdict: 'skip', summary }];
  }
  return [
    judgeApi(dra),
    judgeDeviceClass(dra),
    ...judgeDrivers(dra, nodes, ctx.namespace),
    ...judgeClaims(dra, ctx.now),
  ];
}
