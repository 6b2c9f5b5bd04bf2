/**
 * The kubelet's status manager: pod workers set a pod's status and go on; one writer per node
 * sends the latest status of each pod that changed, one pod at a time. For each it reads the pod,
 * leaves it alone when it is gone or is a recreated namesake (another UID), and patches its
 * status. A status set while an earlier one of the same pod waits replaces it, so a pod's reports
 * land in the order they were made and a late "Running" never lands after "Failed".
 */
import { type KubeClient, podPath } from '../kube-client.js';

export type PodRef = { uid: string; namespace: string; name: string };

type Pending = { pod: PodRef; body: { status: Record<string, unknown> } };

export class StatusManager {
  /** Pod uid → the latest status not yet sent; insertion order is the order of writing. */
  private readonly pending = new Map<string, Pending>();
  private writing: Promise<void> | undefined;

  constructor(private readonly client: KubeClient) {}

  set(pod: PodRef, body: { status: Record<string, unknown> }): void {
    this.pending.set(pod.uid, { pod: { uid: pod.uid, namespace: pod.namespace, name: pod.name }, body });
    this.writing ??= this.drain();
  }

  /** Resolves once every status set so far has been sent (or given up). */
  async idle(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    try {
      for (let next = this.take(); next; next = this.take()) await this.write(next);
    } finally {
      this.writing = undefined;
    }
  }

  private take(): Pending | undefined {
    const first = this.pending.entries().next();
    if (first.done) return undefined;
    this.pending.delete(first.value[0]);
    return first.value[1];
  }

  /** A failed write is dropped, as the kubelet drops it until the pod's status changes again. */
  private async write({ pod, body }: Pending): Promise<void> {
    const path = podPath(pod.namespace, pod.name);
    const current = await this.client.get(path).catch(() => undefined);
    if (current?.metadata.uid !== pod.uid) return;
    await this.client.mergePatch(`${path}/status`, body).catch(() => undefined);
  }
}
