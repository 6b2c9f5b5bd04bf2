/* CUDA arrays: the driver decides their layout (padding, tiling), so they are created first,
 * then charged at the size the driver reports (cu(Mipmapped)ArrayGetMemoryRequirements), and
 * destroyed again when that does not fit. The descriptor estimate is used only when the driver
 * cannot report (drivers before 11.6). */
#include "alloc_table.h"
#include "charge.h"
#include "hooks.h"
#include "real.h"

static uint64_t element_bytes(int format) {
  switch (format) {
    case 0x01: case 0x08: return 1; /* u8, s8 */
    case 0x02: case 0x09: case 0x10: return 2; /* u16, s16, half */
    default: return 4; /* u32, s32, float and anything wider per channel */
  }
}

static uint64_t estimate_3d(const CUDA_ARRAY3D_DESCRIPTOR *d) {
  uint64_t h = d->Height ? d->Height : 1, depth = d->Depth ? d->Depth : 1;
  return (uint64_t)d->Width * h * depth * d->NumChannels * element_bytes((int)d->Format);
}

static uint64_t estimate_mipmap(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels) {
  CUDA_ARRAY3D_DESCRIPTOR level = *d;
  uint64_t total = 0;
  for (unsigned int i = 0; i < levels && level.Width; i++) {
    total += estimate_3d(&level);
    level.Width = level.Width > 1 ? level.Width / 2 : 1;
    level.Height = level.Height > 1 ? level.Height / 2 : level.Height;
    level.Depth = level.Depth > 1 ? level.Depth / 2 : level.Depth;
  }
  return total;
}

static int current_device(CUdevice *dev) {
  __typeof__(&cuCtxGetDevice) get = VC_REAL_CUDA(cuCtxGetDevice);
  return get && get(dev) == CUDA_SUCCESS ? 0 : -1;
}

static CUresult charge_array(enum vc_alloc_kind kind, uint64_t key, uint64_t reported, uint64_t estimate) {
  int index;
  if (vc_current_index(&index) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  uint64_t bytes = reported ? reported : estimate;
  if (vc_charge(index, bytes) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  if (vc_charge_record(kind, key, index, bytes, vc_current_context()) != 0) {
    vc_uncharge(index, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

static uint64_t reported_array_bytes(CUarray a) {
  __typeof__(&cuArrayGetMemoryRequirements) q = VC_REAL_CUDA(cuArrayGetMemoryRequirements);
  CUdevice dev;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
  if (!q || current_device(&dev) != 0 || q(&req, a, dev) != CUDA_SUCCESS) return 0;
  return req.size;
}

static CUresult after_array_create(CUresult rc, CUarray *handle, uint64_t estimate) {
  if (rc != CUDA_SUCCESS) return rc;
  CUresult charged = charge_array(VC_ALLOC_ARRAY, (uint64_t)(uintptr_t)*handle, reported_array_bytes(*handle), estimate);
  if (charged != CUDA_SUCCESS) {
    __typeof__(&cuArrayDestroy) destroy = VC_REAL_CUDA(cuArrayDestroy);
    if (destroy) destroy(*handle);
    *handle = NULL;
  }
  return charged;
}

VC_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc) {
  __typeof__(&cuArrayCreate_v2) real = VC_REAL_CUDA(cuArrayCreate_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pHandle, desc);
  uint64_t estimate = 0;
  if (rc == CUDA_SUCCESS && desc) {
    CUDA_ARRAY3D_DESCRIPTOR d3 = {desc->Width, desc->Height, 0, desc->Format, desc->NumChannels, 0};
    estimate = estimate_3d(&d3);
  }
  return after_array_create(rc, pHandle, estimate);
}

VC_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc) {
  __typeof__(&cuArray3DCreate_v2) real = VC_REAL_CUDA(cuArray3DCreate_v2);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pHandle, desc);
  return after_array_create(rc, pHandle, rc == CUDA_SUCCESS && desc ? estimate_3d(desc) : 0);
}

VC_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const void *desc) {
  __typeof__(&cuArrayCreate) real = VC_REAL_CUDA(cuArrayCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pHandle, desc);
  uint64_t estimate = 0;
  if (rc == CUDA_SUCCESS && desc) {
    const vc_array_descriptor_v1 *d = desc;
    CUDA_ARRAY3D_DESCRIPTOR d3 = {d->Width, d->Height, 0, (CUarray_format)d->Format, d->NumChannels, 0};
    estimate = estimate_3d(&d3);
  }
  return after_array_create(rc, pHandle, estimate);
}

VC_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const void *desc) {
  __typeof__(&cuArray3DCreate) real = VC_REAL_CUDA(cuArray3DCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pHandle, desc);
  /* Legacy 3D descriptor: six 32-bit words (Width, Height, Depth, Format, NumChannels, Flags). */
  uint64_t estimate = 0;
  if (rc == CUDA_SUCCESS && desc) {
    const unsigned int *w = desc;
    CUDA_ARRAY3D_DESCRIPTOR d3 = {w[0], w[1], w[2], (CUarray_format)w[3], w[4], w[5]};
    estimate = estimate_3d(&d3);
  }
  return after_array_create(rc, pHandle, estimate);
}

VC_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  __typeof__(&cuArrayDestroy) real = VC_REAL_CUDA(cuArrayDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  struct vc_alloc a;
  int known = vc_alloc_take(VC_ALLOC_ARRAY, (uint64_t)(uintptr_t)hArray, &a) == 0;
  CUresult rc = real(hArray);
  if (known && rc == CUDA_SUCCESS) vc_uncharge(a.device, a.bytes);
  else if (known) vc_alloc_record(VC_ALLOC_ARRAY, (uint64_t)(uintptr_t)hArray, &a, NULL);
  return rc;
}

VC_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                          unsigned int numMipmapLevels) {
  __typeof__(&cuMipmappedArrayCreate) real = VC_REAL_CUDA(cuMipmappedArrayCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(pHandle, desc, numMipmapLevels);
  if (rc != CUDA_SUCCESS) return rc;
  uint64_t reported = 0;
  __typeof__(&cuMipmappedArrayGetMemoryRequirements) q = VC_REAL_CUDA(cuMipmappedArrayGetMemoryRequirements);
  CUdevice dev;
  CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
  if (q && current_device(&dev) == 0 && q(&req, *pHandle, dev) == CUDA_SUCCESS) reported = req.size;
  CUresult charged = charge_array(VC_ALLOC_MIPMAP, (uint64_t)(uintptr_t)*pHandle, reported,
                                  desc ? estimate_mipmap(desc, numMipmapLevels) : 0);
  if (charged != CUDA_SUCCESS) {
    __typeof__(&cuMipmappedArrayDestroy) destroy = VC_REAL_CUDA(cuMipmappedArrayDestroy);
    if (destroy) destroy(*pHandle);
    *pHandle = NULL;
  }
  return charged;
}

VC_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h) {
  __typeof__(&cuMipmappedArrayDestroy) real = VC_REAL_CUDA(cuMipmappedArrayDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  struct vc_alloc a;
  int known = vc_alloc_take(VC_ALLOC_MIPMAP, (uint64_t)(uintptr_t)h, &a) == 0;
  CUresult rc = real(h);
  if (known && rc == CUDA_SUCCESS) vc_uncharge(a.device, a.bytes);
  else if (known) vc_alloc_record(VC_ALLOC_MIPMAP, (uint64_t)(uintptr_t)h, &a, NULL);
  return rc;
}
