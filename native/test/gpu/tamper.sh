#!/usr/bin/env bash
# The counter guard on a real GPU: a matmul4096 tenant under a hard 30 % limit whose in-process
# counter is written back to 0 every 10 ms (as a program writing its own region would), with the
# card sampler running the node agent's default sensor and its counter guard, shortened to three
# 2 s windows (counter-guard.ts; native/COMPUTE.md, "Held to the driver"). Prints the card's busy
# share per second (cardutil.py: one process on the card, so the tenant's share) and judges the
# last 10 s: ok when the tenant is held within 3 points of its limit once the guard has tripped.
# On the fake GPU the same attack reads 90 % without the guard (test/compute/counter-tamper.test.ts).
#
#   native/test/gpu/tamper.sh [SECONDS]        (default 24)
# Needs: python3 with torch (CUDA) and nvidia-ml-py (pynvml); node for the card sampler (lib.sh).
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_RUN=${1:-24}
WORK=$(mktemp -d /tmp/vcuda-tamper-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
make -s -C native >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: not a GPU machine"; exit 1; }
source native/test/gpu/lib.sh
have_sampler || { echo "node and node_modules (npm ci) or VCUDA_SAMPLER_JS are needed for the card sampler"; exit 1; }
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
PRELOAD="$PWD/native/build/libvcuda.so"

write_limits "$WORK/t.conf" "$WORK/t.region" 8192 30 30
SAMPLER_GUARD='{"windowMs":2000,"windows":3}' start_sampler "$WORK/t" $((SECONDS_RUN + 20)) "$(container_json t "$WORK/t.region")"
VCUDA_CONFIG="$WORK/t.conf" LD_PRELOAD=$PRELOAD python3 native/test/gpu/tenant.py matmul4096 "$SECONDS_RUN" \
  >"$WORK/t.out" 2>"$WORK/t.err" &
TENANT_PID=$!
register_pid t "$TENANT_PID"
for _ in $(seq 1 300); do grep -q ready "$WORK/t.out" 2>/dev/null && break; sleep 0.1; done
# The attack: device 0's busy-ns counter (region offset 4096 + 32) written back to 0.
python3 - "$WORK/t.region" "$SECONDS_RUN" <<'PY' &
import os, sys, time
path, end = sys.argv[1], time.monotonic() + float(sys.argv[2])
fd = os.open(path, os.O_RDWR)
while time.monotonic() < end:
    os.pwrite(fd, b"\0" * 8, 4096 + 32)
    time.sleep(0.01)
PY
python3 native/test/gpu/cardutil.py "$SECONDS_RUN" >"$WORK/card.out" 2>"$WORK/card.err"
wait "$TENANT_PID"
stop_sampler
echo "card busy % per second, hard 30 % tenant zeroing its counter:"
tr '\n' ' ' <"$WORK/card.out"
echo
grep -v ready "$WORK/t.sampler.out" | head -n 3 | sed 's/^/  sampler: /'
held=$(tail -n 10 "$WORK/card.out" | awk '{s += $1; n++} END {if (n) printf "%.1f", s / n; else print 0}')
peak=$(sort -n "$WORK/card.out" | tail -n 1)
verdict=$(awk -v h="$held" 'BEGIN {print (h <= 33 && h >= 24) ? "ok" : "MISS"}')
printf '%-50s peak %5s %%, last 10 s %5s %%  %s\n' "tampered counter, hard 30, guard 3 x 2 s" "$peak" "$held" "$verdict"
[ "$verdict" = ok ]
