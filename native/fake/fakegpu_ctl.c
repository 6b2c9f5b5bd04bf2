/* fakegpu-ctl: drive the fake GPUs from scripts and tests in other languages.
 *   fakegpu-ctl xid DEVICE XID    queue an Xid event (nvmlEventSetWait_v2 returns it)
 *   fakegpu-ctl show              devices, memory used, busy time, MIG instances, live processes
 *   fakegpu-ctl mig DEVICE on|off MIG mode (refused while a process holds the card or an instance exists)
 *   fakegpu-ctl mig-create DEVICE PROFILE_ID [START]
 *                                 a GPU instance (at memory slice START, else the first free legal one)
 *                                 and its whole-instance compute instance; prints the MIG device's UUID
 *   fakegpu-ctl mig-destroy DEVICE GI_ID
 *                                 its compute instances, then the GPU instance
 * Exit status: 0, 1 for a refusal (the NVML code's name on stderr), 2 for usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_state.h"

static const char *rc_name(int rc) {
  switch (rc) {
    case FG_MIG_INVALID: return "INVALID_ARGUMENT";
    case FG_MIG_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case FG_MIG_NOT_FOUND: return "NOT_FOUND";
    case FG_MIG_IN_USE: return "IN_USE";
    case FG_MIG_NO_RESOURCES: return "INSUFFICIENT_RESOURCES";
    default: return "UNKNOWN";
  }
}

static int refused(const char *what, int rc) {
  if (rc == FG_MIG_OK) return 0;
  fprintf(stderr, "fakegpu-ctl: %s: %s\n", what, rc_name(rc));
  return 1;
}

static void show_mig_locked(const struct fg_state *s, uint32_t i) {
  const struct fg_mig_model *m = fg_mig_model_for(s->devices[i].memory_total >> 20);
  if (!s->mig[i].mode) return;
  for (int g = 0; g < FG_MIG_GIS; g++) {
    const struct fg_mig_gi *gi = &s->mig[i].gi[g];
    if (!gi->live) continue;
    const struct fg_gi_profile *p = fg_mig_profile_by_id(m, gi->profile_id);
    printf("  gpu-instance %u %s profile %u placement %u:%u\n", gi->id, p ? p->name : "?", gi->profile_id, gi->start,
           gi->size);
    for (int c = 0; c < FG_MIG_CIS; c++) {
      const struct fg_mig_ci *ci = &gi->ci[c];
      if (!ci->live) continue;
      const struct fg_device *d = &s->devices[FG_MAX_DEVICES + ci->slot];
      char uuid[48];
      fg_mig_uuid_text(s->mig_slots[ci->slot].uuid, uuid);
      printf("    compute-instance %u %s memory %llu/%llu MiB sms %u\n", ci->id, uuid,
             (unsigned long long)(d->memory_used >> 20), (unsigned long long)(d->memory_total >> 20),
             s->mig_slots[ci->slot].sms);
    }
  }
}

static int show(struct fg_state *s) {
  fg_lock();
  fg_reclaim_dead_locked();
  for (uint32_t i = 0; i < s->device_count; i++) {
    struct fg_device *d = &s->devices[i];
    char uuid[48];
    fg_device_uuid_text((int)i, uuid);
    printf("device %u %s memory %llu/%llu MiB busy %llu ms%s\n", i, uuid, (unsigned long long)(d->memory_used >> 20),
           (unsigned long long)(d->memory_total >> 20), (unsigned long long)(d->busy_total_ns / 1000000u),
           s->mig[i].mode ? " mig on" : "");
    show_mig_locked(s, i);
  }
  for (int k = 0; k < FG_MAX_PROCS; k++) {
    const struct fg_proc *p = &s->procs[k];
    if (!p->live) continue;
    printf("process %u\n", p->pid);
    for (uint32_t i = 0; i < s->device_count; i++)
      if (p->managed_resident[i] || p->managed_host[i])
        printf("  device %u managed %llu MiB resident, %llu MiB on the host, %llu evictions\n", i,
               (unsigned long long)(p->managed_resident[i] >> 20), (unsigned long long)(p->managed_host[i] >> 20),
               (unsigned long long)p->evictions[i]);
  }
  fg_unlock();
  return 0;
}

static int mig_create(int dev, unsigned int profile, int start) {
  unsigned int gi = 0, ci = 0;
  int rc = fg_mig_create_gi(dev, profile, start, &gi);
  if (refused("create GPU instance", rc)) return 1;
  struct fg_mig_gi info;
  fg_mig_gi(dev, gi, &info);
  static const unsigned int whole[] = {0, 0, 1, 2, 3, 0, 0, 4}; /* CI profile index by compute slices */
  rc = fg_mig_create_ci(dev, gi, whole[info.compute_slices], &ci);
  if (rc != FG_MIG_OK) {
    fg_mig_destroy_gi(dev, gi); /* nothing half made is left behind */
    return refused("create compute instance", rc);
  }
  for (unsigned int i = 0;; i++) {
    struct fg_mig_slot slot;
    int d = fg_mig_device(dev, i);
    if (d < 0) break;
    if (fg_mig_slot(d, &slot) != 0 || slot.gi_id != gi || slot.ci_id != ci) continue;
    char uuid[48];
    fg_mig_uuid_text(slot.uuid, uuid);
    printf("%u %s\n", gi, uuid);
  }
  return 0;
}

static int mig_destroy(int dev, unsigned int gi_id) {
  struct fg_mig_gi gi;
  if (refused("GPU instance", fg_mig_gi(dev, gi_id, &gi))) return 1;
  for (int c = 0; c < FG_MIG_CIS; c++)
    if (gi.ci[c].live && refused("destroy compute instance", fg_mig_destroy_ci(dev, gi_id, gi.ci[c].id))) return 1;
  return refused("destroy GPU instance", fg_mig_destroy_gi(dev, gi_id));
}

int main(int argc, char **argv) {
  struct fg_state *s = fg_state();
  if (!s) return 1;
  if (argc == 4 && strcmp(argv[1], "xid") == 0) {
    if (fg_inject_xid(atoi(argv[2]), strtoull(argv[3], NULL, 10)) != 0) {
      fprintf(stderr, "fakegpu-ctl: device %s out of range (0..%u)\n", argv[2], s->device_count - 1);
      return 1;
    }
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "show") == 0) return show(s);
  if (argc == 4 && strcmp(argv[1], "mig") == 0 && (!strcmp(argv[3], "on") || !strcmp(argv[3], "off")))
    return refused("MIG mode", fg_mig_set_mode(atoi(argv[2]), strcmp(argv[3], "on") == 0));
  if ((argc == 4 || argc == 5) && strcmp(argv[1], "mig-create") == 0)
    return mig_create(atoi(argv[2]), (unsigned int)atoi(argv[3]), argc == 5 ? atoi(argv[4]) : -1);
  if (argc == 4 && strcmp(argv[1], "mig-destroy") == 0) return mig_destroy(atoi(argv[2]), (unsigned int)atoi(argv[3]));
  fprintf(stderr,
          "usage: fakegpu-ctl xid DEVICE XID | show | mig DEVICE on|off | mig-create DEVICE PROFILE_ID [START] |"
          " mig-destroy DEVICE GI_ID\n");
  return 2;
}
