/**
 * What the workload controllers read of the objects they manage: controller references, pod
 * phases and readiness, revisions, and a key-order-free comparison of templates.
 */
import type { KubeObj } from '../kube-client.js';

export type OwnerReference = {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
};

export type PodTemplate = {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string>; [k: string]: unknown };
  spec?: Record<string, unknown>;
};

export function ownerReferencesOf(obj: KubeObj): OwnerReference[] {
  return (obj.metadata['ownerReferences'] as OwnerReference[] | undefined) ?? [];
}

/** The owner reference marked `controller: true`, the one object that manages `obj`. */
export function controllerOf(obj: KubeObj): OwnerReference | undefined {
  return ownerReferencesOf(obj).find((r) => r.controller === true);
}

/** The reference a controller puts on what it creates or adopts (blockOwnerDeletion as kube-controller-manager sets it). */
export function controllerReference(owner: KubeObj, apiVersion: string, kind: string): OwnerReference {
  return {
    apiVersion,
    kind,
    name: owner.metadata.name,
    uid: String(owner.metadata.uid),
    controller: true,
    blockOwnerDeletion: true,
  };
}

export function uidOf(obj: KubeObj): string {
  return String(obj.metadata.uid);
}

export function isDeleting(obj: KubeObj): boolean {
  return Boolean(obj.metadata.deletionTimestamp);
}

export function phaseOf(pod: KubeObj): string | undefined {
  return (pod['status'] as { phase?: string } | undefined)?.phase;
}

export function isTerminal(pod: KubeObj): boolean {
  const phase = phaseOf(pod);
  return phase === 'Succeeded' || phase === 'Failed';
}

/** A pod that counts toward replicas: not being deleted and not finished (controller.FilterActivePods). */
export function isActivePod(pod: KubeObj): boolean {
  return !isDeleting(pod) && !isTerminal(pod);
}

export function isPodReady(pod: KubeObj): boolean {
  const conditions = (pod['status'] as { conditions?: { type: string; status: string }[] } | undefined)?.conditions;
  return conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

export function numberAt(obj: KubeObj, field: 'spec' | 'status', key: string, fallback = 0): number {
  const v = (obj[field] as Record<string, unknown> | undefined)?.[key];
  return typeof v === 'number' ? v : fallback;
}

export function creationTime(obj: KubeObj): number {
  return Date.parse(String(obj.metadata['creationTimestamp'] ?? '')) || 0;
}

/** A field Go would decode to its zero value: absent, null, or an empty list or map. */
function isEmpty(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  return typeof v === 'object' && Object.keys(v).length === 0;
}

/**
 * JSON with object keys sorted and empty fields left out: two templates compare equal when
 * apimachinery's semantic equality would call them equal (key order, `null` and `{}` aside),
 * as `kubectl rollout undo` sends a template back with `creationTimestamp: null`.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => !isEmpty(v))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** ISO time at second precision, as the API's metav1.Time is written. */
export function isoSeconds(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}Z`;
}
