/** Shared pieces of the end-to-end tests: pod builders and ledger reads over a running local cluster. */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, eq, ne } from 'drizzle-orm';
import type { VcudaDb } from '../../db/connect.js';
import { allocations } from '../../db/schema.js';
import type { KubeClient, KubeObj } from '../../sim/kube-client.js';
import { podPath } from '../../sim/kube-client.js';
import { WORKLOAD_DIR } from '../../sim/local-cluster.js';

export const CORE = 'nvidia.com/vcuda-core';
export const MEMORY = 'nvidia.com/vcuda-memory';

/**
 * Builds native/ and sim/ programs; true when the CUDA workload can run over the fake driver.
 * A failed build throws with the compiler's output: a compile error in a workload must fail the
 * suite, not turn the tests that need the workload into skips.
 */
export function buildWorkloads(): boolean {
  const root = join(WORKLOAD_DIR, '..', '..', '..');
  for (const dir of ['native', 'sim']) {
    const make = spawnSync('make', ['-s', '-C', join(root, dir)], { encoding: 'utf8' });
    if (make.status !== 0) {
      const why = make.error ? make.error.message : `${make.stdout}${make.stderr}`.trim();
      throw new Error(`make -C ${dir} failed (exit ${make.status}): ${why}`);
    }
  }
  return existsSync(join(root, 'native', 'build', 'libvcuda.so')) && existsSync(join(WORKLOAD_DIR, 'cuda-workload'));
}

export function gpuPod(
  name: string,
  core: number,
  memoryMiB?: number,
  extra: { command?: string[]; restartPolicy?: string; annotations?: Record<string, string> } = {},
) {
  const limits: Record<string, string> = { [CORE]: String(core) };
  if (memoryMiB !== undefined) limits[MEMORY] = String(memoryMiB);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(extra.annotations ? { annotations: extra.annotations } : {}) },
    spec: {
      ...(extra.restartPolicy ? { restartPolicy: extra.restartPolicy } : {}),
      containers: [
        {
          name: 'main',
          image: 'vcuda-sim/workload:1',
          ...(extra.command ? { command: extra.command } : {}),
          resources: { limits },
        },
      ],
    },
  };
}

/**
 * A pod asking one whole MIG instance, `nvidia.com/mig-<profile>: 1`; `tolerations` let it go to a
 * tainted node (such as one kept for dynamic MIG).
 */
export function migPod(name: string, profile: string, extra: { command?: string[]; tolerations?: object[] } = {}) {
  const limits = { [`nvidia.com/mig-${profile}`]: '1' };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      ...(extra.tolerations ? { tolerations: extra.tolerations } : {}),
      containers: [
        {
          name: 'main',
          image: 'vcuda-sim/workload:1',
          ...(extra.command ? { command: extra.command } : {}),
          resources: { limits },
        },
      ],
    },
  };
}

export async function phaseOf(client: KubeClient, ns: string, name: string): Promise<string | undefined> {
  try {
    return ((await client.get(podPath(ns, name))).status as { phase?: string } | undefined)?.phase;
  } catch {
    return 'Gone';
  }
}

/** Live ledger rows (reserved or bound), optionally of one pod. */
export async function liveRows(db: VcudaDb, podUid?: string) {
  const live = ne(allocations.state, 'released');
  return db
    .select()
    .from(allocations)
    .where(podUid ? and(live, eq(allocations.podUid, podUid)) : live);
}

/** Core promised per card by the signed assignments of pods that still hold cards. */
export function corePerCard(pods: KubeObj[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const p of pods) {
    const phase = (p.status as { phase?: string } | undefined)?.phase;
    const token = p.metadata.annotations?.['vcuda.io/assignment'];
    if (!token || phase === 'Succeeded' || phase === 'Failed') continue;
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as {
      containers: { isInit: boolean; cards: { uuid: string; core: number }[] }[];
    };
    for (const c of payload.containers) {
      if (c.isInit) continue;
      for (const g of c.cards) out.set(g.uuid, (out.get(g.uuid) ?? 0) + g.core);
    }
  }
  return out;
}

/** AdmissionReviews a control plane at `url` has answered for `hook`, from its /metrics. */
export async function admissionReviews(url: string, hook: 'mutate' | 'validate'): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('vcuda_admission_reviews_total{') && l.includes(`hook="${hook}"`))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

/** The checkout's root. */
const checkoutRoot = join(WORKLOAD_DIR, '..', '..', '..');

/**
 * `vcuda` with `args`, its stdout collected as it comes. `vcuda local` keeps its ledger in
 * `dataDir` (one made for this run unless given: the default one is shared by every run of the machine).
 */
export function runVcuda(args: string[], opts: { dataDir?: string } = {}) {
  const dataDir = opts.dataDir ?? join(mkdtempSync(join(tmpdir(), 'vcuda-local-data-')), 'ledger');
  const child = spawn(process.execPath, [join(checkoutRoot, 'bin', 'vcuda.js'), ...args, '--data-dir', dataDir], {
    cwd: checkoutRoot,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', () => {});
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** `vcuda` with `args` to its end: its exit code and output. */
export function vcudaSync(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(checkoutRoot, 'bin', 'vcuda.js'), ...args], {
    cwd: checkoutRoot,
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

export const hasKubectl = spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status === 0;

/** Stock kubectl against `kubeconfig`; `input` goes to its stdin. Throws with kubectl's stderr when it fails. */
export function kubectl(kubeconfig: string, args: string[], input?: string): string {
  const r = spawnSync('kubectl', args, {
    env: { ...process.env, KUBECONFIG: kubeconfig },
    encoding: 'utf8',
    ...(input === undefined ? {} : { input }),
  });
  if (r.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}
