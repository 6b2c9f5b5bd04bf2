import { describe, expect, it } from 'vitest';
import type { VcudaDb } from './connect.js';
import { createLedgerProbe } from './ledger-probe.js';

/** A database handle whose `execute` does what the test says and counts the calls. */
function fakeDb(answer: () => Promise<unknown>) {
  const calls = { n: 0 };
  const db = {
    execute: () => {
      calls.n++;
      return answer();
    },
  } as unknown as VcudaDb;
  return { db, calls };
}

describe('ledger readiness probe', () => {
  it('is ready when select 1 answers, and asks the database at most once per cacheMs', async () => {
    let nowMs = 0;
    const { db, calls } = fakeDb(async () => [{ '?column?': 1 }]);
    const probe = createLedgerProbe(db, { timeoutMs: 100, cacheMs: 2000, nowMs: () => nowMs });
    const answers = await Promise.all(Array.from({ length: 50 }, () => probe.check()));
    expect(answers.every((a) => a.ok)).toBe(true);
    expect(calls.n).toBe(1);
    nowMs = 1999;
    await probe.check();
    expect(calls.n).toBe(1);
    nowMs = 2001;
    await probe.check();
    expect(calls.n).toBe(2);
  });

  it('a silent ledger is not ready after the deadline, with the reason', async () => {
    const { db } = fakeDb(() => new Promise(() => undefined));
    const probe = createLedgerProbe(db, { timeoutMs: 30, cacheMs: 0 });
    const started = performance.now();
    const result = await probe.check();
    expect(performance.now() - started).toBeLessThan(1000);
    expect(result).toEqual({
      ok: false,
      reason: 'ledger unreachable: readiness probe: no answer from the ledger within 30 ms',
    });
  });

  it('a failing ledger is not ready, and recovers on the next probe', async () => {
    let down = true;
    const { db } = fakeDb(async () => {
      if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
      return [];
    });
    const probe = createLedgerProbe(db, { timeoutMs: 100, cacheMs: 0 });
    expect(await probe.check()).toEqual({
      ok: false,
      reason: 'ledger unreachable: connect ECONNREFUSED 127.0.0.1:5432',
    });
    down = false;
    expect(await probe.check()).toEqual({ ok: true });
  });
});
