/**
 * Whole MIG instances served by the agent on native/'s fake NVML (when `make -C native` has built
 * it): one device plugin per profile present, devices = the instances (health from the parent
 * card), a container handed the instance its signed grant names with the parent's device node,
 * its two access nodes and NVIDIA_VISIBLE_DEVICES=MIG-…, no libvcuda, and re-learned after a restart.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MIB, migResourceName, vcudaAnnotations } from '../../contract/index.js';
import { type Harness, NODE, startHarness } from '../../test/support/node-agent/agent-harness.js';
import { bindMigGrantPod } from '../../test/support/node-agent/mig-pod.js';
import { fakeNvmlMachine, isFakeNvmlBuilt } from '../../test/support/node-agent/native-fake-nvml.js';
import { HEALTHY, UNHEALTHY } from '../kubelet/protocol.js';
import { cdiSpecPath } from '../limits/cdi-spec.js';
import { allocationKey } from '../limits/container-files.js';
import { layoutCapMinor } from '../mig/cap-minors.js';

/** Three H100 80GB: card 0 with two 3g.40gb, card 1 with 1g.10gb, 1g.20gb and 2g.20gb, card 2 out of MIG mode. */
const fake = fakeNvmlMachine('vcuda-mig-native-', { devices: '3x81559', mig: '0,1' });

/** A pod asking `count` instances of `profile` in container `main`, its grant naming `uuids`, bound to the node. */
async function bindMigPod(h: Harness, name: string, profile: string, uuids: string[], count = uuids.length) {
  const instances = new Map(
    h.agent.health
      .list()
      .flatMap((c) => (nvml().migLayout(c.index)?.instances ?? []).map((i) => [i.uuid, { i, c }] as const)),
  );
  const cards = uuids.map((uuid) => {
    const found = instances.get(uuid);
    return {
      uuid,
      core: 100,
      memoryBytes: (found?.i.memoryMiB ?? 1) * MIB,
      mig: {
        parent: found?.c.uuid ?? 'GPU-unknown',
        profile: found?.i.profile ?? profile,
        start: found?.i.placement.start ?? 0,
        size: found?.i.placement.size ?? 1,
      },
    };
  });
  return bindMigGrantPod(h, name, profile, cards, count);
}

/** The agent's NVML now (a restarted agent opens its own). */
const nvml = () => fake.lastOpened();

describe.skipIf(!isFakeNvmlBuilt)('whole MIG instances on the native fake NVML', () => {
  it('serves each profile present, hands a container the instance its grant names, and relearns it', async () => {
    fake.enter();
    fake.createMig(0, 9, 0);
    const granted = fake.createMig(0, 9, 4);
    fake.createMig(1, 19, 0);
    fake.createMig(1, 15, 2);
    fake.createMig(1, 14, 4);
    const h = await startHarness({ gpuSource: fake.open });
    try {
      const { kubelet, names } = h;
      const three = migResourceName(names, '3g.40gb');
      await kubelet.waitFor(() => kubelet.devices(three).length === 2, '3g.40gb devices');
      // The card out of MIG mode alone gets vcuda-core; each profile present its own resource.
      expect(kubelet.devices(names.core)).toHaveLength(100);
      expect(
        ['1g.10gb', '1g.20gb', '2g.20gb', '3g.40gb', '4g.40gb'].map(
          (p) => kubelet.devices(migResourceName(names, p)).length,
        ),
      ).toEqual([1, 1, 1, 2, 0]);
      expect(kubelet.devices(three).every((d) => d.ID.startsWith('MIG-') && d.health === HEALTHY)).toBe(true);

      // The grant names the instance at slices 4..7, whichever device ID the kubelet picks.
      const admitted = await kubelet.admitPod(await bindMigPod(h, 'train', '3g.40gb', [granted]));
      const response = admitted[0]?.responses[three];
      expect(response?.envs).toEqual({});
      expect(response?.mounts.map((m) => m.container_path)).toEqual(['/usr/lib/x86_64-linux-gnu/libcuda.so.1']);
      const ids = kubelet.podDevices.get('default/train')?.get('main')?.get(three) ?? [];
      const spec = JSON.parse(readFileSync(cdiSpecPath(h.config.paths.cdiSpecDir, allocationKey(ids)), 'utf8'));
      const edits = spec.devices[0].containerEdits;
      expect(edits.env).toEqual([`NVIDIA_VISIBLE_DEVICES=${granted}`, `CUDA_VISIBLE_DEVICES=${granted}`]);
      // GPU instance 2 (the fake numbers a 4-slice instance 1 + start/4), compute instance 0, on minor 0.
      expect(edits.deviceNodes.map((n: { path: string }) => n.path)).toEqual([
        '/dev/nvidia0',
        `/dev/nvidia-caps/nvidia-cap${layoutCapMinor(0, 2)}`,
        `/dev/nvidia-caps/nvidia-cap${layoutCapMinor(0, 2, 0)}`,
      ]);
      expect(h.cluster.pods().find((p) => p.name === 'train')?.annotations[vcudaAnnotations.allocatedAt]).toBeDefined();

      // A grant naming an instance of another profile is refused at PreStart, naming it.
      const small = nvml()
        .migLayout(1)
        ?.instances.find((i) => i.profile === '1g.10gb')?.uuid as string;
      await expect(kubelet.admitPod(await bindMigPod(h, 'forged', '3g.40gb', [small]))).rejects.toThrow(
        `assignment names ${small} as MIG 3g.40gb; it is a MIG 1g.10gb instance on node ${NODE}`,
      );

      const agent = await h.restartAgent();
      expect(agent.allocator.records().find((r) => r.podName === 'train')?.migDevices).toEqual([granted]);

      // A critical Xid on the parent card takes both its instances out.
      await kubelet.waitFor(() => kubelet.devices(three).length === 2, 're-registered 3g.40gb devices');
      fake.ctl('xid', '0', '48');
      await kubelet.waitFor(
        () => kubelet.devices(three).every((d) => d.health === UNHEALTHY),
        `3g.40gb devices unhealthy (card 0: ${JSON.stringify(agent.health.list()[0]?.healthy)})`,
        5000,
      );
      expect(kubelet.devices(migResourceName(names, '1g.10gb')).map((d) => d.health)).toEqual([HEALTHY]);
    } finally {
      await h.close();
      fake.leave();
    }
  });
});
