/**
 * Every resource, annotation and label name that crosses a process boundary.
 *
 * User-facing names live under the configurable resource domain (`nvidia.com` by
 * default, `tencent.com` for clusters migrating from gpu-manager). Names that only
 * vcuda may write live under `vcuda.io/`: the webhook strips them from user pods,
 * so their presence on a pod means the control plane put them there.
 */

import { ValidationError } from './errors.js';

export const DEFAULT_RESOURCE_DOMAIN = 'nvidia.com';
export const VCUDA_PREFIX = 'vcuda.io/';

/** Annotations only vcuda writes. */
export const vcudaAnnotations = {
  /** Pod: the signed assignment (compact JWS) written at bind. */
  assignment: 'vcuda.io/assignment',
  /** Pod: the node the assignment was made for (readable without verifying the JWS). */
  assignedNode: 'vcuda.io/assigned-node',
  /** Pod: the ledger's reservation time (ISO-8601), for expiry of unconfirmed binds. */
  assignedAt: 'vcuda.io/assigned-at',
  /**
   * Pod: written by the node agent once every container's Allocate succeeded (ISO-8601).
   * Until then the pod is a *pending assignment* on its node; the extender never leaves two
   * pending assignments of the same shape on one node, which makes Allocate's pod unambiguous.
   */
  allocatedAt: 'vcuda.io/allocated-at',
  /** Node: the node agent's inventory (JSON, see inventory.ts). */
  inventory: 'vcuda.io/inventory',
  /** Node: the node agent's heartbeat (ISO-8601). */
  heartbeat: 'vcuda.io/heartbeat',
} as const;

export type ResourceNames = {
  readonly domain: string;
  /** Extended resource: compute in hundredths of a card. */
  readonly core: string;
  /** Extended resource: device memory in memory units. */
  readonly memory: string;
  /** Start of every whole-MIG-instance resource, `<domain>/mig-` (mig-resources.ts). */
  readonly migPrefix: string;
  /** Pod annotation: compute ceiling 1..100 per card. */
  readonly coreLimit: string;
  /** Pod annotation: memory ceiling per container and card, in memory units, >= the request (bursts). */
  readonly memoryLimit: string;
  /** Pod annotations: comma-separated GPU model substrings to require / avoid. */
  readonly gpuModelInclude: string;
  readonly gpuModelExclude: string;
  /** Pod annotations: comma-separated card UUIDs to require / avoid. */
  readonly gpuUuidInclude: string;
  readonly gpuUuidExclude: string;
  /** Pod annotation: `binpack` or `spread`, overrides the cluster default. */
  readonly placement: string;
  /** Pod annotation: `true` to require all cards of the pod on one NUMA node. */
  readonly singleNuma: string;
};

/** A Kubernetes namespace (and most object) name: an RFC 1123 label, at most 63 characters. */
export const DNS1123_LABEL_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1123_LABEL_RULE =
  'must be a Kubernetes name (RFC 1123 label): at most 63 lowercase letters, digits or "-", starting and ending with a letter or digit';

export function isDns1123Label(name: string): boolean {
  return name.length <= 63 && DNS1123_LABEL_PATTERN.test(name);
}

const DOMAIN_PATTERN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$/;

/** The rule a resource domain breaks, if any: a domain Kubernetes would refuse, or one it keeps for itself. */
export function resourceDomainProblem(domain: string): { rule: string; detail: string } | undefined {
  if (!DOMAIN_PATTERN.test(domain) || domain.length > 253) {
    return { rule: 'dns-subdomain', detail: `resource domain "${domain}" is not a DNS subdomain (e.g. nvidia.com)` };
  }
  if (domain === 'kubernetes.io' || domain.endsWith('.kubernetes.io') || domain === 'vcuda.io') {
    return { rule: 'reserved', detail: `resource domain "${domain}" is reserved` };
  }
  return undefined;
}

/**
 * Builds every user-facing name from one resource domain; refuses a domain Kubernetes would
 * refuse with a ValidationError naming `field`, where the domain came from (a config key, a flag).
 */
export function resourceNames(domain: string = DEFAULT_RESOURCE_DOMAIN, field = 'resourceDomain'): ResourceNames {
  const problem = resourceDomainProblem(domain);
  if (problem) throw ValidationError.forField(field, problem.rule, problem.detail);
  return Object.freeze({
    domain,
    core: `${domain}/vcuda-core`,
    memory: `${domain}/vcuda-memory`,
    migPrefix: `${domain}/mig-`,
    coreLimit: `${domain}/vcuda-core-limit`,
    memoryLimit: `${domain}/vcuda-memory-limit`,
    gpuModelInclude: `${domain}/vcuda-gpu-model-include`,
    gpuModelExclude: `${domain}/vcuda-gpu-model-exclude`,
    gpuUuidInclude: `${domain}/vcuda-gpu-uuid-include`,
    gpuUuidExclude: `${domain}/vcuda-gpu-uuid-exclude`,
    placement: `${domain}/vcuda-placement`,
    singleNuma: `${domain}/vcuda-single-numa`,
  });
}

export function isVcudaAnnotation(key: string): boolean {
  return key.startsWith(VCUDA_PREFIX);
}
