/**
 * Bind's ledger calls with a deadline each, so a ledger that is down or silent fails the bind
 * within kube-scheduler's extender timeout (its `httpTimeout`) instead of holding it open; the
 * scheduler gets the error and retries the pod.
 *
 * A call that missed its deadline may still complete. For registration, confirm and release that
 * is harmless (each is idempotent and what the bind wanted anyway). A reservation that commits
 * after its bind already failed would hold cards nobody will use: it is released as soon as it
 * lands, and only when it was this call that made it (`reused: false`) — a reservation another
 * attempt of the pod made is never touched. Should that release fail too, the rows stay
 * `reserved` and are settled after `reservationTimeoutSeconds` (starters/ledger-follow.ts).
 */
import { LedgerTimeoutError, withDeadline } from '../../db/deadline.js';
import type { BindLedger } from './binder.js';

export type LedgerDeadlineOptions = {
  timeoutMs: number;
  /** A late reservation was found and released (or its release failed: `err`). */
  onLateReservation?: (podUid: string, err?: unknown) => void;
};

export function withLedgerDeadlines(ledger: BindLedger, options: LedgerDeadlineOptions): BindLedger {
  const { timeoutMs } = options;
  return {
    upsertNode: (cluster, node, cards) =>
      withDeadline(ledger.upsertNode(cluster, node, cards), timeoutMs, `register node ${node}`),
    confirmMany: (cluster, podUids) =>
      withDeadline(ledger.confirmMany(cluster, podUids), timeoutMs, `confirm ${podUids.length} pod(s)`),
    release: (cluster, podUid) => withDeadline(ledger.release(cluster, podUid), timeoutMs, `release ${podUid}`),
    async reserve(req) {
      const work = ledger.reserve(req);
      try {
        return await withDeadline(work, timeoutMs, `reserve ${req.namespace}/${req.pod}`);
      } catch (err) {
        if (err instanceof LedgerTimeoutError) {
          work.then(
            ({ reused }) => {
              if (reused) return;
              ledger.release(req.cluster, req.podUid).then(
                () => options.onLateReservation?.(req.podUid),
                (releaseErr: unknown) => options.onLateReservation?.(req.podUid, releaseErr),
              );
            },
            () => undefined,
          );
        }
        throw err;
      }
    },
  };
}
