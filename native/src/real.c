/* Resolves the real driver libraries once. libvcuda is named libvcuda.so, so dlopen of the
 * sonames finds the driver (or the fake driver in tests), never this library; a check below
 * refuses a driver that resolves back to our own exports (libvcuda installed as libcuda.so.1). */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#include "log.h"

typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn real_dlsym_fn;
static void *cuda_handle;
static void *nvml_handle;
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

static void resolve_dlsym(void) {
  /* dlvsym is not interposed, so this reaches glibc's dlsym (2.34 moved it into libc.so.6). */
  real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!real_dlsym_fn) real_dlsym_fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

void *vc_real_dlsym(void *handle, const char *symbol) {
  pthread_once(&dlsym_once, resolve_dlsym);
  return real_dlsym_fn ? real_dlsym_fn(handle, symbol) : NULL;
}

/* Whether `fn` lives in this library (the driver soname would then be libvcuda itself). */
static int is_own(void *fn) {
  Dl_info theirs, ours;
  return fn && dladdr(fn, &theirs) && dladdr((void *)&vc_real_cuda, &ours) && theirs.dli_fbase == ours.dli_fbase;
}

static void *open_driver(const char *soname, const char *probe) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    vc_log(VC_LOG_INFO, "dlopen(%s): %s", soname, dlerror());
    return NULL;
  }
  if (is_own(vc_real_dlsym(h, probe))) {
    vc_log(VC_LOG_ERROR, "%s resolves to libvcuda itself; install libvcuda under its own name", soname);
    return NULL;
  }
  return h;
}

/* Set while this thread is inside dlopen of a driver: a driver constructor that calls dlsym must
 * not re-enter the pthread_once that is loading it (that would deadlock). */
static _Thread_local int opening;

int vc_real_opening(void) { return opening; }

static void open_cuda(void) {
  opening = 1;
  cuda_handle = open_driver("libcuda.so.1", "cuInit");
  opening = 0;
}

static void open_nvml(void) {
  opening = 1;
  nvml_handle = open_driver("libnvidia-ml.so.1", "nvmlInit_v2");
  opening = 0;
}

void *vc_real_cuda(const char *symbol) {
  pthread_once(&cuda_once, open_cuda);
  return cuda_handle ? vc_real_dlsym(cuda_handle, symbol) : NULL;
}

void *vc_real_nvml(const char *symbol) {
  pthread_once(&nvml_once, open_nvml);
  return nvml_handle ? vc_real_dlsym(nvml_handle, symbol) : NULL;
}

CUresult vc_real_get_proc_address(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *status) {
  __typeof__(&cuGetProcAddress_v2) v2 = VC_REAL_CUDA(cuGetProcAddress_v2);
  if (v2) return v2(symbol, pfn, cuda_version, flags, status);
  __typeof__(&cuGetProcAddress) v1 = VC_REAL_CUDA(cuGetProcAddress);
  if (!v1) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = v1(symbol, pfn, cuda_version, flags);
  if (status) *status = (rc == CUDA_SUCCESS && *pfn) ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return rc;
}
