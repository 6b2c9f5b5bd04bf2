/* Charging device memory to the container: maps CUDA devices to limit-file records by UUID and
 * reserves/releases bytes in the shared region against the live limit. */
#ifndef VCUDA_CHARGE_H
#define VCUDA_CHARGE_H

#include <stdint.h>

#include "alloc_table.h"
#include "region.h"
#include "vc_cuda.h"

/* Formats a 16-byte UUID as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (out: 48 bytes). */
void vc_format_uuid(const unsigned char bytes[16], char out[48]);

/* The limit-file record of CUDA device `dev`, matched by UUID (`GPU-…`, else `MIG-…`: a MIG device); -1 when the device is not in the
 * file or the library is not initialised (callers then refuse: fail closed). */
int vc_device_index(CUdevice dev);

/* The config record of the current context's device in *index (-1 as above). Returns the
 * driver's error when there is no current context, so hooks can return it unchanged. */
CUresult vc_current_index(int *index);

/* Reserves `bytes` on record `index`; CUDA_SUCCESS or CUDA_ERROR_OUT_OF_MEMORY. */
CUresult vc_charge(int index, uint64_t bytes);
void vc_uncharge(int index, uint64_t bytes);

/* Reserves `bytes` of burst (managed memory above the guarantee) on record `index`: OUT_OF_MEMORY
 * when the record has no burst limit or guaranteed + burst would pass it. */
CUresult vc_charge_burst(int index, uint64_t bytes);

/* Record `index`'s live memory limit and burst limit (0: none), read once for one allocation. */
struct vc_limits {
  uint64_t memory;
  uint64_t burst;
};
void vc_limits_of(int index, struct vc_limits *out);

/* Reserves `bytes` in the guarantee when they fit there, else (with `allow_burst` and a burst
 * limit in `limits`) in the burst budget, under one lock; *budget says which.
 * CUDA_ERROR_OUT_OF_MEMORY when neither fits. */
CUresult vc_charge_either(int index, uint64_t bytes, const struct vc_limits *limits, int allow_burst,
                          enum vc_budget *budget);
void vc_uncharge_burst(int index, uint64_t bytes);

/* Gives an allocation-table entry's bytes back to the budget it was charged to. */
void vc_uncharge_alloc(const struct vc_alloc *a);

/* Live limit of record `index` capped at the physical size; 0 when unknown. */
uint64_t vc_visible_total(int index, uint64_t physical_total);

/* Container usage on record `index`: guaranteed bytes (bursts are not in it). */
uint64_t vc_container_used(int index);

/* What the container can still allocate within its guarantee on record `index` whose visible
 * total (the guarantee) is `visible_total`: total - guaranteed usage, and no more than the burst
 * ceiling leaves beside what is burst. What every memory view reports as free. */
uint64_t vc_container_free(int index, uint64_t visible_total);

/* Charges the context overhead once per (process, device); CUDA_SUCCESS or OUT_OF_MEMORY. */
CUresult vc_charge_context(CUdevice dev);

/* Gives the context overhead of `dev` back (its last context is gone); charged again by the next
 * vc_charge_context. */
void vc_uncharge_context(CUdevice dev);

/* The calling thread's current context as a table tag (0 when none). */
uint64_t vc_current_context(void);

/* Records a charged allocation (kind, key) -> (index, bytes, ctx). When the driver handed the key
 * out again without this library seeing its free, the old entry's charge is released. 0, or
 * -ENOMEM when the table cannot grow (the caller undoes the allocation). */
int vc_charge_record(enum vc_alloc_kind kind, uint64_t key, int index, uint64_t bytes, uint64_t ctx);
/* The same for bytes charged to the burst budget when `burst` is non-zero. */
int vc_charge_record_as(enum vc_alloc_kind kind, uint64_t key, int index, uint64_t bytes, uint64_t ctx, int burst);

#endif
