/* Fake NVML: GPU instances — create (first free or a given placement), destroy, list, info. */
#define _GNU_SOURCE
#include "fake_nvml.h"

#define GI_OR_FAIL(h, gi)                                                   \
  struct fg_mig_gi gi;                                                      \
  int node = fg_nvml_gi_of(h, &gi);                                         \
  if (node < 0) return node == -1 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT

static nvmlReturn_t create(nvmlDevice_t device, unsigned int profile_id, int start, nvmlGpuInstance_t *out) {
  CARD_OR_FAIL(device);
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int id = 0;
  nvmlReturn_t rc = (nvmlReturn_t)fg_mig_create_gi(idx, profile_id, start, &id);
  if (rc == NVML_SUCCESS) *out = fg_nvml_gi_handle(idx, id);
  return rc;
}

FG_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *gi) {
  return create(device, profileId, -1, gi);
}

/* The placement's size must be the profile's; a legal start that is taken is INSUFFICIENT_RESOURCES. */
FG_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                                const nvmlGpuInstancePlacement_t *placement,
                                                                nvmlGpuInstance_t *gi) {
  if (!placement || placement->start >= FG_MIG_MEMORY_SLICES) return NVML_ERROR_INVALID_ARGUMENT;
  const struct fg_gi_profile *p = fg_mig_profile_by_id(fg_mig_model_of(fg_nvml_index(device)), profileId);
  if (p && placement->size != p->memory_slices) return NVML_ERROR_INVALID_ARGUMENT;
  return create(device, profileId, (int)placement->start, gi);
}

FG_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t h) {
  GI_OR_FAIL(h, gi);
  int rc = fg_mig_destroy_gi(node, gi.id);
  return rc == FG_MIG_NOT_FOUND ? NVML_ERROR_INVALID_ARGUMENT : (nvmlReturn_t)rc;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                                 unsigned int *count) {
  CARD_OR_FAIL(device);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  return (nvmlReturn_t)fg_mig_remaining(idx, profileId, count);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId, nvmlGpuInstance_t *out,
                                                 unsigned int *count) {
  CARD_OR_FAIL(device);
  if (!count || !out) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_mig_model_of(idx) || fg_mig_mode(idx) != 1) return NVML_ERROR_NOT_SUPPORTED;
  if (!fg_mig_profile_by_id(fg_mig_model_of(idx), profileId)) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int ids[FG_MIG_GIS];
  int n = fg_mig_gi_ids(idx, profileId, ids);
  if ((unsigned int)n > *count) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (int i = 0; i < n; i++) out[i] = fg_nvml_gi_handle(idx, ids[i]);
  *count = (unsigned int)n;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *out) {
  CARD_OR_FAIL(device);
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_mig_model_of(idx) || fg_mig_mode(idx) != 1) return NVML_ERROR_NOT_SUPPORTED;
  struct fg_mig_gi gi;
  if (fg_mig_gi(idx, id, &gi) != FG_MIG_OK) return NVML_ERROR_NOT_FOUND;
  *out = fg_nvml_gi_handle(idx, id);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t *info) {
  GI_OR_FAIL(h, gi);
  if (!info) return NVML_ERROR_INVALID_ARGUMENT;
  *info = (nvmlGpuInstanceInfo_t){.device = fg_nvml_handle(node), .id = gi.id, .profileId = gi.profile_id,
                                  .placement = {.start = gi.start, .size = gi.size}};
  return NVML_SUCCESS;
}
