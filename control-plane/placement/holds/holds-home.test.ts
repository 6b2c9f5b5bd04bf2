/**
 * The holds module is the only reader of the assignment annotation in the control plane: any other
 * production file that read it could count cards without the verification this module applies.
 * The binder writes it (and takes it back on undo), so it is the one other place it may appear.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const controlPlane = join(import.meta.dirname, '..', '..');
const writer = 'extender/binder.ts';
const holdsFolder = 'placement/holds/';

/** Every way a file can name the annotation's key: the contract's constant, or the key itself. */
const mentionsKey = /vcudaAnnotations\s*(\.\s*assignment\b|\[\s*['"`]assignment['"`]\s*\])|vcuda\.io\/assignment\b/;

function productionFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|js|mjs)$/.test(f) && !/\.test\.ts$/.test(f))
    .map((f) => relative(controlPlane, join(dir, f)).split('\\').join('/'));
}

describe('the assignment annotation', () => {
  const naming = productionFiles(controlPlane).filter((f) =>
    mentionsKey.test(readFileSync(join(controlPlane, f), 'utf8')),
  );

  it('is read only in the holds module and written only by the binder', () => {
    const elsewhere = naming.filter((f) => f !== writer && !f.startsWith(holdsFolder));
    expect(elsewhere).toEqual([]);
  });

  it('is found where it is meant to be (the scan sees the files it checks)', () => {
    expect(naming).toContain(writer);
    expect(naming.some((f) => f.startsWith(holdsFolder))).toBe(true);
  });
});
