/* The container's shared accounting region: one file per container, mmapped by every process of
 * the container (and read by the node agent). Header and device blocks are pinned in
 * contract/region-layout.ts; the rest (lock, process slots) is documented in native/README.md. */
#ifndef VCUDA_REGION_H
#define VCUDA_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define VC_REGION_MAGIC "VCUDAREG"
#define VC_REGION_VERSION 1u
#define VC_REGION_HEADER_SIZE 4096u
#define VC_REGION_DEVICE_BLOCK_SIZE 256u
#define VC_REGION_MAX_DEVICES 16u
#define VC_REGION_SLOTS_OFFSET 8192u
#define VC_REGION_SLOT_SIZE 256u
#define VC_REGION_SLOT_CAPACITY 4096u
/* Host-pid map (written by the node agent, read by the NVML process-list hooks): right after the
 * process slots, one entry per process the node agent saw in the container, as many as slots. */
#define VC_REGION_PIDMAP_OFFSET (VC_REGION_SLOTS_OFFSET + VC_REGION_SLOT_SIZE * VC_REGION_SLOT_CAPACITY)
#define VC_REGION_PIDMAP_HEADER_SIZE 64u
#define VC_REGION_PIDMAP_ENTRY_SIZE 16u
#define VC_REGION_PIDMAP_CAPACITY 4096u
#define VC_REGION_PIDMAP_VERSION 1u
#define VC_REGION_PIDMAP_END \
  (VC_REGION_PIDMAP_OFFSET + VC_REGION_PIDMAP_HEADER_SIZE + VC_REGION_PIDMAP_ENTRY_SIZE * VC_REGION_PIDMAP_CAPACITY)
/* Burst slots: per process slot k, its burst bytes per device (what a dead process gives back to
 * the burst budget), from the page after the pid map. A region created before they existed is
 * extended (sparse) by the first process that opens it. */
#define VC_REGION_BURST_OFFSET ((VC_REGION_PIDMAP_END + 4095u) / 4096u * 4096u)
#define VC_REGION_BURST_SLOT_SIZE 256u
#define VC_REGION_FILE_SIZE (VC_REGION_BURST_OFFSET + VC_REGION_BURST_SLOT_SIZE * VC_REGION_SLOT_CAPACITY)

/* Device block i at 4096 + 256·i. */
struct vc_device_block {
  _Atomic uint64_t used_bytes;     /* 0: guaranteed bytes, all processes of the container (libvcuda) */
  _Atomic uint64_t burst_bytes;    /* 8: managed bytes above the guarantee (the burst), all processes */
  _Atomic uint64_t burst_evicted_bytes; /* 16: of those, on the host, where the driver reports it */
  _Atomic uint64_t burst_evictions;     /* 24: times the driver evicted them, where it reports it */
  /* 32: GPU busy ns of the container's launches on this device, measured in-process (sensor.c),
   * only ever added to; 40: samples behind it. Zero in a region written before the sensor. */
  _Atomic uint64_t busy_ns;
  _Atomic uint64_t busy_samples;
  uint8_t reserved0[16];           /* 48..63 */
  _Atomic uint64_t sample_seq;     /* 64: node agent seqlock over 72..95 */
  uint64_t sample_time_ms;         /* 72 */
  uint32_t measured_share_bp;      /* 80 */
  uint32_t card_busy_bp;           /* 84 */
  uint32_t sample_period_ms;       /* 88 */
  uint32_t reserved1;              /* 92 */
  uint8_t limiter_state[160];      /* 96..255: native/src/limiter.c */
};
_Static_assert(sizeof(struct vc_device_block) == VC_REGION_DEVICE_BLOCK_SIZE, "device block is 256 bytes");
_Static_assert(offsetof(struct vc_device_block, burst_bytes) == 8, "burst bytes at +8");
_Static_assert(offsetof(struct vc_device_block, burst_evicted_bytes) == 16, "burst evicted bytes at +16");
_Static_assert(offsetof(struct vc_device_block, burst_evictions) == 24, "burst evictions at +24");
_Static_assert(offsetof(struct vc_device_block, busy_ns) == 32, "busy ns at +32");
_Static_assert(offsetof(struct vc_device_block, busy_samples) == 40, "busy samples at +40");
_Static_assert(offsetof(struct vc_device_block, sample_seq) == 64, "sample seq at +64");
_Static_assert(offsetof(struct vc_device_block, measured_share_bp) == 80, "measured share at +80");
_Static_assert(offsetof(struct vc_device_block, limiter_state) == 96, "limiter state at +96");

/* Process slot at 8192 + 256·k. `state` is written last when claiming (release) so a reader that
 * sees LIVE also sees pid and start time. */
enum vc_slot_state { VC_SLOT_FREE = 0, VC_SLOT_LIVE = 1 };
struct vc_process_slot {
  _Atomic uint32_t state;                       /* 0 */
  uint32_t pid;                                 /* 4 */
  uint64_t start_ticks;                         /* 8: /proc/<pid>/stat field 22, tells pid reuse apart */
  _Atomic uint64_t used_bytes[VC_REGION_MAX_DEVICES]; /* 16..143 */
  uint8_t reserved[112];                        /* 144..255 */
};
_Static_assert(sizeof(struct vc_process_slot) == VC_REGION_SLOT_SIZE, "slot is 256 bytes");

/* Burst slot k at VC_REGION_BURST_OFFSET + 256·k, owned by whoever owns process slot k. */
struct vc_burst_slot {
  _Atomic uint64_t burst_bytes[VC_REGION_MAX_DEVICES];   /* 0..127 */
  _Atomic uint64_t evicted_bytes[VC_REGION_MAX_DEVICES]; /* 128..255 */
};
_Static_assert(sizeof(struct vc_burst_slot) == VC_REGION_BURST_SLOT_SIZE, "burst slot is 256 bytes");

/* The host-pid map's header at VC_REGION_PIDMAP_OFFSET. One writer (the node agent) updates it
 * under `seq`: odd while writing, even when the header and entries agree. */
#define VC_PIDMAP_FLAG_OWN_PID_NAMESPACE 1u /* the container's pids differ from the host's */
#define VC_PIDMAP_FLAG_TRUNCATED 2u         /* more processes than entries: some are missing */
struct vc_pidmap_header {
  _Atomic uint64_t seq;     /* 0 */
  uint32_t version;         /* 8: VC_REGION_PIDMAP_VERSION; 0 = never written */
  uint32_t entry_size;      /* 12: 16 */
  uint64_t published_ms;    /* 16: unix ms of this publication */
  uint32_t valid_ms;        /* 24: the map is stale once published_ms + valid_ms has passed */
  uint32_t count;           /* 28 */
  uint32_t flags;           /* 32: VC_PIDMAP_FLAG_* */
  uint8_t reserved[28];     /* 36..63 */
};
_Static_assert(sizeof(struct vc_pidmap_header) == VC_REGION_PIDMAP_HEADER_SIZE, "pid map header is 64 bytes");
_Static_assert(offsetof(struct vc_pidmap_header, published_ms) == 16, "published at +16");
_Static_assert(offsetof(struct vc_pidmap_header, valid_ms) == 24, "valid for at +24");
_Static_assert(offsetof(struct vc_pidmap_header, count) == 28, "count at +28");
_Static_assert(offsetof(struct vc_pidmap_header, flags) == 32, "flags at +32");

/* Entry j at VC_REGION_PIDMAP_OFFSET + 64 + 16·j, sorted by host pid. */
struct vc_pidmap_entry {
  uint32_t host_pid;        /* 0: the pid NVML reports */
  uint32_t container_pid;   /* 4: the same process in the container's pid namespace; 0 = unknown */
  uint64_t start_ticks;     /* 8: /proc/<pid>/stat field 22; 0 = unknown */
};
_Static_assert(sizeof(struct vc_pidmap_entry) == VC_REGION_PIDMAP_ENTRY_SIZE, "pid map entry is 16 bytes");

/* Opens (creating and initialising when needed) the region at `path` for `device_count` devices.
 * 0 or -errno with `err` filled. */
int vc_region_open(const char *path, uint32_t device_count, char *err, size_t errlen);

/* The device block of config record `config_index` (the limiter's entry point), or NULL when the
 * library is not initialised (bad config) or the index is out of range. */
struct vc_device_block *vc_region_device(int config_index);

/* Reserves `bytes` on device `index` for this process when the container stays within `limit`.
 * 0, -ENOMEM over the limit, -ENOSPC when no process slot is left, -ENODEV when not open. */
int vc_region_reserve(int index, uint64_t bytes, uint64_t limit);

/* Gives back what vc_region_reserve took. */
void vc_region_release(int index, uint64_t bytes);

/* The two budgets of a device: guaranteed bytes (ordinary device memory, within the limit file's
 * memory limit) and burst bytes (managed memory above it). */
enum vc_budget { VC_BUDGET_GUARANTEED = 0, VC_BUDGET_BURST = 1 };

#define VC_BUDGET_BIT(budget) (1u << (budget))

/* Reserves `bytes` in the first budget of the mask `budgets` (guaranteed before burst) where
 * guaranteed + burst stays within `ceiling` and, for the guaranteed budget, guaranteed stays
 * within `guarantee`: one lock, one reclaim pass before a refusal. Returns the budget taken, or
 * an error as vc_region_reserve. */
int vc_region_reserve_in(int index, uint64_t bytes, unsigned budgets, uint64_t guarantee, uint64_t ceiling);
void vc_region_release_in(int index, uint64_t bytes, enum vc_budget budget);

/* Container-wide burst bytes on device `index`. */
uint64_t vc_region_burst(int index);

/* Records this process's burst bytes on the host as the driver reports them (`evicted`, capped at
 * its burst bytes) and `new_evictions` more evictions; the device block then holds the sums. */
void vc_region_note_residency(int index, uint64_t evicted, uint64_t new_evictions);

/* Container-wide bytes in use on device `index` (after reclaiming dead processes at most every
 * 200 ms). */
uint64_t vc_region_used(int index);

/* Frees the slots of processes that died (kill -9 included); returns how many were freed. */
int vc_region_reclaim_dead(void);

/* Pids of the container's live processes (those holding a slot); returns how many were written. */
int vc_region_pids(uint32_t *pids, int max);

/* Copies the node agent's host-pid map when it is written, consistent (seqlock) and fresh at
 * `now_unix_ms`. Returns the number of entries copied (at most `max`, sorted by host pid) with
 * `*flags` set, or -1 when the map is absent, torn or stale: callers then fall back to the slot
 * pids. */
int vc_region_host_pids(struct vc_pidmap_entry *out, int max, uint64_t now_unix_ms, uint32_t *flags);

/* Releases this process's slot (normal exit) and unmaps. */
void vc_region_close(void);

#endif
