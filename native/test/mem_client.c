/* A plain CUDA program (linked against libcuda.so.1 like -lcuda) that the memory tests run under
 * LD_PRELOAD=libvcuda.so. Each scenario exits 0 on success; see memory_test.c for the setup
 * (limit 64 MiB on device 0, VCUDA_CONTEXT_OVERHEAD_MIB=0 unless a scenario says otherwise). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fakegpu.h"
#include "vc_cuda.h"
#include "vc_nvml.h"
#include "vc_proc.h"

#define MiB (1ull << 20)
CUresult cuArrayCreate(CUarray *pHandle, const void *desc);

static uint64_t limit_bytes(void) { return strtoull(getenv("TEST_LIMIT_MIB"), NULL, 10) * MiB; }

static void setup(void) {
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
  CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS, "cuDeviceGet");
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS, "primary ctx");
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "set current");
}

/* At the limit succeeds, one byte more is OUT_OF_MEMORY and the device holds nothing extra. */
static void paths(void) {
  uint64_t L = limit_bytes();
  uint64_t base = fakegpu_device_used_bytes(0);
  CUdeviceptr p, q;
  CHECK(cuMemAlloc_v2(&p, L) == CUDA_SUCCESS, "cuMemAlloc_v2 at limit");
  CHECK(cuMemAlloc_v2(&q, 1) == CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc_v2 over limit");
  CHECK(fakegpu_device_used_bytes(0) == base + L, "nothing allocated by the refused call");
  CHECK(cuMemFree_v2(p) == CUDA_SUCCESS, "free");
  CHECK(cuMemAlloc_v2(&p, L + 1) == CUDA_ERROR_OUT_OF_MEMORY, "single allocation above limit");
  CHECK(fakegpu_device_used_bytes(0) == base, "after refusal the device is back at base");

  size_t pitch;
  CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, L / 1024, 4) == CUDA_SUCCESS, "pitch at limit (1000 -> 1024 pitch)");
  CHECK(pitch == 1024, "pitch %zu", pitch);
  CHECK(cuMemAllocPitch_v2(&q, &pitch, 512, 1, 4) == CUDA_ERROR_OUT_OF_MEMORY, "pitch over limit");
  CHECK(cuMemFree_v2(p) == CUDA_SUCCESS, "free pitch");
  CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, L / 1000, 4) == CUDA_ERROR_OUT_OF_MEMORY,
        "padded size above the limit refused even though width*height fits");
  CHECK(fakegpu_device_used_bytes(0) == base, "pitch refusal left nothing");

  CHECK(cuMemAllocManaged(&p, L, 1) == CUDA_SUCCESS, "managed at limit");
  CHECK(cuMemAllocManaged(&q, 1, 1) == CUDA_ERROR_OUT_OF_MEMORY, "managed over limit");
  CHECK(cuMemFree_v2(p) == CUDA_SUCCESS, "free managed");

  CHECK(cuMemAllocAsync(&p, L, NULL) == CUDA_SUCCESS, "async at limit");
  CHECK(cuMemAllocAsync_ptsz(&q, 1, NULL) == CUDA_ERROR_OUT_OF_MEMORY, "async_ptsz over limit");
  CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS, "free async");
  CUmemoryPool pool;
  CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS, "default pool");
  CHECK(cuMemAllocFromPoolAsync(&p, L, pool, NULL) == CUDA_SUCCESS, "pool at limit");
  CHECK(cuMemAllocFromPoolAsync(&q, 1, pool, NULL) == CUDA_ERROR_OUT_OF_MEMORY, "pool over limit");
  CHECK(cuMemFreeAsync_ptsz(p, NULL) == CUDA_SUCCESS, "free pool");

  /* A pool that never releases (as PyTorch's cudaMallocAsync backend configures it) keeps freed
   * memory on the device: it stays charged until the pool gives it back. */
  uint64_t never = ~0ull, zero = 0;
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never) == CUDA_SUCCESS, "threshold max");
  CHECK(cuMemAllocAsync(&p, L, NULL) == CUDA_SUCCESS && cuMemFreeAsync(p, NULL) == CUDA_SUCCESS, "async, freed");
  CHECK(fakegpu_device_used_bytes(0) == base + L, "the pool still holds it on the device");
  CHECK(cuMemAlloc_v2(&q, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "memory cached by the pool still counts");
  CHECK(cuMemAllocAsync(&p, L / 2, NULL) == CUDA_SUCCESS, "the pool's cached memory can be reused");
  CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS, "free again");
  CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS, "trim");
  CHECK(cuMemAlloc_v2(&q, L) == CUDA_SUCCESS, "after the pool released its memory the budget is back");
  CHECK(cuMemFree_v2(q) == CUDA_SUCCESS, "free linear");
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero) == CUDA_SUCCESS, "threshold 0");

  /* VMM: created once, mapping twice must not count again; memory lives until release + unmap. */
  CUmemAllocationProp prop = {0};
  prop.type = 1;
  prop.location.type = VC_CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h, h2;
  CHECK(cuMemCreate(&h, L, &prop, 0) == CUDA_SUCCESS, "cuMemCreate at limit");
  CUdeviceptr va;
  CHECK(cuMemAddressReserve(&va, 2 * L, 0, 0, 0) == CUDA_SUCCESS, "reserve");
  CHECK(cuMemMap(va, L, 0, h, 0) == CUDA_SUCCESS, "map 1");
  CHECK(cuMemMap(va + L, L, 0, h, 0) == CUDA_SUCCESS, "map 2 (same handle: no new memory)");
  CHECK(cuMemCreate(&h2, 2 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY, "cuMemCreate over limit");
  CHECK(cuMemRelease(h) == CUDA_SUCCESS, "release while mapped");
  CHECK(cuMemCreate(&h2, 2 * MiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY, "still mapped: still counted");
  CHECK(cuMemUnmap(va, L) == CUDA_SUCCESS && cuMemUnmap(va + L, L) == CUDA_SUCCESS, "unmap both");
  CHECK(cuMemCreate(&h2, L, &prop, 0) == CUDA_SUCCESS, "after release + unmap the budget is back");
  CHECK(cuMemRelease(h2) == CUDA_SUCCESS, "release 2");
  prop.location.type = 2; /* host memory is not GPU memory */
  CHECK(cuMemCreate(&h2, 2 * L, &prop, 0) == CUDA_SUCCESS, "host VMM is not charged");
  CHECK(cuMemRelease(h2) == CUDA_SUCCESS, "release host");

  /* Arrays are charged at the size the driver reports (the fake pads to 64 KiB). */
  CUarray a, b;
  CUDA_ARRAY_DESCRIPTOR d1 = {L / 4 / 1024, 1024, (CUarray_format)0x20, 1}; /* float: exactly L */
  CHECK(cuArrayCreate_v2(&a, &d1) == CUDA_SUCCESS, "1D/2D array at limit");
  CUDA_ARRAY_DESCRIPTOR tiny = {1, 1, (CUarray_format)0x01, 1};
  CHECK(cuArrayCreate_v2(&b, &tiny) == CUDA_ERROR_OUT_OF_MEMORY, "1 byte array = 64 KiB reported, over limit");
  CHECK(cuArrayDestroy(a) == CUDA_SUCCESS, "destroy array");
  CUDA_ARRAY3D_DESCRIPTOR d3 = {256, 256, L / (256 * 256 * 4), (CUarray_format)0x20, 1, 0};
  CHECK(cuArray3DCreate_v2(&a, &d3) == CUDA_SUCCESS, "3D array at limit");
  CHECK(cuArray3DCreate_v2(&b, &d3) == CUDA_ERROR_OUT_OF_MEMORY, "3D over limit");
  CHECK(cuArrayDestroy(a) == CUDA_SUCCESS, "destroy 3D");
  CUmipmappedArray m;
  CUDA_ARRAY3D_DESCRIPTOR md = {4096, 4096, 0, (CUarray_format)0x20, 1, 0}; /* 64 MiB + 16 + 4 + ... */
  CHECK(cuMipmappedArrayCreate(&m, &md, 3) == CUDA_ERROR_OUT_OF_MEMORY, "mipmap levels add up above the limit");
  CHECK(cuMipmappedArrayCreate(&m, &md, 1) == CUDA_SUCCESS, "one level fits");
  CHECK(cuMipmappedArrayDestroy(m) == CUDA_SUCCESS, "destroy mipmap");
  struct { unsigned int w, h; int f; unsigned int ch; } legacy = {1024, 1024, 0x20, 32};
  CHECK(cuArrayCreate(&a, &legacy) == CUDA_ERROR_OUT_OF_MEMORY, "legacy array export is charged too");
  CHECK(fakegpu_device_used_bytes(0) == base, "every refused or freed path left nothing behind");
}

static void views(void) {
  uint64_t L = limit_bytes();
  size_t total = 0, free_b = 0;
  CHECK(cuDeviceTotalMem_v2(&total, 0) == CUDA_SUCCESS && total == L, "cuDeviceTotalMem_v2 = limit (%zu)", total);
  CUdeviceptr p;
  CHECK(cuMemAlloc_v2(&p, 10 * MiB) == CUDA_SUCCESS, "alloc 10 MiB");
  CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS, "cuMemGetInfo_v2");
  CHECK(total == L && free_b == L - 10 * MiB, "cuMemGetInfo_v2 = (%zu, %zu)", free_b, total);
  CHECK(nvmlInit_v2() == NVML_SUCCESS, "nvmlInit");
  nvmlDevice_t d;
  CHECK(nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS, "handle");
  nvmlMemory_t m1;
  CHECK(nvmlDeviceGetMemoryInfo(d, &m1) == NVML_SUCCESS, "nvml v1");
  CHECK(m1.total == L && m1.used == 10 * MiB && m1.free == L - 10 * MiB, "nvml v1 agrees (%llu/%llu)", m1.used, m1.total);
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  CHECK(nvmlDeviceGetMemoryInfo_v2(d, &m2) == NVML_SUCCESS, "nvml v2");
  CHECK(m2.total == L && m2.used == 10 * MiB && m2.free == L - 10 * MiB && m2.reserved == 0, "nvml v2 agrees");
  nvmlProcessInfo_t infos[8];
  unsigned int n = 8;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, infos) == NVML_SUCCESS, "process list");
  int mine = 0;
  for (unsigned int i = 0; i < n; i++) {
    CHECK(infos[i].pid == (unsigned int)getpid(), "only container processes listed (saw pid %u)", infos[i].pid);
    if (infos[i].pid == (unsigned int)getpid()) mine = 1;
  }
  CHECK(mine, "own process listed");
  nvmlProcessUtilizationSample_t samples[8];
  n = 8;
  nvmlReturn_t rc = nvmlDeviceGetProcessUtilization(d, samples, &n, 0);
  for (unsigned int i = 0; rc == NVML_SUCCESS && i < n; i++)
    CHECK(samples[i].pid == (unsigned int)getpid(), "only container processes sampled (saw pid %u)", samples[i].pid);
  CHECK(cuMemFree_v2(p) == CUDA_SUCCESS, "free");
}

/* Inside a container given a share of a MIG instance: CUDA's device 0 is the MIG device, NVML's
 * device 0 its parent card; the MIG device's handle shows the limit, the parent (not in the limit
 * file) shows nothing, and allocations stop at the limit byte-exactly. */
static void migviews(void) {
  uint64_t L = limit_bytes();
  size_t total = 0, free_b = 0;
  CHECK(cuDeviceTotalMem_v2(&total, 0) == CUDA_SUCCESS && total == L, "cuDeviceTotalMem_v2 = limit (%zu)", total);
  CUdeviceptr p, q;
  CHECK(cuMemAlloc_v2(&p, L - MiB) == CUDA_SUCCESS, "alloc all but 1 MiB");
  CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS && total == L && free_b == MiB,
        "cuMemGetInfo_v2 = (%zu, %zu)", free_b, total);
  CHECK(cuMemAlloc_v2(&q, MiB + 1) == CUDA_ERROR_OUT_OF_MEMORY, "one byte past the limit is refused");
  CHECK(cuMemAlloc_v2(&q, MiB) == CUDA_SUCCESS, "the limit itself fits");
  CHECK(nvmlInit_v2() == NVML_SUCCESS, "nvmlInit");
  nvmlDevice_t parent, mig;
  char uuid[96] = "";
  CHECK(nvmlDeviceGetHandleByIndex_v2(0, &parent) == NVML_SUCCESS, "parent handle");
  CHECK(nvmlDeviceGetMigDeviceHandleByIndex(parent, 0, &mig) == NVML_SUCCESS, "MIG device handle");
  CHECK(nvmlDeviceGetUUID(mig, uuid, sizeof uuid) == NVML_SUCCESS && strcmp(uuid, getenv("TEST_MIG_UUID")) == 0,
        "the MIG handle is the instance: %s", uuid);
  nvmlMemory_t m1;
  CHECK(nvmlDeviceGetMemoryInfo(mig, &m1) == NVML_SUCCESS && m1.total == L && m1.used == L && m1.free == 0,
        "nvml v1 on the MIG handle (%llu/%llu)", m1.used, m1.total);
  nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
  CHECK(nvmlDeviceGetMemoryInfo_v2(mig, &m2) == NVML_SUCCESS && m2.total == L && m2.used == L, "nvml v2 agrees");
  CHECK(nvmlDeviceGetMemoryInfo(parent, &m1) == NVML_SUCCESS && m1.total == 0, "the parent card shows no memory");
  CHECK(cuMemFree_v2(q) == CUDA_SUCCESS && cuMemFree_v2(p) == CUDA_SUCCESS, "free");
}

static void getproc(void) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  void *self = dlopen("libvcuda.so", RTLD_NOLOAD | RTLD_NOW);
  void *drv = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
  CHECK(self && drv, "both libraries loaded");
  void *hook_alloc = dlsym(self, "cuMemAlloc_v2");
  CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, &st) == CUDA_SUCCESS && fn == hook_alloc, "cuMemAlloc@3020 -> hook");
  CHECK(dlsym(drv, "cuMemAlloc_v2") == hook_alloc, "dlsym on the driver's own handle -> hook");
  CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 2000, 0, &st) == CUDA_SUCCESS && fn == dlsym(self, "cuMemAlloc"),
        "cuMemAlloc@2000 -> legacy hook");
  CHECK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, 2, &st) == CUDA_SUCCESS &&
            fn == dlsym(self, "cuMemAllocAsync_ptsz"),
        "per-thread flag -> _ptsz hook");
  CHECK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st) == CUDA_SUCCESS &&
            fn == dlsym(self, "cuGetProcAddress_v2"),
        "the resolver resolves to itself (v2)");
  CHECK(cuGetProcAddress("cuGetProcAddress", &fn, 11030, 0) == CUDA_SUCCESS && fn == dlsym(self, "cuGetProcAddress"),
        "the resolver resolves to itself (4-arg)");
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &fn, 12050, 0, &st) == CUDA_SUCCESS && fn == dlsym(self, "cuCtxCreate_v4"),
        "cuCtxCreate@12050 -> _v4 hook");
  CHECK(cuGetProcAddress_v2("cuCtxCreate", &fn, 3020, 0, &st) == CUDA_SUCCESS && fn == dlsym(self, "cuCtxCreate_v2"),
        "cuCtxCreate@3020 -> _v2 hook");
  void *name_fn = NULL;
  CHECK(cuGetProcAddress_v2("cuDeviceGetName", &name_fn, 2000, 0, &st) == CUDA_SUCCESS, "unhooked");
  Dl_info info;
  CHECK(name_fn && dladdr(name_fn, &info) && strstr(info.dli_fname, "fake/libcuda.so.1"),
        "unhooked name -> the driver's own pointer");
  CHECK(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND && fn == NULL &&
            st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
        "unknown symbol passes the driver's answer through");
  CHECK(cuGetProcAddress_v2("cuMemCreate", &fn, 9000, 0, &st) == CUDA_SUCCESS && fn == NULL &&
            st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
        "version too low passes through");
  void *direct = dlsym(RTLD_DEFAULT, "nvmlDeviceGetMemoryInfo");
  CHECK(direct == dlsym(self, "nvmlDeviceGetMemoryInfo"), "NVML names resolve to hooks");
  /* RTLD_NEXT keeps glibc's meaning, "after the caller": from the program the preload comes next. */
  CHECK(dlsym(RTLD_NEXT, "cuMemAlloc_v2") == hook_alloc, "RTLD_NEXT from the program finds the preload");
  CHECK(dlsym(RTLD_NEXT, "getpid") == (void *)&getpid, "RTLD_NEXT for other names still resolves");
}

static const struct vc_proc_entry hooked[] = {
#define VC_PROC_HOOKED(base, export, version, per_thread) {#base, #export, version, per_thread, NULL},
#include "vc_proc_table.h"
};

/* Replays every lookup the CUDA 13.0 runtime makes at start-up (recorded trace): hooked names get
 * the hook of the variant the driver chose, everything else is the driver's own answer. */
static void trace(const char *path) {
  FILE *f = fopen(path, "r");
  CHECK(f != NULL, "open %s", path);
  if (!f) return;
  void *self = dlopen("libvcuda.so", RTLD_NOLOAD | RTLD_NOW);
  char line[256], sym[128];
  int ver, lines = 0, hooks = 0;
  unsigned long long flags;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "getproc %127s %d %llu", sym, &ver, &flags) != 3) continue;
    lines++;
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st;
    CUresult rc = cuGetProcAddress_v2(sym, &fn, ver, flags, &st);
    /* A name the driver lacks: NOT_FOUND, NULL and SYMBOL_NOT_FOUND, as the real driver answers. */
    CHECK(rc == CUDA_SUCCESS || (rc == CUDA_ERROR_NOT_FOUND && !fn && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND),
          "%s@%d = %d", sym, ver, (int)rc);
    enum vc_proc_lookup why;
    const struct vc_proc_entry *e =
        vc_proc_select(hooked, (int)(sizeof hooked / sizeof hooked[0]), sym, ver, flags, &why);
    Dl_info info;
    if (e) {
      hooks++;
      CHECK(fn == dlsym(self, e->export_name), "%s@%d flags %llu -> hook %s", sym, ver, flags, e->export_name);
    } else if (fn && strncmp(sym, "cuLaunch", 8) != 0 && strncmp(sym, "cuGraphLaunch", 13) != 0) {
      CHECK(dladdr(fn, &info) && strstr(info.dli_fname, "fake/libcuda.so.1"), "%s passes through", sym);
    }
  }
  fclose(f);
  CHECK(lines > 400 && hooks >= 20, "replayed %d lookups, %d hooked", lines, hooks);
}

static CUcontext grab_ctx;
static void *grab_thread(void *arg) {
  long *count = arg;
  cuCtxSetCurrent(grab_ctx);
  CUdeviceptr p;
  while (cuMemAlloc_v2(&p, MiB) == CUDA_SUCCESS) (*count)++;
  return NULL;
}

/* 4 threads take 1 MiB at a time until refused; prints the total and keeps it (racing with
 * other processes doing the same: the container total must be exactly the limit). */
static void grab(void) {
  cuCtxGetCurrent(&grab_ctx);
  pthread_t t[4];
  long counts[4] = {0};
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, grab_thread, &counts[i]);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  printf("%ld\n", counts[0] + counts[1] + counts[2] + counts[3]);
  fflush(stdout);
  pause();
}

/* Allocates MiB and waits (the test kills or stops it). */
static void hold(uint64_t mib) {
  CUdeviceptr p;
  CUresult rc = cuMemAlloc_v2(&p, mib * MiB);
  printf("%s\n", rc == CUDA_SUCCESS ? "ready" : "oom");
  fflush(stdout);
  if (rc != CUDA_SUCCESS) exit(3);
  pause();
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (strcmp(argv[1], "init") == 0) return cuInit(0) == CUDA_SUCCESS ? 0 : 4;
  setup();
  if (check_failures) return 1;
  if (strcmp(argv[1], "paths") == 0) paths();
  else if (strcmp(argv[1], "views") == 0) views();
  else if (strcmp(argv[1], "migviews") == 0) migviews();
  else if (strcmp(argv[1], "getproc") == 0) getproc();
  else if (strcmp(argv[1], "trace") == 0 && argc == 3) trace(argv[2]);
  else if (strcmp(argv[1], "grab") == 0) grab();
  else if (strcmp(argv[1], "hold") == 0 && argc == 3) hold(strtoull(argv[2], NULL, 10));
  else if (strcmp(argv[1], "try") == 0 && argc == 3) {
    CUdeviceptr p;
    return cuMemAlloc_v2(&p, strtoull(argv[2], NULL, 10) * MiB) == CUDA_SUCCESS ? 0 : 3;
  } else return 2;
  return check_failures ? 1 : 0;
}
