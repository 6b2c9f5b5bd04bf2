/* Writes limit files in the native format for the C tests (the TypeScript writer is checked
 * against the same reader by native/test/native.test.ts). */
#ifndef VCUDA_TEST_CONFIG_WRITER_H
#define VCUDA_TEST_CONFIG_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Builds an image for `n` devices; returns its length. */
static inline size_t build_config(unsigned char *buf, const char *region, int n, const char *const *uuids,
                           const uint64_t *limits, uint64_t seq) {
  size_t len = VC_CONFIG_HEADER_SIZE + (size_t)n * VC_CONFIG_RECORD_SIZE;
  memset(buf, 0, len);
  memcpy(buf, VC_CONFIG_MAGIC, 8);
  put32(buf + VC_CFG_OFF_VERSION, VC_CONFIG_VERSION);
  put32(buf + VC_CFG_OFF_HEADER_SIZE, VC_CONFIG_HEADER_SIZE);
  put32(buf + VC_CFG_OFF_DEVICE_COUNT, (uint32_t)n);
  put32(buf + VC_CFG_OFF_RECORD_SIZE, VC_CONFIG_RECORD_SIZE);
  put64(buf + VC_CFG_OFF_WRITTEN_AT_MS, 1700000000000ull);
  snprintf((char *)buf + VC_CFG_OFF_POD_UID, 64, "pod-1");
  snprintf((char *)buf + VC_CFG_OFF_CONTAINER, 64, "main");
  snprintf((char *)buf + VC_CFG_OFF_REGION_PATH, 256, "%s", region);
  for (int i = 0; i < n; i++) {
    unsigned char *r = buf + VC_CONFIG_HEADER_SIZE + (size_t)i * VC_CONFIG_RECORD_SIZE;
    snprintf((char *)r + VC_CFG_REC_UUID, 48, "%s", uuids[i]);
    put32(r + VC_CFG_REC_HOST_INDEX, (uint32_t)i);
    put32(r + VC_CFG_REC_MODE, 0);
    put64(r + VC_CFG_REC_MEMORY_LIMIT, limits[i]);
    put32(r + VC_CFG_REC_CORE_REQUEST, 30);
    put32(r + VC_CFG_REC_CORE_LIMIT, 30);
  }
  put32(buf + VC_CFG_OFF_CRC32, vc_config_checksum(buf, len));
  put64(buf + VC_CFG_OFF_SEQ, seq);
  return len;
}

/* Sets record `i`'s burst ceiling in an image build_config made, and seals it again. */
static inline void set_burst_limit(unsigned char *buf, size_t len, int i, uint64_t burst) {
  unsigned char *r = buf + VC_CONFIG_HEADER_SIZE + (size_t)i * VC_CONFIG_RECORD_SIZE;
  unsigned char seq[8];
  memcpy(seq, buf + VC_CFG_OFF_SEQ, 8);
  put64(r + VC_CFG_REC_MEMORY_BURST_LIMIT, burst);
  put64(buf + VC_CFG_OFF_SEQ, 0);
  put32(buf + VC_CFG_OFF_CRC32, 0);
  put32(buf + VC_CFG_OFF_CRC32, vc_config_checksum(buf, len));
  memcpy(buf + VC_CFG_OFF_SEQ, seq, 8);
}

static int write_file(const char *path, const unsigned char *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(buf, 1, len, f);
  return fclose(f) == 0 && w == len ? 0 : -1;
}

#endif
