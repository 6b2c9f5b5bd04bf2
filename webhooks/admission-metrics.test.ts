import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { pod } from '../test/builders/pod.js';
import { createAdmissionMetrics } from './admission-metrics.js';
import { admissionRoutes } from './admission-routes.js';

describe('admission metrics', () => {
  it('counts each answer by hook and outcome and times it', async () => {
    const registry = new Registry();
    let now = 0;
    const app = admissionRoutes({
      names: resourceNames(),
      memoryUnitMiB: 1,
      clusterName: 'lab',
      privilegedUsernames: [],
      maxBodyBytes: 1 << 20,
      logger: { info: () => {}, warn: () => {} },
      observer: createAdmissionMetrics(registry),
      // Each review takes 1 ms of this clock (read once at the start, once at the end).
      nowMs: () => {
        now += 1;
        return now;
      },
    });
    const review = (object: object) =>
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: {
          uid: 'u',
          kind: { group: '', version: 'v1', kind: 'Pod' },
          operation: 'CREATE',
          namespace: 'a',
          object,
        },
      });
    const post = (hook: string, body: string) => app.request(`/${hook}`, { method: 'POST', body });
    await post('mutate', review(pod('ok').share(30, 1024).obj()));
    await post('mutate', review(pod('bad').container('c', { 'nvidia.com/vcuda-core': '150' }).obj()));
    await post('validate', review(pod('plain').container('c', { cpu: '1' }).obj()));
    await post('validate', 'nope');
    const text = await registry.metrics();
    expect(text).toContain('vcuda_admission_reviews_total{hook="mutate",outcome="patched"} 1');
    expect(text).toContain('vcuda_admission_reviews_total{hook="mutate",outcome="refused"} 1');
    expect(text).toContain('vcuda_admission_reviews_total{hook="validate",outcome="allowed"} 1');
    expect(text).toContain('vcuda_admission_reviews_total{hook="validate",outcome="bad-request"} 1');
    expect(text).toContain('vcuda_admission_duration_seconds_bucket{le="0.002",hook="mutate"} 2');
    expect(text).toContain('vcuda_admission_duration_seconds_bucket{le="0.0005",hook="mutate"} 0');
  });
});
