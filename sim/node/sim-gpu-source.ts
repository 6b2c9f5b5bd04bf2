/**
 * An in-memory GpuSource: the cards of a simulated node (or of a test's machine), their topology,
 * and whatever memory use, utilization and processes a caller sets. Driver events come only when
 * someone injects one. The simulator builds it from the cluster description (`ofNode`: UUIDs unique
 * across the cluster, as the ledger tells cards apart by UUID) and, where the node has its fake
 * NVML, reads memory and utilization from it (what the node's containers really allocated and
 * ran); the node agent's tests build it from a few lines (test/support/node-agent/fake-gpu-source.ts).
 */

import { GpuEventQueue } from '../../node-agent/nvml/event-queue.js';
import type {
  CardMig,
  GpuCard,
  GpuEvent,
  GpuLink,
  GpuSource,
  MemoryUsage,
  MigControl,
  ProcessUtilizationSample,
  RunningProcess,
  UtilizationRates,
} from '../../node-agent/nvml/gpu-source.js';
import type { SimNode } from '../cluster-spec.js';

/** The NVML reads a simulated node takes from its fake driver (its MIG layouts where it has them). */
export type NodeDriverReadings = Pick<GpuSource, 'memoryUsage' | 'processUtilization' | 'utilizationRates' | 'close'> &
  Partial<Pick<GpuSource, 'migLayout' | 'migControl'>>;

const MIB = 1024 * 1024;

export type SimGpuLayout = {
  cards: GpuCard[];
  link: (a: number, b: number) => GpuLink;
  /** What `runningProcesses` answers for a card nobody set: none, or null (cannot list them). */
  unsetProcesses: RunningProcess[] | null;
};

export class SimGpuSource implements GpuSource {
  readonly cards: GpuCard[];
  private readonly events = new GpuEventQueue();
  readonly usedBytes = new Map<number, number>();
  readonly samples = new Map<number, ProcessUtilizationSample[]>();
  readonly rates = new Map<number, UtilizationRates>();
  /** Compute processes per card; one set to null cannot list them. */
  readonly processes = new Map<number, RunningProcess[] | null>();

  constructor(
    private readonly layout: SimGpuLayout,
    private readonly driver?: NodeDriverReadings,
  ) {
    this.cards = layout.cards;
  }

  /**
   * A simulated node's cards, read through its fake NVML when given. Its process list is not
   * listed, so there is nothing to reconcile memory charges against.
   */
  static ofNode(node: SimNode, driver?: NodeDriverReadings): SimGpuSource {
    const cards = node.cards.map((c) => {
      // MIG mode as the node's fake driver has it when the agent starts (absent: no MIG).
      const mig = driver?.migLayout?.(c.index);
      return {
        index: c.index,
        uuid: c.uuid,
        model: c.model,
        memoryTotalBytes: c.memoryMiB * MIB,
        pciBusId: c.pciBusId,
        minorNumber: c.index,
        numaNode: c.numaNode,
        ...(mig ? { migMode: mig.mode === 'enabled' } : {}),
      };
    });
    const link = (a: number, b: number): GpuLink => {
      const l = node.links[a]?.[b];
      if (!l) throw new RangeError(`no link ${a}-${b} on ${node.name}`);
      return { nvlinks: l.nvlinks, pcie: l.pcie };
    };
    return new SimGpuSource({ cards, link, unsetProcesses: null }, driver);
  }

  listCards(): GpuCard[] {
    return this.cards.map((c) => ({ ...c }));
  }

  link(a: number, b: number): GpuLink {
    return this.layout.link(a, b);
  }

  memoryUsage(cardIndex: number): MemoryUsage {
    const card = this.cards[cardIndex];
    if (!card) throw new RangeError(`no card ${cardIndex}`);
    if (this.driver) return this.driver.memoryUsage(cardIndex);
    const used = this.usedBytes.get(cardIndex) ?? 0;
    return { totalBytes: card.memoryTotalBytes, usedBytes: used, freeBytes: card.memoryTotalBytes - used };
  }

  /** Injects a driver event (an Xid, a lost card) as NVML would report it. */
  emit(event: GpuEvent): void {
    this.events.emit(event);
  }

  waitEvent(timeoutMs: number, signal?: AbortSignal): Promise<GpuEvent | undefined> {
    return this.events.wait(timeoutMs, signal);
  }

  processUtilization(cardIndex: number, sinceUs: number): ProcessUtilizationSample[] {
    if (this.driver) return this.driver.processUtilization(cardIndex, sinceUs);
    return (this.samples.get(cardIndex) ?? []).filter((s) => s.timestampUs > sinceUs);
  }

  utilizationRates(cardIndex: number): UtilizationRates {
    if (this.driver) return this.driver.utilizationRates(cardIndex);
    return this.rates.get(cardIndex) ?? { gpuPercent: 0, memoryPercent: 0 };
  }

  migLayout(cardIndex: number): CardMig | null {
    return this.driver?.migLayout?.(cardIndex) ?? null;
  }

  /** The fake driver's MIG create and destroy (dynamic MIG); none without the fake NVML. */
  migControl(): MigControl | undefined {
    return this.driver?.migControl?.();
  }

  runningProcesses(cardIndex: number): RunningProcess[] | null {
    const list = this.processes.has(cardIndex) ? this.processes.get(cardIndex) : this.layout.unsetProcesses;
    return list === null || list === undefined ? null : list.map((p) => ({ ...p }));
  }

  close(): void {
    this.events.close();
    this.driver?.close();
  }
}
