/* Fake driver: cuGetProcAddress and cuGetExportTable's look-up tracing.
 *
 * Answers as the real driver does: the newest variant of `symbol` whose version <= cudaVersion
 * (the per-thread-stream one when flags ask for it). A name the driver does not have gets
 * *pfn = NULL, symbolStatus CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND and CUDA_ERROR_NOT_FOUND; a name
 * it has only in variants newer than cudaVersion gets NULL, VERSION_NOT_SUFFICIENT and
 * CUDA_SUCCESS. FAKEGPU_TRACE=1 prints every look-up on stderr (`fakegpu: getproc NAME VERSION
 * FLAGS found|not-found|version-too-low`), which is how the runtime's needs were found. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "fake_cuda.h"
#include "vc_proc.h"

CUresult cuArrayCreate(CUarray *pHandle, const void *desc);
CUresult cuArray3DCreate(CUarray *pHandle, const void *desc);
#define FG_PROC(base, export, version, per_thread) CUresult export();
#include "fake_proc_table.h"

static const struct vc_proc_entry table[] = {
#define VC_PROC_HOOKED(base, export, version, per_thread) {#base, #export, version, per_thread, (void *)&export},
#define VC_PROC_PASS(base, export, version, per_thread) {#base, #export, version, per_thread, (void *)&export},
#include "vc_proc_table.h"
#define FG_PROC(base, export, version, per_thread) {#base, #export, version, per_thread, (void *)&export},
#include "fake_proc_table.h"
};

static int tracing = -1;

int fg_trace_enabled(void) {
  int t = __atomic_load_n(&tracing, __ATOMIC_RELAXED);
  if (t < 0) {
    const char *v = getenv("FAKEGPU_TRACE");
    t = v && *v && *v != '0';
    __atomic_store_n(&tracing, t, __ATOMIC_RELAXED);
  }
  return t;
}

static const char *const outcome[] = {"found", "not-found", "version-too-low"};

FG_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (cudaVersion > FG_DRIVER_VERSION) {
    *pfn = NULL;
    if (status) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_INVALID_VALUE;
  }
  enum vc_proc_lookup why;
  const struct vc_proc_entry *e =
      vc_proc_select(table, (int)(sizeof table / sizeof table[0]), symbol, cudaVersion, flags, &why);
  *pfn = e ? e->fn : NULL;
  if (status) *status = (CUdriverProcAddressQueryResult)why;
  if (fg_trace_enabled())
    fprintf(stderr, "fakegpu: getproc %s %d %llu %s\n", symbol, cudaVersion, (unsigned long long)flags, outcome[why]);
  return why == VC_PROC_NOT_FOUND ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
