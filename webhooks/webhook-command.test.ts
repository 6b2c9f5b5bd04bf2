import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { checkPod, renderManifests } from './webhook-command.js';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const base = {
  namespace: 'vcuda-system',
  service: 'vcuda-control-plane',
  port: 443,
  domain: 'nvidia.com',
  timeoutSeconds: 5,
  caBundlePem: CA,
};

describe('vcuda webhook manifests', () => {
  it('renders both configurations as YAML for the given server version', () => {
    const old = parseAllDocuments(renderManifests({ ...base, serverVersion: '1.26' })).map((d) => d.toJS());
    expect(old.map((d) => [d.kind, d.webhooks.length])).toEqual([
      ['MutatingWebhookConfiguration', 2],
      ['ValidatingWebhookConfiguration', 1],
    ]);
    expect(JSON.stringify(old)).not.toContain('matchConditions');
    const recent = parseAllDocuments(
      renderManifests({ ...base, serverVersion: 'v1.30', url: 'https://10.0.0.5:8443' }),
    ).map((d) => d.toJS());
    expect(recent[0].webhooks[0].matchConditions).toHaveLength(1);
    expect(recent[1].webhooks[0].clientConfig.url).toBe('https://10.0.0.5:8443/admission/validate');
  });

  it('adds the claim hooks with --claims, for the DeviceClass and driver given', () => {
    const claims = { deviceClassName: 'gpu.example.com', driverName: 'gpu.example.com' };
    const docs = parseAllDocuments(renderManifests({ ...base, serverVersion: '1.36', claims })).map((d) => d.toJS());
    expect(docs.map((d) => d.metadata.name)).toEqual([
      'vcuda-mutate-pods',
      'vcuda-validate-pods',
      'vcuda-mutate-claims',
      'vcuda-validate-claims',
    ]);
    expect(docs[3].webhooks[0].matchConditions[0].expression).toContain(
      "r.exactly.deviceClassName == 'gpu.example.com'",
    );
    expect(docs[3].webhooks[0].clientConfig.service.path).toBe('/admission/validate-claims');
  });

  it("declares NoneOnDryRun on the pods' mutating hook with --dra-pods", () => {
    const docs = parseAllDocuments(renderManifests({ ...base, serverVersion: '1.36', draPods: true })).map((d) =>
      d.toJS(),
    );
    expect(docs.map((d) => d.webhooks.map((w: { sideEffects: string }) => w.sideEffects))).toEqual([
      ['NoneOnDryRun'],
      ['None'],
    ]);
  });

  it('refuses a version it cannot read', () => {
    expect(() => renderManifests({ ...base, serverVersion: 'latest' })).toThrow(
      '--server-version: "latest" is not MAJOR.MINOR',
    );
  });
});

describe('vcuda webhook check', () => {
  const opts = { domain: 'nvidia.com', memoryUnitMiB: 1, namespace: 'default' };

  it('admits a good pod and shows the patch', async () => {
    const yaml = `
apiVersion: v1
kind: Pod
metadata:
  name: infer
  annotations:
    vcuda.io/assignment: forged
spec:
  containers:
    - name: model
      image: pytorch
      resources:
        limits:
          nvidia.com/vcuda-core: 30
          nvidia.com/vcuda-memory: 8192
`;
    const out = await checkPod(yaml, { ...opts, schedulerName: 'vcuda-scheduler' });
    expect(out.admitted).toBe(true);
    expect(out.output).toContain('warning: removed annotation vcuda.io/assignment');
    expect(out.output).toContain('path: /metadata/annotations/nvidia.com~1vcuda-core-limit');
    expect(out.output).toContain('value: vcuda-scheduler');
  });

  it('shows the claims and the templates in DRA mode, for tencent.com too', async () => {
    const yaml = `
apiVersion: v1
kind: Pod
metadata:
  name: infer
  namespace: ml
  annotations:
    tencent.com/vcuda-core-limit: "60"
spec:
  containers:
    - name: model
      image: pytorch
      resources:
        limits:
          tencent.com/vcuda-core: 30
          tencent.com/vcuda-memory: 32
`;
    const out = await checkPod(yaml, { domain: 'tencent.com', memoryUnitMiB: 256, namespace: 'default', dra: true });
    expect(out.admitted).toBe(true);
    expect(out.output).toContain('path: /spec/resourceClaims');
    expect(out.output).toContain('resourceClaimTemplateName: vcuda-c30-m8gi-l60');
    expect(out.output).toContain('ResourceClaimTemplates the control plane makes:');
    expect(out.output).toContain('namespace: ml');
    expect(out.output).toContain('memory: 8192Mi');
    expect(out.output).toContain('coreLimit: 60');
  });

  it('prints every problem of a bad pod and reports it as not admitted', async () => {
    const json = JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'bad', namespace: 'team-a' },
      spec: { nodeName: 'n1', containers: [{ name: 'c', resources: { limits: { 'nvidia.com/vcuda-core': '150' } } }] },
    });
    const out = await checkPod(json, opts);
    expect(out.admitted).toBe(false);
    expect(out.output).toContain('vcuda refused pod team-a/bad: 2 problems:');
    expect(out.output).toContain('spec.nodeName');
  });

  it('names what is wrong with something that is not a pod', async () => {
    await expect(checkPod('kind: Pod\nspec: {}\n', opts)).rejects.toThrow('request.object.spec.containers');
  });
});

describe('vcuda webhook check: what people feed it', () => {
  const opts = { domain: 'nvidia.com', memoryUnitMiB: 1, namespace: 'default' };
  const template = `
    metadata:
      labels: {app: infer}
    spec:
      containers:
        - name: model
          resources:
            limits: {nvidia.com/vcuda-core: 150}`;

  it('checks the pod template of a Deployment as the pods it creates', async () => {
    const deployment = `apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: infer, namespace: team-a}\nspec:\n  template:${template.replaceAll('\n    ', '\n    ')}\n`;
    const out = await checkPod(deployment, opts, 'deploy.yaml');
    expect(out.admitted).toBe(false);
    expect(out.output).toContain('vcuda refused pod team-a/infer');
    expect(out.output).toContain('150 is neither below 100 nor a multiple of 100');
  });

  it('names the file and the kind it cannot check', async () => {
    await expect(checkPod('apiVersion: v1\nkind: Service\nmetadata: {name: s}\n', opts, 'svc.yaml')).rejects.toThrow(
      'svc.yaml: is a Service; vcuda webhook check takes a Pod or a workload with a pod template',
    );
  });

  it('names the file of a multi-document manifest', async () => {
    await expect(checkPod('kind: Pod\n---\nkind: Pod\n', opts, 'two.yaml')).rejects.toThrow(
      'two.yaml: holds 2 YAML documents',
    );
  });

  it('refuses vcuda resources in requests only, as the API server does', async () => {
    const pod = JSON.stringify({
      kind: 'Pod',
      metadata: { name: 'req-only' },
      spec: {
        containers: [
          { name: 'c', resources: { requests: { 'nvidia.com/vcuda-core': '30', 'nvidia.com/vcuda-memory': '1024' } } },
        ],
      },
    });
    const out = await checkPod(pod, opts);
    expect(out.admitted).toBe(false);
    expect(out.output).toContain('spec.containers[0].resources.limits["nvidia.com/vcuda-core"]: must be set');
  });
});
