#!/usr/bin/env bash
# MIG on a real card, read-only: our NVML layouts against the driver, and the fake's H100 80GB /
# H200 141GB profile table (IDs, slices, instances, SMs, memory, placements) against what the card
# lists when it is in MIG mode. Never changes MIG mode or instances (a lent machine's settings stay).
#
#   native/test/gpu/mig.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
WORK=$(mktemp -d /tmp/vcuda-mig-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -std=c11 -O1 -Inative/include -Inative/fake -o "$WORK/mig_probe" native/test/gpu/mig_probe.c \
  native/fake/fake_mig_profiles.c -ldl || { echo "build failed"; exit 1; }
nvidia-smi --query-gpu=name,memory.total,mig.mode.current --format=csv 2>&1 | head -n 3
"$WORK/mig_probe"
