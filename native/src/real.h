/* The real driver: libcuda.so.1 and libnvidia-ml.so.1, resolved once with dlopen, never through
 * libvcuda's own exports (hooks forward here). Thread-safe; results are cached by the callers
 * through VC_REAL_CUDA / VC_REAL_NVML. */
#ifndef VCUDA_REAL_H
#define VCUDA_REAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "vc_cuda.h"

/* The real `symbol` (an export name such as "cuMemAlloc_v2"), or NULL when the driver or the
 * symbol is missing. */
void *vc_real_cuda(const char *symbol);
void *vc_real_nvml(const char *symbol);

/* Non-zero while this thread is loading a driver library (dlsym then passes straight through). */
int vc_real_opening(void);

/* glibc's dlsym, bypassing libvcuda's dlsym interposer. */
void *vc_real_dlsym(void *handle, const char *symbol);

/* The driver's own cuGetProcAddress_v2 (or the 4-argument one on drivers older than 12.0).
 * Returns CUDA_ERROR_NOT_INITIALIZED when the driver cannot be loaded. */
CUresult vc_real_get_proc_address(const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *status);

/* Cached typed lookups: one acquire load after the first call. Relaxed publication would do on
 * x86 but acquire/release keeps the pointer and what it points at ordered everywhere. */
#define VC_REAL_LOOKUP_PTR(resolver, name)                                           \
  __extension__({                                                                    \
    static _Atomic(void *) vc_cached_;                                               \
    void *vc_p_ = atomic_load_explicit(&vc_cached_, memory_order_acquire);           \
    if (!vc_p_) {                                                                    \
      vc_p_ = resolver(name);                                                        \
      atomic_store_explicit(&vc_cached_, vc_p_, memory_order_release);               \
    }                                                                                \
    vc_p_;                                                                           \
  })
#define VC_REAL_LOOKUP(resolver, fn) ((__typeof__(&fn))VC_REAL_LOOKUP_PTR(resolver, #fn))
#define VC_REAL_CUDA(fn) VC_REAL_LOOKUP(vc_real_cuda, fn)
#define VC_REAL_NVML(fn) VC_REAL_LOOKUP(vc_real_nvml, fn)
/* The same for a driver export vc_cuda.h does not declare, typed by the caller. */
#define VC_REAL_CUDA_AS(type, name) ((type)VC_REAL_LOOKUP_PTR(vc_real_cuda, name))

#endif
