/** Why an Allocate or PreStartContainer was refused; the message reaches the pod's events. */
import { VcudaError } from '../../contract/index.js';

export type AllocationErrorCode =
  | 'no-candidate'
  | 'ambiguous'
  | 'unsigned'
  | 'no-jwks'
  | 'malformed'
  | 'bad-signature'
  | 'unknown-kid'
  | 'wrong-pod'
  | 'wrong-node'
  | 'expired'
  | 'no-grant'
  | 'grant-mismatch'
  | 'unknown-card'
  | 'unhealthy-card'
  | 'foreign-devices'
  | 'tie-mismatch'
  | 'tie-unconfirmed';

export class AllocationError extends VcudaError<AllocationErrorCode> {}
