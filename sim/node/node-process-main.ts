/**
 * The entry of a node's own process (see `node-process.ts`): waits for its description on the IPC
 * channel, starts the node, answers the parent's requests, and closes the node and exits when
 * told to or when the channel closes (the parent is gone).
 */
import { pino } from 'pino';
import { redactingLogHooks } from '../../contract/redact.js';
import { KubeClient } from '../kube-client.js';
import { simNodeOptionsOf } from './local-node.js';
import type { ChildMessage, NodeProcessSpec, ParentMessage } from './node-process.js';
import { nodeProcessSpecSchema } from './node-process.js';
import { publishedJwks } from './published-jwks.js';
import { type RunningSimNode, startSimNode } from './sim-node.js';

const send = (m: ChildMessage) => {
  if (process.connected) process.send?.(m);
};
let node: RunningSimNode | undefined;
let starting: Promise<void> | undefined;

async function start(raw: unknown): Promise<void> {
  const parsed = nodeProcessSpecSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`invalid node description: ${parsed.error.message}`);
  const spec: NodeProcessSpec = parsed.data;
  const client = new KubeClient(spec.apiUrl, {
    ...(spec.kubeletToken ? { token: spec.kubeletToken } : {}),
    ...(spec.apiCaPem ? { caPem: spec.apiCaPem } : {}),
  });
  const log = pino({ level: spec.logLevel, name: 'vcuda-local', hooks: redactingLogHooks }).child({
    node: spec.nodeName,
  });
  node = await startSimNode(simNodeOptionsOf(spec, { client, jwks: publishedJwks(client), log }));
}

let closing: Promise<void> | undefined;
/** Closes the node once, however many of close, disconnect and SIGTERM arrive, then exits. */
async function closeAndExit(): Promise<never> {
  closing ??= (async () => {
    await starting?.catch(() => undefined);
    await node?.close().catch((e) => process.stderr.write(`${(e as Error).message}\n`));
  })();
  await closing;
  process.exit(0);
}

process.on('message', (m: ParentMessage) => {
  if (m.op === 'start' && !starting) {
    starting = start(m.spec);
    starting.then(
      () => send({ op: 'ready' }),
      (e) => send({ op: 'failed', message: (e as Error).message }),
    );
  } else if (m.op === 'restartAgent' || m.op === 'stopAgent') {
    const run = !node
      ? Promise.reject(new Error('not started'))
      : m.op === 'restartAgent'
        ? node.restartAgent()
        : node.stopAgent();
    run.then(
      () => send({ op: 'done', id: m.id }),
      (e) => send({ op: 'done', id: m.id, error: (e as Error).message }),
    );
  } else if (m.op === 'close') void closeAndExit();
});
process.on('disconnect', () => void closeAndExit());
// Ctrl-C reaches the whole process group: the parent closes its nodes in order, so a node waits
// to be told (or for the channel to close) instead of dying half-way through the parent's close.
process.on('SIGINT', () => {});
process.on('SIGTERM', () => void closeAndExit());
