import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { assignedPod, gpuNode, gpuPod, policy, testState } from '../../test/support/control-plane/builders.js';
import {
  type ExtenderHarness,
  post,
  startExtender,
  testKeys,
} from '../../test/support/control-plane/extender-harness.js';
import { type FakeKubeApi, startFakeKubeApi } from '../../test/support/control-plane/fake-kube-api.js';
import type { PodWithStatus } from '../placement/cluster-snapshot.js';
import { readPlacementRequest } from '../placement/placement-request.js';
import { decidePreemption, type PdbLike, pdbViolators, selects } from './preempt-decision.js';

const NODE = 'gpu-node-0';

/** A running pod holding `core` of card `card`, at `priority`. */
function low(name: string, card: number, opts: { priority?: number; labels?: Record<string, string> } = {}) {
  const pod = assignedPod(name, NODE, [{ core: 50, memoryMiB: 1024, cards: [card] }]);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    ...pod,
    metadata: { ...pod.metadata, labels: opts.labels ?? {} },
    spec: { ...pod.spec, priority: opts.priority ?? 0 },
    status: { ...pod.status, startTime: `2026-11-22T03:00:0${card}Z` },
  } as PodWithStatus & { apiVersion: string; kind: string };
}

function preemptor(opts: { priority?: number; preemptionPolicy?: string } = {}) {
  const pod = gpuPod('urgent', [{ core: 100 }]);
  return {
    ...pod,
    spec: {
      ...pod.spec,
      nodeSelector: { 'kubernetes.io/hostname': NODE },
      priority: opts.priority ?? 1000,
      ...(opts.preemptionPolicy ? { preemptionPolicy: opts.preemptionPolicy } : {}),
    },
  };
}

describe('extender preempt verb', () => {
  let api: FakeKubeApi;
  let db: VcudaDb;
  let ext: ExtenderHarness;

  beforeAll(async () => {
    db = await connectDb({});
    await migrate(db);
  });
  afterAll(async () => closeDb(db));
  beforeEach(async () => {
    api = await startFakeKubeApi();
    api.putNode(gpuNode({ name: NODE, cards: 2 }));
    // Two per card: a on 0, b on 1, c on 0, d on 1.
    for (const [name, card] of [
      ['a', 0],
      ['b', 1],
      ['c', 0],
      ['d', 1],
    ] as const)
      api.putPod(low(name, card));
    ext = await startExtender({ api, db, keys: await testKeys() });
    await ext.deps.state.settled();
  });
  afterEach(async () => {
    await ext.close();
    await api.close();
  });

  it('filter leaves a node short of card capacity to preemption (FailedNodes, not unresolvable)', async () => {
    const { json } = await post(ext.app, '/filter', { Pod: preemptor(), NodeNames: [NODE] });
    expect(json.NodeNames).toEqual([]);
    expect(json.FailedNodes).toEqual({ [NODE]: 'needs 1 entirely free card; 0 free' });
    expect(json.FailedAndUnresolvableNodes).toEqual({});
  });

  it('answers the two pods of one card, not the node-level pair kube-scheduler proposed', async () => {
    // kube-scheduler counts 200 core free once any two go: it may propose a and b, one per card.
    const meta = { [NODE]: { Pods: [{ UID: 'uid-a' }, { UID: 'uid-b' }], NumPDBViolations: 0 } };
    const { status, json } = await post(ext.app, '/preempt', { Pod: preemptor(), NodeNameToMetaVictims: meta });
    expect(status).toBe(200);
    const victims = (json.NodeNameToMetaVictims as Record<string, { Pods: { UID: string }[] }>)[NODE];
    const uids = victims?.Pods.map((p) => p.UID).sort();
    expect([
      ['uid-a', 'uid-c'],
      ['uid-b', 'uid-d'],
    ]).toContainEqual(uids);
    for (let i = 0; i < 200 && !api.events.length; i++) await new Promise((r) => setTimeout(r, 10));
    const event = api.events.find((e) => (e as { reason?: string }).reason === 'VcudaPreempting') as
      | { message: string; involvedObject: { name: string }; type: string }
      | undefined;
    expect(event?.involvedObject.name).toBe('urgent');
    expect(event?.type).toBe('Normal');
    for (const uid of uids ?? []) expect(event?.message).toContain(`default/${uid.slice(4)} (priority 0)`);
  });

  it('reads the full-pod form too and still answers UIDs', async () => {
    const full = { [NODE]: { Pods: [low('a', 0), low('b', 1)], NumPDBViolations: 0 } };
    const { json } = await post(ext.app, '/preempt', { Pod: preemptor(), NodeNameToVictims: full });
    const victims = (json.NodeNameToMetaVictims as Record<string, { Pods: { UID: string }[] }>)[NODE];
    expect(victims?.Pods).toHaveLength(2);
  });

  it('refuses to preempt for a pod whose PriorityClass says preemptionPolicy: Never', async () => {
    const meta = { [NODE]: { Pods: [{ UID: 'uid-a' }, { UID: 'uid-b' }], NumPDBViolations: 0 } };
    const pod = preemptor({ preemptionPolicy: 'Never' });
    const { json } = await post(ext.app, '/preempt', { Pod: pod, NodeNameToMetaVictims: meta });
    expect(json).toEqual({ NodeNameToMetaVictims: {} });
  });

  it('drops the node when the pod outranks no one there', async () => {
    const meta = { [NODE]: { Pods: [{ UID: 'uid-a' }], NumPDBViolations: 0 } };
    const { json } = await post(ext.app, '/preempt', { Pod: preemptor({ priority: 0 }), NodeNameToMetaVictims: meta });
    expect(json).toEqual({ NodeNameToMetaVictims: {} });
  });

  it('refuses malformed arguments with the field named', async () => {
    const { status, json } = await post(ext.app, '/preempt', { Pod: preemptor(), NodeNameToMetaVictims: [] });
    expect(status).toBe(400);
    expect(String(json.Error)).toContain('NodeNameToMetaVictims');
    const many = Object.fromEntries(Array.from({ length: 5001 }, (_, i) => [`n${i}`, { Pods: [] }]));
    const tooMany = await post(ext.app, '/preempt', { Pod: preemptor(), NodeNameToMetaVictims: many });
    expect(tooMany.status).toBe(400);
  });
});

describe('PodDisruptionBudgets in preemption', () => {
  const pdb = (selector: PdbLike['spec'], disruptionsAllowed: number): PdbLike => ({
    metadata: { namespace: 'default', name: 'guard' },
    spec: selector ?? null,
    status: { disruptionsAllowed },
  });

  it('counts violations as kube-scheduler does: allowed disruptions are spent pod by pod', () => {
    const pods = ['x', 'y', 'z'].map((n) => low(n, 0, { labels: { app: 'web' } }));
    const v = pdbViolators(pods, [pdb({ selector: { matchLabels: { app: 'web' } } }, 1)]);
    expect([...v].map((p) => p.metadata?.name)).toEqual(['y', 'z']);
    expect(pdbViolators(pods, [pdb({ selector: {} }, 0)]).size).toBe(0);
  });

  it('selects by labels and expressions', () => {
    const sel = { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['db'] }] };
    expect(selects(sel, { app: 'web', tier: 'front' })).toBe(true);
    expect(selects(sel, { app: 'web', tier: 'db' })).toBe(false);
    expect(selects({ matchExpressions: [{ key: 'x', operator: 'Exists' }] }, { x: '' })).toBe(true);
    expect(selects({ matchExpressions: [{ key: 'x', operator: 'Bogus' }] }, { x: '' })).toBe(false);
  });

  it('takes the card whose pods no budget protects', async () => {
    const state = testState({ keys: await testKeys() });
    state.upsertNode(gpuNode({ name: NODE, cards: 2 }));
    const guarded = { labels: { app: 'guarded' } };
    for (const p of [low('g1', 0, guarded), low('g2', 0, guarded), low('f1', 1), low('f2', 1)]) state.upsertPod(p);
    await state.settled();
    const out = decidePreemption({
      preemptor: preemptor(),
      request: readPlacementRequest(preemptor(), policy, 'binpack'),
      nodes: [NODE],
      holdersOn: (n) => state.holdersOn(n),
      pdbs: [pdb({ selector: { matchLabels: { app: 'guarded' } } }, 0)],
      ctx: { nowMs: Date.parse('2026-11-22T04:00:30Z'), heartbeatStaleMs: 60_000 },
    });
    expect(out.chosen.get(NODE)?.victims.map((v) => v.pod)).toEqual(['default/f1', 'default/f2']);
    expect(out.chosen.get(NODE)?.pdbViolations).toBe(0);
  });
});
