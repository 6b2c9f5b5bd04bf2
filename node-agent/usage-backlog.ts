/**
 * Usage reports kept until the control plane takes them. A report the control plane could not
 * take now (its ledger cut, a restart, the network) stays in a bounded in-memory queue and is
 * sent again, oldest first, before each new one: an outage delays usage, it does not lose it.
 * Each report keeps its own time and period, and the ledger counts a repeat once, so a report
 * that did arrive but whose answer was lost costs nothing when sent again.
 */
import { UsageReportError, type UsageSample, type UsageSink } from './usage.js';

type PendingReport = { node: string; samples: readonly UsageSample[]; at: Date; periodS: number };

export type UsageBacklogOptions = {
  /** Reports kept at most (default 1,080: three hours at the default 10 s period). */
  maxReports?: number;
  /** Samples kept at most across those reports (default 100,000, about 30 MiB). */
  maxSamples?: number;
  /** Told of reports given up: the oldest past a bound, or one the control plane refused for good. */
  onDropped?: (reports: number, why: string) => void;
};

export class UsageBacklog implements UsageSink {
  private readonly queue: PendingReport[] = [];
  private queuedSamples = 0;
  private flushing: Promise<void> | undefined;
  private readonly maxReports: number;
  private readonly maxSamples: number;

  constructor(
    private readonly sink: UsageSink,
    private readonly options: UsageBacklogOptions = {},
  ) {
    this.maxReports = options.maxReports ?? 1080;
    this.maxSamples = options.maxSamples ?? 100_000;
  }

  /** Reports waiting to be sent again. */
  pending(): number {
    return this.queue.length;
  }

  /** Queues the report and sends the queue; throws why the oldest report is still waiting, if it is. */
  async report(node: string, samples: readonly UsageSample[], at: Date, periodS: number): Promise<void> {
    this.queue.push({ node, samples, at, periodS });
    this.queuedSamples += samples.length;
    this.trim();
    // One sender at a time: a report queued while one runs is sent by that run.
    this.flushing ??= this.flush().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private trim(): void {
    let dropped = 0;
    while (this.queue.length > this.maxReports || (this.queuedSamples > this.maxSamples && this.queue.length > 1)) {
      this.shift();
      dropped++;
    }
    if (dropped > 0)
      this.options.onDropped?.(
        dropped,
        `the backlog holds at most ${this.maxReports} reports, ${this.maxSamples} samples`,
      );
  }

  private shift(): void {
    const gone = this.queue.shift();
    this.queuedSamples -= gone?.samples.length ?? 0;
  }

  private async flush(): Promise<void> {
    let refused: Error | undefined;
    for (let next = this.queue[0]; next; next = this.queue[0]) {
      try {
        await this.sink.report(next.node, next.samples, next.at, next.periodS);
      } catch (err) {
        if (!(err instanceof UsageReportError) || err.retryable) {
          throw new Error(`${(err as Error).message} (${this.queue.length} report(s) kept to send again)`, {
            cause: err,
          });
        }
        // Refused for good (a 400 or 403): sending it again would be refused again.
        this.options.onDropped?.(1, err.message);
        refused = err;
      }
      this.shift();
    }
    if (refused) throw refused;
  }
}
