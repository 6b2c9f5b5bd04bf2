import { describe, expect, it } from 'vitest';
import type { ContainerGpuRequest } from '../contract/index.js';
import { type ClaimTemplate, claimTemplateOf } from '../webhooks/pod-claims.js';
import { type ClaimTemplateStore, ensureClaimTemplatesWith } from './claim-templates.js';

const policy = { deviceClassName: 'gpu.vcuda.io', driverName: 'gpu.vcuda.io', modeValue: 'dra' };
const share = (corePerCard: number, coreLimit = corePerCard): ContainerGpuRequest => ({
  name: 'main',
  isInit: false,
  corePerCard,
  cards: 1,
  memoryMiBPerCard: 8192,
  coreLimit,
  mode: coreLimit > corePerCard ? 'soft' : 'hard',
});
const whole = (cards: number): ContainerGpuRequest => ({ ...share(100), cards, memoryMiBPerCard: undefined });
const template = (namespace: string, c: ContainerGpuRequest) => claimTemplateOf(c, namespace, policy);

/** An API server's templates: a create of an existing name answers `exists`; quantities come back canonical. */
function memoryStore(seed: ClaimTemplate[] = []) {
  const stored = new Map(seed.map((t) => [`${t.metadata.namespace}/${t.metadata.name}`, structuredClone(t)]));
  const created: string[] = [];
  const store: ClaimTemplateStore = {
    create: async (t) => {
      const key = `${t.metadata.namespace}/${t.metadata.name}`;
      created.push(key);
      if (stored.has(key)) return 'exists';
      stored.set(key, structuredClone(t));
      return 'created';
    },
    read: async (t) => stored.get(`${t.metadata.namespace}/${t.metadata.name}`),
  };
  return { store, created, stored };
}

describe('ensureClaimTemplatesWith', () => {
  it('creates each template, takes an existing one of the same shape, and asks again only after the reuse window', async () => {
    const existing = template('ml', whole(1));
    const { store, created } = memoryStore([existing]);
    let now = 0;
    const ensure = ensureClaimTemplatesWith(store, { reuseMs: 1000, nowMs: () => now });
    await ensure([template('ml', share(30)), template('ml', whole(1))]);
    await ensure([template('ml', share(30)), template('other', share(30))]);
    expect(created).toEqual(['ml/vcuda-c30-m8gi', 'ml/vcuda-whole-1', 'other/vcuda-c30-m8gi']);
    now = 1000;
    await ensure([template('ml', share(30))]);
    expect(created).toHaveLength(4);
  });

  it('takes a stored template whose quantities the API server wrote its own way', async () => {
    const stored = template('ml', share(30, 60));
    const request = stored.spec.spec.devices.requests[0]?.exactly.capacity?.requests ?? {};
    request.memory = '8Gi';
    const { store } = memoryStore([stored]);
    await expect(ensureClaimTemplatesWith(store, { reuseMs: 0 })([template('ml', share(30, 60))])).resolves.toBe(
      undefined,
    );
  });

  it('refuses a template of that name that asks another shape', async () => {
    const forged = template('ml', share(30));
    const capacity = forged.spec.spec.devices.requests[0]?.exactly.capacity?.requests ?? {};
    capacity.cores = '90';
    const { store } = memoryStore([forged]);
    await expect(ensureClaimTemplatesWith(store, { reuseMs: 0 })([template('ml', share(30))])).rejects.toThrow(
      'ResourceClaimTemplate ml/vcuda-c30-m8gi exists and asks another shape; vcuda names its templates from their shape: delete or rename that one',
    );
    // A soft limit added (or dropped) is another shape too.
    const limited = memoryStore([{ ...template('ml', share(30, 80)), metadata: template('ml', share(30)).metadata }]);
    await expect(ensureClaimTemplatesWith(limited.store, { reuseMs: 0 })([template('ml', share(30))])).rejects.toThrow(
      /another shape/,
    );
  });

  it('fails when the store fails, and remembers nothing then', async () => {
    let calls = 0;
    const ensure = ensureClaimTemplatesWith(
      {
        create: async () => {
          calls++;
          throw new Error('HTTP 403');
        },
        read: async () => undefined,
      },
      { reuseMs: 60_000 },
    );
    await expect(ensure([template('ml', share(30))])).rejects.toThrow('HTTP 403');
    await expect(ensure([template('ml', share(30))])).rejects.toThrow('HTTP 403');
    expect(calls).toBe(2);
  });
});
