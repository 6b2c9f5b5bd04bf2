import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KubeApiError, KubeClient } from '../kube-client.js';
import { type SimApiServer, startApiServer } from './api-server.js';

const GV = '/apis/resource.k8s.io/v1';
const CLAIMS = `${GV}/namespaces/default/resourceclaims`;

const claim = (name: string, requests: unknown[], extra: Record<string, unknown> = {}) => ({
  apiVersion: 'resource.k8s.io/v1',
  kind: 'ResourceClaim',
  metadata: { name },
  spec: { devices: { requests, ...extra } },
});
const share = {
  name: 'gpu',
  exactly: { deviceClassName: 'gpu.vcuda.io', capacity: { requests: { cores: '30', memory: '8000M' } } },
};

async function refusal(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof KubeApiError) return { code: e.code, message: e.message };
    throw e;
  }
  throw new Error('the write was accepted');
}

describe('simulated API server: resource.k8s.io/v1 as kube-apiserver 1.36 serves it', () => {
  let api: SimApiServer;
  let client: KubeClient;
  beforeEach(async () => {
    api = await startApiServer({ kubernetesVersion: '1.36' });
    client = new KubeClient(api.url);
  });
  afterEach(async () => api.close());

  it('lists the DRA resources in discovery on 1.36, and nowhere on 1.26', async () => {
    const list = await client.get(GV);
    expect((list['resources'] as { name: string }[]).map((r) => r.name)).toEqual([
      'deviceclasses',
      'resourceclaims',
      'resourceclaims/status',
      'resourceclaimtemplates',
      'resourceslices',
    ]);
    const old = await startApiServer();
    try {
      const c = new KubeClient(old.url);
      expect((await refusal(c.get(`${GV}/deviceclasses`))).code).toBe(404);
      const groups = (await c.get('/apis'))['groups'] as { name: string }[];
      expect(groups.map((g) => g.name)).not.toContain('resource.k8s.io');
    } finally {
      await old.close();
    }
  });

  it('defaults a request and writes its quantities back in canonical form, status dropped', async () => {
    const made = await client.create(CLAIMS, { ...claim('c1', [share]), status: { reservedFor: [] } });
    expect(made['spec']).toEqual({
      devices: {
        requests: [
          {
            name: 'gpu',
            exactly: {
              deviceClassName: 'gpu.vcuda.io',
              allocationMode: 'ExactCount',
              count: 1,
              capacity: { requests: { cores: '30', memory: '8G' } },
            },
          },
        ],
      },
    });
    expect(made['status']).toBeUndefined();
  });

  it.each([
    [
      'no class',
      [{ name: 'gpu', exactly: {} }],
      {},
      'spec.devices.requests[0].exactly.deviceClassName: Required value',
    ],
    [
      'neither',
      [{ name: 'gpu' }],
      {},
      'spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required',
    ],
    [
      'both',
      [{ name: 'gpu', exactly: { deviceClassName: 'x' }, firstAvailable: [{ name: 'a', deviceClassName: 'x' }] }],
      {},
      'but multiple fields are set',
    ],
    [
      'a bad name',
      [{ name: 'GPU_1', exactly: { deviceClassName: 'x' } }],
      {},
      'requests[0].name: Invalid value: "GPU_1"',
    ],
    ['a name twice', [share, share], {}, 'spec.devices.requests[1]: Duplicate value: "gpu"'],
    [
      'count with All',
      [{ name: 'gpu', exactly: { deviceClassName: 'x', allocationMode: 'All', count: 2 } }],
      {},
      "count: Invalid value: 2: must not be specified when allocationMode is 'All'",
    ],
    [
      'an unknown mode',
      [{ name: 'gpu', exactly: { deviceClassName: 'x', allocationMode: 'Some' } }],
      {},
      'allocationMode: Unsupported value: "Some": supported values: "All", "ExactCount"',
    ],
    [
      'a constraint on no request',
      [share],
      { constraints: [{ requests: ['b'], distinctAttribute: 'gpu.vcuda.io/uuid' }] },
      'spec.devices.constraints[0].requests[0]: Invalid value: "b": must be the name of a request',
    ],
  ])('refuses a claim with %s (422, the real message)', async (_what, requests, extra, message) => {
    const out = await refusal(client.create(CLAIMS, claim('bad', requests, extra)));
    expect(out.code).toBe(422);
    expect(out.message).toContain(message);
  });

  it('refuses a capacity request that is not a quantity with 400', async () => {
    const bad = { name: 'gpu', exactly: { deviceClassName: 'x', capacity: { requests: { cores: 'abc' } } } };
    const out = await refusal(client.create(CLAIMS, claim('bad', [bad])));
    expect(out).toEqual({
      code: 400,
      message: expect.stringContaining('quantities must match the regular expression'),
    });
  });

  it('keeps the spec immutable and checks the status the scheduler and controller write', async () => {
    await client.create(CLAIMS, claim('c1', [share]));
    const path = `${CLAIMS}/c1`;
    const spec = await refusal(
      client.mergePatch(path, { spec: { devices: { requests: [{ ...share, name: 'other' }] } } }),
    );
    expect(spec.message).toContain('field is immutable');
    const reserved = await refusal(
      client.mergePatch(`${path}/status`, { status: { reservedFor: [{ resource: 'pods', name: 'p', uid: 'u' }] } }),
    );
    expect(reserved.message).toContain(
      'status.reservedFor: Forbidden: may not be specified when `allocated` is not set',
    );
    const result = { request: 'gpu', driver: 'gpu.vcuda.io', pool: 'node-a', device: 'gpu-0' };
    const wrong = await refusal(
      client.mergePatch(`${path}/status`, {
        status: { allocation: { devices: { results: [{ ...result, request: 'nope' }] } } },
      }),
    );
    expect(wrong.message).toContain('results[0].request: Invalid value: "nope"');
    const badShare = await refusal(
      client.mergePatch(`${path}/status`, {
        status: { allocation: { devices: { results: [{ ...result, shareID: 'not-a-uid' }] } } },
      }),
    );
    expect(badShare.message).toContain('shareID: Invalid value: "not-a-uid"');
    const current = await client.get(path);
    const allocation = { devices: { results: [{ ...result, shareID: '166f1db3-8a7a-47e7-a229-58d9c6d95df2' }] } };
    const status = { allocation, reservedFor: [{ resource: 'pods', name: 'p', uid: 'u' }] };
    const written = await client.request('PUT', `${path}/status`, { ...current, status });
    expect(written['status']).toEqual(status);
    const moved = { devices: { results: [{ ...allocation.devices.results[0], device: 'gpu-1' }] } };
    expect((await refusal(client.mergePatch(`${path}/status`, { status: { allocation: moved } }))).message).toContain(
      'status.allocation: Invalid value',
    );
    const cleared = await client.mergePatch(`${path}/status`, { status: { allocation: null, reservedFor: null } });
    expect(cleared['status']).toEqual({});
  });

  it('validates a slice and counts its generation', async () => {
    const slices = `${GV}/resourceslices`;
    const bad = await refusal(
      client.create(slices, {
        metadata: { name: 'x' },
        spec: {
          driver: 'Gpu_x',
          nodeName: 'n',
          allNodes: true,
          pool: { name: 'p', generation: -1, resourceSliceCount: 0 },
          devices: [{ name: 'A' }],
        },
      }),
    );
    for (const part of [
      'spec.driver: Invalid value: "Gpu_x"',
      'resourceSliceCount: Invalid value: 0',
      'generation: Invalid value: -1',
      'but multiple fields are set',
      'spec.devices[0].name: Invalid value: "A"',
    ])
      expect(bad.message).toContain(part);
    const policy = { default: '100', validRange: { min: '1', max: '100', step: '1' } };
    const exclusive = await refusal(
      client.create(slices, {
        metadata: { name: 'x' },
        spec: {
          driver: 'gpu.vcuda.io',
          nodeName: 'n',
          pool: { name: 'p', generation: 1, resourceSliceCount: 1 },
          devices: [{ name: 'd', capacity: { cores: { value: '100', requestPolicy: policy } } }, { name: 'd' }],
        },
      }),
    );
    expect(exclusive.message).toContain(
      'spec.devices[0].capacity[cores].requestPolicy: Forbidden: allowMultipleAllocations must be true',
    );
    expect(exclusive.message).toContain('spec.devices[1]: Duplicate value: "d"');
    const spec = {
      driver: 'gpu.vcuda.io',
      nodeName: 'n',
      pool: { name: 'p', generation: 1, resourceSliceCount: 1 },
      devices: [
        {
          name: 'd',
          allowMultipleAllocations: true,
          capacity: { memory: { value: '24576Mi', requestPolicy: policy } },
        },
      ],
    };
    const made = await client.create(slices, { metadata: { name: 'n-gpu' }, spec });
    expect(made.metadata['generation']).toBe(1);
    expect((made['spec'] as typeof spec).devices[0]!.capacity.memory.value).toBe('24Gi');
    const moved = await client.mergePatch(`${slices}/n-gpu`, { spec: { pool: { generation: 2 } } });
    expect(moved.metadata['generation']).toBe(2);
  });

  it('requires a class selector to carry its CEL', async () => {
    const out = await refusal(
      client.create(`${GV}/deviceclasses`, { metadata: { name: 'x' }, spec: { selectors: [{}] } }),
    );
    expect(out.message).toContain('spec.selectors[0].cel: Required value');
    const ok = await client.create(`${GV}/deviceclasses`, {
      metadata: { name: 'gpu.vcuda.io' },
      spec: { selectors: [{ cel: { expression: 'device.driver == "gpu.vcuda.io"' } }] },
    });
    expect(ok.metadata.name).toBe('gpu.vcuda.io');
  });
});
