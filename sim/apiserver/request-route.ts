/**
 * Turns a URL path into what it addresses: a discovery document, or a resource collection,
 * object or subresource (`/api/v1/namespaces/ns/pods/p/binding`).
 */
import { EVERY_MINOR, findResourceType, type ResourceType } from './resource-registry.js';

export type Route =
  | { kind: 'discovery'; path: string }
  | { kind: 'resource'; type: ResourceType; namespace?: string; name?: string; subresource?: string }
  | { kind: 'unknown' };

/** `minor`: the Kubernetes minor version the server plays; types it does not serve are unknown. */
export function parseRoute(pathname: string, minor = EVERY_MINOR): Route {
  const raw = pathname.split('/').filter(Boolean);
  // Decoding is the identity on a path without escapes, which nearly every request has.
  const parts = pathname.includes('%') ? raw.map(decodeURIComponent) : raw;
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) {
    if (parts.length === 2) return { kind: 'discovery', path: pathname };
    group = '';
    version = parts[1]!;
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts.length >= 3) {
    if (parts.length === 3) return { kind: 'discovery', path: pathname };
    group = parts[1]!;
    version = parts[2]!;
    rest = parts.slice(3);
  } else {
    return { kind: 'discovery', path: pathname };
  }
  // `namespaces/{ns}/{resource}...` unless the path names the namespace object itself.
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    const namespaced = findResourceType(group, version, rest[2]!, minor);
    if (namespaced?.namespaced) {
      return withName(namespaced, rest[1]!, rest.slice(3));
    }
  }
  const type = findResourceType(group, version, rest[0]!, minor);
  if (!type) return { kind: 'unknown' };
  // A namespaced kind has a cluster-wide collection (list, watch) but no object outside a namespace.
  if (type.namespaced && rest.length > 1) return { kind: 'unknown' };
  return withName(type, undefined, rest.slice(1));
}

function withName(type: ResourceType, namespace: string | undefined, rest: string[]): Route {
  if (rest.length > 2) return { kind: 'unknown' };
  const [name, subresource] = rest;
  if (subresource && !type.subresources.includes(subresource)) return { kind: 'unknown' };
  return {
    kind: 'resource',
    type,
    ...(namespace !== undefined ? { namespace } : {}),
    ...(name !== undefined ? { name } : {}),
    ...(subresource !== undefined ? { subresource } : {}),
  };
}
