/**
 * deploy/Dockerfile carries everything the commands in the manifests run: every top-level folder
 * the CLI's sources import, libvcuda.so where the node agent's init container copies it from.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { deployDir, repoRoot } from './manifests.js';

const dockerfile = readFileSync(join(deployDir, 'Dockerfile'), 'utf8');
const copied = [...dockerfile.matchAll(/^COPY --from=build \/src\/(\S+) (\S+)$/gm)].map((m) => ({
  from: m[1] as string,
  to: m[2] as string,
}));

/** Top-level folders reachable through relative imports from the CLI entry, following every file. */
function importedFolders(): Set<string> {
  const seen = new Set<string>();
  const folders = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file) || !existsSync(file)) return;
    seen.add(file);
    folders.add(relative(repoRoot, file).split('/')[0] as string);
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
      visit(resolve(dirname(file), (m[1] as string).replace(/\.js$/, '.ts')));
    }
  };
  visit(join(repoRoot, 'cli/main.ts'));
  return folders;
}

describe('the image', () => {
  it('copies every source folder the vcuda command imports', () => {
    const folders = importedFolders();
    expect(folders.has('control-plane')).toBe(true);
    const copiedTop = new Set(copied.map((c) => c.from.split('/')[0]));
    expect([...folders].filter((f) => !copiedTop.has(f))).toEqual([]);
  });

  it('copies only paths that exist or that the native build produces', () => {
    for (const { from } of copied) {
      if (from.startsWith('native/build/')) {
        expect(dockerfile).toContain(`make -C native ${from.slice('native/'.length)}`);
      } else {
        expect(existsSync(join(repoRoot, from)), from).toBe(true);
      }
    }
  });

  it('puts libvcuda.so where the node agent’s init container copies it from', () => {
    const lib = copied.find((c) => c.from === 'native/build/libvcuda.so');
    expect(lib?.to).toBe('/opt/vcuda/lib/libvcuda.so');
    const daemonSet = join(deployDir, 'base/node-agent-daemonset.yaml');
    if (existsSync(daemonSet)) expect(readFileSync(daemonSet, 'utf8')).toContain(lib?.to);
  });

  it('runs the vcuda command, so manifests pass its subcommand as args', () => {
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "\/opt\/vcuda\/app\/bin\/vcuda\.js"\]$/m);
    const commands = readdirSync(join(repoRoot, 'cli')).join(' ');
    expect(commands).toContain('control-plane-command.ts');
    expect(commands).toContain('node-agent-command.ts');
  });
});
