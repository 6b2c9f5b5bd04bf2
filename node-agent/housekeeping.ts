/**
 * Removing what containers that are gone left behind: their allocation directories (limit file,
 * region), CDI specs and the agent's records. The decision is pure; the caller lists directories
 * and the allocations still in use.
 */

export type AllocationDir = { key: string; modifiedAtMs: number };

/**
 * Allocation directories to remove: held by no live container, and untouched for `graceMs`. The
 * grace keeps an allocation whose PreStart has not come yet, and a pod list that lags behind,
 * from deleting files a container is about to get.
 */
export function allocationDirsToRemove(
  dirs: readonly AllocationDir[],
  liveKeys: ReadonlySet<string>,
  nowMs: number,
  graceMs: number,
): string[] {
  return dirs.filter((d) => !liveKeys.has(d.key) && nowMs - d.modifiedAtMs >= graceMs).map((d) => d.key);
}
