/* Internals shared by the fake driver's files. */
#ifndef FAKEGPU_CUDA_H
#define FAKEGPU_CUDA_H

#include <pthread.h>
#include <stdint.h>

#include "fake_state.h"
#include "vc_cuda.h"
#include "vc_cuda_graph.h"

#define FG_EXPORT __attribute__((visibility("default")))
#define FG_STREAM_QUEUE 1024 /* pending kernels per stream before a launch blocks */
/* The CUDA version the fake driver reports (cuDriverGetVersion) and serves cuGetProcAddress for. */
#define FG_DRIVER_VERSION 13000

struct CUctx_st {
  uint32_t magic;
  int device;
  int primary;
};

struct fg_graph_common {
  uint32_t magic;
  int device;
  uint64_t cost_ns;
  uint32_t kernels;     /* kernel nodes */
  int backed;           /* exec: its allocation nodes hold graph-pool memory (fake_cuda_graph_mem.c) */
  uint64_t alloc_bytes; /* bytes of its memory allocation nodes */
};
struct fg_graph_node;
struct CUgraph_st {
  struct fg_graph_common g;
  struct fg_graph_node **nodes; /* fake_cuda_graph_mem.c */
  size_t node_count, node_cap;
};
struct CUgraphExec_st {
  struct fg_graph_common g;
};

struct CUstream_st {
  uint32_t magic;
  int device;
  pthread_mutex_t lock;
  uint64_t tail_ns;                  /* end of the last work queued */
  uint64_t pending[FG_STREAM_QUEUE]; /* end times of queued kernels (ring) */
  uint32_t head, count;
  struct CUgraph_st *capture; /* non-NULL while capturing */
};

struct CUfunc_st {
  uint32_t magic;
  char name[64];
  uint64_t wave_ns; /* 0: FAKEGPU_KERNEL_US */
};

#define FG_MAGIC_CTX 0x43545831u
#define FG_MAGIC_STREAM 0x5354524du
#define FG_MAGIC_FUNC 0x46554e43u
#define FG_MAGIC_GRAPH 0x47525048u
#define FG_MAGIC_EVENT 0x45564e54u

/* 0 after cuInit succeeded. */
int fg_initialized(void);

/* The calling thread's current context, or NULL. */
CUcontext fg_current(void);

/* Device `dev`'s primary context handle, whether or not it is retained (dev must be valid). */
CUcontext fg_primary_context(int dev);

/* Runs the destructors of the runtime's context-local storage of `ctx` and forgets it: what the
 * driver does when a context is destroyed or a primary context reset. */
void fg_context_storage_destroy(CUcontext ctx);

/* The stream a handle names (NULL, legacy, per-thread: the current device's default stream). */
struct CUstream_st *fg_stream(CUstream s);

/* Queues `duration_ns` on `stream` (respecting its queue bound); returns the end time. */
uint64_t fg_stream_enqueue(struct CUstream_st *stream, uint64_t duration_ns);

/* 1 when FAKEGPU_TRACE asks for driver look-ups (cuGetProcAddress, cuGetExportTable) on stderr. */
int fg_trace_enabled(void);
/* Graph nodes and graph memory (fake_cuda_graph_mem.c). Adding a node: 0 or a CUresult. */
CUresult fg_graph_add_node(struct CUgraph_st *g, int type, uint64_t bytes, uint64_t dptr, void **node_out);
void fg_graph_free_nodes(struct CUgraph_st *g);
/* Backs an exec's allocation nodes with graph-pool memory (upload / first launch); unbacks at
 * destroy. */
CUresult fg_graph_back(struct CUgraphExec_st *x);
void fg_graph_unback(struct CUgraphExec_st *x);

/* Kernel duration from grid and function cost: ceil(blocks / SMs) waves. */
uint64_t fg_kernel_ns(CUfunction f, uint64_t blocks, int device);

#endif
