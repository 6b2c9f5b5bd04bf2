import { describe, expect, it } from 'vitest';
import { MemoryResourceApi } from '../../test/support/node-agent/dra-harness.js';
import type { ResourceSlice } from './resource-slice.js';
import { SlicePublisher } from './slice-publisher.js';

const slice = (name: string, generation: number, count: number, devices: string[] = []): ResourceSlice => ({
  apiVersion: 'resource.k8s.io/v1',
  kind: 'ResourceSlice',
  metadata: { name },
  spec: {
    driver: 'gpu.vcuda.io',
    nodeName: 'node-1',
    pool: { name: 'node-1', generation, resourceSliceCount: count },
    devices: devices.map((d) => ({ name: d, attributes: {}, capacity: {}, allowMultipleAllocations: false })),
  },
});

describe('SlicePublisher', () => {
  it('writes every slice of the pool at one generation, and deletes those the pool no longer names', async () => {
    const api = new MemoryResourceApi();
    const publisher = new SlicePublisher(api, 'gpu.vcuda.io', 'node-1');
    const three = (g: number) => [
      slice('a', g, 3, ['gpu-0']),
      slice('a-counters-0', g, 3),
      slice('a-mig-0', g, 3, ['m']),
    ];
    expect(await publisher.publish(three)).toBe(true);
    expect([...api.slices.values()].map((s) => [s.metadata.name, s.spec.pool.generation])).toEqual([
      ['a', 1],
      ['a-counters-0', 1],
      ['a-mig-0', 1],
    ]);
    expect(await publisher.publish(three)).toBe(false);
    // The MIG card left MIG mode: one slice now, the other two go once it is written.
    expect(await publisher.publish((g) => [slice('a', g, 1, ['gpu-0', 'gpu-1'])])).toBe(true);
    expect([...api.slices.values()].map((s) => [s.metadata.name, s.spec.pool.generation])).toEqual([['a', 2]]);
    // A new publisher (a restarted agent) continues above what it finds, replacing in place.
    const again = new SlicePublisher(api, 'gpu.vcuda.io', 'node-1');
    expect(await again.publish(three)).toBe(true);
    expect([...api.slices.values()].map((s) => s.spec.pool.generation)).toEqual([3, 3, 3]);
  });
});
