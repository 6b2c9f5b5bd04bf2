/**
 * Keeps the node's pool current on the API server: its ResourceSlices (one, or several when MIG
 * partitions need counter sets of their own, resource-slice.ts), written only when their content
 * changed, all with the pool generation bumped on every change (the scheduler ignores slices of an
 * older generation, and a pool until all `resourceSliceCount` slices of the newest are there). The
 * first write after start, or after a failed write, lists what is there first: it continues above
 * the highest generation found. Slices of this node and driver that the pool no longer names are
 * deleted once the new generation is written.
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
  /** The slices on the API server, by name, with their resourceVersions. */
  private readonly versions = new Map<string, string>();
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

  /** Writes the slices `build` makes for the next generation when their content changed; true when it wrote. */
  async publish(build: (generation: number) => ResourceSlice[]): Promise<boolean> {
    const probe = build(this.generation);
    if (this.listed && sliceContentKey(probe) === this.lastKey) return false;
    try {
      if (!this.listed) await this.adoptExisting();
      const slices = build(++this.generation);
      for (const slice of slices) {
        const name = slice.metadata.name;
        const resourceVersion = this.versions.get(name);
        this.versions.set(
          name,
          resourceVersion === undefined
            ? await this.api.createSlice(slice)
            : await this.api.replaceSlice({ ...slice, metadata: { ...slice.metadata, resourceVersion } }),
        );
      }
      const names = new Set(slices.map((s) => s.metadata.name));
      for (const name of [...this.versions.keys()].filter((n) => !names.has(n))) {
        await this.api.deleteSlice(name);
        this.versions.delete(name);
      }
      this.lastKey = sliceContentKey(slices);
      this.writes++;
      return true;
    } catch (err) {
      // A conflict or an outage: list again before the next write.
      this.listed = false;
      throw err;
    }
  }

  /** Withdraws the pool (the agent leaves DRA mode or the node). */
  async withdraw(): Promise<void> {
    for (const name of [...this.versions.keys()]) {
      await this.api.deleteSlice(name);
      this.versions.delete(name);
    }
    this.listed = false;
  }

  private async adoptExisting(): Promise<void> {
    const existing = await this.api.listSlices(this.driver, this.nodeName);
    this.generation = Math.max(this.generation, ...existing.map((s) => s.spec.pool.generation));
    this.versions.clear();
    for (const s of existing) {
      if (s.metadata.resourceVersion !== undefined) this.versions.set(s.metadata.name, s.metadata.resourceVersion);
    }
    this.listed = true;
  }
}
