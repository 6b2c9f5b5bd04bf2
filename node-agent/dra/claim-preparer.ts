/**
 * NodePrepareResources / NodeUnprepareResources for one claim. Prepare reads the claim from the API
 * server, maps its allocation to card shares (claim-shares.ts), writes the claim's limit file and
 * region exactly as the device-plugin path does (limits/), writes its CDI spec, checkpoints it and
 * answers with the CDI device IDs; a claim of MIG partitions gets their instances handed over
 * instead (claim-mig.ts), with a CDI spec only. All containers that reference the claim mount the same directory,
 * so they share one budget. Both calls are idempotent: a prepared claim is answered from the
 * checkpoint, an unknown claim unprepares as done.
 *
 * Decisions and file writes run one claim at a time (the overcommit check reads what the others
 * hold); the API read before them runs concurrently, so a burst of claims waits on the API server in
 * parallel.
 */
import { existsSync } from 'node:fs';
import { claimHolderId, claimShareKey, draClaimSchema, isDraMigDeviceName, messageOf } from '../../contract/index.js';
import type { AgentLog } from '../agent-log.js';
import type { ContainerRecord } from '../allocation/ports.js';
import type { DraClaimRef, DraDevice, NodePrepareResourceResponse } from '../kubelet/dra-protocol.js';
import type { ResponseSettings } from '../limits/allocate-response.js';
import { removeCdiSpecFile } from '../limits/cdi-spec.js';
import {
  allocationKey,
  containerPaths,
  listAllocationDirs,
  removeAllocationDir,
  writeContainerFiles,
} from '../limits/container-files.js';
import type { ClaimCheckpoint, PreparedClaim } from './checkpoint.js';
import { claimCdiDeviceId, claimCdiSpecPath, writeClaimCdiSpec, writeClaimMigCdiSpec } from './claim-cdi.js';
import { handOverInstances, type MigInstanceMaker, type MigPoolDevice, migResultsOfClaim } from './claim-mig.js';
import {
  type CardShare,
  ClaimRefused,
  deviceLimitsOf,
  driverResults,
  type PoolDevice,
  sharesOfClaim,
} from './claim-shares.js';

/** Declared here, implemented over the API server in kube-resource-api.ts. */
export interface ClaimReader {
  /** The ResourceClaim as the API server returns it; rejects when it cannot be read. */
  readClaim(namespace: string, name: string): Promise<unknown>;
}

export type PreparerDeps = {
  driver: string;
  /** This node's pool (its name). */
  pool: string;
  claims: ClaimReader;
  /** The cards of this node's slice now, by device name. */
  devices: () => ReadonlyMap<string, PoolDevice>;
  /** The MIG partitions of this node's slices now, by device name. */
  migDevices: () => ReadonlyMap<string, MigPoolDevice>;
  /** Creates a partition's instance at Prepare (dynamic MIG); absent: only existing instances are handed over. */
  migMaker?: MigInstanceMaker;
  checkpoint: ClaimCheckpoint;
  containersDir: string;
  cdiSpecDir: string;
  response: ResponseSettings;
  nowMs: () => number;
  log: AgentLog;
};

/**
 * A claim's directory name: `c` and a hash of its uid, so a claim's files are told apart from a
 * device-plugin allocation's (`a…`) in the same folder.
 */
export function claimKey(uid: string): string {
  return `c${allocationKey(['dra-claim', uid]).slice(1)}`;
}

/**
 * Claim directories and CDI specs the checkpoint does not name: left by an agent that stopped
 * between writing a claim's files and checkpointing it (the kubelet, told nothing, prepares it
 * again). Removed at start, before any Prepare; device-plugin allocations are never touched.
 */
export function removeOrphanClaims(
  d: Pick<PreparerDeps, 'checkpoint' | 'containersDir' | 'cdiSpecDir' | 'driver'>,
): string[] {
  const known = new Set(d.checkpoint.list().map((c) => c.key));
  const orphans = listAllocationDirs(d.containersDir)
    .map((dir) => dir.key)
    .filter((key) => key.startsWith('c') && !known.has(key));
  for (const key of orphans) {
    removeAllocationDir(d.containersDir, key);
    removeCdiSpecFile(claimCdiSpecPath(d.cdiSpecDir, d.driver, key));
  }
  return orphans;
}

/** The pod the claim is reserved for (its processes use the claim), else the claim itself. */
function holderOf(claim: ReturnType<typeof draClaimSchema.parse>): { podUid: string; podName: string } {
  const pod = claim.status?.reservedFor?.find((r) => r.resource === 'pods');
  return { podUid: (pod?.uid ?? claim.metadata.uid).slice(0, 63), podName: pod?.name ?? '' };
}

export class ClaimPreparer {
  private queue: Promise<unknown> = Promise.resolve();
  private cached: { version: number; records: readonly ContainerRecord[] } | undefined;

  constructor(private readonly d: PreparerDeps) {}

  /** The kubelet's answer for one claim: its devices, or the reason it was not prepared. */
  async prepare(ref: DraClaimRef): Promise<NodePrepareResourceResponse> {
    try {
      const done = this.d.checkpoint.get(ref.uid);
      const devices = done
        ? await this.serialized(() => this.ensureFiles(done))
        : await this.serialized(this.parsedClaim(ref, await this.d.claims.readClaim(ref.namespace, ref.name)));
      // Answered only once the checkpoint holds the claim (one write for a burst of claims).
      await this.d.checkpoint.commit();
      return { devices, error: '' };
    } catch (err) {
      this.d.log.warn({ err, claim: `${ref.namespace}/${ref.name}` }, 'NodePrepareResources failed');
      return {
        devices: [],
        error: err instanceof ClaimRefused ? err.message : `claim ${ref.namespace}/${ref.name}: ${messageOf(err)}`,
      };
    }
  }

  /** Frees the claim's files and checkpoint entry; a claim not prepared here is already done. */
  async unprepare(ref: DraClaimRef): Promise<{ error: string }> {
    try {
      await this.serialized(async () => {
        const done = this.d.checkpoint.get(ref.uid);
        if (!done) return;
        for (const item of done.mig ?? []) this.d.migMaker?.release(item, ref.uid);
        removeCdiSpecFile(claimCdiSpecPath(this.d.cdiSpecDir, this.d.driver, done.key));
        removeAllocationDir(this.d.containersDir, done.key);
        this.d.checkpoint.delete(ref.uid);
      });
      await this.d.checkpoint.commit();
      return { error: '' };
    } catch (err) {
      this.d.log.warn({ err, claim: `${ref.namespace}/${ref.name}` }, 'NodeUnprepareResources failed');
      return { error: `claim ${ref.namespace}/${ref.name}: ${messageOf(err)}` };
    }
  }

  prepared(): PreparedClaim[] {
    return this.d.checkpoint.list();
  }

  /** The prepared claims as container records (see claimRecord), rebuilt only when the checkpoint changed. */
  records(): readonly ContainerRecord[] {
    const version = this.d.checkpoint.version;
    if (this.cached?.version !== version) {
      const records = this.prepared().map((c) => claimRecord(c, this.d.containersDir));
      this.cached = { version, records };
    }
    return this.cached.records;
  }

  private serialized<T>(work: () => Promise<T> | T): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private heldByOthers(uid: string): Map<string, { cores: number; memoryBytes: number }> {
    const held = new Map<string, { cores: number; memoryBytes: number }>();
    for (const c of this.d.checkpoint.list()) {
      if (c.uid === uid) continue;
      for (const s of c.shares) {
        const h = held.get(s.device) ?? { cores: 0, memoryBytes: 0 };
        held.set(s.device, { cores: h.cores + s.cores, memoryBytes: h.memoryBytes + s.memoryBytes });
      }
    }
    return held;
  }

  /** The claim as read, checked to be a ResourceClaim, and the decision to run on it in turn. */
  private parsedClaim(ref: DraClaimRef, raw: unknown): () => DraDevice[] {
    const parsed = draClaimSchema.safeParse(raw);
    if (!parsed.success) {
      const why = parsed.error.issues[0]?.message;
      throw new ClaimRefused(ref, `the API server's object is not a ResourceClaim (${why})`);
    }
    return () => this.prepareParsed(ref, parsed.data);
  }

  private prepareParsed(ref: DraClaimRef, claim: ReturnType<typeof draClaimSchema.parse>): DraDevice[] {
    const done = this.d.checkpoint.get(ref.uid);
    if (done) return this.ensureFiles(done);
    const mine = driverResults(ref, claim, this.d.driver);
    const migResults = mine.filter((r) => isDraMigDeviceName(r.device));
    if (migResults.length > 0 && migResults.length < mine.length)
      throw new ClaimRefused(ref, 'it mixes whole MIG instances and card shares; ask them in separate claims');
    const shares =
      migResults.length > 0
        ? []
        : sharesOfClaim(ref, claim, mine, {
            driver: this.d.driver,
            pool: this.d.pool,
            devices: this.d.devices(),
            heldByOthers: this.heldByOthers(ref.uid),
          });
    const mig =
      migResults.length > 0
        ? handOverInstances(
            ref,
            migResultsOfClaim(ref, migResults, { pool: this.d.pool, devices: this.d.migDevices() }),
            this.d.migMaker,
          )
        : undefined;
    const key = claimKey(ref.uid);
    const prepared: PreparedClaim = {
      uid: ref.uid,
      namespace: ref.namespace,
      name: ref.name,
      ...holderOf(claim),
      key,
      shares,
      ...(mig ? { mig } : {}),
      devices: [...shares, ...(mig ?? [])].map((s) => ({
        request_names: [s.request],
        pool_name: this.d.pool,
        device_name: s.device,
        cdi_device_ids: [claimCdiDeviceId(this.d.driver, key, s.device)],
      })),
      preparedAtMs: this.d.nowMs(),
    };
    this.writeFiles(prepared);
    this.d.checkpoint.set(prepared);
    return prepared.devices;
  }

  /** A prepared claim whose files went (a reboot emptied /run) gets them again. */
  private ensureFiles(done: PreparedClaim): DraDevice[] {
    const file = done.mig
      ? claimCdiSpecPath(this.d.cdiSpecDir, this.d.driver, done.key)
      : containerPaths(this.d.containersDir, done.key).configPath;
    if (!existsSync(file)) this.writeFiles(done);
    return done.devices;
  }

  private writeFiles(claim: PreparedClaim): void {
    const paths = containerPaths(this.d.containersDir, claim.key);
    if (claim.mig) {
      // Whole instances: the CDI spec is all (no limit file or region to write).
      const devices = claim.mig.map((m) => ({
        device: m.device,
        uuid: m.uuid,
        parentMinor: m.parentMinor,
        capMinors: m.capMinors,
      }));
      writeClaimMigCdiSpec(this.d.cdiSpecDir, this.d.driver, paths, devices, this.d.response);
      return;
    }
    const devices = deviceLimitsOf(claim.name, claim.shares);
    const container = claim.name.slice(0, 63);
    const podUid = claim.podUid;
    writeContainerFiles({ paths, podUid, container, devices, nowMs: this.d.nowMs(), freshRegion: false });
    const cdi = uniqueDevices(claim.shares).map((s) => ({
      device: s.device,
      card: { uuid: s.uuid, minorNumber: s.minorNumber },
    }));
    writeClaimCdiSpec(this.d.cdiSpecDir, this.d.driver, paths, cdi, this.d.response);
  }
}

function uniqueDevices(shares: readonly CardShare[]): CardShare[] {
  return [...new Map(shares.map((s) => [s.device, s])).values()];
}

/**
 * A prepared claim as the card samplers, host-pid map and metrics see a container: the claim is its
 * budget. Its use is reported under the ledger's holder of the claim, share by share, as the charge
 * wrote them.
 */
export function claimRecord(claim: PreparedClaim, containersDir: string): ContainerRecord {
  return {
    podUid: claim.podUid,
    namespace: claim.namespace,
    podName: claim.podName,
    container: claim.name.slice(0, 63),
    isInit: false,
    deviceIds: [],
    devices: deviceLimitsOf(claim.name, claim.shares),
    ...(claim.mig ? { migDevices: claim.mig.map((m) => m.uuid) } : {}),
    paths: containerPaths(containersDir, claim.key),
    allocatedAtMs: claim.preparedAtMs,
    confirmed: true,
    ledgerHolder: {
      id: claimHolderId(claim.uid),
      name: claim.name,
      shares: claim.shares.map((s) => ({
        key: claimShareKey(s.request, s.shareId, s.device),
        cardUuid: s.uuid,
        cores: s.cores,
        memoryBytes: s.memoryBytes,
      })),
    },
  };
}
