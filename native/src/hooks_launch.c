/* Launch-family hooks: every kernel submission path passes the compute limiter of the device it
 * runs on, then forwards to the driver. Exported by symbol for programs linked with -lcuda, and
 * handed out by the cuGetProcAddress table (vc_launch_hook_wrap) for runtimes that resolve the
 * driver through it.
 *
 * Per launch (fast path): the device's config record (no driver call when the limit file has one
 * device, which is every single-slice container), plain loads of the cached limits, block and
 * sample seq, one atomic on the shared bucket, and thread-local counters. No lock, no clock, no
 * syscall. Everything else (limits refresh, controller step, waiting for tokens, the in-flight
 * bound's completion markers) is the slow path. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime under -std=c11 */
#include "hooks_launch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "charge.h"
#include "config.h"
#include "hooks.h"
#include "init.h"
#include "limiter.h"
#include "log.h"
#include "real.h"
#include "region.h"
#include "sensor.h"
#include "vc_cuda.h"

#define VC_EXPORT __attribute__((visibility("default")))

/* Limits of each config record, packed so the fast path reads them with one load:
 * bit 63 valid, bit 62 soft, bits 16..31 limit bp, bits 0..15 request bp. */
#define LIMITS_VALID (1ull << 63)
#define LIMITS_SOFT (1ull << 62)
#define LIMITS_UNLIMITED (1ull << 61) /* hard 100 %: nothing to limit, the fast path returns at once */
static _Atomic uint64_t limits_by_record[VC_CONFIG_MAX_DEVICES];
/* Devices in the limit file; with one, every stream is on it and no stream lookup is needed. */
static _Atomic uint32_t record_count;
/* 1 when the limit file has exactly one device and its region block is mapped: every launch is
 * then charged to record 0 without asking the driver for the current device. A launch on a
 * device the file does not list is charged to that one record: over-limited, never free. */
static _Atomic int single_record;
/* Region device block of each record, cached so the fast path does not call into region.c. */
static _Atomic(struct vc_device_block *) block_by_record[VC_CONFIG_MAX_DEVICES];

/* A launch on a device the limit file does not list: refused (never unlimited). Other negative
 * records (no current context) pass to the driver, which answers with its own error. */
#define REC_REFUSED (-2)

/* What the limiter tells a hook: forward the launch, refuse it, or forward it and then close the
 * in-process sensor's timed sample (sensor.h) around it. */
enum { LAUNCH_GO = 0, LAUNCH_REFUSED = 1, LAUNCH_TIMED = 2 };

/* Launches between limit-file re-reads per thread, so a live change reaches even a device that
 * is never throttled and gets no samples. */
#define REFRESH_EVERY 4096u
/* initial-exec: libvcuda is loaded at process start (preload), so its thread-locals sit at a fixed
 * offset from the thread pointer; the default model would call __tls_get_addr on every launch. */
#define VC_TLS _Thread_local __attribute__((tls_model("initial-exec")))
static VC_TLS uint32_t launches_until_refresh;
/* Estimated GPU ns this thread may still charge on each record before its next in-flight check. */
static VC_TLS int64_t until_mark_ns[VC_CONFIG_MAX_DEVICES];

static vc_limiter_limits unpack_limits(uint64_t word) {
  return (vc_limiter_limits){(uint32_t)(word & 0xffff), (uint32_t)((word >> 16) & 0xffff), (word & LIMITS_SOFT) != 0};
}

static uint64_t pack_limits(const struct vc_device_limit *d) {
  uint64_t request = (uint64_t)d->core_request * 100, limit = (uint64_t)d->core_limit * 100;
  uint64_t word = LIMITS_VALID | (d->mode == VC_MODE_SOFT ? LIMITS_SOFT : 0) | (limit << 16) | request;
  vc_limiter_limits lim = unpack_limits(word);
  return vc_limiter_is_unlimited(&lim) ? word | LIMITS_UNLIMITED : word;
}

static vc_limiter_state *state_of(struct vc_device_block *block) {
  return (vc_limiter_state *)(void *)block->limiter_state;
}

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The wall clock NVML stamps its samples with (unix ms): the controller pairs releases with
 * them. 0 when the clock cannot be read (the controller then times the fold by the sample). */
static uint64_t unix_ms(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

/* Re-reads the limit file (it is re-mapped only when its seq moved) and re-steers every device
 * whose limits changed. A corrupt file keeps the last good limits: memory fails closed in its own
 * hooks, and compute keeps enforcing what it knew. */
static void refresh_limits(void) {
  static int logged;
  struct vc_config cfg;
  if (vc_config_snapshot(&cfg) != 0) {
    VC_LOG_ONCE(logged, VC_LOG_WARN, "compute: limit file unreadable; keeping the last known core limits");
    return;
  }
  atomic_store_explicit(&record_count, cfg.device_count, memory_order_relaxed);
  for (uint32_t i = 0; i < cfg.device_count && i < VC_CONFIG_MAX_DEVICES; i++) {
    struct vc_device_block *block = vc_region_device((int)i);
    atomic_store_explicit(&block_by_record[i], block, memory_order_relaxed);
    uint64_t word = pack_limits(&cfg.devices[i]);
    if (atomic_exchange_explicit(&limits_by_record[i], word, memory_order_relaxed) == word) continue;
    if (!block) continue;
    vc_limiter_limits lim = unpack_limits(word);
    vc_limiter_sample last;
    int have = vc_limiter_read_sample(block, &last) == 0 && last.seq != 0;
    vc_limiter_set_limits(state_of(block), &lim, have ? &last : NULL);
  }
  atomic_store_explicit(&single_record, cfg.device_count == 1 && vc_region_device(0) != NULL, memory_order_relaxed);
}

/* The config record a device's launches are charged to: the one the memory accounting uses,
 * matched by UUID (charge.c). A device the limit file does not list, or no readable limit file,
 * is refused, as its memory is: an unknown card gets no work, never unlimited work. */
static int record_of(CUdevice dev) {
  if (atomic_load_explicit(&single_record, memory_order_relaxed)) return 0;
  int rec = vc_device_index(dev);
  return rec >= 0 ? rec : REC_REFUSED;
}

static __attribute__((noinline, cold)) int current_record_of_driver(void) {
  CUresult (*get_device)(CUdevice *) = VC_REAL_CUDA(cuCtxGetDevice);
  CUdevice dev;
  if (!get_device || get_device(&dev) != CUDA_SUCCESS) return -1;
  return record_of(dev);
}

static inline int current_record(void) {
  /* relaxed: set once the limit file was read; until then (and with several devices) the driver
   * is asked. */
  if (__builtin_expect(atomic_load_explicit(&single_record, memory_order_relaxed), 1)) return 0;
  return current_record_of_driver();
}

/* Folds a new node-agent sample into the controller (one process wins per sample). */
static void observe(struct vc_device_block *block, vc_limiter_state *s, const vc_limiter_limits *lim) {
  vc_limiter_sample smp;
  if (vc_limiter_read_sample(block, &smp) == 0) vc_limiter_observe(s, &smp, lim, unix_ms());
}

/* Slow path: the launch is in debt; sleep in short steps until refills cover it, folding in any
 * sample or limit change that arrives meanwhile and the sensor's samples that complete. */
static __attribute__((noinline)) void wait_turn(int rec, struct vc_device_block *block, vc_limiter_state *s, int64_t ticket) {
  uint64_t base = 0, start = monotonic_ns(), now = start;
  for (;;) {
    uint64_t sleep_ns = vc_limiter_wait_ns(s, ticket, &base, now);
    if (sleep_ns == 0) break;
    struct timespec ts = {(time_t)(sleep_ns / 1000000000ull), (long)(sleep_ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    now = monotonic_ns();
    uint64_t word = atomic_load_explicit(&limits_by_record[rec], memory_order_relaxed);
    vc_limiter_limits lim = unpack_limits(word);
    if (vc_limiter_is_unlimited(&lim)) break; /* the limit was lifted while we slept */
    if (vc_limiter_has_new_sample(s, block)) observe(block, s, &lim);
    /* An event query is unsafe during another thread's global-mode capture: none then. */
    if (!vc_capture_maybe_active()) vc_sensor_poll(rec);
  }
  vc_limiter_note_wait(s, now - start);
}

/* ---- in-flight bound: completion markers per thread and device ------------------------------ */

/* Every VC_LIMITER_INFLIGHT_NS/4 of charges a thread records an event on the stream it launches
 * on, tagged with what it had charged until then. A completed event proves that much work ran;
 * charges past the newest completed one are (at most) in flight. Above the cap the thread waits
 * for its oldest markers before launching more. Per thread because events see one stream each;
 * a failed driver call drops the bound (it is an accuracy aid; the bucket is the limit). */
#define MARKS 8
/* Launches of a thread timed one by one while the cost is still its first guess. */
#define TIMED_UNESTIMATED_MAX 4096u
struct mark {
  CUevent event;
  uint64_t at_ns; /* charged before the launch it precedes */
};
struct inflight {
  CUcontext ctx;      /* context the events belong to */
  uint64_t charged_ns;
  uint64_t done_ns;   /* charged_ns covered by the newest completed marker */
  int64_t interval_ns;
  uint32_t timed_unestimated; /* launches timed one by one before the first cost estimate */
  unsigned head, count, spare_count;
  struct mark marks[MARKS];
  CUevent spare[MARKS]; /* completed events, reused */
};
struct inflight_set {
  struct inflight by_record[VC_CONFIG_MAX_DEVICES];
};
static VC_TLS struct inflight_set *inflight_of_thread;
static pthread_key_t inflight_key;
static pthread_once_t inflight_key_once = PTHREAD_ONCE_INIT;

static void drop_events(struct inflight *t) {
  CUresult (*destroy)(CUevent) = VC_REAL_CUDA(cuEventDestroy_v2);
  for (unsigned i = 0; i < t->count; i++) {
    if (destroy) destroy(t->marks[(t->head + i) % MARKS].event);
  }
  for (unsigned i = 0; i < t->spare_count; i++) {
    if (destroy) destroy(t->spare[i]);
  }
  t->done_ns = t->charged_ns;
  t->head = t->count = t->spare_count = 0;
}

static void free_inflight(void *p) {
  struct inflight_set *set = p;
  for (unsigned i = 0; i < VC_CONFIG_MAX_DEVICES; i++) drop_events(&set->by_record[i]);
  free(set);
}

static void make_inflight_key(void) { pthread_key_create(&inflight_key, free_inflight); }

static struct inflight *inflight_of(int rec) {
  if (!inflight_of_thread) {
    pthread_once(&inflight_key_once, make_inflight_key);
    inflight_of_thread = calloc(1, sizeof *inflight_of_thread);
    if (!inflight_of_thread) return NULL;
    pthread_setspecific(inflight_key, inflight_of_thread);
  }
  return &inflight_of_thread->by_record[rec];
}

/* Pops markers whose work has completed (or whose event the driver no longer knows). */
static void collect(struct inflight *t) {
  CUresult (*query)(CUevent) = VC_REAL_CUDA(cuEventQuery);
  while (t->count > 0) {
    struct mark *m = &t->marks[t->head];
    if (query && query(m->event) == CUDA_ERROR_NOT_READY) return;
    t->done_ns = m->at_ns;
    if (t->spare_count < MARKS) t->spare[t->spare_count++] = m->event;
    t->head = (t->head + 1) % MARKS;
    t->count--;
  }
}

/* Whether the stream is being captured into a graph: a marker there would become a graph node. */
static int is_capturing(CUstream stream) {
  CUresult (*is_capturing_fn)(CUstream, int *) = VC_REAL_CUDA_AS(CUresult(*)(CUstream, int *), "cuStreamIsCapturing");
  if (!is_capturing_fn) return 0; /* a driver without graphs capture has nothing to capture */
  int status = 0;
  if (is_capturing_fn(stream, &status) != CUDA_SUCCESS) return 1; /* unsure: do not record */
  return status != 0;
}

/* Sets this thread's stream-capture mode, returning the previous one (-1: the driver cannot).
 * Event queries are "potentially unsafe" calls that another thread's global-mode graph capture
 * forbids; relaxed mode is how libraries make such calls without breaking the application's
 * capture. */
static int exchange_capture_mode(int mode) {
  CUresult (*exchange)(int *) = VC_REAL_CUDA_AS(CUresult(*)(int *), "cuThreadExchangeStreamCaptureMode");
  if (!exchange) return -1;
  return exchange(&mode) == CUDA_SUCCESS ? mode : -1;
}

static void record_marker(struct inflight *t, CUstream stream, uint64_t at_ns) {
  if (t->count == MARKS) return;
  CUresult (*create)(CUevent *, unsigned) = VC_REAL_CUDA(cuEventCreate);
  CUresult (*record)(CUevent, CUstream) = VC_REAL_CUDA(cuEventRecord);
  if (!create || !record) return;
  CUevent ev;
  if (t->spare_count > 0) ev = t->spare[--t->spare_count];
  else if (create(&ev, 0x2 /* CU_EVENT_DISABLE_TIMING */) != CUDA_SUCCESS) return;
  if (record(ev, stream) != CUDA_SUCCESS) {
    t->spare[t->spare_count++] = ev;
    return;
  }
  t->marks[(t->head + t->count) % MARKS] = (struct mark){ev, at_ns};
  t->count++;
}

/* Slow path of the in-flight bound, once per interval of charges: waits while this thread has
 * more than the cap queued, then leaves a marker before the launch that is about to go, and
 * starts the in-process sensor's sample of that launch. LAUNCH_TIMED when it did. */
static __attribute__((noinline)) int pace_inflight(int rec, struct vc_device_block *block, vc_limiter_state *s,
                                                   CUstream stream, int64_t cost_ns) {
  struct inflight *t = inflight_of(rec);
  uint64_t cap = vc_limiter_inflight_cap_ns(s);
  if (!t) {
    until_mark_ns[rec] = (int64_t)cap;
    return LAUNCH_GO;
  }
  t->charged_ns += (uint64_t)(t->interval_ns - until_mark_ns[rec]);
  /* Until the first estimate every launch is timed: an interval of the first guess's charges may
   * span many launches of a program whose kernels are far longer, and the sensor's first samples
   * would land as one lump that the first estimate, taken in whichever window it fell into, reads
   * as the cost. That is one estimation window, a second or so; bounded in launches too, so a
   * container whose node agent measures nothing (compute sampling off, the agent down) does not
   * pay a timed launch forever. */
  int each = !vc_limiter_cost_known(s) && t->timed_unestimated < TIMED_UNESTIMATED_MAX;
  t->timed_unestimated += (uint32_t)each;
  t->interval_ns = each ? 1 : (int64_t)(cap / 4 > 1 ? cap / 4 : 1);
  until_mark_ns[rec] = t->interval_ns;
  CUresult (*get_ctx)(CUcontext *) = VC_REAL_CUDA(cuCtxGetCurrent);
  CUcontext ctx = NULL;
  if (!get_ctx || get_ctx(&ctx) != CUDA_SUCCESS || ctx == NULL) return LAUNCH_GO;
  if (ctx != t->ctx) { /* events belong to a context: start over in the new one */
    drop_events(t);
    t->ctx = ctx;
  }
  uint64_t before = t->charged_ns - (uint64_t)cost_ns; /* charged before this launch */
  /* A launch into a graph being captured runs nothing now: no pacing, and no event calls that
   * would become part of the graph or invalidate the capture. */
  if (is_capturing(stream)) return LAUNCH_GO;
  int mode = exchange_capture_mode(2 /* CU_STREAM_CAPTURE_MODE_RELAXED */);
  collect(t);
  while (t->count > 0 && before > t->done_ns + cap) {
    uint64_t rate = atomic_load_explicit(&s->rate_bp, memory_order_relaxed);
    /* Our queued excess drains at about our share of the card. */
    uint64_t sleep_ns = (before - t->done_ns - cap) * VC_LIMITER_FULL_BP / (rate ? rate : 1);
    if (sleep_ns < 20000) sleep_ns = 20000;
    if (sleep_ns > 2000000) sleep_ns = 2000000;
    struct timespec ts = {0, (long)sleep_ns};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    collect(t);
  }
  record_marker(t, stream, before);
  int timed = vc_sensor_begin(rec, block, ctx, stream, t->charged_ns, (uint64_t)cost_ns);
  if (mode >= 0) exchange_capture_mode(mode);
  return timed ? LAUNCH_TIMED : LAUNCH_GO;
}

/* ---- the limiter for one launch -------------------------------------------------------------- */

/* After the charge, off the fast path: wait for tokens when in debt, and the in-flight check when
 * this thread's interval of charges ran out, or at once when `mark_now`. */
static __attribute__((noinline, cold)) int after_charge(int rec, struct vc_device_block *block, vc_limiter_state *s,
                                                        CUstream stream, int64_t ticket, int64_t cost, int mark_now) {
  if (ticket < 0) wait_turn(rec, block, s, ticket);
  if ((until_mark_ns[rec] -= cost) < 0 || mark_now) return pace_inflight(rec, block, s, stream, cost);
  return LAUNCH_GO;
}

/* The whole limiter for one launch, for the cases the fast path hands over: limits not read yet
 * or due for their periodic re-read, block not cached, a new node-agent sample to fold in.
 *
 * The launch that folds in a sample also gets the in-flight check and with it the sensor's timed
 * sample, whatever is left of its interval of charges: while the cost estimate is far below the
 * kernels' real length (its first guess, for a program of long kernels), an interval spans many
 * launches, and the sensor's counter would grow in lumps seconds apart that no period of the
 * node agent's can read. One sample per node-agent sample bounds a lump to a period's launches. */
static __attribute__((noinline, cold)) int limit_record_slow(int rec, CUstream stream, uint64_t launches) {
  launches_until_refresh = REFRESH_EVERY;
  refresh_limits();
  uint64_t word = atomic_load_explicit(&limits_by_record[rec], memory_order_relaxed);
  struct vc_device_block *block = atomic_load_explicit(&block_by_record[rec], memory_order_relaxed);
  if (!block || !(word & LIMITS_VALID) || (word & LIMITS_UNLIMITED)) return LAUNCH_GO;
  vc_limiter_state *s = state_of(block);
  vc_limiter_limits lim = unpack_limits(word);
  int fresh = vc_limiter_has_new_sample(s, block);
  if (fresh) observe(block, s, &lim);
  int64_t ticket;
  int64_t cost = vc_limiter_charge_n(s, launches, &ticket);
  return after_charge(rec, block, s, stream, ticket, cost, fresh);
}

/* A launch into a capturing stream runs nothing now: the graph is charged when it replays. */
static __attribute__((noinline, cold)) int captured(CUstream stream) { return vc_stream_capturing(stream); }

/* The limiter for `launches` launches on config record `rec`, submitted to `stream`: LAUNCH_GO,
 * LAUNCH_REFUSED or LAUNCH_TIMED. Inlined into each hook; everything that is not the common case
 * is a call to a cold function. */
static inline __attribute__((always_inline)) int limit_launches(int rec, CUstream stream, uint64_t launches) {
  if ((unsigned)rec >= VC_CONFIG_MAX_DEVICES) return rec == REC_REFUSED ? LAUNCH_REFUSED : LAUNCH_GO;
  if (__builtin_expect(vc_capture_maybe_active(), 0) && captured(stream)) return LAUNCH_GO;
  if (launches == 0) return LAUNCH_GO;
  /* relaxed: limits and block pointers are published whole (one word each) and re-read often. */
  uint64_t word = atomic_load_explicit(&limits_by_record[rec], memory_order_relaxed);
  struct vc_device_block *block = atomic_load_explicit(&block_by_record[rec], memory_order_relaxed);
  if (__builtin_expect(!block || !(word & LIMITS_VALID) || launches_until_refresh-- == 0, 0))
    return limit_record_slow(rec, stream, launches);
  if (word & LIMITS_UNLIMITED) return LAUNCH_GO;
  vc_limiter_state *s = state_of(block);
  /* Samples are rare (one per period): the slow path folds it in and re-checks the limits. */
  if (__builtin_expect(vc_limiter_has_new_sample(s, block), 0)) return limit_record_slow(rec, stream, launches);
  int64_t ticket;
  int64_t cost = vc_limiter_charge_n(s, launches, &ticket);
  if (__builtin_expect(ticket < 0 || until_mark_ns[rec] < cost, 0))
    return after_charge(rec, block, s, stream, ticket, cost, 0);
  until_mark_ns[rec] -= cost;
  return LAUNCH_GO;
}

static inline __attribute__((always_inline)) int limit_record(int rec, CUstream stream) {
  return limit_launches(rec, stream, 1);
}

static inline __attribute__((always_inline)) int limit_current(CUstream stream) {
  return limit_record(current_record(), stream);
}

/* The device a stream's work runs on: its context's device; the current one for the legacy and
 * per-thread default streams, or when the driver cannot say. */
static int stream_record(CUstream stream) {
  if (stream == NULL || stream == (CUstream)0x1 || stream == (CUstream)0x2) return current_record();
  if (atomic_load_explicit(&record_count, memory_order_relaxed) == 1) return current_record();
  CUresult (*get_ctx)(CUstream, CUcontext *) = VC_REAL_CUDA_AS(CUresult(*)(CUstream, CUcontext *), "cuStreamGetCtx");
  CUresult (*push)(CUcontext) = VC_REAL_CUDA(cuCtxPushCurrent_v2);
  CUresult (*pop)(CUcontext *) = VC_REAL_CUDA(cuCtxPopCurrent_v2);
  CUresult (*get_device)(CUdevice *) = VC_REAL_CUDA(cuCtxGetDevice);
  CUcontext ctx, popped;
  CUdevice dev;
  if (!get_ctx || !push || !pop || !get_device || get_ctx(stream, &ctx) != CUDA_SUCCESS) return current_record();
  if (push(ctx) != CUDA_SUCCESS) return current_record();
  CUresult rc = get_device(&dev);
  pop(&popped);
  return rc == CUDA_SUCCESS ? record_of(dev) : current_record();
}

/* ---- forwarding targets: what cuGetProcAddress handed out, else the driver's export ---------- */

enum launch_variant {
  V_KERNEL,
  V_KERNEL_PTSZ,
  V_KERNEL_EX,
  V_KERNEL_EX_PTSZ,
  V_COOP,
  V_COOP_PTSZ,
  V_COOP_MULTI,
  V_GRAPH,
  V_GRAPH_PTSZ,
  V_COUNT
};

static const char *const variant_export[V_COUNT] = {
    "cuLaunchKernel",     "cuLaunchKernel_ptsz",  "cuLaunchKernelEx",
    "cuLaunchKernelEx_ptsz", "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz",
    "cuLaunchCooperativeKernelMultiDevice", "cuGraphLaunch", "cuGraphLaunch_ptsz",
};

static _Atomic(void *) forward_to[V_COUNT];

static void *forward(enum launch_variant v) {
  /* acquire: pairs with the release store in vc_launch_hook_wrap / below. */
  void *fn = atomic_load_explicit(&forward_to[v], memory_order_acquire);
  if (fn) return fn;
  fn = vc_real_cuda(variant_export[v]);
  if (fn) atomic_store_explicit(&forward_to[v], fn, memory_order_release);
  return fn;
}

typedef CUresult (*launch_kernel_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                     unsigned, CUstream, void **, void **);
typedef CUresult (*launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);
typedef CUresult (*launch_coop_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   CUstream, void **);
typedef CUresult (*launch_multi_fn)(CUDA_LAUNCH_PARAMS *, unsigned, unsigned);
typedef CUresult (*graph_launch_fn)(CUgraphExec, CUstream);

/* ---- the hooks ----------------------------------------------------------------------------- */

/* A timed launch (cold): the sensor's start event is recorded right before the launch and its
 * end event here, once the driver has it. */
static __attribute__((noinline, cold)) CUresult timed(CUresult rc) {
  vc_sensor_end(rc);
  return rc;
}

/* Forwards `call` as the limiter's verdict `v` says: the fast path is a tail call. */
#define FORWARD(v, call)                                                          \
  do {                                                                            \
    if (__builtin_expect((v) != LAUNCH_GO, 0))                                    \
      return (v) == LAUNCH_REFUSED ? CUDA_ERROR_INVALID_DEVICE : (vc_sensor_start(), timed(call)); \
    return call;                                                                  \
  } while (0)

/* The stream a launch really goes to: in a _ptsz entry point the null stream is the per-thread
 * default stream, where the in-flight marker must be recorded. */
static inline CUstream stream_of(CUstream stream, int per_thread) {
  return per_thread && stream == NULL ? (CUstream)0x2 /* CU_STREAM_PER_THREAD */ : stream;
}

#define KERNEL_HOOK(name, variant, per_thread)                                                                 \
  VC_EXPORT CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,      \
                          unsigned int by, unsigned int bz, unsigned int shm, CUstream stream, void **params,    \
                          void **extra) {                                                                       \
    launch_kernel_fn real = (launch_kernel_fn)forward(variant);                                                 \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;                                                               \
    int v = limit_current(stream_of(stream, per_thread));                                                       \
    FORWARD(v, real(f, gx, gy, gz, bx, by, bz, shm, stream, params, extra));                                    \
  }

KERNEL_HOOK(cuLaunchKernel, V_KERNEL, 0)
KERNEL_HOOK(cuLaunchKernel_ptsz, V_KERNEL_PTSZ, 1)

#define EX_HOOK(name, variant, per_thread)                                                            \
  VC_EXPORT CUresult name(const CUlaunchConfig *config, CUfunction f, void **params, void **extra) { \
    launch_ex_fn real = (launch_ex_fn)forward(variant);                                              \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;                                                    \
    CUstream stream = stream_of(config ? config->hStream : NULL, per_thread);                        \
    int v = limit_record(stream_record(stream), stream);                                             \
    FORWARD(v, real(config, f, params, extra));                                                      \
  }

EX_HOOK(cuLaunchKernelEx, V_KERNEL_EX, 0)
EX_HOOK(cuLaunchKernelEx_ptsz, V_KERNEL_EX_PTSZ, 1)

#define COOP_HOOK(name, variant, per_thread)                                                                    \
  VC_EXPORT CUresult name(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,      \
                          unsigned int by, unsigned int bz, unsigned int shm, CUstream stream, void **params) { \
    launch_coop_fn real = (launch_coop_fn)forward(variant);                                                     \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;                                                               \
    int v = limit_current(stream_of(stream, per_thread));                                                       \
    FORWARD(v, real(f, gx, gy, gz, bx, by, bz, shm, stream, params));                                           \
  }

COOP_HOOK(cuLaunchCooperativeKernel, V_COOP, 0)
COOP_HOOK(cuLaunchCooperativeKernel_ptsz, V_COOP_PTSZ, 1)

/* One launch on several devices: each device it touches pays its own bucket. */
VC_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *list, unsigned int count,
                                                        unsigned int flags) {
  launch_multi_fn real = (launch_multi_fn)forward(V_COOP_MULTI);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (list) {
    for (unsigned int i = 0; i < count; i++) {
      int v = limit_record(stream_record(list[i].hStream), list[i].hStream);
      if (v == LAUNCH_REFUSED) return CUDA_ERROR_INVALID_DEVICE;
      if (v == LAUNCH_TIMED) vc_sensor_end(CUDA_ERROR_NOT_SUPPORTED); /* one launch, many devices: not sampled */
    }
  }
  return real(list, count, flags);
}

/* A replay is charged as the kernel launches it holds, and its graph memory is reserved first. */
#define GRAPH_HOOK(name, variant, per_thread)                                                   \
  VC_EXPORT CUresult name(CUgraphExec exec, CUstream stream) {                                 \
    graph_launch_fn real = (graph_launch_fn)forward(variant);                                  \
    if (!real) return CUDA_ERROR_NOT_INITIALIZED;                                              \
    CUstream on = stream_of(stream, per_thread);                                               \
    int v = limit_launches(stream_record(on), on, vc_graph_launches(exec));                    \
    FORWARD(v, vc_graph_run(exec, stream, real));                                              \
  }

GRAPH_HOOK(cuGraphLaunch, V_GRAPH, 0)
GRAPH_HOOK(cuGraphLaunch_ptsz, V_GRAPH_PTSZ, 1)

/* ---- cuGetProcAddress entry -------------------------------------------------------------- */

static const struct {
  const char *base;
  enum launch_variant legacy;
  enum launch_variant per_thread;
  void *legacy_hook;
  void *per_thread_hook;
} launch_table[] = {
    {"cuLaunchKernel", V_KERNEL, V_KERNEL_PTSZ, (void *)cuLaunchKernel, (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", V_KERNEL_EX, V_KERNEL_EX_PTSZ, (void *)cuLaunchKernelEx, (void *)cuLaunchKernelEx_ptsz},
    {"cuLaunchCooperativeKernel", V_COOP, V_COOP_PTSZ, (void *)cuLaunchCooperativeKernel,
     (void *)cuLaunchCooperativeKernel_ptsz},
    {"cuLaunchCooperativeKernelMultiDevice", V_COOP_MULTI, V_COOP_MULTI, (void *)cuLaunchCooperativeKernelMultiDevice,
     (void *)cuLaunchCooperativeKernelMultiDevice},
    {"cuGraphLaunch", V_GRAPH, V_GRAPH_PTSZ, (void *)cuGraphLaunch, (void *)cuGraphLaunch_ptsz},
};

#define PER_THREAD_DEFAULT_STREAM 2u /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

void *vc_launch_hook_wrap(const char *symbol, int cuda_version, uint64_t flags, void *real_fn) {
  (void)cuda_version; /* every launch entry point has one ABI per variant */
  if (!symbol || !real_fn) return NULL;
  for (size_t i = 0; i < sizeof launch_table / sizeof launch_table[0]; i++) {
    size_t n = strlen(launch_table[i].base);
    if (strncmp(symbol, launch_table[i].base, n) != 0) continue;
    const char *suffix = symbol + n;
    int per_thread;
    if (*suffix == '\0') per_thread = (flags & PER_THREAD_DEFAULT_STREAM) != 0;
    else if (strcmp(suffix, "_ptsz") == 0) per_thread = 1;
    else continue; /* e.g. cuLaunchKernelEx when looking at cuLaunchKernel: try the next row */
    enum launch_variant v = per_thread ? launch_table[i].per_thread : launch_table[i].legacy;
    /* release: a hook that sees the pointer sees a fully resolved function. */
    atomic_store_explicit(&forward_to[v], real_fn, memory_order_release);
    return per_thread ? launch_table[i].per_thread_hook : launch_table[i].legacy_hook;
  }
  return NULL;
}
