/* The limit-file reader as plain functions: offsets pinned, CRC, every corruption refused with a
 * message naming the field, and live changes through the seqlock seen without reopening. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "config_writer.h"

static const char *const uuids[] = {"GPU-fa4e6770-0000-4000-8000-000000000000",
                                    "GPU-fa4e6770-0000-4000-8000-000000000001"};

static void test_offsets(void) {
  /* The same numbers as contract/limit-config.ts limitConfigOffsets. */
  CHECK(VC_CFG_OFF_SEQ == 24 && VC_CFG_OFF_CRC32 == 40 && VC_CFG_OFF_REGION_PATH == 176, "header offsets");
  CHECK(VC_CFG_REC_MEMORY_LIMIT == 56 && VC_CFG_REC_CORE_LIMIT == 68 && VC_CFG_REC_MODE == 52, "record offsets");
}

static void test_roundtrip(void) {
  unsigned char buf[2560];
  uint64_t limits[] = {4ull << 30, 1ull << 30};
  size_t len = build_config(buf, "/run/vcuda/region", 2, uuids, limits, 4);
  struct vc_config c;
  char err[200];
  CHECK(vc_config_parse(buf, len, &c, err, sizeof err) == 0, "parse: %s", err);
  CHECK(c.device_count == 2 && c.devices[0].memory_limit_bytes == (4ull << 30), "limits");
  CHECK(strcmp(c.region_path, "/run/vcuda/region") == 0 && c.seq == 4, "region and seq");
  CHECK(strcmp(c.devices[1].uuid, uuids[1]) == 0 && c.devices[1].core_request == 30, "record fields");
}

static void expect_rejected(unsigned char *buf, size_t len, const char *needle, const char *what) {
  struct vc_config c;
  char err[200] = "";
  int rc = vc_config_parse(buf, len, &c, err, sizeof err);
  CHECK(rc == -EINVAL && strstr(err, needle), "%s: rc %d, message \"%s\" should mention \"%s\"", what, rc, err, needle);
}

static void test_corruption(void) {
  unsigned char buf[2560];
  uint64_t limits[] = {1ull << 30};
  size_t len = build_config(buf, "/r", 1, uuids, limits, 0);
  expect_rejected(buf, 100, "shorter", "truncated header");
  expect_rejected(buf, len - 1, "expected", "truncated record");
  buf[0] = 'X';
  expect_rejected(buf, len, "magic", "bad magic");
  len = build_config(buf, "/r", 1, uuids, limits, 0);
  buf[VC_CFG_OFF_VERSION] = 2;
  expect_rejected(buf, len, "version", "future version");
  len = build_config(buf, "/r", 1, uuids, limits, 0);
  buf[VC_CONFIG_HEADER_SIZE + VC_CFG_REC_MEMORY_LIMIT] ^= 1;
  expect_rejected(buf, len, "checksum", "flipped limit bit");
  len = build_config(buf, "/r", 1, uuids, limits, 3);
  expect_rejected(buf, len, "odd seq", "write in progress");
  uint64_t zero[] = {0};
  len = build_config(buf, "/r", 1, uuids, zero, 0);
  expect_rejected(buf, len, "memory limit", "zero limit");
  len = build_config(buf, "/r", 1, uuids, limits, 0);
  set_burst_limit(buf, len, 0, 1ull << 30);
  expect_rejected(buf, len, "burst limit", "burst limit equal to the memory limit");
  set_burst_limit(buf, len, 0, 1ull << 29);
  expect_rejected(buf, len, "burst limit", "burst limit below the memory limit");
  set_burst_limit(buf, len, 0, 3ull << 30);
  struct vc_config c;
  char err[256];
  CHECK(vc_config_parse(buf, len, &c, err, sizeof err) == 0 && c.devices[0].memory_burst_limit_bytes == 3ull << 30,
        "a burst limit above the memory limit is read: %s", err);
}

/* The node agent's in-place update: seq odd, new bytes, new CRC, seq even. */
static void test_live_change(void) {
  char dir[] = "/tmp/vcuda-config-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char path[256];
  snprintf(path, sizeof path, "%s/vcuda.conf", dir);
  unsigned char buf[2560];
  uint64_t limits[] = {1ull << 30};
  size_t len = build_config(buf, "/r", 1, uuids, limits, 0);
  CHECK(write_file(path, buf, len) == 0, "write");
  char err[300];
  CHECK(vc_config_open(path, err, sizeof err) == 0, "open: %s", err);
  CHECK(vc_config_memory_limit(0) == (1ull << 30), "initial limit");
  CHECK(vc_config_find_uuid("gpu-FA4E6770-0000-4000-8000-000000000000") == 0, "uuid match is case-insensitive");
  CHECK(vc_config_find_uuid(uuids[1]) == -1, "unknown uuid");
  uint64_t bigger[] = {2ull << 30};
  len = build_config(buf, "/r", 1, uuids, bigger, 2);
  CHECK(write_file(path, buf, len) == 0, "rewrite in place"); /* same inode: the mapping sees it */
  CHECK(vc_config_memory_limit(0) == (2ull << 30), "new limit without reopening");
  buf[VC_CFG_OFF_CRC32] ^= 0xFF;
  put64(buf + VC_CFG_OFF_SEQ, 4);
  CHECK(write_file(path, buf, len) == 0, "corrupt in place");
  CHECK(vc_config_memory_limit(0) == 0, "corrupt file: fail closed with limit 0");
  vc_config_close();
  CHECK(vc_config_open("/nonexistent/vcuda.conf", err, sizeof err) == -ENOENT && strstr(err, "/nonexistent"),
        "missing file names the path: %s", err);
  unlink(path);
  rmdir(dir);
}

int main(int argc, char **argv) {
  if (argc == 2) { /* config_test FILE: print the file as the C reader sees it (cross-language test) */
    char err[300];
    if (vc_config_open(argv[1], err, sizeof err) != 0) {
      fprintf(stderr, "%s\n", err);
      return 1;
    }
    struct vc_config c;
    if (vc_config_snapshot(&c) != 0) return 1;
    printf("{\"podUid\":\"%s\",\"containerName\":\"%s\",\"regionPath\":\"%s\",\"seq\":%llu,\"devices\":[", c.pod_uid,
           c.container, c.region_path, (unsigned long long)c.seq);
    for (uint32_t i = 0; i < c.device_count; i++) {
      const struct vc_device_limit *d = &c.devices[i];
      printf("%s{\"uuid\":\"%s\",\"hostIndex\":%u,\"mode\":\"%s\",\"memoryLimitBytes\":%llu,\"coreRequest\":%u,"
             "\"coreLimit\":%u",
             i ? "," : "", d->uuid, d->host_index, d->mode ? "soft" : "hard", (unsigned long long)d->memory_limit_bytes,
             d->core_request, d->core_limit);
      if (d->memory_burst_limit_bytes)
        printf(",\"memoryBurstLimitBytes\":%llu", (unsigned long long)d->memory_burst_limit_bytes);
      printf("}");
    }
    printf("]}\n");
    return 0;
  }
  test_offsets();
  test_roundtrip();
  test_corruption();
  test_live_change();
  return check_failures ? 1 : 0;
}
