/**
 * The node agent assembled from its parts. Everything that touches the outside world comes in
 * through `AgentDeps`, so main.ts wires real adapters and tests wire fakes around the same code.
 *
 * `startNodeAgent` composes small starters, each owning one part (allocator, device plugins,
 * inventory, housekeeping, card-health watch, periodic loops, compute samplers), in start order;
 * `stop` undoes them in the order written there.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { type ResourceNames, resourceNames } from '../contract/index.js';
import type { AgentLog } from './agent-log.js';
import { Allocator } from './allocation/allocator.js';
import type { PodView } from './allocation/pod-view.js';
import type {
  CardDirectory,
  ContainerRecord,
  EventRecorder,
  JwksSource,
  PodAnnotator,
  PodResourcesLister,
  PodSource,
} from './allocation/ports.js';
import type { CardSampler, ContainerPlacement } from './card-sampling/card-sampler.js';
import { type ComputeSensor, type ComputeSensorReason, createComputeSampler } from './card-sampling/compute-sensor.js';
import type { CounterGuardVerdict } from './card-sampling/counter-guard.js';
import { createHostPidPublisher, type HostPidPublisher, procSource } from './card-sampling/host-pids.js';
import { createMemoryDriftMonitor, type MemoryDriftMonitor } from './card-sampling/memory-drift.js';
import {
  containerKey,
  driftTargetsOn,
  placementOf,
  procCgroupReader,
  recordsOfShownPods,
  regionCharge,
} from './card-sampling/placement.js';
import type { NodeAgentConfig } from './config.js';
import { type MemoryAdvertisePlan, planMemoryAdvertise, unitsOfCard } from './device-plugin/device-list.js';
import { PluginRunner, type PluginSpec } from './device-plugin/plugin-runner.js';
import type { PluginHandler } from './device-plugin/plugin-server.js';
import { corePlugin, memoryPlugin, migPlugin } from './device-plugin/plugins.js';
import { type AgentCheck, agentProblems, CardHealth, watchCardHealth } from './health.js';
import { allocationDirsToRemove } from './housekeeping.js';
import { buildInventory, InventoryPublisher, migForInventory, type NodePatcher } from './inventory.js';
import { preloadFileContent, type ResponseSettings } from './limits/allocate-response.js';
import { removeCdiSpec } from './limits/cdi-spec.js';
import { listAllocationDirs, removeAllocationDir } from './limits/container-files.js';
import { AgentMetrics } from './metrics.js';
import { readCapMinors } from './mig/cap-minors.js';
import { DynamicMig, type DynamicMigDeps } from './mig/dynamic-mig.js';
import { DynamicMigGrants } from './mig/dynamic-mig-grants.js';
import { MigDevices } from './mig/mig-devices.js';
import { ShareTargets } from './mig/share-targets.js';
import { isSharedInstance } from './mig/shared-instances.js';
import type { GpuCard, GpuSource } from './nvml/gpu-source.js';
import { collectUsage, reportedUsage, type UsageSink } from './usage.js';

/** Node-level extended resources, for vcuda-memory beyond what a device list can carry. */
export interface NodeCapacityPatcher {
  patchNodeCapacity(nodeName: string, capacity: Record<string, string>): Promise<void>;
}

export type AgentDeps = {
  config: NodeAgentConfig;
  gpu: GpuSource;
  pods: PodSource;
  annotator: PodAnnotator;
  events: EventRecorder;
  node: NodePatcher & NodeCapacityPatcher;
  podResources: PodResourcesLister;
  jwks: JwksSource;
  usageSink?: UsageSink;
  nowMs?: () => number;
  log: AgentLog;
  /** Delay between retries of a failed allocated-at annotation (tests shorten it). */
  retryDelayMs?: number;
  /** Periodic loops (inventory, housekeeping, usage); tests drive them by hand. Default true. */
  runLoops?: boolean;
  /** Called at every step of making or destroying a dynamic MIG instance; tests crash the agent there. */
  dynamicMigFaults?: DynamicMigDeps['faults'];
};

export type NodeAgent = {
  names: ResourceNames;
  health: CardHealth;
  allocator: Allocator;
  metrics: AgentMetrics;
  runner: PluginRunner;
  memoryPlan: MemoryAdvertisePlan;
  /** One compute sampler per card, by card index. */
  samplers: CardSampler[];
  /** One memory-drift monitor per card, by card index; each runs on its card's sampler. */
  driftMonitors: MemoryDriftMonitor[];
  /** Publishes each container's host pids into its region (NVML process lists in pid namespaces). */
  hostPids: HostPidPublisher;
  publishInventory: () => Promise<boolean>;
  housekeep: () => Promise<string[]>;
  reportUsage: () => Promise<void>;
  refreshMetrics: () => void;
  /** What keeps the agent from doing its job (plugins not registered, NVML failing, stopping); empty when healthy. */
  healthProblems: () => string[];
  stop: () => Promise<void>;
};

export async function startNodeAgent(deps: AgentDeps): Promise<NodeAgent> {
  const { config, log } = deps;
  const nowMs = deps.nowMs ?? Date.now;
  const names = resourceNames(config.resourceDomain);
  const gpuCards = deps.gpu.listCards();
  const health = new CardHealth(gpuCards, config.ignoredXids, dynamicMigCardsOf(deps, gpuCards));
  const metrics = new AgentMetrics();
  const mig = migDevicesOf(deps, health);
  // Cards and shared MIG instances: what vcuda-core and vcuda-memory serve.
  const shareTargets = new ShareTargets(health, mig);
  const memoryPlan = planMemoryAdvertise(shareTargets.views(), {
    memoryUnitMiB: config.memoryUnitMiB,
    mode: config.memoryAdvertise,
    budgetBytes: config.listAndWatchBudgetBytes,
  });
  log.info(`vcuda-memory via ${memoryPlan.via}: ${memoryPlan.reason}`);
  prepareHostFiles(config);
  const dynamicMig = dynamicMigOf(deps, health, mig);
  const allocator = await startAllocator(deps, names, shareTargets, { mig, dynamicMig }, nowMs);
  if (dynamicMig) await reconcileDynamicMig(deps, dynamicMig, 'at start');
  const runner = await startPlugins(deps, { names, shareTargets, mig, allocator, metrics, memoryPlan });
  const publishInventory = inventoryPublisher(deps, { names, health, shareTargets, mig, memoryPlan }, nowMs);
  const housekeep = housekeeper(deps, allocator, dynamicMig);
  const reportUsage = usageReporter(deps, () => allocator.records(), nowMs);
  let stopped = false;
  const healthWatch = startHealthWatch(deps, health, publishInventory);
  const checks = agentChecks(() => stopped, runner, healthWatch);
  const refreshMetrics = () => {
    const records = allocator.records();
    metrics.update(health.list(), records, collectUsage(records));
    metrics.updateChecks(checks.map((c) => ({ name: c.name, ok: c.problem() === undefined })));
  };
  const stopLoops = await startLoops(deps, { publishInventory, housekeep, reportUsage });
  const compute = startCompute(
    deps,
    {
      health,
      cards: shareTargets,
      records: () => recordsOfShownPods(allocator.records(), (uid) => deps.pods.isShown(uid)),
      pods: () => deps.pods.pods(),
      metrics,
    },
    nowMs,
  );
  return {
    names,
    health,
    allocator,
    metrics,
    runner,
    memoryPlan,
    samplers: compute.samplers,
    driftMonitors: compute.driftMonitors,
    hostPids: compute.hostPids,
    publishInventory,
    housekeep,
    reportUsage,
    refreshMetrics,
    healthProblems: () => agentProblems(checks),
    stop: async () => {
      stopped = true;
      stopLoops();
      compute.stop();
      healthWatch.abort();
      await runner.stop();
      // The NVML wait runs on a worker thread: free the event set only after it returned.
      await healthWatch.done;
      deps.gpu.close();
    },
  };
}

/** What the agent's health endpoint reports on: itself, its registration with the kubelet, NVML's events. */
function agentChecks(
  isStopped: () => boolean,
  runner: Pick<PluginRunner, 'isRegistered'>,
  healthWatch: Pick<HealthWatch, 'nvmlError'>,
): AgentCheck[] {
  return [
    { name: 'agent', problem: () => (isStopped() ? 'stopping' : undefined) },
    {
      name: 'device-plugins',
      problem: () => (runner.isRegistered() ? undefined : 'not registered with the kubelet'),
    },
    {
      name: 'nvml',
      problem: () => {
        const err = healthWatch.nvmlError();
        return err && `waiting for GPU events failed: ${err}`;
      },
    },
  ];
}

/** The preload file every GPU container mounts, and the folder of per-container limit files. */
export function prepareHostFiles(config: NodeAgentConfig): void {
  mkdirSync(dirname(config.paths.preloadHostPath), { recursive: true });
  writeFileSync(config.paths.preloadHostPath, preloadFileContent(config.paths.libvcudaContainerPath), { mode: 0o644 });
  mkdirSync(config.paths.containersDir, { recursive: true });
}

/** What every GPU container receives, from the config (Allocate's answer, a DRA claim's CDI spec). */
export function responseSettingsOf(config: NodeAgentConfig): ResponseSettings {
  return {
    devDir: config.paths.devDir,
    libvcudaHostPath: config.paths.libvcudaHostPath,
    libvcudaContainerPath: config.paths.libvcudaContainerPath,
    preloadHostPath: config.paths.preloadHostPath,
    driverLibraries: config.paths.driverLibraries,
    setVisibleDevicesEnv: config.setVisibleDevicesEnv,
  };
}

/**
 * The whole MIG instances of the cards in MIG mode, read once now (their profiles decide which
 * plugins serve), then again with every inventory publication.
 */
export function migDevicesOf(deps: Pick<AgentDeps, 'config' | 'gpu' | 'log'>, health: CardHealth): MigDevices {
  const { config, log } = deps;
  const caps = readCapMinors(config.paths.procRoot);
  const rules = config.mig.shared;
  const mig = new MigDevices(
    health,
    (index) => deps.gpu.migLayout?.(index) ?? null,
    caps.minorOf,
    (instance) => isSharedInstance(rules, instance),
  );
  mig.readAll((card, err) =>
    log.warn({ err, card }, `reading card ${card}'s MIG instances failed; it serves none until a read succeeds`),
  );
  const profiles = mig.profiles();
  if (profiles.length > 0) {
    log.info(`MIG: serving whole instances of ${profiles.join(', ')}; access node minors from the ${caps.source}`);
  }
  const shared = mig.shareViews();
  if (shared.length > 0) log.info(`MIG: serving ${shared.length} shared instance(s) as vcuda-core/vcuda-memory shares`);
  return mig;
}

/**
 * The cards kept for dynamic MIG (config `mig.dynamicCards`): those named that have MIG. A card
 * named without MIG (or not on this node) is logged and stays an ordinary card: one DaemonSet
 * config serves nodes of several kinds.
 */
export function dynamicMigCardsOf(deps: Pick<AgentDeps, 'config' | 'log'>, cards: readonly GpuCard[]): Set<number> {
  const wanted = deps.config.mig.dynamicCards;
  const out = new Set<number>();
  for (const index of wanted === 'all' ? cards.map((c) => c.index) : wanted) {
    const card = cards.find((c) => c.index === index);
    if (card?.migMode !== undefined) out.add(index);
    else if (wanted !== 'all') {
      deps.log.warn(
        `mig.dynamicCards: card ${index} ${card ? 'has no MIG' : 'is not on this node'}; not kept for dynamic MIG`,
      );
    }
  }
  if (out.size > 0) deps.log.info(`dynamic MIG on card(s) ${[...out].join(', ')}`);
  return out;
}

/** Dynamic MIG for pods' grants on the kept cards (newDynamicMig); undefined when there is none. */
function dynamicMigOf(deps: AgentDeps, health: CardHealth, devices: MigDevices): DynamicMigGrants | undefined {
  const mig = newDynamicMig(deps, health);
  if (!mig) return undefined;
  return new DynamicMigGrants({
    mig,
    cards: health,
    reread: (card) => devices.read(card),
    nodeName: deps.config.nodeName,
  });
}

/**
 * Dynamic MIG's create and destroy through NVML on the kept cards (device-plugin and DRA mode
 * alike); undefined when no card is kept, or the library cannot create instances (the kept cards
 * then serve nothing, said once).
 */
export function newDynamicMig(
  deps: Pick<AgentDeps, 'config' | 'gpu' | 'log' | 'dynamicMigFaults'>,
  health: CardHealth,
): DynamicMig | undefined {
  const kept = health.list().filter((c) => c.migDynamic);
  if (kept.length === 0) return undefined;
  const control = deps.gpu.migControl?.();
  if (!control) {
    deps.log.warn('dynamic MIG: the NVML library cannot create MIG instances; the kept cards serve nothing');
    return undefined;
  }
  const layout = (card: number) => deps.gpu.migLayout?.(card) ?? null;
  return new DynamicMig({
    control,
    cards: {
      migMode: (card) => {
        const mode = layout(card)?.mode;
        return mode === undefined ? undefined : mode === 'enabled';
      },
      // A kept card is never granted whole or as shares: it holds work only if something runs on it.
      isCardIdle: (card) => deps.gpu.runningProcesses(card)?.length === 0,
      deviceUuid: (card, gi, ci) =>
        layout(card)?.instances.find((i) => i.gpuInstanceId === gi && i.computeInstanceId === ci)?.uuid,
    },
    checkpointPath: deps.config.mig.checkpointPath,
    ...(deps.dynamicMigFaults ? { faults: deps.dynamicMigFaults } : {}),
  });
}

/** The UIDs of this node's pods that have not finished, from a fresh pod list. */
async function livePodUids(deps: AgentDeps): Promise<Set<string>> {
  await deps.pods.refresh();
  return new Set(
    deps.pods
      .pods()
      .filter((p) => !p.isFinished)
      .map((p) => p.uid),
  );
}

/** Gives back the dynamic instances of pods that ended; a failed pod list gives back nothing. */
async function reconcileDynamicMig(deps: AgentDeps, dynamicMig: DynamicMigGrants, when: string): Promise<void> {
  try {
    const live = await livePodUids(deps);
    dynamicMig.reconcile((uid) => live.has(uid));
  } catch (err) {
    deps.log.warn({ err }, `dynamic MIG: reconciling ${when} failed; instances kept until the next housekeeping`);
  }
}

/** The allocator, rebuilt from what the kubelet and the pods' annotations say runs already. */
async function startAllocator(
  deps: AgentDeps,
  names: ResourceNames,
  cards: ShareTargets,
  mig: { mig: MigDevices; dynamicMig: DynamicMigGrants | undefined },
  nowMs: () => number,
): Promise<Allocator> {
  const { config, log } = deps;
  const allocator = new Allocator({
    nodeName: config.nodeName,
    names,
    containersDir: config.paths.containersDir,
    cdiSpecDir: config.paths.cdiSpecDir,
    response: responseSettingsOf(config),
    pods: deps.pods,
    podResources: deps.podResources,
    annotator: deps.annotator,
    events: deps.events,
    jwks: deps.jwks,
    cards,
    mig: mig.mig,
    ...(mig.dynamicMig ? { dynamicMig: mig.dynamicMig } : {}),
    nowMs,
    log,
    ...(deps.retryDelayMs !== undefined ? { retryDelayMs: deps.retryDelayMs } : {}),
  });
  try {
    const learned = await allocator.rebuild();
    if (learned > 0) log.info(`rebuilt ${learned} running container(s) from PodResources and pod annotations`);
  } catch (err) {
    log.warn({ err }, 'rebuild from the kubelet failed; starting empty');
  }
  return allocator;
}

type PluginParts = {
  names: ResourceNames;
  shareTargets: ShareTargets;
  mig: MigDevices;
  allocator: Allocator;
  metrics: AgentMetrics;
  memoryPlan: MemoryAdvertisePlan;
};

/** A plugin whose ties the allocation metrics time: at PreStartContainer, where the tie is decided. */
function timed(handler: PluginHandler, metrics: AgentMetrics): PluginHandler {
  const observe = (start: number, result: string) =>
    metrics.observeAllocate((performance.now() - start) / 1000, result);
  return {
    ...handler,
    // An Allocate no pod here could hold is refused at once: counted with the PreStart refusals.
    allocate: async (ids: string[]) => {
      const start = performance.now();
      try {
        return await handler.allocate(ids);
      } catch (err) {
        observe(start, (err as { code?: string }).code ?? 'error');
        throw err;
      }
    },
    preStart: async (ids: string[]) => {
      const start = performance.now();
      try {
        await handler.preStart(ids);
        observe(start, 'ok');
      } catch (err) {
        observe(start, (err as { code?: string }).code ?? 'error');
        throw err;
      }
    },
  };
}

/**
 * The device plugins, registered with the kubelet: vcuda-core, vcuda-memory only when a device
 * list carries it, and one per MIG profile the node's instances have at start.
 */
async function startPlugins(deps: AgentDeps, parts: PluginParts): Promise<PluginRunner> {
  const { config } = deps;
  const { names, shareTargets, metrics } = parts;
  const plugins: PluginSpec[] = [
    { handler: timed(corePlugin(names, shareTargets, parts.allocator), metrics), endpoint: 'vcuda-core.sock' },
  ];
  if (parts.memoryPlan.via === 'device-plugin') {
    plugins.push({ handler: memoryPlugin(names, shareTargets, config.memoryUnitMiB), endpoint: 'vcuda-memory.sock' });
  }
  for (const profile of parts.mig.profiles()) {
    plugins.push({
      handler: timed(migPlugin(names, profile, parts.mig, parts.allocator), metrics),
      endpoint: `vcuda-mig-${profile.replace('+', '.')}.sock`,
    });
  }
  const runner = new PluginRunner({
    pluginDir: config.kubelet.devicePluginDir,
    plugins,
    registerRetryMs: config.kubelet.registerRetryMs,
    log: deps.log,
  });
  await runner.start();
  return runner;
}

/**
 * Publishes the node's inventory (cards, health, MIG layout, links, heartbeat) when it changed or
 * its heartbeat is due; returns whether it patched. Both modes publish it: the control plane
 * registers the node's cards in the ledger from it, and tells a silent agent by its heartbeat.
 */
export function nodeInventoryPublisher(
  deps: Pick<AgentDeps, 'config' | 'gpu' | 'log'> & { node: NodePatcher },
  health: CardHealth,
  nowMs: () => number,
  /** Device-plugin mode: the instances it serves, kept current by the same reads. */
  migDevices?: MigDevices,
): () => Promise<boolean> {
  const { config } = deps;
  const publisher = new InventoryPublisher(deps.node, config.heartbeatPeriodMs);
  const readMig = (index: number) => (migDevices ? migDevices.read(index) : (deps.gpu.migLayout?.(index) ?? null));
  return async () => {
    const now = nowMs();
    const cards = health.list().map((c) => {
      const mig = migForInventory(
        c,
        () => readMig(c.index),
        (err) => deps.log.warn({ err }, `reading card ${c.index}'s MIG layout failed; published as MIG-only`),
      );
      if (!mig) return c;
      const shared = mig.instances.filter((i) => migDevices?.isSharedInstance(c.index, i)).map((i) => i.uuid);
      return { ...c, mig, ...(shared.length > 0 ? { sharedMigInstances: shared } : {}) };
    });
    const inv = buildInventory({
      nodeName: config.nodeName,
      memoryUnitMiB: config.memoryUnitMiB,
      cards,
      link: (a, b) => deps.gpu.link(a, b),
      now: new Date(now),
    });
    return publisher.publish(inv, now);
  };
}

/** The inventory, and with `node-status` the node's vcuda-memory capacity, when it changed. */
function inventoryPublisher(
  deps: AgentDeps,
  parts: {
    names: ResourceNames;
    health: CardHealth;
    shareTargets: ShareTargets;
    mig: MigDevices;
    memoryPlan: MemoryAdvertisePlan;
  },
  nowMs: () => number,
): () => Promise<boolean> {
  const { config } = deps;
  const { health } = parts;
  const publishNodeInventory = nodeInventoryPublisher(deps, health, nowMs, parts.mig);
  return async () => {
    const patched = await publishNodeInventory();
    if (patched && parts.memoryPlan.via === 'node-status') {
      // Healthy cards (and shared instances) only: a sick card's memory must not be schedulable.
      const units = parts.shareTargets
        .views()
        .filter((c) => c.healthy)
        .reduce((s, c) => s + unitsOfCard(c, config.memoryUnitMiB), 0);
      await deps.node.patchNodeCapacity(config.nodeName, { [parts.names.memory]: String(units) });
    }
    return patched;
  };
}

/** Forgets ended pods and removes the allocation files no container holds any more. */
function housekeeper(
  deps: AgentDeps,
  allocator: Allocator,
  dynamicMig: DynamicMigGrants | undefined,
): () => Promise<string[]> {
  const { config, log } = deps;
  return async () => {
    const live = await livePodUids(deps);
    allocator.forgetPods((uid) => !live.has(uid));
    if (dynamicMig) {
      try {
        dynamicMig.reconcile((uid) => live.has(uid));
      } catch (err) {
        log.warn({ err }, 'housekeeping: giving back dynamic MIG instances failed; retried next time');
      }
    }
    const removed = allocationDirsToRemove(
      listAllocationDirs(config.paths.containersDir),
      allocator.liveKeys(),
      Date.now(), // compared with file times, which the wall clock writes
      config.housekeepingGraceMs,
    );
    for (const key of removed) {
      removeAllocationDir(config.paths.containersDir, key);
      removeCdiSpec(config.paths.cdiSpecDir, key);
    }
    if (removed.length > 0) log.info(`housekeeping: removed ${removed.length} allocation(s) no container holds`);
    return removed;
  };
}

/**
 * Sends the records' usage to the control plane under the ledger's keys, when a sink is wired: the
 * allocator's containers in device-plugin mode, the prepared claims in DRA mode.
 */
export function usageReporter(
  deps: Pick<AgentDeps, 'config' | 'usageSink'>,
  records: () => readonly ContainerRecord[],
  nowMs: () => number,
): () => Promise<void> {
  const { config } = deps;
  return async () => {
    if (!deps.usageSink) return;
    await deps.usageSink.report(
      config.nodeName,
      reportedUsage(records()),
      new Date(nowMs()),
      config.usagePeriodMs / 1000,
    );
  };
}

/** Runs `fn` every `ms` without keeping the process alive; a failure is logged as `<what>: failed`. */
export function runEvery(ms: number, what: string, fn: () => Promise<unknown>, log: AgentLog): NodeJS.Timeout {
  const t = setInterval(() => void fn().catch((err) => log.warn({ err }, `${what}: failed`)), ms);
  t.unref();
  return t;
}

type HealthWatch = {
  /** Why waiting for GPU events last failed; undefined while it works. */
  nvmlError: () => string | undefined;
  abort: () => void;
  /** Settles once the NVML wait has returned after `abort`. */
  done: Promise<void>;
};

/** Watches the cards' health (XID events) and republishes the inventory on each change. */
function startHealthWatch(deps: AgentDeps, health: CardHealth, publishInventory: () => Promise<boolean>): HealthWatch {
  const { log } = deps;
  let nvmlError: string | undefined;
  const abort = new AbortController();
  const done = watchCardHealth(deps.gpu, health, abort.signal, log, 1000, (err) => {
    nvmlError = err?.message;
  });
  health.subscribe(() => void publishInventory().catch((err) => log.warn({ err }, 'inventory: publishing failed')));
  return { nvmlError: () => nvmlError, abort: () => abort.abort(), done };
}

/**
 * The periodic loops (inventory, housekeeping, usage), after a first inventory; tests that pass
 * `runLoops: false` drive them by hand. Returns their closer.
 */
async function startLoops(
  deps: AgentDeps,
  tasks: {
    publishInventory: () => Promise<boolean>;
    housekeep: () => Promise<unknown>;
    reportUsage: () => Promise<void>;
  },
): Promise<() => void> {
  const { config, log } = deps;
  const timers: NodeJS.Timeout[] = [];
  const every = (ms: number, what: string, fn: () => Promise<unknown>) => void timers.push(runEvery(ms, what, fn, log));
  if (deps.runLoops !== false) {
    await tasks.publishInventory().catch((err) => log.warn({ err }, 'inventory: publishing failed'));
    every(config.inventoryCheckMs, 'inventory', tasks.publishInventory);
    every(config.housekeepingPeriodMs, 'housekeeping', tasks.housekeep);
    if (deps.usageSink) every(config.usagePeriodMs, 'usage report', tasks.reportUsage);
  }
  return () => {
    for (const t of timers) clearInterval(t);
  };
}

export type Compute = {
  samplers: CardSampler[];
  driftMonitors: MemoryDriftMonitor[];
  hostPids: HostPidPublisher;
  stop: () => void;
};

/**
 * Per card, a compute sampler that feeds each container's share back into its region, and a
 * memory-drift monitor that runs on the sampler's period; plus the host-pid map publisher.
 */
function sensorWhy(sensor: ComputeSensor, reason: ComputeSensorReason): string {
  if (sensor === 'nvml') return "measuring with NVML's per-process utilization (computeSensor: nvml)";
  return reason === 'nvml-unsupported'
    ? "NVML has no per-process utilization here (MIG): measuring with libvcuda's in-process sensor"
    : "measuring with libvcuda's in-process sensor (NVML's per-process utilization for a card held whole)";
}

/** The counter guard's verdicts on one card (counter-guard.ts) as gauges, and a warning when it trips. */
function counterCheckReporter(
  card: { uuid: string; index: number },
  metrics: AgentMetrics,
  placement: Pick<ContainerPlacement, 'containersOn'>,
  log: AgentDeps['log'],
): (v: CounterGuardVerdict) => void {
  const labels = { card: card.uuid, index: String(card.index) };
  return (v) => {
    metrics.cardUnaccountedBusy.set(labels, v.unaccountedBp / 10_000);
    metrics.cardCountersDistrusted.set(labels, v.distrusted ? 1 : 0);
    if (!v.distrusted) return;
    const who = placement.containersOn(card.index).map((c) => c.key);
    log.warn(
      { card: card.index, deviceBp: v.deviceBp, countersBp: v.countersBp, containers: who },
      `compute sampler card ${card.index}: the in-process counters accounted for ${v.countersBp / 100} % ` +
        `of the ${v.deviceBp / 100} % NVML saw busy, ${v.strikes} windows in a row; ` +
        "measuring this card with NVML's per-process utilization from now on",
    );
  };
}

export function startCompute(
  deps: Pick<AgentDeps, 'config' | 'gpu' | 'log' | 'runLoops'>,
  parts: {
    health: CardHealth;
    /** Where a share's card is looked up (device-plugin mode: cards and shared MIG instances); default the cards. */
    cards?: CardDirectory;
    /** The containers holding shares (device-plugin mode: the allocator's; DRA mode: one per prepared claim). */
    records: () => readonly ContainerRecord[];
    pods: () => readonly PodView[];
    metrics: AgentMetrics;
  },
  nowMs: () => number,
): Compute {
  const { config, log } = deps;
  const { health, records } = parts;
  const cards = parts.cards ?? health;
  // A share of a MIG instance is measured on its parent card's sampler (in-process: MIG has no
  // per-process utilization in NVML).
  const cardIndexOf = (uuid: string) => cards.cardByUuid(uuid)?.index;
  const placement = placementOf(records, parts.pods, cardIndexOf, procCgroupReader(config.paths.procRoot));
  const driftMonitors: MemoryDriftMonitor[] = [];
  const samplers = health.list().map((card) => {
    const drift = createMemoryDriftMonitor({
      cardIndex: card.index,
      source: deps.gpu,
      targets: () => driftTargetsOn(records(), cardIndexOf, card.index),
      containerOfPid: (pid) => placement.containerOfPid(pid),
      readCharged: regionCharge,
      thresholdBytes: config.memoryDriftThresholdMiB * 2 ** 20,
      sink: parts.metrics,
      log,
      nowMs,
      onError: (err) => log.warn({ err, card: card.index }, `memory drift card ${card.index}: reconciliation failed`),
    });
    driftMonitors.push(drift);
    const { sampler, sensor, reason } = createComputeSampler(
      {
        cardIndex: card.index,
        periodMs: Math.max(1, config.computePeriodMs),
        source: deps.gpu,
        placement,
        nowMs,
        alsoEachPeriod: drift.tick,
        onError: (err) => log.warn({ err, card: card.index }, `compute sampler card ${card.index}: sampling failed`),
        onCounterCheck: counterCheckReporter(card, parts.metrics, placement, log),
      },
      config.computeSensor,
    );
    log.info({ card: card.index, sensor }, `compute sampler card ${card.index}: ${sensorWhy(sensor, reason)}`);
    return sampler;
  });
  const hostPids = createHostPidPublisher({
    // Whole MIG instances have no region to publish into.
    targets: () =>
      records()
        .filter((r) => r.devices.length > 0)
        .map((r) => ({
          key: containerKey(r.podUid, r.container),
          podUid: r.podUid,
          regionPath: r.paths.regionPath,
        })),
    proc: procSource(config.paths.procRoot),
    containerOfPid: (pid) => placement.containerOfPid(pid),
    nowMs: () => Date.now(), // libvcuda compares it with CLOCK_REALTIME
    onError: (err) => log.warn({ err }, 'host-pid map: publishing failed'),
  });
  if (deps.runLoops !== false && config.computePeriodMs > 0) {
    for (const s of samplers) s.start();
    hostPids.start();
  }
  return {
    samplers,
    driftMonitors,
    hostPids,
    stop: () => {
      for (const s of samplers) s.stop();
      hostPids.stop();
    },
  };
}
