/**
 * The kubelet's PodResources `List`, shared by concurrent callers: the kubelet rate-limits it
 * (100 QPS, burst 10), and twenty containers starting at once must not trip that.
 */
import type { ListPodResourcesResponse } from '../kubelet/protocol.js';
import type { PodResourcesLister } from './ports.js';

export class SharedPodResources {
  private inflight: Promise<ListPodResourcesResponse> | undefined;

  constructor(private readonly lister: PodResourcesLister) {}

  /** A List that may have started before this call (shared). */
  shared(): Promise<ListPodResourcesResponse> {
    this.inflight ??= this.lister.list().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  /** A List started by this call. */
  fresh(): Promise<ListPodResourcesResponse> {
    return this.lister.list();
  }
}
