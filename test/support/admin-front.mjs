/**
 * The real-server tier's admin front in a thread of its own: plain HTTP in, the API server over
 * HTTPS with the admin client certificate out, as `kubectl proxy` does. Every simulated node's
 * traffic passes through it, so on the test's own thread it would share the event loop of the
 * control plane running there and count in that loop's delay.
 *
 * workerData: { apiserver, ca, cert, key } (PEM text). Posts { port } once listening; a 'close'
 * message closes it and ends the thread.
 */
import http from 'node:http';
import https from 'node:https';
import { parentPort, workerData } from 'node:worker_threads';

// A reset upstream connection that no request is left to hear ("socket hang up" with the API
// server's keep-alive sockets on a host whose cores others hold) must not end the front, and with
// it every simulated node's access to the API server.
process.on('uncaughtException', (err) => {
  if (err?.code !== 'ECONNRESET') throw err;
});

const target = new URL(workerData.apiserver);
const agent = new https.Agent({ ca: workerData.ca, cert: workerData.cert, key: workerData.key, keepAlive: true });
const server = http.createServer((req, res) => {
  const headers = { ...req.headers, host: target.host };
  delete headers.authorization; // the simulated components' tokens mean nothing to this API server
  const upstream = https.request(
    { hostname: target.hostname, port: target.port, path: req.url, method: req.method, headers, agent },
    (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      res.flushHeaders(); // a watch's headers must not wait for its first event
      up.pipe(res);
    },
  );
  upstream.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(String(err));
  });
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});
// Idle keep-alive connections stay open far longer than the clients keep theirs: with Node's 5 s
// default, a client reusing a connection the front had just closed read ECONNRESET mid-run.
server.keepAliveTimeout = 10 * 60_000;
server.listen(0, '127.0.0.1', () => parentPort.postMessage({ port: server.address().port }));
parentPort.on('message', (m) => {
  if (m !== 'close') return;
  server.closeAllConnections();
  server.close(() => {
    agent.destroy();
    parentPort.close();
  });
});
