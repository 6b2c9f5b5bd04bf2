/**
 * The simulated allocator on partitionable devices (KEP-4815): an H100's MIG partitions as the node
 * agent publishes them (resource-slice.ts), claimed by profile through vcuda's MIG DeviceClass.
 */
import { describe, expect, it } from 'vitest';
import { draCardSelector, draMigClassName, draMigProfileSelector, draMigSelector } from '../../contract/index.js';
import { buildResourceSlices, type SliceCard } from '../../node-agent/dra/resource-slice.js';
import { fakeCards } from '../../test/support/node-agent/fake-gpu-source.js';
import { h100Mig } from '../../test/support/node-agent/mig-layouts.js';
import { allocateClaim } from './dra-allocator.js';
import type { AllocationResult, ClaimSpec, DeviceClass, ResourceSlice } from './dra-objects.js';

const DRIVER = 'gpu.vcuda.io';
const MIG_CLASS = draMigClassName(DRIVER);
const CLASSES = new Map<string, DeviceClass>([
  [DRIVER, { metadata: { name: DRIVER }, spec: { selectors: [{ cel: { expression: draCardSelector(DRIVER) } }] } }],
  [
    MIG_CLASS,
    { metadata: { name: MIG_CLASS }, spec: { selectors: [{ cel: { expression: draMigSelector(DRIVER) } }] } },
  ],
]);

/** node-a: card 0 an H100 in MIG mode (every placement offered), card 1 a whole card. */
function slices(): ResourceSlice[] {
  const [mig, whole] = fakeCards({ cards: 2, memoryMiB: 81559 });
  const cards: SliceCard[] = [
    { ...(mig as SliceCard), healthy: true, migMode: true, migDynamic: true, mig: h100Mig() },
    { ...(whole as SliceCard), healthy: true },
  ];
  return buildResourceSlices({
    driver: DRIVER,
    nodeName: 'node-a',
    memoryUnitMiB: 1,
    cards,
    link: () => ({ nvlinks: 0, pcie: 'system' }),
    unhealthy: 'taint',
    generation: 1,
    migCreatable: true,
  }) as unknown as ResourceSlice[];
}

const migClaim = (profile: string): ClaimSpec => ({
  devices: {
    requests: [
      {
        name: 'mig',
        exactly: {
          deviceClassName: MIG_CLASS,
          selectors: [{ cel: { expression: draMigProfileSelector(DRIVER, profile) } }],
        },
      },
    ],
  },
});

/** Allocates each claim in turn on node-a; the device each got, or `-` when it did not fit. */
function allocateInTurn(specs: ClaimSpec[]): string[] {
  let allocated: AllocationResult[] = [];
  const pool = slices();
  return specs.map((spec) => {
    const out = allocateClaim({
      node: 'node-a',
      slices: pool,
      classes: CLASSES,
      allocated,
      claim: { spec },
      newShareId: () => 's',
    });
    if (!out.ok) return '-';
    allocated = [...allocated, ...out.results];
    return out.results.map((r) => r.device).join(',');
  });
}

describe('DRA allocator on MIG partitions', () => {
  it('fits two 3g.40gb on one card and not a third', () => {
    expect(allocateInTurn(['3g.40gb', '3g.40gb', '3g.40gb'].map(migClaim))).toEqual([
      'gpu-0-mig-3g-40gb-0',
      'gpu-0-mig-3g-40gb-4',
      '-',
    ]);
  });

  it('keeps a 1g.10gb off the slices a 4g.40gb holds, and a 7g.80gb from anything else', () => {
    expect(allocateInTurn(['4g.40gb', '1g.10gb', '7g.80gb'].map(migClaim))).toEqual([
      'gpu-0-mig-4g-40gb-0',
      'gpu-0-mig-1g-10gb-4',
      '-',
    ]);
    expect(allocateInTurn(['7g.80gb', '1g.10gb', '3g.40gb'].map(migClaim))).toEqual(['gpu-0-mig-7g-80gb-0', '-', '-']);
  });

  it('gives the one media extension once, counts compute slices, and refuses a profile the card lacks', () => {
    expect(allocateInTurn(['1g.10gb+me', '1g.10gb+me'].map(migClaim))).toEqual(['gpu-0-mig-1g-10gb-me-0', '-']);
    // Seven 1g.10gb take the seven compute slices; slice 7 is free, yet a 1g.20gb (6..7) overlaps slice 6.
    const seven = allocateInTurn([...Array.from({ length: 7 }, () => migClaim('1g.10gb')), migClaim('1g.20gb')]);
    expect(seven.slice(0, 7)).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => `gpu-0-mig-1g-10gb-${i}`));
    expect(seven[7]).toBe('-');
    expect(allocateInTurn([migClaim('1g.18gb')])).toEqual(['-']);
  });

  it('never gives a whole-card request a partition, nor a MIG request the whole card', () => {
    const whole: ClaimSpec = {
      devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: DRIVER, count: 2 } }] },
    };
    expect(allocateInTurn([whole])).toEqual(['-']);
    const one: ClaimSpec = { devices: { requests: [{ name: 'gpu', exactly: { deviceClassName: DRIVER } }] } };
    expect(allocateInTurn([one, migClaim('7g.80gb')])).toEqual(['gpu-1', 'gpu-0-mig-7g-80gb-0']);
  });
});
