import { describe, expect, it } from 'vitest';
import type { ListPodResourcesResponse } from '../kubelet/protocol.js';
import { resolveHolder } from './holder.js';
import type { GpuContainerView } from './pod-view.js';

const CORE = 'nvidia.com/vcuda-core';
const ids = (card: number, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => `c${card}-${String(from + i).padStart(2, '0')}`);

function listed(...pods: { name: string; containers: Record<string, string[]> }[]): ListPodResourcesResponse {
  return {
    pod_resources: pods.map((p) => ({
      namespace: 'ns',
      name: p.name,
      containers: Object.entries(p.containers).map(([name, device_ids]) => ({
        name,
        devices: [{ resource_name: CORE, device_ids }],
      })),
    })),
  };
}

const resolve = (l: ListPodResourcesResponse, deviceIds: string[], inits: GpuContainerView[] = []) =>
  resolveHolder({ listed: l, resource: CORE, deviceIds, nodeName: 'n1', initContainersOf: () => inits });

describe('resolveHolder', () => {
  it('the one container holding exactly the IDs, in any order', () => {
    const l = listed(
      { name: 'a', containers: { main: ids(0, 0, 30) } },
      { name: 'b', containers: { main: ids(0, 30, 30) } },
    );
    expect(resolve(l, ids(0, 30, 30).reverse())).toEqual({ ok: true, namespace: 'ns', name: 'b', container: 'main' });
  });

  it('a subset or superset is not the holder: an init container found through device reuse', () => {
    const l = listed({ name: 'a', containers: { train: ids(0, 0, 50) } });
    const inits = [{ name: 'setup', isInit: true, core: 10 }];
    expect(resolve(l, ids(0, 0, 10), inits)).toEqual({ ok: true, namespace: 'ns', name: 'a', container: 'setup' });
  });

  it('IDs on two pods are refused, naming both', () => {
    const l = listed(
      { name: 'a', containers: { main: ids(0, 0, 10) } },
      { name: 'b', containers: { main: ids(0, 5, 10) } },
    );
    const r = resolve(l, ids(0, 0, 10));
    expect(r).toMatchObject({ ok: false, code: 'several-holders', pods: [{ name: 'a' }, { name: 'b' }] });
    expect(r.ok ? '' : r.message).toMatch(/ns\/a container main; ns\/b container main/);
  });

  it('no holder, and an unresolvable reuse, are refused', () => {
    expect(resolve(listed(), ids(0, 0, 10))).toMatchObject({ ok: false, code: 'no-holder', pods: [] });
    const l = listed({ name: 'a', containers: { main: ids(0, 0, 20) } });
    const two = [
      { name: 'i1', isInit: true, core: 10 },
      { name: 'i2', isInit: true, core: 10 },
    ];
    expect(resolve(l, ids(0, 0, 10), two)).toMatchObject({ ok: false, code: 'no-holder', pods: [{ name: 'a' }] });
  });
});
