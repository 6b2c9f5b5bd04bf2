/**
 * The webhook benchmark's ceiling: a plain node:https server with the control plane's certificate
 * that reads each POSTed body whole and answers one constant AdmissionReview, the control plane's
 * real answer. Under the same load generator at the same rate, on the same cores, its latency is
 * what TLS, HTTP/1.1 and one Node thread cost here before any admission logic: the floor under
 * the control plane's own figures.
 *
 *   node webhook-ceiling-server.mjs KEY_FILE CERT_FILE ANSWER_FILE   (reports its port over IPC)
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

const [keyFile, certFile, answerFile] = process.argv.slice(2);
// A string of known length, as the control plane answers: node writes head and body as one record.
const answer = readFileSync(answerFile, 'utf8');
const length = Buffer.byteLength(answer);
const server = createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': length });
    res.end(answer);
  });
});
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.once('SIGTERM', () => server.close(() => process.exit(0)));
