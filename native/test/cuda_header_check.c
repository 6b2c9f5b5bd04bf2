/* Built only where /usr/local/cuda/include/cuda.h exists: every prototype in vc_cuda.h is
 * re-declared after the toolkit's, so any difference in a signature fails the build.
 * __CUDA_API_VERSION_INTERNAL makes cuda.h declare the legacy exports too (cuMemAlloc, ...). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "vc_cuda.h"
#include "vc_cuda_graph.h"

_Static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40, "CUDA_ARRAY3D_DESCRIPTOR is 40 bytes");
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig is 56 bytes");
_Static_assert(CUDA_ERROR_OUT_OF_MEMORY == 2, "CUDA_ERROR_OUT_OF_MEMORY");
_Static_assert(CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == VC_CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
               "per-thread flag");
_Static_assert(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT == 5 && CU_MEMPOOL_ATTR_USED_MEM_CURRENT == 7, "pool attributes");
_Static_assert(CU_MEM_LOCATION_TYPE_DEVICE == VC_CU_MEM_LOCATION_TYPE_DEVICE, "device location type");

_Static_assert(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT == 2 && CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT == 0,
               "graph memory attributes");
_Static_assert(CU_GRAPH_NODE_TYPE_KERNEL == 0 && CU_GRAPH_NODE_TYPE_GRAPH == 4 && CU_GRAPH_NODE_TYPE_MEM_ALLOC == 10 &&
                   CU_GRAPH_NODE_TYPE_MEM_FREE == 11,
               "graph node types");
_Static_assert(CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD == VC_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, "upload flag");
_Static_assert(CU_STREAM_CAPTURE_STATUS_NONE == 0, "capture status");

int vc_cuda_header_check(void);
int vc_cuda_header_check(void) { return 0; }
