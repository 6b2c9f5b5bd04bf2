/**
 * The messages of the kubelet's DRA plugin API (v1 and v1beta1 carry the same ones) and of its
 * plugin registration API, as plain types with the protos' field names. A leaf, like protocol.ts.
 */

/** `PluginInfo.type` of a DRA driver. */
export const DRA_PLUGIN_TYPE = 'DRAPlugin';
/** The gRPC services a DRA driver names in `supported_versions`, newest first. */
export const DRA_SERVICE_VERSIONS = ['v1.DRAPlugin', 'v1beta1.DRAPlugin'] as const;

export type PluginInfo = { type: string; name: string; endpoint: string; supported_versions: string[] };
export type RegistrationStatus = { plugin_registered: boolean; error: string };

export type DraClaimRef = { namespace: string; uid: string; name: string };
export type DraDevice = {
  request_names: string[];
  pool_name: string;
  device_name: string;
  cdi_device_ids: string[];
};
export type NodePrepareResourceResponse = { devices: DraDevice[]; error: string };
export type NodePrepareResourcesRequest = { claims: DraClaimRef[] };
export type NodePrepareResourcesResponse = { claims: Record<string, NodePrepareResourceResponse> };
export type NodeUnprepareResourcesRequest = { claims: DraClaimRef[] };
export type NodeUnprepareResourcesResponse = { claims: Record<string, { error: string }> };
