import { describe, expect, it } from 'vitest';
import { cachedQuotaPrecheck, type QuotaPrecheck } from './quota-precheck.js';

type Answer = Awaited<ReturnType<QuotaPrecheck>>;

function ledgerStub(answers: Answer[]) {
  const calls: Parameters<QuotaPrecheck>[0][] = [];
  const precheck: QuotaPrecheck = async (q) => {
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
});
