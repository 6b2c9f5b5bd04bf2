/**
 * Card health: a producer (driver events from the GpuSource) feeding a consumer (the device
 * plugins' ListAndWatch). A card turns unhealthy on a critical Xid or when it is lost, and stays
 * so until the agent restarts: when in doubt, fail closed.
 */
import type { AgentLog } from './agent-log.js';
import type { CardDirectory, CardRef } from './allocation/ports.js';
import type { CardHealthView } from './device-plugin/device-list.js';
import type { GpuCard, GpuEvent, GpuSource } from './nvml/gpu-source.js';

/** Xid 999 means "unknown"; treat it as critical like any Xid not known to be the application's. */
export function isCriticalXid(xid: number, ignoredXids: readonly number[]): boolean {
  return !ignoredXids.includes(xid);
}

export function healthReasonOf(event: GpuEvent): string {
  return event.kind === 'lost' ? 'GPU is lost' : `Xid ${event.xid}`;
}

/** `migDynamic`: kept for dynamic MIG (config `mig.dynamicCards`): served only as instances made on demand. */
type CardState = GpuCard & { healthy: boolean; healthReason?: string; migDynamic?: boolean };

export class CardHealth implements CardDirectory {
  private readonly cards: CardState[];
  private readonly listeners = new Set<() => void>();

  constructor(
    cards: readonly GpuCard[],
    private readonly ignoredXids: readonly number[],
    /** Indices of the cards kept for dynamic MIG. */
    dynamicMigCards: ReadonlySet<number> = new Set(),
  ) {
    this.cards = cards.map((c) => ({
      ...c,
      healthy: true,
      ...(dynamicMigCards.has(c.index) ? { migDynamic: true } : {}),
    }));
  }

  list(): readonly CardState[] {
    return this.cards;
  }

  views(): CardHealthView[] {
    return this.cards.map((c) => ({
      index: c.index,
      memoryMiB: Math.floor(c.memoryTotalBytes / (1024 * 1024)),
      numaNode: c.numaNode,
      healthy: c.healthy,
      ...(c.migMode || c.migDynamic ? { migMode: true } : {}),
    }));
  }

  /**
   * A card in MIG mode, or kept for dynamic MIG, is refused like an unhealthy one: nothing may be
   * allocated on it whole.
   */
  cardByUuid(uuid: string): CardRef | undefined {
    const card = this.cards.find((c) => c.uuid === uuid);
    if (!card?.healthy || !(card.migMode || card.migDynamic)) return card;
    const healthReason = card.migDynamic
      ? 'kept for dynamic MIG: served only as MIG instances'
      : 'in MIG mode: served only as MIG instances';
    return { ...card, healthy: false, healthReason };
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Applies one driver event; true when a card's health changed (and listeners were told). */
  apply(event: GpuEvent): boolean {
    if (event.kind === 'xid' && !isCriticalXid(event.xid, this.ignoredXids)) return false;
    // An event we cannot attribute to a card (index -1) marks every card: fail closed.
    const targets = event.cardIndex >= 0 ? this.cards.filter((c) => c.index === event.cardIndex) : this.cards;
    let changed = false;
    for (const card of targets) {
      if (!card.healthy) continue;
      card.healthy = false;
      card.healthReason = healthReasonOf(event);
      changed = true;
    }
    if (changed) for (const l of this.listeners) l();
    return changed;
  }
}

/** Consumes driver events until `signal` aborts; `onWait` hears whether each wait on NVML worked. */
export async function watchCardHealth(
  gpu: GpuSource,
  health: CardHealth,
  signal: AbortSignal,
  log: Pick<AgentLog, 'warn'>,
  waitMs = 5000,
  onWait: (err: Error | undefined) => void = () => {},
): Promise<void> {
  while (!signal.aborted) {
    try {
      const event = await gpu.waitEvent(waitMs, signal);
      onWait(undefined);
      if (event && health.apply(event)) log.warn(`card ${event.cardIndex} unhealthy: ${healthReasonOf(event)}`);
    } catch (err) {
      if (signal.aborted) return;
      onWait(err as Error);
      log.warn({ err }, 'waiting for GPU events failed');
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }
}

/** One condition the agent needs to do its job; its `problem` is what /healthz says when it fails. */
export type AgentCheck = { name: string; problem: () => string | undefined };

/** The failing checks' problems, one line each; empty when the agent is healthy. */
export function agentProblems(checks: readonly AgentCheck[]): string[] {
  return checks.flatMap((c) => {
    const p = c.problem();
    return p === undefined ? [] : [`${c.name}: ${p}`];
  });
}
