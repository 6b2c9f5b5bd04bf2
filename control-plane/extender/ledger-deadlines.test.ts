import { describe, expect, it } from 'vitest';
import { LedgerTimeoutError } from '../../db/deadline.js';
import type { BindLedger } from './binder.js';
import { withLedgerDeadlines } from './ledger-deadlines.js';

type Deferred<T> = { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void };
function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A ledger whose reserve answers only when the test says so, recording every release. */
function slowLedger() {
  const reserve = deferred<{ reused: boolean }>();
  const released: string[] = [];
  let releaseFails = false;
  const ledger: BindLedger = {
    upsertNode: () => new Promise(() => undefined),
    reserve: () => reserve.promise,
    confirmMany: () => new Promise(() => undefined),
    release: async (_cluster, podUid) => {
      if (releaseFails) throw new Error('ledger down');
      released.push(podUid);
      return { released: 1 };
    },
  };
  return { ledger, reserve, released, failReleases: () => (releaseFails = true) };
}

const request = {
  cluster: 'c1',
  podUid: 'uid-p',
  namespace: 'ns',
  pod: 'p',
  node: 'n1',
  items: [{ container: 'main', cardUuid: 'GPU-1', core: 30, memoryMiB: 1024 }],
};
const settle = () => new Promise((r) => setTimeout(r, 5));

describe('bind ledger calls with deadlines', () => {
  it('a silent ledger fails every call at its deadline', async () => {
    const { ledger } = slowLedger();
    const bounded = withLedgerDeadlines(ledger, { timeoutMs: 20 });
    await expect(bounded.reserve(request)).rejects.toBeInstanceOf(LedgerTimeoutError);
    await expect(bounded.upsertNode('c1', 'n1', [])).rejects.toThrow(
      /register node n1: no answer from the ledger within 20 ms/,
    );
    await expect(bounded.confirmMany('c1', ['uid-p'])).rejects.toBeInstanceOf(LedgerTimeoutError);
  });

  it('a reservation this call made that lands after the deadline is released', async () => {
    const { ledger, reserve, released } = slowLedger();
    const late: string[] = [];
    const bounded = withLedgerDeadlines(ledger, { timeoutMs: 20, onLateReservation: (uid) => late.push(uid) });
    await expect(bounded.reserve(request)).rejects.toBeInstanceOf(LedgerTimeoutError);
    expect(released).toEqual([]);
    reserve.resolve({ reused: false });
    await settle();
    expect(released).toEqual(['uid-p']);
    expect(late).toEqual(['uid-p']);
  });

  it('a late answer naming another attempt’s reservation leaves it alone', async () => {
    const { ledger, reserve, released } = slowLedger();
    const bounded = withLedgerDeadlines(ledger, { timeoutMs: 20 });
    await expect(bounded.reserve(request)).rejects.toBeInstanceOf(LedgerTimeoutError);
    reserve.resolve({ reused: true });
    await settle();
    expect(released).toEqual([]);
  });

  it('a late refusal is dropped quietly (vitest fails a run on an unhandled rejection)', async () => {
    const { ledger, reserve, released } = slowLedger();
    const bounded = withLedgerDeadlines(ledger, { timeoutMs: 20 });
    await expect(bounded.reserve(request)).rejects.toBeInstanceOf(LedgerTimeoutError);
    reserve.reject(new Error('capacity-conflict'));
    await settle();
    expect(released).toEqual([]);
  });

  it('a failed release of a late reservation is reported, never thrown', async () => {
    const { ledger, reserve, failReleases } = slowLedger();
    const reported: unknown[] = [];
    const bounded = withLedgerDeadlines(ledger, {
      timeoutMs: 20,
      onLateReservation: (_uid, err) => reported.push(err),
    });
    await expect(bounded.reserve(request)).rejects.toBeInstanceOf(LedgerTimeoutError);
    failReleases();
    reserve.resolve({ reused: false });
    await settle();
    expect(String(reported[0])).toContain('ledger down');
  });

  it('an answer within the deadline is passed through untouched', async () => {
    const { ledger, reserve, released } = slowLedger();
    const bounded = withLedgerDeadlines(ledger, { timeoutMs: 1000 });
    const answer = bounded.reserve(request);
    reserve.resolve({ reused: false });
    await expect(answer).resolves.toEqual({ reused: false });
    expect(released).toEqual([]);
  });
});
