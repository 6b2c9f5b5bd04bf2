/**
 * Dynamic MIG kill tests on native/'s fake NVML (when `make -C native` has built it): the agent
 * crashes at every step of creating and of destroying an instance, restarts from its checkpoint,
 * and the card ends with exactly the instances live holders need, at the planned placement, and
 * nothing leaked. In-process crashes (the step hook throws and the agent object is dropped: every
 * write before it is synchronous and durable) cover every step; a real SIGKILL of an agent
 * process covers the creating and the destroying half once each.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeNvmlLibrary, fakeNvmlMachine, isFakeNvmlBuilt } from '../../test/support/node-agent/native-fake-nvml.js';
import { runTsxProcess } from '../../test/support/process.js';
import type { MigControl } from '../nvml/gpu-source.js';
import type { NvmlGpuSource } from '../nvml/nvml-gpu-source.js';
import { DynamicMig, type DynamicMigStep, dynamicMigSteps } from './dynamic-mig.js';
import { type MigPlacement, placementKey } from './dynamic-mig-checkpoint.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** Three H100 80GB: cards 0 and 1 in MIG mode with no instance, card 2 out of MIG mode. */
const fake = fakeNvmlMachine('vcuda-dynamic-mig-', { devices: '3x81559', mig: '0,1' });
const tmp = fake.dir;
const PROCESS_DEADLINE_MS = 30_000;

class Crash extends Error {}

let nvml: NvmlGpuSource;
let control: MigControl;
let cardUuid: (i: number) => string;
let checkpoints = 0;

function placement(card: number, profile: string, profileId: number, start: number, size: number): MigPlacement {
  return { cardUuid: cardUuid(card), cardIndex: card, profile, profileId, start, size };
}

/** An agent's dynamic MIG on a fresh start; `crashAt` makes the step hook throw there. */
function agent(checkpointPath: string, crashAt?: DynamicMigStep, idle = true, ctl = control): DynamicMig {
  return new DynamicMig({
    control: ctl,
    cards: {
      migMode: (c) => nvml.migMode(c),
      isCardIdle: () => idle,
      deviceUuid: (c, gi, ci) => nvml.migDeviceUuid(c, gi, ci),
    },
    checkpointPath,
    faults: (step) => {
      if (step === crashAt) throw new Crash(step);
    },
  });
}

/** Every instance on the node now: card, profile, start, and whether its compute instance exists. */
function instancesOnNode() {
  return [0, 1, 2].flatMap((card) =>
    control
      .gpuInstances(card)
      .map((g) => ({ card, profileId: g.profileId, start: g.start, cis: g.computeInstanceIds.length })),
  );
}

/** The MIG devices NVML lists on a card (a GPU instance with its compute instance). */
const devices = (card: number) => nvml.migLayout(card)?.instances ?? [];

const createSteps = dynamicMigSteps.filter(
  (s) => !['after-destroy-intent', 'after-ci-destroy', 'after-gi-destroy'].includes(s),
);
const destroySteps: DynamicMigStep[] = ['after-destroy-intent', 'after-ci-destroy', 'after-gi-destroy'];

describe.skipIf(!isFakeNvmlBuilt)('dynamic MIG on the native fake NVML', () => {
  beforeAll(() => {
    fake.enter();
    nvml = fake.open();
    control = nvml.migControl() as MigControl;
    cardUuid = (i) => nvml.listCards()[i]?.uuid as string;
  });
  afterAll(() => {
    nvml?.close();
    fake.leave();
  });

  it('creates a 3g.40gb at the planned start, adopts it for a second holder, destroys it after the last', () => {
    const path = join(tmp, `cp-${checkpoints++}.json`);
    const p = placement(0, '3g.40gb', 9, 4, 4);
    const a = agent(path);
    const first = a.ensure(p, 'pod-a');
    expect(devices(0)).toMatchObject([{ uuid: first.uuid, profile: '3g.40gb', placement: { start: 4, size: 4 } }]);
    // The same placement again (a second pod on a shared instance, or PreStart called twice): adopted.
    expect(agent(path).ensure(p, 'pod-b')).toEqual(first);
    expect(instancesOnNode()).toEqual([{ card: 0, profileId: 9, start: 4, cis: 1 }]);
    const b = agent(path);
    b.release(placementKey(p), 'pod-a');
    expect(devices(0)).toHaveLength(1);
    b.release(placementKey(p), 'pod-b');
    expect(instancesOnNode()).toEqual([]);
    expect(b.intents()).toEqual([]);
  });

  it('adopts an instance that already sits at the placement instead of answering INSUFFICIENT_RESOURCES', () => {
    const p = placement(1, '2g.20gb', 14, 2, 2);
    const gi = control.createGpuInstance(1, 14, 2, 2);
    const ci = control.createComputeInstance(1, gi);
    const a = agent(join(tmp, `cp-${checkpoints++}.json`));
    expect(a.ensure(p, 'pod-a')).toMatchObject({ gpuInstanceId: gi, computeInstanceId: ci });
    a.release(placementKey(p), 'pod-a');
    expect(instancesOnNode()).toEqual([]);
  });

  it.each(createSteps)('killed at %s while creating: the restart resumes, one instance at the placement', (step) => {
    const path = join(tmp, `cp-${checkpoints++}.json`);
    const p = placement(0, '1g.20gb', 15, 6, 2);
    expect(() => agent(path, step).ensure(p, 'pod-a')).toThrow(Crash);
    const restarted = agent(path);
    restarted.reconcile((h) => h === 'pod-a');
    const ready = restarted.ensure(p, 'pod-a');
    expect(devices(0)).toMatchObject([{ uuid: ready.uuid, profile: '1g.20gb', placement: { start: 6, size: 2 } }]);
    expect(instancesOnNode()).toEqual([{ card: 0, profileId: 15, start: 6, cis: 1 }]);
    expect(restarted.intents()).toMatchObject([{ phase: 'ready', holders: ['pod-a'], uuid: ready.uuid }]);
    restarted.release(placementKey(p), 'pod-a');
    expect(instancesOnNode()).toEqual([]);
  });

  it.each(createSteps)('killed at %s while creating, its pod gone meanwhile: the restart rolls back', (step) => {
    const path = join(tmp, `cp-${checkpoints++}.json`);
    expect(() => agent(path, step).ensure(placement(0, '4g.40gb', 5, 0, 4), 'pod-a')).toThrow(Crash);
    const restarted = agent(path);
    restarted.reconcile(() => false);
    expect(instancesOnNode()).toEqual([]);
    expect(restarted.intents()).toEqual([]);
  });

  it.each(destroySteps)('killed at %s while destroying: the restart finishes, nothing leaks', (step) => {
    const path = join(tmp, `cp-${checkpoints++}.json`);
    const p = placement(1, '7g.80gb', 0, 0, 8);
    agent(path).ensure(p, 'pod-a');
    expect(() => agent(path, step).release(placementKey(p), 'pod-a')).toThrow(Crash);
    const restarted = agent(path);
    restarted.reconcile(() => false);
    expect(instancesOnNode()).toEqual([]);
    expect(restarted.intents()).toEqual([]);
  });

  it('rolls the GPU instance back when the compute instance cannot be made', () => {
    const failing: MigControl = {
      ...control,
      gpuInstances: (c) => control.gpuInstances(c),
      createGpuInstance: (...a) => control.createGpuInstance(...a),
      destroyGpuInstance: (...a) => control.destroyGpuInstance(...a),
      createComputeInstance: () => {
        throw new Error('nvmlGpuInstanceCreateComputeInstance: Insufficient Resources (nvmlReturn_t 23)');
      },
    };
    const a = agent(join(tmp, `cp-${checkpoints++}.json`), undefined, true, failing);
    expect(() => a.ensure(placement(0, '3g.40gb', 9, 0, 4), 'pod-a')).toThrow(/GPU instance rolled back/);
    expect(instancesOnNode()).toEqual([]);
    expect(a.intents()).toEqual([]);
  });

  it('switches a card into MIG mode only when it holds nothing', () => {
    const p = placement(2, '1g.10gb', 19, 6, 1);
    const path = join(tmp, `cp-${checkpoints++}.json`);
    expect(() => agent(path, undefined, false).ensure(p, 'pod-a')).toThrow(/not in MIG mode and holds work/);
    expect(nvml.migMode(2)).toBe(false);
    const a = agent(path);
    a.reconcile(() => false);
    a.ensure(p, 'pod-a');
    expect(nvml.migMode(2)).toBe(true);
    a.release(placementKey(p), 'pod-a');
    control.setMigMode(2, false);
    expect(instancesOnNode()).toEqual([]);
  });

  describe('an agent process killed with SIGKILL', () => {
    const run = (settings: object) =>
      runTsxProcess('test/support/node-agent/dynamic-mig-process.ts', settings, {
        cwd: root,
        env: fake.env,
        deadlineMs: PROCESS_DEADLINE_MS,
      });

    it.each([
      ['after-gi-create', 'ensure'],
      ['after-ci-destroy', 'release'],
    ] as const)(
      'at %s (%s): the next process ends with the right instances and none leaked',
      async (killAt, op) => {
        const p = placement(0, '2g.20gb', 14, 4, 2);
        const base = {
          lib: fakeNvmlLibrary,
          sysfsRoot: tmp,
          checkpointPath: join(tmp, `cp-${checkpoints++}.json`),
          placement: p,
        };
        const holder = { holder: 'pod-a', liveHolders: ['pod-a'] };
        if (op === 'release') {
          const made = await run({ ...base, ...holder, op: 'ensure' });
          expect(made.out, made.err).toMatch(/^ready MIG-/);
        }
        const killed = await run({ ...base, ...holder, op, killAt });
        expect(killed.signal, killed.err).toBe('SIGKILL');
        const again = await run({ ...base, ...holder, op });
        if (op === 'ensure') {
          expect(again.out, again.err).toBe(`ready ${devices(0)[0]?.uuid}\n`);
          expect(instancesOnNode()).toEqual([{ card: 0, profileId: 14, start: 4, cis: 1 }]);
          const gone = await run({ ...base, holder: 'pod-a', liveHolders: [], op: 'release' });
          expect(gone.out, gone.err).toBe('released\n');
        } else {
          expect(again.out, again.err).toBe('released\n');
        }
        expect(instancesOnNode()).toEqual([]);
      },
      3 * PROCESS_DEADLINE_MS,
    );
  });
});
