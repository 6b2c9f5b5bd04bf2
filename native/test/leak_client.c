/* A plain CUDA program run under LD_PRELOAD=libvcuda.so by leak_test.c: each scenario is a path
 * where the driver frees memory (or takes it) behind the allocation hooks' back, and exits 0 when
 * the budget follows the driver. Limit: TEST_LIMIT_MIB on device 0, no context overhead. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fakegpu.h"
#include "vc_cuda.h"
#include "vc_cuda_graph.h"

#define MiB (1ull << 20)

static uint64_t limit_bytes(void) { return strtoull(getenv("TEST_LIMIT_MIB"), NULL, 10) * MiB; }

static CUcontext setup(void) {
  CUdevice dev;
  CUcontext ctx = NULL;
  CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
  CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS, "cuDeviceGet");
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS, "primary ctx");
  CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "set current");
  return ctx;
}

/* cudaFree of a cudaMallocAsync pointer: the driver's cuMemFree_v2 frees it, so must the budget. */
static void async_free(void) {
  uint64_t L = limit_bytes();
  CUdeviceptr p, q;
  CHECK(cuMemAllocAsync(&p, L, NULL) == CUDA_SUCCESS, "async at the limit");
  CHECK(cuMemFree_v2(p) == CUDA_SUCCESS, "cuMemFree_v2 of a stream-ordered pointer");
  CHECK(cuMemAlloc_v2(&q, L) == CUDA_SUCCESS, "its charge was released");
  CHECK(cuMemFree_v2(q) == CUDA_SUCCESS, "free");
}

/* A destroyed pool's reserved memory goes back to the device, and to the budget. */
static void pool_destroy(void) {
  uint64_t L = limit_bytes(), never = ~0ull;
  CUmemPoolProps props = {0};
  props.allocType = 1;
  props.location.type = VC_CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool;
  CUdeviceptr p, q;
  CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS, "pool");
  CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never) == CUDA_SUCCESS, "never release");
  CHECK(cuMemAllocFromPoolAsync(&p, L, pool, NULL) == CUDA_SUCCESS, "pool allocation at the limit");
  CHECK(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS, "freed into the pool (still reserved)");
  CHECK(cuMemAlloc_v2(&q, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the pool's reserved memory is charged");
  CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS, "destroy");
  CHECK(cuMemAlloc_v2(&q, L) == CUDA_SUCCESS, "after destroy the budget is back");
  CHECK(cuMemFree_v2(q) == CUDA_SUCCESS, "free");
}

static atomic_int stop;

static void *alloc_loop(void *ctx) {
  cuCtxSetCurrent(ctx);
  CUdeviceptr p;
  while (!atomic_load(&stop)) {
    if (cuMemAllocAsync(&p, MiB, NULL) == CUDA_SUCCESS) cuMemFreeAsync(p, NULL);
  }
  return NULL;
}

/* fork while other threads are inside the stream-ordered hooks: the child can still free. */
static void fork_in_pool(CUcontext ctx) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, alloc_loop, ctx);
  int hung = 0;
  for (int i = 0; i < 100 && !hung; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      alarm(5); /* a child that inherited a held lock dies of SIGALRM */
      cuMemFreeAsync(0x1234, NULL);
      _exit(0);
    }
    int status = 0;
    hung = pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  CHECK(!hung, "a child forked during stream-ordered allocations could not take the pool lock");
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

/* cudaDeviceReset: the driver frees every allocation of the device (run with a 4 GiB limit). */
static void reset(void) {
  CUdeviceptr p, q, r;
  CHECK(cuMemAlloc_v2(&p, 1024 * MiB) == CUDA_SUCCESS, "1 GiB linear");
  CHECK(cuMemAllocAsync(&q, 1024 * MiB, NULL) == CUDA_SUCCESS, "1 GiB stream-ordered");
  CHECK(cuDevicePrimaryCtxReset_v2(0) == CUDA_SUCCESS, "reset");
  CHECK(cuMemAlloc_v2(&r, 3072 * MiB) == CUDA_SUCCESS, "3 GiB after the reset (2 GiB freed by the driver)");
  CHECK(fakegpu_device_used_bytes(0) == 3072 * MiB, "the driver holds only the new 3 GiB");
  CHECK(cuMemFree_v2(r) == CUDA_SUCCESS, "free");
  CHECK(cuMemAlloc_v2(&r, 4096 * MiB) == CUDA_SUCCESS, "the whole limit after the free");
  CHECK(cuMemFree_v2(r) == CUDA_SUCCESS, "free");
}

/* The last release of the primary context destroys it, its memory and its overhead (charged
 * again by the next retain: run with VCUDA_CONTEXT_OVERHEAD_MIB set). */
static void release(void) {
  CUdeviceptr p;
  CUcontext ctx;
  uint64_t rest = limit_bytes() - strtoull(getenv("VCUDA_CONTEXT_OVERHEAD_MIB"), NULL, 10) * MiB;
  CHECK(cuMemAlloc_v2(&p, rest) == CUDA_SUCCESS, "the limit less the overhead, in the primary context");
  CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS, "last release");
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "retain again");
  CHECK(cuMemAlloc_v2(&p, rest) == CUDA_SUCCESS, "the released context's memory came back, overhead charged once");
  CHECK(cuMemAlloc_v2(&p, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "and the overhead is charged again");
}

/* cuCtxDestroy frees the context's linear memory, not its stream-ordered memory (cuda.h). */
static void destroy(void) {
  CUcontext ctx;
  CUdeviceptr p, q;
  uint64_t half = limit_bytes() / 2;
  CHECK(cuCtxCreate_v2(&ctx, 0, 0) == CUDA_SUCCESS, "create");
  CHECK(cuMemAlloc_v2(&p, half) == CUDA_SUCCESS, "half the limit, linear");
  CHECK(cuMemAllocAsync(&q, half, NULL) == CUDA_SUCCESS, "half the limit, stream-ordered");
  CHECK(cuCtxDestroy_v2(ctx) == CUDA_SUCCESS, "destroy (pops it: the primary context is current again)");
  CHECK(cuMemAlloc_v2(&p, half) == CUDA_SUCCESS, "the linear half came back");
  CHECK(cuMemAlloc_v2(&p, MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the stream-ordered half is still held");
}

static CUgraph alloc_graph(uint64_t bytes, CUresult *rc) {
  CUgraph g;
  CUgraphNode alloc, release;
  CUDA_MEM_ALLOC_NODE_PARAMS p;
  memset(&p, 0, sizeof p);
  p.poolProps.allocType = 1;
  p.poolProps.location.type = VC_CU_MEM_LOCATION_TYPE_DEVICE;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS, "graph");
  *rc = cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p);
  if (*rc == CUDA_SUCCESS) CHECK(cuGraphAddMemFreeNode(&release, g, &alloc, 1, p.dptr) == CUDA_SUCCESS, "free node");
  return g;
}

static uint64_t graph_reserved(void) {
  uint64_t v = 0;
  CHECK(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS, "attribute");
  return v;
}

/* Graph allocation nodes take memory from the graph pool at upload / launch: counted by the
 * pool's reserved memory, refused before the pool grows past the limit, given back by a trim. */
static void graph_mem(void) {
  uint64_t base = fakegpu_device_used_bytes(0);
  CUresult rc;
  CUgraphExec x1, x2;
  CUdeviceptr p;
  CUgraph g1 = alloc_graph(48 * MiB, &rc), g2 = alloc_graph(32 * MiB, &rc);
  CHECK(cuGraphInstantiateWithFlags(&x1, g1, 0) == CUDA_SUCCESS, "instantiate 48 MiB");
  CHECK(cuGraphInstantiateWithFlags(&x2, g2, 0) == CUDA_SUCCESS, "instantiate 32 MiB");
  CHECK(fakegpu_device_used_bytes(0) == base, "instantiation maps nothing");
  CHECK(cuGraphUpload(x1, NULL) == CUDA_SUCCESS && graph_reserved() == 48 * MiB, "upload maps 48 MiB");
  CHECK(cuMemAlloc_v2(&p, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the graph pool's memory is charged");
  CHECK(cuGraphLaunch(x2, NULL) == CUDA_ERROR_OUT_OF_MEMORY, "a launch that would grow the pool past the limit");
  CHECK(fakegpu_device_used_bytes(0) == base + 48 * MiB, "the refused launch mapped nothing");
  CHECK(cuGraphExecDestroy(x1) == CUDA_SUCCESS, "destroy: the pool keeps its memory");
  CHECK(cuMemAlloc_v2(&p, 32 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "memory the pool keeps is still charged");
  CHECK(cuGraphLaunch(x2, NULL) == CUDA_SUCCESS, "the pool's unused memory serves the next graph");
  CHECK(cuGraphExecDestroy(x2) == CUDA_SUCCESS && cuDeviceGraphMemTrim(0) == CUDA_SUCCESS, "destroy, trim");
  CHECK(cuMemAlloc_v2(&p, limit_bytes()) == CUDA_SUCCESS && cuMemFree_v2(p) == CUDA_SUCCESS, "trim gave it back");
  CHECK(alloc_graph(limit_bytes() + 1, &rc) && rc == CUDA_ERROR_OUT_OF_MEMORY, "a node above the limit is refused");

  /* cudaMallocAsync inside a capture becomes an allocation node, charged when it is uploaded. */
  CUstream s;
  CUgraph g;
  CUgraphExec x;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS && cuStreamBeginCapture_v2(s, 0) == CUDA_SUCCESS, "capture");
  CHECK(cuMemAllocAsync(&p, 60 * MiB, s) == CUDA_SUCCESS && cuMemFreeAsync(p, s) == CUDA_SUCCESS, "captured");
  CHECK(cuStreamEndCapture(s, &g) == CUDA_SUCCESS, "end capture");
  CHECK(cuMemAlloc_v2(&p, limit_bytes()) == CUDA_SUCCESS && cuMemFree_v2(p) == CUDA_SUCCESS, "capture charged nothing");
  CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = VC_CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, .hUploadStream = s};
  CHECK(cuGraphInstantiateWithParams(&x, g, &ip) == CUDA_SUCCESS, "instantiate and upload");
  CHECK(cuMemAlloc_v2(&p, 8 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, "the uploaded 60 MiB are charged");
  CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS && cuDeviceGraphMemTrim(0) == CUDA_SUCCESS, "destroy, trim");
  CHECK(cuMemAlloc_v2(&p, limit_bytes()) == CUDA_SUCCESS, "all back");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Launches captured into a graph run nothing and draw no tokens; a replay is charged as the
 * kernels it holds (limit: 30 % hard, 200 µs per launch until measured). */
static void capture(void) {
  CUmodule mod;
  CUfunction fn;
  CUstream s;
  CUgraph g;
  CUgraphExec x;
  CHECK(cuModuleLoadData(&mod, "fake-module") == CUDA_SUCCESS && cuModuleGetFunction(&fn, mod, "k") == CUDA_SUCCESS,
        "function");
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS && cuStreamBeginCapture_v2(s, 0) == CUDA_SUCCESS, "capture");
  double t0 = now_s();
  for (int i = 0; i < 1000; i++) cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  double captured = now_s() - t0;
  CHECK(captured < 0.3, "1000 captured launches took %.2f s: captured launches must not be throttled", captured);
  CHECK(cuStreamEndCapture(s, &g) == CUDA_SUCCESS && cuGraphInstantiateWithFlags(&x, g, 0) == CUDA_SUCCESS, "exec");
  t0 = now_s();
  for (int i = 0; i < 2; i++) CHECK(cuGraphLaunch(x, s) == CUDA_SUCCESS, "replay");
  double replayed = now_s() - t0;
  /* 2 x 1000 launches x 200 µs = 0.4 s of GPU time at 30 %: over a second of waiting. */
  CHECK(replayed > 0.5, "2 replays of 1000 kernels took %.2f s: each must be charged as 1000 launches", replayed);
}

/* Holds the whole budget, then execs itself: the new image must get the budget back. */
static void exec_self(const char *self) {
  CUdeviceptr p;
  CHECK(cuMemAlloc_v2(&p, limit_bytes()) == CUDA_SUCCESS, "the old image holds the limit");
  if (check_failures) return;
  execl(self, self, "after-exec", (char *)NULL);
  CHECK(0, "exec failed");
}

static void after_exec(void) {
  CUdeviceptr p;
  CHECK(cuMemAlloc_v2(&p, limit_bytes()) == CUDA_SUCCESS, "after exec the old image's charge is gone");
  CHECK(fakegpu_device_used_bytes(0) == limit_bytes(), "the driver freed the old image's memory at exec");
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  CUcontext ctx = setup();
  if (check_failures) return 1;
  if (strcmp(argv[1], "async-free") == 0) async_free();
  else if (strcmp(argv[1], "pool-destroy") == 0) pool_destroy();
  else if (strcmp(argv[1], "fork") == 0) fork_in_pool(ctx);
  else if (strcmp(argv[1], "reset") == 0) reset();
  else if (strcmp(argv[1], "release") == 0) release();
  else if (strcmp(argv[1], "destroy") == 0) destroy();
  else if (strcmp(argv[1], "graph-mem") == 0) graph_mem();
  else if (strcmp(argv[1], "capture") == 0) capture();
  else if (strcmp(argv[1], "exec") == 0) exec_self(argv[0]);
  else if (strcmp(argv[1], "after-exec") == 0) after_exec();
  else return 2;
  return check_failures ? 1 : 0;
}
