/**
 * The `burst` report: pods that held memory above their guarantee (vcuda-memory-limit) in the
 * window, from the usage samples. Per pod: the peak of its burst (its containers' burst summed at
 * each sample; in rolled-up hours, each container's peak in the hour), the peak of it on the host,
 * and the seconds sampled while some of it was on the host (each sample counts its whole period:
 * the figure's resolution is the node agents' sampling period). Grouped by namespace, team or
 * cluster: the pods that burst, the largest pod peak, and the pods' evicted seconds summed.
 */
import { type SQL, sql } from 'drizzle-orm';

export type BurstGroupBy = 'pod' | 'namespace' | 'team' | 'cluster';
export type BurstWindow = { since: Date; until: Date; cluster: string | undefined };

/** One row per bursting pod in the window, with its team. */
function burstPerPod(w: BurstWindow): SQL {
  return sql`
    with per_instant as (
      select cluster, namespace, pod_uid, sampled_at,
        sum(memory_burst_mib) as burst, sum(memory_burst_evicted_mib) as evicted, max(burst_evicted_s) as evicted_s
      from usage_samples
      where sampled_at >= ${w.since.toISOString()}::timestamptz and sampled_at < ${w.until.toISOString()}::timestamptz
        and (memory_burst_mib > 0 or burst_evicted_s > 0)
        ${w.cluster ? sql`and cluster = ${w.cluster}` : sql``}
      group by 1, 2, 3, 4
    ), per_pod as (
      select cluster, namespace, pod_uid, max(burst) as peak, max(evicted) as peak_evicted,
        sum(evicted_s) as evicted_s
      from per_instant
      group by 1, 2, 3
    )
    select p.cluster, p.namespace, coalesce(t.team, '') as team,
      coalesce((select a.pod from allocations a where a.cluster = p.cluster and a.pod_uid = p.pod_uid limit 1),
        p.pod_uid) as pod,
      p.peak::int as peak, p.peak_evicted::int as peak_evicted, p.evicted_s::float8 as evicted_s
    from per_pod p
    left join team_namespaces t on t.cluster = p.cluster and t.namespace = p.namespace`;
}

const groupKeys: Record<Exclude<BurstGroupBy, 'pod'>, string[]> = {
  namespace: ['cluster', 'namespace', 'team'],
  team: ['team'],
  cluster: ['cluster'],
};

export function burstReport(w: BurstWindow, groupBy: BurstGroupBy): { sql: SQL; columns: string[] } {
  if (groupBy === 'pod') {
    return {
      sql: sql`
        select cluster, namespace, team, pod, peak as "peakBurstMiB", peak_evicted as "peakEvictedMiB",
          round(evicted_s::numeric, 1)::float8 as "evictedSeconds"
        from (${burstPerPod(w)}) b
        order by peak desc, cluster, namespace, pod`,
      columns: ['cluster', 'namespace', 'team', 'pod', 'peakBurstMiB', 'peakEvictedMiB', 'evictedSeconds'],
    };
  }
  const keys = groupKeys[groupBy];
  const keyList = sql.raw(keys.join(', '));
  return {
    sql: sql`
      select ${keyList}, count(*)::int as "burstingPods", max(peak)::int as "peakBurstMiB",
        round(sum(evicted_s)::numeric, 1)::float8 as "evictedSeconds"
      from (${burstPerPod(w)}) b
      group by ${keyList}
      order by ${keyList}`,
    columns: [...keys, 'burstingPods', 'peakBurstMiB', 'evictedSeconds'],
  };
}
