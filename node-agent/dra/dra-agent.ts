/**
 * The node agent in DRA mode, assembled from its parts (the DRA counterpart of agent.ts): card
 * health from driver events, the node's ResourceSlice kept current (on each health change and every
 * `inventoryCheckMs`, which also retries a failed write), the claim checkpoint, the kubelet
 * plugin's sockets, and the prepared claims' usage reported as device-plugin mode reports its
 * containers'. Everything outside comes in through `DraAgentDeps`.
 */
import { join } from 'node:path';
import { draDeviceName } from '../../contract/index.js';
import {
  type Compute,
  dynamicMigCardsOf,
  migDevicesOf,
  newDynamicMig,
  nodeInventoryPublisher,
  prepareHostFiles,
  responseSettingsOf,
  runEvery,
  startCompute,
  usageReporter,
} from '../agent.js';
import type { AgentLog } from '../agent-log.js';
import type { NodeAgentConfig } from '../config.js';
import { type AgentCheck, agentProblems, CardHealth, watchCardHealth } from '../health.js';
import type { NodePatcher } from '../inventory.js';
import { AgentMetrics } from '../metrics.js';
import type { MigDevices } from '../mig/mig-devices.js';
import type { GpuSource } from '../nvml/gpu-source.js';
import { readPcieRoot } from '../nvml/numa.js';
import { collectUsage, type UsageSink } from '../usage.js';
import { ClaimCheckpoint } from './checkpoint.js';
import type { MigInstanceMaker, MigPoolDevice } from './claim-mig.js';
import { ClaimPreparer, type ClaimReader, removeOrphanClaims } from './claim-preparer.js';
import type { PoolDevice } from './claim-shares.js';
import { dynamicMigMaker, migPoolDevices, sliceCards } from './dra-mig.js';
import { type DraPluginServer, startDraPluginServer } from './plugin-server.js';
import { buildResourceSlices, type SliceCard, sliceMemoryBytes } from './resource-slice.js';
import { type ResourceSliceApi, SlicePublisher } from './slice-publisher.js';

export type DraAgentDeps = {
  config: NodeAgentConfig;
  gpu: GpuSource;
  claims: ClaimReader;
  slices: ResourceSliceApi;
  /** The Node's uid, to own the slice (absent: the slice has no owner). */
  nodeUid?: string;
  /**
   * Where the node's inventory goes (its Node annotation), as in device-plugin mode: the control
   * plane registers the cards in the ledger from it, which charges claims against them. Absent: none.
   */
  node?: NodePatcher;
  /**
   * Where the prepared claims' usage goes (the control plane), as in device-plugin mode: each
   * claim's use under its ledger holder, share by share. Absent: not reported.
   */
  usageSink?: UsageSink;
  nowMs?: () => number;
  log: AgentLog;
  /** The periodic slice check and usage report; tests drive `publishSlices` and `reportUsage` by hand. Default true. */
  runLoops?: boolean;
};

export type DraAgent = {
  driver: string;
  health: CardHealth;
  preparer: ClaimPreparer;
  checkpoint: ClaimCheckpoint;
  server: DraPluginServer;
  publisher: SlicePublisher;
  metrics: AgentMetrics;
  /** Per card, the compute sampler feeding each prepared claim's measured share into its region. */
  samplers: Compute['samplers'];
  hostPids: Compute['hostPids'];
  publishSlices: () => Promise<boolean>;
  /** Sends the prepared claims' usage to the sink (no-op without one); runs every `usagePeriodMs` with loops on. */
  reportUsage: () => Promise<void>;
  refreshMetrics: () => void;
  healthProblems: () => string[];
  stop: () => Promise<void>;
};

/** The driver's own directory under the kubelet's plugins dir: its DRA socket and its checkpoint. */
export function driverDir(config: NodeAgentConfig): string {
  return join(config.dra.pluginsDir, config.dra.driverName);
}

function poolDevices(config: NodeAgentConfig, health: CardHealth): Map<string, PoolDevice> {
  return new Map(
    health
      .list()
      .filter((c) => !c.migMode && !c.migDynamic)
      .map((c) => [
        draDeviceName(c.index),
        {
          name: draDeviceName(c.index),
          uuid: c.uuid,
          index: c.index,
          minorNumber: c.minorNumber,
          memoryBytes: sliceMemoryBytes(c.memoryTotalBytes, config.memoryUnitMiB),
          healthy: c.healthy,
        },
      ]),
  );
}

/** The MIG side: the instances (MigDevices) and, with dynamic MIG on, the maker of instances. */
type DraMig = { devices: MigDevices; maker: MigInstanceMaker | undefined };

/** Dynamic MIG on the cards kept for it (`mig.dynamicCards`) when the library can create instances. */
function startDraMig(deps: DraAgentDeps, health: CardHealth, checkpoint: ClaimCheckpoint): DraMig {
  const devices = migDevicesOf(deps, health);
  const dynamic = newDynamicMig(deps, health);
  const maker = dynamic
    ? dynamicMigMaker({
        dynamic,
        capMinorOf: devices.capMinorOf,
        isLiveClaim: (uid) => checkpoint.get(uid) !== undefined,
      })
    : undefined;
  return { devices, maker };
}

/** Claims prepared against this node's cards, checkpointed in the driver's directory. */
function createPreparer(
  deps: DraAgentDeps,
  health: CardHealth,
  checkpoint: ClaimCheckpoint,
  mig: DraMig,
  migDevices: () => ReadonlyMap<string, MigPoolDevice>,
): ClaimPreparer {
  const { config } = deps;
  return new ClaimPreparer({
    driver: config.dra.driverName,
    pool: config.nodeName,
    claims: deps.claims,
    devices: () => poolDevices(config, health),
    migDevices,
    ...(mig.maker ? { migMaker: mig.maker } : {}),
    checkpoint,
    containersDir: config.paths.containersDir,
    cdiSpecDir: config.paths.cdiSpecDir,
    response: responseSettingsOf(config),
    nowMs: deps.nowMs ?? Date.now,
    log: deps.log,
  });
}

/**
 * Writes the node's slices when the cards changed: on each health change and every
 * `inventoryCheckMs` (which also re-reads the MIG layouts); `cards()` is what was last published.
 */
async function startSlicePublishing(deps: DraAgentDeps, health: CardHealth, mig: DraMig) {
  const { config, log } = deps;
  const publisher = new SlicePublisher(deps.slices, config.dra.driverName, config.nodeName);
  // Read once: a card does not move between PCIe roots while the agent runs.
  const pcieRoots = new Map(health.list().map((c) => [c.index, readPcieRoot(c.pciBusId, config.paths.sysfsRoot)]));
  let published: readonly SliceCard[] = [];
  const publishSlices = async () => {
    const cards = sliceCards(health, mig.devices, pcieRoots, log);
    const wrote = await publisher.publish((generation) =>
      buildResourceSlices({
        driver: config.dra.driverName,
        nodeName: config.nodeName,
        ...(deps.nodeUid ? { nodeUid: deps.nodeUid } : {}),
        memoryUnitMiB: config.memoryUnitMiB,
        cards,
        link: (a, b) => deps.gpu.link(a, b),
        unhealthy: config.dra.unhealthyCards,
        generation,
        migCreatable: mig.maker !== undefined,
      }),
    );
    published = cards;
    return wrote;
  };
  const inventory = deps.node
    ? nodeInventoryPublisher({ ...deps, node: deps.node }, health, deps.nowMs ?? Date.now)
    : undefined;
  const publishAll = async () => {
    await publishSlices().catch((err) => log.warn({ err }, 'ResourceSlice: publishing failed'));
    await inventory?.().catch((err) => log.warn({ err }, 'inventory: publishing failed'));
  };
  health.subscribe(() => void publishAll());
  let timer: NodeJS.Timeout | undefined;
  if (deps.runLoops !== false) {
    await publishAll();
    timer = setInterval(() => void publishAll(), config.inventoryCheckMs);
    timer.unref();
  }
  return { publisher, publishSlices, cards: () => published, stop: () => clearInterval(timer) };
}

/** Claim folders and specs no checkpointed claim names (an agent stopped between the two), before any Prepare. */
function removeOrphans(deps: DraAgentDeps, checkpoint: ClaimCheckpoint): void {
  const { config } = deps;
  const orphans = removeOrphanClaims({
    checkpoint,
    containersDir: config.paths.containersDir,
    cdiSpecDir: config.paths.cdiSpecDir,
    driver: config.dra.driverName,
  });
  if (orphans.length > 0) deps.log.info(`removed ${orphans.length} claim folder(s) no checkpointed claim names`);
}

export async function startDraAgent(deps: DraAgentDeps): Promise<DraAgent> {
  const { config, log } = deps;
  const driver = config.dra.driverName;
  const gpuCards = deps.gpu.listCards();
  const health = new CardHealth(gpuCards, config.ignoredXids, dynamicMigCardsOf(deps, gpuCards));
  prepareHostFiles(config);
  const checkpoint = ClaimCheckpoint.open(join(driverDir(config), 'checkpoint.json'));
  const mig = startDraMig(deps, health, checkpoint);
  let published: () => readonly SliceCard[] = () => [];
  const preparer = createPreparer(deps, health, checkpoint, mig, () =>
    migPoolDevices(published(), mig.devices, mig.maker !== undefined),
  );
  removeOrphans(deps, checkpoint);
  const server = await startDraPluginServer(
    { driver, registryDir: config.dra.pluginsRegistryDir, pluginDir: driverDir(config), handler: preparer },
    log,
  );
  const abort = new AbortController();
  let nvmlError: string | undefined;
  const watch = watchCardHealth(deps.gpu, health, abort.signal, log, 1000, (err) => {
    nvmlError = err?.message;
  });
  const slices = await startSlicePublishing(deps, health, mig);
  published = slices.cards;
  const metrics = new AgentMetrics();
  // No pod watch in DRA mode: a pod holding one vcuda claim is unambiguous (placement.ts).
  const records = () => preparer.records();
  const nowMs = deps.nowMs ?? Date.now;
  const compute = startCompute(deps, { health, records, pods: () => [], metrics }, nowMs);
  const reportUsage = usageReporter(deps, records, nowMs);
  const usageTimer =
    deps.usageSink && deps.runLoops !== false
      ? runEvery(config.usagePeriodMs, 'usage report', reportUsage, log)
      : undefined;
  let stopped = false;
  const checks: AgentCheck[] = [
    { name: 'agent', problem: () => (stopped ? 'stopping' : undefined) },
    {
      name: 'dra-plugin',
      problem: () => {
        const s = server.registration();
        return s?.plugin_registered ? undefined : `not registered with the kubelet${s?.error ? `: ${s.error}` : ''}`;
      },
    },
    { name: 'nvml', problem: () => nvmlError && `waiting for GPU events failed: ${nvmlError}` },
  ];
  return {
    driver,
    health,
    preparer,
    checkpoint,
    server,
    publisher: slices.publisher,
    metrics,
    samplers: compute.samplers,
    hostPids: compute.hostPids,
    publishSlices: slices.publishSlices,
    reportUsage,
    refreshMetrics: () => {
      metrics.update(health.list(), records(), collectUsage(records()));
      metrics.updateChecks(checks.map((c) => ({ name: c.name, ok: c.problem() === undefined })));
    },
    healthProblems: () => agentProblems(checks),
    stop: async () => {
      stopped = true;
      slices.stop();
      clearInterval(usageTimer);
      compute.stop();
      abort.abort();
      await server.stop();
      await watch;
      deps.gpu.close();
    },
  };
}
