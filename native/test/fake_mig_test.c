/* MIG in the fake driver and fake NVML: mode per card, the H100 80GB and H200 141GB profile tables
 * (IDs, slices, SMs, memory, placements), GPU and compute instances created and destroyed with the
 * real codes (a taken placement is INSUFFICIENT_RESOURCES), MIG device handles and `MIG-` UUIDs,
 * and a CUDA process on a MIG device (CUDA_VISIBLE_DEVICES=MIG-…) that sees the instance's memory
 * and SMs. The CUDA side runs in child processes of this binary: visibility is resolved per process. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "vc_cuda.h"
#include "vc_nvml.h"

#define MIB (1024ull * 1024ull)

struct want {
  unsigned int index, id, slices, instances, sms;
  unsigned long long mib;
  const char *name;
  unsigned int placements, starts[7], size;
};

static const struct want h100[] = {
    {0x0, 19, 1, 7, 16, 9984, "1g.10gb", 7, {0, 1, 2, 3, 4, 5, 6}, 1},
    {0x7, 20, 1, 1, 16, 9984, "1g.10gb+me", 7, {0, 1, 2, 3, 4, 5, 6}, 1},
    {0x9, 15, 1, 4, 26, 20096, "1g.20gb", 4, {0, 2, 4, 6}, 2},
    {0x1, 14, 2, 3, 32, 20096, "2g.20gb", 3, {0, 2, 4}, 2},
    {0x2, 9, 3, 2, 60, 40448, "3g.40gb", 2, {0, 4}, 4},
    {0x3, 5, 4, 1, 64, 40448, "4g.40gb", 1, {0}, 4},
    {0x4, 0, 7, 1, 132, 81152, "7g.80gb", 1, {0}, 8},
};

static const struct want h200[] = {
    {0x0, 19, 1, 7, 16, 16384, "1g.18gb", 7, {0, 1, 2, 3, 4, 5, 6}, 1},
    {0x7, 20, 1, 1, 16, 16384, "1g.18gb+me", 7, {0, 1, 2, 3, 4, 5, 6}, 1},
    {0x9, 15, 1, 4, 26, 33280, "1g.35gb", 4, {0, 2, 4, 6}, 2},
    {0x1, 14, 2, 3, 32, 33280, "2g.35gb", 3, {0, 2, 4}, 2},
    {0x2, 9, 3, 2, 60, 71424, "3g.71gb", 2, {0, 4}, 4},
    {0x3, 5, 4, 1, 64, 71424, "4g.71gb", 1, {0}, 4},
    {0x4, 0, 7, 1, 132, 143360, "7g.141gb", 1, {0}, 8},
};

static nvmlDevice_t card(unsigned int i) {
  nvmlDevice_t d = NULL;
  CHECK(nvmlDeviceGetHandleByIndex_v2(i, &d) == NVML_SUCCESS, "handle %u", i);
  return d;
}

static void check_table(nvmlDevice_t d, const struct want *w, const char *label) {
  for (int i = 0; i < 7; i++) {
    nvmlGpuInstanceProfileInfo_t v1;
    CHECK(nvmlDeviceGetGpuInstanceProfileInfo(d, w[i].index, &v1) == NVML_SUCCESS, "%s %s info", label, w[i].name);
    CHECK(v1.id == w[i].id && v1.sliceCount == w[i].slices && v1.instanceCount == w[i].instances &&
              v1.multiprocessorCount == w[i].sms && v1.memorySizeMB == w[i].mib,
          "%s %s: id %u slices %u instances %u sms %u mem %llu", label, w[i].name, v1.id, v1.sliceCount,
          v1.instanceCount, v1.multiprocessorCount, v1.memorySizeMB);
    nvmlGpuInstanceProfileInfo_v3_t v3 = {.version = nvmlGpuInstanceProfileInfo_v3};
    CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(d, w[i].index, (nvmlGpuInstanceProfileInfo_v2_t *)&v3) == NVML_SUCCESS,
          "%s v3", w[i].name);
    char name[64];
    snprintf(name, sizeof name, "MIG %s", w[i].name);
    CHECK(strcmp(v3.name, name) == 0 && v3.id == w[i].id && v3.memorySizeMB == w[i].mib, "%s v3 name %s", label,
          v3.name);
    unsigned int count = 0;
    CHECK(nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, w[i].id, NULL, &count) == NVML_SUCCESS &&
              count == w[i].placements,
          "%s %s: %u placements", label, w[i].name, count);
    nvmlGpuInstancePlacement_t pl[8];
    count = 8;
    nvmlDeviceGetGpuInstancePossiblePlacements_v2(d, w[i].id, pl, &count);
    for (unsigned int k = 0; k < count && k < w[i].placements; k++)
      CHECK(pl[k].start == w[i].starts[k] && pl[k].size == w[i].size, "%s %s placement %u: %u:%u", label, w[i].name,
            k, pl[k].start, pl[k].size);
  }
  nvmlGpuInstanceProfileInfo_t v1;
  CHECK(nvmlDeviceGetGpuInstanceProfileInfo(d, 0x5, &v1) == NVML_ERROR_NOT_SUPPORTED, "8-slice: not on this card");
  CHECK(nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_COUNT, &v1) == NVML_ERROR_INVALID_ARGUMENT,
        "past the profile count: INVALID_ARGUMENT (the end of an enumeration)");
  nvmlGpuInstanceProfileInfo_v2_t v2 = {.version = nvmlGpuInstanceProfileInfo_v2};
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(d, 0x9, &v2) == NVML_SUCCESS && v2.id == 15 && v2.memorySizeMB == w[2].mib,
        "v2 layout");
  v2.version = 0x01000098;
  CHECK(nvmlDeviceGetGpuInstanceProfileInfoV(d, 0x9, &v2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "bad version");
}

static void test_modes_and_tables(void) {
  unsigned int cur = 9, pend = 9;
  CHECK(nvmlDeviceGetMigMode(card(0), &cur, &pend) == NVML_SUCCESS && cur == 1 && pend == 1, "card 0: FAKEGPU_MIG=0");
  CHECK(nvmlDeviceGetMigMode(card(1), &cur, &pend) == NVML_SUCCESS && cur == 0, "card 1 starts without MIG");
  CHECK(nvmlDeviceGetMigMode(card(2), &cur, &pend) == NVML_ERROR_NOT_SUPPORTED, "a 1 GiB card has no MIG");
  nvmlGpuInstanceProfileInfo_t v1;
  CHECK(nvmlDeviceGetGpuInstanceProfileInfo(card(1), 0, &v1) == NVML_SUCCESS && v1.id == 19,
        "profiles are listed out of MIG mode too, as an H200 with driver 580 does");
  CHECK(nvmlDeviceGetGpuInstanceProfileInfo(card(2), 0, &v1) == NVML_ERROR_NOT_SUPPORTED, "not on a card without MIG");
  nvmlGpuInstance_t none;
  CHECK(nvmlDeviceCreateGpuInstance(card(1), 19, &none) == NVML_ERROR_NOT_SUPPORTED, "instances need MIG mode");
  unsigned int max = 9;
  CHECK(nvmlDeviceGetMaxMigDeviceCount(card(1), &max) == NVML_SUCCESS && max == 0, "no MIG devices without MIG");
  nvmlReturn_t activation = NVML_ERROR_UNKNOWN;
  CHECK(nvmlDeviceSetMigMode(card(1), NVML_DEVICE_MIG_ENABLE, &activation) == NVML_SUCCESS &&
            activation == NVML_SUCCESS,
        "MIG on for an idle card");
  CHECK(nvmlDeviceGetMigMode(card(1), &cur, &pend) == NVML_SUCCESS && cur == 1, "card 1 in MIG mode");
  check_table(card(0), h100, "H100 80GB");
  check_table(card(1), h200, "H200 141GB");
}

static nvmlGpuInstance_t create_at(nvmlDevice_t d, unsigned int profile, unsigned int start, nvmlReturn_t want) {
  nvmlGpuInstance_t gi = NULL;
  nvmlGpuInstancePlacement_t pl = {.start = start, .size = 0};
  unsigned int sizes[] = {[19] = 1, [20] = 1, [15] = 2, [14] = 2, [9] = 4, [5] = 4, [0] = 8};
  pl.size = sizes[profile];
  nvmlReturn_t rc = nvmlDeviceCreateGpuInstanceWithPlacement(d, profile, &pl, &gi);
  CHECK(rc == want, "profile %u at %u: %d, want %d", profile, start, rc, want);
  return gi;
}

static unsigned int gi_id(nvmlGpuInstance_t gi) {
  nvmlGpuInstanceInfo_t info = {0};
  CHECK(nvmlGpuInstanceGetInfo(gi, &info) == NVML_SUCCESS, "GPU instance info");
  return info.id;
}

static void destroy_all(nvmlGpuInstance_t *gis, int n) {
  for (int i = 0; i < n; i++) CHECK(nvmlGpuInstanceDestroy(gis[i]) == NVML_SUCCESS, "destroy %d", i);
}

/* Placements on the 8-slice axis: taken ones are INSUFFICIENT_RESOURCES, illegal ones INVALID_ARGUMENT. */
static void test_placements(void) {
  nvmlDevice_t d = card(0);
  nvmlGpuInstance_t a = create_at(d, 9, 4, NVML_SUCCESS);
  CHECK(a && gi_id(a) == 2, "3g.40gb at slice 4 is GPU instance 2");
  create_at(d, 9, 4, NVML_ERROR_INSUFFICIENT_RESOURCES);
  create_at(d, 14, 4, NVML_ERROR_INSUFFICIENT_RESOURCES); /* 2g at 4 overlaps slices 4..5 */
  create_at(d, 9, 2, NVML_ERROR_INVALID_ARGUMENT);       /* 2 is no placement of a 3g */
  create_at(d, 5, 0, NVML_SUCCESS + 0);                  /* 4g at 0 beside a 3g: 7 compute slices */
  unsigned int left = 9;
  CHECK(nvmlDeviceGetGpuInstanceRemainingCapacity(d, 19, &left) == NVML_SUCCESS && left == 0, "full: %u", left);
  nvmlGpuInstance_t all[8];
  unsigned int n = 8;
  CHECK(nvmlDeviceGetGpuInstances(d, 5, all, &n) == NVML_SUCCESS && n == 1, "one 4g");
  nvmlGpuInstance_t four = all[0];
  CHECK(nvmlGpuInstanceDestroy(four) == NVML_SUCCESS, "destroy the 4g");
  CHECK(nvmlGpuInstanceDestroy(four) == NVML_ERROR_INVALID_ARGUMENT, "a destroyed instance's handle is invalid");
  nvmlGpuInstance_t b = create_at(d, 9, 0, NVML_SUCCESS);
  CHECK(nvmlDeviceGetGpuInstanceRemainingCapacity(d, 19, &left) == NVML_SUCCESS && left == 0,
        "two 3g take every memory slice and strand the seventh compute slice");
  destroy_all((nvmlGpuInstance_t[]){a, b}, 2);
  /* Seven 1g.10gb on slices 0..6, the eighth slice only spanned by larger profiles. */
  CHECK(nvmlDeviceGetGpuInstanceRemainingCapacity(d, 19, &left) == NVML_SUCCESS && left == 7, "7 x 1g: %u", left);
  nvmlGpuInstance_t ones[7];
  for (unsigned int i = 0; i < 7; i++) {
    CHECK(nvmlDeviceCreateGpuInstance(d, 19, &ones[i]) == NVML_SUCCESS, "1g.10gb #%u", i);
    CHECK(gi_id(ones[i]) == 7 + i, "1g at slice %u is GPU instance %u", i, 7 + i);
  }
  CHECK(nvmlDeviceCreateGpuInstance(d, 19, &a) == NVML_ERROR_INSUFFICIENT_RESOURCES, "an eighth 1g.10gb");
  create_at(d, 15, 6, NVML_ERROR_INSUFFICIENT_RESOURCES); /* 1g.20gb at 6: slice 6 taken */
  destroy_all(ones, 7);
  a = create_at(d, 20, 3, NVML_SUCCESS);
  create_at(d, 20, 5, NVML_ERROR_INSUFFICIENT_RESOURCES); /* one +me: the media engines are taken */
  b = create_at(d, 15, 6, NVML_SUCCESS);
  destroy_all((nvmlGpuInstance_t[]){a, b}, 2);
}

/* Compute instances, MIG device handles, UUIDs and per-instance memory; returns the 3g's UUID. */
static nvmlGpuInstance_t test_mig_devices(char uuid[96]) {
  nvmlDevice_t d = card(0);
  nvmlGpuInstance_t small = create_at(d, 19, 6, NVML_SUCCESS), gi = create_at(d, 9, 0, NVML_SUCCESS);
  nvmlComputeInstanceProfileInfo_t cp;
  CHECK(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, 0, &cp) ==
            NVML_ERROR_NOT_SUPPORTED,
        "no 7-slice compute instance in a 3g");
  CHECK(nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 2, 0, &cp) == NVML_SUCCESS && cp.multiprocessorCount == 60 &&
            cp.sliceCount == 3 && cp.instanceCount == 1,
        "3-slice compute instance: 60 SMs");
  nvmlComputeInstance_t ci, ci_small;
  CHECK(nvmlGpuInstanceCreateComputeInstance(gi, 2, &ci) == NVML_SUCCESS, "compute instance");
  CHECK(nvmlGpuInstanceCreateComputeInstance(gi, 0, &ci_small) == NVML_ERROR_INSUFFICIENT_RESOURCES, "3g is full");
  CHECK(nvmlGpuInstanceCreateComputeInstance(small, 0, &ci_small) == NVML_SUCCESS, "1g compute instance");
  CHECK(nvmlGpuInstanceDestroy(gi) == NVML_ERROR_IN_USE, "a GPU instance with a compute instance is in use");
  nvmlComputeInstanceInfo_t ci_info;
  CHECK(nvmlComputeInstanceGetInfo_v2(ci, &ci_info) == NVML_SUCCESS && ci_info.id == 0 && ci_info.profileId == 2 &&
            ci_info.placement.size == 3 && ci_info.device == d,
        "compute instance info");
  unsigned int max = 0, v = 9;
  CHECK(nvmlDeviceGetMaxMigDeviceCount(d, &max) == NVML_SUCCESS && max == 7, "7 MIG devices at most");
  nvmlDevice_t m0, m1, m2, parent;
  CHECK(nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &m0) == NVML_SUCCESS, "MIG device 0");
  CHECK(nvmlDeviceGetMigDeviceHandleByIndex(d, 1, &m1) == NVML_SUCCESS, "MIG device 1");
  CHECK(nvmlDeviceGetMigDeviceHandleByIndex(d, 2, &m2) == NVML_ERROR_NOT_FOUND, "no third");
  CHECK(nvmlDeviceIsMigDeviceHandle(m0, &v) == NVML_SUCCESS && v == 1, "is a MIG handle");
  CHECK(nvmlDeviceIsMigDeviceHandle(d, &v) == NVML_SUCCESS && v == 0, "the card is not");
  CHECK(nvmlDeviceGetGpuInstanceId(m0, &v) == NVML_SUCCESS && v == 1, "ordered by GPU instance ID: 3g (1) first");
  CHECK(nvmlDeviceGetGpuInstanceId(m1, &v) == NVML_SUCCESS && v == 13, "then the 1g at slice 6 (13)");
  CHECK(nvmlDeviceGetComputeInstanceId(m0, &v) == NVML_SUCCESS && v == 0, "compute instance 0");
  CHECK(nvmlDeviceGetGpuInstanceId(d, &v) == NVML_ERROR_NOT_SUPPORTED, "a card has no GPU instance ID");
  CHECK(nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m0, &parent) == NVML_SUCCESS && parent == d, "parent");
  CHECK(nvmlDeviceGetMinorNumber(m0, &v) == NVML_ERROR_NOT_SUPPORTED, "card-only call on a MIG handle");
  CHECK(nvmlDeviceGetUUID(m0, uuid, 96) == NVML_SUCCESS && strncmp(uuid, "MIG-", 4) == 0, "MIG- UUID: %s", uuid);
  nvmlDevice_t again;
  CHECK(nvmlDeviceGetHandleByUUID(uuid, &again) == NVML_SUCCESS && again == m0, "handle by MIG- UUID");
  char name[96];
  CHECK(nvmlDeviceGetName(m0, name, sizeof name) == NVML_SUCCESS && strcmp(name, "NVIDIA H100 80GB HBM3 MIG 3g.40gb") == 0,
        "name %s", name);
  nvmlMemory_t mem;
  CHECK(nvmlDeviceGetMemoryInfo(m0, &mem) == NVML_SUCCESS && mem.total == 40448 * MIB, "3g memory %llu", mem.total);
  CHECK(nvmlDeviceGetMemoryInfo(m1, &mem) == NVML_SUCCESS && mem.total == 9984 * MIB, "1g memory %llu", mem.total);
  nvmlUtilization_t u;
  unsigned int samples = 0;
  CHECK(nvmlDeviceGetUtilizationRates(d, &u) == NVML_ERROR_NOT_SUPPORTED, "no utilization in MIG mode");
  CHECK(nvmlDeviceGetProcessUtilization(d, NULL, &samples, 0) == NVML_ERROR_NOT_SUPPORTED, "no process samples");
  nvmlProcessesUtilizationInfo_t pu = {.version = nvmlProcessesUtilizationInfo_v1};
  CHECK(nvmlDeviceGetProcessesUtilizationInfo(m0, &pu) == NVML_ERROR_NOT_SUPPORTED, "nor through the versioned call");
  nvmlReturn_t act;
  CHECK(nvmlDeviceSetMigMode(d, 0, &act) == NVML_ERROR_IN_USE, "MIG off with instances: IN_USE");
  CHECK(nvmlComputeInstanceDestroy(ci_small) == NVML_SUCCESS && nvmlGpuInstanceDestroy(small) == NVML_SUCCESS,
        "destroy the 1g");
  return gi;
}

/* Child: what CUDA (and NVML) enumerate in this process; allocates `a` then `b` MiB on device 0,
 * and with "hold" keeps them for a second after saying so. */
static int child(int argc, char **argv) {
  int count = 0;
  CUdevice dev = 0;
  CUcontext ctx;
  printf("init=%d\n", cuInit(0));
  cuDeviceGetCount(&count);
  printf("count=%d\n", count);
  unsigned int nvml_count = 0;
  char uuid[96] = "";
  if (nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetCount_v2(&nvml_count) == NVML_SUCCESS && nvml_count > 0)
    nvmlDeviceGetUUID(card(0), uuid, sizeof uuid);
  printf("nvml_count=%u\nnvml_uuid=%s\n", nvml_count, uuid);
  if (count == 0) return 0;
  size_t total = 0;
  int sms = 0;
  CUuuid u;
  cuDeviceGet(&dev, 0);
  cuDeviceTotalMem_v2(&total, dev);
  cuDeviceGetAttribute(&sms, (CUdevice_attribute)16, dev);
  cuDeviceGetUuid(&u, dev);
  const unsigned char *b = (const unsigned char *)u.bytes;
  printf("total_mib=%zu\nsms=%d\nuuid=%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n",
         (size_t)(total / MIB), sms, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
         b[13], b[14], b[15]);
  cuCtxCreate(&ctx, 0, dev);
  size_t free_bytes = 0, ctx_total = 0;
  cuMemGetInfo_v2(&free_bytes, &ctx_total);
  printf("ctx_total_mib=%zu\n", (size_t)(ctx_total / MIB));
  CUdeviceptr p;
  printf("alloc_a=%d\n", argc > 2 ? (int)cuMemAlloc_v2(&p, strtoull(argv[2], NULL, 10) * MIB) : -1);
  printf("alloc_b=%d\n", argc > 3 ? (int)cuMemAlloc_v2(&p, strtoull(argv[3], NULL, 10) * MIB) : -1);
  fflush(stdout);
  if (argc > 4 && strcmp(argv[4], "hold") == 0) sleep(1);
  return 0;
}

static FILE *spawn(const char *env, const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "env %s /proc/%d/exe child %s", env, (int)getpid(), args);
  return popen(cmd, "r");
}

static const char *field(const char *out, const char *key) {
  static char v[4][128];
  static int next;
  char *slot = v[next++ % 4], pat[64];
  snprintf(pat, sizeof pat, "\n%s=", key);
  const char *p = strstr(out, pat);
  snprintf(slot, 128, "%.*s", p ? (int)strcspn(p + strlen(pat), "\n") : 0, p ? p + strlen(pat) : "");
  return slot;
}

static void read_all(FILE *f, char *out, size_t len) {
  out[0] = '\n';
  size_t n = fread(out + 1, 1, len - 2, f);
  out[n + 1] = '\0';
  pclose(f);
}

static void test_cuda_on_mig(const char *uuid) {
  char env[256], out[4096];
  snprintf(env, sizeof env, "CUDA_VISIBLE_DEVICES=%s", uuid);
  read_all(spawn(env, "40000 1024"), out, sizeof out);
  CHECK(strcmp(field(out, "count"), "1") == 0, "one CUDA device: %s", out);
  CHECK(strcmp(field(out, "total_mib"), "40448") == 0, "the 3g's memory: %s", field(out, "total_mib"));
  CHECK(strcmp(field(out, "sms"), "60") == 0, "the 3g's SMs: %s", field(out, "sms"));
  CHECK(strcmp(field(out, "ctx_total_mib"), "40448") == 0, "a context's cuMemGetInfo: %s", field(out, "ctx_total_mib"));
  CHECK(strcmp(field(out, "uuid"), uuid + 4) == 0, "CUDA's UUID is the MIG device's: %s", field(out, "uuid"));
  CHECK(strcmp(field(out, "alloc_a"), "0") == 0 && strcmp(field(out, "alloc_b"), "2") == 0,
        "40000 MiB fit, 1 GiB more is out of memory: %s %s", field(out, "alloc_a"), field(out, "alloc_b"));
  read_all(spawn("-u CUDA_VISIBLE_DEVICES", ""), out, sizeof out);
  CHECK(strcmp(field(out, "count"), "2") == 0 && strcmp(field(out, "total_mib"), "40448") == 0,
        "a card in MIG mode named whole is its MIG devices (card 1 has none), then card 2: %s", out);
  snprintf(env, sizeof env, "-u CUDA_VISIBLE_DEVICES FAKEGPU_VISIBLE_DEVICES=%s", uuid);
  read_all(spawn(env, ""), out, sizeof out);
  char parent[96];
  nvmlDeviceGetUUID(card(0), parent, sizeof parent);
  CHECK(strcmp(field(out, "count"), "1") == 0 && strcmp(field(out, "sms"), "60") == 0, "a container given the MIG device");
  CHECK(strcmp(field(out, "nvml_count"), "1") == 0 && strcmp(field(out, "nvml_uuid"), parent) == 0,
        "NVML in it sees the parent card: %s", field(out, "nvml_uuid"));
  snprintf(env, sizeof env, "CUDA_VISIBLE_DEVICES=%s,0", "MIG-00000000-0000-0000-0000-000000000000");
  read_all(spawn(env, ""), out, sizeof out);
  CHECK(strcmp(field(out, "count"), "0") == 0, "CUDA stops at an entry that names nothing");
}

static void test_in_use(nvmlGpuInstance_t gi, const char *uuid) {
  char env[256], line[256];
  snprintf(env, sizeof env, "CUDA_VISIBLE_DEVICES=%s", uuid);
  FILE *f = spawn(env, "1024 0 hold");
  while (fgets(line, sizeof line, f) && strncmp(line, "alloc_b=", 8) != 0) {
  }
  nvmlDevice_t m0;
  nvmlMemory_t mem;
  nvmlDeviceGetMigDeviceHandleByIndex(card(0), 0, &m0);
  CHECK(nvmlDeviceGetMemoryInfo(m0, &mem) == NVML_SUCCESS && mem.used == 1024 * MIB, "instance used %llu", mem.used);
  CHECK(nvmlDeviceGetMemoryInfo(card(0), &mem) == NVML_SUCCESS && mem.used == 1024 * MIB, "card used %llu", mem.used);
  nvmlComputeInstance_t ci[2];
  unsigned int n = 2;
  CHECK(nvmlGpuInstanceGetComputeInstances(gi, 2, ci, &n) == NVML_SUCCESS && n == 1, "one compute instance");
  CHECK(nvmlComputeInstanceDestroy(ci[0]) == NVML_ERROR_IN_USE, "a process holds the MIG device");
  pclose(f);
  CHECK(nvmlComputeInstanceDestroy(ci[0]) == NVML_SUCCESS, "free once it ended");
  CHECK(nvmlGpuInstanceDestroy(gi) == NVML_SUCCESS, "then the GPU instance");
  nvmlReturn_t act;
  CHECK(nvmlDeviceSetMigMode(card(0), 0, &act) == NVML_SUCCESS, "MIG off on an empty card");
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child(argc, argv);
  char state[] = "/tmp/fakegpu-mig-XXXXXX";
  int fd = mkstemp(state);
  if (fd < 0) return 1;
  close(fd);
  unlink(state);
  setenv("FAKEGPU_STATE", state, 1);
  setenv("FAKEGPU_DEVICES", "81559,143771,1024", 1);
  setenv("FAKEGPU_MIG", "0", 1);
  unsetenv("FAKEGPU_VISIBLE_DEVICES");
  unsetenv("CUDA_VISIBLE_DEVICES");
  CHECK(nvmlInit_v2() == NVML_SUCCESS, "nvmlInit");
  test_modes_and_tables();
  test_placements();
  char uuid[96] = "";
  nvmlGpuInstance_t gi = test_mig_devices(uuid);
  test_cuda_on_mig(uuid);
  test_in_use(gi, uuid);
  unlink(state);
  return check_failures ? 1 : 0;
}
