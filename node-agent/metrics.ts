/**
 * Prometheus metrics (`vcuda_*`): per container memory used and limit and SM share, per card
 * totals, Allocate latency. Container and card gauges are rebuilt from the records at scrape time;
 * the memory-drift gauge is set by each card's drift monitor (card-sampling/memory-drift.ts).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { ContainerRecord } from './allocation/ports.js';
import type { DriftSink, DriftTarget } from './card-sampling/memory-drift.js';
import type { UsageSample } from './usage.js';

function driftLabels(t: DriftTarget) {
  return { namespace: t.namespace, pod: t.pod, container: t.container, card: t.cardUuid };
}

export type CardMetricView = { uuid: string; index: number; memoryTotalBytes: number; healthy: boolean };

export class AgentMetrics implements DriftSink {
  readonly registry = new Registry();
  readonly allocateSeconds = new Histogram({
    name: 'vcuda_allocate_duration_seconds',
    help: 'Device plugin Allocate latency, by result',
    labelNames: ['result'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly allocations = new Counter({
    name: 'vcuda_allocations_total',
    help: 'Allocate calls, by result (ok or the refusal code)',
    labelNames: ['result'],
    registers: [this.registry],
  });
  private readonly containerLabels = ['namespace', 'pod', 'container', 'card'] as const;
  readonly memoryUsed = new Gauge({
    name: 'vcuda_container_memory_used_bytes',
    help: 'Device memory used by the container on this card (from its accounting region)',
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly memoryLimit = new Gauge({
    name: 'vcuda_container_memory_limit_bytes',
    help: 'Device memory limit of the container on this card (from its signed assignment)',
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly memoryBurst = new Gauge({
    name: 'vcuda_container_memory_burst_bytes',
    help: 'Managed memory the container holds above its guarantee on this card (vcuda-memory-limit), from its accounting region',
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly memoryBurstEvicted = new Gauge({
    name: 'vcuda_container_memory_burst_evicted_bytes',
    help: "Of the container's burst bytes, those evicted to host memory (0 where the driver reports no residency)",
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly memoryBurstEvictions = new Gauge({
    name: 'vcuda_container_memory_burst_evictions',
    help: "Times the driver evicted the container's burst bytes since the container started (where the driver reports it)",
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly smShare = new Gauge({
    name: 'vcuda_container_sm_share_ratio',
    help: "Container's measured share of the card's SM time, 0..1",
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly coreLimit = new Gauge({
    name: 'vcuda_container_core_limit_ratio',
    help: 'Compute ceiling of the container on this card, 0..1',
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly memoryDrift = new Gauge({
    name: 'vcuda_container_memory_drift_bytes',
    help: "NVML's used memory of the container's processes on this card minus what its region charges (positive: memory the limit does not count)",
    labelNames: this.containerLabels,
    registers: [this.registry],
  });
  readonly memoryDriftEvents = new Counter({
    name: 'vcuda_container_memory_drift_events_total',
    help: 'Containers whose memory drift stayed beyond memoryDriftThresholdMiB, by card and direction (over: uncharged memory, under: charged memory no process holds)',
    labelNames: ['card', 'direction'],
    registers: [this.registry],
  });
  readonly cardMemoryTotal = new Gauge({
    name: 'vcuda_card_memory_total_bytes',
    help: 'Device memory of the card',
    labelNames: ['card', 'index'],
    registers: [this.registry],
  });
  readonly cardMemoryAllocated = new Gauge({
    name: 'vcuda_card_memory_allocated_bytes',
    help: 'Sum of container memory limits on the card',
    labelNames: ['card', 'index'],
    registers: [this.registry],
  });
  readonly cardCoreAllocated = new Gauge({
    name: 'vcuda_card_core_allocated',
    help: 'Sum of container core requests on the card, hundredths',
    labelNames: ['card', 'index'],
    registers: [this.registry],
  });
  readonly cardUnaccountedBusy = new Gauge({
    name: 'vcuda_card_unaccounted_busy_ratio',
    help: "Share of the card NVML saw busy that the in-process sensor's counters did not account for, over the last check window (in-process sensor, cards NVML reads)",
    labelNames: ['card', 'index'],
    registers: [this.registry],
  });
  readonly cardCountersDistrusted = new Gauge({
    name: 'vcuda_card_counters_distrusted',
    help: "1 once the in-process sensor's counters under-reported the card against NVML and the card is measured by NVML",
    labelNames: ['card', 'index'],
    registers: [this.registry],
  });
  readonly cardHealthy = new Gauge({
    name: 'vcuda_card_healthy',
    help: '1 when the card is healthy',
    labelNames: ['card', 'index'],
    registers: [this.registry],
  });

  readonly agentHealthy = new Gauge({
    name: 'vcuda_agent_healthy',
    help: '1 when the check passes: agent (not stopping), device-plugins (registered with the kubelet; dra-plugin in DRA mode), nvml (events readable)',
    labelNames: ['check'],
    registers: [this.registry],
  });

  updateChecks(checks: readonly { name: string; ok: boolean }[]): void {
    for (const c of checks) this.agentHealthy.set({ check: c.name }, c.ok ? 1 : 0);
  }

  observeAllocate(seconds: number, result: string): void {
    this.allocateSeconds.observe({ result: result === 'ok' ? 'ok' : 'refused' }, seconds);
    this.allocations.inc({ result });
  }

  setDrift(t: DriftTarget, driftBytes: number): void {
    this.memoryDrift.set(driftLabels(t), driftBytes);
  }

  clearDrift(t: DriftTarget): void {
    this.memoryDrift.remove(driftLabels(t));
  }

  driftEntered(t: DriftTarget, driftBytes: number): void {
    this.memoryDriftEvents.inc({ card: t.cardUuid, direction: driftBytes > 0 ? 'over' : 'under' });
  }

  /** Replaces the container and card gauges with the current state. */
  update(cards: readonly CardMetricView[], records: readonly ContainerRecord[], usage: readonly UsageSample[]): void {
    const perContainer = [this.memoryUsed, this.memoryLimit, this.smShare, this.coreLimit];
    for (const g of [...perContainer, this.memoryBurst, this.memoryBurstEvicted, this.memoryBurstEvictions]) g.reset();
    for (const s of usage) {
      const labels = { namespace: s.namespace, pod: s.pod, container: s.container, card: s.cardUuid };
      this.memoryUsed.set(labels, s.memoryUsedBytes);
      this.memoryLimit.set(labels, s.memoryLimitBytes);
      // Only bursting containers get the series: most never burst, and a 0 per container is noise.
      if (s.memoryBurstBytes || s.memoryBurstEvictions) {
        this.memoryBurst.set(labels, s.memoryBurstBytes ?? 0);
        this.memoryBurstEvicted.set(labels, s.memoryBurstEvictedBytes ?? 0);
        this.memoryBurstEvictions.set(labels, s.memoryBurstEvictions ?? 0);
      }
      this.coreLimit.set(labels, s.coreLimit / 100);
      if (s.smShare !== null) this.smShare.set(labels, s.smShare);
    }
    for (const c of cards) {
      const labels = { card: c.uuid, index: String(c.index) };
      const devices = records.flatMap((r) => r.devices.filter((d) => d.uuid === c.uuid));
      this.cardMemoryTotal.set(labels, c.memoryTotalBytes);
      this.cardMemoryAllocated.set(
        labels,
        devices.reduce((s, d) => s + d.memoryLimitBytes, 0),
      );
      this.cardCoreAllocated.set(
        labels,
        devices.reduce((s, d) => s + d.coreRequest, 0),
      );
      this.cardHealthy.set(labels, c.healthy ? 1 : 0);
    }
  }
}
