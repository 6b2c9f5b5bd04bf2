/**
 * Reads deploy/ the way kustomize does, without kustomize: follows each kustomization's
 * resources (files and directories), generators and patches, and returns every object with the
 * file it came from. Enough for the checks in test/deploy; `kubectl kustomize` is the real build.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const deployDir = join(repoRoot, 'deploy');

export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
};

export type LoadedObject = { file: string; object: K8sObject };

export type Kustomization = {
  resources?: string[];
  components?: string[];
  patches?: { path?: string; patch?: string; target?: Record<string, string> }[];
  configMapGenerator?: { name: string; namespace?: string; files?: string[]; literals?: string[] }[];
  secretGenerator?: { name: string; namespace?: string; files?: string[]; literals?: string[] }[];
  generatorOptions?: { labels?: Record<string, string> };
};

/** Repository-relative path, for messages. */
export function rel(path: string): string {
  return relative(repoRoot, path);
}

export function readYamlDocs(path: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'));
  for (const d of docs) {
    if (d.errors.length > 0) throw new Error(`${rel(path)}: ${d.errors.map((e) => e.message).join('; ')}`);
  }
  return docs.map((d) => d.toJS()).filter((d) => d !== null && d !== undefined);
}

export function readKustomization(dir: string): Kustomization {
  const path = join(dir, 'kustomization.yaml');
  if (!existsSync(path)) throw new Error(`${rel(dir)} has no kustomization.yaml`);
  return readYamlDocs(path)[0] as Kustomization;
}

/** Every file a kustomization build reads, starting from `dir` (the kustomization files included). */
export function filesOfKustomization(dir: string, seen = new Set<string>()): Set<string> {
  const k = readKustomization(dir);
  seen.add(join(dir, 'kustomization.yaml'));
  const refs = [...(k.resources ?? []), ...(k.components ?? [])];
  for (const r of refs) {
    const p = resolve(dir, r);
    if (!existsSync(p)) throw new Error(`${rel(dir)}/kustomization.yaml lists ${r}, which does not exist`);
    if (statSync(p).isDirectory()) filesOfKustomization(p, seen);
    else seen.add(p);
  }
  for (const patch of k.patches ?? []) {
    if (patch.path) {
      const p = resolve(dir, patch.path);
      if (!existsSync(p)) throw new Error(`${rel(dir)}/kustomization.yaml patches ${patch.path}, which does not exist`);
      seen.add(p);
    }
  }
  for (const g of [...(k.configMapGenerator ?? []), ...(k.secretGenerator ?? [])]) {
    for (const f of g.files ?? []) {
      const p = resolve(dir, f.includes('=') ? f.slice(f.indexOf('=') + 1) : f);
      if (!existsSync(p)) throw new Error(`${rel(dir)}/kustomization.yaml generator ${g.name} reads ${f}, missing`);
      seen.add(p);
    }
  }
  return seen;
}

/** The objects of a kustomization: its resources (recursively) and its generated ConfigMaps/Secrets. */
export function objectsOfKustomization(dir: string): LoadedObject[] {
  const k = readKustomization(dir);
  const out: LoadedObject[] = [];
  for (const r of [...(k.resources ?? []), ...(k.components ?? [])]) {
    const p = resolve(dir, r);
    if (statSync(p).isDirectory()) out.push(...objectsOfKustomization(p));
    else for (const object of readYamlDocs(p)) out.push({ file: rel(p), object: object as K8sObject });
  }
  const generated = (kind: 'ConfigMap' | 'Secret', g: NonNullable<Kustomization['configMapGenerator']>[number]) => {
    const data: Record<string, string> = {};
    for (const f of g.files ?? []) {
      const [key, path] = f.includes('=') ? [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)] : [f, f];
      data[key.split('/').pop() as string] = readFileSync(resolve(dir, path), 'utf8');
    }
    for (const l of g.literals ?? []) data[l.slice(0, l.indexOf('='))] = l.slice(l.indexOf('=') + 1);
    const object: K8sObject = {
      apiVersion: 'v1',
      kind,
      metadata: {
        name: g.name,
        ...(g.namespace ? { namespace: g.namespace } : {}),
        ...(k.generatorOptions?.labels ? { labels: { ...k.generatorOptions.labels } } : {}),
      },
      ...(kind === 'ConfigMap' ? { data } : { stringData: data }),
    };
    out.push({ file: `${rel(dir)}/kustomization.yaml (${kind.toLowerCase()}Generator ${g.name})`, object });
  };
  for (const g of k.configMapGenerator ?? []) generated('ConfigMap', g);
  for (const g of k.secretGenerator ?? []) generated('Secret', g);
  const deleted = deletedByPatches(dir, k);
  return out.filter(({ object }) => !deleted.some((d) => isSameObject(d, object)));
}

/** The objects a kustomization's `$patch: delete` patches remove (other patches change, not remove). */
function deletedByPatches(dir: string, k: Kustomization): K8sObject[] {
  return (k.patches ?? []).flatMap((p) => {
    const docs = p.path
      ? readYamlDocs(resolve(dir, p.path))
      : parseAllDocuments(p.patch ?? '').map((d) => d.toJS() as unknown);
    return docs.filter((d): d is K8sObject => (d as { $patch?: unknown } | null)?.$patch === 'delete');
  });
}

/** Whether a patch names the object: same kind and name, and the namespace when the patch gives one. */
function isSameObject(patch: K8sObject, o: K8sObject): boolean {
  return (
    patch.kind === o.kind &&
    patch.metadata.name === o.metadata.name &&
    (patch.metadata.namespace === undefined || patch.metadata.namespace === o.metadata.namespace)
  );
}

/** Every directory under deploy/ holding a kustomization.yaml. */
export function kustomizationDirs(root = deployDir): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    if (existsSync(join(d, 'kustomization.yaml'))) out.push(d);
    for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory()) walk(join(d, e.name));
  };
  walk(root);
  return out.sort();
}

/** Every YAML file under deploy/. */
export function yamlFiles(root = deployDir): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.ya?ml$/.test(e.name)) out.push(p);
    }
  };
  walk(root);
  return out.sort();
}

export function nameOf(o: K8sObject): string {
  return `${o.kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name}`;
}
