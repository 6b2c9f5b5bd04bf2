/**
 * The simulated scheduler's view of Dynamic Resource Allocation: the ResourceSlices,
 * DeviceClasses and ResourceClaims its watches show, plus the allocations it decided and is
 * writing (kube-scheduler's in-flight claims), so the next cycle counts a share the watch has not
 * shown yet. Pure state; the watches and writes are in `dra-plugin.ts`.
 */
import type { KubeObj } from '../kube-client.js';
import type { AllocationResult, ClaimAllocation, DeviceClass, ResourceClaim, ResourceSlice } from './dra-objects.js';

export const claimKey = (namespace: string | undefined, name: string) => `${namespace ?? 'default'}/${name}`;

export class DraCache {
  readonly slices = new Map<string, ResourceSlice>();
  readonly classes = new Map<string, DeviceClass>();
  private readonly claims = new Map<string, ResourceClaim>();
  /** Allocations decided and being written, by claim key, until the watch shows them (or the write fails). */
  private readonly inFlight = new Map<string, ClaimAllocation>();

  sync(kind: 'slices' | 'classes' | 'claims', items: KubeObj[]): void {
    const map = this.mapOf(kind);
    map.clear();
    for (const o of items) this.event(kind, 'ADDED', o);
  }

  event(kind: 'slices' | 'classes' | 'claims', type: string, obj: KubeObj): void {
    const key = kind === 'claims' ? claimKey(obj.metadata.namespace, obj.metadata.name) : obj.metadata.name;
    const map = this.mapOf(kind) as Map<string, unknown>;
    if (type === 'DELETED') map.delete(key);
    else map.set(key, obj);
    if (kind === 'claims' && (type === 'DELETED' || (obj as unknown as ResourceClaim).status?.allocation))
      this.inFlight.delete(key);
  }

  private mapOf(kind: 'slices' | 'classes' | 'claims'): Map<string, KubeObj> {
    const map = kind === 'slices' ? this.slices : kind === 'classes' ? this.classes : this.claims;
    return map as unknown as Map<string, KubeObj>;
  }

  claim(namespace: string | undefined, name: string): ResourceClaim | undefined {
    return this.claims.get(claimKey(namespace, name));
  }

  /** A claim's allocation: the stored one, or the one being written. */
  allocationOf(claim: ResourceClaim): ClaimAllocation | undefined {
    return claim.status?.allocation ?? this.inFlight.get(claimKey(claim.metadata.namespace, claim.metadata.name));
  }

  /** Every device result held now, `except` the claims named (the ones being allocated). */
  allocatedResults(except: ReadonlySet<string> = new Set()): AllocationResult[] {
    const out: AllocationResult[] = [];
    for (const [key, c] of this.claims) {
      if (except.has(key)) continue;
      out.push(...(c.status?.allocation?.devices.results ?? []));
    }
    for (const [key, a] of this.inFlight) {
      if (!except.has(key) && !this.claims.get(key)?.status?.allocation) out.push(...a.devices.results);
    }
    return out;
  }

  assume(key: string, allocation: ClaimAllocation): void {
    this.inFlight.set(key, allocation);
  }

  forget(key: string): void {
    this.inFlight.delete(key);
  }
}
