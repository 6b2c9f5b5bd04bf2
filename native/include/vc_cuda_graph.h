/* The graph and stream-capture subset of the driver API that libvcuda hooks for graph memory
 * (allocation nodes, the graph memory pool) and for charging graph replays by what they launch;
 * the fake driver implements it. Kept apart from vc_cuda.h; checked against <cuda.h> by
 * test/cuda_header_check.c like the rest. */
#ifndef VCUDA_VC_CUDA_GRAPH_H
#define VCUDA_VC_CUDA_GRAPH_H

#include "vc_cuda.h"

#ifndef CUDA_VERSION
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphEdgeData_st CUgraphEdgeData;
typedef struct CUmemAccessDesc_st CUmemAccessDesc;

typedef enum CUstreamCaptureStatus_enum {
  CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2
} CUstreamCaptureStatus;

typedef enum CUgraphNodeType_enum {
  CU_GRAPH_NODE_TYPE_KERNEL = 0,
  CU_GRAPH_NODE_TYPE_GRAPH = 4,
  CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
  CU_GRAPH_NODE_TYPE_MEM_FREE = 11
} CUgraphNodeType;

typedef enum CUgraphMem_attribute_enum {
  CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT = 0,
  CU_GRAPH_MEM_ATTR_USED_MEM_HIGH = 1,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT = 2,
  CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH = 3
} CUgraphMem_attribute;

typedef enum CUgraphInstantiateResult_enum { CUDA_GRAPH_INSTANTIATE_SUCCESS = 0 } CUgraphInstantiateResult;

typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_v1_st {
  CUmemPoolProps poolProps;
  const CUmemAccessDesc *accessDescs;
  size_t accessDescCount;
  size_t bytesize;
  CUdeviceptr dptr; /* out */
} CUDA_MEM_ALLOC_NODE_PARAMS;

typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  CUgraphInstantiateResult result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;
#endif /* !CUDA_VERSION */

_Static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120, "CUDA_MEM_ALLOC_NODE_PARAMS is 120 bytes");
_Static_assert(offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize) == 104, "bytesize at 104");
_Static_assert(sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == 32, "CUDA_GRAPH_INSTANTIATE_PARAMS is 32 bytes");

#define VC_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD 2ULL

CUresult cuStreamBeginCapture(CUstream hStream);
CUresult cuStreamBeginCapture_ptsz(CUstream hStream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                     const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                     CUstreamCaptureMode mode);
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                          CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);

CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                            size_t bufferSize);
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
                               size_t bufferSize);
CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams);
CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes);
CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type);
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph);
CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams);
CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out);
CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                               size_t numDependencies, CUdeviceptr dptr);
CUresult cuDeviceGraphMemTrim(CUdevice device);
CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value);
CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value);

#endif
