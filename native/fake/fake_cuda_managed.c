/* Fake driver: managed memory (cuMemAllocManaged) and what moves it. Residency is modelled per
 * process and device in the shared state (fake_state.c): an allocation is resident as far as the
 * device has room and on the host for the rest; an ordinary allocation that needs the room evicts
 * resident managed bytes to the host (fg_mem_charge); a kernel of the owning process brings them
 * back as far as there is room and pays FAKEGPU_UVM_NS_PER_MIB for every MiB that was on the host
 * (fg_schedule). Departures from NVIDIA's UVM driver are listed in native/README.md. */
#include <stdlib.h>

#include "fake_cuda.h"
#include "fake_mem.h"

#define ATTACH_GLOBAL 1u
#define ATTACH_HOST 2u
#define ADVISE_FIRST 1
#define ADVISE_LAST 6
#define LOCATION_DEVICE 1

FG_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytes, unsigned int flags) {
  if (flags != ATTACH_GLOBAL && flags != ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  if (!dptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  int dev;
  CUresult rc = fg_current_device(&dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (!fg_env()->concurrent_managed) return CUDA_ERROR_NOT_SUPPORTED;
  uint64_t va = fg_take_va(dev, bytes);
  if (fg_mem_put(1, va, dev, bytes, 0) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&fg_mem_lock);
  (*fg_mem_find(1, va))->managed = 1;
  pthread_mutex_unlock(&fg_mem_lock);
  fg_managed_alloc(fg_node(dev), bytes);
  *dptr = va;
  return CUDA_SUCCESS;
}

/* The managed allocation containing [ptr, ptr + count); CUDA_ERROR_INVALID_VALUE when none does
 * (the fake only knows whole allocations: a range must start at one). */
static CUresult managed_range(CUdeviceptr ptr, size_t count) {
  pthread_mutex_lock(&fg_mem_lock);
  const struct node *n = *fg_mem_find(1, ptr);
  int ok = n && n->managed && count <= n->bytes;
  pthread_mutex_unlock(&fg_mem_lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult check_location(CUmemLocation location) {
  if (location.type != LOCATION_DEVICE) return CUDA_SUCCESS; /* host / NUMA locations */
  return fg_node(location.id) < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

/* Advice is accepted and checked, and changes nothing: the fake always prefers the device. */
FG_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t count, int advice, CUmemLocation location) {
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (advice < ADVISE_FIRST || advice > ADVISE_LAST) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = managed_range(ptr, count);
  return rc != CUDA_SUCCESS ? rc : check_location(location);
}

FG_EXPORT CUresult cuMemAdvise(CUdeviceptr ptr, size_t count, int advice, CUdevice device) {
  CUmemLocation location = {.type = LOCATION_DEVICE, .id = device};
  return cuMemAdvise_v2(ptr, count, advice, location);
}

/* A prefetch to a device brings the process's host bytes there back, as far as there is room. */
FG_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr ptr, size_t count, CUmemLocation location, unsigned int flags,
                                         CUstream stream) {
  (void)stream;
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = managed_range(ptr, count);
  if (rc == CUDA_SUCCESS) rc = check_location(location);
  if (rc != CUDA_SUCCESS || location.type != LOCATION_DEVICE) return rc;
  fg_lock();
  fg_managed_touch_locked(fg_node(location.id));
  fg_unlock();
  return CUDA_SUCCESS;
}

/* Test control: this process's managed bytes on CUDA ordinal `dev` that are resident, on the
 * host, and how many times an ordinary allocation evicted some. -1 for an unknown device. */
FG_EXPORT int fakegpu_managed_residency(int dev, uint64_t *resident, uint64_t *host, uint64_t *evictions) {
  if (fg_initialized() != 0 || fg_node(dev) < 0 || !resident || !host || !evictions) return -1;
  fg_managed_residency(fg_node(dev), resident, host, evictions);
  return 0;
}
