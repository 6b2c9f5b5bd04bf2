/* Allocations above the guarantee (the limit file's burst limit): served as managed memory that
 * prefers the device, so the driver can evict it to the host when a guaranteed allocation on the
 * card needs the room (README.md, "Memory above the request"). */
#ifndef VCUDA_HOOKS_BURST_H
#define VCUDA_HOOKS_BURST_H

#include <stddef.h>

#include "region.h"
#include "vc_cuda.h"

#define VC_MEM_ATTACH_GLOBAL 1u

struct vc_limits;

/* Whether an allocation that does not fit in the guarantee may burst now: the record has a burst
 * limit, no stream capture is in progress in this process (neither the allocation nor its advice
 * would be captured), and the current device has concurrent managed access (*dev set to it). */
int vc_burst_allowed(const struct vc_limits *limits, CUdevice *dev);

/* Charges `bytes` on record `index` to the guarantee when they fit there, else to the burst
 * budget when vc_burst_allowed; *budget says which, and *dev is the device a burst is for.
 * CUDA_ERROR_OUT_OF_MEMORY when neither fits. */
CUresult vc_charge_or_burst(int index, size_t bytes, enum vc_budget *budget, CUdevice *dev);

/* Allocates `bytes`, already charged to record `index`'s burst budget, with the driver's
 * cuMemAllocManaged(flags) on `dev`; with `advise`, sets the device as preferred location and
 * accessor. The charge is undone when the driver fails. */
CUresult vc_burst_alloc_charged(int index, CUdevice dev, CUdeviceptr *dptr, size_t bytes, unsigned int flags,
                                int advise);

/* Publishes this process's evicted burst bytes on record `index` in the region where the driver
 * reports residency (the fake driver does; NVIDIA's has no per-process query). Without `now`, at
 * most every 100 ms: it is a statistic, not a charge. */
void vc_burst_note_residency(int index, int now);

#endif
