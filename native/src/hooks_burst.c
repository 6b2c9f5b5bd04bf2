/* Burst allocations: managed memory above the guarantee. Reserved in the burst budget before the
 * driver is asked (over the burst limit nothing is allocated), recorded as burst so every free,
 * context destroy, reset and dead-process reclaim returns the bytes to the burst budget. Paths
 * the driver cannot evict (VMM, arrays, pools, graph memory, pitch) never come here: they stay
 * within the guarantee. */
#include "hooks_burst.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "charge.h"
#include "hooks.h"
#include "log.h"
#include "real.h"
#include "region.h"

#define MAX_ORDINALS 64
#define MAX_RECORDS 16
#define ADVISE_SET_PREFERRED_LOCATION 3
#define ADVISE_SET_ACCESSED_BY 5
#define CONCURRENT_MANAGED_ACCESS 89

enum managed_support { SUPPORT_UNKNOWN = 0, SUPPORT_YES = 1, SUPPORT_NO = 2 };
static _Atomic uint8_t support[MAX_ORDINALS];
/* Config record -> CUDA ordinal + 1 (0: none yet), for residency queries after a free. */
static _Atomic int record_ordinal[MAX_RECORDS];
static _Atomic uint64_t evictions_seen[MAX_RECORDS];

typedef CUresult (*advise_v2_fn)(CUdeviceptr, size_t, int, CUmemLocation);
typedef CUresult (*advise_v1_fn)(CUdeviceptr, size_t, int, CUdevice);
typedef int (*residency_fn)(int, uint64_t *, uint64_t *, uint64_t *);

/* Bursting needs pages the driver can migrate while the device runs (Pascal and later, Linux). */
static int concurrent_managed(CUdevice dev) {
  if (dev < 0 || dev >= MAX_ORDINALS) return 0;
  uint8_t known = atomic_load_explicit(&support[dev], memory_order_relaxed);
  if (known != SUPPORT_UNKNOWN) return known == SUPPORT_YES;
  __typeof__(&cuDeviceGetAttribute) get = VC_REAL_CUDA(cuDeviceGetAttribute);
  int value = 0;
  int yes = get && get(&value, (CUdevice_attribute)CONCURRENT_MANAGED_ACCESS, dev) == CUDA_SUCCESS && value == 1;
  atomic_store_explicit(&support[dev], yes ? SUPPORT_YES : SUPPORT_NO, memory_order_relaxed);
  if (!yes) {
    static int once;
    VC_LOG_ONCE(once, VC_LOG_WARN,
                "device %d has no concurrent managed access: memory-limit ignored, allocations stay within the "
                "memory request",
                dev);
  }
  return yes;
}

/* Preferred location and accessor: the device. Failing advice leaves working managed memory that
 * migrates on fault instead, so it is logged, not fatal. */
static void advise_device(CUdeviceptr ptr, size_t bytes, CUdevice dev) {
  advise_v2_fn v2 = VC_REAL_CUDA_AS(advise_v2_fn, "cuMemAdvise_v2");
  advise_v1_fn v1 = VC_REAL_CUDA_AS(advise_v1_fn, "cuMemAdvise");
  CUmemLocation where = {.type = VC_CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
  const int advice[] = {ADVISE_SET_PREFERRED_LOCATION, ADVISE_SET_ACCESSED_BY};
  for (int i = 0; i < 2; i++) {
    CUresult rc = v2 ? v2(ptr, bytes, advice[i], where) : v1 ? v1(ptr, bytes, advice[i], dev) : CUDA_ERROR_NOT_FOUND;
    if (rc != CUDA_SUCCESS) vc_log(VC_LOG_DEBUG, "cuMemAdvise(%d) on a burst allocation: error %d", advice[i], (int)rc);
  }
}

static void remember_ordinal(int index, CUdevice dev) {
  if (index >= 0 && index < MAX_RECORDS) atomic_store_explicit(&record_ordinal[index], dev + 1, memory_order_relaxed);
}

int vc_burst_allowed(const struct vc_limits *limits, CUdevice *dev) {
  __typeof__(&cuCtxGetDevice) get_device = VC_REAL_CUDA(cuCtxGetDevice);
  if (!limits->burst || vc_capture_maybe_active() || !get_device) return 0;
  return get_device(dev) == CUDA_SUCCESS && concurrent_managed(*dev);
}

CUresult vc_charge_or_burst(int index, size_t bytes, enum vc_budget *budget, CUdevice *dev) {
  struct vc_limits limits;
  vc_limits_of(index, &limits);
  return vc_charge_either(index, bytes, &limits, vc_burst_allowed(&limits, dev), budget);
}

CUresult vc_burst_alloc_charged(int index, CUdevice dev, CUdeviceptr *dptr, size_t bytes, unsigned int flags,
                                int advise) {
  __typeof__(&cuMemAllocManaged) managed = VC_REAL_CUDA(cuMemAllocManaged);
  CUresult rc = managed ? managed(dptr, bytes, flags) : CUDA_ERROR_NOT_INITIALIZED;
  if (rc != CUDA_SUCCESS) {
    vc_uncharge_burst(index, bytes);
    return rc;
  }
  if (vc_charge_record_as(VC_ALLOC_LINEAR, *dptr, index, bytes, vc_current_context(), 1) != 0) {
    __typeof__(&cuMemFree_v2) release = VC_REAL_CUDA(cuMemFree_v2);
    if (release) release(*dptr);
    vc_uncharge_burst(index, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (advise) advise_device(*dptr, bytes, dev);
  remember_ordinal(index, dev);
  vc_burst_note_residency(index, 0);
  return CUDA_SUCCESS;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#define RESIDENCY_PERIOD_MS 100u
static _Atomic uint64_t noted_at[MAX_RECORDS];

void vc_burst_note_residency(int index, int now) {
  if (index < 0 || index >= MAX_RECORDS) return;
  uint64_t t = now_ms();
  if (!now && t - atomic_load_explicit(&noted_at[index], memory_order_relaxed) < RESIDENCY_PERIOD_MS) return;
  atomic_store_explicit(&noted_at[index], t, memory_order_relaxed);
  int ordinal = atomic_load_explicit(&record_ordinal[index], memory_order_relaxed) - 1;
  /* Looked up once: absent from NVIDIA's driver, and a failed lookup is not cached by the macro. */
  static _Atomic int looked_up;
  static _Atomic(residency_fn) query;
  if (!atomic_load_explicit(&looked_up, memory_order_acquire)) {
    atomic_store_explicit(&query, (residency_fn)vc_real_cuda("fakegpu_managed_residency"), memory_order_relaxed);
    atomic_store_explicit(&looked_up, 1, memory_order_release);
  }
  residency_fn fn = atomic_load_explicit(&query, memory_order_relaxed);
  uint64_t resident = 0, host = 0, evictions = 0;
  if (ordinal < 0 || !fn || fn(ordinal, &resident, &host, &evictions) != 0) return;
  uint64_t seen = atomic_exchange_explicit(&evictions_seen[index], evictions, memory_order_relaxed);
  vc_region_note_residency(index, host, evictions > seen ? evictions - seen : 0);
}
