/**
 * Removing what pods that are gone left behind: their config and region directories and the
 * agent's records. The decision is pure; the caller lists directories and live pods.
 */

export type PodDir = { podUid: string; modifiedAtMs: number };

/**
 * Pod directories to remove: not a live pod on the node, and untouched for `graceMs`. The grace
 * keeps a pod allocated a moment ago safe from a pod list that lags behind.
 */
export function podDirsToRemove(
  dirs: readonly PodDir[],
  livePodUids: ReadonlySet<string>,
  nowMs: number,
  graceMs: number,
): string[] {
  return dirs.filter((d) => !livePodUids.has(d.podUid) && nowMs - d.modifiedAtMs >= graceMs).map((d) => d.podUid);
}
