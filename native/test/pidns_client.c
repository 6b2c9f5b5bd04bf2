/* A container process for pidns_test, run under LD_PRELOAD=libvcuda.so with the fake driver:
 *   hold MIB   allocates MIB on device 0, runs one kernel, prints "ready", waits for stdin to close
 *   list       prints what NVML shows this container on device 0, one row a line:
 *                v3 PID MIB     nvmlDeviceGetComputeRunningProcesses_v3
 *                v1 PID MIB     nvmlDeviceGetComputeRunningProcesses
 *                util PID       nvmlDeviceGetProcessUtilization (distinct pids)
 *                util2 PID      nvmlDeviceGetProcessesUtilizationInfo (distinct pids), after a
 *                               sizing call (NULL array) that must ask for at least as many
 *                graphics RC    nvmlDeviceGetGraphicsRunningProcesses_v3 (through dlsym)'s return
 *                               code: the fake has none, the hook must pass that through
 *              and "end" last. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlfcn.h>

#include "vc_nvml.h"

#include "vc_cuda.h"

#define MiB (1ull << 20)

static int hold(unsigned long long mib) {
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUfunction fn;
  CUdeviceptr p;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return 4;
  if (cuMemAlloc_v2(&p, mib * MiB) != CUDA_SUCCESS) return 3;
  /* One wave of 2 ms, so the card's utilization sampler has a sample of this process. */
  if (cuModuleLoadData(&mod, "fake-module") != CUDA_SUCCESS || cuModuleGetFunction(&fn, mod, "spin_us2000") != CUDA_SUCCESS ||
      cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
    return 5;
  printf("ready\n");
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  return 0;
}

static int list(void) {
  nvmlDevice_t d;
  if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetHandleByIndex_v2(0, &d) != NVML_SUCCESS) return 4;
  nvmlProcessInfo_t v3[64];
  unsigned int n = 64;
  if (nvmlDeviceGetComputeRunningProcesses_v3(d, &n, v3) != NVML_SUCCESS) return 6;
  for (unsigned int i = 0; i < n; i++) printf("v3 %u %llu\n", v3[i].pid, v3[i].usedGpuMemory / MiB);
  nvmlProcessInfo_v1_t v1[64];
  n = 64;
  if (nvmlDeviceGetComputeRunningProcesses(d, &n, v1) != NVML_SUCCESS) return 6;
  for (unsigned int i = 0; i < n; i++) printf("v1 %u %llu\n", v1[i].pid, v1[i].usedGpuMemory / MiB);
  nvmlProcessUtilizationSample_t s[256];
  n = 256;
  nvmlReturn_t rc = nvmlDeviceGetProcessUtilization(d, s, &n, 0);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_FOUND) return 7;
  if (rc == NVML_ERROR_NOT_FOUND) n = 0;
  for (unsigned int i = 0; i < n; i++) {
    int seen = 0;
    for (unsigned int j = 0; j < i; j++) seen |= s[j].pid == s[i].pid;
    if (!seen) printf("util %u\n", s[i].pid);
  }
  nvmlProcessesUtilizationInfo_t info = {.version = nvmlProcessesUtilizationInfo_v1};
  rc = nvmlDeviceGetProcessesUtilizationInfo(d, &info);
  if (rc != NVML_ERROR_INSUFFICIENT_SIZE && rc != NVML_ERROR_NOT_FOUND) return 8;
  unsigned int needed = info.processSamplesCount;
  nvmlProcessUtilizationInfo_v1_t u[256];
  info = (nvmlProcessesUtilizationInfo_t){.version = nvmlProcessesUtilizationInfo_v1, .processSamplesCount = 256,
                                          .procUtilArray = u};
  rc = nvmlDeviceGetProcessesUtilizationInfo(d, &info);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_FOUND) return 9;
  if (rc == NVML_ERROR_NOT_FOUND) info.processSamplesCount = 0;
  if (info.processSamplesCount > needed) return 10;
  for (unsigned int i = 0; i < info.processSamplesCount; i++) {
    int seen = 0;
    for (unsigned int j = 0; j < i; j++) seen |= u[j].pid == u[i].pid;
    if (!seen) printf("util2 %u\n", u[i].pid);
  }
  /* Found through dlsym: the fake driver does not export it, only libvcuda does. */
  nvmlReturn_t (*graphics)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *) =
      (nvmlReturn_t (*)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *))dlsym(RTLD_DEFAULT,
                                                                                  "nvmlDeviceGetGraphicsRunningProcesses_v3");
  nvmlProcessInfo_t g[4];
  n = 4;
  printf("graphics %d\n", graphics ? (int)graphics(d, &n, g) : -1);
  printf("end\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "hold") == 0) return hold(strtoull(argv[2], NULL, 10));
  if (argc == 2 && strcmp(argv[1], "list") == 0) return list();
  return 2;
}
