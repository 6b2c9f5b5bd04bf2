import { get, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { describe, expect, it } from 'vitest';
import { createApp } from '../app.js';
import type { Overview } from './overview.js';
import { dashboardRoutes, overviewPrinter } from './routes.js';
import type { DashboardSource, ReportWindow } from './source.js';

function fakeSource(overrides: Partial<DashboardSource> = {}) {
  const calls = { clusters: 0, clusterNames: 0, windows: [] as ReportWindow[] };
  const source: DashboardSource = {
    async readClusterNames() {
      calls.clusterNames++;
      return ['local', 'west'];
    },
    async readClusters() {
      calls.clusters++;
      return [
        {
          name: 'local',
          nodes: [
            {
              name: 'node-a',
              cards: [
                {
                  uuid: 'GPU-aa',
                  index: 0,
                  model: 'A100',
                  memoryMiB: 40960,
                  allocations: [
                    {
                      cluster: 'local',
                      namespace: 'ml',
                      pod: 'share-30',
                      podUid: 'u1',
                      container: 'main',
                      core: 30,
                      memoryMiB: 8192,
                      state: 'bound',
                      since: '2026-01-01T00:00:00.000Z',
                    },
                  ],
                },
              ],
            },
          ],
        },
      ];
    },
    async readQuotas() {
      return [];
    },
    async readReports(window) {
      calls.windows.push(window);
      return { gpuHours: [], idle: [] };
    },
    async readRefusals() {
      return [];
    },
    ...overrides,
  };
  return { source, calls };
}

function appWith(source: DashboardSource, clock = () => new Date('2026-01-01T12:00:00.000Z')) {
  return createApp({ dashboard: dashboardRoutes({ source, clock, cacheMs: 1000, streamIntervalMs: 10 }) });
}

describe('dashboard page and assets', () => {
  it('serves the page with a CSP and only same-origin assets', async () => {
    const res = await appWith(fakeSource().source).request('/');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
    const html = await res.text();
    expect(html).toContain('src="/ui/app.js"');
    expect(html).toContain('href="/ui/app.css"');
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it.each([
    ['/ui/app.js', /text\/javascript/, 'EventSource'],
    ['/ui/app.css', /text\/css/, '.card'],
  ])('serves %s', async (path, type, content) => {
    const res = await appWith(fakeSource().source).request(path);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(type);
    expect(await res.text()).toContain(content);
  });

  it('leaves the control plane’s own routes alone', async () => {
    const res = await appWith(fakeSource().source).request('/healthz');
    expect(await res.text()).toBe('ok');
  });
});

describe('GET /ui/overview', () => {
  it('returns the computed overview', async () => {
    const res = await appWith(fakeSource().source).request('/ui/overview');
    expect(res.status).toBe(200);
    const body = (await res.json()) as Overview;
    expect(body.totals).toMatchObject({ cards: 1, coreUsed: 30, memoryUsedMiB: 8192, memoryCapacityMiB: 40960 });
    expect(body.clusters[0]?.nodes[0]?.cards[0]?.pods).toEqual([
      { holder: 'pod', namespace: 'ml', pod: 'share-30', core: 30, memoryMiB: 8192, state: 'bound' },
    ]);
  });

  it('lists the preemptions the source read, newest first, and none when it reads none', async () => {
    const victim = {
      at: '2026-01-01T11:00:00.000Z',
      role: 'victim' as const,
      namespace: 'ml',
      pod: 'low-7',
      reason: 'Preempted',
      message: 'Preempted by pod u1 on node node-a',
    };
    const preemptor = {
      ...victim,
      at: '2026-01-01T11:00:01.000Z',
      role: 'preemptor' as const,
      pod: 'urgent',
      reason: 'VcudaPreempting',
      message: 'preempting lower-priority pods on node-a for GPU-0: ml/low-7 (priority 0)',
    };
    const limits: number[] = [];
    const withRows = fakeSource({
      readPreemptions: async (limit: number) => {
        limits.push(limit);
        return [victim, preemptor];
      },
    }).source;
    const body = (await (await appWith(withRows).request('/ui/overview')).json()) as Overview;
    expect(body.preemptions.map((p) => [p.role, p.pod])).toEqual([
      ['preemptor', 'urgent'],
      ['victim', 'low-7'],
    ]);
    expect(limits).toEqual([50]);
    const none = (await (await appWith(fakeSource().source).request('/ui/overview')).json()) as Overview;
    expect(none.preemptions).toEqual([]);
  });

  it('shows the GPU pods the source finds on nodes holding no cards, and none when it finds none', async () => {
    const pod = {
      cluster: 'local',
      namespace: 'exempt',
      pod: 'by-hand',
      node: 'node-a',
      phase: 'Pending',
      reason: 'no-assignment' as const,
    };
    const withPods = fakeSource({ readUnplacedPods: async () => [pod] }).source;
    const body = (await (await appWith(withPods).request('/ui/overview')).json()) as Overview;
    expect(body.unplacedPods).toEqual([pod]);
    const none = (await (await appWith(fakeSource().source).request('/ui/overview')).json()) as Overview;
    expect(none.unplacedPods).toEqual([]);
  });

  it('asks the reports for the window the page chose', async () => {
    const { source, calls } = fakeSource();
    await appWith(source).request('/ui/overview?windowHours=6');
    expect(calls.windows[0]).toEqual({
      from: new Date('2026-01-01T06:00:00.000Z'),
      to: new Date('2026-01-01T12:00:00.000Z'),
    });
  });

  it('reads the cards at every refresh and the reports only once they are older than reportsCacheMs', async () => {
    let nowMs = Date.parse('2026-01-01T12:00:00.000Z');
    const { source, calls } = fakeSource();
    const app = createApp({
      dashboard: dashboardRoutes({ source, clock: () => new Date(nowMs), cacheMs: 1000, reportsCacheMs: 10_000 }),
    });
    const seen: number[] = [];
    for (let i = 0; i < 8; i++) {
      const body = (await (await app.request('/ui/overview')).json()) as Overview;
      seen.push(body.totals.coreUsed);
      nowMs += 1500;
    }
    // 8 refreshes 1.5 s apart: the cards every time, the reports at 0 s and 10.5 s.
    expect(calls.clusters).toBe(8);
    expect(calls.windows.map((w) => w.to.getTime() - Date.parse('2026-01-01T12:00:00.000Z'))).toEqual([0, 10_500]);
    expect(seen).toEqual(Array(8).fill(30));
  });

  it('filters by cluster from one read of the ledger shared by every cluster', async () => {
    const { source, calls } = fakeSource();
    const app = appWith(source);
    const all = (await (await app.request('/ui/overview')).json()) as Overview;
    const other = (await (await app.request('/ui/overview?cluster=west')).json()) as Overview;
    expect(all.cluster).toBeNull();
    expect(all.totals.cards).toBe(1);
    expect(other.cluster).toBe('west');
    expect(other.clusterNames).toEqual(['local']);
    expect(other.totals.cards).toBe(0);
    expect(calls.clusters).toBe(1);
  });

  it('refuses a cluster the ledger does not know, naming the parameter and the known ones', async () => {
    const { source, calls } = fakeSource();
    const res = await appWith(source).request('/ui/overview?cluster=elsewhere');
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid');
    expect(body.error.message).toContain('query.cluster: unknown cluster "elsewhere"; the ledger knows local, west');
    expect(calls.clusters).toBe(0);
  });

  it('reads the known clusters again once the list is older than clusterListMs', async () => {
    let names = ['local'];
    let nowMs = Date.parse('2026-01-01T12:00:00.000Z');
    const { source, calls } = fakeSource({
      readClusterNames: async () => {
        calls.clusterNames++;
        return names;
      },
    });
    const app = createApp({
      dashboard: dashboardRoutes({ source, clock: () => new Date(nowMs), clusterListMs: 30_000 }),
    });
    expect((await app.request('/ui/overview?cluster=east')).status).toBe(400);
    names = ['local', 'east'];
    nowMs += 10_000;
    // Unknown clusters do not make it read the list again: asking is no way to load the ledger.
    for (let i = 0; i < 20; i++) expect((await app.request(`/ui/overview?cluster=east-${i}`)).status).toBe(400);
    expect(calls.clusterNames).toBe(1);
    nowMs += 25_000;
    expect((await app.request('/ui/overview?cluster=east')).status).toBe(200);
    expect(calls.clusterNames).toBe(2);
  });

  it('refuses a cluster name longer than Kubernetes allows, naming the field', async () => {
    const res = await appWith(fakeSource().source).request(`/ui/overview?cluster=${'x'.repeat(254)}`);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain('query.cluster');
  });

  it.each(['0', 'abc', '1.5', '2', '99999'])('refuses windowHours=%s naming the field', async (value) => {
    const res = await appWith(fakeSource().source).request(`/ui/overview?windowHours=${value}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('invalid');
    expect(body.error.message).toContain('query.windowHours');
  });

  it('shares one load between requests within cacheMs and reloads after it', async () => {
    const { source, calls } = fakeSource();
    let nowMs = Date.parse('2026-01-01T12:00:00.000Z');
    const app = appWith(source, () => new Date(nowMs));
    await Promise.all([app.request('/ui/overview'), app.request('/ui/overview'), app.request('/ui/overview')]);
    expect(calls.clusters).toBe(1);
    nowMs += 1500;
    await app.request('/ui/overview');
    expect(calls.clusters).toBe(2);
  });

  it('never has two loads of one window under way: a silent ledger is asked once, however long', async () => {
    let nowMs = Date.parse('2026-01-01T12:00:00.000Z');
    const { source, calls } = fakeSource({
      readClusters: () => {
        calls.clusters++;
        return new Promise(() => undefined);
      },
    });
    const app = appWith(source, () => new Date(nowMs));
    for (let i = 0; i < 5; i++) {
      void app.request('/ui/overview');
      nowMs += 5000;
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(calls.clusters).toBe(1);
  });

  it('a silent ledger gets a 503 after loadTimeoutMs, not a hanging request', async () => {
    const { source } = fakeSource({ readClusters: () => new Promise(() => undefined) });
    const app = createApp({ dashboard: dashboardRoutes({ source, clock: () => new Date(), loadTimeoutMs: 30 }) });
    const res = await app.request('/ui/overview');
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe(
      'dashboard overview: no answer from the ledger within 30 ms',
    );
  });

  it('answers 503 when the ledger is down, and does not cache the failure', async () => {
    let down = true;
    const { source } = fakeSource();
    const failing: DashboardSource = {
      ...source,
      readClusters: async () => {
        if (down) {
          const { VcudaError } = await import('../../contract/index.js');
          throw new VcudaError('unavailable', 'ledger unreachable');
        }
        return source.readClusters();
      },
    };
    const app = appWith(failing);
    expect((await app.request('/ui/overview')).status).toBe(503);
    down = false;
    expect((await app.request('/ui/overview')).status).toBe(200);
  });
});

describe('GET /ui/stream', () => {
  it('pushes the overview as a Server-Sent Event', async () => {
    const res = await appWith(fakeSource().source).request('/ui/stream');
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('\n\n')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    const lines = text.split('\n');
    expect(lines).toContain('event: overview');
    const data = JSON.parse((lines.find((l) => l.startsWith('data: ')) ?? '').slice(6));
    expect(data.totals.coreUsed).toBe(30);
  });

  /** Reads a stream's text for a while at a time; a read still pending when one call's time is up is the next call's first. */
  function streamReader(res: Response) {
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let pending: ReturnType<typeof reader.read> | undefined;
    return {
      async readFor(forMs: number): Promise<string> {
        let text = '';
        const deadline = Date.now() + forMs;
        while (Date.now() < deadline) {
          pending ??= reader.read();
          const chunk = await Promise.race([
            pending,
            new Promise<undefined>((r) => setTimeout(() => r(undefined), Math.max(1, deadline - Date.now()))),
          ]);
          if (!chunk) break;
          pending = undefined;
          if (chunk.done) break;
          text += new TextDecoder().decode(chunk.value);
        }
        return text;
      },
      cancel: () => reader.cancel(),
    };
  }

  async function readEvents(res: Response, forMs: number): Promise<string[]> {
    const stream = streamReader(res);
    const text = await stream.readFor(forMs);
    await stream.cancel();
    return text.split('\n').filter((l) => l.startsWith('event: '));
  }

  it('does not push again when only the clock moved, pushes at once when a card changes', async () => {
    let nowMs = Date.parse('2026-01-01T12:00:00.000Z');
    let core = 30;
    const { source } = fakeSource();
    const changing: DashboardSource = {
      ...source,
      readClusters: async () => {
        const clusters = await source.readClusters();
        const alloc = clusters[0]?.nodes[0]?.cards[0]?.allocations[0];
        if (alloc) alloc.core = core;
        return clusters;
      },
    };
    const app = createApp({
      dashboard: dashboardRoutes({
        source: changing,
        // Every reading of the clock is a second later: windows move on every load.
        clock: () => {
          nowMs += 1000;
          return new Date(nowMs);
        },
        cacheMs: 0,
        streamIntervalMs: 5,
      }),
    });
    const quiet = await readEvents(await app.request('/ui/stream'), 150);
    expect(quiet).toEqual(['event: overview']);
    const res = await app.request('/ui/stream');
    setTimeout(() => {
      core = 40;
    }, 50);
    expect(await readEvents(res, 200)).toEqual(['event: overview', 'event: overview']);
  });

  it('keeps a quiet stream silent until streamKeepAliveMs has passed, then writes one comment', async () => {
    let nowMs = Date.parse('2026-01-01T12:00:00.000Z');
    const app = createApp({
      dashboard: dashboardRoutes({
        source: fakeSource().source,
        clock: () => new Date(nowMs),
        cacheMs: 0,
        streamIntervalMs: 5,
        streamKeepAliveMs: 10_000,
      }),
    });
    const stream = streamReader(await app.request('/ui/stream'));
    // About 30 ticks with nothing new: the overview, then nothing.
    const quiet = await stream.readFor(150);
    expect(quiet).toContain('event: overview');
    expect(quiet).not.toContain(': unchanged');
    nowMs += 10_000;
    const later = await stream.readFor(100);
    await stream.cancel();
    expect(later.match(/: unchanged/g)).toHaveLength(1);
  });

  it('tells every stream of a tick why it has no overview, and pushes again once the ledger answers', async () => {
    let isDown = false;
    const { source } = fakeSource();
    const readClusters = source.readClusters.bind(source);
    source.readClusters = async () => {
      if (isDown) throw new Error('ledger unreachable');
      return readClusters();
    };
    let overviewMs = Date.parse('2026-01-01T12:00:00.000Z');
    const app = createApp({
      dashboard: dashboardRoutes({
        source,
        clock: () => new Date(overviewMs),
        cacheMs: 0,
        streamIntervalMs: 20,
        streamPhase: () => 0.5,
      }),
    });
    const streams = await Promise.all([1, 2, 3].map(() => app.request('/ui/stream')));
    const readers = streams.map((r) => streamReader(r));
    await Promise.all(readers.map((r) => r.readFor(30)));
    isDown = true;
    const down = await Promise.all(readers.map((r) => r.readFor(60)));
    isDown = false;
    overviewMs += 1;
    const back = await Promise.all(readers.map((r) => r.readFor(60)));
    await Promise.all(readers.map((r) => r.cancel()));
    for (const text of down) expect(text).toContain('event: failure\ndata: {"message":"Error: ledger unreachable"}');
    // The failure was the last push, so the same overview counts as news again.
    for (const text of back) expect(text).toContain('event: overview');
  });

  it('under Node’s HTTP server writes to the response itself: headers, pushes, and a closed page frees its slot', async () => {
    let core = 30;
    const { source } = fakeSource();
    const readClusters = source.readClusters.bind(source);
    source.readClusters = async () => {
      const clusters = await readClusters();
      const card = clusters[0]?.nodes[0]?.cards[0]?.allocations[0];
      if (card) card.core = core;
      return clusters;
    };
    const app = createApp({
      dashboard: dashboardRoutes({
        source,
        clock: () => new Date('2026-01-01T12:00:00.000Z'),
        cacheMs: 0,
        streamIntervalMs: 10,
        maxStreams: 1,
      }),
    });
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as AddressInfo;
    const open = () =>
      new Promise<IncomingMessage>((resolve, reject) =>
        get({ host: '127.0.0.1', port, path: '/ui/stream' }, resolve).on('error', reject),
      );
    const events = (res: IncomingMessage, count: number) =>
      new Promise<string>((resolve) => {
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString('utf8');
          if ((text.match(/event: overview/g) ?? []).length >= count) resolve(text);
        });
      });
    try {
      const first = await open();
      expect(first.statusCode).toBe(200);
      expect(first.headers['content-type']).toBe('text/event-stream');
      expect(first.headers['content-security-policy']).toContain("default-src 'self'");
      const pushed = events(first, 2);
      setTimeout(() => {
        core = 40;
      }, 30);
      const text = await pushed;
      expect(text).toContain('"core":30');
      expect(text).toContain('"core":40');
      // The one slot is taken until the page goes.
      expect((await open()).statusCode).toBe(503);
      first.destroy();
      let again = await open();
      for (let i = 0; i < 50 && again.statusCode === 503; i++) {
        again.resume();
        await new Promise((r) => setTimeout(r, 20));
        again = await open();
      }
      expect(again.statusCode).toBe(200);
      again.destroy();
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('GET /ui/stream: what callers can make it hold', () => {
  async function firstEvent(res: Response): Promise<string> {
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    while (!text.includes('\n\n')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    await reader.cancel();
    return text;
  }

  it('300 streams with distinct cluster values: refused, and not one load of the ledger', async () => {
    const { source, calls } = fakeSource();
    const app = createApp({
      dashboard: dashboardRoutes({
        source,
        clock: () => new Date(),
        streamIntervalMs: 10,
        maxStreams: 1000,
        maxStreamsPerClient: 1000,
      }),
    });
    const answers = await Promise.all(
      Array.from({ length: 300 }, (_, i) => app.request(`/ui/stream?cluster=team-${i}`)),
    );
    expect(answers.map((r) => r.status)).toEqual(Array(300).fill(400));
    expect(calls.clusters).toBe(0);
    expect(calls.windows).toHaveLength(0);
    expect(calls.clusterNames).toBe(1);
  });

  it('300 streams over the known clusters share one load of the ledger per window', async () => {
    const { source, calls } = fakeSource();
    const clock = () => new Date('2026-01-01T12:00:00.000Z');
    const app = createApp({
      dashboard: dashboardRoutes({ source, clock, streamIntervalMs: 10, maxStreams: 1000, maxStreamsPerClient: 1000 }),
    });
    const queries = ['', 'cluster=local', 'cluster=west', 'windowHours=168&cluster=local'];
    const streams = await Promise.all(
      Array.from({ length: 300 }, (_, i) => app.request(`/ui/stream?${queries[i % queries.length]}`)),
    );
    expect(streams.map((r) => r.status)).toEqual(Array(300).fill(200));
    const firsts = await Promise.all(streams.map(firstEvent));
    expect(firsts.filter((t) => t.includes('event: overview'))).toHaveLength(300);
    // Two windows asked for: two loads, whatever the number of streams and clusters.
    expect(calls.clusters).toBe(2);
    expect(calls.windows).toHaveLength(2);
  });

  it('spreads the ticks of streams opened together over the interval instead of bursting them', async () => {
    const { source } = fakeSource();
    const count = 20;
    let drawn = 0;
    const app = createApp({
      dashboard: dashboardRoutes({
        source,
        clock: () => new Date('2026-01-01T12:00:00.000Z'),
        streamIntervalMs: 300,
        // Every tick writes, so each stream's tick shows as a chunk.
        streamKeepAliveMs: 0,
        streamPhase: () => drawn++ / count,
        maxStreams: 100,
        maxStreamsPerClient: 100,
      }),
    });
    const streams = await Promise.all(Array.from({ length: count }, () => app.request('/ui/stream')));
    // When each stream's second chunk (its first tick after the opening push) arrives.
    const secondTicks = await Promise.all(
      streams.map(async (res) => {
        const reader = (res.body as ReadableStream<Uint8Array>).getReader();
        await reader.read();
        await reader.read();
        const at = performance.now();
        await reader.cancel();
        return at;
      }),
    );
    // Phases 0, 1/20, ..., 19/20 of 300 ms: the ticks span about 285 ms; in step they would span a few.
    expect(Math.max(...secondTicks) - Math.min(...secondTicks)).toBeGreaterThan(200);
  });

  it('keeps each stream on its own phase when streams wait on the same load, however long the loads take', async () => {
    // 30 streams over 100 ms, loads of 2 to 12 ms, no cache: streams that tick while a load is
    // under way share it. Sleeping a full interval after each tick, they woke together and merged
    // into fewer, larger groups every round.
    const loadMs = [2, 7, 12, 4, 9];
    let loads = 0;
    const { source } = fakeSource({
      readClusters: async () => {
        await new Promise((r) => setTimeout(r, loadMs[loads++ % loadMs.length]));
        return [];
      },
    });
    const count = 30;
    const intervalMs = 100;
    const rounds = 40;
    let drawn = 0;
    const app = createApp({
      dashboard: dashboardRoutes({
        source,
        clock: () => new Date(),
        cacheMs: 0,
        streamIntervalMs: intervalMs,
        streamKeepAliveMs: 0,
        streamPhase: () => drawn++ / count,
        maxStreams: 100,
        maxStreamsPerClient: 100,
      }),
    });
    const start = performance.now();
    const writes = await Promise.all(
      Array.from({ length: count }, async () => {
        const reader = ((await app.request('/ui/stream')).body as ReadableStream<Uint8Array>).getReader();
        const at: number[] = [];
        while (performance.now() - start < rounds * intervalMs) {
          await reader.read();
          at.push(performance.now() - start);
        }
        await reader.cancel();
        return at;
      }),
    );
    // The writes of the last full interval, by 5 ms: in how many moments the 30 streams wrote.
    // On their own phases, about 10 (streams sharing one load write together); merged, 3 to 6.
    const moments = new Set<number>();
    for (const at of writes) {
      for (const t of at)
        if (t >= (rounds - 2) * intervalMs && t < (rounds - 1) * intervalMs) moments.add(Math.floor(t / 5));
    }
    expect(moments.size).toBeGreaterThanOrEqual(7);
  });

  it('300 open streams cost one load per slot and tick, not one per stream', async () => {
    const { source, calls } = fakeSource();
    const intervalMs = 100;
    const app = createApp({
      dashboard: dashboardRoutes({
        source,
        clock: () => new Date('2026-01-01T12:00:00.000Z'),
        // No cache: every tick of every stream that asked for its own load would reach the source.
        cacheMs: 0,
        streamIntervalMs: intervalMs,
        maxStreams: 1000,
        maxStreamsPerClient: 1000,
      }),
    });
    const streams = await Promise.all(Array.from({ length: 300 }, () => app.request('/ui/stream')));
    const readers = streams.map((r) => (r.body as ReadableStream<Uint8Array>).getReader());
    await Promise.all(readers.map((r) => r.read()));
    const before = calls.clusters;
    await new Promise((r) => setTimeout(r, 5 * intervalMs));
    const loads = calls.clusters - before;
    await Promise.all(readers.map((r) => r.cancel()));
    // 16 slots, 5 intervals: at most 80 ticks, each one load (about 1,500 with a load per stream).
    expect(loads).toBeGreaterThan(0);
    expect(loads).toBeLessThanOrEqual(16 * 6);
  });

  it('gives each client its own slots: one client cannot take every stream, others still get one', async () => {
    const { source } = fakeSource();
    const app = createApp({
      dashboard: dashboardRoutes({ source, clock: () => new Date(), streamIntervalMs: 10, maxStreams: 64 }),
    });
    const from = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } } });
    const greedy = await Promise.all(
      Array.from({ length: 64 }, () => app.request('/ui/stream', {}, from('10.0.0.66'))),
    );
    const granted = greedy.filter((r) => r.status === 200);
    expect(granted).toHaveLength(8);
    const refused = greedy.find((r) => r.status === 503) as Response;
    expect(refused.headers.get('retry-after')).toBe('10');
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
      '8 dashboard streams are open from 10.0.0.66, the most one client may hold',
    );
    const others = await Promise.all(['10.0.0.1', '10.0.0.2'].map((a) => app.request('/ui/stream', {}, from(a))));
    expect(others.map((r) => r.status)).toEqual([200, 200]);
    await Promise.all([...granted, ...others].map((r) => (r.body as ReadableStream).cancel()));
  });

  it('caps open streams: past maxStreams 503 with Retry-After, and a closed stream frees its slot', async () => {
    const { source } = fakeSource();
    const app = createApp({
      dashboard: dashboardRoutes({ source, clock: () => new Date(), streamIntervalMs: 10, maxStreams: 3 }),
    });
    const open = await Promise.all([1, 2, 3].map(() => app.request('/ui/stream')));
    expect(open.map((r) => r.status)).toEqual([200, 200, 200]);
    const refused = await app.request('/ui/stream');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('10');
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('3 dashboard streams');
    await firstEvent(open[0] as Response);
    let again = await app.request('/ui/stream');
    for (let i = 0; i < 50 && again.status === 503; i++) {
      await new Promise((r) => setTimeout(r, 20));
      again = await app.request('/ui/stream');
    }
    expect(again.status).toBe(200);
    await Promise.all([again, ...open.slice(1)].map((r) => (r.body as ReadableStream).cancel()));
  });
});

describe('overviewPrinter: one serialization per overview, however many streams', () => {
  it('fingerprints, serializes and frames an overview once for every stream that ticks on it', () => {
    let serialized = 0;
    const print = overviewPrinter((v) => {
      serialized++;
      return JSON.stringify(v);
    });
    const overview = { generatedAt: 'a', reports: { gpuHours: 1 } } as unknown as Overview;
    const perStream = Array.from({ length: 300 }, () => print(overview));
    const afterPrints = serialized;
    const frames = new Set(perStream.map((p) => p.frame()));
    expect(afterPrints).toBe(2); // the two fingerprints, once
    expect(serialized).toBe(3); // and the JSON, once
    // One frame object, the same bytes written to every stream.
    expect(frames.size).toBe(1);
    expect(new TextDecoder().decode([...frames][0])).toBe(`event: overview\ndata: ${JSON.stringify(overview)}\n\n`);
    // A new overview (the next load) is printed afresh.
    const next = { ...overview, generatedAt: 'b' } as Overview;
    expect(print(next).print.now).toBe(perStream[0]?.print.now);
    expect(serialized).toBe(5);
  });
});
