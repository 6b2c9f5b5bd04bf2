import { describe, expect, it } from 'vitest';
import { MIB } from '../../contract/index.js';
import { assignedPod, buildNodeSnapshot, gpuNode, gpuPod, policy } from '../../test/support/control-plane/builders.js';
import { fitPod } from '../placement/fit.js';
import { readPlacementRequest } from '../placement/placement-request.js';
import { burstCeilingMiB, cardGrantOf } from './card-grant.js';

const ctx = { nowMs: Date.parse('2026-11-22T04:00:30Z'), heartbeatStaleMs: 60_000 };
const burst = (mib: number) => ({ annotations: { [policy.names.memoryLimit]: String(mib) } });

function fitOn(cardMiB: number, neighbourMiB: number, memoryMiB: number, limitMiB: number) {
  const neighbour = assignedPod('a', 'n1', [{ core: 10, memoryMiB: neighbourMiB, cards: [0] }]);
  const node = buildNodeSnapshot(gpuNode({ name: 'n1', cards: [{ memoryMiB: cardMiB }] }), [neighbour]);
  const pod = gpuPod('b', [{ name: 'model', core: 10, memoryMiB }], burst(limitMiB));
  const req = readPlacementRequest(pod, policy, 'binpack');
  return { req, fit: fitPod(req, node, ctx) };
}

describe('bursts are never counted toward fit', () => {
  it('places a pod whose request fits even when its burst ceiling is far above what is free', () => {
    const { req, fit } = fitOn(2048, 1024, 1024, 65536);
    expect(fit.ok).toBe(true);
    if (!fit.ok) return;
    expect([...fit.placement.cardUse.values()]).toEqual([{ core: 10, memoryMiB: 1024 }]);
    const card = fit.placement.containers[0]?.cards[0];
    expect(card).toBeDefined();
    if (!card) return;
    expect(cardGrantOf(card, burstCeilingMiB(req.containers, 'model'))).toEqual({
      uuid: card.uuid,
      core: 10,
      memoryBytes: 1024 * MIB,
      memoryLimitBytes: 65536 * MIB,
    });
  });

  it('refuses a pod whose request does not fit, whatever its ceiling', () => {
    expect(fitOn(2048, 1536, 1024, 1024).fit.ok).toBe(false);
    expect(fitOn(2048, 1536, 1024, 4096).fit.ok).toBe(false);
  });

  it('grants no ceiling at or below the guaranteed memory', () => {
    const plan = { uuid: 'GPU-1', core: 100, memoryMiB: 81559 };
    expect(cardGrantOf(plan, undefined)).not.toHaveProperty('memoryLimitBytes');
    expect(cardGrantOf(plan, 81559)).not.toHaveProperty('memoryLimitBytes');
  });
});
