/**
 * The discovery documents kubectl and client libraries read before anything else: API versions,
 * groups and resource lists, the server's version, health endpoints and the OpenAPI v3 index.
 */
import { openApiV3Document, openApiV3Index } from './openapi-document.js';
import { apiGroup, apiGroupList, apiResourceList, coreVersions } from './resource-registry.js';

const VERSION = {
  major: '1',
  minor: '26',
  gitVersion: 'v1.26.5-vcuda-sim',
  platform: 'linux/amd64',
  goVersion: 'go1.20',
  compiler: 'gc',
};

/** The document at `path` (a string for the plain-text health endpoints); undefined: none there. */
export function discoveryDocument(path: string, serverAddress: string): unknown {
  const clean = path.replace(/\/+$/, '') || '/';
  if (clean === '/api') return coreVersions(serverAddress);
  if (clean === '/apis') return apiGroupList();
  if (clean === '/version') return VERSION;
  if (clean === '/healthz' || clean === '/livez' || clean === '/readyz') return 'ok';
  if (clean === '/openapi/v3') return openApiV3Index();
  if (clean.startsWith('/openapi/v3/')) return openApiV3Document(clean.slice('/openapi/v3/'.length));
  const parts = clean.split('/').filter(Boolean);
  if (parts[0] === 'api' && parts.length === 2) return apiResourceList('', parts[1]!);
  if (parts[0] === 'apis' && parts.length === 2) return apiGroup(parts[1]!);
  if (parts[0] === 'apis' && parts.length === 3) return apiResourceList(parts[1]!, parts[2]!);
  return undefined;
}
