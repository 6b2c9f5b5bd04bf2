import { describe, expect, it } from 'vitest';
import { buildNodeSnapshot, gpuNode } from '../../test/support/control-plane/builders.js';
import type { NodeSnapshot } from '../placement/cluster-snapshot.js';
import { LedgerNodes, ledgerCardsOf, type NodeRegistrationLedger } from './ledger-nodes.js';

/** A ledger whose upserts stay open until released, counting how many run at once. */
function slowLedger(failOnce: string[] = []) {
  const calls: { node: string; cards: number }[] = [];
  const waiting: (() => void)[] = [];
  let running = 0;
  let maxRunning = 0;
  const failing = new Set(failOnce);
  const ledger: NodeRegistrationLedger = {
    upsertNode: (_cluster, node, cards) => {
      calls.push({ node, cards: cards.length });
      running += 1;
      maxRunning = Math.max(maxRunning, running);
      return new Promise<void>((resolve, reject) => {
        waiting.push(() => {
          running -= 1;
          if (failing.delete(node)) {
            reject(new Error('db down'));
          } else resolve();
        });
      });
    },
  };
  const releaseAll = async () => {
    while (waiting.length > 0) {
      for (const w of waiting.splice(0)) w();
      await new Promise((r) => setImmediate(r));
    }
  };
  return { ledger, calls, releaseAll, maxRunning: () => maxRunning };
}

const node = (name: string, cards = 2) => buildNodeSnapshot(gpuNode({ name, cards }), []);

describe('LedgerNodes', () => {
  it('concurrent binds to one node share one registration; a known node costs nothing', async () => {
    const l = slowLedger();
    const nodes = new LedgerNodes(l.ledger, 'east');
    const a = nodes.ensure(node('n1'));
    const b = nodes.ensure(node('n1'));
    await l.releaseAll();
    await Promise.all([a, b]);
    await nodes.ensure(node('n1'));
    expect(l.calls).toEqual([{ node: 'n1', cards: 2 }]);
  });

  it('registers again when the node reports other cards', async () => {
    const l = slowLedger();
    const nodes = new LedgerNodes(l.ledger, 'east');
    const first = nodes.ensure(node('n1', 2));
    await l.releaseAll();
    await first;
    const second = nodes.ensure(node('n1', 4));
    await l.releaseAll();
    await second;
    // The same cards on a rebuilt snapshot cost nothing; other memory on the same cards registers again.
    await nodes.ensure(node('n1', 4));
    const third = nodes.ensure(buildNodeSnapshot(gpuNode({ name: 'n1', cards: 4, card: { memoryMiB: 40960 } }), []));
    await l.releaseAll();
    await third;
    expect(l.calls).toEqual([
      { node: 'n1', cards: 2 },
      { node: 'n1', cards: 4 },
      { node: 'n1', cards: 4 },
    ]);
  });

  it('forgets a failed registration, so the next call tries again', async () => {
    const l = slowLedger(['n1']);
    const nodes = new LedgerNodes(l.ledger, 'east');
    const failed = nodes.ensure(node('n1')).catch((err: Error) => err.message);
    await l.releaseAll();
    expect(await failed).toBe('db down');
    const retried = nodes.ensure(node('n1'));
    await l.releaseAll();
    await retried;
    expect(l.calls).toHaveLength(2);
  });

  it('registers every unknown node, at most `concurrency` at once, and reports failures', async () => {
    const l = slowLedger(['n5']);
    const nodes = new LedgerNodes(l.ledger, 'east');
    const known = nodes.ensure(node('n0'));
    await l.releaseAll();
    await known;
    const all = nodes.ensureAll(
      Array.from({ length: 10 }, (_, i) => node(`n${i}`)),
      3,
    );
    await l.releaseAll();
    const r = await all;
    expect(r).toMatchObject({ registered: 8, failed: 1 });
    expect(l.maxRunning()).toBe(3);
    expect(new Set(l.calls.map((c) => c.node)).size).toBe(10);
    expect(l.calls.filter((c) => c.node === 'n0')).toHaveLength(1);
  });

  it('weights a shared MIG instance by the part of its card it spans, and registers again when that changes', async () => {
    const base = node('n1', 1);
    const card = base.cards[0] as NodeSnapshot['cards'][number];
    const instance = { ...card, uuid: 'MIG-shared', memoryMiB: 40_000 };
    const shared = (start: number, size: number): NodeSnapshot => ({
      ...base,
      cards: [card, { ...instance, sharedMig: { parentUuid: card.uuid, profile: '3g.40gb', start, size } }],
    });
    // A 3g.40gb on slices 4..7 spans 50 of its card; a card is not weighted (the ledger's 100).
    expect(ledgerCardsOf(shared(4, 4)).map((c) => [c.uuid, c.quotaWeight])).toEqual([
      [card.uuid, undefined],
      ['MIG-shared', 50],
    ]);
    const l = slowLedger();
    const nodes = new LedgerNodes(l.ledger, 'east');
    const first = nodes.ensure(shared(4, 4));
    await l.releaseAll();
    await first;
    await nodes.ensure(shared(4, 4));
    // Served whole now (no longer shared): same uuid, other weight, so the ledger hears of it.
    const whole = nodes.ensure({ ...base, cards: [card, instance] });
    await l.releaseAll();
    await whole;
    expect(l.calls).toEqual([
      { node: 'n1', cards: 2 },
      { node: 'n1', cards: 2 },
    ]);
  });
});
