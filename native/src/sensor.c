/* The in-process compute sensor (sensor.h): one launch per in-flight marker interval is timed with
 * a pair of timing events recorded right before and right after it on its stream; when the pair
 * has completed, the launch's measured time, scaled by the charges the interval held over the
 * launch's own, is added to the device block's busy-ns counter.
 *
 * Why single launches and not spans of many: under time-slicing (and on the fake driver's single
 * queue) a span of a stream's launches also covers what other contexts ran between them, so a
 * tenant that always has work queued would read the card's whole busy time as its own. A pair
 * around one launch covers that launch's execution only, and no idle time: where the stream ran
 * dry, the start event is reached when the launch starts. The estimate is exact for a stream of
 * like kernels and unbiased for a mix (every launch is equally likely to be the sampled one of its
 * interval); a kernel preempted mid-run for another context's time slice reads long. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include "sensor.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "config.h"
#include "real.h"
#include "region.h"

#define VC_TLS _Thread_local __attribute__((tls_model("initial-exec")))
#define PAIRS 8   /* samples whose end event has not completed yet */
#define SPARES 16 /* completed events kept for reuse */

struct pair {
  CUevent start, end;
  uint64_t weight_ns; /* charges this sample stands for */
  uint64_t launch_ns; /* the sampled launch's own charge */
  uint64_t gap_ns;    /* host time between the start event and the launch, where the stream ran dry */
};

struct sensor {
  CUcontext ctx; /* context the events belong to */
  struct vc_device_block *block;
  uint64_t sampled_at_ns; /* the thread's charges at the previous sample */
  unsigned head, count, spare_count;
  struct pair pairs[PAIRS];
  CUevent spare[SPARES];
};

struct sensor_set {
  struct sensor by_record[VC_CONFIG_MAX_DEVICES];
};

/* The launch between vc_sensor_begin and vc_sensor_end on this thread. */
struct open_sample {
  struct sensor *s;
  CUstream stream;
  struct pair p;
  int dry;             /* the stream had no work left when the sample was prepared */
  uint64_t started_ns; /* host clock when the start event was recorded */
};

/* Where the stream ran dry the start event is reached at once and the launch when it arrives, so
 * the host's time between the two is counted too: it is measured and taken off. A sample whose
 * start and launch were further apart than this on the host (the thread lost the CPU in between,
 * or waited on a lock) is dropped (its weight passes on): the gap is known only as a bound. */
#define MAX_HOST_GAP_NS 50000u

static VC_TLS struct sensor_set *set_of_thread;
static VC_TLS struct open_sample open_now;
static pthread_key_t set_key;
static pthread_once_t set_key_once = PTHREAD_ONCE_INIT;

uint64_t vc_sensor_scaled_ns(uint64_t elapsed_ns, uint64_t weight_ns, uint64_t launch_ns) {
  if (launch_ns == 0) return elapsed_ns;
  double v = (double)elapsed_ns * (double)weight_ns / (double)launch_ns;
  return v >= 1.8e19 ? UINT64_MAX : (uint64_t)v;
}

static void destroy_event(CUevent e) {
  CUresult (*destroy)(CUevent) = VC_REAL_CUDA(cuEventDestroy_v2);
  if (destroy && e) destroy(e);
}

static void give_back(struct sensor *s, CUevent e) {
  if (s->spare_count < SPARES) s->spare[s->spare_count++] = e;
  else destroy_event(e);
}

static void drop_all(struct sensor *s) {
  for (unsigned i = 0; i < s->count; i++) {
    struct pair *p = &s->pairs[(s->head + i) % PAIRS];
    destroy_event(p->start);
    destroy_event(p->end);
  }
  for (unsigned i = 0; i < s->spare_count; i++) destroy_event(s->spare[i]);
  s->head = s->count = s->spare_count = 0;
}

static void free_set(void *p) {
  struct sensor_set *set = p;
  for (unsigned i = 0; i < VC_CONFIG_MAX_DEVICES; i++) drop_all(&set->by_record[i]);
  free(set);
}

static void make_key(void) { pthread_key_create(&set_key, free_set); }

static struct sensor *sensor_of(int rec) {
  if ((unsigned)rec >= VC_CONFIG_MAX_DEVICES) return NULL;
  if (!set_of_thread) {
    pthread_once(&set_key_once, make_key);
    set_of_thread = calloc(1, sizeof *set_of_thread);
    if (!set_of_thread) return NULL;
    pthread_setspecific(set_key, set_of_thread);
  }
  return &set_of_thread->by_record[rec];
}

/* Adds the samples whose end event has completed, oldest first, to the device block. */
static void collect(struct sensor *s) {
  CUresult (*query)(CUevent) = VC_REAL_CUDA(cuEventQuery);
  CUresult (*elapsed)(float *, CUevent, CUevent) = VC_REAL_CUDA(cuEventElapsedTime);
  if (!query || !elapsed) return;
  while (s->count > 0) {
    struct pair *p = &s->pairs[s->head];
    CUresult rc = query(p->end);
    if (rc == CUDA_ERROR_NOT_READY) return;
    float ms = 0;
    if (rc == CUDA_SUCCESS && elapsed(&ms, p->start, p->end) == CUDA_SUCCESS && ms >= 0 && s->block) {
      uint64_t elapsed_ns = (uint64_t)((double)ms * 1e6);
      elapsed_ns = elapsed_ns > p->gap_ns ? elapsed_ns - p->gap_ns : 0;
      uint64_t ns = vc_sensor_scaled_ns(elapsed_ns, p->weight_ns, p->launch_ns);
      atomic_fetch_add_explicit(&s->block->busy_ns, ns, memory_order_relaxed);
      atomic_fetch_add_explicit(&s->block->busy_samples, 1, memory_order_relaxed);
    }
    give_back(s, p->start);
    give_back(s, p->end);
    s->head = (s->head + 1) % PAIRS;
    s->count--;
  }
}

/* A timing event: a completed one reused, else a new one (cold path only). */
static CUevent take_event(struct sensor *s) {
  if (s->spare_count > 0) return s->spare[--s->spare_count];
  CUresult (*create)(CUevent *, unsigned) = VC_REAL_CUDA(cuEventCreate);
  CUevent e = NULL;
  if (!create || create(&e, 0 /* CU_EVENT_DEFAULT: with timing */) != CUDA_SUCCESS) return NULL;
  return e;
}

int vc_sensor_begin(int rec, struct vc_device_block *block, CUcontext ctx, CUstream stream, uint64_t charged_ns,
                    uint64_t launch_ns) {
  open_now.s = NULL;
  struct sensor *s = sensor_of(rec);
  CUresult (*record)(CUevent, CUstream) = VC_REAL_CUDA(cuEventRecord);
  if (!s || !block || !ctx || !record) return 0;
  if (ctx != s->ctx) { /* events belong to a context: start over in the new one */
    drop_all(s);
    s->ctx = ctx;
  }
  s->block = block;
  collect(s);
  if (s->count == PAIRS) return 0; /* its weight passes to the next sample */
  CUevent start = take_event(s), end = start ? take_event(s) : NULL;
  if (!end) {
    if (start) give_back(s, start);
    return 0;
  }
  uint64_t weight = charged_ns > s->sampled_at_ns ? charged_ns - s->sampled_at_ns : launch_ns;
  s->sampled_at_ns = charged_ns;
  CUresult (*query)(CUstream) = VC_REAL_CUDA(cuStreamQuery);
  int dry = !query || query(stream) == CUDA_SUCCESS;
  open_now = (struct open_sample){s, stream, {start, end, weight, launch_ns, 0}, dry, 0};
  return 1;
}

/* A sample that did not happen: its events go back, and the next one stands for its charges. */
static void drop_open(void) {
  struct sensor *s = open_now.s;
  open_now.s = NULL;
  give_back(s, open_now.p.start);
  give_back(s, open_now.p.end);
  if (s->sampled_at_ns >= open_now.p.weight_ns) s->sampled_at_ns -= open_now.p.weight_ns;
}

static uint64_t host_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vc_sensor_start(void) {
  if (!open_now.s) return;
  CUresult (*record)(CUevent, CUstream) = VC_REAL_CUDA(cuEventRecord);
  /* Read after the record returns: the gap then runs from one call's return to the next one's, so
   * the time each call spends after it has handed its command over cancels out. */
  if (!record || record(open_now.p.start, open_now.stream) != CUDA_SUCCESS) drop_open();
  else open_now.started_ns = host_ns();
}

void vc_sensor_poll(int rec) {
  if ((unsigned)rec >= VC_CONFIG_MAX_DEVICES || !set_of_thread) return;
  struct sensor *s = &set_of_thread->by_record[rec];
  if (s->count > 0) collect(s);
}

void vc_sensor_end(CUresult rc) {
  struct sensor *s = open_now.s;
  if (!s) return;
  CUresult (*record)(CUevent, CUstream) = VC_REAL_CUDA(cuEventRecord);
  uint64_t gap = host_ns() - open_now.started_ns;
  open_now.p.gap_ns = open_now.dry ? gap : 0;
  if (rc != CUDA_SUCCESS || gap > MAX_HOST_GAP_NS || !record ||
      record(open_now.p.end, open_now.stream) != CUDA_SUCCESS) {
    drop_open();
    return;
  }
  open_now.s = NULL;
  s->pairs[(s->head + s->count) % PAIRS] = open_now.p;
  s->count++;
}
