/* Fake driver: what the driver frees by itself when a context goes away. cuCtxDestroy and the
 * last cuDevicePrimaryCtxRelease free the context's cuMemAlloc/pitch/managed memory (not
 * stream-ordered or VMM memory, which belong to no context); cuDevicePrimaryCtxReset frees every
 * allocation of the process on the device, pools included, and keeps the retain count. */
#include <stdlib.h>

#include "fake_cuda.h"
#include "fake_mem.h"

static int in_context(const struct node *n, const void *ctx) { return n->kind == 1 && n->ctx == ctx; }

static void release_linear(struct node *n) {
  fg_mem_release_linear(n);
  free(n);
}

void fg_mem_drop_context(void *ctx) { fg_mem_remove_if(in_context, ctx, release_linear); }

FG_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  fg_mem_drop_context(fg_primary_ctx(dev));
  fg_pool_reset_device(dev);
  fg_graph_mem_reset(dev);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

FG_EXPORT CUresult cuCtxDestroy(CUcontext ctx) { return cuCtxDestroy_v2(ctx); }
