/**
 * The JWKS a node agent verifies assignments with, as the control plane publishes it in its
 * ConfigMap, read the way a mounted ConfigMap file changes: fresh within a second, not one API
 * round trip per PreStartContainer.
 */
import type { JSONWebKeySet } from 'jose';
import { JWKS_CONFIGMAP_KEY, JWKS_CONFIGMAP_NAME } from '../../control-plane/signing-keys.js';
import type { KubeClient } from '../kube-client.js';

const FRESH_MS = 1000;

/**
 * Reads ConfigMap `vcuda-jwks` of `namespace`; until it exists, `fallback` (e.g. a running
 * replica's own keys) or an empty set, which verifies nothing. Only a published set is kept for
 * a second: a node that asked before the control plane published must not wait a second more.
 */
export function publishedJwks(
  client: KubeClient,
  opts: { namespace?: string; fallback?: () => JSONWebKeySet | undefined } = {},
): () => Promise<JSONWebKeySet> {
  const path = `/api/v1/namespaces/${opts.namespace ?? 'vcuda-system'}/configmaps/${JWKS_CONFIGMAP_NAME}`;
  let cache: { at: number; jwks: JSONWebKeySet } | undefined;
  return async () => {
    if (cache && Date.now() - cache.at < FRESH_MS) return cache.jwks;
    const cm = await client.get(path).catch(() => undefined);
    const text = (cm?.['data'] as Record<string, string> | undefined)?.[JWKS_CONFIGMAP_KEY];
    if (!text) return opts.fallback?.() ?? { keys: [] };
    const jwks = JSON.parse(text) as JSONWebKeySet;
    cache = { at: Date.now(), jwks };
    return jwks;
  };
}
