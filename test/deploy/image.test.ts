/**
 * deploy/Dockerfile's image, listed file by file: the test builds dist/ the way the Dockerfile's
 * build stage does (`npm run build`, into a scratch folder), applies the final stage's COPY lines to
 * it and to the checkout, and checks the result. The image must hold no test code (no tests,
 * testing/, test/, sim/, test databases, TypeScript sources) and everything the compiled command
 * loads: each module it imports and each file it reads beside itself.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { deployDir, repoRoot } from './manifests.js';

const APP = '/opt/vcuda/app';
const dockerfile = readFileSync(join(deployDir, 'Dockerfile'), 'utf8');
const copied = [...dockerfile.matchAll(/^COPY --from=build \/src\/(\S+) (\S+)$/gm)].map((m) => ({
  from: m[1] as string,
  to: posix.resolve(APP, m[2] as string),
}));
// Inside the repository, so the compiled modules resolve node_modules as they do in the image.
const built = join(repoRoot, 'node_modules/.cache/vcuda-image-test/dist');

function walk(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).flatMap((name) => walk(join(path, name)));
}

/** Image path → the file in the checkout or the scratch build it comes from (node_modules apart). */
function imageFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const { from, to } of copied) {
    if (from === 'node_modules' || from.startsWith('native/build/')) continue;
    const source = from.startsWith('dist') ? join(built, relative('dist', from)) : join(repoRoot, from);
    for (const file of walk(source)) files.set(posix.join(to, relative(source, file)), file);
  }
  return files;
}

/** Relative imports and `import.meta.url` reads in one compiled module, as image paths. */
function dependencies(imagePath: string, text: string): { modules: string[]; assets: string[] } {
  const at = (spec: string) => posix.resolve(posix.dirname(imagePath), spec);
  const statics = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s*['"](\.{1,2}\/[^'"]+)['"]/g)];
  const dynamics = [...text.matchAll(/import\(['"](\.{1,2}\/[^'"]+)['"]\)/g)];
  const modules = [...statics, ...dynamics].map((m) => at(m[1] as string));
  const urls = [...text.matchAll(/new URL\(['"`](\.{1,2}\/[^'"`$]+)[^)]*, import\.meta\.url\)/g)];
  const joins = [...text.matchAll(/join\(dirname\(fileURLToPath\(import\.meta\.url\)\), ['"]([^'"]+)['"]\)/g)];
  return { modules, assets: [...urls, ...joins].map((m) => at((m[1] as string).replace(/^(?!\.)/, './'))) };
}

describe('the image', () => {
  let files: Map<string, string>;
  beforeAll(() => {
    execFileSync(process.execPath, [join(repoRoot, 'deploy/build-dist.mjs'), '--out', built], { stdio: 'pipe' });
    files = imageFiles();
  }, 120_000);

  it('holds no test code, no simulator and no TypeScript sources', () => {
    expect(files.size).toBeGreaterThan(100);
    const forbidden = [...files.keys()].filter((path) =>
      [
        /\.test\.[jt]s$/,
        /\/testing\//,
        /\/testdata\//,
        /\/sim\//,
        /^\/opt\/vcuda\/app\/test\//,
        /test-databases/,
        /\.ts$/,
      ].some((rule) => rule.test(path)),
    );
    expect(forbidden).toEqual([]);
  });

  it('holds every module and file the compiled command loads', () => {
    const seen = new Set<string>();
    const missing: string[] = [];
    const visit = (path: string, from: string) => {
      if (seen.has(path)) return;
      seen.add(path);
      const source = files.get(path);
      if (!source) return void missing.push(`${path} (imported by ${from})`);
      if (!path.endsWith('.js')) return;
      const { modules, assets } = dependencies(path, readFileSync(source, 'utf8'));
      // `vcuda local` and `vcuda whatif` load sim/ on demand; the image leaves it out on purpose.
      for (const module of modules.filter((m) => !m.startsWith(`${APP}/dist/sim/`))) visit(module, path);
      for (const asset of assets) {
        const present = [...files.keys()].some((p) => p === asset || p.startsWith(`${asset}/`));
        if (!present) missing.push(`${asset} (read by ${path})`);
      }
    };
    expect(files.has(`${APP}/bin/vcuda.js`)).toBe(true);
    visit(`${APP}/dist/cli/main.js`, 'bin/vcuda.js');
    expect(seen.size).toBeGreaterThan(50);
    expect(missing).toEqual([]);
  });

  it('runs the compiled command without tsx', () => {
    const version = execFileSync(process.execPath, [join(built, 'cli/main.js'), '--version'], { encoding: 'utf8' });
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      version: string;
      dependencies: Record<string, string>;
    };
    expect(version.trim()).toBe(pkg.version);
    expect(Object.keys(pkg.dependencies)).not.toContain('tsx');
    expect(readFileSync(join(repoRoot, 'bin/vcuda.js'), 'utf8')).toMatch(/existsSync\(sources\)[\s\S]*import\('tsx/);
  });

  it('puts libvcuda.so where the node agent’s init container copies it from', () => {
    const lib = copied.find((c) => c.from === 'native/build/libvcuda.so');
    expect(lib?.to).toBe('/opt/vcuda/lib/libvcuda.so');
    expect(dockerfile).toContain('make -C native build/libvcuda.so');
    const daemonSet = join(deployDir, 'base/node-agent-daemonset.yaml');
    if (existsSync(daemonSet)) expect(readFileSync(daemonSet, 'utf8')).toContain(lib?.to);
  });

  it('runs the vcuda command, so manifests pass its subcommand as args', () => {
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "\/opt\/vcuda\/app\/bin\/vcuda\.js"\]$/m);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
    const commands = readdirSync(join(repoRoot, 'cli')).join(' ');
    expect(commands).toContain('control-plane-command.ts');
    expect(commands).toContain('node-agent-command.ts');
  });
});
