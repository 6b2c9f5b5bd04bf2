#!/usr/bin/env node
// `npm run build [-- --out DIR]`: compiles the production folders and sim/ (for `vcuda local` and
// `vcuda whatif` in a checkout) to dist/ with the project's TypeScript compiler, then copies the
// files the code reads beside itself at run time and stamps the build (build-freshness.mjs).
// tsconfig.build.json leaves out every test, test/ and every testing/ folder; the image then
// copies all of dist/ except dist/sim, the npm package all of it.
// `--prepare` (npm's prepare script, run by `npm ci` and `npm pack`): skips a build that is still
// fresh, and one that cannot happen yet (no sources or no compiler: an image's dependency layer).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildIsFresh, STAMP, stampFor } from './build-freshness.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: { out: { type: 'string', default: join(root, 'dist') }, prepare: { type: 'boolean', default: false } },
});
const out = resolve(values.out);
const tsc = join(root, 'node_modules/typescript/bin/tsc');
const tsconfig = join(root, 'tsconfig.build.json');

if (values.prepare) {
  if (!existsSync(tsconfig) || !existsSync(tsc)) {
    console.log('build: no sources or no TypeScript compiler here; skipped');
    process.exit(0);
  }
  if (buildIsFresh(root, out)) {
    console.log(`build: ${out} is up to date`);
    process.exit(0);
  }
}

/** Files read at run time through `import.meta.url`, relative to the repository root. */
const RUNTIME_ASSETS = [
  'control-plane/dashboard/assets',
  'db/migrations',
  'node-agent/kubelet/proto',
  // `kubectl explain` and OpenAPI clients of `vcuda local`'s API server.
  'sim/apiserver/openapi-core-v1.json',
  'package.json',
];

// The sources as the compiler is about to read them: a file changed during the build makes it stale.
const { include } = JSON.parse(readFileSync(tsconfig, 'utf8'));
const stamp = stampFor(root, include, Date.now());
rmSync(out, { recursive: true, force: true });
execFileSync(process.execPath, [tsc, '-p', tsconfig, '--outDir', out], { stdio: 'inherit' });
for (const asset of RUNTIME_ASSETS) {
  if (!existsSync(join(root, asset))) throw new Error(`build: runtime asset ${asset} is missing`);
  cpSync(join(root, asset), join(out, asset), { recursive: true });
}
// Last, so a failed build leaves no stamp and counts as stale.
writeFileSync(join(out, STAMP), `${JSON.stringify(stamp)}\n`);
