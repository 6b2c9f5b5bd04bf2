/* Fake NVML over the shared fake state: what any process allocated or ran shows up here.
 * Utilization is sampled the way NVML samples it (native/COMPUTE.md, "The sensor"): per NVML
 * interval (FAKEGPU_NVML_SAMPLE_MS), in whole percent rounded down, published
 * FAKEGPU_NVML_DELAY_MS after the interval ends and stamped with its end (FAKEGPU_NVML_STAMP);
 * one sample per (process, interval) in which the process ran, newer than lastSeenTimeStamp. Topology: devices
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
/* MIG device handles: mig_handles[k] is state index FG_MAX_DEVICES + k while that slot is live. */
static struct nvmlDevice_st mig_handles[FG_MIG_SLOTS];
static int init_count;

nvmlDevice_t fg_nvml_handle(int node) {
  int ordinal = fg_nvml_ordinal(node);
  return ordinal >= 0 ? &handles[ordinal] : NULL;
}

nvmlDevice_t fg_nvml_mig_handle(int dev) {
  int k = dev - FG_MAX_DEVICES;
  if (k < 0 || k >= FG_MIG_SLOTS) return NULL;
  mig_handles[k].index = dev;
  return &mig_handles[k];
}

static int ordinal_of(nvmlDevice_t d) {
  return d && d >= handles && d < handles + fg_nvml_count() ? (int)(d - handles) : -1;
}

/* A MIG handle's state index while its device exists and its card is visible; -2 otherwise. */
static int mig_index_of(nvmlDevice_t d) {
  if (!d || d < mig_handles || d >= mig_handles + FG_MIG_SLOTS) return -2;
  int parent = fg_dev_parent(FG_MAX_DEVICES + (int)(d - mig_handles));
  return parent >= 0 && fg_nvml_ordinal(parent) >= 0 ? FG_MAX_DEVICES + (int)(d - mig_handles) : -2;
}

/* State index of a handle (a card's node index, or a MIG device's); -1 not initialised, -2 not
 * one of ours. */
int fg_nvml_index(nvmlDevice_t d) {
  if (init_count <= 0) return -1;
  int ordinal = ordinal_of(d);
  return ordinal >= 0 ? fg_nvml_node(ordinal) : mig_index_of(d);
}



FG_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  if (!fg_state()) return NVML_ERROR_DRIVER_NOT_LOADED;
  for (int i = 0; i < FG_MAX_DEVICES; i++) handles[i].index = fg_nvml_node(i);
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
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
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
  *count = (unsigned int)fg_nvml_count();
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= (unsigned int)fg_nvml_count()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &handles[index];
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < fg_nvml_count(); i++) {
    char text[48];
    fg_device_uuid_text(fg_nvml_node(i), text);
    if (strcasecmp(text, uuid) == 0) {
      *device = &handles[i];
      return NVML_SUCCESS;
    }
  }
  int mig = fg_mig_device_by_uuid(uuid); /* a MIG device of a visible card, by its MIG- UUID */
  if (mig >= 0 && fg_nvml_ordinal(fg_dev_parent(mig)) >= 0) {
    *device = fg_nvml_mig_handle(mig);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

static void pci_info(int i, nvmlPciInfo_t *pci) {
  memset(pci, 0, sizeof *pci);
  pci->bus = fg_dev_pci_bus(i); /* a MIG device: its card's */
  pci->pciDeviceId = 0x233010DEu;
  pci->pciSubSystemId = 0x16C110DEu;
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *busId, nvmlDevice_t *device) {
  if (init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (!busId || !device) return NVML_ERROR_INVALID_ARGUMENT;
  for (int i = 0; i < fg_nvml_count(); i++) {
    nvmlPciInfo_t pci;
    pci_info(fg_nvml_node(i), &pci);
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
  fg_dev_uuid_text(idx, text); /* MIG- for a MIG device */
  return copy_text(uuid, length, text);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  DEV_OR_FAIL(device);
  char text[160];
  fg_dev_name(idx, text, sizeof text);
  return copy_text(name, length, text);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  CARD_OR_FAIL(device);
  (void)idx;
  if (!index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = (unsigned int)ordinal_of(device); /* the enumeration index; the minor number stays the node's */
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
  CARD_OR_FAIL(device);
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
  struct fg_state *s = fg_state();
  fg_lock();
  fg_reclaim_dead_locked();
  m->total = s->devices[idx].memory_total;
  m->used = s->devices[idx].memory_used;
  /* A card in MIG mode: what its MIG devices hold is the card's too. */
  for (int k = 0; idx < FG_MAX_DEVICES && k < FG_MIG_SLOTS; k++)
    if (s->mig_slots[k].live && s->mig_slots[k].parent == (uint32_t)idx) m->used += s->devices[FG_MAX_DEVICES + k].memory_used;
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

/* NVML's view of the timeline: interval j covers [j Q, (j+1) Q) of monotonic time; its samples
 * appear D after it ends, stamped (CPU µs) with its end, or with the moment they appear when the
 * node was made with FAKEGPU_NVML_STAMP=published (a timestamp late by D for the activity it
 * describes). The newest published interval is -1 before the first one. */
struct nvml_view {
  uint64_t interval_ns; /* Q */
  uint64_t delay_ns;    /* D */
  uint64_t stamp_late_ns; /* 0, or D */
  int64_t newest;       /* newest published interval */
  int64_t oldest;       /* oldest interval still in the sample buffer */
};

static struct nvml_view nvml_view(const struct fg_state *s) {
  struct nvml_view v = {.interval_ns = s->nvml_sample_ns,
                        .delay_ns = s->nvml_delay_ns,
                        .stamp_late_ns = s->nvml_stamp_published ? s->nvml_delay_ns : 0,
                        .newest = -1};
  uint64_t now = fg_now_ns();
  if (now >= v.delay_ns + v.interval_ns) v.newest = (int64_t)((now - v.delay_ns) / v.interval_ns) - 1;
  /* The other half of the ring takes work queued ahead (fg_schedule), so it is not the buffer. */
  int64_t kept = (int64_t)(now / v.interval_ns) - (FG_NVML_BUCKETS / 2 - 1);
  v.oldest = kept > 0 ? kept : 0;
  return v;
}

/* The bucket of interval j, or NULL when nothing ran in it (or it left the buffer). Lock held. */
static const struct fg_bucket *nvml_bucket(const struct fg_device *d, int64_t j) {
  const struct fg_bucket *b = &d->nvml_buckets[(uint64_t)j % FG_NVML_BUCKETS];
  return b->period == (uint64_t)j ? b : NULL;
}

/* Whole percent of `span` that was busy, rounded down as an integer ratio is. */
static unsigned int floor_percent(uint64_t busy, uint64_t span) {
  unsigned int pct = span ? (unsigned int)(busy * 100 / span) : 0;
  return pct > 100 ? 100 : pct;
}

/* A MIG device, or a card in MIG mode: the real library has no utilization there. */
static int mig_side(int idx) { return idx >= FG_MAX_DEVICES || fg_mig_mode(idx) == 1; }

/* The card's busy share over the published intervals that make up the last
 * FAKEGPU_UTIL_WINDOW_MS (at least one), as late as the process samples. */
FG_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u) {
  DEV_OR_FAIL(device);
  if (!u) return NVML_ERROR_INVALID_ARGUMENT;
  if (mig_side(idx)) return NVML_ERROR_NOT_SUPPORTED;
  struct fg_state *s = fg_state();
  struct nvml_view v = nvml_view(s);
  uint64_t want = (fg_env()->util_window_ns + v.interval_ns / 2) / v.interval_ns;
  int64_t from = v.newest + 1 - (int64_t)(want ? want : 1);
  if (from < v.oldest) from = v.oldest;
  uint64_t busy = 0;
  fg_lock();
  for (int64_t j = from; j <= v.newest; j++) {
    const struct fg_bucket *b = nvml_bucket(&s->devices[idx], j);
    if (b) busy += b->busy_ns;
  }
  fg_unlock();
  u->gpu = v.newest >= from ? floor_percent(busy, (uint64_t)(v.newest - from + 1) * v.interval_ns) : 0;
  u->memory = u->gpu / 2;
  return NVML_SUCCESS;
}

/* Static so the versioned export below reaches it directly: a call through the exported name
 * would be interposed by a preloaded libvcuda and filtered twice. */
static nvmlReturn_t process_samples(nvmlDevice_t device, nvmlProcessUtilizationSample_t *out, unsigned int *count,
                                    unsigned long long lastSeen) {
  DEV_OR_FAIL(device);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  if (mig_side(idx) || !fg_env()->nvml_process_util) return NVML_ERROR_NOT_SUPPORTED; /* as under MIG */
  struct fg_state *s = fg_state();
  struct fg_device *d = &s->devices[idx];
  struct nvml_view v = nvml_view(s);
  unsigned int n = 0, cap = out ? *count : 0;
  int short_buffer = 0;
  fg_lock();
  fg_reclaim_dead_locked();
  for (int64_t j = v.oldest; j <= v.newest; j++) {
    const struct fg_bucket *b = nvml_bucket(d, j);
    if (!b || b->busy_ns == 0) continue;
    uint64_t stamp = ((uint64_t)j + 1) * v.interval_ns + v.stamp_late_ns;
    unsigned long long ts = (unsigned long long)(((int64_t)stamp + s->realtime_offset_ns) / 1000);
    if (ts <= lastSeen) continue;
    /* As an H200 (driver 580.159.04) answered for processes time-slicing it: the interval's whole
     * busy time to one process, 0 % to the others (BENCHMARKS.md, "Real GPU"). */
    int busiest = -1;
    if (fg_env()->nvml_one_process)
      for (int k = 0; k < FG_MAX_PROCS; k++)
        if (s->procs[k].live && b->proc_busy_ns[k] > 0 && (busiest < 0 || b->proc_busy_ns[k] > b->proc_busy_ns[busiest]))
          busiest = k;
    for (int k = 0; k < FG_MAX_PROCS; k++) {
      if (!s->procs[k].live || b->proc_busy_ns[k] == 0) continue;
      if (n < cap) {
        uint64_t ns = busiest < 0 ? b->proc_busy_ns[k] : (k == busiest ? b->busy_ns : 0);
        unsigned int pct = floor_percent(ns, v.interval_ns);
        out[n] = (nvmlProcessUtilizationSample_t){.pid = s->procs[k].pid, .timeStamp = ts, .smUtil = pct, .memUtil = pct / 2};
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
  if (!fg_env()->nvml_util_info) return NVML_ERROR_NOT_SUPPORTED; /* FAKEGPU_NVML_UTIL_INFO=0: an older driver */
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
  CARD_OR_FAIL_AS(a, d1);
  CARD_OR_FAIL(d2);
  if (!path) return NVML_ERROR_INVALID_ARGUMENT;
  *path = level(a, idx);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t d1, nvmlDevice_t d2, nvmlGpuP2PCapsIndex_t i,
                                              nvmlGpuP2PStatus_t *status) {
  (void)i;
  CARD_OR_FAIL_AS(a, d1);
  CARD_OR_FAIL(d2);
  if (!status) return NVML_ERROR_INVALID_ARGUMENT;
  *status = a == idx ? 5 /* NOT_SUPPORTED */ : 0 /* OK */;
  return NVML_SUCCESS;
}

static int peer_of(int i, unsigned int link) {
  int n = (int)fg_state()->device_count;
  return (i + 1 + (int)(link % (unsigned int)(n - 1))) % n;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *active) {
  CARD_OR_FAIL(device);
  (void)idx;
  if (!active || link >= VC_NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_env()->nvlink || fg_state()->device_count < 2) return NVML_ERROR_NOT_SUPPORTED;
  *active = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
  CARD_OR_FAIL(device);
  if (!pci || link >= VC_NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_env()->nvlink || fg_state()->device_count < 2) return NVML_ERROR_NOT_SUPPORTED;
  pci_info(peer_of(idx, link), pci);
  return NVML_SUCCESS;
}
