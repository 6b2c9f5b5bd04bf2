/**
 * kube-scheduler's own account of its scheduling cycles, read from its metrics endpoint (the
 * secure port of ../shared/kubernetes-1.32/cluster.sh), so a benchmark can say how long the
 * scheduler spent per pod, vcuda or plain, from the scheduler's side. The scheduler authenticates
 * callers through the API server (TokenReview) and authorizes them there too (SubjectAccessReview),
 * so the reader is a service account allowed `get` on the `/metrics` URL, with a token of its own.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import type { KubeClient } from '../../sim/kube-client.js';

/** Sum and count of one histogram, over every label set that `keep` accepts. */
export type HistogramTotals = { sum: number; count: number };

/** The histograms a round is judged by, as totals since the scheduler started. */
export type SchedulerTotals = {
  /**
   * scheduler_scheduling_algorithm_duration_seconds: the one-pod-at-a-time part of a cycle, the
   * filters and scores with the extender's filter and prioritize calls, before the pod is assumed.
   */
  algorithm: HistogramTotals;
  /** scheduler_scheduling_attempt_duration_seconds (result="scheduled"): the attempt to its bind, the (asynchronous) binding included. */
  attempt: HistogramTotals;
  /** scheduler_pod_scheduling_sli_duration_seconds: from the pod's entering the queue to its bind, retries included. */
  sli: HistogramTotals;
};

/** Sums `NAME_sum` and `NAME_count` lines of a Prometheus text exposition whose labels pass `keep`. */
export function histogramTotals(text: string, name: string, keep: (labels: string) => boolean = () => true) {
  const out: HistogramTotals = { sum: 0, count: 0 };
  for (const line of text.split('\n')) {
    const m = /^(\w+?)_(sum|count)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name || !keep(m[3] ?? '')) continue;
    out[m[2] as 'sum' | 'count'] += Number(m[4]);
  }
  return out;
}

const READER = 'vcuda-bench-metrics';

/** A service account that may read `/metrics`, and a token for it (an hour), through `client` (an admin). */
async function metricsToken(client: KubeClient): Promise<string> {
  const ns = 'vcuda-system';
  await client.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    metadata: { name: READER },
    rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }],
  });
  await client.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: READER },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: READER },
    subjects: [{ kind: 'ServiceAccount', name: READER, namespace: ns }],
  });
  await client.create(`/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: READER } });
  const request = await client.create(`/api/v1/namespaces/${ns}/serviceaccounts/${READER}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  const token = (request.status as { token?: string } | undefined)?.token;
  if (!token) throw new Error('the API server issued no token for the metrics reader');
  return token;
}

/**
 * A reader of the scheduler's totals for the cluster in `dir` (its ports.env), set up through the
 * admin `client`; each read waits up to `waitMs` for a scheduler that has only just started.
 */
export async function schedulerTotalsReader(
  client: KubeClient,
  dir: string,
  waitMs = 60_000,
): Promise<() => Promise<SchedulerTotals>> {
  const port = /SCHEDULER_PORT=(\d+)/.exec(readFileSync(join(dir, 'ports.env'), 'utf8'))?.[1];
  if (!port) throw new Error(`no SCHEDULER_PORT in ${join(dir, 'ports.env')}`);
  const token = await metricsToken(client);
  return async () => {
    const deadline = Date.now() + waitMs;
    for (;;) {
      try {
        return await readOnce(Number(port), token);
      } catch (err) {
        // Refused while it starts; 401/403 while the API server has not yet seen the new token's grants.
        if (Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  };
}

async function readOnce(port: number, token: string): Promise<SchedulerTotals> {
  const text = await new Promise<string>((resolve, reject) => {
    const req = https.get(
      {
        host: '127.0.0.1',
        port,
        path: '/metrics',
        headers: { authorization: `Bearer ${token}` },
        // The scheduler serves a self-signed loopback certificate of its own making.
        rejectUnauthorized: false,
        timeout: 10_000,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('error', reject);
        res.on('end', () =>
          res.statusCode === 200 ? resolve(body) : reject(new Error(`scheduler /metrics: HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('scheduler /metrics: no answer in 10 s')));
    req.on('error', reject);
  });
  return {
    algorithm: histogramTotals(text, 'scheduler_scheduling_algorithm_duration_seconds'),
    attempt: histogramTotals(text, 'scheduler_scheduling_attempt_duration_seconds', (l) =>
      l.includes('result="scheduled"'),
    ),
    sli: histogramTotals(text, 'scheduler_pod_scheduling_sli_duration_seconds'),
  };
}

/** Mean milliseconds per observation between two readings of one histogram. */
export function meanMsBetween(before: HistogramTotals, after: HistogramTotals): number {
  const n = after.count - before.count;
  return n > 0 ? ((after.sum - before.sum) / n) * 1000 : Number.NaN;
}
