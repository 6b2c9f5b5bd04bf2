/* Shared by the hook files: export marker, the hook table lookups, and exports that are not in
 * vc_cuda.h because their legacy signatures differ from what <cuda.h> declares today. */
#ifndef VCUDA_HOOKS_H
#define VCUDA_HOOKS_H

#include <stdatomic.h>
#include <stdint.h>

#include "vc_cuda.h"
#include "vc_cuda_graph.h"

#define VC_EXPORT __attribute__((visibility("default")))

/* Legacy (pre-3.2) array exports, 32-bit descriptors; charged at the size the driver reports. */
CUresult cuArrayCreate(CUarray *pHandle, const void *pAllocateArray);
CUresult cuArray3DCreate(CUarray *pHandle, const void *pAllocateArray);

/* The hook that replaces `real_fn`, which the driver resolved for (base, version, flags), or
 * NULL when libvcuda does not intercept it (memory, views, contexts, cuGetProcAddress itself). */
void *vc_hook_for_proc(const char *base, int cuda_version, uint64_t flags, void *real_fn);

/* The hook exported under `export_name` (cu* or nvml*), or NULL. */
void *vc_hook_for_export(const char *export_name);

/* NVML side of vc_hook_for_export (hooks_nvml.c). */
void *vc_nvml_hook_for_export(const char *export_name);

/* Everything a driver lookup returns goes through here: memory/view hooks first, then the
 * compute limiter's launch hooks, else the driver's own pointer. */
void *vc_wrap_resolved(const char *base, int cuda_version, uint64_t flags, void *real_fn);

/* Frees a stream-ordered allocation with `do_free` and settles its pool (hooks_pool.c). Returns 1
 * with *rc set when `dptr` is one, 0 (nothing done) when it is not. */
int vc_pool_free(CUdeviceptr dptr, CUresult (*do_free)(CUdeviceptr, CUstream), CUstream stream, CUresult *rc);

/* A primary context reset freed every stream-ordered allocation on config record `index`: their
 * pools stop counting them and are re-read from the driver (hooks_pool.c). */
void vc_pool_forget_device(int index);

/* Context bookkeeping for what the driver frees with a context (hooks_ctx_free.c): the primary
 * context handle of `dev` as retained, and contexts created by cuCtxCreate*. */
void vc_ctx_primary_retained(CUdevice dev, CUcontext ctx);
void vc_ctx_created(CUcontext ctx, CUdevice dev);

/* Stream capture (hooks_capture.c): whether any capture may be in progress in this process (one
 * relaxed load), and whether the driver says `stream` is capturing. */
extern _Atomic int vc_captures_in_progress;
static inline int vc_capture_maybe_active(void) {
  return atomic_load_explicit(&vc_captures_in_progress, memory_order_relaxed) > 0;
}
int vc_stream_capturing(CUstream stream);

/* Graph replays (hooks_graph.c): how many kernel launches an exec holds (1 when it was not
 * instantiated through libvcuda), and running `launch` for it with its graph memory reserved
 * first (CUDA_ERROR_OUT_OF_MEMORY when the graph pool would grow past the limit). */
uint64_t vc_graph_launches(CUgraphExec exec);
CUresult vc_graph_run(CUgraphExec exec, CUstream stream, CUresult (*launch)(CUgraphExec, CUstream));

/* A primary context reset freed the device's graph memory: re-read it (hooks_graph.c). */
void vc_graph_mem_settle(CUdevice dev);

#endif
