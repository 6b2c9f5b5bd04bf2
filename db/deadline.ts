/**
 * Deadlines on ledger calls. postgres.js waits for an unreachable server as long as it takes: a
 * refused connection is retried with a growing backoff, a silent one waits on TCP. Callers that
 * answer someone on a clock (the API server's webhook timeout, kube-scheduler's extender timeout,
 * the kubelet's readiness probe) race the call against a timer instead, and decide what a late
 * answer means for them. The call itself is not cancelled: it may still complete after the
 * deadline, which each caller accounts for.
 */
import { VcudaError } from '../contract/index.js';

/** The ledger did not answer in time; `code` is `unavailable` (HTTP 503). */
export class LedgerTimeoutError extends VcudaError {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
  ) {
    super('unavailable', `${what}: no answer from the ledger within ${timeoutMs} ms`);
  }
}

/** `work`, or a LedgerTimeoutError when it has not settled within `timeoutMs`. */
export function withDeadline<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new LedgerTimeoutError(what, timeoutMs)), timeoutMs);
  });
  // A late rejection of `work` after the deadline must not surface as unhandled.
  work.catch(() => undefined);
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}
