/* Fake driver: cuGetExportTable, the driver's private function tables that NVIDIA's CUDA runtime
 * asks for by UUID. Their layouts are not published; what is here was learnt by serving the
 * runtime tables of logging stubs (FAKEGPU_TRACE=1) and from open-source projects that document
 * the same tables by observation (ZLUDA's dark_api, among others). Only the entries the CUDA 13.0
 * runtime calls are implemented; every other slot is a stub that names itself on stderr and
 * returns CUDA_ERROR_NOT_SUPPORTED, so a runtime that needs more says exactly what. Slot 0 of a
 * table, where the runtime expects it, is the table's size in bytes. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "fake_md2.h"

static CUresult unimplemented(const char *table, int slot) {
  fprintf(stderr, "fakegpu: the runtime called %s slot %d, which the fake driver does not implement\n", table, slot);
  return CUDA_ERROR_NOT_SUPPORTED;
}
#define UNIMPLEMENTED(table, slot) \
  static CUresult table##_##slot(void) { return unimplemented(#table, slot); }

/* ---- cudart interface {6bd5fb6c-5bf4-e74a-8987-d93912fd9df9} ---- */

/* Slot 2: the device's primary context, created if needed but not retained (the runtime retains
 * it itself through cuDevicePrimaryCtxRetain when it makes it current). */
static CUresult cudart_primary_context(CUcontext *pctx, CUdevice dev) {
  if (fg_initialized() != 0) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (fg_node(dev) < 0) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = fg_primary_context(dev);
  return CUDA_SUCCESS;
}

UNIMPLEMENTED(cudart, 1)
UNIMPLEMENTED(cudart, 3)
UNIMPLEMENTED(cudart, 4)
UNIMPLEMENTED(cudart, 5)
UNIMPLEMENTED(cudart, 6)
UNIMPLEMENTED(cudart, 7)
UNIMPLEMENTED(cudart, 8)
UNIMPLEMENTED(cudart, 9)
UNIMPLEMENTED(cudart, 10)
UNIMPLEMENTED(cudart, 11)
UNIMPLEMENTED(cudart, 12)

static const void *const cudart_table[13] = {
    (const void *)(13 * sizeof(void *)), (const void *)cudart_1, (const void *)cudart_primary_context,
    (const void *)cudart_3, (const void *)cudart_4, (const void *)cudart_5, (const void *)cudart_6,
    (const void *)cudart_7, (const void *)cudart_8, (const void *)cudart_9, (const void *)cudart_10,
    (const void *)cudart_11, (const void *)cudart_12,
};

/* ---- tools runtime callback hooks {a094798c-2e74-2e74-93f2-0800200c0a66} ----
 * Slots 2 and 6 hand the runtime two buffers owned by the driver (where a profiler would find the
 * runtime's callback state); the fake only provides the memory. */
static uintptr_t hooks_words[1024];
static unsigned char hooks_bytes[14];

static void hooks_word_buffer(void **ptr, size_t *size) {
  *ptr = hooks_words;
  *size = sizeof hooks_words / sizeof hooks_words[0];
}
static void hooks_byte_buffer(void **ptr, size_t *size) {
  *ptr = hooks_bytes;
  *size = sizeof hooks_bytes;
}

UNIMPLEMENTED(hooks, 1)
UNIMPLEMENTED(hooks, 3)
UNIMPLEMENTED(hooks, 4)
UNIMPLEMENTED(hooks, 5)

static const void *const hooks_table[7] = {
    (const void *)(7 * sizeof(void *)), (const void *)hooks_1, (const void *)hooks_word_buffer, (const void *)hooks_3,
    (const void *)hooks_4, (const void *)hooks_5, (const void *)hooks_byte_buffer,
};

/* ---- tools thread-local storage {42d85a81-23f6-cb47-8298-f6e78a3aecdc} ----
 * The runtime only needs the table to exist: none of its slots is called. */
UNIMPLEMENTED(tools_tls, 1)
UNIMPLEMENTED(tools_tls, 2)
UNIMPLEMENTED(tools_tls, 3)

static const void *const tools_tls_table[4] = {
    (const void *)(4 * sizeof(void *)), (const void *)tools_tls_1, (const void *)tools_tls_2, (const void *)tools_tls_3,
};

/* ---- context-local storage {c693336e-1121-df11-a8c3-68f355d89593} ----
 * The runtime keeps its per-context state in the driver, keyed by (context, key). Slot 0 stores
 * a value with the destructor the driver calls when the context goes away, slot 1 removes it,
 * slot 2 reads it back. A NULL context means the calling thread's current one. This table has no
 * size slot. */
typedef void (*storage_dtor)(CUcontext ctx, void *key, void *value);
struct storage_entry {
  CUcontext ctx;
  void *key, *value;
  storage_dtor dtor;
  struct storage_entry *next;
};
static struct storage_entry *storage;
static pthread_mutex_t storage_lock = PTHREAD_MUTEX_INITIALIZER;

static struct storage_entry **storage_find_locked(CUcontext ctx, void *key) {
  struct storage_entry **p = &storage;
  while (*p && ((*p)->ctx != ctx || (*p)->key != key)) p = &(*p)->next;
  return p;
}

static CUresult storage_context(CUcontext *ctx) {
  if (!*ctx) *ctx = fg_current();
  return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult storage_put(CUcontext ctx, void *key, void *value, storage_dtor dtor) {
  CUresult rc = storage_context(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  pthread_mutex_lock(&storage_lock);
  struct storage_entry **p = storage_find_locked(ctx, key);
  if (!*p && (*p = calloc(1, sizeof **p)) != NULL) **p = (struct storage_entry){.ctx = ctx, .key = key};
  if (*p) {
    (*p)->value = value;
    (*p)->dtor = dtor;
  }
  pthread_mutex_unlock(&storage_lock);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult storage_remove(CUcontext ctx, void *key) {
  CUresult rc = storage_context(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  pthread_mutex_lock(&storage_lock);
  struct storage_entry **p = storage_find_locked(ctx, key), *gone = *p;
  if (gone) *p = gone->next;
  pthread_mutex_unlock(&storage_lock);
  free(gone);
  return CUDA_SUCCESS;
}

static CUresult storage_get(void **value, CUcontext ctx, void *key) {
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  CUresult rc = storage_context(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  pthread_mutex_lock(&storage_lock);
  struct storage_entry *e = *storage_find_locked(ctx, key);
  if (e) *value = e->value;
  pthread_mutex_unlock(&storage_lock);
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void fg_context_storage_destroy(CUcontext ctx) {
  for (;;) {
    pthread_mutex_lock(&storage_lock);
    struct storage_entry **p = &storage;
    while (*p && (*p)->ctx != ctx) p = &(*p)->next;
    struct storage_entry *gone = *p;
    if (gone) *p = gone->next;
    pthread_mutex_unlock(&storage_lock);
    if (!gone) return;
    if (gone->dtor) gone->dtor(ctx, gone->key, gone->value);
    free(gone);
  }
}

UNIMPLEMENTED(storage, 3)

static const void *const storage_table[4] = {
    (const void *)storage_put, (const void *)storage_remove, (const void *)storage_get, (const void *)storage_3,
};

/* ---- context checks {263e8860-7cd2-6143-92f6-bbd5006dfa7e} ----
 * Slot 2 asks whether a context carries conditions the runtime must honour (flags and a detail
 * record); slot 3 the same for the process. The fake's contexts carry none. No size slot. */
static CUresult checks_context(CUcontext ctx, unsigned int *flags, const void **detail) {
  (void)ctx;
  if (flags) *flags = 0;
  if (detail) *detail = NULL;
  return CUDA_SUCCESS;
}
static unsigned int checks_process(void) { return 0; }

UNIMPLEMENTED(checks, 0)
UNIMPLEMENTED(checks, 1)

static const void *const checks_table[4] = {
    (const void *)checks_0, (const void *)checks_1, (const void *)checks_context, (const void *)checks_process,
};

/* ---- runtime/driver check {d4082055-bde6-704b-8d34-ba123c66e1f2} ----
 * Slot 1 is called at start-up with the runtime's version (with a variant in its last digit),
 * the time in unix seconds and a 16-byte result the runtime verifies. As ZLUDA documents from
 * observation: for last digits 0 and 1 the answer is a fixed value; otherwise it is HMAC-MD2 under
 * a fixed key over (driver version, runtime version, pid, thread, the cudart table's address,
 * this table's address, this function's address, the time) and then, per device, (UUID, PCI
 * domain, bus, device). CUDA 13.0 asks for both kinds. */
static const void *const runtime_check_table[3];

static const unsigned char runtime_check_key[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
                                                    0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

struct runtime_check_process {
  uint32_t driver_version, runtime_version, pid, thread;
  const void *cudart_table, *check_table, *check_fn;
  uint64_t unix_seconds;
};
struct __attribute__((packed)) runtime_check_device {
  unsigned char uuid[16];
  int32_t pci_domain, pci_bus, pci_device;
};
_Static_assert(sizeof(struct runtime_check_process) == 48, "runtime check: process record");
_Static_assert(sizeof(struct runtime_check_device) == 28, "runtime check: device record");

static CUresult runtime_check(unsigned int runtime_version, uint64_t unix_seconds, unsigned char result[16]);

static CUresult runtime_check_digest(unsigned int runtime_version, uint64_t unix_seconds, unsigned char result[16]) {
  struct runtime_check_process proc = {
      .driver_version = FG_DRIVER_VERSION,
      .runtime_version = runtime_version,
      .pid = (uint32_t)getpid(),
      .thread = (uint32_t)(uintptr_t)pthread_self(),
      .cudart_table = cudart_table,
      .check_table = runtime_check_table,
      .check_fn = (const void *)runtime_check,
      .unix_seconds = unix_seconds,
  };
  struct fg_md2 mac;
  fg_hmac_md2_begin(&mac, runtime_check_key);
  fg_md2_update(&mac, &proc, sizeof proc);
  for (int dev = 0; dev < fg_visible_count(); dev++) {
    struct runtime_check_device d = {.pci_bus = (int32_t)fg_dev_pci_bus(fg_node(dev))};
    fg_dev_uuid(fg_node(dev), d.uuid); /* PCI domain and device are 0, as cuDeviceGetAttribute says */
    fg_md2_update(&mac, &d, sizeof d);
  }
  fg_hmac_md2_end(&mac, runtime_check_key, result);
  return CUDA_SUCCESS;
}

static CUresult runtime_check(unsigned int runtime_version, uint64_t unix_seconds, unsigned char result[16]) {
  static const unsigned char fixed[16] = {0x5c, 0x67, 0xcb, 0x03, 0x1c, 0x18, 0x41, 0x33,
                                          0xe8, 0xd1, 0x4c, 0x1f, 0xaa, 0x83, 0xd3, 0x8e};
  if (!result) return CUDA_ERROR_INVALID_VALUE;
  if (runtime_version % 10 > 1) return runtime_check_digest(runtime_version, unix_seconds, result);
  memcpy(result, fixed, 16);
  if (runtime_version % 10 == 1) result[7] = 24;
  return CUDA_SUCCESS;
}

UNIMPLEMENTED(runtime_check, 2)

static const void *const runtime_check_table[3] = {
    (const void *)(3 * sizeof(void *)), (const void *)runtime_check, (const void *)runtime_check_2,
};

struct export_table {
  const char *name;
  unsigned char uuid[16];
  const void *const *table;
};

static const struct export_table tables[] = {
    {"cudart",
     {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9},
     cudart_table},
    {"hooks",
     {0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66},
     hooks_table},
    {"tools_tls",
     {0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc},
     tools_tls_table},
    {"context_storage",
     {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93},
     storage_table},
    {"context_checks",
     {0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e},
     checks_table},
    {"runtime_check",
     {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2},
     runtime_check_table},
};

FG_EXPORT CUresult cuGetExportTable(const void **table, const CUuuid *id) {
  if (!table || !id) return CUDA_ERROR_INVALID_VALUE;
  const struct export_table *found = NULL;
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
    if (memcmp(tables[i].uuid, id->bytes, 16) == 0) found = &tables[i];
  if (fg_trace_enabled()) {
    const unsigned char *u = (const unsigned char *)id->bytes;
    fprintf(stderr,
            "fakegpu: export-table %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x %s\n", u[0],
            u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15],
            found ? found->name : "not-found");
  }
  *table = found ? found->table : NULL;
  return found ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
