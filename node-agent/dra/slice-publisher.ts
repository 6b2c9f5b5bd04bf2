/**
 * Keeps the node's pool current on the API server: one ResourceSlice, written only when its
 * content changed, with the pool generation bumped on every change (the scheduler ignores slices
 * of an older generation). The first write after start, or after a failed write, lists what is
 * there first: it continues above the highest generation found and deletes slices of this node
 * and driver under another name.
 */
import { type ResourceSlice, sliceContentKey } from './resource-slice.js';

/** Declared here, implemented over the API server in kube-resource-api.ts. */
export interface ResourceSliceApi {
  /** This driver's slices for this node (`spec.nodeName`, `spec.driver`). */
  listSlices(driver: string, nodeName: string): Promise<ResourceSlice[]>;
  /** Returns the new resourceVersion. */
  createSlice(slice: ResourceSlice): Promise<string>;
  /** `metadata.resourceVersion` must be the current one; returns the new one. */
  replaceSlice(slice: ResourceSlice): Promise<string>;
  deleteSlice(name: string): Promise<void>;
}

export class SlicePublisher {
  private generation = 0;
  private lastKey: string | undefined;
  private resourceVersion: string | undefined;
  private listed = false;
  writes = 0;

  constructor(
    private readonly api: ResourceSliceApi,
    private readonly driver: string,
    private readonly nodeName: string,
  ) {}

  currentGeneration(): number {
    return this.generation;
  }

  /** Writes the slice `build` makes for the next generation when its content changed; true when it wrote. */
  async publish(build: (generation: number) => ResourceSlice): Promise<boolean> {
    const probe = build(this.generation);
    if (this.listed && sliceContentKey(probe) === this.lastKey) return false;
    try {
      if (!this.listed) await this.adoptExisting(probe.metadata.name);
      const slice = build(++this.generation);
      this.resourceVersion =
        this.resourceVersion === undefined
          ? await this.api.createSlice(slice)
          : await this.api.replaceSlice({
              ...slice,
              metadata: { ...slice.metadata, resourceVersion: this.resourceVersion },
            });
      this.lastKey = sliceContentKey(slice);
      this.writes++;
      return true;
    } catch (err) {
      // A conflict or an outage: list again before the next write.
      this.listed = false;
      throw err;
    }
  }

  /** Withdraws the pool (the agent leaves DRA mode or the node). */
  async withdraw(name: string): Promise<void> {
    await this.api.deleteSlice(name);
    this.listed = false;
  }

  private async adoptExisting(name: string): Promise<void> {
    const existing = await this.api.listSlices(this.driver, this.nodeName);
    this.generation = Math.max(this.generation, ...existing.map((s) => s.spec.pool.generation));
    this.resourceVersion = undefined;
    for (const s of existing) {
      if (s.metadata.name === name) this.resourceVersion = s.metadata.resourceVersion;
      else await this.api.deleteSlice(s.metadata.name);
    }
    this.listed = true;
  }
}
