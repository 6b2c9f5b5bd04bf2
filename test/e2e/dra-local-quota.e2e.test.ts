/**
 * `vcuda local --dra` as a platform team tries the claims quota and the move to DRA, with the CLI
 * and stock kubectl: `vcuda quota set` gives namespace `ml` 50 cores, then two pods each with a
 * 30-core ResourceClaim: one claim is allocated and its pod runs, the other stays unallocated and
 * its pod's FailedScheduling Event carries the ledger's refusal in the words kube-scheduler 1.36
 * gives a failed PreBind (claim-quota-real.e2e.test.ts shows the same on the real servers);
 * deleting the first pod lets the second run. A pod written for the extender
 * (`vcuda-core: 30`, `vcuda-memory: 4096`, no claim) is turned into a claim at admission and runs
 * on a DRA node under a 4096 MiB limit: its CUDA program is stopped there. Skipped without kubectl.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { claimPodManifest, shareClaimManifest } from '../support/dra-manifests.js';
import { waitFor } from '../support/dra-real.js';
import { buildWorkloads, CORE, gpuPod, hasKubectl, kubectl, MEMORY, runVcuda, vcudaSync } from './e2e-helpers.js';

const claimManifest = (name: string) => shareClaimManifest(name, 'ml', { cores: '30', memory: '1Gi' });
const podManifest = (name: string, claim: string) => claimPodManifest(name, 'ml', claim, 'cuda');

type Pod = { spec: { nodeName?: string }; status?: { phase?: string } };
type Claim = { status?: { allocation?: { devices: { results: { consumedCapacity?: Record<string, string> }[] } } } };
type Event = { reason: string; message: string; involvedObject: { name: string } };

describe.skipIf(!hasKubectl)('vcuda local --dra: one quota on claims, and pods moved to DRA', () => {
  it('allocates within the namespace quota, refuses past it with the ledger’s words, and runs a vcuda-core pod through a claim under its limit', async () => {
    const canRunCuda = buildWorkloads();
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-local-dra-quota-'));
    const dataDir = join(dir, 'ledger');
    writeFileSync(join(dir, 'cluster.yaml'), 'nodes:\n  - { count: 1, cards: 2, memoryMiB: 16384 }\n');
    // As the operator does: the quota in the ledger that local mode then keeps (cluster `sim`).
    const set = vcudaSync([
      'quota',
      'set',
      'ml-50',
      '--cluster',
      'sim',
      '--namespace',
      'ml',
      '--core',
      '50',
      '--memory-mib',
      '65536',
      '--data-dir',
      dataDir,
    ]);
    expect(set, set.stderr).toMatchObject({ status: 0, stdout: 'quota ml-50 set\n' });

    const args = ['local', '--dra', '--port', '0', '--cluster', join(dir, 'cluster.yaml')];
    const { child, output, exited } = runVcuda(args, { dataDir });
    try {
      await expect.poll(() => /ready in/.test(output()), { timeout: 150_000, interval: 250 }).toBe(true);
      const kubeconfig = /kubeconfig\s+(\/\S+kubeconfig)/.exec(output())![1]!;
      const get = <T>(...what: string[]): T => JSON.parse(kubectl(kubeconfig, ['get', ...what, '-o', 'json'])) as T;
      const create = (obj: object) => kubectl(kubeconfig, ['create', '-f', '-'], JSON.stringify(obj));
      // The node agent publishes its slice shortly after start; nothing can be allocated before.
      await expect
        .poll(() => get<{ items: unknown[] }>('resourceslices').items.length, { timeout: 30_000, interval: 500 })
        .toBe(1);

      kubectl(kubeconfig, ['create', 'namespace', 'ml']);
      for (const name of ['a', 'b']) create(claimManifest(name));
      for (const name of ['a', 'b']) create(podManifest(`pod-${name}`, name));
      const phase = (pod: string, ns = 'ml') => get<Pod>('pod', pod, '-n', ns).status?.phase;
      const refusal = (loser: string) =>
        get<{ items: Event[] }>('events', '-n', 'ml').items.find(
          (e) => e.reason === 'FailedScheduling' && e.involvedObject.name === `pod-${loser}`,
        )?.message;
      const [winner, loser] = await waitFor('one pod running and the other refused by the ledger', async () => {
        const running = ['a', 'b'].filter((n) => phase(`pod-${n}`) === 'Running');
        if (running.length !== 1) return undefined;
        const other = running[0] === 'a' ? 'b' : 'a';
        return refusal(other)?.includes('quota ml-50') ? ([running[0]!, other] as const) : undefined;
      });
      expect(refusal(loser)).toBe(
        `running PreBind plugin "DynamicResources": add allocation and reservation to claim ml/${loser}: ` +
          `admission webhook "charge.resourceclaims.vcuda.io" denied the request: reserve ml/${loser}: ` +
          'quota ml-50 (namespace sim/ml): core limit 50, in use 30, claim asks 30 (over by 10)',
      );
      expect(get<Claim>('resourceclaim', winner, '-n', 'ml').status?.allocation).toBeDefined();
      // As on the real 1.36: unallocated, with the finalizer kube-scheduler added before the refused write.
      const refused = get<Claim & { metadata: { finalizers?: string[] } }>('resourceclaim', loser, '-n', 'ml');
      expect(refused.status?.allocation).toBeUndefined();
      expect(refused.metadata.finalizers).toEqual(['resource.kubernetes.io/delete-protection']);
      expect(phase(`pod-${loser}`)).toBe('Pending');

      // The first pod goes: its claim is freed, the ledger releases it, the second is allocated.
      kubectl(kubeconfig, ['delete', 'pod', `pod-${winner}`, '-n', 'ml']);
      await waitFor('the second pod running', async () => (phase(`pod-${loser}`) === 'Running' ? true : undefined));
      expect(get<Claim>('resourceclaim', loser, '-n', 'ml').status?.allocation?.devices.results).toMatchObject([
        { consumedCapacity: { cores: '30', memory: '1Gi' } },
      ]);

      // A pod written for vcuda's extender, unchanged: admission turns its resources into a claim.
      kubectl(kubeconfig, ['create', 'namespace', 'legacy']);
      const command = ['cuda-workload', '--alloc-mib', '6000', '--chunk-mib', '512', '--hold-seconds', '2'];
      create({
        ...gpuPod('greedy', 30, 4096, { command, restartPolicy: 'Never' }),
        metadata: { name: 'greedy', namespace: 'legacy' },
      });
      type Converted = {
        spec: { resourceClaims?: { resourceClaimTemplateName?: string }[]; containers: { resources: object }[] };
        status?: { resourceClaimStatuses?: { resourceClaimName: string }[] };
      };
      const converted = get<Converted>('pod', 'greedy', '-n', 'legacy');
      expect(converted.spec.resourceClaims?.map((c) => c.resourceClaimTemplateName)).toEqual(['vcuda-c30-m4gi']);
      expect(JSON.stringify(converted.spec.containers[0]?.resources)).not.toMatch(new RegExp(`${CORE}|${MEMORY}`));
      const claimName = await waitFor(
        "the pod's claim made",
        async () =>
          get<Converted>('pod', 'greedy', '-n', 'legacy').status?.resourceClaimStatuses?.[0]?.resourceClaimName,
      );
      await waitFor('the pod started', async () =>
        ['Running', 'Failed', 'Succeeded'].includes(phase('greedy', 'legacy') ?? '') ? true : undefined,
      );
      expect(get<Claim>('resourceclaim', claimName, '-n', 'legacy').status?.allocation?.devices.results).toMatchObject([
        { consumedCapacity: { cores: '30', memory: '4Gi' } },
      ]);
      if (canRunCuda) {
        await waitFor('the program stopped', async () => (phase('greedy', 'legacy') === 'Failed' ? true : undefined));
        const log = kubectl(kubeconfig, ['logs', 'greedy', '-n', 'legacy']);
        expect(log).toContain('total_mib=4096');
        expect(log).toContain('result=out-of-memory');
        expect(Number(/allocated_mib=(\d+)/.exec(log)?.[1])).toBeLessThanOrEqual(4096);
      }
    } finally {
      child.kill('SIGINT');
      expect(await exited).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);
});
