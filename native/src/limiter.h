/* Compute limiter: a token bucket of GPU time per device, shared by every process of the
 * container, steered by the node agent's measured share (native/COMPUTE.md has the control law).
 *
 * The state lives in the container's shared region, device block bytes 96..255
 * (contract/region-layout.ts), so all processes of the container draw from one bucket. A zeroed
 * block is a valid initial state: the region file is created zero-filled and needs no set-up.
 *
 * Units: tokens are nanoseconds of *estimated* GPU time; a launch costs the current per-launch
 * cost estimate; the bucket refills at the target share (basis points of wall time). Nothing here
 * depends on SM count: shares and costs are both time.
 *
 * Everything in this file is plain arithmetic over the state and an explicit `now_ns`, so it is
 * testable without a driver, a clock or threads (native/test/limiter_test.c). */
#ifndef VCUDA_LIMITER_H
#define VCUDA_LIMITER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "region.h"

#define VC_LIMITER_STATE_OFFSET offsetof(struct vc_device_block, limiter_state) /* inside a region device block */
#define VC_LIMITER_STATE_BYTES sizeof(((struct vc_device_block *)0)->limiter_state) /* bytes 96..255 */
#define VC_LIMITER_FULL_BP 10000u    /* 100 % in basis points */

#define VC_LIMITER_FOLDS 3 /* a sample describes time up to two folds back (late publication) */

/* Per-device state in shared memory. Every field is a lock-free 32/64-bit atomic, so processes
 * of the container may race on it; the comments say who writes each. */
typedef struct vc_limiter_state {
  _Atomic int64_t tokens_ns;       /* +0  bucket level; negative = debt of charged, waiting launches */
  _Atomic uint64_t refilled_ns;    /* +8  estimated GPU ns ever added by refills (tickets use it) */
  _Atomic uint64_t refill_at_ns;   /* +16 monotonic time up to which the bucket has been refilled */
  _Atomic uint64_t cost_q8;        /* +24 feed-forward estimate: GPU ns per launch << 8 (0 = default) */
  _Atomic uint64_t seen_seq;       /* +32 last node-agent sample folded in (controller claim) */
  _Atomic uint64_t seen_time_ms;   /* +40 that sample's time */
  _Atomic uint64_t seen_released_ns;/* +48 released total at the start of the estimation window */
  _Atomic uint64_t waited_ns;      /* +56 total time launches were held (metrics, anti-windup) */
  _Atomic uint64_t seen_waited_ns; /* +64 waited total when the last sample was folded in */
  _Atomic uint32_t rate_bp;        /* +72 refill rate (controller output); 0 = not yet set */
  _Atomic uint32_t target_bp;      /* +76 share the controller steers to (hard: limit; soft: see COMPUTE.md) */
  _Atomic int32_t trim_bp;         /* +80 integral trim on the share error */
  _Atomic uint32_t samples;        /* +84 samples folded in (diagnostics) */
  _Atomic uint64_t limits_key;     /* +88 request/limit/mode the state was steered for; a change resets trim */
  _Atomic uint64_t acc_measured_ns;/* +96 measured GPU time summed since the estimate last moved */
  _Atomic uint64_t acc_elapsed_ms; /* +104 wall time those samples cover */
  /* The released total (estimated GPU time of launches handed to the driver) at the last
   * VC_LIMITER_FOLDS folds and when (unix ms mod 2^32), so releases can be taken over exactly the
   * wall time a sample describes (COMPUTE.md, "The sensor"). */
  _Atomic uint64_t fold_released_ns[VC_LIMITER_FOLDS]; /* +112 */
  _Atomic uint32_t fold_ms[VC_LIMITER_FOLDS];         /* +136 */
  _Atomic uint32_t folds;          /* +148 folds so far; the next goes to folds % VC_LIMITER_FOLDS */
  _Atomic int32_t outlier_streak;  /* +152 consecutive windows whose ratio was off by 2x (sign = direction) */
  _Atomic uint32_t settle_samples; /* +156 samples still to skip after a change: they may describe time before it */
} vc_limiter_state;

_Static_assert(sizeof(vc_limiter_state) <= VC_LIMITER_STATE_BYTES, "limiter state must fit bytes 96..255");
_Static_assert(offsetof(vc_limiter_state, tokens_ns) == 0 && offsetof(vc_limiter_state, cost_q8) == 24 &&
                   offsetof(vc_limiter_state, waited_ns) == 56 && offsetof(vc_limiter_state, rate_bp) == 72 &&
                   offsetof(vc_limiter_state, target_bp) == 76 && offsetof(vc_limiter_state, trim_bp) == 80 &&
                   offsetof(vc_limiter_state, samples) == 84,
               "node-agent/compute/limiter-state.ts reads these offsets");

/* The container's limits on one device, from the limit file. Hard mode: request == limit. */
typedef struct vc_limiter_limits {
  uint32_t request_bp;
  uint32_t limit_bp;
  int is_soft;
} vc_limiter_limits;

/* One node-agent sample from the region device block (+64..+95), read under its seqlock. */
typedef struct vc_limiter_sample {
  uint64_t seq;          /* even, non-zero once the node agent has written */
  uint64_t time_ms;      /* unix ms at the end of the measured period */
  uint32_t measured_bp;  /* this container's share of the card's time */
  uint32_t card_busy_bp; /* the whole card's busy share */
  uint32_t period_ms;    /* length of the measured period */
} vc_limiter_sample;

/* Tuning, in time units only (documented with their reasons in native/COMPUTE.md). */
#define VC_LIMITER_DEFAULT_COST_NS 200000u    /* first guess before any measurement: 200 µs */
#define VC_LIMITER_BURST_NS 20000000u         /* bucket depth: 20 ms of wall time at the rate */
#define VC_LIMITER_MAX_SLEEP_NS 5000000u      /* re-check limits/samples at least every 5 ms */
#define VC_LIMITER_SOFT_HEADROOM_BP 300u      /* idle share a soft tenant leaves to detect demand */
#ifndef VC_LIMITER_INFLIGHT_NS                /* overridable for A/B builds only */
#define VC_LIMITER_INFLIGHT_NS 20000000u      /* queued GPU work per launcher: 20 ms of wall time at the rate */
#endif

/* True when the device needs no limiting at all (hard 100 %). */
static inline int vc_limiter_is_unlimited(const vc_limiter_limits *lim) {
  return !lim->is_soft && lim->limit_bp >= VC_LIMITER_FULL_BP;
}

/* Fast path: charges `launches` launches (a graph replay charges its kernel nodes) at the current
 * cost estimate and returns that cost (estimated GPU ns). One atomic read-modify-write, no lock, no clock, no allocation. `*ticket` >= 0: the bucket
 * covered it (launch now); < 0: the launch is in debt, `*ticket` is its place and
 * vc_limiter_wait_ns decides when it may go. */
static inline int64_t vc_limiter_charge_n(vc_limiter_state *s, uint64_t launches, int64_t *ticket) {
  /* relaxed: the cost is an estimate; a stale value only shifts one launch's charge. */
  uint64_t q8 = atomic_load_explicit(&s->cost_q8, memory_order_relaxed);
  int64_t cost = (q8 ? (int64_t)(q8 >> 8) + 1 : (int64_t)VC_LIMITER_DEFAULT_COST_NS) * (int64_t)launches;
  /* relaxed: the bucket guards no other memory; only its own value matters. */
  *ticket = atomic_fetch_sub_explicit(&s->tokens_ns, cost, memory_order_relaxed) - cost;
  return cost;
}

/* Whether the cost has been estimated from a measurement yet (else it is the first guess). */
static inline int vc_limiter_cost_known(const vc_limiter_state *s) {
  return atomic_load_explicit(&s->cost_q8, memory_order_relaxed) != 0;
}

/* One launch. */
static inline int64_t vc_limiter_charge(vc_limiter_state *s, int64_t *ticket) { return vc_limiter_charge_n(s, 1, ticket); }

/* vc_limiter_charge as a yes/no: 1 when the launch may go now. */
static inline int vc_limiter_try_take(vc_limiter_state *s, int64_t *ticket) {
  vc_limiter_charge(s, ticket);
  return *ticket >= 0;
}

/* In-flight bound: how much charged but not yet completed GPU work (estimated ns) one launcher
 * may keep queued on the card: VC_LIMITER_INFLIGHT_NS of wall time at the current rate, and
 * never less than two launches (a big kernel must still be able to queue behind the running
 * one). On a card that runs every tenant's kernels in one queue, this keeps a tenant from
 * banking work that later runs in a neighbour's time (native/COMPUTE.md, "In-flight bound"). */
uint64_t vc_limiter_inflight_cap_ns(const vc_limiter_state *s);

/* True when the node agent has published a sample this state has not folded in yet: two plain
 * loads, checked on every launch so that the controller runs even while the bucket never runs dry
 * (a wrong cost estimate must not hide the measurements that would correct it). */
static inline int vc_limiter_has_new_sample(const vc_limiter_state *s, const void *device_block) {
  /* relaxed: a hint only; vc_limiter_read_sample does the ordered read. */
  uint64_t seq = atomic_load_explicit((const _Atomic uint64_t *)((const unsigned char *)device_block +
                                                                   offsetof(struct vc_device_block, sample_seq)),
                                      memory_order_relaxed);
  return seq != atomic_load_explicit(&s->seen_seq, memory_order_relaxed) && !(seq & 1);
}

/* Slow path, one step: refills the bucket up to `now_ns` and returns 0 when the launch holding
 * `ticket` may go, else how long to sleep before asking again (at most VC_LIMITER_MAX_SLEEP_NS).
 * `*ticket_base` must be 0 on the first call for a ticket; the function keeps its place there. */
uint64_t vc_limiter_wait_ns(vc_limiter_state *s, int64_t ticket, uint64_t *ticket_base, uint64_t now_ns);

/* Records time a launch was held (for the controller's anti-windup and for metrics). */
void vc_limiter_note_wait(vc_limiter_state *s, uint64_t waited_ns);

/* Controller step: folds a new node-agent sample (or a limits change) into the rate and the
 * per-launch cost estimate. Idempotent per sample; when several processes call it with the same
 * sample, exactly one applies it. `now_unix_ms` (the wall clock the sensor stamps samples with)
 * times the charges: the estimate pairs what the card measured over a sample's wall time with
 * what was charged over that same time, however late the sample arrives. */
void vc_limiter_observe(vc_limiter_state *s, const vc_limiter_sample *sample, const vc_limiter_limits *lim,
                        uint64_t now_unix_ms);

/* Applies limits without a new sample (start-up and live limit changes): sets target and rate. */
void vc_limiter_set_limits(vc_limiter_state *s, const vc_limiter_limits *lim, const vc_limiter_sample *last);

/* Reads the node-agent sample from a region device block (its first byte) under the seqlock.
 * Returns 0, or -EAGAIN when a write stayed in progress over every retry. */
int vc_limiter_read_sample(const void *device_block, vc_limiter_sample *out);

/* The target share for these limits given the last sample (pure): hard = limit; soft = what the
 * other tenants leave, minus a small headroom, clamped to [request, limit]. */
uint32_t vc_limiter_target_bp(const vc_limiter_limits *lim, const vc_limiter_sample *last);

/* Reads device `index`'s limits from a mapping of the limit file (contract/limit-config.ts) under
 * its seqlock (seq at +24, odd while the node agent rewrites it in place). Returns 0 and fills
 * `*out` and `*seq`; -EAGAIN when a write stayed in progress over every retry; -EINVAL when the
 * mapping is not a limit file or has no such device. */
int vc_limiter_read_limits(const void *config, uint64_t length, unsigned index, vc_limiter_limits *out,
                           uint64_t *seq);

/* The seqlock word of a mapped limit file, for a cheap "did anything change" check. */
static inline uint64_t vc_limiter_config_seq(const void *config) {
  /* acquire: a changed seq must be seen before the records it covers are re-read. */
  return atomic_load_explicit((const _Atomic uint64_t *)((const unsigned char *)config + VC_CFG_OFF_SEQ), memory_order_acquire);
}

#endif
