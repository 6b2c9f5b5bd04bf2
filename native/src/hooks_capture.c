/* Stream capture. A launch into a stream that is being captured runs nothing: it becomes a node
 * of a graph, which is charged when it is launched (hooks_graph.c). Neither may a stream-ordered
 * allocation on such a stream be charged: it becomes a graph memory node, counted by the graph
 * memory pool. The begin/end hooks keep a count of captures in progress in this process, so the
 * launch fast path pays one relaxed load while nothing captures and asks the driver about the
 * stream only while something does. */
#include <stdatomic.h>

#include "hooks.h"
#include "real.h"

_Atomic int vc_captures_in_progress; /* begun and not yet ended in this process */

int vc_stream_capturing(CUstream stream) {
  __typeof__(&cuStreamIsCapturing) is_capturing = VC_REAL_CUDA(cuStreamIsCapturing);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!is_capturing || is_capturing(stream, &status) != CUDA_SUCCESS) return 0;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static CUresult begun(CUresult rc) {
  if (rc == CUDA_SUCCESS) atomic_fetch_add_explicit(&vc_captures_in_progress, 1, memory_order_relaxed);
  return rc;
}

#define PTS(s) ((s) ? (s) : VC_CU_STREAM_PER_THREAD)

VC_EXPORT CUresult cuStreamBeginCapture(CUstream s) {
  __typeof__(&cuStreamBeginCapture) real = VC_REAL_CUDA(cuStreamBeginCapture);
  return real ? begun(real(s)) : CUDA_ERROR_NOT_INITIALIZED;
}
VC_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  __typeof__(&cuStreamBeginCapture_ptsz) real = VC_REAL_CUDA(cuStreamBeginCapture_ptsz);
  return real ? begun(real(s)) : CUDA_ERROR_NOT_INITIALIZED;
}
VC_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  __typeof__(&cuStreamBeginCapture_v2) real = VC_REAL_CUDA(cuStreamBeginCapture_v2);
  return real ? begun(real(s, mode)) : CUDA_ERROR_NOT_INITIALIZED;
}
VC_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  __typeof__(&cuStreamBeginCapture_v2_ptsz) real = VC_REAL_CUDA(cuStreamBeginCapture_v2_ptsz);
  return real ? begun(real(s, mode)) : CUDA_ERROR_NOT_INITIALIZED;
}
VC_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                               const CUgraphEdgeData *data, size_t n, CUstreamCaptureMode mode) {
  __typeof__(&cuStreamBeginCaptureToGraph) real = VC_REAL_CUDA(cuStreamBeginCaptureToGraph);
  return real ? begun(real(s, g, deps, data, n, mode)) : CUDA_ERROR_NOT_INITIALIZED;
}
VC_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                    const CUgraphEdgeData *data, size_t n, CUstreamCaptureMode mode) {
  __typeof__(&cuStreamBeginCaptureToGraph_ptsz) real = VC_REAL_CUDA(cuStreamBeginCaptureToGraph_ptsz);
  return real ? begun(real(s, g, deps, data, n, mode)) : CUDA_ERROR_NOT_INITIALIZED;
}

/* A capture ends with cuStreamEndCapture whatever it returns (an invalidated capture returns an
 * error): counted down when the stream was capturing before and is not after. */
static CUresult end(CUresult (*real)(CUstream, CUgraph *), CUstream s, CUstream asked, CUgraph *g) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  int was = vc_stream_capturing(asked);
  CUresult rc = real(s, g);
  if (was && !vc_stream_capturing(asked) && atomic_load_explicit(&vc_captures_in_progress, memory_order_relaxed) > 0)
    atomic_fetch_sub_explicit(&vc_captures_in_progress, 1, memory_order_relaxed);
  return rc;
}

VC_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *g) {
  return end(VC_REAL_CUDA(cuStreamEndCapture), s, s, g);
}
VC_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) {
  return end(VC_REAL_CUDA(cuStreamEndCapture_ptsz), s, PTS(s), g);
}
