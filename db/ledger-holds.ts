/**
 * What the ledger holds, pod by pod, as a control-plane replica needs it to act on it: every live
 * hold of a cluster with its cards, whether its bind confirmed it, and whether the replica that
 * made it still holds its lease (migration 0014). Placement counts these holds (another replica's
 * in-flight reservation takes its cards here too), and the holds a dead replica left, or that
 * nobody confirmed in time, are settled from them (control-plane/extender/unconfirmed-holds.ts).
 *
 * Leases use the database's clock (`clock_timestamp()`) for both writing and judging, so replicas
 * whose clocks disagree still agree on whose lease has lapsed.
 */

/** A statement with numbered placeholders and its rows. */
export type LedgerQuery = <T>(text: string, params: unknown[]) => Promise<T[]>;

/** One card of a hold: what the pod's containers keep of it together. */
export type HeldCard = { cardUuid: string; core: number; memoryMiB: number };

export type LedgerHold = {
  podUid: string;
  namespace: string;
  pod: string;
  node: string;
  /** Confirmed by its bind (its Binding exists); otherwise reserved and in flight or left behind. */
  isBound: boolean;
  reservedAt: Date;
  /** The replica that reserved it; null for holds made before owners were recorded. */
  owner: string | null;
  /** Its owner's lease has lapsed (or is gone): the replica died or lost the ledger. */
  isOwnerLapsed: boolean;
  cards: HeldCard[];
};

const LIVE_HOLDS_SQL = `select h.pod_uid as "podUid", h.namespace, h.pod, min(a.node) as node, h.reserved_at as "reservedAt",
  h.owner, bool_and(a.state = 'bound') as "isBound",
  (h.owner is not null and coalesce(l.expires_at <= clock_timestamp(), true)) as "isOwnerLapsed",
  jsonb_agg(jsonb_build_object('cardUuid', a.card_uuid, 'core', a.core, 'memoryMiB', a.memory_mib)) as cards
from pod_holds h
join allocations a on a.cluster = h.cluster and a.pod_uid = h.pod_uid and a.state <> 'released'
left join replica_leases l on l.replica = h.owner
where h.cluster = $1 and (h.reserved_at >= $2::timestamptz or exists (
  select 1 from allocations r where r.cluster = h.cluster and r.pod_uid = h.pod_uid and r.state = 'reserved'))
group by h.pod_uid, h.namespace, h.pod, h.reserved_at, h.owner, l.expires_at`;

const RENEW_LEASE_SQL = `insert into replica_leases (replica, cluster, renewed_at, expires_at)
values ($1, $2, clock_timestamp(), clock_timestamp() + $3::int * interval '1 millisecond')
on conflict (replica) do update set cluster = excluded.cluster, renewed_at = excluded.renewed_at,
  expires_at = excluded.expires_at`;

// Leases lapsed a day ago name replicas long gone; their holds read as lapsed without them.
const FORGET_LEASES_SQL = `delete from replica_leases where expires_at < clock_timestamp() - interval '1 day'`;

type HoldRow = Omit<LedgerHold, 'cards' | 'reservedAt'> & { reservedAt: Date | string; cards: unknown };

/** Per card, the sum of the pod's rows on it (several containers may share a card). */
function cardsOf(value: unknown): HeldCard[] {
  const rows = (typeof value === 'string' ? JSON.parse(value) : value) as HeldCard[];
  const byCard = new Map<string, HeldCard>();
  for (const r of rows) {
    const cur = byCard.get(r.cardUuid);
    byCard.set(r.cardUuid, {
      cardUuid: r.cardUuid,
      core: (cur?.core ?? 0) + Number(r.core),
      memoryMiB: (cur?.memoryMiB ?? 0) + Number(r.memoryMiB),
    });
  }
  return [...byCard.values()];
}

export function createLedgerHolds(query: LedgerQuery) {
  return {
    /**
     * The cluster's live holds that a replica's view may not count yet, with their cards and their
     * owner's standing: every unconfirmed one, and the confirmed ones reserved since `since` (an
     * older Binding is long in every replica's watch; reading only these keeps the read small on a
     * large cluster).
     */
    async liveHolds(cluster: string, since: Date): Promise<LedgerHold[]> {
      const rows = await query<HoldRow>(LIVE_HOLDS_SQL, [cluster, since.toISOString()]);
      return rows.map((r) => ({
        podUid: r.podUid,
        namespace: r.namespace,
        pod: r.pod,
        node: r.node,
        isBound: Boolean(r.isBound),
        reservedAt: new Date(r.reservedAt),
        owner: r.owner ?? null,
        isOwnerLapsed: Boolean(r.isOwnerLapsed),
        cards: cardsOf(r.cards),
      }));
    },

    /** Takes or extends `replica`'s lease for `ttlMs` from now (the database's now). */
    async renewLease(replica: string, cluster: string, ttlMs: number): Promise<void> {
      await query(RENEW_LEASE_SQL, [replica, cluster, Math.round(ttlMs)]);
    },

    /** Deletes the leases of replicas gone for a day. */
    async forgetOldLeases(): Promise<void> {
      await query(FORGET_LEASES_SQL, []);
    },
  };
}
