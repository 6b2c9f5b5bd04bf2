/**
 * A whole machine described in a few lines, for the node agent's tests: the simulator's in-memory
 * GpuSource (sim/node/sim-gpu-source.ts) with made-up cards and a topology from NUMA size and
 * NVLink count. Events are pushed with `emit`; `waitEvent` resolves with the next one.
 */
import type { GpuCard, GpuLink } from '../../../node-agent/nvml/gpu-source.js';
import { SimGpuSource } from '../../../sim/node/sim-gpu-source.js';

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

function fakeLink(m: FakeMachine): (a: number, b: number) => GpuLink {
  const numa = (i: number) => (m.cardsPerNuma ? Math.floor(i / m.cardsPerNuma) : 0);
  return (a, b) =>
    a === b
      ? { nvlinks: 0, pcie: 'internal' }
      : { nvlinks: m.nvlinks ?? 0, pcie: numa(a) === numa(b) ? 'node' : 'system' };
}

/** Cards list no compute processes until a test sets them (`processes`; null: cannot list). */
export class FakeGpuSource extends SimGpuSource {
  constructor(machine: FakeMachine) {
    super({ cards: fakeCards(machine), link: fakeLink(machine), unsetProcesses: [] });
  }
}
