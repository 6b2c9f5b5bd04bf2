/**
 * MIG in DRA mode on native/'s fake NVML (when `make -C native` has built it): a card in MIG mode is
 * published as partitions that consume its counter set (never whole or in shares), and a claim
 * allocated a partition gets the instance there handed over by CDI (parent node, the two access
 * nodes, NVIDIA_VISIBLE_DEVICES=MIG-…, no libvcuda), checkpointed across a restart and freed by
 * Unprepare; a partition without an instance, a share of one, or a claim mixing both kinds is refused.
 * (mig-dynamic-claim.test.ts: the same with dynamic MIG.)
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claim, GiB } from '../../test/support/node-agent/dra-claim.js';
import { startDraHarness } from '../../test/support/node-agent/dra-harness.js';
import { fakeNvmlMachine, isFakeNvmlBuilt } from '../../test/support/node-agent/native-fake-nvml.js';
import { layoutCapMinor } from '../mig/cap-minors.js';
import { claimCdiSpecPath } from './claim-cdi.js';

/** Two H100 80GB: card 0 in MIG mode with two 3g.40gb instances, card 1 out of MIG mode. */
const fake = fakeNvmlMachine('vcuda-dra-mig-', { devices: '2x81559', mig: '0' });

describe.skipIf(!isFakeNvmlBuilt)('MIG partitions in DRA mode on the native fake NVML', () => {
  it('publishes the instances as partitions and hands a claim the instance its partition names', async () => {
    fake.enter();
    fake.createMig(0, 9, 0);
    const upper = fake.createMig(0, 9, 4);
    let h = await startDraHarness({ gpu: () => fake.open() });
    try {
      const slices = [...h.api.slices.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
      expect(slices.map((s) => [s.metadata.name, s.spec.pool.resourceSliceCount])).toEqual([
        ['node-1-gpu.vcuda.io', 3],
        ['node-1-gpu.vcuda.io-counters-0', 3],
        ['node-1-gpu.vcuda.io-mig-0', 3],
      ]);
      // The card in MIG mode is offered as its instances' partitions only.
      expect(slices[0]?.spec.devices?.map((d) => d.name)).toEqual(['gpu-1']);
      expect(slices[1]?.spec.sharedCounters?.map((c) => c.name)).toEqual(['gpu-0-counters']);
      expect(slices[2]?.spec.devices?.map((d) => d.name)).toEqual(['gpu-0-mig-3g-40gb-0', 'gpu-0-mig-3g-40gb-4']);

      const c = claim('train').mig('gpu-0-mig-3g-40gb-4');
      h.api.putClaim(c.obj());
      const answer = (await h.kubelet.prepare('v1', [c.ref()])).claims[c.uid];
      expect(answer?.error).toBe('');
      const key = h.agent.preparer.prepared()[0]?.key as string;
      expect(answer?.devices).toEqual([
        {
          request_names: ['mig0'],
          pool_name: 'node-1',
          device_name: 'gpu-0-mig-3g-40gb-4',
          cdi_device_ids: [`gpu.vcuda.io/claim=${key}-gpu-0-mig-3g-40gb-4`],
        },
      ]);
      const specPath = claimCdiSpecPath(h.config.paths.cdiSpecDir, 'gpu.vcuda.io', key);
      const spec = JSON.parse(readFileSync(specPath, 'utf8'));
      expect(spec.containerEdits.env).toEqual([`NVIDIA_VISIBLE_DEVICES=${upper}`, `CUDA_VISIBLE_DEVICES=${upper}`]);
      // Whole instances are never capped: no libvcuda, preload or limit file.
      const mounted = spec.containerEdits.mounts.map((m: { containerPath: string }) => m.containerPath);
      expect(mounted).not.toContain('/etc/ld.so.preload');
      expect(existsSync(join(h.config.paths.containersDir, key))).toBe(false);
      // GPU instance 2 (a 4-slice instance at slice 4), compute instance 0, on the parent's minor 0.
      expect(spec.devices[0].containerEdits.deviceNodes.map((n: { path: string }) => n.path)).toEqual([
        '/dev/nvidia0',
        `/dev/nvidia-caps/nvidia-cap${layoutCapMinor(0, 2)}`,
        `/dev/nvidia-caps/nvidia-cap${layoutCapMinor(0, 2, 0)}`,
      ]);
      expect(h.agent.preparer.records()[0]?.migDevices).toEqual([upper]);

      // Refused, each naming why: a partition not offered, a share of a partition, a mixed claim.
      const refusals: [ReturnType<typeof claim>, RegExp][] = [
        [claim('small').mig('gpu-0-mig-1g-10gb-0'), /not in this node's ResourceSlices/],
        [
          claim('forged').mig('gpu-0-mig-3g-40gb-0', { shareID: '00000000-0000-4000-8000-000000000001' }),
          /only allocated whole/,
        ],
        [
          claim('mixed').mig('gpu-0-mig-3g-40gb-0').share('gpu-1', 10, GiB),
          /mixes whole MIG instances and card shares/,
        ],
      ];
      for (const [bad, why] of refusals) {
        h.api.putClaim(bad.obj());
        expect((await h.kubelet.prepare('v1', [bad.ref()])).claims[bad.uid]?.error).toMatch(why);
      }

      // A restarted agent answers from its checkpoint, and Unprepare frees the spec.
      h = await h.restart();
      expect((await h.kubelet.prepare('v1', [c.ref()])).claims[c.uid]?.devices).toEqual(answer?.devices);
      expect((await h.kubelet.unprepare('v1', [c.ref()])).claims[c.uid]?.error).toBe('');
      expect(existsSync(specPath)).toBe(false);
    } finally {
      await h.close();
      fake.leave();
    }
  });
});
