/**
 * A minimal OpenAPI v3 index and per-group-version documents. kubectl reads them to learn that
 * the server validates fields itself (`fieldValidation` on PATCH of each kind), so it skips
 * client-side validation, and `kubectl explain` reads the schemas of `api/v1`: those are
 * kube-apiserver 1.32's own (`openapi-core-v1.json`: the schemas the core kinds served here
 * reach, taken unchanged from `GET /openapi/v3/api/v1`, Apache-2.0). Other groups have no schemas.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EVERY_MINOR, servedTypes } from './resource-registry.js';

let coreSchemas: Record<string, unknown> | undefined;

/** Read at the first `api/v1` request: 250 kB nobody else needs. */
function coreV1Schemas(): Record<string, unknown> {
  coreSchemas ??= JSON.parse(readFileSync(join(import.meta.dirname, 'openapi-core-v1.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  return coreSchemas;
}

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

export function openApiV3Index(minor = EVERY_MINOR) {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const t of servedTypes(minor)) {
    const p = gvPath(t.group, t.version);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=sim1` };
  }
  return { paths };
}

export function openApiV3Document(path: string, minor = EVERY_MINOR) {
  const types = servedTypes(minor).filter((t) => gvPath(t.group, t.version) === path);
  if (types.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  for (const t of types) {
    const base = `/${path}/${t.namespaced ? 'namespaces/{namespace}/' : ''}${t.resource}/{name}`;
    const gvk = { group: t.group, version: t.version, kind: t.kind };
    const parameters = ['dryRun', 'fieldManager', 'fieldValidation', 'force'].map((name) => ({
      name,
      in: 'query',
      schema: { type: 'string', uniqueItems: true },
    }));
    paths[base] = {
      patch: { 'x-kubernetes-group-version-kind': gvk, 'x-kubernetes-action': 'patch', parameters, responses: {} },
    };
  }
  const schemas = path === 'api/v1' ? coreV1Schemas() : {};
  return { openapi: '3.0.0', info: { title: 'vcuda sim', version: 'v1.26.5' }, paths, components: { schemas } };
}
