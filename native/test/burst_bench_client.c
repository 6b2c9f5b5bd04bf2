/* Timing client of test/bench/memory-burst.bench.ts, run under LD_PRELOAD=libvcuda.so:
 *   pairs N MIB      N x (cuMemAlloc_v2(MIB) + cuMemFree_v2); prints ns per pair
 *   latency N MIB    the same, timing each pair; prints {"p50":…,"p99":…,"max":…} in ns
 *   burst MIB        allocates MIB in 64 MiB pieces, prints "ready", then launches a kernel
 *                    every millisecond (each migrates evicted pages back) until stdin closes;
 *                    prints {"kernels":…,"meanUs":…,"maxUs":…}: launch-to-synchronized time,
 *                    which grows when its pages were evicted (FAKEGPU_UVM_NS_PER_MIB) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vc_cuda.h"

#define MiB (1ull << 20)
#define PIECE_MIB 64u

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int setup(void) {
  CUdevice dev;
  CUcontext ctx;
  return cuInit(0) == CUDA_SUCCESS && cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
                 cuCtxCreate_v2(&ctx, 0, dev) == CUDA_SUCCESS
             ? 0
             : -1;
}

static int pair(uint64_t bytes) {
  CUdeviceptr p;
  if (cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS) return -1;
  return cuMemFree_v2(p) == CUDA_SUCCESS ? 0 : -1;
}

static int pairs(long n, uint64_t bytes) {
  if (pair(bytes) != 0) return 1; /* warm: the first call opens the region and the fake's state */
  uint64_t t0 = now_ns();
  for (long i = 0; i < n; i++)
    if (pair(bytes) != 0) return 1;
  printf("%.1f\n", (double)(now_ns() - t0) / (double)n);
  return 0;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static int latency(long n, uint64_t bytes) {
  uint64_t *t = calloc((size_t)n, sizeof *t);
  if (!t || pair(bytes) != 0) return 1;
  for (long i = 0; i < n; i++) {
    uint64_t t0 = now_ns();
    if (pair(bytes) != 0) return 1;
    t[i] = now_ns() - t0;
    usleep(200); /* give the neighbour's kernels time to migrate its pages back */
  }
  qsort(t, (size_t)n, sizeof *t, cmp);
  printf("{\"p50\":%llu,\"p99\":%llu,\"max\":%llu}\n", (unsigned long long)t[n / 2],
         (unsigned long long)t[(n * 99) / 100], (unsigned long long)t[n - 1]);
  free(t);
  return 0;
}

static int burst(uint64_t mib) {
  CUdeviceptr p;
  for (uint64_t done = 0; done < mib; done += PIECE_MIB)
    if (cuMemAlloc_v2(&p, PIECE_MIB * MiB) != CUDA_SUCCESS) return 1;
  CUmodule mod;
  CUfunction fn;
  if (cuModuleLoadData(&mod, "bench") != CUDA_SUCCESS || cuModuleGetFunction(&fn, mod, "touch_us1") != CUDA_SUCCESS)
    return 1;
  printf("ready\n");
  fflush(stdout);
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  char c;
  uint64_t kernels = 0, total_ns = 0, max_ns = 0;
  while (read(0, &c, 1) != 0) {
    uint64_t t0 = now_ns();
    if (cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS) return 1;
    cuCtxSynchronize();
    uint64_t took = now_ns() - t0;
    kernels++;
    total_ns += took;
    if (took > max_ns) max_ns = took;
    usleep(1000);
  }
  printf("{\"kernels\":%llu,\"meanUs\":%.1f,\"maxUs\":%.1f}\n", (unsigned long long)kernels,
         kernels ? (double)total_ns / (double)kernels / 1000.0 : 0.0, (double)max_ns / 1000.0);
  return 0;
}

int main(int argc, char **argv) {
  if (setup() != 0) {
    fprintf(stderr, "burst_bench_client: no context\n");
    return 1;
  }
  if (argc == 4 && !strcmp(argv[1], "pairs")) return pairs(atol(argv[2]), strtoull(argv[3], NULL, 10) * MiB);
  if (argc == 4 && !strcmp(argv[1], "latency")) return latency(atol(argv[2]), strtoull(argv[3], NULL, 10) * MiB);
  if (argc == 3 && !strcmp(argv[1], "burst")) return burst(strtoull(argv[2], NULL, 10));
  fprintf(stderr, "usage: burst_bench_client pairs N MIB | latency N MIB | burst MIB\n");
  return 2;
}
