/**
 * The demo's ledger outlives a run: `vcuda local` keeps embedded PGlite in its data directory, so a
 * quota changed with `vcuda quota set --data-dir` while it is stopped holds at the next start (the
 * cluster description's quotas only fill in what is missing), the cards a stopped run's pods held
 * are free again, and a second run on the same directory is refused, naming the first.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { closeDb, connectDb } from '../../db/connect.js';
import { createQuotaAdmin } from '../../db/quotas.js';
import type { ClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { startLocalCluster } from '../../sim/local-cluster.js';
import { gpuPod, liveRows } from './e2e-helpers.js';

const cluster: ClusterSpec = {
  name: 'local',
  memoryUnitMiB: 1,
  nodes: [
    {
      namePrefix: 'gpu-node',
      count: 1,
      cards: 1,
      model: 'NVIDIA A100-SXM4-40GB',
      memoryMiB: 40960,
      numaNodes: 1,
      nvlink: false,
      labels: {},
      taints: [],
      cpu: '64',
      memory: '512Gi',
      mig: [],
    },
  ],
  quotas: { research: { core: 50, memoryMiB: 40960 } },
};

describe('the local ledger kept in its data directory', () => {
  it('keeps a quota set between runs, frees the last run’s cards, and refuses a second run on it', async () => {
    const dataDir = join(mkdtempSync(join(tmpdir(), 'vcuda-local-ledger-')), 'ledger');
    const first = await startLocalCluster({ cluster, dataDir, logLevel: 'silent' });
    try {
      await expect(startLocalCluster({ cluster, dataDir, logLevel: 'silent' })).rejects.toThrow(
        new RegExp(`${dataDir} is in use by another vcuda local \\(pid ${process.pid}\\)`),
      );
      await first.client.create('/api/v1/namespaces', { metadata: { name: 'research' } });
      await first.client.create('/api/v1/namespaces/research/pods', gpuPod('holder', 40, 1024));
      await expect.poll(async () => (await liveRows(first.db)).length, { timeout: 30_000 }).toBe(1);
    } finally {
      await first.close();
    }

    // What `vcuda quota set --data-dir DIR` does while local mode is stopped.
    const db = await connectDb({ dataDir });
    try {
      const quotas = createQuotaAdmin(db, { clock: () => new Date() });
      await quotas.setQuota({
        name: 'ns-research',
        scope: 'namespace',
        cluster: 'local',
        namespace: 'research',
        coreLimit: 80,
        memoryLimitMiB: 40960,
      });
    } finally {
      await closeDb(db);
    }

    const second = await startLocalCluster({ cluster, dataDir, logLevel: 'silent' });
    try {
      const kept = (await createQuotaAdmin(second.db, { clock: () => new Date() }).listQuotas()).find(
        (q) => q.name === 'ns-research',
      );
      expect(kept?.coreLimit).toBe(80);
      // The pod of the stopped run is gone: its card is free again, so 70 more fit under the quota of 80.
      await expect.poll(async () => (await liveRows(second.db)).length, { timeout: 60_000 }).toBe(0);
      await second.client.create('/api/v1/namespaces', { metadata: { name: 'research' } });
      await second.client.create('/api/v1/namespaces/research/pods', gpuPod('after', 70, 1024));
      await expect
        .poll(
          async () =>
            ((await second.client.get(podPath('research', 'after')))['spec'] as { nodeName?: string }).nodeName,
          {
            timeout: 30_000,
          },
        )
        .toBe('gpu-node-0');
    } finally {
      await second.close();
    }
  }, 240_000);
});
