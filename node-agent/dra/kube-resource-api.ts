/**
 * resource.k8s.io/v1 for the DRA driver (thin: it only translates): reading claims for Prepare and
 * writing this node's ResourceSlices, plus the Node's uid that owns them.
 */
import * as k8s from '@kubernetes/client-node';
import type { ClaimReader } from './claim-preparer.js';
import type { ResourceSlice } from './resource-slice.js';
import type { ResourceSliceApi } from './slice-publisher.js';

export class KubeResourceApi implements ClaimReader, ResourceSliceApi {
  private readonly resource: k8s.ResourceV1Api;
  private readonly core: k8s.CoreV1Api;

  constructor(kc: k8s.KubeConfig) {
    this.resource = kc.makeApiClient(k8s.ResourceV1Api);
    this.core = kc.makeApiClient(k8s.CoreV1Api);
  }

  async readClaim(namespace: string, name: string): Promise<unknown> {
    return this.resource.readNamespacedResourceClaim({ namespace, name });
  }

  async listSlices(driver: string, nodeName: string): Promise<ResourceSlice[]> {
    const res = await this.resource.listResourceSlice({
      fieldSelector: `spec.nodeName=${nodeName},spec.driver=${driver}`,
    });
    return res.items as unknown as ResourceSlice[];
  }

  async createSlice(slice: ResourceSlice): Promise<string> {
    const res = await this.resource.createResourceSlice({ body: slice as unknown as k8s.V1ResourceSlice });
    return res.metadata?.resourceVersion ?? '';
  }

  async replaceSlice(slice: ResourceSlice): Promise<string> {
    const body = slice as unknown as k8s.V1ResourceSlice;
    const res = await this.resource.replaceResourceSlice({ name: slice.metadata.name, body });
    return res.metadata?.resourceVersion ?? '';
  }

  async deleteSlice(name: string): Promise<void> {
    try {
      await this.resource.deleteResourceSlice({ name });
    } catch (err) {
      if ((err as { code?: number }).code !== 404) throw err;
    }
  }

  async nodeUid(nodeName: string): Promise<string | undefined> {
    const node = await this.core.readNode({ name: nodeName });
    return node.metadata?.uid;
  }
}
