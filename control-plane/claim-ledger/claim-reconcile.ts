/**
 * The periodic repair of the ledger from the claims the API server holds (resource.k8s.io/v1):
 * after a crash between a charge and its write, or a release the webhook could not make, the
 * ledger again equals the allocations kube-scheduler wrote. A cluster that does not serve
 * resource.k8s.io/v1 is left alone (told once).
 */
import { ApiException, type KubeConfig, ResourceV1Api } from '@kubernetes/client-node';
import { type DraClaim, draClaimSchema } from '../../contract/index.js';
import type { ClaimLedger } from './claim-ledger.js';

export type ClaimList = { served: false } | { served: true; items: unknown[] };
export type ClaimLister = () => Promise<ClaimList>;

const PAGE = 500;
/** Past this many pages the list is not trusted whole, and nothing is released from it. */
const MAX_PAGES = 200;

export function kubeClaimLister(kc: KubeConfig): ClaimLister {
  const api = kc.makeApiClient(ResourceV1Api);
  return async () => {
    const items: unknown[] = [];
    let cont: string | undefined;
    try {
      for (let page = 0; page < MAX_PAGES; page++) {
        const list = await api.listResourceClaimForAllNamespaces({ limit: PAGE, ...(cont ? { _continue: cont } : {}) });
        items.push(...list.items);
        cont = list.metadata?._continue;
        if (!cont) return { served: true, items };
      }
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) return { served: false };
      throw err;
    }
    throw new Error(`resourceclaims: more than ${MAX_PAGES * PAGE} claims; not reconciled`);
  };
}

type Log = { info(o: object, m: string): void; warn(o: object, m: string): void; error(o: object, m: string): void };

/**
 * One reconcile; only charges older than the list by `skewMs` may be released (a charge the hook
 * admitted may precede its stored write, and the replicas' clocks may disagree).
 */
export async function reconcileClaimsOnce(deps: {
  list: ClaimLister;
  claims: ClaimLedger;
  now: () => Date;
  skewMs: number;
  log: Log;
  /** Told once when the API server does not serve resource.k8s.io/v1. */
  notServed: () => void;
}): Promise<void> {
  const listedAt = new Date(deps.now().getTime() - deps.skewMs);
  const list = await deps.list();
  if (!list.served) return deps.notServed();
  const claims: DraClaim[] = [];
  let unreadable = 0;
  for (const item of list.items) {
    const parsed = draClaimSchema.safeParse(item);
    if (parsed.success) claims.push(parsed.data);
    else unreadable++;
  }
  // An allocation the ledger cannot read must not be released as if it were gone.
  if (unreadable > 0) {
    deps.log.warn({ unreadable }, 'resourceclaims the ledger cannot read; claims not reconciled');
    return;
  }
  const r = await deps.claims.reconcile(claims, listedAt);
  if (r.released.length > 0)
    deps.log.info({ released: r.released.length }, 'released the charges of claims no longer allocated');
  if (r.charged.length > 0) deps.log.warn({ claims: r.charged }, 'allocated claims were not charged; charged them now');
  for (const f of r.refused)
    deps.log.error({ holder: f.holder, reason: f.message }, 'allocated claim missing from ledger');
}
