/**
 * This replica's standing in the shared ledger, and what it does with the other replicas' holds:
 * it renews its lease (so its reservations are known to belong to a live replica), counts every
 * live ledger hold in placement (another replica's bind in flight takes its cards here too, so no
 * bind goes to a card the ledger will refuse), and settles unconfirmed holds once their owner's
 * lease lapsed or their time is up (extender/unconfirmed-holds.ts), so a dead replica's leftovers
 * cost seconds.
 */
import { withDeadline } from '../../db/deadline.js';
import type { Ledger } from '../../db/ledger.js';
import type { LedgerHold } from '../../db/ledger-holds.js';
import type { BindLease } from '../extender/binder.js';
import { isDueForSettling, settleHold, type UnconfirmedHoldsDeps } from '../extender/unconfirmed-holds.js';
import { holdOfLedgerReservation, verifiedAssignmentOf } from '../placement/holds/index.js';
import type { ClusterView } from './cluster.js';
import { type Closer, every, type StartContext } from './context.js';

/** How often the ledger's holds are read: the longest another replica's hold goes uncounted here. */
const FOLLOW_MS = 1000;
/** A lease is trusted this much less long than it was taken for: time for a Binding in flight to land. */
const LEASE_MARGIN_MS = 1500;
/**
 * A pod that ended here is not counted again from a read of the ledger taken before its release
 * committed; by then a later read shows it released.
 */
const ENDED_MEMORY_MS = 10_000;
/** Confirmed holds younger than this are read too: their pods' Bindings may not be in the watch yet. */
const RECENT_HOLDS_MS = 60_000;
/** One hold's settling: a read of its pod, a verification and a ledger write. */
const SETTLE_DEADLINE_MS = 10_000;
/** Holds settled at once: a dead replica's many leftovers do not become a burst of pod reads. */
const SETTLE_AT_ONCE = 16;
/** A hold kept (its pod bound here without an assignment that verifies) is looked at again after this. */
const KEPT_RECHECK_MS = 30_000;

export type ReplicaLease = BindLease & { close: Closer };

/** Takes this replica's lease now and renews it three times per lease period. */
export async function startReplicaLease(
  { config, log }: StartContext,
  deps: { ledger: Pick<Ledger, 'renewLease' | 'forgetOldLeases'>; replica: string },
): Promise<ReplicaLease> {
  const ttlMs = config.replicaLeaseSeconds * 1000;
  let heldUntil = 0;
  let renewing = false;
  const renew = async () => {
    if (renewing) return;
    renewing = true;
    // From before the call: the database counts its period from later, never earlier.
    const sentAt = performance.now();
    try {
      const renewal = deps.ledger.renewLease(deps.replica, config.clusterName, ttlMs);
      // A silent ledger must not hold the renewals up: the next one tries again.
      await withDeadline(renewal, config.database.callTimeoutMs, 'renew the ledger lease');
      heldUntil = sentAt + ttlMs - Math.min(LEASE_MARGIN_MS, ttlMs / 3);
    } catch (err) {
      log.warn({ err, replica: deps.replica }, 'renewing the ledger lease failed');
    } finally {
      renewing = false;
    }
  };
  await renew();
  deps.ledger.forgetOldLeases().catch((err) => log.debug({ err }, 'forgetting old leases failed'));
  const stop = every(Math.max(200, Math.floor(ttlMs / 3)), () => void renew());
  return { isHeld: () => performance.now() < heldUntil, close: stop };
}

/**
 * Settles the unconfirmed holds that are due, a few at a time, each pod once at a time; a kept
 * hold (its pod bound here without an assignment that verifies) is looked at again later.
 */
function holdSettler({ config, clock, log }: StartContext, deps: { ledger: Ledger; cluster: ClusterView }) {
  const { cluster } = deps;
  const settling = new Set<string>();
  /** Pod uid -> when a kept hold may be looked at again. */
  const kept = new Map<string, number>();
  const settleDeps: UnconfirmedHoldsDeps = {
    cluster: config.clusterName,
    ledger: deps.ledger,
    readPod: (namespace, name) => cluster.kube.readPod(namespace, name),
    verifiedAssignment: (pod) =>
      verifiedAssignmentOf(pod, (token) => cluster.state.trust.verify(token), {
        names: cluster.names,
        memoryUnitMiB: config.memoryUnitMiB,
      }),
  };
  const settle = (hold: LedgerHold) => {
    settling.add(hold.podUid);
    // Its pod is tried again next round if the API server or the ledger does not answer in time.
    const what = `settle the hold of ${hold.namespace}/${hold.pod}`;
    withDeadline(settleHold(settleDeps, hold), SETTLE_DEADLINE_MS, what)
      .then((o) => {
        const fields = { pod: o.pod, podUid: o.podUid, why: o.why };
        if (o.action === 'keep') {
          kept.set(o.podUid, performance.now() + KEPT_RECHECK_MS);
          log.warn(fields, 'unconfirmed ledger hold kept');
        } else {
          log.info(fields, o.action === 'confirm' ? 'confirmed a hold no bind confirmed' : 'released a stale hold');
        }
      })
      .catch((err) => log.warn({ err, podUid: hold.podUid }, 'settling a ledger hold failed; retried'))
      .finally(() => settling.delete(hold.podUid));
  };
  return (holds: readonly LedgerHold[]) => {
    const now = performance.now();
    for (const [uid, until] of kept) if (now > until) kept.delete(uid);
    const nowMs = clock().getTime();
    const timeoutMs = config.reservationTimeoutSeconds * 1000;
    for (const h of holds) {
      if (settling.size >= SETTLE_AT_ONCE) break;
      if (settling.has(h.podUid) || kept.has(h.podUid)) continue;
      if (isDueForSettling(h, nowMs, timeoutMs)) settle(h);
    }
  };
}

/**
 * Every FOLLOW_MS: the cluster's live ledger holds go to placement, and the unconfirmed ones due
 * are settled.
 */
export type LedgerHoldsFollower = {
  close: Closer;
  /** Reads the holds now, not at the next tick: a ledger refusal means this view missed one. */
  readNow(): void;
};

export function followLedgerHolds(
  ctx: StartContext,
  deps: { ledger: Ledger; cluster: ClusterView; replica: string },
): LedgerHoldsFollower {
  const { config, log } = ctx;
  const { ledger, cluster } = deps;
  const { state } = cluster;
  const ended = new Map<string, number>();
  const unsubscribe = state.onCapacityFreed((e) => {
    if (e.why === 'pod-ended' && e.pod?.uid) ended.set(e.pod.uid, performance.now());
  });
  const settleDue = holdSettler(ctx, deps);
  let reading = false;
  let again = false;
  let closed = false;
  const follow = async () => {
    const now = performance.now();
    for (const [uid, at] of ended) if (now - at > ENDED_MEMORY_MS) ended.delete(uid);
    const holds = await withDeadline(
      ledger.liveHolds(config.clusterName, new Date(ctx.clock().getTime() - RECENT_HOLDS_MS)),
      config.database.callTimeoutMs,
      'read the ledger holds',
    );
    state.setLedgerHolds(
      holds
        .filter((h) => !ended.has(h.podUid))
        .map((h) => ({ ...h, isOwn: h.owner === deps.replica, hold: holdOfLedgerReservation(h) })),
    );
    settleDue(holds);
  };
  const read = (): void => {
    // A read started after close would query a ledger being closed, and could keep it from closing.
    if (closed) return;
    if (reading) {
      // A read already under way may have started before the hold was written: read once more.
      again = true;
      return;
    }
    reading = true;
    again = false;
    follow()
      .catch((err) => log.warn({ err }, 'reading the ledger holds failed'))
      .finally(() => {
        reading = false;
        if (again) read();
      });
  };
  const stop = every(FOLLOW_MS, () => {
    if (!reading) read();
  });
  return {
    close: () => {
      closed = true;
      stop();
      unsubscribe();
    },
    readNow: read,
  };
}
