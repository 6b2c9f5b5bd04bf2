/**
 * The prepared claims, checkpointed to one file so an agent restart loses nothing: the kubelet
 * does not call Prepare again for a claim it saw prepared, and calls Unprepare for it later. Changes
 * are written atomically (temp file, fsync, rename), those of one event-loop turn together, before
 * the kubelet hears of them; the file is validated when read back.
 */
import { z } from 'zod';
import { readCheckpointFile, writeFileDurably } from '../durable-file.js';

const CHECKPOINT_MAX_BYTES = 64 * 1024 * 1024;

const shareSchema = z.object({
  request: z.string(),
  device: z.string(),
  shareId: z.string(),
  uuid: z.string(),
  index: z.number().int().min(0),
  minorNumber: z.number().int().min(0),
  cores: z.number().int().min(1),
  memoryBytes: z.number().int().min(1),
  coreLimit: z.number().int().min(1),
});

/** A whole MIG instance handed over for a partition (claim-mig.ts). */
const migSchema = z.object({
  request: z.string(),
  device: z.string(),
  uuid: z.string(),
  profile: z.string(),
  /** The partition's first memory slice: with the parent and profile, the key dynamic MIG holds it under. */
  start: z.number().int().min(0).max(7),
  parentUuid: z.string(),
  parentMinor: z.number().int().min(0),
  capMinors: z.array(z.number().int().min(0)),
});

const preparedClaimSchema = z.object({
  uid: z.string().min(1),
  namespace: z.string(),
  name: z.string(),
  /** The pod the claim was reserved for when prepared (its processes are the claim's); the claim's uid and '' when none. */
  podUid: z.string().min(1),
  podName: z.string(),
  /** The claim's directory under containersDir, and its CDI spec's name. */
  key: z.string().min(1),
  shares: z.array(shareSchema),
  /** Whole MIG instances; absent in checkpoints written before MIG partitions were served. */
  mig: z.array(migSchema).optional(),
  devices: z.array(
    z.object({
      request_names: z.array(z.string()),
      pool_name: z.string(),
      device_name: z.string(),
      cdi_device_ids: z.array(z.string()),
    }),
  ),
  preparedAtMs: z.number().int().min(0),
});

const checkpointSchema = z.object({ version: z.literal(1), claims: z.array(preparedClaimSchema) });

export type PreparedClaim = z.infer<typeof preparedClaimSchema>;

export class ClaimCheckpoint {
  private readonly claims = new Map<string, PreparedClaim>();
  /** Bumped on every change, so readers can keep what they derive from the claims until it moves. */
  version = 0;
  /** Writes to disk so far (a burst of changes shares one). */
  writes = 0;
  private dirty = false;
  private pending: Promise<void> | undefined;

  private constructor(private readonly path: string) {}

  /** Reads the file (absent: nothing prepared); a corrupt file is an error, never an empty state. */
  static open(path: string): ClaimCheckpoint {
    const cp = new ClaimCheckpoint(path);
    for (const c of readCheckpointFile(path, checkpointSchema, CHECKPOINT_MAX_BYTES)?.claims ?? [])
      cp.claims.set(c.uid, c);
    return cp;
  }

  get(uid: string): PreparedClaim | undefined {
    return this.claims.get(uid);
  }

  list(): PreparedClaim[] {
    return [...this.claims.values()];
  }

  /** Records a prepared claim in memory; `commit` writes it. */
  set(claim: PreparedClaim): void {
    this.claims.set(claim.uid, claim);
    this.changed();
  }

  delete(uid: string): void {
    if (this.claims.delete(uid)) this.changed();
  }

  /**
   * Writes the changes made so far and resolves once they are on disk. Changes made in the same
   * turn of the event loop share one write (group commit): a burst of Prepares costs one fsync,
   * not one each. A failed write leaves the changes pending for the next commit.
   */
  commit(): Promise<void> {
    if (!this.dirty) return this.pending ?? Promise.resolve();
    this.pending ??= new Promise<void>((resolve, reject) =>
      setImmediate(() => {
        this.pending = undefined;
        if (!this.dirty) return resolve();
        this.dirty = false;
        try {
          this.save();
          resolve();
        } catch (err) {
          this.dirty = true;
          reject(err);
        }
      }),
    );
    return this.pending;
  }

  private changed(): void {
    this.version++;
    this.dirty = true;
  }

  private save(): void {
    writeFileDurably(this.path, JSON.stringify({ version: 1, claims: this.list() }));
    this.writes++;
  }
}
