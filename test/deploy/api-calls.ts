/**
 * Which Kubernetes API calls the code makes, derived from the source: every call of a generated
 * @kubernetes/client-node API method (its HTTP verb and path read from the library itself) and
 * every path handed to an informer or a watch. Turned into RBAC (verb, group, resource) triples.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './manifests.js';

export type ApiCall = {
  verb: string;
  group: string;
  /** `pods`, or `pods/binding` for a subresource. */
  resource: string;
  /** Where in the source, for messages. */
  where: string;
  via: string;
};

type Endpoint = { httpMethod: string; path: string };

const genDir = join(repoRoot, 'node_modules/@kubernetes/client-node/dist/gen/apis');

let endpointsCache: Map<string, Endpoint> | undefined;

/** Every generated API method name → its HTTP method and path, read from the library's code. */
export function clientEndpoints(): Map<string, Endpoint> {
  if (endpointsCache) return endpointsCache;
  const out = new Map<string, Endpoint>();
  for (const f of readdirSync(genDir).filter((x) => x.endsWith('Api.js'))) {
    const text = readFileSync(join(genDir, f), 'utf8');
    const re = /async (\w+)\([^)]*\) \{[\s\S]*?const localVarPath = '([^']+)'[\s\S]*?HttpMethod\.(\w+)/g;
    for (const m of text.matchAll(re)) {
      const [, name, path, httpMethod] = m as unknown as [string, string, string, string];
      if (!out.has(name)) out.set(name, { httpMethod, path });
    }
  }
  endpointsCache = out;
  return out;
}

/** `/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale` → group, resource, named. */
export function parseApiPath(path: string): { group: string; resource: string; isNamed: boolean } | undefined {
  const clean = path.split('?')[0] as string;
  const parts = clean.split('/').filter(Boolean);
  let rest: string[];
  let group: string;
  if (parts[0] === 'api' && parts[1]) {
    group = '';
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts[1] && parts[2]) {
    group = parts[1];
    rest = parts.slice(3);
  } else {
    return undefined;
  }
  if (rest[0] === 'watch') rest = rest.slice(1);
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [resource, name, sub] = rest;
  if (!resource) return undefined;
  return { group, resource: sub ? `${resource}/${sub}` : resource, isNamed: name !== undefined };
}

function verbOf(httpMethod: string, isNamed: boolean): string {
  switch (httpMethod) {
    case 'GET':
      return isNamed ? 'get' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return isNamed ? 'delete' : 'deletecollection';
    default:
      return httpMethod.toLowerCase();
  }
}

/** Production sources of a component: tests, test support and the simulator excluded. */
export function sourceFiles(dirs: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        if (!['testing', 'testdata', 'node_modules', 'proto'].includes(e.name)) walk(p);
      } else if (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts') && !e.name.endsWith('.d.ts')) {
        out.push(p);
      }
    }
  };
  for (const d of dirs) walk(join(repoRoot, d));
  return out.sort();
}

/** Every Kubernetes API call in these source files. */
export function findApiCalls(files: readonly string[]): ApiCall[] {
  const endpoints = clientEndpoints();
  const calls: ApiCall[] = [];
  for (const file of files) {
    const lines = readFileSync(file, 'utf8').split('\n');
    const where = (i: number) => `${file.slice(repoRoot.length + 1)}:${i + 1}`;
    lines.forEach((line, i) => {
      if (/^\s*(\/\/|\*|\/\*)/.test(line)) return;
      for (const m of line.matchAll(/\.(\w+)\s*\(/g)) {
        const name = m[1] as string;
        const ep = endpoints.get(name);
        if (!ep) continue;
        const parsed = parseApiPath(ep.path);
        if (!parsed) continue;
        calls.push({
          verb: verbOf(ep.httpMethod, parsed.isNamed),
          group: parsed.group,
          resource: parsed.resource,
          where: where(i),
          via: name,
        });
      }
    });
    // Informers and watches (the path may sit on the next line): a list, then a long-lived watch.
    const text = lines.join('\n');
    const watchRe = /(?:makeInformer(?:<[^>]*>)?\(\s*[^,]+,\s*|\.watch\(\s*)['`](\/apis?\/[^'`$?]+)/g;
    for (const m of text.matchAll(watchRe)) {
      const parsed = parseApiPath(m[1] as string);
      if (!parsed) continue;
      const line = text.slice(0, m.index).split('\n').length - 1;
      for (const verb of ['list', 'watch']) {
        calls.push({ verb, group: parsed.group, resource: parsed.resource, where: where(line), via: 'watch' });
      }
    }
  }
  return calls;
}
