/* Allocations above the guarantee (the limit file's burst limit): served as managed memory that
 * prefers the device, so the driver can evict it to the host when a guaranteed allocation on the
 * card needs the room (README.md, "Memory above the request"). */
#ifndef VCUDA_HOOKS_BURST_H
#define VCUDA_HOOKS_BURST_H

#include <stddef.h>

#include "vc_cuda.h"

#define VC_MEM_ATTACH_GLOBAL 1u

/* Allocates `bytes` on config record `index` (the current context's device) from the burst
 * budget with the driver's cuMemAllocManaged(flags); with `advise`, sets the device as preferred
 * location and accessor. CUDA_ERROR_OUT_OF_MEMORY, the driver never asked, when the record has no
 * burst limit, the budget is spent, a stream capture is in progress in this process, or the
 * device has no concurrent managed access. */
CUresult vc_burst_alloc(int index, CUdeviceptr *dptr, size_t bytes, unsigned int flags, int advise);

/* Publishes this process's evicted burst bytes on record `index` in the region where the driver
 * reports residency (the fake driver does; NVIDIA's has no per-process query). */
void vc_burst_note_residency(int index);

#endif
