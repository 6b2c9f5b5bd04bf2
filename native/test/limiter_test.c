/* The limiter as plain functions: bucket, tickets, seqlock readers, soft target, and the closed
 * loop against a simulated GPU (discrete events, simulated clock) that serializes kernels of
 * several tenants like time-slicing. Kernel durations come from a grid and an SM count, so the
 * same law is checked on a 16-SM and a 132-SM card. Exit status 0 = pass. */
#include "../src/limiter.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) {                                        \
      failures++;                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                       \
      fputc('\n', stderr);                                \
    }                                                     \
  } while (0)

#define MS 1000000ull
#define US 1000ull

/* ---- simulated card ---------------------------------------------------------------------- */

#define MAX_TENANTS 3
#define SIM_MS 8000
#define NVML_Q_MS 167 /* NVML's sampling interval */
#define NVML_D_MS 100 /* how late NVML publishes an interval */
#define POLL_MS 50    /* the node agent's card sampler */
#define IDLE_AFTER_MS 2000 /* its idleAfterMs */
#define START_MS 73   /* tenants start inside an NVML interval, as they do on a real card */

typedef enum { STORM, SYNC_LOOP } workload;

typedef struct tenant {
  vc_limiter_limits limits;
  workload kind;
  uint64_t kernel_ns;     /* GPU time of one kernel */
  uint64_t cpu_ns;        /* CPU time per launch call */
  uint64_t queue_ns;      /* how far an async launcher may run ahead of its GPU work */
  uint64_t gap_ns;        /* CPU work between synchronize and the next launch (sync loop) */
  int inflight_bound;     /* the hook's in-flight bound: queued work <= vc_limiter_inflight_cap_ns */
  int present;            /* takes part in the run */
  uint64_t pause_at_ns;   /* starved machine: the next time this process loses the CPU */
  uint64_t change_at_ms;  /* a live limit change at this time (0: none) ... */
  vc_limiter_limits change_to; /* ... to these limits */
  /* state */
  _Alignas(64) unsigned char block[256]; /* region device block: sample at +64, limiter at +96 */
  uint64_t next_ns;
  uint64_t last_end_ns;
  int waiting;
  int64_t ticket;
  uint64_t ticket_base;
  uint64_t wait_from_ns;
  double busy_ms[SIM_MS]; /* GPU time per 1 ms bin (ground truth) */
} tenant;

static vc_limiter_state *state_of(tenant *t) { return (vc_limiter_state *)(t->block + VC_LIMITER_STATE_OFFSET); }

static uint64_t gpu_free_ns;
static uint64_t sample_seq;

static void record_busy(tenant *t, uint64_t start, uint64_t end) {
  while (start < end) {
    uint64_t bin = start / MS;
    if (bin >= SIM_MS) return;
    uint64_t stop = (bin + 1) * MS < end ? (bin + 1) * MS : end;
    t->busy_ms[bin] += (double)(stop - start) / (double)MS;
    start = stop;
  }
}

/* One FIFO engine for all tenants: a kernel starts when the card is free and its stream's
 * previous kernel is done. */
static void launch(tenant *t, uint64_t now) {
  uint64_t start = now > gpu_free_ns ? now : gpu_free_ns;
  if (t->last_end_ns > start) start = t->last_end_ns;
  uint64_t end = start + t->kernel_ns;
  gpu_free_ns = end;
  t->last_end_ns = end;
  record_busy(t, start, end);
}

/* The sensor, as the fake NVML and the node agent's card sampler produce it (native/COMPUTE.md,
 * "The sensor"): NVML interval j covers [j Q, (j+1) Q), its per-process samples (whole percent,
 * rounded down) appear D after it ends, stamped with its end (or, with stamp_published, with the
 * time they appear: a timestamp late by D); the sampler polls every POLL_MS
 * and publishes the intervals that appeared since its last look (their mean, stamped with the
 * newest stamp, period = time since its last publication), or, when NVML has had nothing for
 * IDLE_AFTER_MS and the card was idle in its last interval, an idle sample with period 0. */
static uint64_t nvml_seen; /* intervals published so far */
static int stamp_published; /* FAKEGPU_NVML_STAMP=published */
static uint64_t sampler_last_ms;
static uint64_t sampler_active_ms; /* when NVML last had process samples (0: never) */

static void publish(tenant *ts, int n, uint64_t time_ms, const uint32_t *measured, uint32_t busy, uint32_t period) {
  sample_seq += 2;
  for (int i = 0; i < n; i++) {
    unsigned char *blk = ts[i].block;
    uint64_t odd = sample_seq - 1;
    memcpy(blk + 64, &odd, 8);
    memcpy(blk + 72, &time_ms, 8);
    memcpy(blk + 80, &measured[i], 4);
    memcpy(blk + 84, &busy, 4);
    memcpy(blk + 88, &period, 4);
    memcpy(blk + 64, &sample_seq, 8);
  }
}

/* Busy ms of tenant i (every tenant: i < 0) in NVML interval j. */
static double interval_busy(tenant *ts, int n, int i, uint64_t j) {
  double busy = 0;
  for (int k = 0; k < n; k++) {
    if (i >= 0 && k != i) continue;
    for (uint64_t b = j * NVML_Q_MS; b < (j + 1) * NVML_Q_MS && b < SIM_MS; b++) busy += ts[k].busy_ms[b];
  }
  return busy;
}

/* Whole percent of an interval, rounded down. */
static uint32_t floor_percent(double busy_ms) {
  uint32_t pct = (uint32_t)(busy_ms * 100.0 / NVML_Q_MS + 1e-9);
  return pct > 100 ? 100 : pct;
}

static void poll_sensor(tenant *ts, int n, uint64_t now) {
  uint64_t now_ms = now / MS;
  uint64_t published = now_ms >= NVML_D_MS ? (now_ms - NVML_D_MS) / NVML_Q_MS : 0; /* intervals 0..published-1 */
  uint32_t sum[MAX_TENANTS] = {0}, card = 0, intervals = 0;
  uint64_t newest_ms = 0;
  for (uint64_t j = nvml_seen; j < published; j++) {
    if (interval_busy(ts, n, -1, j) == 0) continue; /* nothing ran: no samples */
    for (int i = 0; i < n; i++) sum[i] += floor_percent(interval_busy(ts, n, i, j));
    intervals++;
    newest_ms = (j + 1) * NVML_Q_MS + (stamp_published ? NVML_D_MS : 0);
  }
  nvml_seen = published;
  uint32_t measured[MAX_TENANTS] = {0}, total = 0;
  for (int i = 0; i < n && intervals; i++) total += measured[i] = sum[i] * 100 / intervals;
  uint32_t util = published ? floor_percent(interval_busy(ts, n, -1, published - 1)) * 100 : 0;
  card = util > total ? util : total;
  if (intervals > 0) sampler_active_ms = now_ms;
  if (intervals == 0) {
    /* busy, or was until recently, but nothing new: publish nothing */
    if (card > 0 || (sampler_active_ms && now_ms - sampler_active_ms < IDLE_AFTER_MS)) return;
    if (now_ms <= sampler_last_ms) return;
    sampler_last_ms = now_ms;
    publish(ts, n, now_ms, measured, 0, 0);
    return;
  }
  if (newest_ms <= sampler_last_ms) return;
  uint32_t period = (uint32_t)(newest_ms - sampler_last_ms);
  sampler_last_ms = newest_ms;
  publish(ts, n, newest_ms, measured, card > 10000 ? 10000 : card, period);
}

static uint64_t random_u64(void) {
  static uint64_t x = 88172645463325252ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

/* Pseudo-random oversleep of a loaded machine (0..300 µs), deterministic. */
static uint64_t jitter(void) { return random_u64() % (300 * US); }

/* A starved machine (the development machine at load 8-12 on 2 cores): every 100-400 ms each
 * process, tenants and the node agent's sampler alike, loses the CPU for up to starve_ms. */
static uint64_t starve_ms;

static uint64_t starved_for_ns(void) { return starve_ms ? random_u64() % (starve_ms * MS) : 0; }

static void step(tenant *t, uint64_t now) {
  vc_limiter_state *s = state_of(t);
  vc_limiter_sample smp;
  if (vc_limiter_has_new_sample(s, t->block) && vc_limiter_read_sample(t->block, &smp) == 0) {
    vc_limiter_observe(s, &smp, &t->limits, now / MS); /* the simulated clock is the wall clock */
  }
  if (!t->waiting) {
    /* An async launcher blocks when its launch queue is full; a sync loop waited already. */
    if (t->last_end_ns > now + t->queue_ns) {
      t->next_ns = t->last_end_ns - t->queue_ns;
      return;
    }
    /* The hook's bound, as markers see it: queued GPU time (real, which the converged cost
     * estimate makes equal to charged time) above the cap waits for the queue to drain. The hook
     * polls its markers with sleeps, so it wakes late like any other wait. */
    uint64_t cap = vc_limiter_inflight_cap_ns(s);
    if (t->inflight_bound && t->last_end_ns > now + cap) {
      t->next_ns = t->last_end_ns - cap + jitter();
      return;
    }
    if (vc_limiter_try_take(s, &t->ticket)) {
      launch(t, now);
      t->next_ns = now + t->cpu_ns;
      goto after_launch;
    }
    t->waiting = 1;
    t->ticket_base = 0;
    t->wait_from_ns = now;
  }
  uint64_t sleep_ns = vc_limiter_wait_ns(s, t->ticket, &t->ticket_base, now);
  if (sleep_ns) {
    t->next_ns = now + sleep_ns + jitter();
    return;
  }
  vc_limiter_note_wait(s, now - t->wait_from_ns);
  t->waiting = 0;
  launch(t, now);
  t->next_ns = now + t->cpu_ns;
after_launch:
  if (t->kind == SYNC_LOOP) t->next_ns = (t->last_end_ns > t->next_ns ? t->last_end_ns : t->next_ns) + t->gap_ns;
}

/* LIMITER_TEST_TRACE=1: each tenant's share per 100 ms on stderr, to see a scenario settle. */
static void trace(tenant *ts, int n) {
  const char *on = getenv("LIMITER_TEST_TRACE");
  if (!on || *on != '1') return;
  for (int i = 0; i < n; i++) {
    if (!ts[i].present) continue;
    fprintf(stderr, "tenant %d:", i);
    for (int w = 0; w < SIM_MS / 100; w++) {
      double busy = 0;
      for (int b = w * 100; b < (w + 1) * 100; b++) busy += ts[i].busy_ms[b];
      fprintf(stderr, " %.0f", busy);
    }
    fputc('\n', stderr);
  }
}

/* Mean share (percent) of tenant t over [from_ms, to_ms). */
static double share_between(const tenant *t, int from_ms, int to_ms) {
  double busy = 0;
  for (int b = from_ms; b < to_ms; b++) busy += t->busy_ms[b];
  return busy * 100.0 / (to_ms - from_ms);
}

/* Runs the scenario; returns the MAE (percentage points) of 1 s windows after a 2 s warm-up
 * against `target_pct[i]`, and each tenant's mean share in `mean_pct`. */
static double simulate(tenant *ts, int n, const double *target_pct, double *mean_pct) {
  gpu_free_ns = 0;
  sample_seq = 0;
  nvml_seen = 0;
  sampler_last_ms = 0;
  sampler_active_ms = 0;
  for (int i = 0; i < n; i++) {
    tenant *t = &ts[i];
    memset(t->block, 0, sizeof t->block);
    memset(t->busy_ms, 0, sizeof t->busy_ms);
    t->next_ns = START_MS * MS + (uint64_t)i * 37 * US;
    t->last_end_ns = 0;
    t->waiting = 0;
    t->pause_at_ns = t->next_ns;
    vc_limiter_set_limits(state_of(t), &t->limits, NULL);
  }
  uint64_t next_sample = POLL_MS * MS;
  for (;;) {
    int who = -1;
    for (int i = 0; i < n; i++) {
      if (ts[i].present && (who < 0 || ts[i].next_ns < ts[who].next_ns)) who = i;
    }
    uint64_t now = ts[who].next_ns;
    while (next_sample <= now && next_sample < SIM_MS * MS) {
      poll_sensor(ts, n, next_sample);
      next_sample += POLL_MS * MS + starved_for_ns();
    }
    if (now >= SIM_MS * MS) break;
    tenant *t = &ts[who];
    if (starve_ms && now >= t->pause_at_ns) {
      t->pause_at_ns = now + (100 + random_u64() % 300) * MS;
      t->next_ns = now + starved_for_ns();
      continue;
    }
    if (t->change_at_ms && now >= t->change_at_ms * MS) {
      /* The hook re-reads the limit file while it waits and at each sample. */
      t->limits = t->change_to;
      t->change_at_ms = 0;
      vc_limiter_set_limits(state_of(t), &t->limits, NULL);
    }
    step(t, now);
  }
  trace(ts, n);
  double err = 0;
  int windows = 0;
  for (int i = 0; i < n; i++) {
    if (!ts[i].present) continue;
    double total = 0;
    for (int w = 2; w < SIM_MS / 1000; w++) {
      double busy = 0;
      for (int b = w * 1000; b < (w + 1) * 1000; b++) busy += ts[i].busy_ms[b];
      double pct = busy / 10.0;
      total += pct;
      err += pct > target_pct[i] ? pct - target_pct[i] : target_pct[i] - pct;
      windows++;
    }
    mean_pct[i] = total / (SIM_MS / 1000 - 2);
  }
  const char *on = getenv("LIMITER_TEST_TRACE");
  if (on && *on == '1') fprintf(stderr, "MAE %.2f pp\n", err / windows);
  return err / windows;
}

static tenant tenants[MAX_TENANTS];

static void reset_tenants(void) {
  memset(tenants, 0, sizeof tenants);
}

static void storm(tenant *t, uint32_t request, uint32_t limit, uint64_t kernel_ns) {
  t->present = 1;
  t->limits = (vc_limiter_limits){request * 100, limit * 100, request != limit};
  t->kind = STORM;
  t->kernel_ns = kernel_ns;
  t->cpu_ns = 3 * US;
  t->queue_ns = 2 * MS;
}

/* A kernel of `blocks` blocks of 10 µs each on a card with `sms` SMs: waves x 10 µs. */
static uint64_t kernel_ns_for(uint64_t blocks, uint64_t sms) { return (blocks + sms - 1) / sms * 10 * US; }

static void test_lone_hard(void) {
  const uint32_t limits[] = {10, 30, 50, 70, 90};
  const uint64_t sms[] = {16, 132};
  for (size_t k = 0; k < 2; k++) {
    for (size_t i = 0; i < 5; i++) {
      reset_tenants();
      storm(&tenants[0], limits[i], limits[i], kernel_ns_for(264, sms[k]));
      double target = limits[i], mean;
      double mae = simulate(tenants, 1, &target, &mean);
      CHECK(mae <= 2.0, "lone hard %u%% on %llu SMs: MAE %.2f pp", limits[i], (unsigned long long)sms[k], mae);
      CHECK(mean >= 0.96 * target && mean <= target + 1.0, "lone hard %u%% on %llu SMs: mean %.2f%%", limits[i],
            (unsigned long long)sms[k], mean);
    }
  }
}

static void test_two_hard_tenants(void) {
  reset_tenants();
  storm(&tenants[0], 30, 30, 120 * US);
  storm(&tenants[1], 70, 70, 40 * US);
  double targets[] = {30, 70}, mean[2];
  double mae = simulate(tenants, 2, targets, mean);
  CHECK(mae <= 2.0, "hard 30/70: MAE %.2f pp (means %.1f/%.1f)", mae, mean[0], mean[1]);
}

/* A driver that queues a second of work per stream (the fake's 1024-kernel push buffer, a real
 * driver's deep queues), with the hook's in-flight bound: contended shares stay on target, and
 * the bound is deep enough to keep the card fed for a lone tenant at 90 % (big kernels, late
 * wake-ups included), so it costs no throughput. */
static void test_deep_queue_with_inflight_bound(void) {
  double targets[] = {30, 70}, mean[2];
  reset_tenants();
  storm(&tenants[0], 30, 30, 120 * US);
  storm(&tenants[1], 70, 70, 40 * US);
  for (int i = 0; i < 2; i++) tenants[i].queue_ns = 1000 * MS, tenants[i].inflight_bound = 1;
  double bounded = simulate(tenants, 2, targets, mean);
  CHECK(bounded <= 2.0, "hard 30/70, deep queues, in-flight bound: MAE %.2f pp (means %.1f/%.1f)", bounded, mean[0],
        mean[1]);
  reset_tenants();
  storm(&tenants[0], 30, 60, 80 * US);
  storm(&tenants[1], 70, 70, 50 * US);
  for (int i = 0; i < 2; i++) tenants[i].queue_ns = 1000 * MS, tenants[i].inflight_bound = 1;
  double soft = simulate(tenants, 2, targets, mean);
  CHECK(soft <= 2.0 && mean[0] >= 28.0, "soft 30..60 + hard 70, deep queues, bound: MAE %.2f pp (means %.1f/%.1f)",
        soft, mean[0], mean[1]);
  const uint64_t kernels[] = {40 * US, 2 * MS, 8 * MS};
  for (size_t k = 0; k < 3; k++) {
    reset_tenants();
    storm(&tenants[0], 90, 90, kernels[k]);
    tenants[0].queue_ns = 1000 * MS, tenants[0].inflight_bound = 1;
    double target = 90, lone;
    double mae = simulate(tenants, 1, &target, &lone);
    CHECK(mae <= 2.0 && lone >= 0.96 * 90, "lone hard 90 %%, %llu µs kernels, bound: MAE %.2f pp, mean %.1f",
          (unsigned long long)(kernels[k] / US), mae, lone);
  }
}

static void test_inflight_cap(void) {
  _Alignas(64) unsigned char block[256] = {0};
  vc_limiter_state *s = (vc_limiter_state *)(block + VC_LIMITER_STATE_OFFSET);
  vc_limiter_limits lim = {7000, 7000, 0};
  vc_limiter_set_limits(s, &lim, NULL);
  CHECK(vc_limiter_inflight_cap_ns(s) == VC_LIMITER_INFLIGHT_NS / 10 * 7, "cap: 20 ms at 70 %% = 14 ms, got %llu",
        (unsigned long long)vc_limiter_inflight_cap_ns(s));
  atomic_store(&s->cost_q8, (uint64_t)(50 * MS) << 8);
  CHECK(vc_limiter_inflight_cap_ns(s) == 2 * (50 * MS + 1), "cap never below two launches, got %llu",
        (unsigned long long)vc_limiter_inflight_cap_ns(s));
  int64_t ticket;
  CHECK(vc_limiter_charge(s, &ticket) == (int64_t)(50 * MS + 1) && ticket == -(int64_t)(50 * MS + 1),
        "charge returns the cost it took from the bucket");
}

static void test_soft(void) {
  reset_tenants();
  storm(&tenants[0], 30, 60, 80 * US);
  double target = 60, mean;
  double mae = simulate(tenants, 1, &target, &mean);
  CHECK(mae <= 2.0, "soft 30..60 alone bursts to 60: MAE %.2f pp, mean %.1f", mae, mean);

  reset_tenants();
  storm(&tenants[0], 30, 60, 80 * US);
  storm(&tenants[1], 70, 70, 50 * US);
  double targets[] = {30, 70}, means[2];
  mae = simulate(tenants, 2, targets, means);
  CHECK(mae <= 2.0, "soft 30..60 with hard 70: MAE %.2f pp (means %.1f/%.1f)", mae, means[0], means[1]);
  CHECK(means[0] >= 28.0, "soft tenant keeps its request: %.1f", means[0]);
}

static void test_big_kernel_sync_loop(void) {
  reset_tenants();
  tenant *t = &tenants[0];
  storm(t, 40, 40, 25 * MS);
  t->kind = SYNC_LOOP;
  t->gap_ns = 200 * US;
  double target = 40, mean;
  double mae = simulate(tenants, 1, &target, &mean);
  CHECK(mae <= 2.0, "big kernel + sync at 40%%: MAE %.2f pp, mean %.1f", mae, mean);
}

static void test_tiny_kernel_storm(void) {
  reset_tenants();
  storm(&tenants[0], 25, 25, 4 * US);
  tenants[0].cpu_ns = 1 * US;
  double target = 25, mean;
  double mae = simulate(tenants, 1, &target, &mean);
  CHECK(mae <= 2.0, "tiny-kernel storm at 25%%: MAE %.2f pp, mean %.1f", mae, mean);
}

/* Releases `released_ns` of estimated GPU time to the driver (refills that covered launches), then
 * folds the next 100 ms sample, which measured `measured_bp` of the card, at its own time; returns
 * the cost estimate after it. */
static uint64_t fold_next(vc_limiter_state *s, const vc_limiter_limits *lim, vc_limiter_sample *smp,
                          uint64_t released_ns, uint32_t measured_bp) {
  atomic_fetch_add(&s->refilled_ns, released_ns);
  smp->seq += 2, smp->time_ms += 100;
  smp->measured_bp = measured_bp, smp->card_busy_bp = measured_bp;
  vc_limiter_observe(s, smp, lim, smp->time_ms);
  uint64_t q8 = atomic_load(&s->cost_q8);
  return q8 ? (q8 >> 8) + 1 : VC_LIMITER_DEFAULT_COST_NS;
}

/* The estimator on hand-made windows: the samples right after a start may describe time before
 * it and are skipped; the first estimate snaps from the default guess, taking the top of NVML's
 * whole-percent rounding; a lone window off by more than 2x is dropped, a second one agreeing
 * with it is believed; a new limit skips the next two samples. */
static void test_cost_estimate(void) {
  _Alignas(64) unsigned char block[256] = {0};
  vc_limiter_state *s = (vc_limiter_state *)(block + VC_LIMITER_STATE_OFFSET);
  vc_limiter_limits lim = {5000, 5000, 0};
  vc_limiter_set_limits(s, &lim, NULL);
  vc_limiter_sample smp = {.seq = 2, .time_ms = 1000, .measured_bp = 0, .card_busy_bp = 0, .period_ms = 100};
  vc_limiter_observe(s, &smp, &lim, smp.time_ms); /* the first sample opens a window */
  /* 10 ms of estimated charges per 100 ms while the card measured 50 ms: 5x the guess. The two
   * samples after the start may still describe the card before the tenant ran: no estimate. */
  CHECK(fold_next(s, &lim, &smp, 10 * MS, 1000) == VC_LIMITER_DEFAULT_COST_NS, "first sample after the start is skipped");
  CHECK(fold_next(s, &lim, &smp, 10 * MS, 4000) == VC_LIMITER_DEFAULT_COST_NS, "second sample after the start is skipped");
  uint64_t cost = fold_next(s, &lim, &smp, 10 * MS, 5000);
  /* 50 % read as whole percent may be up to 51 %: the snap takes 51 ms, 5.1x. */
  CHECK(cost > 51 * VC_LIMITER_DEFAULT_COST_NS / 10 - 1000 && cost < 51 * VC_LIMITER_DEFAULT_COST_NS / 10 + 1000,
        "first estimate snaps to 5.1x the default, got %llu", (unsigned long long)cost);
  /* The snap changed the rate of real work at this sample; the next sample still shows the old. */
  CHECK(fold_next(s, &lim, &smp, 10 * MS, 9000) == cost, "the sample after a snap is skipped");
  /* A lone window claiming kernels 10x dearer (the process was paused while the card drained). */
  uint64_t after_lone = fold_next(s, &lim, &smp, 10 * MS, 10000);
  CHECK(after_lone == cost, "a lone 10x window is dropped, cost %llu -> %llu", (unsigned long long)cost,
        (unsigned long long)after_lone);
  /* The next window agrees: the kernels really got dearer. */
  uint64_t after_two = fold_next(s, &lim, &smp, 10 * MS, 10000);
  CHECK(after_two > 10 * cost && after_two < 11 * cost, "two agreeing windows snap, cost %llu -> %llu",
        (unsigned long long)cost, (unsigned long long)after_two);
  /* The same sample folded twice (a second process of the container) changes nothing. */
  vc_limiter_observe(s, &smp, &lim, smp.time_ms);
  CHECK(atomic_load(&s->samples) == 7, "each sample is folded in once, got %u", atomic_load(&s->samples));
  /* A new limit between samples: the next two samples may describe the old rate. Releases now
   * match what the card measures (the cost is right), so a window off by 1.8x would move it. */
  CHECK(fold_next(s, &lim, &smp, 90 * MS, 9000) == after_two, "the sample after the snap is skipped");
  vc_limiter_limits lower = {2000, 2000, 0};
  vc_limiter_set_limits(s, &lower, NULL);
  CHECK(fold_next(s, &lower, &smp, 90 * MS, 5000) == after_two && fold_next(s, &lower, &smp, 90 * MS, 5000) == after_two,
        "the two samples after a new limit are skipped");
  /* Then a window 11 % dear moves the cost halfway, in log: 1.054x. */
  uint64_t settled = fold_next(s, &lower, &smp, 90 * MS, 10000);
  CHECK(settled > after_two * 1050 / 1000 && settled < after_two * 1057 / 1000,
        "then the estimator runs again: %llu -> %llu", (unsigned long long)after_two, (unsigned long long)settled);
  /* Fewer than 8 launches' worth released: the window keeps summing rather than trust a ratio. */
  CHECK(fold_next(s, &lower, &smp, 30 * MS, 9000) == settled, "a short window is not closed");
}

/* A sample is folded whenever the first launch after it comes, 10 to 90 ms after its stamp here:
 * the window takes the releases up to the stamp, not up to the fold. Releases run steadily at
 * 10 ms per 100 ms and the card measures 10 %: the cost is right and must stay put (pairing from
 * fold to fold would see 1.8x and 0.2x in turn). */
static void test_pairing_by_wall_time(void) {
  _Alignas(64) unsigned char block[256] = {0};
  vc_limiter_state *s = (vc_limiter_state *)(block + VC_LIMITER_STATE_OFFSET);
  vc_limiter_limits lim = {1000, 1000, 0};
  vc_limiter_set_limits(s, &lim, NULL);
  const uint64_t cost = 500 * US; /* 8 launches = 4 ms: every 100 ms window holds enough */
  atomic_store(&s->cost_q8, (cost - 1) << 8);
  vc_limiter_sample smp = {.seq = 2, .time_ms = 1000, .measured_bp = 1000, .card_busy_bp = 1000, .period_ms = 100};
  for (int k = 0; k < 12; k++, smp.seq += 2, smp.time_ms += 100) {
    uint64_t fold_ms = smp.time_ms + (k % 2 ? 90 : 10);
    atomic_store(&s->refilled_ns, (fold_ms - 900) * MS / 10); /* 10 % of the wall time since 900 */
    vc_limiter_observe(s, &smp, &lim, fold_ms);
    uint64_t now = (atomic_load(&s->cost_q8) >> 8) + 1;
    CHECK(now > cost * 99 / 100 && now < cost * 101 / 100, "sample %d folded %llu ms late: cost %llu, want %llu", k,
          (unsigned long long)(fold_ms - smp.time_ms), (unsigned long long)now, (unsigned long long)cost);
  }
  CHECK(atomic_load(&s->outlier_streak) == 0, "no window was taken for an outlier");
}

static void test_bucket_and_tickets(void) {
  _Alignas(64) unsigned char block[256] = {0};
  vc_limiter_state *s = (vc_limiter_state *)(block + VC_LIMITER_STATE_OFFSET);
  vc_limiter_limits lim = {5000, 5000, 0};
  vc_limiter_set_limits(s, &lim, NULL);
  CHECK(atomic_load(&s->rate_bp) == 5000, "rate follows a hard limit");
  int64_t ticket;
  /* Empty bucket: the first launch is in debt and the first refill fills it to 20 ms x 50 %. */
  CHECK(!vc_limiter_try_take(s, &ticket), "empty bucket charges into debt");
  uint64_t base = 0;
  CHECK(vc_limiter_wait_ns(s, ticket, &base, 1 * MS) == 0, "first refill covers one launch");
  CHECK(atomic_load(&s->tokens_ns) == 10 * (int64_t)MS - (int64_t)VC_LIMITER_DEFAULT_COST_NS,
        "bucket holds 10 ms minus one launch, has %lld", (long long)atomic_load(&s->tokens_ns));
  /* Drain it: 10 ms / 200 µs = 50 launches fit, the 50th goes into debt. */
  int granted = 1;
  while (vc_limiter_try_take(s, &ticket)) granted++;
  CHECK(granted == (int)(10 * MS / VC_LIMITER_DEFAULT_COST_NS), "10 ms / default cost launches fit, got %d",
        granted);
  base = 0;
  uint64_t sleep_ns = vc_limiter_wait_ns(s, ticket, &base, 1 * MS);
  CHECK(sleep_ns == (uint64_t)(-ticket) * 2, "debt of %lld ns at 50 %% waits %llu ns", (long long)-ticket,
        (unsigned long long)sleep_ns);
  CHECK(vc_limiter_wait_ns(s, ticket, &base, 1 * MS + sleep_ns) == 0, "after the wait the debt is covered");
  /* A second ticket behind the first waits for both debts. */
  int64_t t2;
  vc_limiter_try_take(s, &t2);
  CHECK(t2 < 0, "next launch is in debt");
}

static void test_soft_target(void) {
  vc_limiter_limits soft = {3000, 6000, 1};
  vc_limiter_sample alone = {.seq = 2, .measured_bp = 6000, .card_busy_bp = 6000, .period_ms = 100};
  CHECK(vc_limiter_target_bp(&soft, &alone) == 6000, "soft alone: limit");
  vc_limiter_sample crowded = {.seq = 2, .measured_bp = 3000, .card_busy_bp = 10000, .period_ms = 100};
  CHECK(vc_limiter_target_bp(&soft, &crowded) == 3000, "soft vs 70 %% others: request");
  vc_limiter_sample half = {.seq = 2, .measured_bp = 2000, .card_busy_bp = 6000, .period_ms = 100};
  CHECK(vc_limiter_target_bp(&soft, &half) == 3850, "soft at 20 %% with 40 %% idle grows by half of (idle - headroom), got %u",
        vc_limiter_target_bp(&soft, &half));
  vc_limiter_sample squeezed = {.seq = 2, .measured_bp = 4500, .card_busy_bp = 9900, .period_ms = 100};
  CHECK(vc_limiter_target_bp(&soft, &squeezed) == 3900, "soft on a saturated card yields 2 headrooms, got %u",
        vc_limiter_target_bp(&soft, &squeezed));
  CHECK(vc_limiter_target_bp(&soft, NULL) == 3000, "soft without a sample: request");
  vc_limiter_limits hard = {4000, 4000, 0};
  CHECK(vc_limiter_target_bp(&hard, &alone) == 4000, "hard alone: the limit, idle time is never taken");
  CHECK(vc_limiter_target_bp(&hard, &crowded) == 3900, "hard on a contended card: a point below, so queues drain");
}

static void test_seqlock_readers(void) {
  _Alignas(64) unsigned char block[256] = {0};
  uint64_t seq = 7; /* odd: write in progress */
  memcpy(block + 64, &seq, 8);
  vc_limiter_sample smp;
  CHECK(vc_limiter_read_sample(block, &smp) == -EAGAIN, "odd seq is never read");
  seq = 8;
  uint64_t time_ms = 1234;
  uint32_t measured = 2500, busy = 9000, period = 100;
  memcpy(block + 64, &seq, 8);
  memcpy(block + 72, &time_ms, 8);
  memcpy(block + 80, &measured, 4);
  memcpy(block + 84, &busy, 4);
  memcpy(block + 88, &period, 4);
  CHECK(vc_limiter_read_sample(block, &smp) == 0 && smp.seq == 8 && smp.time_ms == 1234 &&
            smp.measured_bp == 2500 && smp.card_busy_bp == 9000 && smp.period_ms == 100,
        "stable sample is read whole");

  _Alignas(64) unsigned char cfg[512 + 2 * 128] = {0};
  memcpy(cfg, "VCUDACFG", 8);
  uint32_t count = 2, mode = 1, request = 20, limit = 45;
  memcpy(cfg + 16, &count, 4);
  memcpy(cfg + 512 + 128 + 52, &mode, 4);
  memcpy(cfg + 512 + 128 + 64, &request, 4);
  memcpy(cfg + 512 + 128 + 68, &limit, 4);
  uint64_t cseq = 4;
  memcpy(cfg + 24, &cseq, 8);
  vc_limiter_limits lim;
  uint64_t got_seq = 0;
  CHECK(vc_limiter_read_limits(cfg, sizeof cfg, 1, &lim, &got_seq) == 0 && lim.request_bp == 2000 &&
            lim.limit_bp == 4500 && lim.is_soft && got_seq == 4,
        "device 1's soft 20..45 read from the limit file");
  CHECK(vc_limiter_read_limits(cfg, sizeof cfg, 2, &lim, &got_seq) == -EINVAL, "no device 2");
  cseq = 5;
  memcpy(cfg + 24, &cseq, 8);
  CHECK(vc_limiter_read_limits(cfg, sizeof cfg, 1, &lim, &got_seq) == -EAGAIN, "odd config seq is never read");
  cfg[0] = 'X';
  CHECK(vc_limiter_read_limits(cfg, sizeof cfg, 1, &lim, &got_seq) == -EINVAL, "bad magic");
}

static void test_live_limit_change(void) {
  /* A running tenant at 70 % is moved to 20 % at 4 s; the sensor reports the old rate for a
   * while after the change. */
  const uint64_t sms[] = {16, 132};
  for (size_t k = 0; k < 2; k++) {
    reset_tenants();
    storm(&tenants[0], 70, 70, kernel_ns_for(64, sms[k]));
    tenants[0].change_at_ms = 4000;
    tenants[0].change_to = (vc_limiter_limits){2000, 2000, 0};
    double target = 70, mean;
    simulate(tenants, 1, &target, &mean);
    double before = share_between(&tenants[0], 1000, 4000), after = share_between(&tenants[0], 5000, SIM_MS);
    CHECK(before > 69 && before < 71.5, "%llu SMs, before the change: %.1f", (unsigned long long)sms[k], before);
    CHECK(after > 19 && after < 21.5, "%llu SMs, a second after the change: %.1f", (unsigned long long)sms[k], after);
  }
  /* Where the run left it (at 20 %, with the trim it learned there), one more change to 15 %. */
  vc_limiter_limits lower = {1500, 1500, 0};
  vc_limiter_state *s = state_of(&tenants[0]);
  vc_limiter_set_limits(s, &lower, NULL);
  CHECK(atomic_load(&s->rate_bp) == 1500, "rate drops to the new limit, got %u", atomic_load(&s->rate_bp));
  CHECK(atomic_load(&s->trim_bp) == 0 && atomic_load(&s->settle_samples) == 2,
        "a new limit resets the trim and skips the next two samples");
}

/* The scenarios every sensor model must hold (run with interval-end and with late stamps). */
static void run_sensor_scenarios(void) {
  test_lone_hard();
  test_two_hard_tenants();
  test_soft();
  test_big_kernel_sync_loop();
  test_tiny_kernel_storm();
  test_live_limit_change();
}

/* NVML stamping samples when it publishes them rather than with the end of the interval they
 * describe (FAKEGPU_NVML_STAMP=published): the controller pairs releases with a window 100 ms off
 * and must still hold every target. */
static void test_late_stamps(void) {
  stamp_published = 1;
  run_sensor_scenarios();
  stamp_published = 0;
}

/* A starved machine: every process loses the CPU for up to 60 ms every 100-400 ms. Shares fall
 * short (a tenant without CPU cannot launch) but no tenant exceeds its limit by more than the
 * rounding and nothing collapses. A soft tenant next to a starved hard one keeps some of the idle
 * time the hard one leaves (COMPUTE.md, Limitations): only its limit is checked there. */
static void test_starved_machine(void) {
  starve_ms = 60;
  double targets[] = {30, 70}, mean[2];
  const uint64_t sms[] = {16, 132};
  for (size_t k = 0; k < 2; k++) {
    reset_tenants();
    storm(&tenants[0], 70, 70, kernel_ns_for(264, sms[k]));
    double target = 70, lone;
    double mae = simulate(tenants, 1, &target, &lone);
    CHECK(mae <= 4.0 && lone >= 0.9 * 70 && lone <= 71.5, "starved, lone hard 70 %% on %llu SMs: MAE %.2f, mean %.1f",
          (unsigned long long)sms[k], mae, lone);
    reset_tenants();
    storm(&tenants[0], 30, 60, kernel_ns_for(264, sms[k]));
    storm(&tenants[1], 70, 70, kernel_ns_for(264, sms[k]));
    mae = simulate(tenants, 2, targets, mean);
    CHECK(mean[0] >= 30 && mean[0] < 61.5 && mean[1] > 45 && mean[1] < 71.5,
          "starved, soft 30..60 + hard 70 on %llu SMs: MAE %.2f (means %.1f/%.1f)", (unsigned long long)sms[k], mae,
          mean[0], mean[1]);
  }
  starve_ms = 0;
}

int main(void) {
  test_bucket_and_tickets();
  test_cost_estimate();
  test_pairing_by_wall_time();
  test_soft_target();
  test_seqlock_readers();
  run_sensor_scenarios();
  test_inflight_cap();
  test_deep_queue_with_inflight_bound();
  test_late_stamps();
  test_starved_machine();
  if (failures) {
    fprintf(stderr, "limiter_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("limiter_test: ok\n");
  return 0;
}
