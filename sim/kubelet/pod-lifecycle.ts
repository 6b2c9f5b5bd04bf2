/**
 * The simulated kubelet's pod workers: admit a pod bound to the node through the device manager
 * (Allocate at admission, PreStartContainer as each container starts), run its containers as host
 * processes with the restart policy's backoff, report status through the status manager, and on
 * deletion stop the processes, free the devices and remove the pod with the kubelet's final DELETE.
 *
 * As in the kubelet: admission is one pod at a time, in arrival order (its sync loop admits, and
 * the device manager's Allocate is part of admission); each admitted pod then has its own worker,
 * which handles that pod's events in order while other pods start and stop beside it; a worker sets
 * the pod's status and goes on, and one writer per node sends it (`StatusManager`).
 */
import type { ContainerAllocateResponse } from '../../node-agent/kubelet/protocol.js';
import { KubeApiError, type KubeClient, type KubeObj, podPath } from '../kube-client.js';
import {
  ContainerRuntime,
  type ContainerSpec,
  type RunningContainer,
  type RuntimeConfig,
  rfc3339Now,
  stopContainer,
} from './container-runtime.js';
import type { DeviceManager, KubeletContainer } from './device-manager.js';
import type { DraManager } from './dra-manager.js';
import { StatusManager } from './status-manager.js';

type Resources = { limits?: Record<string, string | number>; requests?: Record<string, string | number> };

export type PodSpecLike = {
  nodeName?: string;
  restartPolicy?: string;
  containers?: (ContainerSpec & { resources?: Resources })[];
  initContainers?: (ContainerSpec & { resources?: Resources })[];
};

/** A container's last run that ended, as the kubelet reports it in `state.terminated`. */
type Terminated = { exitCode: number; reason: string; startedAt: string; finishedAt: string; containerID: string };

type ContainerState = {
  running?: RunningContainer;
  restarts: number;
  terminated?: Terminated;
  /** Why it has not started yet, when something refused it (else it is `ContainerCreating`). */
  waiting?: { reason: string; message: string };
};

/** The kubelet's pod worker requeues a pod whose sync failed after this (`backOffPeriod`). */
export const POD_WORKER_BACKOFF_MS = 10_000;

function terminatedOf(c: RunningContainer, exitCode: number): Terminated {
  const reason = exitCode === 0 ? 'Completed' : 'Error';
  return { exitCode, reason, startedAt: c.startedAt, finishedAt: rfc3339Now(), containerID: `containerd://${c.id}` };
}

type PodRecord = {
  uid: string;
  namespace: string;
  name: string;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed';
  containers: Map<string, ContainerState>;
  responses: Map<string, ContainerAllocateResponse[]>;
  stopping: boolean;
  startTime: string;
  /** Ends the worker's wait before a retry at once (the pod is stopping, or the kubelet closing). */
  wake?: () => void;
};

export type PodWorkerContext = {
  client: KubeClient;
  nodeName: string;
  devices: DeviceManager;
  /** Prepares the pods' ResourceClaims through DRA drivers (absent: pods with claims start without them). */
  dra?: DraManager;
  runtime: RuntimeConfig;
  /** Cap on the termination grace period, so deletions finish in a test's time. */
  maxGraceMs: number;
  /** Wait before a refused PreStartContainer is tried again. */
  preStartRetryMs: number;
  log: (msg: string) => void;
};

/** What each container asks of the resources a device plugin has registered (limits win over requests). */
export function containerRequests(spec: PodSpecLike, registered: Set<string>): KubeletContainer[] {
  const read = (c: ContainerSpec & { resources?: Resources }, isInit: boolean): KubeletContainer => {
    const all = { ...(c.resources?.requests ?? {}), ...(c.resources?.limits ?? {}) };
    const requests: Record<string, number> = {};
    for (const [k, v] of Object.entries(all)) if (registered.has(k)) requests[k] = Number(v);
    return { name: c.name, isInit, requests };
  };
  return [
    ...(spec.initContainers ?? []).map((c) => read(c, true)),
    ...(spec.containers ?? []).map((c) => read(c, false)),
  ];
}

/** The pod's status as the kubelet's status manager writes it. */
function podStatus(rec: PodRecord, extra: Record<string, unknown>): Record<string, unknown> {
  const containerStatuses = [...rec.containers.entries()].map(([name, s]) => {
    const state = s.terminated
      ? { terminated: s.terminated }
      : s.running
        ? { running: { startedAt: s.running.startedAt } }
        : { waiting: s.waiting ?? { reason: 'ContainerCreating' } };
    const ready = !!s.running && !s.terminated;
    // A kubelet reports the runtime's id of the container it last ran.
    const id = s.terminated?.containerID ?? (s.running ? `containerd://${s.running.id}` : undefined);
    const started = !!s.running;
    return {
      name,
      ...(id ? { containerID: id } : {}),
      ready,
      restartCount: s.restarts,
      state,
      image: 'sim',
      imageID: '',
      started,
    };
  });
  const ready = rec.phase === 'Running' && containerStatuses.every((c) => c.ready) ? 'True' : 'False';
  const now = new Date().toISOString();
  return {
    phase: rec.phase,
    hostIP: '127.0.0.1',
    podIP: '127.0.0.1',
    startTime: rec.startTime,
    conditions: [
      { type: 'PodScheduled', status: 'True', lastTransitionTime: rec.startTime },
      { type: 'Initialized', status: 'True', lastTransitionTime: rec.startTime },
      { type: 'ContainersReady', status: ready, lastTransitionTime: now },
      { type: 'Ready', status: ready, lastTransitionTime: now },
    ],
    containerStatuses,
    ...extra,
  };
}

function newRecord(pod: KubeObj, spec: PodSpecLike): PodRecord {
  return {
    uid: pod.metadata.uid!,
    namespace: pod.metadata.namespace!,
    name: pod.metadata.name,
    phase: 'Pending',
    containers: new Map((spec.containers ?? []).map((c) => [c.name, { restarts: 0 }])),
    responses: new Map(),
    stopping: false,
    startTime: rfc3339Now(),
  };
}

/** The pods of one node and the workers that start and stop them. */
export class PodWorkers {
  private readonly pods = new Map<string, PodRecord>();
  /** Admissions run one at a time, in the order the pods arrived. */
  private admissions: Promise<unknown> = Promise.resolve();
  /** Pod uid → the tail of that pod's worker: its events are handled in order. */
  private readonly workers = new Map<string, Promise<void>>();
  private readonly status: StatusManager;
  private readonly runtime: ContainerRuntime;
  private closed = false;

  constructor(private readonly ctx: PodWorkerContext) {
    this.status = new StatusManager(ctx.client);
    this.runtime = new ContainerRuntime(ctx.runtime);
  }

  /** A pod event from the watch (or the list after a resync): start, stop or delete it. */
  onPod(pod: KubeObj, deleted: boolean): void {
    const uid = pod.metadata.uid!;
    if (deleted || pod.metadata.deletionTimestamp) this.interrupt(this.pods.get(uid));
    if (deleted) {
      this.work(uid, () => this.stopPod(uid));
      return;
    }
    if (pod.metadata.deletionTimestamp) {
      const graceSeconds = Number(pod.metadata['deletionGracePeriodSeconds'] ?? 0);
      const target = { namespace: pod.metadata.namespace!, name: pod.metadata.name, graceSeconds };
      this.work(uid, () => this.stopPod(uid, target));
      return;
    }
    const phase = (pod.status as { phase?: string } | undefined)?.phase;
    if (this.pods.has(uid) || phase === 'Succeeded' || phase === 'Failed') return;
    const spec = (pod.spec ?? {}) as PodSpecLike;
    const rec = newRecord(pod, spec);
    this.pods.set(rec.uid, rec); // claimed, so a second event does not start it twice
    const admitted = this.admitInTurn(rec, spec);
    this.work(uid, () => this.startPod(rec, pod, spec, admitted));
  }

  /** A full list: pods no longer there are stopped, the rest handled as events. */
  onSync(items: KubeObj[]): void {
    const live = new Set(items.map((p) => p.metadata.uid));
    for (const uid of this.pods.keys()) if (!live.has(uid)) this.work(uid, () => this.stopPod(uid));
    for (const p of items) this.onPod(p, false);
  }

  /** Pod uid → host pid of each running container. */
  processes(): Map<string, Map<string, number>> {
    const out = new Map<string, Map<string, number>>();
    for (const [uid, rec] of this.pods) {
      const m = new Map<string, number>();
      for (const [name, s] of rec.containers) if (s.running?.pid && !s.terminated) m.set(name, s.running.pid);
      out.set(uid, m);
    }
    return out;
  }

  /** Waits for the queued work, then stops every container still running. */
  async close(): Promise<void> {
    this.closed = true;
    for (const rec of this.pods.values()) rec.wake?.();
    await this.admissions;
    while (this.workers.size > 0) await Promise.all(this.workers.values());
    for (const rec of this.pods.values())
      for (const s of rec.containers.values()) if (s.running) await stopContainer(s.running, 200);
    await this.runtime.close();
    await this.status.idle();
  }

  /** Queues `fn` on the pod's own worker. */
  private work(uid: string, fn: () => Promise<void>): void {
    const next = (this.workers.get(uid) ?? Promise.resolve())
      .then(fn)
      .catch((e: Error) => this.ctx.log(`${this.ctx.nodeName}: ${e.message}`));
    this.workers.set(uid, next);
    void next.then(() => {
      if (this.workers.get(uid) === next) this.workers.delete(uid);
    });
  }

  /** The pod's admission, after every pod that arrived before it. */
  private admitInTurn(rec: PodRecord, spec: PodSpecLike): Promise<boolean> {
    const turn = this.admissions.then(() => (rec.stopping || this.closed ? false : this.admit(rec, spec)));
    this.admissions = turn.catch(() => undefined);
    return turn;
  }

  /** The status manager writes the pod's status soon, after earlier reports of it; nothing waits for it. */
  private reportStatus(rec: PodRecord, extra: Record<string, unknown> = {}): void {
    this.status.set(rec, { status: podStatus(rec, extra) });
  }

  private fail(rec: PodRecord, reason: string, message: string): void {
    rec.phase = 'Failed';
    this.reportStatus(rec, { reason, message });
    this.release(rec.uid);
    this.ctx.log(`${this.ctx.nodeName}: pod ${rec.namespace}/${rec.name} ${reason}: ${message}`);
  }

  /** The pod's devices go back, and its claims are unprepared when no other pod here uses them. */
  private release(uid: string): Promise<void> {
    this.ctx.devices.releasePod(uid);
    return this.ctx.dra?.unpreparePod(uid) ?? Promise.resolve();
  }

  private finishIfDone(rec: PodRecord, spec: PodSpecLike): void {
    const states = [...rec.containers.values()];
    if (!states.every((s) => s.terminated)) return;
    rec.phase = states.every((s) => s.terminated!.exitCode === 0) ? 'Succeeded' : 'Failed';
    this.release(rec.uid);
    this.reportStatus(rec);
    const policy = spec.restartPolicy ?? 'Always';
    this.ctx.log(`${this.ctx.nodeName}: pod ${rec.namespace}/${rec.name} ${rec.phase} (restartPolicy ${policy})`);
  }

  /** Starts the container; one that comes up after its pod began stopping is stopped at once. */
  private async run(rec: PodRecord, c: ContainerSpec, spec: PodSpecLike): Promise<void> {
    const state = rec.containers.get(c.name)!;
    const running = await this.runtime.start(rec.uid, c, rec.responses.get(c.name) ?? []);
    if (rec.stopping || this.closed) return stopContainer(running, 0);
    state.running = running;
    delete state.terminated;
    void running.exited.then(({ exitCode }) => this.exited(rec, c, spec, running, exitCode));
  }

  /** A container exited: restart it after the kubelet's backoff when its policy says so, else finish. */
  private exited(rec: PodRecord, c: ContainerSpec, spec: PodSpecLike, ran: RunningContainer, exitCode: number): void {
    if (rec.stopping || this.closed) return;
    const state = rec.containers.get(c.name)!;
    const policy = spec.restartPolicy ?? 'Always';
    state.terminated = terminatedOf(ran, exitCode);
    if (policy === 'Always' || (policy === 'OnFailure' && exitCode !== 0)) {
      state.restarts++;
      this.reportStatus(rec);
      const restart = () => {
        if (rec.stopping || this.closed) return;
        this.run(rec, c, spec).then(
          () => this.reportStatus(rec),
          (e: Error) => this.ctx.log(`${this.ctx.nodeName}: restarting ${rec.name}/${c.name}: ${e.message}`),
        );
      };
      setTimeout(restart, Math.min(10_000, 500 * 2 ** Math.min(state.restarts, 5))).unref();
      return;
    }
    delete state.running;
    this.finishIfDone(rec, spec);
  }

  /** Admission: the device manager allocates every container; a refusal fails the pod. */
  private async admit(rec: PodRecord, spec: PodSpecLike): Promise<boolean> {
    const registered = new Set(this.ctx.devices.resources());
    try {
      const admitted = await this.ctx.devices.allocatePod({ ...rec, containers: containerRequests(spec, registered) });
      rec.responses = new Map(admitted.map((a) => [a.container, Object.values(a.responses)]));
      return true;
    } catch (e) {
      this.fail(rec, 'UnexpectedAdmissionError', `Pod was rejected: ${(e as Error).message}`);
      return false;
    }
  }

  /** A pod being deleted stops at once, also in the middle of a wait before a retry. */
  private interrupt(rec: PodRecord | undefined): void {
    if (!rec) return;
    rec.stopping = true;
    rec.wake?.();
  }

  /**
   * PreStartContainer as the container is about to start. As in the kubelet, a refusal is not the
   * pod's end: the container waits (`CreateContainerConfigError`, with the plugin's message) and
   * the pod's worker tries again after its backoff, until it succeeds or the pod goes.
   */
  private async preStart(rec: PodRecord, container: string): Promise<boolean> {
    const state = rec.containers.get(container);
    for (;;) {
      if (rec.stopping || this.closed) return false;
      try {
        await this.ctx.devices.preStart(rec.uid, container);
        if (state?.waiting) delete state.waiting;
        return true;
      } catch (e) {
        const message = (e as Error).message;
        if (state) state.waiting = { reason: 'CreateContainerConfigError', message };
        this.reportStatus(rec);
        this.ctx.log(`${this.ctx.nodeName}: pod ${rec.namespace}/${rec.name} ${container}: ${message}; retrying`);
        await this.backoff(rec);
      }
    }
  }

  /** The pod worker's wait before a retry; ends at once when the pod stops or the kubelet closes. */
  private async backoff(rec: PodRecord): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, this.ctx.preStartRetryMs);
      rec.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    delete rec.wake;
  }

  /**
   * DRA: the pod's claims are prepared before any of its containers starts. As in the kubelet, a
   * failure (claim not allocated or reserved yet, driver not registered, Prepare refused) leaves the
   * pod ContainerCreating with the reason, and its worker tries again after the backoff.
   */
  private async prepareClaims(rec: PodRecord, pod: KubeObj): Promise<boolean> {
    const dra = this.ctx.dra;
    if (!dra || !(pod.spec as { resourceClaims?: unknown[] } | undefined)?.resourceClaims?.length) return true;
    for (;;) {
      if (rec.stopping || this.closed) return false;
      try {
        for (const [container, names] of await dra.preparePod(pod)) {
          const cdi = {
            envs: {},
            mounts: [],
            devices: [],
            annotations: {},
            cdi_devices: names.map((name) => ({ name })),
          };
          rec.responses.set(container, [...(rec.responses.get(container) ?? []), cdi]);
        }
        for (const s of rec.containers.values()) delete s.waiting;
        return true;
      } catch (e) {
        const message = (e as Error).message;
        for (const s of rec.containers.values()) s.waiting = { reason: 'ContainerCreating', message };
        this.reportStatus(rec);
        this.ctx.log(`${this.ctx.nodeName}: pod ${rec.namespace}/${rec.name}: ${message}; retrying`);
        await this.backoff(rec);
      }
    }
  }

  /** Init containers run to completion first, one after the other. */
  private async runInitContainers(rec: PodRecord, spec: PodSpecLike): Promise<boolean> {
    for (const c of spec.initContainers ?? []) {
      if (!(await this.preStart(rec, c.name))) return false;
      const done = await (await this.runtime.start(rec.uid, c, rec.responses.get(c.name) ?? [])).exited;
      if (done.exitCode !== 0) {
        this.fail(rec, 'InitContainerFailed', `init container ${c.name} exited ${done.exitCode}`);
        return false;
      }
    }
    return true;
  }

  /** The pod's worker after admission: init containers, PreStart of each container, then all start. */
  private async startPod(rec: PodRecord, pod: KubeObj, spec: PodSpecLike, admitted: Promise<boolean>): Promise<void> {
    if (!(await admitted) || rec.stopping) return;
    if (!(await this.prepareClaims(rec, pod))) return;
    if (!(await this.runInitContainers(rec, spec))) return;
    for (const c of spec.containers ?? []) if (!(await this.preStart(rec, c.name))) return;
    rec.phase = 'Running';
    for (const c of spec.containers ?? []) await this.run(rec, c, spec);
    this.reportStatus(rec);
  }

  private async stopPod(uid: string, andDelete?: { namespace: string; name: string; graceSeconds: number }) {
    const rec = this.pods.get(uid);
    if (rec) {
      rec.stopping = true;
      const grace = Math.min(this.ctx.maxGraceMs, (andDelete?.graceSeconds ?? 0) * 1000);
      await Promise.all([...rec.containers.values()].map((s) => s.running && stopContainer(s.running, grace)));
      await this.release(uid);
      this.pods.delete(uid);
    }
    if (!andDelete) return;
    // The kubelet's status manager: DeleteOptions in the body (kube-apiserver ignores query
    // options beside a body), grace 0, and the pod's UID so a recreated namesake is left alone.
    // A failed call is tried again, as the status manager's sync does, until the pod is gone (404)
    // or is a recreated namesake (409: the UID precondition failed).
    const options = { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0, preconditions: { uid } };
    for (let waitMs = 500; !this.closed; waitMs = Math.min(waitMs * 2, 5_000)) {
      try {
        await this.ctx.client.request('DELETE', podPath(andDelete.namespace, andDelete.name), options);
        return;
      } catch (e) {
        if (e instanceof KubeApiError && (e.code === 404 || e.code === 409)) return;
        this.ctx.log(
          `${this.ctx.nodeName}: deleting pod ${andDelete.namespace}/${andDelete.name}: ${(e as Error).message}; retrying`,
        );
        await new Promise((resolve) => setTimeout(resolve, waitMs).unref());
      }
    }
  }
}
