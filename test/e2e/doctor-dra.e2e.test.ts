/**
 * `vcuda doctor` on a 1.36 local cluster (what `vcuda local --dra` starts): resource.k8s.io/v1
 * served, vcuda's DeviceClass present, the node agent's slice published and its cards shareable;
 * a claim that fits nowhere is named with kube-scheduler's reason from its pod; deleting the
 * DeviceClass is a failure with its fix. On a 1.32 cluster the DRA checks are skipped
 * (doctor.e2e.test.ts finds no problem there).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Finding } from '../../cli/doctor/judge.js';
import { type DoctorFlags, runDoctor } from '../../cli/doctor-command.js';
import { parseClusterSpec } from '../../sim/cluster-spec.js';
import { podPath } from '../../sim/kube-client.js';
import { installDeviceClass, type LocalCluster, startLocalCluster } from '../../sim/local-cluster.js';

const GV = '/apis/resource.k8s.io/v1';
const NS = 'doctor-dra';
const DRIVER = 'gpu.vcuda.io';
const CLAIMS = `${GV}/namespaces/${NS}/resourceclaims`;

const claimFor = (name: string, cores: string) => ({
  metadata: { name },
  spec: {
    devices: {
      requests: [
        { name: 'gpu', exactly: { deviceClassName: DRIVER, capacity: { requests: { cores, memory: '1Gi' } } } },
      ],
    },
  },
});
const podFor = (name: string) => ({
  metadata: { name },
  spec: {
    resourceClaims: [{ name: 'gpu', resourceClaimName: name }],
    containers: [{ name: 'c', image: 'cuda', resources: { claims: [{ name: 'gpu' }] } }],
  },
});

describe('vcuda doctor on a DRA (1.36) local cluster', { timeout: 120_000 }, () => {
  let lc: LocalCluster;
  let flags: DoctorFlags;

  beforeAll(async () => {
    lc = await startLocalCluster({
      cluster: parseClusterSpec({
        name: 'doctordra',
        nodes: [{ namePrefix: 'gpu', count: 1, cards: 1, memoryMiB: 8192 }],
      }),
      logLevel: 'silent',
      kubernetesVersion: '1.36',
      schedulerBackoffMs: { initial: 200, max: 1000 },
    });
    await installDeviceClass(lc.client);
    await lc.client.create('/api/v1/namespaces', { metadata: { name: NS } });
    flags = {
      kubeconfig: lc.kubeconfigPath,
      namespace: 'vcuda-system',
      url: lc.url,
      heartbeatStaleSeconds: '60',
      timeoutSeconds: '5',
    };
    // The node agent publishes its slice shortly after it starts.
    for (let i = 0; i < 200 && (await lc.client.list(`${GV}/resourceslices`)).items.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);
  afterAll(async () => lc?.close(), 60_000);

  const dra = (findings: Finding[]) => findings.filter((f) => f.check.startsWith('DRA'));

  it('finds the API served, the class present and the driver registered on the node', async () => {
    const { findings } = await runDoctor(flags);
    expect(dra(findings)).toEqual([
      {
        check: 'DRA API',
        verdict: 'ok',
        summary: expect.stringMatching(/^resource\.k8s\.io\/v1\b.* served; consumable capacity on/),
      },
      { check: 'DRA device class', verdict: 'ok', summary: `DeviceClass ${DRIVER} present` },
      {
        check: 'DRA driver on nodes',
        verdict: 'ok',
        summary: `1 node(s) publish a ResourceSlice for ${DRIVER}: gpu-0`,
      },
      { check: 'DRA claims', verdict: 'ok', summary: `no claim of ${DRIVER} waits for an allocation` },
    ]);
    // The node agent in DRA mode publishes a slice, not an inventory: that is no missing agent.
    expect(findings.find((f) => f.check === 'node agents')?.verdict).not.toBe('fail');
  });

  it('names a claim that fits nowhere with the reason kube-scheduler put on its pod', async () => {
    await lc.client.create(CLAIMS, claimFor('fits', '80'));
    await lc.client.create(podPath(NS), podFor('fits'));
    await expect
      .poll(async () => ((await lc.client.get(`${CLAIMS}/fits`))['status'] as { allocation?: unknown })?.allocation, {
        timeout: 30_000,
      })
      .toBeDefined();
    await lc.client.create(CLAIMS, claimFor('nowhere', '80'));
    await lc.client.create(podPath(NS), podFor('nowhere'));
    const reason = async () =>
      ((await lc.client.get(podPath(NS, 'nowhere')))['status'] as { conditions?: { message?: string }[] })
        .conditions?.[0]?.message;
    await expect.poll(reason, { timeout: 30_000 }).toMatch(/cannot allocate all claims/);
    const { findings } = await runDoctor(flags);
    expect(dra(findings).filter((f) => f.verdict !== 'ok')).toEqual([
      {
        check: 'DRA claims',
        verdict: 'warn',
        summary: expect.stringMatching(
          /^doctor-dra\/nowhere unallocated for \d+ s; pod nowhere waits: Unschedulable: 0\/1 nodes are available: 1 cannot allocate all claims\./,
        ),
        fix: `kubectl -n ${NS} describe resourceclaim nowhere; kubectl -n ${NS} describe pod nowhere`,
      },
    ]);
  });

  it('fails without the DeviceClass while the node publishes its slice, naming the overlay', async () => {
    await lc.client.delete(`${GV}/deviceclasses/${DRIVER}`);
    const { findings, failed } = await runDoctor(flags);
    expect(failed).toBe(true);
    expect(dra(findings).find((f) => f.check === 'DRA device class')).toMatchObject({
      verdict: 'fail',
      fix: 'kubectl apply -k deploy/overlays/dra (its device-class.yaml), or helm upgrade with --set mode=dra',
    });
    await installDeviceClass(lc.client);
  });
});
