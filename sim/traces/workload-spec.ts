/**
 * A workload trace: pods described compactly (`core: 30, memory: 8192, count: 20`) or as full
 * manifests, each with an arrival time and optional duration. `vcuda whatif` replays it against
 * the placement code; `vcuda local` creates the same pods in the simulated cluster.
 */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { fieldErrorsFromZod, parseManifestText, type ResourceNames, ValidationError } from '../../contract/index.js';

const compactSchema = z.object({
  name: z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/),
  namespace: z.string().default('default'),
  count: z.number().int().min(1).max(100_000).default(1),
  /** `vcuda-core`: 1..99 for a share, multiples of 100 for whole cards (other values test admission). */
  core: z.union([z.number(), z.string()]),
  /** `vcuda-memory` in memory units. */
  memory: z.union([z.number(), z.string()]).optional(),
  coreLimit: z.number().int().optional(),
  annotations: z.record(z.string(), z.string()).default({}),
  labels: z.record(z.string(), z.string()).default({}),
  /** A PriorityClass of the trace's `priorityClasses` (or a system one), resolved as kube-apiserver does. */
  priorityClassName: z.string().min(1).max(253).optional(),
  /** Command of the container (the sim runs known workloads, idles otherwise). */
  command: z.array(z.string()).optional(),
  arriveAtSeconds: z.number().min(0).default(0),
  intervalSeconds: z.number().min(0).default(0),
  durationSeconds: z.number().positive().optional(),
});

const manifestSchema = z.object({
  manifest: z
    .object({ metadata: z.object({ name: z.string(), namespace: z.string().optional() }).passthrough() })
    .passthrough(),
  arriveAtSeconds: z.number().min(0).default(0),
  durationSeconds: z.number().positive().optional(),
});

/** A PriorityClass as the trace declares it (scheduling.k8s.io/v1's fields that decide preemption). */
const priorityClassSchema = z.object({
  name: z.string().regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/),
  /** User classes stay at or below 1e9 (kube-apiserver's HighestUserDefinablePriority). */
  value: z
    .number()
    .int()
    .min(-(2 ** 31))
    .max(1_000_000_000),
  preemptionPolicy: z.enum(['PreemptLowerPriority', 'Never']).default('PreemptLowerPriority'),
  globalDefault: z.boolean().default(false),
});
export type PriorityClassSpec = z.infer<typeof priorityClassSchema>;

export const workloadSpecSchema = z.object({
  pods: z.array(z.union([manifestSchema, compactSchema])).min(1),
  /** The PriorityClasses the trace's pods name; what-if resolves them, `vcuda local` creates them. */
  priorityClasses: z.array(priorityClassSchema).max(1000).default([]),
});
export type WorkloadSpec = z.infer<typeof workloadSpecSchema>;

export type PodManifest = {
  apiVersion: 'v1';
  kind: 'Pod';
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: {
    restartPolicy?: string;
    containers: { name: string; image: string; command?: string[]; resources: { limits: Record<string, string> } }[];
    [k: string]: unknown;
  };
};

export type TraceEntry = { pod: PodManifest; arriveAtSeconds: number; durationSeconds?: number };

export function parseWorkloadSpec(doc: unknown, source = 'workload'): WorkloadSpec {
  const parsed = workloadSpecSchema.safeParse(doc);
  if (!parsed.success) throw new ValidationError(fieldErrorsFromZod(parsed.error.issues), source);
  return parsed.data;
}

export async function loadWorkloadSpec(path: string): Promise<WorkloadSpec> {
  return parseWorkloadSpec(parseManifestText(await readFile(path, 'utf8'), path), path);
}

/** The pod a compact entry stands for: one container asking the vcuda resources, limits only. */
export function compactPod(e: z.infer<typeof compactSchema>, name: string, names: ResourceNames): PodManifest {
  const limits: Record<string, string> = { [names.core]: String(e.core) };
  if (e.memory !== undefined) limits[names.memory] = String(e.memory);
  const annotations = {
    ...e.annotations,
    ...(e.coreLimit !== undefined ? { [names.coreLimit]: String(e.coreLimit) } : {}),
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: e.namespace, labels: { app: e.name, ...e.labels }, annotations },
    spec: {
      ...(e.priorityClassName ? { priorityClassName: e.priorityClassName } : {}),
      containers: [
        {
          name: 'main',
          image: 'vcuda-sim/workload:1',
          ...(e.command ? { command: e.command } : {}),
          resources: { limits },
        },
      ],
    },
  };
}

/** Expands the spec into one entry per pod, sorted by arrival. */
export function expandWorkload(spec: WorkloadSpec, names: ResourceNames): TraceEntry[] {
  const out: TraceEntry[] = [];
  for (const e of spec.pods) {
    if ('manifest' in e) {
      const m = structuredClone(e.manifest) as unknown as PodManifest;
      m.metadata.namespace ??= 'default';
      out.push({
        pod: m,
        arriveAtSeconds: e.arriveAtSeconds,
        ...(e.durationSeconds ? { durationSeconds: e.durationSeconds } : {}),
      });
      continue;
    }
    for (let i = 0; i < e.count; i++) {
      out.push({
        pod: compactPod(e, e.count === 1 ? e.name : `${e.name}-${i}`, names),
        arriveAtSeconds: e.arriveAtSeconds + i * e.intervalSeconds,
        ...(e.durationSeconds ? { durationSeconds: e.durationSeconds } : {}),
      });
    }
  }
  return out.sort((a, b) => a.arriveAtSeconds - b.arriveAtSeconds);
}
