/**
 * An in-memory GpuSource: a whole machine described in a few lines, for tests and the simulator.
 * Events are pushed with `emit`; `waitEvent` resolves with the next one.
 */

import { GpuEventQueue } from './event-queue.js';
import type {
  GpuCard,
  GpuEvent,
  GpuLink,
  GpuSource,
  MemoryUsage,
  ProcessUtilizationSample,
  RunningProcess,
  UtilizationRates,
} from './gpu-source.js';

export const MiB = 1024 * 1024;

export type FakeMachine = {
  cards: number;
  memoryMiB: number;
  model?: string;
  /** Cards per NUMA node (default: all on node 0). */
  cardsPerNuma?: number;
  /** NVLinks between every pair (default 0). */
  nvlinks?: number;
};

export function fakeCards(m: FakeMachine): GpuCard[] {
  return Array.from({ length: m.cards }, (_, i) => ({
    index: i,
    uuid: `GPU-${(0x1000 + i).toString(16)}0000-0000-0000-0000-${i.toString(16).padStart(12, '0')}`,
    model: m.model ?? 'NVIDIA Fake GPU',
    memoryTotalBytes: m.memoryMiB * MiB,
    pciBusId: `00000000:${(0x10 + i).toString(16).toUpperCase().padStart(2, '0')}:00.0`,
    minorNumber: i,
    numaNode: m.cardsPerNuma ? Math.floor(i / m.cardsPerNuma) : 0,
  }));
}

export class FakeGpuSource implements GpuSource {
  readonly cards: GpuCard[];
  private readonly events = new GpuEventQueue();
  private readonly nvlinks: number;
  private readonly cardsPerNuma: number | undefined;
  readonly usedBytes = new Map<number, number>();
  readonly samples = new Map<number, ProcessUtilizationSample[]>();
  readonly rates = new Map<number, UtilizationRates>();
  /** Compute processes per card; a card without an entry lists none, one set to null cannot list them. */
  readonly processes = new Map<number, RunningProcess[] | null>();

  constructor(machine: FakeMachine) {
    this.cards = fakeCards(machine);
    this.nvlinks = machine.nvlinks ?? 0;
    this.cardsPerNuma = machine.cardsPerNuma;
  }

  listCards(): GpuCard[] {
    return this.cards.map((c) => ({ ...c }));
  }

  link(a: number, b: number): GpuLink {
    if (a === b) return { nvlinks: 0, pcie: 'internal' };
    const sameNuma = !this.cardsPerNuma || Math.floor(a / this.cardsPerNuma) === Math.floor(b / this.cardsPerNuma);
    return { nvlinks: this.nvlinks, pcie: sameNuma ? 'node' : 'system' };
  }

  memoryUsage(cardIndex: number): MemoryUsage {
    const card = this.cards[cardIndex];
    if (!card) throw new RangeError(`no card ${cardIndex}`);
    const used = this.usedBytes.get(cardIndex) ?? 0;
    return { totalBytes: card.memoryTotalBytes, usedBytes: used, freeBytes: card.memoryTotalBytes - used };
  }

  emit(event: GpuEvent): void {
    this.events.emit(event);
  }

  waitEvent(timeoutMs: number, signal?: AbortSignal): Promise<GpuEvent | undefined> {
    return this.events.wait(timeoutMs, signal);
  }

  processUtilization(cardIndex: number, sinceUs: number): ProcessUtilizationSample[] {
    return (this.samples.get(cardIndex) ?? []).filter((s) => s.timestampUs > sinceUs);
  }

  utilizationRates(cardIndex: number): UtilizationRates {
    return this.rates.get(cardIndex) ?? { gpuPercent: 0, memoryPercent: 0 };
  }

  runningProcesses(cardIndex: number): RunningProcess[] | null {
    const list = this.processes.get(cardIndex);
    return list === null ? null : (list ?? []).map((p) => ({ ...p }));
  }

  close(): void {
    this.events.close();
  }
}
