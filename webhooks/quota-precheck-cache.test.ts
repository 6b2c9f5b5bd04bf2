import { describe, expect, it } from 'vitest';
import { cachedQuotaPrecheck, type LedgerQuotaPrecheck, type QuotaAnswer, type QuotaQuery } from './quota-precheck.js';

type Answer = QuotaAnswer;

function ledgerStub(answers: Answer[]) {
  const calls: QuotaQuery[] = [];
  const precheck: LedgerQuotaPrecheck = async (q) => {
    calls.push(q);
    const next = answers.shift();
    if (!next) throw new Error('ledger unreachable');
    return next;
  };
  return { calls, precheck };
}

const pod = { cluster: 'c1', namespace: 'ml', core: 30, memoryMiB: 8192 };

describe('cachedQuotaPrecheck', () => {
  it('asks the ledger once for concurrent and recent identical pre-checks, again after the ttl', async () => {
    let clock = 0;
    const ledger = ledgerStub([{ ok: true }, { ok: false, message: 'full' }]);
    const check = cachedQuotaPrecheck(ledger.precheck, { ttlMs: 500, now: () => clock });
    const answers = await Promise.all([check(pod), check(pod), check(pod)]);
    clock = 499;
    answers.push(await check(pod));
    expect(answers).toEqual([{ ok: true }, { ok: true }, { ok: true }, { ok: true }]);
    expect(ledger.calls).toHaveLength(1);
    clock = 500;
    expect(await check(pod)).toEqual({ ok: false, message: 'full' });
    expect(ledger.calls).toHaveLength(2);
  });

  it('never reuses a refusal or a failure: the next pod asks the ledger again', async () => {
    const ledger = ledgerStub([{ ok: false, message: 'full' }]);
    const check = cachedQuotaPrecheck(ledger.precheck, { ttlMs: 60_000, now: () => 0 });
    expect(await check(pod)).toEqual({ ok: false, message: 'full' });
    await expect(check(pod)).rejects.toThrow('ledger unreachable');
    await expect(check(pod)).rejects.toThrow('ledger unreachable');
    expect(ledger.calls).toHaveLength(3);
  });

  it("keys on namespace and demand: a bigger pod is not admitted by a smaller one's answer", async () => {
    const ledger = ledgerStub([{ ok: true }, { ok: false, message: 'full' }, { ok: true }]);
    const check = cachedQuotaPrecheck(ledger.precheck, { ttlMs: 60_000, now: () => 0 });
    await check(pod);
    expect(await check({ ...pod, core: 31 })).toEqual({ ok: false, message: 'full' });
    expect(await check({ ...pod, namespace: 'other' })).toEqual({ ok: true });
    expect(ledger.calls.map((c) => [c.namespace, c.core])).toEqual([
      ['ml', 30],
      ['ml', 31],
      ['other', 30],
    ]);
  });

  it('answers a known "ok" at once, without a promise to wait on', async () => {
    const ledger = ledgerStub([{ ok: true }]);
    const check = cachedQuotaPrecheck(ledger.precheck, { ttlMs: 1000, now: () => 0 });
    expect(check(pod)).toBeInstanceOf(Promise);
    await check(pod);
    expect(check(pod)).toEqual({ ok: true });
    expect(ledger.calls).toHaveLength(1);
  });
});

/** A ledger whose answers the test releases one by one. */
function heldLedger() {
  const pending: { q: QuotaQuery; answer: (a: Answer) => void; fail: (e: Error) => void }[] = [];
  const precheck: LedgerQuotaPrecheck = (q) =>
    new Promise((answer, fail) => {
      pending.push({ q, answer, fail });
    });
  return { pending, precheck };
}

describe('cachedQuotaPrecheck past the ttl, with staleMs', () => {
  const settle = () => new Promise((r) => setImmediate(r));

  async function warmed(opts: { ttlMs: number; staleMs: number }) {
    const clock = { now: 0 };
    const ledger = heldLedger();
    const check = cachedQuotaPrecheck(ledger.precheck, { ...opts, now: () => clock.now });
    const first = check(pod);
    ledger.pending[0]?.answer({ ok: true });
    await first;
    await settle();
    return { clock, ledger, check };
  }

  it('answers the stale "ok" at once while one refresh asks the ledger; its "ok" is then fresh', async () => {
    const { clock, ledger, check } = await warmed({ ttlMs: 1000, staleMs: 300 });
    clock.now = 1000;
    expect(check(pod)).toEqual({ ok: true });
    clock.now = 1200;
    expect(check(pod)).toEqual({ ok: true });
    expect(ledger.pending).toHaveLength(2);
    ledger.pending[1]?.answer({ ok: true });
    await settle();
    // Fresh from when the refresh was asked (1000): good until 2000, no third question before.
    clock.now = 1999;
    expect(check(pod)).toEqual({ ok: true });
    expect(ledger.pending).toHaveLength(2);
  });

  it('a refresh that refuses ends the reuse: the next pod waits for the ledger and gets its refusal', async () => {
    const { clock, ledger, check } = await warmed({ ttlMs: 1000, staleMs: 1000 });
    clock.now = 1200;
    expect(check(pod)).toEqual({ ok: true });
    ledger.pending[1]?.answer({ ok: false, message: 'full' });
    await settle();
    const next = check(pod);
    expect(next).toBeInstanceOf(Promise);
    ledger.pending[2]?.answer({ ok: false, message: 'full' });
    expect(await next).toEqual({ ok: false, message: 'full' });
  });

  it('a refresh that fails ends the reuse too', async () => {
    const { clock, ledger, check } = await warmed({ ttlMs: 1000, staleMs: 1000 });
    clock.now = 1200;
    check(pod);
    ledger.pending[1]?.fail(new Error('ledger unreachable'));
    await settle();
    const next = check(pod);
    ledger.pending[2]?.fail(new Error('ledger unreachable'));
    await expect(next).rejects.toThrow('ledger unreachable');
  });

  it('past ttl + staleMs a refresh that never answers no longer stands in: callers ask the ledger', async () => {
    const { clock, ledger, check } = await warmed({ ttlMs: 1000, staleMs: 500 });
    clock.now = 1100;
    expect(check(pod)).toEqual({ ok: true });
    clock.now = 1500;
    const waiting = check(pod);
    expect(waiting).toBeInstanceOf(Promise);
    expect(ledger.pending).toHaveLength(3);
    ledger.pending[2]?.answer({ ok: false, message: 'full' });
    expect(await waiting).toEqual({ ok: false, message: 'full' });
    // The hung refresh answering late changes nothing.
    ledger.pending[1]?.answer({ ok: true });
    await settle();
    const after = check(pod);
    expect(after).toBeInstanceOf(Promise);
    expect(ledger.pending).toHaveLength(4);
  });

  it('without staleMs, past the ttl every call waits for the ledger', async () => {
    const { clock, ledger, check } = await warmed({ ttlMs: 1000, staleMs: 0 });
    clock.now = 1000;
    expect(check(pod)).toBeInstanceOf(Promise);
    expect(ledger.pending).toHaveLength(2);
  });
});
