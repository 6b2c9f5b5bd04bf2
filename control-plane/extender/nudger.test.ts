import { describe, expect, it } from 'vitest';
import { NUDGE_ANNOTATION, Nudger, type NudgeTarget } from './nudger.js';

function setup(opts: { failFor?: string } = {}) {
  const patched: { pod: string; annotations: Record<string, string> }[] = [];
  let ms = Date.parse('2026-11-22T04:00:00Z');
  const nudger = new Nudger({
    clock: () => {
      ms += 1000;
      return new Date(ms);
    },
    debounceMs: 1,
    maxPerRound: 2,
    patch: async (t, annotations) => {
      if (t.name === opts.failFor) throw new Error('gone');
      patched.push({ pod: t.name, annotations });
    },
  });
  const pod = (name: string): NudgeTarget => ({ namespace: 'ns', name, uid: `uid-${name}` });
  return { nudger, patched, pod };
}

describe('Nudger', () => {
  it('patches the refused pods, oldest first, a bounded batch per round', async () => {
    const { nudger, patched, pod } = setup();
    for (const n of ['a', 'b', 'c']) nudger.rememberRefused(pod(n));
    expect(await nudger.nudgeNow()).toBe(2);
    expect(patched.map((p) => p.pod)).toEqual(['a', 'b']);
    expect(Object.keys(patched[0]?.annotations ?? {})).toEqual([NUDGE_ANNOTATION]);
    expect(nudger.waiting()).toBe(1);
    expect(await nudger.nudgeNow()).toBe(1);
    expect(nudger.waiting()).toBe(0);
  });

  it('forgets bound pods and survives a failed patch', async () => {
    const { nudger, patched, pod } = setup({ failFor: 'b' });
    for (const n of ['a', 'b']) nudger.rememberRefused(pod(n));
    nudger.forget('uid-a');
    expect(await nudger.nudgeNow()).toBe(0);
    expect(patched).toEqual([]);
  });

  it('coalesces capacity-freed signals into one round and stops on close', async () => {
    const { nudger, patched, pod } = setup();
    nudger.rememberRefused(pod('a'));
    nudger.capacityFreed();
    nudger.capacityFreed();
    for (let i = 0; i < 100 && patched.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    expect(patched.map((p) => p.pod)).toEqual(['a']);
    await nudger.close();
    nudger.rememberRefused(pod('b'));
    nudger.capacityFreed();
    await new Promise((r) => setTimeout(r, 20));
    expect(patched.map((p) => p.pod)).toEqual(['a']);
  });
});
