/* NVML as the container sees it: memory totals are the limit and usage is the container's,
 * process lists and per-process utilization keep only the container's processes.
 *
 * NVML reports host pids; a container with its own pid namespace knows its processes by other
 * pids. The node agent therefore publishes, in the region's host-pid map, every host pid of the
 * container with its pid inside the container and its start time (see visible_pid and
 * native/README.md). Without a fresh map, rows are kept when their pid holds a slot in the
 * accounting region, as before: inside a pid namespace nothing matches and the lists come back
 * empty. Another tenant's process is never shown. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charge.h"
#include "config.h"
#include "hooks.h"
#include "init.h"
#include "proc_stat.h"
#include "real.h"
#include "region.h"
#include "vc_nvml.h"

#define MAX_PIDS 4096
#define MAX_ROWS 1024

/* Config record of an NVML device, matched by UUID; -1 when unknown or not initialised. */
static int nvml_index(nvmlDevice_t device) {
  if (vc_init_ensure() != 0) return -1;
  __typeof__(&nvmlDeviceGetUUID) get = VC_REAL_NVML(nvmlDeviceGetUUID);
  char uuid[96];
  if (!get || get(device, uuid, sizeof uuid) != NVML_SUCCESS) return -1;
  return vc_config_find_uuid(uuid);
}

static void container_view(nvmlDevice_t device, unsigned long long physical_total, unsigned long long *total,
                           unsigned long long *used) {
  int index = nvml_index(device);
  *total = vc_visible_total(index, physical_total);
  /* Used is what free is not, so NVML and cuMemGetInfo agree for a bursting container too. */
  *used = *total - vc_container_free(index, *total);
}

VC_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  __typeof__(&nvmlDeviceGetMemoryInfo) real = VC_REAL_NVML(nvmlDeviceGetMemoryInfo);
  if (!real) return NVML_ERROR_LIBRARY_NOT_FOUND;
  nvmlReturn_t rc = real(device, memory);
  if (rc != NVML_SUCCESS || !memory) return rc;
  unsigned long long total, used;
  container_view(device, memory->total, &total, &used);
  memory->total = total;
  memory->used = used < total ? used : total;
  memory->free = total - memory->used;
  return NVML_SUCCESS;
}

VC_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
  __typeof__(&nvmlDeviceGetMemoryInfo_v2) real = VC_REAL_NVML(nvmlDeviceGetMemoryInfo_v2);
  if (!real) return NVML_ERROR_LIBRARY_NOT_FOUND;
  nvmlReturn_t rc = real(device, memory);
  if (rc != NVML_SUCCESS || !memory) return rc;
  unsigned long long total, used;
  container_view(device, memory->total, &total, &used);
  /* The driver's reserved memory is the card's, not the container's: report none. */
  memory->total = total;
  memory->reserved = 0;
  memory->used = used < total ? used : total;
  memory->free = total - memory->used;
  return NVML_SUCCESS;
}

/* Graphics and MPS lists have the same rows as the compute lists; declared here because only
 * these hooks use them. */
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                   nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                        nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                        nvmlProcessInfo_t *infos);

/* Who the container's processes are, read once per list call. */
struct pid_view {
  uint32_t *slot_pids; /* pids holding a slot in the region (the container's own pids) */
  int slot_count;
  struct vc_pidmap_entry *map; /* the node agent's host-pid map, sorted by host pid */
  int map_count;               /* -1: absent or stale */
  uint32_t map_flags;
};

static uint64_t unix_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* 0 or -1 (out of memory); an uninitialised library gets an empty view (shows nothing). */
static int load_view(struct pid_view *v) {
  memset(v, 0, sizeof *v);
  v->map_count = -1;
  v->slot_pids = malloc(sizeof *v->slot_pids * MAX_PIDS);
  v->map = malloc(sizeof *v->map * VC_REGION_PIDMAP_CAPACITY);
  if (!v->slot_pids || !v->map) return -1;
  if (vc_init_ensure() != 0) return 0;
  vc_region_reclaim_dead();
  v->slot_count = vc_region_pids(v->slot_pids, MAX_PIDS);
  v->map_count = vc_region_host_pids(v->map, VC_REGION_PIDMAP_CAPACITY, unix_now_ms(), &v->map_flags);
  return 0;
}

static void free_view(struct pid_view *v) {
  free(v->slot_pids);
  free(v->map);
}

static int has_pid(const uint32_t *pids, int n, unsigned int pid) {
  for (int i = 0; i < n; i++)
    if (pids[i] == pid) return 1;
  return 0;
}

static const struct vc_pidmap_entry *find_host_pid(const struct pid_view *v, unsigned int host_pid) {
  int lo = 0, hi = v->map_count;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (v->map[mid].host_pid < host_pid) lo = mid + 1;
    else hi = mid;
  }
  return lo < v->map_count && v->map[lo].host_pid == host_pid ? &v->map[lo] : NULL;
}

/* The pid to show for a row NVML reported with `host_pid`, or 0 when the row is not the
 * container's:
 *  1. in the fresh host-pid map with a container pid whose /proc start time (read in our own pid
 *     namespace) is the one published: that container pid. A pid that was reused since, or a
 *     process we cannot see, does not match;
 *  2. in the fresh map without a container pid (the node agent could not tell): the host pid;
 *  3. equal to a slot pid, unless the map says the container has its own pid namespace (slot pids
 *     and host pids are then different numbering, and an equal number is a coincidence). */
static unsigned int visible_pid(const struct pid_view *v, unsigned int host_pid) {
  const struct vc_pidmap_entry *e = v->map_count > 0 ? find_host_pid(v, host_pid) : NULL;
  if (e && e->container_pid == 0) return host_pid;
  if (e) {
    char state = 0;
    uint64_t start = 0;
    if (vc_proc_stat((pid_t)e->container_pid, &state, &start) == 0 &&
        (e->start_ticks == 0 || start == e->start_ticks) && state != 'Z' && state != 'X')
      return e->container_pid;
  }
  int namespaced = v->map_count >= 0 && (v->map_flags & VC_PIDMAP_FLAG_OWN_PID_NAMESPACE);
  if (!namespaced && has_pid(v->slot_pids, v->slot_count, host_pid)) return host_pid;
  return 0;
}

/* Keeps, in place, the rows of `n` whose pid (at byte `pid_at` of each row) the container may see,
 * rewritten to the pid the container knows; returns how many are kept. */
static unsigned int keep_visible_rows(const struct pid_view *view, unsigned char *rows, unsigned int n, size_t row,
                                      size_t pid_at) {
  unsigned int kept = 0;
  for (unsigned int i = 0; i < n; i++) {
    unsigned int pid;
    memcpy(&pid, rows + row * i + pid_at, sizeof pid);
    unsigned int shown = visible_pid(view, pid);
    if (!shown) continue;
    memmove(rows + row * kept, rows + row * i, row);
    memcpy(rows + row * kept++ + pid_at, &shown, sizeof shown);
  }
  return kept;
}

/* NVML's answer for per-process utilization samples: NOT_FOUND when none are left, otherwise the
 * samples or INSUFFICIENT_SIZE with the count needed. */
static nvmlReturn_t answer_samples(const unsigned char *rows, unsigned int kept, void *out, unsigned int *count,
                                   size_t row) {
  nvmlReturn_t rc = NVML_SUCCESS;
  if (kept == 0) rc = NVML_ERROR_NOT_FOUND;
  else if (!out || kept > *count) rc = NVML_ERROR_INSUFFICIENT_SIZE;
  else memcpy(out, rows, row * kept);
  *count = kept;
  return rc;
}

/* Runs the real list call into a private buffer, keeps the container's rows (with the pid the
 * container knows), and answers with NVML's count protocol (INSUFFICIENT_SIZE with the needed
 * count when the caller's is short). */
static nvmlReturn_t filtered_list(nvmlDevice_t device, unsigned int *count, void *out, size_t row,
                                  nvmlReturn_t (*real)(nvmlDevice_t, unsigned int *, void *)) {
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  struct pid_view view;
  int loaded = load_view(&view);
  unsigned char *rows = malloc(row * MAX_ROWS);
  if (!rows || loaded != 0) {
    free(rows);
    free_view(&view);
    return NVML_ERROR_MEMORY;
  }
  unsigned int n = MAX_ROWS;
  nvmlReturn_t rc = real(device, &n, rows);
  if (rc == NVML_SUCCESS) {
    unsigned int kept = keep_visible_rows(&view, rows, n, row, 0); /* pid is the first field of every row type */
    if (kept > *count || (kept > 0 && !out)) {
      *count = kept;
      rc = NVML_ERROR_INSUFFICIENT_SIZE;
    } else {
      if (kept) memcpy(out, rows, row * kept);
      *count = kept;
    }
  }
  free(rows);
  free_view(&view);
  return rc;
}

#define PROCESS_LIST_HOOK(name, row_type)                                                             \
  VC_EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *infoCount, row_type *infos) {        \
    __typeof__(&name) real = VC_REAL_NVML(name);                                                      \
    if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;                                                  \
    return filtered_list(device, infoCount, infos, sizeof(row_type),                                 \
                         (nvmlReturn_t (*)(nvmlDevice_t, unsigned int *, void *))real);               \
  }

PROCESS_LIST_HOOK(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t)
PROCESS_LIST_HOOK(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t)
PROCESS_LIST_HOOK(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t)
PROCESS_LIST_HOOK(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t)
PROCESS_LIST_HOOK(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_t)
PROCESS_LIST_HOOK(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t)
PROCESS_LIST_HOOK(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t)
PROCESS_LIST_HOOK(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_t)
PROCESS_LIST_HOOK(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t)

VC_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                                       unsigned int *processSamplesCount,
                                                       unsigned long long lastSeenTimeStamp) {
  __typeof__(&nvmlDeviceGetProcessUtilization) real = VC_REAL_NVML(nvmlDeviceGetProcessUtilization);
  if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
  if (!processSamplesCount) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int n = MAX_ROWS;
  nvmlProcessUtilizationSample_t *rows = malloc(sizeof *rows * MAX_ROWS);
  struct pid_view view;
  nvmlReturn_t rc = NVML_ERROR_MEMORY;
  if (load_view(&view) == 0 && rows) {
    rc = real(device, rows, &n, lastSeenTimeStamp);
    if (rc == NVML_SUCCESS) {
      unsigned int kept = keep_visible_rows(&view, (unsigned char *)rows, n, sizeof *rows,
                                            offsetof(nvmlProcessUtilizationSample_t, pid));
      rc = answer_samples((const unsigned char *)rows, kept, utilization, processSamplesCount, sizeof *rows);
    }
  }
  free(rows);
  free_view(&view);
  return rc;
}

/* The versioned successor: the same filter over the struct's caller-sized array. */
VC_EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                                             nvmlProcessesUtilizationInfo_t *procesesUtilInfo) {
  __typeof__(&nvmlDeviceGetProcessesUtilizationInfo) real = VC_REAL_NVML(nvmlDeviceGetProcessesUtilizationInfo);
  if (!real) return NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlProcessesUtilizationInfo_t *info = procesesUtilInfo;
  if (!info) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlProcessesUtilizationInfo_v1) return real(device, info); /* the driver judges */
  nvmlProcessesUtilizationInfo_t mine = {.version = nvmlProcessesUtilizationInfo_v1,
                                         .processSamplesCount = MAX_ROWS,
                                         .lastSeenTimeStamp = info->lastSeenTimeStamp,
                                         .procUtilArray = malloc(sizeof(nvmlProcessUtilizationInfo_v1_t) * MAX_ROWS)};
  struct pid_view view;
  nvmlReturn_t rc = NVML_ERROR_MEMORY;
  if (load_view(&view) == 0 && mine.procUtilArray) {
    rc = real(device, &mine);
    if (rc == NVML_SUCCESS) {
      unsigned char *rows = (unsigned char *)mine.procUtilArray;
      size_t row = sizeof *mine.procUtilArray;
      unsigned int kept = keep_visible_rows(&view, rows, mine.processSamplesCount, row,
                                            offsetof(nvmlProcessUtilizationInfo_v1_t, pid));
      rc = answer_samples(rows, kept, info->procUtilArray, &info->processSamplesCount, row);
    } else if (rc == NVML_ERROR_NOT_FOUND) {
      info->processSamplesCount = 0;
    }
  }
  free(mine.procUtilArray);
  free_view(&view);
  return rc;
}

void *vc_nvml_hook_for_export(const char *name) {
  static const struct {
    const char *name;
    void *fn;
  } table[] = {
      {"nvmlDeviceGetMemoryInfo", (void *)&nvmlDeviceGetMemoryInfo},
      {"nvmlDeviceGetMemoryInfo_v2", (void *)&nvmlDeviceGetMemoryInfo_v2},
      {"nvmlDeviceGetComputeRunningProcesses", (void *)&nvmlDeviceGetComputeRunningProcesses},
      {"nvmlDeviceGetComputeRunningProcesses_v2", (void *)&nvmlDeviceGetComputeRunningProcesses_v2},
      {"nvmlDeviceGetComputeRunningProcesses_v3", (void *)&nvmlDeviceGetComputeRunningProcesses_v3},
      {"nvmlDeviceGetGraphicsRunningProcesses", (void *)&nvmlDeviceGetGraphicsRunningProcesses},
      {"nvmlDeviceGetGraphicsRunningProcesses_v2", (void *)&nvmlDeviceGetGraphicsRunningProcesses_v2},
      {"nvmlDeviceGetGraphicsRunningProcesses_v3", (void *)&nvmlDeviceGetGraphicsRunningProcesses_v3},
      {"nvmlDeviceGetMPSComputeRunningProcesses", (void *)&nvmlDeviceGetMPSComputeRunningProcesses},
      {"nvmlDeviceGetMPSComputeRunningProcesses_v2", (void *)&nvmlDeviceGetMPSComputeRunningProcesses_v2},
      {"nvmlDeviceGetMPSComputeRunningProcesses_v3", (void *)&nvmlDeviceGetMPSComputeRunningProcesses_v3},
      {"nvmlDeviceGetProcessUtilization", (void *)&nvmlDeviceGetProcessUtilization},
      {"nvmlDeviceGetProcessesUtilizationInfo", (void *)&nvmlDeviceGetProcessesUtilizationInfo},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(table[i].name, name) == 0) return table[i].fn;
  return NULL;
}
