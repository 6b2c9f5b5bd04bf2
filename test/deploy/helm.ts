/**
 * The Helm chart under test: a real Helm 4 binary (../shared/helm-4, unpacked once per process),
 * rendering deploy/helm/vcuda, and the rules that make a rendered object comparable with its
 * kustomize twin (Helm's own labels and rollout checksums aside, both must say the same).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { parseAllDocuments } from 'yaml';
import { deployDir, type K8sObject, repoRoot } from './manifests.js';

export const chartDir = join(deployDir, 'helm', 'vcuda');
const HELM_GZ = join(repoRoot, '..', 'shared', 'helm-4', 'bin', 'helm.gz');

/** Why Helm cannot run here, or undefined when it can. */
export function helmSkipReason(): string | undefined {
  if (process.env['VCUDA_HELM']) return existsSync(process.env['VCUDA_HELM']) ? undefined : 'VCUDA_HELM names no file';
  if (existsSync(HELM_GZ)) return undefined;
  if (spawnSync('helm', ['version', '--short'], { encoding: 'utf8' }).status === 0) return undefined;
  return `no Helm: neither ${HELM_GZ} nor helm on PATH`;
}

let helmPath: string | undefined;

/** The helm binary: $VCUDA_HELM, the shared Helm 4 (unpacked to a temp dir), or helm on PATH. */
export function helmBinary(): string {
  if (helmPath) return helmPath;
  if (process.env['VCUDA_HELM']) helmPath = process.env['VCUDA_HELM'];
  else if (existsSync(HELM_GZ)) {
    const dir = mkdtempSync(join(tmpdir(), 'vcuda-helm-'));
    helmPath = join(dir, 'helm');
    writeFileSync(helmPath, gunzipSync(readFileSync(HELM_GZ)));
    chmodSync(helmPath, 0o755);
  } else helmPath = 'helm';
  return helmPath;
}

export type HelmResult = { status: number; stdout: string; stderr: string };

export function helm(args: string[], env: NodeJS.ProcessEnv = process.env): HelmResult {
  const r = spawnSync(helmBinary(), args, { encoding: 'utf8', env, maxBuffer: 32 * 1024 * 1024 });
  return { status: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

export type RenderOptions = {
  namespace?: string;
  /** Flattened values (`--set-json key=JSON`): `{ 'image.repository': 'x' }`. */
  values?: Record<string, unknown>;
  kubeVersion?: string;
  /** Extra arguments (`--kubeconfig`, `--dry-run=server`). */
  args?: string[];
};

/** `helm template` arguments for a release "vcuda" of the chart. */
export function templateArgs(opts: RenderOptions = {}): string[] {
  const args = ['template', 'vcuda', chartDir, '--namespace', opts.namespace ?? 'vcuda-system'];
  if (opts.kubeVersion) args.push('--kube-version', opts.kubeVersion);
  for (const [k, v] of Object.entries(opts.values ?? {})) args.push('--set-json', `${k}=${JSON.stringify(v)}`);
  return [...args, ...(opts.args ?? [])];
}

/** The rendered manifest text; throws with Helm's message when rendering fails. */
export function renderText(opts: RenderOptions = {}): string {
  return execFileSync(helmBinary(), templateArgs(opts), { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
}

export function parseManifest(text: string): K8sObject[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null && o !== undefined);
}

export function render(opts: RenderOptions = {}): K8sObject[] {
  return parseManifest(renderText(opts));
}

/** Labels Helm adds to every object and pod template (release bookkeeping, not behaviour). */
const HELM_LABELS = [
  'app.kubernetes.io/instance',
  'app.kubernetes.io/version',
  'app.kubernetes.io/managed-by',
  'helm.sh/chart',
];

function stripHelmLabels(meta: { labels?: Record<string, string>; annotations?: Record<string, string> } | undefined) {
  if (!meta) return;
  for (const l of HELM_LABELS) delete meta.labels?.[l];
  if (meta.annotations) {
    for (const a of Object.keys(meta.annotations)) if (a.startsWith('checksum/')) delete meta.annotations[a];
    if (Object.keys(meta.annotations).length === 0) delete meta.annotations;
  }
}

/** A copy of a chart object without Helm's bookkeeping labels and checksum annotations. */
export function withoutHelmBookkeeping(o: K8sObject): K8sObject {
  const copy = structuredClone(o);
  stripHelmLabels(copy.metadata);
  const template = (copy['spec'] as { template?: { metadata?: Parameters<typeof stripHelmLabels>[0] } } | undefined)
    ?.template;
  stripHelmLabels(template?.metadata);
  return copy;
}

/** `kind namespace/name` of every object, sorted. */
export function identities(objects: K8sObject[]): string[] {
  return objects.map((o) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`).sort();
}
