/* A CUDA + NVML program that reports what it enumerates, for fake_visible_test.c and the
 * multi-card end-to-end test (run inside a simulated container, under libvcuda):
 *   fake_visible_client list
 *     cuda.count=N, then per ordinal cuda.I.uuid / cuda.I.pci / cuda.I.total_mib (cuDeviceTotalMem),
 *     nvml.count=N, then per index nvml.I.uuid / nvml.I.index / nvml.I.minor / nvml.I.total_mib /
 *     nvml.I.used_mib (nvmlDeviceGetMemoryInfo), nvml.I.util (nvmlDeviceGetUtilizationRates gpu %)
 *   fake_visible_client alloc ORDINAL MIB CHUNK_MIB HOLD_MS
 *     context on ORDINAL, allocates MIB in chunks; prints alloc.ORDINAL.allocated_mib and
 *     alloc.ORDINAL.result=ok|out-of-memory|error, holds the memory HOLD_MS; exit 0, 2 (out of
 *     memory) or 1.
 *   fake_visible_client busy ORDINAL MS
 *     runs MS one-millisecond kernels on ORDINAL (fake driver: a function named k_us1000) and waits
 *     for them; prints busy.ORDINAL.result=ok.
 *   fake_visible_client events TIMEOUT_MS
 *     registers every visible device for Xid events, prints events.ready=1, then one
 *     event.N.index (NVML index of the handle) / event.N.xid per event until TIMEOUT_MS pass
 *     without one, then events.count.
 * Every line is key=value. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vc_cuda.h"
#include "vc_nvml.h"

#define MIB (1024ull * 1024ull)

static void format_uuid(const CUuuid *u, char out[48]) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
           b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int list_cuda(void) {
  int count = 0;
  CUresult rc = cuInit(0);
  if (rc == CUDA_SUCCESS) rc = cuDeviceGetCount(&count);
  printf("cuda.init=%d\ncuda.count=%d\n", (int)rc, rc == CUDA_SUCCESS ? count : 0);
  for (int i = 0; rc == CUDA_SUCCESS && i < count; i++) {
    CUdevice dev;
    CUuuid uuid;
    char text[48], pci[32];
    size_t total = 0;
    if (cuDeviceGet(&dev, i) != CUDA_SUCCESS || cuDeviceGetUuid(&uuid, dev) != CUDA_SUCCESS ||
        cuDeviceGetPCIBusId(pci, sizeof pci, dev) != CUDA_SUCCESS || cuDeviceTotalMem_v2(&total, dev) != CUDA_SUCCESS)
      return 1;
    format_uuid(&uuid, text);
    printf("cuda.%d.uuid=%s\ncuda.%d.pci=%s\ncuda.%d.total_mib=%llu\n", i, text, i, pci, i,
           (unsigned long long)(total / MIB));
  }
  return 0;
}

static int list_nvml(void) {
  unsigned int count = 0;
  if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS) return 1;
  printf("nvml.count=%u\n", count);
  for (unsigned int i = 0; i < count; i++) {
    nvmlDevice_t d;
    char uuid[96];
    unsigned int index = 0, minor = 0;
    nvmlMemory_t m;
    if (nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS || nvmlDeviceGetUUID(d, uuid, sizeof uuid) != NVML_SUCCESS ||
        nvmlDeviceGetIndex(d, &index) != NVML_SUCCESS || nvmlDeviceGetMinorNumber(d, &minor) != NVML_SUCCESS ||
        nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS)
      return 1;
    nvmlUtilization_t u = {0, 0};
    nvmlDeviceGetUtilizationRates(d, &u);
    nvmlDevice_t again;
    int by_uuid = nvmlDeviceGetHandleByUUID(uuid, &again) == NVML_SUCCESS && again == d;
    printf("nvml.%u.uuid=%s\nnvml.%u.index=%u\nnvml.%u.minor=%u\nnvml.%u.by_uuid=%d\nnvml.%u.total_mib=%llu\n"
           "nvml.%u.used_mib=%llu\nnvml.%u.util=%u\n",
           i, uuid, i, index, i, minor, i, by_uuid, i, (unsigned long long)(m.total / MIB), i,
           (unsigned long long)(m.used / MIB), i, u.gpu);
  }
  nvmlShutdown();
  return 0;
}

static int alloc(int ordinal, long mib, long chunk_mib, long hold_ms) {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
      cuCtxCreate_v2(&ctx, 0, dev) != CUDA_SUCCESS) {
    printf("alloc.%d.result=error\n", ordinal);
    return 1;
  }
  long got = 0;
  int status = 0;
  while (got < mib) {
    long want = mib - got < chunk_mib ? mib - got : chunk_mib;
    CUdeviceptr p;
    CUresult rc = cuMemAlloc_v2(&p, (size_t)want * MIB);
    if (rc != CUDA_SUCCESS) {
      status = rc == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1;
      break;
    }
    got += want;
  }
  printf("alloc.%d.allocated_mib=%ld\nalloc.%d.result=%s\n", ordinal, got, ordinal,
         status == 0 ? "ok" : status == 2 ? "out-of-memory" : "error");
  fflush(stdout);
  struct timespec ts = {.tv_sec = hold_ms / 1000, .tv_nsec = (hold_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return status;
}

static int busy(int ordinal, long ms) {
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod = NULL;
  CUfunction f;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
      cuCtxCreate_v2(&ctx, 0, dev) != CUDA_SUCCESS || cuModuleLoadData(&mod, "fake module") != CUDA_SUCCESS ||
      cuModuleGetFunction(&f, mod, "k_us1000") != CUDA_SUCCESS)
    return 1;
  for (long i = 0; i < ms; i++)
    if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS) return 1;
  if (cuCtxSynchronize() != CUDA_SUCCESS) return 1;
  printf("busy.%d.result=ok\n", ordinal);
  return 0;
}

static int events(unsigned int timeout_ms) {
  unsigned int count = 0;
  nvmlEventSet_t set;
  if (nvmlInit_v2() != NVML_SUCCESS || nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS ||
      nvmlEventSetCreate(&set) != NVML_SUCCESS)
    return 1;
  for (unsigned int i = 0; i < count; i++) {
    nvmlDevice_t d;
    if (nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS ||
        nvmlDeviceRegisterEvents(d, VC_NVML_EVENT_XID, set) != NVML_SUCCESS)
      return 1;
  }
  printf("events.ready=1\n");
  int n = 0;
  nvmlEventData_t e;
  while (nvmlEventSetWait_v2(set, &e, timeout_ms) == NVML_SUCCESS) {
    unsigned int index = 99;
    nvmlDeviceGetIndex(e.device, &index);
    printf("event.%d.index=%u\nevent.%d.xid=%llu\n", n, index, n, (unsigned long long)e.eventData);
    n++;
  }
  printf("events.count=%d\n", n);
  nvmlEventSetFree(set);
  nvmlShutdown();
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 2 && strcmp(argv[1], "list") == 0) return list_cuda() || list_nvml();
  if (argc == 6 && strcmp(argv[1], "alloc") == 0)
    return alloc(atoi(argv[2]), atol(argv[3]), atol(argv[4]), atol(argv[5]));
  if (argc == 4 && strcmp(argv[1], "busy") == 0) return busy(atoi(argv[2]), atol(argv[3]));
  if (argc == 3 && strcmp(argv[1], "events") == 0) return events((unsigned int)atoi(argv[2]));
  fprintf(stderr, "usage: fake_visible_client list | alloc ORDINAL MIB CHUNK_MIB HOLD_MS | busy ORDINAL MS | events TIMEOUT_MS\n");
  return 64;
}
