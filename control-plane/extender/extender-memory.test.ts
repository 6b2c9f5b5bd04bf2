/**
 * What parallel extender calls can cost in memory. kube-scheduler names at most 5,000 nodes of at
 * most 253 characters; a body of 300,000 short names fits the same byte limit and used to be
 * judged whole, answer and all. Eight maximal calls in parallel (both kinds) must take less than
 * half the memory limit the control plane's Deployment sets, measured as the process's peak RSS.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closeDb, connectDb, type VcudaDb } from '../../db/connect.js';
import { migrate } from '../../db/migrate.js';
import { gpuNode, gpuPod } from '../../test/support/control-plane/builders.js';
import { type ExtenderHarness, startExtender, testKeys } from '../../test/support/control-plane/extender-harness.js';
import { type FakeKubeApi, startFakeKubeApi } from '../../test/support/control-plane/fake-kube-api.js';
import { EXTENDER_MAX_BODY_BYTES } from '../config.js';
import { MAX_NODE_NAME, MAX_NODES } from './extender-api.js';

const MIB = 1024 * 1024;

/** The container's memory limit in deploy/base, in bytes. */
function deploymentMemoryLimit(): number {
  const yaml = readFileSync(new URL('../../deploy/base/control-plane-deployment.yaml', import.meta.url), 'utf8');
  const limit = /limits:\s*\n\s*memory:\s*(\d+)(Mi|Gi)/.exec(yaml);
  if (!limit) throw new Error('no memory limit in control-plane-deployment.yaml');
  return Number(limit[1]) * (limit[2] === 'Gi' ? 1024 : 1) * MIB;
}

/** Peak RSS since the last reset, and the reset (Linux: /proc/self/clear_refs "5"). */
const status = (field: string) =>
  Number(new RegExp(`${field}:\\s*(\\d+) kB`).exec(readFileSync('/proc/self/status', 'utf8'))?.[1]) * 1024;
const resetPeak = () => writeFileSync('/proc/self/clear_refs', '5');

let api: FakeKubeApi;
let db: VcudaDb;
let ext: ExtenderHarness;

beforeAll(async () => {
  db = await connectDb({});
  await migrate(db);
  api = await startFakeKubeApi();
  api.putNode(gpuNode({ name: 'gpu-node-a', cards: 8 }));
  ext = await startExtender({ api, db, keys: await testKeys() });
});
afterAll(async () => {
  await ext?.close();
  await api?.close();
  await closeDb(db);
});

it('takes less than half the Deployment memory limit for eight maximal calls in parallel', async () => {
  const pod = gpuPod('p', [{ name: 'main', core: 30, memoryMiB: 1024 }]);
  // kube-scheduler's largest: 5,000 nodes of 253 characters, nearly all unknown to the extender.
  const longName = (i: number) => `n${String(i).padStart(MAX_NODE_NAME - 1, '0')}`;
  const maximal = JSON.stringify({ Pod: pod, NodeNames: Array.from({ length: MAX_NODES }, (_, i) => longName(i)) });
  // No scheduler's: as many short names as the byte limit lets through.
  const shortCount = Math.floor((EXTENDER_MAX_BODY_BYTES - 64 * 1024) / 14);
  const flood = JSON.stringify({ Pod: pod, NodeNames: Array.from({ length: shortCount }, (_, i) => `n${i}`) });
  expect(flood.length).toBeLessThan(EXTENDER_MAX_BODY_BYTES);
  const call = async (body: string) => {
    const res = await ext.app.request('/filter', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    return { status: res.status, bytes: (await res.text()).length };
  };

  resetPeak();
  const before = status('VmRSS');
  const answers = await Promise.all([...Array(4).fill(maximal), ...Array(4).fill(flood)].map(call));
  const grew = status('VmHWM') - before;

  expect(answers.slice(0, 4).map((a) => a.status)).toEqual([200, 200, 200, 200]);
  // Every node judged, each with a bounded reason: a few MiB at most.
  for (const a of answers.slice(0, 4)) expect(a.bytes).toBeLessThan(8 * MIB);
  expect(answers.slice(4).map((a) => a.status)).toEqual([400, 400, 400, 400]);
  expect(grew).toBeLessThan(deploymentMemoryLimit() / 2);
  console.log(`eight parallel maximal filter calls: peak RSS grew ${(grew / MIB).toFixed(0)} MiB`);
}, 60_000);
