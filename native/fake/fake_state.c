#define _GNU_SOURCE
#include "fake_state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READY 0x46414b45u

static struct fg_state *state;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int own_slot = -1;
static pid_t own_pid;
static pid_t cached_pid; /* getpid() is a system call; reset in the child after fork */
static void forget_pid(void) { cached_pid = 0; }
static pid_t self_pid(void) {
  if (!cached_pid) cached_pid = getpid();
  return cached_pid;
}

uint64_t fg_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void fg_sleep_until(uint64_t t) {
  struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* FAKEGPU_MIG: "all", or node indexes, of cards that start in MIG mode (with no instance). */
static void init_mig_modes(struct fg_state *s, const struct fg_env *e) {
  char buf[sizeof e->mig];
  snprintf(buf, sizeof buf, "%s", e->mig);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *end;
    unsigned long i = strtoul(tok, &end, 10);
    int all = strcmp(tok, "all") == 0;
    if (!all && (end == tok || *end || i >= (unsigned long)e->device_count)) {
      fprintf(stderr, "fakegpu: FAKEGPU_MIG entry \"%s\" is not \"all\" or a device index; ignored\n", tok);
      continue;
    }
    for (int d = all ? 0 : (int)i; d < (all ? e->device_count : (int)i + 1); d++) {
      if (fg_mig_model_for(e->memory_mib[d])) s->mig[d].mode = 1;
      else fprintf(stderr, "fakegpu: device %d (%llu MiB) is no card the fake models with MIG; not in MIG mode\n", d,
                   (unsigned long long)e->memory_mib[d]);
    }
  }
}

static void init_fresh(struct fg_state *s, const struct fg_env *e) {
  memcpy(s->magic, "FAKEGPU1", 8);
  s->version = FG_STATE_VERSION;
  s->device_count = (uint32_t)e->device_count;
  s->sms = e->sms;
  s->sample_ns = e->sample_ns;
  s->nvml_sample_ns = e->nvml_sample_ns;
  s->nvml_delay_ns = e->nvml_delay_ns;
  /* Half of NVML's ring is its sample buffer: a delay past it would never publish anything. */
  uint64_t max_delay = (FG_NVML_BUCKETS / 2 - 2) * e->nvml_sample_ns;
  if (s->nvml_delay_ns > max_delay) {
    fprintf(stderr, "fakegpu: FAKEGPU_NVML_DELAY_MS is over %llu intervals of FAKEGPU_NVML_SAMPLE_MS; using %llu ms\n",
            (unsigned long long)(FG_NVML_BUCKETS / 2 - 2), (unsigned long long)(max_delay / 1000000u));
    s->nvml_delay_ns = max_delay;
  }
  s->nvml_stamp_published = (uint32_t)e->nvml_stamp_published;
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  s->realtime_offset_ns = (int64_t)((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec) - (int64_t)fg_now_ns();
  for (int i = 0; i < e->device_count; i++) {
    s->devices[i].memory_total = e->memory_mib[i] << 20;
    s->devices[i].next_va = 0x7f0000000000ull + ((uint64_t)i << 36);
  }
  init_mig_modes(s, e);
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->lock, &a);
  pthread_mutexattr_destroy(&a);
  atomic_store(&s->ready, READY);
}

/* A file another build of the fake created with a different layout is refused before it is resized:
 * reinterpreting it would corrupt both builds' view. Says why on stderr when it refuses. */
static int layout_matches(int fd, const char *path) {
  struct {
    char magic[8];
    uint32_t version;
  } head;
  struct stat st;
  ssize_t n = fstat(fd, &st) == 0 ? pread(fd, &head, sizeof head, 0) : -1;
  if (n < 0) {
    fprintf(stderr, "fakegpu: reading %s: %s\n", path, strerror(errno));
    return 0;
  }
  static const char never[8] = {0};
  /* Empty, or never initialised (its creator died before writing the header): start afresh. */
  if (n < (ssize_t)sizeof head || memcmp(head.magic, never, 8) == 0) return 1;
  if (memcmp(head.magic, "FAKEGPU1", 8) == 0 && head.version == FG_STATE_VERSION &&
      st.st_size == (off_t)sizeof(struct fg_state))
    return 1;
  fprintf(stderr, "fakegpu: %s was made by a fake driver of another layout (want version %d, %zu bytes); "
                  "use another FAKEGPU_STATE or remove it\n",
          path, FG_STATE_VERSION, sizeof(struct fg_state));
  return 0;
}

static void open_state(void) {
  const struct fg_env *e = fg_env();
  int fd = open(e->state_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    fprintf(stderr, "fakegpu: open %s: %s\n", e->state_path, strerror(errno));
    return;
  }
  if (flock(fd, LOCK_EX) != 0) {
    fprintf(stderr, "fakegpu: locking %s: %s\n", e->state_path, strerror(errno));
    close(fd);
    return;
  }
  if (!layout_matches(fd, e->state_path)) {
    close(fd); /* drops the lock: no mapping holds the file open */
    return;
  }
  if (ftruncate(fd, sizeof(struct fg_state)) != 0) {
    fprintf(stderr, "fakegpu: preparing %s: %s\n", e->state_path, strerror(errno));
    close(fd);
    return;
  }
  void *map = mmap(NULL, sizeof(struct fg_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    fprintf(stderr, "fakegpu: mmap %s: %s\n", e->state_path, strerror(errno));
    close(fd);
    return;
  }
  struct fg_state *s = map;
  if (atomic_load(&s->ready) != READY) init_fresh(s, e);
  else if (s->device_count != (uint32_t)e->device_count || s->sms != e->sms)
    fprintf(stderr, "fakegpu: %s describes %u devices / %u SMs; using it (FAKEGPU_DEVICES/SMS ignored)\n",
            e->state_path, s->device_count, s->sms);
  /* The mapping keeps the open file description alive, so close() alone would not drop the lock. */
  flock(fd, LOCK_UN);
  close(fd);
  fg_resolve_visible(s, e);
  pthread_atfork(NULL, NULL, forget_pid);
  state = s;
}

struct fg_state *fg_state(void) {
  pthread_once(&once, open_state);
  return state;
}

void fg_lock(void) {
  /* A process killed while holding the lock leaves every field consistent (each update is a
   * single store or a sum recomputed by readers), so EOWNERDEAD only needs marking consistent. */
  if (pthread_mutex_lock(&state->lock) == EOWNERDEAD) pthread_mutex_consistent(&state->lock);
}

void fg_unlock(void) { pthread_mutex_unlock(&state->lock); }

static int proc_start(pid_t pid, char *st, uint64_t *start) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return -1;
  *st = p[2];
  p += 2;
  for (int f = 3; f < 22; f++) {
    p = strchr(p, ' ');
    if (!p) return -1;
    p++;
  }
  *start = strtoull(p, NULL, 10);
  return 0;
}

static void free_proc_locked(int k) {
  struct fg_proc *p = &state->procs[k];
  for (int d = 0; d < FG_STATE_DEVICES; d++) {
    struct fg_device *dev = &state->devices[d];
    if (!p->used[d] && !dev->busy_total_ns) continue; /* never used: nothing of this process there */
    dev->memory_used = dev->memory_used > p->used[d] ? dev->memory_used - p->used[d] : 0;
    for (int b = 0; b < FG_BUCKETS; b++) dev->buckets[b].proc_busy_ns[k] = 0;
    for (int b = 0; b < FG_NVML_BUCKETS; b++) dev->nvml_buckets[b].proc_busy_ns[k] = 0;
  }
  memset(p, 0, sizeof *p);
}

void fg_reclaim_dead_locked(void) {
  for (int k = 0; k < FG_MAX_PROCS; k++) {
    struct fg_proc *p = &state->procs[k];
    if (!p->live) continue;
    char st = 0;
    uint64_t start = 0;
    if (proc_start((pid_t)p->pid, &st, &start) != 0 || st == 'Z' || st == 'X' || start != p->start_ticks)
      free_proc_locked(k);
  }
}

int fg_own_proc_locked(void) {
  pid_t pid = self_pid();
  if (own_slot >= 0 && own_pid == pid) return own_slot;
  char st;
  uint64_t start = 0;
  if (proc_start(pid, &st, &start) != 0) return -1;
  fg_reclaim_dead_locked();
  /* A live slot with this very pid and start time is this process before an exec: the driver's
   * device files close on exec, so what that image held is freed, as the real driver frees it. */
  for (int k = 0; k < FG_MAX_PROCS; k++)
    if (state->procs[k].live && state->procs[k].pid == (uint32_t)pid && state->procs[k].start_ticks == start)
      free_proc_locked(k);
  for (int k = 0; k < FG_MAX_PROCS; k++) {
    struct fg_proc *p = &state->procs[k];
    if (p->live) continue;
    memset(p, 0, sizeof *p);
    p->pid = (uint32_t)pid;
    p->start_ticks = start;
    p->live = 1;
    own_slot = k;
    own_pid = pid;
    return k;
  }
  fprintf(stderr, "fakegpu: all %d process slots are in use\n", FG_MAX_PROCS);
  return -1;
}

static struct fg_bucket *bucket_for(struct fg_bucket *ring, uint64_t slots, uint64_t period) {
  struct fg_bucket *b = &ring[period % slots];
  if (b->period == period) return b;
  if (b->period > period) return NULL; /* older than the history we keep */
  memset(b, 0, sizeof *b);
  b->period = period;
  return b;
}

/* Credits [start, end) of process slot k (-1: none) to the periods of length `len` it overlaps, in
 * a ring of `slots` periods. Work queued `ahead` periods or more beyond now is not credited. */
static void credit(struct fg_bucket *ring, uint64_t slots, uint64_t ahead, uint64_t len, uint64_t now, int k,
                   uint64_t start, uint64_t end) {
  for (uint64_t t = start; t < end;) {
    uint64_t period = t / len;
    uint64_t period_end = (period + 1) * len;
    uint64_t slice_end = end < period_end ? end : period_end;
    if (period >= now / len + ahead) break;
    struct fg_bucket *b = bucket_for(ring, slots, period);
    if (b) {
      b->busy_ns += slice_end - t;
      if (k >= 0) b->proc_busy_ns[k] += slice_end - t;
    }
    t = slice_end;
  }
}

uint64_t fg_schedule(int dev, uint64_t not_before_ns, uint64_t duration_ns) {
  if (dev < 0) return not_before_ns + duration_ns;
  struct fg_device *d = &state->devices[dev];
  fg_lock();
  int k = fg_own_proc_locked();
  duration_ns += fg_managed_touch_locked(dev);
  uint64_t now = fg_now_ns();
  uint64_t start = not_before_ns > now ? not_before_ns : now;
  if (d->busy_until_ns > start) start = d->busy_until_ns;
  uint64_t end = start + duration_ns;
  d->busy_until_ns = end;
  d->busy_total_ns += duration_ns;
  /* The timeline runs one kernel at a time, so a slot's busy time is the time a kernel of that
   * process was executing, whatever share of the SMs its grid filled: what NVML reports too. */
  credit(d->buckets, FG_BUCKETS, FG_BUCKETS, state->sample_ns, now, k, start, end);
  /* Half of NVML's ring is its sample buffer, the other half work queued ahead. */
  credit(d->nvml_buckets, FG_NVML_BUCKETS, FG_NVML_BUCKETS / 2, state->nvml_sample_ns, now, k, start, end);
  fg_unlock();
  return end;
}

uint64_t fg_reach(int dev, uint64_t not_before_ns) {
  uint64_t now = fg_now_ns();
  uint64_t at = not_before_ns > now ? not_before_ns : now;
  if (dev < 0) return at;
  fg_lock();
  uint64_t busy = state->devices[dev].busy_until_ns;
  fg_unlock();
  return busy > at ? busy : at;
}

/* Moves up to `need` bytes of resident managed memory on `dev` to the host, the process with the
 * most resident first (the real driver evicts least recently used 2 MiB chunks). */
static void evict_locked(int dev, uint64_t need) {
  struct fg_device *d = &state->devices[dev];
  while (need > 0) {
    int victim = -1;
    for (int k = 0; k < FG_MAX_PROCS; k++) {
      if (!state->procs[k].live || !state->procs[k].managed_resident[dev]) continue;
      if (victim < 0 || state->procs[k].managed_resident[dev] > state->procs[victim].managed_resident[dev]) victim = k;
    }
    if (victim < 0) return;
    struct fg_proc *p = &state->procs[victim];
    uint64_t take = p->managed_resident[dev] < need ? p->managed_resident[dev] : need;
    p->managed_resident[dev] -= take;
    p->managed_host[dev] += take;
    p->used[dev] -= take;
    p->evictions[dev]++;
    d->memory_used -= take;
    need -= take;
  }
}

int fg_mem_charge(int dev, uint64_t bytes) {
  if (dev < 0) return -1;
  struct fg_device *d = &state->devices[dev];
  fg_lock();
  int k = fg_own_proc_locked();
  if (d->memory_used + bytes > d->memory_total) fg_reclaim_dead_locked();
  if (bytes <= d->memory_total && d->memory_used + bytes > d->memory_total)
    evict_locked(dev, d->memory_used + bytes - d->memory_total);
  int rc = -1;
  if (k >= 0 && d->memory_used + bytes <= d->memory_total) {
    d->memory_used += bytes;
    state->procs[k].used[dev] += bytes;
    rc = 0;
  }
  fg_unlock();
  return rc;
}

void fg_mem_uncharge(int dev, uint64_t bytes) {
  if (dev < 0) return;
  struct fg_device *d = &state->devices[dev];
  fg_lock();
  int k = fg_own_proc_locked();
  d->memory_used = d->memory_used > bytes ? d->memory_used - bytes : 0;
  if (k >= 0) state->procs[k].used[dev] = state->procs[k].used[dev] > bytes ? state->procs[k].used[dev] - bytes : 0;
  fg_unlock();
}

void fg_managed_alloc(int dev, uint64_t bytes) {
  if (dev < 0) return;
  struct fg_device *d = &state->devices[dev];
  fg_lock();
  int k = fg_own_proc_locked();
  if (k >= 0) {
    uint64_t free_bytes = d->memory_total > d->memory_used ? d->memory_total - d->memory_used : 0;
    uint64_t resident = bytes < free_bytes ? bytes : free_bytes;
    struct fg_proc *p = &state->procs[k];
    p->managed_resident[dev] += resident;
    p->managed_host[dev] += bytes - resident;
    p->used[dev] += resident;
    d->memory_used += resident;
  }
  fg_unlock();
}

void fg_managed_free(int dev, uint64_t bytes) {
  if (dev < 0) return;
  struct fg_device *d = &state->devices[dev];
  fg_lock();
  int k = fg_own_proc_locked();
  if (k >= 0) {
    struct fg_proc *p = &state->procs[k];
    uint64_t host = bytes < p->managed_host[dev] ? bytes : p->managed_host[dev];
    uint64_t rest = bytes - host;
    uint64_t resident = rest < p->managed_resident[dev] ? rest : p->managed_resident[dev];
    p->managed_host[dev] -= host;
    p->managed_resident[dev] -= resident;
    p->used[dev] = p->used[dev] > resident ? p->used[dev] - resident : 0;
    d->memory_used = d->memory_used > resident ? d->memory_used - resident : 0;
  }
  fg_unlock();
}

uint64_t fg_managed_touch_locked(int dev) {
  int k = fg_own_proc_locked();
  if (dev < 0 || k < 0 || !state->procs[k].managed_host[dev]) return 0;
  struct fg_device *d = &state->devices[dev];
  struct fg_proc *p = &state->procs[k];
  uint64_t host = p->managed_host[dev];
  uint64_t free_bytes = d->memory_total > d->memory_used ? d->memory_total - d->memory_used : 0;
  uint64_t back = host < free_bytes ? host : free_bytes;
  p->managed_host[dev] -= back;
  p->managed_resident[dev] += back;
  p->used[dev] += back;
  d->memory_used += back;
  /* Migrated bytes crossed the bus once; what still lives on the host is read across it. */
  return (uint64_t)((double)host / 1048576.0 * (double)fg_env()->uvm_ns_per_mib);
}

void fg_managed_residency(int dev, uint64_t *resident, uint64_t *host, uint64_t *evictions) {
  *resident = *host = *evictions = 0;
  if (dev < 0) return;
  fg_lock();
  int k = fg_own_proc_locked();
  if (k >= 0) {
    *resident = state->procs[k].managed_resident[dev];
    *host = state->procs[k].managed_host[dev];
    *evictions = state->procs[k].evictions[dev];
  }
  fg_unlock();
}

void fg_mark_context(int dev) {
  if (dev < 0) return;
  fg_lock();
  int k = fg_own_proc_locked();
  if (k >= 0) state->procs[k].context_mask |= 1ull << dev;
  fg_unlock();
}

int fg_inject_xid(int dev, uint64_t xid) {
  struct fg_state *s = fg_state();
  if (!s || dev < 0 || (uint32_t)dev >= s->device_count) return -1;
  fg_lock();
  struct fg_device *d = &s->devices[dev];
  d->xid[d->xid_seq % FG_XID_RING] = xid;
  d->xid_seq++;
  fg_unlock();
  return 0;
}
