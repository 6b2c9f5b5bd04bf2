/* Entry points the fake driver implements beyond include/vc_proc_table.h (which libvcuda shares):
 * what NVIDIA's CUDA runtime looks up and calls. Same columns: (base name, export, PFN version
 * from cudaTypedefs.h, per-thread-stream variant). Only the fake driver reads this table. */
#ifndef FG_PROC
#define FG_PROC(base, export, version, per_thread)
#endif

FG_PROC(cuGetExportTable, cuGetExportTable, 3000, 0)
/* fake_cuda_library.c */
FG_PROC(cuModuleGetLoadingMode, cuModuleGetLoadingMode, 11070, 0)
FG_PROC(cuModuleGetGlobal, cuModuleGetGlobal_v2, 3020, 0)
FG_PROC(cuLibraryLoadData, cuLibraryLoadData, 12000, 0)
FG_PROC(cuLibraryLoadFromFile, cuLibraryLoadFromFile, 12000, 0)
FG_PROC(cuLibraryUnload, cuLibraryUnload, 12000, 0)
FG_PROC(cuLibraryGetKernel, cuLibraryGetKernel, 12000, 0)
FG_PROC(cuLibraryGetModule, cuLibraryGetModule, 12000, 0)
FG_PROC(cuKernelGetFunction, cuKernelGetFunction, 12000, 0)
FG_PROC(cuLibraryGetGlobal, cuLibraryGetGlobal, 12000, 0)
FG_PROC(cuLibraryGetManaged, cuLibraryGetManaged, 12000, 0)
FG_PROC(cuKernelGetAttribute, cuKernelGetAttribute, 12000, 0)
FG_PROC(cuKernelSetAttribute, cuKernelSetAttribute, 12000, 0)
FG_PROC(cuKernelSetCacheConfig, cuKernelSetCacheConfig, 12000, 0)
FG_PROC(cuKernelGetName, cuKernelGetName, 12030, 0)
FG_PROC(cuFuncGetAttribute, cuFuncGetAttribute, 2020, 0)
FG_PROC(cuFuncGetName, cuFuncGetName, 12030, 0)

/* fake_cuda_runtime.c */
FG_PROC(cuCtxGetApiVersion, cuCtxGetApiVersion, 3020, 0)

/* fake_cuda_host.c */
FG_PROC(cuMemHostAlloc, cuMemHostAlloc, 2020, 0)
FG_PROC(cuMemAllocHost, cuMemAllocHost_v2, 3020, 0)
FG_PROC(cuMemFreeHost, cuMemFreeHost, 2000, 0)
FG_PROC(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, 3020, 0)
FG_PROC(cuMemHostGetFlags, cuMemHostGetFlags, 2030, 0)

/* fake_cuda_copy.c */
FG_PROC(cuMemcpy, cuMemcpy, 4000, 0)
FG_PROC(cuMemcpy, cuMemcpy_ptds, 7000, 1)
FG_PROC(cuMemcpyAsync, cuMemcpyAsync, 4000, 0)
FG_PROC(cuMemcpyAsync, cuMemcpyAsync_ptsz, 7000, 1)
FG_PROC(cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020, 0)
FG_PROC(cuMemcpyHtoD, cuMemcpyHtoD_v2_ptds, 7000, 1)
FG_PROC(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, 3020, 0)
FG_PROC(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2_ptsz, 7000, 1)
FG_PROC(cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020, 0)
FG_PROC(cuMemcpyDtoH, cuMemcpyDtoH_v2_ptds, 7000, 1)
FG_PROC(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 3020, 0)
FG_PROC(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2_ptsz, 7000, 1)
FG_PROC(cuMemcpyDtoD, cuMemcpyDtoD_v2, 3020, 0)
FG_PROC(cuMemcpyDtoD, cuMemcpyDtoD_v2_ptds, 7000, 1)
FG_PROC(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, 3020, 0)
FG_PROC(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2_ptsz, 7000, 1)
FG_PROC(cuMemsetD8, cuMemsetD8_v2, 3020, 0)
FG_PROC(cuMemsetD8, cuMemsetD8_v2_ptds, 7000, 1)
FG_PROC(cuMemsetD8Async, cuMemsetD8Async, 3020, 0)
FG_PROC(cuMemsetD8Async, cuMemsetD8Async_ptsz, 7000, 1)
FG_PROC(cuMemsetD32, cuMemsetD32_v2, 3020, 0)
FG_PROC(cuMemsetD32, cuMemsetD32_v2_ptds, 7000, 1)
FG_PROC(cuMemsetD32Async, cuMemsetD32Async, 3020, 0)
FG_PROC(cuMemsetD32Async, cuMemsetD32Async_ptsz, 7000, 1)
FG_PROC(cuMemcpy2D, cuMemcpy2D_v2, 3020, 0)
FG_PROC(cuMemcpy2D, cuMemcpy2D_v2_ptds, 7000, 1)
FG_PROC(cuMemcpy2DUnaligned, cuMemcpy2DUnaligned_v2, 3020, 0)
FG_PROC(cuMemcpy2DUnaligned, cuMemcpy2DUnaligned_v2_ptds, 7000, 1)
FG_PROC(cuMemcpy2DAsync, cuMemcpy2DAsync_v2, 3020, 0)
FG_PROC(cuMemcpy2DAsync, cuMemcpy2DAsync_v2_ptsz, 7000, 1)

/* fake_cuda_managed.c */
FG_PROC(cuMemAdvise, cuMemAdvise, 8000, 0)
FG_PROC(cuMemAdvise, cuMemAdvise_v2, 12020, 0)
FG_PROC(cuMemPrefetchAsync, cuMemPrefetchAsync_v2, 12020, 0)

#undef FG_PROC
