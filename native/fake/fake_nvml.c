/* Fake NVML over the shared fake state: what any process allocated or ran shows up here.
 * Utilization is the simulated busy time of the device timeline; per-process samples are one per
 * (process, sampling period) with busy time, newer than lastSeenTimeStamp. Topology: devices
 * 2k and 2k+1 share a PCIe switch (SINGLE), devices in the same half share a NUMA node (NODE),
 * others are SYSTEM; with NVLink on, every device has 18 active links to its peers.
 * Enumeration (count, handle by index/UUID/PCI id, nvmlDeviceGetIndex) covers the devices of
 * FAKEGPU_VISIBLE_DEVICES in its order, as NVML in a container sees only its device nodes; what a
 * handle reports (UUID, PCI id, minor number, memory, topology) is its node device's. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fake_state.h"
#include "fakegpu.h"
#include "vc_nvml.h"
#include "fake_nvml.h"


/* handles[ordinal]; .index is the node index the shared state keeps the device under. */
struct nvmlDevice_st {
  int index;
};
static struct nvmlDevice_st handles[FG_MAX_DEVICES];
static int init_count;

nvmlDevice_t fg_nvml_handle(int node) {
  int ordinal = fg_ordinal(node);
  return ordinal >= 0 ? &handles[ordinal] : NULL;
}

static int ordinal_of(nvmlDevice_t d) {
  return d && d >= handles && d < handles + fg_visible_count() ? (int)(d - handles) : -1;
}

/* Node index of a handle; -1 not initialised, -2 not one of ours. */
int fg_nvml_index(nvmlDevice_t d) {
  if (init_count <= 0) return -1;
  int ordinal = ordinal_of(d);
  return ordinal >= 0 ? fg_node(ordinal) : -2;
}



FG_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  if (!fg_state()) return NVML_ERROR_DRIVER_NOT_LOADED;
  for (int i = 0; i < FG_MAX_DEVICES; i++) handles[i].index = fg_node(i);
  __atomic_add_fetch(&init_count, 1, __ATOMIC_ACQ_REL);
  return NVML_SUCCESS;
}
FG_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  (void)flags;
  return nvmlInit_v2();
}
FG_EXPORT nvmlReturn_t nvmlShutdown(void) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  __atomic_sub_fetch(&init_count, 1, __ATOMIC_ACQ_REL);
  return NVML_SUCCESS;
}

FG_EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    default: return "Unknown Error";
  }
}

static nvmlReturn_t copy_text(char *out, unsigned int len, const char *text) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(text) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(out, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) { return copy_text(v, len, "580.65.06"); }
FG_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned int len) { return copy_text(v, len, "13.580.65.06"); }
FG_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
  if (!v) return NVML_ERROR_INVALID_ARGUMENT;
  *v = 13000;
  return NVML_SUCCESS;
}
FG_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

FG_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = (unsigned int)fg_visible_count();
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= (unsigned int)fg_visible_count()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &handles[index];
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < fg_visible_count(); i++) {
    char text[48];
    fg_device_uuid_text(fg_node(i), text);
    if (strcasecmp(text, uuid) == 0) {
      *device = &handles[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

static void pci_info(int i, nvmlPciInfo_t *pci) {
  memset(pci, 0, sizeof *pci);
  pci->bus = fg_device_pci_bus(i);
  pci->pciDeviceId = 0x233010DEu;
  pci->pciSubSystemId = 0x16C110DEu;
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *busId, nvmlDevice_t *device) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!busId || !device) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < fg_visible_count(); i++) {
    nvmlPciInfo_t pci;
    pci_info(fg_node(i), &pci);
    if (strcasecmp(pci.busId, busId) == 0 || strcasecmp(pci.busIdLegacy, busId) == 0) {
      *device = &handles[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  DEV_OR_FAIL(device);
  char text[48];
  fg_device_uuid_text(idx, text);
  return copy_text(uuid, length, text);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  DEV_OR_FAIL(device);
  (void)idx;
  return copy_text(name, length, fg_env()->name);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  DEV_OR_FAIL(device);
  (void)idx;
  if (!index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = (unsigned int)ordinal_of(device); /* the enumeration index; the minor number stays the node's */
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
  DEV_OR_FAIL(device);
  if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = (unsigned int)idx;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
  DEV_OR_FAIL(device);
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  pci_info(idx, pci);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *m) {
  DEV_OR_FAIL(device);
  if (!m) return NVML_ERROR_INVALID_ARGUMENT;
  struct fg_device *d = &fg_state()->devices[idx];
  fg_lock();
  fg_reclaim_dead_locked();
  m->total = d->memory_total;
  m->used = d->memory_used;
  fg_unlock();
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *m) {
  if (!m) return NVML_ERROR_INVALID_ARGUMENT;
  if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlMemory_t v1;
  nvmlReturn_t rc = nvmlDeviceGetMemoryInfo(device, &v1);
  if (rc != NVML_SUCCESS) return rc;
  m->total = v1.total;
  m->reserved = 0;
  m->used = v1.used;
  m->free = v1.free;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u) {
  DEV_OR_FAIL(device);
  if (!u) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t covered = 0;
  uint64_t busy = fg_busy_in_window(idx, fg_env()->util_window_ns, &covered);
  unsigned int pct = covered ? (unsigned int)((busy * 100 + covered / 2) / covered) : 0;
  u->gpu = pct > 100 ? 100 : pct;
  u->memory = u->gpu / 2;
  return NVML_SUCCESS;
}

/* Static so the versioned export below reaches it directly: a call through the exported name
 * would be interposed by a preloaded libvcuda and filtered twice. */
static nvmlReturn_t process_samples(nvmlDevice_t device, nvmlProcessUtilizationSample_t *out, unsigned int *count,
                                    unsigned long long lastSeen) {
  DEV_OR_FAIL(device);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  struct fg_state *s = fg_state();
  struct fg_device *d = &s->devices[idx];
  uint64_t sample = s->sample_ns;
  uint64_t current = fg_now_ns() / sample;
  unsigned int n = 0, cap = out ? *count : 0;
  int short_buffer = 0;
  fg_lock();
  fg_reclaim_dead_locked();
  for (uint64_t p = current >= FG_BUCKETS - 1 ? current - (FG_BUCKETS - 1) : 0; p < current; p++) {
    struct fg_bucket *b = &d->buckets[p % FG_BUCKETS];
    if (b->period != p || b->busy_ns == 0) continue;
    unsigned long long ts = (unsigned long long)(((int64_t)((p + 1) * sample) + s->realtime_offset_ns) / 1000);
    if (ts <= lastSeen) continue;
    for (int k = 0; k < FG_MAX_PROCS; k++) {
      if (!s->procs[k].live || b->proc_busy_ns[k] == 0) continue;
      if (n < cap) {
        unsigned int pct = (unsigned int)((b->proc_busy_ns[k] * 100 + sample / 2) / sample);
        out[n] = (nvmlProcessUtilizationSample_t){
            .pid = s->procs[k].pid, .timeStamp = ts, .smUtil = pct > 100 ? 100 : pct, .memUtil = pct / 2};
      } else {
        short_buffer = 1;
      }
      n++;
    }
  }
  fg_unlock();
  *count = n;
  if (n == 0) return NVML_ERROR_NOT_FOUND;
  return short_buffer ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *out,
                                                       unsigned int *count, unsigned long long lastSeen) {
  return process_samples(device, out, count, lastSeen);
}

/* The same samples through the versioned API: the caller's array size rides in the struct. */
FG_EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device, nvmlProcessesUtilizationInfo_t *info) {
  if (!info) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlProcessesUtilizationInfo_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  enum { CAP = 256 };
  nvmlProcessUtilizationSample_t samples[CAP];
  unsigned int n = CAP;
  nvmlReturn_t rc = process_samples(device, samples, &n, info->lastSeenTimeStamp);
  if (rc != NVML_SUCCESS && rc != NVML_ERROR_INSUFFICIENT_SIZE) {
    if (rc == NVML_ERROR_NOT_FOUND) info->processSamplesCount = 0;
    return rc;
  }
  unsigned int cap = info->procUtilArray ? info->processSamplesCount : 0;
  for (unsigned int i = 0; i < n && i < cap && i < CAP; i++)
    info->procUtilArray[i] = (nvmlProcessUtilizationInfo_v1_t){.timeStamp = samples[i].timeStamp,
                                                               .pid = samples[i].pid,
                                                               .smUtil = samples[i].smUtil,
                                                               .memUtil = samples[i].memUtil,
                                                               .encUtil = samples[i].encUtil,
                                                               .decUtil = samples[i].decUtil};
  info->processSamplesCount = n;
  return n > cap || rc == NVML_ERROR_INSUFFICIENT_SIZE ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

static nvmlReturn_t running(nvmlDevice_t device, unsigned int *count, void *out, size_t row) {
  DEV_OR_FAIL(device);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  struct fg_state *s = fg_state();
  unsigned int n = 0, cap = out ? *count : 0;
  fg_lock();
  fg_reclaim_dead_locked();
  for (int k = 0; k < FG_MAX_PROCS; k++) {
    struct fg_proc *p = &s->procs[k];
    if (!p->live || (!p->used[idx] && !(p->context_mask & (1u << idx)))) continue;
    if (n < cap) {
      nvmlProcessInfo_t info = {.pid = p->pid, .usedGpuMemory = p->used[idx], .gpuInstanceId = 0xFFFFFFFFu,
                                .computeInstanceId = 0xFFFFFFFFu};
      memcpy((unsigned char *)out + row * n, &info, row);
    }
    n++;
  }
  fg_unlock();
  nvmlReturn_t rc = n > cap ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
  *count = n;
  return rc;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *o) {
  return running(d, c, o, sizeof *o);
}
FG_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *o) {
  return running(d, c, o, sizeof *o);
}
FG_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *o) {
  return running(d, c, o, sizeof *o);
}

static nvmlGpuTopologyLevel_t level(int a, int b) {
  int half = (int)fg_state()->device_count / 2;
  if (a == b) return NVML_TOPOLOGY_INTERNAL;
  if ((a ^ 1) == b) return NVML_TOPOLOGY_SINGLE;
  if (half > 0 && (a < half) == (b < half)) return NVML_TOPOLOGY_NODE;
  return NVML_TOPOLOGY_SYSTEM;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t d1, nvmlDevice_t d2,
                                                           nvmlGpuTopologyLevel_t *path) {
  DEV_OR_FAIL_AS(a, d1);
  DEV_OR_FAIL(d2);
  if (!path) return NVML_ERROR_INVALID_ARGUMENT;
  *path = level(a, idx);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t d1, nvmlDevice_t d2, nvmlGpuP2PCapsIndex_t i,
                                              nvmlGpuP2PStatus_t *status) {
  (void)i;
  DEV_OR_FAIL_AS(a, d1);
  DEV_OR_FAIL(d2);
  if (!status) return NVML_ERROR_INVALID_ARGUMENT;
  *status = a == idx ? 5 /* NOT_SUPPORTED */ : 0 /* OK */;
  return NVML_SUCCESS;
}

static int peer_of(int i, unsigned int link) {
  int n = (int)fg_state()->device_count;
  return (i + 1 + (int)(link % (unsigned int)(n - 1))) % n;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *active) {
  DEV_OR_FAIL(device);
  (void)idx;
  if (!active || link >= VC_NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_env()->nvlink || fg_state()->device_count < 2) return NVML_ERROR_NOT_SUPPORTED;
  *active = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
  DEV_OR_FAIL(device);
  if (!pci || link >= VC_NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_env()->nvlink || fg_state()->device_count < 2) return NVML_ERROR_NOT_SUPPORTED;
  pci_info(peer_of(idx, link), pci);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
  DEV_OR_FAIL(device);
  (void)idx;
  (void)current;
  (void)pending;
  return NVML_ERROR_NOT_SUPPORTED;
}

