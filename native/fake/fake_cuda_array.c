/* Fake driver: CUDA arrays and mipmapped arrays. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_mem.h"

#define ARRAY_ALIGN (64u << 10)

/* ---- arrays: the fake pads each level to 64 KiB, as a tiled layout would ---- */

struct CUarray_st {
  uint32_t magic;
  int device;
  uint64_t bytes;
};
struct CUmipmappedArray_st {
  uint32_t magic;
  int device;
  uint64_t bytes;
};

static uint64_t elem(int format) {
  switch (format) {
    case 0x01: case 0x08: return 1;
    case 0x02: case 0x09: case 0x10: return 2;
    default: return 4;
  }
}

static uint64_t level_bytes(uint64_t w, uint64_t h, uint64_t d, uint64_t ch, int format) {
  uint64_t raw = w * (h ? h : 1) * (d ? d : 1) * ch * elem(format);
  return (raw + ARRAY_ALIGN - 1) / ARRAY_ALIGN * ARRAY_ALIGN;
}

static CUresult make_array(CUarray *out, uint64_t bytes) {
  int dev;
  CUresult rc = fg_current_device(&dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (fg_mem_charge(fg_node(dev), bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  struct CUarray_st *a = malloc(sizeof *a);
  if (!a) {
    fg_mem_uncharge(fg_node(dev), bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *a = (struct CUarray_st){.magic = 0x41525259u, .device = dev, .bytes = bytes};
  *out = a;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuArrayCreate_v2(CUarray *p, const CUDA_ARRAY_DESCRIPTOR *d) {
  if (!d || !d->Width || !d->NumChannels) return CUDA_ERROR_INVALID_VALUE;
  return make_array(p, level_bytes(d->Width, d->Height, 0, d->NumChannels, (int)d->Format));
}

FG_EXPORT CUresult cuArray3DCreate_v2(CUarray *p, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  if (!d || !d->Width || !d->NumChannels) return CUDA_ERROR_INVALID_VALUE;
  return make_array(p, level_bytes(d->Width, d->Height, d->Depth, d->NumChannels, (int)d->Format));
}

CUresult cuArrayCreate(CUarray *p, const void *desc);
CUresult cuArray3DCreate(CUarray *p, const void *desc);

FG_EXPORT CUresult cuArrayCreate(CUarray *p, const void *desc) {
  const vc_array_descriptor_v1 *d = desc;
  if (!d || !d->Width || !d->NumChannels) return CUDA_ERROR_INVALID_VALUE;
  return make_array(p, level_bytes(d->Width, d->Height, 0, d->NumChannels, d->Format));
}

FG_EXPORT CUresult cuArray3DCreate(CUarray *p, const void *desc) {
  const unsigned int *w = desc;
  if (!w || !w[0] || !w[4]) return CUDA_ERROR_INVALID_VALUE;
  return make_array(p, level_bytes(w[0], w[1], w[2], w[4], (int)w[3]));
}

FG_EXPORT CUresult cuArrayDestroy(CUarray a) {
  if (!a || a->magic != 0x41525259u) return CUDA_ERROR_INVALID_HANDLE;
  fg_mem_uncharge(fg_node(a->device), a->bytes);
  a->magic = 0;
  free(a);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, CUarray a, CUdevice dev) {
  if (!req || !a || a->magic != 0x41525259u) return CUDA_ERROR_INVALID_VALUE;
  (void)dev;
  memset(req, 0, sizeof *req);
  req->size = a->bytes;
  req->alignment = ARRAY_ALIGN;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *p, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels) {
  if (!p || !d || !d->Width || !d->NumChannels || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t bytes = 0, w = d->Width, h = d->Height, z = d->Depth;
  for (unsigned int i = 0; i < levels; i++) {
    bytes += level_bytes(w, h, z, d->NumChannels, (int)d->Format);
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : h;
    z = z > 1 ? z / 2 : z;
  }
  CUarray a;
  CUresult rc = make_array(&a, bytes);
  if (rc == CUDA_SUCCESS) {
    a->magic = 0x4d495050u;
    *p = (CUmipmappedArray)(void *)a;
  }
  return rc;
}

FG_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray m) {
  struct CUmipmappedArray_st *a = m;
  if (!a || a->magic != 0x4d495050u) return CUDA_ERROR_INVALID_HANDLE;
  fg_mem_uncharge(fg_node(a->device), a->bytes);
  a->magic = 0;
  free(a);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, CUmipmappedArray m,
                                                         CUdevice dev) {
  struct CUmipmappedArray_st *a = m;
  if (!req || !a || a->magic != 0x4d495050u) return CUDA_ERROR_INVALID_VALUE;
  (void)dev;
  memset(req, 0, sizeof *req);
  req->size = a->bytes;
  req->alignment = ARRAY_ALIGN;
  return CUDA_SUCCESS;
}

