/**
 * The NetworkPolicy admits, port by port, only who may call: the vcuda scheduler to the extender,
 * non-pod sources (the API server) to the webhooks, anyone to the public HTTP port, and nothing
 * to a port it does not name.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deployDir, type K8sObject, objectsOfKustomization } from './manifests.js';

type Peer = {
  podSelector?: { matchLabels?: Record<string, string> };
  namespaceSelector?: unknown;
  ipBlock?: { cidr: string; except?: string[] };
};
type Rule = { from?: Peer[]; ports?: { port: string | number; protocol?: string }[] };
type Policy = K8sObject & {
  spec: { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: Rule[] };
};
type PodTemplate = {
  metadata: { labels: Record<string, string> };
  spec: { containers: { ports?: { name?: string; containerPort: number }[] }[] };
};
type Workload = K8sObject & { spec: { template: PodTemplate } };

const base = objectsOfKustomization(join(deployDir, 'base')).map((o) => o.object);
const find = <T>(kind: string, name: string) =>
  base.find((o) => o.kind === kind && o.metadata.name === name) as T | undefined;
const policy = find<Policy>('NetworkPolicy', 'vcuda-control-plane');
const controlPlane = find<Workload>('Deployment', 'vcuda-control-plane');
const scheduler = find<Workload>('Deployment', 'vcuda-scheduler');
const rulesFor = (port: string) => policy?.spec.ingress.filter((r) => r.ports?.some((p) => p.port === port)) ?? [];
const matches = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

describe('control-plane NetworkPolicy', () => {
  it('selects the control-plane pods and restricts their ingress', () => {
    expect(policy?.metadata.namespace).toBe(controlPlane?.metadata.namespace);
    expect(matches(policy?.spec.podSelector.matchLabels, controlPlane?.spec.template.metadata.labels)).toBe(true);
    expect(policy?.spec.policyTypes).toEqual(['Ingress']);
  });

  it('names every port the control plane listens on in exactly one rule, and every rule names its ports', () => {
    const ports = controlPlane?.spec.template.spec.containers.flatMap((c) => c.ports ?? []).map((p) => p.name) ?? [];
    expect(ports.sort()).toEqual(['extender', 'http', 'https']);
    for (const p of ports) expect(rulesFor(p as string), p).toHaveLength(1);
    for (const r of policy?.spec.ingress ?? []) expect(r.ports?.length).toBeGreaterThan(0);
  });

  it('admits only the vcuda scheduler’s pods, in the control plane’s namespace, to the extender port', () => {
    const [rule] = rulesFor('extender');
    expect(rule?.from).toHaveLength(1);
    const peer = rule?.from?.[0];
    // A podSelector without a namespaceSelector means: pods of the policy's own namespace.
    expect(peer?.namespaceSelector).toBeUndefined();
    expect(peer?.ipBlock).toBeUndefined();
    expect(scheduler?.metadata.namespace).toBe(policy?.metadata.namespace);
    expect(matches(peer?.podSelector?.matchLabels, scheduler?.spec.template.metadata.labels)).toBe(true);
    expect(Object.keys(peer?.podSelector?.matchLabels ?? {}).length).toBeGreaterThan(0);
    // Not the control plane's own pods, nor the node agents'.
    expect(matches(peer?.podSelector?.matchLabels, controlPlane?.spec.template.metadata.labels)).toBe(false);
    const agent = find<Workload>('DaemonSet', 'vcuda-node-agent');
    if (agent) expect(matches(peer?.podSelector?.matchLabels, agent.spec.template.metadata.labels)).toBe(false);
  });

  it('admits the webhook port by address only: the API server has no pod selector', () => {
    const [rule] = rulesFor('https');
    expect(rule?.from?.length).toBeGreaterThan(0);
    for (const peer of rule?.from ?? []) {
      expect(peer.podSelector).toBeUndefined();
      expect(peer.namespaceSelector).toBeUndefined();
      expect(peer.ipBlock?.cidr).toMatch(/^[\d.]+\/\d+$|:/);
    }
  });

  it('leaves the plain-HTTP port (public endpoints, token-reviewed usage) open', () => {
    const [rule] = rulesFor('http');
    expect(rule?.from).toBeUndefined();
  });
});
