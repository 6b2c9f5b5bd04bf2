/**
 * deploy/ is one kustomize base plus optional overlays: every manifest is listed by a
 * kustomization, every listed file exists, every overlay builds on the base, and (where kubectl
 * is installed) `kubectl kustomize` builds each of them.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  deployDir,
  filesOfKustomization,
  type K8sObject,
  kustomizationDirs,
  nameOf,
  objectsOfKustomization,
  readKustomization,
  rel,
  repoRoot,
  yamlFiles,
} from './manifests.js';
import { validateObject } from './object-validation.js';

const base = join(deployDir, 'base');
const overlays = kustomizationDirs().filter((d) => relative(deployDir, d).startsWith('overlays/'));

describe('kustomize layout', () => {
  it('names only files that exist, in the base and in every overlay', () => {
    for (const dir of [base, ...overlays]) expect(() => filesOfKustomization(dir), rel(dir)).not.toThrow();
  });

  it('lists every manifest of deploy/base and deploy/scheduler in the base', () => {
    const listed = filesOfKustomization(base);
    const manifests = yamlFiles().filter((f) => /^deploy\/(base|scheduler)\//.test(rel(f)));
    expect(manifests.filter((f) => !listed.has(f)).map(rel)).toEqual([]);
  });

  it('includes the node agent DaemonSet and the scheduler configuration owned by other components', () => {
    const k = readKustomization(base);
    expect(k.resources).toContain('node-agent-daemonset.yaml');
    expect(k.resources).toContain('../scheduler');
    const scheduler = readKustomization(join(deployDir, 'scheduler'));
    expect(scheduler.configMapGenerator?.flatMap((g) => g.files ?? [])).toContain('kube-scheduler-config.yaml');
  });

  it('lists every manifest of an overlay in that overlay', () => {
    for (const dir of overlays) {
      const listed = filesOfKustomization(dir);
      const own = yamlFiles(dir);
      expect(own.filter((f) => !listed.has(f)).map(rel), rel(dir)).toEqual([]);
    }
  });

  it.each(overlays.map((d) => [rel(d), d]))('%s builds on the base', (_name, dir) => {
    expect(readKustomization(dir).resources).toContain('../../base');
  });

  it('never lists the same object twice in one build', () => {
    for (const dir of [base, ...overlays]) {
      const ids = objectsOfKustomization(dir).map(
        ({ object: o }) => `${o.apiVersion}/${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`,
      );
      expect(
        ids.filter((id, i) => ids.indexOf(id) !== i),
        rel(dir),
      ).toEqual([]);
    }
  });

  it('has a Grafana dashboard that parses', async () => {
    const path = join(deployDir, 'grafana/vcuda.json');
    expect(existsSync(path)).toBe(true);
    const { readFileSync } = await import('node:fs');
    const dash = JSON.parse(readFileSync(path, 'utf8')) as { panels: { targets?: { expr: string }[] }[] };
    expect(dash.panels.length).toBeGreaterThan(0);
  });
});

const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;

/**
 * Builds with the real kustomize (kubectl's) on a copy of deploy/, then validates what came out
 * (patches applied, generated names included). Without kubectl the checks above still run.
 */
describe.skipIf(!kubectl)('kubectl kustomize', () => {
  let copy = '';
  beforeAll(() => {
    copy = mkdtempSync(join(tmpdir(), 'vcuda-deploy-'));
    cpSync(deployDir, join(copy, 'deploy'), { recursive: true });
  });
  afterAll(() => rmSync(copy, { recursive: true, force: true }));

  it.each([base, ...overlays].map((d) => [rel(d), d]))('builds %s into valid objects', async (name, dir) => {
    const out = execFileSync('kubectl', ['kustomize', join(copy, name)], { cwd: repoRoot, encoding: 'utf8' });
    const built = parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
    expect(built.map((o) => o.kind).sort()).toEqual(
      objectsOfKustomization(dir)
        .map((o) => o.object.kind)
        .sort(),
    );
    const problems: string[] = [];
    for (const o of built) for (const p of await validateObject(o)) problems.push(`${nameOf(o)}: ${p}`);
    expect(problems).toEqual([]);
  });
});
