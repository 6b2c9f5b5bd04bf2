/**
 * Is the ledger reachable right now? A `select 1` with a short deadline, for readiness. Probes
 * are shared and their result kept for `cacheMs`, so however often the kubelet (or anyone) asks,
 * the database sees at most one probe per `cacheMs`.
 */
import { sql } from 'drizzle-orm';
import { messageOf } from '../contract/index.js';
import type { VcudaDb } from './connect.js';
import { withDeadline } from './deadline.js';

export type ProbeResult = { ok: true } | { ok: false; reason: string };

export type LedgerProbeOptions = {
  timeoutMs: number;
  cacheMs: number;
  /** Monotonic milliseconds. */
  nowMs?: () => number;
};

export type LedgerProbe = { check(): Promise<ProbeResult> };

export function createLedgerProbe(db: VcudaDb, options: LedgerProbeOptions): LedgerProbe {
  const nowMs = options.nowMs ?? (() => performance.now());
  let inFlight: Promise<ProbeResult> | undefined;
  let last: { atMs: number; result: ProbeResult } | undefined;

  const probe = async (): Promise<ProbeResult> => {
    try {
      await withDeadline(Promise.resolve(db.execute(sql`select 1`)), options.timeoutMs, 'readiness probe');
      return { ok: true };
    } catch (err) {
      return { ok: false, reason: `ledger unreachable: ${messageOf(err)}` };
    }
  };

  return {
    check() {
      if (last && nowMs() - last.atMs < options.cacheMs) return Promise.resolve(last.result);
      // Callers arriving while a probe is under way share it instead of starting another.
      inFlight ??= probe().then((result) => {
        last = { atMs: nowMs(), result };
        inFlight = undefined;
        return result;
      });
      return inFlight;
    },
  };
}
