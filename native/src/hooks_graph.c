/* Graphs. Memory allocation nodes take physical memory from the device's graph memory pool when
 * their exec is uploaded (cuGraphUpload, cuGraphInstantiateWithParams with the upload flag) or
 * launched, and the pool keeps it until cuDeviceGraphMemTrim. The pool is charged as pools are
 * (hooks_pool.c): by its reserved memory as the driver reports it
 * (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), re-read after every operation that can change it. An
 * upload or launch first reserves what the exec's allocation nodes could add beyond what the pool
 * has unused, and is refused with CUDA_ERROR_OUT_OF_MEMORY before the driver is asked when that
 * does not fit.
 *
 * Each exec's allocation bytes and kernel nodes are counted once, at instantiation, by walking
 * the graph (child graphs included); a replay is then charged to the compute limiter as that
 * many launches (hooks_launch.c). Nothing here runs on the kernel launch fast path. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "charge.h"
#include "config.h"
#include "hooks.h"
#include "log.h"
#include "real.h"
#include "region.h"

#define MAX_CHILD_DEPTH 8

struct exec_info {
  CUgraphExec exec;
  CUdevice dev;       /* device of the context it was instantiated in */
  uint64_t kernels;   /* kernel nodes */
  uint64_t alloc_bytes; /* bytes of its memory allocation nodes */
};

static struct exec_info *execs;
static size_t exec_count, exec_cap;
static uint64_t charged[VC_CONFIG_MAX_DEVICES]; /* graph pool bytes the region holds, per record */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
VC_FORK_SAFE_MUTEX(lock, VC_ATFORK_POOL)

struct graph_totals {
  uint64_t kernels, alloc_bytes;
};

/* Adds the kernel nodes and allocation bytes of `graph` (and its child graphs) to *t. */
static void walk(CUgraph graph, struct graph_totals *t, int depth) {
  __typeof__(&cuGraphGetNodes) get_nodes = VC_REAL_CUDA(cuGraphGetNodes);
  __typeof__(&cuGraphNodeGetType) get_type = VC_REAL_CUDA(cuGraphNodeGetType);
  __typeof__(&cuGraphMemAllocNodeGetParams) get_alloc = VC_REAL_CUDA(cuGraphMemAllocNodeGetParams);
  __typeof__(&cuGraphChildGraphNodeGetGraph) get_child = VC_REAL_CUDA(cuGraphChildGraphNodeGetGraph);
  size_t n = 0;
  if (!get_nodes || !get_type || depth > MAX_CHILD_DEPTH || get_nodes(graph, NULL, &n) != CUDA_SUCCESS || n == 0)
    return;
  CUgraphNode *nodes = calloc(n, sizeof *nodes);
  if (!nodes || get_nodes(graph, nodes, &n) != CUDA_SUCCESS) n = 0;
  for (size_t i = 0; i < n; i++) {
    CUgraphNodeType type;
    if (get_type(nodes[i], &type) != CUDA_SUCCESS) continue;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    CUgraph child;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) t->kernels++;
    else if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && get_alloc && get_alloc(nodes[i], &p) == CUDA_SUCCESS)
      t->alloc_bytes += p.bytesize;
    else if (type == CU_GRAPH_NODE_TYPE_GRAPH && get_child && get_child(nodes[i], &child) == CUDA_SUCCESS)
      walk(child, t, depth + 1);
  }
  free(nodes);
}

/* Caller holds lock. */
static struct exec_info *find_locked(CUgraphExec exec) {
  for (size_t i = 0; i < exec_count; i++)
    if (execs[i].exec == exec) return &execs[i];
  return NULL;
}

/* Records (or refreshes: the driver may reuse a destroyed exec's handle) what `exec` holds. */
static void remember(CUgraphExec exec, CUdevice dev, const struct graph_totals *t) {
  pthread_mutex_lock(&lock);
  struct exec_info *e = find_locked(exec);
  if (!e && exec_count == exec_cap) {
    size_t cap = exec_cap ? exec_cap * 2 : 64;
    struct exec_info *grown = realloc(execs, cap * sizeof *grown);
    if (grown) {
      execs = grown;
      exec_cap = cap;
    }
  }
  if (!e && exec_count < exec_cap) e = &execs[exec_count++];
  if (e) *e = (struct exec_info){exec, dev, t->kernels, t->alloc_bytes};
  else vc_log(VC_LOG_WARN, "out of memory recording a graph exec; its replays are charged as one launch");
  pthread_mutex_unlock(&lock);
}

static uint64_t graph_attr(CUdevice dev, CUgraphMem_attribute attr, uint64_t fallback) {
  __typeof__(&cuDeviceGetGraphMemAttribute) get = VC_REAL_CUDA(cuDeviceGetGraphMemAttribute);
  uint64_t v = 0;
  return get && get(dev, attr, &v) == CUDA_SUCCESS ? v : fallback;
}

/* Brings the region's charge for `dev`'s graph pool to its reserved memory. Growth seen here
 * cannot be refused any more and is recorded even past the limit, so views stay true. Caller
 * holds lock. */
static void settle_locked(CUdevice dev, int index) {
  if (index < 0 || index >= (int)VC_CONFIG_MAX_DEVICES) return;
  uint64_t reserved = graph_attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, charged[index]);
  if (reserved > charged[index]) vc_region_reserve(index, reserved - charged[index], UINT64_MAX);
  else if (reserved < charged[index]) vc_uncharge(index, charged[index] - reserved);
  charged[index] = reserved;
}

void vc_graph_mem_settle(CUdevice dev) {
  pthread_mutex_lock(&lock);
  settle_locked(dev, vc_device_index(dev));
  pthread_mutex_unlock(&lock);
}

typedef CUresult (*graph_call)(void *arg);

/* Reserve what `bytes` of allocation nodes could add to `dev`'s graph pool, run `call`, and
 * settle on what the pool then reports. */
static CUresult with_graph_memory(CUdevice dev, uint64_t bytes, graph_call call, void *arg) {
  if (bytes == 0) return call(arg);
  int index = vc_device_index(dev);
  if (index < 0 || index >= (int)VC_CONFIG_MAX_DEVICES) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  settle_locked(dev, index);
  uint64_t used = graph_attr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, charged[index]);
  uint64_t unused = charged[index] > used ? charged[index] - used : 0;
  uint64_t need = bytes > unused ? bytes - unused : 0;
  if (need && vc_charge(index, need) != CUDA_SUCCESS) {
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  charged[index] += need;
  CUresult rc = call(arg);
  settle_locked(dev, index);
  pthread_mutex_unlock(&lock);
  return rc;
}

static CUdevice current_device(void) {
  __typeof__(&cuCtxGetDevice) get = VC_REAL_CUDA(cuCtxGetDevice);
  CUdevice dev = -1;
  return get && get(&dev) == CUDA_SUCCESS ? dev : -1;
}

/* ---- instantiation ---- */

struct instantiate_call {
  CUresult (*flags_fn)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*params_fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *);
  CUresult (*legacy_fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
  CUgraphExec *exec;
  CUgraph graph;
  unsigned long long flags;
  CUDA_GRAPH_INSTANTIATE_PARAMS *params;
  CUgraphNode *err_node;
  char *log;
  size_t log_size;
};

static CUresult call_instantiate(void *arg) {
  struct instantiate_call *c = arg;
  if (c->flags_fn) return c->flags_fn(c->exec, c->graph, c->flags);
  if (c->params_fn) return c->params_fn(c->exec, c->graph, c->params);
  return c->legacy_fn(c->exec, c->graph, c->err_node, c->log, c->log_size);
}

/* Only an instantiation that uploads can take graph memory; every one is walked and recorded. */
static CUresult instantiate(struct instantiate_call *c, int uploads) {
  if (!c->flags_fn && !c->params_fn && !c->legacy_fn) return CUDA_ERROR_NOT_INITIALIZED;
  struct graph_totals t = {0, 0};
  if (c->graph) walk(c->graph, &t, 0);
  CUdevice dev = current_device();
  CUresult rc = with_graph_memory(dev, uploads ? t.alloc_bytes : 0, call_instantiate, c);
  if (rc == CUDA_SUCCESS && c->exec) remember(*c->exec, dev, &t);
  return rc;
}

VC_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags) {
  struct instantiate_call c = {.flags_fn = VC_REAL_CUDA(cuGraphInstantiateWithFlags), .exec = exec, .graph = graph,
                               .flags = flags};
  return instantiate(&c, 0);
}

static CUresult with_params(CUresult (*fn)(CUgraphExec *, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS *), CUgraphExec *exec,
                            CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
  struct instantiate_call c = {.params_fn = fn, .exec = exec, .graph = graph, .params = params};
  return instantiate(&c, params && (params->flags & VC_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD));
}

VC_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return with_params(VC_REAL_CUDA(cuGraphInstantiateWithParams), exec, graph, p);
}
VC_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *exec, CUgraph graph,
                                                     CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return with_params(VC_REAL_CUDA(cuGraphInstantiateWithParams_ptsz), exec, graph, p);
}

static CUresult legacy(CUresult (*fn)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t), CUgraphExec *exec,
                       CUgraph graph, CUgraphNode *err, char *log, size_t n) {
  struct instantiate_call c = {.legacy_fn = fn, .exec = exec, .graph = graph, .err_node = err, .log = log,
                               .log_size = n};
  return instantiate(&c, 0);
}

VC_EXPORT CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph graph, CUgraphNode *err, char *log, size_t n) {
  return legacy(VC_REAL_CUDA(cuGraphInstantiate), exec, graph, err, log, n);
}
VC_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph graph, CUgraphNode *err, char *log, size_t n) {
  return legacy(VC_REAL_CUDA(cuGraphInstantiate_v2), exec, graph, err, log, n);
}

VC_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  __typeof__(&cuGraphExecDestroy) real = VC_REAL_CUDA(cuGraphExecDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(exec);
  if (rc != CUDA_SUCCESS) return rc;
  pthread_mutex_lock(&lock);
  struct exec_info *e = find_locked(exec);
  if (e) *e = execs[--exec_count];
  pthread_mutex_unlock(&lock);
  return rc;
}

/* ---- upload and launch ---- */

struct run_call {
  CUresult (*fn)(CUgraphExec, CUstream);
  CUgraphExec exec;
  CUstream stream;
};

static CUresult call_run(void *arg) {
  struct run_call *c = arg;
  return c->fn(c->exec, c->stream);
}

static int lookup(CUgraphExec exec, struct exec_info *out) {
  pthread_mutex_lock(&lock);
  struct exec_info *e = find_locked(exec);
  if (e) *out = *e;
  pthread_mutex_unlock(&lock);
  return e != NULL;
}

uint64_t vc_graph_launches(CUgraphExec exec) {
  struct exec_info e;
  return lookup(exec, &e) ? e.kernels : 1;
}

CUresult vc_graph_run(CUgraphExec exec, CUstream stream, CUresult (*launch)(CUgraphExec, CUstream)) {
  struct exec_info e;
  if (!launch) return CUDA_ERROR_NOT_INITIALIZED;
  if (!lookup(exec, &e) || e.alloc_bytes == 0) return launch(exec, stream);
  struct run_call c = {launch, exec, stream};
  return with_graph_memory(e.dev, e.alloc_bytes, call_run, &c);
}

VC_EXPORT CUresult cuGraphUpload(CUgraphExec exec, CUstream stream) {
  return vc_graph_run(exec, stream, VC_REAL_CUDA(cuGraphUpload));
}
VC_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec exec, CUstream stream) {
  return vc_graph_run(exec, stream, VC_REAL_CUDA(cuGraphUpload_ptsz));
}

/* ---- the graph memory pool ---- */

/* A node larger than the whole limit can never run: refused at once, like cuMemAlloc. */
VC_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps, size_t n,
                                          CUDA_MEM_ALLOC_NODE_PARAMS *params) {
  __typeof__(&cuGraphAddMemAllocNode) real = VC_REAL_CUDA(cuGraphAddMemAllocNode);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (params && params->poolProps.location.type == VC_CU_MEM_LOCATION_TYPE_DEVICE) {
    int index = vc_device_index(params->poolProps.location.id);
    if (index < 0 || params->bytesize > vc_config_memory_limit(index)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return real(node, graph, deps, n, params);
}

VC_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  __typeof__(&cuDeviceGraphMemTrim) real = VC_REAL_CUDA(cuDeviceGraphMemTrim);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(dev);
  if (rc == CUDA_SUCCESS) vc_graph_mem_settle(dev);
  return rc;
}

VC_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr, void *value) {
  __typeof__(&cuDeviceGetGraphMemAttribute) real = VC_REAL_CUDA(cuDeviceGetGraphMemAttribute);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(dev, attr, value);
  if (rc == CUDA_SUCCESS) vc_graph_mem_settle(dev); /* the pool may have released memory since */
  return rc;
}
