import { describe, expect, it } from 'vitest';
import type { ClaimTemplate } from '../webhooks/pod-claims.js';
import { type ClaimTemplateStore, ensureClaimTemplatesWith } from './claim-templates.js';

function template(namespace: string, name: string): ClaimTemplate {
  return {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaimTemplate',
    metadata: { name, namespace, labels: {} },
    spec: { spec: { devices: { requests: [] } } },
  };
}

describe('ensureClaimTemplatesWith', () => {
  it('creates each template, takes AlreadyExists as done, and asks again only after the reuse window', async () => {
    const created: string[] = [];
    const existing = new Set(['ml/vcuda-whole-1']);
    const store: ClaimTemplateStore = {
      create: async (t) => {
        const key = `${t.metadata.namespace}/${t.metadata.name}`;
        created.push(key);
        if (existing.has(key)) return 'exists';
        existing.add(key);
        return 'created';
      },
    };
    let now = 0;
    const ensure = ensureClaimTemplatesWith(store, { reuseMs: 1000, nowMs: () => now });
    await ensure([template('ml', 'vcuda-c30-m8gi'), template('ml', 'vcuda-whole-1')]);
    await ensure([template('ml', 'vcuda-c30-m8gi'), template('other', 'vcuda-c30-m8gi')]);
    expect(created).toEqual(['ml/vcuda-c30-m8gi', 'ml/vcuda-whole-1', 'other/vcuda-c30-m8gi']);
    now = 1000;
    await ensure([template('ml', 'vcuda-c30-m8gi')]);
    expect(created).toHaveLength(4);
  });

  it('fails when the store fails, and remembers nothing then', async () => {
    let calls = 0;
    const ensure = ensureClaimTemplatesWith(
      {
        create: async () => {
          calls++;
          throw new Error('HTTP 403');
        },
      },
      { reuseMs: 60_000 },
    );
    await expect(ensure([template('ml', 'a')])).rejects.toThrow('HTTP 403');
    await expect(ensure([template('ml', 'a')])).rejects.toThrow('HTTP 403');
    expect(calls).toBe(2);
  });
});
