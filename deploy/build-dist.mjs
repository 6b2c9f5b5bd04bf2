#!/usr/bin/env node
// `npm run build [-- --out DIR]`: compiles the production folders and sim/ (for `vcuda local` and
// `vcuda whatif` in a checkout) to dist/ with the project's TypeScript compiler, then copies the
// files the code reads beside itself at run time. tsconfig.build.json leaves out every test,
// test/ and every testing/ folder; the image then copies all of dist/ except dist/sim.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { out: { type: 'string', default: join(root, 'dist') } } });
const out = resolve(values.out);

/** Files read at run time through `import.meta.url`, relative to the repository root. */
const RUNTIME_ASSETS = ['control-plane/dashboard/assets', 'db/migrations', 'node-agent/kubelet/proto', 'package.json'];

rmSync(out, { recursive: true, force: true });
const tsc = join(root, 'node_modules/typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json'), '--outDir', out], { stdio: 'inherit' });
for (const asset of RUNTIME_ASSETS) {
  if (!existsSync(join(root, asset))) throw new Error(`build: runtime asset ${asset} is missing`);
  cpSync(join(root, asset), join(out, asset), { recursive: true });
}
