#!/usr/bin/env bash
# Every GPU check in one lease: run.sh (memory), burst.sh (memory bursts), compute.sh (rate limits),
# mig.sh (MIG layouts and profile table, read-only; with MIG_SHARE=1 also shares of a 3g instance,
# which changes MIG settings: only where the machine's owner allows), busy.sh (the in-process compute sensor), contend.sh (two tenants
# on one card, the limiter traced with each sensor),
# each under its own deadline, each log also written to $OUT (or ./gpu-logs). With .gpu/ from
# carry.sh, works on a machine with no Node.js.
#
#   native/test/gpu/all.sh [COMPUTE_SECONDS]        (default 8)
# Env: CHECKS (which, in order; default "mig run burst compute contend sensor busy"), VCUDA_GPU_WORKLOADS (compute
# workloads, default "matmul4096 tiny"), RUN_S/BURST_S/COMPUTE_S/SENSOR_S/MIG_S (deadlines in seconds,
# default 150/150/330/150, MIG_S 60 or 240 with MIG_SHARE=1), BURST_ARGS (burst.sh arguments).
set -uo pipefail
cd "$(dirname "$0")/../../.."
LOGS=${OUT:-$PWD/gpu-logs}
mkdir -p "$LOGS"
if ! command -v node >/dev/null && [ -f .gpu/node.xz ]; then
  mkdir -p /tmp/vcuda-node
  python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' \
    .gpu/node.xz /tmp/vcuda-node/node && chmod +x /tmp/vcuda-node/node
  export PATH=/tmp/vcuda-node:$PATH
fi
[ -d node_modules/tsx ] || [ ! -f .gpu/sampler-child.mjs ] || export VCUDA_SAMPLER_JS=$PWD/.gpu/sampler-child.mjs
export VCUDA_GPU_WORKLOADS=${VCUDA_GPU_WORKLOADS:-matmul4096 tiny}
{ date -u; nvidia-smi; node --version; python3 -c 'import torch; print("torch", torch.__version__)'; } 2>&1 | tee "$LOGS/machine.log"
rc=0
MIG_DEFAULT_S=60
[ -n "${MIG_SHARE:-}" ] && MIG_DEFAULT_S=240
declare -A DEADLINE=([mig]=${MIG_S:-$MIG_DEFAULT_S} [run]=${RUN_S:-150} [burst]=${BURST_S:-150} [compute]=${COMPUTE_S:-330} [sensor]=${SENSOR_S:-150} [busy]=${BUSY_S:-60} [contend]=${CONTEND_S:-150})
declare -A ARGS=([compute]=${1:-8} [burst]=${BURST_ARGS:-})
for check in ${CHECKS:-mig run burst compute contend sensor busy}; do
  timeout "${DEADLINE[$check]}" bash "native/test/gpu/$check.sh" ${ARGS[$check]:-} 2>&1 | tee "$LOGS/$check.log" || rc=1
done
exit $rc
