/* Fake driver: copies and memsets. The simulated card holds no data, so nothing is written to or
 * read from device memory: a copy or memset checks its arguments (and its stream) and returns.
 * Host-to-host copies between page-locked buffers the fake handed out (cuMemcpy with two host
 * pointers, which unified addressing allows) do move the bytes. Per-thread-stream variants
 * (_ptds, _ptsz) behave as the plain ones: the fake has one default stream per device. */
#define _GNU_SOURCE
#include <string.h>

#include "fake_cuda.h"

int fg_host_block(const void *p, size_t bytes);

static CUresult check_stream(CUstream s) {
  if (fg_stream(s)) return CUDA_SUCCESS;
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  return fg_current() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult copy(uint64_t dst, uint64_t src, size_t bytes, CUstream s) {
  CUresult rc = check_stream(s);
  if (rc != CUDA_SUCCESS) return rc;
  if (bytes == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  void *d = (void *)(uintptr_t)dst;
  const void *from = (const void *)(uintptr_t)src;
  if (fg_host_block(d, bytes) && fg_host_block(from, bytes)) memmove(d, from, bytes);
  return CUDA_SUCCESS;
}

static CUresult set(CUdeviceptr dst, size_t count, CUstream s) {
  CUresult rc = check_stream(s);
  if (rc != CUDA_SUCCESS) return rc;
  return dst || count == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#define LEGACY ((CUstream)0)
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n);
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n);
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n);
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n);
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s);
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s);

/* Unified addressing: the pointers say where the memory is. */
FG_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(dst, src, n, LEGACY); }
FG_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(dst, src, n, LEGACY); }
FG_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy(dst, src, n, s);
}
FG_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy(dst, src, n, s);
}

FG_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  return copy(dst, (uintptr_t)src, n, LEGACY);
}
FG_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) {
  return copy(dst, (uintptr_t)src, n, LEGACY);
}
FG_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  return copy(dst, (uintptr_t)src, n, s);
}
FG_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  return copy(dst, (uintptr_t)src, n, s);
}

FG_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  return copy((uintptr_t)dst, src, n, LEGACY);
}
FG_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) {
  return copy((uintptr_t)dst, src, n, LEGACY);
}
FG_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy((uintptr_t)dst, src, n, s);
}
FG_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy((uintptr_t)dst, src, n, s);
}

FG_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy(dst, src, n, LEGACY); }
FG_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return copy(dst, src, n, LEGACY);
}
FG_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy(dst, src, n, s);
}
FG_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy(dst, src, n, s);
}

FG_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  (void)v;
  return set(dst, n, LEGACY);
}
FG_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) { return cuMemsetD8_v2(dst, v, n); }
FG_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  (void)v;
  return set(dst, n, s);
}
FG_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return cuMemsetD8Async(dst, v, n, s);
}
FG_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
  (void)v;
  return set(dst, n, LEGACY);
}
FG_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  return cuMemsetD32_v2(dst, v, n);
}
FG_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  (void)v;
  return set(dst, n, s);
}
FG_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return cuMemsetD32Async(dst, v, n, s);
}

/* ---- 2D copies (the runtime's host-to-host cudaMemcpy is one) ---- */

struct fg_memcpy2d { /* CUDA_MEMCPY2D_v2 */
  size_t src_x, src_y;
  int src_type;
  const void *src_host;
  CUdeviceptr src_device;
  void *src_array;
  size_t src_pitch;
  size_t dst_x, dst_y;
  int dst_type;
  void *dst_host;
  CUdeviceptr dst_device;
  void *dst_array;
  size_t dst_pitch;
  size_t width, height;
};
_Static_assert(sizeof(struct fg_memcpy2d) == 128, "CUDA_MEMCPY2D layout");
#define FG_MEMORYTYPE_HOST 1

/* Rows move only between two host buffers (memory the process really has). */
static CUresult copy_2d(const struct fg_memcpy2d *c, CUstream s) {
  CUresult rc = check_stream(s);
  if (rc != CUDA_SUCCESS) return rc;
  if (!c || (c->height > 1 && (c->src_pitch < c->width || c->dst_pitch < c->width))) return CUDA_ERROR_INVALID_VALUE;
  if (c->src_type != FG_MEMORYTYPE_HOST || c->dst_type != FG_MEMORYTYPE_HOST) return CUDA_SUCCESS;
  if (!c->src_host || !c->dst_host) return CUDA_ERROR_INVALID_VALUE;
  for (size_t row = 0; row < c->height; row++)
    memmove((char *)c->dst_host + (c->dst_y + row) * c->dst_pitch + c->dst_x,
            (const char *)c->src_host + (c->src_y + row) * c->src_pitch + c->src_x, c->width);
  return CUDA_SUCCESS;
}

CUresult cuMemcpy2D_v2(const struct fg_memcpy2d *c);
CUresult cuMemcpy2D_v2_ptds(const struct fg_memcpy2d *c);
CUresult cuMemcpy2DUnaligned_v2(const struct fg_memcpy2d *c);
CUresult cuMemcpy2DUnaligned_v2_ptds(const struct fg_memcpy2d *c);
CUresult cuMemcpy2DAsync_v2(const struct fg_memcpy2d *c, CUstream s);
CUresult cuMemcpy2DAsync_v2_ptsz(const struct fg_memcpy2d *c, CUstream s);

FG_EXPORT CUresult cuMemcpy2D_v2(const struct fg_memcpy2d *c) { return copy_2d(c, LEGACY); }
FG_EXPORT CUresult cuMemcpy2D_v2_ptds(const struct fg_memcpy2d *c) { return copy_2d(c, LEGACY); }
FG_EXPORT CUresult cuMemcpy2DUnaligned_v2(const struct fg_memcpy2d *c) { return copy_2d(c, LEGACY); }
FG_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const struct fg_memcpy2d *c) { return copy_2d(c, LEGACY); }
FG_EXPORT CUresult cuMemcpy2DAsync_v2(const struct fg_memcpy2d *c, CUstream s) { return copy_2d(c, s); }
FG_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const struct fg_memcpy2d *c, CUstream s) { return copy_2d(c, s); }
