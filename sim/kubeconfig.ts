/**
 * Kubeconfigs for the simulated cluster: a file for stock kubectl, and in-process KubeConfig
 * objects for the components, each with its own bearer token so the API server (and the
 * webhooks it calls) see who is asking, as with service accounts in a real cluster.
 */
import { writeFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { PooledKubeConfig } from '../kube-connections/pooled-kube-config.js';
import type { ApiCredentials } from './kube-client.js';

/** A kubeconfig naming the server, the CA that signed its certificate, and the token to present. */
export function kubeconfigDocument(server: string, credentials: ApiCredentials = {}, namespace = 'default') {
  const { token, caPem } = credentials;
  const ca = caPem ? { 'certificate-authority-data': Buffer.from(caPem).toString('base64') } : {};
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'vcuda-sim', cluster: { server, ...ca } }],
    users: [{ name: 'vcuda-sim-user', user: token ? { token } : {} }],
    contexts: [{ name: 'vcuda-sim', context: { cluster: 'vcuda-sim', user: 'vcuda-sim-user', namespace } }],
    'current-context': 'vcuda-sim',
    preferences: {},
  };
}

export function writeKubeconfig(path: string, server: string, credentials: ApiCredentials = {}): void {
  writeFileSync(path, stringify(kubeconfigDocument(server, credentials)), { mode: 0o600 });
}

export function kubeConfigFor(server: string, token?: string, caPem?: string): KubeConfig {
  const kc = new PooledKubeConfig();
  const trust = caPem ? { caData: Buffer.from(caPem).toString('base64') } : { skipTLSVerify: true };
  kc.loadFromOptions({
    clusters: [{ name: 'vcuda-sim', server, ...trust }],
    users: [{ name: 'vcuda-sim-user', ...(token ? { token } : {}) }],
    contexts: [{ name: 'vcuda-sim', cluster: 'vcuda-sim', user: 'vcuda-sim-user' }],
    currentContext: 'vcuda-sim',
  });
  return kc;
}
