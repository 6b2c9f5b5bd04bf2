import { describe, expect, it } from 'vitest';
import { fakeCards, MiB } from '../../test/support/node-agent/fake-gpu-source.js';
import {
  buildResourceSlice,
  PCIE_ROOT_ATTRIBUTE,
  type SliceCard,
  semverOf,
  sliceContentKey,
} from './resource-slice.js';

const cards = (healthy = [true, true]): SliceCard[] =>
  fakeCards({ cards: 2, memoryMiB: 81559 }).map((c, i) => ({ ...c, healthy: healthy[i] ?? true }));
const link = (a: number, b: number) => ({ nvlinks: a !== b ? 4 : 0, pcie: 'node' as const });
const base = {
  driver: 'gpu.vcuda.io',
  nodeName: 'node-1',
  memoryUnitMiB: 1,
  link,
  unhealthy: 'taint' as const,
  generation: 3,
};

describe('buildResourceSlice', () => {
  it('one shareable device per card with cores 1..100 and memory in memory units', () => {
    const slice = buildResourceSlice({ ...base, cards: cards(), memoryUnitMiB: 256, nodeUid: 'n-uid' });
    expect(slice.metadata).toMatchObject({
      name: 'node-1-gpu.vcuda.io',
      ownerReferences: [{ kind: 'Node', uid: 'n-uid' }],
    });
    expect(slice.spec.pool).toEqual({ name: 'node-1', generation: 3, resourceSliceCount: 1 });
    expect(slice.spec.nodeName).toBe('node-1');
    expect(slice.spec.devices.map((d) => d.name)).toEqual(['gpu-0', 'gpu-1']);
    const d = slice.spec.devices[0];
    expect(d?.allowMultipleAllocations).toBe(true);
    expect(d?.capacity['cores']).toEqual({
      value: '100',
      requestPolicy: { default: '100', validRange: { min: '1', max: '100', step: '1' } },
    });
    // 81559 MiB in 256 MiB units: 318 units, the last 151 MiB are not offered; binary quantities, so
    // kube-scheduler writes consumedCapacity as `8Gi` (in the step's format), not in bytes.
    expect(d?.capacity['memory']).toEqual({
      value: '81408Mi',
      requestPolicy: { default: '81408Mi', validRange: { min: '256Mi', max: '81408Mi', step: '256Mi' } },
    });
    const gib = buildResourceSlice({
      ...base,
      cards: cards().map((c) => ({ ...c, memoryTotalBytes: 16 * 1024 * MiB })),
    });
    expect(gib.spec.devices[0]?.capacity['memory']?.requestPolicy?.validRange).toEqual({
      min: '1Mi',
      max: '16Gi',
      step: '1Mi',
    });
    expect(d?.attributes).toMatchObject({
      uuid: { string: fakeCards({ cards: 1, memoryMiB: 1 })[0]?.uuid },
      index: { int: 0 },
      productName: { string: 'NVIDIA Fake GPU' },
      memoryMiB: { int: 81559 },
      pciBusID: { string: '00000000:10:00.0' },
      numaNode: { int: 0 },
      nvlinkPeers: { int: 1 },
    });
  });

  it('names architecture, compute capability, driver version and PCIe root when known, as semver where a version', () => {
    const [c] = cards();
    const card = {
      ...(c as SliceCard),
      architecture: 'Hopper',
      computeCapability: '9.0',
      driverVersion: '535.104.05',
      pcieRoot: 'pci0000:00',
    };
    const attrs = buildResourceSlice({ ...base, cards: [card] }).spec.devices[0]?.attributes;
    expect(attrs?.['architecture']).toEqual({ string: 'Hopper' });
    expect(attrs?.['cudaComputeCapability']).toEqual({ version: '9.0.0' });
    expect(attrs?.['driverVersion']).toEqual({ version: '535.104.5' });
    expect(attrs?.[PCIE_ROOT_ATTRIBUTE]).toEqual({ string: 'pci0000:00' });
    expect(semverOf('n/a')).toBeUndefined();
  });

  it('taints an unhealthy card, or withdraws it', () => {
    const sick = cards([true, false]).map((c) => (c.healthy ? c : { ...c, healthReason: 'Xid 48' }));
    const tainted = buildResourceSlice({ ...base, cards: sick });
    expect(tainted.spec.devices[1]?.taints).toEqual([
      { key: 'gpu.vcuda.io/unhealthy', value: 'Xid-48', effect: 'NoSchedule' },
    ]);
    expect(tainted.spec.devices[0]?.taints).toBeUndefined();
    const withdrawn = buildResourceSlice({ ...base, cards: sick, unhealthy: 'withdraw' });
    expect(withdrawn.spec.devices.map((d) => d.name)).toEqual(['gpu-0']);
  });

  it('leaves out a card in MIG mode', () => {
    const [a, b] = cards();
    const slice = buildResourceSlice({ ...base, cards: [a as SliceCard, { ...(b as SliceCard), migMode: true }] });
    expect(slice.spec.devices.map((d) => d.name)).toEqual(['gpu-0']);
  });

  it('content changes with health, not with the generation', () => {
    const a = buildResourceSlice({ ...base, cards: cards() });
    expect(sliceContentKey(buildResourceSlice({ ...base, cards: cards(), generation: 9 }))).toBe(sliceContentKey(a));
    expect(sliceContentKey(buildResourceSlice({ ...base, cards: cards([true, false]) }))).not.toBe(sliceContentKey(a));
  });
});
