/* Fake driver: device memory. Allocations take bytes from the shared per-device total (so NVML
 * in any process sees them), get unique addresses, and are remembered per process for frees.
 * VMM physical memory lives until cuMemRelease and the last cuMemUnmap. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_mem.h"

#define PITCH_ALIGN 512u

#define BUCKETS 4096
static struct node *buckets[BUCKETS];
pthread_mutex_t fg_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_handle = 1;

struct node **fg_mem_find(int kind, uint64_t key) {
  struct node **p = &buckets[(key >> 9 ^ key ^ (uint64_t)kind) % BUCKETS];
  while (*p && ((*p)->kind != kind || (*p)->key != key)) p = &(*p)->next;
  return p;
}

int fg_mem_put(int kind, uint64_t key, int device, uint64_t bytes, uint64_t handle) {
  struct node *n = calloc(1, sizeof *n);
  if (!n) return -1;
  *n = (struct node){.key = key, .kind = kind, .device = device, .bytes = bytes, .handle = handle, .ctx = fg_current()};
  pthread_mutex_lock(&fg_mem_lock);
  struct node **p = &buckets[(key >> 9 ^ key ^ (uint64_t)kind) % BUCKETS];
  n->next = *p;
  *p = n;
  pthread_mutex_unlock(&fg_mem_lock);
  return 0;
}

void fg_mem_remove_if(int (*drop)(const struct node *, const void *), const void *arg, void (*done)(struct node *)) {
  struct node *dropped = NULL;
  pthread_mutex_lock(&fg_mem_lock);
  for (int b = 0; b < BUCKETS; b++) {
    for (struct node **p = &buckets[b]; *p;) {
      struct node *n = *p;
      if (!drop(n, arg)) {
        p = &n->next;
        continue;
      }
      *p = n->next;
      n->next = dropped;
      dropped = n;
    }
  }
  pthread_mutex_unlock(&fg_mem_lock);
  while (dropped) {
    struct node *n = dropped;
    dropped = n->next;
    done(n);
  }
}

int fg_current_device(int *dev) {
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext c = fg_current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = c->device;
  return CUDA_SUCCESS;
}

uint64_t fg_take_va(int dev, uint64_t bytes) {
  struct fg_device *d = &fg_state()->devices[fg_node(dev)];
  fg_lock();
  uint64_t va = d->next_va;
  d->next_va += (bytes + VMM_GRANULARITY - 1) / VMM_GRANULARITY * VMM_GRANULARITY;
  fg_unlock();
  return va;
}

static CUresult alloc_on(int dev, uint64_t bytes, CUdeviceptr *dptr) {
  if (!dptr) return CUDA_ERROR_INVALID_VALUE;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (fg_mem_charge(fg_node(dev), bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t va = fg_take_va(dev, bytes);
  if (fg_mem_put(1, va, dev, bytes, 0) != 0) {
    fg_mem_uncharge(fg_node(dev), bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = va;
  return CUDA_SUCCESS;
}

static CUresult alloc_current(uint64_t bytes, CUdeviceptr *dptr) {
  int dev;
  CUresult rc = fg_current_device(&dev);
  return rc != CUDA_SUCCESS ? rc : alloc_on(dev, bytes, dptr);
}

void fg_mem_release_linear(const struct node *n) {
  if (n->managed) fg_managed_free(fg_node(n->device), n->bytes);
  else fg_mem_uncharge(fg_node(n->device), n->bytes);
}

FG_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes) { return alloc_current(bytes, dptr); }

FG_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytes) {
  /* A 64-bit process has no 32-bit address space for this legacy entry point. */
  (void)dptr;
  (void)bytes;
  return CUDA_ERROR_NOT_SUPPORTED;
}


FG_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t width, size_t height,
                                      unsigned int elementSize) {
  if (!pPitch || !width || !height || (elementSize != 4 && elementSize != 8 && elementSize != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t pitch = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
  CUresult rc = alloc_current((uint64_t)pitch * height, dptr);
  if (rc == CUDA_SUCCESS) *pPitch = pitch;
  return rc;
}

FG_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int w, unsigned int h,
                                   unsigned int e) {
  (void)dptr;
  (void)pPitch;
  (void)w;
  (void)h;
  (void)e;
  return CUDA_ERROR_NOT_SUPPORTED;
}

FG_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (dptr == 0) return CUDA_SUCCESS;
  pthread_mutex_lock(&fg_mem_lock);
  struct node **p = fg_mem_find(1, dptr);
  struct node *n = *p;
  if (n) *p = n->next;
  pthread_mutex_unlock(&fg_mem_lock);
  if (!n) return fg_pool_free(dptr); /* the driver frees stream-ordered allocations here too */
  fg_mem_release_linear(n);
  free(n);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) { return cuMemFree_v2(dptr); }

FG_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
  int dev;
  CUresult rc = fg_current_device(&dev);
  if (rc != CUDA_SUCCESS) return rc;
  struct fg_device *d = &fg_state()->devices[fg_node(dev)];
  fg_lock();
  uint64_t used = d->memory_used, tot = d->memory_total;
  fg_unlock();
  if (free_bytes) *free_bytes = tot > used ? tot - used : 0;
  if (total) *total = tot;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total) {
  size_t f, t;
  CUresult rc = cuMemGetInfo_v2(&f, &t);
  if (rc != CUDA_SUCCESS) return rc;
  if (free_bytes) *free_bytes = f > 0xFFFFFFFFu ? 0xFFFFFFFFu : (unsigned int)f;
  if (total) *total = t > 0xFFFFFFFFu ? 0xFFFFFFFFu : (unsigned int)t;
  return CUDA_SUCCESS;
}

/* ---- VMM ---- */

FG_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop,
                                                 CUmemAllocationGranularity_flags option) {
  (void)option;
  if (!g || !prop) return CUDA_ERROR_INVALID_VALUE;
  *g = VMM_GRANULARITY;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags) {
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !prop || flags != 0 || size == 0 || size % VMM_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
  int device = -1; /* host / NUMA locations take no device memory */
  if (prop->location.type == VC_CU_MEM_LOCATION_TYPE_DEVICE) {
    if (fg_node(prop->location.id) < 0)
      return CUDA_ERROR_INVALID_DEVICE;
    device = prop->location.id;
    if (fg_mem_charge(fg_node(device), size) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&fg_mem_lock);
  uint64_t h = next_handle++;
  pthread_mutex_unlock(&fg_mem_lock);
  if (fg_mem_put(2, h, device, size, 0) != 0) {
    if (device >= 0) fg_mem_uncharge(fg_node(device), size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *handle = h;
  return CUDA_SUCCESS;
}

static void drop_handle_locked(struct node **p) {
  struct node *n = *p;
  if (!n->released || n->maps > 0) return;
  *p = n->next;
  if (n->device >= 0) fg_mem_uncharge(fg_node(n->device), n->bytes);
  free(n);
}

FG_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  pthread_mutex_lock(&fg_mem_lock);
  struct node **p = fg_mem_find(2, handle);
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  if (*p && !(*p)->released) {
    (*p)->released = 1;
    drop_handle_locked(p);
    rc = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&fg_mem_lock);
  return rc;
}

FG_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                       unsigned long long flags) {
  (void)alignment;
  (void)addr;
  (void)flags;
  if (!ptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  *ptr = fg_take_va(0, size) | (1ull << 46); /* a VA range apart from linear allocations */
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  (void)size;
  return ptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FG_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags) {
  if (!ptr || !size || flags) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&fg_mem_lock);
  struct node *h = *fg_mem_find(2, handle);
  int ok = h && offset + size <= h->bytes && !*fg_mem_find(3, ptr);
  if (ok) h->maps++;
  pthread_mutex_unlock(&fg_mem_lock);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  return fg_mem_put(3, ptr, -1, size, handle) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FG_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  (void)size;
  pthread_mutex_lock(&fg_mem_lock);
  struct node **m = fg_mem_find(3, ptr);
  struct node *map = *m;
  if (map) {
    *m = map->next;
    struct node **h = fg_mem_find(2, map->handle);
    if (*h) {
      (*h)->maps--;
      drop_handle_locked(h);
    }
  }
  pthread_mutex_unlock(&fg_mem_lock);
  if (!map) return CUDA_ERROR_INVALID_VALUE;
  free(map);
  return CUDA_SUCCESS;
}

/* Test control: bytes the simulated device (CUDA ordinal `dev`) has allocated (all processes),
 * bypassing any hook. */
FG_EXPORT uint64_t fakegpu_device_used_bytes(int dev) {
  struct fg_state *s = fg_state();
  int node = fg_node(dev);
  if (!s || node < 0) return 0;
  fg_lock();
  uint64_t used = s->devices[node].memory_used;
  fg_unlock();
  return used;
}
