/**
 * The scheduler extender wire format (k8s.io/kube-scheduler/extender/v1): PascalCase keys, nil
 * pointers as null. Validated with zod at the edge; the Pod is kept as the client sent it.
 */
import { z } from 'zod';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';

/** The most nodes a cluster has (Kubernetes' supported maximum), and the longest name one can have. */
export const MAX_NODES = 5000;
export const MAX_NODE_NAME = 253;

const nodeList = z
  .object({
    items: z
      .array(z.object({ metadata: z.object({ name: z.string().max(MAX_NODE_NAME) }).loose() }).loose())
      .max(MAX_NODES)
      .nullish(),
  })
  .loose();

/** The index of the first entry that is not a string; -1 when every entry is one. */
function firstNonString(list: readonly unknown[]): number {
  for (let i = 0; i < list.length; i++) if (typeof list[i] !== 'string') return i;
  return -1;
}

/** The index of the first entry that is not a node name; -1 when every entry is one. */
function firstNonName(list: readonly unknown[]): number {
  const i = firstNonString(list);
  if (i >= 0) return i;
  return list.findIndex((n) => (n as string).length > MAX_NODE_NAME);
}

/**
 * A call can name 5,000 nodes: they are checked where they lie, not copied entry by entry as
 * `z.array(z.string())` would (a parse result per entry, on every filter and prioritize). More
 * nodes than a cluster can have, or a longer name than a node can have, is no call
 * kube-scheduler makes: refused, so the answer's size and the work are bounded too.
 */
const nodeNames = z.custom<string[]>((v) => Array.isArray(v) && v.length <= MAX_NODES && firstNonName(v) < 0, {
  error: (issue) => {
    const list = issue.input;
    if (!Array.isArray(list)) return 'expected an array of node names';
    if (list.length > MAX_NODES) return `${list.length} node names; a cluster has at most ${MAX_NODES}`;
    const i = firstNonName(list);
    return typeof list[i] === 'string'
      ? `entry [${i}] is longer than the ${MAX_NODE_NAME} characters of a node name`
      : `entry [${i}] is not a string; expected node names`;
  },
});

export const extenderArgsSchema = z
  .object({
    Pod: z
      .object({
        metadata: z
          .object({ name: z.string().min(1), namespace: z.string().optional(), uid: z.string().optional() })
          .loose(),
        spec: z.object({}).loose().nullish(),
      })
      .loose(),
    /** Only when nodeCacheCapable is false. */
    Nodes: nodeList.nullish(),
    /** Only when nodeCacheCapable is true. */
    NodeNames: nodeNames.nullish(),
  })
  .loose();

export const bindingArgsSchema = z
  .object({
    PodName: z.string().min(1),
    PodNamespace: z.string().min(1),
    PodUID: z.string().min(1),
    Node: z.string().min(1),
  })
  .loose();

/** A scheduler cluster has at most 5,000 nodes; a node runs at most a few hundred pods. */
const MAX_PREEMPT_NODES = 5000;
const MAX_VICTIMS_PER_NODE = 1000;

const victimsOf = <T extends z.ZodType>(pod: T) =>
  z
    .object({
      Pods: z.array(pod).max(MAX_VICTIMS_PER_NODE).nullish(),
      NumPDBViolations: z.number().int().min(0).nullish(),
    })
    .loose();

const perNode = <T extends z.ZodType>(victims: T) =>
  z
    .record(z.string().min(1).max(253), victims)
    .refine((m) => Object.keys(m).length <= MAX_PREEMPT_NODES, `at most ${MAX_PREEMPT_NODES} nodes`)
    .nullish();

/**
 * ExtenderPreemptionArgs: the pod and kube-scheduler's victims per node, as full pods
 * (NodeNameToVictims) or, with nodeCacheCapable, as UIDs (NodeNameToMetaVictims). Only the node
 * names are used: the victims are chosen again here, card by card.
 */
export const preemptionArgsSchema = z
  .object({
    Pod: extenderArgsSchema.shape.Pod,
    NodeNameToVictims: perNode(victimsOf(z.object({}).loose())),
    NodeNameToMetaVictims: perNode(victimsOf(z.object({ UID: z.string().max(128) }).loose())),
  })
  .loose();

export type PreemptionArgs = z.infer<typeof preemptionArgsSchema>;
export type MetaVictims = { Pods: { UID: string }[]; NumPDBViolations: number };
/** ExtenderPreemptionResult: always the Meta form (PROTOCOLS.md §3.3). */
export type ExtenderPreemptionResult = { NodeNameToMetaVictims: Record<string, MetaVictims> };

/** The nodes kube-scheduler proposes for preemption, whichever form it used. */
export function preemptionNodeNames(args: PreemptionArgs): string[] {
  return Object.keys(args.NodeNameToMetaVictims ?? args.NodeNameToVictims ?? {});
}

export type ExtenderArgs = z.infer<typeof extenderArgsSchema>;
export type BindingArgs = z.infer<typeof bindingArgsSchema>;

export type ExtenderFilterResult = {
  Nodes: null;
  NodeNames: string[];
  FailedNodes: Record<string, string>;
  FailedAndUnresolvableNodes: Record<string, string>;
  Error: string;
};
export type HostPriority = { Host: string; Score: number };
export type ExtenderBindingResult = { Error: string };

/** The node names a request offers, whichever form kube-scheduler used. */
export function offeredNodeNames(args: ExtenderArgs): string[] {
  if (args.NodeNames) return args.NodeNames;
  return (args.Nodes?.items ?? []).map((n) => n.metadata.name);
}

export function podOf(args: ExtenderArgs): PodWithStatus {
  return args.Pod as PodWithStatus;
}
