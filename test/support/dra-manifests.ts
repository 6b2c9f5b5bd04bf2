/**
 * The ResourceClaim and pod manifests the DRA end-to-end tests create with kubectl: a claim asking
 * one share of the vcuda driver (request `gpu`), and a pod whose container `main` uses it.
 */
import { DEFAULT_DRA_DRIVER } from '../../contract/index.js';

/** A claim in `namespace` asking one share of `cores` cores and `memory` (a Kubernetes quantity). */
export function shareClaimManifest(name: string, namespace: string, capacity: { cores: string; memory: string }) {
  return {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaim',
    metadata: { name, namespace },
    spec: {
      devices: {
        requests: [
          {
            name: 'gpu',
            exactly: { deviceClassName: DEFAULT_DRA_DRIVER, capacity: { requests: { ...capacity } } },
          },
        ],
      },
    },
  };
}

/** A pod in `namespace` whose container `main` (image `image`) uses claim `claim`; `spec` adds to the pod's spec. */
export function claimPodManifest(
  name: string,
  namespace: string,
  claim: string,
  image: string,
  spec: Record<string, unknown> = {},
) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      resourceClaims: [{ name: 'gpu', resourceClaimName: claim }],
      containers: [{ name: 'main', image, resources: { claims: [{ name: 'gpu' }] } }],
      ...spec,
    },
  };
}
