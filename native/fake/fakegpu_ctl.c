/* fakegpu-ctl: drive the fake GPUs from scripts and tests in other languages.
 *   fakegpu-ctl xid DEVICE XID    queue an Xid event (nvmlEventSetWait_v2 returns it)
 *   fakegpu-ctl show              devices, memory used, busy time, live processes */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_state.h"

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
  if (argc == 2 && strcmp(argv[1], "show") == 0) {
    fg_lock();
    fg_reclaim_dead_locked();
    for (uint32_t i = 0; i < s->device_count; i++) {
      struct fg_device *d = &s->devices[i];
      char uuid[48];
      fg_device_uuid_text((int)i, uuid);
      printf("device %u %s memory %llu/%llu MiB busy %llu ms\n", i, uuid, (unsigned long long)(d->memory_used >> 20),
             (unsigned long long)(d->memory_total >> 20), (unsigned long long)(d->busy_total_ns / 1000000u));
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
  fprintf(stderr, "usage: fakegpu-ctl xid DEVICE XID | fakegpu-ctl show\n");
  return 2;
}
