/**
 * Every object in the base and every overlay passes the Kubernetes schema of its kind
 * (kubernetes-models) with no unknown field; custom resources pass the schema of the fields used.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deployDir, kustomizationDirs, nameOf, objectsOfKustomization, rel } from './manifests.js';
import { unknownFields, validateObject } from './object-validation.js';

const builds = kustomizationDirs().filter((d) => !d.endsWith('/scheduler'));
const all = builds.flatMap((dir) => objectsOfKustomization(dir).map((o) => ({ build: rel(dir), ...o })));
const unique = [...new Map(all.map((o) => [`${o.file}|${nameOf(o.object)}`, o])).values()];

describe('manifest schemas', () => {
  it('reads objects from every build', () => {
    expect(builds.map(rel)).toContain('deploy/base');
    expect(unique.length).toBeGreaterThan(10);
  });

  it.each(unique.map((o) => [`${o.file}: ${nameOf(o.object)}`, o.object]))('%s is valid', async (_name, object) => {
    expect(await validateObject(object)).toEqual([]);
  });

  it('catches what the schema allows but Kubernetes drops or refuses', async () => {
    const deployment = objectsOfKustomization(join(deployDir, 'base')).find(
      (o) => o.object.kind === 'Deployment',
    )?.object;
    expect(deployment).toBeDefined();
    const typo = structuredClone(deployment) as Record<string, Record<string, unknown>>;
    (typo.spec as Record<string, unknown>).replicass = 3;
    expect(unknownFields(typo as never)).toEqual(['spec.replicass']);
    const wrongType = structuredClone(deployment) as Record<string, Record<string, unknown>>;
    (wrongType.spec as Record<string, unknown>).replicas = 'two';
    expect((await validateObject(wrongType as never)).join('\n')).toMatch(/replicas/);
    expect(await validateObject({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } })).toEqual([
      'example.com/v1 Widget is neither a built-in kind nor a custom resource known to this test',
    ]);
  });
});
