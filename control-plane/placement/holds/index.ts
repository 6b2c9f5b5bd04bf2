/**
 * What holds a card: every kind of holder turned into card holds here and nowhere else, with the
 * checks that decide whether a holder's claim counts. The cluster view keeps the objects and asks
 * this module what they hold; the snapshot sums the holds it is given.
 */
export type { AssignmentJudgement, TokenVerdict, UnverifiedReason } from './assignment-check.js';
export { assignmentTokenOf } from './assignment-check.js';
export {
  type CardHold,
  type CardUse,
  coreAmountsOf,
  type HolderKind,
  isSameHold,
  type PendingAssignment,
  parseTimeMs,
  podCardUse,
} from './card-hold.js';
export { holdOfLedgerReservation, type LedgerReservation } from './ledger-reservation.js';
export {
  assumedHoldOf,
  carriesAssignment,
  type HolderPod,
  holdOfAssignment,
  isPodHoldingCards,
  judgePodHold,
  type PodHoldJudgement,
  pendingCoreAmountsOf,
  verifiedAssignmentOf,
} from './pod-assignment.js';
export { type UnplacedCandidate, type UnplacedPod, type UnplacedReason, unplacedPodOf } from './unplaced.js';
