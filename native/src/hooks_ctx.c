/* cuInit (fail closed on a bad limit file), contexts (their memory overhead is charged once per
 * process and device), and the in-container view of device memory: the limit is the card. */
#include "charge.h"
#include "hooks.h"
#include "hooks_burst.h"
#include "init.h"
#include "real.h"

VC_EXPORT CUresult cuInit(unsigned int flags) {
  __typeof__(&cuInit) real = VC_REAL_CUDA(cuInit);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  /* Without valid limits the container gets no GPU rather than the whole card. */
  if (vc_init_ensure() != 0) return CUDA_ERROR_NO_DEVICE;
  return real(flags);
}

static CUresult after_context(CUresult rc, CUcontext ctx, CUdevice dev, int primary) {
  if (rc != CUDA_SUCCESS) return rc;
  if (vc_charge_context(dev) == CUDA_SUCCESS) {
    if (!primary) vc_ctx_created(ctx, dev);
    return CUDA_SUCCESS;
  }
  if (primary) {
    __typeof__(&cuDevicePrimaryCtxRelease_v2) rel2 = VC_REAL_CUDA(cuDevicePrimaryCtxRelease_v2);
    __typeof__(&cuDevicePrimaryCtxRelease) rel1 = VC_REAL_CUDA(cuDevicePrimaryCtxRelease);
    if (rel2) rel2(dev);
    else if (rel1) rel1(dev);
  } else {
    __typeof__(&cuCtxDestroy_v2) destroy = VC_REAL_CUDA(cuCtxDestroy_v2);
    if (destroy) destroy(ctx);
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

VC_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  __typeof__(&cuDevicePrimaryCtxRetain) real = VC_REAL_CUDA(cuDevicePrimaryCtxRetain);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pctx, dev);
  if (rc == CUDA_SUCCESS) vc_ctx_primary_retained(dev, *pctx);
  return after_context(rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, 1);
}

VC_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  __typeof__(&cuCtxCreate) real = VC_REAL_CUDA(cuCtxCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pctx, flags, dev);
  return after_context(rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, 0);
}

VC_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  __typeof__(&cuCtxCreate_v2) real = VC_REAL_CUDA(cuCtxCreate_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pctx, flags, dev);
  return after_context(rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, 0);
}

VC_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int numParams, unsigned int flags,
                                  CUdevice dev) {
  __typeof__(&cuCtxCreate_v3) real = VC_REAL_CUDA(cuCtxCreate_v3);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pctx, params, numParams, flags, dev);
  return after_context(rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, 0);
}

VC_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
  __typeof__(&cuCtxCreate_v4) real = VC_REAL_CUDA(cuCtxCreate_v4);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pctx, params, flags, dev);
  return after_context(rc, rc == CUDA_SUCCESS ? *pctx : NULL, dev, 0);
}

VC_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  __typeof__(&cuDeviceTotalMem_v2) real = VC_REAL_CUDA(cuDeviceTotalMem_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(bytes, dev);
  if (rc == CUDA_SUCCESS) *bytes = (size_t)vc_visible_total(vc_device_index(dev), *bytes);
  return rc;
}

VC_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
  size_t total = 0;
  CUresult rc = cuDeviceTotalMem_v2(&total, dev);
  if (rc == CUDA_SUCCESS && bytes) *bytes = total > 0xFFFFFFFFu ? 0xFFFFFFFFu : (unsigned int)total;
  return rc;
}

/* (what is left of the guarantee, the guarantee): vc_container_free. Burst bytes are not in it: the total is
 * the guarantee, so a framework sizing its cache from these figures never depends on a burst. Not
 * capped at what the card shows free: the ledger never places more guarantees than the card has,
 * and what else the card holds may be a neighbour's burst, which the driver evicts on demand (a
 * guaranteed server that saw it as taken would refuse to start). */
VC_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  __typeof__(&cuMemGetInfo_v2) real = VC_REAL_CUDA(cuMemGetInfo_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  size_t real_free = 0, real_total = 0;
  CUresult rc = real(&real_free, &real_total);
  if (rc != CUDA_SUCCESS) return rc;
  int index = -1;
  rc = vc_current_index(&index);
  if (rc != CUDA_SUCCESS) return rc;
  vc_burst_note_residency(index, 1);
  uint64_t visible = vc_visible_total(index, real_total);
  if (free) *free = (size_t)vc_container_free(index, visible);
  if (total) *total = (size_t)visible;
  return CUDA_SUCCESS;
}

VC_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total) {
  size_t f = 0, t = 0;
  CUresult rc = cuMemGetInfo_v2(&f, &t);
  if (rc != CUDA_SUCCESS) return rc;
  if (free) *free = f > 0xFFFFFFFFu ? 0xFFFFFFFFu : (unsigned int)f;
  if (total) *total = t > 0xFFFFFFFFu ? 0xFFFFFFFFu : (unsigned int)t;
  return CUDA_SUCCESS;
}
