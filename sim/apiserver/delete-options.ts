/**
 * The options of a DELETE as kube-apiserver reads them (apiserver's `DeleteResource` handler): a
 * request with a body is decoded as `DeleteOptions` and its query options are ignored; only a
 * request without a body reads `gracePeriodSeconds` and `dryRun` from the query. A client that
 * sends `?gracePeriodSeconds=0` beside a JSON body therefore gets the pod's own grace period.
 */
import { z } from 'zod';
import { badRequest, internal } from './api-status.js';
import type { DeleteOptions, UserInfo } from './resource-handlers.js';

const deleteOptionsBody = z.object({
  kind: z.string().optional(),
  apiVersion: z.string().optional(),
  gracePeriodSeconds: z.number().int().optional(),
  preconditions: z.object({ uid: z.string().optional(), resourceVersion: z.string().optional() }).strip().optional(),
  dryRun: z.array(z.string()).optional(),
  propagationPolicy: z.enum(['Orphan', 'Background', 'Foreground']).optional(),
  orphanDependents: z.boolean().optional(),
});

type Propagation = DeleteOptions['propagationPolicy'];

/** `?propagationPolicy=`, or the deprecated `orphanDependents`, as kube-apiserver reads them. */
function propagationOf(
  policy: string | null | undefined,
  orphanDependents: boolean | undefined,
): { propagationPolicy?: Propagation } {
  if (policy === 'Orphan' || policy === 'Background' || policy === 'Foreground') return { propagationPolicy: policy };
  if (policy)
    throw badRequest(
      `propagationPolicy: Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan"`,
    );
  if (orphanDependents !== undefined) return { propagationPolicy: orphanDependents ? 'Orphan' : 'Background' };
  return {};
}

/** kube-apiserver turns a negative grace period into 1 s (rest.BeforeDelete). */
function graceOf(seconds: number | undefined): { gracePeriodSeconds?: number } {
  if (seconds === undefined) return {};
  return { gracePeriodSeconds: seconds < 0 ? 1 : seconds };
}

function fromQuery(query: URLSearchParams): { gracePeriodSeconds?: number } {
  const raw = query.get('gracePeriodSeconds');
  if (raw === null) return {};
  if (!/^-?[0-9]{1,10}$/.test(raw)) {
    throw badRequest(`gracePeriodSeconds: Invalid value: "${raw}": must be an integer`);
  }
  return graceOf(Number(raw));
}

/** `body` is the decoded request body, undefined when the request had none. */
export function readDeleteOptions(query: URLSearchParams, body: unknown, user: UserInfo): DeleteOptions {
  if (body === undefined)
    return {
      dryRun: query.get('dryRun') === 'All',
      user,
      ...fromQuery(query),
      ...propagationOf(query.get('propagationPolicy'), undefined),
    };
  const parsed = deleteOptionsBody.safeParse(body);
  if (!parsed.success) {
    throw badRequest(
      `the body of the request could not be decoded as DeleteOptions: ${parsed.error.issues[0]?.message}`,
    );
  }
  const o = parsed.data;
  if (o.kind !== undefined && o.kind !== 'DeleteOptions') {
    throw internal(`no kind "${o.kind}" is registered for version "${o.apiVersion ?? 'v1'}"`);
  }
  return {
    dryRun: o.dryRun?.includes('All') ?? false,
    user,
    ...graceOf(o.gracePeriodSeconds),
    ...(o.preconditions ? { preconditions: o.preconditions } : {}),
    ...propagationOf(o.propagationPolicy, o.orphanDependents),
  };
}
