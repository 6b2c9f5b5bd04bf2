// Timing client for test/bench/native.bench.ts: ns per cudaMalloc(1 MiB) + cudaFree pair through
// NVIDIA's CUDA runtime (built by nvcc against the shared libcudart), run over the fake driver
// with and without LD_PRELOAD=libvcuda.so, so the runtime's and the fake's own costs cancel out.
//
//   bench_alloc N     prints ns per pair, averaged over N pairs after N/10 warm-up pairs
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv) {
  long n = argc == 2 ? strtol(argv[1], nullptr, 10) : 0;
  if (n <= 0) {
    fprintf(stderr, "usage: bench_alloc N\n");
    return 2;
  }
  if (cudaFree(nullptr) != cudaSuccess) return 3;  // starts the runtime and the primary context
  void *p = nullptr;
  for (long i = 0; i < n / 10; i++)  // warm up: the runtime's and the hooks' tables grown
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) return 4;
  double t0 = now_ns();
  for (long i = 0; i < n; i++)
    if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) return 4;
  printf("%.1f\n", (now_ns() - t0) / (double)n);
  return 0;
}
