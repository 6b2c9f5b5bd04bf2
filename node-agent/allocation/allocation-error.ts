/** Why a PreStartContainer (or an Allocate) was refused; the message reaches the pod's events. */
import { VcudaError } from '../../contract/index.js';

export type AllocationErrorCode =
  | 'no-holder'
  | 'several-holders'
  | 'not-gpu-container'
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
  | 'no-assigned-pod'
  | 'not-allocated'
  | 'mig-not-made';

export class AllocationError extends VcudaError<AllocationErrorCode> {}
