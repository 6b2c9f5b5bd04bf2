/**
 * The real Kubernetes 1.36.3 control plane in `../shared/kubernetes-1.36/` for tests that need what
 * only the real API server decides (DRA validation, admission policies, RBAC with its node-scoped
 * verbs): start it in a temporary directory, call kubectl against it as the admin or with a bearer
 * token, stop it and remove the directory. Suites skip, and say why, where it is absent.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const K8S_136_DIR = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../shared/kubernetes-1.36');
const CLUSTER_SH = join(K8S_136_DIR, 'cluster.sh');

/** Why the 1.36 tier cannot run here, or undefined when it can. */
export function k8s136SkipReason(): string | undefined {
  return existsSync(CLUSTER_SH) ? undefined : `no ${K8S_136_DIR} (real kube-apiserver v1.36)`;
}

export type Run = { code: number; stdout: string; stderr: string };

export type Kubernetes136 = {
  readonly dir: string;
  readonly apiserver: string;
  readonly kubeconfig: string;
  /** kubectl as the admin (`system:masters`), or as whoever `token` is; `input` goes to stdin. */
  kubectl(args: readonly string[], opts?: { token?: string; input?: string }): Promise<Run>;
  stop(): Promise<void>;
};

function runProcess(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; input?: string; timeoutMs: number },
) {
  return new Promise<Run>((done) => {
    const child = execFile(
      file,
      [...args],
      { env: opts.env, timeout: opts.timeoutMs, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
        done({
          code,
          stdout,
          stderr: stderr
            .split('\n')
            .filter((l) => !/version skew|Warning: version difference/i.test(l))
            .join('\n'),
        });
      },
    );
    child.stdin?.end(opts.input ?? '');
  });
}

/** Starts etcd and kube-apiserver (and whatever `args` leave on, see its README); about 15 s. */
export async function startKubernetes136(
  args: readonly string[] = ['--no-scheduler', '--no-controller-manager'],
): Promise<Kubernetes136> {
  const dir = mkdtempSync(join(tmpdir(), 'vcuda-k8s136-'));
  const stop = async () => {
    await runProcess(CLUSTER_SH, ['stop', dir], { timeoutMs: 60_000 });
    rmSync(dir, { recursive: true, force: true });
  };
  const started = await runProcess(CLUSTER_SH, ['start', dir, ...args], { timeoutMs: 240_000 });
  const apiserver = /^APISERVER=(\S+)$/m.exec(started.stdout)?.[1];
  const kubeconfig = /^KUBECONFIG=(\S+)$/m.exec(started.stdout)?.[1];
  if (started.code !== 0 || !apiserver || !kubeconfig) {
    await stop();
    throw new Error(`cluster.sh start failed (${started.code}): ${started.stdout}\n${started.stderr}`);
  }
  const caFile = join(dir, 'pki', 'ca.crt');
  const kubectl = (kargs: readonly string[], opts: { token?: string; input?: string } = {}) => {
    const auth = opts.token
      ? [
          `--server=${apiserver}`,
          `--certificate-authority=${caFile}`,
          `--token=${opts.token}`,
          '--kubeconfig=/dev/null',
        ]
      : [`--kubeconfig=${kubeconfig}`];
    return runProcess('kubectl', [...auth, ...kargs], { env: process.env, input: opts.input, timeoutMs: 60_000 });
  };
  return { dir, apiserver, kubeconfig, kubectl, stop };
}
