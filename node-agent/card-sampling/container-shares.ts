/**
 * Turns one card's NVML process-utilization samples into each container's measured share (pure).
 * NVML reports, per host process, SM utilization in percent for each driver sampling interval in
 * which the process ran; a process's share of the period is the sum of its samples over the
 * number of intervals the period holds (distinct timestamps on the card: a process absent from
 * an interval was idle in it), and a container's share is the sum over its processes. The card's busy share is the larger of what
 * NVML reports for the card and the sum over all processes, so a container's share never
 * exceeds the card's and "others" (card minus container) is never negative.
 */

/** One NVML process-utilization sample (the shape node-agent/nvml's GpuSource returns). */
export type ProcessUtilizationSample = {
  pid: number;
  /** NVML timestamp (host CPU clock), µs. */
  timestampUs: number;
  /** Percent of the sampling interval a kernel of this process ran (0..100). */
  smPercent: number;
};

export type ContainerShares = {
  /** Measured share per container key, basis points. */
  byContainer: Map<string, number>;
  /** The card's busy share, basis points. */
  cardBusyBp: number;
  /** Samples whose process mapped to no known container (host tools, other runtimes). */
  unattributedBp: number;
  /** Newest timestamp seen, to ask NVML for newer samples only next time. */
  newestUs: number;
  /** Driver sampling intervals the samples cover (0: nothing new since `sinceUs`). */
  intervals: number;
};

const clampBp = (bp: number) => Math.max(0, Math.min(10_000, bp));

export function computeContainerShares(
  samples: readonly ProcessUtilizationSample[],
  containerOfPid: (pid: number) => string | null,
  cardUtilPercent: number,
  sinceUs: number,
): ContainerShares {
  const perPid = new Map<number, { sum: number; count: number }>();
  const intervals = new Set<number>();
  let newestUs = sinceUs;
  for (const s of samples) {
    if (s.timestampUs <= sinceUs) continue;
    intervals.add(s.timestampUs);
    if (s.timestampUs > newestUs) newestUs = s.timestampUs;
    const acc = perPid.get(s.pid) ?? { sum: 0, count: 0 };
    acc.sum += Math.max(0, Math.min(100, s.smPercent));
    acc.count += 1;
    perPid.set(s.pid, acc);
  }
  const byContainer = new Map<string, number>();
  let totalBp = 0;
  let unattributedBp = 0;
  for (const [pid, acc] of perPid) {
    const bp = (acc.sum / Math.max(acc.count, intervals.size)) * 100;
    totalBp += bp;
    const key = containerOfPid(pid);
    if (key === null) {
      unattributedBp += bp;
      continue;
    }
    byContainer.set(key, clampBp((byContainer.get(key) ?? 0) + bp));
  }
  const cardBusyBp = clampBp(Math.max(cardUtilPercent * 100, totalBp));
  return { byContainer, cardBusyBp, unattributedBp: clampBp(unattributedBp), newestUs, intervals: intervals.size };
}
