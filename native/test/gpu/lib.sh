# Shared by the GPU scripts (sourced, not run): the container limit file and the card sampler.
# Needs UUID (the device the limit files name: GPU 0's, or a MIG instance's) and WORK set by the caller.

# write_limits FILE REGION MEMORY_MIB CORE_REQUEST CORE_LIMIT [BURST_MIB]: the limit file of
# contract/limit-config.ts for one card (CRC32 over the file with seq and crc zeroed); compute
# hard when CORE_REQUEST == CORE_LIMIT, soft otherwise; BURST_MIB 0 or absent: no memory burst.
write_limits() {
  python3 - "$1" "$2" "$UUID" "$3" "$4" "$5" "${6:-0}" <<'PY'
import struct, sys, zlib
out, region, uuid = sys.argv[1], sys.argv[2], sys.argv[3]
mib, request, limit, burst = (int(a) for a in sys.argv[4:8])
buf = bytearray(512 + 128)
buf[0:8] = b"VCUDACFG"
struct.pack_into("<IIII", buf, 8, 1, 512, 1, 128)
buf[48:48 + 9] = b"gpu-check"
buf[112:112 + 4] = b"main"
buf[176:176 + len(region)] = region.encode()
rec = 512
buf[rec:rec + len(uuid)] = uuid.encode()
mode = 0 if request == limit else 1
struct.pack_into("<IIQIIQ", buf, rec + 48, 0, mode, mib << 20, request, limit, burst << 20)
struct.pack_into("<I", buf, 40, zlib.crc32(bytes(buf)) & 0xFFFFFFFF)
open(out, "wb").write(buf)
PY
}

# The node agent's card sampler (test/compute/sampler-child.ts on the real NVML): the TypeScript
# source with tsx, or the bundle native/test/gpu/carry.sh made (VCUDA_SAMPLER_JS).
have_sampler() {
  node -e "process.exit(0)" 2>/dev/null && { [ -n "${VCUDA_SAMPLER_JS:-}" ] || [ -d node_modules/tsx ]; }
}

# SAMPLER_GUARD='{"windowMs":…,"windows":…}' runs the counter guard as a node does (default: observed
# only). SAMPLER_CARD_BUSY=device floors the card busy share it publishes at NVML's device utilization
# (cardBusyFromDevice, card-sampler.ts: the A/B for a soft tenant beside a time-sliced neighbour).
# start_sampler STEM SECONDS CONTAINERS_JSON: starts it on the sensor SAMPLER_SENSOR names (default
# in-process, the one the GPU runs have still to judge; nvml for NVML's, the node agent's default), leaves its pid in SAMPLER_PID and fd 7
# open on its stdin; register_pid KEY PID tells it which container a process belongs to. When stopped
# it prints "counter check: …": NVML's device busy share against the in-process counters' sum over
# its busy 1 s windows, the figures the node agent's counter guard judges (native/COMPUTE.md, "Held
# to the driver"); the scripts show it among the sampler's lines.
start_sampler() {
  local stem=$1 seconds=$2 containers=$3
  local nvml
  nvml=$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')
  local settings="{\"nvmlPath\":\"${nvml:-libnvidia-ml.so.1}\",\"sysfsRoot\":\"/sys\",\"periodMs\":50,\"seconds\":$seconds,\"containers\":[$containers],\"sensor\":\"${SAMPLER_SENSOR:-in-process}\",\"cardBusy\":\"${SAMPLER_CARD_BUSY:-counters}\"${SAMPLER_GUARD:+,\"counterGuard\":$SAMPLER_GUARD}}"
  local cmd=(node --import tsx test/compute/sampler-child.ts)
  [ -n "${VCUDA_SAMPLER_JS:-}" ] && cmd=(node "$VCUDA_SAMPLER_JS")
  mkfifo "$stem.sampler.in"
  "${cmd[@]}" "$settings" <"$stem.sampler.in" >"$stem.sampler.out" 2>&1 &
  SAMPLER_PID=$!
  exec 7>"$stem.sampler.in"
  for _ in $(seq 1 100); do grep -q ready "$stem.sampler.out" && break; sleep 0.1; done
}
register_pid() { echo "{\"key\":\"$1\",\"pids\":[$2]}" >&7; }
stop_sampler() {
  exec 7>&-
  kill "$SAMPLER_PID" 2>/dev/null
  wait "$SAMPLER_PID" 2>/dev/null
}
# region_busy REGION: the in-process sensor's busy ns and samples in device block 0 (+32, +40;
# contract/region-layout.ts).
region_busy() { python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(4096+48); print(*struct.unpack_from("<QQ", d, 4096+32))' "$1"; }
# container_json KEY REGION: one entry of CONTAINERS_JSON (GPU 0).
container_json() { printf '{"key":"%s","regionPath":"%s","deviceIndex":0}' "$1" "$2"; }
