/**
 * Dynamic MIG in DRA mode on native/'s fake NVML (its own file: the fake library reads its state
 * file once per process): with card 0 kept for dynamic MIG (`mig.dynamicCards`), a card in MIG
 * mode offers its instances and every placement they leave free; Prepare creates the instance a partition names (node-agent/mig/
 * dynamic-mig.ts) and hands it over, a restart keeps it for its prepared claim, and Unprepare
 * destroys what was made, never an instance that was there before.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claim } from '../../test/support/node-agent/dra-claim.js';
import { startDraHarness } from '../../test/support/node-agent/dra-harness.js';
import { fakeNvmlMachine, isFakeNvmlBuilt } from '../../test/support/node-agent/native-fake-nvml.js';
import { claimCdiSpecPath } from './claim-cdi.js';

/** Two H100 80GB, both kept for dynamic MIG: card 0 in MIG mode with one 3g.40gb at slices 0..3, card 1 out of MIG mode. */
const fake = fakeNvmlMachine('vcuda-dra-mig-dynamic-', { devices: '2x81559', mig: '0' });

describe.skipIf(!isFakeNvmlBuilt)('dynamic MIG in DRA mode on the native fake NVML', () => {
  it('with dynamic MIG, offers the free placements and creates the instance at Prepare, destroyed at Unprepare', async () => {
    fake.enter();
    const lower = fake.createMig(0, 9, 0);
    const nvml = fake.open();
    const instances = () => nvml.migLayout(0)?.instances.map((i) => `${i.profile}@${i.placement.start}`);
    const root = mkdtempSync(join(fake.dir, 'agent-'));
    const mig = { dynamicCards: [0, 1], checkpointPath: join(root, 'dynamic-mig.json') };
    let h = await startDraHarness({
      root,
      config: { mig },
      gpu: () => fake.open(),
    });
    try {
      const offered = [...h.api.slices.values()].flatMap((x) => x.spec.devices ?? []).map((d) => d.name);
      // The static 3g.40gb at slices 0..3, and every placement in 4..7 it leaves free; nothing overlapping it.
      // Card 1, kept too but out of MIG mode, is offered as its 25 partitions and not whole.
      expect(offered.filter((n) => n.startsWith('gpu-1'))).toHaveLength(1 + 1 + 2 + 3 + 4 + 7 + 7);
      expect(offered).not.toContain('gpu-1');
      expect(offered.filter((n) => n.startsWith('gpu-0'))).toEqual([
        'gpu-0-mig-3g-40gb-0',
        'gpu-0-mig-3g-40gb-4',
        'gpu-0-mig-2g-20gb-4',
        'gpu-0-mig-1g-20gb-4',
        'gpu-0-mig-1g-20gb-6',
        'gpu-0-mig-1g-10gb-4',
        'gpu-0-mig-1g-10gb-5',
        'gpu-0-mig-1g-10gb-6',
        'gpu-0-mig-1g-10gb-me-4',
        'gpu-0-mig-1g-10gb-me-5',
        'gpu-0-mig-1g-10gb-me-6',
      ]);

      const made = claim('made').mig('gpu-0-mig-1g-10gb-5');
      const kept = claim('kept').mig('gpu-0-mig-3g-40gb-0');
      for (const c of [made, kept]) h.api.putClaim(c.obj());
      const answers = (await h.kubelet.prepare('v1', [made.ref(), kept.ref()])).claims;
      expect([answers[made.uid]?.error, answers[kept.uid]?.error]).toEqual(['', '']);
      expect(instances()).toEqual(['3g.40gb@0', '1g.10gb@5']);
      const created = nvml.migLayout(0)?.instances.find((i) => i.placement.start === 5)?.uuid as string;
      const prepared = new Map(h.agent.preparer.prepared().map((p) => [p.name, p]));
      expect(prepared.get('made')?.mig?.[0]?.uuid).toBe(created);
      expect(prepared.get('kept')?.mig?.[0]?.uuid).toBe(lower);
      const spec = JSON.parse(
        readFileSync(
          claimCdiSpecPath(h.config.paths.cdiSpecDir, 'gpu.vcuda.io', prepared.get('made')?.key as string),
          'utf8',
        ),
      );
      expect(spec.containerEdits.env).toContain(`NVIDIA_VISIBLE_DEVICES=${created}`);

      // A restart keeps what a prepared claim holds, and answers it again from the checkpoint.
      h = await h.restart();
      expect(instances()).toEqual(['3g.40gb@0', '1g.10gb@5']);
      expect((await h.kubelet.prepare('v1', [made.ref()])).claims[made.uid]?.devices).toEqual(
        answers[made.uid]?.devices,
      );

      // Unprepare destroys what was made for the claim, never an instance it found.
      await h.kubelet.unprepare('v1', [made.ref(), kept.ref()]);
      expect(instances()).toEqual(['3g.40gb@0']);
      // The placement is free again: a new claim gets a new instance there.
      const again = claim('again').mig('gpu-0-mig-1g-10gb-5');
      h.api.putClaim(again.obj());
      expect((await h.kubelet.prepare('v1', [again.ref()])).claims[again.uid]?.error).toBe('');
      expect(instances()).toEqual(['3g.40gb@0', '1g.10gb@5']);
      expect(h.agent.preparer.prepared()[0]?.mig?.[0]?.uuid).not.toBe(created);
      await h.kubelet.unprepare('v1', [again.ref()]);
      expect(instances()).toEqual(['3g.40gb@0']);

      // The kept card out of MIG mode is switched into it at its first Prepare, nothing running on it.
      expect(nvml.migMode(1)).toBe(false);
      const whole = claim('whole').mig('gpu-1-mig-7g-80gb-0');
      h.api.putClaim(whole.obj());
      expect((await h.kubelet.prepare('v1', [whole.ref()])).claims[whole.uid]?.error).toBe('');
      expect(nvml.migMode(1)).toBe(true);
      expect(nvml.migLayout(1)?.instances.map((i) => `${i.profile}@${i.placement.start}`)).toEqual(['7g.80gb@0']);
      await h.kubelet.unprepare('v1', [whole.ref()]);
      expect(nvml.migLayout(1)?.instances).toEqual([]);
    } finally {
      await h.close();
      nvml.close();
      fake.leave();
    }
  });
});
