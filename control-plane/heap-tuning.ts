/**
 * The collector settings of a process that serves the control plane, applied once by the
 * process's entry point (`vcuda control-plane`, `vcuda local`) before it listens.
 *
 * V8 pretenures an allocation site (allocates its objects straight into the old generation) once
 * most of the objects it made survived a young collection. A listener's request and response
 * objects are made at the same sites for an admission review that lives a millisecond and for a
 * dashboard stream that lives for hours, so a few hundred open streams taught V8 that requests
 * live long: from then on every review's objects went to the old generation, which filled in
 * seconds, and its major collections paused the webhooks 10 to 20 ms at a time (the review p99
 * with 300 streams open was 5 to 12 times the one without; see BENCHMARKS.md, webhook). Without
 * pretenuring, long-lived objects are copied once more before they are promoted, which costs a
 * little at start-up (the watch cache's first list) and nothing after.
 */
import { setFlagsFromString } from 'node:v8';

/** The V8 flag this applies, for tests and for the benchmarks that measure in-process. */
export const NO_PRETENURING_FLAG = '--no-allocation-site-pretenuring';

export function tuneHeapForLongLivedConnections(): void {
  setFlagsFromString(NO_PRETENURING_FLAG);
}
