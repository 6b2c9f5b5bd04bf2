import { describe, expect, it } from 'vitest';
import { type DraFacts, type DraNode, judgeDra } from './dra-judge.js';

const now = new Date('2026-03-01T12:00:00Z');
const ctx = { now, namespace: 'vcuda-system' };
const DRIVER = 'gpu.vcuda.io';

function facts(extra: Partial<DraFacts> = {}): DraFacts {
  return {
    driver: DRIVER,
    servedVersions: ['v1', 'v1beta2'],
    deviceClass: true,
    slices: [
      { node: 'node-1', devices: 2, shareable: 2 },
      { node: 'node-2', devices: 1, shareable: 1 },
    ],
    unallocatedClaims: [],
    ...extra,
  };
}
const node = (name: string, x: Partial<DraNode> = {}): DraNode => ({
  name,
  hasInventory: false,
  gpuLabelled: true,
  ...x,
});
const nodes = [node('node-1'), node('node-2')];
const problems = (dra: DraFacts, n: DraNode[] = nodes) =>
  judgeDra(dra, n, ctx).filter((f) => f.verdict === 'fail' || f.verdict === 'warn');

describe('judgeDra', () => {
  it('passes a DRA cluster whose API, class, slices and claims are in order', () => {
    const findings = judgeDra(facts(), nodes, ctx);
    expect(findings.map((f) => [f.check, f.verdict])).toEqual([
      ['DRA API', 'ok'],
      ['DRA device class', 'ok'],
      ['DRA driver on nodes', 'ok'],
      ['DRA claims', 'ok'],
    ]);
    expect(findings[0]?.summary).toBe(
      'resource.k8s.io/v1, resource.k8s.io/v1beta2 served; consumable capacity on (devices shareable)',
    );
    expect(findings[2]?.summary).toBe('2 node(s) publish a ResourceSlice for gpu.vcuda.io: node-1, node-2');
  });

  it('skips a cluster without resource.k8s.io/v1, or with v1 and nothing of vcuda in it', () => {
    expect(judgeDra(facts({ servedVersions: ['v1beta1'] }), nodes, ctx)).toEqual([
      {
        check: 'DRA API',
        verdict: 'skip',
        summary:
          "only resource.k8s.io/v1beta1 served: vcuda's DRA driver needs resource.k8s.io/v1 (Kubernetes 1.34+); pods go through the extender",
      },
    ]);
    expect(judgeDra(facts({ servedVersions: [] }), nodes, ctx)[0]?.summary).toMatch(/^no resource.k8s.io served/);
    const none = judgeDra(facts({ deviceClass: false, slices: [] }), nodes, ctx);
    expect(none).toEqual([
      expect.objectContaining({ verdict: 'skip', summary: expect.stringContaining('not installed') }),
    ]);
    expect(judgeDra(undefined, nodes, ctx)).toEqual([]);
    expect(judgeDra({ error: 'HTTP 403' }, nodes, ctx)).toEqual([
      { check: 'DRA API', verdict: 'warn', summary: 'cannot read resource.k8s.io: HTTP 403' },
    ]);
  });

  it('fails when the API server stored no device shareable: consumable capacity is off', () => {
    const off = facts({ slices: [{ node: 'node-1', devices: 2, shareable: 0 }] });
    expect(problems(off, [node('node-1')])).toEqual([
      expect.objectContaining({
        check: 'DRA API',
        verdict: 'fail',
        fix: expect.stringContaining('DRAConsumableCapacity'),
      }),
    ]);
  });

  it('fails when slices are published but the DeviceClass is missing, with the overlay as the fix', () => {
    expect(problems(facts({ deviceClass: false }))).toEqual([
      expect.objectContaining({
        check: 'DRA device class',
        verdict: 'fail',
        summary: expect.stringContaining('no DeviceClass gpu.vcuda.io'),
        fix: 'kubectl apply -k deploy/overlays/dra (its device-class.yaml), or helm upgrade with --set mode=dra',
      }),
    ]);
  });

  it('names a vcuda node with no slice (driver not registered) and one served by both modes', () => {
    const found = problems(facts({ slices: [{ node: 'node-1', devices: 1, shareable: 1 }] }), [
      node('node-1', { hasInventory: true, deviceResources: true }),
      node('node-2', { hasInventory: true }),
      node('plain', { gpuLabelled: false }),
      node('extender-node', { hasInventory: true, deviceResources: true }),
    ]);
    expect(found).toEqual([
      expect.objectContaining({
        verdict: 'warn',
        summary: expect.stringMatching(/^node-1 is served both by the device plugin/),
      }),
      expect.objectContaining({
        verdict: 'fail',
        summary:
          "node-2 has vcuda cards but publishes no ResourceSlice for gpu.vcuda.io (nor the device plugin's vcuda-core): the driver is not registered there",
        fix: expect.stringContaining('kubectl get resourceslices --field-selector spec.nodeName=node-2'),
      }),
    ]);
  });

  it('counts device-plugin nodes beside DRA ones without complaint', () => {
    const mixed = judgeDra(facts(), [...nodes, node('old', { hasInventory: true, deviceResources: true })], ctx);
    expect(mixed.find((f) => f.check === 'DRA driver on nodes')).toMatchObject({
      verdict: 'ok',
      summary: expect.stringContaining('; 1 node(s) in extender mode'),
    });
  });

  it("lists claims stuck unallocated with kube-scheduler's reason, not claims no pod asks for yet", () => {
    const dra = facts({
      unallocatedClaims: [
        {
          namespace: 'ml',
          name: 'big',
          createdAt: '2026-03-01T11:59:00Z',
          waitingPods: [
            {
              name: 'trainer',
              reason: 'Unschedulable',
              message: '0/2 nodes are available: 2 cannot allocate all claims.',
            },
            { name: 'trainer-2' },
          ],
        },
        { namespace: 'ml', name: 'spare', waitingPods: [] },
      ],
    });
    expect(problems(dra)).toEqual([
      {
        check: 'DRA claims',
        verdict: 'warn',
        summary:
          'ml/big unallocated for 60 s; pod trainer (and 1 more pod(s)) waits: Unschedulable: 0/2 nodes are available: 2 cannot allocate all claims.',
        fix: 'kubectl -n ml describe resourceclaim big; kubectl -n ml describe pod trainer',
      },
    ]);
    const idle = judgeDra(
      facts({ unallocatedClaims: [{ namespace: 'ml', name: 'spare', waitingPods: [] }] }),
      nodes,
      ctx,
    );
    expect(idle.find((f) => f.check === 'DRA claims')?.summary).toBe(
      'no claim of gpu.vcuda.io waits for an allocation (1 unallocated, no pod asks for them yet)',
    );
  });

  it('names at most five stuck claims and counts the rest', () => {
    const unallocatedClaims = Array.from({ length: 7 }, (_, i) => ({
      namespace: 'ml',
      name: `c${i}`,
      waitingPods: [{ name: `p${i}` }],
    }));
    const found = problems(facts({ unallocatedClaims }));
    expect(found).toHaveLength(6);
    expect(found[0]?.summary).toBe('ml/c0 unallocated; pod p0 waits: no reason yet');
    expect(found[5]?.summary).toBe('and 2 more');
  });
});
