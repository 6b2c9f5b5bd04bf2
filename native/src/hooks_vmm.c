/* Virtual memory management. Physical memory is created once by cuMemCreate (charged there, to
 * the device named in prop->location when it is a device; host/NUMA locations are not GPU memory)
 * and stays allocated until cuMemRelease AND every cuMemUnmap of it; cuMemMap only adds a
 * mapping and is never charged. So create -> map -> release (the memory lives on while mapped)
 * stays counted until the last unmap. */
#include "alloc_table.h"
#include "charge.h"
#include "hooks.h"
#include "real.h"

VC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                               unsigned long long flags) {
  __typeof__(&cuMemCreate) real = VC_REAL_CUDA(cuMemCreate);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!handle || !prop || size == 0 || prop->location.type != VC_CU_MEM_LOCATION_TYPE_DEVICE)
    return real(handle, size, prop, flags);
  int index = vc_device_index(prop->location.id);
  if (vc_charge(index, size) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = real(handle, size, prop, flags);
  if (rc != CUDA_SUCCESS) {
    vc_uncharge(index, size);
    return rc;
  }
  /* Physical memory belongs to no context: it outlives cuCtxDestroy (cuda.h). */
  if (vc_charge_record(VC_ALLOC_VMM_HANDLE, *handle, index, size, 0) != 0) {
    __typeof__(&cuMemRelease) release = VC_REAL_CUDA(cuMemRelease);
    if (release) release(*handle);
    vc_uncharge(index, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

VC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  __typeof__(&cuMemRelease) real = VC_REAL_CUDA(cuMemRelease);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(handle);
  int index;
  uint64_t bytes;
  if (rc == CUDA_SUCCESS && vc_alloc_vmm_release(handle, &index, &bytes)) vc_uncharge(index, bytes);
  return rc;
}

VC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                            unsigned long long flags) {
  __typeof__(&cuMemMap) real = VC_REAL_CUDA(cuMemMap);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(ptr, size, offset, handle, flags);
  if (rc == CUDA_SUCCESS) vc_alloc_vmm_map(ptr, handle);
  return rc;
}

VC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  __typeof__(&cuMemUnmap) real = VC_REAL_CUDA(cuMemUnmap);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = real(ptr, size);
  int index;
  uint64_t bytes;
  if (rc == CUDA_SUCCESS && vc_alloc_vmm_unmap(ptr, &index, &bytes)) vc_uncharge(index, bytes);
  return rc;
}
