/**
 * Bind: choose the cards, reserve them in the ledger (the arbiter between replicas), sign the
 * assignment, write it on the pod, create the Binding, confirm. Any failure after the reservation
 * releases it. Safe to retry: a pod already bound to this node is a success, a pod that already
 * carries a verified assignment for this node, granting what it asks, keeps its cards. Anything
 * else on the pod (unsigned, forged, another pod's) is ignored and the pod planned afresh: bind
 * never signs what it did not verify.
 */
import {
  type Assignment,
  type PodLike,
  type QuantityPolicy,
  VcudaError,
  vcudaAnnotations,
} from '../../contract/index.js';
import type { ClusterState } from '../cluster-state.js';
import { type ControlPlaneKube, withBinding } from '../kube-client.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import { type FitContext, fitPod } from '../placement/fit.js';
import { assumedHoldOf, carriesAssignment, verifiedAssignmentOf } from '../placement/holds/index.js';
import { type PlacementPolicy, readPlacementRequest } from '../placement/placement-request.js';
import type { AssignmentSigner } from '../signing-keys.js';
import { burstCeilingMiB, cardGrantOf } from './card-grant.js';
import type { BindingArgs } from './extender-api.js';
import { type LedgerItem, ledgerItemsOf } from './ledger-items.js';
import { LedgerNodes, type NodeRegistrationLedger } from './ledger-nodes.js';
import { PodWriteBatcher } from './pod-write-batcher.js';

type ReserveRequest = {
  cluster: string;
  podUid: string;
  namespace: string;
  pod: string;
  node: string;
  items: LedgerItem[];
};

/** The slice of the ledger (db/ledger.ts) bind uses: node registration (LedgerNodes) and reservations. */
export type BindLedger = NodeRegistrationLedger & {
  reserve(req: ReserveRequest): Promise<{ reused: boolean }>;
  confirmMany(cluster: string, podUids: readonly string[]): Promise<{ missing: string[] }>;
  release(cluster: string, podUid: string): Promise<{ released: number }>;
};

export type BinderConfig = {
  cluster: string;
  quantity: QuantityPolicy;
  defaultPlacement: PlacementPolicy;
  heartbeatStaleMs: number;
  assignmentTtlMs: number;
};

/** The fit context the extender's filter and bind both judge with at `now`. */
export function fitContextOf(config: BinderConfig, now: Date): FitContext {
  return {
    nowMs: now.getTime(),
    heartbeatStaleMs: config.heartbeatStaleMs,
    memoryUnitMiB: config.quantity.memoryUnitMiB,
  };
}

/**
 * The steps of a bind between which a replica may die: `planned` (assumed in this view, nothing in
 * the ledger), `reserved` (the ledger holds the cards, no Binding yet), `bound` (the Binding exists,
 * the reservation is not confirmed yet).
 */
export type BindStep = 'planned' | 'reserved' | 'bound';

/**
 * Called at each step with the pod's uid; what it awaits, the bind awaits. Fault injection for
 * tests: a hook that never resolves is a replica that died right there.
 */
export type BindFaults = (step: BindStep, podUid: string) => Promise<void> | void;

/** This replica's lease in the ledger (control-plane/starters/replica-lease.ts). */
export type BindLease = {
  /**
   * Whether the lease surely has not lapsed: once it has, other replicas release this replica's
   * reservations of pods without a Binding, so no Binding may follow one of them.
   */
  isHeld(): boolean;
};

export type BinderDeps = {
  config: BinderConfig;
  state: ClusterState;
  kube: ControlPlaneKube;
  ledger: BindLedger;
  signer: AssignmentSigner;
  clock: () => Date;
  /** Shared with whoever registers nodes in the background; the binder makes its own otherwise. */
  ledgerNodes?: LedgerNodes;
  /**
   * Where binds confirm their reservations (reserved -> bound), shared with whoever drains it at
   * shutdown; the binder makes its own otherwise.
   */
  confirms?: PodWriteBatcher;
  /** Told of a step that failed after the bind's outcome was decided (the reconcile mends it). */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Without one, binds never check a lease (a single replica, or tests). */
  lease?: BindLease;
  faults?: BindFaults;
  /**
   * Told when the ledger refuses a reservation for lack of room: this view missed a hold (another
   * replica's bind, or a dead one's leftover), so the holds are read again now rather than at the
   * next tick, and the binds after this one are not sent to the same full card.
   */
  ledgerRefused?: () => void;
};

export class Binder {
  private readonly ledgerNodes: LedgerNodes;
  private readonly confirms: PodWriteBatcher;

  constructor(private readonly deps: BinderDeps) {
    this.ledgerNodes = deps.ledgerNodes ?? new LedgerNodes(deps.ledger, deps.config.cluster);
    this.confirms = deps.confirms ?? new PodWriteBatcher((uids) => deps.ledger.confirmMany(deps.config.cluster, uids));
  }

  private async readPod(args: BindingArgs): Promise<PodWithStatus> {
    const pod = await this.deps.kube.readPod(args.PodNamespace, args.PodName);
    const what = `bind ${args.PodNamespace}/${args.PodName}`;
    if (!pod) throw new VcudaError('not-found', `${what}: pod not found`);
    if (pod.metadata?.uid !== args.PodUID) {
      throw new VcudaError(
        'conflict',
        `${what}: pod was recreated (uid ${pod.metadata?.uid}, expected ${args.PodUID})`,
      );
    }
    return pod;
  }

  /** Makes sure the ledger knows this node's cards before reserving on them. */
  private async syncLedgerNode(node: string): Promise<void> {
    const snap = this.deps.state.snapshot().nodes.get(node);
    if (snap) await this.ledgerNodes.ensure(snap);
  }

  private plan(
    pod: PodWithStatus,
    existing: Assignment | undefined,
    args: BindingArgs,
    now: Date,
  ): { assignment: Assignment; isExisting: boolean } {
    const { config, state } = this.deps;
    // A retry after a crash: the pod already names its cards on this node, signed by us; keep them.
    if (existing && existing.node === args.Node && existing.pod.uid === args.PodUID) {
      return { assignment: existing, isExisting: true };
    }
    const req = readPlacementRequest(pod as PodLike, config.quantity, config.defaultPlacement);
    const fit = fitPod(req, state.snapshot().nodes.get(args.Node), fitContextOf(config, now));
    if (!fit.ok) {
      throw new VcudaError(
        'capacity-conflict',
        `bind ${args.PodNamespace}/${args.PodName} to ${args.Node}: ${fit.refusal.message}`,
      );
    }
    const assignment: Assignment = {
      v: 1,
      pod: { uid: args.PodUID, namespace: args.PodNamespace, name: args.PodName },
      node: args.Node,
      cluster: config.cluster,
      containers: fit.placement.containers.map((c) => ({
        name: c.name,
        isInit: c.isInit,
        cards: c.cards.map((g) => cardGrantOf(g, burstCeilingMiB(req.containers, c.name))),
        coreLimit: c.coreLimit,
        mode: c.mode,
      })),
    };
    return { assignment, isExisting: false };
  }

  /**
   * Plans and assumes in the request's own tick (when the pod is cached), so every later filter
   * and bind in this replica sees these cards taken; the ledger settles races between replicas.
   */
  async bind(args: BindingArgs): Promise<void> {
    const { state } = this.deps;
    const now = this.deps.clock();
    const podRef = `${args.PodNamespace}/${args.PodName}`;
    const cached = state.pod(args.PodNamespace, args.PodName);
    // The cached pod needs no await, so the assume below lands in the same tick as the request.
    const pod = cached?.metadata?.uid === args.PodUID ? cached : await this.readPod(args);
    // Only a pod carrying an assignment awaits its verification, so the common bind plans and
    // assumes in the request's own tick.
    const existing = carriesAssignment(pod)
      ? await verifiedAssignmentOf(pod, (token) => state.trust.verify(token), this.deps.config.quantity)
      : undefined;
    const boundTo = pod.spec?.nodeName;
    if (boundTo) {
      const a = existing;
      if (boundTo === args.Node && a?.node === args.Node) {
        await this.confirm(args.PodUID);
        return;
      }
      throw new VcudaError('conflict', `bind ${podRef}: already bound to ${boundTo}`);
    }
    const { assignment, isExisting } = this.plan(pod, existing, args, now);
    const items = ledgerItemsOf(assignment);
    // Taken from now on in this replica's view, so filters running meanwhile do not offer these cards.
    const assignedAt = now.toISOString();
    state.assumePod(pod, assumedHoldOf(assignment, assignedAt));
    try {
      await this.deps.faults?.('planned', args.PodUID);
      return await this.reserveAndBind(pod, args, assignment, items, isExisting, assignedAt, now);
    } catch (err) {
      // Back to what the cluster says, unless the watch has reported a newer pod meanwhile.
      if (state.pod(args.PodNamespace, args.PodName) === pod) state.restorePod(pod);
      throw err;
    }
  }

  private async reserveAndBind(
    pod: PodWithStatus,
    args: BindingArgs,
    assignment: Assignment,
    items: LedgerItem[],
    isExisting: boolean,
    assignedAt: string,
    now: Date,
  ): Promise<void> {
    const { ledger, signer, state, config } = this.deps;
    const podRef = `${args.PodNamespace}/${args.PodName}`;
    await this.syncLedgerNode(args.Node);
    const request = {
      cluster: config.cluster,
      podUid: args.PodUID,
      namespace: args.PodNamespace,
      pod: args.PodName,
      node: args.Node,
      items,
    };
    const { reused } = await ledger.reserve(request).catch((err: unknown) => {
      if (err instanceof VcudaError && err.code === 'capacity-conflict') this.deps.ledgerRefused?.();
      throw err;
    });
    if (reused && !isExisting) {
      // Another attempt for this pod holds a reservation it has not written on the pod yet: it is
      // either still running (let it finish) or died (the reservation expires). Never take it over.
      throw new VcudaError('conflict', `bind ${podRef}: another bind of this pod is in progress; retry`);
    }
    try {
      await this.deps.faults?.('reserved', args.PodUID);
      // A lapsed lease lets other replicas release this reservation while the pod has no Binding.
      if (this.deps.lease && !this.deps.lease.isHeld()) {
        throw new VcudaError('unavailable', `bind ${podRef}: this replica's ledger lease lapsed; retry`);
      }
      const token = await signer.sign(assignment, now);
      // Ours: it holds in this replica's view the moment the pod carries it, before any watch event.
      state.trust.vouch(token, assignment);
      state.recordSigned(pod, token, assignment);
      // One write: the Binding carries the assignment, so the pod gets its node and its cards together.
      const bound = await this.createBinding(pod, args, {
        [vcudaAnnotations.assignment]: token,
        [vcudaAnnotations.assignedNode]: args.Node,
        [vcudaAnnotations.assignedAt]: assignedAt,
      });
      // Count it here at once rather than when the watch reports it, so the next pod sees these cards taken.
      state.upsertPod(bound);
    } catch (err) {
      await this.undo(args);
      throw err;
    }
    // The Binding exists: from here the pod runs on these cards, so a failed confirm must not release.
    // Nor does the answer wait for it: the reservation already holds the cards, and whatever the
    // confirm's outcome the bind has succeeded. Waiting would add a second ledger commit to every
    // bind's latency, which with kube-scheduler's bounded binds in flight bounds binds per second.
    await this.deps.faults?.('bound', args.PodUID);
    void this.confirm(args.PodUID, request);
  }

  /**
   * reserved -> bound, batched with the binds finishing at the same time (PodWriteBatcher retries).
   * A confirm that still fails leaves the rows reserved for the reconcile to mend; it must not
   * fail the bind, whose Binding already exists. Never rejects.
   */
  private async confirm(podUid: string, request?: ReserveRequest): Promise<void> {
    try {
      const outcome = await this.confirms.write(podUid);
      if (outcome === 'missing' && request) await this.reserveAgain(request);
    } catch (err) {
      this.deps.log?.('confirm failed; the reconcile confirms it later', { err, podUid });
    }
  }

  /**
   * The pod is bound but its reservation is gone (released while this replica's lease seemed to
   * lapse): it runs on these cards, so the ledger takes them back at once rather than at the next
   * reconcile. If they were taken meanwhile, that is said, not hidden.
   */
  private async reserveAgain(request: ReserveRequest): Promise<void> {
    const pod = `${request.namespace}/${request.pod}`;
    try {
      const { reused } = await this.deps.ledger.reserve(request);
      if (!reused) await this.confirms.write(request.podUid);
      this.deps.log?.('a bound pod had lost its reservation; reserved again', { pod });
    } catch (err) {
      this.deps.log?.('a bound pod lost its reservation and could not get it back', { err, pod });
    }
  }

  /** Binds the pod with `annotations` on it; returns the pod as it now stands. */
  private async createBinding(
    pod: PodWithStatus,
    args: BindingArgs,
    annotations: Record<string, string>,
  ): Promise<PodWithStatus> {
    const { kube } = this.deps;
    try {
      await kube.bindPod(args.PodNamespace, args.PodName, args.PodUID, args.Node, annotations);
      return withBinding(pod, args.Node, annotations);
    } catch (err) {
      // A Binding from an earlier attempt that timed out on our side counts as done, once the pod
      // carries this attempt's assignment (the earlier one's undo may have taken its own away).
      if (err instanceof VcudaError && err.code === 'conflict') {
        // Unreadable now: the conflict stands and is reported as it came.
        const now = await kube.readPod(args.PodNamespace, args.PodName).catch(() => undefined);
        if (now?.spec?.nodeName === args.Node && now.metadata?.uid === args.PodUID) {
          const carries = Object.entries(annotations).every(([k, v]) => now.metadata?.annotations?.[k] === v);
          // Bound already, so the patched pod comes back with its node.
          return carries ? now : await kube.patchPodAnnotations(args.PodNamespace, args.PodName, annotations);
        }
      }
      throw err;
    }
  }

  /**
   * Best effort: the bind already failed and says so. A release that fails leaves a reservation the
   * expiry frees; an annotation left behind holds nothing once its pod is judged without a bind.
   */
  private async undo(args: BindingArgs): Promise<void> {
    const pod = `${args.PodNamespace}/${args.PodName}`;
    await this.deps.ledger
      .release(this.deps.config.cluster, args.PodUID)
      .catch((err: unknown) => this.deps.log?.('undo: release failed; the reservation expires', { err, pod }));
    await this.deps.kube
      .patchPodAnnotations(args.PodNamespace, args.PodName, {
        [vcudaAnnotations.assignment]: null,
        [vcudaAnnotations.assignedNode]: null,
        [vcudaAnnotations.assignedAt]: null,
      })
      .catch((err: unknown) => this.deps.log?.('undo: removing the assignment failed', { err, pod }));
  }
}
