/**
 * An independent check of invariants 1 and 5: recomputes from the allocation rows (not from
 * the running totals the ledger maintains) which cards and quotas hold more than their limit,
 * and which running totals drifted from the rows. Used by the race test and the benchmark, and
 * by operators after an incident.
 */
import { sql } from 'drizzle-orm';
import { rowsOf, type VcudaDb } from './connect.js';

/** Cards and quotas whose live allocations exceed their limit, one line each; empty is good. */
export async function findOvercommit(db: VcudaDb): Promise<string[]> {
  const result = await db.execute(sql`
    select 'card ' || c.uuid || ': core ' || s.core || '/100, memory ' || s.memory || '/' || c.memory_mib || ' MiB' as what
    from cards c join (
      select card_uuid, sum(core) as core, sum(memory_mib) as memory
      from allocations where state <> 'released' group by card_uuid
    ) s on s.card_uuid = c.uuid
    where s.core > 100 or s.memory > c.memory_mib
    union all
    select 'quota ' || q.name || ': core ' || sum(coalesce(a.quota_core, a.core)) || '/' || q.core_limit
      || ', memory ' || sum(a.memory_mib) || '/' || q.memory_limit_mib || ' MiB'
    from quotas q join allocations a on a.state <> 'released'
      and (q.gpu_model = '' or a.gpu_model = q.gpu_model)
      and ((q.scope = 'namespace' and a.cluster = q.cluster and a.namespace = q.namespace)
        or (q.scope = 'team' and exists (select 1 from team_namespaces t
              where t.team = q.team and t.cluster = a.cluster and t.namespace = a.namespace)))
    group by q.id, q.name, q.core_limit, q.memory_limit_mib
    having sum(coalesce(a.quota_core, a.core)) > q.core_limit or sum(a.memory_mib) > q.memory_limit_mib`);
  return rowsOf<{ what: string }>(result).map((r) => r.what);
}

/** Cards whose running totals differ from the sum of their live allocations. */
export async function findCardDrift(db: VcudaDb): Promise<string[]> {
  const result = await db.execute(sql`
    select c.uuid from cards c left join (
      select card_uuid, sum(core)::int as core, sum(memory_mib)::int as memory
      from allocations where state <> 'released' group by card_uuid) s on s.card_uuid = c.uuid
    where c.core_used <> coalesce(s.core, 0) or c.memory_used_mib <> coalesce(s.memory, 0)
    order by c.uuid`);
  return rowsOf<{ uuid: string }>(result).map((r) => r.uuid);
}
