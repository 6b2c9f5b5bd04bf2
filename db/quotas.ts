/**
 * Quotas and teams. A quota limits one namespace of one cluster, or a team (namespaces across
 * clusters), optionally only on one GPU model. Its running totals always equal the sum of the
 * live allocations it covers now: every change of a quota or of a team's members recomputes
 * them while holding the allocations table against concurrent reservations.
 */
import { eq, sql } from 'drizzle-orm';
import { z } from 'zod';
import {
  DNS1123_LABEL_RULE,
  fieldErrorsFromZod,
  isDns1123Label,
  ValidationError,
  VcudaError,
} from '../contract/index.js';
import type { VcudaDb } from './connect.js';
import { retryTransient } from './pg-errors.js';
import { quotas, teamNamespaces } from './schema.js';

const name = z.string().min(1).max(253);
const namespaceName = z.string().refine(isDns1123Label, { message: DNS1123_LABEL_RULE });
/** The most a limit column (PostgreSQL integer) holds. */
export const QUOTA_LIMIT_MAX = 2_147_483_647;
const limit = z.number().int().min(0).max(QUOTA_LIMIT_MAX);

export const quotaRequestSchema = z
  .object({
    name,
    scope: z.enum(['namespace', 'team']),
    cluster: name.optional(),
    namespace: namespaceName.optional(),
    team: name.optional(),
    gpuModel: z.string().max(253).optional(),
    /** Hundredths of a card: two whole cards = 200. */
    coreLimit: limit,
    memoryLimitMiB: limit,
  })
  .superRefine((q, ctx) => {
    if (q.scope === 'namespace' && (!q.cluster || !q.namespace || q.team)) {
      ctx.addIssue({
        code: 'custom',
        path: ['scope'],
        message: 'a namespace quota names cluster and namespace, no team',
      });
    }
    if (q.scope === 'team' && (!q.team || q.cluster || q.namespace)) {
      ctx.addIssue({ code: 'custom', path: ['scope'], message: 'a team quota names a team, no cluster or namespace' });
    }
  });
export type QuotaRequest = z.infer<typeof quotaRequestSchema>;

/** Sets every quota's totals to the sum of the live allocations it covers. */
export async function recomputeQuotaTotals(db: VcudaDb): Promise<void> {
  await db.execute(sql`
    update quotas q set core_used = s.core, memory_used_mib = s.memory
    from (
      select q2.id, coalesce(sum(coalesce(a.quota_core, a.core)), 0)::int as core, coalesce(sum(a.memory_mib), 0)::int as memory
      from quotas q2
      left join allocations a on a.state <> 'released'
        and (q2.gpu_model = '' or a.gpu_model = q2.gpu_model)
        and ((q2.scope = 'namespace' and a.cluster = q2.cluster and a.namespace = q2.namespace)
          or (q2.scope = 'team' and exists (
            select 1 from team_namespaces t
            where t.team = q2.team and t.cluster = a.cluster and t.namespace = a.namespace)))
      group by q2.id
    ) s
    where q.id = s.id and (q.core_used <> s.core or q.memory_used_mib <> s.memory)`);
}

/**
 * Runs an administrative change with reservations held off: SHARE mode on allocations waits
 * for reservations in flight and blocks new ones until the totals are recomputed.
 */
async function changeQuotas(db: VcudaDb, change: (tx: VcudaDb) => Promise<void>): Promise<void> {
  await retryTransient(() =>
    db.transaction(async (tx) => {
      await tx.execute(sql`lock table allocations in share mode`);
      await change(tx);
      await recomputeQuotaTotals(tx);
    }),
  );
}

export function createQuotaAdmin(db: VcudaDb, opts: { clock: () => Date }) {
  return {
    /** Creates or replaces the quota with this name; its totals start at what is already held. */
    async setQuota(request: QuotaRequest): Promise<void> {
      const parsed = quotaRequestSchema.safeParse(request);
      if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), 'quota');
      const q = parsed.data;
      const row = {
        scope: q.scope,
        cluster: q.cluster ?? null,
        namespace: q.namespace ?? null,
        team: q.team ?? null,
        gpuModel: q.gpuModel ?? '',
        coreLimit: q.coreLimit,
        memoryLimitMiB: q.memoryLimitMiB,
        updatedAt: opts.clock(),
      };
      await changeQuotas(db, async (tx) => {
        await tx
          .insert(quotas)
          .values({ name: q.name, ...row })
          .onConflictDoUpdate({ target: quotas.name, set: row });
      });
    },

    async deleteQuota(quotaName: string): Promise<void> {
      const gone = await db.delete(quotas).where(eq(quotas.name, quotaName)).returning({ id: quotas.id });
      if (gone.length === 0) throw new VcudaError('not-found', `quota ${quotaName} does not exist`);
    },

    /** Replaces a team's namespaces; a namespace moves out of any team it was in. */
    async setTeam(team: string, members: { cluster: string; namespace: string }[]): Promise<void> {
      const parsed = z.array(z.object({ cluster: name, namespace: namespaceName })).safeParse(members);
      if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), `team ${team}`);
      const list = parsed.data;
      await changeQuotas(db, async (tx) => {
        await tx.delete(teamNamespaces).where(eq(teamNamespaces.team, team));
        for (const m of list) {
          await tx
            .insert(teamNamespaces)
            .values({ team, ...m })
            .onConflictDoUpdate({ target: [teamNamespaces.cluster, teamNamespaces.namespace], set: { team } });
        }
      });
    },

    async listQuotas() {
      return db.select().from(quotas).orderBy(quotas.name);
    },

    /** Repairs every quota's totals from the allocations (an operator's tool; never needed in normal runs). */
    async recomputeQuotaTotals(): Promise<void> {
      await changeQuotas(db, async () => {});
    },
  };
}
