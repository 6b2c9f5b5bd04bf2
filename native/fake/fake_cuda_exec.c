/* Fake driver: modules, streams, events, kernel launches and graphs. A launch returns at once
 * (asynchronous) after placing the kernel on its device's host-wide timeline:
 *   start = max(now, device busy-until, stream tail); end = start + duration
 *   duration = ceil(blocks / SMs) x wave cost (per-function cost, else FAKEGPU_KERNEL_US)
 * so kernels of all processes serialize per device like time-slicing, and synchronize calls
 * sleep until the simulated end. A stream holds at most FG_STREAM_QUEUE pending kernels; the
 * next launch blocks until the oldest finishes, like a real driver's full push buffer.
 * An event is a zero-length item on the same timeline: recorded on a stream, it completes (and is
 * timestamped) when the device reaches it, after the stream's work and every kernel queued on the
 * device before it, as a time-slicing GPU processes it when the recording context next runs. So a
 * pair of timing events around one launch measures that kernel's execution, and a span of many
 * launches also counts what other processes ran in between. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fakegpu.h"

struct CUmod_st {
  uint32_t magic;
};

struct CUevent_st {
  uint32_t magic;
  int recorded;
  unsigned flags; /* CU_EVENT_DISABLE_TIMING (0x2): no timestamp for cuEventElapsedTime */
  uint64_t time_ns;
};

static struct CUstream_st default_streams[FG_MAX_DEVICES];
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;

static void init_defaults(void) {
  for (int i = 0; i < FG_MAX_DEVICES; i++) {
    default_streams[i].magic = FG_MAGIC_STREAM;
    default_streams[i].device = i;
    pthread_mutex_init(&default_streams[i].lock, NULL);
  }
}

struct CUstream_st *fg_stream(CUstream s) {
  if (fg_initialized() != 0) return NULL;
  if (s == NULL || s == VC_CU_STREAM_LEGACY || s == VC_CU_STREAM_PER_THREAD) {
    CUcontext c = fg_current();
    if (!c) return NULL;
    pthread_once(&defaults_once, init_defaults);
    return &default_streams[c->device];
  }
  return s->magic == FG_MAGIC_STREAM ? s : NULL;
}

uint64_t fg_kernel_ns(CUfunction f, uint64_t blocks, int device) {
  uint64_t sms = fg_dev_sms(fg_node(device)); /* a MIG device has its compute instance's SMs */
  uint64_t waves = (blocks + sms - 1) / sms;
  uint64_t wave = (f && f->magic == FG_MAGIC_FUNC && f->wave_ns) ? f->wave_ns : fg_env()->wave_ns;
  return (waves ? waves : 1) * wave;
}

uint64_t fg_stream_enqueue(struct CUstream_st *s, uint64_t duration_ns) {
  pthread_mutex_lock(&s->lock);
  uint64_t now = fg_now_ns();
  while (s->count > 0 && s->pending[s->head] <= now) {
    s->head = (s->head + 1) % FG_STREAM_QUEUE;
    s->count--;
  }
  if (s->count == FG_STREAM_QUEUE) { /* full: wait for the oldest kernel */
    fg_sleep_until(s->pending[s->head]);
    s->head = (s->head + 1) % FG_STREAM_QUEUE;
    s->count--;
  }
  uint64_t end = fg_schedule(fg_node(s->device), s->tail_ns, duration_ns);
  s->tail_ns = end;
  s->pending[(s->head + s->count) % FG_STREAM_QUEUE] = end;
  s->count++;
  pthread_mutex_unlock(&s->lock);
  return end;
}

/* ---- modules and functions ---- */

FG_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  struct CUmod_st *m = malloc(sizeof *m);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  m->magic = 0x4d4f4455u;
  *module = m;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuModuleUnload(CUmodule m) {
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  free(m);
  return CUDA_SUCCESS;
}

/* A function named "..._us<N>" costs N microseconds per wave. */
FG_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
  if (!hfunc || !hmod || !name) return CUDA_ERROR_INVALID_VALUE;
  struct CUfunc_st *f = calloc(1, sizeof *f);
  if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
  f->magic = FG_MAGIC_FUNC;
  strncpy(f->name, name, sizeof f->name - 1);
  const char *us = strstr(name, "_us");
  if (us) f->wave_ns = strtoull(us + 3, NULL, 10) * 1000u;
  *hfunc = f;
  return CUDA_SUCCESS;
}

/* FAKEGPU_FUNC_ATTRIBUTE_WAVE_US sets a function's wave cost through the driver API itself, for
 * clients that reach the fake only through cuGetProcAddress. Other attributes are accepted. */
FG_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value) {
  if (!f || f->magic != FG_MAGIC_FUNC) return CUDA_ERROR_INVALID_HANDLE;
  if ((int)attrib == FAKEGPU_FUNC_ATTRIBUTE_WAVE_US) {
    if (value < 0) return CUDA_ERROR_INVALID_VALUE;
    f->wave_ns = (uint64_t)value * 1000u;
  }
  return CUDA_SUCCESS;
}

FG_EXPORT int fakegpu_set_function_cost_ns(CUfunction f, uint64_t wave_ns) {
  if (!f || f->magic != FG_MAGIC_FUNC) return -1;
  f->wave_ns = wave_ns;
  return 0;
}

/* ---- streams ---- */

FG_EXPORT CUresult cuStreamCreate(CUstream *ph, unsigned int flags) {
  (void)flags;
  if (!ph) return CUDA_ERROR_INVALID_VALUE;
  CUcontext c = fg_current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  struct CUstream_st *s = calloc(1, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  s->magic = FG_MAGIC_STREAM;
  s->device = c->device;
  pthread_mutex_init(&s->lock, NULL);
  *ph = s;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  if (!s || s->magic != FG_MAGIC_STREAM) return CUDA_ERROR_INVALID_HANDLE;
  s->magic = 0;
  pthread_mutex_destroy(&s->lock);
  free(s);
  return CUDA_SUCCESS;
}

static uint64_t stream_tail(struct CUstream_st *s) {
  pthread_mutex_lock(&s->lock);
  uint64_t t = s->tail_ns;
  pthread_mutex_unlock(&s->lock);
  return t;
}

FG_EXPORT CUresult cuStreamSynchronize(CUstream h) {
  struct CUstream_st *s = fg_stream(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  fg_sleep_until(stream_tail(s));
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream h) { return cuStreamSynchronize(h); }

FG_EXPORT CUresult cuStreamQuery(CUstream h) {
  struct CUstream_st *s = fg_stream(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  return fg_now_ns() >= stream_tail(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* Synchronizes every stream this process created on the device: the device timeline's end is
 * an upper bound that includes them (and other processes' work, which a real context sync
 * would not wait for; harmless for tests). */
static CUresult sync_device(int dev) {
  struct fg_device *d = &fg_state()->devices[fg_node(dev)];
  fg_lock();
  uint64_t until = d->busy_until_ns;
  fg_unlock();
  fg_sleep_until(until);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSynchronize(void) {
  CUcontext c = fg_current();
  return c ? sync_device(c->device) : CUDA_ERROR_INVALID_CONTEXT;
}

FG_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  if (!ctx) return cuCtxSynchronize();
  return ctx->magic == FG_MAGIC_CTX ? sync_device(ctx->device) : CUDA_ERROR_INVALID_CONTEXT;
}

/* ---- events ---- */

FG_EXPORT CUresult cuEventCreate(CUevent *ph, unsigned int flags) {
  if (!ph) return CUDA_ERROR_INVALID_VALUE;
  struct CUevent_st *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->magic = FG_MAGIC_EVENT;
  e->flags = flags;
  *ph = e;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  if (!e || e->magic != FG_MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
  e->magic = 0;
  free(e);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventRecord(CUevent e, CUstream h) {
  struct CUstream_st *s = fg_stream(h);
  if (!e || e->magic != FG_MAGIC_EVENT || !s) return CUDA_ERROR_INVALID_HANDLE;
  e->time_ns = fg_reach(fg_node(s->device), stream_tail(s));
  e->recorded = 1;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream h) { return cuEventRecord(e, h); }

FG_EXPORT CUresult cuEventQuery(CUevent e) {
  if (!e || e->magic != FG_MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
  return !e->recorded || fg_now_ns() >= e->time_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FG_EXPORT CUresult cuEventSynchronize(CUevent e) {
  if (!e || e->magic != FG_MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
  if (e->recorded) fg_sleep_until(e->time_ns);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  if (!ms) return CUDA_ERROR_INVALID_VALUE;
  if (!a || !b || a->magic != FG_MAGIC_EVENT || b->magic != FG_MAGIC_EVENT || !a->recorded || !b->recorded)
    return CUDA_ERROR_INVALID_HANDLE;
  if ((a->flags | b->flags) & 0x2u /* CU_EVENT_DISABLE_TIMING */) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t now = fg_now_ns();
  if (now < a->time_ns || now < b->time_ns) return CUDA_ERROR_NOT_READY;
  *ms = (float)(((double)b->time_ns - (double)a->time_ns) / 1e6);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { return cuEventElapsedTime(ms, a, b); }

/* ---- launches ---- */

static CUresult launch(CUfunction f, uint64_t blocks, CUstream h) {
  if (!f || f->magic != FG_MAGIC_FUNC) return CUDA_ERROR_INVALID_HANDLE;
  struct CUstream_st *s = fg_stream(h);
  if (!s) return fg_current() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
  if (blocks == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t ns = fg_kernel_ns(f, blocks, s->device);
  if (s->capture) { /* recorded into the graph instead of running: a kernel node */
    s->capture->g.cost_ns += ns;
    return fg_graph_add_node(s->capture, 0 /* CU_GRAPH_NODE_TYPE_KERNEL */, 0, 0, NULL);
  }
  if (ns == 0) return CUDA_SUCCESS; /* a zero-cost kernel occupies nothing (FAKEGPU_KERNEL_US=0) */
  fg_stream_enqueue(s, ns);
  return CUDA_SUCCESS;
}

#define BLOCKS(x, y, z) ((uint64_t)(x) * (uint64_t)(y) * (uint64_t)(z))

FG_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                  unsigned int by, unsigned int bz, unsigned int shm, CUstream s, void **params,
                                  void **extra) {
  (void)bx, (void)by, (void)bz, (void)shm, (void)params, (void)extra;
  return launch(f, BLOCKS(gx, gy, gz), s);
}

FG_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                       unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm, CUstream s,
                                       void **params, void **extra) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shm, s, params, extra);
}

FG_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  (void)params, (void)extra;
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, BLOCKS(c->gridDimX, c->gridDimY, c->gridDimZ), c->hStream);
}

FG_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  return cuLaunchKernelEx(c, f, params, extra);
}

FG_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                             unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm,
                                             CUstream s, void **params) {
  (void)bx, (void)by, (void)bz, (void)shm, (void)params;
  /* Cooperative grids must be co-resident: at most one block per SM in the fake. */
  struct CUstream_st *st = fg_stream(s);
  if (st && BLOCKS(gx, gy, gz) > fg_dev_sms(fg_node(st->device))) return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
  return launch(f, BLOCKS(gx, gy, gz), s);
}

FG_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                  unsigned int bx, unsigned int by, unsigned int bz, unsigned int shm,
                                                  CUstream s, void **params) {
  return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shm, s, params);
}

FG_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned int n, unsigned int flags) {
  (void)flags;
  if (!list || n == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; i < n; i++) {
    CUresult rc = cuLaunchCooperativeKernel(list[i].function, list[i].gridDimX, list[i].gridDimY, list[i].gridDimZ,
                                            list[i].blockDimX, list[i].blockDimY, list[i].blockDimZ,
                                            list[i].sharedMemBytes, list[i].hStream, list[i].kernelParams);
    if (rc != CUDA_SUCCESS) return rc;
  }
  return CUDA_SUCCESS;
}

/* ---- graphs: a graph is the total cost of what was captured into it (or set by a test) ---- */

FG_EXPORT CUresult cuGraphCreate(CUgraph *ph, unsigned int flags) {
  (void)flags;
  if (!ph) return CUDA_ERROR_INVALID_VALUE;
  struct CUgraph_st *g = calloc(1, sizeof *g);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  g->g.magic = FG_MAGIC_GRAPH;
  g->g.device = fg_current() ? fg_current()->device : 0;
  *ph = g;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphDestroy(CUgraph g) {
  if (!g || g->g.magic != FG_MAGIC_GRAPH) return CUDA_ERROR_INVALID_HANDLE;
  g->g.magic = 0;
  fg_graph_free_nodes(g);
  free(g);
  return CUDA_SUCCESS;
}

FG_EXPORT int fakegpu_graph_set_cost_ns(CUgraph g, uint64_t cost_ns) {
  if (!g || g->g.magic != FG_MAGIC_GRAPH) return -1;
  g->g.cost_ns = cost_ns;
  return 0;
}

FG_EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  (void)mode;
  struct CUstream_st *s = fg_stream(h);
  if (!s || s->capture) return CUDA_ERROR_INVALID_VALUE;
  CUgraph g;
  CUresult rc = cuGraphCreate(&g, 0);
  if (rc != CUDA_SUCCESS) return rc;
  g->g.device = s->device;
  s->capture = g;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph *ph) {
  struct CUstream_st *s = fg_stream(h);
  if (!s || !s->capture || !ph) return CUDA_ERROR_INVALID_VALUE;
  *ph = s->capture;
  s->capture = NULL;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *ph, CUgraph g, unsigned long long flags) {
  (void)flags;
  if (!ph || !g || g->g.magic != FG_MAGIC_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  struct CUgraphExec_st *x = malloc(sizeof *x);
  if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
  x->g = g->g;
  x->g.backed = 0;
  *ph = x;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphExecDestroy(CUgraphExec x) {
  if (!x || x->g.magic != FG_MAGIC_GRAPH) return CUDA_ERROR_INVALID_HANDLE;
  x->g.magic = 0;
  fg_graph_unback(x);
  free(x);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphLaunch(CUgraphExec x, CUstream h) {
  if (!x || x->g.magic != FG_MAGIC_GRAPH) return CUDA_ERROR_INVALID_HANDLE;
  struct CUstream_st *s = fg_stream(h);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  CUresult rc = fg_graph_back(x); /* graph memory is mapped at upload or first launch */
  if (rc != CUDA_SUCCESS) return rc;
  if (x->g.cost_ns) fg_stream_enqueue(s, x->g.cost_ns);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream h) { return cuGraphLaunch(x, h); }
