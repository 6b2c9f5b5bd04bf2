import { readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { reviewSchema } from './admission-review.js';
import { isWellFormedReview } from './admission-shape.js';

const dir = new URL('./testdata/kubernetes-1.26/', import.meta.url);
const fixtures = readdirSync(dir)
  .filter((f) => f.startsWith('admission-') && f.endsWith('.json'))
  .map((f) => [f, JSON.parse(readFileSync(new URL(f, dir), 'utf8'))] as const);

type Path = (string | number)[];

/** Every path to a value in a JSON document (objects and arrays included). */
function listPaths(value: unknown, prefix: Path = []): Path[] {
  if (typeof value !== 'object' || value === null) return [prefix];
  const keys = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
  return [prefix, ...keys.flatMap((k) => listPaths((value as Record<string | number, unknown>)[k], [...prefix, k]))];
}

const DELETE = Symbol('delete');

function edit(doc: unknown, path: Path, value: unknown): unknown {
  const copy = structuredClone(doc);
  if (path.length === 0) return value === DELETE ? undefined : value;
  let parent = copy as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = path[path.length - 1] as string | number;
  if (value === DELETE) delete parent[last];
  else parent[last] = value;
  return copy;
}

const oddValues = [DELETE, null, '', 'x', 'v1', 'Pod', 0, -1, 1.5, true, false, [], {}, ['a'], { a: 1 }, [{}]];

describe('isWellFormedReview', () => {
  it.each(fixtures)('accepts the real 1.26 review %s', (_name, review) => {
    expect(isWellFormedReview(review)).toBe(true);
    expect(reviewSchema.safeParse(review).success).toBe(true);
  });

  it('rejects what the schema rejects, whatever one field is changed to', () => {
    const cases = fixtures.flatMap(([, review]) => listPaths(review).map((path) => [review, path] as const));
    fc.assert(
      fc.property(fc.constantFrom(...cases), fc.constantFrom(...oddValues), ([review, path], value) => {
        const body = edit(review, path, value);
        // Stricter than zod is allowed (zod then answers); looser is not.
        if (isWellFormedReview(body)) expect(reviewSchema.safeParse(body).success).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it.each([
    ['an empty container list', ['request', 'object', 'spec', 'containers'], []],
    ['a container without a name', ['request', 'object', 'spec', 'containers', 0, 'name'], ''],
    ['a numeric annotation', ['request', 'object', 'metadata', 'annotations'], { a: 1 }],
    ['a boolean limit', ['request', 'object', 'spec', 'containers', 0, 'resources', 'limits'], { a: true }],
    ['a null name', ['request', 'name'], null],
    ['a Deployment', ['request', 'kind', 'kind'], 'Deployment'],
    ['an unknown operation', ['request', 'operation'], 'PATCH'],
    ['a string dryRun', ['request', 'dryRun'], 'yes'],
    ['a numeric group', ['request', 'userInfo', 'groups'], [1]],
  ] as const)('rejects %s', (_name, path, value) => {
    const share = fixtures.find(([f]) => f === 'admission-mutate-create-share.json')?.[1];
    expect(isWellFormedReview(edit(share, [...path], value))).toBe(false);
  });

  it('ignores the fields vcuda does not read', () => {
    const share = fixtures.find(([f]) => f === 'admission-mutate-create-share.json')?.[1];
    expect(isWellFormedReview(edit(share, ['request', 'object', 'metadata', 'managedFields'], 7))).toBe(true);
    expect(isWellFormedReview(edit(share, ['request', 'object', 'status'], 'x'))).toBe(true);
  });
});
