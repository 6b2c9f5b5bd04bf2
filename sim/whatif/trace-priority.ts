/**
 * A trace pod's priority as kube-apiserver's Priority admission plugin resolves it: the class it
 * names (the trace's `priorityClasses`, or a system class), else the global default class, else 0;
 * a manifest that already carries `spec.priority` (an admitted pod) keeps it. Pure.
 */
import { ValidationError } from '../../contract/index.js';
import type { PodManifest, PriorityClassSpec } from '../traces/workload-spec.js';

export type PreemptionPolicy = PriorityClassSpec['preemptionPolicy'];
export type PodPriority = { priority: number; preemptionPolicy: PreemptionPolicy };

/** The built-in classes every cluster has (kube-apiserver's scheduling/types.go). */
const SYSTEM_CLASSES: Record<string, number> = {
  'system-node-critical': 2000001000,
  'system-cluster-critical': 2000000000,
};

function policyOf(value: unknown, field: string): PreemptionPolicy {
  if (value === undefined || value === null) return 'PreemptLowerPriority';
  if (value === 'PreemptLowerPriority' || value === 'Never') return value;
  throw ValidationError.forField(field, 'enum', 'must be PreemptLowerPriority or Never');
}

/** The pod's priority and preemption policy; a class no one declared is refused, as admission refuses it. */
export function resolveTracePriority(pod: PodManifest, classes: readonly PriorityClassSpec[]): PodPriority {
  const spec = pod.spec as { priority?: unknown; priorityClassName?: unknown; preemptionPolicy?: unknown };
  if (spec.priority !== undefined && spec.priority !== null) {
    if (typeof spec.priority !== 'number' || !Number.isInteger(spec.priority))
      throw ValidationError.forField('spec.priority', 'integer', 'must be an integer');
    return { priority: spec.priority, preemptionPolicy: policyOf(spec.preemptionPolicy, 'spec.preemptionPolicy') };
  }
  const name = spec.priorityClassName;
  if (name === undefined || name === null || name === '') {
    const def = classes.filter((c) => c.globalDefault).sort((a, b) => a.value - b.value)[0];
    return { priority: def?.value ?? 0, preemptionPolicy: def?.preemptionPolicy ?? 'PreemptLowerPriority' };
  }
  if (typeof name !== 'string')
    throw ValidationError.forField('spec.priorityClassName', 'string', 'must be a PriorityClass name');
  const declared = classes.find((c) => c.name === name);
  if (declared) return { priority: declared.value, preemptionPolicy: declared.preemptionPolicy };
  const system = SYSTEM_CLASSES[name];
  if (system !== undefined) return { priority: system, preemptionPolicy: 'PreemptLowerPriority' };
  throw ValidationError.forField(
    'spec.priorityClassName',
    'known-class',
    `no PriorityClass with name ${name} was found (declare it under priorityClasses)`,
  );
}
