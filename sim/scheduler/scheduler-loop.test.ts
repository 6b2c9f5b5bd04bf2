import http from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type SimApiServer, startApiServer } from '../apiserver/api-server.js';
import { KubeClient, podPath } from '../kube-client.js';
import { defaultSchedulerConfig, parseSchedulerConfig } from './scheduler-config.js';
import { type SimScheduler, startScheduler } from './scheduler-loop.js';

/** A recording extender: refuses nodes named in `refuse`, scores n2 highest, binds through the API. */
async function startExtender(api: KubeClient, refuse: Set<string>) {
  const calls: { verb: string; body: Record<string, unknown> }[] = [];
  const server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', async () => {
      const body = JSON.parse(text);
      const verb = req.url!.split('/').pop()!;
      calls.push({ verb, body });
      let out: unknown;
      if (verb === 'filter') {
        const names = (body.NodeNames as string[]).filter((n) => !refuse.has(n));
        out = {
          NodeNames: names,
          FailedNodes: Object.fromEntries([...refuse].map((n) => [n, 'no free card'])),
          FailedAndUnresolvableNodes: {},
          Error: '',
        };
      } else if (verb === 'prioritize') {
        out = (body.NodeNames as string[]).map((n) => ({ Host: n, Score: n === 'n2' ? 10 : 1 }));
      } else {
        await api.create(`${podPath(body.PodNamespace, body.PodName)}/binding`, {
          metadata: { name: body.PodName, uid: body.PodUID },
          target: { kind: 'Node', name: body.Node },
        });
        out = { Error: '' };
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(out));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, calls, close: () => server.close() };
}

const gpuPod = (name: string) => ({
  metadata: { name },
  spec: {
    containers: [
      {
        name: 'c',
        image: 'x:1',
        resources: { limits: { 'nvidia.com/vcuda-core': '30', 'nvidia.com/vcuda-memory': '1024', cpu: '1' } },
      },
    ],
  },
});
const node = (name: string) => ({
  metadata: { name, labels: { 'kubernetes.io/hostname': name } },
  status: { allocatable: { cpu: '2', memory: '8Gi', pods: '110' } },
});

describe('simulated kube-scheduler', () => {
  let api: SimApiServer;
  let client: KubeClient;
  let scheduler: SimScheduler | undefined;
  let extender: Awaited<ReturnType<typeof startExtender>>;
  const refuse = new Set<string>();
  beforeEach(async () => {
    api = await startApiServer();
    client = new KubeClient(api.url);
    refuse.clear();
    extender = await startExtender(client, refuse);
    for (const n of ['n1', 'n2', 'n3']) await client.create('/api/v1/nodes', node(n));
  });
  afterEach(async () => {
    await scheduler?.close();
    extender.close();
    await api.close();
  });

  const nodeOf = async (name: string) =>
    ((await client.get(podPath('default', name))).spec as { nodeName?: string }).nodeName;

  it('sends the extender the JSON kube-scheduler sends and binds where it scores best', async () => {
    scheduler = startScheduler({ client, config: defaultSchedulerConfig(extender.url) });
    await client.create(podPath('default'), gpuPod('g1'));
    await expect.poll(() => nodeOf('g1')).toBe('n2');
    const filter = extender.calls.find((c) => c.verb === 'filter')!;
    expect(Object.keys(filter.body).sort()).toEqual(['NodeNames', 'Nodes', 'Pod']);
    expect(filter.body.Nodes).toBeNull();
    expect((filter.body.NodeNames as string[]).sort()).toEqual(['n1', 'n2', 'n3']);
    expect(extender.calls.find((c) => c.verb === 'bind')!.body).toMatchObject({
      PodName: 'g1',
      PodNamespace: 'default',
      Node: 'n2',
    });
  });

  it('binds a pod without vcuda resources itself, never asking the extender', async () => {
    scheduler = startScheduler({ client, config: defaultSchedulerConfig(extender.url) });
    await client.create(podPath('default'), {
      metadata: { name: 'plain' },
      spec: { containers: [{ name: 'c', image: 'x:1' }] },
    });
    await expect.poll(() => nodeOf('plain')).toMatch(/^n[123]$/);
    expect(extender.calls).toEqual([]);
  });

  const filterCalls = () => extender.calls.filter((c) => c.verb === 'filter').length;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('records FailedScheduling with every reason and parks the pod until a cluster event', async () => {
    for (const n of ['n1', 'n2', 'n3']) refuse.add(n);
    scheduler = startScheduler({
      client,
      config: defaultSchedulerConfig(extender.url),
      initialBackoffMs: 50,
      maxBackoffMs: 50,
    });
    await client.create(podPath('default'), gpuPod('waits'));
    await expect
      .poll(async () => (await client.list('/api/v1/namespaces/default/events')).items.map((e) => e['message']))
      .toEqual(['0/3 nodes are available: 3 no free card.']);
    const status = (await client.get(podPath('default', 'waits'))).status as {
      conditions: { type: string; status: string; reason: string }[];
    };
    expect(status.conditions).toContainEqual(
      expect.objectContaining({ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }),
    );
    // Its backoff is long over, but nothing happened in the cluster: kube-scheduler does not retry.
    await sleep(400);
    expect(filterCalls()).toBe(1);
    refuse.delete('n3');
    scheduler.nudge();
    await expect.poll(() => nodeOf('waits')).toBe('n3');
  });

  it("unparks a pod whose metadata changes (the control plane's capacity nudge), but not before its backoff", async () => {
    for (const n of ['n1', 'n2', 'n3']) refuse.add(n);
    scheduler = startScheduler({
      client,
      config: defaultSchedulerConfig(extender.url),
      initialBackoffMs: 1500,
      maxBackoffMs: 1500,
    });
    await client.create(podPath('default'), gpuPod('nudged'));
    await expect.poll(filterCalls).toBe(1);
    const refusedAt = Date.now();
    refuse.delete('n1');
    await client.mergePatch(podPath('default', 'nudged'), {
      metadata: { annotations: { 'vcuda.io/capacity-freed-at': 'now' } },
    });
    await sleep(300);
    expect(filterCalls()).toBe(1);
    await expect.poll(() => nodeOf('nudged'), { timeout: 5000 }).toBe('n1');
    expect(Date.now() - refusedAt).toBeGreaterThanOrEqual(1400);
  });

  it('retries a pod after an extender error without any event, and after 5 minutes parked (scaled)', async () => {
    scheduler = startScheduler({
      client,
      config: defaultSchedulerConfig('http://127.0.0.1:1'),
      initialBackoffMs: 50,
      maxBackoffMs: 50,
    });
    await client.create(podPath('default'), gpuPod('unreachable'));
    await expect.poll(() => scheduler!.stats().errors, { timeout: 3000 }).toBeGreaterThanOrEqual(3);
    const status = (await client.get(podPath('default', 'unreachable'))).status as {
      conditions: { type: string; reason: string }[];
    };
    expect(status.conditions).toContainEqual(
      expect.objectContaining({ type: 'PodScheduled', reason: 'SchedulerError' }),
    );
    await scheduler.close();

    for (const n of ['n1', 'n2', 'n3']) refuse.add(n);
    scheduler = startScheduler({
      client,
      config: defaultSchedulerConfig(extender.url),
      initialBackoffMs: 50,
      maxBackoffMs: 50,
      maxParkedMs: 600,
    });
    // Only this pod's calls: the pod of the first half is still pending and is scheduled too.
    const flushedCalls = () =>
      extender.calls.filter(
        (c) => c.verb === 'filter' && (c.body['Pod'] as { metadata?: { name?: string } })?.metadata?.name === 'flushed',
      ).length;
    await client.create(podPath('default'), gpuPod('flushed'));
    await expect.poll(flushedCalls).toBeGreaterThanOrEqual(1);
    const first = flushedCalls();
    await sleep(300);
    expect(flushedCalls()).toBe(first);
    await expect.poll(flushedCalls, { timeout: 3000 }).toBeGreaterThan(first);
  });

  it('leaves room on a node for a pod nominated there of at least the same priority', async () => {
    for (const [name, value] of [
      ['p1000', 1000],
      ['p2000', 2000],
    ] as const)
      await client.create('/apis/scheduling.k8s.io/v1/priorityclasses', { metadata: { name }, value });
    const cpuPod = (name: string, cls: string | undefined, schedulerName = 'default-scheduler') => ({
      metadata: { name },
      spec: {
        schedulerName,
        ...(cls ? { priorityClassName: cls } : {}),
        nodeSelector: { 'kubernetes.io/hostname': 'n1' },
        containers: [{ name: 'c', image: 'x:1', resources: { requests: { cpu: '1500m' } } }],
      },
    });
    // Waiting for its victims on n1 (another scheduler's, so this loop leaves it pending).
    await client.create(podPath('default'), cpuPod('nominated', 'p1000', 'elsewhere'));
    await client.strategicPatch(`${podPath('default', 'nominated')}/status`, { status: { nominatedNodeName: 'n1' } });
    scheduler = startScheduler({ client, config: defaultSchedulerConfig(extender.url) });
    await client.create(podPath('default'), cpuPod('lower', undefined));
    await client.create(podPath('default'), cpuPod('higher', 'p2000'));
    await expect.poll(() => nodeOf('higher')).toBe('n1');
    await expect
      .poll(async () => {
        const events = (await client.list('/api/v1/namespaces/default/events')).items as {
          reason?: string;
          involvedObject?: { name?: string };
        }[];
        return events.some((e) => e.reason === 'FailedScheduling' && e.involvedObject?.name === 'lower');
      })
      .toBe(true);
    expect(await nodeOf('lower')).toBeUndefined();
  });

  it('validates the scheduler configuration like kube-scheduler', () => {
    const base = { apiVersion: 'kubescheduler.config.k8s.io/v1', kind: 'KubeSchedulerConfiguration' };
    expect(() =>
      parseSchedulerConfig({ ...base, extenders: [{ urlPrefix: 'http://x/s', prioritizeVerb: 'p' }] }),
    ).toThrow(/weight/);
    const two = { urlPrefix: 'http://x/s', bindVerb: 'bind' };
    expect(() => parseSchedulerConfig({ ...base, extenders: [two, two] })).toThrow(/bindVerb/);
    expect(
      parseSchedulerConfig({ ...base, extenders: [{ urlPrefix: 'http://x/s', httpTimeout: '30s' }] }).extenders[0]!
        .httpTimeoutMs,
    ).toBe(30_000);
    expect(parseSchedulerConfig(base).backoff).toEqual({ initialMs: 1000, maxMs: 10_000 });
    expect(() => parseSchedulerConfig({ ...base, podInitialBackoffSeconds: 0 })).toThrow(/podInitialBackoffSeconds/);
    expect(() => parseSchedulerConfig({ ...base, podInitialBackoffSeconds: 5, podMaxBackoffSeconds: 2 })).toThrow(
      /podMaxBackoffSeconds/,
    );
  });
});
