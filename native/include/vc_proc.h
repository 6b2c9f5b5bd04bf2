/* Variant selection shared by the fake driver and libvcuda: what the driver returns for
 * cuGetProcAddress(base, cudaVersion, flags) (PROTOCOLS.md §6.5). Pure, table-driven. */
#ifndef VCUDA_VC_PROC_H
#define VCUDA_VC_PROC_H

#include <stdint.h>
#include <string.h>

struct vc_proc_entry {
  const char *base;
  const char *export_name;
  int version;
  int per_thread;
  void *fn;
};

enum vc_proc_lookup { VC_PROC_FOUND = 0, VC_PROC_NOT_FOUND = 1, VC_PROC_VERSION_TOO_LOW = 2 };

/* Returns the entry the driver would hand out, or NULL with *why set. Per-thread variants win
 * only when flags ask for the per-thread default stream (bit 1); otherwise the newest legacy
 * variant with version <= cuda_version. */
static inline const struct vc_proc_entry *vc_proc_select(const struct vc_proc_entry *table, int count,
                                                         const char *base, int cuda_version, uint64_t flags,
                                                         enum vc_proc_lookup *why) {
  const struct vc_proc_entry *best = NULL;
  const struct vc_proc_entry *best_pt = NULL;
  int known = 0;
  for (int i = 0; i < count; i++) {
    const struct vc_proc_entry *e = &table[i];
    if (strcmp(e->base, base) != 0) continue;
    known = 1;
    if (e->version > cuda_version) continue;
    if (e->per_thread) {
      if (!best_pt || e->version > best_pt->version) best_pt = e;
    } else if (!best || e->version > best->version) {
      best = e;
    }
  }
  const struct vc_proc_entry *pick = ((flags & 2u) && best_pt) ? best_pt : best;
  if (why) *why = pick ? VC_PROC_FOUND : known ? VC_PROC_VERSION_TOO_LOW : VC_PROC_NOT_FOUND;
  return pick;
}

#endif
