/**
 * The discovery documents kubectl and client libraries read before anything else: API versions,
 * groups and resource lists, the server's version, health endpoints and the OpenAPI v3 index.
 */
import { openApiV3Document, openApiV3Index } from './openapi-document.js';
import { apiGroup, apiGroupList, apiResourceList, coreVersions } from './resource-registry.js';

/**
 * The Kubernetes versions the sim can claim to be: 1.26 (no matchConditions), 1.32 (with them)
 * and 1.36 (with them, and DRA's `resource.k8s.io/v1`).
 */
export type ServedVersion = '1.26' | '1.32' | '1.36';
export const DEFAULT_SERVED_VERSION: ServedVersion = '1.26';

const GIT_VERSIONS: Record<ServedVersion, { gitVersion: string; goVersion: string }> = {
  '1.26': { gitVersion: 'v1.26.5-vcuda-sim', goVersion: 'go1.20' },
  '1.32': { gitVersion: 'v1.32.13-vcuda-sim', goVersion: 'go1.23' },
  '1.36': { gitVersion: 'v1.36.3-vcuda-sim', goVersion: 'go1.26' },
};

/** The version's minor number (26, 32, 36): what decides which types are served. */
export function minorOf(version: ServedVersion): number {
  return Number(version.split('.')[1]);
}

/** `/version` as a kube-apiserver of that version answers it. */
export function versionInfo(version: ServedVersion) {
  const [major, minor] = version.split('.');
  return { major, minor, ...GIT_VERSIONS[version], platform: 'linux/amd64', compiler: 'gc' };
}

/** Webhook matchConditions are evaluated from 1.28 on (beta, on by default). */
export function servesMatchConditions(version: ServedVersion): boolean {
  return minorOf(version) >= 28;
}

/** The document at `path` (a string for the plain-text health endpoints); undefined: none there. */
export function discoveryDocument(path: string, serverAddress: string, version: ServedVersion): unknown {
  const clean = path.replace(/\/+$/, '') || '/';
  const minor = minorOf(version);
  if (clean === '/api') return coreVersions(serverAddress);
  if (clean === '/apis') return apiGroupList(minor);
  if (clean === '/version') return versionInfo(version);
  if (clean === '/healthz' || clean === '/livez' || clean === '/readyz') return 'ok';
  if (clean === '/openapi/v3') return openApiV3Index(minor);
  if (clean.startsWith('/openapi/v3/')) return openApiV3Document(clean.slice('/openapi/v3/'.length), minor);
  const parts = clean.split('/').filter(Boolean);
  if (parts[0] === 'api' && parts.length === 2) return apiResourceList('', parts[1]!, minor);
  if (parts[0] === 'apis' && parts.length === 2) return apiGroup(parts[1]!, minor);
  if (parts[0] === 'apis' && parts.length === 3) return apiResourceList(parts[1]!, parts[2]!, minor);
  return undefined;
}
