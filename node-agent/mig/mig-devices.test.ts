import { describe, expect, it } from 'vitest';
import { CardHealth } from '../health.js';
import type { CardMig, GpuCard } from '../nvml/gpu-source.js';
import { layoutCapMinor } from './cap-minors.js';
import { MigDevices } from './mig-devices.js';

const card = (index: number, migMode?: boolean): GpuCard => ({
  index,
  uuid: `GPU-${index}`,
  model: 'NVIDIA H100 80GB HBM3',
  memoryTotalBytes: 81559 * 2 ** 20,
  pciBusId: `00000000:0${index}:00.0`,
  minorNumber: index + 4,
  numaNode: 0,
  ...(migMode === undefined ? {} : { migMode }),
});

const instance = (uuid: string, profile: string, gi: number, start: number, size: number) => ({
  uuid,
  profile,
  profileId: 9,
  gpuInstanceId: gi,
  computeInstanceId: 0,
  placement: { start, size },
  memoryMiB: 40448,
  sms: 60,
});

describe('MigDevices', () => {
  it('serves the instances of cards in MIG mode at start, with parent health and access node minors', () => {
    const health = new CardHealth([card(0, true), card(1, false)], []);
    const layouts = new Map<number, CardMig>([
      [
        0,
        {
          mode: 'enabled',
          profiles: [],
          instances: [instance('MIG-a', '3g.40gb', 1, 0, 4), instance('MIG-b', '1g.10gb', 7, 6, 1)],
        },
      ],
      // Switched into MIG mode after the agent started: not served until it restarts.
      [1, { mode: 'enabled', profiles: [], instances: [instance('MIG-c', '3g.40gb', 1, 0, 4)] }],
    ]);
    const mig = new MigDevices(health, (i) => layouts.get(i) ?? null, layoutCapMinor);
    let changes = 0;
    mig.subscribe(() => changes++);
    mig.readAll(() => {});
    mig.read(1);
    expect(mig.profiles()).toEqual(['1g.10gb', '3g.40gb']);
    expect(mig.byUuid('MIG-c')).toBeUndefined();
    expect(mig.byUuid('MIG-a')).toMatchObject({
      parent: { uuid: 'GPU-0', minorNumber: 4, healthy: true },
      capMinors: [layoutCapMinor(4, 1), layoutCapMinor(4, 1, 0)],
    });
    expect(changes).toBe(1);
    health.apply({ cardIndex: 0, kind: 'xid', xid: 48 });
    expect(changes).toBe(2);
    expect(mig.views().map((v) => [v.uuid, v.healthy])).toEqual([
      ['MIG-a', false],
      ['MIG-b', false],
    ]);
  });

  it('serves none of a card whose layout cannot be read, and says so', () => {
    const health = new CardHealth([card(0, true)], []);
    let fail = false;
    const mig = new MigDevices(
      health,
      () => {
        if (fail) throw new Error('NVML_ERROR_GPU_IS_LOST');
        return { mode: 'enabled', profiles: [], instances: [instance('MIG-a', '3g.40gb', 1, 0, 4)] };
      },
      layoutCapMinor,
    );
    mig.readAll(() => {});
    expect(mig.list()).toHaveLength(1);
    fail = true;
    const errors: number[] = [];
    mig.readAll((index) => errors.push(index));
    expect(errors).toEqual([0]);
    expect(mig.list()).toEqual([]);
  });
});
