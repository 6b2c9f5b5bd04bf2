#!/usr/bin/env bash
# MIG on a real card. Always, read-only: our NVML layouts against the driver, and the fake's H100
# 80GB / H200 141GB profile table (IDs, slices, instances, SMs, memory, placements) against what the
# card lists when it is in MIG mode.
#
# With MIG_SHARE=1, as root: shares of a MIG instance as the node agent serves them. On GPU 0 it
# switches MIG mode on if it is off (then compares the profile table too), makes a 3g instance
# (GPU-instance profile 9: 3g.40gb on an H100, 3g.71gb on an H200) with its whole compute instance,
# and runs tenants under LD_PRELOAD=libvcuda.so given the instance by CUDA_VISIBLE_DEVICES=MIG-<uuid>
# (what NVIDIA_VISIBLE_DEVICES gives a container), their limit files naming the MIG UUID:
#   memory:  tenant a fills its 4096 MiB in 64 MiB steps and is refused past them (PyTorch OOM) and
#            holds them; tenant b does the same beside it. Each sees its limit in cudaMemGetInfo.
#   compute: two hard tenants 30/70 (matmul4096) with the node agent's card sampler, which finds no
#            per-process utilization on a card in MIG mode and measures with libvcuda's in-process
#            sensor; each tenant's share = its iterations/s over the workload's alone on the
#            instance, over 1 s windows after a 2 s warm-up (targets as compute.sh: MAE <= 2 pp).
# Prints a table; on exit destroys the instance and, if it switched MIG mode on, switches it off.
# Skips with the reason (exit 0) when not root, the card has no MIG, the GPU is in use, MIG mode
# cannot be switched (refused, or pending a GPU reset, which it never does), or no 3g fits beside
# the instances already there. Off by default: it changes MIG settings, which a lent machine's must
# keep, so set MIG_SHARE=1 only where the machine's owner allows it. MIG_DRY_RUN=1 prints the
# commands that touch the GPU instead of running them (no GPU needed).
#
#   native/test/gpu/mig.sh                             read-only checks (about 10 s)
#   MIG_SHARE=1 native/test/gpu/mig.sh [SECONDS]       and the shares (default 8 s per compute run)
#   MIG_SHARE=1 MIG_DRY_RUN=1 native/test/gpu/mig.sh   the share steps' commands, nothing run
# Needs for the shares: python3 with torch (CUDA); node for the sampler (lib.sh), else no compute rows.
set -uo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_PER=${1:-8}
WARMUP_S=2
LIMIT_MIB=4096
DRY_RUN=${MIG_DRY_RUN:-}
WORK=$(mktemp -d /tmp/vcuda-mig-XXXXXX)
PIDS=()
GI_ID=""
MIG_SWITCHED_ON=""
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  if [ -n "$GI_ID" ]; then
    gpu nvidia-smi mig -i 0 -dci -gi "$GI_ID" >/dev/null
    gpu nvidia-smi mig -i 0 -dgi -gi "$GI_ID" || echo "WARNING: GPU instance $GI_ID of GPU 0 not destroyed"
  fi
  if [ -n "$MIG_SWITCHED_ON" ]; then gpu nvidia-smi -i 0 -mig 0 || echo "WARNING: MIG mode of GPU 0 left on"; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
ROWS=()
FAILED=0

# gpu CMD...: runs CMD, or under MIG_DRY_RUN prints it (on the script's stderr, fd 3, whatever
# the call redirects) and succeeds without output.
exec 3>&2
gpu() {
  if [ -n "$DRY_RUN" ]; then echo "dry-run: $*" >&3; return 0; fi
  "$@"
}
skip() {
  echo "MIG shares skipped: $*"
  exit 0
}
row() {
  ROWS+=("$(printf '%-52s %s' "$1" "$2")")
  case $2 in FAIL* | MISS*) FAILED=1 ;; esac
}

probe() {
  [ -x "$WORK/mig_probe" ] || cc -std=c11 -O1 -Inative/include -Inative/fake -o "$WORK/mig_probe" \
    native/test/gpu/mig_probe.c native/fake/fake_mig_profiles.c -ldl || { echo "build failed"; exit 1; }
  nvidia-smi --query-gpu=name,memory.total,mig.mode.current --format=csv 2>&1 | head -n 3
  "$WORK/mig_probe"
}

if [ -z "$DRY_RUN" ]; then probe || FAILED=1; fi
[ -n "${MIG_SHARE:-}" ] || exit $FAILED

# ---- shares of a 3g instance (MIG_SHARE=1) ----
[ -n "$DRY_RUN" ] || [ "$(id -u)" = 0 ] || skip "not root (MIG mode and instances need root)"
make -s -C native build/libvcuda.so >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "build failed"; exit 1; }
python3 -c "import torch" 2>/dev/null || [ -n "$DRY_RUN" ] || skip "PyTorch not importable"
mode() { gpu nvidia-smi --query-gpu=mig.mode.current,mig.mode.pending --format=csv,noheader -i 0 | tr -d ' '; }
in_use=$(gpu nvidia-smi --query-compute-apps=pid --format=csv,noheader -i 0 | grep -Eo '^[0-9]+' | tr '\n' ' ')
[ -z "$in_use" ] || skip "GPU 0 is in use by pids $in_use"
state=$(mode)
[ -n "$DRY_RUN" ] && state="Disabled,Disabled"
case $state in
  Enabled,Enabled) echo "GPU 0 already in MIG mode" ;;
  Disabled,Disabled)
    # Set first: a refused switch may still leave the change pending, which the exit takes back.
    MIG_SWITCHED_ON=1
    gpu nvidia-smi -i 0 -mig 1 >"$WORK/mig-on.log" 2>&1 || skip "MIG mode refused: $(tail -n 1 "$WORK/mig-on.log")"
    state=$(mode)
    [ -n "$DRY_RUN" ] && state="Enabled,Enabled"
    [ "$state" = Enabled,Enabled ] || skip "MIG mode not on after switching (current,pending: $state; a GPU reset is needed)"
    echo "GPU 0: MIG mode switched on"
    [ -n "$DRY_RUN" ] || probe || FAILED=1
    ;;
  *) skip "no MIG on GPU 0, or a mode change pending (current,pending: $state)" ;;
esac

# The instance: its MIG UUID is the one `nvidia-smi -L` lists after creating it and not before.
mig_uuids() { gpu nvidia-smi -L | grep -o 'MIG-[0-9a-fA-F-]*' | sort; }
mig_uuids >"$WORK/before"
gpu nvidia-smi mig -i 0 -cgi 9 -C >"$WORK/create.log" 2>&1 || skip "no 3g instance fits: $(tail -n 1 "$WORK/create.log")"
GI_ID=$(sed -n 's/.*created GPU instance ID *\([0-9]*\).*/\1/p' "$WORK/create.log" | head -n 1)
PROFILE=$(sed -n 's/.*created GPU instance.*profile MIG \([^ ]*\).*/\1/p' "$WORK/create.log" | head -n 1)
MIG=$(mig_uuids | comm -13 "$WORK/before" -)
if [ -n "$DRY_RUN" ]; then GI_ID=dry PROFILE=3g MIG=MIG-dry-run; fi
[ -n "$GI_ID" ] && [ "$(echo "$MIG" | wc -w)" = 1 ] || { cat "$WORK/create.log"; echo "instance not found: '$MIG'"; exit 1; }
echo "GPU 0: $PROFILE instance, GPU instance $GI_ID, $MIG"
row "$PROFILE instance on GPU 0 (GPU instance $GI_ID)" "$MIG"

UUID=$MIG # lib.sh's write_limits names this device
source native/test/gpu/lib.sh
PRELOAD="$PWD/native/build/libvcuda.so"
export CUDA_VISIBLE_DEVICES=$MIG

# fill NAME: cudaMemGetInfo shows the limit; 64 MiB steps until OOM reach the limit (less the
# context's charge, VCUDA_CONTEXT_OVERHEAD_MIB, and one step); then holds them until killed.
fill() {
  gpu env VCUDA_CONFIG="$WORK/$1.conf" LD_PRELOAD="$PRELOAD" python3 - "$((LIMIT_MIB << 20))" <<'EOF'
import sys, time, torch
limit, step = int(sys.argv[1]), 64 << 20
free, total = torch.cuda.mem_get_info()
assert total == limit, f"cudaMemGetInfo total {total >> 20} MiB, limit {limit >> 20} MiB"
held = []
try:
    while True:
        held.append(torch.empty(step, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError:
    pass
filled = len(held) * step
overhead = 300 << 20  # VCUDA_CONTEXT_OVERHEAD_MIB's default
assert limit - overhead - step < filled <= limit, f"filled {filled >> 20} MiB before OOM, limit {limit >> 20} MiB"
print(f"ok total {total >> 20} MiB, filled {filled >> 20} MiB, then OOM", flush=True)
time.sleep(600)
EOF
}
write_limits "$WORK/a.conf" "$WORK/a.region" "$LIMIT_MIB" 100 100
write_limits "$WORK/b.conf" "$WORK/b.region" "$LIMIT_MIB" 100 100
for t in a b; do
  fill "$t" >"$WORK/fill-$t.out" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 1 150); do grep -q '^ok\|Error' "$WORK/fill-$t.out" && break; [ -n "$DRY_RUN" ] && break; sleep 0.2; done
  result=$(grep '^ok' "$WORK/fill-$t.out" | sed 's/^ok //')
  [ -n "$DRY_RUN" ] && result="dry run"
  what="memory $t: $LIMIT_MIB MiB limit"
  [ "$t" = b ] && what+=", beside a holding its own"
  if [ -n "$result" ]; then row "$what" "PASS ($result)"; else
    row "$what" "FAIL"
    tail -n 5 "$WORK/fill-$t.out"
  fi
done
for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
PIDS=()

# Compute: matmul4096 alone on the instance, then hard 30 and hard 70 with the sampler.
TENANT=native/test/gpu/tenant.py
counts() { grep -v ready "$1" | tail -n +$((WARMUP_S + 1)); }
if ! have_sampler && [ -z "$DRY_RUN" ]; then
  row "compute 30/70" "SKIP (node with node_modules, or VCUDA_SAMPLER_JS, needed for the sampler)"
else
  gpu python3 "$TENANT" matmul4096 "$SECONDS_PER" >"$WORK/solo.out" 2>"$WORK/solo.err"
  solo=$(counts "$WORK/solo.out" | awk '{s += $1; n++} END {if (n) printf "%.3f", s / n; else print 0}')
  echo "matmul4096 alone on the instance: $solo it/s"
  write_limits "$WORK/h30.conf" "$WORK/h30.region" 8192 30 30
  write_limits "$WORK/h70.conf" "$WORK/h70.region" 8192 70 70
  if [ -z "$DRY_RUN" ]; then
    start_sampler "$WORK/pair" $((SECONDS_PER + 30)) \
      "$(container_json h30 "$WORK/h30.region"),$(container_json h70 "$WORK/h70.region")"
    PIDS+=("$SAMPLER_PID")
  fi
  sensor=$(grep -o 'ready .*' "$WORK/pair.sampler.out" 2>/dev/null)
  [ -n "$DRY_RUN" ] && sensor="ready in-process"
  if [ "$sensor" = "ready in-process" ]; then row "sampler on the MIG card chooses" "PASS (in-process sensor)"; else
    row "sampler on the MIG card chooses" "FAIL (${sensor:-no ready line}: $(head -n 2 "$WORK/pair.sampler.out" 2>/dev/null))"
  fi
  tenants=()
  for t in h30 h70; do
    gpu env VCUDA_CONFIG="$WORK/$t.conf" LD_PRELOAD="$PRELOAD" \
      python3 "$TENANT" matmul4096 "$SECONDS_PER" >"$WORK/$t.out" 2>"$WORK/$t.err" &
    tenants+=("$!")
    [ -n "$DRY_RUN" ] || register_pid "$t" "$!"
  done
  for p in "${tenants[@]}"; do wait "$p" || echo "tenant $p exited with $?"; done
  [ -n "$DRY_RUN" ] || stop_sampler
  for t in h30 h70; do
    target=${t#h}
    busy=$(region_busy "$WORK/$t.region" 2>/dev/null | awk -v s="$SECONDS_PER" '{printf "%.1f", $1 / (s * 1e7)}')
    verdict=$(counts "$WORK/$t.out" | awk -v solo="$solo" -v target="$target" '
      { share = 100 * $1 / solo; err += (share > target ? share - target : target - share); sum += share; n++ }
      END {
        if (!n || solo <= 0) { print "MISS (no data)"; exit }
        printf "%s: mean %.1f %%, MAE %.2f pp", (err / n <= 2 ? "ok" : "MISS"), sum / n, err / n
      }')
    [ -n "$DRY_RUN" ] && verdict="ok (dry run)"
    row "compute hard $target beside hard $((100 - target)) (matmul4096)" "$verdict; sensor ${busy:-?} % busy"
  done
fi

echo
printf '%-52s %s\n' "MIG share check" "result"
printf '%-52s %s\n' "---------------" "------"
printf '%s\n' "${ROWS[@]}"
exit $FAILED
