/* Linear device memory: every path reserves against the container budget BEFORE the driver
 * allocates (over the limit the driver is never asked, so nothing stays allocated), records the
 * pointer, and gives the bytes back on free. Pitch allocations are charged after the driver
 * chose the pitch and freed again when they do not fit. Past the guarantee, cuMemAlloc(_v2) and
 * cuMemAllocManaged burst into managed memory where the limit file allows it (hooks_burst.c);
 * pitch and the legacy 32-bit entry point stay within the guarantee. */
#include "alloc_table.h"
#include "charge.h"
#include "hooks.h"
#include "hooks_burst.h"
#include "real.h"

/* Reserve -> allocate -> record; undoes the reservation when the driver fails. */
static CUresult charge_then(int index, uint64_t bytes, CUresult driver_rc, CUdeviceptr ptr, CUresult (*undo)(CUdeviceptr)) {
  if (driver_rc != CUDA_SUCCESS) {
    vc_uncharge(index, bytes);
    return driver_rc;
  }
  if (vc_charge_record(VC_ALLOC_LINEAR, ptr, index, bytes, vc_current_context()) != 0) {
    if (undo) undo(ptr);
    vc_uncharge(index, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

static CUresult free_v2(CUdeviceptr p) {
  __typeof__(&cuMemFree_v2) real = VC_REAL_CUDA(cuMemFree_v2);
  return real ? real(p) : CUDA_ERROR_NOT_INITIALIZED;
}

/* Index of the current device, or the driver's error when there is no usable context. */
#define CURRENT_INDEX_OR_RETURN(index)      \
  int index;                                \
  do {                                      \
    CUresult rc_ = vc_current_index(&index); \
    if (rc_ != CUDA_SUCCESS) return rc_;    \
  } while (0)

VC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  __typeof__(&cuMemAlloc_v2) real = VC_REAL_CUDA(cuMemAlloc_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytesize == 0) return real(dptr, bytesize);
  CURRENT_INDEX_OR_RETURN(index);
  enum vc_budget budget;
  CUdevice dev = -1;
  if (vc_charge_or_burst(index, bytesize, &budget, &dev) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  if (budget == VC_BUDGET_BURST) return vc_burst_alloc_charged(index, dev, dptr, bytesize, VC_MEM_ATTACH_GLOBAL, 1);
  CUresult rc = real(dptr, bytesize);
  return charge_then(index, bytesize, rc, rc == CUDA_SUCCESS ? *dptr : 0, free_v2);
}

/* A 32-bit pointer cannot hold a managed allocation: the legacy entry point never bursts. */
VC_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
  __typeof__(&cuMemAlloc) real = VC_REAL_CUDA(cuMemAlloc);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytesize == 0) return real(dptr, bytesize);
  CURRENT_INDEX_OR_RETURN(index);
  if (vc_charge(index, bytesize) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real(dptr, bytesize);
  return charge_then(index, bytesize, rc, rc == CUDA_SUCCESS ? *dptr : 0, free_v2);
}

VC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  __typeof__(&cuMemAllocManaged) real = VC_REAL_CUDA(cuMemAllocManaged);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytesize == 0) return real(dptr, bytesize, flags);
  CURRENT_INDEX_OR_RETURN(index);
  /* Managed memory may migrate to the host, but it can all be resident on the device: count it.
   * Past the guarantee it is a burst like any other; its advice stays the application's. */
  enum vc_budget budget;
  CUdevice dev = -1;
  if (vc_charge_or_burst(index, bytesize, &budget, &dev) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  if (budget == VC_BUDGET_BURST) return vc_burst_alloc_charged(index, dev, dptr, bytesize, flags, 0);
  CUresult rc = real(dptr, bytesize, flags);
  return charge_then(index, bytesize, rc, rc == CUDA_SUCCESS ? *dptr : 0, free_v2);
}

/* A pitched allocation was charged at its unpadded estimate before the driver ran: charge the
 * driver's padding on top, or undo everything (the allocation included) when it does not fit. */
static CUresult settle_pitched(int index, uint64_t estimate, CUresult rc, CUdeviceptr ptr, uint64_t bytes) {
  if (rc != CUDA_SUCCESS || !estimate) {
    vc_uncharge(index, estimate);
    return rc;
  }
  if (bytes > estimate && vc_charge(index, bytes - estimate) != CUDA_SUCCESS) {
    free_v2(ptr);
    vc_uncharge(index, estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return charge_then(index, bytes, CUDA_SUCCESS, ptr, free_v2);
}

VC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                      unsigned int ElementSizeBytes) {
  __typeof__(&cuMemAllocPitch_v2) real = VC_REAL_CUDA(cuMemAllocPitch_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CURRENT_INDEX_OR_RETURN(index);
  /* Reserve the unpadded size first so an obviously-too-large request never reaches the driver. */
  uint64_t estimate = (uint64_t)WidthInBytes * Height;
  if (estimate && vc_charge(index, estimate) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  if (rc != CUDA_SUCCESS) return settle_pitched(index, estimate, rc, 0, 0);
  return settle_pitched(index, estimate, rc, *dptr, (uint64_t)*pPitch * Height);
}

VC_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
                                   unsigned int Height, unsigned int ElementSizeBytes) {
  __typeof__(&cuMemAllocPitch) real = VC_REAL_CUDA(cuMemAllocPitch);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CURRENT_INDEX_OR_RETURN(index);
  uint64_t estimate = (uint64_t)WidthInBytes * Height;
  if (estimate && vc_charge(index, estimate) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  if (rc != CUDA_SUCCESS) return settle_pitched(index, estimate, rc, 0, 0);
  return settle_pitched(index, estimate, rc, *dptr, (uint64_t)*pPitch * Height);
}

/* cuMemFree of a stream-ordered allocation: the driver frees it (synchronously), so its pool
 * is settled as after cuMemFreeAsync. */
static CUresult free_sync_v2(CUdeviceptr p, CUstream unused) {
  (void)unused;
  return free_v2(p);
}

static CUresult free_sync_v1(CUdeviceptr p, CUstream unused);

static CUresult free_with(CUdeviceptr ptr, CUresult (*real)(CUdeviceptr), CUresult (*sync)(CUdeviceptr, CUstream)) {
  struct vc_alloc a;
  CUresult rc;
  if (vc_pool_free(ptr, sync, NULL, &rc)) return rc;
  int known = vc_alloc_take(VC_ALLOC_LINEAR, ptr, &a) == 0;
  rc = real(ptr);
  if (!known) return rc;
  if (rc != CUDA_SUCCESS) {
    vc_alloc_record(VC_ALLOC_LINEAR, ptr, &a, NULL); /* still allocated */
    return rc;
  }
  vc_uncharge_alloc(&a);
  if (a.burst) vc_burst_note_residency(a.device, 0);
  return rc;
}

VC_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  __typeof__(&cuMemFree_v2) real = VC_REAL_CUDA(cuMemFree_v2);
  return real ? free_with(dptr, real, free_sync_v2) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult free_v1_adapter(CUdeviceptr p) {
  __typeof__(&cuMemFree) real = VC_REAL_CUDA(cuMemFree);
  return real ? real((CUdeviceptr_v1)p) : CUDA_ERROR_NOT_INITIALIZED;
}

static CUresult free_sync_v1(CUdeviceptr p, CUstream unused) {
  (void)unused;
  return free_v1_adapter(p);
}

VC_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) { return free_with(dptr, free_v1_adapter, free_sync_v1); }
