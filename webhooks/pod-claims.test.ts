import fastJsonPatch from 'fast-json-patch';
import { describe, expect, it } from 'vitest';
import { resourceNames } from '../contract/index.js';
import { pod } from '../test/builders/pod.js';
import { type MutationPolicy, type MutationResult, mutatePodCreate } from './mutate.js';
import { type ClaimTemplate, claimTemplateName, type DraPodPolicy, podClaimName } from './pod-claims.js';
import { readClaimSpec } from './validate-claim.js';

const CLASS = 'gpu.vcuda.io';
const dra: DraPodPolicy = { deviceClassName: CLASS, driverName: CLASS, modeValue: 'dra' };

function policyFor(domain: string, memoryUnitMiB = 1, draPolicy: DraPodPolicy | undefined = dra): MutationPolicy {
  return {
    quantity: { names: resourceNames(domain), memoryUnitMiB },
    privilegedUsernames: new Set(),
    schedulerName: 'vcuda-scheduler',
    dra: draPolicy,
  };
}
const policy = policyFor('nvidia.com');
const names = resourceNames('nvidia.com');

type Pod = {
  metadata?: { annotations?: Record<string, string> };
  spec: {
    resourceClaims?: { name: string; resourceClaimTemplateName: string }[];
    containers: { name: string; resources: { limits: object; requests?: object; claims?: { name: string }[] } }[];
    initContainers?: { name: string; resources: { limits: object; claims?: { name: string }[] } }[];
    schedulerName?: string;
    nodeSelector?: Record<string, string>;
  };
};

function admitted(result: MutationResult) {
  if (result.kind !== 'admitted') throw new Error(`expected admitted, got ${JSON.stringify(result)}`);
  return result;
}

/** The patch applied as the API server applies it, and the templates. */
function convert(
  p: object,
  pol: MutationPolicy = policy,
): { out: Pod; templates: ClaimTemplate[]; warnings: string[] } {
  const result = admitted(mutatePodCreate(p, pol, 'team-a'));
  const ops = result.patch as fastJsonPatch.Operation[];
  const out = fastJsonPatch.applyPatch(structuredClone(p), ops, true, false).newDocument as Pod;
  return { out, templates: result.templates ?? [], warnings: result.warnings };
}

/** Each template as the claim hooks judge it (validate-claim.ts): it must pass, and say this. */
function judged(t: ClaimTemplate) {
  const reading = readClaimSpec(t.spec.spec, 'spec.spec', { deviceClassName: CLASS, driverName: CLASS });
  if (reading.kind !== 'ok') throw new Error(`template ${t.metadata.name} refused: ${JSON.stringify(reading)}`);
  return reading.requests.map(({ cores, memoryBytes, count }) => ({ cores, memoryBytes, count }));
}

const GIB = 1024 ** 3;

describe('pods moved to DRA at admission', () => {
  it('turns a share into a claim from a template named by its shape, and leaves no vcuda resource', () => {
    const { out, templates } = convert(pod('a').share(30, 8192, 'main').obj());
    expect(out.spec.containers[0]?.resources).toEqual({ limits: {}, requests: {}, claims: [{ name: 'vcuda-main' }] });
    expect(out.spec.resourceClaims).toEqual([{ name: 'vcuda-main', resourceClaimTemplateName: 'vcuda-c30-m8gi' }]);
    // kube-scheduler places it: no extender profile, no vcuda.io/ label or injected limit.
    expect(out.spec.schedulerName).toBeUndefined();
    expect(out.metadata?.annotations).toEqual({});
    expect(templates.map((t) => [t.metadata.namespace, t.metadata.name])).toEqual([['team-a', 'vcuda-c30-m8gi']]);
    expect(templates[0]?.spec.spec.devices.requests[0]?.exactly.capacity?.requests).toEqual({
      cores: '30',
      memory: '8192Mi',
    });
    expect(templates.flatMap(judged)).toEqual([{ cores: 30, memoryBytes: 8 * GIB, count: 1 }]);
  });

  it('carries the soft limit annotation as the driver’s GpuShareConfig, in the template’s name too', () => {
    const { templates } = convert(pod('a').share(30, 8192).coreLimit(60).obj());
    expect(templates.map((t) => t.metadata.name)).toEqual(['vcuda-c30-m8gi-l60']);
    expect(templates[0]?.spec.spec.devices.config).toEqual([
      {
        requests: ['gpu'],
        opaque: {
          driver: CLASS,
          parameters: { apiVersion: 'gpu.vcuda.io/v1alpha1', kind: 'GpuShareConfig', coreLimit: 60 },
        },
      },
    ]);
    judged(templates[0] as ClaimTemplate);
    // A hard limit (the annotation at the request) needs no config.
    const hard = convert(pod('b').share(30, 8192).coreLimit(30).obj()).templates;
    expect(hard.map((t) => [t.metadata.name, t.spec.spec.devices.config])).toEqual([['vcuda-c30-m8gi', undefined]]);
  });

  it('asks whole cards by count, with no capacity: the cards’ whole cores and memory', () => {
    const { out, templates } = convert(pod('a').whole(2, 'train').obj());
    expect(out.spec.resourceClaims).toEqual([{ name: 'vcuda-train', resourceClaimTemplateName: 'vcuda-whole-2' }]);
    expect(templates[0]?.spec.spec.devices.requests).toEqual([
      { name: 'gpu', exactly: { deviceClassName: CLASS, allocationMode: 'ExactCount', count: 2 } },
    ]);
    expect(templates.flatMap(judged)).toEqual([{ cores: 100, memoryBytes: undefined, count: 2 }]);
  });

  it('asks whole MIG instances as partitions of the MIG DeviceClass, by profile, and leaves no MIG resource', () => {
    const { out, templates } = convert(pod('a').share(30, 8192, 'side').mig('1g.10gb+me', 2, 'train').obj());
    const train = out.spec.containers.find((c) => c.name === 'train');
    expect(train?.resources).toEqual({ limits: {}, requests: {}, claims: [{ name: 'vcuda-train' }] });
    expect(out.spec.resourceClaims).toEqual([
      { name: 'vcuda-side', resourceClaimTemplateName: 'vcuda-c30-m8gi' },
      { name: 'vcuda-train', resourceClaimTemplateName: 'vcuda-mig-1g-10gb-me-2' },
    ]);
    const mig = templates.find((t) => t.metadata.name === 'vcuda-mig-1g-10gb-me-2');
    expect(mig?.spec.spec.devices).toEqual({
      requests: [
        {
          name: 'gpu',
          exactly: {
            deviceClassName: 'mig.gpu.vcuda.io',
            allocationMode: 'ExactCount',
            count: 2,
            selectors: [{ cel: { expression: "device.attributes['gpu.vcuda.io'].profile == '1g.10gb+me'" } }],
          },
        },
      ],
    });
  });

  it('gives every container and init container a claim of its own, one template per shape', () => {
    const p = pod('a')
      .init('setup', { [names.core]: '10', [names.memory]: '1536' })
      .share(30, 8192, 'left')
      .share(30, 8192, 'right')
      .whole(1, 'big')
      .container('plain', { cpu: '1' })
      .obj();
    const { out, templates } = convert(p);
    expect(out.spec.resourceClaims).toEqual([
      { name: 'vcuda-setup', resourceClaimTemplateName: 'vcuda-c10-m1536mi' },
      { name: 'vcuda-left', resourceClaimTemplateName: 'vcuda-c30-m8gi' },
      { name: 'vcuda-right', resourceClaimTemplateName: 'vcuda-c30-m8gi' },
      { name: 'vcuda-big', resourceClaimTemplateName: 'vcuda-whole-1' },
    ]);
    expect(out.spec.initContainers?.[0]?.resources.claims).toEqual([{ name: 'vcuda-setup' }]);
    expect(out.spec.containers.map((c) => c.resources.claims)).toEqual([
      [{ name: 'vcuda-left' }],
      [{ name: 'vcuda-right' }],
      [{ name: 'vcuda-big' }],
      undefined,
    ]);
    expect(out.spec.containers[3]?.resources.limits).toEqual({ cpu: '1' });
    expect(templates.map((t) => t.metadata.name)).toEqual(['vcuda-c10-m1536mi', 'vcuda-c30-m8gi', 'vcuda-whole-1']);
    templates.forEach(judged);
  });

  it('reads tencent.com and memory units as the extender does', () => {
    const p = pod('a', 'tencent.com').share(30, 32, 'main').coreLimit(45).obj();
    const { out, templates } = convert(p, policyFor('tencent.com', 256));
    expect(out.spec.containers[0]?.resources).toEqual({ limits: {}, requests: {}, claims: [{ name: 'vcuda-main' }] });
    expect(templates.map((t) => t.metadata.name)).toEqual(['vcuda-c30-m8gi-l45']);
    expect(templates.flatMap(judged)).toEqual([{ cores: 30, memoryBytes: 8 * GIB, count: 1 }]);
  });

  it('appends to claims the pod and its containers already have', () => {
    const p = pod('a').share(30, 8192, 'main').obj() as unknown as Pod;
    p.spec.resourceClaims = [{ name: 'vcuda-main', resourceClaimTemplateName: 'nic' }];
    (p.spec.containers[0] as { resources: { claims?: { name: string }[] } }).resources.claims = [
      { name: 'vcuda-main' },
    ];
    const { out } = convert(p);
    expect(out.spec.resourceClaims?.map((c) => c.name)).toEqual(['vcuda-main', 'vcuda-main-2']);
    expect(out.spec.containers[0]?.resources.claims).toEqual([{ name: 'vcuda-main' }, { name: 'vcuda-main-2' }]);
  });

  it('names claims as DNS labels whatever the container’s name', () => {
    const long = 'a'.repeat(63);
    const name = podClaimName(long, new Set());
    expect(name.length).toBeLessThanOrEqual(63);
    expect(name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    expect(podClaimName(long, new Set([name]))).not.toBe(name);
    expect(
      claimTemplateName({
        name: 'x',
        isInit: false,
        corePerCard: 5,
        cards: 1,
        memoryMiBPerCard: 100,
        coreLimit: 100,
        mode: 'soft',
      }),
    ).toBe('vcuda-c5-m100mi-l100');
  });

  it('converts only pods that select DRA nodes when a mode label is set', () => {
    const labelled = policyFor('nvidia.com', 1, { ...dra, modeLabel: 'gpu.vcuda.io/mode' });
    const extender = admitted(mutatePodCreate(pod('a').share(30, 8192).obj(), labelled, 'team-a'));
    expect(extender.templates).toBeUndefined();
    expect(extender.patch.map((o) => o.path)).toContain('/spec/schedulerName');
    const p = pod('b').share(30, 8192).obj() as unknown as Pod;
    p.spec.nodeSelector = { 'gpu.vcuda.io/mode': 'dra' };
    expect(convert(p, labelled).templates.map((t) => t.metadata.name)).toEqual(['vcuda-c30-m8gi']);
  });

  it('says that a memory burst is not carried', () => {
    const { warnings } = convert(pod('a').share(30, 8192, 'main').memoryLimit(10240).obj());
    expect(warnings).toContain('nvidia.com/vcuda-memory-limit not carried to DRA: main holds its request, 8192 MiB');
  });

  it.each(['nvidia.com', 'tencent.com'])('refuses the bad pods of %s with the extender mode’s messages', (domain) => {
    const n = resourceNames(domain);
    const bad = [
      pod('a', domain)
        .container('c', { [n.core]: '30' })
        .obj(),
      pod('b', domain)
        .container('c', { [n.core]: '150', [n.memory]: '1' })
        .obj(),
      pod('c', domain)
        .container('c', { [n.core]: '30', [n.memory]: '0.5' })
        .obj(),
      pod('d', domain).share(30, 8192).coreLimit(20).obj(),
      pod('e', domain).share(30, 8192).onNode('gpu-1').obj(),
      pod('f', domain)
        .container('c', { [n.memory]: '1024' })
        .obj(),
      pod('g', domain).whole(1).coreLimit(50).obj(),
      pod('h', domain)
        .init('i', { [n.core]: '30', [n.memory]: '2' })
        .share(20, 1)
        .coreLimit('x')
        .obj(),
    ];
    for (const p of bad) {
      const withDra = mutatePodCreate(p, policyFor(domain));
      const without = mutatePodCreate(p, policyFor(domain, 1, undefined));
      expect(withDra.kind).toBe('refused');
      expect(withDra).toEqual(without);
    }
  });

  it('leaves pods without vcuda resources alone', () => {
    expect(mutatePodCreate(pod('w').container('web', { cpu: '1' }).obj(), policy)).toEqual({ kind: 'not-vcuda' });
  });
});
