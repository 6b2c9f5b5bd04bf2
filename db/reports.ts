/**
 * Reporting queries over the ledger. Every report is one SQL statement returning flat rows, so
 * it serves JSON and CSV alike. Days are UTC days. The window defaults to the 7 days before now.
 *
 * - `gpu-hours`: GPU-hours allocated (quota cost / 100 x time held: core, or on a shared MIG
 *   instance core scaled to the part of its card it spans) and used (SM share x time sampled) per
 *   UTC day and namespace, team or cluster (`groupBy`).
 * - `quota-usage`: every quota, its limits and what is held now.
 * - `idle`: live allocations held longer than `idleForMinutes` whose mean SM share over that
 *   span is below `idleBelowPct` (only allocations with samples: no sample, no verdict), each
 *   with its `holder` kind: `pod` (placed by the extender) or `claim` (a DRA ResourceClaim's
 *   share, `pod` then naming the claim and `container` its `<request>/<shareID>`).
 *
 * Claims charged by the DRA charge hook are ledger rows like pods' (holder `claim:<uid>`, the
 * claim's namespace), so GPU-hours, quota use, fragmentation and top consumers count them as is.
 * - `fragmentation`: partly used cards, their free core and memory, and what is stranded
 *   (free memory on a card with no core left, free core on a card with no memory left; the rule
 *   is contract/stranded.ts, the dashboard's and what-if planning's too).
 * - `top-consumers`: namespaces by GPU-hours allocated in the window, with use and efficiency.
 * - `burst`: pods that held memory above their guarantee, per pod (`groupBy` pod, the default) or
 *   summed per namespace, team or cluster (burst-report.ts).
 */
import { type SQL, sql } from 'drizzle-orm';
import { z } from 'zod';
import {
  DRA_CLAIM_HOLDER_PREFIX,
  fieldErrorsFromZod,
  isPartlyUsed,
  NOTHING_LEFT,
  strandedOnCard,
  ValidationError,
  VcudaError,
} from '../contract/index.js';
import { burstReport } from './burst-report.js';
import { rowsOf, type VcudaDb } from './connect.js';

export const reportNames = ['gpu-hours', 'quota-usage', 'idle', 'fragmentation', 'top-consumers', 'burst'] as const;
export type ReportName = (typeof reportNames)[number];

/** Dates PostgreSQL and JavaScript both hold exactly, and that a ledger can have rows for. */
const EARLIEST = Date.UTC(1970, 0, 1);
const LATEST = Date.UTC(10_000, 0, 1) - 1;
const date = z
  .union([z.date(), z.string().min(1).max(64).pipe(z.coerce.date())])
  .refine((d) => !Number.isNaN(d.getTime()), {
    message: 'must be an ISO date such as 2026-03-01 or 2026-03-01T10:00:00Z',
  })
  .refine((d) => Number.isNaN(d.getTime()) || (d.getTime() >= EARLIEST && d.getTime() <= LATEST), {
    message: 'must be within the years 1970 to 9999',
  });

/** Ten years: longer than any allocation the ledger keeps live. */
const MAX_IDLE_MINUTES = 10 * 366 * 24 * 60;
/** Below this a percentage is noise (and tiny doubles reach the database as denormals). */
const MIN_NONZERO_PCT = 1e-6;

export const reportParamsSchema = z.object({
  since: date.optional(),
  until: date.optional(),
  cluster: z.string().min(1).max(253).optional(),
  /** gpu-hours: namespace (default), team or cluster; burst: pod (default) or those. */
  groupBy: z.enum(['pod', 'namespace', 'team', 'cluster']).optional(),
  idleBelowPct: z.coerce
    .number()
    .min(0)
    .max(100)
    .refine((v) => v === 0 || v >= MIN_NONZERO_PCT, { message: `must be 0 or at least ${MIN_NONZERO_PCT}` })
    .default(5),
  /** Fractions allowed (a test or a demo looks at seconds, not half hours). */
  idleForMinutes: z.coerce.number().positive().max(MAX_IDLE_MINUTES).default(30),
  limit: z.coerce.number().int().positive().max(10_000).default(10),
});
export type ReportParams = z.input<typeof reportParamsSchema>;

export type ReportValue = string | number | null;
export type Report = {
  name: ReportName;
  /** The window actually used, ISO strings. */
  since: string;
  until: string;
  columns: string[];
  rows: Record<string, ReportValue>[];
};

const DAY_MS = 86_400_000;
const iso = (column: SQL) => sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

type Window = { since: Date; until: Date; now: Date; cluster: string | undefined };

/**
 * The window split for the daily roll-up: whole UTC days [fullFrom, fullTo) are read from
 * `allocation_days` (released allocations); the partial days at the edges, and allocations still
 * held, are computed from the rows.
 */
function splitWindow(w: Window): { fullFrom: string; fullTo: string } {
  const fullFrom = Math.ceil(w.since.getTime() / DAY_MS) * DAY_MS;
  const fullTo = Math.floor(w.until.getTime() / DAY_MS) * DAY_MS;
  if (fullFrom >= fullTo) return { fullFrom: w.until.toISOString(), fullTo: w.until.toISOString() };
  return { fullFrom: new Date(fullFrom).toISOString(), fullTo: new Date(fullTo).toISOString() };
}

/** GPU-hours allocated per cluster, namespace and UTC day. */
function allocatedPerNamespaceDay(w: Window): SQL {
  const since = sql`${w.since.toISOString()}::timestamptz`;
  const until = sql`${w.until.toISOString()}::timestamptz`;
  const now = sql`${w.now.toISOString()}::timestamptz`;
  const split = splitWindow(w);
  const fullFrom = sql`${split.fullFrom}::timestamptz`;
  const fullTo = sql`${split.fullTo}::timestamptz`;
  const inCluster = (column: SQL) => (w.cluster ? sql`and ${column} = ${w.cluster}` : sql``);
  return sql`
    select cluster, namespace, day, sum(allocated) as allocated from (
      select cluster, namespace, d as day,
        sum(extract(epoch from least(e, d + interval '1 day') - greatest(s, d)) * core / 100.0) / 3600.0 as allocated
      from (
        -- released rows, only on the partial days at the window's edges
        select a.cluster, a.namespace, coalesce(a.quota_core, a.core) as core, greatest(a.reserved_at, ${since}) as s,
          least(a.released_at, ${until}) as e, false as is_live
        from allocations a
        where a.state = 'released'
          and ((a.released_at > ${since} and a.reserved_at < ${fullFrom})
            or (a.released_at > ${fullTo} and a.reserved_at < ${until}))
          ${inCluster(sql`a.cluster`)}
        union all
        -- rows still held, over the whole window
        select a.cluster, a.namespace, coalesce(a.quota_core, a.core), greatest(a.reserved_at, ${since}), least(${now}, ${until}), true
        from allocations a
        where a.state <> 'released' and a.reserved_at < ${until} ${inCluster(sql`a.cluster`)}
      ) c,
        generate_series(date_trunc('day', s at time zone 'UTC') at time zone 'UTC', e, interval '1 day') as d
      where e > s and d < e and (is_live or d < ${fullFrom} or d >= ${fullTo})
      group by 1, 2, 3
      union all
      select cluster, namespace, day, gpu_seconds / 3600.0
      from allocation_days
      where day >= ${fullFrom} and day < ${fullTo} ${inCluster(sql`cluster`)}
    ) x
    group by 1, 2, 3`;
}

/** GPU-hours used per cluster, namespace and UTC day: whole days from the roll-up, edges from samples. */
function usedPerNamespaceDay(w: Window): SQL {
  const split = splitWindow(w);
  const since = sql`${w.since.toISOString()}::timestamptz`;
  const until = sql`${w.until.toISOString()}::timestamptz`;
  const fullFrom = sql`${split.fullFrom}::timestamptz`;
  const fullTo = sql`${split.fullTo}::timestamptz`;
  const inCluster = w.cluster ? sql`and cluster = ${w.cluster}` : sql``;
  return sql`
    select cluster, namespace, day, sum(used) as used from (
      -- UTC day number by division of a double (date_part), far cheaper per row than date_trunc
      -- with a zone or extract's numeric.
      -- A shared MIG instance's samples (its SM share is of the instance) count its quota weight.
      select u.cluster, u.namespace, to_timestamp(86400 * floor(date_part('epoch', u.sampled_at) / 86400)) as day,
        sum(u.sm_pct * u.period_s * coalesce(c.quota_weight, 100))::float8 / 36000000.0 as used
      from usage_samples u left join cards c on c.uuid = u.card_uuid
      where ((u.sampled_at >= ${since} and u.sampled_at < ${fullFrom}) or (u.sampled_at >= ${fullTo} and u.sampled_at < ${until}))
        ${w.cluster ? sql`and u.cluster = ${w.cluster}` : sql``}
      group by 1, 2, 3
      union all
      select cluster, namespace, day, used_gpu_seconds / 3600.0
      from usage_days
      where day >= ${fullFrom} and day < ${fullTo} ${inCluster}
    ) x
    group by 1, 2, 3`;
}

/**
 * GPU-hours allocated and used per cluster, namespace and UTC day. Both sides are aggregated
 * on their own narrow keys first; teams are joined onto the few aggregated rows afterwards.
 */
function hoursPerNamespaceDay(w: Window): SQL {
  return sql`
    with al as (${allocatedPerNamespaceDay(w)}),
    us as (${usedPerNamespaceDay(w)})
    select coalesce(al.cluster, us.cluster) as cluster, coalesce(al.namespace, us.namespace) as namespace,
      coalesce(t.team, '') as team, coalesce(al.day, us.day) as day,
      coalesce(al.allocated, 0) as allocated, coalesce(us.used, 0) as used
    from al
    full join us on us.cluster = al.cluster and us.namespace = al.namespace and us.day = al.day
    left join team_namespaces t
      on t.cluster = coalesce(al.cluster, us.cluster) and t.namespace = coalesce(al.namespace, us.namespace)`;
}

const groupColumns = {
  namespace: ['cluster', 'namespace', 'team'],
  team: ['team'],
  cluster: ['cluster'],
} as const;

function gpuHours(w: Window, groupBy: keyof typeof groupColumns): { sql: SQL; columns: string[] } {
  const keys = groupColumns[groupBy];
  const keyList = sql.raw(keys.join(', '));
  const query = sql`
    select to_char(day at time zone 'UTC', 'YYYY-MM-DD') as day, ${keyList},
      round(sum(allocated)::numeric, 4)::float8 as "allocatedGpuHours",
      round(sum(used)::numeric, 4)::float8 as "usedGpuHours"
    from (${hoursPerNamespaceDay(w)}) h
    group by h.day, ${keyList}
    order by 1, ${sql.raw(keys.map((_, i) => String(i + 2)).join(', '))}`;
  return { sql: query, columns: ['day', ...keys, 'allocatedGpuHours', 'usedGpuHours'] };
}

function topConsumers(w: Window, limit: number): SQL {
  return sql`
    select cluster, namespace, team,
      round(sum(allocated)::numeric, 4)::float8 as "allocatedGpuHours",
      round(sum(used)::numeric, 4)::float8 as "usedGpuHours",
      case when sum(allocated) > 0 then round((100 * sum(used) / sum(allocated))::numeric, 1)::float8 end
        as "efficiencyPct"
    from (${hoursPerNamespaceDay(w)}) h
    group by cluster, namespace, team
    having sum(allocated) > 0
    order by sum(allocated) desc, cluster, namespace
    limit ${limit}`;
}

function quotaUsage(cluster: string | undefined): SQL {
  return sql`
    select name as quota, scope,
      case when scope = 'team' then team else cluster || '/' || namespace end as subject,
      gpu_model as "gpuModel", core_limit as "coreLimit", core_used as "coreUsed",
      case when core_limit > 0 then round(100.0 * core_used / core_limit, 1)::float8 end as "corePct",
      memory_limit_mib as "memoryLimitMiB", memory_used_mib as "memoryUsedMiB",
      case when memory_limit_mib > 0 then round(100.0 * memory_used_mib / memory_limit_mib, 1)::float8 end as "memoryPct"
    from quotas
    ${cluster ? sql`where scope = 'team' or cluster = ${cluster}` : sql``}
    order by name`;
}

/** `claim` for a DRA claim's ledger holder (`claim:<uid>`), `pod` for a pod's UID. */
const holderKind = (podUid: SQL) =>
  sql`case when starts_with(${podUid}, ${DRA_CLAIM_HOLDER_PREFIX}) then 'claim' else 'pod' end`;

function idle(w: Window, belowPct: number, forMinutes: number): SQL {
  const from = new Date(w.now.getTime() - forMinutes * 60_000).toISOString();
  return sql`
    select a.cluster, a.namespace, ${holderKind(sql`a.pod_uid`)} as holder, a.pod, a.container, a.node,
      a.card_uuid as card, a.core,
      a.memory_mib as "memoryMiB", ${iso(sql`a.reserved_at`)} as "heldSince",
      round((sum(u.sm_pct * u.period_s) / nullif(sum(u.period_s), 0))::numeric, 2)::float8 as "meanSmPct",
      count(u.id)::int as samples
    from allocations a
    join usage_samples u on u.cluster = a.cluster and u.pod_uid = a.pod_uid and u.container = a.container
      and u.card_uuid = a.card_uuid and u.sampled_at >= ${from}::timestamptz
    where a.state <> 'released' and a.reserved_at <= ${from}::timestamptz
      ${w.cluster ? sql`and a.cluster = ${w.cluster}` : sql``}
    group by a.id
    having sum(u.sm_pct * u.period_s) / nullif(sum(u.period_s), 0) < ${belowPct}
    order by a.core desc, a.cluster, a.namespace, a.pod, a.container`;
}

/** Cards in use, with what the rows need to tell partly used ones and what they strand (see withStranded). */
function fragmentation(cluster: string | undefined): SQL {
  return sql`
    select cluster, node, uuid as card, model, 100 - core_used as "coreFree",
      memory_mib - memory_used_mib as "memoryFreeMiB", memory_mib as "memoryMiB", core_used as "coreUsed",
      memory_used_mib as "memoryUsedMiB"
    from cards
    where is_present and (core_used > 0 or memory_used_mib > 0)
      ${cluster ? sql`and cluster = ${cluster}` : sql``}
    order by cluster, node, uuid`;
}

type CardRow = Record<string, ReportValue> & { memoryMiB: number; coreUsed: number; memoryUsedMiB: number };

/**
 * The fragmentation report's rows: the partly used cards and what each strands, by the one rule
 * every capacity view uses (contract/stranded.ts), a card with nothing of one kind left stranding the other.
 */
function withStranded(rows: readonly CardRow[]): Record<string, ReportValue>[] {
  return rows.filter(isPartlyUsed).map(({ memoryMiB, coreUsed, memoryUsedMiB, ...row }) => {
    const stranded = strandedOnCard({ memoryMiB, coreUsed, memoryUsedMiB }, NOTHING_LEFT);
    return { ...row, strandedCore: stranded.core, strandedMemoryMiB: stranded.memoryMiB };
  });
}

const fixedColumns: Record<Exclude<ReportName, 'gpu-hours' | 'burst'>, string[]> = {
  'quota-usage': [
    'quota',
    'scope',
    'subject',
    'gpuModel',
    'coreLimit',
    'coreUsed',
    'corePct',
    'memoryLimitMiB',
    'memoryUsedMiB',
    'memoryPct',
  ],
  idle: [
    'cluster',
    'namespace',
    'holder',
    'pod',
    'container',
    'node',
    'card',
    'core',
    'memoryMiB',
    'heldSince',
    'meanSmPct',
    'samples',
  ],
  fragmentation: ['cluster', 'node', 'card', 'model', 'coreFree', 'memoryFreeMiB', 'strandedCore', 'strandedMemoryMiB'],
  'top-consumers': ['cluster', 'namespace', 'team', 'allocatedGpuHours', 'usedGpuHours', 'efficiencyPct'],
};

/** gpu-hours is per day and group: a pod is no group of it. */
function gpuHoursGroup(groupBy: ReportParams['groupBy']): keyof typeof groupColumns {
  if (groupBy === 'pod') {
    throw new ValidationError(
      [{ path: 'groupBy', rule: 'enum', message: 'groupBy: gpu-hours groups by namespace, team or cluster' }],
      'report gpu-hours parameters',
    );
  }
  return groupBy ?? 'namespace';
}

export function isReportName(name: string): name is ReportName {
  return (reportNames as readonly string[]).includes(name);
}

export async function runReport(db: VcudaDb, name: string, params: ReportParams, clock: () => Date): Promise<Report> {
  if (!isReportName(name)) {
    throw new VcudaError('not-found', `report ${name} does not exist; reports: ${reportNames.join(', ')}`);
  }
  const parsed = reportParamsSchema.safeParse(params);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), `report ${name} parameters`);
  const p = parsed.data;
  const now = clock();
  const until = p.until ?? now;
  const since = p.since ?? new Date(until.getTime() - 7 * DAY_MS);
  if (since.getTime() >= until.getTime()) {
    throw new ValidationError(
      [{ path: 'since', rule: 'before-until', message: 'since: must be before until' }],
      `report ${name} parameters`,
    );
  }
  const w: Window = { since, until, now, cluster: p.cluster };
  let query: SQL;
  let columns: string[];
  if (name === 'gpu-hours') {
    ({ sql: query, columns } = gpuHours(w, gpuHoursGroup(p.groupBy)));
  } else if (name === 'burst') {
    ({ sql: query, columns } = burstReport(w, p.groupBy ?? 'pod'));
  } else {
    columns = fixedColumns[name];
    query =
      name === 'quota-usage'
        ? quotaUsage(p.cluster)
        : name === 'idle'
          ? idle(w, p.idleBelowPct, p.idleForMinutes)
          : name === 'fragmentation'
            ? fragmentation(p.cluster)
            : topConsumers(w, p.limit);
  }
  const rows = await db.transaction(async (tx) => {
    // Row estimates through generate_series are poor, and a JIT compile triggered by them costs
    // seconds on queries that run in milliseconds; sorts of a week of samples fit in 64 MB.
    await tx.execute(sql`set local jit = off`);
    await tx.execute(sql`set local work_mem = '64MB'`);
    return rowsOf<Record<string, ReportValue>>(await tx.execute(query));
  });
  if (name === 'fragmentation') {
    return {
      name,
      since: since.toISOString(),
      until: until.toISOString(),
      columns,
      rows: withStranded(rows as CardRow[]),
    };
  }
  return { name, since: since.toISOString(), until: until.toISOString(), columns, rows };
}

/** RFC 4180 CSV: a header row, then one line per row; quotes only where needed. */
export function formatCsv(report: Pick<Report, 'columns' | 'rows'>): string {
  const cell = (v: ReportValue | undefined) => {
    if (v === null || v === undefined) return '';
    const s = String(v);
    return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
  };
  const lines = [report.columns.map((c) => cell(c)).join(',')];
  for (const row of report.rows) lines.push(report.columns.map((c) => cell(row[c])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

/** A report runner bound to one database and clock, as the HTTP API and the CLI use it. */
export function createReportRunner(db: VcudaDb, opts: { clock: () => Date }) {
  return {
    names: reportNames,
    run: (name: string, params: ReportParams) => runReport(db, name, params, opts.clock),
  };
}
