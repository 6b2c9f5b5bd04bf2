/**
 * Bad `resource.k8s.io/v1` objects, each sent as a dry-run create to an API server, and the
 * answer reduced to what must agree between the simulator and kube-apiserver 1.36: the status
 * code and the causes (`field: message`, sorted).
 */

const GV = '/apis/resource.k8s.io/v1';
const CLAIMS = `${GV}/namespaces/default/resourceclaims`;

type Case = { name: string; path: string; body: unknown };

const claim = (requests: unknown[], extra: Record<string, unknown> = {}) => ({
  apiVersion: 'resource.k8s.io/v1',
  kind: 'ResourceClaim',
  metadata: { name: 'bad' },
  spec: { devices: { requests, ...extra } },
});
const slice = (spec: Record<string, unknown>) => ({
  apiVersion: 'resource.k8s.io/v1',
  kind: 'ResourceSlice',
  metadata: { name: 'bad' },
  spec,
});
const policy = { default: '100', validRange: { min: '1', max: '100', step: '1' } };
const pool = { name: 'p', generation: 1, resourceSliceCount: 1 };
const counterSets = (sets: number, counters: number) =>
  Array.from({ length: sets }, (_, i) => ({
    name: `gpu-${i}-counters`,
    counters: Object.fromEntries(Array.from({ length: counters }, (_, j) => [`memory-slice-${j}`, { value: '1' }])),
  }));
const consumers = (devices: number, sets: number) =>
  Array.from({ length: devices }, (_, i) => ({
    name: `d${i}`,
    consumesCounters: Array.from({ length: sets }, (_, j) => ({
      counterSet: `gpu-${j}-counters`,
      counters: { 'memory-slice-0': { value: '1' } },
    })),
  }));

export const BAD_DRA_OBJECTS: Case[] = [
  { name: 'claim without a class', path: CLAIMS, body: claim([{ name: 'gpu', exactly: {} }]) },
  { name: 'claim request with neither form', path: CLAIMS, body: claim([{ name: 'gpu' }]) },
  {
    name: 'claim request with both forms',
    path: CLAIMS,
    body: claim([
      { name: 'gpu', exactly: { deviceClassName: 'x' }, firstAvailable: [{ name: 'a', deviceClassName: 'x' }] },
    ]),
  },
  {
    name: 'claim request named badly',
    path: CLAIMS,
    body: claim([{ name: 'GPU_1', exactly: { deviceClassName: 'x' } }]),
  },
  {
    name: 'claim request named twice',
    path: CLAIMS,
    body: claim([
      { name: 'a', exactly: { deviceClassName: 'x' } },
      { name: 'a', exactly: { deviceClassName: 'x' } },
    ]),
  },
  {
    name: 'claim with count and All',
    path: CLAIMS,
    body: claim([{ name: 'a', exactly: { deviceClassName: 'x', allocationMode: 'All', count: 2 } }]),
  },
  {
    name: 'claim with an unknown mode',
    path: CLAIMS,
    body: claim([{ name: 'a', exactly: { deviceClassName: 'x', allocationMode: 'Some' } }]),
  },
  {
    name: 'claim constraint on no request',
    path: CLAIMS,
    body: claim([{ name: 'a', exactly: { deviceClassName: 'x' } }], {
      constraints: [{ requests: ['b'], distinctAttribute: 'gpu.vcuda.io/uuid' }],
    }),
  },
  {
    name: 'claim capacity that is not a quantity',
    path: CLAIMS,
    body: claim([{ name: 'a', exactly: { deviceClassName: 'x', capacity: { requests: { cores: 'abc' } } } }]),
  },
  { name: 'slice without driver and pool', path: `${GV}/resourceslices`, body: slice({ nodeName: 'n' }) },
  {
    name: 'slice with everything wrong',
    path: `${GV}/resourceslices`,
    body: slice({
      driver: 'Gpu_x',
      nodeName: 'n',
      allNodes: true,
      pool: { name: 'p', generation: -1, resourceSliceCount: 0 },
      devices: [{ name: 'A' }],
    }),
  },
  {
    name: 'slice with a policy on an exclusive device and a name twice',
    path: `${GV}/resourceslices`,
    body: slice({
      driver: 'gpu.vcuda.io',
      nodeName: 'n',
      pool,
      devices: [{ name: 'd', capacity: { cores: { value: '100', requestPolicy: policy } } }, { name: 'd' }],
    }),
  },
  {
    name: 'slice with counter sets and devices',
    path: `${GV}/resourceslices`,
    body: slice({
      driver: 'gpu.vcuda.io',
      nodeName: 'n',
      pool,
      sharedCounters: [{ name: 'gpu-0-counters', counters: { 'memory-slice-0': { value: '1' } } }],
      devices: [
        {
          name: 'd',
          consumesCounters: [{ counterSet: 'gpu-0-counters', counters: { 'memory-slice-0': { value: '1' } } }],
        },
      ],
    }),
  },
  {
    name: 'slice with nine counter sets',
    path: `${GV}/resourceslices`,
    body: slice({ driver: 'gpu.vcuda.io', nodeName: 'n', pool, sharedCounters: counterSets(9, 1) }),
  },
  {
    name: 'slice with a counter set of 33 counters',
    path: `${GV}/resourceslices`,
    body: slice({ driver: 'gpu.vcuda.io', nodeName: 'n', pool, sharedCounters: counterSets(2, 33) }),
  },
  {
    name: 'slice of 65 devices consuming counters',
    path: `${GV}/resourceslices`,
    body: slice({ driver: 'gpu.vcuda.io', nodeName: 'n', pool, devices: consumers(65, 1) }),
  },
  {
    name: 'slice with devices consuming from three sets',
    path: `${GV}/resourceslices`,
    body: slice({ driver: 'gpu.vcuda.io', nodeName: 'n', pool, devices: consumers(2, 3) }),
  },
  {
    name: 'class selector without CEL',
    path: `${GV}/deviceclasses`,
    body: {
      apiVersion: 'resource.k8s.io/v1',
      kind: 'DeviceClass',
      metadata: { name: 'bad' },
      spec: { selectors: [{}] },
    },
  },
];

type Cause = { field?: string; message?: string };
export type Refusal = { name: string; code: number; causes: string[] };

/** The answer to a dry-run create of each bad object, at `baseUrl` (plain HTTP, no token: an admin front or the sim). */
export async function refusals(baseUrl: string): Promise<Refusal[]> {
  const out: Refusal[] = [];
  for (const c of BAD_DRA_OBJECTS) {
    const res = await fetch(`${baseUrl}${c.path}?dryRun=All`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(c.body),
    });
    const status = (await res.json()) as { details?: { causes?: Cause[] } };
    // kube-apiserver names each cause's field apart; the simulator writes `field: message` as one.
    const causes = (status.details?.causes ?? []).map((k) =>
      k.field ? `${k.field}: ${k.message}` : String(k.message),
    );
    out.push({ name: c.name, code: res.status, causes: causes.sort() });
  }
  return out;
}
