import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { webhookConfigSchema } from '../../webhooks/config.js';
import { draPodsOf } from './apps.js';
import type { ClusterView } from './cluster.js';

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1' }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

describe('DRA mode for pods in the control plane', () => {
  const warnings: string[] = [];
  const log = { warn: (m: string) => void warnings.push(m) } as never;
  const ctx = { config: {} as never, log };
  const cluster = (kc: KubeConfig | undefined) => ({ kc }) as ClusterView;

  it('is off unless configured, and off (said so) without a cluster to write templates to', () => {
    expect(draPodsOf(ctx, webhookConfigSchema.parse({}), cluster(kubeConfig()))).toBeUndefined();
    const on = webhookConfigSchema.parse({ dra: { convertPods: true } });
    expect(draPodsOf(ctx, on, cluster(undefined))).toBeUndefined();
    expect(warnings).toEqual([expect.stringContaining('needs a cluster connection')]);
  });

  it('converts for the claim hooks’ class and driver, with the configured mode label and deadline', () => {
    const webhook = webhookConfigSchema.parse({
      claims: { deviceClassName: 'gpu.example.com', driverName: 'drv.example.com' },
      dra: { convertPods: true, modeLabel: 'gpu.vcuda.io/mode', templateTimeoutMs: 3000 },
    });
    const dra = draPodsOf(ctx, webhook, cluster(kubeConfig()));
    expect(dra?.policy).toEqual({
      deviceClassName: 'gpu.example.com',
      driverName: 'drv.example.com',
      modeLabel: 'gpu.vcuda.io/mode',
      modeValue: 'dra',
    });
    expect(dra?.timeoutMs).toBe(3000);
  });
});
