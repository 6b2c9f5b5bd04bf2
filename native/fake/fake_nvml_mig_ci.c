/* Fake NVML: compute instances inside GPU instances, and the MIG device handles they make. A MIG
 * device handle works with the device calls that have a per-instance meaning (UUID `MIG-…`, name,
 * memory, process list); card-only calls answer NOT_SUPPORTED for it (fake_nvml.h). */
#define _GNU_SOURCE
#include "fake_nvml.h"

#define MAX_MIG_DEVICES 7 /* per card: one per compute slice */

static struct nvmlComputeInstance_st ci_handles[FG_MAX_DEVICES][16][FG_MIG_CIS];

static nvmlComputeInstance_t ci_handle(int node, unsigned int gi_id, unsigned int id) {
  if (node < 0 || node >= FG_MAX_DEVICES || gi_id >= 16 || id >= FG_MIG_CIS) return NULL;
  ci_handles[node][gi_id][id] = (struct nvmlComputeInstance_st){.node = node, .gi_id = gi_id, .id = id};
  return &ci_handles[node][gi_id][id];
}

/* The live compute instance behind a handle (with its GPU instance); NULL when none. */
static const struct fg_mig_ci *ci_of(nvmlComputeInstance_t h, struct fg_mig_gi *gi) {
  const struct nvmlComputeInstance_st *first = &ci_handles[0][0][0];
  if (!h || h < first || h >= first + FG_MAX_DEVICES * 16 * FG_MIG_CIS) return NULL;
  if (fg_nvml_gi_of(fg_nvml_gi_handle(h->node, h->gi_id), gi) < 0) return NULL;
  for (int k = 0; k < FG_MIG_CIS; k++)
    if (gi->ci[k].live && gi->ci[k].id == h->id) return &gi->ci[k];
  return NULL;
}

#define GI_OR_FAIL(h, gi)                   \
  struct fg_mig_gi gi;                      \
  int node = fg_nvml_gi_of(h, &gi);         \
  if (node < 0) return node == -1 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT

FG_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t h, unsigned int profile,
                                                                    unsigned int engProfile,
                                                                    nvmlComputeInstanceProfileInfo_t *info) {
  GI_OR_FAIL(h, gi);
  if (!info || engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int slices = fg_mig_ci_slices(profile, gi.compute_slices);
  const struct fg_gi_profile *p = fg_mig_profile_by_id(fg_mig_model_of(node), gi.profile_id);
  if (!slices || !p) return NVML_ERROR_NOT_SUPPORTED;
  unsigned int g = gi.compute_slices;
  *info = (nvmlComputeInstanceProfileInfo_t){.id = profile, .sliceCount = slices, .instanceCount = g / slices,
                                             .multiprocessorCount = slices == g ? p->sms : p->sms * slices / g,
                                             .sharedCopyEngineCount = p->copy_engines, .sharedDecoderCount = p->decoders,
                                             .sharedEncoderCount = p->encoders, .sharedJpegCount = p->jpegs,
                                             .sharedOfaCount = p->ofas};
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t h, unsigned int profileId,
                                                            nvmlComputeInstance_t *out) {
  GI_OR_FAIL(h, gi);
  if (!out || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int id = 0;
  nvmlReturn_t rc = (nvmlReturn_t)fg_mig_create_ci(node, gi.id, profileId, &id);
  if (rc == NVML_SUCCESS) *out = ci_handle(node, gi.id, id);
  return rc;
}

FG_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t h) {
  if (fg_nvml_index(NULL) == -1) return NVML_ERROR_UNINITIALIZED;
  struct fg_mig_gi gi;
  const struct fg_mig_ci *ci = ci_of(h, &gi);
  if (!ci) return NVML_ERROR_INVALID_ARGUMENT;
  int rc = fg_mig_destroy_ci(h->node, gi.id, ci->id);
  return rc == FG_MIG_NOT_FOUND ? NVML_ERROR_INVALID_ARGUMENT : (nvmlReturn_t)rc;
}

FG_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t h, unsigned int profileId,
                                                          nvmlComputeInstance_t *out, unsigned int *count) {
  GI_OR_FAIL(h, gi);
  if (!out || !count || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_mig_ci_slices(profileId, gi.compute_slices)) return NVML_ERROR_NOT_SUPPORTED;
  unsigned int n = 0;
  for (unsigned int id = 0; id < FG_MIG_CIS; id++)
    for (int k = 0; k < FG_MIG_CIS; k++) {
      if (!gi.ci[k].live || gi.ci[k].id != id || gi.ci[k].profile_id != profileId) continue;
      if (n >= *count) return NVML_ERROR_INSUFFICIENT_SIZE;
      out[n++] = ci_handle(node, gi.id, id);
    }
  *count = n;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t *info) {
  if (fg_nvml_index(NULL) == -1) return NVML_ERROR_UNINITIALIZED;
  struct fg_mig_gi gi;
  const struct fg_mig_ci *ci = ci_of(h, &gi);
  if (!ci || !info) return NVML_ERROR_INVALID_ARGUMENT;
  *info = (nvmlComputeInstanceInfo_t){.device = fg_nvml_handle(h->node), .gpuInstance = fg_nvml_gi_handle(h->node, gi.id),
                                      .id = ci->id, .profileId = ci->profile_id,
                                      .placement = {.start = ci->start, .size = ci->size}};
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig) {
  DEV_OR_FAIL(device);
  if (!is_mig) return NVML_ERROR_INVALID_ARGUMENT;
  *is_mig = idx >= FG_MAX_DEVICES;
  return NVML_SUCCESS;
}

static nvmlReturn_t mig_slot_of(nvmlDevice_t device, struct fg_mig_slot *slot) {
  DEV_OR_FAIL(device);
  if (idx < FG_MAX_DEVICES) return NVML_ERROR_NOT_SUPPORTED;
  return fg_mig_slot(idx, slot) == 0 ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
  struct fg_mig_slot slot;
  nvmlReturn_t rc = id ? mig_slot_of(device, &slot) : NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS) *id = slot.gi_id;
  return rc;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
  struct fg_mig_slot slot;
  nvmlReturn_t rc = id ? mig_slot_of(device, &slot) : NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS) *id = slot.ci_id;
  return rc;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
  CARD_OR_FAIL(device);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = fg_mig_model_of(idx) && fg_mig_mode(idx) == 1 ? MAX_MIG_DEVICES : 0;
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
  CARD_OR_FAIL(device);
  if (!mig || index >= MAX_MIG_DEVICES) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_mig_model_of(idx) || fg_mig_mode(idx) != 1) return NVML_ERROR_NOT_SUPPORTED;
  int dev = fg_mig_device(idx, index);
  if (dev < 0) return NVML_ERROR_NOT_FOUND;
  *mig = fg_nvml_mig_handle(dev);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device) {
  struct fg_mig_slot slot;
  nvmlReturn_t rc = device ? mig_slot_of(mig, &slot) : NVML_ERROR_INVALID_ARGUMENT;
  if (rc == NVML_SUCCESS) *device = fg_nvml_handle((int)slot.parent);
  return rc;
}
