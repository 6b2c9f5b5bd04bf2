/**
 * resource.k8s.io/v1 for the DRA driver (thin: it only translates): reading claims for Prepare and
 * writing this node's ResourceSlices, plus the Node's uid that owns them.
 */
import * as k8s from '@kubernetes/client-node';
import type { ClaimReader } from './claim-preparer.js';
import type { ResourceSlice } from './resource-slice.js';
import type { ResourceSliceApi } from './slice-publisher.js';

/**
 * The slice in @kubernetes/client-node's model names, which its serializer maps back to the wire
 * names: a field it does not know under its wire name (`int`, `default`: reserved words there,
 * spelt `_int`, `_default`) would be dropped silently, and the API server refuses the slice.
 */
export function toClientSlice(slice: ResourceSlice): k8s.V1ResourceSlice {
  if (!slice.spec.devices) return slice as unknown as k8s.V1ResourceSlice;
  const devices = slice.spec.devices.map((d) => ({
    ...d,
    attributes: Object.fromEntries(
      Object.entries(d.attributes).map(([name, { int, ...rest }]) => [
        name,
        int === undefined ? rest : { ...rest, _int: int },
      ]),
    ),
    capacity: Object.fromEntries(
      Object.entries(d.capacity).map(([name, c]) => {
        if (!c.requestPolicy) return [name, c];
        const { default: fallback, ...policy } = c.requestPolicy;
        return [name, { ...c, requestPolicy: fallback === undefined ? policy : { ...policy, _default: fallback } }];
      }),
    ),
  }));
  return { ...slice, spec: { ...slice.spec, devices } } as unknown as k8s.V1ResourceSlice;
}

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
    const res = await this.resource.createResourceSlice({ body: toClientSlice(slice) });
    return res.metadata?.resourceVersion ?? '';
  }

  async replaceSlice(slice: ResourceSlice): Promise<string> {
    const res = await this.resource.replaceResourceSlice({ name: slice.metadata.name, body: toClientSlice(slice) });
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
