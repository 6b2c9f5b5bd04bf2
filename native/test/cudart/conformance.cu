// Conformance cases run with NVIDIA's CUDA runtime (built by nvcc, --cudart=shared and
// --cudart=static) under libvcuda over the fake driver. One process per case; each prints one
// JSON line on stdout that native/test/cudart.test.ts checks, and exits 0 (2 on a usage or setup
// error). Sizes are in MiB. The fake driver's fakegpu_device_used_bytes (what the simulated card
// really holds, past every hook) is found with dlsym, so both runtimes see the same driver.
//
//   props                    device count, name, totalGlobalMem, cudaMemGetInfo
//   fill KIND CHUNK          allocate CHUNK MiB until refused; KIND: malloc managed async pool
//                            pitch (rows of 1000 bytes) array (a 2D uchar array 8192 wide)
//   try MiB                  one cudaMalloc; 0 on success, else the cudaError_t
//   hold MiB                 cudaMalloc, print, wait for stdin to close, free
//   pool-cache MiB           allocate/free through a pool that keeps memory, then cudaMemPoolTrimTo
//   pool-destroy MiB         same, then cudaMemPoolDestroy and a full-limit cudaMalloc
//   free-async MiB           cudaMallocAsync, cudaFree (synchronous free of an async pointer)
//   graph-alloc MiB          a graph with one memory allocation node, instantiated and launched
//   reset MiB MiB            allocate, cudaDeviceReset, allocate again
//   exec MiB MiB             allocate, then exec "try MiB" in the same process
//   launch N                 N launches of a 10 us kernel; prints wall time and device time
//   race THREADS CHUNK       threads allocate CHUNK MiB until refused, at once
//   copy MiB                 pinned host memory, memset and copies both ways (sync and async)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vector>

static const size_t MiB = 1ull << 20;

// One wave of this kernel costs 10 us on the fake driver (the "_us<N>" naming rule).
__global__ void spin_us10(int *out) {
  if (out) out[threadIdx.x] = threadIdx.x;
}

static unsigned long long device_used() {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  typedef unsigned long long (*used_fn)(int);
  used_fn used = driver ? (used_fn)dlsym(driver, "fakegpu_device_used_bytes") : nullptr;
  return used ? used(0) : ~0ull;
}

static double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int fail(const char *what, cudaError_t e) {
  fprintf(stderr, "conformance: %s: %s (%d)\n", what, cudaGetErrorName(e), (int)e);
  printf("{\"error\":\"%s\",\"code\":%d}\n", what, (int)e);
  return 1;
}
#define CHECK(call)                            \
  do {                                         \
    cudaError_t e_ = (call);                   \
    if (e_ != cudaSuccess) return fail(#call, e_); \
  } while (0)

static size_t arg_mib(char **argv, int i) { return (size_t)strtoull(argv[i], nullptr, 10) * MiB; }

static int props() {
  int count = 0;
  CHECK(cudaGetDeviceCount(&count));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  int driver = 0, runtime = 0;
  CHECK(cudaDriverGetVersion(&driver));
  CHECK(cudaRuntimeGetVersion(&runtime));
  printf("{\"count\":%d,\"name\":\"%s\",\"totalGlobalMem\":%zu,\"free\":%zu,\"total\":%zu,\"driver\":%d,"
         "\"runtime\":%d,\"major\":%d,\"sms\":%d}\n",
         count, prop.name, prop.totalGlobalMem, free_b, total_b, driver, runtime, prop.major,
         prop.multiProcessorCount);
  return 0;
}

static cudaError_t alloc_kind(const char *kind, void **p, size_t bytes, cudaMemPool_t pool) {
  if (!strcmp(kind, "malloc")) return cudaMalloc(p, bytes);
  if (!strcmp(kind, "pitch")) {
    size_t pitch = 0;  // 1000-byte rows padded to the driver's pitch: the padding is counted too
    return cudaMallocPitch(p, &pitch, 1000, bytes / 1024);
  }
  if (!strcmp(kind, "array")) {
    cudaChannelFormatDesc desc = cudaCreateChannelDesc<unsigned char>();
    return cudaMallocArray((cudaArray_t *)p, &desc, 8192, bytes / 8192);
  }
  if (!strcmp(kind, "managed")) return cudaMallocManaged(p, bytes);
  if (!strcmp(kind, "async")) return cudaMallocAsync(p, bytes, 0);
  if (!strcmp(kind, "pool")) return cudaMallocFromPoolAsync(p, bytes, pool, 0);
  return cudaErrorInvalidValue;
}

static cudaError_t free_kind(const char *kind, void *p) {
  if (!strcmp(kind, "array")) return cudaFreeArray((cudaArray_t)p);
  return !strcmp(kind, "async") || !strcmp(kind, "pool") ? cudaFreeAsync(p, 0) : cudaFree(p);
}

// Allocates until refused; reports what was granted, the refusal and what the card held then,
// frees everything and reports what the card holds after.
static int fill(const char *kind, size_t chunk) {
  cudaMemPool_t pool = nullptr;
  if (!strcmp(kind, "pool")) {
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CHECK(cudaMemPoolCreate(&pool, &props));
  }
  CHECK(cudaFree(nullptr));  // the context exists before the baseline is taken
  unsigned long long before = device_used();
  std::vector<void *> held;
  cudaError_t refused = cudaSuccess;
  for (int i = 0; i < 100000; i++) {
    void *p = nullptr;
    refused = alloc_kind(kind, &p, chunk, pool);
    if (refused != cudaSuccess) break;
    held.push_back(p);
  }
  cudaError_t sticky = cudaGetLastError();  // clears the error the refusal left
  (void)sticky;
  CHECK(cudaStreamSynchronize(0));
  unsigned long long at_refusal = device_used();
  for (void *p : held) CHECK(free_kind(kind, p));
  CHECK(cudaStreamSynchronize(0));
  if (pool) CHECK(cudaMemPoolTrimTo(pool, 0));
  else if (!strcmp(kind, "async")) {
    cudaMemPool_t dflt;
    CHECK(cudaDeviceGetDefaultMemPool(&dflt, 0));
    CHECK(cudaMemPoolTrimTo(dflt, 0));
  }
  unsigned long long after = device_used();
  if (pool) CHECK(cudaMemPoolDestroy(pool));
  printf("{\"granted\":%zu,\"refused\":%d,\"before\":%llu,\"atRefusal\":%llu,\"after\":%llu}\n",
         held.size() * chunk, (int)refused, before, at_refusal, after);
  return 0;
}

static int try_alloc(size_t bytes) {
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  printf("{\"code\":%d}\n", (int)e);
  if (e == cudaSuccess) cudaFree(p);
  return e == cudaSuccess ? 0 : 1;
}

static int hold(size_t bytes) {
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  printf("{\"code\":%d}\n", (int)e);
  fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  if (e == cudaSuccess) cudaFree(p);
  return 0;
}

// A container with a burst limit: cudaMalloc past the guarantee gets managed memory; the views
// show the guarantee; a stream-ordered allocation stays within what the ceiling leaves; then it
// holds everything until stdin closes (a neighbour allocates meanwhile) and frees it.
static int burst(size_t bytes, size_t over) {
  void *p = nullptr, *q = nullptr, *a = nullptr;
  cudaError_t malloc_rc = cudaMalloc(&p, bytes);
  cudaError_t over_rc = cudaMalloc(&q, over);
  cudaGetLastError();
  size_t free_b = 0, total_b = 0;
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaError_t async_over = cudaMallocAsync(&a, free_b + MiB, 0);
  cudaGetLastError();
  cudaError_t async_rc = cudaMallocAsync(&a, free_b, 0);
  CHECK(cudaStreamSynchronize(0));
  printf("{\"malloc\":%d,\"over\":%d,\"free\":%zu,\"total\":%zu,\"totalGlobalMem\":%zu,"
         "\"asyncOver\":%d,\"async\":%d,\"used\":%llu}\n",
         (int)malloc_rc, (int)over_rc, free_b, total_b, prop.totalGlobalMem, (int)async_over,
         (int)async_rc, device_used());
  fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  if (async_rc == cudaSuccess) CHECK(cudaFreeAsync(a, 0));
  if (malloc_rc == cudaSuccess) CHECK(cudaFree(p));
  CHECK(cudaStreamSynchronize(0));
  CHECK(cudaMemGetInfo(&free_b, &total_b));
  printf("{\"freeAfter\":%zu}\n", free_b);
  return 0;
}

// A pool that keeps what is freed holds it on the card (charged) until trimmed.
static int pool_cache(size_t bytes, bool destroy) {
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  CHECK(cudaMemPoolCreate(&pool, &props));
  unsigned long long keep = ~0ull;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  void *p = nullptr;
  CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, 0));
  CHECK(cudaFreeAsync(p, 0));
  CHECK(cudaStreamSynchronize(0));
  size_t free_cached = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_cached, &total));
  if (destroy) {
    CHECK(cudaMemPoolDestroy(pool));
  } else {
    CHECK(cudaMemPoolTrimTo(pool, 0));
  }
  size_t free_after = 0;
  CHECK(cudaMemGetInfo(&free_after, &total));
  cudaError_t again = cudaMalloc(&p, bytes);
  if (again == cudaSuccess) cudaFree(p);
  printf("{\"freeCached\":%zu,\"freeAfter\":%zu,\"total\":%zu,\"allocAfter\":%d}\n", free_cached, free_after, total,
         (int)again);
  return 0;
}

// cudaFree (not cudaFreeAsync) of a stream-ordered allocation is allowed and frees it.
static int free_async(size_t bytes) {
  void *p = nullptr;
  CHECK(cudaMallocAsync(&p, bytes, 0));
  CHECK(cudaStreamSynchronize(0));
  CHECK(cudaFree(p));
  cudaMemPool_t dflt;
  CHECK(cudaDeviceGetDefaultMemPool(&dflt, 0));
  CHECK(cudaMemPoolTrimTo(dflt, 0));
  cudaError_t again = cudaMalloc(&p, bytes);
  if (again == cudaSuccess) cudaFree(p);
  printf("{\"allocAfter\":%d}\n", (int)again);
  return 0;
}

// An allocation node larger than the budget must not be granted behind the limit's back.
static int graph_alloc(size_t bytes) {
  cudaGraph_t graph;
  CHECK(cudaGraphCreate(&graph, 0));
  cudaMemAllocNodeParams params = {};
  params.poolProps.allocType = cudaMemAllocationTypePinned;
  params.poolProps.location.type = cudaMemLocationTypeDevice;
  params.poolProps.location.id = 0;
  params.bytesize = bytes;
  cudaGraphNode_t node;
  // The limit may refuse the node itself, its instantiation or its launch: each is a refusal.
  cudaError_t added = cudaGraphAddMemAllocNode(&node, graph, nullptr, 0, &params);
  cudaGraphExec_t exec;
  cudaError_t inst = added == cudaSuccess ? cudaGraphInstantiate(&exec, graph, 0) : added;
  cudaError_t launched = inst == cudaSuccess ? cudaGraphLaunch(exec, 0) : inst;
  if (launched == cudaSuccess) launched = cudaStreamSynchronize(0);
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  printf("{\"add\":%d,\"instantiate\":%d,\"launch\":%d,\"used\":%llu,\"free\":%zu}\n", (int)added, (int)inst,
         (int)launched, device_used(), free_b);
  return 0;
}

static int reset(size_t first, size_t second) {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, first));
  CHECK(cudaDeviceReset());
  cudaError_t again = cudaMalloc(&p, second);
  printf("{\"allocAfter\":%d}\n", (int)again);
  return 0;
}

static int exec_self(const char *self, size_t first, const char *second_mib) {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, first));
  fflush(stdout);
  execl(self, self, "try", second_mib, (char *)nullptr);
  return fail("execl", cudaErrorUnknown);
}

static int launch(int n) {
  CHECK(cudaFree(nullptr));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  double t0 = now_s();
  CHECK(cudaEventRecord(start, 0));
  for (int i = 0; i < n; i++) {
    spin_us10<<<1, 32>>>(nullptr);
    CHECK(cudaGetLastError());
  }
  CHECK(cudaEventRecord(stop, 0));
  CHECK(cudaDeviceSynchronize());
  double wall = now_s() - t0;
  float device_ms = 0;
  CHECK(cudaEventElapsedTime(&device_ms, start, stop));
  printf("{\"launches\":%d,\"wallMs\":%.1f,\"deviceMs\":%.1f}\n", n, wall * 1e3, device_ms);
  return 0;
}

struct racer {
  size_t chunk;
  size_t granted;
};

static void *race_one(void *arg) {
  racer *r = (racer *)arg;
  void *p = nullptr;
  while (cudaMalloc(&p, r->chunk) == cudaSuccess) r->granted += r->chunk;
  return nullptr;
}

static int race(int threads, size_t chunk) {
  CHECK(cudaFree(nullptr));
  std::vector<pthread_t> ids(threads);
  std::vector<racer> racers(threads, racer{chunk, 0});
  for (int i = 0; i < threads; i++) pthread_create(&ids[i], nullptr, race_one, &racers[i]);
  size_t total = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(ids[i], nullptr);
    total += racers[i].granted;
  }
  printf("{\"granted\":%zu,\"used\":%llu}\n", total, device_used());
  return 0;
}

// Host memory is not device memory: pinned buffers are never charged; copies move no budget.
static int copy(size_t bytes) {
  void *host = nullptr, *mapped = nullptr, *dev = nullptr;
  CHECK(cudaMallocHost(&host, bytes));
  CHECK(cudaHostAlloc(&mapped, bytes, cudaHostAllocMapped));
  CHECK(cudaMalloc(&dev, bytes));
  size_t free_b = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_b, &total));
  CHECK(cudaMemset(dev, 0x5a, bytes));
  CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpyAsync(mapped, dev, bytes, cudaMemcpyDeviceToHost, 0));
  CHECK(cudaMemsetAsync(dev, 0, bytes, 0));
  memset(host, 7, bytes);
  CHECK(cudaMemcpy(mapped, host, bytes, cudaMemcpyHostToHost));
  CHECK(cudaStreamSynchronize(0));
  bool host_copied = ((char *)mapped)[0] == 7 && ((char *)mapped)[bytes - 1] == 7;
  CHECK(cudaFreeHost(host));
  CHECK(cudaFreeHost(mapped));
  CHECK(cudaFree(dev));
  printf("{\"freeWithBuffers\":%zu,\"total\":%zu,\"used\":%llu,\"hostCopied\":%s}\n", free_b, total,
         device_used(), host_copied ? "true" : "false");
  return 0;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "props") && argc == 2) return props();
  if (!strcmp(c, "fill") && argc == 4) return fill(argv[2], arg_mib(argv, 3));
  if (!strcmp(c, "try") && argc == 3) return try_alloc(arg_mib(argv, 2));
  if (!strcmp(c, "hold") && argc == 3) return hold(arg_mib(argv, 2));
  if (!strcmp(c, "burst") && argc == 4) return burst(arg_mib(argv, 2), arg_mib(argv, 3));
  if (!strcmp(c, "pool-cache") && argc == 3) return pool_cache(arg_mib(argv, 2), false);
  if (!strcmp(c, "pool-destroy") && argc == 3) return pool_cache(arg_mib(argv, 2), true);
  if (!strcmp(c, "free-async") && argc == 3) return free_async(arg_mib(argv, 2));
  if (!strcmp(c, "graph-alloc") && argc == 3) return graph_alloc(arg_mib(argv, 2));
  if (!strcmp(c, "reset") && argc == 4) return reset(arg_mib(argv, 2), arg_mib(argv, 3));
  if (!strcmp(c, "exec") && argc == 4) return exec_self(argv[0], arg_mib(argv, 2), argv[3]);
  if (!strcmp(c, "launch") && argc == 3) return launch(atoi(argv[2]));
  if (!strcmp(c, "race") && argc == 4) return race(atoi(argv[2]), arg_mib(argv, 3));
  if (!strcmp(c, "copy") && argc == 3) return copy(arg_mib(argv, 2));
  fprintf(stderr, "usage: see the header of native/test/cudart/conformance.cu\n");
  return 2;
}
