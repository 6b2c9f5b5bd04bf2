import http from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type SimApiServer, startApiServer } from '../apiserver/api-server.js';
import { type SimControllerManager, startControllerManager } from '../controllers/controller-manager.js';
import { KubeClient, type KubeObj, podPath, type WatchEvent } from '../kube-client.js';
import { CLAIM_FINALIZER } from './dra-objects.js';
import { parseSchedulerConfig } from './scheduler-config.js';
import { type SimScheduler, startScheduler } from './scheduler-loop.js';

const GV = '/apis/resource.k8s.io/v1';
const DRIVER = 'gpu.vcuda.io';
const CLAIMS = `${GV}/namespaces/default/resourceclaims`;

async function setUp(client: KubeClient, selector = `device.driver == "${DRIVER}"`): Promise<void> {
  await client.create('/api/v1/nodes', { metadata: { name: 'node-a' } });
  const ready = [{ type: 'Ready', status: 'True' }];
  await client.mergePatch('/api/v1/nodes/node-a/status', {
    status: { allocatable: { pods: '10' }, conditions: ready },
  });
  await client.create(`${GV}/deviceclasses`, {
    metadata: { name: DRIVER },
    spec: { selectors: [{ cel: { expression: selector } }] },
  });
  const policy = { default: '100', validRange: { min: '1', max: '100', step: '1' } };
  const device = {
    name: 'gpu-0',
    allowMultipleAllocations: true,
    capacity: { cores: { value: '100', requestPolicy: policy } },
  };
  await client.create(`${GV}/resourceslices`, {
    metadata: { name: 'node-a-gpu' },
    spec: {
      driver: DRIVER,
      nodeName: 'node-a',
      pool: { name: 'node-a', generation: 1, resourceSliceCount: 1 },
      devices: [device],
    },
  });
}

async function claimAndPod(client: KubeClient, name: string, cores: string): Promise<void> {
  const exactly = { deviceClassName: DRIVER, capacity: { requests: { cores } } };
  await client.create(CLAIMS, { metadata: { name }, spec: { devices: { requests: [{ name: 'gpu', exactly }] } } });
  await client.create(podPath('default'), {
    metadata: { name },
    spec: { resourceClaims: [{ name: 'gpu', resourceClaimName: name }], containers: [{ name: 'c', image: 'cuda' }] },
  });
}

/** Every event of a watch, in order, until the returned stop is called. */
function record(client: KubeClient, path: string): { events: WatchEvent[]; stop: () => void } {
  const events: WatchEvent[] = [];
  const abort = new AbortController();
  void client.listWatch(path, '', { onSync: () => {}, onEvent: (e) => events.push(e) }, abort.signal);
  return { events, stop: () => abort.abort() };
}

const rv = (o: KubeObj) => Number(o.metadata.resourceVersion);

type StatusReview = { name: string; allocated: boolean };
type Verdict = { allowed: true } | { allowed: false; message: string };

/**
 * A validating webhook on `resourceclaims/status` (plain HTTP, which the simulated API server
 * allows), registered as `status.test.vcuda.io`: `decide` answers each review, and may take its time.
 */
async function statusHook(client: KubeClient, decide: (review: StatusReview) => Promise<Verdict>) {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      const { request } = JSON.parse(body);
      const object = request.object as KubeObj;
      const allocated = !!(object['status'] as { allocation?: unknown } | undefined)?.allocation;
      const verdict = await decide({ name: object.metadata.name, allocated });
      const response = verdict.allowed
        ? { uid: request.uid, allowed: true }
        : { uid: request.uid, allowed: false, status: { code: 403, message: verdict.message } };
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await client.create('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
    metadata: { name: 'status-test' },
    webhooks: [
      {
        name: 'status.test.vcuda.io',
        clientConfig: { url: `http://127.0.0.1:${port}/` },
        rules: [
          {
            operations: ['UPDATE'],
            apiGroups: ['resource.k8s.io'],
            apiVersions: ['v1'],
            resources: ['resourceclaims/status'],
          },
        ],
        failurePolicy: 'Fail',
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
      },
    ],
  });
  return {
    close: () => {
      // The API server keeps its connection to the hook alive; close would wait for it.
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const podScheduled = async (client: KubeClient, name: string) =>
  ((await client.get(podPath('default', name)))['status'] as { conditions?: Record<string, unknown>[] })
    .conditions?.[0];

describe('DynamicResources in the simulated scheduler', () => {
  let api: SimApiServer;
  let client: KubeClient;
  let scheduler: SimScheduler;
  beforeEach(async () => {
    api = await startApiServer({ kubernetesVersion: '1.36' });
    client = new KubeClient(api.url);
    const config = parseSchedulerConfig({
      apiVersion: 'kubescheduler.config.k8s.io/v1',
      kind: 'KubeSchedulerConfiguration',
    });
    scheduler = startScheduler({ client, config, dynamicResources: true, initialBackoffMs: 50, maxBackoffMs: 100 });
  });
  afterEach(async () => {
    await scheduler.close();
    await api.close();
  });

  it('writes the finalizer, then allocation and reservedFor in one status update, then binds', async () => {
    await setUp(client);
    const claims = record(client, `${GV}/resourceclaims`);
    const pods = record(client, '/api/v1/pods');
    await claimAndPod(client, 'p', '30');
    await expect
      .poll(async () => (await client.get(podPath('default', 'p')))['spec'], { timeout: 10_000 })
      .toMatchObject({ nodeName: 'node-a' });
    claims.stop();
    pods.stop();
    const writes = claims.events.filter((e) => e.type === 'MODIFIED').map((e) => e.object);
    expect(
      writes.map((c) => [
        c.metadata['finalizers'],
        !!(c['status'] as { allocation?: unknown } | undefined)?.allocation,
      ]),
    ).toEqual([
      [[CLAIM_FINALIZER], false],
      [[CLAIM_FINALIZER], true],
    ]);
    const status = writes[1]!['status'] as {
      reservedFor: { name: string }[];
      allocation: { devices: { results: unknown[] } };
    };
    expect(status.reservedFor.map((r) => r.name)).toEqual(['p']);
    expect(status.allocation.devices.results).toMatchObject([{ device: 'gpu-0', consumedCapacity: { cores: '30' } }]);
    const bound = pods.events.find((e) => (e.object['spec'] as { nodeName?: string }).nodeName);
    expect(rv(bound!.object)).toBeGreaterThan(rv(writes[1]!));
  });

  it('counts a share being written: two pods at once never take more than the card', async () => {
    await setUp(client);
    await Promise.all([claimAndPod(client, 'a', '60'), claimAndPod(client, 'b', '60')]);
    await expect
      .poll(
        async () => {
          const items = (await client.list('/api/v1/pods')).items;
          return items
            .map(
              (p) =>
                (p['spec'] as { nodeName?: string }).nodeName ??
                (p['status'] as { conditions?: { reason?: string }[] }).conditions?.[0]?.reason,
            )
            .sort();
        },
        { timeout: 10_000 },
      )
      .toEqual(['Unschedulable', 'node-a']);
  });

  it('fails PreBind in kube-scheduler 1.36 words when the status write is refused; the claim keeps its finalizer', async () => {
    await setUp(client);
    // The resourceclaim controller runs too: it must not take the finalizer of a claim nobody stopped using.
    const controllers: SimControllerManager = startControllerManager({ client, dynamicResources: true });
    // A slow refusal, as the ledger's: the controller has time to act between the two writes.
    const hook = await statusHook(client, async ({ name, allocated }) => {
      await new Promise((r) => setTimeout(r, 200));
      return name === 'refused' && allocated ? { allowed: false, message: 'no room' } : { allowed: true };
    });
    try {
      await claimAndPod(client, 'refused', '30');
      const words =
        'running PreBind plugin "DynamicResources": add allocation and reservation to claim default/refused: ' +
        'admission webhook "status.test.vcuda.io" denied the request: no room';
      await expect
        .poll(() => podScheduled(client, 'refused'), { timeout: 10_000 })
        .toMatchObject({ type: 'PodScheduled', status: 'False', reason: 'SchedulerError', message: words });
      const events = (await client.list('/api/v1/namespaces/default/events')).items;
      expect(events.map((e) => [e['reason'], e['message']])).toEqual([['FailedScheduling', words]]);
      // As on kube-apiserver 1.36: the finalizer added before the refused write stays, nothing else is written.
      const claim = await client.get(`${CLAIMS}/refused`);
      expect(claim.metadata['finalizers']).toEqual([CLAIM_FINALIZER]);
      expect((claim['status'] as { allocation?: unknown } | undefined)?.allocation).toBeUndefined();
      await new Promise((r) => setTimeout(r, 1000));
      expect((await client.get(`${CLAIMS}/refused`)).metadata['finalizers']).toEqual([CLAIM_FINALIZER]);
    } finally {
      await hook.close();
      await controllers.close();
    }
  });

  it('reads a claim written meanwhile again and retries its status write, as kube-scheduler does on a conflict', async () => {
    await setUp(client);
    let raced = false;
    // The first status write waits while someone else labels the claim: the API server answers it 409.
    const hook = await statusHook(client, async ({ name }) => {
      if (name === 'raced' && !raced) {
        raced = true;
        await client.mergePatch(`${CLAIMS}/raced`, { metadata: { labels: { touched: 'meanwhile' } } });
      }
      return { allowed: true };
    });
    try {
      await claimAndPod(client, 'raced', '30');
      await expect
        .poll(async () => (await client.get(podPath('default', 'raced')))['spec'], { timeout: 10_000 })
        .toMatchObject({ nodeName: 'node-a' });
      expect(raced).toBe(true);
      const claim = await client.get(`${CLAIMS}/raced`);
      expect(claim.metadata.labels).toEqual({ touched: 'meanwhile' });
      expect((claim['status'] as { reservedFor: { name: string }[] }).reservedFor.map((r) => r.name)).toEqual([
        'raced',
      ]);
      // The conflict was retried, not reported: the one Event is the bind's.
      await expect
        .poll(async () => (await client.list('/api/v1/namespaces/default/events')).items.map((e) => e['reason']))
        .toEqual(['Scheduled']);
    } finally {
      await hook.close();
    }
  });

  it('leaves a pod unschedulable with the reason when its class uses CEL it cannot evaluate', async () => {
    await setUp(client, 'device.attributes["gpu.vcuda.io"].memory > 1');
    await claimAndPod(client, 'p', '30');
    await expect
      .poll(async () => (await client.get(podPath('default', 'p')))['status'], { timeout: 10_000 })
      .toMatchObject({
        conditions: [
          { reason: 'Unschedulable', message: expect.stringContaining('is not supported by the simulator') },
        ],
      });
  });

  it('waits for a template claim to be made, and for a named claim to exist', async () => {
    await setUp(client);
    await client.create(podPath('default'), {
      metadata: { name: 't' },
      spec: {
        resourceClaims: [{ name: 'gpu', resourceClaimTemplateName: 'tpl' }],
        containers: [{ name: 'c', image: 'cuda' }],
      },
    });
    await client.create(podPath('default'), {
      metadata: { name: 'n' },
      spec: {
        resourceClaims: [{ name: 'gpu', resourceClaimName: 'missing' }],
        containers: [{ name: 'c', image: 'cuda' }],
      },
    });
    const message = async (name: string) =>
      ((await client.get(podPath('default', name)))['status'] as { conditions?: { message?: string }[] })
        .conditions?.[0]?.message;
    await expect
      .poll(() => message('t'), { timeout: 10_000 })
      .toContain('waiting for dynamic resource controller to create the resourceclaim "gpu"');
    await expect.poll(() => message('n'), { timeout: 10_000 }).toContain('resourceclaim "missing" not found');
  });
});
