/* Timing client for test/bench/native.bench.ts; runs with or without LD_PRELOAD=libvcuda.so.
 *   bench_client alloc N    ns per cuMemAlloc_v2(1 MiB) + cuMemFree_v2 pair
 *   bench_client launch N [W]  ns per cuLaunchKernel, resolved through cuGetProcAddress like cudart,
 *                           after W warm-up launches (default N/10)
 *   bench_client init       ms spent in cuInit (limit file, region, driver) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vc_cuda.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int setup(void) {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return -1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "init") == 0) {
    double t0 = now_ns();
    CUresult rc = cuInit(0);
    double t1 = now_ns();
    if (rc != CUDA_SUCCESS) return 1;
    printf("%.3f\n", (t1 - t0) / 1e6);
    return 0;
  }
  if (argc < 3 || argc > 4 || setup() != 0) return 2;
  long n = strtol(argv[2], NULL, 10);
  long warm_up = argc == 4 ? strtol(argv[3], NULL, 10) : n / 10;
  if (strcmp(argv[1], "alloc") == 0) {
    CUdeviceptr p;
    for (long i = 0; i < n / 10; i++) /* warm up: tables grown, pages touched */
      if (cuMemAlloc_v2(&p, 1 << 20) || cuMemFree_v2(p)) return 3;
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
      if (cuMemAlloc_v2(&p, 1 << 20) || cuMemFree_v2(p)) return 3;
    printf("%.1f\n", (now_ns() - t0) / (double)n);
    return 0;
  }
  if (strcmp(argv[1], "launch") == 0) {
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                       void **, void **) = NULL;
    CUdriverProcAddressQueryResult st;
    if (cuGetProcAddress_v2("cuLaunchKernel", (void **)&launch, 4000, 0, &st) || !launch) return 4;
    CUmodule mod;
    CUfunction f;
    if (cuModuleLoadData(&mod, "fake") || cuModuleGetFunction(&f, mod, "k")) return 5;
    for (long i = 0; i < warm_up; i++)
      if (launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) return 6;
    double t0 = now_ns();
    for (long i = 0; i < n; i++)
      if (launch(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL)) return 6;
    printf("%.1f\n", (now_ns() - t0) / (double)n);
    return 0;
  }
  return 2;
}
