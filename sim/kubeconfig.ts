/**
 * Kubeconfigs for the simulated cluster: a file for stock kubectl, and in-process KubeConfig
 * objects for the components, each with its own bearer token so the API server (and the
 * webhooks it calls) see who is asking, as with service accounts in a real cluster.
 */
import { writeFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { PooledKubeConfig } from '../kube-connections/pooled-kube-config.js';

export function kubeconfigDocument(server: string, token?: string, namespace = 'default') {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'vcuda-sim', cluster: { server } }],
    users: [{ name: 'vcuda-sim-user', user: token ? { token } : {} }],
    contexts: [{ name: 'vcuda-sim', context: { cluster: 'vcuda-sim', user: 'vcuda-sim-user', namespace } }],
    'current-context': 'vcuda-sim',
    preferences: {},
  };
}

export function writeKubeconfig(path: string, server: string, token?: string): void {
  writeFileSync(path, stringify(kubeconfigDocument(server, token)), { mode: 0o600 });
}

export function kubeConfigFor(server: string, token?: string): KubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'vcuda-sim', server, skipTLSVerify: true }],
    users: [{ name: 'vcuda-sim-user', ...(token ? { token } : {}) }],
    contexts: [{ name: 'vcuda-sim', cluster: 'vcuda-sim', user: 'vcuda-sim-user' }],
    currentContext: 'vcuda-sim',
  });
  return kc;
}
