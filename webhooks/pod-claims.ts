/**
 * A vcuda pod as written today, moved to DRA at admission, pure over (pod, its validated request,
 * policy): the JSON Patch that takes the vcuda extended resources out of each container and gives
 * it a claim of its own instead (`spec.resourceClaims` + the container's `resources.claims`), and
 * the ResourceClaimTemplates those claims are made from. One template per distinct shape, named
 * from the shape, so every pod of that shape in the namespace shares it:
 *
 * | container asks                                          | template            | request                                   |
 * | ------------------------------------------------------- | ------------------- | ----------------------------------------- |
 * | `vcuda-core: 30`, `vcuda-memory: 8192` (MiB units)      | `vcuda-c30-m8gi`    | `cores: 30`, `memory: 8192Mi`             |
 * | the same with `vcuda-core-limit: 60`                    | `vcuda-c30-m8gi-l60`| the same, and GpuShareConfig `coreLimit: 60` |
 * | `vcuda-core: 200`                                       | `vcuda-whole-2`     | `count: 2`, no capacity (whole cards)     |
 * | `mig-3g.40gb: 2` (whole MIG instances)                  | `vcuda-mig-3g-40gb-2` | `count: 2` of the MIG DeviceClass, profile selected |
 *
 * Every container (init containers too) gets its own claim: shares are per container, as the
 * limit file on the node is. The validation is the pod's own (validate.ts), run before: a pod is
 * converted only once it passed, so it is refused with the same messages as in extender mode.
 */
import type { ContainerGpuRequest, PodGpuRequest, ResourceNames } from '../contract/index.js';
import {
  DRA_CAPACITY,
  DRA_PARAMETERS_API_VERSION,
  DRA_PARAMETERS_KIND,
  draMigClassName,
  draMigProfileSelector,
  migResourceName,
  parseWholeQuantity,
} from '../contract/index.js';
import { escapePointerToken, type JsonPatchOp } from './json-patch.js';

/** Which pods are moved to DRA, and the DeviceClass and driver their claims name. */
export type DraPodPolicy = {
  readonly deviceClassName: string;
  readonly driverName: string;
  /**
   * Unset: every vcuda pod is converted (the cluster serves vcuda through DRA only). Set: only a
   * pod whose `spec.nodeSelector[modeLabel]` is `modeValue` is, so nodes labelled for DRA and
   * nodes still on the extender can share one cluster during a migration.
   */
  readonly modeLabel?: string | undefined;
  readonly modeValue: string;
};

const MIB_PER_GIB = 1024;
const MAX_CLAIM_NAME = 63;
export const TEMPLATE_REQUEST = 'gpu';

/** A ResourceClaimTemplate (resource.k8s.io/v1) as the webhook writes it. */
export type ClaimTemplate = {
  apiVersion: 'resource.k8s.io/v1';
  kind: 'ResourceClaimTemplate';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  spec: { spec: { devices: { requests: TemplateRequest[]; config?: TemplateConfig[] } } };
};
type TemplateRequest = {
  name: string;
  exactly: {
    deviceClassName: string;
    allocationMode: 'ExactCount';
    count: number;
    selectors?: { cel: { expression: string } }[];
    capacity?: { requests: Record<string, string> };
  };
};
type TemplateConfig = { requests: string[]; opaque: { driver: string; parameters: Record<string, unknown> } };

export type PodClaimsConversion = { patch: JsonPatchOp[]; templates: ClaimTemplate[]; warnings: string[] };

type ConvertiblePod = {
  metadata?: { namespace?: string } | null;
  spec?: {
    containers?: ContainerShape[] | null;
    initContainers?: ContainerShape[] | null;
    resourceClaims?: unknown;
    nodeSelector?: unknown;
  } | null;
};
type ContainerShape = {
  name: string;
  resources?: {
    limits?: Record<string, unknown> | null;
    requests?: Record<string, unknown> | null;
    claims?: unknown;
  } | null;
};

/** Does this pod move to DRA under `policy` (its nodeSelector, when a mode label is set)? */
export function convertsToClaims(pod: ConvertiblePod, policy: DraPodPolicy): boolean {
  if (policy.modeLabel === undefined) return true;
  const selector = pod.spec?.nodeSelector;
  if (typeof selector !== 'object' || selector === null) return false;
  return (selector as Record<string, unknown>)[policy.modeLabel] === policy.modeValue;
}

function memoryName(mib: number): string {
  return mib % MIB_PER_GIB === 0 ? `${mib / MIB_PER_GIB}gi` : `${mib}mi`;
}

/** The template's name, from the shape alone: the same shape always names the same template. */
export function claimTemplateName(c: ContainerGpuRequest): string {
  if (c.mig !== undefined) return `vcuda-mig-${c.mig.replace(/[.+]/g, '-')}-${c.cards}`;
  if (c.corePerCard >= 100) return `vcuda-whole-${c.cards}`;
  const base = `vcuda-c${c.corePerCard}-m${memoryName(c.memoryMiBPerCard ?? 0)}`;
  return c.coreLimit > c.corePerCard ? `${base}-l${c.coreLimit}` : base;
}

/** The template of one container's shape, in `namespace`. */
export function claimTemplateOf(c: ContainerGpuRequest, namespace: string, policy: DraPodPolicy): ClaimTemplate {
  // Whole MIG instances: partitions of the MIG DeviceClass, of the profile asked.
  const exactly: TemplateRequest['exactly'] =
    c.mig !== undefined
      ? {
          deviceClassName: draMigClassName(policy.driverName),
          allocationMode: 'ExactCount',
          count: c.cards,
          selectors: [{ cel: { expression: draMigProfileSelector(policy.driverName, c.mig) } }],
        }
      : {
          deviceClassName: policy.deviceClassName,
          allocationMode: 'ExactCount',
          count: c.corePerCard >= 100 ? c.cards : 1,
        };
  const devices: ClaimTemplate['spec']['spec']['devices'] = { requests: [{ name: TEMPLATE_REQUEST, exactly }] };
  if (c.mig === undefined && c.corePerCard < 100) {
    // Bytes as binary megabytes: exact, and what the card's memory capacity is stepped in.
    const memory = `${c.memoryMiBPerCard ?? 0}Mi`;
    exactly.capacity = { requests: { [DRA_CAPACITY.cores]: String(c.corePerCard), [DRA_CAPACITY.memory]: memory } };
    if (c.coreLimit > c.corePerCard) {
      const parameters = { apiVersion: DRA_PARAMETERS_API_VERSION, kind: DRA_PARAMETERS_KIND, coreLimit: c.coreLimit };
      devices.config = [{ requests: [TEMPLATE_REQUEST], opaque: { driver: policy.driverName, parameters } }];
    }
  }
  return {
    apiVersion: 'resource.k8s.io/v1',
    kind: 'ResourceClaimTemplate',
    metadata: { name: claimTemplateName(c), namespace, labels: { 'app.kubernetes.io/managed-by': 'vcuda' } },
    spec: { spec: { devices } },
  };
}

/** FNV-1a, for a short, stable suffix when a container's name is too long for a claim name. */
function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(36).padStart(7, '0').slice(0, 7);
}

/** The pod-level claim name of a container: `vcuda-<container>`, a DNS label not already taken. */
export function podClaimName(container: string, taken: ReadonlySet<string>): string {
  let base = `vcuda-${container}`;
  if (base.length > MAX_CLAIM_NAME) base = `vcuda-${container.slice(0, 48).replace(/-+$/, '')}-${shortHash(container)}`;
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) {
    const next = `${base.slice(0, MAX_CLAIM_NAME - String(n).length - 1)}-${n}`;
    if (!taken.has(next)) return next;
  }
}

function existingClaimNames(pod: ConvertiblePod): Set<string> {
  const claims = pod.spec?.resourceClaims;
  if (!Array.isArray(claims)) return new Set();
  return new Set(claims.map((c) => (c as { name?: unknown } | null)?.name).filter((n) => typeof n === 'string'));
}

/** Takes the vcuda resources (a MIG profile's too) out of one container and adds its claim. */
function containerOps(
  container: ContainerShape,
  request: ContainerGpuRequest,
  path: string,
  claim: string,
  names: ResourceNames,
): JsonPatchOp[] {
  const ops: JsonPatchOp[] = [];
  const keys = [names.core, names.memory, ...(request.mig !== undefined ? [migResourceName(names, request.mig)] : [])];
  for (const section of ['limits', 'requests'] as const) {
    for (const key of keys) {
      if (container.resources?.[section]?.[key] === undefined) continue;
      ops.push({ op: 'remove', path: `${path}/resources/${section}/${escapePointerToken(key)}` });
    }
  }
  const claims = container.resources?.claims;
  ops.push(
    Array.isArray(claims)
      ? { op: 'add', path: `${path}/resources/claims/-`, value: { name: claim } }
      : { op: 'add', path: `${path}/resources/claims`, value: [{ name: claim }] },
  );
  return ops;
}

/** One warning per container whose memory burst (the memory-limit annotation) DRA does not carry. */
function droppedBurstWarnings(request: PodGpuRequest, names: ResourceNames): string[] {
  return request.containers
    .filter((c) => c.memoryLimitMiBPerCard !== undefined)
    .map((c) => `${names.memoryLimit} not carried to DRA: ${c.name} holds its request, ${c.memoryMiBPerCard} MiB`);
}

/**
 * The patch and templates that move a validated vcuda pod to DRA. `request` is the pod's
 * normalized request (validate.ts's `readGpuPod`), so only valid pods get here.
 */
export function convertPodToClaims(
  pod: ConvertiblePod,
  request: PodGpuRequest,
  names: ResourceNames,
  policy: DraPodPolicy & { namespace: string },
): PodClaimsConversion {
  const taken = existingClaimNames(pod);
  const patch: JsonPatchOp[] = [];
  const podClaims: { name: string; resourceClaimTemplateName: string }[] = [];
  const templates = new Map<string, ClaimTemplate>();
  for (const c of request.containers) {
    const list = c.isInit ? pod.spec?.initContainers : pod.spec?.containers;
    const index = (list ?? []).findIndex((k) => k.name === c.name);
    const container = list?.[index];
    if (!container) continue;
    const claim = podClaimName(c.name, taken);
    taken.add(claim);
    const template = claimTemplateOf(c, policy.namespace, policy);
    templates.set(template.metadata.name, template);
    podClaims.push({ name: claim, resourceClaimTemplateName: template.metadata.name });
    const path = `/spec/${c.isInit ? 'initContainers' : 'containers'}/${index}`;
    patch.push(...containerOps(container, c, path, claim, names));
  }
  if (Array.isArray(pod.spec?.resourceClaims)) {
    for (const value of podClaims) patch.push({ op: 'add', path: '/spec/resourceClaims/-', value });
  } else if (podClaims.length > 0) {
    patch.push({ op: 'add', path: '/spec/resourceClaims', value: podClaims });
  }
  const warnings = droppedBurstWarnings(request, names);
  return {
    patch,
    templates: [...templates.values()].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1)),
    warnings,
  };
}

/**
 * Makes sure each template exists in its namespace: created when absent; one that exists already
 * (AlreadyExists) must ask the same (`sameClaimTemplate`), or the pod is refused. Implemented by
 * the control plane with client-node.
 */
export type EnsureClaimTemplates = (templates: readonly ClaimTemplate[]) => Promise<void>;

/** Sorted keys, so two objects with the same fields in another order compare equal. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
  return Object.fromEntries(entries.map(([k, v]) => [k, sortedKeys(v)]));
}

type DevicesLike = { requests?: { exactly?: { capacity?: { requests?: Record<string, unknown> } } }[] };

/** The devices of a template spec, quantities as whole numbers (`8192Mi` and `8Gi` are one). */
function normalDevices(devices: unknown): string {
  const copy = structuredClone(devices) as DevicesLike | null;
  for (const r of copy?.requests ?? []) {
    const capacity = r.exactly?.capacity;
    if (!capacity?.requests) continue;
    capacity.requests = Object.fromEntries(
      Object.entries(capacity.requests).map(([k, v]) => {
        const q = parseWholeQuantity(v);
        return [k, q.ok ? q.value : v];
      }),
    );
  }
  return JSON.stringify(sortedKeys(copy));
}

/**
 * Does a stored template (as the API server returns it) ask what `want` asks? A template of that
 * name made by someone else with another shape must not silently give pods another share.
 */
export function sameClaimTemplate(want: ClaimTemplate, stored: unknown): boolean {
  const devices = (stored as { spec?: { spec?: { devices?: unknown } } } | null)?.spec?.spec?.devices;
  return devices !== undefined && normalDevices(devices) === normalDevices(want.spec.spec.devices);
}
