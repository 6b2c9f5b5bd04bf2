/* Shared accounting region. One robust process-shared mutex guards every change to the device
 * counters and process slots: a reservation is check + two updates, and a process killed inside
 * that critical section must not leave them inconsistent. With PTHREAD_MUTEX_ROBUST the next
 * locker gets EOWNERDEAD and rebuilds the device counters from the slots. Uncontended, the lock
 * is one atomic instruction (futex), and allocation is not the launch fast path.
 *
 * Dead processes: each slot records pid + start time. A slot whose pid is gone, a zombie, or now
 * another process (start time differs) is freed and its bytes returned by whichever process of
 * the container next reserves, queries usage, or fails a reservation, at most every 200 ms, so a
 * process killed with -9 gives its memory back within a second of the next call. */
#define _GNU_SOURCE
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "init.h"
#include "log.h"
#include "proc_stat.h"

#define READY_MARK 0x59444552u /* "REDY" */
#define RECLAIM_PERIOD_MS 200u

struct region_header {
  char magic[8];                   /* 0 */
  uint32_t version;                /* 8 */
  uint32_t header_size;            /* 12 */
  uint32_t device_count;           /* 16 */
  uint32_t device_block_size;      /* 20 */
  uint32_t slot_capacity;          /* 24 */
  uint32_t slot_size;              /* 28 */
  _Atomic uint32_t slot_high_water; /* 32: slots [0, high water) have ever been used */
  _Atomic uint32_t ready;          /* 36: READY_MARK once the lock is initialised */
  _Atomic uint64_t last_reclaim_ms; /* 40 */
  uint8_t reserved[16];            /* 48 */
  pthread_mutex_t lock;            /* 64 */
};
_Static_assert(offsetof(struct region_header, lock) == 64, "lock at 64");
_Static_assert(sizeof(struct region_header) <= 128, "header fields fit in 128 bytes");

static struct {
  unsigned char *map;
  uint32_t device_count;
  int own_slot;
  pid_t own_pid;
} rg = {.own_slot = -1};

static struct region_header *hdr(void) { return (struct region_header *)rg.map; }

/* getpid() is a system call on current glibc; the pid only changes across fork. */
static pid_t cached_pid;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void forget_pid(void) { cached_pid = 0; }
static void register_atfork(void) { pthread_atfork(NULL, NULL, forget_pid); }
static pid_t self_pid(void) {
  if (!cached_pid) cached_pid = getpid();
  return cached_pid;
}

static struct vc_device_block *block(uint32_t i) {
  return (struct vc_device_block *)(rg.map + VC_REGION_HEADER_SIZE + VC_REGION_DEVICE_BLOCK_SIZE * i);
}

static struct vc_process_slot *slot(uint32_t k) {
  return (struct vc_process_slot *)(rg.map + VC_REGION_SLOTS_OFFSET + VC_REGION_SLOT_SIZE * k);
}

static struct vc_burst_slot *burst_slot(uint32_t k) {
  return (struct vc_burst_slot *)(rg.map + VC_REGION_BURST_OFFSET + VC_REGION_BURST_SLOT_SIZE * k);
}

static uint64_t sub_floor(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int is_slot_dead(const struct vc_process_slot *s) {
  char state = 0;
  uint64_t start = 0;
  if (vc_proc_stat((pid_t)s->pid, &state, &start) != 0) return 1;
  if (state == 'Z' || state == 'X') return 1;
  return start != s->start_ticks;
}

/* Takes `mine` out of a container-wide counter and zeroes the slot's share. */
static void give_back(_Atomic uint64_t *total, _Atomic uint64_t *mine) {
  uint64_t m = atomic_load_explicit(mine, memory_order_relaxed);
  if (!m) return;
  atomic_store_explicit(total, sub_floor(atomic_load_explicit(total, memory_order_relaxed), m), memory_order_release);
  atomic_store_explicit(mine, 0, memory_order_relaxed);
}

static void free_slot_locked(struct vc_process_slot *s) {
  struct vc_burst_slot *b = burst_slot((uint32_t)(((unsigned char *)s - rg.map - VC_REGION_SLOTS_OFFSET) / VC_REGION_SLOT_SIZE));
  for (uint32_t i = 0; i < rg.device_count; i++) {
    give_back(&block(i)->used_bytes, &s->used_bytes[i]);
    give_back(&block(i)->burst_bytes, &b->burst_bytes[i]);
    give_back(&block(i)->burst_evicted_bytes, &b->evicted_bytes[i]);
  }
  atomic_store_explicit(&s->state, VC_SLOT_FREE, memory_order_release);
}

static int reclaim_locked(void) {
  int freed = 0;
  uint32_t hw = atomic_load_explicit(&hdr()->slot_high_water, memory_order_acquire);
  for (uint32_t k = 0; k < hw; k++) {
    struct vc_process_slot *s = slot(k);
    if (atomic_load_explicit(&s->state, memory_order_acquire) != VC_SLOT_LIVE) continue;
    if ((int)k == rg.own_slot && rg.own_pid == self_pid()) continue;
    if (!is_slot_dead(s)) continue;
    vc_log(VC_LOG_INFO, "reclaiming slot %u of dead pid %u", k, s->pid);
    free_slot_locked(s);
    freed++;
  }
  atomic_store_explicit(&hdr()->last_reclaim_ms, now_ms(), memory_order_relaxed);
  return freed;
}

/* The previous owner died holding the lock: rebuild the counters from the slots. */
static void repair_locked(void) {
  uint32_t hw = atomic_load_explicit(&hdr()->slot_high_water, memory_order_acquire);
  for (uint32_t i = 0; i < rg.device_count; i++) {
    uint64_t sum = 0, burst = 0, evicted = 0;
    for (uint32_t k = 0; k < hw; k++) {
      if (atomic_load_explicit(&slot(k)->state, memory_order_acquire) != VC_SLOT_LIVE) continue;
      sum += atomic_load_explicit(&slot(k)->used_bytes[i], memory_order_relaxed);
      burst += atomic_load_explicit(&burst_slot(k)->burst_bytes[i], memory_order_relaxed);
      evicted += atomic_load_explicit(&burst_slot(k)->evicted_bytes[i], memory_order_relaxed);
    }
    atomic_store_explicit(&block(i)->used_bytes, sum, memory_order_release);
    atomic_store_explicit(&block(i)->burst_bytes, burst, memory_order_release);
    atomic_store_explicit(&block(i)->burst_evicted_bytes, evicted, memory_order_release);
  }
  vc_log(VC_LOG_WARN, "a process died while updating the accounting region; counters rebuilt from slots");
}

/* A robust process-shared mutex; 0 or an errno. */
static int init_lock(pthread_mutex_t *m) {
  pthread_mutexattr_t attr;
  int rc = pthread_mutexattr_init(&attr);
  if (rc == 0) rc = pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (rc == 0) rc = pthread_mutex_init(m, &attr);
  pthread_mutexattr_destroy(&attr);
  return rc;
}

/* glibc keeps a robust mutex's owner thread id in its first word (the futex word). */
#define LOCK_TID_MASK 0x3fffffffu
static _Atomic uint32_t *lock_word(void) { return (_Atomic uint32_t *)(void *)&hdr()->lock; }

static int tid_alive(uint32_t tid) { return tid != 0 && (kill((pid_t)tid, 0) == 0 || errno == EPERM); }

/* The lock word `seen` names an owner that is gone (a region that outlived a node crash, a
 * process that died outside the robust list) or is garbage, or has not moved for LOCK_STUCK_MS.
 * Exactly one waiter wins the exchange of that word and re-initialises the mutex; everyone then
 * locks it again and the winner rebuilds the counters. */
static int take_over(uint32_t seen) {
  uint32_t expect = seen;
  if (!atomic_compare_exchange_strong(lock_word(), &expect, (uint32_t)gettid() & LOCK_TID_MASK)) return 0;
  vc_log(VC_LOG_ERROR, "accounting region lock word %#x: owner gone or lock corrupt; re-initialising it", seen);
  return init_lock(&hdr()->lock) == 0;
}

#define LOCK_STEP_MS 100u   /* re-check the owner this often */
#define LOCK_STUCK_MS 5000u /* a word unchanged this long is stuck: a holder takes microseconds */
#define LOCK_GIVE_UP_MS 15000u

static struct timespec deadline_in(uint32_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)(ms % 1000u) * 1000000L;
  ts.tv_sec += (time_t)(ms / 1000u) + ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  return ts;
}

/* Every wait is bounded: in steps of LOCK_STEP_MS, with the owner checked at each step. Returns
 * 0 with the lock held, or an errno (refuse the operation) after LOCK_GIVE_UP_MS. */
static int lock_region(void) {
  uint64_t start = now_ms(), word_since = start;
  uint32_t last_word = atomic_load_explicit(lock_word(), memory_order_relaxed);
  int repair = 0, rc = 0;
  while (now_ms() - start < LOCK_GIVE_UP_MS) {
    struct timespec deadline = deadline_in(LOCK_STEP_MS);
    rc = pthread_mutex_timedlock(&hdr()->lock, &deadline);
    if (rc == 0 || rc == EOWNERDEAD) {
      if (rc == EOWNERDEAD || repair) {
        repair_locked();
        if (rc == EOWNERDEAD) pthread_mutex_consistent(&hdr()->lock);
      }
      return 0;
    }
    uint32_t word = atomic_load_explicit(lock_word(), memory_order_relaxed);
    if (word != last_word) word_since = now_ms();
    last_word = word;
    int stuck = now_ms() - word_since >= LOCK_STUCK_MS;
    int dead = word != 0 && !tid_alive(word & LOCK_TID_MASK);
    if (rc != ETIMEDOUT || dead || (word != 0 && stuck)) repair |= take_over(word);
  }
  vc_log(VC_LOG_ERROR, "accounting region lock: not acquired within %u ms (%s); refusing", LOCK_GIVE_UP_MS,
         strerror(rc));
  return rc ? rc : ETIMEDOUT;
}

static void unlock_region(void) { pthread_mutex_unlock(&hdr()->lock); }

static void maybe_reclaim_locked(void) {
  uint64_t last = atomic_load_explicit(&hdr()->last_reclaim_ms, memory_order_relaxed);
  if (now_ms() - last >= RECLAIM_PERIOD_MS) reclaim_locked();
}

/* This process's slot, claimed on first use (again after fork). -ENOSPC when all are taken. */
static int own_slot_locked(void) {
  pid_t pid = self_pid();
  if (rg.own_slot >= 0 && rg.own_pid == pid) return rg.own_slot;
  char state;
  uint64_t start = 0;
  if (vc_proc_stat(pid, &state, &start) != 0) return -EIO;
  struct region_header *h = hdr();
  uint32_t hw = atomic_load_explicit(&h->slot_high_water, memory_order_acquire);
  uint32_t k = 0;
  for (; k < hw; k++) {
    if (atomic_load_explicit(&slot(k)->state, memory_order_acquire) == VC_SLOT_FREE) break;
  }
  if (k == hw) {
    if (hw == VC_REGION_SLOT_CAPACITY && reclaim_locked() > 0) return own_slot_locked();
    if (hw == VC_REGION_SLOT_CAPACITY) {
      vc_log(VC_LOG_ERROR, "all %u process slots of the accounting region are in use; refusing this allocation",
             VC_REGION_SLOT_CAPACITY);
      return -ENOSPC;
    }
    atomic_store_explicit(&h->slot_high_water, hw + 1, memory_order_release);
  }
  struct vc_process_slot *s = slot(k);
  s->pid = (uint32_t)pid;
  s->start_ticks = start;
  struct vc_burst_slot *b = burst_slot(k);
  for (uint32_t i = 0; i < VC_REGION_MAX_DEVICES; i++) {
    atomic_store_explicit(&s->used_bytes[i], 0, memory_order_relaxed);
    atomic_store_explicit(&b->burst_bytes[i], 0, memory_order_relaxed);
    atomic_store_explicit(&b->evicted_bytes[i], 0, memory_order_relaxed);
  }
  atomic_store_explicit(&s->state, VC_SLOT_LIVE, memory_order_release);
  rg.own_slot = (int)k;
  rg.own_pid = pid;
  return (int)k;
}

/* exec keeps the pid and the start time but not the address space: the driver freed everything
 * the old image allocated, and no destructor ran to say so. A slot with this process's identity
 * at open time is therefore the old image's; its charges are released and the slot freed. */
static void drop_pre_exec_slot(void) {
  char state;
  uint64_t start = 0;
  pid_t pid = self_pid();
  if (vc_proc_stat(pid, &state, &start) != 0 || lock_region() != 0) return;
  uint32_t hw = atomic_load_explicit(&hdr()->slot_high_water, memory_order_acquire);
  for (uint32_t k = 0; k < hw; k++) {
    struct vc_process_slot *s = slot(k);
    if (atomic_load_explicit(&s->state, memory_order_acquire) != VC_SLOT_LIVE) continue;
    if (s->pid != (uint32_t)pid || s->start_ticks != start) continue;
    vc_log(VC_LOG_INFO, "slot %u held by this pid before exec: its memory is gone, releasing it", k);
    free_slot_locked(s);
  }
  unlock_region();
}

static int init_header_locked(uint32_t device_count) {
  struct region_header *h = hdr();
  if (atomic_load_explicit(&h->ready, memory_order_acquire) == READY_MARK) return 0;
  memcpy(h->magic, VC_REGION_MAGIC, 8);
  h->version = VC_REGION_VERSION;
  h->header_size = VC_REGION_HEADER_SIZE;
  if (h->device_count < device_count) h->device_count = device_count;
  h->device_block_size = VC_REGION_DEVICE_BLOCK_SIZE;
  h->slot_capacity = VC_REGION_SLOT_CAPACITY;
  h->slot_size = VC_REGION_SLOT_SIZE;
  int rc = init_lock(&h->lock);
  if (rc != 0) return -rc;
  atomic_store_explicit(&h->ready, READY_MARK, memory_order_release);
  return 0;
}

int vc_region_open(const char *path, uint32_t device_count, char *err, size_t errlen) {
  if (device_count > VC_REGION_MAX_DEVICES) {
    snprintf(err, errlen, "%s: %u devices, at most %u", path, device_count, VC_REGION_MAX_DEVICES);
    return -EINVAL;
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "open %s: %s", path, strerror(e));
    return -e;
  }
  int rc = 0;
  void *map = MAP_FAILED;
  /* flock serialises creation between processes that start at once; released on close. */
  if (flock(fd, LOCK_EX) != 0) {
    rc = -errno;
    snprintf(err, errlen, "flock %s: %s", path, strerror(-rc));
    goto fail;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    rc = -errno;
    snprintf(err, errlen, "fstat %s: %s", path, strerror(-rc));
    goto fail;
  }
  /* Sized for every slot up front: the file is sparse, so unused slots cost no memory, and the
   * mapping never has to move under other threads. */
  if ((uint64_t)st.st_size < VC_REGION_FILE_SIZE && ftruncate(fd, VC_REGION_FILE_SIZE) != 0) {
    rc = -errno;
    snprintf(err, errlen, "ftruncate %s: %s", path, strerror(-rc));
    goto fail;
  }
  map = mmap(NULL, VC_REGION_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    rc = -errno;
    snprintf(err, errlen, "mmap %s: %s", path, strerror(-rc));
    goto fail;
  }
  rg.map = map;
  rc = init_header_locked(device_count);
  if (rc != 0) {
    snprintf(err, errlen, "%s: initialising the lock: %s", path, strerror(-rc));
    goto fail;
  }
  if (memcmp(hdr()->magic, VC_REGION_MAGIC, 8) != 0 || hdr()->version != VC_REGION_VERSION ||
      hdr()->slot_size != VC_REGION_SLOT_SIZE) {
    rc = -EINVAL;
    snprintf(err, errlen, "%s: not a version-%u accounting region", path, VC_REGION_VERSION);
    goto fail;
  }
  rg.device_count = device_count;
  rg.own_slot = -1;
  pthread_once(&atfork_once, register_atfork);
  /* The mapping keeps the open file description alive: unlock explicitly, close() would not. */
  flock(fd, LOCK_UN);
  close(fd);
  drop_pre_exec_slot();
  return 0;
fail:
  if (map != MAP_FAILED) munmap(map, VC_REGION_FILE_SIZE);
  rg.map = NULL;
  flock(fd, LOCK_UN);
  close(fd);
  return rc;
}

struct vc_device_block *vc_region_device(int config_index) {
  if (!rg.map && vc_init_ensure() != 0) return NULL;
  if (!rg.map || config_index < 0 || (uint32_t)config_index >= rg.device_count) return NULL;
  return block((uint32_t)config_index);
}

/* Whether `bytes` more fit: guaranteed + burst within the ceiling, and the guaranteed budget
 * within the guarantee. Written so that no sum can overflow. */
static int fits(const struct vc_device_block *b, uint64_t bytes, enum vc_budget budget, uint64_t guarantee,
                uint64_t ceiling) {
  uint64_t used = atomic_load_explicit(&b->used_bytes, memory_order_relaxed);
  uint64_t burst = atomic_load_explicit(&b->burst_bytes, memory_order_relaxed);
  if (budget == VC_BUDGET_GUARANTEED && (bytes > guarantee || used > guarantee - bytes)) return 0;
  return bytes <= ceiling && used <= ceiling - bytes && burst <= ceiling - bytes - used;
}

static _Atomic uint64_t *counter_of(struct vc_device_block *b, enum vc_budget budget) {
  return budget == VC_BUDGET_BURST ? &b->burst_bytes : &b->used_bytes;
}

static _Atomic uint64_t *share_of(uint32_t k, int index, enum vc_budget budget) {
  return budget == VC_BUDGET_BURST ? &burst_slot(k)->burst_bytes[index] : &slot(k)->used_bytes[index];
}

static void add(_Atomic uint64_t *counter, uint64_t bytes) {
  atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + bytes, memory_order_release);
}

static void sub(_Atomic uint64_t *counter, uint64_t bytes) {
  atomic_store_explicit(counter, sub_floor(atomic_load_explicit(counter, memory_order_relaxed), bytes),
                        memory_order_release);
}

/* The first budget of `budgets` (guaranteed before burst) that `bytes` fit in, or -1. */
static int first_fit(const struct vc_device_block *b, uint64_t bytes, unsigned budgets, uint64_t guarantee,
                     uint64_t ceiling) {
  for (int budget = VC_BUDGET_GUARANTEED; budget <= VC_BUDGET_BURST; budget++)
    if ((budgets & VC_BUDGET_BIT(budget)) && fits(b, bytes, (enum vc_budget)budget, guarantee, ceiling)) return budget;
  return -1;
}

int vc_region_reserve_in(int index, uint64_t bytes, unsigned budgets, uint64_t guarantee, uint64_t ceiling) {
  if (!rg.map || index < 0 || (uint32_t)index >= rg.device_count) return -ENODEV;
  if (lock_region() != 0) return -EIO;
  maybe_reclaim_locked();
  int k = own_slot_locked();
  if (k < 0) {
    unlock_region();
    return k;
  }
  struct vc_device_block *b = block((uint32_t)index);
  int budget = first_fit(b, bytes, budgets, guarantee, ceiling);
  if (budget < 0 && reclaim_locked() > 0) budget = first_fit(b, bytes, budgets, guarantee, ceiling);
  if (budget < 0) {
    unlock_region();
    return -ENOMEM;
  }
  /* Release stores: lock-free readers (views, node agent) see a value that was true. */
  add(counter_of(b, (enum vc_budget)budget), bytes);
  add(share_of((uint32_t)k, index, (enum vc_budget)budget), bytes);
  unlock_region();
  return budget;
}

int vc_region_reserve(int index, uint64_t bytes, uint64_t limit) {
  int rc = vc_region_reserve_in(index, bytes, VC_BUDGET_BIT(VC_BUDGET_GUARANTEED), limit, UINT64_MAX);
  return rc < 0 ? rc : 0;
}

void vc_region_release_in(int index, uint64_t bytes, enum vc_budget budget) {
  if (!rg.map || index < 0 || (uint32_t)index >= rg.device_count || bytes == 0) return;
  if (lock_region() != 0) return;
  struct vc_device_block *b = block((uint32_t)index);
  sub(counter_of(b, budget), bytes);
  if (rg.own_slot >= 0 && rg.own_pid == self_pid()) {
    uint32_t k = (uint32_t)rg.own_slot;
    sub(share_of(k, index, budget), bytes);
    /* Evicted bytes are a part of the burst: never more than what is left of it. */
    struct vc_burst_slot *mine = burst_slot(k);
    uint64_t left = atomic_load_explicit(&mine->burst_bytes[index], memory_order_relaxed);
    uint64_t evicted = atomic_load_explicit(&mine->evicted_bytes[index], memory_order_relaxed);
    if (budget == VC_BUDGET_BURST && evicted > left) {
      atomic_store_explicit(&mine->evicted_bytes[index], left, memory_order_relaxed);
      sub(&b->burst_evicted_bytes, evicted - left);
    }
  }
  unlock_region();
}

void vc_region_release(int index, uint64_t bytes) { vc_region_release_in(index, bytes, VC_BUDGET_GUARANTEED); }

uint64_t vc_region_burst(int index) {
  if (!rg.map || index < 0 || (uint32_t)index >= rg.device_count) return 0;
  return atomic_load_explicit(&block((uint32_t)index)->burst_bytes, memory_order_acquire);
}

void vc_region_note_residency(int index, uint64_t evicted, uint64_t new_evictions) {
  if (!rg.map || index < 0 || (uint32_t)index >= rg.device_count) return;
  if (rg.own_slot < 0 || rg.own_pid != self_pid() || lock_region() != 0) return;
  struct vc_device_block *b = block((uint32_t)index);
  struct vc_burst_slot *mine = burst_slot((uint32_t)rg.own_slot);
  uint64_t burst = atomic_load_explicit(&mine->burst_bytes[index], memory_order_relaxed);
  if (evicted > burst) evicted = burst;
  uint64_t before = atomic_load_explicit(&mine->evicted_bytes[index], memory_order_relaxed);
  atomic_store_explicit(&mine->evicted_bytes[index], evicted, memory_order_relaxed);
  add(&b->burst_evicted_bytes, evicted);
  sub(&b->burst_evicted_bytes, before);
  add(&b->burst_evictions, new_evictions);
  unlock_region();
}

uint64_t vc_region_used(int index) {
  if (!rg.map || index < 0 || (uint32_t)index >= rg.device_count) return 0;
  uint64_t last = atomic_load_explicit(&hdr()->last_reclaim_ms, memory_order_relaxed);
  if (now_ms() - last >= RECLAIM_PERIOD_MS && lock_region() == 0) {
    maybe_reclaim_locked();
    unlock_region();
  }
  return atomic_load_explicit(&block((uint32_t)index)->used_bytes, memory_order_acquire);
}

int vc_region_reclaim_dead(void) {
  if (!rg.map || lock_region() != 0) return 0;
  int freed = reclaim_locked();
  unlock_region();
  return freed;
}

int vc_region_pids(uint32_t *pids, int max) {
  if (!rg.map) return 0;
  int n = 0;
  uint32_t hw = atomic_load_explicit(&hdr()->slot_high_water, memory_order_acquire);
  for (uint32_t k = 0; k < hw && n < max; k++) {
    if (atomic_load_explicit(&slot(k)->state, memory_order_acquire) == VC_SLOT_LIVE) pids[n++] = slot(k)->pid;
  }
  return n;
}

static int compare_host_pid(const void *a, const void *b) {
  uint32_t x = ((const struct vc_pidmap_entry *)a)->host_pid, y = ((const struct vc_pidmap_entry *)b)->host_pid;
  return (x > y) - (x < y);
}

/* Seqlock read of the node agent's map. The writer uses plain positioned writes (no atomics in
 * Node), so the copy is bytewise and only trusted when seq was even and unchanged around it;
 * acquire on the first load and a fence before the second keep the copy between them. */
int vc_region_host_pids(struct vc_pidmap_entry *out, int max, uint64_t now_unix_ms, uint32_t *flags) {
  if (!rg.map || max < 0) return -1;
  struct vc_pidmap_header *h = (struct vc_pidmap_header *)(rg.map + VC_REGION_PIDMAP_OFFSET);
  const unsigned char *entries = rg.map + VC_REGION_PIDMAP_OFFSET + VC_REGION_PIDMAP_HEADER_SIZE;
  for (int attempt = 0; attempt < 16; attempt++) {
    uint64_t seq = atomic_load_explicit(&h->seq, memory_order_acquire);
    if (seq & 1u) {
      sched_yield();
      continue;
    }
    struct vc_pidmap_header copy;
    memcpy(&copy, (const void *)h, sizeof copy);
    uint32_t n = copy.count < VC_REGION_PIDMAP_CAPACITY ? copy.count : VC_REGION_PIDMAP_CAPACITY;
    if ((uint32_t)max < n) n = (uint32_t)max;
    if (n) memcpy(out, entries, (size_t)n * VC_REGION_PIDMAP_ENTRY_SIZE);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&h->seq, memory_order_relaxed) != seq) continue;
    if (copy.version != VC_REGION_PIDMAP_VERSION || copy.entry_size != VC_REGION_PIDMAP_ENTRY_SIZE) return -1;
    /* Stale (the node agent stopped publishing) or from the future (a clock step): not trusted. */
    if (copy.published_ms > now_unix_ms + copy.valid_ms || now_unix_ms - copy.published_ms > copy.valid_ms)
      return -1;
    /* Sorted here too, so lookups can bisect whatever order the writer used. */
    qsort(out, n, sizeof *out, compare_host_pid);
    if (flags) *flags = copy.flags | (copy.count > n ? VC_PIDMAP_FLAG_TRUNCATED : 0u);
    return (int)n;
  }
  return -1;
}

void vc_region_close(void) {
  if (!rg.map) return;
  if (rg.own_slot >= 0 && rg.own_pid == self_pid() && lock_region() == 0) {
    free_slot_locked(slot((uint32_t)rg.own_slot));
    unlock_region();
  }
  munmap(rg.map, VC_REGION_FILE_SIZE);
  rg.map = NULL;
  rg.own_slot = -1;
}
