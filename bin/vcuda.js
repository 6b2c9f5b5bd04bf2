#!/usr/bin/env node
// The `vcuda` command. Runs the TypeScript sources through tsx so a clone needs no build step.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
