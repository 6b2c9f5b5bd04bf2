/**
 * Shares inside a MIG instance on native/'s fake NVML (when `make -C native` has built it): an
 * instance the configuration shares is served through vcuda-core/vcuda-memory like a small card
 * (100 core devices `c<parent>g<gi>-<nn>`, its memory in units), not as a whole mig-<profile>
 * instance, and marked shared in the inventory; a share pod whose grant names it gets a limit file
 * naming the instance by its MIG UUID, libvcuda, and a CDI spec with the parent's device node, the
 * instance's two access nodes and NVIDIA_VISIBLE_DEVICES=MIG-…. Its compute is measured in-process.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  decodeLimitConfig,
  MIB,
  migResourceName,
  nodeInventorySchema,
  vcudaAnnotations,
} from '../../contract/index.js';
import { type Harness, NODE, startHarness } from '../../test/support/node-agent/agent-harness.js';
import { bindGrantPod } from '../../test/support/node-agent/mig-pod.js';
import { fakeNvmlMachine, isFakeNvmlBuilt } from '../../test/support/node-agent/native-fake-nvml.js';
import { coreGroupOfDevice } from '../allocation/core-devices.js';
import { chooseComputeSensor } from '../card-sampling/compute-sensor.js';
import { cdiSpecPath } from '../limits/cdi-spec.js';
import { allocationKey, containerPaths } from '../limits/container-files.js';
import { layoutCapMinor } from './cap-minors.js';

/** One H100 80GB in MIG mode with two 3g.40gb: the one at slice 4 is shared. */
const fake = fakeNvmlMachine('vcuda-mig-share-', { devices: '1x81559', mig: '0' });

/** A share pod (vcuda-core 50, vcuda-memory 4096) whose signed grant names `uuid`, bound to the node. */
function bindSharePod(h: Harness, name: string, uuid: string) {
  const cards = [{ uuid, core: 50, memoryBytes: 4096 * MIB }];
  return bindGrantPod(h, name, cards, { [h.names.core]: 50, [h.names.memory]: 4096 }, 50);
}

describe.skipIf(!isFakeNvmlBuilt)('shares inside a MIG instance on the native fake NVML', () => {
  it('serves the shared instance as vcuda-core/vcuda-memory and hands a share of it over with its limit', async () => {
    fake.enter();
    const whole = fake.createMig(0, 9, 0);
    const shared = fake.createMig(0, 9, 4);
    const h = await startHarness({
      config: { mig: { shared: [{ profile: '3g.40gb', start: 4 }] } },
      gpuSource: fake.open,
    });
    try {
      const { kubelet, names } = h;
      const three = migResourceName(names, '3g.40gb');
      await kubelet.waitFor(() => kubelet.devices(names.core).length === 100, 'core devices of the shared instance');
      // The shared instance (GPU instance 2) is a core group of its own; the other stays whole.
      expect(new Set(kubelet.devices(names.core).map((d) => coreGroupOfDevice(d.ID)))).toEqual(new Set(['0g2']));
      expect(h.agent.memoryPlan.units).toBe(40448);
      await kubelet.waitFor(
        () => kubelet.devices(names.memory).length === 40448,
        'memory devices of the shared instance',
      );
      expect(kubelet.devices(three).map((d) => d.ID)).toEqual([whole]);
      await h.agent.publishInventory();
      const inventory = nodeInventorySchema.parse(
        JSON.parse(h.cluster.nodeAnnotations.get(NODE)?.[vcudaAnnotations.inventory] ?? '{}'),
      );
      const instances = inventory.cards[0]?.mig?.instances ?? [];
      expect(instances.map((i) => [i.uuid, i.shared ?? false])).toEqual([
        [whole, false],
        [shared, true],
      ]);

      const admitted = await kubelet.admitPod(await bindSharePod(h, 'tenant-a', shared));
      expect(admitted[0]?.responses[names.core]?.envs).toEqual({ VCUDA_CONFIG: '/etc/vcuda/vcuda.conf' });
      const ids = kubelet.podDevices.get('default/tenant-a')?.get('main')?.get(names.core) ?? [];
      const key = allocationKey(ids);
      const limit = decodeLimitConfig(readFileSync(containerPaths(h.config.paths.containersDir, key).configPath));
      expect(limit.devices.map((d) => [d.uuid, d.memoryLimitBytes, d.coreLimit])).toEqual([[shared, 4096 * MIB, 50]]);
      const edits = JSON.parse(readFileSync(cdiSpecPath(h.config.paths.cdiSpecDir, key), 'utf8')).devices[0]
        .containerEdits;
      expect(edits.env).toEqual([`NVIDIA_VISIBLE_DEVICES=${shared}`, `CUDA_VISIBLE_DEVICES=${shared}`]);
      expect(edits.deviceNodes.map((n: { path: string }) => n.path)).toEqual([
        '/dev/nvidia0',
        `/dev/nvidia-caps/nvidia-cap${layoutCapMinor(0, 2)}`,
        `/dev/nvidia-caps/nvidia-cap${layoutCapMinor(0, 2, 0)}`,
      ]);
      // The share is measured on its parent's sampler, in-process: NVML has no per-process utilization on
      // MIG, so even a node configured for NVML falls back.
      expect(chooseComputeSensor(fake.lastOpened(), 0, 'nvml')).toEqual({
        sensor: 'in-process',
        reason: 'nvml-unsupported',
        wholeCardsByNvml: false,
      });

      // A share grant naming the whole instance is refused: it is not a card here.
      await expect(kubelet.admitPod(await bindSharePod(h, 'forged', whole))).rejects.toThrow(
        `assignment names card ${whole}, not on node ${NODE}`,
      );
    } finally {
      await h.close();
      fake.leave();
    }
  });
});
