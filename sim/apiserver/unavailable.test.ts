/**
 * What kubectl hears where a real cluster would reach a kubelet or a metrics server: a 503 Status
 * naming what local mode offers instead, never a bare 404 (kubectl exec, port-forward, top).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type SimApiServer, startApiServer } from './api-server.js';

describe('what the simulated API server cannot do', () => {
  let api: SimApiServer;
  beforeEach(async () => {
    api = await startApiServer({ dashboardUrl: 'http://127.0.0.1:7080/' });
  });
  afterEach(async () => api.close());

  it.each([
    [
      'POST',
      '/api/v1/namespaces/default/pods/p/exec?command=ls',
      /kubectl exec is not available\. Instead: kubectl logs/,
    ],
    ['GET', '/api/v1/namespaces/default/pods/p/attach', /kubectl attach is not available/],
    ['POST', '/api/v1/namespaces/default/pods/p/portforward', /no pod network: kubectl port-forward is not available/],
    ['GET', '/apis/metrics.k8s.io/v1beta1/namespaces/default/pods', /no metrics-server: kubectl top is not available/],
    ['GET', '/apis/metrics.k8s.io/v1beta1/nodes', /Instead: the dashboard at http:\/\/127\.0\.0\.1:7080\//],
  ])('%s %s: 503 saying what to use instead', async (method, path, message) => {
    const res = await fetch(api.url + path, { method });
    expect(res.status).toBe(503);
    const status = (await res.json()) as { kind: string; reason: string; message: string };
    expect(status).toMatchObject({ kind: 'Status', reason: 'ServiceUnavailable' });
    expect(status.message).toMatch(message);
  });

  it('lists the subresources and the metrics group, so kubectl asks rather than failing on discovery', async () => {
    const core = (await (await fetch(`${api.url}/api/v1`)).json()) as { resources: { name: string }[] };
    expect(core.resources.map((r) => r.name)).toEqual(
      expect.arrayContaining(['pods/exec', 'pods/attach', 'pods/portforward', 'pods/log']),
    );
    const groups = (await (await fetch(`${api.url}/apis`)).json()) as { groups: { name: string }[] };
    expect(groups.groups.map((g) => g.name)).toEqual(expect.arrayContaining(['apps', 'batch', 'metrics.k8s.io']));
  });
});
