import { describe, expect, it } from 'vitest';
import { AgentMetrics } from './metrics.js';
import type { UsageSample } from './usage.js';

const sample = (container: string, burst: Partial<UsageSample> = {}): UsageSample => ({
  podUid: `uid-${container}`,
  namespace: 'ns',
  pod: `pod-${container}`,
  container,
  cardUuid: 'GPU-a',
  memoryUsedBytes: 1024,
  memoryLimitBytes: 2048,
  coreRequest: 30,
  coreLimit: 30,
  smShare: null,
  ...burst,
});

describe('burst metrics', () => {
  it('exports burst, evicted bytes and evictions for bursting containers only', async () => {
    const m = new AgentMetrics();
    m.update(
      [],
      [],
      [
        sample('quiet'),
        sample('bursting', { memoryBurstBytes: 3 << 20, memoryBurstEvictedBytes: 1 << 20, memoryBurstEvictions: 2 }),
      ],
    );
    const text = await m.registry.metrics();
    const labels = 'namespace="ns",pod="pod-bursting",container="bursting",card="GPU-a"';
    expect(text).toContain(`vcuda_container_memory_burst_bytes{${labels}} ${3 << 20}`);
    expect(text).toContain(`vcuda_container_memory_burst_evicted_bytes{${labels}} ${1 << 20}`);
    expect(text).toContain(`vcuda_container_memory_burst_evictions{${labels}} 2`);
    expect(text).not.toMatch(/vcuda_container_memory_burst_bytes\{[^}]*container="quiet"/);
  });

  it('drops a container that stopped bursting at the next update', async () => {
    const m = new AgentMetrics();
    m.update([], [], [sample('c', { memoryBurstBytes: 5 })]);
    m.update([], [], [sample('c')]);
    expect(await m.registry.metrics()).not.toMatch(/vcuda_container_memory_burst_bytes\{/);
  });
});
