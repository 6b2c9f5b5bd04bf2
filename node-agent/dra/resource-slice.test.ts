import { describe, expect, it } from 'vitest';
import { fakeCards, MiB } from '../../test/support/node-agent/fake-gpu-source.js';
import { h100Instance, h100Mig } from '../../test/support/node-agent/mig-layouts.js';
import {
  buildResourceSlices,
  MAX_DEVICES_PER_SLICE_WITH_COUNTERS,
  PCIE_ROOT_ATTRIBUTE,
  type ResourceSlice,
  type SliceCard,
  type SliceDevice,
  type SliceInput,
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

/** The cards' slice, the pool's first. */
function buildResourceSlice(input: SliceInput): ResourceSlice & { spec: { devices: SliceDevice[] } } {
  const [slice] = buildResourceSlices(input);
  if (!slice?.spec.devices) throw new Error('the pool has no cards slice');
  return slice as ResourceSlice & { spec: { devices: SliceDevice[] } };
}

describe('buildResourceSlices', () => {
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
    const a = buildResourceSlices({ ...base, cards: cards() });
    expect(sliceContentKey(buildResourceSlices({ ...base, cards: cards(), generation: 9 }))).toBe(sliceContentKey(a));
    expect(sliceContentKey(buildResourceSlices({ ...base, cards: cards([true, false]) }))).not.toBe(sliceContentKey(a));
  });
});

describe('MIG partitions (KEP-4815)', () => {
  /** An H100 in MIG mode, kept for dynamic MIG unless `kept` is false. */
  const migCard = (index: number, mig = h100Mig(), healthy = true, kept = true): SliceCard => {
    const [c] = fakeCards({ cards: index + 1, memoryMiB: 81559 }).slice(index);
    return { ...(c as SliceCard), healthy, migMode: true, migDynamic: kept, mig };
  };
  const devicesOf = (slices: ResourceSlice[]) => slices.flatMap((s) => s.spec.devices ?? []);

  it("offers every profile at every legal placement, each consuming its slices of its card's counter set", () => {
    const slices = buildResourceSlices({ ...base, cards: [cards()[0] as SliceCard, migCard(1)], migCreatable: true });
    expect(slices.map((s) => [s.metadata.name, s.spec.pool.resourceSliceCount])).toEqual([
      ['node-1-gpu.vcuda.io', 3],
      ['node-1-gpu.vcuda.io-counters-0', 3],
      ['node-1-gpu.vcuda.io-mig-0', 3],
    ]);
    // The API takes counter sets only in a slice without devices.
    expect(slices[1]?.spec.devices).toBeUndefined();
    expect(slices[1]?.spec.sharedCounters).toEqual([
      {
        name: 'gpu-1-counters',
        counters: {
          'memory-slice-0': { value: '1' },
          'memory-slice-1': { value: '1' },
          'memory-slice-2': { value: '1' },
          'memory-slice-3': { value: '1' },
          'memory-slice-4': { value: '1' },
          'memory-slice-5': { value: '1' },
          'memory-slice-6': { value: '1' },
          'memory-slice-7': { value: '1' },
          'compute-slices': { value: '7' },
          'media-extensions': { value: '1' },
        },
      },
    ]);
    // The card in MIG mode is not offered whole or in shares.
    expect(slices[0]?.spec.devices?.map((d) => d.name)).toEqual(['gpu-0']);
    const mig = devicesOf(slices.slice(2));
    expect(mig).toHaveLength(1 + 1 + 2 + 3 + 4 + 7 + 7);
    const three = mig.find((d) => d.name === 'gpu-1-mig-3g-40gb-4');
    expect(three).toMatchObject({
      allowMultipleAllocations: false,
      capacity: { memory: { value: '40448Mi' } },
      consumesCounters: [
        {
          counterSet: 'gpu-1-counters',
          counters: {
            'memory-slice-4': { value: '1' },
            'memory-slice-5': { value: '1' },
            'memory-slice-6': { value: '1' },
            'memory-slice-7': { value: '1' },
            'compute-slices': { value: '3' },
          },
        },
      ],
    });
    expect(three?.attributes).toMatchObject({
      profile: { string: '3g.40gb' },
      profileId: { int: 9 },
      placementStart: { int: 4 },
      placementSize: { int: 4 },
      multiprocessors: { int: 60 },
      memoryMiB: { int: 40448 },
      parentUUID: { string: migCard(1).uuid },
      parentIndex: { int: 1 },
    });
    expect(mig.find((d) => d.name === 'gpu-1-mig-1g-10gb-me-6')?.consumesCounters?.[0]?.counters).toEqual({
      'memory-slice-6': { value: '1' },
      'compute-slices': { value: '1' },
      'media-extensions': { value: '1' },
    });
  });

  it('without creation at Prepare, offers the instances that exist; with it, also every placement they leave free', () => {
    const layout = h100Mig([h100Instance('MIG-a', '3g.40gb', 0), h100Instance('MIG-b', '1g.10gb', 5)]);
    const names = (creatable: boolean, kept = true) =>
      devicesOf(buildResourceSlices({ ...base, cards: [migCard(0, layout, true, kept)], migCreatable: creatable })).map(
        (d) => d.name,
      );
    expect(names(false)).toEqual(['gpu-0-mig-3g-40gb-0', 'gpu-0-mig-1g-10gb-5']);
    // A card not kept for dynamic MIG offers its instances only, whatever the agent can create.
    expect(names(true, false)).toEqual(['gpu-0-mig-3g-40gb-0', 'gpu-0-mig-1g-10gb-5']);
    expect(names(true)).toEqual([
      'gpu-0-mig-3g-40gb-0',
      'gpu-0-mig-1g-20gb-6',
      'gpu-0-mig-1g-10gb-4',
      'gpu-0-mig-1g-10gb-5',
      'gpu-0-mig-1g-10gb-6',
      'gpu-0-mig-1g-10gb-me-4',
      'gpu-0-mig-1g-10gb-me-6',
    ]);
  });

  it('splits partitions at the API limit of 64 per slice, and taints or withdraws those of a sick card', () => {
    const slices = buildResourceSlices({ ...base, cards: [0, 1, 2].map((i) => migCard(i)), migCreatable: true });
    expect(slices.map((s) => s.spec.devices?.length ?? s.spec.sharedCounters?.length)).toEqual([0, 3, 64, 11]);
    expect(Math.max(...slices.map((s) => s.spec.devices?.length ?? 0))).toBeLessThanOrEqual(
      MAX_DEVICES_PER_SLICE_WITH_COUNTERS,
    );
    const sick = [migCard(0), { ...migCard(1), healthy: false, healthReason: 'Xid 79' }];
    const tainted = devicesOf(buildResourceSlices({ ...base, cards: sick, migCreatable: true }));
    expect(tainted.find((d) => d.name === 'gpu-1-mig-7g-80gb-0')?.taints).toEqual([
      { key: 'gpu.vcuda.io/unhealthy', value: 'Xid-79', effect: 'NoSchedule' },
    ]);
    const withdrawn = buildResourceSlices({ ...base, cards: sick, migCreatable: true, unhealthy: 'withdraw' });
    expect(withdrawn[1]?.spec.sharedCounters?.map((c) => c.name)).toEqual(['gpu-0-counters']);
    expect(devicesOf(withdrawn).every((d) => d.name.startsWith('gpu-0-'))).toBe(true);
  });
});
