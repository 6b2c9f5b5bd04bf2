/* Internals shared by the fake NVML files. */
#ifndef FAKEGPU_NVML_H
#define FAKEGPU_NVML_H

#include "vc_nvml.h"

#define FG_EXPORT __attribute__((visibility("default")))

/* The handle of node device `node`; NULL when this process does not see it. */
nvmlDevice_t fg_nvml_handle(int node);

/* Node index of a handle; -1 when NVML is not initialised, -2 when it is not one of ours
 * (or names no visible device). */
int fg_nvml_index(nvmlDevice_t d);

#define DEV_OR_FAIL_AS(var, device)                                               \
  int var = fg_nvml_index(device);                                                \
  if (var < 0) return var == -1 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT
#define DEV_OR_FAIL(device) DEV_OR_FAIL_AS(idx, device)

#endif
