/* Host-wide state of the simulated GPUs, in a shared file (FAKEGPU_STATE) mapped by every process
 * using the fake driver or fake NVML: device memory, per-process usage, the per-device kernel
 * timeline (kernels of ALL processes serialize per device, like time-slicing), busy-time buckets
 * (the driver's exact accounting, and NVML's own sampling intervals), and injected Xid events.
 * One robust process-shared mutex guards it. */
#ifndef FAKEGPU_STATE_H
#define FAKEGPU_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "fake_env.h"
#include "fake_mig.h"

#define FG_MAX_PROCS 256
#define FG_BUCKETS 64
#define FG_NVML_BUCKETS 64 /* NVML intervals: half its sample buffer (~5 s at 1/6 s), half work queued ahead */
#define FG_STATE_VERSION 4 /* layout; a file of another layout is refused, never reinterpreted */
#define FG_XID_RING 64

struct fg_proc {
  uint32_t live;
  uint32_t pid;
  uint64_t start_ticks;
  uint64_t used[FG_STATE_DEVICES]; /* by state index: cards, then MIG devices */
  uint64_t context_mask; /* state indexes this process has a context on */
  /* Managed memory, per process and device (not per page): resident bytes are part of used[];
   * host bytes were evicted (or never fitted) and come back when a kernel of the process runs. */
  uint64_t managed_resident[FG_STATE_DEVICES];
  uint64_t managed_host[FG_STATE_DEVICES];
  uint64_t evictions[FG_STATE_DEVICES]; /* times an ordinary allocation evicted this process's pages */
};

/* Busy time of one period (an accounting period, or an NVML sampling interval), in total and per
 * process slot. */
struct fg_bucket {
  uint64_t period; /* absolute period number (monotonic ns / period length) */
  uint64_t busy_ns;
  uint64_t proc_busy_ns[FG_MAX_PROCS];
};

struct fg_device {
  uint64_t memory_total;
  uint64_t memory_used;
  uint64_t busy_until_ns; /* end of the last kernel scheduled on the device timeline */
  uint64_t busy_total_ns;
  uint64_t next_va;
  uint64_t xid_seq; /* events injected so far; entry i at xid[i % FG_XID_RING] */
  uint64_t xid[FG_XID_RING];
  struct fg_bucket buckets[FG_BUCKETS];          /* FAKEGPU_SAMPLE_MS periods: ground truth */
  struct fg_bucket nvml_buckets[FG_NVML_BUCKETS]; /* FAKEGPU_NVML_SAMPLE_MS intervals: what NVML reports */
};

struct fg_state {
  char magic[8];
  uint32_t version;
  uint32_t device_count;
  uint32_t sms;
  _Atomic uint32_t ready;
  int64_t realtime_offset_ns; /* CLOCK_REALTIME - CLOCK_MONOTONIC at creation: NVML timestamps */
  uint64_t sample_ns;
  uint64_t nvml_sample_ns; /* NVML's sampling interval; the creator's FAKEGPU_NVML_SAMPLE_MS */
  uint64_t nvml_delay_ns;  /* how long after an interval ends NVML publishes it */
  uint32_t nvml_stamp_published; /* samples stamped when published, not with their interval's end */
  uint32_t reserved;
  pthread_mutex_t lock;
  struct fg_proc procs[FG_MAX_PROCS];
  struct fg_device devices[FG_STATE_DEVICES]; /* cards, then MIG devices (fake_mig.h) */
  struct fg_mig_card mig[FG_MAX_DEVICES];
  struct fg_mig_slot mig_slots[FG_MIG_SLOTS];
  uint64_t mig_generation; /* compute instances created so far: each MIG device's UUID differs */
};

/* The mapped state (created on first use), or NULL with a message on stderr. */
struct fg_state *fg_state(void);

/* What this process enumerates (FAKEGPU_VISIBLE_DEVICES resolved against the node once the state
 * is open; 0 devices when the state cannot be opened or the list names an unknown device).
 * CUDA ordinals and NVML indexes are positions in this list; the state is indexed by node index. */
int fg_visible_count(void);
/* State index of visible device `ordinal`; -1 when out of range. */
int fg_node(int ordinal);
/* Ordinal of state index `node` in this process; -1 when it is not visible. */
int fg_ordinal(int node);
/* NVML's enumeration: the cards of the visible list (a MIG device's parent in its place, once).
 * CUDA's (the three above) is the visible list with MIG devices as themselves, a card in MIG mode
 * left out, then narrowed by CUDA_VISIBLE_DEVICES (fake_visible.c). */
int fg_nvml_count(void);
int fg_nvml_node(int ordinal);
int fg_nvml_ordinal(int node);
/* Resolves both lists once the state is mapped (called by the state's opening). */
void fg_resolve_visible(struct fg_state *s, const struct fg_env *e);

/* Lock/unlock the state (repairs nothing: every update keeps it consistent at each store). */
void fg_lock(void);
void fg_unlock(void);

uint64_t fg_now_ns(void);
void fg_sleep_until(uint64_t mono_ns);

/* This process's slot (claimed on first use, dead processes' slots and memory reclaimed first);
 * -1 when all are taken. Caller holds the lock. */
int fg_own_proc_locked(void);

/* Frees slots of dead processes and their device memory. Caller holds the lock. */
void fg_reclaim_dead_locked(void);

/* Schedules `duration_ns` of work on device `dev` no earlier than `not_before_ns`; returns its end.
 * Busy time is credited to this process's slot in the accounting and the NVML buckets. */
uint64_t fg_schedule(int dev, uint64_t not_before_ns, uint64_t duration_ns);
/* When device `dev` reaches a zero-length item submitted now behind `not_before_ns`: after every
 * kernel queued on it so far (any process), as an event recorded now is timestamped. Schedules
 * nothing. */
uint64_t fg_reach(int dev, uint64_t not_before_ns);

/* Device memory of node device `dev`: 0, or -1 when the device is full or dev is negative. An
 * ordinary allocation that does not fit first evicts managed memory (any process's, the largest
 * resident first) to the host, as the UVM driver's eviction callbacks do. */
int fg_mem_charge(int dev, uint64_t bytes);
void fg_mem_uncharge(int dev, uint64_t bytes);
void fg_mark_context(int dev);

/* Managed memory of this process on node device `dev` (fake_state.c): an allocation is resident
 * as far as the device has free memory (it evicts nothing) and on the host for the rest; a free
 * gives back host bytes first. */
void fg_managed_alloc(int dev, uint64_t bytes);
void fg_managed_free(int dev, uint64_t bytes);
/* A kernel of this process on `dev` touches its managed memory: host bytes migrate back as far
 * as the device has free memory. Returns what the kernel pays for it, ns. Caller holds the lock. */
uint64_t fg_managed_touch_locked(int dev);
/* This process's managed bytes on `dev`: resident, on the host, and evictions suffered. */
void fg_managed_residency(int dev, uint64_t *resident, uint64_t *host, uint64_t *evictions);

/* Whether a live process holds memory or a context on state index `dev` (a card or a MIG device):
 * what makes MIG changes there IN_USE (fake_mig.c). Caller holds the lock. */
int fg_mig_in_use_locked(struct fg_state *s, int dev);

/* Appends an Xid event for `dev`. 0, or -1 when dev is out of range. */
int fg_inject_xid(int dev, uint64_t xid);

#endif
