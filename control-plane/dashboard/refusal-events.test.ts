/**
 * The refusal Event watch against an API server on loopback (the simulator's, which speaks the
 * real REST and watch protocol): Events already there and Events created later both reach the log;
 * other Events do not.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventReasons, podEvent } from '../../contract/index.js';
import { type SimApiServer, startApiServer } from '../../sim/apiserver/api-server.js';
import { createPreemptionLog } from './preemption-log.js';
import { watchPreemptionEvents, watchRefusalEvents } from './refusal-events.js';
import { createRefusalLog } from './refusal-log.js';

function kubeConfigFor(url: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'sim', server: url, skipTLSVerify: true }],
    users: [{ name: 'admin' }],
    contexts: [{ name: 'sim', cluster: 'sim', user: 'admin' }],
    currentContext: 'sim',
  });
  return kc;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('watchRefusalEvents', () => {
  let api: SimApiServer;
  const post = async (pod: string, reason: string, suffix: string) => {
    const body = podEvent({ namespace: 'default', name: pod }, reason as never, `${reason} for ${pod}`, {
      component: 'vcuda-node-agent',
      now: new Date(),
      nameSuffix: suffix,
    });
    const res = await fetch(`${api.url}/api/v1/namespaces/default/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(201);
  };

  beforeAll(async () => {
    api = await startApiServer({});
  });
  afterAll(async () => {
    await api?.close();
  });

  it('records refusals listed at start and created later, and nothing else', async () => {
    await post('early', eventReasons.allocateFailed, 'a');
    await post('allocated-one', eventReasons.allocated, 'b');
    const log = createRefusalLog();
    const watch = watchRefusalEvents(kubeConfigFor(api.url), log, { cluster: 'west', retryMs: 100 });
    try {
      await until('initial list', async () => watch.synced());
      await post('late', eventReasons.quotaRefused, 'c');
      await until('the watched event', async () => (await log.readRefusals(10)).some((r) => r.pod === 'late'));
      const rows = await log.readRefusals(10);
      expect(rows.map((r) => [r.pod, r.stage, r.cluster]).sort()).toEqual([
        ['early', 'allocate', 'west'],
        ['late', 'quota', 'west'],
      ]);
    } finally {
      watch.stop();
    }
  });

  it('records both sides of a preemption, listed and watched, and no other Normal Event', async () => {
    await post('winner', eventReasons.preempting, 'p1');
    await post('placed', eventReasons.allocated, 'p2');
    const log = createPreemptionLog();
    const watch = watchPreemptionEvents(kubeConfigFor(api.url), log, { cluster: 'west', retryMs: 100 });
    try {
      await until('initial lists', async () => watch.synced());
      await post('loser', 'Preempted', 'p3');
      await until('the watched event', async () => (await log.readPreemptions(10)).some((r) => r.pod === 'loser'));
      const rows = await log.readPreemptions(10);
      expect(rows.map((r) => [r.pod, r.role, r.cluster]).sort()).toEqual([
        ['loser', 'victim', 'west'],
        ['winner', 'preemptor', 'west'],
      ]);
    } finally {
      watch.stop();
    }
  });
});
