#!/usr/bin/env bash
# libvcuda on a real NVIDIA GPU: builds native/, writes a limit file for GPU 0 (default 4 GiB) and
# runs, under LD_PRELOAD=libvcuda.so, PyTorch (OOM past the limit, mem_get_info = limit, the same
# with expandable segments), CuPy, two processes sharing one budget with kill -9 reclaim, and
# nvidia-smi (memory total = limit). Prints a pass/fail table; exit 1 when anything failed.
#
#   native/test/gpu/run.sh [LIMIT_MIB]
# Needs: gcc, make, python3, nvidia-smi; PyTorch and CuPy are tested when importable (SKIP otherwise).
set -uo pipefail
cd "$(dirname "$0")/../../.."
LIMIT_MIB=${1:-4096}
WORK=$(mktemp -d /tmp/vcuda-gpu-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
RESULTS=()

record() { RESULTS+=("$(printf '%-46s %s' "$1" "$2")"); }

make -s -C native >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
command -v nvidia-smi >/dev/null || { echo "nvidia-smi not found: not a GPU machine"; exit 1; }

UUID=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 | tr -d ' ')
PHYS_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
echo "GPU 0: $UUID, $PHYS_MIB MiB; limit $LIMIT_MIB MiB"

# The limit file: memory limited, compute not (core 100).
source native/test/gpu/lib.sh
write_limits "$WORK/vcuda.conf" "$WORK/region" "$LIMIT_MIB" 100 100

export VCUDA_CONFIG="$WORK/vcuda.conf"
PRELOAD="$PWD/native/build/libvcuda.so"
LIMIT_BYTES=$((LIMIT_MIB * 1048576))

# check NAME COMMAND...: PASS when the command exits 0, SKIP when it exits 77.
check() {
  local name=$1
  shift
  local log="$WORK/$(echo "$name" | tr -c 'a-zA-Z0-9' '_').log"
  "$@" >"$log" 2>&1
  case $? in
    0) record "$name" PASS ;;
    77) record "$name" "SKIP ($(tail -n 1 "$log"))" ;;
    *) record "$name" FAIL; sed 's/^/    /' "$log" | tail -n 15 ;;
  esac
}

torch_check() {
  LD_PRELOAD=$PRELOAD python3 - "$LIMIT_BYTES" <<'EOF'
import sys
try:
    import torch
except ImportError:
    print("torch not installed"); sys.exit(77)
limit = int(sys.argv[1])
free, total = torch.cuda.mem_get_info()
assert total == limit, f"mem_get_info total {total} != limit {limit}"
assert free <= total, f"free {free} > total {total}"
a = torch.ones(256 * 2**20 // 4, device="cuda")  # 256 MiB fits
assert float((a * 2).sum()) == 2 * a.numel(), "kernels still run correctly"
try:
    torch.empty(limit, dtype=torch.uint8, device="cuda")  # the whole limit on top of the above
except torch.cuda.OutOfMemoryError as e:
    print("OOM as expected:", str(e).splitlines()[0])
else:
    sys.exit("allocation past the limit succeeded")
print("props total", torch.cuda.get_device_properties(0).total_memory)
EOF
}

# Expandable segments allocate through cuMemCreate/cuMemMap: the VMM hooks must hold the limit.
torch_expandable_check() {
  export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  torch_check
  local rc=$?
  unset PYTORCH_CUDA_ALLOC_CONF
  return $rc
}

cupy_check() {
  LD_PRELOAD=$PRELOAD python3 - "$LIMIT_BYTES" <<'EOF'
import sys
try:
    import cupy
except ImportError:
    print("cupy not installed"); sys.exit(77)
limit = int(sys.argv[1])
free, total = cupy.cuda.runtime.memGetInfo()
assert total == limit, f"memGetInfo total {total} != limit {limit}"
x = cupy.arange(1024, dtype=cupy.float32)
assert float(x.sum()) == 1023 * 1024 / 2
try:
    cupy.empty(limit, dtype=cupy.uint8)
except cupy.cuda.memory.OutOfMemoryError as e:
    print("OOM as expected:", e)
else:
    sys.exit("allocation past the limit succeeded")
EOF
}

# Two processes, one budget: A holds 60 % of the limit, B cannot take another 60 %; after kill -9
# of A, B can, within a second.
two_process_check() {
  python3 -c "import torch" 2>/dev/null || { echo "torch not installed"; return 77; }
  local chunk=$((LIMIT_BYTES * 6 / 10))
  LD_PRELOAD=$PRELOAD python3 -c "
import torch, time, sys
x = torch.empty($chunk, dtype=torch.uint8, device='cuda'); print('ready', flush=True); time.sleep(600)" >"$WORK/holder.out" 2>&1 &
  local holder=$!
  for _ in $(seq 1 100); do grep -q ready "$WORK/holder.out" && break; sleep 0.2; done
  grep -q ready "$WORK/holder.out" || { cat "$WORK/holder.out"; kill -9 $holder; return 1; }
  local try="import torch, sys
try:
    torch.empty($chunk, dtype=torch.uint8, device='cuda')
except torch.cuda.OutOfMemoryError:
    sys.exit(3)"
  LD_PRELOAD=$PRELOAD python3 -c "$try"
  local rc=$?
  [ $rc -eq 3 ] || { echo "second process was not refused (rc $rc)"; kill -9 $holder; return 1; }
  kill -9 $holder
  # The CUDA context of a fresh python process takes seconds to create: time the reclaim from
  # inside one process that keeps retrying.
  LD_PRELOAD=$PRELOAD python3 -c "
import torch, time, sys
torch.cuda.init(); torch.empty(1, device='cuda')
t0 = time.monotonic()
while True:
    try:
        torch.empty($chunk, dtype=torch.uint8, device='cuda'); break
    except torch.cuda.OutOfMemoryError:
        if time.monotonic() - t0 > 1.0: sys.exit('memory of the killed process not back within 1 s')
        time.sleep(0.05)
print('reclaimed after', round(time.monotonic() - t0, 3), 's')"
}

smi_check() {
  local total
  total=$(LD_PRELOAD=$PRELOAD nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
  echo "nvidia-smi memory.total: $total MiB"
  [ "$total" = "$LIMIT_MIB" ]
}

missing_config_check() {
  VCUDA_CONFIG=/nonexistent LD_PRELOAD=$PRELOAD python3 -c "
import sys
try:
    import torch
except ImportError:
    print('torch not installed'); sys.exit(77)
sys.exit(0 if not torch.cuda.is_available() else 'GPU available without a limit file')"
}

check "PyTorch: OOM past limit, mem_get_info = limit" torch_check
check "PyTorch + expandable_segments (VMM)" torch_expandable_check
check "CuPy: OOM past limit, memGetInfo = limit" cupy_check
check "two processes share a budget, kill -9 reclaim" two_process_check
check "nvidia-smi memory.total = limit" smi_check
check "missing limit file: no GPU (fail closed)" missing_config_check

echo
printf '%-46s %s\n' "check" "result"
printf '%-46s %s\n' "-----" "------"
printf '%s\n' "${RESULTS[@]}"
printf '%s\n' "${RESULTS[@]}" | grep -q FAIL && exit 1
exit 0
