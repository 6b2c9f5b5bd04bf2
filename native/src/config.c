/* Limit file reader. Every read goes through the seqlock: read seq, copy the file, read seq
 * again; retry while odd or changed. The CRC check after the copy catches writers that skip the
 * seqlock. A snapshot is cached and only refreshed when seq moves, so the common case is one
 * 8-byte pread. Reads are pread, not a mapping, so a file truncated in place is a corrupt file
 * (fail closed), never a SIGBUS. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void build_crc_table(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    crc_table[i] = c;
  }
}

static uint32_t crc_update(uint32_t crc, const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc;
}

uint32_t vc_config_checksum(const unsigned char *buf, size_t len) {
  static const unsigned char zeros[8];
  pthread_once(&crc_once, build_crc_table);
  uint32_t crc = 0xFFFFFFFFu;
  crc = crc_update(crc, buf, VC_CFG_OFF_SEQ);
  crc = crc_update(crc, zeros, 8);
  crc = crc_update(crc, buf + VC_CFG_OFF_SEQ + 8, VC_CFG_OFF_CRC32 - (VC_CFG_OFF_SEQ + 8));
  crc = crc_update(crc, zeros, 4);
  crc = crc_update(crc, buf + VC_CFG_OFF_CRC32 + 4, len - (VC_CFG_OFF_CRC32 + 4));
  return crc ^ 0xFFFFFFFFu;
}

static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static int copy_text(char *dst, size_t dstlen, const unsigned char *src, size_t srclen) {
  size_t n = strnlen((const char *)src, srclen);
  if (n >= dstlen || n == srclen) return -1; /* must be NUL terminated inside its field */
  memcpy(dst, src, n);
  dst[n] = '\0';
  return 0;
}

#define FAIL(...)                            \
  do {                                       \
    if (err) snprintf(err, errlen, __VA_ARGS__); \
    return -EINVAL;                          \
  } while (0)

int vc_config_parse(const unsigned char *buf, size_t len, struct vc_config *out, char *err, size_t errlen) {
  if (len < VC_CONFIG_HEADER_SIZE) FAIL("file is %zu bytes, shorter than the %u-byte header", len, VC_CONFIG_HEADER_SIZE);
  if (memcmp(buf + VC_CFG_OFF_MAGIC, VC_CONFIG_MAGIC, 8) != 0) FAIL("bad magic (expected \"VCUDACFG\")");
  uint32_t version = rd32(buf + VC_CFG_OFF_VERSION);
  if (version != VC_CONFIG_VERSION) FAIL("unsupported version %u (this library reads %u)", version, VC_CONFIG_VERSION);
  if (rd32(buf + VC_CFG_OFF_HEADER_SIZE) != VC_CONFIG_HEADER_SIZE) FAIL("header size must be 512");
  if (rd32(buf + VC_CFG_OFF_RECORD_SIZE) != VC_CONFIG_RECORD_SIZE) FAIL("device record size must be 128");
  uint32_t count = rd32(buf + VC_CFG_OFF_DEVICE_COUNT);
  if (count > VC_CONFIG_MAX_DEVICES) FAIL("device count %u exceeds %u", count, VC_CONFIG_MAX_DEVICES);
  size_t want = VC_CONFIG_HEADER_SIZE + (size_t)count * VC_CONFIG_RECORD_SIZE;
  if (len != want) FAIL("file is %zu bytes, expected %zu for %u devices", len, want, count);
  uint64_t seq = rd64(buf + VC_CFG_OFF_SEQ);
  if (seq & 1u) FAIL("a write is in progress (odd seq %llu)", (unsigned long long)seq);
  uint32_t stored = rd32(buf + VC_CFG_OFF_CRC32);
  uint32_t actual = vc_config_checksum(buf, len);
  if (stored != actual) FAIL("checksum mismatch (stored %08x, computed %08x)", stored, actual);
  struct vc_config c;
  memset(&c, 0, sizeof c);
  c.seq = seq;
  c.written_at_ms = rd64(buf + VC_CFG_OFF_WRITTEN_AT_MS);
  c.device_count = count;
  if (copy_text(c.pod_uid, sizeof c.pod_uid, buf + VC_CFG_OFF_POD_UID, 64)) FAIL("pod UID is not NUL terminated");
  if (copy_text(c.container, sizeof c.container, buf + VC_CFG_OFF_CONTAINER, 64))
    FAIL("container name is not NUL terminated");
  if (copy_text(c.region_path, sizeof c.region_path, buf + VC_CFG_OFF_REGION_PATH, 256))
    FAIL("region path is not NUL terminated");
  if (c.region_path[0] == '\0') FAIL("region path is empty");
  for (uint32_t i = 0; i < count; i++) {
    const unsigned char *r = buf + VC_CONFIG_HEADER_SIZE + (size_t)i * VC_CONFIG_RECORD_SIZE;
    struct vc_device_limit *d = &c.devices[i];
    if (copy_text(d->uuid, sizeof d->uuid, r + VC_CFG_REC_UUID, 48) || d->uuid[0] == '\0')
      FAIL("device %u: uuid is empty or not NUL terminated", i);
    d->host_index = rd32(r + VC_CFG_REC_HOST_INDEX);
    d->mode = rd32(r + VC_CFG_REC_MODE);
    d->memory_limit_bytes = rd64(r + VC_CFG_REC_MEMORY_LIMIT);
    d->core_request = rd32(r + VC_CFG_REC_CORE_REQUEST);
    d->core_limit = rd32(r + VC_CFG_REC_CORE_LIMIT);
    d->memory_burst_limit_bytes = rd64(r + VC_CFG_REC_MEMORY_BURST_LIMIT);
    if (d->mode > VC_MODE_SOFT) FAIL("device %u: mode %u is neither 0 (hard) nor 1 (soft)", i, d->mode);
    if (d->memory_limit_bytes == 0) FAIL("device %u: memory limit must be > 0", i);
    if (d->core_request < 1 || d->core_request > 100) FAIL("device %u: core request %u outside 1..100", i, d->core_request);
    if (d->core_limit < d->core_request || d->core_limit > 100)
      FAIL("device %u: core limit %u outside request..100", i, d->core_limit);
    if (d->memory_burst_limit_bytes && d->memory_burst_limit_bytes <= d->memory_limit_bytes)
      FAIL("device %u: memory burst limit %llu must be 0 (none) or above the memory limit %llu", i,
           (unsigned long long)d->memory_burst_limit_bytes, (unsigned long long)d->memory_limit_bytes);
  }
  *out = c;
  return 0;
}

#define CONFIG_MAX_BYTES (VC_CONFIG_HEADER_SIZE + VC_CONFIG_MAX_DEVICES * VC_CONFIG_RECORD_SIZE)

static struct {
  pthread_mutex_t lock;
  int fd; /* -1: not open */
  char path[512];
  struct vc_config snap;
  int snap_ok;
  int corrupt_logged;
} cfg = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};
VC_FORK_SAFE_MUTEX(cfg.lock, VC_ATFORK_CONFIG)

/* The file is read with pread, never through a mapping: the node agent (or an operator) may
 * truncate it in place, and touching a mapped page past the new end raises SIGBUS. A short read
 * is a corrupt file like any other. */
static int read_seq(uint64_t *seq) {
  unsigned char b[8];
  if (pread(cfg.fd, b, sizeof b, VC_CFG_OFF_SEQ) != (ssize_t)sizeof b) return -EIO;
  *seq = rd64(b);
  return 0;
}

/* Seqlock read of the file into `copy`: seq, whole file, seq again; 0, -EAGAIN when the writer
 * kept it busy, or the parse error. */
static int read_stable(unsigned char *copy, char *err, size_t errlen, struct vc_config *out) {
  int last = -EAGAIN;
  for (int attempt = 0; attempt < 1000; attempt++) {
    uint64_t s1 = 0, s2 = 0;
    if (read_seq(&s1) != 0) {
      if (err) snprintf(err, errlen, "file is shorter than its header");
      return -EINVAL;
    }
    if (s1 & 1u) {
      sched_yield();
      continue;
    }
    ssize_t n = pread(cfg.fd, copy, CONFIG_MAX_BYTES + 1, 0);
    if (n < 0) {
      if (err) snprintf(err, errlen, "read: %s", strerror(errno));
      return -EIO;
    }
    if (read_seq(&s2) != 0 || s1 != s2) continue;
    last = vc_config_parse(copy, (size_t)n, out, err, errlen);
    if (last == 0) return 0;
    /* A writer that does not bump seq may have been caught mid-write: retry a few times. */
    if (attempt > 20) return last;
    sched_yield();
  }
  if (last == -EAGAIN && err) snprintf(err, errlen, "the writer kept seq odd for too long");
  return last;
}

int vc_config_open(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "open %s: %s", path, strerror(e));
    return -e;
  }
  unsigned char copy[CONFIG_MAX_BYTES + 1];
  struct vc_config snap;
  pthread_mutex_lock(&cfg.lock);
  if (cfg.fd >= 0) close(cfg.fd);
  cfg.fd = fd;
  snprintf(cfg.path, sizeof cfg.path, "%s", path);
  char why[200] = "";
  int rc = read_stable(copy, why, sizeof why, &snap);
  if (rc == 0) {
    cfg.snap = snap;
    cfg.snap_ok = 1;
  } else {
    cfg.snap_ok = 0;
    snprintf(err, errlen, "%s: %s", path, why);
  }
  pthread_mutex_unlock(&cfg.lock);
  return rc;
}

/* Caller holds cfg.lock. */
static int refresh_locked(void) {
  if (cfg.fd < 0) return -ENOENT;
  uint64_t seq = 0;
  if (cfg.snap_ok && read_seq(&seq) == 0 && seq == cfg.snap.seq) return 0;
  unsigned char copy[CONFIG_MAX_BYTES + 1];
  struct vc_config snap;
  char why[200] = "";
  int rc = read_stable(copy, why, sizeof why, &snap);
  if (rc == 0) {
    if (cfg.snap_ok && snap.device_count != cfg.snap.device_count)
      vc_log(VC_LOG_WARN, "%s: device count changed %u -> %u while running", cfg.path, cfg.snap.device_count,
             snap.device_count);
    cfg.snap = snap;
    cfg.snap_ok = 1;
    cfg.corrupt_logged = 0;
    return 0;
  }
  cfg.snap_ok = 0;
  if (!cfg.corrupt_logged) {
    cfg.corrupt_logged = 1;
    vc_log(VC_LOG_ERROR, "%s: %s; refusing device memory until the file is valid again", cfg.path, why);
  }
  return rc;
}

int vc_config_snapshot(struct vc_config *out) {
  pthread_mutex_lock(&cfg.lock);
  int rc = refresh_locked();
  if (rc == 0) *out = cfg.snap;
  pthread_mutex_unlock(&cfg.lock);
  return rc;
}

uint64_t vc_config_memory_limit(int index) {
  uint64_t limit = 0;
  pthread_mutex_lock(&cfg.lock);
  if (refresh_locked() == 0 && index >= 0 && (uint32_t)index < cfg.snap.device_count)
    limit = cfg.snap.devices[index].memory_limit_bytes;
  pthread_mutex_unlock(&cfg.lock);
  return limit;
}

uint64_t vc_config_burst_limit(int index) {
  uint64_t limit = 0, burst = 0;
  vc_config_memory_limits(index, &limit, &burst);
  return burst;
}

void vc_config_memory_limits(int index, uint64_t *limit, uint64_t *burst) {
  *limit = *burst = 0;
  pthread_mutex_lock(&cfg.lock);
  if (refresh_locked() == 0 && index >= 0 && (uint32_t)index < cfg.snap.device_count) {
    *limit = cfg.snap.devices[index].memory_limit_bytes;
    *burst = cfg.snap.devices[index].memory_burst_limit_bytes;
  }
  pthread_mutex_unlock(&cfg.lock);
}

int vc_config_find_uuid(const char *uuid) {
  int found = -1;
  pthread_mutex_lock(&cfg.lock);
  if (refresh_locked() == 0) {
    for (uint32_t i = 0; i < cfg.snap.device_count; i++) {
      if (strcasecmp(cfg.snap.devices[i].uuid, uuid) == 0) {
        found = (int)i;
        break;
      }
    }
  }
  pthread_mutex_unlock(&cfg.lock);
  return found;
}

void vc_config_close(void) {
  pthread_mutex_lock(&cfg.lock);
  if (cfg.fd >= 0) close(cfg.fd);
  cfg.fd = -1;
  cfg.snap_ok = 0;
  pthread_mutex_unlock(&cfg.lock);
}
