#define _GNU_SOURCE
#include "fake_env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static struct fg_env env;
static pthread_once_t once = PTHREAD_ONCE_INIT;

int fg_parse_devices(const char *spec, uint64_t *mib, int max) {
  int n = 0;
  const char *p = spec;
  while (*p) {
    char *end;
    unsigned long long a = strtoull(p, &end, 10);
    if (end == p) return -1;
    if (*end == 'x') {
      const char *q = end + 1;
      unsigned long long size = strtoull(q, &end, 10);
      if (end == q || a == 0 || size == 0) return -1;
      for (unsigned long long i = 0; i < a; i++) {
        if (n >= max) return -1;
        mib[n++] = size;
      }
    } else {
      if (a == 0 || n >= max) return -1;
      mib[n++] = a;
    }
    if (*end == ',') end++;
    else if (*end) return -1;
    p = end;
  }
  return n;
}

static uint64_t env_u64(const char *name, uint64_t fallback, uint64_t min, uint64_t max) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (*end || x < min || x > max) {
    fprintf(stderr, "fakegpu: %s=%s is not a number in %llu..%llu; using %llu\n", name, v, (unsigned long long)min,
            (unsigned long long)max, (unsigned long long)fallback);
    return fallback;
  }
  return x;
}

static void load(void) {
  const char *devices = getenv("FAKEGPU_DEVICES");
  env.device_count = fg_parse_devices(devices && *devices ? devices : "1x81559", env.memory_mib, FG_MAX_DEVICES);
  if (env.device_count < 0) {
    fprintf(stderr, "fakegpu: FAKEGPU_DEVICES=%s is not COUNTxMiB or a list of MiB; using 1x81559\n", devices);
    env.device_count = 1;
    env.memory_mib[0] = 81559;
  }
  env.sms = (uint32_t)env_u64("FAKEGPU_SMS", 132, 1, 100000);
  env.wave_ns = env_u64("FAKEGPU_KERNEL_US", 10, 0, 3600000000ull) * 1000u;
  env.sample_ns = env_u64("FAKEGPU_SAMPLE_MS", 100, 1, 60000) * 1000000u;
  env.util_window_ns = env_u64("FAKEGPU_UTIL_WINDOW_MS", 1000, 1, 600000) * 1000000u;
  env.nvml_sample_ns = env_u64("FAKEGPU_NVML_SAMPLE_MS", 167, 1, 60000) * 1000000u;
  env.nvml_delay_ns = env_u64("FAKEGPU_NVML_DELAY_MS", 100, 0, 60000) * 1000000u;
  const char *stamp = getenv("FAKEGPU_NVML_STAMP");
  env.nvml_stamp_published = stamp && strcmp(stamp, "published") == 0;
  if (stamp && *stamp && !env.nvml_stamp_published && strcmp(stamp, "end") != 0)
    fprintf(stderr, "fakegpu: FAKEGPU_NVML_STAMP=%s is not \"end\" or \"published\"; using end\n", stamp);
  env.nvml_util_info = (int)env_u64("FAKEGPU_NVML_UTIL_INFO", 1, 0, 1);
  env.nvml_process_util = (int)env_u64("FAKEGPU_NVML_PROCESS_UTIL", 1, 0, 1);
  env.nvml_one_process = (int)env_u64("FAKEGPU_NVML_ONE_PROCESS", 0, 0, 1);
  const char *mig = getenv("FAKEGPU_MIG");
  snprintf(env.mig, sizeof env.mig, "%s", mig ? mig : "");
  env.context_bytes = env_u64("FAKEGPU_CONTEXT_MIB", 0, 0, 1u << 20) << 20;
  env.uvm_ns_per_mib = env_u64("FAKEGPU_UVM_NS_PER_MIB", 40000, 0, 1000000000ull);
  env.concurrent_managed = (int)env_u64("FAKEGPU_CONCURRENT_MANAGED", 1, 0, 1);
  env.uuid_seed = (uint32_t)env_u64("FAKEGPU_UUID_SEED", 0, 0, 0xFFFFFFFFu);
  env.nvlink = (int)env_u64("FAKEGPU_NVLINK", env.device_count > 1, 0, 1);
  const char *name = getenv("FAKEGPU_NAME");
  snprintf(env.name, sizeof env.name, "%s", name && *name ? name : "NVIDIA H100 80GB HBM3");
  const char *visible = getenv("FAKEGPU_VISIBLE_DEVICES");
  snprintf(env.visible, sizeof env.visible, "%s", visible ? visible : "");
  const char *state = getenv("FAKEGPU_STATE");
  if (state && *state) snprintf(env.state_path, sizeof env.state_path, "%s", state);
  else snprintf(env.state_path, sizeof env.state_path, "/tmp/fakegpu-%u.state", (unsigned)getuid());
}

const struct fg_env *fg_env(void) {
  pthread_once(&once, load);
  return &env;
}

static void uuid_of(uint32_t seed, int index, unsigned char b[16]) {
  const unsigned char fixed[16] = {0xfa, 0x4e, 0x67, 0x70, 0x00, 0x00, 0x40, 0x00, 0x80, 0x00};
  memcpy(b, fixed, 16);
  b[10] = (unsigned char)(seed >> 24);
  b[11] = (unsigned char)(seed >> 16);
  b[12] = (unsigned char)(seed >> 8);
  b[13] = (unsigned char)seed;
  b[14] = (unsigned char)(index >> 8);
  b[15] = (unsigned char)index;
}

void fg_uuid_text_of(uint32_t seed, int index, char out[48]) {
  unsigned char b[16];
  uuid_of(seed, index, b);
  snprintf(out, 48, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
           b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

void fg_device_uuid(int index, unsigned char b[16]) { uuid_of(fg_env()->uuid_seed, index, b); }

void fg_device_uuid_text(int index, char out[48]) { fg_uuid_text_of(fg_env()->uuid_seed, index, out); }

unsigned int fg_device_pci_bus(int index) { return 0x19u + 0x0Cu * (unsigned int)index; }

/* One entry of the visible list: a decimal node index, a device UUID (case-insensitive), or what
 * `lookup` finds for it (a MIG device). */
static int visible_entry(const char *entry, int node_count, uint32_t seed, fg_visible_lookup lookup, void *ctx) {
  char *end;
  unsigned long i = strtoul(entry, &end, 10);
  if (end != entry && !*end) return i < (unsigned long)node_count ? (int)i : -1;
  for (int d = 0; d < node_count; d++) {
    char text[48];
    fg_uuid_text_of(seed, d, text);
    if (strcasecmp(text, entry) == 0) return d;
  }
  return lookup ? lookup(entry, ctx) : -1;
}

int fg_parse_visible(const char *spec, int node_count, uint32_t seed, int *nodes, int max, char *err, size_t errlen) {
  return fg_parse_visible_with(spec, node_count, seed, NULL, NULL, nodes, max, err, errlen);
}

int fg_parse_visible_with(const char *spec, int node_count, uint32_t seed, fg_visible_lookup lookup, void *ctx,
                          int *nodes, int max, char *err, size_t errlen) {
  if (!spec || !*spec || strcmp(spec, "all") == 0) {
    int n = node_count < max ? node_count : max;
    for (int i = 0; i < n; i++) nodes[i] = i;
    return n;
  }
  if (strcmp(spec, "none") == 0 || strcmp(spec, "void") == 0) return 0;
  int n = 0;
  for (const char *p = spec; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *next = comma ? comma + 1 : p + len;
    while (len > 0 && *p == ' ') p++, len--; /* "GPU-a, GPU-b" as people write it */
    while (len > 0 && p[len - 1] == ' ') len--;
    char entry[64];
    if (len == 0 || len >= sizeof entry) {
      snprintf(err, errlen, "entry %d is empty or too long", n + 1);
      return -1;
    }
    memcpy(entry, p, len);
    entry[len] = '\0';
    int d = visible_entry(entry, node_count, seed, lookup, ctx);
    if (d < 0) {
      snprintf(err, errlen, "\"%s\" names no device of this node (%d devices)", entry, node_count);
      return -1;
    }
    for (int k = 0; k < n; k++)
      if (nodes[k] == d) {
        snprintf(err, errlen, "\"%s\" names device %d twice", entry, d);
        return -1;
      }
    if (n >= max) {
      snprintf(err, errlen, "more than %d entries", max);
      return -1;
    }
    nodes[n++] = d;
    p = next;
    if (comma && !*p) {
      snprintf(err, errlen, "trailing comma");
      return -1;
    }
  }
  return n;
}
