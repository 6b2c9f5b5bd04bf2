/* Internals shared by the fake NVML files. */
#ifndef FAKEGPU_NVML_H
#define FAKEGPU_NVML_H

#include "fake_state.h"
#include "vc_nvml.h"

#define FG_EXPORT __attribute__((visibility("default")))

/* The handle of node device `node`; NULL when this process does not see it. */
nvmlDevice_t fg_nvml_handle(int node);

/* State index of a handle (a card's node index, or FG_MAX_DEVICES + slot for a MIG device); -1 when
 * NVML is not initialised, -2 when it is not one of ours (or names no visible device). */
int fg_nvml_index(nvmlDevice_t d);
/* The handle of MIG device `dev` (a state index); NULL when out of range. */
nvmlDevice_t fg_nvml_mig_handle(int dev);

/* MIG handles: a GPU instance is (card, GPU-instance ID), a compute instance adds its ID. */
struct nvmlGpuInstance_st {
  int node;
  unsigned int id;
};
struct nvmlComputeInstance_st {
  int node;
  unsigned int gi_id;
  unsigned int id;
};
nvmlGpuInstance_t fg_nvml_gi_handle(int node, unsigned int id);
/* The card of a live GPU-instance handle, with a copy of the instance; -1 when NVML is not
 * initialised, -2 when the handle names no live instance of a visible card. */
int fg_nvml_gi_of(nvmlGpuInstance_t h, struct fg_mig_gi *gi);

#define DEV_OR_FAIL_AS(var, device)                                               \
  int var = fg_nvml_index(device);                                                \
  if (var < 0) return var == -1 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT
#define DEV_OR_FAIL(device) DEV_OR_FAIL_AS(idx, device)
/* The same for calls the real library answers only for a card: NOT_SUPPORTED for a MIG handle. */
#define CARD_OR_FAIL_AS(var, device)    \
  DEV_OR_FAIL_AS(var, device);          \
  if (var >= FG_MAX_DEVICES) return NVML_ERROR_NOT_SUPPORTED
#define CARD_OR_FAIL(device) CARD_OR_FAIL_AS(idx, device)

#endif
