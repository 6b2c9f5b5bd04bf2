/**
 * The real control plane v1.36 (`test/support/kubernetes-136.ts`: kube-apiserver, and
 * kube-scheduler and kube-controller-manager unless told otherwise) reached through a plain-HTTP
 * admin front, so the simulator's own client speaks to it as to the simulated API server; what the
 * differential tests against 1.36 use.
 */
import { KubeClient } from '../../sim/kube-client.js';
import { startAdminFront } from './admin-front.js';
import { k8s136SkipReason, startKubernetes136 } from './kubernetes-136.js';

/** Why the 1.36 tier cannot run here (`what`: the servers the test needs), or undefined when it can. */
export function real136SkipReason(what: string): string | undefined {
  return k8s136SkipReason()?.replace('(real kube-apiserver v1.36)', `(${what})`);
}

/** `url`: the admin front, plain HTTP without a token (the front adds the admin's client certificate). */
export type RealControlPlane = { client: KubeClient; url: string; close: () => Promise<void> };

/** Starts it with `cluster.sh start DIR ...args` (~15 s); `close` stops it and removes the directory. */
export async function startRealControlPlane136(args: string[] = []): Promise<RealControlPlane> {
  const k8s = await startKubernetes136(args);
  try {
    const front = await startAdminFront(k8s.dir, k8s.apiserver);
    return {
      client: new KubeClient(front.url),
      url: front.url,
      close: async () => {
        await front.close();
        await k8s.stop();
      },
    };
  } catch (e) {
    await k8s.stop();
    throw e;
  }
}
