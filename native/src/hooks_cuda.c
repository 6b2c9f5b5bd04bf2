/* How callers reach the hooks: cuGetProcAddress / _v2 (the CUDA 12+/13 runtime resolves every
 * entry point through it), dlsym (the runtime dlsyms cuGetProcAddress_v2 from its private
 * libcuda.so.1 handle, which does not search the preload scope), and plain symbol binding for
 * programs linked with -lcuda. Hooks are chosen to match the ABI variant the driver picked for
 * (symbol, cudaVersion, flags): by pointer identity with the driver's export first, then by the
 * export's name (dladdr), then by the version table (PROTOCOLS.md §6.5). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "hooks.h"
#include "hooks_launch.h"
#include "log.h"
#include "real.h"
#include "vc_proc.h"

static const struct vc_proc_entry hooked[] = {
#define VC_PROC_HOOKED(base, export, version, per_thread) {#base, #export, version, per_thread, (void *)&export},
#include "vc_proc_table.h"
};
#define HOOKED_COUNT ((int)(sizeof hooked / sizeof hooked[0]))

static const struct vc_proc_entry passed[] = {
#define VC_PROC_PASS(base, export, version, per_thread) {#base, #export, version, per_thread, NULL},
#include "vc_proc_table.h"
};
#define PASSED_COUNT ((int)(sizeof passed / sizeof passed[0]))

/* Used until the compute limiter's hooks_launch.c is linked in: no launch hooks. */
__attribute__((weak)) void *vc_launch_hook_wrap(const char *symbol, int cuda_version, uint64_t flags, void *real_fn) {
  (void)symbol;
  (void)cuda_version;
  (void)flags;
  (void)real_fn;
  return NULL;
}

void *vc_hook_for_proc(const char *base, int cuda_version, uint64_t flags, void *real_fn) {
  int known = 0;
  for (int i = 0; i < HOOKED_COUNT; i++) {
    if (strcmp(hooked[i].base, base) != 0) continue;
    known = 1;
    if (vc_real_cuda(hooked[i].export_name) == real_fn) return hooked[i].fn;
  }
  if (!known) return NULL;
  Dl_info info;
  if (dladdr(real_fn, &info) && info.dli_sname && info.dli_saddr == real_fn) {
    for (int i = 0; i < HOOKED_COUNT; i++) {
      if (strcmp(hooked[i].base, base) == 0 && strcmp(hooked[i].export_name, info.dli_sname) == 0) return hooked[i].fn;
    }
    /* A variant newer than this library knows: refuse to guess its ABI. */
    static int once;
    VC_LOG_ONCE(once, VC_LOG_WARN, "driver returned %s for %s@%d, which libvcuda does not hook", info.dli_sname, base,
                cuda_version);
    return NULL;
  }
  enum vc_proc_lookup why;
  const struct vc_proc_entry *e = vc_proc_select(hooked, HOOKED_COUNT, base, cuda_version, flags, &why);
  return e ? e->fn : NULL;
}

void *vc_wrap_resolved(const char *base, int cuda_version, uint64_t flags, void *real_fn) {
  void *hook = vc_hook_for_proc(base, cuda_version, flags, real_fn);
  if (hook) return hook;
  hook = vc_launch_hook_wrap(base, cuda_version, flags, real_fn);
  return hook ? hook : real_fn;
}

void *vc_hook_for_export(const char *export_name) {
  if (export_name[0] == 'n') return vc_nvml_hook_for_export(export_name);
  for (int i = 0; i < HOOKED_COUNT; i++) {
    if (strcmp(hooked[i].export_name, export_name) == 0) return hooked[i].fn;
  }
  for (int i = 0; i < PASSED_COUNT; i++) {
    if (strcmp(passed[i].export_name, export_name) != 0) continue;
    void *real = vc_real_cuda(export_name);
    if (!real) return NULL;
    void *hook = vc_launch_hook_wrap(passed[i].base, passed[i].version,
                                     passed[i].per_thread ? VC_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, real);
    return hook;
  }
  return NULL;
}

VC_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus) {
  CUresult rc = vc_real_get_proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = vc_wrap_resolved(symbol, cudaVersion, flags, *pfn);
  return rc;
}

VC_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  __typeof__(&cuGetProcAddress) real = VC_REAL_CUDA(cuGetProcAddress);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = vc_wrap_resolved(symbol, cudaVersion, flags, *pfn);
  return rc;
}

/* dlsym(RTLD_NEXT) must mean "after the caller", not "after libvcuda": walk the link maps from
 * the caller's object and return the first definition that lives in a later object. */
static void *next_after(const void *caller, const char *symbol) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return vc_real_dlsym(RTLD_NEXT, symbol);
  for (struct link_map *m = lm->l_next; m; m = m->l_next) {
    /* A real handle per object (the vDSO has none and is skipped); NOLOAD never loads anything. */
    if (!m->l_name || m->l_name[0] != '/') continue;
    void *h = dlopen(m->l_name, RTLD_NOLOAD | RTLD_LAZY);
    if (!h) continue;
    void *sym = vc_real_dlsym(h, symbol);
    Dl_info where;
    int here = sym && dladdr(sym, &where) && where.dli_fname && strcmp(where.dli_fname, m->l_name) == 0;
    dlclose(h);
    if (here) return sym;
  }
  return NULL;
}

VC_EXPORT void *dlsym(void *handle, const char *symbol) {
  if (handle == RTLD_NEXT) return next_after(__builtin_return_address(0), symbol);
  void *real = vc_real_dlsym(handle, symbol);
  if (!real || vc_real_opening() || (strncmp(symbol, "cu", 2) != 0 && strncmp(symbol, "nvml", 4) != 0)) return real;
  void *hook = vc_hook_for_export(symbol);
  return hook ? hook : real;
}
