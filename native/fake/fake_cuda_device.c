/* Fake driver: initialisation, devices, contexts, error strings. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_mem.h"

static int initialized;
static struct CUctx_st primary[FG_MAX_DEVICES];
static int primary_refs[FG_MAX_DEVICES];
static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local CUcontext ctx_stack[16];
static _Thread_local int ctx_depth;

int fg_initialized(void) { return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE) ? 0 : -1; }

CUcontext fg_current(void) { return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : NULL; }

/* CUdevice values are ordinals among the visible devices (FAKEGPU_VISIBLE_DEVICES), as with the real
 * driver; fg_node() turns one into the node index the shared state is kept by. */
static int valid_device(CUdevice dev) { return fg_node(dev) >= 0; }

#define REQUIRE_INIT()                                   \
  do {                                                   \
    if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)

FG_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!fg_state() || fg_visible_count() == 0) return CUDA_ERROR_NO_DEVICE;
  __atomic_store_n(&initialized, 1, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDriverGetVersion(int *version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = FG_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetCount(int *count) {
  REQUIRE_INIT();
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = fg_visible_count();
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  REQUIRE_INIT();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  REQUIRE_INIT();
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fg_dev_name(fg_node(dev), name, (size_t)len);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  REQUIRE_INIT();
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  fg_dev_uuid(fg_node(dev), (unsigned char *)uuid->bytes);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

FG_EXPORT CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice dev) {
  REQUIRE_INIT();
  if (!id || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(id, (size_t)len, "0000:%02x:00.0", fg_dev_pci_bus(fg_node(dev)));
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  REQUIRE_INIT();
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  switch ((int)attrib) {
    case 1: *pi = 1024; break;                                 /* max threads per block */
    case 10: *pi = 32; break;                                  /* warp size */
    case 16: *pi = (int)fg_dev_sms(fg_node(dev)); break;                /* multiprocessor count */
    case 33: *pi = (int)fg_dev_pci_bus(fg_node(dev)); break;       /* PCI bus */
    case 34: case 50: *pi = 0; break;                          /* PCI device, domain */
    case 39: *pi = 2048; break;                                /* threads per SM */
    case 41: case 83: case 95: case 102: case 115: *pi = 1; break; /* UVA, managed, VMM, pools */
    case 89: *pi = fg_env()->concurrent_managed; break;        /* concurrent managed access */
    case 51: *pi = 512; break;                                 /* texture pitch alignment */
    case 75: *pi = 9; break;                                   /* compute capability 9.0 */
    case 76: *pi = 0; break;
    default: *pi = 0; break;
  }
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  REQUIRE_INIT();
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = fg_state()->devices[fg_node(dev)].memory_total;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
  size_t b = 0;
  CUresult rc = cuDeviceTotalMem_v2(&b, dev);
  if (rc == CUDA_SUCCESS) *bytes = b > 0xFFFFFFFFu ? 0xFFFFFFFFu : (unsigned int)b;
  return rc;
}

/* ---- contexts ---- */

static CUresult push(CUcontext c) {
  if (ctx_depth >= 16) return CUDA_ERROR_INVALID_VALUE;
  ctx_stack[ctx_depth++] = c;
  return CUDA_SUCCESS;
}

static CUresult attach_memory(int dev) {
  uint64_t bytes = fg_env()->context_bytes;
  if (bytes && fg_mem_charge(fg_node(dev), bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  fg_mark_context(fg_node(dev));
  return CUDA_SUCCESS;
}

static CUresult create_ctx(CUcontext *pctx, CUdevice dev) {
  REQUIRE_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  CUresult rc = attach_memory(dev);
  if (rc != CUDA_SUCCESS) return rc;
  struct CUctx_st *c = calloc(1, sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  c->magic = FG_MAGIC_CTX;
  c->device = dev;
  *pctx = c;
  return push(c);
}

FG_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  (void)flags;
  return create_ctx(pctx, dev);
}
FG_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  (void)flags;
  return create_ctx(pctx, dev);
}
FG_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice dev) {
  (void)p;
  (void)n;
  (void)flags;
  return create_ctx(pctx, dev);
}
FG_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev) {
  (void)p;
  (void)flags;
  return create_ctx(pctx, dev);
}

FG_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  if (!ctx || ctx->magic != FG_MAGIC_CTX || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  fg_context_storage_destroy(ctx); /* the runtime's per-context state goes with the context */
  for (int i = 0; i < ctx_depth; i++)
    if (ctx_stack[i] == ctx) ctx_stack[i] = NULL;
  while (ctx_depth > 0 && !ctx_stack[ctx_depth - 1]) ctx_depth--;
  if (fg_env()->context_bytes) fg_mem_uncharge(fg_node(ctx->device), fg_env()->context_bytes);
  fg_mem_drop_context(ctx); /* its cuMemAlloc/pitch/managed memory goes with it */
  ctx->magic = 0;
  free(ctx);
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (ctx_depth == 0) return ctx ? push(ctx) : CUDA_SUCCESS;
  ctx_stack[ctx_depth - 1] = ctx;
  if (!ctx) ctx_depth--;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = fg_current();
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return ctx ? push(ctx) : CUDA_ERROR_INVALID_CONTEXT; }

FG_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext c = ctx_stack[--ctx_depth];
  if (pctx) *pctx = c;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
  CUcontext c = fg_current();
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = c->device;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
  if (!ctx) return cuCtxGetDevice(device);
  if (ctx->magic != FG_MAGIC_CTX) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  REQUIRE_INIT();
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&ctx_lock);
  CUresult rc = CUDA_SUCCESS;
  if (primary_refs[dev] == 0) rc = attach_memory(dev);
  if (rc == CUDA_SUCCESS) {
    primary_refs[dev]++;
    primary[dev] = (struct CUctx_st){.magic = FG_MAGIC_CTX, .device = dev, .primary = 1};
    *pctx = &primary[dev];
  }
  pthread_mutex_unlock(&ctx_lock);
  return rc;
}

CUcontext fg_primary_context(int dev) {
  pthread_mutex_lock(&ctx_lock);
  primary[dev] = (struct CUctx_st){.magic = FG_MAGIC_CTX, .device = dev, .primary = 1};
  pthread_mutex_unlock(&ctx_lock);
  return &primary[dev];
}

FG_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&ctx_lock);
  CUresult rc = primary_refs[dev] > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  int last = rc == CUDA_SUCCESS && --primary_refs[dev] == 0;
  if (last && fg_env()->context_bytes) fg_mem_uncharge(fg_node(dev), fg_env()->context_bytes);
  pthread_mutex_unlock(&ctx_lock);
  if (last) fg_mem_drop_context(&primary[dev]); /* the context is destroyed, with its memory */
  return rc;
}

void *fg_primary_ctx(int dev) { return dev >= 0 && dev < FG_MAX_DEVICES ? &primary[dev] : NULL; }

FG_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

FG_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (flags) *flags = 0;
  if (active) *active = primary_refs[dev] > 0;
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
  if (!pStr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *pStr = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *pStr = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *pStr = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *pStr = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *pStr = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *pStr = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *pStr = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_HANDLE: *pStr = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_READY: *pStr = "CUDA_ERROR_NOT_READY"; break;
    default: *pStr = "CUDA_ERROR_UNKNOWN"; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) { return cuGetErrorName(error, pStr); }
