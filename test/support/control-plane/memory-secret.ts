/** A Secret in memory with the API server's optimistic concurrency. Test-only. */
import { type PemSecretStore, SecretConflictError } from '../../../webhooks/certificates.js';

export function memoryPemSecret<K extends string>(description = 'Secret vcuda-system/test') {
  let stored: { data: Record<K, string>; resourceVersion: string } | undefined;
  let version = 0;
  let writes = 0;
  const store: PemSecretStore<K> = {
    description,
    async read() {
      return stored && structuredClone(stored);
    },
    async create(data) {
      if (stored) throw new SecretConflictError(description);
      writes++;
      stored = { data, resourceVersion: String(++version) };
    },
    async replace(data, resourceVersion) {
      if (stored?.resourceVersion !== resourceVersion) throw new SecretConflictError(description);
      writes++;
      stored = { data, resourceVersion: String(++version) };
    },
  };
  return { store, writes: () => writes, current: () => stored?.data };
}
