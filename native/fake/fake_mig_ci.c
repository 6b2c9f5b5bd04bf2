/* Compute instances and the MIG devices they make: a compute instance takes a free slot of the
 * node's FG_MIG_SLOTS, whose state device gets the GPU instance's memory and the compute
 * instance's SMs; destroying it wipes that device. Also the identity of any state index. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fake_state.h"

static int card_ok(const struct fg_state *s, int node) { return s && node >= 0 && (uint32_t)node < s->device_count; }

static struct fg_mig_gi *gi_locked(struct fg_state *s, int node, unsigned int gi_id) {
  for (int g = 0; g < FG_MIG_GIS; g++)
    if (s->mig[node].gi[g].live && s->mig[node].gi[g].id == gi_id) return &s->mig[node].gi[g];
  return NULL;
}

/* First compute-slice start for `size` slices in `gi` (aligned to the size); -1 when none. */
static int ci_start_locked(const struct fg_mig_gi *gi, unsigned int size) {
  unsigned int taken = 0;
  for (int k = 0; k < FG_MIG_CIS; k++)
    if (gi->ci[k].live) taken |= ((1u << gi->ci[k].size) - 1u) << gi->ci[k].start;
  for (unsigned int at = 0; at + size <= gi->compute_slices; at += size)
    if (!(taken & (((1u << size) - 1u) << at))) return (int)at;
  return -1;
}

static unsigned int free_ci_id_locked(const struct fg_mig_gi *gi) {
  for (unsigned int id = 0;; id++) {
    int used = 0;
    for (int k = 0; k < FG_MIG_CIS; k++) used |= gi->ci[k].live && gi->ci[k].id == id;
    if (!used) return id;
  }
}

static int free_slot_locked(const struct fg_state *s) {
  for (int k = 0; k < FG_MIG_SLOTS; k++)
    if (!s->mig_slots[k].live) return k;
  return -1;
}

/* Binds slot k to the new compute instance and readies its device. */
static void open_slot_locked(struct fg_state *s, int k, int node, const struct fg_mig_gi *gi, const struct fg_mig_ci *ci) {
  const struct fg_gi_profile *p = fg_mig_profile_by_id(fg_mig_model_of(node), gi->profile_id);
  uint64_t gen = ++s->mig_generation;
  uint32_t seed = fg_env()->uuid_seed;
  struct fg_mig_slot *slot = &s->mig_slots[k];
  *slot = (struct fg_mig_slot){.live = 1, .parent = (uint32_t)node, .gi_id = gi->id, .ci_id = ci->id};
  slot->sms = ci->size == gi->compute_slices ? p->sms : p->sms * ci->size / gi->compute_slices;
  const unsigned char b[16] = {0x6d, 0x69, 0x67, (unsigned char)node, 0x00, 0x00, 0x40, 0x00, 0x80, 0x00,
                               (unsigned char)(seed >> 24), (unsigned char)(seed >> 16), (unsigned char)(seed >> 8),
                               (unsigned char)seed, (unsigned char)(gen >> 8), (unsigned char)gen};
  memcpy(slot->uuid, b, 16);
  int dev = FG_MAX_DEVICES + k;
  memset(&s->devices[dev], 0, sizeof s->devices[dev]);
  s->devices[dev].memory_total = p->memory_mib << 20;
  s->devices[dev].next_va = 0x7f0000000000ull + ((uint64_t)dev << 36);
}

int fg_mig_create_ci(int node, unsigned int gi_id, unsigned int profile_id, unsigned int *ci_id) {
  struct fg_state *s = fg_state();
  if (!card_ok(s, node)) return FG_MIG_INVALID;
  fg_lock();
  struct fg_mig_gi *gi = gi_locked(s, node, gi_id);
  int rc = gi ? FG_MIG_NO_RESOURCES : FG_MIG_INVALID;
  unsigned int size = gi ? fg_mig_ci_slices(profile_id, gi->compute_slices) : 0;
  if (gi && size == 0) rc = FG_MIG_NOT_SUPPORTED;
  int at = size ? ci_start_locked(gi, size) : -1, k = free_slot_locked(s);
  for (int c = 0; at >= 0 && k >= 0 && c < FG_MIG_CIS; c++) {
    if (gi->ci[c].live) continue;
    gi->ci[c] = (struct fg_mig_ci){.live = 1, .id = free_ci_id_locked(gi), .profile_id = profile_id,
                                   .start = (uint32_t)at, .size = size, .slot = (uint32_t)k};
    open_slot_locked(s, k, node, gi, &gi->ci[c]);
    *ci_id = gi->ci[c].id;
    rc = FG_MIG_OK;
    break;
  }
  fg_unlock();
  return rc;
}

int fg_mig_destroy_ci(int node, unsigned int gi_id, unsigned int ci_id) {
  struct fg_state *s = fg_state();
  if (!card_ok(s, node)) return FG_MIG_INVALID;
  fg_lock();
  struct fg_mig_gi *gi = gi_locked(s, node, gi_id);
  int rc = FG_MIG_NOT_FOUND;
  for (int c = 0; gi && c < FG_MIG_CIS; c++) {
    struct fg_mig_ci *ci = &gi->ci[c];
    if (!ci->live || ci->id != ci_id) continue;
    int dev = FG_MAX_DEVICES + (int)ci->slot;
    rc = fg_mig_in_use_locked(s, dev) ? FG_MIG_IN_USE : FG_MIG_OK;
    if (rc == FG_MIG_OK) {
      memset(&s->mig_slots[ci->slot], 0, sizeof s->mig_slots[ci->slot]);
      memset(&s->devices[dev], 0, sizeof s->devices[dev]);
      memset(ci, 0, sizeof *ci);
    }
    break;
  }
  fg_unlock();
  return rc;
}

int fg_mig_device(int node, unsigned int index) {
  struct fg_state *s = fg_state();
  if (!card_ok(s, node)) return -1;
  /* Ordered by (GPU instance ID, compute instance ID): count the smaller keys of each. */
  int found = -1;
  fg_lock();
  for (int k = 0; k < FG_MIG_SLOTS && found < 0; k++) {
    const struct fg_mig_slot *a = &s->mig_slots[k];
    if (!a->live || a->parent != (uint32_t)node) continue;
    unsigned int before = 0;
    for (int j = 0; j < FG_MIG_SLOTS; j++) {
      const struct fg_mig_slot *b = &s->mig_slots[j];
      if (b->live && b->parent == a->parent && (b->gi_id < a->gi_id || (b->gi_id == a->gi_id && b->ci_id < a->ci_id)))
        before++;
    }
    if (before == index) found = FG_MAX_DEVICES + k;
  }
  fg_unlock();
  return found;
}

int fg_mig_slot(int dev, struct fg_mig_slot *out) {
  struct fg_state *s = fg_state();
  if (!s || dev < FG_MAX_DEVICES || dev >= FG_STATE_DEVICES) return -1;
  fg_lock();
  *out = s->mig_slots[dev - FG_MAX_DEVICES];
  fg_unlock();
  return out->live ? 0 : -1;
}

int fg_mig_device_by_uuid(const char *uuid) {
  for (int dev = FG_MAX_DEVICES; uuid && dev < FG_STATE_DEVICES; dev++) {
    struct fg_mig_slot slot;
    char text[48];
    if (fg_mig_slot(dev, &slot) != 0) continue;
    fg_mig_uuid_text(slot.uuid, text);
    if (strcasecmp(text, uuid) == 0) return dev;
  }
  return -1;
}

void fg_dev_uuid(int dev, unsigned char out[16]) {
  struct fg_mig_slot slot;
  if (dev < FG_MAX_DEVICES) fg_device_uuid(dev, out);
  else if (fg_mig_slot(dev, &slot) == 0) memcpy(out, slot.uuid, 16);
  else memset(out, 0, 16);
}

void fg_dev_uuid_text(int dev, char out[48]) {
  unsigned char b[16];
  if (dev < FG_MAX_DEVICES) {
    fg_device_uuid_text(dev, out);
    return;
  }
  fg_dev_uuid(dev, b);
  fg_mig_uuid_text(b, out);
}

void fg_dev_name(int dev, char *out, size_t len) {
  struct fg_mig_slot slot;
  struct fg_mig_gi gi;
  const struct fg_gi_profile *p = NULL;
  if (dev >= FG_MAX_DEVICES && fg_mig_slot(dev, &slot) == 0 && fg_mig_gi((int)slot.parent, slot.gi_id, &gi) == 0)
    p = fg_mig_profile_by_id(fg_mig_model_of((int)slot.parent), gi.profile_id);
  if (p) snprintf(out, len, "%s MIG %s", fg_env()->name, p->name);
  else snprintf(out, len, "%s", fg_env()->name);
}

int fg_dev_parent(int dev) {
  struct fg_mig_slot slot;
  if (dev >= 0 && dev < FG_MAX_DEVICES) return dev;
  return fg_mig_slot(dev, &slot) == 0 ? (int)slot.parent : -1;
}

unsigned int fg_dev_pci_bus(int dev) { return fg_device_pci_bus(fg_dev_parent(dev) < 0 ? 0 : fg_dev_parent(dev)); }

unsigned int fg_dev_sms(int dev) {
  struct fg_mig_slot slot;
  if (dev >= FG_MAX_DEVICES && fg_mig_slot(dev, &slot) == 0) return slot.sms;
  return fg_state() ? fg_state()->sms : 0;
}
