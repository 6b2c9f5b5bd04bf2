/**
 * The real control plane v1.36 (`../shared/kubernetes-1.36/cluster.sh`: kube-apiserver,
 * kube-scheduler and kube-controller-manager unless told otherwise) in a temp directory of its
 * own, reached through a plain-HTTP admin front, as the differential tests against 1.36 use it.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { KubeClient } from '../../sim/kube-client.js';
import { startAdminFront } from './real-cluster.js';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLUSTER_SH = join(repoRoot, '..', 'shared', 'kubernetes-1.36', 'cluster.sh');
const run = promisify(execFile);

/** Why the 1.36 tier cannot run here (`what`: the servers the test needs), or undefined when it can. */
export function real136SkipReason(what: string): string | undefined {
  return existsSync(CLUSTER_SH) ? undefined : `no ${CLUSTER_SH} (${what})`;
}

/** `url`: the admin front, plain HTTP without a token (the front adds the admin's client certificate). */
export type RealControlPlane = { client: KubeClient; url: string; close: () => Promise<void> };

/** Starts it with `cluster.sh start DIR ...args` (~15 s); `close` stops it and removes the directory. */
export async function startRealControlPlane136(args: string[] = []): Promise<RealControlPlane> {
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-k8s136-'));
  const stop = async () => {
    await run(CLUSTER_SH, ['stop', dir], { timeout: 60_000 }).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const { stdout } = await run(CLUSTER_SH, ['start', dir, ...args], { timeout: 240_000 });
    const apiserver = /^APISERVER=(\S+)$/m.exec(stdout)?.[1];
    if (!apiserver) throw new Error(`cluster.sh printed no APISERVER=: ${stdout}`);
    const front = await startAdminFront(dir, apiserver);
    return {
      client: new KubeClient(front.url),
      url: front.url,
      close: async () => {
        await front.close();
        await stop();
      },
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
