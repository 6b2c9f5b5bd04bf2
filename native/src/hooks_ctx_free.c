/* Memory the driver frees by itself when a context goes away: cuCtxDestroy(_v2) and the last
 * cuDevicePrimaryCtxRelease(_v2) free the context's cuMemAlloc / pitch / managed memory and its
 * arrays; cuDevicePrimaryCtxReset(_v2) (cudaDeviceReset) frees every allocation of the process on
 * the device, stream-ordered ones included. Their charges are released here: every entry of the
 * allocation table carries the context it was made in. Stream-ordered and VMM memory belong to
 * no context (cuda.h, cuCtxDestroy) and survive a destroy; VMM memory also survives a reset here
 * (its handles stay valid to the application), which errs on the side of the limit. The context
 * overhead is given back when the device's last context is destroyed or released, not at a reset
 * (the primary context stays retained and is re-initialised by the next call). */
#include <pthread.h>
#include <stdint.h>

#include "alloc_table.h"
#include "charge.h"
#include "config.h"
#include "hooks.h"
#include "real.h"

#define MAX_ORDINALS 64
#define MAX_CREATED 256

static _Atomic(CUcontext) primary[MAX_ORDINALS];
static struct {
  CUcontext ctx;
  CUdevice dev;
} created[MAX_CREATED];
static int created_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
VC_FORK_SAFE_MUTEX(lock, VC_ATFORK_POOL)

void vc_ctx_primary_retained(CUdevice dev, CUcontext ctx) {
  if (dev >= 0 && dev < MAX_ORDINALS) atomic_store(&primary[dev], ctx);
}

void vc_ctx_created(CUcontext ctx, CUdevice dev) {
  pthread_mutex_lock(&lock);
  if (created_count < MAX_CREATED) {
    created[created_count].ctx = ctx;
    created[created_count].dev = dev;
    created_count++;
  }
  pthread_mutex_unlock(&lock);
}

/* Removes `ctx` from the created list; 1 with its device, 0 when it was not created here. */
static int take_created(CUcontext ctx, CUdevice *dev) {
  int found = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < created_count && !found; i++) {
    if (created[i].ctx != ctx) continue;
    *dev = created[i].dev;
    created[i] = created[--created_count];
    found = 1;
  }
  pthread_mutex_unlock(&lock);
  return found;
}

static int created_on(CUdevice dev) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < created_count; i++) n += created[i].dev == dev;
  pthread_mutex_unlock(&lock);
  return n;
}

static int primary_active(CUdevice dev) {
  __typeof__(&cuDevicePrimaryCtxGetState) get = VC_REAL_CUDA(cuDevicePrimaryCtxGetState);
  unsigned int flags = 0;
  int active = 1; /* unknown: keep the overhead charged */
  if (get) get(dev, &flags, &active);
  return active;
}

static int in_context(enum vc_alloc_kind kind, const struct vc_alloc *a, const void *ctx) {
  (void)kind;
  return a->ctx != 0 && a->ctx == *(const uint64_t *)ctx;
}

static void release(enum vc_alloc_kind kind, const struct vc_alloc *a, void *unused) {
  (void)kind;
  (void)unused;
  vc_uncharge_alloc(a);
}

static void drop_context(CUcontext ctx) {
  uint64_t tag = (uint64_t)(uintptr_t)ctx;
  if (tag) vc_alloc_drop_if(in_context, release, &tag);
}

static void release_overhead_if_last(CUdevice dev, int primary_gone) {
  if ((primary_gone || !primary_active(dev)) && created_on(dev) == 0) vc_uncharge_context(dev);
}

static CUcontext primary_of(CUdevice dev) { return dev >= 0 && dev < MAX_ORDINALS ? atomic_load(&primary[dev]) : NULL; }

static CUresult reset(CUresult (*real)(CUdevice), CUdevice dev) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(dev);
  if (rc != CUDA_SUCCESS) return rc;
  drop_context(primary_of(dev));
  vc_pool_forget_device(vc_device_index(dev));
  vc_graph_mem_settle(dev);
  /* The context overhead stays: a reset does not release the primary context, and the next call
   * on the device re-initialises it with its memory. */
  return rc;
}

VC_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) { return reset(VC_REAL_CUDA(cuDevicePrimaryCtxReset_v2), dev); }
VC_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return reset(VC_REAL_CUDA(cuDevicePrimaryCtxReset), dev); }

static CUresult release_primary(CUresult (*real)(CUdevice), CUdevice dev) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(dev);
  if (rc != CUDA_SUCCESS || primary_active(dev)) return rc;
  drop_context(primary_of(dev)); /* the last reference: the context is destroyed */
  release_overhead_if_last(dev, 1);
  return rc;
}

VC_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return release_primary(VC_REAL_CUDA(cuDevicePrimaryCtxRelease_v2), dev);
}
VC_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return release_primary(VC_REAL_CUDA(cuDevicePrimaryCtxRelease), dev);
}

static CUresult destroy(CUresult (*real)(CUcontext), CUcontext ctx) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(ctx);
  if (rc != CUDA_SUCCESS) return rc;
  drop_context(ctx);
  CUdevice dev;
  if (take_created(ctx, &dev)) release_overhead_if_last(dev, 0);
  return rc;
}

VC_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) { return destroy(VC_REAL_CUDA(cuCtxDestroy_v2), ctx); }
VC_EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return destroy(VC_REAL_CUDA(cuCtxDestroy), ctx); }
