/**
 * What stock kubectl shows against the simulated API server, as against kube-apiserver: admission
 * warnings as `Warning:` lines, `get -w` rows with every column, `explain` from the OpenAPI
 * schema. Skipped (visibly) without kubectl on PATH.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, podPath } from '../kube-client.js';
import { writeKubeconfig } from '../kubeconfig.js';
import { createServingCert } from '../tls/self-signed-cert.js';
import { type SimApiServer, startApiServer } from './api-server.js';
import { warningHeader } from './http-exchange.js';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

const pod = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: 'default' },
  spec: { containers: [{ name: 'c', image: 'busybox:1' }] },
});

/** An HTTPS mutating webhook that allows every pod with the given warnings. */
async function warningWebhook(warnings: string[]) {
  const cert = await createServingCert();
  const server = https.createServer({ cert: cert.certPem, key: cert.keyPem }, (req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const review = JSON.parse(body) as { request: { uid: string } };
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: { uid: review.request.uid, allowed: true, warnings },
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `https://127.0.0.1:${(server.address() as { port: number }).port}/mutate`,
    caBundle: Buffer.from(cert.caPem).toString('base64'),
    close: () => server.close(),
  };
}

describe('Warning headers', () => {
  it('quotes and escapes the text as kube-apiserver does', () => {
    expect(warningHeader('a "b" \\ c')).toBe('299 - "a \\"b\\" \\\\ c"');
    expect(warningHeader('line\nbreak')).toBe('299 - "line break"');
  });
});

describe.skipIf(!hasKubectl)('kubectl against the simulated API server (skipped: no kubectl on PATH)', () => {
  let api: SimApiServer;
  let client: KubeClient;
  let dir: string;
  let kubeconfig: string;
  const run = promisify(execFile);
  const kubectl = (...args: string[]) => run('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' });

  beforeAll(async () => {
    api = await startApiServer({});
    client = new KubeClient(api.url);
    dir = mkdtempSync(join(tmpdir(), 'vcuda-kubectl-views-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeKubeconfig(kubeconfig, api.url);
  });
  afterAll(() => api.close());

  it("prints an admission webhook's warnings", async () => {
    const text = 'metadata.annotations["vcuda.io/assignment"]: removed: written by vcuda only';
    const hook = await warningWebhook([text, 'second "quoted" warning']);
    try {
      await client.create('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
        metadata: { name: 'warn' },
        webhooks: [
          {
            name: 'warn.vcuda.io',
            clientConfig: { url: hook.url, caBundle: hook.caBundle },
            rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
            sideEffects: 'None',
            admissionReviewVersions: ['v1'],
          },
        ],
      });
      const file = join(dir, 'warned.json');
      writeFileSync(file, JSON.stringify(pod('warned')));
      const out = await kubectl('create', '-f', file);
      expect(out.stdout).toBe('pod/warned created\n');
      expect(out.stderr).toBe(`Warning: ${text}\nWarning: second "quoted" warning\n`);
    } finally {
      await client.delete('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/warn');
      hook.close();
    }
  }, 30_000);

  it('shows every column for the changes `get -w` streams, not only NAME and AGE', async () => {
    await client.create(podPath('default'), pod('watched'));
    let watcher: ChildProcess | undefined;
    try {
      watcher = spawn('kubectl', [
        '--kubeconfig',
        kubeconfig,
        'get',
        'pods',
        '-w',
        '--field-selector',
        'metadata.name=watched',
      ]);
      let out = '';
      watcher.stdout?.on('data', (d) => (out += String(d)));
      await expect.poll(() => out, { timeout: 15_000 }).toContain('watched');
      await client.mergePatch(`${podPath('default', 'watched')}/status`, { status: { phase: 'Running' } });
      await expect.poll(() => out.trim().split('\n').length, { timeout: 15_000 }).toBeGreaterThanOrEqual(3);
      const [header, first, changed] = out.trim().split('\n');
      expect(header!.split(/\s+/)).toEqual(['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE']);
      expect(first!.split(/\s+/).slice(0, 4)).toEqual(['watched', '0/1', 'Pending', '0']);
      expect(changed!.split(/\s+/).slice(0, 4)).toEqual(['watched', '0/1', 'Running', '0']);
    } finally {
      watcher?.kill();
    }
  }, 30_000);

  it('lists PriorityClasses with their value, as kube-apiserver does', async () => {
    const pc = { apiVersion: 'scheduling.k8s.io/v1', kind: 'PriorityClass', metadata: { name: 'urgent' }, value: 1000 };
    await client.create('/apis/scheduling.k8s.io/v1/priorityclasses', pc);
    const [header, row] = (await kubectl('get', 'priorityclasses', 'urgent')).stdout.trim().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NAME', 'VALUE', 'GLOBAL-DEFAULT', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 3)).toEqual(['urgent', '1000', 'false']);
  }, 30_000);

  it('explains a pod and its fields from the OpenAPI schema', async () => {
    const pod = (await kubectl('explain', 'pod')).stdout;
    expect(pod).toContain('KIND:       Pod');
    expect(pod).toContain('Pod is a collection of containers that can run on a host.');
    const limits = (await kubectl('explain', 'pod.spec.containers.resources.limits')).stdout;
    expect(limits).toContain('FIELD: limits <map[string]Quantity>');
  }, 30_000);

  it('still applies with the schemas served (kubectl computes strategic merge patches from them)', async () => {
    const file = join(dir, 'applied.json');
    const applied = pod('applied');
    writeFileSync(file, JSON.stringify(applied));
    expect((await kubectl('apply', '-f', file)).stdout).toBe('pod/applied created\n');
    writeFileSync(file, JSON.stringify({ ...applied, metadata: { ...applied.metadata, labels: { tier: 'web' } } }));
    expect((await kubectl('apply', '-f', file)).stdout).toBe('pod/applied configured\n');
    expect((await client.get(podPath('default', 'applied'))).metadata.labels).toEqual({ tier: 'web' });
  }, 30_000);
});
