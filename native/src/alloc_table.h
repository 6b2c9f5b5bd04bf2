/* Per-process table of what this process has charged: device pointer, array or VMM handle ->
 * (config device, bytes), so frees give back exactly what the allocation took. */
#ifndef VCUDA_ALLOC_TABLE_H
#define VCUDA_ALLOC_TABLE_H

#include <stdint.h>

enum vc_alloc_kind {
  VC_ALLOC_LINEAR = 1, /* cuMemAlloc*, managed, pitch, async */
  VC_ALLOC_ARRAY = 2,
  VC_ALLOC_MIPMAP = 3,
  VC_ALLOC_VMM_HANDLE = 4,  /* cuMemCreate handle (physical memory) */
  VC_ALLOC_VMM_MAPPING = 5, /* cuMemMap virtual address -> handle */
  VC_ALLOC_POOL = 6,        /* stream-ordered allocation -> its pool (handle) */
};

struct vc_alloc {
  uint64_t bytes;
  uint64_t ctx;       /* CUcontext the memory belongs to (freed with it); 0: none (pools, VMM) */
  uint64_t handle;    /* VMM mapping: the handle it maps; pool allocation: the pool */
  uint32_t map_count; /* VMM handle: live mappings */
  int32_t device;     /* config index */
  uint8_t released;   /* VMM handle: cuMemRelease called */
  uint8_t burst;      /* linear: charged to the burst budget (managed memory above the guarantee) */
};

/* Records `value` under (kind, key). 0; 1 when the key was still recorded: the driver handed out
 * again an address or handle whose free this library did not see (it freed the memory itself),
 * so the old entry is replaced and returned in *replaced for the caller to uncharge; -ENOMEM when
 * the table cannot grow. */
int vc_alloc_record(enum vc_alloc_kind kind, uint64_t key, const struct vc_alloc *value, struct vc_alloc *replaced);

/* Removes every entry `match` accepts, handing each to `each` (called with the table locked: it
 * must not call back into the table). Returns how many were removed. */
int vc_alloc_drop_if(int (*match)(enum vc_alloc_kind kind, const struct vc_alloc *a, const void *arg),
                     void (*each)(enum vc_alloc_kind kind, const struct vc_alloc *a, void *arg), void *arg);

/* vc_alloc_record without a context or handle, for a key known to be free (tests); 0, or
 * -ENOMEM when the table cannot grow. */
int vc_alloc_put(enum vc_alloc_kind kind, uint64_t key, int device, uint64_t bytes);

/* Removes an entry into `out`; 0, or -ENOENT when absent (memory this process did not charge,
 * e.g. IPC-imported). */
int vc_alloc_take(enum vc_alloc_kind kind, uint64_t key, struct vc_alloc *out);

/* VMM: physical memory is given back when the handle is released AND every mapping is gone
 * (PROTOCOLS.md §6.7). Each returns 1 with (device, bytes) to uncharge when that moment came. */
int vc_alloc_vmm_map(uint64_t va, uint64_t handle);
int vc_alloc_vmm_unmap(uint64_t va, int *device, uint64_t *bytes);
int vc_alloc_vmm_release(uint64_t handle, int *device, uint64_t *bytes);

/* Number of live entries (tests). */
uint64_t vc_alloc_count(void);

#endif
