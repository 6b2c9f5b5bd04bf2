/* Fake driver: page-locked host memory (cuMemHostAlloc, cuMemAllocHost, cuMemFreeHost). It is
 * ordinary process memory, page aligned, and takes nothing from the simulated card, as pinned
 * memory takes nothing from a real one. With unified addressing a mapped buffer's device address
 * is its host address. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define FG_HOST_ALIGN 4096u

struct host_block {
  void *ptr;
  size_t bytes;
  unsigned int flags;
  struct host_block *next;
};
static struct host_block *blocks;
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags);
CUresult cuMemAllocHost_v2(void **pp, size_t bytes);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags);
CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p);

/* The block holding `p` (a pointer into it counts), or NULL. Caller holds the lock. */
static struct host_block *find_locked(const void *p) {
  for (struct host_block *b = blocks; b; b = b->next)
    if ((const char *)p >= (const char *)b->ptr && (const char *)p < (const char *)b->ptr + b->bytes) return b;
  return NULL;
}

FG_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags) {
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pp || bytes == 0 || (flags & ~0xFu)) return CUDA_ERROR_INVALID_VALUE; /* PORTABLE|DEVICEMAP|WRITECOMBINED */
  if (!fg_current()) return CUDA_ERROR_INVALID_CONTEXT;
  struct host_block *b = calloc(1, sizeof *b);
  if (!b || posix_memalign(&b->ptr, FG_HOST_ALIGN, bytes) != 0) {
    free(b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  b->bytes = bytes;
  b->flags = flags;
  pthread_mutex_lock(&blocks_lock);
  b->next = blocks;
  blocks = b;
  pthread_mutex_unlock(&blocks_lock);
  *pp = b->ptr;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytes) { return cuMemHostAlloc(pp, bytes, 0); }

FG_EXPORT CUresult cuMemFreeHost(void *p) {
  pthread_mutex_lock(&blocks_lock);
  struct host_block **link = &blocks;
  while (*link && (*link)->ptr != p) link = &(*link)->next;
  struct host_block *gone = *link;
  if (gone) *link = gone->next;
  pthread_mutex_unlock(&blocks_lock);
  if (!gone) return CUDA_ERROR_INVALID_VALUE;
  free(gone->ptr);
  free(gone);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags) {
  if (!pdptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&blocks_lock);
  int known = find_locked(p) != NULL;
  pthread_mutex_unlock(&blocks_lock);
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p) {
  if (!pFlags) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&blocks_lock);
  struct host_block *b = find_locked(p);
  if (b) *pFlags = b->flags;
  pthread_mutex_unlock(&blocks_lock);
  return b ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* 1 when [p, p + bytes) lies in page-locked memory the fake handed out (fake_cuda_copy.c). */
int fg_host_block(const void *p, size_t bytes) {
  pthread_mutex_lock(&blocks_lock);
  struct host_block *b = find_locked(p);
  int inside = b && (const char *)p + bytes <= (const char *)b->ptr + b->bytes;
  pthread_mutex_unlock(&blocks_lock);
  return inside;
}
