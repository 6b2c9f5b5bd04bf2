/* What the fake driver serves NVIDIA's CUDA runtime, tested without the toolkit: cuGetProcAddress
 * answers for names it lacks, the private tables (lookup, context-local storage and its
 * destructors, the start-up check and its HMAC-MD2 against published vectors), the library/kernel
 * API with launches timed by kernel name, pinned host memory, copies, and exec reclaim. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fake_md2.h"
#include "fakegpu.h"
#include "vc_cuda.h"

typedef struct CUlib_st *CUlibrary;
CUresult cuGetExportTable(const void **table, const CUuuid *id);
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, void *jitOptions, void **jitOptionsValues,
                           unsigned int numJitOptions, void *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions);
CUresult cuLibraryGetKernel(CUfunction *pKernel, CUlibrary library, const char *name);
CUresult cuLibraryUnload(CUlibrary library);
CUresult cuKernelGetFunction(CUfunction *pFunc, CUfunction kernel);
CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags);
CUresult cuMemFreeHost(void *p);
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);

static void hex(const unsigned char *d, char out[33]) {
  for (int i = 0; i < 16; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_md2(void) {
  static const char *const vectors[][2] = {
      /* RFC 1319, appendix A.5 */
      {"", "8350e5a3e24c153df2275c9f80692773"},
      {"a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"},
      {"abc", "da853b0d3f88d99b30283a69e6ded6bb"},
      {"message digest", "ab4f496bfb2a530b219ff33031fe06b0"},
      {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
       "d5976f79d83d3a0dc9806c3c66f3efd8"},
  };
  for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
    struct fg_md2 c;
    unsigned char d[16];
    char got[33];
    fg_md2_init(&c);
    fg_md2_update(&c, vectors[i][0], strlen(vectors[i][0]));
    fg_md2_final(&c, d);
    hex(d, got);
    CHECK(strcmp(got, vectors[i][1]) == 0, "MD2(\"%s\") = %s", vectors[i][0], got);
  }
  /* The start-up check's keyed digest over a recorded input, as published by ZLUDA's tests. */
  static const unsigned char key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                        0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};
  struct {
    uint32_t driver, runtime, pid, thread;
    uint64_t cudart_table, check_table, check_fn, seconds;
  } in = {12020, 11082, 0x4d08, 0x2b78, 0x7ff8c80717f0ull, 0x7ff8c825e4b0ull, 0x7ff8c7dd0ad0ull, 0x64a365eeull};
  struct __attribute__((packed)) {
    unsigned char uuid[16];
    uint32_t domain, bus, device;
  } dev = {{0x67, 0x22, 0xcb, 0xcf, 0xc6, 0x61, 0xf2, 0x92, 0x74, 0xd6, 0xed, 0x23, 0x2a, 0x32, 0x13, 0x1c}, 0, 4, 0};
  struct fg_md2 c;
  unsigned char mac[16];
  char got[33];
  fg_hmac_md2_begin(&c, key);
  fg_md2_update(&c, &in, sizeof in);
  fg_md2_update(&c, &dev, sizeof dev);
  fg_hmac_md2_end(&c, key, mac);
  hex(mac, got);
  CHECK(strcmp(got, "7a7014f22846c3a784cdbf423331f1ea") == 0, "HMAC-MD2 sample = %s", got);
}

static void test_proc_address(void) {
  void *fn = (void *)1;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  CHECK(cuGetProcAddress_v2("cuNoSuchThing", &fn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND && !fn &&
            st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
        "a name the driver lacks: NOT_FOUND, NULL, SYMBOL_NOT_FOUND");
  CHECK(cuGetProcAddress_v2("cuGraphInstantiateWithFlags", &fn, 12000, 0, &st) == CUDA_SUCCESS &&
            fn == (void *)cuGraphInstantiateWithFlags,
        "cuGraphInstantiateWithFlags is found under its own name");
  CHECK(cuGetProcAddress_v2("cuLibraryLoadData", &fn, 11000, 0, &st) == CUDA_SUCCESS && !fn &&
            st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
        "a name newer than cudaVersion: NULL, VERSION_NOT_SUFFICIENT");
  CHECK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 12000, 2, &st) == CUDA_SUCCESS && fn &&
            fn == dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"),
        "per-thread default stream picks the _ptds copy");
}

static const CUuuid storage_uuid = {{(char)0xc6, (char)0x93, 0x33, 0x6e, 0x11, 0x21, (char)0xdf, 0x11, (char)0xa8,
                                     (char)0xc3, 0x68, (char)0xf3, 0x55, (char)0xd8, (char)0x95, (char)0x93}};
static int dtor_calls;
static void *dtor_value;
static void count_dtor(CUcontext ctx, void *key, void *value) {
  (void)ctx, (void)key;
  dtor_calls++;
  dtor_value = value;
}

static void test_export_tables(CUdevice dev) {
  const void *table = (const void *)1;
  CUuuid unknown = {{1, 2, 3}};
  CHECK(cuGetExportTable(&table, &unknown) == CUDA_ERROR_NOT_FOUND && !table, "unknown table: NOT_FOUND, NULL");
  const void *const *storage = NULL;
  CHECK(cuGetExportTable((const void **)&storage, &storage_uuid) == CUDA_SUCCESS && storage, "storage table");
  if (!storage) return;
  CUresult (*put)(CUcontext, void *, void *, void (*)(CUcontext, void *, void *)) = (void *)storage[0];
  CUresult (*get)(void **, CUcontext, void *) = (void *)storage[2];
  CUcontext ctx;
  CHECK(cuCtxCreate_v2(&ctx, 0, dev) == CUDA_SUCCESS, "context");
  int key;
  void *value = NULL;
  CHECK(get(&value, NULL, &key) != CUDA_SUCCESS, "nothing stored yet");
  CHECK(put(NULL, &key, (void *)0x1234, count_dtor) == CUDA_SUCCESS, "store on the current context");
  CHECK(get(&value, ctx, &key) == CUDA_SUCCESS && value == (void *)0x1234, "read back by handle");
  CHECK(cuCtxDestroy_v2(ctx) == CUDA_SUCCESS, "destroy");
  CHECK(dtor_calls == 1 && dtor_value == (void *)0x1234, "destroying the context runs the destructor once");
}

static void test_library_launch(CUdevice dev) {
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "primary");
  CUlibrary lib;
  CHECK(cuLibraryLoadData(&lib, "fatbin", NULL, NULL, 0, NULL, NULL, 0) == CUDA_SUCCESS, "library");
  CUfunction k1, k2, f;
  CHECK(cuLibraryGetKernel(&k1, lib, "_Z9spin_us50Pi") == CUDA_SUCCESS, "kernel");
  CHECK(cuLibraryGetKernel(&k2, lib, "_Z9spin_us50Pi") == CUDA_SUCCESS && k1 == k2, "one handle per name");
  CHECK(cuKernelGetFunction(&f, k1) == CUDA_SUCCESS, "function of the kernel");
  CUevent a, b;
  cuEventCreate(&a, 0);
  cuEventCreate(&b, 0);
  /* Queued behind 20 ms of work, the events mark the device's timeline, not when this thread got
   * the CPU back (a loaded machine could put a descheduled host gap between them). */
  CUfunction lead;
  CHECK(cuLibraryGetKernel(&lead, lib, "_Z12lead_us20000Pi") == CUDA_SUCCESS, "lead kernel");
  CHECK(cuLaunchKernel(lead, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS, "lead kernel launches");
  cuEventRecord(a, NULL);
  CHECK(cuLaunchKernel(k1, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS, "a CUkernel launches");
  cuEventRecord(b, NULL);
  cuEventSynchronize(b);
  float ms = 0;
  cuEventElapsedTime_v2(&ms, a, b);
  CHECK(ms > 0.045f && ms < 0.055f, "a kernel named ..._us50 takes 50 us of device time (%.3f ms)", ms);
  CHECK(cuLibraryUnload(lib) == CUDA_SUCCESS, "unload");
}

static void test_host_and_copies(void) {
  char *a = NULL, *b = NULL;
  CHECK(cuMemHostAlloc((void **)&a, 4096, 0) == CUDA_SUCCESS && cuMemHostAlloc((void **)&b, 4096, 0) == CUDA_SUCCESS,
        "pinned host memory");
  if (!a || !b) return;
  uint64_t used = fakegpu_device_used_bytes(0);
  CHECK(used == 0, "pinned memory takes nothing from the card (%llu)", (unsigned long long)used);
  memset(a, 9, 4096);
  CHECK(cuMemcpy((CUdeviceptr)(uintptr_t)b, (CUdeviceptr)(uintptr_t)a, 4096) == CUDA_SUCCESS && b[4095] == 9,
        "host-to-host copy moves the bytes");
  CUdeviceptr d;
  CHECK(cuMemAlloc_v2(&d, 4096) == CUDA_SUCCESS, "device buffer");
  CHECK(cuMemcpyHtoD_v2(d, a, 4096) == CUDA_SUCCESS, "to the device");
  CHECK(cuMemsetD8Async(d, 0, 4096, NULL) == CUDA_SUCCESS, "memset in stream order");
  CHECK(cuMemFree_v2(d) == CUDA_SUCCESS && cuMemFreeHost(a) == CUDA_SUCCESS && cuMemFreeHost(b) == CUDA_SUCCESS,
        "frees");
  CHECK(cuMemFreeHost(a) == CUDA_ERROR_INVALID_VALUE, "double free refused");
}

/* A process that allocated and then exec'd: its old image's memory is freed, as by the driver. */
static void test_exec_reclaim(const char *self) {
  pid_t pid = fork();
  if (pid == 0) {
    CUdeviceptr d;
    if (cuInit(0) != CUDA_SUCCESS) _exit(3);
    CUcontext ctx;
    cuDevicePrimaryCtxRetain(&ctx, 0);
    cuCtxSetCurrent(ctx);
    if (cuMemAlloc_v2(&d, 64 << 20) != CUDA_SUCCESS) _exit(4);
    execl(self, self, "after-exec", (char *)NULL);
    _exit(5);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "after exec the card holds nothing (status %d)", status);
}

static int after_exec(void) {
  if (cuInit(0) != CUDA_SUCCESS) return 6;
  CUcontext ctx;
  cuDevicePrimaryCtxRetain(&ctx, 0);
  cuCtxSetCurrent(ctx);
  CUdeviceptr d;
  cuMemAlloc_v2(&d, 1 << 20); /* the first use in the new image */
  cuMemFree_v2(d);
  return fakegpu_device_used_bytes(0) == 0 ? 0 : 7;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "after-exec") == 0) return after_exec();
  setenv("FAKEGPU_DEVICES", "1x1024", 1);
  char state[] = "/tmp/fakegpu-runtime-test-XXXXXX";
  int fd = mkstemp(state);
  if (fd < 0) return 1;
  close(fd);
  unlink(state);
  setenv("FAKEGPU_STATE", state, 1);
  test_md2();
  test_proc_address();
  CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
  test_export_tables(0);
  test_library_launch(0);
  test_host_and_copies();
  test_exec_reclaim(argv[0]);
  unlink(state);
  return check_failures ? 1 : 0;
}
