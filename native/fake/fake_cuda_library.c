/* Fake driver: the library/kernel API (cuLibrary*, cuKernel*) and the module and function queries
 * NVIDIA's CUDA runtime makes for the fat binaries nvcc embeds (__cudaRegisterFatBinary ->
 * cuLibraryLoadData; a <<<>>> launch -> cuLibraryGetKernel -> cuLaunchKernel). Device code never
 * runs: a library wraps a module, and a kernel is a function handle (CUkernel and CUfunction are
 * interchangeable, as the real driver lets cuLaunchKernel take either), so launches are timed by
 * the launch simulation, including the "_us<N>" cost rule on the kernel's (mangled) name. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"

#define FG_MAGIC_LIBRARY 0x4c494252u
#define FG_CUDA_ERROR_FILE_NOT_FOUND ((CUresult)301)

struct fg_kernel_entry {
  CUfunction fn;
  struct fg_kernel_entry *next;
};

struct CUlib_st {
  uint32_t magic;
  CUmodule module;
  pthread_mutex_t lock;
  struct fg_kernel_entry *kernels; /* one handle per name, as the driver gives */
};
typedef struct CUlib_st *CUlibrary;
typedef CUfunction CUkernel;

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, void *jitOptions, void **jitOptionsValues,
                           unsigned int numJitOptions, void *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions);
CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, void *jitOptions, void **jitOptionsValues,
                               unsigned int numJitOptions, void *libraryOptions, void **libraryOptionValues,
                               unsigned int numLibraryOptions);
CUresult cuLibraryUnload(CUlibrary library);
CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name);
CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary library);
CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel);
CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name);
CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary library, const char *name);
CUresult cuKernelGetAttribute(int *pi, int attrib, CUkernel kernel, CUdevice dev);
CUresult cuKernelSetAttribute(int attrib, int val, CUkernel kernel, CUdevice dev);
CUresult cuKernelSetCacheConfig(CUkernel kernel, int config, CUdevice dev);
CUresult cuKernelGetName(const char **name, CUkernel kernel);
CUresult cuFuncGetAttribute(int *pi, int attrib, CUfunction hfunc);
CUresult cuFuncGetName(const char **name, CUfunction hfunc);
CUresult cuModuleGetLoadingMode(int *mode);
CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name);

static int valid_library(CUlibrary lib) { return lib && lib->magic == FG_MAGIC_LIBRARY; }
static int valid_function(CUfunction f) { return f && f->magic == FG_MAGIC_FUNC; }

FG_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, void *jitOptions, void **jitOptionsValues,
                                     unsigned int numJitOptions, void *libraryOptions, void **libraryOptionValues,
                                     unsigned int numLibraryOptions) {
  (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
  (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
  if (!library || !code) return CUDA_ERROR_INVALID_VALUE;
  struct CUlib_st *lib = calloc(1, sizeof *lib);
  if (!lib) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult rc = cuModuleLoadData(&lib->module, code);
  if (rc != CUDA_SUCCESS) {
    free(lib);
    return rc;
  }
  lib->magic = FG_MAGIC_LIBRARY;
  pthread_mutex_init(&lib->lock, NULL);
  *library = lib;
  return CUDA_SUCCESS;
}

/* The file's contents are never looked at, so only its existence matters. */
FG_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, void *jitOptions,
                                         void **jitOptionsValues, unsigned int numJitOptions, void *libraryOptions,
                                         void **libraryOptionValues, unsigned int numLibraryOptions) {
  if (!fileName) return CUDA_ERROR_INVALID_VALUE;
  if (access(fileName, R_OK) != 0) return FG_CUDA_ERROR_FILE_NOT_FOUND;
  return cuLibraryLoadData(library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                           libraryOptionValues, numLibraryOptions);
}

FG_EXPORT CUresult cuLibraryUnload(CUlibrary lib) {
  if (!valid_library(lib)) return CUDA_ERROR_INVALID_HANDLE;
  lib->magic = 0;
  for (struct fg_kernel_entry *k = lib->kernels, *next; k; k = next) {
    next = k->next;
    k->fn->magic = 0;
    free(k->fn);
    free(k);
  }
  cuModuleUnload(lib->module);
  pthread_mutex_destroy(&lib->lock);
  free(lib);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary lib, const char *name) {
  if (!pKernel || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_library(lib)) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lib->lock);
  struct fg_kernel_entry *k = lib->kernels;
  while (k && strncmp(k->fn->name, name, sizeof k->fn->name - 1) != 0) k = k->next;
  CUresult rc = CUDA_SUCCESS;
  if (!k && (k = calloc(1, sizeof *k)) == NULL) rc = CUDA_ERROR_OUT_OF_MEMORY;
  else if (!k->fn && (rc = cuModuleGetFunction(&k->fn, lib->module, name)) == CUDA_SUCCESS) {
    k->next = lib->kernels;
    lib->kernels = k;
  } else if (rc != CUDA_SUCCESS) {
    free(k);
    k = NULL;
  }
  if (k) *pKernel = k->fn;
  pthread_mutex_unlock(&lib->lock);
  return rc;
}

FG_EXPORT CUresult cuLibraryGetModule(CUmodule *pMod, CUlibrary lib) {
  if (!pMod) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_library(lib)) return CUDA_ERROR_INVALID_HANDLE;
  *pMod = lib->module;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
  if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_function(kernel)) return CUDA_ERROR_INVALID_HANDLE;
  if (!fg_current()) return CUDA_ERROR_INVALID_CONTEXT;
  *pFunc = kernel;
  return CUDA_SUCCESS;
}

/* The fake keeps no device variables: a module has no globals to find. */
FG_EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib, const char *name) {
  (void)dptr, (void)bytes;
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  return valid_library(lib) ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
}
FG_EXPORT CUresult cuLibraryGetManaged(CUdeviceptr *dptr, size_t *bytes, CUlibrary lib, const char *name) {
  return cuLibraryGetGlobal(dptr, bytes, lib, name);
}
FG_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name) {
  (void)dptr, (void)bytes;
  if (!hmod || !name) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_FOUND;
}

/* Attributes of the fake's kernels: what a small kernel on compute capability 9.0 reports. */
FG_EXPORT CUresult cuFuncGetAttribute(int *pi, int attrib, CUfunction f) {
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_function(f)) return CUDA_ERROR_INVALID_HANDLE;
  switch (attrib) {
    case 0: *pi = 1024; break;      /* max threads per block */
    case 4: *pi = 16; break;        /* registers */
    case 5: case 6: *pi = 90; break; /* PTX and binary version */
    case 8: *pi = 48 << 10; break;  /* max dynamic shared memory */
    default: *pi = 0; break;
  }
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuKernelGetAttribute(int *pi, int attrib, CUkernel kernel, CUdevice dev) {
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  return cuFuncGetAttribute(pi, attrib, kernel);
}
FG_EXPORT CUresult cuKernelSetAttribute(int attrib, int val, CUkernel kernel, CUdevice dev) {
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  return cuFuncSetAttribute(kernel, (CUfunction_attribute)attrib, val);
}
FG_EXPORT CUresult cuKernelSetCacheConfig(CUkernel kernel, int config, CUdevice dev) {
  (void)config;
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  return valid_function(kernel) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
FG_EXPORT CUresult cuFuncGetName(const char **name, CUfunction f) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_function(f)) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->name;
  return CUDA_SUCCESS;
}
FG_EXPORT CUresult cuKernelGetName(const char **name, CUkernel kernel) { return cuFuncGetName(name, kernel); }

/* Kernels load when the library loads: the fake has no lazy loading to report. */
FG_EXPORT CUresult cuModuleGetLoadingMode(int *mode) {
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  *mode = 1; /* CU_MODULE_EAGER_LOADING */
  return CUDA_SUCCESS;
}
