/* Fake NVML: events. Xid events are injected into the shared state (fakegpu_inject_xid or
 * `fakegpu-ctl xid`) and delivered to every event set registered for them on that device. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "fake_nvml.h"
#include "fake_state.h"
#include "fakegpu.h"
#include "vc_nvml.h"

struct nvmlEventSet_st {
  unsigned long long mask[FG_MAX_DEVICES];
  uint64_t seen[FG_MAX_DEVICES];
};

FG_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
  if (fg_nvml_index(NULL) == -1) return NVML_ERROR_UNINITIALIZED;
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  *set = calloc(1, sizeof **set);
  return *set ? NVML_SUCCESS : NVML_ERROR_MEMORY;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types) {
  CARD_OR_FAIL(device);
  (void)idx;
  if (!types) return NVML_ERROR_INVALID_ARGUMENT;
  *types = VC_NVML_EVENT_XID;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
  CARD_OR_FAIL(device);
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  if (types & ~VC_NVML_EVENT_XID) return NVML_ERROR_NOT_SUPPORTED;
  fg_lock();
  set->seen[idx] = fg_state()->devices[idx].xid_seq;
  fg_unlock();
  set->mask[idx] |= types;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
  if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t deadline = fg_now_ns() + (uint64_t)timeoutms * 1000000u;
  struct fg_state *s = fg_state();
  for (;;) {
    fg_lock();
    for (uint32_t i = 0; i < s->device_count; i++) {
      struct fg_device *d = &s->devices[i];
      /* Registration goes through a visible handle, so only visible devices have a mask. */
      if (!(set->mask[i] & VC_NVML_EVENT_XID) || d->xid_seq == set->seen[i]) continue;
      if (d->xid_seq - set->seen[i] > FG_XID_RING) set->seen[i] = d->xid_seq - FG_XID_RING;
      *data = (nvmlEventData_t){.device = fg_nvml_handle((int)i), .eventType = VC_NVML_EVENT_XID,
                                .eventData = d->xid[set->seen[i] % FG_XID_RING], .gpuInstanceId = 0xFFFFFFFFu,
                                .computeInstanceId = 0xFFFFFFFFu};
      set->seen[i]++;
      fg_unlock();
      return NVML_SUCCESS;
    }
    fg_unlock();
    if (fg_now_ns() >= deadline) return NVML_ERROR_TIMEOUT;
    fg_sleep_until(fg_now_ns() + 1000000u);
  }
}

FG_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  free(set);
  return NVML_SUCCESS;
}

/* `index` is the node index: injecting is a node-level act, FAKEGPU_VISIBLE_DEVICES does not apply. */
FG_EXPORT int fakegpu_inject_xid(unsigned int index, unsigned long long xid) { return fg_inject_xid((int)index, xid); }
