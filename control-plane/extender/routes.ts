/**
 * The scheduler extender's HTTP adapter, mounted at /scheduler: POST /filter, /prioritize, /bind
 * (PROTOCOLS.md §3, nodeCacheCapable). It only translates: JSON in, a decision on one snapshot,
 * JSON out; bind delegates to the Binder. Every refusal and bind is recorded as an Event on the pod.
 */
import { Hono } from 'hono';
import type { z } from 'zod';
import {
  type EventReason,
  eventReasons,
  fieldErrorsFromZod,
  messageOf,
  requestsGpu,
  ValidationError,
  VcudaError,
} from '../../contract/index.js';
import { createEventRecorder, type PodEventRecorder } from '../../kube-connections/event-recorder.js';
import type { ClusterState } from '../cluster-state.js';
import type { ControlPlaneKube } from '../kube-client.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import { capacityReasons, type FitContext } from '../placement/fit.js';
import { type PlacementRequest, readPlacementRequest } from '../placement/placement-request.js';
import type { AssignmentSigner } from '../signing-keys.js';
import { Binder, type BinderConfig, type BinderDeps, type BindLedger, fitContextOf } from './binder.js';
import { CallGate } from './call-gate.js';
import {
  type BindingArgs,
  bindingArgsSchema,
  type ExtenderArgs,
  type ExtenderBindingResult,
  type ExtenderFilterResult,
  type ExtenderPreemptionResult,
  extenderArgsSchema,
  type HostPriority,
  offeredNodeNames,
  type PreemptionArgs,
  podOf,
  preemptionArgsSchema,
} from './extender-api.js';
import type { ExtenderMetrics } from './extender-metrics.js';
import { coversNodes, type FilterOutcome, filterNodes, prioritizeNodes, summarizeRefusals } from './filter-decision.js';
import type { LedgerNodes } from './ledger-nodes.js';
import type { Nudger } from './nudger.js';
import type { PodWriteBatcher } from './pod-write-batcher.js';
import { answerPreemption } from './preempt-verb.js';

export const EXTENDER_COMPONENT = 'vcuda-scheduler-extender';
export const DEFAULT_MAX_CONCURRENT_CALLS = 4;
/** A refusal's words per node: 5,000 of them make an answer of a few MiB at most. */
const MAX_REASON_CHARS = 512;
const bounded = (message: string) =>
  message.length <= MAX_REASON_CHARS ? message : `${message.slice(0, MAX_REASON_CHARS - 1)}…`;

export type ExtenderDeps = {
  config: BinderConfig & {
    /** Distinguishes this replica in Event names and sources. */
    instanceId: string;
    /** The same pod's unschedulable Event at most this often (default 30 s). */
    eventIntervalMs?: number;
    /** Filter and prioritize calls judged at once (call-gate.ts; default 4). */
    maxConcurrentCalls?: number;
  };
  state: ClusterState;
  kube: ControlPlaneKube;
  ledger: BindLedger;
  signer: AssignmentSigner;
  clock: () => Date;
  metrics: ExtenderMetrics;
  nudger?: Nudger;
  /** Nodes the ledger knows, shared with the background registration (server.ts). */
  ledgerNodes?: LedgerNodes;
  /** Binds' confirms, drained at shutdown (server.ts); the binder makes its own otherwise. */
  confirms?: PodWriteBatcher;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** This replica's ledger lease and the fault-injection hook, handed to the binder. */
  lease?: BinderDeps['lease'];
  faults?: BinderDeps['faults'];
  ledgerRefused?: BinderDeps['ledgerRefused'];
  /** Where the verbs' Events go (the process's recorder for this component); by default one over `kube`. */
  events?: PodEventRecorder;
};

async function readJson(req: Request, what: string): Promise<unknown> {
  try {
    return await req.json();
  } catch {
    throw new ValidationError([{ path: '(body)', rule: 'json', message: '(body): is not JSON' }], what);
  }
}

/** The request's JSON body checked against `schema`; a ValidationError (400) names what is wrong. */
async function readArgs<T>(req: Request, schema: z.ZodType<T>, what: string): Promise<T> {
  const r = schema.safeParse(await readJson(req, what));
  if (!r.success) throw new ValidationError(fieldErrorsFromZod(r.error.issues), what);
  return r.data;
}

export function extenderRoutes(deps: ExtenderDeps): Hono {
  const verbs = new ExtenderVerbs(deps);
  const timed = async <T>(verb: string, fn: () => Promise<T>): Promise<T> => {
    const end = deps.metrics.requestSeconds.startTimer({ verb });
    try {
      return await fn();
    } finally {
      end();
    }
  };

  // Bodies are read only once the call has its turn: waiting calls hold no parsed body.
  const gate = new CallGate({
    maxInFlight: deps.config.maxConcurrentCalls ?? DEFAULT_MAX_CONCURRENT_CALLS,
    maxWaiting: 64,
    waitMs: 5000,
  });
  const app = new Hono();
  app.post('/filter', (c) =>
    timed('filter', () =>
      gate.run(async () => c.json(verbs.filter(await readArgs(c.req.raw, extenderArgsSchema, 'extender filter args')))),
    ),
  );
  app.post('/prioritize', (c) =>
    timed('prioritize', () =>
      gate.run(async () =>
        c.json(verbs.prioritize(await readArgs(c.req.raw, extenderArgsSchema, 'extender prioritize args'))),
      ),
    ),
  );
  app.post('/bind', (c) =>
    timed('bind', async () =>
      c.json(await verbs.bind(await readArgs(c.req.raw, bindingArgsSchema, 'extender binding args'))),
    ),
  );
  app.post('/preempt', (c) =>
    timed('preempt', () =>
      gate.run(async () =>
        c.json(await verbs.preempt(await readArgs(c.req.raw, preemptionArgsSchema, 'extender preemption args'))),
      ),
    ),
  );
  app.onError((err, c) => {
    if (err instanceof ValidationError) return c.json({ Error: err.message }, 400);
    if (err instanceof VcudaError && err.code === 'unavailable') return c.json({ Error: err.message }, 503);
    deps.log?.('extender error', { err });
    return c.json({ Error: 'internal error' }, 500);
  });
  return app;
}

type PodRef = { namespace: string; name: string; uid: string };

/** The three verbs over one replica's state: the binder, the filter memo and the Event pacing. */
class ExtenderVerbs {
  private readonly binder: Binder;
  private readonly events: PodEventRecorder;
  private readonly lastUnschedulableEvent = new Map<string, number>();
  // Filter and prioritize of one scheduling cycle see the same snapshot: prioritize reuses filter's work.
  private memo: { uid: string; outcome: FilterOutcome } | undefined;

  constructor(private readonly deps: ExtenderDeps) {
    this.binder = new Binder(deps);
    this.events =
      deps.events ??
      createEventRecorder({
        writer: { create: (ns, e) => deps.kube.createEvent(ns, e), update: (ns, e) => deps.kube.updateEvent(ns, e) },
        component: EXTENDER_COMPONENT,
        host: deps.config.instanceId,
        clock: deps.clock,
        onError: (err) => deps.log?.('event not recorded', { err }),
      });
  }

  filter(args: ExtenderArgs): ExtenderFilterResult {
    const names = offeredNodeNames(args);
    const pod = podOf(args);
    const result: ExtenderFilterResult = {
      Nodes: null,
      NodeNames: [],
      FailedNodes: {},
      FailedAndUnresolvableNodes: {},
      Error: '',
    };
    if (!requestsGpu(pod, this.deps.config.quantity.names)) {
      result.NodeNames = names;
      return result;
    }
    const req = this.readRequest(pod);
    if (req instanceof ValidationError) {
      const message = bounded(req.message);
      for (const n of names) result.FailedAndUnresolvableNodes[n] = message;
      return result;
    }
    const outcome = filterNodes(req, this.deps.state.snapshot(), names, this.fitContext());
    this.memo = { uid: req.podUid, outcome };
    result.NodeNames = outcome.feasible;
    // A node short of card capacity may take the pod once lower-priority pods go: kube-scheduler
    // offers such nodes (FailedNodes) to preemption, whose victims the preempt verb chooses card by
    // card. Every other refusal (no inventory, stale heartbeat, no matching card) no eviction cures.
    const byReason = new Map<string, number>();
    for (const [node, r] of outcome.refused) {
      const failed = capacityReasons.has(r.reason) ? result.FailedNodes : result.FailedAndUnresolvableNodes;
      failed[node] = bounded(r.message);
      byReason.set(r.reason, (byReason.get(r.reason) ?? 0) + 1);
    }
    for (const [reason, n] of byReason) this.deps.metrics.nodeRefusals.inc({ reason }, n);
    if (outcome.feasible.length === 0 && names.length > 0) this.noteUnschedulable(podRefOf(pod), names, outcome);
    return result;
  }

  /** Card-aware victims per proposed node (preempt-verb.ts); an Event on the pod names them. */
  preempt(args: PreemptionArgs): Promise<ExtenderPreemptionResult> {
    const { deps } = this;
    return answerPreemption(
      {
        state: deps.state,
        ...(deps.kube.listPodDisruptionBudgets ? { listPdbs: () => deps.kube.listPodDisruptionBudgets!() } : {}),
        readRequest: (pod) => this.readRequest(pod),
        fitContext: () => this.fitContext(),
        isGpuPod: (pod) => requestsGpu(pod, deps.config.quantity.names),
        recordEvent: (pod, reason, message) => this.recordEvent(pod, reason, message),
        ...(deps.log ? { log: deps.log } : {}),
      },
      args,
    );
  }

  prioritize(args: ExtenderArgs): HostPriority[] {
    const names = offeredNodeNames(args);
    const pod = podOf(args);
    if (!requestsGpu(pod, this.deps.config.quantity.names)) return names.map((Host) => ({ Host, Score: 0 }));
    const snapshot = this.deps.state.snapshot();
    // The cycle's filter judged this pod on this very snapshot (memo is only set for a readable request).
    const memo = this.memo;
    const fresh = memo && memo.uid === (pod.metadata?.uid ?? '') && memo.outcome.version === snapshot.version;
    if (fresh && coversNodes(memo.outcome, names)) return prioritizeNodes(names, memo.outcome);
    const req = this.readRequest(pod);
    if (req instanceof ValidationError) return names.map((Host) => ({ Host, Score: 0 }));
    return prioritizeNodes(names, filterNodes(req, snapshot, names, this.fitContext()));
  }

  /**
   * The answer goes out as soon as the Binding exists (or the bind failed); what only reports the
   * outcome (metrics, a failure's Event, the log line, the nudger's bookkeeping) runs after it, off the
   * request path, so the scheduler's next filter and prioritize do not queue behind it.
   */
  async bind(args: BindingArgs): Promise<ExtenderBindingResult> {
    const ref = { namespace: args.PodNamespace, name: args.PodName, uid: args.PodUID };
    try {
      await this.binder.bind(args);
      setImmediate(() => this.reportBound(ref));
      return { Error: '' };
    } catch (err) {
      const message = messageOf(err);
      setImmediate(() => this.reportBindFailure(ref, args.Node, err, message));
      // kube-scheduler reads a non-empty Error as a failed bind and retries the pod.
      return { Error: message };
    }
  }

  private reportBound(ref: PodRef): void {
    this.deps.metrics.binds.inc({ result: 'bound' });
    this.deps.nudger?.forget(ref.uid);
    this.lastUnschedulableEvent.delete(ref.uid);
    // No Event of its own: kube-scheduler's Scheduled says where the pod went and the node
    // agent's VcudaAllocated which cards it got. One more Event per pod cost the cluster about a
    // tenth of a vcuda pod's CPU (the API server's write, etcd's, every Event watcher's read).
  }

  private reportBindFailure(ref: PodRef, node: string, err: unknown, message: string): void {
    const { metrics } = this.deps;
    const code = err instanceof VcudaError ? err.code : 'internal';
    const isConflict = code === 'capacity-conflict' || code === 'quota-exceeded' || code === 'conflict';
    metrics.binds.inc({ result: isConflict ? 'conflict' : 'error' });
    if (isConflict) metrics.bindConflicts.inc({ code });
    this.deps.log?.('bind failed', { pod: `${ref.namespace}/${ref.name}`, node, code, message });
    this.recordEvent(ref, isConflict ? eventReasons.bindConflict : eventReasons.unschedulable, message);
  }

  private fitContext(): FitContext {
    return fitContextOf(this.deps.config, this.deps.clock());
  }

  /** The pod's placement request, or why it cannot be read (a refusal, not a failed request). */
  private readRequest(pod: PodWithStatus): PlacementRequest | ValidationError {
    const { config } = this.deps;
    try {
      return readPlacementRequest(pod, config.quantity, config.defaultPlacement);
    } catch (err) {
      if (err instanceof ValidationError) return err;
      throw err;
    }
  }

  /**
   * A pod no node can take: counted, remembered for a nudge when capacity is what it lacks, and
   * told in an Event at most once per `eventIntervalMs`.
   */
  private noteUnschedulable(ref: PodRef, names: string[], outcome: FilterOutcome): void {
    const { config, metrics } = this.deps;
    metrics.podsUnschedulable.inc();
    if ([...outcome.refused.values()].some((r) => capacityReasons.has(r.reason)) && ref.uid) {
      this.deps.nudger?.rememberRefused(ref);
    }
    const nowMs = this.deps.clock().getTime();
    const last = this.lastUnschedulableEvent.get(ref.uid) ?? Number.NEGATIVE_INFINITY;
    if (nowMs - last < (config.eventIntervalMs ?? 30_000)) return;
    this.lastUnschedulableEvent.set(ref.uid, nowMs);
    if (this.lastUnschedulableEvent.size > 10_000) this.lastUnschedulableEvent.clear();
    this.recordEvent(ref, eventReasons.unschedulable, summarizeRefusals(names.length, outcome.refused));
  }

  private recordEvent(pod: PodRef, reason: EventReason, message: string) {
    this.events.record(pod, reason, message);
  }
}

function podRefOf(pod: PodWithStatus): PodRef {
  return {
    namespace: pod.metadata?.namespace ?? 'default',
    name: pod.metadata?.name ?? '',
    uid: pod.metadata?.uid ?? '',
  };
}

export type { BindLedger, ClusterState, ControlPlaneKube };
