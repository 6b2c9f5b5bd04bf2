/**
 * Dynamic MIG through the agent on native/'s fake NVML (when `make -C native` has built it): the
 * cards kept for dynamic MIG advertise per profile the instances that fit on an empty card, a
 * dynamic grant's pod gets its instance made at PreStartContainer at the planned placement (the
 * card switched into MIG mode, being idle), handed over by CDI as a `MIG-` device, adopted and not
 * duplicated after an agent restart, and destroyed when the pod ends. The agent crashed at every
 * step of the create, inside PreStart, ends after its restart and the kubelet's retry with exactly
 * the one instance at the placement; its pod gone instead, with none.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type CardGrant,
  migPlacementKey,
  migResourceName,
  nodeInventorySchema,
  vcudaAnnotations,
} from '../../contract/index.js';
import { type Harness, NODE, startHarness } from '../../test/support/node-agent/agent-harness.js';
import { bindMigGrantPod, dynamicMigGrant } from '../../test/support/node-agent/mig-pod.js';
import { fakeNvmlLibrary, fakeNvmlMachine, isFakeNvmlBuilt } from '../../test/support/node-agent/native-fake-nvml.js';
import { runTsxProcess } from '../../test/support/process.js';
import { cdiSpecPath } from '../limits/cdi-spec.js';
import { allocationKey } from '../limits/container-files.js';
import { type DynamicMigStep, dynamicMigSteps } from '../mig/dynamic-mig.js';

/** Three H100 80GB: card 0 in MIG mode, cards 1 and 2 out of it; 0 and 1 kept for dynamic MIG. */
const fake = fakeNvmlMachine('vcuda-dynamic-mig-prestart-', { devices: '3x81559', mig: '0' });
const tmp = fake.dir;

const PROCESS_DEADLINE_MS = 60_000;

class Crash extends Error {}

const nvml = () => fake.lastOpened();
let runs = 0;

/** An agent harness on the fake NVML; `crashAt` makes the first agent's step hook throw there. */
async function harness(crashAt?: DynamicMigStep): Promise<Harness> {
  let starts = 0;
  return startHarness({
    gpuSource: fake.open,
    config: { mig: { dynamicCards: [0, 1], checkpointPath: join(tmp, `cp-${runs++}.json`) } },
    dynamicMigFaults: () => {
      if (starts++ > 0 || !crashAt) return undefined;
      return (step) => {
        if (step === crashAt) throw new Crash(step);
      };
    },
  });
}

const dynamicGrant = (card: number, profile: string, start: number) => dynamicMigGrant(nvml(), card, profile, start);

/** Every GPU instance on the node: card, profile, start, compute instances. */
function instancesOnNode() {
  const control = nvml().migControl();
  return [0, 1, 2].flatMap((card) =>
    nvml().migMode(card)
      ? (control?.gpuInstances(card) ?? []).map((g) => ({
          card,
          profileId: g.profileId,
          start: g.start,
          cis: g.computeInstanceIds.length,
        }))
      : [],
  );
}

/** The `MIG-` UUID the CDI spec of the pod's container hands over. */
function handedOver(h: Harness, pod: string, profile: string): string | undefined {
  const ids = h.kubelet.podDevices.get(`default/${pod}`)?.get('main')?.get(migResourceName(h.names, profile)) ?? [];
  const path = cdiSpecPath(h.config.paths.cdiSpecDir, allocationKey(ids));
  if (!existsSync(path)) return undefined;
  const env: string[] = JSON.parse(readFileSync(path, 'utf8')).devices[0].containerEdits.env;
  return env.find((e) => e.startsWith('NVIDIA_VISIBLE_DEVICES='))?.split('=')[1];
}

/** The pod ended: the kubelet frees its devices, the API server forgets it, housekeeping runs. */
async function endPod(h: Harness, pod: { name: string }): Promise<void> {
  h.kubelet.releasePod(`default/${pod.name}`);
  h.cluster.delete('default', pod.name);
  await h.agent.housekeep();
}

const createSteps = dynamicMigSteps.filter((s) => !s.includes('destroy'));

describe.skipIf(!isFakeNvmlBuilt)('dynamic MIG at PreStartContainer on the native fake NVML', () => {
  fake.enter();
  afterAll(fake.leave);

  it('advertises what fits, makes the grant instance at PreStart, adopts it after a restart, destroys it at the end', async () => {
    const h = await harness();
    try {
      const { kubelet, names } = h;
      const count = (p: string) => kubelet.devices(migResourceName(names, p)).length;
      const counts = () => ['1g.10gb', '1g.20gb', '2g.20gb', '3g.40gb', '4g.40gb', '7g.80gb'].map(count).join(' ');
      // Each dynamic card offers what fits side by side on it empty; only card 2 whole or as shares.
      await kubelet.waitFor(() => counts() === '14 8 6 4 2 2', `devices of two dynamic cards (${counts()})`);
      expect(kubelet.devices(names.core)).toHaveLength(100);
      expect(kubelet.resources()).not.toContain(migResourceName(names, '1g.10gb+me'));
      await h.agent.publishInventory();
      const inventory = nodeInventorySchema.parse(
        JSON.parse(h.cluster.nodeAnnotations.get(NODE)?.[vcudaAnnotations.inventory] ?? '{}'),
      );
      expect(inventory.cards.map((c) => [c.mig?.mode, c.mig?.dynamic])).toEqual([
        ['enabled', true],
        ['disabled', true],
        ['disabled', undefined],
      ]);

      // Card 1 is out of MIG mode and idle: the first instance switches it in.
      const pod = await bindMigGrantPod(h, 'train', '3g.40gb', [dynamicGrant(1, '3g.40gb', 4)]);
      await kubelet.admitPod(pod);
      const made = nvml().migLayout(1)?.instances ?? [];
      expect(made).toMatchObject([{ profile: '3g.40gb', placement: { start: 4, size: 4 } }]);
      expect(handedOver(h, 'train', '3g.40gb')).toBe(made[0]?.uuid);
      expect(h.cluster.pods().find((p) => p.name === 'train')?.annotations[vcudaAnnotations.allocatedAt]).toBeDefined();

      // Restarted: the container is re-learned with its instance, and a second PreStart adopts it.
      const agent = await h.restartAgent();
      expect(agent.allocator.records().find((r) => r.podName === 'train')?.migDevices).toEqual([made[0]?.uuid]);
      await kubelet.waitFor(() => count('3g.40gb') === 4, 're-registered 3g.40gb devices');
      await kubelet.preStart('default/train', 'main');
      expect(instancesOnNode()).toEqual([{ card: 1, profileId: 9, start: 4, cis: 1 }]);

      await endPod(h, pod);
      expect(instancesOnNode()).toEqual([]);
    } finally {
      await h.close();
    }
  });

  it('refuses a grant at a placement that is not legal for its profile, naming it', async () => {
    const h = await harness();
    try {
      const bad = { ...dynamicGrant(0, '3g.40gb', 4) };
      const mig = { ...(bad.mig as NonNullable<CardGrant['mig']>), start: 2 };
      const grant = { ...bad, mig, uuid: migPlacementKey({ ...mig }) };
      const pod = await bindMigGrantPod(h, 'odd', '3g.40gb', [grant]);
      await expect(h.kubelet.admitPod(pod)).rejects.toThrow(
        `MIG instance ${grant.uuid} not made: ${grant.uuid} (4 slices) is not a legal 3g.40gb placement: starts 0, 4, 4 slices`,
      );
      expect(instancesOnNode()).toEqual([]);
    } finally {
      await h.close();
    }
  });

  it.each(createSteps)(
    'agent crashed at %s inside PreStart: the retry after its restart makes exactly one',
    async (step) => {
      const h = await harness(step);
      try {
        const pod = await bindMigGrantPod(h, 'crash', '1g.20gb', [dynamicGrant(0, '1g.20gb', 6)]);
        await expect(h.kubelet.admitPod(pod)).rejects.toThrow(step);
        await h.restartAgent();
        await h.kubelet.preStart('default/crash', 'main');
        const made = nvml().migLayout(0)?.instances ?? [];
        expect(made).toMatchObject([{ profile: '1g.20gb', placement: { start: 6, size: 2 } }]);
        expect(handedOver(h, 'crash', '1g.20gb')).toBe(made[0]?.uuid);
        await endPod(h, pod);
        expect(instancesOnNode()).toEqual([]);
      } finally {
        await h.close();
      }
    },
  );

  it.each(createSteps)(
    'agent crashed at %s inside PreStart, its pod gone meanwhile: the restart leaks nothing',
    async (step) => {
      const h = await harness(step);
      try {
        const pod = await bindMigGrantPod(h, 'gone', '4g.40gb', [dynamicGrant(0, '4g.40gb', 0)]);
        await expect(h.kubelet.admitPod(pod)).rejects.toThrow(step);
        h.kubelet.releasePod('default/gone');
        h.cluster.delete('default', pod.name);
        await h.restartAgent();
        expect(instancesOnNode()).toEqual([]);
      } finally {
        await h.close();
      }
    },
  );
  it.each(['after-gi-create', 'after-ci-create'] as const)(
    'agent process SIGKILLed at %s inside PreStart: the next one hands over the one instance, the last destroys it',
    async (killAt) => {
      const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
      const settings = {
        lib: fakeNvmlLibrary,
        sysfsRoot: tmp,
        checkpointPath: join(tmp, `cp-${runs++}.json`),
        card: 0,
        profile: '2g.20gb',
        start: 2,
      };
      const run = (more: object) =>
        runTsxProcess(
          'test/support/node-agent/dynamic-mig-agent-process.ts',
          { ...settings, ...more },
          { cwd: root, env: { ...fake.env, TMPDIR: tmp }, deadlineMs: PROCESS_DEADLINE_MS },
        );
      const killed = await run({ op: 'admit', killAt });
      expect(killed.signal, killed.err).toBe('SIGKILL');
      const again = await run({ op: 'admit' });
      fake.open();
      const made = nvml().migLayout(0)?.instances ?? [];
      expect(made).toMatchObject([{ profile: '2g.20gb', placement: { start: 2, size: 2 } }]);
      expect(again.out, again.err).toBe(`ready ${made[0]?.uuid}\n`);
      const gone = await run({ op: 'gone' });
      expect(gone.out, gone.err).toBe('released\n');
      expect(instancesOnNode()).toEqual([]);
      nvml().close();
    },
    3 * PROCESS_DEADLINE_MS,
  );
});
