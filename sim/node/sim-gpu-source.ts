/**
 * The node agent's GpuSource for a simulated node: the cards of the cluster description, with
 * their UUIDs unique across the cluster (the ledger tells cards apart by UUID) and the topology
 * the description implies. No driver events unless a test injects one. Memory and utilization
 * come from the node's fake NVML when it is there (what the node's containers really allocated
 * and ran), else they read as an unused card.
 */

import { GpuEventQueue } from '../../node-agent/nvml/event-queue.js';
import type {
  GpuCard,
  GpuEvent,
  GpuLink,
  GpuSource,
  MemoryUsage,
  ProcessUtilizationSample,
  RunningProcess,
  UtilizationRates,
} from '../../node-agent/nvml/gpu-source.js';
import type { SimNode } from '../cluster-spec.js';

/** The NVML reads a simulated node takes from its fake driver. */
export type NodeDriverReadings = Pick<GpuSource, 'memoryUsage' | 'processUtilization' | 'utilizationRates' | 'close'>;

const MIB = 1024 * 1024;

export class SimGpuSource implements GpuSource {
  private readonly events = new GpuEventQueue();

  constructor(
    private readonly node: SimNode,
    private readonly driver?: NodeDriverReadings,
  ) {}

  listCards(): GpuCard[] {
    return this.node.cards.map((c) => ({
      index: c.index,
      uuid: c.uuid,
      model: c.model,
      memoryTotalBytes: c.memoryMiB * MIB,
      pciBusId: c.pciBusId,
      minorNumber: c.index,
      numaNode: c.numaNode,
    }));
  }

  link(a: number, b: number): GpuLink {
    const l = this.node.links[a]?.[b];
    if (!l) throw new RangeError(`no link ${a}-${b} on ${this.node.name}`);
    return { nvlinks: l.nvlinks, pcie: l.pcie };
  }

  memoryUsage(cardIndex: number): MemoryUsage {
    const card = this.node.cards[cardIndex];
    if (!card) throw new RangeError(`no card ${cardIndex}`);
    if (this.driver) return this.driver.memoryUsage(cardIndex);
    return { totalBytes: card.memoryMiB * MIB, usedBytes: 0, freeBytes: card.memoryMiB * MIB };
  }

  /** Injects a driver event (an Xid, a lost card) as NVML would report it. */
  emit(event: GpuEvent): void {
    this.events.emit(event);
  }

  waitEvent(timeoutMs: number, signal?: AbortSignal): Promise<GpuEvent | undefined> {
    return this.events.wait(timeoutMs, signal);
  }

  processUtilization(cardIndex: number, sinceUs: number): ProcessUtilizationSample[] {
    return this.driver?.processUtilization(cardIndex, sinceUs) ?? [];
  }

  utilizationRates(cardIndex: number): UtilizationRates {
    return this.driver?.utilizationRates(cardIndex) ?? { gpuPercent: 0, memoryPercent: 0 };
  }

  /** Simulated cards run no processes: nothing to reconcile memory charges against. */
  runningProcesses(_cardIndex: number): RunningProcess[] | null {
    return null;
  }

  close(): void {
    this.events.close();
    this.driver?.close();
  }
}
