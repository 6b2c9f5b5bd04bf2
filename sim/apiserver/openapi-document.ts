/**
 * A minimal OpenAPI v3 index and per-group-version documents. kubectl reads them only to learn
 * that the server validates fields itself (`fieldValidation` on PATCH of each kind); with that
 * it skips client-side schema validation, which would need the full Kubernetes schema.
 */
import { resourceTypes } from './resource-registry.js';

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

export function openApiV3Index() {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const t of resourceTypes) {
    const p = gvPath(t.group, t.version);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=sim1` };
  }
  return { paths };
}

export function openApiV3Document(path: string) {
  const types = resourceTypes.filter((t) => gvPath(t.group, t.version) === path);
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
  return { openapi: '3.0.0', info: { title: 'vcuda sim', version: 'v1.26.5' }, paths, components: { schemas: {} } };
}
