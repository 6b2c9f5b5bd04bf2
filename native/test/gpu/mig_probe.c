/* Read-only MIG probe on a real card: checks our NVML declarations (include/vc_nvml.h) against the
 * driver, and the fake's profile table (fake/fake_mig_profiles.c) against what the card lists.
 * Changes nothing: MIG mode is read, never set (a lent machine's settings stay as they are).
 *
 *   cc -std=c11 -Inative/include -Inative/fake native/test/gpu/mig_probe.c native/fake/fake_mig_profiles.c -ldl
 *
 * Prints one line per finding; exits 1 when the driver refuses a layout of ours or a profile
 * differs from the fake's table, 0 otherwise (in MIG mode or not: the card lists its profiles either
 * way). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "fake_mig.h"
#include "vc_nvml.h"

static void *lib;
static int failures;

#define CALL(name, ...) ((nvmlReturn_t(*)())dlsym(lib, #name))(__VA_ARGS__)

static void expect(int ok, const char *what, int rc) {
  printf("%-4s %s (nvmlReturn_t %d)\n", ok ? "ok" : "FAIL", what, rc);
  if (!ok) failures++;
}

static void compare_profile(nvmlDevice_t d, const struct fg_gi_profile *p) {
  nvmlGpuInstanceProfileInfo_v2_t info = {.version = nvmlGpuInstanceProfileInfo_v2};
  int rc = CALL(nvmlDeviceGetGpuInstanceProfileInfoV, d, p->index, &info);
  char what[256];
  snprintf(what, sizeof what, "%s: id %u, %u slices, %u instances, %u SMs, %llu MiB (card: %s id %u, %u, %u, %u, %llu)",
           p->name, p->id, p->compute_slices, p->instances, p->sms, p->memory_mib, info.name, info.id, info.sliceCount,
           info.instanceCount, info.multiprocessorCount, info.memorySizeMB);
  expect(rc == NVML_SUCCESS && info.id == p->id && info.sliceCount == p->compute_slices &&
             info.instanceCount == p->instances && info.multiprocessorCount == p->sms && info.memorySizeMB == p->memory_mib,
         what, rc);
  nvmlGpuInstancePlacement_t pl[8];
  unsigned int n = 8;
  rc = CALL(nvmlDeviceGetGpuInstancePossiblePlacements_v2, d, p->id, pl, &n);
  int same = rc == NVML_SUCCESS && n == p->placement_count;
  for (unsigned int i = 0; same && i < n; i++) same = pl[i].start == p->placements[i] && pl[i].size == p->memory_slices;
  snprintf(what, sizeof what, "%s: %u placements of %u slices as the fake lists them", p->name, n, p->memory_slices);
  expect(same, what, rc);
}

int main(void) {
  lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (!lib) return printf("FAIL no libnvidia-ml.so.1: %s\n", dlerror()), 1;
  if (CALL(nvmlInit_v2) != NVML_SUCCESS) return printf("FAIL nvmlInit_v2\n"), 1;
  nvmlDevice_t d;
  char name[96] = "";
  nvmlMemory_t mem = {0};
  CALL(nvmlDeviceGetHandleByIndex_v2, 0, &d);
  CALL(nvmlDeviceGetName, d, name, (unsigned int)sizeof name);
  CALL(nvmlDeviceGetMemoryInfo, d, &mem);
  printf("card 0: %s, %llu MiB\n", name, mem.total >> 20);
  nvmlProcessesUtilizationInfo_t pu = {.version = nvmlProcessesUtilizationInfo_v1};
  int rc = CALL(nvmlDeviceGetProcessesUtilizationInfo, d, &pu);
  expect(rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && rc != NVML_ERROR_FUNCTION_NOT_FOUND,
         "nvmlProcessesUtilizationInfo_v1 (24 bytes, version 0x01000018) accepted", rc);
  unsigned int cur = 9, pend = 9, max = 9;
  rc = CALL(nvmlDeviceGetMigMode, d, &cur, &pend);
  printf("MIG mode: rc %d current %u pending %u\n", rc, cur, pend);
  CALL(nvmlDeviceGetMaxMigDeviceCount, d, &max);
  printf("max MIG devices: %u\n", max);
  const struct fg_mig_model *m = fg_mig_model_for(mem.total >> 20);
  if (!m) return printf("the fake models no MIG for %llu MiB: nothing to compare\n", mem.total >> 20), failures != 0;
  printf("the fake's table: %s\n", m->card);
  /* With MIG off an H200 (driver 580.159.04) still lists its profiles (as the fake does): the table
   * is compared either way. */
  if (rc != NVML_SUCCESS || cur != 1) expect(max == 0, "MIG off: no MIG devices", 0);
  for (unsigned int i = 0; i < m->profile_count; i++) compare_profile(d, &m->profiles[i]);
  return failures != 0;
}
