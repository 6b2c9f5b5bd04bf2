/* What this process enumerates, resolved once when the state is mapped.
 *
 * FAKEGPU_VISIBLE_DEVICES is what the container runtime exposes (NVIDIA_VISIBLE_DEVICES): node
 * indexes, `GPU-` UUIDs, or `MIG-` UUIDs of MIG devices that exist at start. NVML sees the cards
 * (a MIG device brings its parent, as the runtime mounts the parent's device node). CUDA sees the
 * entries themselves, a card in MIG mode named whole as its MIG devices (by GPU-instance then
 * compute-instance ID; none when it has none), and then only those that CUDA_VISIBLE_DEVICES
 * selects when it is set: indexes into that list or UUIDs, up to the first entry that names
 * nothing (CUDA ignores the rest of the list from there). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fake_state.h"

static int cuda_nodes[FG_MAX_DEVICES];
static int cuda_count;
static int nvml_nodes[FG_MAX_DEVICES];
static int nvml_count;

/* A `MIG-` UUID among the live slots of `s` (the state is not published yet: no fg_lock). */
static int mig_lookup(const char *entry, void *ctx) {
  struct fg_state *s = ctx;
  if (strncasecmp(entry, "MIG-", 4) != 0) return -1;
  int found = -1;
  if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) pthread_mutex_consistent(&s->lock);
  for (int k = 0; k < FG_MIG_SLOTS && found < 0; k++) {
    if (!s->mig_slots[k].live) continue;
    char text[48];
    fg_mig_uuid_text(s->mig_slots[k].uuid, text);
    if (strcasecmp(text, entry) == 0) found = FG_MAX_DEVICES + k;
  }
  pthread_mutex_unlock(&s->lock);
  return found;
}

/* Appends the MIG devices of card `node` to list[*n], ordered by (GPU instance, compute instance). */
static void add_mig_devices(struct fg_state *s, int node, int *list, int *n) {
  if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) pthread_mutex_consistent(&s->lock);
  for (unsigned int key = 0; key < 16u * FG_MIG_CIS; key++)
    for (int k = 0; k < FG_MIG_SLOTS && *n < FG_MAX_DEVICES; k++) {
      const struct fg_mig_slot *m = &s->mig_slots[k];
      if (m->live && m->parent == (uint32_t)node && m->gi_id * FG_MIG_CIS + m->ci_id == key)
        list[(*n)++] = FG_MAX_DEVICES + k;
    }
  pthread_mutex_unlock(&s->lock);
}

static int parent_of(const struct fg_state *s, int dev) {
  return dev < FG_MAX_DEVICES ? dev : (int)s->mig_slots[dev - FG_MAX_DEVICES].parent;
}

static void uuid_text_of(const struct fg_state *s, const struct fg_env *e, int dev, char out[48]) {
  if (dev < FG_MAX_DEVICES) fg_uuid_text_of(e->uuid_seed, dev, out);
  else fg_mig_uuid_text(s->mig_slots[dev - FG_MAX_DEVICES].uuid, out);
}

/* One CUDA_VISIBLE_DEVICES entry: an index into `list` or a UUID in it; -1 when it names none. */
static int cuda_entry(const struct fg_state *s, const struct fg_env *e, const char *entry, const int *list, int n) {
  char *end;
  long i = strtol(entry, &end, 10);
  if (end != entry && !*end) return i >= 0 && i < n ? list[i] : -1;
  for (int k = 0; k < n; k++) {
    char text[48];
    uuid_text_of(s, e, list[k], text);
    if (strcasecmp(text, entry) == 0) return list[k];
  }
  return -1;
}

static int narrow_by_cuda_visible(const struct fg_state *s, const struct fg_env *e, const char *spec, int *list,
                                  int n) {
  int chosen[FG_MAX_DEVICES], m = 0;
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && m < FG_MAX_DEVICES;
       tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    int dev = cuda_entry(s, e, tok, list, n);
    if (dev < 0) break;
    int dup = 0;
    for (int k = 0; k < m; k++) dup |= chosen[k] == dev;
    if (!dup) chosen[m++] = dev;
  }
  memcpy(list, chosen, sizeof(int) * (size_t)m);
  return m;
}

void fg_resolve_visible(struct fg_state *s, const struct fg_env *e) {
  char err[160] = "";
  int entries[FG_MAX_DEVICES];
  int n = fg_parse_visible_with(e->visible, (int)s->device_count, e->uuid_seed, mig_lookup, s, entries, FG_MAX_DEVICES,
                                err, sizeof err);
  if (n < 0) {
    fprintf(stderr, "fakegpu: FAKEGPU_VISIBLE_DEVICES=%s: %s; no device is visible\n", e->visible, err);
    n = 0;
  }
  nvml_count = cuda_count = 0;
  for (int i = 0; i < n; i++) {
    int parent = parent_of(s, entries[i]), seen = 0;
    for (int k = 0; k < nvml_count; k++) seen |= nvml_nodes[k] == parent;
    if (!seen) nvml_nodes[nvml_count++] = parent;
    if (entries[i] < FG_MAX_DEVICES && s->mig[entries[i]].mode) add_mig_devices(s, entries[i], cuda_nodes, &cuda_count);
    else if (cuda_count < FG_MAX_DEVICES) cuda_nodes[cuda_count++] = entries[i];
  }
  const char *cuda_visible = getenv("CUDA_VISIBLE_DEVICES");
  if (cuda_visible) cuda_count = narrow_by_cuda_visible(s, e, cuda_visible, cuda_nodes, cuda_count);
}

int fg_visible_count(void) { return fg_state() ? cuda_count : 0; }

int fg_node(int ordinal) { return fg_state() && ordinal >= 0 && ordinal < cuda_count ? cuda_nodes[ordinal] : -1; }

static int position(const int *list, int n, int node) {
  if (!fg_state()) return -1;
  for (int i = 0; i < n; i++)
    if (list[i] == node) return i;
  return -1;
}

int fg_ordinal(int node) { return position(cuda_nodes, cuda_count, node); }

int fg_nvml_count(void) { return fg_state() ? nvml_count : 0; }

int fg_nvml_node(int ordinal) { return fg_state() && ordinal >= 0 && ordinal < nvml_count ? nvml_nodes[ordinal] : -1; }

int fg_nvml_ordinal(int node) { return position(nvml_nodes, nvml_count, node); }
