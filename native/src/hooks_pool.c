/* Stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync). A memory
 * pool keeps freed memory reserved on the device up to its release threshold (PyTorch's
 * cudaMallocAsync backend sets it to "never release"), so counting live allocations alone would
 * let a container hold more than its limit. Each pool is therefore charged
 *     max(the pool's reserved memory as the driver reports it, its live allocations)
 * re-read after every allocation, free and trim of that pool. An allocation first reserves its
 * size (over the limit: refused before the driver is asked) and is undone when the pool then
 * needs more than the budget allows. Memory the driver gives back at a synchronization point is
 * uncharged at the pool's next operation: the count errs on the side of the limit. */
#include <pthread.h>
#include <stdint.h>

#include "alloc_table.h"
#include "charge.h"
#include "config.h"
#include "hooks.h"
#include "log.h"
#include "real.h"
#include "region.h"

#define MAX_POOLS 256

struct pool_charge {
  CUmemoryPool pool;
  int index;        /* config record */
  uint64_t charged; /* what the region holds for this pool */
  uint64_t live;    /* bytes of allocations not yet freed */
  int destroyed;    /* cuMemPoolDestroy ran: only live allocations remain, the handle is gone */
};

static struct pool_charge pools[MAX_POOLS];
static int pool_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
VC_FORK_SAFE_MUTEX(lock, VC_ATFORK_POOL)

/* Caller holds lock. NULL when `create` is 0 and the pool is unknown, or the table is full. */
static struct pool_charge *pool_entry(CUmemoryPool pool, int index, int create) {
  for (int i = 0; i < pool_count; i++)
    if (pools[i].pool == pool && !pools[i].destroyed) return &pools[i];
  if (!create) return NULL;
  for (int i = 0; i < pool_count; i++) {
    if (pools[i].charged == 0 && pools[i].live == 0) { /* reuse an idle entry */
      pools[i] = (struct pool_charge){.pool = pool, .index = index};
      return &pools[i];
    }
  }
  if (pool_count == MAX_POOLS) {
    static int once;
    VC_LOG_ONCE(once, VC_LOG_ERROR, "more than %d memory pools in use; refusing stream-ordered allocations", MAX_POOLS);
    return NULL;
  }
  pools[pool_count] = (struct pool_charge){.pool = pool, .index = index};
  return &pools[pool_count++];
}

static uint64_t pool_reserved(CUmemoryPool pool, uint64_t fallback) {
  __typeof__(&cuMemPoolGetAttribute) get = VC_REAL_CUDA(cuMemPoolGetAttribute);
  uint64_t reserved = 0;
  if (!get || get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS) return fallback;
  return reserved;
}

/* Brings the pool's charge to max(reserved, live). Growth during an allocation may be refused;
 * growth seen after a free or trim cannot be, and is recorded even past the limit so the views
 * stay true. Caller holds lock. */
static CUresult settle(struct pool_charge *p, int may_refuse) {
  /* A destroyed pool's handle may already name a new pool: only its live allocations count. */
  uint64_t reserved = p->destroyed ? p->live : pool_reserved(p->pool, p->live);
  uint64_t target = reserved > p->live ? reserved : p->live;
  if (target > p->charged) {
    uint64_t more = target - p->charged;
    int rc = may_refuse ? (vc_charge(p->index, more) == CUDA_SUCCESS ? 0 : -1)
                        : vc_region_reserve(p->index, more, UINT64_MAX);
    if (rc != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  } else if (target < p->charged) {
    vc_uncharge(p->index, p->charged - target);
  }
  p->charged = target;
  if (p->destroyed && target == 0) *p = (struct pool_charge){0}; /* free for reuse */
  return CUDA_SUCCESS;
}

/* The live pool entry an allocation of `pool` on record `index` counts in; caller holds lock. */
static struct pool_charge *owner_of(CUmemoryPool pool, int index) {
  for (int i = 0; i < pool_count; i++)
    if (pools[i].pool == pool && pools[i].index == index && pools[i].live) return &pools[i];
  return NULL;
}

/* Records a new allocation. A pointer still recorded was freed by the driver without a free we
 * saw (a context reset, say): its old pool stops counting it. Caller holds lock. */
static int record_allocation(CUdeviceptr dptr, int index, uint64_t bytes, CUmemoryPool pool) {
  struct vc_alloc value = {.bytes = bytes, .device = index, .handle = (uint64_t)(uintptr_t)pool}, old;
  int rc = vc_alloc_record(VC_ALLOC_POOL, dptr, &value, &old);
  struct pool_charge *was = rc == 1 ? owner_of((CUmemoryPool)(uintptr_t)old.handle, old.device) : NULL;
  if (was) {
    was->live = was->live > old.bytes ? was->live - old.bytes : 0;
    settle(was, 0);
  }
  return rc < 0 ? rc : 0;
}

/* The pool cuMemAllocAsync would use: the current device's current pool. */
static CUresult device_pool(CUmemoryPool *pool, int *index) {
  __typeof__(&cuCtxGetDevice) get_dev = VC_REAL_CUDA(cuCtxGetDevice);
  __typeof__(&cuDeviceGetMemPool) get_pool = VC_REAL_CUDA(cuDeviceGetMemPool);
  CUdevice dev;
  if (!get_dev || !get_pool) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = get_dev(&dev);
  if (rc == CUDA_SUCCESS) rc = get_pool(pool, dev);
  if (rc == CUDA_SUCCESS) *index = vc_device_index(dev);
  return rc;
}

typedef CUresult (*alloc_async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*alloc_pool_fn)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);

/* Exactly one of `real` (device's current pool) and `pool_real` (explicit `pool`) is used. */
static CUresult alloc_in_pool(alloc_async_fn real, alloc_pool_fn pool_real, CUdeviceptr *dptr, size_t bytes,
                              CUmemoryPool pool, CUstream stream, int per_thread) {
  if (!real && !pool_real) return CUDA_ERROR_NOT_INITIALIZED;
  /* On a capturing stream nothing is allocated: the driver adds a graph memory node, counted
   * by the graph memory pool when the graph is uploaded or launched (hooks_graph.c). */
  int captured = vc_capture_maybe_active() && vc_stream_capturing(per_thread && !stream ? VC_CU_STREAM_PER_THREAD : stream);
  if (!dptr || bytes == 0 || (!real && !pool) || captured)
    return real ? real(dptr, bytes, stream) : pool_real(dptr, bytes, pool, stream);
  int index = -1;
  /* An explicit pool is charged to the current device: where the caller works, and in practice
   * where its pools live. */
  CUresult rc = real ? device_pool(&pool, &index) : vc_current_index(&index);
  if (rc != CUDA_SUCCESS) return rc;
  pthread_mutex_lock(&lock);
  struct pool_charge *p = pool_entry(pool, index, 1);
  /* Memory the pool already holds (charged, not in use) serves the request first. */
  uint64_t cached = p && p->charged > p->live ? p->charged - p->live : 0;
  uint64_t extra = bytes > cached ? bytes - cached : 0;
  if (!p || (extra && vc_charge(index, extra) != CUDA_SUCCESS)) {
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  rc = real ? real(dptr, bytes, stream) : pool_real(dptr, bytes, pool, stream);
  if (rc != CUDA_SUCCESS) {
    vc_uncharge(index, extra);
    pthread_mutex_unlock(&lock);
    return rc;
  }
  p->charged += extra;
  p->live += bytes;
  if (settle(p, 1) != CUDA_SUCCESS || record_allocation(*dptr, index, bytes, pool) != 0) {
    __typeof__(&cuMemFreeAsync) free_async = VC_REAL_CUDA(cuMemFreeAsync);
    if (free_async) free_async(*dptr, stream);
    p->live -= bytes;
    settle(p, 0);
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

VC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_in_pool(VC_REAL_CUDA(cuMemAllocAsync), NULL, dptr, bytesize, NULL, hStream, 0);
}

VC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  return alloc_in_pool(VC_REAL_CUDA(cuMemAllocAsync_ptsz), NULL, dptr, bytesize, NULL, hStream, 1);
}

VC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return alloc_in_pool(NULL, VC_REAL_CUDA(cuMemAllocFromPoolAsync), dptr, bytesize, pool, hStream, 0);
}

VC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                                CUstream hStream) {
  return alloc_in_pool(NULL, VC_REAL_CUDA(cuMemAllocFromPoolAsync_ptsz), dptr, bytesize, pool, hStream, 1);
}

/* Frees a stream-ordered allocation through `do_free` (cuMemFreeAsync, or cuMemFree, which the
 * driver accepts for them too) and settles its pool. 1 with *rc set when `dptr` was one. */
int vc_pool_free(CUdeviceptr dptr, CUresult (*do_free)(CUdeviceptr, CUstream), CUstream stream, CUresult *rc) {
  struct vc_alloc a;
  pthread_mutex_lock(&lock);
  if (vc_alloc_take(VC_ALLOC_POOL, dptr, &a) != 0) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  *rc = do_free(dptr, stream);
  struct pool_charge *p = owner_of((CUmemoryPool)(uintptr_t)a.handle, a.device);
  if (*rc != CUDA_SUCCESS) {
    vc_alloc_record(VC_ALLOC_POOL, dptr, &a, NULL);
  } else if (p) {
    p->live = p->live > a.bytes ? p->live - a.bytes : 0;
    settle(p, 0);
  }
  pthread_mutex_unlock(&lock);
  return 1;
}

/* cuMemFreeAsync also frees cuMemAlloc pointers (in stream order); those are linear entries. */
static CUresult free_async(CUresult (*real)(CUdeviceptr, CUstream), CUdeviceptr dptr, CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc;
  if (vc_pool_free(dptr, real, stream, &rc)) return rc;
  /* On a capturing stream the free becomes a graph node and the memory stays allocated until a
   * launch: the charge (guaranteed or burst) stays too, high rather than low, until cuMemFree. */
  if (vc_capture_maybe_active() && vc_stream_capturing(stream)) return real(dptr, stream);
  struct vc_alloc a;
  int known = vc_alloc_take(VC_ALLOC_LINEAR, dptr, &a) == 0;
  rc = real(dptr, stream);
  if (known && rc == CUDA_SUCCESS) vc_uncharge_alloc(&a);
  else if (known) vc_alloc_record(VC_ALLOC_LINEAR, dptr, &a, NULL);
  return rc;
}

VC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return free_async(VC_REAL_CUDA(cuMemFreeAsync), dptr, hStream);
}

VC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return free_async(VC_REAL_CUDA(cuMemFreeAsync_ptsz), dptr, hStream);
}

VC_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  __typeof__(&cuMemPoolTrimTo) real = VC_REAL_CUDA(cuMemPoolTrimTo);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  pthread_mutex_lock(&lock);
  CUresult rc = real(pool, minBytesToKeep);
  struct pool_charge *p = rc == CUDA_SUCCESS ? pool_entry(pool, -1, 0) : NULL;
  if (p) settle(p, 0);
  pthread_mutex_unlock(&lock);
  return rc;
}

/* The driver releases a destroyed pool's memory once its last allocation is freed: the pool's
 * reserved memory stops being charged now, its live allocations when they are freed. */
VC_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  __typeof__(&cuMemPoolDestroy) real = VC_REAL_CUDA(cuMemPoolDestroy);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  pthread_mutex_lock(&lock);
  CUresult rc = real(pool);
  struct pool_charge *p = rc == CUDA_SUCCESS ? pool_entry(pool, -1, 0) : NULL;
  if (p) {
    p->destroyed = 1;
    settle(p, 0);
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

static int on_record(enum vc_alloc_kind kind, const struct vc_alloc *a, const void *index) {
  return kind == VC_ALLOC_POOL && a->device == *(const int *)index;
}

static void forget_allocation(enum vc_alloc_kind kind, const struct vc_alloc *a, void *unused) {
  (void)kind;
  (void)unused;
  struct pool_charge *p = owner_of((CUmemoryPool)(uintptr_t)a->handle, a->device);
  if (p) p->live = p->live > a->bytes ? p->live - a->bytes : 0;
}

void vc_pool_forget_device(int index) {
  pthread_mutex_lock(&lock);
  vc_alloc_drop_if(on_record, forget_allocation, &index);
  for (int i = 0; i < pool_count; i++)
    if (pools[i].index == index && (pools[i].charged || pools[i].live)) settle(&pools[i], 0);
  pthread_mutex_unlock(&lock);
}
