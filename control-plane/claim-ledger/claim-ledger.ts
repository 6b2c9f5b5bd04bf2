/**
 * The ledger's side of DRA claims: charge an allocation's shares (all or nothing, against the
 * card, the namespace quota and the team quota, in the same transaction as any pod's bind), release
 * them, and repair the ledger from the claims the API server holds after a crash. Only
 * allocations count, and only kube-scheduler (or another holder of `resourceclaims/binding`) can
 * write one, so nothing a user writes is ever charged or released here.
 */
import { claimHolderId, type DraClaim, messageOf, VcudaError } from '../../contract/index.js';
import type { ChargeItem, ChargeRequest, Ledger } from '../../db/ledger.js';
import { type ClaimChargeDecision, decideClaimCharge } from './claim-charge.js';
import { type PartitionNode, partitionRowsOf } from './claim-partitions.js';

type ClaimLedgerStore = Pick<Ledger, 'charge' | 'release' | 'liveClaimHolders'>;

export type ClaimLedger = ReturnType<typeof createClaimLedger>;

type Charge = Extract<ClaimChargeDecision, { kind: 'charge' }>;

export type ClaimLedgerOptions = {
  ledger: ClaimLedgerStore;
  cluster: string;
  driver: string;
  /**
   * A node's inventory as the control plane reads it, where a MIG partition's ledger rows are
   * found (claim-partitions.ts); absent, or the node unknown: a partition's charge is refused.
   */
  partitionNode?: (node: string) => PartitionNode | undefined;
};

/** The ledger items of a charge: shares by card index, partitions by the ledger cards they hold. */
function chargeItemsOf(decision: Charge, opts: ClaimLedgerOptions): ChargeItem[] {
  const items: ChargeItem[] = decision.shares.map((share) => ({
    container: share.key,
    cardIndex: share.cardIndex,
    core: share.core,
    memoryMiB: share.memoryMiB === 'card' ? null : share.memoryMiB,
  }));
  if (decision.partitions.length === 0) return items;
  const label = `resourceclaim ${decision.claim.namespace}/${decision.claim.name}`;
  const node = opts.partitionNode?.(decision.node);
  if (!node) throw new VcudaError('unavailable', `${label}: node ${decision.node}'s inventory is not known yet`);
  for (const p of decision.partitions) {
    const rows = partitionRowsOf(node, p.device);
    if (typeof rows === 'string') throw new VcudaError('not-found', `${label}: ${rows}`);
    for (const r of rows) items.push({ container: p.key, ...r });
  }
  return items;
}

export function createClaimLedger(opts: ClaimLedgerOptions) {
  const { ledger, cluster } = opts;

  /**
   * Charges an allocation; throws the ledger's refusal (quota, capacity, a card it does not know)
   * with its own words. One ledger call: the rows go in bound (the allocation is the grant
   * itself, nothing is left to confirm), the cards named by index as the allocation names them.
   */
  async function charge(decision: Charge): Promise<void> {
    const request: ChargeRequest = {
      cluster,
      podUid: claimHolderId(decision.claim.uid),
      namespace: decision.claim.namespace,
      pod: decision.claim.name,
      node: decision.node,
      items: chargeItemsOf(decision, opts),
      holderKind: 'claim',
    };
    // Held already: a charge whose write was then refused or timed out (the scheduler allocates
    // afresh on its retry, maybe elsewhere). Charge what this allocation consumes, not that one.
    if ((await ledger.charge(request)).reused) {
      await ledger.release(cluster, request.podUid);
      await ledger.charge(request);
    }
  }

  /** Applies what one admitted write of a claim means for the ledger. */
  async function apply(decision: ClaimChargeDecision): Promise<void> {
    if (decision.kind === 'charge') await charge(decision);
    else if (decision.kind === 'release') await ledger.release(cluster, claimHolderId(decision.claimUid));
    else if (decision.kind === 'refuse') throw new VcudaError('invalid', decision.message);
  }

  return { apply, reconcile: reconcilerOf(opts, charge) };
}

/**
 * Brings the ledger in line with the claims the API server holds (listed at `listedAt`): every
 * allocation of this driver charged, every claim holder without one released. Holders charged
 * after the list was taken are left alone. Returns what changed and what the ledger refused.
 */
function reconcilerOf({ ledger, cluster, driver }: ClaimLedgerOptions, charge: (decision: Charge) => Promise<void>) {
  return async function reconcile(claims: readonly DraClaim[], listedAt: Date) {
    const allocated = new Map<string, Charge>();
    for (const claim of claims) {
      const decision = decideClaimCharge(undefined, claim, driver);
      if (decision.kind === 'charge') allocated.set(claimHolderId(claim.metadata.uid), decision);
    }
    const held = await ledger.liveClaimHolders(cluster);
    const released: string[] = [];
    for (const h of held) {
      if (allocated.has(h.holder) || h.reservedAt > listedAt) continue;
      await ledger.release(cluster, h.holder);
      released.push(h.holder);
    }
    const heldNow = new Set(held.map((h) => h.holder));
    const charged: string[] = [];
    const refused: { holder: string; message: string }[] = [];
    for (const [holder, decision] of allocated) {
      if (heldNow.has(holder)) continue;
      try {
        await charge(decision);
        charged.push(holder);
      } catch (err) {
        refused.push({ holder, message: messageOf(err) });
      }
    }
    return { charged, released, refused };
  };
}
