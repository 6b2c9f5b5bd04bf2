/* The container's limit file (layout pinned in contract/limit-config.ts and native/README.md),
 * read with pread on every change of its seqlock word (offset 24), so the node agent's in-place
 * changes take effect without a restart and a file truncated in place is refused, not a SIGBUS. */
#ifndef VCUDA_CONFIG_H
#define VCUDA_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define VC_CONFIG_MAGIC "VCUDACFG"
#define VC_CONFIG_VERSION 1u
#define VC_CONFIG_HEADER_SIZE 512u
#define VC_CONFIG_RECORD_SIZE 128u
#define VC_CONFIG_MAX_DEVICES 16u
#define VC_CONFIG_DEFAULT_PATH "/etc/vcuda/vcuda.conf"

/* A fork while another thread holds a process-local mutex would leave the child's copy locked by
 * a thread the child does not have. VC_FORK_SAFE_MUTEX(m, priority) makes the forking thread hold
 * `m` around fork. Prepare handlers run in reverse registration order and constructors in
 * priority order, so locks are taken pool/graph -> allocation table -> config, the order the
 * hooks nest them in. */
#define VC_ATFORK_CONFIG 201
#define VC_ATFORK_ALLOC_TABLE 202
#define VC_ATFORK_POOL 203 /* also the graph and context tables: none is held inside another */
#define VC_FORK_SAFE_MUTEX(m, priority)                                                     \
  static void vc_fork_prepare(void) { pthread_mutex_lock(&(m)); }                           \
  static void vc_fork_release(void) { pthread_mutex_unlock(&(m)); }                         \
  __attribute__((constructor(priority))) static void vc_register_fork_handlers(void) {      \
    pthread_atfork(vc_fork_prepare, vc_fork_release, vc_fork_release);                      \
  }

enum vc_config_offset {
  VC_CFG_OFF_MAGIC = 0,
  VC_CFG_OFF_VERSION = 8,
  VC_CFG_OFF_HEADER_SIZE = 12,
  VC_CFG_OFF_DEVICE_COUNT = 16,
  VC_CFG_OFF_RECORD_SIZE = 20,
  VC_CFG_OFF_SEQ = 24,
  VC_CFG_OFF_WRITTEN_AT_MS = 32,
  VC_CFG_OFF_CRC32 = 40,
  VC_CFG_OFF_FLAGS = 44,
  VC_CFG_OFF_POD_UID = 48,
  VC_CFG_OFF_CONTAINER = 112,
  VC_CFG_OFF_REGION_PATH = 176,
  VC_CFG_REC_UUID = 0,
  VC_CFG_REC_HOST_INDEX = 48,
  VC_CFG_REC_MODE = 52,
  VC_CFG_REC_MEMORY_LIMIT = 56,
  VC_CFG_REC_CORE_REQUEST = 64,
  VC_CFG_REC_CORE_LIMIT = 68,
  VC_CFG_REC_MEMORY_BURST_LIMIT = 72,
};

enum vc_limit_mode { VC_MODE_HARD = 0, VC_MODE_SOFT = 1 };

struct vc_device_limit {
  char uuid[48];
  uint32_t host_index;
  uint32_t mode; /* enum vc_limit_mode */
  uint64_t memory_limit_bytes;
  uint32_t core_request; /* 1..100 */
  uint32_t core_limit;   /* 1..100 */
  /* Burst ceiling above memory_limit_bytes (managed memory); 0: no burst, as in files written
   * before the field existed. */
  uint64_t memory_burst_limit_bytes;
};

struct vc_config {
  uint64_t seq;
  uint64_t written_at_ms;
  uint32_t device_count;
  char pod_uid[64];
  char container[64];
  char region_path[256];
  struct vc_device_limit devices[VC_CONFIG_MAX_DEVICES];
};

/* Pure: decodes and checks a whole file image (magic, version, sizes, even seq, CRC, value
 * ranges). Returns 0, or -EINVAL with a message naming the field and the rule in `err`. */
int vc_config_parse(const unsigned char *buf, size_t len, struct vc_config *out, char *err, size_t errlen);

/* CRC32 (IEEE) of the image with seq and crc zeroed, as the writer computes it. */
uint32_t vc_config_checksum(const unsigned char *buf, size_t len);

/* Opens `path` and takes a first consistent snapshot. 0 or -errno with `err` filled. */
int vc_config_open(const char *path, char *err, size_t errlen);

/* Copies the current snapshot, re-reading the file when its seq moved. Returns 0, or -errno when
 * the file became unreadable or corrupt (then `out` is left untouched and callers fail closed). */
int vc_config_snapshot(struct vc_config *out);

/* The live memory limit of config record `index`; 0 (fail closed) when unknown or corrupt. */
uint64_t vc_config_memory_limit(int index);

/* The live burst ceiling of record `index`; 0 when it has none (no burst), is unknown or corrupt. */
uint64_t vc_config_burst_limit(int index);

/* Both of record `index` from one snapshot (0 and 0 when unknown or corrupt). */
void vc_config_memory_limits(int index, uint64_t *limit, uint64_t *burst);

/* Index of the record whose UUID equals `uuid` (case-insensitive), or -1. */
int vc_config_find_uuid(const char *uuid);

/* Closes the file (tests). */
void vc_config_close(void);

#endif
