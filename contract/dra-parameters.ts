/**
 * What vcuda's DRA driver reads from a ResourceClaim besides the allocation: its name, the
 * capacities its devices publish, and the opaque configuration a claim may carry for it
 * (`spec.devices.config[].opaque`, `driver: gpu.vcuda.io`). Admission refuses parameters this
 * schema refuses, and the node agent's Prepare reads them with the same schema, so a claim that
 * was admitted is never read differently on the node.
 *
 * ```yaml
 * config:
 * - requests: [gpu]            # absent: every request of the claim
 *   opaque:
 *     driver: gpu.vcuda.io
 *     parameters: {apiVersion: gpu.vcuda.io/v1alpha1, kind: GpuShareConfig, coreLimit: 60}
 * ```
 */
import { z } from 'zod';
import { type FieldError, fieldErrorsFromZod } from './errors.js';

/** The driver name (and DeviceClass name) by default; configurable like the resource domain. */
export const DEFAULT_DRA_DRIVER = 'gpu.vcuda.io';

/** The consumable capacities each card's device publishes in its ResourceSlice. */
export const DRA_CAPACITY = {
  /** Hundredths of the card: 1..100, step 1. */
  cores: 'cores',
  /** Bytes of the card's memory, in steps of the node's memory unit. */
  memory: 'memory',
} as const;

/** apiVersion and kind of the parameters; fixed, whatever the driver is called. */
export const DRA_PARAMETERS_API_VERSION = 'gpu.vcuda.io/v1alpha1';
export const DRA_PARAMETERS_KIND = 'GpuShareConfig';

/**
 * The parameters: unknown fields are refused (a misspelt `corelimit` must not silently mean a
 * hard limit). `coreLimit` is the compute ceiling per card, 1..100: above the cores the request
 * asks it is a soft limit (bursts into idle time); absent from a request's config, the limit is
 * the cores asked (hard).
 */
export const gpuShareParametersSchema = z.strictObject({
  apiVersion: z.literal(DRA_PARAMETERS_API_VERSION).optional(),
  kind: z.literal(DRA_PARAMETERS_KIND).optional(),
  coreLimit: z.number().int('must be a whole number').min(1, 'must be 1..100').max(100, 'must be 1..100'),
});

export type GpuShareParameters = z.infer<typeof gpuShareParametersSchema>;

export type ParametersResult = { ok: true; parameters: GpuShareParameters } | { ok: false; errors: FieldError[] };

/** Reads one opaque config's `parameters`; each bad field is named under `path`. */
export function readGpuShareParameters(parameters: unknown, path: string): ParametersResult {
  const parsed = gpuShareParametersSchema.safeParse(parameters);
  if (parsed.success) return { ok: true, parameters: parsed.data };
  return { ok: false, errors: fieldErrorsFromZod(parsed.error.issues, path) };
}
