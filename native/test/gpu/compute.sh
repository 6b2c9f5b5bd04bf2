#!/usr/bin/env bash
# Compute limits on a real NVIDIA GPU (issue 4, item 6): PyTorch tenants under LD_PRELOAD=libvcuda.so
# with the node agent's card sampler (test/compute/sampler-child.ts on the real NVML) feeding their
# regions, as on a node. Prints one table row per scenario and tenant; exit 1 when a target missed.
#
#   native/test/gpu/compute.sh [SECONDS]      (default 12 s per scenario; first 2 s are warm-up)
#
# Workloads (one python process each, GPU 0): matmul loops of 1024², 4096² and 8192² fp16, and a
# small-kernel loop (torch.add on 4 KiB, thousands of tiny launches per second).
# Ground truth: a tenant's achieved share of the card = its iterations per second under the limit
# divided by its iterations per second alone without libvcuda (measured first, per workload), over
# 1 s windows after the warm-up; MAE is against the target (hard: the limit; soft: see COMPUTE.md).
# Scenarios: hard 30/50/70 alone per workload; two hard tenants 30/70; soft 30..60 alone (bursts
# to 60) and with a hard-70 contender (keeps 30); overhead with no cap (core 100) per workload.
# Targets: MAE <= 2 pp, a lone hard tenant >= 0.96 x its limit, overhead with no cap <= 1 %.
#
# Needs: gcc, make, python3 with torch (CUDA), node 20 with this repository's node_modules
# (npm ci) for the sampler; nvidia-smi. Not run by CI (no GPU there).
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_PER=${1:-12}
WARMUP_S=2
WORK=$(mktemp -d /tmp/vcuda-compute-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
ROWS=()
FAILED=0

make -s -C native >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: not a GPU machine"; exit 1; }
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null ||
  { echo "PyTorch with CUDA not importable"; exit 1; }
node -e "process.exit(0)" 2>/dev/null && [ -d node_modules/tsx ] ||
  { echo "node and node_modules (npm ci) are needed for the card sampler"; exit 1; }

UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
NVML=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
[ -n "$NVML" ] || NVML=libnvidia-ml.so.1
PRELOAD="$PWD/native/build/libvcuda.so"
echo "GPU 0: $UUID ($(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)); $SECONDS_PER s per scenario"

# write_config FILE REGION REQUEST LIMIT: the limit file of contract/limit-config.ts (CRC32 over the
# file with seq and crc zeroed); hard when REQUEST == LIMIT, soft otherwise. 8 GiB of memory.
write_config() {
  python3 - "$1" "$2" "$UUID" "$3" "$4" <<'EOF'
import struct, sys, zlib
out, region, uuid, request, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
buf = bytearray(512 + 128)
buf[0:8] = b"VCUDACFG"
struct.pack_into("<IIII", buf, 8, 1, 512, 1, 128)
buf[48:48 + 13] = b"compute-check"
buf[112:112 + 4] = b"main"
buf[176:176 + len(region)] = region.encode()
rec = 512
buf[rec:rec + len(uuid)] = uuid.encode()
mode = 0 if request == limit else 1
struct.pack_into("<IIQII", buf, rec + 48, 0, mode, 8 << 30, request, limit)
struct.pack_into("<I", buf, 40, zlib.crc32(bytes(buf)) & 0xFFFFFFFF)
open(out, "wb").write(buf)
EOF
}

# The tenant program: runs WORKLOAD for SECONDS and prints one line per second with the number of
# iterations completed in it (synchronized at the end of each second, so counts are GPU work done).
cat >"$WORK/tenant.py" <<'EOF'
import sys, time, torch
workload, seconds = sys.argv[1], float(sys.argv[2])
dev = torch.device("cuda")
if workload.startswith("matmul"):
    n = int(workload[len("matmul"):])
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)
    step = lambda: torch.mm(a, b)
    per_sync = max(1, 2048 // max(1, (n // 1024) ** 3))  # about the same GPU time between syncs
else:  # tiny: a small-kernel loop
    x = torch.zeros(1024, device=dev)
    step = lambda: x.add_(1.0)
    per_sync = 256
for _ in range(20):
    step()
torch.cuda.synchronize()
print("ready", flush=True)
start = time.monotonic()
second, count = 1, 0
while True:
    for _ in range(per_sync):
        step()
    torch.cuda.synchronize()
    count += per_sync
    now = time.monotonic() - start
    while now >= second:
        print(count, flush=True)
        count, second = 0, second + 1
    if second > seconds:
        break
EOF

# The file stem of a scenario label (labels are free text).
stem() { printf '%s/%s' "$WORK" "$(printf '%s' "$1" | tr -c 'a-zA-Z0-9' '_')"; }

# run_tenants LABEL ENTRY...; ENTRY = name:workload:request:limit (limit 0 = no preload). Starts a
# sampler and the tenants, waits, leaves per-second counts in $WORK/LABEL.name.out.
run_tenants() {
  local label
  label=$(stem "$1")
  shift
  local containers="" entry name workload request limit
  for entry in "$@"; do
    IFS=: read -r name workload request limit <<<"$entry"
    if [ "$limit" != 0 ]; then
      write_config "$label.$name.conf" "$label.$name.region" "$request" "$limit"
      containers+="${containers:+,}{\"key\":\"$name\",\"regionPath\":\"$label.$name.region\",\"deviceIndex\":0}"
    fi
  done
  local settings="{\"nvmlPath\":\"$NVML\",\"sysfsRoot\":\"/sys\",\"periodMs\":50,\"seconds\":$((SECONDS_PER + 30)),\"containers\":[$containers]}"
  mkfifo "$label.sampler.in"
  node --import tsx test/compute/sampler-child.ts "$settings" <"$label.sampler.in" >"$label.sampler.out" 2>&1 &
  local sampler=$!
  PIDS+=("$sampler")
  exec 7>"$label.sampler.in"
  for _ in $(seq 1 100); do grep -q ready "$label.sampler.out" && break; sleep 0.1; done
  local tenants=()
  for entry in "$@"; do
    IFS=: read -r name workload request limit <<<"$entry"
    if [ "$limit" = 0 ]; then
      python3 "$WORK/tenant.py" "$workload" "$SECONDS_PER" >"$label.$name.out" 2>"$label.$name.err" &
    else
      VCUDA_CONFIG="$label.$name.conf" LD_PRELOAD=$PRELOAD \
        python3 "$WORK/tenant.py" "$workload" "$SECONDS_PER" >"$label.$name.out" 2>"$label.$name.err" &
    fi
    tenants+=("$!")
    PIDS+=("$!")
    echo "{\"key\":\"$name\",\"pids\":[$!]}" >&7
  done
  for p in "${tenants[@]}"; do wait "$p" || echo "  tenant $p of $label exited with $?"; done
  exec 7>&-
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
}

# rate LABEL NAME: mean iterations per second after the warm-up.
rate() {
  grep -v ready "$(stem "$1").$2.out" | tail -n +$((WARMUP_S + 1)) |
    awk '{s += $1; n++} END {if (n) printf "%.3f", s / n; else print 0}'
}

# judge LABEL NAME WORKLOAD TARGET LIMIT LONE: one table row from the per-second counts against
# the tenant's solo rate; MAE of the 1 s windows' shares against TARGET.
judge() {
  local label=$1 name=$2 workload=$3 target=$4 limit=$5 lone=$6
  local solo=${SOLO[$workload]:-0}
  local row
  row=$(grep -v ready "$(stem "$label").$name.out" | tail -n +$((WARMUP_S + 1)) |
    awk -v solo="$solo" -v target="$target" -v limit="$limit" -v lone="$lone" '
      { share = 100 * $1 / solo; err += (share > target ? share - target : target - share); sum += share; n++ }
      END {
        if (!n || solo <= 0) { print "no-data 0 0 MISS"; exit }
        mae = err / n; mean = sum / n; ok = mae <= 2
        if (lone) ok = ok && mean >= 0.96 * limit
        printf "%.2f %.1f %.3f %s\n", mae, mean, mean / limit, ok ? "ok" : "MISS"
      }')
  read -r mae mean over verdict <<<"$row"
  [ "$verdict" = ok ] || FAILED=1
  ROWS+=("$(printf '%-34s %-10s %7s %7s %7s %10s  %s' "$label" "$name" "$target" "$mean" "$mae" "$over" "$verdict")")
}

WORKLOADS=(matmul1024 matmul4096 matmul8192 tiny)
declare -A SOLO
for w in "${WORKLOADS[@]}"; do
  run_tenants "solo-$w" "t:$w:0:0"
  SOLO[$w]=$(rate "solo-$w" t)
  echo "solo $w: ${SOLO[$w]} it/s"
done

for w in "${WORKLOADS[@]}"; do
  run_tenants "no-cap-$w" "t:$w:100:100"
  nocap=$(rate "no-cap-$w" t)
  overhead=$(awk -v a="${SOLO[$w]}" -v b="$nocap" 'BEGIN {printf "%.2f", (a > 0 ? 100 * (a - b) / a : 100)}')
  verdict=$(awk -v o="$overhead" 'BEGIN {print (o <= 1 ? "ok" : "MISS")}')
  [ "$verdict" = ok ] || FAILED=1
  ROWS+=("$(printf '%-34s %-10s %7s %7s %7s %10s  %s' "overhead, no cap, $w" t "-" "$overhead%" "-" "-" "$verdict")")
  for pct in 30 50 70; do
    run_tenants "hard $pct% $w" "t:$w:$pct:$pct"
    judge "hard $pct% $w" t "$w" "$pct" "$pct" 1
  done
done

run_tenants "two hard 30/70 matmul4096" "a:matmul4096:30:30" "b:matmul4096:70:70"
judge "two hard 30/70 matmul4096" a matmul4096 30 30 0
judge "two hard 30/70 matmul4096" b matmul4096 70 70 0
run_tenants "two hard 30/70 tiny+matmul4096" "a:tiny:30:30" "b:matmul4096:70:70"
judge "two hard 30/70 tiny+matmul4096" a tiny 30 30 0
judge "two hard 30/70 tiny+matmul4096" b matmul4096 70 70 0
run_tenants "soft 30..60 alone matmul4096" "s:matmul4096:30:60"
judge "soft 30..60 alone matmul4096" s matmul4096 60 60 1
run_tenants "soft 30..60 + hard 70 matmul4096" "s:matmul4096:30:60" "c:matmul4096:70:70"
judge "soft 30..60 + hard 70 matmul4096" s matmul4096 30 60 0
judge "soft 30..60 + hard 70 matmul4096" c matmul4096 70 70 0

echo
printf '%-34s %-10s %7s %7s %7s %10s  %s\n' scenario tenant target "mean %" "MAE pp" "mean/limit" result
printf '%-34s %-10s %7s %7s %7s %10s  %s\n' -------- ------ ------ ------ ------ ---------- ------
printf '%s\n' "${ROWS[@]}"
exit $FAILED
