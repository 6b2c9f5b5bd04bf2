/**
 * The checks of a control plane killed mid-bind, shared by the simulator and the real tier: a
 * fault hook that kills at one step of the first bind reaching it, and the comparison of the
 * ledger with the grants of the verified assignments of bound pods, at every observation.
 */
import type * as jose from 'jose';
import { expect } from 'vitest';
import type { Assignment } from '../../contract/index.js';
import { AssignmentTrust } from '../../control-plane/assignment-trust.js';
import type { BindFaults, BindStep } from '../../control-plane/extender/binder.js';
import { ledgerItemsOf } from '../../control-plane/extender/ledger-items.js';
import type { VcudaDb } from '../../db/connect.js';
import { type KubeClient, type KubeObj, podPath } from '../../sim/kube-client.js';
import { liveRows } from './e2e-helpers.js';

const never = new Promise<void>(() => undefined);

/**
 * A bind step where the control plane dies: the first bind to reach it there never returns and
 * `kill` stops its control plane (no drain, its lease left to lapse, as after kill -9).
 */
export class Trap {
  private step: BindStep | undefined;
  private gate: Promise<unknown> = Promise.resolve();
  /** The pod whose bind sprang the trap; `at`: when (performance.now()). */
  pod: string | undefined;
  at = 0;
  /** Called as it springs, so a test can read what it needs at the kill's moment. */
  onSprung: () => unknown = () => undefined;
  /** The kill under way or done once sprung. */
  killed: Promise<void> = Promise.resolve();

  constructor(private readonly kill: () => Promise<void>) {}

  readonly faults: BindFaults = async (step, podUid) => {
    if (this.step !== step || this.pod) return;
    this.pod = podUid;
    await this.gate;
    this.at = performance.now();
    this.onSprung();
    this.killed = this.kill();
    await never;
  };

  /** Springs at `step`; the kill waits for `gate` (the other binds go on meanwhile). */
  arm(step: BindStep, gate: Promise<unknown> = Promise.resolve()): void {
    this.step = step;
    this.gate = gate;
    this.pod = undefined;
    this.at = 0;
  }

  disarm(): void {
    this.step = undefined;
  }
}

/** Per pod uid: card -> "core/memory" as a verified assignment grants it, or as the ledger holds it. */
type Holdings = Map<string, Map<string, string>>;

/** A verifier of assignments against the cluster's published signing keys. */
export function trustOf(jwks: jose.JSONWebKeySet): AssignmentTrust {
  return new AssignmentTrust({ jwks: () => jwks });
}

/** The grants of bound, unfinished pods whose assignment verifies. */
export async function verifiedGrants(list: KubeObj[], trust: AssignmentTrust): Promise<Holdings> {
  const out: Holdings = new Map();
  for (const p of list) {
    const token = p.metadata.annotations?.['vcuda.io/assignment'];
    const phase = (p.status as { phase?: string } | undefined)?.phase;
    if (!token || !(p.spec as { nodeName?: string }).nodeName || phase === 'Succeeded' || phase === 'Failed') continue;
    const verdict = await trust.verify(token);
    if (!verdict.ok) continue;
    const items = ledgerItemsOf(verdict.assignment as Assignment);
    out.set(p.metadata.uid ?? '', new Map(items.map((i) => [i.cardUuid, `${i.core}/${i.memoryMiB}`])));
  }
  return out;
}

/** Holdings as comparable text: pods and their cards in order. */
function textOf(h: Holdings): string {
  return JSON.stringify([...h].map(([uid, cards]) => [uid, [...cards].sort()]).sort());
}

/** What the ledger holds live, and the states of its rows. */
export async function ledgerHoldings(db: VcudaDb): Promise<{ holds: Holdings; states: string[] }> {
  const holds: Holdings = new Map();
  const states = new Set<string>();
  for (const r of await liveRows(db)) {
    const cards = holds.get(r.podUid) ?? new Map<string, string>();
    cards.set(r.cardUuid, `${r.core}/${r.memoryMiB}`);
    holds.set(r.podUid, cards);
    states.add(r.state);
  }
  return { holds, states: [...states].sort() };
}

export type CrashChecks = {
  /** Bound pods whose verified grant the ledger does not hold in full now (pods first, then the ledger). */
  underCounted(): Promise<string[]>;
  /** Every under-count seen every 100 ms until `stop`. */
  observe(): { stop: () => Promise<string[]> };
  /** Waits until the ledger holds exactly the verified grants of `count` bound pods, every row bound. */
  settlesTo(count: number, timeoutMs: number): Promise<void>;
};

export function crashChecks(client: KubeClient, db: VcudaDb, ns: string, trust: AssignmentTrust): CrashChecks {
  const pods = async () => (await client.list(podPath(ns))).items;
  const underCounted = async () => {
    const list = await pods();
    const grants = await verifiedGrants(list, trust);
    const { holds } = await ledgerHoldings(db);
    const names = new Map(list.map((p) => [p.metadata.uid ?? '', p.metadata.name]));
    return [...grants]
      .filter(([uid, cards]) => [...cards].some(([card, amount]) => holds.get(uid)?.get(card) !== amount))
      .map(([uid]) => names.get(uid) ?? uid);
  };
  return {
    underCounted,
    observe() {
      const seen: string[] = [];
      let running = true;
      const loop = (async () => {
        while (running) {
          seen.push(...(await underCounted().catch(() => [])));
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      return {
        stop: async () => {
          running = false;
          await loop;
          return seen;
        },
      };
    },
    async settlesTo(count, timeoutMs) {
      const same = async () => {
        const { holds, states } = await ledgerHoldings(db);
        const grants = await verifiedGrants(await pods(), trust);
        const equal = textOf(grants) === textOf(holds);
        return { pods: grants.size, equal, states };
      };
      await expect
        .poll(same, { timeout: timeoutMs, interval: 250 })
        .toEqual({ pods: count, equal: true, states: ['bound'] });
    },
  };
}
