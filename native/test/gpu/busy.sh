#!/usr/bin/env bash
# The in-process compute sensor (native/COMPUTE.md, "The in-process sensor") on a real GPU: the
# busy-ns counter libvcuda keeps in a container's region against what the tenant's kernels ran
# (launches x the kernel's length as the GPU ran it), for one tenant alone and for two containers
# time-slicing the card. No node agent runs: the limiter keeps its first cost guess (200 us, the
# kernels' length), which is all the sensor needs. A span of a stream's work would read the other
# container's time slices as its own; the sensor must not.
#
#   native/test/gpu/busy.sh [SECONDS]      (default 3 s per run)
# Needs: nvcc, python3.
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_PER=${1:-3}
WORK=$(mktemp -d /tmp/vcuda-busy-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
make -s -C native build/libvcuda.so >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
command -v nvcc >/dev/null || { echo "skipped: nvcc missing"; exit 0; }
nvcc -O2 -o "$WORK/busy" native/test/gpu/busy.cu 2>"$WORK/nvcc.log" || { cat "$WORK/nvcc.log"; exit 1; }
UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
source native/test/gpu/lib.sh

# start NAME PCT: a container at a hard PCT % with the tenant running under libvcuda.
start() {
  write_limits "$WORK/$1.conf" "$WORK/$1.region" 4096 "$2" "$2"
  LD_PRELOAD="$PWD/native/build/libvcuda.so" VCUDA_CONFIG="$WORK/$1.conf" \
    "$WORK/busy" 200 "$SECONDS_PER" >"$WORK/$1.out" 2>"$WORK/$1.err" &
}

# report NAME: launches x kernel length against the region's counter.
report() {
  read -r _ launches _ kernel_ms _ <"$WORK/$1.out" || { echo "$1: no output: $(tail -n 2 "$WORK/$1.err")"; return; }
  read -r busy samples < <(region_busy "$WORK/$1.region")
  python3 -c 'import sys; n,k,b,s=int(sys.argv[2]),float(sys.argv[3]),int(sys.argv[4]),int(sys.argv[5]); ran=n*k; print(f"{sys.argv[1]:<22} {n:>7} launches of {k:.3f} ms: ran {ran:8.1f} ms, sensor {b/1e6:8.1f} ms ({b/1e6/ran:.3f}, {s} samples)")' \
    "$1" "$launches" "$kernel_ms" "$busy" "$samples"
}

echo "sensor against the kernels' time (under 1.000: the last samples in flight at exit):"
start alone50 50
wait
report alone50
start pair30 30
start pair70 70
wait
report pair30
report pair70
