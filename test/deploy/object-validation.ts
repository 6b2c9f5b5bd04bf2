/**
 * Validates one manifest object: built-in kinds with their kubernetes-models class (the
 * Kubernetes OpenAPI schema) plus an unknown-field check (a typo such as `replicass` passes the
 * schema, which allows extra keys, but Kubernetes would drop it); the few custom resources vcuda
 * ships with zod schemas of the fields it uses.
 */
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { z } from 'zod';
import type { K8sObject } from './manifests.js';

type Model = { validate(): void };
type ModelClass = new (data: unknown) => Model;

function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf('/');
  return i < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

async function modelClass(o: K8sObject): Promise<ModelClass | undefined> {
  const { group, version } = splitApiVersion(o.apiVersion);
  try {
    const mod = (await import(`kubernetes-models/${group ? `${group}/` : ''}${version}`)) as Record<string, unknown>;
    return mod[o.kind] as ModelClass | undefined;
  } catch {
    return undefined;
  }
}

/** Keys present in `original` that the client library's model of this kind does not know. */
export function unknownFields(o: K8sObject): string[] {
  const { version } = splitApiVersion(o.apiVersion);
  const type = `${version.charAt(0).toUpperCase()}${version.slice(1)}${o.kind}`;
  const roundTrip = ObjectSerializer.serialize(ObjectSerializer.deserialize(o, type, ''), type, '') as unknown;
  const out: string[] = [];
  const walk = (a: unknown, b: unknown, path: string) => {
    if (Array.isArray(a)) {
      for (const [i, x] of a.entries()) walk(x, Array.isArray(b) ? b[i] : undefined, `${path}[${i}]`);
      return;
    }
    if (a && typeof a === 'object') {
      for (const [k, v] of Object.entries(a)) {
        const other = b && typeof b === 'object' ? (b as Record<string, unknown>)[k] : undefined;
        if (other === undefined && v !== undefined) out.push(`${path}.${k}`);
        else walk(v, other, `${path}.${k}`);
      }
    }
  };
  walk(o, roundTrip, '');
  return out.map((p) => p.slice(1));
}

const metadata = z.object({ name: z.string().min(1), namespace: z.string().min(1).optional() }).loose();

/** The custom resources the optional overlays use, the fields they set, strictly. */
const customResources: Record<string, z.ZodType> = {
  'cert-manager.io/v1/Issuer': z.strictObject({
    apiVersion: z.literal('cert-manager.io/v1'),
    kind: z.literal('Issuer'),
    metadata,
    spec: z.union([
      z.strictObject({ selfSigned: z.strictObject({}) }),
      z.strictObject({ ca: z.strictObject({ secretName: z.string() }) }),
    ]),
  }),
  'cert-manager.io/v1/Certificate': z.strictObject({
    apiVersion: z.literal('cert-manager.io/v1'),
    kind: z.literal('Certificate'),
    metadata,
    spec: z.strictObject({
      secretName: z.string().min(1),
      commonName: z.string().optional(),
      dnsNames: z.array(z.string().min(1)).min(1).optional(),
      isCA: z.boolean().optional(),
      duration: z
        .string()
        .regex(/^\d+h$/)
        .optional(),
      renewBefore: z
        .string()
        .regex(/^\d+h$/)
        .optional(),
      privateKey: z
        .strictObject({
          algorithm: z.enum(['RSA', 'ECDSA', 'Ed25519']),
          size: z.number().int().optional(),
          rotationPolicy: z.enum(['Always', 'Never']).optional(),
        })
        .optional(),
      usages: z.array(z.string()).optional(),
      issuerRef: z.strictObject({
        name: z.string().min(1),
        kind: z.enum(['Issuer', 'ClusterIssuer']),
        group: z.literal('cert-manager.io').optional(),
      }),
    }),
  }),
  'monitoring.coreos.com/v1/PrometheusRule': z.strictObject({
    apiVersion: z.literal('monitoring.coreos.com/v1'),
    kind: z.literal('PrometheusRule'),
    metadata,
    spec: z.strictObject({
      groups: z
        .array(
          z.strictObject({
            name: z.string().min(1),
            interval: z.string().optional(),
            rules: z
              .array(
                z.union([
                  z.strictObject({
                    alert: z.string().regex(/^[A-Za-z][A-Za-z0-9]*$/),
                    expr: z.string().min(1),
                    for: z
                      .string()
                      .regex(/^\d+[smh]$/)
                      .optional(),
                    labels: z.record(z.string(), z.string()).optional(),
                    annotations: z.record(z.string(), z.string()).optional(),
                  }),
                  z.strictObject({ record: z.string().regex(/^[a-z_:][a-z0-9_:]*$/), expr: z.string().min(1) }),
                ]),
              )
              .min(1),
          }),
        )
        .min(1),
    }),
  }),
  'monitoring.coreos.com/v1/ServiceMonitor': z.strictObject({
    apiVersion: z.literal('monitoring.coreos.com/v1'),
    kind: z.literal('ServiceMonitor'),
    metadata,
    spec: z.strictObject({
      selector: z.strictObject({ matchLabels: z.record(z.string(), z.string()) }),
      namespaceSelector: z.strictObject({ matchNames: z.array(z.string()) }).optional(),
      endpoints: z
        .array(z.strictObject({ port: z.string(), path: z.string().optional(), interval: z.string().optional() }))
        .min(1),
    }),
  }),
  'monitoring.coreos.com/v1/PodMonitor': z.strictObject({
    apiVersion: z.literal('monitoring.coreos.com/v1'),
    kind: z.literal('PodMonitor'),
    metadata,
    spec: z.strictObject({
      selector: z.strictObject({ matchLabels: z.record(z.string(), z.string()) }),
      namespaceSelector: z.strictObject({ matchNames: z.array(z.string()) }).optional(),
      podMetricsEndpoints: z
        .array(
          z.strictObject({
            port: z.string(),
            path: z.string().optional(),
            interval: z.string().optional(),
            honorLabels: z.boolean().optional(),
            relabelings: z
              .array(z.strictObject({ sourceLabels: z.array(z.string()), targetLabel: z.string() }))
              .optional(),
          }),
        )
        .min(1),
    }),
  }),
};

/**
 * Built-in kinds newer than kubernetes-models' schemas (DRA's resource.k8s.io/v1): the client
 * library's model still finds unknown fields; the real 1.36 API server judges the rest
 * (test/deploy/dra-install-real.test.ts applies them with --dry-run=server).
 */
const NEWER_THAN_MODELS: ReadonlySet<string> = new Set(['resource.k8s.io/v1/DeviceClass']);

/** Problems with one object, empty when it is valid. */
export async function validateObject(o: K8sObject): Promise<string[]> {
  if (!o || typeof o !== 'object' || typeof o.apiVersion !== 'string' || typeof o.kind !== 'string') {
    return ['not a Kubernetes object (apiVersion and kind required)'];
  }
  const custom = customResources[`${o.apiVersion}/${o.kind}`];
  if (custom) {
    const r = custom.safeParse(o);
    return r.success ? [] : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
  }
  if (NEWER_THAN_MODELS.has(`${o.apiVersion}/${o.kind}`)) return unknownFields(o).map((f) => `${f}: unknown field`);
  const Model = await modelClass(o);
  if (!Model) return [`${o.apiVersion} ${o.kind} is neither a built-in kind nor a custom resource known to this test`];
  const problems: string[] = [];
  try {
    new Model(o).validate();
  } catch (err) {
    problems.push((err as Error).message);
  }
  for (const f of unknownFields(o)) problems.push(`${f}: unknown field`);
  return problems;
}
