import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Program } from '@oxc-project/types';
// TypeScript 7's compiler has no in-process parser; vitest's bundler ships oxc's, which reads TypeScript exactly.
import { parseAst } from 'rolldown/parseAst';

/** Folders that never hold production code: tests and their support, build output, dependencies. */
const SKIPPED_DIRS = new Set(['node_modules', 'test', 'build', 'dist', 'results']);

/** Folders that never hold the repository's own TypeScript: build output and dependencies. */
const NOT_SOURCE_DIRS = new Set(['node_modules', 'build', 'dist', 'results']);

function listFiles(root: string, skippedDirs: ReadonlySet<string>, keep: (name: string) => boolean): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = dir === '' ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (!skippedDirs.has(entry.name) && !entry.name.startsWith('.')) walk(path);
      } else if (keep(entry.name)) {
        found.push(path);
      }
    }
  };
  walk('');
  return found.sort();
}

/** Every production TypeScript file under `root` (tests, test support and build output excluded), relative to `root`. */
export function listProductionFiles(root: string): string[] {
  return listFiles(root, SKIPPED_DIRS, isProductionSource);
}

/** Every TypeScript file under `root`, tests and their support included, relative to `root`. */
export function listTypeScriptFiles(root: string): string[] {
  return listFiles(root, NOT_SOURCE_DIRS, (name) => name.endsWith('.ts') && !name.endsWith('.d.ts'));
}

function isProductionSource(name: string): boolean {
  return name.endsWith('.ts') && !name.endsWith('.d.ts') && !name.endsWith('.test.ts') && !name.endsWith('.bench.ts');
}

export function parseTypeScript(sourceText: string, fileName: string): Program {
  return parseAst(sourceText, { lang: 'ts' }, fileName);
}

export function readSource(root: string, file: string): string {
  return readFileSync(resolve(root, file), 'utf8');
}

/** The repository's root, from this folder (test/structure/). */
export const REPOSITORY_ROOT = resolve(import.meta.dirname, '../..');
