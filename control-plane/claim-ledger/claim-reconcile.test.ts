/**
 * The periodic claims reconcile over a real ledger (PGlite): what the API server lists decides,
 * a cluster without resource.k8s.io/v1 is left alone, and a list holding a claim the ledger cannot
 * read releases nothing (an allocation is never dropped because it was misread).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { claimHolderId, MIB } from '../../contract/index.js';
import { createLedger, type Ledger } from '../../db/ledger.js';
import { createTestDatabase, type TestDatabase } from '../../test/support/db/test-databases.js';
import { ClaimBuilder } from '../../test/support/node-agent/dra-claim.js';
import { type ClaimLedger, createClaimLedger } from './claim-ledger.js';
import { type ClaimList, reconcileClaimsOnce } from './claim-reconcile.js';

const DRIVER = 'gpu.vcuda.io';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

const allocated = (uid: string, cores: number) =>
  new ClaimBuilder(`c-${uid}`, uid, 'ml', 'node-1', DRIVER).share('gpu-0', cores, MIB, { request: 'gpu' }).obj();

describe('the claims reconcile', () => {
  let t: TestDatabase;
  let ledger: Ledger;
  let claims: ClaimLedger;
  let now = new Date('2026-11-27T12:00:00Z');
  const run = async (list: ClaimList) => {
    let notServed = 0;
    await reconcileClaimsOnce({
      list: async () => list,
      claims,
      now: () => now,
      skewMs: 0,
      log: quiet,
      notServed: () => notServed++,
    });
    return { notServed, held: (await ledger.liveClaimHolders('c1')).map((h) => h.holder).sort() };
  };

  beforeEach(async () => {
    t = await createTestDatabase('pglite');
    ledger = createLedger(t.db, { clock: () => now, groupCommit: false });
    claims = createClaimLedger({ ledger, cluster: 'c1', driver: DRIVER });
    await ledger.upsertNode('c1', 'node-1', [{ uuid: 'GPU-a', index: 0, model: 'H100', memoryMiB: 81_920 }]);
    await claims.reconcile([allocated('old', 30)], now);
    now = new Date(now.getTime() + 60_000);
  });
  afterEach(async () => {
    await t?.drop();
  });

  it('charges what is allocated and releases what is not', async () => {
    expect(await run({ served: true, items: [allocated('new', 20)] })).toEqual({
      notServed: 0,
      held: [claimHolderId('new')],
    });
  });

  it('leaves the ledger alone where resource.k8s.io/v1 is not served', async () => {
    expect(await run({ served: false })).toEqual({ notServed: 1, held: [claimHolderId('old')] });
  });

  it('releases nothing when a listed claim cannot be read', async () => {
    const garbled = { metadata: { name: 'x' }, status: 'allocated' };
    expect(await run({ served: true, items: [garbled] })).toEqual({ notServed: 0, held: [claimHolderId('old')] });
  });
});
