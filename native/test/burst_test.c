/* Memory bursts end to end: containers (one limit file and region each) share one fake card, and
 * burst_client runs their programs under LD_PRELOAD=libvcuda.so. What must not break: a guaranteed
 * allocation always succeeds, however much a neighbour burst (its pages are evicted, it keeps
 * running); the card never holds more than it has; the burst ceiling is exact; every path the
 * driver cannot evict stays within the guarantee; every way memory goes away returns burst bytes
 * to the burst budget. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "config_writer.h"
#include "preload_env.h"
#include "region.h"

#define MiB (1ull << 20)
#define MAX_ARGS 64

static char build[512], dir[64], client[600];
static const char *const uuid0[] = {"GPU-fa4e6770-0000-4000-8000-000000000000"};

struct container {
  char conf[256];
  char region[256];
};

/* A container of `memory` MiB guaranteed, bursting to `limit` MiB (0: no burst). */
static void make_container(struct container *c, const char *name, uint64_t memory, uint64_t limit) {
  snprintf(c->conf, sizeof c->conf, "%s/%s.conf", dir, name);
  snprintf(c->region, sizeof c->region, "%s/%s.region", dir, name);
  unlink(c->region);
  unsigned char buf[1024];
  uint64_t limits[] = {memory * MiB};
  size_t len = build_config(buf, c->region, 1, uuid0, limits, 0);
  if (limit) set_burst_limit(buf, len, 0, limit * MiB);
  CHECK(write_file(c->conf, buf, len) == 0, "write %s", c->conf);
}

struct proc {
  pid_t pid;
  int in, out; /* its stdin (we write), its stdout (we read) */
};

static struct proc start(const struct container *c, const char *ops) {
  int to[2], from[2];
  struct proc p = {-1, -1, -1};
  if (pipe(to) != 0 || pipe(from) != 0) return p;
  char copy[2048];
  snprintf(copy, sizeof copy, "%s", ops);
  char *argv[MAX_ARGS] = {client};
  int n = 1;
  for (char *t = strtok(copy, " "); t && n < MAX_ARGS - 1; t = strtok(NULL, " ")) argv[n++] = t;
  argv[n] = NULL;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(to[0], 0);
    dup2(from[1], 1);
    close(to[1]);
    close(from[0]);
    setenv("VCUDA_CONFIG", c->conf, 1);
    execv(client, argv);
    _exit(127);
  }
  close(to[0]);
  close(from[1]);
  p.in = to[1];
  p.out = from[0];
  return p;
}

/* Waits for the client's "ready" line: 0, or -1 when it exited instead. */
static int ready(struct proc *p) {
  char line[16] = {0};
  size_t n = 0;
  while (n < sizeof line - 1 && read(p->out, line + n, 1) == 1 && line[n] != '\n') n++;
  return strncmp(line, "ready", 5) == 0 ? 0 : -1;
}

static void go_on(struct proc *p) { CHECK(write(p->in, "\n", 1) == 1, "resume client"); }

static int finish(struct proc *p) {
  close(p->in);
  int status = 0;
  if (waitpid(p->pid, &status, 0) != p->pid) return -1;
  close(p->out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int run(const struct container *c, const char *ops) {
  struct proc p = start(c, ops);
  return p.pid < 0 ? -1 : finish(&p);
}

/* The region's device block 0 as the node agent reads it, without the lock. */
struct block_view {
  uint64_t guaranteed, burst, evicted, evictions;
};
static struct block_view region_block(const struct container *c) {
  struct block_view v = {0, 0, 0, 0};
  int fd = open(c->region, O_RDONLY);
  if (fd < 0) return v;
  unsigned char *m = mmap(NULL, VC_REGION_HEADER_SIZE + VC_REGION_DEVICE_BLOCK_SIZE, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return v;
  const struct vc_device_block *b = (const struct vc_device_block *)(m + VC_REGION_HEADER_SIZE);
  v = (struct block_view){b->used_bytes, b->burst_bytes, b->burst_evicted_bytes, b->burst_evictions};
  munmap(m, VC_REGION_HEADER_SIZE + VC_REGION_DEVICE_BLOCK_SIZE);
  return v;
}

static void use_card(const char *name, const char *mib) {
  char v[600];
  snprintf(v, sizeof v, "%s/%s.fakegpu", dir, name);
  unlink(v);
  setenv("FAKEGPU_STATE", v, 1);
  setenv("FAKEGPU_DEVICES", mib, 1);
}

/* The "done when": 1 GiB guaranteed bursting to 2 GiB allocates 1.5 GiB with cuMemAlloc,
 * is refused past 2 GiB, reports the guarantee; a 1 GiB neighbour on the same 2 GiB card always
 * gets its full 1 GiB while the first holds 1.5 GiB, by evicting it; the first keeps running. */
static void done_when(void) {
  use_card("done", "1x2048");
  struct container first, second;
  make_container(&first, "first", 1024, 2048);
  make_container(&second, "second", 1024, 0);
  /* A single 1.5 GiB allocation is a burst as a whole: the guarantee stays free, but the ceiling
   * leaves only 512 MiB of it usable. */
  struct proc p = start(&first, "a:1536 A:513 d:1024 i:512:1024 n:512:1024 r:1536:0 w k r:1536:0 w F i:1024:1024");
  CHECK(ready(&p) == 0, "first holds 1.5 GiB");
  struct block_view v = region_block(&first);
  CHECK(v.guaranteed == 0 && v.burst == 1536 * MiB, "region: guaranteed %llu burst %llu",
        (unsigned long long)v.guaranteed, (unsigned long long)v.burst);
  for (int i = 0; i < 10; i++)
    CHECK(run(&second, "a:1024 u:2048 i:0:1024 F") == 0, "second gets its full 1 GiB (round %d)", i);
  go_on(&p); /* the first runs a kernel: its evicted pages come back, the card has room again */
  CHECK(ready(&p) == 0, "first kept running");
  CHECK(run(&second, "a:1024 u:2048") == 0, "second again, after the first migrated back");
  go_on(&p);
  CHECK(finish(&p) == 0, "first container's program");
}

/* Eviction recorded: while the second holds its guarantee, the first's host bytes are in its
 * region (the fake driver reports residency). */
static void eviction_recorded(void) {
  use_card("evict", "1x2048");
  struct container first, second;
  make_container(&first, "first", 1024, 2048);
  make_container(&second, "second", 1024, 0);
  struct proc p = start(&first, "a:1536 w r:1024:512 i:512:1024 w F");
  CHECK(ready(&p) == 0, "first bursts");
  struct proc q = start(&second, "a:1024 u:2048 w");
  CHECK(ready(&q) == 0, "second allocated its guarantee");
  go_on(&p);
  CHECK(ready(&p) == 0, "first saw its residency");
  struct block_view v = region_block(&first);
  CHECK(v.burst == 1536 * MiB && v.evicted == 512 * MiB && v.evictions == 1,
        "region: burst %llu MiB, evicted %llu MiB, %llu evictions", (unsigned long long)(v.burst / MiB),
        (unsigned long long)(v.evicted / MiB), (unsigned long long)v.evictions);
  go_on(&q);
  CHECK(finish(&q) == 0, "second");
  go_on(&p);
  CHECK(finish(&p) == 0, "first");
  v = region_block(&first);
  CHECK(v.burst == 0 && v.evicted == 0, "freed: burst %llu evicted %llu", (unsigned long long)v.burst,
        (unsigned long long)v.evicted);
}

/* The tenants on an 80 GiB card: A 20 GiB guaranteed, B 20 GiB bursting to `limit_gib`. B
 * bursts while A is idle; then A allocates its full 20 GiB every time, B keeps running (a kernel
 * between A's rounds migrates B's pages back), and the card never holds more than 80 GiB. */
static void tenants(int limit_gib) {
  use_card("tenants", "1x81920");
  struct container a, b;
  make_container(&a, "tenant-a", 20480, 0);
  make_container(&b, "tenant-b", 20480, (uint64_t)limit_gib * 1024);
  char ops[1024];
  int n = snprintf(ops, sizeof ops, "a:20480 a:%d u:81920 i:0:20480 w", (limit_gib - 20) * 1024);
  for (int round = 0; round < 8; round++) n += snprintf(ops + n, sizeof ops - (size_t)n, " k u:81920 w");
  snprintf(ops + n, sizeof ops - (size_t)n, " F");
  struct proc pb = start(&b, ops);
  CHECK(ready(&pb) == 0, "B bursts to %d GiB", limit_gib);
  for (int round = 0; round < 8; round++) {
    CHECK(run(&a, "a:20480 u:81920 i:0:20480 A:1 F a:10240 a:10240 u:81920 F") == 0,
          "A gets its full 20 GiB, round %d (B limit %d GiB)", round, limit_gib);
    go_on(&pb);
    CHECK(ready(&pb) == 0, "B keeps running after round %d", round);
  }
  go_on(&pb);
  CHECK(finish(&pb) == 0, "B's program (limit %d GiB)", limit_gib);
}

/* Exact ceiling, both budgets: a burst first, then the guarantee may fill only what the ceiling
 * leaves; freeing guaranteed memory returns it to the guarantee, burst memory to the burst. */
static void budgets(void) {
  use_card("budgets", "1x4096");
  struct container c;
  make_container(&c, "budgets", 64, 256);
  CHECK(run(&c, "a:64 a:150 f:0 a:64 A:50 a:42 A:1 i:0:64 n:64:64 F a:256 A:1 F a:64 a:192 A:1") == 0,
        "guaranteed + burst never pass the ceiling");
  CHECK(run(&c, "m:64 m:192 M:1 f:1 a:192 F") == 0, "managed allocations burst like any other");
  CHECK(run(&c, "y:16:16 g:256 u:4096 A:1") == 0, "16 racing threads get exactly the ceiling between them");
  struct proc first = start(&c, "a:64 a:100 w");
  CHECK(ready(&first) == 0, "one process holds the guarantee and a burst");
  CHECK(run(&c, "A:100 a:92 A:1 i:0:64") == 0, "another process of the container shares both budgets");
  go_on(&first);
  CHECK(finish(&first) == 0, "the first process");
  struct proc p = start(&c, "a:32 a:100 x w");
  CHECK(ready(&p) == 0, "context destroyed");
  struct block_view v = region_block(&c);
  CHECK(v.guaranteed == 0 && v.burst == 0, "a destroyed context returns both: guaranteed %llu burst %llu",
        (unsigned long long)v.guaranteed, (unsigned long long)v.burst);
  go_on(&p);
  CHECK(finish(&p) == 0, "context destroy");
  p = start(&c, "z a:32 a:100 Z w");
  CHECK(ready(&p) == 0, "primary context reset");
  v = region_block(&c);
  CHECK(v.guaranteed == 0 && v.burst == 0, "a primary reset returns both: guaranteed %llu burst %llu",
        (unsigned long long)v.guaranteed, (unsigned long long)v.burst);
  go_on(&p);
  CHECK(finish(&p) == 0, "primary reset");
}

/* Paths the driver cannot evict never burst: pools, VMM, pitch, and anything while a stream of the
 * process is capturing. Each is refused past the guarantee, with the burst budget untouched. */
static void held_to_request(void) {
  use_card("held", "1x4096");
  struct container c;
  make_container(&c, "held", 64, 1024);
  CHECK(run(&c, "P:100 V:100 T:100 c A:100 c a:100 p:64 P:1 F") == 0, "no burst for pools, VMM, pitch, capture");
  CHECK(run(&c, "a:1000 q:0 a:1000 c q:1 c A:100 f:1 a:100 F") == 0,
        "cuMemFreeAsync returns a burst at once, but not while the free is only captured");
  setenv("FAKEGPU_CONCURRENT_MANAGED", "0", 1);
  CHECK(run(&c, "a:64 A:1 F") == 0, "no burst without concurrent managed access");
  unsetenv("FAKEGPU_CONCURRENT_MANAGED");
  struct container plain;
  make_container(&plain, "plain", 64, 0);
  CHECK(run(&plain, "a:64 A:1 M:1 F") == 0, "no burst limit, no burst");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* kill -9 of a bursting process: its burst bytes return to the burst budget within a second of
 * the container's next call, and the card gets the memory back. */
static void killed(void) {
  use_card("killed", "1x2048");
  struct container c;
  make_container(&c, "killed", 512, 2048);
  struct proc p = start(&c, "a:512 a:1024 w");
  CHECK(ready(&p) == 0, "burster ready");
  kill(p.pid, SIGKILL);
  finish(&p);
  double t0 = now_s();
  while (now_s() - t0 < 1.0 && run(&c, "a:512 a:1536 F") != 0) usleep(50000);
  CHECK(run(&c, "a:512 a:1536 u:2048 F") == 0, "the killed process's guarantee and burst are back");
  struct block_view v = region_block(&c);
  CHECK(v.guaranteed == 0 && v.burst == 0, "nothing left charged after the kill: %llu, %llu",
        (unsigned long long)v.guaranteed, (unsigned long long)v.burst);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN); /* a client that failed early closed its pipes */
  preload_env(build, sizeof build, client, sizeof client, "burst_client", dir, sizeof dir, "burst");
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "0", 1);
  setenv("FAKEGPU_KERNEL_US", "0", 1);
  setenv("FAKEGPU_UVM_NS_PER_MIB", "0", 1);
  done_when();
  eviction_recorded();
  tenants(60);
  tenants(80);
  budgets();
  held_to_request();
  killed();
  remove_scratch(dir);
  return check_failures ? 1 : 0;
}
