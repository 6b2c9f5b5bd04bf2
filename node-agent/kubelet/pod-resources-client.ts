/** The kubelet's PodResources `List` over its unix socket (PROTOCOLS.md §2). */
import * as grpc from '@grpc/grpc-js';
import { PodResourcesListerService, unixTarget } from './grpc-services.js';
import type { ListPodResourcesResponse } from './protocol.js';

const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** The allocation's `PodResourcesLister`, structurally: the kubelet's API does not depend on its users. */
export class PodResourcesClient {
  private readonly client: grpc.Client;

  constructor(
    socketPath: string,
    private readonly timeoutMs = 10_000,
  ) {
    this.client = new PodResourcesListerService(unixTarget(socketPath), grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    });
  }

  list(): Promise<ListPodResourcesResponse> {
    const list = (this.client as unknown as Record<string, CallableFunction>)['List'] as (
      req: object,
      opts: grpc.CallOptions,
      cb: (err: grpc.ServiceError | null, res: ListPodResourcesResponse) => void,
    ) => void;
    return new Promise((resolve, reject) => {
      list.call(this.client, {}, { deadline: Date.now() + this.timeoutMs }, (err, res) =>
        err ? reject(err) : resolve(res),
      );
    });
  }

  close(): void {
    this.client.close();
  }
}
