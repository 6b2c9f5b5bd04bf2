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
  podEvent,
  requestsGpu,
  ValidationError,
  VcudaError,
} from '../../contract/index.js';
import type { ClusterState } from '../cluster-state.js';
import type { ControlPlaneKube } from '../kube-client.js';
import { capacityReasons, type FitContext } from '../placement/fit.js';
import { type PlacementRequest, readPlacementRequest } from '../placement/placement-request.js';
import type { AssignmentSigner } from '../signing-keys.js';
import { Binder, type BinderConfig, type BindLedger, fitContextOf } from './binder.js';
import {
  bindingArgsSchema,
  type ExtenderBindingResult,
  type ExtenderFilterResult,
  extenderArgsSchema,
  offeredNodeNames,
  podOf,
} from './extender-api.js';
import type { ExtenderMetrics } from './extender-metrics.js';
import { coversNodes, type FilterOutcome, filterNodes, prioritizeNodes, summarizeRefusals } from './filter-decision.js';
import type { LedgerNodes } from './ledger-nodes.js';
import type { Nudger } from './nudger.js';
import type { PodWriteBatcher } from './pod-write-batcher.js';

export const EXTENDER_COMPONENT = 'vcuda-scheduler-extender';

export type ExtenderDeps = {
  config: BinderConfig & {
    /** Distinguishes this replica in Event names and sources. */
    instanceId: string;
    /** The same pod's unschedulable Event at most this often (default 30 s). */
    eventIntervalMs?: number;
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
};

async function readJson(req: Request, what: string): Promise<unknown> {
  try {
    return await req.json();
  } catch {
    throw new ValidationError([{ path: '(body)', rule: 'json', message: '(body): is not JSON' }], what);
  }
}

function parseWith<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new ValidationError(fieldErrorsFromZod(r.error.issues), what);
  return r.data;
}

export function extenderRoutes(deps: ExtenderDeps): Hono {
  const { config, state, metrics } = deps;
  const binder = new Binder(deps);
  const quantity = config.quantity;
  let eventSeq = 0;
  const lastUnschedulableEvent = new Map<string, number>();
  // Filter and prioritize of one scheduling cycle see the same snapshot: prioritize reuses filter's work.
  let memo: { uid: string; outcome: FilterOutcome } | undefined;

  const fitContext = (): FitContext => fitContextOf(config, deps.clock());

  const recordEvent = (
    pod: { namespace: string; name: string; uid?: string },
    reason: EventReason,
    message: string,
  ) => {
    const now = deps.clock();
    eventSeq += 1;
    const event = podEvent(pod, reason, message, {
      component: EXTENDER_COMPONENT,
      host: config.instanceId,
      now,
      nameSuffix: `${now.getTime().toString(36)}.${config.instanceId}.${eventSeq}`,
    });
    deps.kube.createEvent(pod.namespace, event).catch((err) => deps.log?.('event not recorded', { err }));
  };

  const timed = async <T>(verb: string, fn: () => Promise<T>): Promise<T> => {
    const end = metrics.requestSeconds.startTimer({ verb });
    try {
      return await fn();
    } finally {
      end();
    }
  };

  const app = new Hono();

  app.post('/filter', (c) =>
    timed('filter', async () => {
      const args = parseWith(
        extenderArgsSchema,
        await readJson(c.req.raw, 'extender filter args'),
        'extender filter args',
      );
      const names = offeredNodeNames(args);
      const pod = podOf(args);
      const result: ExtenderFilterResult = {
        Nodes: null,
        NodeNames: [],
        FailedNodes: {},
        FailedAndUnresolvableNodes: {},
        Error: '',
      };
      if (!requestsGpu(pod, quantity.names)) {
        result.NodeNames = names;
        return c.json(result);
      }
      const ref = {
        namespace: pod.metadata?.namespace ?? 'default',
        name: pod.metadata?.name ?? '',
        uid: pod.metadata?.uid ?? '',
      };
      let req: PlacementRequest;
      try {
        req = readPlacementRequest(pod, quantity, config.defaultPlacement);
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        for (const n of names) result.FailedAndUnresolvableNodes[n] = err.message;
        return c.json(result);
      }
      const outcome = filterNodes(req, state.snapshot(), names, fitContext());
      memo = { uid: req.podUid, outcome };
      result.NodeNames = outcome.feasible;
      // Every refusal is unresolvable for kube-scheduler: this extender does not take part in
      // preemption, so evicting pods the scheduler picks would not free the GPU capacity it lacks.
      const byReason = new Map<string, number>();
      for (const [node, r] of outcome.refused) {
        result.FailedAndUnresolvableNodes[node] = r.message;
        byReason.set(r.reason, (byReason.get(r.reason) ?? 0) + 1);
      }
      for (const [reason, n] of byReason) metrics.nodeRefusals.inc({ reason }, n);
      if (outcome.feasible.length === 0 && names.length > 0) {
        metrics.podsUnschedulable.inc();
        if ([...outcome.refused.values()].some((r) => capacityReasons.has(r.reason)) && ref.uid) {
          deps.nudger?.rememberRefused(ref);
        }
        const nowMs = deps.clock().getTime();
        const last = lastUnschedulableEvent.get(ref.uid) ?? Number.NEGATIVE_INFINITY;
        if (nowMs - last >= (config.eventIntervalMs ?? 30_000)) {
          lastUnschedulableEvent.set(ref.uid, nowMs);
          if (lastUnschedulableEvent.size > 10_000) lastUnschedulableEvent.clear();
          recordEvent(ref, eventReasons.unschedulable, summarizeRefusals(names.length, outcome.refused));
        }
      }
      return c.json(result);
    }),
  );

  app.post('/prioritize', (c) =>
    timed('prioritize', async () => {
      const args = parseWith(
        extenderArgsSchema,
        await readJson(c.req.raw, 'extender prioritize args'),
        'extender prioritize args',
      );
      const names = offeredNodeNames(args);
      const pod = podOf(args);
      if (!requestsGpu(pod, quantity.names)) return c.json(names.map((Host) => ({ Host, Score: 0 })));
      const snapshot = state.snapshot();
      // The cycle's filter judged this pod on this very snapshot (memo is only set for a readable request).
      const uid = pod.metadata?.uid ?? '';
      if (memo && memo.uid === uid && memo.outcome.version === snapshot.version && coversNodes(memo.outcome, names)) {
        return c.json(prioritizeNodes(names, memo.outcome));
      }
      let req: PlacementRequest;
      try {
        req = readPlacementRequest(pod, quantity, config.defaultPlacement);
      } catch (err) {
        if (err instanceof ValidationError) return c.json(names.map((Host) => ({ Host, Score: 0 })));
        throw err;
      }
      return c.json(prioritizeNodes(names, filterNodes(req, snapshot, names, fitContext())));
    }),
  );

  app.post('/bind', (c) =>
    timed('bind', async () => {
      const args = parseWith(
        bindingArgsSchema,
        await readJson(c.req.raw, 'extender binding args'),
        'extender binding args',
      );
      const ref = { namespace: args.PodNamespace, name: args.PodName, uid: args.PodUID };
      const result: ExtenderBindingResult = { Error: '' };
      try {
        const out = await binder.bind(args);
        metrics.binds.inc({ result: 'bound' });
        deps.nudger?.forget(args.PodUID);
        lastUnschedulableEvent.delete(args.PodUID);
        if (!out.reused) recordEvent(ref, eventReasons.bound, `bound to ${out.node} on ${out.cards.join(', ')}`);
      } catch (err) {
        const code = err instanceof VcudaError ? err.code : 'internal';
        const isConflict = code === 'capacity-conflict' || code === 'quota-exceeded' || code === 'conflict';
        metrics.binds.inc({ result: isConflict ? 'conflict' : 'error' });
        if (isConflict) metrics.bindConflicts.inc({ code });
        const message = err instanceof Error ? err.message : String(err);
        deps.log?.('bind failed', { pod: `${ref.namespace}/${ref.name}`, node: args.Node, code, message });
        recordEvent(ref, isConflict ? eventReasons.bindConflict : eventReasons.unschedulable, message);
        // kube-scheduler reads a non-empty Error as a failed bind and retries the pod.
        result.Error = message;
      }
      return c.json(result);
    }),
  );

  app.onError((err, c) => {
    if (err instanceof ValidationError) return c.json({ Error: err.message }, 400);
    deps.log?.('extender error', { err });
    return c.json({ Error: 'internal error' }, 500);
  });

  return app;
}

export type { BindLedger, ClusterState, ControlPlaneKube };
