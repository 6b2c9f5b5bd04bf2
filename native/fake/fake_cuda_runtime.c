/* Fake driver: the context and device queries NVIDIA's CUDA runtime makes besides the ones the
 * fake had for driver-API programs. */
#define _GNU_SOURCE
#include "fake_cuda.h"

CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version);

/* Every context of a v2-or-later driver reports API version 3020. */
FG_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  if (!ctx) ctx = fg_current();
  if (!ctx || ctx->magic != FG_MAGIC_CTX) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;
  return CUDA_SUCCESS;
}
