/**
 * The Job controller's decision (kube-controller-manager's `syncJob` with pod tracking by
 * finalizers), without I/O: a finished pod is first recorded in `status.uncountedTerminatedPods`,
 * then loses its `batch.kubernetes.io/job-tracking` finalizer, then moves into `succeeded` /
 * `failed`, so no pod is counted twice or lost when it is deleted; pods are created up to
 * `parallelism` while completions are missing; the Job ends `Complete` (after
 * `SuccessCriteriaMet`) or `Failed` (after `FailureTarget`, on `backoffLimit` or
 * `activeDeadlineSeconds`) once none of its pods is left running.
 */
import type { KubeObj } from '../kube-client.js';
import { controllerOf, isDeleting, isoSeconds, isPodReady, phaseOf, uidOf } from './workload-objects.js';

export const JOB_TRACKING_FINALIZER = 'batch.kubernetes.io/job-tracking';

type JobSpec = {
  parallelism?: number;
  completions?: number | null;
  backoffLimit?: number;
  activeDeadlineSeconds?: number;
  suspend?: boolean;
};
type Condition = {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastProbeTime: string;
  lastTransitionTime: string;
};
export type JobStatus = {
  startTime?: string;
  completionTime?: string;
  active?: number;
  ready?: number;
  terminating?: number;
  succeeded?: number;
  failed?: number;
  uncountedTerminatedPods?: { succeeded?: string[]; failed?: string[] };
  conditions?: Condition[];
};

export type JobPlan = {
  create: number;
  /** Running pods to delete (more than parallelism, or the Job has ended). */
  remove: KubeObj[];
  /** Pods whose tracking finalizer goes, once the status written first records them. */
  release: KubeObj[];
  status: JobStatus;
};

function hasTracking(pod: KubeObj): boolean {
  return ((pod.metadata['finalizers'] as string[] | undefined) ?? []).includes(JOB_TRACKING_FINALIZER);
}

/** A finished pod's outcome (a pod deleted before it finished is counted as failed when it goes). */
function outcomeOf(pod: KubeObj): 'succeeded' | 'failed' | undefined {
  const phase = phaseOf(pod);
  if (phase === 'Succeeded') return 'succeeded';
  if (phase === 'Failed') return 'failed';
  return undefined;
}

function finishedCondition(status: JobStatus): Condition | undefined {
  return status.conditions?.find((c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True');
}

/** `pods`: those of the Job's namespace. */
export function planJob(job: KubeObj, pods: readonly KubeObj[], now: number): JobPlan {
  const spec = (job['spec'] ?? {}) as JobSpec;
  const previous = (job['status'] ?? {}) as JobStatus;
  const owned = pods.filter((p) => controllerOf(p)?.uid === uidOf(job));
  const status = countFinished(previous, owned);
  const uncounted = status.uncountedTerminatedPods!;
  const release = owned.filter(
    (p) => hasTracking(p) && [...uncounted.succeeded!, ...uncounted.failed!].includes(uidOf(p)),
  );
  const running = owned.filter((p) => !isDeleting(p) && !outcomeOf(p));
  const terminating = owned.filter((p) => isDeleting(p) && !outcomeOf(p)).length;
  const succeeded = (status.succeeded ?? 0) + uncounted.succeeded!.length;
  const failed = (status.failed ?? 0) + uncounted.failed!.length;
  const time = isoSeconds(now);
  if (!status.startTime && !spec.suspend) status.startTime = time;
  const ended = finishedCondition(status) ? undefined : endReason(spec, status, succeeded, failed, running.length, now);
  let create = 0;
  let remove: KubeObj[] = [];
  if (finishedCondition(status)) remove = running;
  else if (ended) {
    remove = running;
    addCondition(status, ended.target, ended.reason, ended.message, time);
    if (running.length === 0 && terminating === 0 && release.length === 0) {
      addCondition(status, ended.final, ended.reason, ended.message, time);
      if (ended.final === 'Complete') status.completionTime ??= time;
    }
  } else {
    const parallelism = spec.suspend ? 0 : (spec.parallelism ?? 1);
    const wanted =
      spec.completions === null || spec.completions === undefined
        ? succeeded > 0
          ? 0
          : parallelism
        : Math.min(parallelism, spec.completions - succeeded);
    create = Math.max(0, wanted - running.length);
    remove = running.length > wanted ? running.slice(wanted) : [];
  }
  status.active = running.length - remove.length;
  status.ready = running.filter(isPodReady).length;
  status.terminating = terminating + remove.length;
  return { create, remove, release, status };
}

/**
 * The status with finished pods still holding the finalizer recorded as uncounted, and the
 * uncounted ones whose finalizer is gone (or whose pod is) moved into the counts.
 */
function countFinished(previous: JobStatus, owned: readonly KubeObj[]): JobStatus {
  const byUid = new Map(owned.map((p) => [uidOf(p), p]));
  const status: JobStatus = { ...previous, succeeded: previous.succeeded ?? 0, failed: previous.failed ?? 0 };
  const next = { succeeded: [] as string[], failed: [] as string[] };
  for (const key of ['succeeded', 'failed'] as const) {
    for (const uid of previous.uncountedTerminatedPods?.[key] ?? []) {
      const pod = byUid.get(uid);
      if (pod && hasTracking(pod)) next[key].push(uid);
      else status[key] = (status[key] ?? 0) + 1;
    }
  }
  const recorded = new Set([...next.succeeded, ...next.failed]);
  for (const pod of owned) {
    const outcome = outcomeOf(pod) ?? (isDeleting(pod) ? 'failed' : undefined);
    if (outcome && hasTracking(pod) && !recorded.has(uidOf(pod))) next[outcome].push(uidOf(pod));
  }
  status.uncountedTerminatedPods = next;
  return status;
}

type Ending = { target: string; final: string; reason: string; message: string };

function endReason(
  spec: JobSpec,
  status: JobStatus,
  succeeded: number,
  failed: number,
  running: number,
  now: number,
): Ending | undefined {
  if (failed > (spec.backoffLimit ?? 6))
    return {
      target: 'FailureTarget',
      final: 'Failed',
      reason: 'BackoffLimitExceeded',
      message: 'Job has reached the specified backoff limit',
    };
  const started = Date.parse(status.startTime ?? '');
  if (spec.activeDeadlineSeconds !== undefined && started && now - started >= spec.activeDeadlineSeconds * 1000)
    return {
      target: 'FailureTarget',
      final: 'Failed',
      reason: 'DeadlineExceeded',
      message: 'Job was active longer than specified deadline',
    };
  const completions = spec.completions;
  const done =
    completions === null || completions === undefined ? succeeded > 0 && running === 0 : succeeded >= completions;
  if (done)
    return {
      target: 'SuccessCriteriaMet',
      final: 'Complete',
      reason: 'CompletionsReached',
      message: 'Reached expected number of succeeded pods',
    };
  return undefined;
}

function addCondition(status: JobStatus, type: string, reason: string, message: string, time: string): void {
  const conditions = status.conditions ?? [];
  if (conditions.some((c) => c.type === type)) return;
  status.conditions = [
    ...conditions,
    { type, status: 'True', reason, message, lastProbeTime: time, lastTransitionTime: time },
  ];
}
