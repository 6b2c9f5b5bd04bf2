/* Internals shared by the fake driver's memory files: the per-process table of what was
 * allocated (pointer / handle -> device, bytes) and address assignment. */
#ifndef FAKEGPU_MEM_H
#define FAKEGPU_MEM_H

#include <pthread.h>
#include <stdint.h>

#include "vc_cuda.h"

#define VMM_GRANULARITY (2u << 20)

struct node {
  uint64_t key;
  int kind; /* 1 linear, 2 vmm handle, 3 vmm mapping, 4 pool allocation (handle = pool) */
  int device;
  uint64_t bytes;
  uint64_t handle; /* mapping: its handle; pool allocation: its pool */
  int maps, released;
  int managed; /* linear: cuMemAllocManaged (its bytes may live on the host) */
  void *ctx; /* the context current at allocation (what cuCtxDestroy / a primary reset frees) */
  struct node *next;
};

extern pthread_mutex_t fg_mem_lock;

/* The slot holding (kind, key) or the empty slot at the end of its chain. Caller holds the lock. */
struct node **fg_mem_find(int kind, uint64_t key);

/* Records an entry (takes the lock). 0, or -1 out of memory. */
int fg_mem_put(int kind, uint64_t key, int device, uint64_t bytes, uint64_t handle);

/* Removes (under the lock) every entry `drop` says yes to, then hands each to `done` (unlocked),
 * which frees it. */
void fg_mem_remove_if(int (*drop)(const struct node *, const void *), const void *arg, void (*done)(struct node *));

/* Gives a linear allocation's bytes back to its device: managed memory where it lives (device or
 * host), anything else from the device total. */
void fg_mem_release_linear(const struct node *n);

/* Frees the linear allocations made in `ctx` (cuCtxDestroy, primary context release/reset). */
void fg_mem_drop_context(void *ctx);

/* Frees every stream-ordered allocation on device `dev` and empties its pools (primary reset). */
void fg_pool_reset_device(int dev);

/* A primary context reset frees the device's graph memory pool (fake_cuda_graph_mem.c). */
void fg_graph_mem_reset(int dev);

/* The primary context of device `dev` (fake_cuda_device.c). */
void *fg_primary_ctx(int dev);

/* A fresh device address range of `bytes` on `dev`. */
uint64_t fg_take_va(int dev, uint64_t bytes);

/* The current context's device, or the CUresult explaining why there is none. */
int fg_current_device(int *dev);

/* Frees a stream-ordered allocation (fake_cuda_pool.c); CUDA_ERROR_INVALID_VALUE when `dptr` is
 * not one. */
CUresult fg_pool_free(uint64_t dptr);

#endif
