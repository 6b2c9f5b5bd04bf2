import { describe, expect, it } from 'vitest';
import { fakeCards } from '../../test/support/node-agent/fake-gpu-source.js';
import { toClientSlice } from './kube-resource-api.js';
import { buildResourceSlices } from './resource-slice.js';

describe('toClientSlice', () => {
  it("renames the fields @kubernetes/client-node's serializer knows under other names (int, default)", () => {
    const [slice] = buildResourceSlices({
      driver: 'gpu.vcuda.io',
      nodeName: 'n1',
      memoryUnitMiB: 1,
      cards: fakeCards({ cards: 1, memoryMiB: 1024 }).map((c) => ({ ...c, healthy: true })),
      link: () => ({ nvlinks: 0, pcie: 'node' }),
      unhealthy: 'taint',
      generation: 1,
    });
    if (!slice?.spec.devices) throw new Error('no devices');
    const device = toClientSlice(slice).spec.devices?.[0] as unknown as Record<string, Record<string, object>>;
    expect(device['attributes']?.['index']).toEqual({ _int: 0 });
    expect(device['attributes']?.['uuid']).toEqual({ string: slice.spec.devices[0]?.attributes['uuid']?.string });
    expect(device['capacity']?.['cores']).toEqual({
      value: '100',
      requestPolicy: { _default: '100', validRange: { min: '1', max: '100', step: '1' } },
    });
  });
});
