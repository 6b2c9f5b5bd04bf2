#!/usr/bin/env bash
# Prepares .gpu/ (git-ignored) for a GPU machine that has no Node.js and no registry: a compressed
# node binary, the card sampler bundled into one file, and koffi with its linux-x64 build. Carry
# .gpu with the working tree and run native/test/gpu/all.sh there.
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -d node_modules/esbuild ] || { echo "run npm ci first"; exit 1; }
rm -rf .gpu && mkdir -p .gpu/node_modules/@koromix
node_modules/esbuild/bin/esbuild test/compute/sampler-child.ts --bundle --platform=node \
  --format=esm --target=node20 --external:koffi --log-level=warning \
  --banner:js="import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" --outfile=.gpu/sampler-child.mjs
cp -r node_modules/koffi .gpu/node_modules/
mkdir -p .gpu/node_modules/@koromix/koffi-linux-x64
cp -r node_modules/@koromix/koffi-linux-x64/*.js* node_modules/@koromix/koffi-linux-x64/linux_x64 \
  .gpu/node_modules/@koromix/koffi-linux-x64/
xz -T0 -6 -c "$(readlink -f "$(command -v node)")" >.gpu/node.xz
du -sh .gpu
