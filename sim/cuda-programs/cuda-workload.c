/*
 * cuda-workload: a small CUDA driver-API program for simulated pods.
 *
 *   cuda-workload [--alloc-mib N] [--chunk-mib N] [--hold-seconds S] [--busy-percent P]
 *
 * Creates a context on device 0, prints what cuMemGetInfo reports (inside a vcuda container that
 * is the limit, not the card), then allocates N MiB in chunks. Every line it prints is
 * `key=value` so tests can read it. Exits 0 when everything was allocated, 2 when the driver said
 * CUDA_ERROR_OUT_OF_MEMORY (the enforced limit), 1 on any other error. With --hold-seconds it
 * keeps the memory that long before freeing it (a long-running pod). With --busy-percent P it
 * spends the hold launching kernels: every 100 ms tick one kernel of P ms (the fake driver costs a
 * function named `..._us<N>` N µs per wave, one block is one wave), synchronised, then sleeps the
 * rest of the tick; the launches go through libvcuda, so the pod's compute limit throttles them and
 * NVML's per-process utilization shows the busy time. P = 0 holds without launching (an idle pod).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vc_cuda.h"

#define MIB (1024ull * 1024ull)

static long arg_long(int argc, char **argv, const char *name, long def) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
  return def;
}

#define TICK_MS 100

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&t, NULL);
}

/* Keeps the device busy `percent` of every tick for `seconds`; returns 0, or 1 on a driver error. */
static int run_busy(long percent, long seconds) {
  CUmodule mod;
  CUfunction fn;
  char name[64];
  static const char image[] = "cuda-workload";
  snprintf(name, sizeof name, "busy_us%ld", percent * TICK_MS * 10);
  CUresult rc = cuModuleLoadData(&mod, image);
  if (rc == CUDA_SUCCESS) rc = cuModuleGetFunction(&fn, mod, name);
  if (rc != CUDA_SUCCESS) { printf("error=cuModule rc=%d\n", (int)rc); return 1; }
  double end = now_s() + (double)seconds;
  while (now_s() < end) {
    double tick_end = now_s() + TICK_MS / 1000.0;
    rc = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    if (rc == CUDA_SUCCESS) rc = cuCtxSynchronize();
    if (rc != CUDA_SUCCESS) { printf("error=cuLaunchKernel rc=%d\n", (int)rc); return 1; }
    sleep_s(tick_end - now_s());
  }
  cuModuleUnload(mod);
  return 0;
}

int main(int argc, char **argv) {
  long alloc_mib = arg_long(argc, argv, "--alloc-mib", 0);
  long chunk_mib = arg_long(argc, argv, "--chunk-mib", 256);
  long hold_s = arg_long(argc, argv, "--hold-seconds", 0);
  long busy_pct = arg_long(argc, argv, "--busy-percent", 0);
  if (busy_pct < 0 || busy_pct > 100) { printf("error=--busy-percent must be 0..100\n"); return 1; }
  CUdevice dev;
  CUcontext ctx;
  size_t free_b = 0, total_b = 0;
  CUresult rc = cuInit(0);
  if (rc != CUDA_SUCCESS) { printf("error=cuInit rc=%d\n", (int)rc); return 1; }
  if ((rc = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) { printf("error=cuDeviceGet rc=%d\n", (int)rc); return 1; }
  if ((rc = cuCtxCreate_v2(&ctx, 0, dev)) != CUDA_SUCCESS) { printf("error=cuCtxCreate rc=%d\n", (int)rc); return 1; }
  if ((rc = cuMemGetInfo_v2(&free_b, &total_b)) != CUDA_SUCCESS) { printf("error=cuMemGetInfo rc=%d\n", (int)rc); return 1; }
  printf("total_mib=%llu\nfree_mib=%llu\n", (unsigned long long)(total_b / MIB), (unsigned long long)(free_b / MIB));
  fflush(stdout);

  long got = 0;
  int status = 0;
  CUdeviceptr ptrs[4096];
  int n = 0;
  while (got < alloc_mib && n < 4096) {
    long want = alloc_mib - got < chunk_mib ? alloc_mib - got : chunk_mib;
    rc = cuMemAlloc_v2(&ptrs[n], (size_t)want * MIB);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY) { status = 2; break; }
    if (rc != CUDA_SUCCESS) { printf("error=cuMemAlloc rc=%d\n", (int)rc); status = 1; break; }
    n++;
    got += want;
  }
  printf("allocated_mib=%ld\nresult=%s\n", got, status == 0 ? "ok" : status == 2 ? "out-of-memory" : "error");
  fflush(stdout);
  if (hold_s > 0 && busy_pct > 0 && status == 0) status = run_busy(busy_pct, hold_s);
  else if (hold_s > 0) sleep((unsigned)hold_s);
  for (int i = 0; i < n; i++) cuMemFree_v2(ptrs[i]);
  return status;
}
