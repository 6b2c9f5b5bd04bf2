#!/usr/bin/env bash
# Contended cards on a real GPU: how NVML splits a time-sliced card between two processes, and how
# the compute limiter steers two tenants (hard 30/70; soft 30..60 beside hard 70) with each sensor
# (NVML through the card sampler, or libvcuda's in-process sensor), traced from the regions every
# 250 ms (trace.py: the sample y/B, cost, rate/target, trim, time held, in-process share), beside
# each tenant's throughput as a share of its solo rate (iterations/s; a lone matmul4096 reads about
# 1.2x its share of the card's time, BENCHMARKS.md "Real GPU").
#
#   native/test/gpu/contend.sh [SECONDS]      (default 8 s per scenario; the first 2 s are warm-up)
# Needs: python3 with torch (CUDA) and pynvml; node for the card sampler (lib.sh).
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_PER=${1:-8}
WORK=$(mktemp -d /tmp/vcuda-contend-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
make -s -C native >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
source native/test/gpu/lib.sh
have_sampler || { echo "node and node_modules (npm ci) or VCUDA_SAMPLER_JS are needed for the card sampler"; exit 1; }
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
PRELOAD="$PWD/native/build/libvcuda.so"
TENANT=native/test/gpu/tenant.py
W=matmul4096

# shares NAME: the tenant's per-second throughput after the warm-up, in % of the solo rate.
shares() {
  grep -v ready "$WORK/$1.out" | tail -n +3 |
    awk -v solo="$SOLO" '{s = 100 * $1 / solo; sum += s; n++; line = line sprintf(" %.1f", s)}
      END {printf "mean %5.1f %% of solo (windows%s)", (n ? sum / n : 0), line}'
}

python3 "$TENANT" $W "$SECONDS_PER" >"$WORK/solo.out" 2>&1
SOLO=$(grep -v ready "$WORK/solo.out" | tail -n +3 | awk '{s += $1; n++} END {printf "%.1f", s / n}')
echo "solo $W: $SOLO it/s"

echo "== two $W tenants, no libvcuda: what NVML reads for each (time-slicing)"
python3 "$TENANT" $W "$SECONDS_PER" >"$WORK/p.out" 2>&1 &
p=$!
python3 "$TENANT" $W "$SECONDS_PER" >"$WORK/q.out" 2>&1 &
q=$!
for _ in $(seq 1 100); do grep -q ready "$WORK/p.out" && grep -q ready "$WORK/q.out" && break; sleep 0.1; done
python3 native/test/gpu/sensor.py "$p" "$SECONDS_PER" 2 >"$WORK/p.nvml" 2>&1 &
python3 native/test/gpu/sensor.py "$q" "$SECONDS_PER" 2 >"$WORK/q.nvml" 2>&1
wait
echo "p: $(shares p); NVML $(cat "$WORK/p.nvml")"
echo "q: $(shares q); NVML $(cat "$WORK/q.nvml")"

# scenario LABEL SENSOR ENTRY...; ENTRY = name:request:limit. Tenants run $W under libvcuda.
scenario() {
  local label=$1 sensor=$2
  shift 2
  echo "== $label, sensor $sensor"
  local containers="" regions=() entry name request limit pids=()
  rm -f "$WORK"/*.region "$WORK"/*.conf "$WORK"/sampler.*
  for entry in "$@"; do
    IFS=: read -r name request limit <<<"$entry"
    write_limits "$WORK/$name.conf" "$WORK/$name.region" 8192 "$request" "$limit"
    containers+="${containers:+,}$(container_json "$name" "$WORK/$name.region")"
    regions+=("$name=$WORK/$name.region")
  done
  SAMPLER_SENSOR=$sensor start_sampler "$WORK/sampler" $((SECONDS_PER + 20)) "$containers"
  for entry in "$@"; do
    IFS=: read -r name request limit <<<"$entry"
    VCUDA_CONFIG="$WORK/$name.conf" LD_PRELOAD="$PRELOAD" python3 "$TENANT" $W "$SECONDS_PER" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    pids+=("$!")
    register_pid "$name" "$!"
  done
  python3 native/test/gpu/trace.py "$((SECONDS_PER + 3))" 0.25 "${regions[@]}" &
  local tracer=$!
  for p in "${pids[@]}"; do wait "$p"; done
  kill "$tracer" 2>/dev/null
  wait "$tracer" 2>/dev/null
  stop_sampler
  head -n 1 "$WORK/sampler.sampler.out"
  for entry in "$@"; do
    IFS=: read -r name request limit <<<"$entry"
    echo "$name ($request..$limit): $(shares "$name")"
    grep -v ready "$WORK/$name.err" | tail -n 2
  done
}

for sensor in nvml in-process; do
  scenario "two hard 30/70" $sensor a:30:30 b:70:70
  scenario "soft 30..60 + hard 70" $sensor s:30:60 c:70:70
done
scenario "lone hard 30" in-process t:30:30
scenario "lone hard 70" in-process t:70:70
