#define _GNU_SOURCE
#include "init.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "region.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_status = -1;
static char init_error[512];
static uint64_t context_overhead_bytes = 300ull << 20;

static void read_env(void) {
  const char *mib = getenv("VCUDA_CONTEXT_OVERHEAD_MIB");
  if (mib && *mib) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(mib, &end, 10);
    if (errno == 0 && end && *end == '\0' && v < (1ull << 24)) context_overhead_bytes = v << 20;
    else vc_log(VC_LOG_WARN, "VCUDA_CONTEXT_OVERHEAD_MIB=%s is not a number of MiB; using 300", mib);
  }
}

static void do_init(void) {
  read_env();
  const char *path = getenv("VCUDA_CONFIG");
  if (!path || !*path) path = VC_CONFIG_DEFAULT_PATH;
  char err[400] = "";
  if (vc_config_open(path, err, sizeof err) != 0) {
    snprintf(init_error, sizeof init_error, "limit file %s", err);
    goto fail;
  }
  struct vc_config c;
  if (vc_config_snapshot(&c) != 0) {
    snprintf(init_error, sizeof init_error, "limit file %s became unreadable", path);
    goto fail;
  }
  if (vc_region_open(c.region_path, c.device_count, err, sizeof err) != 0) {
    snprintf(init_error, sizeof init_error, "accounting region: %s", err);
    goto fail;
  }
  init_status = 0;
  vc_log(VC_LOG_INFO, "limits from %s: %u device(s), region %s", path, c.device_count, c.region_path);
  return;
fail:
  init_status = -1;
  vc_log(VC_LOG_ERROR, "%s; GPU access refused (cuInit returns CUDA_ERROR_NO_DEVICE, allocations CUDA_ERROR_OUT_OF_MEMORY)",
         init_error);
}

int vc_init_ensure(void) {
  pthread_once(&once, do_init);
  return init_status;
}

const char *vc_init_error(void) { return init_status == 0 ? "" : init_error; }

uint64_t vc_init_context_overhead_bytes(void) {
  pthread_once(&once, do_init);
  return context_overhead_bytes;
}

__attribute__((destructor)) static void release_at_exit(void) {
  /* Normal exit: the driver frees this process's memory, so the budget gets it back now rather
   * than at the next dead-process scan. */
  if (init_status == 0) vc_region_close();
}
