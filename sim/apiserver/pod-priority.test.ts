import { describe, expect, it } from 'vitest';
import { defaultPriorityClass, resolvePodPriority } from './pod-priority.js';
import type { KubeObject } from './selectors.js';

const pc = (name: string, value: number, extra: Record<string, unknown> = {}): KubeObject =>
  defaultPriorityClass({ metadata: { name }, value, ...extra } as KubeObject);
const pod = (priorityClassName?: string): KubeObject =>
  ({
    metadata: { name: 'p' },
    spec: { containers: [], ...(priorityClassName ? { priorityClassName } : {}) },
  }) as KubeObject;

describe('Priority admission in the simulated API server', () => {
  const classes = [pc('high', 1000), pc('quiet', 500, { preemptionPolicy: 'Never' })];
  const lookup = (n: string) => classes.find((c) => c.metadata.name === n);
  const spec = (p: KubeObject) => p['spec'] as { priority: number; preemptionPolicy: string };

  it('writes the class value and policy into the pod', () => {
    expect(spec(resolvePodPriority(pod('high'), lookup, () => classes))).toMatchObject({
      priority: 1000,
      preemptionPolicy: 'PreemptLowerPriority',
    });
    expect(spec(resolvePodPriority(pod('quiet'), lookup, () => classes)).preemptionPolicy).toBe('Never');
    expect(spec(resolvePodPriority(pod('system-node-critical'), lookup, () => classes)).priority).toBe(2000001000);
  });

  it('takes the global default when the pod names none, else 0', () => {
    expect(spec(resolvePodPriority(pod(), lookup, () => classes)).priority).toBe(0);
    const withDefault = [...classes, pc('base', 7, { globalDefault: true })];
    expect(spec(resolvePodPriority(pod(), lookup, () => withDefault)).priority).toBe(7);
  });

  it('refuses an unknown class and a class Kubernetes would refuse', () => {
    expect(() => resolvePodPriority(pod('nope'), lookup, () => classes)).toThrow(
      'no PriorityClass with name nope was found',
    );
    expect(() => pc('huge', 2_000_000_000)).toThrow('maximum allowed value');
    expect(() => pc('odd', 1, { preemptionPolicy: 'Sometimes' })).toThrow('preemptionPolicy');
  });
});
