/* A plain CUDA program run under LD_PRELOAD=libvcuda.so by burst_test.c. Its arguments are
 * operations, run in order; a lower-case allocation must succeed, an upper-case one must be
 * refused with CUDA_ERROR_OUT_OF_MEMORY (sizes in MiB):
 *   a:N / A:N   cuMemAlloc_v2          m:N / M:N   cuMemAllocManaged (global)
 *   p:N / P:N   cuMemAllocAsync        V:N         cuMemCreate on the device (refused)
 *   T:N         cuMemAllocPitch, N rows of 1 MiB (refused)
 *   f:I         free allocation I (0-based, in order made)      F   free all
 *   q:I         cuMemFreeAsync of allocation I, on the capturing stream while a capture runs
 *   c           begin stream capture on a new stream; again: end it
 *   k           launch a kernel and synchronize (touches this process's managed memory)
 *   i:FREE:TOTAL   cuMemGetInfo must say so      n:USED:TOTAL   NVML memory info must say so
 *   d:TOTAL     cuDeviceTotalMem must say so    u:MAX   the card's physical use at most MAX
 *   r:RES:HOST  this process's managed memory resident / on the host (fake driver's figures)
 *   w           print "ready" and wait for a line on stdin      x   destroy the context
 *   z           make the device's primary context current      Z   cuDevicePrimaryCtxReset_v2
 *   y:T:N       T threads each cuMemAlloc_v2 N MiB until refused; g:M  they got M MiB in all
 * Exits 0 when every operation did what it says, 1 (naming the operation) otherwise. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fakegpu.h"
#include "vc_cuda.h"
#include "vc_nvml.h"

#define MiB (1ull << 20)
#define MAX_ALLOCS 256

static CUcontext ctx;
static CUdeviceptr allocs[MAX_ALLOCS];
static int n_allocs;
static CUstream capture_stream;

static _Atomic uint64_t raced_mib;
static uint64_t race_chunk_mib;

/* One racer: allocates in this context until refused; what it got stays allocated. */
static void *racer(void *unused) {
  (void)unused;
  CUdeviceptr p;
  if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) return NULL;
  while (cuMemAlloc_v2(&p, race_chunk_mib * MiB) == CUDA_SUCCESS) atomic_fetch_add(&raced_mib, race_chunk_mib);
  return NULL;
}

static void race(uint64_t threads, uint64_t chunk, const char *op) {
  pthread_t t[64];
  race_chunk_mib = chunk;
  if (threads > 64) threads = 64;
  for (uint64_t i = 0; i < threads; i++) CHECK(pthread_create(&t[i], NULL, racer, NULL) == 0, "%s: thread", op);
  for (uint64_t i = 0; i < threads; i++) pthread_join(t[i], NULL);
}

static void expect_rc(CUresult rc, int want_ok, const char *op, CUdeviceptr p) {
  if (want_ok) {
    CHECK(rc == CUDA_SUCCESS, "%s: error %d, expected success", op, (int)rc);
    if (rc == CUDA_SUCCESS && n_allocs < MAX_ALLOCS) allocs[n_allocs++] = p;
  } else {
    CHECK(rc == CUDA_ERROR_OUT_OF_MEMORY, "%s: error %d, expected CUDA_ERROR_OUT_OF_MEMORY", op, (int)rc);
  }
}

static void allocate(char kind, uint64_t mib, const char *op) {
  CUdeviceptr p = 0;
  int ok = kind >= 'a' && kind <= 'z';
  CUresult rc;
  switch (kind) {
    case 'a': case 'A': rc = cuMemAlloc_v2(&p, mib * MiB); break;
    case 'm': case 'M': rc = cuMemAllocManaged(&p, mib * MiB, 1); break;
    case 'p': case 'P': rc = cuMemAllocAsync(&p, mib * MiB, NULL); break;
    case 'T': {
      size_t pitch;
      rc = cuMemAllocPitch_v2(&p, &pitch, MiB, mib, 4);
      break;
    }
    default: { /* 'V' */
      CUmemAllocationProp prop = {0};
      prop.type = 1;
      prop.location.type = VC_CU_MEM_LOCATION_TYPE_DEVICE;
      CUmemGenericAllocationHandle h = 0;
      rc = cuMemCreate(&h, mib * MiB, &prop, 0);
      if (rc == CUDA_SUCCESS) cuMemRelease(h);
      break;
    }
  }
  expect_rc(rc, ok, op, p);
}

static void capture(const char *op) {
  if (!capture_stream) {
    CHECK(cuStreamCreate(&capture_stream, 0) == CUDA_SUCCESS, "%s: stream", op);
    CHECK(cuStreamBeginCapture_v2(capture_stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "%s: begin", op);
    return;
  }
  CUgraph g = NULL;
  CHECK(cuStreamEndCapture(capture_stream, &g) == CUDA_SUCCESS, "%s: end", op);
  capture_stream = NULL;
}

static void kernel(const char *op) {
  CUmodule mod;
  CUfunction fn;
  CHECK(cuModuleLoadData(&mod, "fake-module") == CUDA_SUCCESS, "%s: module", op);
  CHECK(cuModuleGetFunction(&fn, mod, "touch_us1") == CUDA_SUCCESS, "%s: function", op);
  CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS, "%s: launch", op);
  CHECK(cuCtxSynchronize() == CUDA_SUCCESS, "%s: synchronize", op);
}

static void check_views(char kind, uint64_t x, uint64_t y, const char *op) {
  if (kind == 'i') {
    size_t free_b = 0, total = 0;
    CHECK(cuMemGetInfo_v2(&free_b, &total) == CUDA_SUCCESS, "%s: cuMemGetInfo", op);
    CHECK(free_b == x * MiB && total == y * MiB, "%s: cuMemGetInfo says free %zu total %zu", op, free_b, total);
  } else if (kind == 'n') {
    nvmlDevice_t d;
    nvmlMemory_t m;
    CHECK(nvmlInit_v2() == NVML_SUCCESS && nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS, "%s: nvml", op);
    CHECK(nvmlDeviceGetMemoryInfo(d, &m) == NVML_SUCCESS, "%s: nvml memory", op);
    CHECK(m.used == x * MiB && m.total == y * MiB, "%s: NVML says used %llu total %llu", op, m.used, m.total);
  } else if (kind == 'd') {
    size_t total = 0;
    CHECK(cuDeviceTotalMem_v2(&total, 0) == CUDA_SUCCESS && total == x * MiB, "%s: total %zu", op, total);
  } else if (kind == 'u') {
    uint64_t used = fakegpu_device_used_bytes(0);
    CHECK(used <= x * MiB, "%s: the card holds %llu bytes, more than it has", op, (unsigned long long)used);
  } else { /* 'r' */
    uint64_t res = 0, host = 0, ev = 0;
    CHECK(fakegpu_managed_residency(0, &res, &host, &ev) == 0, "%s: residency", op);
    CHECK(res == x * MiB && host == y * MiB, "%s: resident %llu MiB, host %llu MiB", op,
          (unsigned long long)(res / MiB), (unsigned long long)(host / MiB));
  }
}

static void wait_line(void) {
  printf("ready\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) == 1 && c != '\n') {
  }
}

static void run(const char *op) {
  uint64_t x = 0, y = 0;
  char kind = op[0];
  if (op[1] == ':') {
    char *end;
    x = strtoull(op + 2, &end, 10);
    if (*end == ':') y = strtoull(end + 1, NULL, 10);
  }
  if (strchr("aAmMpPVT", kind)) allocate(kind, x, op);
  else if (strchr("indur", kind)) check_views(kind, x, y, op);
  else if (kind == 'f') CHECK(x < (uint64_t)n_allocs && cuMemFree_v2(allocs[x]) == CUDA_SUCCESS, "%s: free", op);
  else if (kind == 'q')
    CHECK(x < (uint64_t)n_allocs && cuMemFreeAsync(allocs[x], capture_stream) == CUDA_SUCCESS, "%s: free async", op);
  else if (kind == 'F') {
    for (int i = 0; i < n_allocs; i++) cuMemFree_v2(allocs[i]);
    n_allocs = 0;
  } else if (kind == 'c') capture(op);
  else if (kind == 'y') race(x, y, op);
  else if (kind == 'g') CHECK(atomic_load(&raced_mib) == x, "%s: the racers got %llu MiB", op,
                              (unsigned long long)atomic_load(&raced_mib));
  else if (kind == 'k') kernel(op);
  else if (kind == 'w') wait_line();
  else if (kind == 'x') CHECK(cuCtxDestroy_v2(ctx) == CUDA_SUCCESS, "%s: destroy", op);
  else if (kind == 'z') {
    CUcontext primary;
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS && cuCtxSetCurrent(primary) == CUDA_SUCCESS,
          "%s: primary", op);
  } else if (kind == 'Z') CHECK(cuDevicePrimaryCtxReset_v2(0) == CUDA_SUCCESS, "%s: reset", op);
  else CHECK(0, "unknown operation %s", op);
}

int main(int argc, char **argv) {
  CUdevice dev;
  CHECK(cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS, "cuInit");
  CHECK(cuCtxCreate_v2(&ctx, 0, dev) == CUDA_SUCCESS, "context");
  for (int i = 1; i < argc && !check_failures; i++) run(argv[i]);
  return check_failures ? 1 : 0;
}
