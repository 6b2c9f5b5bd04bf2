/**
 * kube-apiserver's Priority admission plugin and PriorityClass defaults: a pod's
 * `priorityClassName` is resolved to `spec.priority` and `spec.preemptionPolicy` at create (the
 * global default class, else 0, when it names none); an unknown name is refused. The two system
 * classes exist without being created, as in every cluster.
 */
import { admissionDenied, invalid } from './api-status.js';
import type { KubeObject } from './selectors.js';

/** The built-in classes kube-apiserver creates at start (scheduling/types.go). */
const SYSTEM_CLASSES: Record<string, number> = {
  'system-node-critical': 2000001000,
  'system-cluster-critical': 2000000000,
};
/** User classes stay at or below this (HighestUserDefinablePriority). */
const HIGHEST_USER_PRIORITY = 1_000_000_000;

type PriorityClass = { value: number; preemptionPolicy: string; globalDefault: boolean };

function classOf(obj: KubeObject): PriorityClass {
  return {
    value: obj['value'] as number,
    preemptionPolicy: (obj['preemptionPolicy'] as string | undefined) ?? 'PreemptLowerPriority',
    globalDefault: obj['globalDefault'] === true,
  };
}

/** A PriorityClass as stored: defaults applied, refused when its value or policy is not one Kubernetes takes. */
export function defaultPriorityClass(obj: KubeObject): KubeObject {
  const name = obj.metadata.name ?? '';
  const value = obj['value'];
  const policy = obj['preemptionPolicy'] ?? 'PreemptLowerPriority';
  const causes: string[] = [];
  if (typeof value !== 'number' || !Number.isInteger(value)) causes.push('value: Required value: an integer');
  else if (value > HIGHEST_USER_PRIORITY && !(name in SYSTEM_CLASSES))
    causes.push(`value: Forbidden: maximum allowed value of a user defined priority is ${HIGHEST_USER_PRIORITY}`);
  if (policy !== 'PreemptLowerPriority' && policy !== 'Never')
    causes.push(`preemptionPolicy: Unsupported value: "${String(policy)}"`);
  if (causes.length) throw invalid('PriorityClass', name, causes);
  return { ...obj, preemptionPolicy: policy, globalDefault: obj['globalDefault'] === true };
}

/**
 * The pod with its priority resolved from its class. `lookup` reads a stored PriorityClass;
 * `all` lists them (for the global default).
 */
export function resolvePodPriority(
  pod: KubeObject,
  lookup: (name: string) => KubeObject | undefined,
  all: () => KubeObject[],
): KubeObject {
  const spec = (pod['spec'] ?? {}) as Record<string, unknown>;
  const name = spec['priorityClassName'] as string | undefined;
  let chosen: PriorityClass | undefined;
  if (name) {
    const stored = lookup(name);
    if (stored) chosen = classOf(stored);
    else if (name in SYSTEM_CLASSES)
      chosen = {
        value: SYSTEM_CLASSES[name] as number,
        preemptionPolicy: 'PreemptLowerPriority',
        globalDefault: false,
      };
    else
      throw admissionDenied(
        403,
        `pods "${pod.metadata.name}" is forbidden: no PriorityClass with name ${name} was found`,
        'Forbidden',
      );
  } else {
    const def = all()
      .map(classOf)
      .filter((c) => c.globalDefault);
    chosen = def.sort((a, b) => a.value - b.value)[0];
  }
  return {
    ...pod,
    spec: {
      ...spec,
      priority: chosen?.value ?? 0,
      preemptionPolicy: chosen?.preemptionPolicy ?? 'PreemptLowerPriority',
    },
  };
}
