#!/usr/bin/env bash
# The compute limiter's sensor on a real GPU: what NVML's per-process utilization reads for
# workloads that run alone (no libvcuda) and for a tenant held at a hard limit, beside the
# tenant's throughput; and the launch overhead of libvcuda with no cap, alternating runs.
#
#   native/test/gpu/sensor.sh [SECONDS]        (default 6 s per run; the first 2 s are warm-up)
# Needs: python3 with torch (CUDA) and nvidia-ml-py (pynvml); node for the hard-limit row (lib.sh).
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_PER=${1:-6}
WORK=$(mktemp -d /tmp/vcuda-sensor-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
make -s -C native >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
source native/test/gpu/lib.sh
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
PRELOAD="$PWD/native/build/libvcuda.so"
TENANT=native/test/gpu/tenant.py

# rate FILE: mean iterations per second after the first 2 s.
rate() { grep -v ready "$1" | tail -n +3 | awk '{s += $1; n++} END {if (n) printf "%.0f", s / n; else print 0}'; }

# observe NAME WORKLOAD [ENV...]: runs the tenant, polls NVML for its pid, prints one row.
observe() {
  local name=$1 workload=$2
  shift 2
  env "$@" python3 "$TENANT" "$workload" "$SECONDS_PER" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local pid=$!
  for _ in $(seq 1 100); do grep -q ready "$WORK/$name.out" && break; sleep 0.1; done
  [ -n "${ON_START:-}" ] && $ON_START "$pid"
  local nvml
  nvml=$(python3 native/test/gpu/sensor.py "$pid" "$SECONDS_PER" 2 2>&1)
  wait "$pid"
  printf '%-34s %9s it/s  %s\n' "$name" "$(rate "$WORK/$name.out")" "$nvml"
}

echo "alone, no libvcuda (what NVML reads for a tenant that has the whole card):"
for w in matmul4096 matmul1024 matmul8192 tiny; do observe "alone $w" "$w"; done

echo "hard limits with the card sampler (NVML's reading against the throughput share):"
for pct in 30 70; do
  write_limits "$WORK/h$pct.conf" "$WORK/h$pct.region" 8192 "$pct" "$pct"
  start_sampler "$WORK/h$pct" $((SECONDS_PER + 20)) "$(container_json t "$WORK/h$pct.region")"
  reg() { register_pid t "$1"; }
  ON_START=reg observe "hard $pct% matmul4096" matmul4096 VCUDA_CONFIG="$WORK/h$pct.conf" LD_PRELOAD="$PRELOAD"
  stop_sampler
  grep -v ready "$WORK/h$pct.sampler.out" | head -n 3
done

write_limits "$WORK/full.conf" "$WORK/full.region" 8192 100 100
echo "launch cost through cudart, empty kernels, alternating (no libvcuda / libvcuda with core 100):"
if command -v nvcc >/dev/null && nvcc -O2 -o "$WORK/launch" native/test/gpu/launch.cu 2>"$WORK/nvcc.log"; then
  for round in 1 2 3; do
    printf '%-34s %s\n' "cudart alone, round $round" "$("$WORK/launch")"
    printf '%-34s %s\n' "cudart core 100, round $round" "$(VCUDA_CONFIG="$WORK/full.conf" LD_PRELOAD="$PRELOAD" "$WORK/launch")"
  done
else
  echo "  (skipped: nvcc missing or failed: $(tail -n 1 "$WORK/nvcc.log" 2>/dev/null))"
fi
echo "launch overhead, tiny kernels, alternating (no libvcuda / libvcuda with core 100):"
for round in 1 2 3; do
  observe "tiny alone, round $round" tiny
  observe "tiny core 100, round $round" tiny VCUDA_CONFIG="$WORK/full.conf" LD_PRELOAD="$PRELOAD"
done
