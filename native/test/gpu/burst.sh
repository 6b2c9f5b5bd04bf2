#!/usr/bin/env bash
# Memory bursts on a real NVIDIA GPU (an H100 or any card with concurrent managed access): two
# containers on GPU 0, each with its own limit file and region, under LD_PRELOAD=libvcuda.so.
#   A: a model server: GUARANTEED_PCT of the card guaranteed, no burst; it sizes a KV cache from
#      torch.cuda.mem_get_info() as vLLM does and runs decode-like matmuls over it.
#   B: a neighbour: GUARANTEED_PCT guaranteed, bursting to BURST_PCT of the card, compute held at
#      B_CORE % (hard, default 25, as a pod with a quarter of the card's memory would ask; 100 =
#      no cap); it allocates up to its ceiling with torch (cudaMalloc: the part above its
#      guarantee is managed memory) and keeps touching all of it.
# Checks: B sees its guarantee as the card's total and is refused past its ceiling; A, started
# while B holds its burst, gets its full KV cache (B's pages are evicted, B keeps running and its
# sums stay right); A's throughput beside the bursting B is within 5 % of A beside the same B
# without a burst (same compute cap, same loop over its guarantee only): the burst costs A
# nothing beyond what any neighbour's compute costs; nvidia-smi inside B shows the guarantee.
# Prints a pass/fail table and the figures; exit 1 when anything failed.
#
#   native/test/gpu/burst.sh [GUARANTEED_PCT] [BURST_PCT] [SECONDS] [B_CORE]   (defaults 25 75 20 25)
# Needs: gcc, make, python3 with torch (CUDA), nvidia-smi; node for the card sampler (lib.sh).
set -uo pipefail
cd "$(dirname "$0")/../../.."
GUARANTEED_PCT=${1:-25}
BURST_PCT=${2:-75}
SECONDS_RUN=${3:-20}
B_CORE=${4:-25}
WORK=$(mktemp -d /tmp/vcuda-gpu-burst-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
RESULTS=()
FAILED=0
record() {
  RESULTS+=("$(printf '%-58s %s' "$1" "$2")")
  [[ $2 == FAIL* ]] && FAILED=1
}

make -s -C native >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: not a GPU machine"; exit 1; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "PyTorch with CUDA is required"; exit 1; }

UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
PHYS_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
GUARANTEED_MIB=$((PHYS_MIB * GUARANTEED_PCT / 100))
BURST_MIB=$((PHYS_MIB * BURST_PCT / 100))
echo "GPU 0: $UUID, $PHYS_MIB MiB; A $GUARANTEED_MIB MiB; B $GUARANTEED_MIB MiB bursting to $BURST_MIB MiB"

source native/test/gpu/lib.sh
write_limits "$WORK/a.conf" "$WORK/a.region" "$GUARANTEED_MIB" 100 100
write_limits "$WORK/b.conf" "$WORK/b.region" "$GUARANTEED_MIB" "$B_CORE" "$B_CORE" "$BURST_MIB"
write_limits "$WORK/b0.conf" "$WORK/b0.region" "$GUARANTEED_MIB" "$B_CORE" "$B_CORE"
PRELOAD="$PWD/native/build/libvcuda.so"

# The burster: fills its ceiling in 256 MiB tensors, says "ready", then adds to every tensor in a
# loop (every page touched, so evicted pages fault back) until told to stop; prints its loop rate
# and whether every sum came out right.
cat >"$WORK/burster.py" <<'EOF'
import os, sys, time, torch
ceiling, guarantee = int(sys.argv[1]) << 20, int(sys.argv[2]) << 20
bursting = ceiling > guarantee
free, total = torch.cuda.mem_get_info()
assert total == guarantee, f"mem_get_info total {total} is not the guarantee {guarantee}"
piece = 256 << 20
tensors = []
try:
    while True:
        tensors.append(torch.zeros(piece // 4, device="cuda"))
except torch.cuda.OutOfMemoryError:
    pass
held = len(tensors) * piece
assert held > guarantee or not bursting, f"held {held} MiB: no burst above the guarantee"
assert held <= ceiling, f"held {held} past the ceiling {ceiling}"
print(f"ready {held >> 20}", flush=True)
loops, ok = 0, True
stop = sys.argv[3]
while not os.path.exists(stop):
    for t in tensors:
        t.add_(1.0)
    torch.cuda.synchronize()
    loops += 1
ok = all(float(t[0]) == loops and float(t[-1]) == loops for t in tensors)
print(f"loops {loops} ok {ok}", flush=True)
EOF

# The model server: KV cache = 90 % of what mem_get_info says is free, decode-like steps over it
# (a matmul against a slice of the cache per step) for SECONDS; prints the cache size and steps/s.
cat >"$WORK/server.py" <<'EOF'
import sys, time, torch
seconds = float(sys.argv[1])
free, total = torch.cuda.mem_get_info()
kv = torch.empty(int(free * 0.9) // 2, dtype=torch.float16, device="cuda")
kv.fill_(0.001)
w = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
blocks = kv.numel() // (4096 * 256)
view = kv[: blocks * 4096 * 256].view(blocks, 256, 4096)
steps = 0
t0 = time.time()
while time.time() - t0 < seconds:
    x = view[steps % blocks] @ w
    torch.cuda.synchronize()
    steps += 1
print(f"kv {kv.numel() * 2 >> 20} MiB steps/s {steps / (time.time() - t0):.1f}")
EOF

run_a() { LD_PRELOAD=$PRELOAD VCUDA_CONFIG="$WORK/a.conf" python3 "$WORK/server.py" "$SECONDS_RUN"; }

# 1. A alone.
if ALONE=$(run_a 2>"$WORK/a-alone.err"); then record "A alone: $ALONE" PASS; else record "A alone" FAIL; tail "$WORK/a-alone.err"; fi

# start_b CONF CEILING_MIB: the neighbour with the card sampler feeding its compute limit; waits
# until it holds its memory. Sets B_PID.
start_b() {
  rm -f "$WORK/stop" "$WORK/b.out"
  start_sampler "$WORK/b-$(basename "$1" .conf)" $((SECONDS_RUN * 3 + 120)) \
    "$(container_json b "${1%.conf}.region")"
  LD_PRELOAD=$PRELOAD VCUDA_CONFIG="$1" python3 "$WORK/burster.py" "$2" "$GUARANTEED_MIB" "$WORK/stop" \
    >"$WORK/b.out" 2>"$WORK/b.err" &
  B_PID=$!
  register_pid b "$B_PID"
  for _ in $(seq 120); do grep -q ready "$WORK/b.out" 2>/dev/null && break; sleep 0.5; done
}
stop_b() {
  touch "$WORK/stop"
  wait "$B_PID"
  stop_sampler
}

# 2. The baseline: A beside B without a burst (B loops over its guarantee at the same cap).
start_b "$WORK/b0.conf" "$GUARANTEED_MIB"
if BASE=$(run_a 2>"$WORK/a-base.err"); then record "A beside B, no burst: $BASE" PASS; else record "A beside B, no burst" FAIL; tail "$WORK/a-base.err"; fi
stop_b

# 3. B bursts while A is idle; then A starts beside it and must get its full cache.
start_b "$WORK/b.conf" "$BURST_MIB"
if grep -q ready "$WORK/b.out"; then record "B bursts to $(awk '/ready/{print $2}' "$WORK/b.out") MiB (guarantee $GUARANTEED_MIB, core $B_CORE)" PASS
else record "B bursts" FAIL; tail "$WORK/b.err"; fi
if BESIDE=$(run_a 2>"$WORK/a-beside.err"); then record "A beside bursting B: $BESIDE" PASS; else record "A beside B (its guarantee)" FAIL; tail "$WORK/a-beside.err"; fi
stop_b
if grep -q "ok True" "$WORK/b.out"; then record "B kept running: $(grep loops "$WORK/b.out")" PASS
else record "B kept running, sums right" FAIL; cat "$WORK/b.out"; tail "$WORK/b.err"; fi

# 4. A's KV cache is the same size beside the burst, and its throughput within 5 % of the baseline.
python3 - "$ALONE" "$BASE" "$BESIDE" <<'EOF' >"$WORK/compare" 2>&1
import sys
def parse(s):
    f = s.split()
    return int(f[1]), float(f[4])
(kv_a, rate_a), (_, rate_base), (kv_b, rate_b) = parse(sys.argv[1]), parse(sys.argv[2]), parse(sys.argv[3])
print(f"kv {kv_a} vs {kv_b} MiB, throughput {100 * rate_b / rate_base:.1f} % of the no-burst baseline "
      f"({100 * rate_b / rate_a:.1f} % of alone)")
sys.exit(0 if kv_a == kv_b and rate_b >= 0.95 * rate_base else 1)
EOF
if [[ $? -eq 0 ]]; then record "A's cache and throughput: $(cat "$WORK/compare")" PASS
else record "A's cache and throughput within 5 %: $(cat "$WORK/compare")" FAIL; fi

# 5. Past the ceiling B is refused with the driver's out-of-memory error (step 2 proved the
# refusal ends its fill loop below the ceiling); nvidia-smi inside shows the guarantee.
SMI_TOTAL=$(LD_PRELOAD=$PRELOAD VCUDA_CONFIG="$WORK/b.conf" nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
if [[ $SMI_TOTAL == "$GUARANTEED_MIB" ]]; then record "nvidia-smi inside B: total $SMI_TOTAL MiB" PASS
else record "nvidia-smi inside B: total $SMI_TOTAL MiB, not $GUARANTEED_MIB" FAIL; fi

printf '%s\n' "${RESULTS[@]}"
exit $FAILED
