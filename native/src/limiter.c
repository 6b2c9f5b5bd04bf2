/* Compute limiter: bucket refill, tickets, and the controller that steers the refill rate and
 * the per-launch cost estimate from the node agent's measurements. The control law and the
 * reasons for each constant are in native/COMPUTE.md. */
#ifdef VC_LIMITER_TRACE
#define _POSIX_C_SOURCE 200809L /* getpid under -std=c11, for the trace */
#endif
#include "limiter.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#ifdef VC_LIMITER_TRACE
#include <stdio.h>
#include <unistd.h>
#endif

#define NS_PER_MS 1000000ull

/* Controller gains (dimensionless; see COMPUTE.md). */
#define COST_GAIN 0.5            /* fraction of the log cost error corrected per estimate */
#define COST_SNAP 2.0            /* an error beyond 2x is corrected at once when it persists (new kernels) */
#define COST_STEP_MAX 64.0       /* one estimate moves the cost by at most 64x either way */
#define TRIM_GAIN 0.25           /* integral trim: fraction of the share error added per estimate */
#define TRIM_UP_MAX_BP 300       /* the trim may lift the rate at most 3 points above the target */
#define MIN_WINDOW_LAUNCHES 8    /* an estimate needs at least this many launches released */
#define MIN_WINDOW_NS 200000ull  /* ... and at least 200 µs of estimated GPU time */
#define MIN_RATE_BP 10u
#define CONTENDED_WINDOW_MS 500u /* estimation window while neighbours keep the card busy */
/* The sensor is late (COMPUTE.md, "The sensor"): a sample describes an interval that ended up to
 * one interval before it was published. After a change made at a sample (a new cost, a new
 * target) the next sample may still describe the old behaviour; after one made between samples
 * (a new limit, a tenant starting, the card idle until now) the next two may. */
#define SETTLE_AT_SAMPLE 1u
#define SETTLE_BETWEEN_SAMPLES 2u
#define SETTLE_COST_STEP 32 /* a cost step of more than 1/32 counts as a change */
/* A rate moved by more than 1/8 counts as a change. Coarser than the cost: a soft tenant's target
 * follows its own measured share, which moves by a point or two from sample to sample; skipping a
 * sample at each of those would never let its window close. */
#define SETTLE_RATE_STEP 8
#define QUANTUM_BP 100u /* the sensor's resolution: NVML reports whole percent */

static uint32_t clamp_u32(int64_t v, uint32_t lo, uint32_t hi) {
  if (v < (int64_t)lo) return lo;
  if (v > (int64_t)hi) return hi;
  return (uint32_t)v;
}

static uint64_t current_cost_ns(const vc_limiter_state *s) {
  uint64_t q8 = atomic_load_explicit(&s->cost_q8, memory_order_relaxed);
  return q8 ? (q8 >> 8) + 1 : VC_LIMITER_DEFAULT_COST_NS;
}

/* Adds the tokens earned between the last refill and `now_ns`. One process claims each interval
 * with a CAS on refill_at_ns, so concurrent refills never add the same time twice. */
static void refill(vc_limiter_state *s, uint64_t now_ns) {
  uint64_t prev = atomic_load_explicit(&s->refill_at_ns, memory_order_relaxed);
  if (prev >= now_ns) return;
  /* acq_rel: the winner's token update must not be reordered before its claim. */
  if (!atomic_compare_exchange_strong_explicit(&s->refill_at_ns, &prev, now_ns, memory_order_acq_rel,
                                               memory_order_relaxed)) {
    return; /* another launcher refilled this interval */
  }
  uint64_t rate = atomic_load_explicit(&s->rate_bp, memory_order_relaxed);
  if (rate < MIN_RATE_BP) rate = MIN_RATE_BP;
  uint64_t dt = now_ns - prev;
  /* First refill ever, or after a long idle: start from a full bucket, never more. */
  if (prev == 0 || dt > VC_LIMITER_BURST_NS) dt = VC_LIMITER_BURST_NS;
  int64_t add = (int64_t)(dt * rate / VC_LIMITER_FULL_BP);
  int64_t cap = (int64_t)((uint64_t)VC_LIMITER_BURST_NS * rate / VC_LIMITER_FULL_BP);
  int64_t old = atomic_load_explicit(&s->tokens_ns, memory_order_relaxed);
  int64_t next;
  do {
    if (old >= cap) return;
    next = old + add > cap ? cap : old + add;
  } while (!atomic_compare_exchange_weak_explicit(&s->tokens_ns, &old, next, memory_order_relaxed,
                                                  memory_order_relaxed));
  /* release: a waiter that sees the new refilled total also sees the tokens it stands for. */
  atomic_fetch_add_explicit(&s->refilled_ns, (uint64_t)(next - old), memory_order_release);
}

uint64_t vc_limiter_wait_ns(vc_limiter_state *s, int64_t ticket, uint64_t *ticket_base, uint64_t now_ns) {
  if (ticket >= 0) return 0;
  /* The ticket's place: refills counted from the first call cover its debt. Stored +1 so that 0
   * means "not yet taken". */
  if (*ticket_base == 0) *ticket_base = atomic_load_explicit(&s->refilled_ns, memory_order_acquire) + 1;
  refill(s, now_ns);
  uint64_t covered = atomic_load_explicit(&s->refilled_ns, memory_order_acquire) - (*ticket_base - 1);
  uint64_t need = (uint64_t)(-ticket);
  if (covered >= need) return 0;
  uint64_t rate = atomic_load_explicit(&s->rate_bp, memory_order_relaxed);
  if (rate < MIN_RATE_BP) rate = MIN_RATE_BP;
  uint64_t sleep_ns = (need - covered) * VC_LIMITER_FULL_BP / rate;
  if (sleep_ns > VC_LIMITER_MAX_SLEEP_NS) sleep_ns = VC_LIMITER_MAX_SLEEP_NS;
  if (sleep_ns < 1000) sleep_ns = 1000;
  return sleep_ns;
}

uint64_t vc_limiter_inflight_cap_ns(const vc_limiter_state *s) {
  uint64_t rate = atomic_load_explicit(&s->rate_bp, memory_order_relaxed);
  if (rate < MIN_RATE_BP) rate = MIN_RATE_BP;
  if (rate > VC_LIMITER_FULL_BP) rate = VC_LIMITER_FULL_BP;
  uint64_t cap = (uint64_t)VC_LIMITER_INFLIGHT_NS * rate / VC_LIMITER_FULL_BP;
  uint64_t two = 2 * current_cost_ns(s);
  return cap > two ? cap : two;
}

void vc_limiter_note_wait(vc_limiter_state *s, uint64_t waited_ns) {
  atomic_fetch_add_explicit(&s->waited_ns, waited_ns, memory_order_relaxed);
}

/* Whether other tenants keep the card busy: less idle time than the soft headroom, and at least
 * that much of the busy time is not ours. Then a shortfall is contention, not a slow bucket. */
static int is_contended(const vc_limiter_sample *last) {
  uint32_t busy = last->card_busy_bp > VC_LIMITER_FULL_BP ? VC_LIMITER_FULL_BP : last->card_busy_bp;
  uint32_t others = busy > last->measured_bp ? busy - last->measured_bp : 0;
  return VC_LIMITER_FULL_BP - busy < VC_LIMITER_SOFT_HEADROOM_BP && others >= VC_LIMITER_SOFT_HEADROOM_BP;
}

uint32_t vc_limiter_target_bp(const vc_limiter_limits *lim, const vc_limiter_sample *last) {
  uint32_t limit = lim->limit_bp > VC_LIMITER_FULL_BP ? VC_LIMITER_FULL_BP : lim->limit_bp;
  uint32_t request = lim->request_bp > limit ? limit : lim->request_bp;
  /* Hard on a contended card: leave a point idle so a shared queue's backlog can drain; with
   * every tenant at exactly its limit the backlog would wander and move shares with it. */
  if (!lim->is_soft) return last && last->seq != 0 && is_contended(last) && limit > 200 ? limit - 100 : limit;
  /* Soft without a measurement yet: hold the guarantee, burst once the card is known idle. */
  if (last == NULL || last->seq == 0) return request;
  uint32_t busy = last->card_busy_bp > VC_LIMITER_FULL_BP ? VC_LIMITER_FULL_BP : last->card_busy_bp;
  int64_t mine = last->measured_bp;
  /* Saturated with neighbours: yield fast (2 headrooms per sample) down to the request, because a
   * neighbour squeezed by our queue looks like a neighbour that wants less. */
  if (is_contended(last)) return clamp_u32(mine - 2 * (int64_t)VC_LIMITER_SOFT_HEADROOM_BP, request, limit);
  /* Idle time: grow into half of what exceeds the headroom per sample (no overshoot into a
   * neighbour's rising demand). */
  int64_t idle = (int64_t)VC_LIMITER_FULL_BP - busy;
  int64_t grow = idle > VC_LIMITER_SOFT_HEADROOM_BP ? (idle - VC_LIMITER_SOFT_HEADROOM_BP) / 2 : 0;
  return clamp_u32(mine + grow, request, limit);
}

static uint64_t limits_key_of(const vc_limiter_limits *lim) {
  return (uint64_t)lim->request_bp | (uint64_t)lim->limit_bp << 16 | (uint64_t)(lim->is_soft ? 1 : 0) << 32 |
         1ull << 40; /* never 0, so a zeroed state always counts as changed */
}

static void publish_rate(vc_limiter_state *s, uint32_t target) {
  int64_t trim = atomic_load_explicit(&s->trim_bp, memory_order_relaxed);
  atomic_store_explicit(&s->target_bp, target, memory_order_relaxed);
  atomic_store_explicit(&s->rate_bp, clamp_u32((int64_t)target + trim, MIN_RATE_BP, VC_LIMITER_FULL_BP),
                        memory_order_relaxed);
}

/* The next `samples` samples restart the window instead of closing it (never fewer than already
 * pending). */
static void settle(vc_limiter_state *s, uint32_t samples) {
  uint32_t pending = atomic_load_explicit(&s->settle_samples, memory_order_relaxed);
  if (samples > pending) atomic_store_explicit(&s->settle_samples, samples, memory_order_relaxed);
}

/* True when `to` differs from `from` by more than 1/`parts` of `from`. */
static int moved(double from, double to, double parts) {
  double step = to > from ? to - from : from - to;
  return step * parts > from;
}

void vc_limiter_set_limits(vc_limiter_state *s, const vc_limiter_limits *lim, const vc_limiter_sample *last) {
  uint64_t key = limits_key_of(lim);
  /* A new limit invalidates the trim learned for the old one; the cost estimate stays valid. The
   * rate changes now, between samples, and the sensor shows it late. */
  uint64_t old_key = atomic_exchange_explicit(&s->limits_key, key, memory_order_relaxed);
  if (old_key != key) {
    atomic_store_explicit(&s->trim_bp, 0, memory_order_relaxed);
    if (old_key != 0) settle(s, SETTLE_BETWEEN_SAMPLES);
  }
  publish_rate(s, vc_limiter_target_bp(lim, last));
}

/* Estimated GPU time of every launch released to the driver so far. Charged = refilled minus
 * what is left (tokens start at 0); while the bucket is in debt, the launches behind the debt are
 * charged but still waiting (tickets are served in order), so released = refilled. Pairing the
 * sensor with releases rather than charges keeps a throttled launch's wait out of the window it
 * does not run in. */
static uint64_t released_total_ns(const vc_limiter_state *s) {
  uint64_t refilled = atomic_load_explicit(&s->refilled_ns, memory_order_acquire);
  int64_t tokens = atomic_load_explicit(&s->tokens_ns, memory_order_relaxed);
  return tokens > 0 ? refilled - (uint64_t)tokens : refilled;
}

/* Records the released total at this fold, timed by the sensor's clock. */
static void note_fold(vc_limiter_state *s, uint64_t now_unix_ms, uint64_t released) {
  uint32_t n = atomic_load_explicit(&s->folds, memory_order_relaxed);
  atomic_store_explicit(&s->fold_released_ns[n % VC_LIMITER_FOLDS], released, memory_order_relaxed);
  atomic_store_explicit(&s->fold_ms[n % VC_LIMITER_FOLDS], (uint32_t)now_unix_ms, memory_order_relaxed);
  atomic_store_explicit(&s->folds, n + 1, memory_order_relaxed);
}

/* The released total at wall time `t_ms` (unix ms), interpolated between the recorded folds
 * around it: releases run steadily between folds, which come at every sample. 0 and *out set, or
 * -1 when `t_ms` is older than every recorded fold. A time after the newest fold (clock skew
 * between the sensor and this host) gets the newest total. */
static int released_at(const vc_limiter_state *s, uint64_t t_ms, uint64_t *out) {
  uint32_t n = atomic_load_explicit(&s->folds, memory_order_relaxed);
  uint32_t t = (uint32_t)t_ms;
  uint32_t newer_ms = 0;
  uint64_t newer_released = 0;
  for (uint32_t k = 1; k <= VC_LIMITER_FOLDS && k <= n; k++) {
    uint32_t at_ms = atomic_load_explicit(&s->fold_ms[(n - k) % VC_LIMITER_FOLDS], memory_order_relaxed);
    uint64_t released = atomic_load_explicit(&s->fold_released_ns[(n - k) % VC_LIMITER_FOLDS], memory_order_relaxed);
    int32_t after = (int32_t)(t - at_ms); /* wraps with the 32-bit clock */
    if (after >= 0) {
      uint32_t span = k == 1 ? 0 : newer_ms - at_ms;
      /* The total only grows; a torn read of refilled and tokens must not make it run backwards. */
      uint64_t grew = k == 1 || newer_released < released ? 0 : newer_released - released;
      *out = span == 0 || (uint32_t)after >= span ? released + grew
                                                   : released + (uint64_t)((double)grew * after / span);
      return 0;
    }
    newer_ms = at_ms;
    newer_released = released;
  }
  return -1;
}

/* Starts a new estimation window at sample time `t_ms`: the released total then (the current one
 * when no fold is old enough, as at a tenant's first sample). */
static void restart_window(vc_limiter_state *s, uint64_t t_ms, uint64_t released_now, uint64_t waited) {
  uint64_t released = released_now;
  if (released_at(s, t_ms, &released) != 0) released = released_now;
  atomic_store_explicit(&s->seen_released_ns, released, memory_order_relaxed);
  atomic_store_explicit(&s->seen_waited_ns, waited, memory_order_relaxed);
  atomic_store_explicit(&s->acc_measured_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&s->acc_elapsed_ms, 0, memory_order_relaxed);
}

/* One closed estimation window: what the card measured and what was released, over the same wall
 * time. */
typedef struct window {
  uint64_t measured_ns; /* GPU time the sensor reported */
  uint64_t quantum_ns;  /* the sensor's resolution over that time: one whole percent */
  uint64_t released_ns; /* estimated GPU time released to the driver */
  uint64_t elapsed_ms;  /* the wall time both cover */
} window;

/* What a window says the per-launch cost should be multiplied by: real GPU ns per estimated ns.
 * `extra_ns` is added to the measurement. */
static double window_ratio(const window *w, uint64_t extra_ns) {
  return (double)(w->measured_ns + extra_ns) / (double)w->released_ns;
}

/* What a window did to the cost estimate. */
typedef enum { COST_DROPPED, COST_SNAPPED, COST_MOVED, COST_STEADY } cost_step;

/* Feed-forward: corrects the per-launch cost by the window's measured/released ratio: snaps to it
 * (the first estimate, or a second window off by 2x the same way), steps halfway in log, or drops
 * a lone window off by 2x. A step of more than 1/SETTLE_COST_STEP is a change the sensor shows late. */
static cost_step estimate_cost(vc_limiter_state *s, const window *w) {
  double ratio = window_ratio(w, 0);
  int first = atomic_load_explicit(&s->cost_q8, memory_order_relaxed) == 0;
  /* A window off by more than 2x is believed at once for the first estimate (anything beats the
   * default guess) and when the next window agrees (the kernel mix really changed); a lone one
   * is a pause of the process or of the sampler and is dropped, trim included. */
  int direction = ratio > COST_SNAP ? 1 : ratio < 1.0 / COST_SNAP ? -1 : 0;
  int32_t streak = atomic_load_explicit(&s->outlier_streak, memory_order_relaxed);
  if (direction != 0 && !first && streak * direction <= 0) {
    atomic_store_explicit(&s->outlier_streak, direction, memory_order_relaxed);
    return COST_DROPPED;
  }
  atomic_store_explicit(&s->outlier_streak, 0, memory_order_relaxed);
  int snap = first || direction != 0;
  double gain = snap ? 1.0 : COST_GAIN;
  /* A snap trusts one window whole, so it takes the top of the sensor's rounding: a share read as
   * 1 % may be 1.99 %, and the low end would set the cost up to 2x short and overshoot the limit.
   * The next windows, at a larger share, refine it. This also moves a tenant whose kernels are
   * so cheap that NVML reads 0 %. */
  if (snap) ratio = window_ratio(w, w->quantum_ns);
  /* The first estimate replaces the default guess whole; later ones move it boundedly. */
  double step_max = first ? 4096.0 : COST_STEP_MAX;
  if (ratio < 1.0 / step_max) ratio = 1.0 / step_max;
  if (ratio > step_max) ratio = step_max;
  double old_cost = (double)current_cost_ns(s);
  double cost = old_cost * pow(ratio, gain);
  if (cost < 100.0) cost = 100.0;
  if (cost > 1e9) cost = 1e9;
  atomic_store_explicit(&s->cost_q8, (uint64_t)(cost * 256.0), memory_order_relaxed);
#ifdef VC_LIMITER_TRACE
  fprintf(stderr, "[%d] estimate: measured %llu released %llu elapsed %llu gain %.1f cost %.0f\n",
          (int)getpid(), (unsigned long long)w->measured_ns, (unsigned long long)w->released_ns, (unsigned long long)w->elapsed_ms,
          gain, cost);
#endif
  if (!snap && !moved(old_cost, cost, SETTLE_COST_STEP)) return COST_STEADY;
  settle(s, SETTLE_AT_SAMPLE);
  return snap ? COST_SNAPPED : COST_MOVED;
}

/* Feedback: the integral trim on the share error, when the bucket was the bottleneck. */
static void integrate_trim(vc_limiter_state *s, uint32_t target, const window *w, int was_throttled, int contended) {
  int32_t trim = atomic_load_explicit(&s->trim_bp, memory_order_relaxed);
  if (was_throttled) {
    double achieved_bp = (double)w->measured_ns * 1e4 / ((double)w->elapsed_ms * (double)NS_PER_MS);
    double step = TRIM_GAIN * ((double)target - achieved_bp);
    /* Contended: a small shortfall is queueing behind neighbours, and pushing harder only builds
     * a backlog that later overshoots the limit; only a shortfall beyond the headroom (a
     * guarantee really missed) raises the trim, and slowly. */
    if (contended && step > 0) {
      step = (double)target - achieved_bp > VC_LIMITER_SOFT_HEADROOM_BP ? step / 4 : 0;
    }
    trim += (int32_t)step;
    /* Asymmetric: down as far as a quarter of the target (a cost estimate that runs hot), up by
     * at most 3 points, because a shortfall is more often time the process could not launch
     * (CPU starvation, a pause) than a slow bucket, and a large lift overshoots the limit. */
    int32_t up = (int32_t)(target / 20 < TRIM_UP_MAX_BP ? target / 20 : TRIM_UP_MAX_BP) + 50;
    int32_t down = (int32_t)(target / 4 + 100);
    if (trim > up) trim = up;
    if (trim < -down) trim = -down;
  } else {
    trim /= 2; /* demand-limited: the error says nothing about the rate; let the trim fade */
  }
  atomic_store_explicit(&s->trim_bp, trim, memory_order_relaxed);
}

/* Closes an estimation window: the cost step, then the trim once the cost has settled. While the
 * cost still moves, it is correcting the error the trim would see, and the sensor shows both
 * corrections late: integrating as well would correct twice and overshoot the limit. */
static void estimate(vc_limiter_state *s, uint32_t target, const window *w, int was_throttled, int contended) {
  if (estimate_cost(s, w) == COST_STEADY) integrate_trim(s, target, w, was_throttled, contended);
}

/* Claims `sample` for this process: 1 when it is new and no other process folds it. */
static int claim(vc_limiter_state *s, const vc_limiter_sample *sample) {
  if (sample->seq == 0 || (sample->seq & 1)) return 0;
  uint64_t seen = atomic_load_explicit(&s->seen_seq, memory_order_acquire);
  if (seen == sample->seq) return 0;
  /* acq_rel: exactly one process folds each sample in, and it sees the previous one's stores. */
  if (!atomic_compare_exchange_strong_explicit(&s->seen_seq, &seen, sample->seq, memory_order_acq_rel,
                                               memory_order_acquire)) {
    return 0;
  }
  atomic_fetch_add_explicit(&s->samples, 1, memory_order_relaxed);
  return 1;
}

/* Skips this sample when a change is still settling (it may describe time before the change). */
static int settling(vc_limiter_state *s) {
  uint32_t pending = atomic_load_explicit(&s->settle_samples, memory_order_relaxed);
  if (pending == 0) return 0;
  atomic_store_explicit(&s->settle_samples, pending - 1, memory_order_relaxed);
  return 1;
}

/* Adds a contiguous sample (`elapsed` ms after the previous one) to the estimation window, and
 * closes the window once it holds enough: the cost step and the trim, then a new window. */
static void fold_into_window(vc_limiter_state *s, const vc_limiter_sample *sample, uint32_t target, uint64_t elapsed,
                             uint64_t released, uint64_t waited) {
  uint64_t acc_measured = atomic_load_explicit(&s->acc_measured_ns, memory_order_relaxed) +
                          (uint64_t)sample->measured_bp * elapsed * (NS_PER_MS / VC_LIMITER_FULL_BP);
  uint64_t acc_elapsed = atomic_load_explicit(&s->acc_elapsed_ms, memory_order_relaxed) + elapsed;
  /* What was released over the wall time the samples describe, however late they arrived. */
  uint64_t released_then = 0;
  if (released_at(s, sample->time_ms, &released_then) != 0) {
    restart_window(s, sample->time_ms, released, waited); /* older than every fold we know */
    return;
  }
  uint64_t seen_released = atomic_load_explicit(&s->seen_released_ns, memory_order_relaxed);
  uint64_t window_released = released_then > seen_released ? released_then - seen_released : 0;
  uint64_t min_released = MIN_WINDOW_LAUNCHES * current_cost_ns(s);
  if (min_released < MIN_WINDOW_NS) min_released = MIN_WINDOW_NS;
  /* Contended, our kernels queue behind the neighbours' and drain later: a short window pairs
   * releases with the wrong executions. Half a second averages the backlog out. The very first
   * estimate is taken at once: anything beats the default guess. */
  int has_estimate = atomic_load_explicit(&s->cost_q8, memory_order_relaxed) != 0;
  uint64_t min_elapsed_ms = is_contended(sample) && has_estimate ? CONTENDED_WINDOW_MS : 0;
  if (window_released < min_released || acc_elapsed < min_elapsed_ms) {
    /* Too few launches for a ratio worth trusting (big kernels, idle tenant), or a contended
     * window still short: keep summing. */
    atomic_store_explicit(&s->acc_measured_ns, acc_measured, memory_order_relaxed);
    atomic_store_explicit(&s->acc_elapsed_ms, acc_elapsed, memory_order_relaxed);
    if (acc_elapsed > 10000) restart_window(s, sample->time_ms, released, waited); /* idle for 10 s: forget */
    return;
  }
  uint64_t window_waited = waited - atomic_load_explicit(&s->seen_waited_ns, memory_order_relaxed);
  /* Throttled: the bucket was the bottleneck. Launches were held for at least 1 % of the window,
   * and what was released kept up with the refills (90 %): a tenant that got no CPU for part of
   * the window also waited, but its shortfall says nothing about the rate, and integrating it
   * would overshoot the limit once it runs again. */
  uint64_t refilled = (uint64_t)atomic_load_explicit(&s->rate_bp, memory_order_relaxed) * acc_elapsed *
                      (NS_PER_MS / VC_LIMITER_FULL_BP);
  int was_throttled = window_waited * 100 >= acc_elapsed * NS_PER_MS && window_released * 10 >= refilled * 9;
  /* Nothing measured although the bucket held launches: kernels far cheaper than the estimate
   * (NVML rounds a share under 1 % to 0); the snap's rounding bound still moves the cost. Nothing
   * measured and nothing held: an idle tenant, which says nothing about its kernels. */
  if (window_released > 0 && (acc_measured > 0 || was_throttled)) {
    window w = {.measured_ns = acc_measured,
                .quantum_ns = QUANTUM_BP * acc_elapsed * (NS_PER_MS / VC_LIMITER_FULL_BP),
                .released_ns = window_released,
                .elapsed_ms = acc_elapsed};
    estimate(s, target, &w, was_throttled, is_contended(sample));
  }
  restart_window(s, sample->time_ms, released, waited);
  uint32_t before = atomic_load_explicit(&s->rate_bp, memory_order_relaxed);
  publish_rate(s, target);
  if (moved(before, atomic_load_explicit(&s->rate_bp, memory_order_relaxed), SETTLE_RATE_STEP)) {
    settle(s, SETTLE_AT_SAMPLE);
  }
}

void vc_limiter_observe(vc_limiter_state *s, const vc_limiter_sample *sample, const vc_limiter_limits *lim,
                        uint64_t now_unix_ms) {
  if (!claim(s, sample)) return;
  /* No wall clock: the fold is timed as the sample, which pairs from fold to fold. */
  if (now_unix_ms == 0) now_unix_ms = sample->time_ms;
  uint64_t released = released_total_ns(s);
  uint64_t waited = atomic_load_explicit(&s->waited_ns, memory_order_relaxed);
  note_fold(s, now_unix_ms, released);
#ifdef VC_LIMITER_TRACE
  fprintf(stderr, "[%d] observe: t %llu now %llu period %u measured %u busy %u settle %u rate %u trim %d cost %llu\n",
          (int)getpid(), (unsigned long long)sample->time_ms, (unsigned long long)now_unix_ms, sample->period_ms, sample->measured_bp,
          sample->card_busy_bp, atomic_load(&s->settle_samples), atomic_load(&s->rate_bp), atomic_load(&s->trim_bp),
          (unsigned long long)current_cost_ns(s));
#endif
  uint64_t prev_time = atomic_exchange_explicit(&s->seen_time_ms, sample->time_ms, memory_order_relaxed);
  uint64_t elapsed = sample->time_ms > prev_time ? sample->time_ms - prev_time : 0;
  uint32_t period = sample->period_ms;
  uint32_t target = vc_limiter_target_bp(lim, sample);
  uint32_t old_rate = atomic_load_explicit(&s->rate_bp, memory_order_relaxed);
  vc_limiter_set_limits(s, lim, sample);
  /* A target that moved far (a soft tenant bursting or yielding) changes the rate at this sample. */
  if (old_rate != 0 && moved(old_rate, atomic_load_explicit(&s->rate_bp, memory_order_relaxed), SETTLE_RATE_STEP)) {
    settle(s, SETTLE_AT_SAMPLE);
  }
  /* Samples must tile time: a gap (missed samples, node-agent restart), an idle card (period 0)
   * or the first sample restarts the window instead of pairing releases with the wrong
   * measurements, and the samples right after it may describe time before the tenant ran. */
  int contiguous = prev_time != 0 && period != 0 && elapsed * 2 >= period && elapsed * 2 <= 3ull * period;
  if (!contiguous) settle(s, SETTLE_BETWEEN_SAMPLES);
  if (!contiguous || settling(s)) {
    restart_window(s, sample->time_ms, released, waited);
    return;
  }
  fold_into_window(s, sample, target, elapsed, released, waited);
}

int vc_limiter_read_sample(const void *device_block, vc_limiter_sample *out) {
  const unsigned char *b = device_block;
  /* The node agent writes these fields with plain stores between two seq stores; reading them
   * as relaxed atomics between acquire loads of seq is the classic seqlock reader. */
  const _Atomic uint64_t *seq = (const _Atomic uint64_t *)(b + offsetof(struct vc_device_block, sample_seq));
  const _Atomic uint64_t *time_ms = (const _Atomic uint64_t *)(b + offsetof(struct vc_device_block, sample_time_ms));
  const _Atomic uint32_t *measured = (const _Atomic uint32_t *)(b + offsetof(struct vc_device_block, measured_share_bp));
  const _Atomic uint32_t *busy = (const _Atomic uint32_t *)(b + offsetof(struct vc_device_block, card_busy_bp));
  const _Atomic uint32_t *period = (const _Atomic uint32_t *)(b + offsetof(struct vc_device_block, sample_period_ms));
  for (int attempt = 0; attempt < 64; attempt++) {
    uint64_t before = atomic_load_explicit(seq, memory_order_acquire);
    if (before & 1) continue;
    vc_limiter_sample v = {
        .seq = before,
        .time_ms = atomic_load_explicit(time_ms, memory_order_relaxed),
        .measured_bp = atomic_load_explicit(measured, memory_order_relaxed),
        .card_busy_bp = atomic_load_explicit(busy, memory_order_relaxed),
        .period_ms = atomic_load_explicit(period, memory_order_relaxed),
    };
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(seq, memory_order_relaxed) == before) {
      *out = v;
      return 0;
    }
  }
  return -EAGAIN;
}

/* Limit-file offsets: config.h's, pinned by contract/limit-config.ts. */
int vc_limiter_read_limits(const void *config, uint64_t length, unsigned index, vc_limiter_limits *out,
                           uint64_t *seq) {
  const unsigned char *b = config;
  if (length < VC_CONFIG_HEADER_SIZE) return -EINVAL;
  for (int i = 0; i < 8; i++) {
    if (b[i] != (unsigned char)VC_CONFIG_MAGIC[i]) return -EINVAL;
  }
  const _Atomic uint64_t *seqp = (const _Atomic uint64_t *)(b + VC_CFG_OFF_SEQ);
  for (int attempt = 0; attempt < 64; attempt++) {
    uint64_t before = atomic_load_explicit(seqp, memory_order_acquire);
    if (before & 1) continue;
    uint32_t count = atomic_load_explicit((const _Atomic uint32_t *)(b + VC_CFG_OFF_DEVICE_COUNT), memory_order_relaxed);
    if (index >= count || VC_CONFIG_HEADER_SIZE + (uint64_t)(index + 1) * VC_CONFIG_RECORD_SIZE > length) return -EINVAL;
    const unsigned char *rec = b + VC_CONFIG_HEADER_SIZE + (uint64_t)index * VC_CONFIG_RECORD_SIZE;
    uint32_t mode = atomic_load_explicit((const _Atomic uint32_t *)(rec + VC_CFG_REC_MODE), memory_order_relaxed);
    uint32_t request = atomic_load_explicit((const _Atomic uint32_t *)(rec + VC_CFG_REC_CORE_REQUEST), memory_order_relaxed);
    uint32_t limit = atomic_load_explicit((const _Atomic uint32_t *)(rec + VC_CFG_REC_CORE_LIMIT), memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(seqp, memory_order_relaxed) != before) continue;
    /* Out-of-range values cannot come from the node agent's writer; clamp rather than trust. */
    if (limit < 1) limit = 1;
    if (limit > 100) limit = 100;
    if (request < 1) request = 1;
    if (request > limit) request = limit;
    out->request_bp = request * 100;
    out->limit_bp = limit * 100;
    out->is_soft = mode == VC_MODE_SOFT;
    *seq = before;
    return 0;
  }
  return -EAGAIN;
}
