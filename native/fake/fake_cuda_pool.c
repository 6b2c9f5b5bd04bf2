/* Fake driver: memory pools and stream-ordered allocation. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_mem.h"

/* ---- stream-ordered allocation: pools keep freed memory up to their release threshold ----
 * Like the driver, a pool reserves device memory and serves allocations from it; freed memory
 * stays reserved while the pool holds no more than its release threshold of unused memory (the
 * real driver trims at synchronization points; the fake trims at the free). */

struct CUmemPoolHandle_st {
  int device;
  uint64_t reserved, used, threshold, reserved_high, used_high;
};
static struct CUmemPoolHandle_st default_pools[FG_MAX_DEVICES];
static CUmemoryPool current_pools[FG_MAX_DEVICES];

static void pool_trim_locked(CUmemoryPool pool, uint64_t keep) {
  uint64_t floor = pool->used > keep ? pool->used : keep;
  if (pool->reserved > floor) {
    fg_mem_uncharge(fg_node(pool->device), pool->reserved - floor);
    pool->reserved = floor;
  }
}

static CUresult pool_alloc(CUmemoryPool pool, uint64_t bytes, CUdeviceptr *dptr) {
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fg_mem_lock);
  uint64_t unused = pool->reserved - pool->used;
  if (unused < bytes) {
    if (fg_mem_charge(fg_node(pool->device), bytes - unused) != 0) {
      pthread_mutex_unlock(&fg_mem_lock);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pool->reserved += bytes - unused;
  }
  pool->used += bytes;
  if (pool->reserved > pool->reserved_high) pool->reserved_high = pool->reserved;
  if (pool->used > pool->used_high) pool->used_high = pool->used;
  pthread_mutex_unlock(&fg_mem_lock);
  uint64_t va = fg_take_va(pool->device, bytes);
  if (fg_mem_put(4, va, pool->device, bytes, (uint64_t)(uintptr_t)pool) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *dptr = va;
  return CUDA_SUCCESS;
}

static CUmemoryPool device_pool(int dev) {
  if (!current_pools[dev]) {
    default_pools[dev].device = dev;
    current_pools[dev] = &default_pools[dev];
  }
  return current_pools[dev];
}

/* On a capturing stream the driver allocates nothing: it adds a memory node to the graph. */
static CUresult capture_alloc(struct CUstream_st *st, uint64_t bytes, CUdeviceptr *dptr) {
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t va = fg_take_va(st->device, bytes);
  CUresult rc = fg_graph_add_node(st->capture, 10 /* CU_GRAPH_NODE_TYPE_MEM_ALLOC */, bytes, va, NULL);
  if (rc == CUDA_SUCCESS) *dptr = va;
  return rc;
}

FG_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s) {
  struct CUstream_st *st = fg_stream(s);
  if (!st) return fg_current() ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
  if (st->capture) return capture_alloc(st, bytes, dptr);
  return pool_alloc(device_pool(st->device), bytes, dptr);
}
FG_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s) {
  return cuMemAllocAsync(dptr, bytes, s);
}

FG_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  (void)s;
  return pool ? pool_alloc(pool, bytes, dptr) : CUDA_ERROR_INVALID_VALUE;
}
FG_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s) {
  return cuMemAllocFromPoolAsync(dptr, bytes, pool, s);
}

CUresult fg_pool_free(uint64_t dptr) {
  pthread_mutex_lock(&fg_mem_lock);
  struct node **p = fg_mem_find(4, dptr);
  struct node *n = *p;
  if (n) {
    *p = n->next;
    CUmemoryPool pool = (CUmemoryPool)(uintptr_t)n->handle;
    pool->used -= n->bytes;
    pool_trim_locked(pool, pool->threshold);
  }
  pthread_mutex_unlock(&fg_mem_lock);
  free(n);
  return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int on_device(const struct node *n, const void *dev) { return n->kind == 4 && n->device == *(const int *)dev; }

static void release_pool_node(struct node *n) {
  pthread_mutex_lock(&fg_mem_lock);
  ((CUmemoryPool)(uintptr_t)n->handle)->used -= n->bytes;
  pthread_mutex_unlock(&fg_mem_lock);
  free(n);
}

void fg_pool_reset_device(int dev) {
  fg_mem_remove_if(on_device, &dev, release_pool_node);
  pthread_mutex_lock(&fg_mem_lock);
  if (dev >= 0 && dev < FG_MAX_DEVICES) pool_trim_locked(&default_pools[dev], 0);
  if (dev >= 0 && dev < FG_MAX_DEVICES && current_pools[dev]) pool_trim_locked(current_pools[dev], 0);
  pthread_mutex_unlock(&fg_mem_lock);
}

FG_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream s) {
  struct CUstream_st *st = fg_stream(s);
  if (st && st->capture) return fg_graph_add_node(st->capture, 11 /* CU_GRAPH_NODE_TYPE_MEM_FREE */, 0, dptr, NULL);
  CUresult rc = fg_pool_free(dptr);
  /* freeing a cuMemAlloc pointer in stream order is allowed */
  return rc == CUDA_SUCCESS ? rc : cuMemFree_v2(dptr);
}
FG_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream s) { return cuMemFreeAsync(dptr, s); }

FG_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  if (!pool || !props || props->location.type != VC_CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 ||
      fg_node(props->location.id) < 0)
    return CUDA_ERROR_INVALID_VALUE;
  struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  p->device = props->location.id;
  *pool = p;
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fg_mem_lock);
  pool_trim_locked(pool, 0);
  pthread_mutex_unlock(&fg_mem_lock);
  if (pool < default_pools || pool >= default_pools + FG_MAX_DEVICES) free(pool);
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fg_mem_lock);
  pool_trim_locked(pool, keep);
  pthread_mutex_unlock(&fg_mem_lock);
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fg_mem_lock);
  CUresult rc = CUDA_SUCCESS;
  if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) pool->threshold = *(uint64_t *)value;
  else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) pool->reserved_high = pool->reserved;
  else if (attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH) pool->used_high = pool->used;
  else if ((int)attr > 3) rc = CUDA_ERROR_INVALID_VALUE; /* 1..3 are reuse flags: accepted */
  pthread_mutex_unlock(&fg_mem_lock);
  return rc;
}
FG_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  if (!pool || !value) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fg_mem_lock);
  CUresult rc = CUDA_SUCCESS;
  switch ((int)attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(uint64_t *)value = pool->threshold; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(uint64_t *)value = pool->reserved; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(uint64_t *)value = pool->reserved_high; break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(uint64_t *)value = pool->used; break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(uint64_t *)value = pool->used_high; break;
    case 1: case 2: case 3: *(int *)value = 1; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_unlock(&fg_mem_lock);
  return rc;
}
FG_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
  if (!pool || fg_node(dev) < 0) return CUDA_ERROR_INVALID_VALUE;
  default_pools[dev].device = dev;
  *pool = &default_pools[dev];
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  if (!pool || fg_node(dev) < 0) return CUDA_ERROR_INVALID_VALUE;
  *pool = device_pool(dev);
  return CUDA_SUCCESS;
}

