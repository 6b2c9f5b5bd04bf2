/* A GPU tenant for the compute tests and benchmark: launches kernels on device 0 of the fake
 * driver for a number of seconds through one submission path, as a real program would under the
 * preload. Prints one line: "launches N".
 *
 *   compute_client PATH GRID SECONDS
 *     PATH: storm   cuLaunchKernel back to back (async)
 *           sync    cuLaunchKernel then cuCtxSynchronize, each time (big-kernel loop)
 *           ex      cuLaunchKernelEx back to back
 *           coop    cuLaunchCooperativeKernel back to back
 *           graph   cuGraphLaunch of a one-kernel graph back to back
 *           getproc cuLaunchKernel obtained through cuGetProcAddress_v2
 *     GRID: blocks per launch (the fake driver derives the kernel time from it and its SM count)
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vc_cuda.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define CHECK(call)                                                 \
  do {                                                              \
    CUresult rc_ = (call);                                          \
    if (rc_ != CUDA_SUCCESS) {                                      \
      fprintf(stderr, "compute_client: %s = %d\n", #call, (int)rc_); \
      return 2;                                                     \
    }                                                               \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: compute_client storm|sync|ex|coop|graph|getproc GRID SECONDS\n");
    return 2;
  }
  const char *path = argv[1];
  unsigned grid = (unsigned)strtoul(argv[2], NULL, 10);
  double seconds = strtod(argv[3], NULL);

  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuCtxCreate_v2(&ctx, 0, dev));
  CHECK(cuModuleLoadData(&mod, "fake-module"));
  CHECK(cuModuleGetFunction(&fn, mod, "spin"));

  CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                     void **, void **) = cuLaunchKernel;
  if (strcmp(path, "getproc") == 0) {
    void *p = NULL;
    CUdriverProcAddressQueryResult status;
    CHECK(cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 0, &status));
    launch = (CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                          void **, void **))p;
  }
  CUgraphExec exec = NULL;
  if (strcmp(path, "graph") == 0) {
    CUstream s;
    CUgraph g;
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchKernel(fn, grid, 1, 1, 128, 1, 1, 0, s, NULL, NULL));
    CHECK(cuStreamEndCapture(s, &g));
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
  }
  CUlaunchConfig cfg = {grid, 1, 1, 128, 1, 1, 0, NULL, NULL, 0};

  unsigned long long launches = 0;
  double end = now_s() + seconds;
  while (now_s() < end) {
    for (int i = 0; i < 16; i++) {
      if (strcmp(path, "ex") == 0) CHECK(cuLaunchKernelEx(&cfg, fn, NULL, NULL));
      else if (strcmp(path, "coop") == 0) CHECK(cuLaunchCooperativeKernel(fn, grid, 1, 1, 128, 1, 1, 0, NULL, NULL));
      else if (strcmp(path, "graph") == 0) CHECK(cuGraphLaunch(exec, NULL));
      else CHECK(launch(fn, grid, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL));
      launches++;
      if (strcmp(path, "sync") == 0) {
        CHECK(cuCtxSynchronize());
        break;
      }
    }
  }
  CHECK(cuCtxSynchronize());
  printf("launches %llu\n", launches);
  return 0;
}
