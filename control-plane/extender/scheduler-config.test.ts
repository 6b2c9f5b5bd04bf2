/** The deployed KubeSchedulerConfiguration must call exactly the verbs this extender serves. */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { KNOWN_MIG_PROFILES, migResourceName, resourceNames } from '../../contract/index.js';
import { extenderArgsSchema } from './extender-api.js';

const config = parse(
  readFileSync(new URL('../../deploy/scheduler/kube-scheduler-config.yaml', import.meta.url), 'utf8'),
);

describe('deploy/scheduler/kube-scheduler-config.yaml', () => {
  const ext = config.extenders[0];
  it('is a v1 KubeSchedulerConfiguration with the vcuda-scheduler profile', () => {
    expect(config.apiVersion).toBe('kubescheduler.config.k8s.io/v1');
    expect(config.kind).toBe('KubeSchedulerConfiguration');
    expect(config.profiles.map((p: { schedulerName: string }) => p.schedulerName)).toEqual(['vcuda-scheduler']);
  });

  it('points at the extender routes with the verbs they serve', () => {
    expect(ext.urlPrefix).toMatch(/\/scheduler$/);
    expect([ext.filterVerb, ext.prioritizeVerb, ext.bindVerb]).toEqual(['filter', 'prioritize', 'bind']);
    expect(ext.nodeCacheCapable).toBe(true);
    expect(ext.ignorable).toBe(false);
    // kube-scheduler refuses an extender with prioritizeVerb and no positive weight.
    expect(ext.weight).toBeGreaterThan(0);
    expect(ext.httpTimeout).toMatch(/^\d+s$/);
  });

  it('manages both vcuda resources and every known MIG profile, still checked by kube-scheduler', () => {
    const names = resourceNames();
    expect(ext.managedResources).toEqual([
      { name: names.core, ignoredByScheduler: false },
      { name: names.memory, ignoredByScheduler: false },
      ...KNOWN_MIG_PROFILES.map((p) => ({ name: migResourceName(names, p), ignoredByScheduler: false })),
    ]);
  });

  it('matches the args shape the extender accepts (nodeCacheCapable sends NodeNames)', () => {
    expect(
      extenderArgsSchema.safeParse({ Pod: { metadata: { name: 'p' } }, Nodes: null, NodeNames: ['a'] }).success,
    ).toBe(true);
  });
});
