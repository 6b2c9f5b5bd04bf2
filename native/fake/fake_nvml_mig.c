/* Fake NVML: MIG mode, GPU-instance profiles and placements, GPU instances (fake_mig.h has the
 * model). Codes as nvml.h documents them: NOT_SUPPORTED where the card has no MIG or is not in MIG
 * mode, INSUFFICIENT_RESOURCES for a placement that is taken (or a profile whose instances, or the
 * card's compute slices, are used up), IN_USE for a mode switch or destroy while something holds it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "fake_nvml.h"

/* gi_handles[node][id]: a GPU-instance handle is valid while that instance exists. */
static struct nvmlGpuInstance_st gi_handles[FG_MAX_DEVICES][16];

nvmlGpuInstance_t fg_nvml_gi_handle(int node, unsigned int id) {
  if (node < 0 || node >= FG_MAX_DEVICES || id >= 16) return NULL;
  gi_handles[node][id] = (struct nvmlGpuInstance_st){.node = node, .id = id};
  return &gi_handles[node][id];
}

int fg_nvml_gi_of(nvmlGpuInstance_t h, struct fg_mig_gi *gi) {
  if (fg_nvml_index(NULL) == -1) return -1;
  if (!h || h < &gi_handles[0][0] || h >= &gi_handles[FG_MAX_DEVICES - 1][16]) return -2;
  if (!fg_nvml_handle(h->node) || fg_mig_gi(h->node, h->id, gi) != FG_MIG_OK) return -2;
  return h->node;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
  CARD_OR_FAIL(device);
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  if (!fg_mig_model_of(idx)) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = fg_mig_mode(idx);
  return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activation) {
  CARD_OR_FAIL(device);
  if (!activation) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc = (nvmlReturn_t)fg_mig_set_mode(idx, mode);
  *activation = rc;
  return rc;
}

/* The profile behind NVML's profile index on a card with MIG, in MIG mode or not (an H200 with
 * driver 580.159.04 lists its profiles and placements with MIG off); *rc says why not. */
static const struct fg_gi_profile *profile_at(int idx, unsigned int profile, nvmlReturn_t *rc) {
  const struct fg_mig_model *m = fg_mig_model_of(idx);
  const struct fg_gi_profile *p = fg_mig_profile_by_index(m, profile);
  *rc = NVML_SUCCESS;
  if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT) *rc = NVML_ERROR_INVALID_ARGUMENT;
  else if (!m || !p) *rc = NVML_ERROR_NOT_SUPPORTED;
  return *rc == NVML_SUCCESS ? p : NULL;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                           nvmlGpuInstanceProfileInfo_t *info) {
  CARD_OR_FAIL(device);
  nvmlReturn_t rc;
  const struct fg_gi_profile *p = profile_at(idx, profile, &rc);
  if (!info && rc == NVML_SUCCESS) rc = NVML_ERROR_INVALID_ARGUMENT;
  if (rc != NVML_SUCCESS) return rc;
  *info = (nvmlGpuInstanceProfileInfo_t){.id = p->id, .isP2pSupported = 0, .sliceCount = p->compute_slices,
                                         .instanceCount = p->instances, .multiprocessorCount = p->sms,
                                         .copyEngineCount = p->copy_engines, .decoderCount = p->decoders,
                                         .encoderCount = p->encoders, .jpegCount = p->jpegs, .ofaCount = p->ofas,
                                         .memorySizeMB = p->memory_mib};
  return NVML_SUCCESS;
}

/* v2 and v3 (told apart by the version word); the name is "MIG 1g.10gb", as the driver spells it. */
FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                            nvmlGpuInstanceProfileInfo_v2_t *info) {
  if (!info) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int version = info->version;
  if (version != nvmlGpuInstanceProfileInfo_v2 && version != nvmlGpuInstanceProfileInfo_v3)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  nvmlGpuInstanceProfileInfo_t v1;
  nvmlReturn_t rc = nvmlDeviceGetGpuInstanceProfileInfo(device, profile, &v1);
  if (rc != NVML_SUCCESS) return rc;
  char name[VC_NVML_NAME_V2_BUFFER_SIZE];
  snprintf(name, sizeof name, "MIG %s", profile_at(fg_nvml_index(device), profile, &rc)->name);
  if (version == nvmlGpuInstanceProfileInfo_v2) {
    *info = (nvmlGpuInstanceProfileInfo_v2_t){version, v1.id, v1.isP2pSupported, v1.sliceCount, v1.instanceCount,
                                              v1.multiprocessorCount, v1.copyEngineCount, v1.decoderCount,
                                              v1.encoderCount, v1.jpegCount, v1.ofaCount, v1.memorySizeMB, {0}};
    memcpy(info->name, name, sizeof name);
    return NVML_SUCCESS;
  }
  nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
  *v3 = (nvmlGpuInstanceProfileInfo_v3_t){version, v1.id, v1.sliceCount, v1.instanceCount, v1.multiprocessorCount,
                                          v1.copyEngineCount, v1.decoderCount, v1.encoderCount, v1.jpegCount,
                                          v1.ofaCount, v1.memorySizeMB, {0}, 0};
  memcpy(v3->name, name, sizeof name);
  return NVML_SUCCESS;
}

/* The profile with this ID on a card with MIG (in MIG mode or not); *rc says why not. */
static const struct fg_gi_profile *profile_id(int idx, unsigned int id, nvmlReturn_t *rc) {
  const struct fg_mig_model *m = fg_mig_model_of(idx);
  const struct fg_gi_profile *p = fg_mig_profile_by_id(m, id);
  *rc = !m ? NVML_ERROR_NOT_SUPPORTED : !p ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
  return *rc == NVML_SUCCESS ? p : NULL;
}

/* Every legal placement, taken or not (nvml.h: "returns all the possible placements"). */
FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int id,
                                                                     nvmlGpuInstancePlacement_t *out,
                                                                     unsigned int *count) {
  CARD_OR_FAIL(device);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t rc;
  const struct fg_gi_profile *p = profile_id(idx, id, &rc);
  if (!p) return rc;
  if (out) {
    if (*count < p->placement_count) return NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned int i = 0; i < p->placement_count; i++)
      out[i] = (nvmlGpuInstancePlacement_t){.start = p->placements[i], .size = p->memory_slices};
  }
  *count = p->placement_count;
  return NVML_SUCCESS;
}
