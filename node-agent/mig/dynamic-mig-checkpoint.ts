/**
 * Dynamic MIG's intents, checkpointed to one file before every step that changes a card, so an
 * agent killed between two steps finds on restart what it was doing: a placement it was creating
 * (resumed by the next PreStartContainer, or rolled back when its holders are gone), one it was
 * destroying (finished), one that is ready (adopted). Written synchronously and durably
 * (durable-file.ts) because the next step must not run before the intent is on disk.
 */
import { z } from 'zod';
import { migPlacementKey } from '../../contract/index.js';
import { readCheckpointFile, writeFileDurably } from '../durable-file.js';

const placementSchema = z.object({
  cardUuid: z.string().min(1),
  cardIndex: z.number().int().min(0),
  profile: z.string().min(1),
  profileId: z.number().int().min(0),
  start: z.number().int().min(0).max(7),
  size: z.number().int().min(1).max(8),
});

const entrySchema = placementSchema.extend({
  /** creating: the GPU or compute instance may or may not exist yet; ready: both do; destroying: on the way out. */
  phase: z.enum(['creating', 'ready', 'destroying']),
  gpuInstanceId: z.number().int().min(0).optional(),
  computeInstanceId: z.number().int().min(0).optional(),
  uuid: z.string().optional(),
  /** Pod UIDs whose grants name this placement. */
  holders: z.array(z.string().min(1)),
});

const fileSchema = z.object({ version: z.literal(1), entries: z.array(entrySchema) });

export type MigPlacement = z.infer<typeof placementSchema>;
export type MigIntent = z.infer<typeof entrySchema>;

/** What the checkpoint keys a placement by: card, profile and start, as the signed grant names it (contract's migPlacementKey). */
export function placementKey(p: Pick<MigPlacement, 'cardUuid' | 'profile' | 'start'>): string {
  return migPlacementKey({ parent: p.cardUuid, profile: p.profile, start: p.start });
}

export class MigIntentCheckpoint {
  private readonly entries = new Map<string, MigIntent>();

  private constructor(private readonly path: string) {}

  /** Reads the file (absent: no intents); a corrupt file is an error, never an empty state. */
  static open(path: string): MigIntentCheckpoint {
    const cp = new MigIntentCheckpoint(path);
    for (const e of readCheckpointFile(path, fileSchema)?.entries ?? []) cp.entries.set(placementKey(e), e);
    return cp;
  }

  get(key: string): MigIntent | undefined {
    return this.entries.get(key);
  }

  list(): MigIntent[] {
    return [...this.entries.values()];
  }

  /** Records the intent and returns once it is on disk. */
  put(intent: MigIntent): void {
    this.entries.set(placementKey(intent), intent);
    this.save();
  }

  remove(key: string): void {
    if (this.entries.delete(key)) this.save();
  }

  private save(): void {
    writeFileDurably(this.path, JSON.stringify({ version: 1, entries: this.list() }));
  }
}
