/* A two-card NVML stand-in with fixed answers, compiled by nvml-gpu-source.test.ts to check the
 * koffi bindings' signatures, struct layouts (PROTOCOLS.md §5.5) and the async event wait. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct { int index; } dev_t_;
static dev_t_ devs[2] = {{0}, {1}};
static int events_left = 1;

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) { return rc == 6 ? "Not Found" : "Stub Error"; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) {
  if (i > 1) return 2;
  *h = &devs[i];
  return 0;
}
static int idx(void *h) { return ((dev_t_ *)h)->index; }
int nvmlDeviceGetUUID(void *h, char *buf, unsigned len) {
  snprintf(buf, len, "GPU-0000000%d-1111-2222-3333-444444444444", idx(h));
  return 0;
}
int nvmlDeviceGetName(void *h, char *buf, unsigned len) { (void)h; snprintf(buf, len, "Stub H100"); return 0; }
int nvmlDeviceGetMinorNumber(void *h, unsigned *m) { *m = 4 + idx(h); return 0; }
int nvmlDeviceGetArchitecture(void *h, unsigned *arch) { (void)h; *arch = 9; return 0; } /* Hopper */
int nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) { (void)h; *major = 9; *minor = 0; return 0; }
int nvmlSystemGetDriverVersion(char *buf, unsigned len) { snprintf(buf, len, "570.86.15"); return 0; }
int nvmlDeviceGetPciInfo_v3(void *h, unsigned char *info) {
  memset(info, 0, 68);
  snprintf((char *)info + 36, 32, "00000000:%02X:00.0", 0x3B + idx(h));
  return 0;
}
int nvmlDeviceGetMemoryInfo(void *h, uint64_t *m) {
  m[0] = 85520809984ULL; m[1] = 85520809984ULL - 1024 * (uint64_t)(idx(h) + 1); m[2] = 1024 * (uint64_t)(idx(h) + 1);
  return 0;
}
int nvmlDeviceGetUtilizationRates(void *h, unsigned *u) { u[0] = 40 + idx(h); u[1] = 7; return 0; }
struct sample { unsigned pid; unsigned long long ts; unsigned sm, mem, enc, dec; };
int nvmlDeviceGetProcessUtilization(void *h, struct sample *s, unsigned *count, unsigned long long since) {
  (void)h;
  if (since == 500) {
    /* Periods ended between the size query and the read: the query said 1, the read needs 40. */
    if (!s) { *count = 1; return 7; }
    if (*count < 40) { *count = 40; return 7; }
    for (unsigned i = 0; i < 40; i++) s[i] = (struct sample){300 + i, 600 + i, 1, 0, 0, 0};
    *count = 40;
    return 0;
  }
  if (since >= 2000) return 6;
  if (!s || *count < 2) { *count = 2; return 7; }
  s[0] = (struct sample){101, 1000, 30, 5, 0, 0};
  s[1] = (struct sample){202, 2000, 45, 6, 0, 0};
  *count = 2;
  return 0;
}
int nvmlDeviceGetTopologyCommonAncestor(void *a, void *b, int *level) { (void)a; (void)b; *level = 20; return 0; }
int nvmlDeviceGetNvLinkState(void *h, unsigned link, int *state) {
  (void)h;
  if (link >= 4) return 2;
  *state = link < 3;
  return 0;
}
int nvmlEventSetCreate(void **set) { static int s; *set = &s; return 0; }
int nvmlDeviceGetSupportedEventTypes(void *h, unsigned long long *mask) { (void)h; *mask = 0x8 | 0x4; return 0; }
int nvmlDeviceRegisterEvents(void *h, unsigned long long types, void *set) { (void)h; (void)types; (void)set; return 0; }
struct event { void *device; unsigned long long type, data; unsigned gi, ci; };
int nvmlEventSetWait_v2(void *set, struct event *e, unsigned timeout_ms) {
  (void)set;
  if (events_left > 0) {
    events_left--;
    *e = (struct event){&devs[1], 0x8, 79, 0xFFFFFFFFu, 0xFFFFFFFFu};
    return 0;
  }
  struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return 10;
}
int nvmlEventSetFree(void *set) { (void)set; return 0; }
/* Card 0: pid 101 holds 512 MiB, pid 202 memory NVML cannot attribute; card 1: nothing. The first
 * call with room for fewer rows than exist answers INSUFFICIENT_SIZE, like the driver. */
struct process_info { unsigned pid; unsigned long long used; unsigned gi, ci; };
int nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned *count, struct process_info *out) {
  unsigned n = idx(h) == 0 ? 2 : 0;
  if (*count < n || (n && !out)) { *count = n; return 7; }
  if (n) {
    out[0] = (struct process_info){101, 512ull << 20, 0xFFFFFFFFu, 0xFFFFFFFFu};
    out[1] = (struct process_info){202, ~0ull, 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  *count = n;
  return 0;
}
