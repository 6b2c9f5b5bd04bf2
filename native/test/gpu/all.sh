#!/usr/bin/env bash
# The GPU checks in one lease: compute.sh (rate limits), contend.sh (two tenants on one card, the
# limiter traced with each sensor), burst.sh (memory bursts), run.sh (memory), mig.sh (MIG layouts
# and profile table, read-only; with MIG_SHARE=1 also shares of a 3g instance, which changes MIG
# settings: only where the machine's owner allows); on request sensor.sh (what NVML reads) and
# busy.sh (the in-process sensor's counter). Each runs under its own deadline, each log also
# written to $OUT (or ./gpu-logs). With .gpu/ from carry.sh, works on a machine with no Node.js.
# The default checks and deadlines fit one 600 s call (on an H200: about 180, 100, 125, 50 and
# 5 s taken), leaving a lent machine's 15 minutes room for its start. On request too: tamper.sh (a
# tenant zeroing its own in-process counter, held by the counter guard; about 35 s expected).
#
#   native/test/gpu/all.sh [COMPUTE_SECONDS]        (default 8)
# Env: CHECKS (which, in order; default "compute contend burst run mig"), VCUDA_GPU_WORKLOADS
# (compute workloads, default "matmul4096 tiny"), COMPUTE_S/CONTEND_S/BURST_S/TAMPER_S/RUN_S/MIG_S/
# SENSOR_S/BUSY_S (deadlines in seconds, default 220/120/140/60/80/20/150/60; MIG_S 240 with MIG_SHARE=1),
# BURST_ARGS (burst.sh arguments).
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
MIG_DEFAULT_S=20
[ -n "${MIG_SHARE:-}" ] && MIG_DEFAULT_S=240
declare -A DEADLINE=([mig]=${MIG_S:-$MIG_DEFAULT_S} [run]=${RUN_S:-80} [burst]=${BURST_S:-140} [compute]=${COMPUTE_S:-220} [sensor]=${SENSOR_S:-150} [busy]=${BUSY_S:-60} [contend]=${CONTEND_S:-120} [tamper]=${TAMPER_S:-60})
declare -A ARGS=([compute]=${1:-8} [burst]=${BURST_ARGS:-})
for check in ${CHECKS:-compute contend burst run mig}; do
  timeout "${DEADLINE[$check]}" bash "native/test/gpu/$check.sh" ${ARGS[$check]:-} 2>&1 | tee "$LOGS/$check.log" || rc=1
done
exit $rc
