import https from 'node:https';
import * as k8s from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KubeClient, podPath } from '../kube-client.js';
import { createServingCert } from '../tls/self-signed-cert.js';
import { type SimApiServer, startApiServer } from './api-server.js';

const pod = (name: string, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, labels: { app: 'demo' } },
  spec: { containers: [{ name: 'c', image: 'busybox:1', resources: { limits: { cpu: '1' } } }] },
  ...extra,
});

async function raw(base: string, method: string, path: string, body?: unknown, contentType = 'application/json') {
  const res = await fetch(base + path, {
    method,
    headers: { 'content-type': contentType },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  // biome-ignore lint/suspicious/noExplicitAny: Status bodies are read field by field in assertions
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe('simulated API server', () => {
  let api: SimApiServer;
  let client: KubeClient;
  beforeEach(async () => {
    api = await startApiServer({ namespaces: ['team-a'], bookmarkIntervalMs: 50 });
    client = new KubeClient(api.url);
  });
  afterEach(async () => api.close());

  it('serves the discovery documents kubectl reads first', async () => {
    expect((await raw(api.url, 'GET', '/api')).body.versions).toEqual(['v1']);
    const core = await raw(api.url, 'GET', '/api/v1');
    expect(core.body.resources.map((r: { name: string }) => r.name)).toEqual(
      expect.arrayContaining(['pods', 'pods/binding', 'pods/status', 'nodes', 'nodes/status', 'events', 'namespaces']),
    );
    const groups = await raw(api.url, 'GET', '/apis');
    expect(groups.body.groups.map((g: { name: string }) => g.name)).toEqual(
      expect.arrayContaining(['coordination.k8s.io', 'admissionregistration.k8s.io']),
    );
    expect((await raw(api.url, 'GET', '/apis/coordination.k8s.io/v1')).body.resources[0].name).toBe('leases');
    expect((await raw(api.url, 'GET', '/version')).body.minor).toBe('26');
  });

  it('answers 404, 409 AlreadyExists and 409 Conflict with Status objects', async () => {
    const missing = await raw(api.url, 'GET', podPath('team-a', 'nope'));
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({
      kind: 'Status',
      reason: 'NotFound',
      message: 'pods "nope" not found',
      code: 404,
    });
    const created = await client.create(podPath('team-a'), pod('p'));
    expect(created.metadata.uid).toBeTruthy();
    expect((created.status as { phase: string }).phase).toBe('Pending');
    const dup = await raw(api.url, 'POST', podPath('team-a'), pod('p'));
    expect(dup.body).toMatchObject({ reason: 'AlreadyExists', code: 409 });
    const stale = { ...created, metadata: { ...created.metadata, resourceVersion: '1', labels: { app: 'x' } } };
    const conflict = await raw(api.url, 'PUT', podPath('team-a', 'p'), stale);
    expect(conflict.body).toMatchObject({ reason: 'Conflict', code: 409 });
    expect(conflict.body.message).toContain('the object has been modified');
    const noNs = await raw(api.url, 'POST', podPath('ghost'), pod('q'));
    expect(noNs.body).toMatchObject({ code: 404, message: 'namespaces "ghost" not found' });
  });

  it('applies merge, strategic-merge and JSON patches, and keeps status out of the main resource', async () => {
    await client.create(podPath('team-a'), pod('p'));
    await client.mergePatch(podPath('team-a', 'p'), { metadata: { annotations: { a: '1', b: '2' } } });
    await client.strategicPatch(podPath('team-a', 'p'), { metadata: { annotations: { b: null, c: '3' } } });
    const json = await client.request(
      'PATCH',
      podPath('team-a', 'p'),
      [{ op: 'add', path: '/metadata/annotations/vcuda.io~1assigned-node', value: 'n1' }],
      'application/json-patch+json',
    );
    expect(json.metadata.annotations).toEqual({ a: '1', c: '3', 'vcuda.io/assigned-node': 'n1' });
    await client.mergePatch(podPath('team-a', 'p'), { status: { phase: 'Running' } });
    expect(((await client.get(podPath('team-a', 'p'))).status as { phase: string }).phase).toBe('Pending');
    await client.mergePatch(`${podPath('team-a', 'p')}/status`, { status: { phase: 'Running' } });
    expect(((await client.get(podPath('team-a', 'p'))).status as { phase: string }).phase).toBe('Running');
    const forbidden = await raw(
      api.url,
      'PATCH',
      podPath('team-a', 'p'),
      { spec: { nodeName: 'x' } },
      'application/merge-patch+json',
    );
    expect(forbidden.status).toBe(422);
  });

  it("folds a Secret's stringData into base64 data, as kube-apiserver stores it", async () => {
    await client.create('/api/v1/namespaces/team-a/secrets', {
      metadata: { name: 's' },
      stringData: { 'keys.json': '{"a":1}' },
    });
    const secret = await client.get('/api/v1/namespaces/team-a/secrets/s');
    expect(secret['stringData']).toBeUndefined();
    expect(Buffer.from((secret['data'] as Record<string, string>)['keys.json']!, 'base64').toString()).toBe('{"a":1}');
  });

  it('binds a pod once; a second binding is a 409', async () => {
    await client.create(podPath('team-a'), pod('p'));
    const binding = {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: 'p' },
      target: { kind: 'Node', name: 'n1' },
    };
    expect((await raw(api.url, 'POST', `${podPath('team-a', 'p')}/binding`, binding)).status).toBe(201);
    const again = await raw(api.url, 'POST', `${podPath('team-a', 'p')}/binding`, binding);
    expect(again.body).toMatchObject({ code: 409, reason: 'Conflict' });
    expect(again.body.message).toContain('already assigned to node "n1"');
  });

  it("merges the Binding's annotations into the pod in the same write that sets its node", async () => {
    await client.create(
      podPath('team-a'),
      pod('p', { metadata: { name: 'p', annotations: { kept: 'yes', over: 'old' } } }),
    );
    const binding = {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: 'p', annotations: { over: 'new', added: 'x' } },
      target: { kind: 'Node', name: 'n1' },
    };
    expect((await raw(api.url, 'POST', `${podPath('team-a', 'p')}/binding`, binding)).status).toBe(201);
    const bound = await client.get(podPath('team-a', 'p'));
    expect(bound.metadata.annotations).toEqual({ kept: 'yes', over: 'new', added: 'x' });
    expect((bound['spec'] as { nodeName?: string }).nodeName).toBe('n1');
  });

  it('keeps a bound pod Terminating until deleted with grace 0; an unbound pod goes at once', async () => {
    await client.create(
      podPath('team-a'),
      pod('bound', { spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'x:1' }] } }),
    );
    await client.create(podPath('team-a'), pod('free'));
    const marked = await client.delete(podPath('team-a', 'bound'));
    expect(marked.metadata.deletionTimestamp).toBeTruthy();
    expect((await client.get(podPath('team-a', 'bound'))).metadata.deletionTimestamp).toBeTruthy();
    await client.delete(podPath('team-a', 'bound'), 0);
    await client.delete(podPath('team-a', 'free'));
    expect((await raw(api.url, 'GET', podPath('team-a', 'bound'))).status).toBe(404);
    expect((await raw(api.url, 'GET', podPath('team-a', 'free'))).status).toBe(404);
  });

  it('reads DeleteOptions from the body and ignores the query beside one, as kube-apiserver does', async () => {
    await client.create(
      podPath('team-a'),
      pod('bound', { spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'x:1' }] } }),
    );
    const path = podPath('team-a', 'bound');
    // The query asks for grace 0, but a body is present: the pod's own 30 s apply.
    const marked = await raw(api.url, 'DELETE', `${path}?gracePeriodSeconds=0`, {});
    expect(marked.status).toBe(200);
    expect(marked.body.metadata.deletionGracePeriodSeconds).toBe(30);
    const stale = await raw(api.url, 'DELETE', path, { gracePeriodSeconds: 0, preconditions: { uid: 'other' } });
    expect(stale.status).toBe(409);
    expect(stale.body.message).toContain('the UID in the precondition (other) does not match the UID in record');
    const wrongKind = await raw(api.url, 'DELETE', path, { kind: 'Pod', apiVersion: 'v1' });
    expect(wrongKind.status).toBe(500);
    // The query's 30 loses to the body's 0, and the right UID lets the kubelet's final delete through.
    const uid = marked.body.metadata.uid as string;
    const body = { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0, preconditions: { uid } };
    expect((await raw(api.url, 'DELETE', `${path}?gracePeriodSeconds=30`, body)).status).toBe(200);
    expect((await raw(api.url, 'GET', path)).status).toBe(404);
  });

  it('turns a negative grace period into one second', async () => {
    await client.create(
      podPath('team-a'),
      pod('bound', { spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'x:1' }] } }),
    );
    const marked = await raw(api.url, 'DELETE', podPath('team-a', 'bound'), { gracePeriodSeconds: -5 });
    expect(marked.body.metadata.deletionGracePeriodSeconds).toBe(1);
  });

  it('watches from a resourceVersion, follows a field selector, and sends 410 for a version out of the log', async () => {
    const list = await client.list(`/api/v1/pods?fieldSelector=spec.nodeName%3Dn1`);
    const seen: string[] = [];
    const ctl = new AbortController();
    const res = await fetch(
      `${api.url}/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn1&resourceVersion=${list.metadata.resourceVersion}`,
      { signal: ctl.signal },
    );
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    await client.create(podPath('team-a'), pod('p'));
    await client.create(`${podPath('team-a', 'p')}/binding`, {
      metadata: { name: 'p' },
      target: { kind: 'Node', name: 'n1' },
    });
    await client.delete(podPath('team-a', 'p'), 0);
    let buf = '';
    while (seen.length < 2) {
      const { value } = await reader.read();
      buf += value;
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines) if (l) seen.push(`${JSON.parse(l).type}:${JSON.parse(l).object.metadata.name}`);
    }
    ctl.abort();
    expect(seen).toEqual(['ADDED:p', 'DELETED:p']);
    const gone = await fetch(`${api.url}/api/v1/pods?watch=1&resourceVersion=-5`);
    const line = JSON.parse((await gone.text()).trim());
    expect(line).toMatchObject({ type: 'ERROR', object: { code: 410, reason: 'Expired' } });
  });

  it('feeds an unchanged @kubernetes/client-node informer', async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'sim', server: api.url, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'sim', cluster: 'sim', user: 'u' }],
      currentContext: 'sim',
    });
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const informer = k8s.makeInformer(kc, '/api/v1/namespaces/team-a/pods', () =>
      core.listNamespacedPod({ namespace: 'team-a' }),
    );
    const events: string[] = [];
    informer.on('add', (p) => events.push(`add:${p.metadata?.name}`));
    informer.on('update', (p) => events.push(`update:${p.metadata?.annotations?.['k'] ?? ''}`));
    informer.on('delete', (p) => events.push(`delete:${p.metadata?.name}`));
    await core.createNamespacedPod({ namespace: 'team-a', body: pod('before') as k8s.V1Pod });
    await informer.start();
    await core.createNamespacedPod({ namespace: 'team-a', body: pod('after') as k8s.V1Pod });
    await core.patchNamespacedPod(
      { namespace: 'team-a', name: 'after', body: { metadata: { annotations: { k: 'v' } } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await core.deleteNamespacedPod({ namespace: 'team-a', name: 'before' });
    await expect
      .poll(() => events, { timeout: 5000 })
      .toEqual(['add:before', 'add:after', 'update:v', 'delete:before']);
    await informer.stop();
  });

  describe('admission webhooks over HTTPS', () => {
    // biome-ignore lint/suspicious/noExplicitAny: a test double reading arbitrary AdmissionReview JSON
    async function webhookServer(reply: (review: any) => Record<string, unknown>) {
      const cert = await createServingCert();
      const server = https.createServer({ cert: cert.certPem, key: cert.keyPem }, (req, res) => {
        let body = '';
        req.on('data', (c) => (body += c));
        req.on('end', () => {
          const review = JSON.parse(body);
          res.setHeader('content-type', 'application/json');
          res.end(
            JSON.stringify({
              apiVersion: 'admission.k8s.io/v1',
              kind: 'AdmissionReview',
              response: { uid: review.request.uid, ...reply(review) },
            }),
          );
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as { port: number }).port;
      return {
        url: `https://127.0.0.1:${port}/admission/mutate`,
        caBundle: Buffer.from(cert.caPem).toString('base64'),
        close: () => server.close(),
      };
    }

    function registration(name: string, url: string, caBundle: string, extra: Record<string, unknown> = {}) {
      return {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'MutatingWebhookConfiguration',
        metadata: { name },
        webhooks: [
          {
            name: `${name}.vcuda.io`,
            clientConfig: { url, caBundle },
            rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
            sideEffects: 'None',
            admissionReviewVersions: ['v1'],
            ...extra,
          },
        ],
      };
    }

    it('applies the JSON patch of an allowing webhook and refuses with the webhook message like kube-apiserver', async () => {
      const hook = await webhookServer((review) => {
        if (review.request.object.metadata.name === 'bad') {
          return { allowed: false, status: { code: 400, message: 'spec.containers[0]: 150 is not valid' } };
        }
        const patch = [{ op: 'add', path: '/metadata/annotations', value: { mutated: review.request.operation } }];
        return { allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') };
      });
      try {
        await client.create(
          '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
          registration('vcuda', hook.url, hook.caBundle),
        );
        const ok = await client.create(podPath('team-a'), pod('good'));
        expect(ok.metadata.annotations).toEqual({ mutated: 'CREATE' });
        const refused = await raw(api.url, 'POST', podPath('team-a'), pod('bad'));
        expect(refused.status).toBe(400);
        expect(refused.body.message).toBe(
          'admission webhook "vcuda.vcuda.io" denied the request: spec.containers[0]: 150 is not valid',
        );
      } finally {
        hook.close();
      }
    });

    it('fails closed on an untrusted certificate unless failurePolicy is Ignore, and honours objectSelector', async () => {
      const hook = await webhookServer(() => ({ allowed: false, status: { message: 'no' } }));
      const other = await createServingCert();
      try {
        const wrongCa = Buffer.from(other.caPem).toString('base64');
        await client.create(
          '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
          registration('strict', hook.url, wrongCa),
        );
        const failed = await raw(api.url, 'POST', podPath('team-a'), pod('p1'));
        expect(failed.status).toBe(500);
        expect(failed.body.message).toMatch(
          /^Internal error occurred: failed calling webhook "strict.vcuda.io": failed to call webhook: Post "https:\/\/127\.0\.0\.1:\d+\/admission\/mutate\?timeout=10s"/,
        );
        await client.delete('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/strict');
        await client.create(
          '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
          registration('lenient', hook.url, wrongCa, { failurePolicy: 'Ignore' }),
        );
        expect((await raw(api.url, 'POST', podPath('team-a'), pod('p2'))).status).toBe(201);
        await client.delete('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/lenient');
        await client.create(
          '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
          registration('selective', hook.url, hook.caBundle, { objectSelector: { matchLabels: { gpu: 'yes' } } }),
        );
        expect((await raw(api.url, 'POST', podPath('team-a'), pod('p3'))).status).toBe(201);
        const labelled = pod('p4');
        labelled.metadata.labels = { app: 'demo', gpu: 'yes' } as never;
        expect((await raw(api.url, 'POST', podPath('team-a'), labelled)).body.message).toBe(
          'admission webhook "selective.vcuda.io" denied the request: no',
        );
      } finally {
        hook.close();
      }
    });

    it('evaluates matchConditions as a 1.32 server does (false skips, an error follows failurePolicy), and 1.26 has none', async () => {
      const hook = await webhookServer(() => ({ allowed: false, status: { message: 'called' } }));
      const v132 = await startApiServer({ namespaces: ['team-a'], kubernetesVersion: '1.32' });
      const register = (c: KubeClient, name: string, expression: string, extra: Record<string, unknown> = {}) =>
        c.create(
          '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
          registration(name, hook.url, hook.caBundle, { matchConditions: [{ name: 'cond', expression }], ...extra }),
        );
      const unregister = (c: KubeClient, name: string) =>
        c.delete(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${name}`);
      try {
        const c132 = new KubeClient(v132.url);
        expect(await c132.get('/version')).toMatchObject({ major: '1', minor: '32' });
        expect(await client.get('/version')).toMatchObject({ major: '1', minor: '26' });
        const condition = "object.metadata.name.startsWith('gpu-')";
        await register(c132, 'scoped', condition);
        expect((await raw(v132.url, 'POST', podPath('team-a'), pod('plain'))).status).toBe(201);
        expect((await raw(v132.url, 'POST', podPath('team-a'), pod('gpu-1'))).body.message).toBe(
          'admission webhook "scoped.vcuda.io" denied the request: called',
        );
        await unregister(c132, 'scoped');
        // An expression that fails to evaluate: Fail refuses the request, Ignore skips the webhook.
        await register(c132, 'broken', 'object.spec.nope.deeper == 1');
        const failed = await raw(v132.url, 'POST', podPath('team-a'), pod('p-broken'));
        expect(failed.status).toBe(500);
        expect(failed.body.message).toMatch(
          /^Internal error occurred: failed calling webhook "broken.vcuda.io": expression 'cond' resulted in error/,
        );
        await unregister(c132, 'broken');
        await register(c132, 'broken-lenient', 'object.spec.nope.deeper == 1', { failurePolicy: 'Ignore' });
        expect((await raw(v132.url, 'POST', podPath('team-a'), pod('p-lenient'))).status).toBe(201);
        // 1.26 has no matchConditions: the webhook is called whatever the condition says.
        await register(client, 'ignored-condition', 'false');
        expect((await raw(api.url, 'POST', podPath('team-a'), pod('p-old'))).body.message).toBe(
          'admission webhook "ignored-condition.vcuda.io" denied the request: called',
        );
        await unregister(client, 'ignored-condition');
      } finally {
        hook.close();
        await v132.close();
      }
    });
  });
});
