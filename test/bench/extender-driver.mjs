/**
 * kube-scheduler's side of the extender benchmark, in a thread of its own (as the scheduler is a
 * process of its own): scheduling cycles one after another (POST filter, then prioritize with the
 * nodes filter kept, then pick the best score), binds asynchronous with at most `inFlight` at a
 * time, every call over one HTTP/2 connection with a client certificate, as the scheduler's Go
 * transport does against the extender's listener.
 *
 * workerData: { url, tls: { certPem, keyPem, caPem }, pods: [{ name, namespace, uid, pod, offer }], inFlight }
 * Posts back: { seconds, failed, errors, cycleMs, bindMs } (latencies sorted, in ms).
 */
import http2 from 'node:http2';
import { parentPort, workerData } from 'node:worker_threads';

const { url, tls, pods, inFlight } = workerData;
const session = http2.connect(url, { ca: tls.caPem, cert: tls.certPem, key: tls.keyPem });
session.on('error', () => undefined);

/** POSTs `body` to `path` and resolves with the answer's text; an HTTP error status rejects. */
function post(path, body) {
  return new Promise((resolve, reject) => {
    const req = session.request({
      ':method': 'POST',
      ':path': `/scheduler${path}`,
      'content-type': 'application/json',
    });
    let text = '';
    let status = 0;
    req.setEncoding('utf8');
    req.on('response', (h) => {
      status = h[':status'];
    });
    req.on('data', (c) => {
      text += c;
    });
    req.on('end', () => (status === 200 ? resolve(text) : reject(new Error(`${path}: HTTP ${status} ${text}`))));
    req.on('error', reject);
    req.end(body);
  });
}

async function run() {
  let failed = 0;
  const errors = new Set();
  const cycleMs = [];
  const bindMs = [];
  const pending = new Set();
  const t0 = performance.now();
  for (const p of pods) {
    const start = performance.now();
    const filtered = JSON.parse(await post('/filter', JSON.stringify({ Pod: p.pod, Nodes: null, NodeNames: p.offer })));
    const names = filtered.NodeNames ?? [];
    const scores = JSON.parse(await post('/prioritize', JSON.stringify({ Pod: p.pod, Nodes: null, NodeNames: names })));
    cycleMs.push(performance.now() - start);
    const best = scores.reduce((a, b) => (b.Score > a.Score ? b : a), scores[0] ?? { Host: names[0] });
    const binding = { PodName: p.name, PodNamespace: p.namespace, PodUID: p.uid, Node: best?.Host };
    const bindStart = performance.now();
    const bind = post('/bind', JSON.stringify(binding))
      .then((text) => {
        const error = JSON.parse(text).Error;
        if (error) {
          failed += 1;
          if (errors.size < 5) errors.add(error);
        }
      })
      .catch((err) => {
        failed += 1;
        if (errors.size < 5) errors.add(String(err));
      })
      .finally(() => {
        bindMs.push(performance.now() - bindStart);
        pending.delete(bind);
      });
    pending.add(bind);
    if (pending.size >= inFlight) await Promise.race(pending);
  }
  await Promise.all(pending);
  const seconds = (performance.now() - t0) / 1000;
  session.close();
  const sorted = (xs) => xs.sort((a, b) => a - b);
  return { seconds, failed, errors: [...errors], cycleMs: sorted(cycleMs), bindMs: sorted(bindMs) };
}

run().then(
  (result) => parentPort.postMessage(result),
  (err) => parentPort.postMessage({ error: String(err?.stack ?? err) }),
);
