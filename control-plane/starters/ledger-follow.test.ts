import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadControlPlaneConfig } from '../config.js';
import { type ReplicaLease, startReplicaLease } from './ledger-follow.js';

const config = loadControlPlaneConfig({
  flags: { replicaLeaseSeconds: 2, database: { callTimeoutMs: 100 }, logLevel: 'silent' },
});
const ctx = { config, clock: () => new Date(), log: pino({ level: 'silent' }) };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the replica lease', () => {
  let lease: ReplicaLease | undefined;
  afterEach(() => lease?.close());

  it('is held while renewals succeed, and lapses here before it can lapse in the ledger', async () => {
    let answer: 'ok' | 'silent' = 'ok';
    const renewals: number[] = [];
    const ledger = {
      renewLease: async (_replica: string, _cluster: string, ttlMs: number) => {
        renewals.push(ttlMs);
        if (answer === 'silent') await new Promise(() => undefined); // a ledger that never answers
      },
      forgetOldLeases: async () => undefined,
    };
    lease = await startReplicaLease(ctx, { ledger, replica: 'r-1' });
    expect(lease.isHeld()).toBe(true);
    expect(renewals).toEqual([2000]);
    answer = 'silent';
    // The silent ledger's renewals time out (100 ms) and are tried again; the lease is trusted
    // for less than its 2 s, so it stops being held before the ledger could call it lapsed.
    await sleep(1600);
    expect(lease.isHeld()).toBe(false);
    expect(renewals.length).toBeGreaterThanOrEqual(3);
    answer = 'ok';
    await sleep(1500);
    expect(lease.isHeld()).toBe(true);
  });
});
