#!/usr/bin/env node
// The `vcuda` command. It runs the compiled JavaScript in dist/: what the npm package and the image
// ship, and what a checkout builds on `npm ci` (the prepare script) or `npm run build`. Where the
// TypeScript sources sit beside it (a checkout) and are not what that build compiled, or
// VCUDA_FROM_SOURCES=1, it runs them through tsx instead, so an edit is never hidden behind a
// stale build; tsx, a development dependency, is never loaded elsewhere.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const sources = new URL('../cli/main.ts', import.meta.url);
const compiled = new URL('../dist/cli/main.js', import.meta.url);

async function useSources() {
  if (process.env.VCUDA_FROM_SOURCES === '1' || !existsSync(compiled)) return true;
  const { buildIsFresh } = await import('../deploy/build-freshness.mjs');
  return !buildIsFresh(fileURLToPath(new URL('..', import.meta.url)));
}

if (existsSync(sources) && (await useSources())) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(sources.href);
} else {
  await import(compiled.href);
}
