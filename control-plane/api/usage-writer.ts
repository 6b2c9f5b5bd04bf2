/**
 * Whose usage a report may carry: a node agent writes only samples of pods assigned to its own
 * node, on the cards granted to them, and of DRA claims the ledger charged on its node, on the
 * cards of their shares. The node comes from the caller's token as the API server reviewed it; the
 * pods and their cards from the control plane's cluster view, the claims' shares from the ledger.
 * Pure over those lookups, so the rules are tested without a cluster.
 */
import { type Assignment, VcudaError } from '../../contract/index.js';
import type { ClaimShareRow } from '../../db/ledger.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import type { Caller } from './caller-auth.js';

/** Set by the API server on tokens bound to a pod, Kubernetes >= 1.30 (ServiceAccountTokenPodNodeInfo). */
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';
/** Set on every token bound to a pod (projected service account tokens), older clusters included. */
export const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';
export const POD_UID_EXTRA = 'authentication.kubernetes.io/pod-uid';

export type PodLookup = (namespace: string, name: string) => PodWithStatus | undefined;

const SERVICE_ACCOUNT = /^system:serviceaccount:([^:]+):[^:]+$/;

function oneExtra(caller: Caller, key: string): string | undefined {
  const values = caller.extra?.[key];
  return values?.length === 1 && values[0] ? values[0] : undefined;
}

/**
 * The node a caller's token speaks for: the node the API server names in it, else the node its
 * bound pod (the node agent's own, by name and UID) runs on. A token bound to no pod (a legacy
 * Secret token, a `kubectl create token` without --bound-object) speaks for no node.
 */
export function writerNodeOf(caller: Caller, pods: PodLookup): string {
  const node = oneExtra(caller, NODE_NAME_EXTRA);
  if (node) return node;
  const podName = oneExtra(caller, POD_NAME_EXTRA);
  const podUid = oneExtra(caller, POD_UID_EXTRA);
  const namespace = SERVICE_ACCOUNT.exec(caller.username)?.[1];
  if (!podName || !podUid || !namespace) {
    throw new VcudaError(
      'forbidden',
      `${caller.username}: the token is bound to no pod, so it speaks for no node; ` +
        'node agents must send their projected service account token',
    );
  }
  const pod = pods(namespace, podName);
  if (!pod || pod.metadata?.uid !== podUid || !pod.spec?.nodeName) {
    throw new VcudaError('unavailable', `the node of pod ${namespace}/${podName} is not known yet; retry`);
  }
  return pod.spec.nodeName;
}

/**
 * Cards granted to each container of a pod on a node, and the most of a card each may use (its
 * core limit, the burst a soft limit allows), as the control plane reads its assignment.
 */
export type PodGrants = {
  node: string;
  cardsByContainer: ReadonlyMap<string, ReadonlySet<string>>;
  coreLimitByContainer: ReadonlyMap<string, number>;
  /**
   * The most managed memory each container may hold above its guarantee on each card
   * (vcuda-memory-limit minus vcuda-memory), keyed by burstKey; absent: 0, no burst.
   */
  burstBytesByCard: ReadonlyMap<string, number>;
};

/** The key of a container's card in PodGrants.burstBytesByCard. */
export const burstKey = (container: string, cardUuid: string) => `${container}\u0000${cardUuid}`;

/**
 * The pod's grants; undefined while it has no assignment for this very pod. The one place that
 * reads an assignment for usage: where assignments are verified, this reads the verified view.
 */
/**
 * What a verified assignment grants (the cluster view's `heldAssignment`: signed by us and
 * matching the pod). An annotation nobody verified grants nothing, so it cannot make samples count.
 */
export function grantsOf(assignment: Assignment | undefined, podUid: string | undefined): PodGrants | undefined {
  if (!assignment || assignment.pod.uid !== podUid) return undefined;
  const cardsByContainer = new Map<string, Set<string>>();
  const coreLimitByContainer = new Map<string, number>();
  const burstBytesByCard = new Map<string, number>();
  for (const c of assignment.containers) {
    for (const g of c.cards) {
      const burst = Math.max(0, (g.memoryLimitBytes ?? g.memoryBytes) - g.memoryBytes);
      if (burst > 0) burstBytesByCard.set(burstKey(c.name, g.uuid), burst);
    }
    const cards = cardsByContainer.get(c.name) ?? new Set<string>();
    for (const g of c.cards) cards.add(g.uuid);
    cardsByContainer.set(c.name, cards);
    // A whole card (core 100) may use all of it; a share up to its limit, never below its request.
    const most = Math.max(c.coreLimit, ...c.cards.map((g) => g.core));
    coreLimitByContainer.set(c.name, Math.max(coreLimitByContainer.get(c.name) ?? 0, most));
  }
  return { node: assignment.node, cardsByContainer, coreLimitByContainer, burstBytesByCard };
}

export type SampleRef = { podUid: string; namespace: string; pod: string; container: string; cardUuid: string };

/**
 * `own`: a pod assigned to `node` and a card granted to the container. `unknown`: a pod the view
 * does not hold (ended, or not yet seen), or one not assigned yet: nothing to record, nothing
 * wrong. Otherwise the reason the sample is not this node's to report.
 */
export function judgeSample(
  node: string,
  s: SampleRef,
  pods: PodLookup,
  grants: (pod: PodWithStatus) => PodGrants | undefined,
): 'own' | 'unknown' | { refused: string } {
  const pod = pods(s.namespace, s.pod);
  if (!pod || pod.metadata?.uid !== s.podUid) return 'unknown';
  const where = `pod ${s.namespace}/${s.pod}`;
  const runsOn = pod.spec?.nodeName;
  if (runsOn && runsOn !== node) return { refused: `${where} runs on node ${runsOn}, not ${node}` };
  const granted = grants(pod);
  if (!granted) return 'unknown';
  if (granted.node !== node) return { refused: `${where} is assigned to node ${granted.node}, not ${node}` };
  if (!granted.cardsByContainer.get(s.container)?.has(s.cardUuid)) {
    return { refused: `card ${s.cardUuid} is not granted to container ${s.container} of ${where}` };
  }
  return 'own';
}

/** `grants`, asked once per pod however many of its samples a report carries. */
export function memoizedGrants(
  grants: (pod: PodWithStatus) => PodGrants | undefined,
): (pod: PodWithStatus) => PodGrants | undefined {
  const seen = new Map<PodWithStatus, PodGrants | undefined>();
  return (pod) => {
    if (!seen.has(pod)) seen.set(pod, grants(pod));
    return seen.get(pod);
  };
}

/**
 * The DRA counterpart of judgeSample, over what the ledger charged (the claim's holder `claim:<uid>`
 * as `podUid`, the claim's name as `pod`, a share's key as `container`): `own` when the ledger holds
 * that share on that card on `node`; `unknown` when it holds nothing of the claim (never charged, or
 * another driver's); otherwise why the sample is not this node's to report. Only kube-scheduler's
 * allocation is ever charged, so a node agent reports only claims the scheduler gave its node.
 */
export function judgeClaimSample(
  node: string,
  s: SampleRef,
  holds: readonly ClaimShareRow[],
): 'own' | 'unknown' | { refused: string } {
  const mine = holds.filter((h) => h.holder === s.podUid);
  const first = mine[0];
  if (!first) return 'unknown';
  const where = `resourceclaim ${first.namespace}/${first.name}`;
  if (first.namespace !== s.namespace || first.name !== s.pod) {
    return { refused: `${s.podUid} is ${where} in the ledger, not ${s.namespace}/${s.pod}` };
  }
  const onNode = mine.filter((h) => h.node === node);
  if (onNode.length === 0) return { refused: `${where} is charged on node ${first.node}, not ${node}` };
  if (!onNode.some((h) => h.container === s.container && h.cardUuid === s.cardUuid)) {
    return { refused: `card ${s.cardUuid} is not charged to share ${s.container} of ${where}` };
  }
  return 'own';
}
