#include "charge.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "init.h"
#include "log.h"
#include "real.h"
#include "region.h"

#define MAX_ORDINALS 64
#define INDEX_UNKNOWN (-2)

/* CUDA ordinal -> config record, resolved once: UUIDs do not change while a process runs. */
static _Atomic int ordinal_index[MAX_ORDINALS];
static _Atomic int ordinal_index_ready;
static _Atomic uint8_t context_charged[MAX_ORDINALS];

void vc_format_uuid(const unsigned char b[16], char out[48]) {
  snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
           b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static int lookup_index(CUdevice dev) {
  CUuuid uuid;
  __typeof__(&cuDeviceGetUuid_v2) get_v2 = VC_REAL_CUDA(cuDeviceGetUuid_v2);
  __typeof__(&cuDeviceGetUuid) get_v1 = VC_REAL_CUDA(cuDeviceGetUuid);
  CUresult rc = get_v2 ? get_v2(&uuid, dev) : get_v1 ? get_v1(&uuid, dev) : CUDA_ERROR_NOT_INITIALIZED;
  if (rc != CUDA_SUCCESS) return -1;
  char text[48];
  vc_format_uuid((const unsigned char *)uuid.bytes, text);
  int index = vc_config_find_uuid(text);
  /* A MIG device: CUDA gives its UUID's bytes without saying so; the limit file names it MIG-…
   * (NVML's and the container runtime's spelling). */
  char mig[48];
  memcpy(mig, text, sizeof mig);
  memcpy(mig, "MIG-", 4);
  if (index < 0) index = vc_config_find_uuid(mig);
  if (index < 0) {
    static int once;
    VC_LOG_ONCE(once, VC_LOG_ERROR, "device %d (%s) is not in the limit file, nor as a MIG device (%s); its memory is refused",
                dev, text, mig);
  }
  return index;
}

int vc_device_index(CUdevice dev) {
  if (vc_init_ensure() != 0) return -1;
  if (dev < 0 || dev >= MAX_ORDINALS) return lookup_index(dev);
  if (!atomic_load_explicit(&ordinal_index_ready, memory_order_acquire)) {
    for (int i = 0; i < MAX_ORDINALS; i++) atomic_store_explicit(&ordinal_index[i], INDEX_UNKNOWN, memory_order_relaxed);
    atomic_store_explicit(&ordinal_index_ready, 1, memory_order_release);
  }
  int index = atomic_load_explicit(&ordinal_index[dev], memory_order_relaxed);
  if (index == INDEX_UNKNOWN) {
    index = lookup_index(dev);
    atomic_store_explicit(&ordinal_index[dev], index, memory_order_relaxed);
  }
  return index;
}

CUresult vc_current_index(int *index) {
  __typeof__(&cuCtxGetDevice) get = VC_REAL_CUDA(cuCtxGetDevice);
  CUdevice dev = -1;
  *index = -1;
  if (!get) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = get(&dev);
  if (rc != CUDA_SUCCESS) return rc;
  *index = vc_device_index(dev);
  return CUDA_SUCCESS;
}

/* Guaranteed bytes stay within the memory limit, and guaranteed + burst within the burst limit
 * when there is one (a container that burst first may not then fill its guarantee past it).
 * Returns the budget charged, or -1. */
static int charge_in(int index, uint64_t bytes, unsigned budgets, uint64_t limit, uint64_t burst) {
  if (index < 0) return -1;
  if (!burst) budgets &= VC_BUDGET_BIT(VC_BUDGET_GUARANTEED);
  if (!budgets) return -1;
  int rc = vc_region_reserve_in(index, bytes, budgets, limit, burst ? burst : UINT64_MAX);
  if (rc >= 0) return rc;
  if (rc == -ENOMEM)
    vc_log(VC_LOG_DEBUG, "device record %d: %llu bytes refused (limit %llu, burst limit %llu)", index,
           (unsigned long long)bytes, (unsigned long long)limit, (unsigned long long)burst);
  return -1;
}

static int charge_live(int index, uint64_t bytes, unsigned budgets) {
  uint64_t limit = 0, burst = 0;
  if (index >= 0) vc_config_memory_limits(index, &limit, &burst);
  return charge_in(index, bytes, budgets, limit, burst);
}

CUresult vc_charge(int index, uint64_t bytes) {
  return charge_live(index, bytes, VC_BUDGET_BIT(VC_BUDGET_GUARANTEED)) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult vc_charge_burst(int index, uint64_t bytes) {
  return charge_live(index, bytes, VC_BUDGET_BIT(VC_BUDGET_BURST)) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult vc_charge_either(int index, uint64_t bytes, const struct vc_limits *limits, int allow_burst,
                          enum vc_budget *budget) {
  unsigned budgets = VC_BUDGET_BIT(VC_BUDGET_GUARANTEED) | (allow_burst ? VC_BUDGET_BIT(VC_BUDGET_BURST) : 0u);
  int rc = charge_in(index, bytes, budgets, limits->memory, limits->burst);
  if (rc < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *budget = (enum vc_budget)rc;
  return CUDA_SUCCESS;
}

void vc_limits_of(int index, struct vc_limits *out) {
  out->memory = out->burst = 0;
  if (index >= 0) vc_config_memory_limits(index, &out->memory, &out->burst);
}

void vc_uncharge(int index, uint64_t bytes) {
  if (index >= 0) vc_region_release(index, bytes);
}

void vc_uncharge_burst(int index, uint64_t bytes) {
  if (index >= 0) vc_region_release_in(index, bytes, VC_BUDGET_BURST);
}

void vc_uncharge_alloc(const struct vc_alloc *a) {
  if (a->burst) vc_uncharge_burst(a->device, a->bytes);
  else vc_uncharge(a->device, a->bytes);
}

uint64_t vc_visible_total(int index, uint64_t physical_total) {
  if (index < 0) return 0;
  uint64_t limit = vc_config_memory_limit(index);
  return limit < physical_total ? limit : physical_total;
}

uint64_t vc_container_used(int index) { return index < 0 ? 0 : vc_region_used(index); }

uint64_t vc_container_free(int index, uint64_t visible_total) {
  if (index < 0) return 0;
  uint64_t used = vc_region_used(index);
  uint64_t left = visible_total > used ? visible_total - used : 0;
  uint64_t ceiling = vc_config_burst_limit(index);
  if (!ceiling) return left;
  /* What a burst holds counts against the ceiling the guaranteed bytes share with it. */
  uint64_t held = used + vc_region_burst(index);
  uint64_t room = ceiling > held ? ceiling - held : 0;
  return room < left ? room : left;
}

CUresult vc_charge_context(CUdevice dev) {
  uint64_t overhead = vc_init_context_overhead_bytes();
  if (overhead == 0) return CUDA_SUCCESS;
  int index = vc_device_index(dev);
  if (index < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (dev >= 0 && dev < MAX_ORDINALS && atomic_exchange(&context_charged[dev], 1)) return CUDA_SUCCESS;
  CUresult rc = vc_charge(index, overhead);
  if (rc != CUDA_SUCCESS && dev >= 0 && dev < MAX_ORDINALS) atomic_store(&context_charged[dev], 0);
  return rc;
}

void vc_uncharge_context(CUdevice dev) {
  if (dev < 0 || dev >= MAX_ORDINALS || !atomic_exchange(&context_charged[dev], 0)) return;
  vc_uncharge(vc_device_index(dev), vc_init_context_overhead_bytes());
}

uint64_t vc_current_context(void) {
  __typeof__(&cuCtxGetCurrent) get = VC_REAL_CUDA(cuCtxGetCurrent);
  CUcontext ctx = NULL;
  if (!get || get(&ctx) != CUDA_SUCCESS) return 0;
  return (uint64_t)(uintptr_t)ctx;
}

int vc_charge_record(enum vc_alloc_kind kind, uint64_t key, int index, uint64_t bytes, uint64_t ctx) {
  return vc_charge_record_as(kind, key, index, bytes, ctx, 0);
}

int vc_charge_record_as(enum vc_alloc_kind kind, uint64_t key, int index, uint64_t bytes, uint64_t ctx, int burst) {
  struct vc_alloc value = {.bytes = bytes, .device = index, .ctx = ctx, .burst = (uint8_t)(burst != 0)}, old;
  int rc = vc_alloc_record(kind, key, &value, &old);
  if (rc == 1) {
    vc_log(VC_LOG_INFO, "driver reused %#llx (kind %d) without a free we saw; releasing its old %llu bytes",
           (unsigned long long)key, (int)kind, (unsigned long long)old.bytes);
    vc_uncharge_alloc(&old);
  }
  return rc < 0 ? rc : 0;
}
