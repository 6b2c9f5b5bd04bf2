#!/usr/bin/env node
// The `vcuda` command. Where the TypeScript sources sit beside it (a checkout) it runs them through
// tsx, so an edit is never hidden behind a stale build; elsewhere (the image) it runs the compiled
// build in dist/ (`npm run build`), and tsx, a development dependency, is never loaded.
import { existsSync } from 'node:fs';

const sources = new URL('../cli/main.ts', import.meta.url);
if (existsSync(sources)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(sources.href);
} else {
  await import(new URL('../dist/cli/main.js', import.meta.url).href);
}
