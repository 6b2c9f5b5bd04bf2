/* MIG state of the node's cards in the shared file: mode, GPU instances, compute instances and the
 * MIG devices they make (fake_mig.h). Every operation takes the state lock; the results are the
 * NVML codes the real library answers (fake_nvml_mig.c passes them on). */
#define _GNU_SOURCE
#include <string.h>
#include <strings.h>

#include "fake_state.h"

static int card_ok(const struct fg_state *s, int node) { return s && node >= 0 && (uint32_t)node < s->device_count; }

const struct fg_mig_model *fg_mig_model_of(int node) {
  struct fg_state *s = fg_state();
  return card_ok(s, node) ? fg_mig_model_for(s->devices[node].memory_total >> 20) : NULL;
}

int fg_mig_in_use_locked(struct fg_state *s, int dev) {
  fg_reclaim_dead_locked();
  for (int k = 0; k < FG_MAX_PROCS; k++) {
    const struct fg_proc *p = &s->procs[k];
    if (p->live && (p->used[dev] || (p->context_mask & (1ull << dev)))) return 1;
  }
  return 0;
}

static int any_gi_locked(const struct fg_mig_card *c) {
  for (int g = 0; g < FG_MIG_GIS; g++)
    if (c->gi[g].live) return 1;
  return 0;
}

int fg_mig_set_mode(int node, unsigned int mode) {
  struct fg_state *s = fg_state();
  if (!card_ok(s, node) || mode > 1) return FG_MIG_INVALID;
  if (!fg_mig_model_of(node)) return FG_MIG_NOT_SUPPORTED;
  fg_lock();
  struct fg_mig_card *c = &s->mig[node];
  int rc = FG_MIG_OK;
  if (c->mode != mode) {
    /* The driver resets the card to switch: nothing may hold it, and no instance may be left. */
    if (fg_mig_in_use_locked(s, node) || any_gi_locked(c)) rc = FG_MIG_IN_USE;
    else c->mode = mode;
  }
  fg_unlock();
  return rc;
}

unsigned int fg_mig_mode(int node) {
  struct fg_state *s = fg_state();
  return card_ok(s, node) ? __atomic_load_n(&s->mig[node].mode, __ATOMIC_ACQUIRE) : 0;
}

static struct fg_mig_gi *gi_locked(struct fg_mig_card *c, unsigned int gi_id) {
  for (int g = 0; g < FG_MIG_GIS; g++)
    if (c->gi[g].live && c->gi[g].id == gi_id) return &c->gi[g];
  return NULL;
}

/* Memory slices taken (bit i: slice i), compute slices taken, and instances of `profile_id`. */
static void card_usage_locked(const struct fg_mig_card *c, unsigned int profile_id, unsigned int *slices,
                              unsigned int *compute, unsigned int *same) {
  *slices = *compute = *same = 0;
  for (int g = 0; g < FG_MIG_GIS; g++) {
    const struct fg_mig_gi *gi = &c->gi[g];
    if (!gi->live) continue;
    *slices |= ((1u << gi->size) - 1u) << gi->start;
    *compute += gi->compute_slices;
    *same += gi->profile_id == profile_id;
  }
}

/* A free legal placement of `p` (the asked one, or the first when start < 0); -1 when none. */
static int place_locked(const struct fg_mig_card *c, const struct fg_gi_profile *p, int start) {
  unsigned int slices, compute, same;
  card_usage_locked(c, p->id, &slices, &compute, &same);
  if (same >= p->instances || compute + p->compute_slices > FG_MIG_COMPUTE_SLICES) return -1;
  for (unsigned int i = 0; i < p->placement_count; i++) {
    unsigned int at = p->placements[i];
    if (start >= 0 && (unsigned int)start != at) continue;
    if (!(slices & (((1u << p->memory_slices) - 1u) << at))) return (int)at;
  }
  return -1;
}

int fg_mig_create_gi(int node, unsigned int profile_id, int start, unsigned int *gi_id) {
  const struct fg_mig_model *m = fg_mig_model_of(node);
  if (!m) return card_ok(fg_state(), node) ? FG_MIG_NOT_SUPPORTED : FG_MIG_INVALID;
  if (fg_mig_mode(node) != 1) return FG_MIG_NOT_SUPPORTED;
  const struct fg_gi_profile *p = fg_mig_profile_by_id(m, profile_id);
  if (!p || (start >= 0 && !fg_mig_placement_legal(p, (unsigned int)start))) return FG_MIG_INVALID;
  struct fg_state *s = fg_state();
  fg_lock();
  struct fg_mig_card *c = &s->mig[node];
  int at = place_locked(c, p, start), rc = FG_MIG_NO_RESOURCES;
  for (int g = 0; at >= 0 && g < FG_MIG_GIS; g++) {
    if (c->gi[g].live) continue;
    c->gi[g] = (struct fg_mig_gi){.live = 1,
                                  .id = fg_mig_gi_id_of((unsigned int)at, p->memory_slices),
                                  .profile_id = p->id,
                                  .start = (unsigned int)at,
                                  .size = p->memory_slices,
                                  .compute_slices = p->compute_slices};
    *gi_id = c->gi[g].id;
    rc = FG_MIG_OK;
    break;
  }
  fg_unlock();
  return rc;
}

int fg_mig_destroy_gi(int node, unsigned int gi_id) {
  struct fg_state *s = fg_state();
  if (!card_ok(s, node)) return FG_MIG_INVALID;
  if (fg_mig_mode(node) != 1) return FG_MIG_NOT_SUPPORTED;
  fg_lock();
  struct fg_mig_gi *gi = gi_locked(&s->mig[node], gi_id);
  int rc = gi ? FG_MIG_OK : FG_MIG_NOT_FOUND;
  for (int k = 0; gi && k < FG_MIG_CIS; k++)
    if (gi->ci[k].live) rc = FG_MIG_IN_USE; /* its compute instances first */
  if (rc == FG_MIG_OK) memset(gi, 0, sizeof *gi);
  fg_unlock();
  return rc;
}

int fg_mig_gi(int node, unsigned int gi_id, struct fg_mig_gi *out) {
  struct fg_state *s = fg_state();
  if (!card_ok(s, node)) return FG_MIG_INVALID;
  fg_lock();
  const struct fg_mig_gi *gi = gi_locked(&s->mig[node], gi_id);
  if (gi) *out = *gi;
  fg_unlock();
  return gi ? FG_MIG_OK : FG_MIG_NOT_FOUND;
}

int fg_mig_remaining(int node, unsigned int profile_id, unsigned int *count) {
  const struct fg_gi_profile *p = fg_mig_profile_by_id(fg_mig_model_of(node), profile_id);
  if (!p) return fg_mig_model_of(node) ? FG_MIG_INVALID : FG_MIG_NOT_SUPPORTED;
  if (fg_mig_mode(node) != 1) return FG_MIG_NOT_SUPPORTED;
  fg_lock();
  struct fg_mig_card c = fg_state()->mig[node]; /* placed into a copy, first fit, until none fits */
  fg_unlock();
  *count = 0;
  for (int at; (at = place_locked(&c, p, -1)) >= 0; (*count)++) {
    int g = 0;
    while (g < FG_MIG_GIS && c.gi[g].live) g++;
    if (g == FG_MIG_GIS) break;
    c.gi[g] = (struct fg_mig_gi){.live = 1, .profile_id = p->id, .start = (unsigned int)at,
                                 .size = p->memory_slices, .compute_slices = p->compute_slices};
  }
  return FG_MIG_OK;
}

/* IDs of the card's GPU instances of `profile_id` (all profiles when it is ~0u), ascending; how many. */
int fg_mig_gi_ids(int node, unsigned int profile_id, unsigned int ids[FG_MIG_GIS]) {
  struct fg_state *s = fg_state();
  if (!card_ok(s, node)) return 0;
  int n = 0;
  fg_lock();
  for (unsigned int id = 0; id < 16; id++) {
    const struct fg_mig_gi *gi = gi_locked(&s->mig[node], id);
    if (gi && (profile_id == ~0u || gi->profile_id == profile_id) && n < FG_MIG_GIS) ids[n++] = id;
  }
  fg_unlock();
  return n;
}
