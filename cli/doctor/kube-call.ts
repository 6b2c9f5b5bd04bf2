/** How the doctor's probes call the API server: its errors as one readable line, not-found told apart. */
import { toVcudaError } from '../../control-plane/kube-client.js';

/** Kubernetes errors as one readable line (`HTTP 403 secrets "x" is forbidden: ...`). */
export async function kube<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw toVcudaError(err, what);
  }
}

export const isNotFound = (err: unknown) => (err as { code?: unknown }).code === 'not-found';
