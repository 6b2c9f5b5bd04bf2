/*
 * cuda-workload: a small CUDA driver-API program for simulated pods.
 *
 *   cuda-workload [--alloc-mib N] [--chunk-mib N] [--hold-seconds S]
 *
 * Creates a context on device 0, prints what cuMemGetInfo reports (inside a vcuda container that
 * is the limit, not the card), then allocates N MiB in chunks. Every line it prints is
 * `key=value` so tests can read it. Exits 0 when everything was allocated, 2 when the driver said
 * CUDA_ERROR_OUT_OF_MEMORY (the enforced limit), 1 on any other error. With --hold-seconds it
 * keeps the memory that long before freeing it (a long-running pod).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vc_cuda.h"

#define MIB (1024ull * 1024ull)

static long arg_long(int argc, char **argv, const char *name, long def) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
  return def;
}

int main(int argc, char **argv) {
  long alloc_mib = arg_long(argc, argv, "--alloc-mib", 0);
  long chunk_mib = arg_long(argc, argv, "--chunk-mib", 256);
  long hold_s = arg_long(argc, argv, "--hold-seconds", 0);
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
  if (hold_s > 0) sleep((unsigned)hold_s);
  for (int i = 0; i < n; i++) cuMemFree_v2(ptrs[i]);
  return status;
}
