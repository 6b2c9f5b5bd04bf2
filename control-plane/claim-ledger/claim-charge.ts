/**
 * What the ledger must do for one write of a ResourceClaim (pure): charge the shares an allocation
 * of vcuda's driver consumes when kube-scheduler writes it, release them when the allocation is
 * cleared or the claim deleted, nothing otherwise. The ledger holds a claim under its holder id
 * (`claimHolderId`, contract/dra.ts), one item per allocated share (`claimShareKey`), so it counts against the
 * card, the namespace quota and the team quota exactly like a pod's assignment. A MIG partition is
 * charged whole: the decision names it (`ClaimPartition`), and the claim ledger finds the ledger
 * rows that stand for it on its card (claim-partitions.ts), as the extender holds a MIG grant.
 */
import {
  claimShareKey,
  DRA_CAPACITY,
  type DraAllocationResult,
  type DraClaim,
  isDraMigDeviceName,
  parseDraQuantity,
} from '../../contract/index.js';

/** One allocated share: `memoryMiB: 'card'` when the result consumed no stated memory (a whole card). */
export type ClaimShare = { key: string; cardIndex: number; core: number; memoryMiB: number | 'card' };

/** One allocated MIG partition (`gpu-<card>-mig-<profile>-<start>`), held whole. */
export type ClaimPartition = { key: string; device: string };

export type ClaimRef = { uid: string; namespace: string; name: string };

export type ClaimChargeDecision =
  | { kind: 'none' }
  | { kind: 'charge'; claim: ClaimRef; node: string; shares: ClaimShare[]; partitions: ClaimPartition[] }
  | { kind: 'release'; claimUid: string }
  | { kind: 'refuse'; message: string };

const DEVICE_NAME = /^gpu-(\d{1,4})$/;
const MiB = 1024n * 1024n;

/** The results the ledger holds: this driver's cards and MIG partitions. */
function ourResults(claim: DraClaim | undefined, driver: string): DraAllocationResult[] {
  return (claim?.status?.allocation?.devices?.results ?? []).filter((r) => r.driver === driver);
}

/** Prepare's words for a claim that mixes the two (node-agent/dra/claim-preparer.ts). */
export const MIXED_CLAIM_RULE = 'it mixes whole MIG instances and card shares; ask them in separate claims';

/** Whole units of a consumed quantity (cores), rounded up; undefined when absent or not a quantity. */
function wholeUnits(text: string | undefined, per: bigint): bigint | undefined {
  const q = text === undefined ? undefined : parseDraQuantity(text);
  if (!q || q.milli < 0n) return undefined;
  const milliPer = per * 1000n;
  return q.milli / milliPer + (q.milli % milliPer > 0n ? 1n : 0n);
}

/** One result as a ledger item, or why it cannot be one. */
function shareOf(result: DraAllocationResult, claimLabel: string): ClaimShare | string {
  const device = DEVICE_NAME.exec(result.device);
  if (!device) return `${claimLabel}: device "${result.device}" is not a card of this driver (gpu-<index>)`;
  const consumed = result.consumedCapacity ?? {};
  const cores = wholeUnits(consumed[DRA_CAPACITY.cores], 1n);
  const memory = wholeUnits(consumed[DRA_CAPACITY.memory], MiB);
  if (cores !== undefined && (cores < 1n || cores > 100n)) {
    return `${claimLabel}: consumedCapacity.cores ${consumed[DRA_CAPACITY.cores]} is not 1..100`;
  }
  if (consumed[DRA_CAPACITY.memory] !== undefined && memory === undefined) {
    return `${claimLabel}: consumedCapacity.memory ${consumed[DRA_CAPACITY.memory]} is not a quantity`;
  }
  return {
    key: claimShareKey(result.request, result.shareID, result.device),
    cardIndex: Number(device[1]),
    core: cores === undefined ? 100 : Number(cores),
    memoryMiB: memory === undefined ? 'card' : Number(memory),
  };
}

function chargeOf(claim: DraClaim, results: DraAllocationResult[]): ClaimChargeDecision {
  const { uid, namespace, name } = claim.metadata;
  const label = `resourceclaim ${namespace}/${name}`;
  const pools = new Set(results.map((r) => r.pool));
  if (pools.size > 1) return { kind: 'refuse', message: `${label}: its devices span pools ${[...pools].join(', ')}` };
  const mig = results.filter((r) => isDraMigDeviceName(r.device));
  // Prepare refuses such a claim; the ledger never holds what no container could use.
  if (mig.length > 0 && mig.length < results.length)
    return { kind: 'refuse', message: `${label}: ${MIXED_CLAIM_RULE}` };
  const partitions = mig.map((r) => ({ key: claimShareKey(r.request, r.shareID, r.device), device: r.device }));
  const shares: ClaimShare[] = [];
  for (const result of mig.length > 0 ? [] : results) {
    const share = shareOf(result, label);
    if (typeof share === 'string') return { kind: 'refuse', message: share };
    shares.push(share);
  }
  return { kind: 'charge', claim: { uid, namespace, name }, node: results[0]?.pool ?? '', shares, partitions };
}

/**
 * The ledger's part in one admitted write of a claim (its main resource or its status).
 * `before`/`after` are the claim as stored and as written; `after` is absent for a DELETE.
 */
export function decideClaimCharge(
  before: DraClaim | undefined,
  after: DraClaim | undefined,
  driver: string,
): ClaimChargeDecision {
  const had = ourResults(before, driver);
  const has = ourResults(after, driver);
  if (!after) return had.length > 0 && before ? { kind: 'release', claimUid: before.metadata.uid } : { kind: 'none' };
  if (had.length > 0 && has.length === 0) return { kind: 'release', claimUid: after.metadata.uid };
  // An allocation is written once and then only cleared; a driver's status.devices write keeps it.
  if (had.length > 0 || has.length === 0) return { kind: 'none' };
  return chargeOf(after, has);
}
