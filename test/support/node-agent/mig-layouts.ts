/**
 * MIG layouts as the node agent reads them through NVML (nvml-mig.ts), for tests that need a card
 * in MIG mode without the fake driver: the H100 80GB GPU-instance profiles in profile-ID order
 * (the facts and native/fake/fake_mig_profiles.c: IDs, slices, legal placements, SMs, MiB).
 */
import type { CardMig, MigInstance, MigProfile } from '../../../node-agent/nvml/gpu-source.js';

type Row = [
  profileId: number,
  profile: string,
  compute: number,
  memory: number,
  max: number,
  sms: number,
  mib: number,
  placements: number[],
];

const H100_80GB: Row[] = [
  [0, '7g.80gb', 7, 8, 1, 132, 81152, [0]],
  [5, '4g.40gb', 4, 4, 1, 64, 40448, [0]],
  [9, '3g.40gb', 3, 4, 2, 60, 40448, [0, 4]],
  [14, '2g.20gb', 2, 2, 3, 32, 20096, [0, 2, 4]],
  [15, '1g.20gb', 1, 2, 4, 26, 20096, [0, 2, 4, 6]],
  [19, '1g.10gb', 1, 1, 7, 16, 9984, [0, 1, 2, 3, 4, 5, 6]],
  [20, '1g.10gb+me', 1, 1, 1, 16, 9984, [0, 1, 2, 3, 4, 5, 6]],
];

export function h100Profiles(): MigProfile[] {
  return H100_80GB.map(
    ([profileId, profile, computeSlices, memorySlices, maxInstances, sms, memoryMiB, placements]) => ({
      profileId,
      profile,
      computeSlices,
      memorySlices,
      maxInstances,
      sms,
      memoryMiB,
      placements,
    }),
  );
}

/** An existing instance of an H100 profile at `start` (GPU-instance IDs as the driver numbers them). */
export function h100Instance(uuid: string, profile: string, start: number): MigInstance {
  const p = h100Profiles().find((x) => x.profile === profile);
  if (!p) throw new Error(`no H100 profile ${profile}`);
  const size = p.memorySlices;
  const gpuInstanceId = size === 8 ? 0 : size === 4 ? 1 + start / 4 : size === 2 ? 3 + start / 2 : 7 + start;
  return {
    uuid,
    profile,
    profileId: p.profileId,
    gpuInstanceId,
    computeInstanceId: 0,
    placement: { start, size },
    memoryMiB: p.memoryMiB,
    sms: p.sms,
  };
}

/** An H100 in MIG mode with these instances. */
export function h100Mig(instances: MigInstance[] = []): CardMig {
  return { mode: 'enabled', profiles: h100Profiles(), instances };
}
