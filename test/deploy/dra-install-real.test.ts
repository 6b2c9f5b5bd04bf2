/**
 * vcuda's DRA install against the real kube-apiserver v1.36.3 (`../shared/kubernetes-1.36/`), from
 * each of its two sources in turn, each on an API server of its own: the kustomize overlay
 * (deploy/overlays/dra, `kubectl kustomize` / `kubectl apply -k`) and the Helm chart with
 * `mode: dra` (the real Helm 4: `helm template`, `helm install`). For each, the API server accepts
 * every object (`kubectl apply --dry-run=server`), the ResourceSlice policy really keeps a node
 * agent to its own node's slices (with the agent's pod-bound ServiceAccount token, which names its
 * node, as the kubelet gives it), the `associated-node:` grant lets it report on its own node's
 * claims only, and the claim hooks the control plane registers reach a real webhook listener for
 * vcuda's claims only. Skipped, and says so, where that control plane (or Helm) is absent.
 */
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resourceNames } from '../../contract/index.js';
import { createAdmissionListener } from '../../webhooks/admission-handler.js';
import { issueServingCertificate } from '../../webhooks/certificates.js';
import { buildClaimWebhookConfigurations } from '../../webhooks/claim-registration.js';
import { registrationConfigSchema } from '../../webhooks/config.js';
import { type Kubernetes136, k8s136SkipReason, type Run, startKubernetes136 } from '../support/kubernetes-136.js';
import { chartDir, helm, helmSkipReason, templateArgs } from './helm.js';
import { deployDir } from './manifests.js';

const OVERLAY = join(deployDir, 'overlays', 'dra');
const AGENT = 'vcuda-node-agent';

/** Where the DRA objects come from: what it installs (built by its own tool) and how it installs it. */
type Source = {
  name: string;
  skipReason: string | undefined;
  build(k8s: Kubernetes136): Promise<Run>;
  install(k8s: Kubernetes136): Promise<Run>;
};

/** Helm as a Run (it reads the server's version itself through the kubeconfig). */
function helmRun(args: string[]): Promise<Run> {
  const r = helm(args);
  return Promise.resolve({ code: r.status, stdout: r.stdout, stderr: r.stderr });
}

const SOURCES: Source[] = [
  {
    name: 'the kustomize overlay',
    skipReason: k8s136SkipReason(),
    build: (k8s) => k8s.kubectl(['kustomize', OVERLAY]),
    install: (k8s) => k8s.kubectl(['apply', '-k', OVERLAY]),
  },
  {
    name: 'the Helm chart (mode: dra)',
    skipReason: k8s136SkipReason() ?? helmSkipReason(),
    build: (k8s) =>
      helmRun(templateArgs({ values: { mode: 'dra' }, args: ['--dry-run=server', '--kubeconfig', k8s.kubeconfig] })),
    install: (k8s) =>
      helmRun([
        'install',
        'vcuda',
        chartDir,
        '-n',
        'vcuda-system',
        '--set',
        'mode=dra',
        '--kubeconfig',
        k8s.kubeconfig,
      ]),
  },
];
for (const s of SOURCES) if (s.skipReason) console.warn(`dra-install-real, ${s.name}: skipped: ${s.skipReason}`);

function slice(name: string, node: string, driver = 'gpu.vcuda.io', generation = 1): string {
  return JSON.stringify({
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceSlice',
    metadata: { name },
    spec: {
      driver,
      nodeName: node,
      pool: { name: node, generation, resourceSliceCount: 1 },
      devices: [
        {
          name: 'gpu-0',
          allowMultipleAllocations: true,
          capacity: {
            cores: { value: '100', requestPolicy: { default: '100', validRange: { min: '1', max: '100', step: '1' } } },
            memory: { value: '80Gi' },
          },
        },
      ],
    },
  });
}

function claim(name: string, capacity: Record<string, string> | undefined, extra: object = {}): string {
  return JSON.stringify({
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: { name, namespace: 'team-a' },
    spec: {
      devices: {
        requests: [
          {
            name: 'gpu',
            exactly: { deviceClassName: 'gpu.vcuda.io', ...(capacity ? { capacity: { requests: capacity } } : {}) },
          },
        ],
        ...extra,
      },
    },
  });
}

/** Polls `probe` until it returns true; every wait has a deadline. */
async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

for (const source of SOURCES) {
  const skipped = source.skipReason ? ` (skipped: ${source.skipReason})` : '';
  describe.skipIf(source.skipReason !== undefined)(
    `the DRA install from ${source.name} on a real 1.36 API server${skipped}`,
    () => {
      let k8s: Kubernetes136;
      const ok = async (args: string[], opts: { token?: string; input?: string } = {}) => {
        const r = await k8s.kubectl(args, opts);
        if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
        return r.stdout;
      };

      beforeAll(async () => {
        k8s = await startKubernetes136();
        // The base's objects live in vcuda-system: a dry run cannot create it for them.
        await ok(['create', 'namespace', 'vcuda-system']);
        await ok(['create', 'namespace', 'team-a']);
      }, 300_000);
      afterAll(async () => {
        await k8s?.stop();
      }, 120_000);

      it('is accepted by kubectl apply --dry-run=server, every object', async () => {
        const built = await source.build(k8s);
        expect(built.code, built.stderr).toBe(0);
        const objects = built.stdout.split(/^---$/m).filter((doc) => /^kind: /m.test(doc)).length;
        const out = await ok(['apply', '--dry-run=server', '-f', '-'], { input: built.stdout });
        const lines = out.split('\n').filter((l) => l.endsWith('(server dry run)'));
        expect(lines).toHaveLength(objects);
        // DRA mode has no second scheduler: kube-scheduler allocates the claims.
        expect(lines.filter((l) => l.includes('vcuda-scheduler'))).toEqual([]);
        for (const want of [
          'deviceclass.resource.k8s.io/gpu.vcuda.io created',
          'deviceclass.resource.k8s.io/mig.gpu.vcuda.io created',
          'clusterrole.rbac.authorization.k8s.io/vcuda-node-agent-dra created',
          'validatingadmissionpolicy.admissionregistration.k8s.io/vcuda-node-agent-own-resourceslices created',
          'validatingadmissionpolicybinding.admissionregistration.k8s.io/vcuda-node-agent-own-resourceslices created',
          'daemonset.apps/vcuda-node-agent created',
        ]) {
          expect(lines).toContain(`${want} (server dry run)`);
        }
      });

      describe('installed', () => {
        let agentToken = '';
        let unboundToken = '';

        beforeAll(async () => {
          const installed = await source.install(k8s);
          if (installed.code !== 0) throw new Error(`install from ${source.name}: ${installed.stderr}`);
          for (const node of ['gpu-node-a', 'gpu-node-b']) {
            await ok(['create', '-f', '-'], {
              input: JSON.stringify({ apiVersion: 'v1', kind: 'Node', metadata: { name: node } }),
            });
          }
          const pod = {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: 'vcuda-node-agent-x7k2p', namespace: 'vcuda-system' },
            spec: {
              serviceAccountName: AGENT,
              nodeName: 'gpu-node-a',
              containers: [{ name: 'agent', image: 'vcuda' }],
            },
          };
          await ok(['create', '-f', '-'], { input: JSON.stringify(pod) });
          // As the kubelet mounts it: bound to the agent's pod, so the API server knows its node.
          const bound = ['--bound-object-kind', 'Pod', '--bound-object-name', 'vcuda-node-agent-x7k2p'];
          agentToken = (await ok(['-n', 'vcuda-system', 'create', 'token', AGENT, ...bound])).trim();
          unboundToken = (await ok(['-n', 'vcuda-system', 'create', 'token', AGENT])).trim();
          await ok(['create', '-f', '-'], { input: slice('gpu-node-b-gpu.vcuda.io', 'gpu-node-b') });
          // The policy takes effect once the API server has loaded it: a dry run goes through it too.
          // The probe is the refusal no test below relies on, so each of theirs fails on its own.
          await waitFor('the ResourceSlice policy to take effect', async () => {
            const r = await k8s.kubectl(['create', '--dry-run=server', '-f', '-'], {
              token: unboundToken,
              input: slice('probe', 'gpu-node-a'),
            });
            return r.code !== 0 && r.stderr.includes('vcuda-node-agent-own-resourceslices');
          });
        }, 120_000);

        it("lets a node agent write its own node's slices", async () => {
          const asAgent = { token: agentToken };
          await ok(['create', '-f', '-'], { ...asAgent, input: slice('gpu-node-a-gpu.vcuda.io', 'gpu-node-a') });
          // The agent updates (its role has no patch): a new generation of its pool.
          const next = slice('gpu-node-a-gpu.vcuda.io', 'gpu-node-a', 'gpu.vcuda.io', 2);
          await ok(['replace', '-f', '-'], { ...asAgent, input: next });
          await ok(['delete', 'resourceslice', 'gpu-node-a-gpu.vcuda.io'], asAgent);
        });

        it.each([
          [
            'create a slice of another node',
            ['create', '-f', '-'],
            slice('b-forged', 'gpu-node-b'),
            "not node gpu-node-b's",
          ],
          [
            'change a slice of another node',
            ['replace', '-f', '-'],
            slice('gpu-node-b-gpu.vcuda.io', 'gpu-node-b', 'gpu.vcuda.io', 2),
            "not node gpu-node-b's",
          ],
          [
            'delete a slice of another node',
            ['delete', 'resourceslice', 'gpu-node-b-gpu.vcuda.io'],
            undefined,
            "not node gpu-node-b's",
          ],
          [
            'publish for another driver',
            ['create', '-f', '-'],
            slice('a-nic', 'gpu-node-a', 'nic.example.com'),
            'not nic.example.com',
          ],
        ])('refuses a node agent that tries to %s', async (_what, args, input, why) => {
          const r = await k8s.kubectl(args, { token: agentToken, ...(input ? { input } : {}) });
          expect(r.code).not.toBe(0);
          expect(r.stderr).toContain("ValidatingAdmissionPolicy 'vcuda-node-agent-own-resourceslices'");
          expect(r.stderr).toContain(why);
          // Still there, unchanged, for its own agent.
          const generation = [
            'get',
            'resourceslice',
            'gpu-node-b-gpu.vcuda.io',
            '-o',
            'jsonpath={.spec.pool.generation}',
          ];
          expect(await ok(generation)).toBe('1');
        });

        it('refuses the agent account with a token that names no node', async () => {
          const r = await k8s.kubectl(['create', '-f', '-'], {
            token: unboundToken,
            input: slice('a-unbound', 'gpu-node-a'),
          });
          expect(r.code).not.toBe(0);
          expect(r.stderr).toContain('this credential names no node');
        });

        it('reports on claims allocated on its own node only (resourceclaims/driver, associated-node)', async () => {
          const allocate = async (name: string, node: string) => {
            await ok(['create', '-f', '-'], { input: claim(name, undefined) });
            const c = JSON.parse(await ok(['-n', 'team-a', 'get', 'resourceclaim', name, '-o', 'json']));
            c.status = {
              allocation: {
                devices: { results: [{ request: 'gpu', driver: 'gpu.vcuda.io', pool: node, device: 'gpu-0' }] },
                nodeSelector: {
                  nodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [node] }] }],
                },
              },
            };
            await ok(['replace', '--subresource', 'status', '-f', '-'], { input: JSON.stringify(c) });
          };
          const report = async (name: string, node: string) => {
            const c = JSON.parse(
              await ok(['-n', 'team-a', 'get', 'resourceclaim', name, '-o', 'json'], { token: agentToken }),
            );
            c.status.devices = [{ driver: 'gpu.vcuda.io', pool: node, device: 'gpu-0' }];
            return k8s.kubectl(['replace', '--subresource', 'status', '-f', '-'], {
              token: agentToken,
              input: JSON.stringify(c),
            });
          };
          await allocate('on-a', 'gpu-node-a');
          await allocate('on-b', 'gpu-node-b');
          expect((await report('on-a', 'gpu-node-a')).code).toBe(0);
          const other = await report('on-b', 'gpu-node-b');
          expect(other.code).not.toBe(0);
          expect(other.stderr).toContain('cannot arbitrary-node:update resource "resourceclaims/driver"');
        });
      });

      describe('the claim hooks, registered as the control plane registers them', () => {
        const seen: string[] = [];
        let server: https.Server;

        beforeAll(async () => {
          const tls = await issueServingCertificate({ dnsNames: [], ipAddresses: ['127.0.0.1'] }, 2, new Date());
          const listener = createAdmissionListener({
            names: resourceNames(),
            memoryUnitMiB: 1,
            clusterName: 'real',
            privilegedUsernames: [],
            maxBodyBytes: 3 << 20,
            logger: { info: () => {}, warn: () => {} },
          });
          server = https.createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
            seen.push(req.url ?? '');
            if (!listener(req, res)) res.writeHead(404).end();
          });
          await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
          const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
          const config = registrationConfigSchema.parse({ url, exemptNamespaces: ['kube-system', 'vcuda-system'] });
          const claims = { deviceClassName: 'gpu.vcuda.io', driverName: 'gpu.vcuda.io' };
          const built = buildClaimWebhookConfigurations({ config, claims, caBundlePem: tls.caPem });
          await ok(['apply', '-f', '-'], {
            input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [built.mutating, built.validating] }),
          });
          // Webhook configurations take effect once loaded: wait until a bad claim is refused.
          await waitFor('the claim hooks to take effect', async () => {
            const r = await k8s.kubectl(['create', '--dry-run=server', '-f', '-'], {
              input: claim('probe', { cores: '101' }),
            });
            return r.code !== 0;
          });
        }, 120_000);
        afterAll(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

        it("refuses a bad vcuda claim with vcuda's message, naming every bad field", async () => {
          const r = await k8s.kubectl(['create', '-f', '-'], {
            input: claim(
              'bad',
              { cores: '30' },
              { config: [{ opaque: { driver: 'gpu.vcuda.io', parameters: { coreLimit: 10 } } }] },
            ),
          });
          expect(r.code).not.toBe(0);
          expect(r.stderr).toContain(
            'admission webhook "mutate.resourceclaims.vcuda.io" denied the request: vcuda refused resourceclaim team-a/bad: 2 problems:',
          );
          expect(r.stderr).toContain(
            'spec.devices.requests[0].exactly.capacity.requests["memory"]: a share of a card (cores: 30) must state memory',
          );
          expect(r.stderr).toContain(
            'spec.devices.config[0].opaque.parameters.coreLimit: 10 is below request "gpu"\'s cores (30)',
          );
        });

        it('admits a good one, and never calls vcuda for a claim of another class', async () => {
          await ok(['create', '-f', '-'], { input: claim('good', { cores: '30', memory: '8Gi' }) });
          seen.length = 0;
          const other = JSON.parse(claim('nic', undefined));
          other.spec.devices.requests[0].exactly.deviceClassName = 'nic.example.com';
          await ok(['create', '-f', '-'], { input: JSON.stringify(other) });
          expect(seen).toEqual([]);
        });
      });
    },
  );
}
