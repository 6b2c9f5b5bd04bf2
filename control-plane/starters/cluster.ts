/**
 * The cluster connection and view: the kube config, the watch cache's state, the assignment trust
 * that judges every assignment annotation against the signing keys, and the signing keys themselves.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type * as jose from 'jose';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { eventReasons, type PodEvent, type ResourceNames, resourceNames } from '../../contract/index.js';
import { createEventRecorder, type PodEventRecorder } from '../../kube-connections/event-recorder.js';
import { PooledKubeConfig } from '../../kube-connections/pooled-kube-config.js';
import { AssignmentTrust, createAssignmentTrustMetrics, type UnverifiedAssignment } from '../assignment-trust.js';
import { ClusterState } from '../cluster-state.js';
import type { ControlPlaneConfig } from '../config.js';
import { createPreemptionLog, type PreemptionLog } from '../dashboard/preemption-log.js';
import { createRefusalLog, type RefusalLog } from '../dashboard/refusal-log.js';
import { type ControlPlaneKube, createKubeClient } from '../kube-client.js';
import { createLocalKube } from '../local-kube.js';
import { type KeySet, loadSigningKeys, publishJwks } from '../signing-keys.js';
import { createWatchCache, type WatchCache } from '../watch-cache.js';
import type { StartContext } from './context.js';

export type ClusterView = {
  /** Absent with `kube.mode: none`: the caller feeds `state` with nodes and pods. */
  kc: KubeConfig | undefined;
  names: ResourceNames;
  state: ClusterState;
  /** Created, not started: it starts last, once everything that judges pods is in place. */
  watch: WatchCache | undefined;
  kube: ControlPlaneKube;
  refusals: RefusalLog;
  /** Both sides of recent preemptions, for the dashboard. */
  preemptions: PreemptionLog;
  /** Each component's Event recorder (repeats aggregated, one write per pod and reason a minute). */
  events: EventRecorders;
  /** The keys assignments are verified against; until given, every assignment is unverified. */
  trustKeys: (keys: KeySet) => void;
};

const NO_KEYS: jose.JSONWebKeySet = { keys: [] };

/** One aggregating recorder per component (each Event names its source), closed together. */
export type EventRecorders = { for(component: string): PodEventRecorder; close(): void };

/**
 * Cluster connection and view. Assignments count only once verified against the keys given to
 * `trustKeys`; nothing is judged before (the watch starts last).
 */
export function connectCluster(ctx: StartContext, registry: Registry, given?: KubeConfig): ClusterView {
  const { config, log } = ctx;
  const names = resourceNames(config.resourceDomain);
  const kc = loadKubeConfig(config, given);
  const refusals = createRefusalLog();
  const preemptions = createPreemptionLog();
  let keys: KeySet | undefined;
  let kube: ControlPlaneKube;
  const events = eventRecorders(ctx, () => kube);
  const unverifiedEvents = events.for('vcuda-control-plane');
  const trust = new AssignmentTrust({
    jwks: () => keys?.jwks ?? NO_KEYS,
    onUnverified: unverifiedReporter(registry, log, (u) => recordUnverified(unverifiedEvents, u)),
  });
  const state = new ClusterState({ trust, quantity: { names, memoryUnitMiB: config.memoryUnitMiB } });
  let watch: WatchCache | undefined;
  const onEvent = (_ns: string, event: PodEvent) => {
    const like = event as Parameters<typeof refusals.recordEvent>[0];
    if (!refusals.recordEvent(like, config.clusterName)) preemptions.recordEvent(like, config.clusterName);
  };
  if (kc) {
    watch = createWatchCache(kc, state, { onError: (err) => log.warn({ err }, 'watch failed; relisting') });
    const client = createKubeClient(kc);
    kube = {
      ...client,
      createEvent: async (ns, event) => {
        onEvent(ns, event);
        await client.createEvent(ns, event);
      },
      updateEvent: async (ns, event) => {
        onEvent(ns, event);
        await client.updateEvent(ns, event);
      },
    };
  } else {
    kube = createLocalKube(state, onEvent);
  }
  return {
    kc,
    names,
    state,
    watch,
    kube,
    refusals,
    preemptions,
    events,
    trustKeys: (k) => {
      keys = k;
    },
  };
}

function loadKubeConfig(config: ControlPlaneConfig, given: KubeConfig | undefined): KubeConfig | undefined {
  if (given) return given;
  if (config.kube.mode === 'none') return undefined;
  const kc = new PooledKubeConfig();
  if (config.kube.mode === 'in-cluster') kc.loadFromCluster();
  else if (config.kube.kubeconfig) kc.loadFromFile(config.kube.kubeconfig);
  else kc.loadFromDefault();
  return kc;
}

/** Signing keys shared by every replica; the public half where node agents read it. */
export async function startSigningKeys(
  { config }: StartContext,
  cluster: ClusterView,
  given?: KeySet,
): Promise<KeySet> {
  const keys =
    given ??
    (await loadSigningKeys(
      config.signingKeys.source === 'secret'
        ? { kind: 'secret', namespace: config.namespace, kid: config.signingKeys.kid }
        : config.signingKeys.source === 'file'
          ? { kind: 'file', path: config.signingKeys.file as string }
          : { kind: 'ephemeral' },
      cluster.kube,
    ));
  cluster.trustKeys(keys);
  if (cluster.kc && config.signingKeys.publishJwks) await publishJwks(cluster.kube, config.namespace, keys);
  return keys;
}

/** Counts, logs and records an Event for each pod whose assignment holds nothing. */
function unverifiedReporter(
  registry: Registry,
  log: Logger,
  recordEvent: (u: UnverifiedAssignment) => void,
): (u: UnverifiedAssignment) => void {
  const metrics = createAssignmentTrustMetrics(registry);
  return (u) => {
    metrics.unverified.inc({ reason: u.reason });
    log.warn({ pod: `${u.pod.namespace}/${u.pod.name}`, reason: u.reason, detail: u.message }, 'unverified assignment');
    recordEvent(u);
  };
}

/** The Warning Event on a pod whose assignment annotation holds nothing. */
function recordUnverified(events: PodEventRecorder, u: UnverifiedAssignment): void {
  const message = `assignment ignored (${u.reason}): ${u.message}; it holds no GPU capacity`;
  events.record(u.pod, eventReasons.assignmentUnverified, message, 'Warning');
}

/** Recorders over the cluster's Events (or the local stand-in), one per component, made on first use. */
function eventRecorders({ config, clock, log }: StartContext, kube: () => ControlPlaneKube): EventRecorders {
  const made = new Map<string, PodEventRecorder>();
  return {
    for(component) {
      let recorder = made.get(component);
      if (!recorder) {
        recorder = createEventRecorder({
          writer: { create: (ns, e) => kube().createEvent(ns, e), update: (ns, e) => kube().updateEvent(ns, e) },
          component,
          host: config.instanceId,
          clock,
          onError: (err, pod) => log.warn({ err, pod: `${pod.namespace}/${pod.name}` }, 'event not recorded'),
        });
        made.set(component, recorder);
      }
      return recorder;
    },
    close() {
      for (const r of made.values()) r.close();
    },
  };
}
