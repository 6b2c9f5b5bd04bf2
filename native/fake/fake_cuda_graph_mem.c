/* Fake driver: graph nodes as far as graph memory needs them, and the per-device graph memory
 * pool. A graph holds kernel nodes (captured launches), memory allocation nodes
 * (cuGraphAddMemAllocNode, or cuMemAllocAsync on a capturing stream) and memory free nodes. As
 * in the driver, an allocation node takes an address at creation and physical memory only when
 * its exec is uploaded (cuGraphUpload, cuGraphInstantiateWithParams with the upload flag) or
 * first launched; the memory comes from the device's graph pool, which keeps what it reserved
 * until cuDeviceGraphMemTrim. Simplification: an exec holds its allocations from upload until
 * it is destroyed (the driver may reuse them between launches, which needs no more memory). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_mem.h"
#include "vc_cuda_graph.h"

struct fg_graph_node {
  int type;
  uint64_t bytes;
  uint64_t dptr;
  CUgraph child; /* CU_GRAPH_NODE_TYPE_GRAPH: unused, no child graphs in the fake */
};

static struct {
  uint64_t reserved, used, reserved_high, used_high;
} pools[FG_MAX_DEVICES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

CUresult fg_graph_add_node(struct CUgraph_st *g, int type, uint64_t bytes, uint64_t dptr, void **node_out) {
  struct fg_graph_node *n = calloc(1, sizeof *n);
  if (!n) return CUDA_ERROR_OUT_OF_MEMORY;
  *n = (struct fg_graph_node){.type = type, .bytes = bytes, .dptr = dptr};
  if (g->node_count == g->node_cap) {
    size_t cap = g->node_cap ? g->node_cap * 2 : 16;
    struct fg_graph_node **grown = realloc(g->nodes, cap * sizeof *grown);
    if (!grown) {
      free(n);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->nodes = grown;
    g->node_cap = cap;
  }
  g->nodes[g->node_count++] = n;
  if (type == CU_GRAPH_NODE_TYPE_KERNEL) g->g.kernels++;
  if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) g->g.alloc_bytes += bytes;
  if (node_out) *node_out = n;
  return CUDA_SUCCESS;
}

void fg_graph_free_nodes(struct CUgraph_st *g) {
  for (size_t i = 0; i < g->node_count; i++) free(g->nodes[i]);
  free(g->nodes);
  g->nodes = NULL;
  g->node_count = g->node_cap = 0;
}

static int valid_graph(CUgraph g) { return g && g->g.magic == FG_MAGIC_GRAPH; }

CUresult fg_graph_back(struct CUgraphExec_st *x) {
  if (x->g.backed || x->g.alloc_bytes == 0) return CUDA_SUCCESS;
  int dev = x->g.device;
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&lock);
  uint64_t used = pools[dev].used + x->g.alloc_bytes;
  if (used > pools[dev].reserved) {
    if (fg_mem_charge(fg_node(dev), used - pools[dev].reserved) != 0) rc = CUDA_ERROR_OUT_OF_MEMORY;
    else pools[dev].reserved = used;
  }
  if (rc == CUDA_SUCCESS) {
    pools[dev].used = used;
    x->g.backed = 1;
    if (pools[dev].reserved > pools[dev].reserved_high) pools[dev].reserved_high = pools[dev].reserved;
    if (used > pools[dev].used_high) pools[dev].used_high = used;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

void fg_graph_unback(struct CUgraphExec_st *x) {
  if (!x->g.backed) return;
  pthread_mutex_lock(&lock);
  uint64_t *used = &pools[x->g.device].used; /* a reset in between emptied the pool */
  *used = *used > x->g.alloc_bytes ? *used - x->g.alloc_bytes : 0;
  pthread_mutex_unlock(&lock);
  x->g.backed = 0;
}

FG_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                          CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  (void)deps, (void)ndeps;
  if (!node || !valid_graph(g) || !p || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  if (p->poolProps.location.type != VC_CU_MEM_LOCATION_TYPE_DEVICE || fg_node(p->poolProps.location.id) < 0)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t va = fg_take_va(p->poolProps.location.id, p->bytesize);
  CUresult rc = fg_graph_add_node(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, p->bytesize, va, (void **)node);
  if (rc == CUDA_SUCCESS) p->dptr = va;
  return rc;
}

FG_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                         CUdeviceptr dptr) {
  (void)deps, (void)ndeps;
  if (!node || !valid_graph(g) || !dptr) return CUDA_ERROR_INVALID_VALUE;
  return fg_graph_add_node(g, CU_GRAPH_NODE_TYPE_MEM_FREE, 0, dptr, (void **)node);
}

FG_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS *out) {
  struct fg_graph_node *n = (struct fg_graph_node *)node;
  if (!n || !out || n->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return CUDA_ERROR_INVALID_VALUE;
  memset(out, 0, sizeof *out);
  out->poolProps.allocType = 1;
  out->poolProps.location.type = VC_CU_MEM_LOCATION_TYPE_DEVICE;
  out->bytesize = n->bytes;
  out->dptr = n->dptr;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *count) {
  if (!valid_graph(g) || !count) return CUDA_ERROR_INVALID_VALUE;
  if (!nodes) {
    *count = g->node_count;
    return CUDA_SUCCESS;
  }
  size_t n = *count < g->node_count ? *count : g->node_count;
  for (size_t i = 0; i < n; i++) nodes[i] = (CUgraphNode)g->nodes[i];
  *count = n;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
  if (!node || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = (CUgraphNodeType)((struct fg_graph_node *)node)->type;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph *out) {
  struct fg_graph_node *n = (struct fg_graph_node *)node;
  if (!n || !out || n->type != CU_GRAPH_NODE_TYPE_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  *out = n->child;
  return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *ph, CUgraph g, int upload) {
  CUresult rc = cuGraphInstantiateWithFlags(ph, g, 0);
  if (rc == CUDA_SUCCESS && upload && (rc = fg_graph_back(*ph)) != CUDA_SUCCESS) {
    cuGraphExecDestroy(*ph);
    *ph = NULL;
  }
  return rc;
}

FG_EXPORT CUresult cuGraphInstantiate(CUgraphExec *ph, CUgraph g, CUgraphNode *err, char *log, size_t n) {
  (void)err, (void)log, (void)n;
  return instantiate(ph, g, 0);
}
FG_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *ph, CUgraph g, CUgraphNode *err, char *log, size_t n) {
  return cuGraphInstantiate(ph, g, err, log, n);
}
FG_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *ph, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = instantiate(ph, g, (p->flags & VC_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0);
  p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return rc;
}
FG_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *ph, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return cuGraphInstantiateWithParams(ph, g, p);
}

FG_EXPORT CUresult cuGraphUpload(CUgraphExec x, CUstream s) {
  (void)s;
  if (!x || x->g.magic != FG_MAGIC_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  return fg_graph_back(x);
}
FG_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec x, CUstream s) { return cuGraphUpload(x, s); }

FG_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&lock);
  if (pools[dev].reserved > pools[dev].used) fg_mem_uncharge(fg_node(dev), pools[dev].reserved - pools[dev].used);
  pools[dev].reserved = pools[dev].used;
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value) {
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&lock);
  switch ((int)attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *(uint64_t *)value = pools[dev].used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *(uint64_t *)value = pools[dev].used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *(uint64_t *)value = pools[dev].reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *(uint64_t *)value = pools[dev].reserved_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

/* Only the high watermarks can be set, and only to 0 (reset to current), as in the driver. */
FG_EXPORT CUresult cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value) {
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  if (!value || *(uint64_t *)value != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&lock);
  if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) pools[dev].used_high = pools[dev].used;
  else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) pools[dev].reserved_high = pools[dev].reserved;
  else rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_unlock(&lock);
  return rc;
}

/* Stream capture state, as the driver reports it. */
FG_EXPORT CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *status) {
  struct CUstream_st *s = fg_stream(h);
  if (!s || !status) return CUDA_ERROR_INVALID_VALUE;
  *status = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *status) {
  return cuStreamIsCapturing(h ? h : VC_CU_STREAM_PER_THREAD, status);
}

/* A primary context reset frees the device's graph memory too. */
void fg_graph_mem_reset(int dev) {
  pthread_mutex_lock(&lock);
  if (dev >= 0 && dev < FG_MAX_DEVICES && pools[dev].reserved) fg_mem_uncharge(fg_node(dev), pools[dev].reserved);
  if (dev >= 0 && dev < FG_MAX_DEVICES) pools[dev].reserved = pools[dev].used = 0;
  pthread_mutex_unlock(&lock);
}

/* The other capture entry points, onto cuStreamBeginCapture_v2 / cuStreamEndCapture. */
FG_EXPORT CUresult cuStreamBeginCapture(CUstream h) { return cuStreamBeginCapture_v2(h, CU_STREAM_CAPTURE_MODE_GLOBAL); }
FG_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  return cuStreamBeginCapture_v2(h ? h : VC_CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
FG_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  return cuStreamBeginCapture_v2(h ? h : VC_CU_STREAM_PER_THREAD, mode);
}
FG_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *ph) {
  return cuStreamEndCapture(h ? h : VC_CU_STREAM_PER_THREAD, ph);
}
/* Capture into an existing graph: its nodes are appended to (dependencies are not modelled). */
FG_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream h, CUgraph g, const CUgraphNode *deps,
                                               const CUgraphEdgeData *data, size_t ndeps, CUstreamCaptureMode mode) {
  (void)deps, (void)data, (void)ndeps, (void)mode;
  struct CUstream_st *s = fg_stream(h);
  if (!s || s->capture || !valid_graph(g)) return CUDA_ERROR_INVALID_VALUE;
  s->capture = g;
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream h, CUgraph g, const CUgraphNode *deps,
                                                    const CUgraphEdgeData *data, size_t ndeps,
                                                    CUstreamCaptureMode mode) {
  return cuStreamBeginCaptureToGraph(h ? h : VC_CU_STREAM_PER_THREAD, g, deps, data, ndeps, mode);
}
