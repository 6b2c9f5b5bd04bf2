/**
 * Stock kubectl 1.32 creates namespaces, config maps and secrets imperatively with protobuf
 * bodies (a real API server accepts them); the simulated API server must too.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeKubeconfig } from '../kubeconfig.js';
import { type SimApiServer, startApiServer } from './api-server.js';
import { decodeProtobufBody } from './protobuf-body.js';

const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

describe.skipIf(!hasKubectl)('kubectl create with protobuf bodies (skipped: no kubectl on PATH)', () => {
  let api: SimApiServer;
  let kubeconfig: string;
  // Asynchronous: the API server answers from this very process.
  const kubectl = async (...args: string[]) =>
    (await promisify(execFile)('kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' })).stdout;

  beforeAll(async () => {
    api = await startApiServer({});
    kubeconfig = join(mkdtempSync(join(tmpdir(), 'vcuda-kubectl-')), 'kubeconfig');
    writeKubeconfig(kubeconfig, api.url);
  });
  afterAll(() => api.close());

  it('creates a namespace, a config map and a secret', async () => {
    expect(await kubectl('create', 'namespace', 'team-x')).toBe('namespace/team-x created\n');
    await kubectl('create', 'configmap', 'settings', '-n', 'team-x', '--from-literal=mode=fast');
    await kubectl('create', 'secret', 'generic', 'creds', '-n', 'team-x', '--from-literal=token=s3cret');
    const cm = JSON.parse(await kubectl('get', 'configmap', 'settings', '-n', 'team-x', '-o', 'json'));
    expect(cm.data).toEqual({ mode: 'fast' });
    const secret = JSON.parse(await kubectl('get', 'secret', 'creds', '-n', 'team-x', '-o', 'json'));
    expect(Buffer.from(secret.data.token, 'base64').toString()).toBe('s3cret');
    expect(secret.type).toBe('Opaque');
    expect(JSON.parse(await kubectl('get', 'namespace', 'team-x', '-o', 'json')).metadata.name).toBe('team-x');
  });
});

describe('decodeProtobufBody', () => {
  it('refuses a body without the k8s magic', () => {
    expect(() => decodeProtobufBody(Buffer.from('{"kind":"Namespace"}'))).toThrow('k8s protobuf magic');
  });
});
