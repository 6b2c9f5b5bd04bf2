/* The fake driver's contract, which the compute limiter and the node agent build on: launch
 * timeline (waves from grid and SMs, serialization across processes, bounded stream queue,
 * events and graphs), NVML utilization sampled as NVML does (own interval, whole percent rounded
 * down, published late), per-process samples honouring lastSeenTimeStamp, process lists with memory, dead-process reclaim, Xid injection, identity and
 * topology, and cuGetProcAddress variant selection. Assertions are on simulated time (event
 * timestamps), not on how long the test took. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fakegpu.h"
#include "vc_cuda.h"
#include "vc_nvml.h"

#define MS 1000000ull

static CUmodule mod;

static CUfunction kernel(const char *name, uint64_t wave_ns) {
  CUfunction f;
  CHECK(cuModuleGetFunction(&f, mod, name) == CUDA_SUCCESS, "function %s", name);
  if (wave_ns) fakegpu_set_function_cost_ns(f, wave_ns);
  return f;
}

static float elapsed(CUevent a, CUevent b) {
  float ms = -1;
  CHECK(cuEventSynchronize(b) == CUDA_SUCCESS, "event sync");
  CHECK(cuEventElapsedTime_v2(&ms, a, b) == CUDA_SUCCESS, "elapsed");
  return ms;
}

static void test_waves_and_events(void) {
  CUfunction f = kernel("k", 1 * MS);
  CUevent a, b;
  cuEventCreate(&a, 0);
  cuEventCreate(&b, 0);
  cuEventRecord(a, NULL);
  CHECK(cuLaunchKernel(f, 16, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS, "16 blocks on 16 SMs: 1 wave");
  CHECK(cuLaunchKernel(f, 17, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) == CUDA_SUCCESS, "17 blocks: 2 waves");
  cuEventRecord(b, NULL);
  CHECK(cuEventQuery(b) == CUDA_ERROR_NOT_READY, "launch is asynchronous");
  float ms = elapsed(a, b);
  CHECK(ms >= 3.0f && ms < 3.5f, "1 + 2 waves of 1 ms = 3 ms of device time, got %.3f", ms);
  CUfunction g = kernel("named_us250", 0);
  cuEventRecord(a, NULL);
  cuLaunchKernel(g, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
  cuEventRecord(b, NULL);
  ms = elapsed(a, b);
  CHECK(ms >= 0.25f && ms < 0.6f, "a function named _us250 costs 250 us per wave, got %.3f", ms);
  CHECK(cuFuncSetAttribute(g, (CUfunction_attribute)FAKEGPU_FUNC_ATTRIBUTE_WAVE_US, 2000) == CUDA_SUCCESS, "attr");
  cuEventRecord(a, NULL);
  cuLaunchKernel(g, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
  cuEventRecord(b, NULL);
  ms = elapsed(a, b);
  CHECK(ms >= 2.0f && ms < 2.5f, "the fake attribute sets 2000 us per wave, got %.3f", ms);
}

/* On device 1, so its 20 s of queued work does not delay the other tests. */
static void test_bounded_queue(void) {
  CUcontext c1;
  CHECK(cuCtxCreate_v2(&c1, 0, 1) == CUDA_SUCCESS, "context on device 1");
  CUfunction f = kernel("q", 20 * MS);
  CUstream s;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS, "stream");
  CUevent first;
  cuEventCreate(&first, 0);
  cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  cuEventRecord(first, s);
  for (int i = 0; i < 1023; i++) cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  CHECK(cuEventQuery(first) == CUDA_ERROR_NOT_READY, "1024 kernels queued without waiting");
  cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  /* The 1025th launch had to wait for the first kernel (20 ms) to leave the queue. */
  CHECK(cuEventQuery(first) == CUDA_SUCCESS, "the 1025th launch blocked until a slot was free");
  CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "the rest is still queued");
  cuStreamDestroy_v2(s);
  CUcontext popped;
  cuCtxPopCurrent_v2(&popped);
  CHECK(popped == c1, "back on device 0");
}

static void test_graphs(void) {
  CUfunction f = kernel("g", 1 * MS);
  CUstream s;
  cuStreamCreate(&s, 0);
  CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "begin capture");
  cuLaunchKernel(f, 16, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  cuLaunchKernel(f, 32, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
  CUgraph graph;
  CHECK(cuStreamEndCapture(s, &graph) == CUDA_SUCCESS, "end capture");
  CHECK(cuStreamQuery(s) == CUDA_SUCCESS, "captured launches did not run");
  CUgraphExec exec;
  CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS, "instantiate");
  CUevent a, b;
  cuEventCreate(&a, 0);
  cuEventCreate(&b, 0);
  cuEventRecord(a, s);
  CHECK(cuGraphLaunch(exec, s) == CUDA_SUCCESS, "graph launch");
  cuEventRecord(b, s);
  float ms = elapsed(a, b);
  CHECK(ms >= 3.0f && ms < 3.5f, "graph = recorded cost 1 + 2 waves = 3 ms, got %.3f", ms);
}

/* Another process's kernel delays ours: the device timeline is host-wide. */
static void test_serialization_across_processes(void) {
  int go[2];
  CHECK(pipe(go) == 0, "pipe");
  pid_t child = fork();
  if (child == 0) {
    CUcontext c;
    cuDevicePrimaryCtxRetain(&c, 0);
    cuCtxSetCurrent(c);
    CUfunction f = kernel("other", 300 * MS);
    cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    char x = 1;
    if (write(go[1], &x, 1) != 1) _exit(2);
    cuCtxSynchronize();
    _exit(0);
  }
  char x;
  CHECK(read(go[0], &x, 1) == 1, "child launched");
  CUfunction f = kernel("mine", 10 * MS);
  CUevent a, b, c;
  cuEventCreate(&a, 0);
  cuEventCreate(&b, 0);
  cuEventCreate(&c, 0x2 /* CU_EVENT_DISABLE_TIMING */);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  cuEventRecord(a, NULL);
  cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
  cuEventRecord(b, NULL);
  cuEventRecord(c, NULL);
  float ms = elapsed(a, b);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double waited = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  /* Robust to this process being descheduled for up to ~200 ms after the child launched. */
  CHECK(waited >= 110.0, "our 10 ms kernel waited for the other process's 300 ms kernel: %.1f ms", waited);
  /* Events are items of the same timeline: the start event is reached when the other kernel is
   * done, so the pair times our kernel's execution, not its wait. */
  CHECK(ms >= 9.9f && ms < 10.5f, "events around our kernel time its execution: %.2f ms", ms);
  float none = 0;
  CHECK(cuEventElapsedTime(&none, a, c) == CUDA_ERROR_INVALID_HANDLE, "an event without timing has no time");
  waitpid(child, NULL, 0);
  close(go[0]);
  close(go[1]);
}

static unsigned long long realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000u;
}

/* This process's samples newer than `since`: their summed busy time (smUtil x interval) and the
 * newest and oldest timestamps; returns how many there were. Every sample is checked to be a
 * percentage stamped on NVML's interval grid. */
static int own_samples(nvmlDevice_t d, unsigned long long since, uint64_t interval_us, uint64_t *busy_us,
                       unsigned long long *newest, unsigned long long *oldest) {
  nvmlProcessUtilizationSample_t samples[256];
  unsigned int n = 256;
  nvmlReturn_t rc = nvmlDeviceGetProcessUtilization(d, samples, &n, since);
  CHECK(rc == NVML_SUCCESS || (rc == NVML_ERROR_NOT_FOUND && n == 0), "samples newer than %llu: rc %d", since, rc);
  int mine = 0;
  *busy_us = 0;
  *newest = since;
  *oldest = ~0ull;
  for (unsigned int i = 0; rc == NVML_SUCCESS && i < n; i++) {
    CHECK(samples[i].timeStamp > since, "only samples newer than lastSeenTimeStamp");
    CHECK(samples[i].smUtil <= 100, "smUtil is a percentage");
    if (samples[i].pid != (unsigned int)getpid()) continue;
    mine++;
    *busy_us += samples[i].smUtil * interval_us / 100;
    if (samples[i].timeStamp > *newest) *newest = samples[i].timeStamp;
    if (samples[i].timeStamp < *oldest) *oldest = samples[i].timeStamp;
  }
  for (unsigned int i = 0; mine && rc == NVML_SUCCESS && i < n; i++) {
    unsigned long long off = (samples[i].timeStamp - *oldest) % interval_us;
    CHECK(off <= 1 || off >= interval_us - 1, "timestamps are %llu µs apart", (unsigned long long)interval_us);
  }
  return mine;
}

static void test_nvml_utilization(nvmlDevice_t d) {
  /* FAKEGPU_NVML_SAMPLE_MS=50, FAKEGPU_NVML_DELAY_MS=300, window 500 ms (10 intervals). One
   * 1-block kernel of 130 ms on a 16-SM card: NVML counts time, not SMs, so it is busy time. */
  const uint64_t interval_us = 50000, delay_us = 300000, kernel_us = 130000;
  cuCtxSynchronize();
  struct timespec ts = {0, 900 * 1000000L};
  nanosleep(&ts, NULL); /* earlier tests' busy time is published and leaves the window */
  nvmlUtilization_t u;
  CHECK(nvmlDeviceGetUtilizationRates(d, &u) == NVML_SUCCESS && u.gpu == 0, "idle window: 0%%, got %u", u.gpu);
  uint64_t busy = 0;
  unsigned long long last = 0, newest = 0, oldest = 0;
  own_samples(d, 0, interval_us, &busy, &last, &oldest);

  unsigned long long launched = realtime_us();
  CUfunction f = kernel("util", kernel_us * 1000);
  cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
  cuCtxSynchronize();
  /* Late: nothing of it is published until 300 ms after the interval it ended in (robust to this
   * process being descheduled for up to 170 ms here). */
  CHECK(own_samples(d, last, interval_us, &busy, &newest, &oldest) == 0, "no sample yet right after the kernel");
  ts.tv_nsec = (long)(interval_us + delay_us + 50000) * 1000L;
  nanosleep(&ts, NULL);
  int n = own_samples(d, last, interval_us, &busy, &newest, &oldest);
  CHECK(n >= 3 && n <= 4, "a 130 ms kernel spans 3 or 4 intervals of 50 ms, got %d samples", n);
  /* Whole percent rounded down: never more than ran, less by under 1 % of an interval each. */
  CHECK(busy <= kernel_us && busy + (uint64_t)n * interval_us / 100 >= kernel_us,
        "samples add up to the kernel, rounded down: %llu µs of %llu", (unsigned long long)busy,
        (unsigned long long)kernel_us);
  /* Stamped with the end of the interval it describes, which was published 300 ms later. */
  CHECK(newest >= launched + kernel_us && newest + delay_us <= realtime_us(),
        "newest stamp %llu is its interval's end (launch %llu)", newest, launched);
  CHECK(nvmlDeviceGetUtilizationRates(d, &u) == NVML_SUCCESS, "utilization");
  CHECK(u.gpu >= 25 && u.gpu <= 26, "130 ms busy in a 500 ms window = 26%%, got %u", u.gpu);

  unsigned int count = 0;
  CHECK(nvmlDeviceGetProcessUtilization(d, NULL, &count, 0) == NVML_ERROR_INSUFFICIENT_SIZE && count > 0,
        "sizing call");
  nvmlProcessUtilizationSample_t samples[256];
  count = 256;
  CHECK(nvmlDeviceGetProcessUtilization(d, samples, &count, newest) == NVML_ERROR_NOT_FOUND && count == 0,
        "nothing newer than lastSeenTimeStamp");
}

static void test_processes_and_reclaim(nvmlDevice_t d) {
  CUdeviceptr p;
  CHECK(cuMemAlloc_v2(&p, 8 * MS) == CUDA_SUCCESS, "alloc");
  nvmlProcessInfo_t infos[16];
  unsigned int n = 16;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, infos) == NVML_SUCCESS, "list");
  int found = 0;
  for (unsigned int i = 0; i < n; i++)
    if (infos[i].pid == (unsigned int)getpid() && infos[i].usedGpuMemory >= 8 * MS) found = 1;
  CHECK(found, "own process listed with its memory");
  n = 0;
  CHECK(nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL) == NVML_ERROR_INSUFFICIENT_SIZE && n >= 1,
        "count protocol");
  cuMemFree_v2(p);

  uint64_t before = fakegpu_device_used_bytes(1);
  int ready[2];
  CHECK(pipe(ready) == 0, "pipe");
  pid_t child = fork();
  if (child == 0) {
    CUcontext c;
    CUdeviceptr q;
    cuDevicePrimaryCtxRetain(&c, 1);
    cuCtxSetCurrent(c);
    if (cuMemAlloc_v2(&q, 64 * MS) != CUDA_SUCCESS) _exit(2);
    char x = 1;
    if (write(ready[1], &x, 1) != 1) _exit(2);
    pause();
    _exit(0);
  }
  char x;
  CHECK(read(ready[0], &x, 1) == 1, "child allocated");
  CHECK(fakegpu_device_used_bytes(1) == before + 64 * MS, "other process's memory visible host-wide");
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  nvmlDevice_t d1;
  nvmlDeviceGetHandleByIndex_v2(1, &d1);
  nvmlMemory_t m;
  CHECK(nvmlDeviceGetMemoryInfo(d1, &m) == NVML_SUCCESS && m.used == before, "a killed process's memory is freed");
}

static void test_xid(nvmlDevice_t d) {
  nvmlEventSet_t set;
  CHECK(nvmlEventSetCreate(&set) == NVML_SUCCESS, "event set");
  CHECK(nvmlDeviceRegisterEvents(d, VC_NVML_EVENT_XID, set) == NVML_SUCCESS, "register");
  nvmlEventData_t e;
  CHECK(nvmlEventSetWait_v2(set, &e, 10) == NVML_ERROR_TIMEOUT, "no event yet");
  CHECK(fakegpu_inject_xid(0, 79) == 0, "inject");
  CHECK(nvmlEventSetWait_v2(set, &e, 1000) == NVML_SUCCESS && e.eventType == VC_NVML_EVENT_XID && e.eventData == 79 &&
            e.device == d,
        "Xid 79 delivered");
  CHECK(fakegpu_inject_xid(7, 79) == -1, "device out of range refused");
  nvmlEventSetFree(set);
}

static void test_identity(void) {
  nvmlDevice_t d0, d1;
  nvmlDeviceGetHandleByIndex_v2(0, &d0);
  nvmlDeviceGetHandleByIndex_v2(1, &d1);
  char uuid[96];
  CHECK(nvmlDeviceGetUUID(d1, uuid, sizeof uuid) == NVML_SUCCESS &&
            strcmp(uuid, "GPU-fa4e6770-0000-4000-8000-000000000001") == 0,
        "deterministic UUID %s", uuid);
  CUuuid cu;
  char text[48];
  cuDeviceGetUuid_v2(&cu, 1);
  snprintf(text, sizeof text, "GPU-%02x%02x%02x%02x-", (unsigned char)cu.bytes[0], (unsigned char)cu.bytes[1],
           (unsigned char)cu.bytes[2], (unsigned char)cu.bytes[3]);
  CHECK(strncmp(text, uuid, 13) == 0, "CUDA and NVML agree on the UUID");
  nvmlPciInfo_t pci;
  CHECK(nvmlDeviceGetPciInfo_v3(d1, &pci) == NVML_SUCCESS && strcmp(pci.busId, "00000000:25:00.0") == 0, "PCI %s",
        pci.busId);
  nvmlGpuTopologyLevel_t level;
  CHECK(nvmlDeviceGetTopologyCommonAncestor(d0, d1, &level) == NVML_SUCCESS && level == NVML_TOPOLOGY_SINGLE,
        "0 and 1 share a switch");
  nvmlEnableState_t on;
  CHECK(nvmlDeviceGetNvLinkState(d0, 0, &on) == NVML_SUCCESS && on == NVML_FEATURE_ENABLED, "NVLink up");
  CHECK(nvmlDeviceGetNvLinkState(d0, VC_NVML_NVLINK_MAX_LINKS, &on) == NVML_ERROR_INVALID_ARGUMENT, "end of links");
  int sms = 0;
  CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == CUDA_SUCCESS && sms == 16,
        "FAKEGPU_SMS");
}

static void test_proc_address(void) {
  void *fn;
  CUdriverProcAddressQueryResult st;
  CHECK(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, &st) == CUDA_SUCCESS && fn == (void *)&cuMemAlloc_v2,
        "cuMemAlloc@3020 -> _v2");
  CHECK(cuGetProcAddress_v2("cuLaunchKernel", &fn, 7000, 2, &st) == CUDA_SUCCESS && fn == (void *)&cuLaunchKernel_ptsz,
        "per-thread -> _ptsz");
  CHECK(cuGetProcAddress_v2("cuLaunchKernel", &fn, 4000, 2, &st) == CUDA_SUCCESS && fn == (void *)&cuLaunchKernel,
        "_ptsz needs 7000");
  CHECK(cuGetProcAddress_v2("cuCtxGetDevice", &fn, 13000, 0, &st) == CUDA_SUCCESS && fn == (void *)&cuCtxGetDevice_v2,
        "13.0 variant");
}

int main(void) {
  setenv("FAKEGPU_DEVICES", "2x1024", 1);
  setenv("FAKEGPU_SMS", "16", 1);
  setenv("FAKEGPU_SAMPLE_MS", "10", 1);
  setenv("FAKEGPU_UTIL_WINDOW_MS", "500", 1);
  setenv("FAKEGPU_NVML_SAMPLE_MS", "50", 1);
  setenv("FAKEGPU_NVML_DELAY_MS", "300", 1);
  char state[] = "/tmp/fakegpu-test-XXXXXX";
  int fd = mkstemp(state);
  if (fd < 0) return 1;
  close(fd);
  unlink(state); /* a fresh state file, created by the driver */
  setenv("FAKEGPU_STATE", state, 1);
  CUcontext ctx;
  CHECK(cuInit(0) == CUDA_SUCCESS, "cuInit");
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS, "context");
  CHECK(cuModuleLoadData(&mod, "fake module") == CUDA_SUCCESS, "module");
  CHECK(nvmlInit_v2() == NVML_SUCCESS, "nvmlInit");
  nvmlDevice_t d;
  nvmlDeviceGetHandleByIndex_v2(0, &d);
  test_waves_and_events();
  test_bounded_queue();
  test_graphs();
  test_serialization_across_processes();
  test_nvml_utilization(d);
  test_processes_and_reclaim(d);
  test_xid(d);
  test_identity();
  test_proc_address();
  unlink(state);
  return check_failures ? 1 : 0;
}
