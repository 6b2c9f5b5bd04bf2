/* A plain CUDA program run under LD_PRELOAD=libvcuda.so by leak_test.c: each scenario is a path
 * where the driver frees memory (or takes it) behind the allocation hooks' back, and exits 0 when
 * the budget follows the driver. Limit: TEST_LIMIT_MIB on device 0, no context overhead. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fakegpu.h"
#include "vc_cuda.h"

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

/* The last release of the primary context destroys it, and its memory. */
static void release(void) {
  CUdeviceptr p;
  CUcontext ctx;
  CHECK(cuMemAlloc_v2(&p, limit_bytes()) == CUDA_SUCCESS, "limit in the primary context");
  CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS, "last release");
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "retain again");
  CHECK(cuMemAlloc_v2(&p, limit_bytes()) == CUDA_SUCCESS, "the released context's memory came back");
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
  else if (strcmp(argv[1], "exec") == 0) exec_self(argv[0]);
  else if (strcmp(argv[1], "after-exec") == 0) after_exec();
  else return 2;
  return check_failures ? 1 : 0;
}
