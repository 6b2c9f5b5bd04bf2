/* NVML process lists inside a container's pid namespace, against the fake driver.
 *
 * NVML reports host pids. The node agent publishes the container's host pids, each with its pid
 * inside the container and its start time, in the region's host-pid map; libvcuda keeps a row when
 * its pid is there (shown as the container pid) or holds a slot in the region (no namespace).
 * A real pid namespace needs privileges CI does not have, so "host pid" and "container pid" are
 * played by two different live processes: `host` holds memory on the card under another region,
 * so only the map can claim it, and `alias` is the pid the container is told it has.
 *
 *   pidns_test               runs the scenarios (pinned offsets, map reader, lists through the map)
 *   pidns_test --dump REGION prints the map as libvcuda reads it, as JSON (node-agent/card-sampling's
 *                            host-pids test feeds it a map written by the TypeScript writer) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "config_writer.h"
#include "proc_stat.h"
#include "region.h"
#include "vc_nvml.h"

/* Pinned: contract/region-layout.ts (regionPidMap) says the same. */
_Static_assert(VC_REGION_PIDMAP_OFFSET == 1056768u, "pid map at 1056768");
_Static_assert(VC_REGION_PIDMAP_HEADER_SIZE == 64u, "pid map header 64 bytes");
_Static_assert(VC_REGION_PIDMAP_ENTRY_SIZE == 16u, "pid map entry 16 bytes");
_Static_assert(VC_REGION_PIDMAP_CAPACITY == 4096u, "4096 entries");
_Static_assert(VC_REGION_PIDMAP_END == 1056768u + 64u + 16u * 4096u, "pid map end");
_Static_assert(VC_REGION_BURST_OFFSET == 1126400u, "burst slots at 1126400");
_Static_assert(VC_REGION_FILE_SIZE == 1126400u + 256u * 4096u, "region file size");
_Static_assert(offsetof(struct vc_pidmap_header, seq) == 0, "seq at +0");
_Static_assert(offsetof(struct vc_pidmap_header, version) == 8, "version at +8");
_Static_assert(offsetof(struct vc_pidmap_header, entry_size) == 12, "entry size at +12");
_Static_assert(offsetof(struct vc_pidmap_entry, container_pid) == 4, "container pid at +4");
_Static_assert(offsetof(struct vc_pidmap_entry, start_ticks) == 8, "start ticks at +8");
_Static_assert(VC_PIDMAP_FLAG_OWN_PID_NAMESPACE == 1u && VC_PIDMAP_FLAG_TRUNCATED == 2u, "flag bits");

static char build[512], dir[64], client[600];
static const char *const uuid0[] = {"GPU-fa4e6770-0000-4000-8000-000000000000"};

static uint64_t unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t ticks_of(pid_t pid) {
  char state;
  uint64_t start = 0;
  return vc_proc_stat(pid, &state, &start) == 0 ? start : 0;
}

struct entry {
  uint32_t host_pid, container_pid;
  uint64_t start_ticks;
};

/* Writes the map the way the node agent does: positioned writes, seq last (even) unless `torn`. */
static void write_map(const char *region, const struct entry *e, int n, uint64_t published_ms, uint32_t valid_ms,
                      uint32_t flags, int torn) {
  unsigned char hdr[VC_REGION_PIDMAP_HEADER_SIZE] = {0};
  put64(hdr + 0, torn ? 3 : 2);
  put32(hdr + 8, VC_REGION_PIDMAP_VERSION);
  put32(hdr + 12, VC_REGION_PIDMAP_ENTRY_SIZE);
  put64(hdr + 16, published_ms);
  put32(hdr + 24, valid_ms);
  put32(hdr + 28, (uint32_t)n);
  put32(hdr + 32, flags);
  unsigned char body[16 * 8] = {0};
  for (int i = 0; i < n && i < 8; i++) {
    put32(body + 16 * i, e[i].host_pid);
    put32(body + 16 * i + 4, e[i].container_pid);
    put64(body + 16 * i + 8, e[i].start_ticks);
  }
  int fd = open(region, O_RDWR);
  CHECK(fd >= 0, "open %s: %s", region, strerror(errno));
  if (fd < 0) return;
  CHECK(pwrite(fd, body, sizeof body, VC_REGION_PIDMAP_OFFSET + VC_REGION_PIDMAP_HEADER_SIZE) == (ssize_t)sizeof body,
        "write entries");
  CHECK(pwrite(fd, hdr, sizeof hdr, VC_REGION_PIDMAP_OFFSET) == (ssize_t)sizeof hdr, "write header");
  close(fd);
}

static void clear_map(const char *region) { write_map(region, NULL, 0, 0, 0, 0, 0); }

static void write_conf(const char *name) {
  char conf[256], region[256];
  snprintf(conf, sizeof conf, "%s/%s.conf", dir, name);
  snprintf(region, sizeof region, "%s/%s.region", dir, name);
  unsigned char buf[1024];
  uint64_t limits[] = {64ull << 20};
  size_t len = build_config(buf, region, 1, uuid0, limits, 0);
  CHECK(write_file(conf, buf, len) == 0, "write %s", conf);
}

static void set_env(const char *name) {
  char v[1024];
  snprintf(v, sizeof v, "%s/libvcuda.so", build);
  setenv("LD_PRELOAD", v, 1);
  snprintf(v, sizeof v, "%s/fake", build);
  setenv("LD_LIBRARY_PATH", v, 1);
  snprintf(v, sizeof v, "%s/fakegpu.state", dir);
  setenv("FAKEGPU_STATE", v, 1);
  setenv("FAKEGPU_DEVICES", "1x1024", 1);
  setenv("FAKEGPU_SAMPLE_MS", "20", 1);
  setenv("FAKEGPU_NVML_SAMPLE_MS", "20", 1); /* samples published as soon as their 20 ms end */
  setenv("FAKEGPU_NVML_DELAY_MS", "0", 1);
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "0", 1);
  snprintf(v, sizeof v, "%s/%s.conf", dir, name);
  setenv("VCUDA_CONFIG", v, 1);
}

/* A holder in container `name`: its stdin is *to_child; returns once it reported "ready". */
static pid_t start_holder(const char *name, const char *mib, int *to_child) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    set_env(name);
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl(client, client, "hold", mib, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  char line[16] = "";
  ssize_t n = read(out[0], line, sizeof line - 1);
  CHECK(n > 0 && strncmp(line, "ready", 5) == 0, "holder in %s ready (%s)", name, line);
  close(out[0]);
  *to_child = in[1];
  return pid;
}

/* What `list` run in container `name` shows. */
struct listing {
  uint32_t v3[16], v3_mib[16], v1[16], util[16], util2[16];
  int n3, n1, nu, nu2, ok, graphics_rc;
};

static struct listing list_in(const char *name) {
  struct listing l;
  memset(&l, 0, sizeof l);
  int out[2];
  if (pipe(out) != 0) return l;
  pid_t pid = fork();
  if (pid == 0) {
    set_env(name);
    dup2(out[1], 1);
    close(out[0]);
    execl(client, client, "list", (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  FILE *f = fdopen(out[0], "r");
  char line[128];
  while (f && fgets(line, sizeof line, f)) {
    unsigned a = 0, b = 0;
    if (sscanf(line, "v3 %u %u", &a, &b) == 2 && l.n3 < 16) {
      l.v3[l.n3] = a;
      l.v3_mib[l.n3++] = b;
    } else if (sscanf(line, "v1 %u", &a) == 1 && l.n1 < 16) l.v1[l.n1++] = a;
    else if (sscanf(line, "util2 %u", &a) == 1 && l.nu2 < 16) l.util2[l.nu2++] = a; /* before "util %u" */
    else if (sscanf(line, "util %u", &a) == 1 && l.nu < 16) l.util[l.nu++] = a;
    else if (sscanf(line, "graphics %d", &l.graphics_rc) == 1) continue;
    else if (strncmp(line, "end", 3) == 0) l.ok = 1;
  }
  if (f) fclose(f);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "list in %s exited with %d", name, status);
  return l;
}

static int shows(const uint32_t *pids, int n, pid_t pid) {
  for (int i = 0; i < n; i++)
    if (pids[i] == (uint32_t)pid) return 1;
  return 0;
}

/* Shown in both compute lists (v3 and v1). */
static int listed(const struct listing *l, pid_t pid) { return shows(l->v3, l->n3, pid) && shows(l->v1, l->n1, pid); }
static int absent(const struct listing *l, pid_t pid) {
  return !shows(l->v3, l->n3, pid) && !shows(l->v1, l->n1, pid) && !shows(l->util, l->nu, pid) &&
         !shows(l->util2, l->nu2, pid);
}

static pid_t start_alias(void) {
  pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

static void test_lists(void) {
  write_conf("mine");
  write_conf("other");
  write_conf("hostside");
  char mine_region[256], other_region[256];
  snprintf(mine_region, sizeof mine_region, "%s/mine.region", dir);
  snprintf(other_region, sizeof other_region, "%s/other.region", dir);

  int fd_mine, fd_host, fd_tenant;
  pid_t mine = start_holder("mine", "8", &fd_mine);          /* holds a slot in mine.region */
  pid_t host = start_holder("hostside", "12", &fd_host);     /* ours, known to NVML by "host pid" only */
  pid_t tenant = start_holder("other", "16", &fd_tenant);    /* another container on the card */
  pid_t alias = start_alias();                               /* the container's pid for `host` */
  usleep(60 * 1000); /* the sampling periods with the holders' kernels complete (20 ms each) */

  /* Every process shows in the tenant's own view only by the tenant's rules. */
  struct entry own_map[] = {{(uint32_t)host, (uint32_t)alias, ticks_of(alias)}};

  /* 1. A fresh map: the host pid is shown as the container pid, with the host row's memory. */
  write_map(mine_region, own_map, 1, unix_ms(), 3000, 0, 0);
  write_map(other_region, (struct entry[]){{(uint32_t)tenant, (uint32_t)tenant, ticks_of(tenant)}}, 1, unix_ms(), 3000,
            0, 0);
  struct listing l = list_in("mine");
  CHECK(l.ok, "list ran");
  CHECK(listed(&l, alias), "the container's host pid %d is shown as its container pid %d", host, alias);
  CHECK(shows(l.util, l.nu, alias), "utilization samples of host pid %d are shown as pid %d", host, alias);
  CHECK(shows(l.util2, l.nu2, alias), "versioned utilization info of host pid %d is shown as pid %d", host, alias);
  for (int i = 0; i < l.n3; i++)
    if (l.v3[i] == (uint32_t)alias) CHECK(l.v3_mib[i] == 12, "the row keeps the host row's memory (%u MiB)", l.v3_mib[i]);
  CHECK(listed(&l, mine), "a slot pid (no namespace) is still shown");
  CHECK(!shows(l.v3, l.n3, host), "the raw host pid is not shown when it maps to a container pid");
  CHECK(absent(&l, tenant), "another container's process is never shown");
  CHECK(l.n3 == 2 && l.n1 == 2, "exactly the two processes of the container (%d, %d)", l.n3, l.n1);
  CHECK(l.graphics_rc == NVML_ERROR_FUNCTION_NOT_FOUND, "graphics list: the driver's answer passes through (%d)",
        l.graphics_rc);

  /* The tenant sees itself, and never ours. */
  struct listing t = list_in("other");
  CHECK(listed(&t, tenant), "the tenant sees its own process");
  CHECK(absent(&t, alias) && absent(&t, host) && absent(&t, mine), "the tenant sees none of ours");

  /* 2. Own pid namespace: slot pids are container pids, not comparable with NVML's host pids. */
  write_map(mine_region, own_map, 1, unix_ms(), 3000, VC_PIDMAP_FLAG_OWN_PID_NAMESPACE, 0);
  l = list_in("mine");
  CHECK(listed(&l, alias) && l.n3 == 1, "namespaced: only what the map names (%d rows)", l.n3);
  CHECK(absent(&l, mine), "namespaced: a slot pid equal to a host pid is a coincidence, not shown");

  /* 3. Another container's pid in our map with a start time that is not its own (a reused pid, a
   * stale entry): not shown. */
  struct entry reused[] = {{(uint32_t)tenant, (uint32_t)tenant, ticks_of(tenant) + 1}};
  write_map(mine_region, reused, 1, unix_ms(), 3000, 0, 0);
  l = list_in("mine");
  CHECK(absent(&l, tenant), "an entry whose start time does not match is not shown");
  CHECK(listed(&l, mine), "and the slot rule still applies");

  /* 4. No container pid published: the host pid is shown as is. */
  struct entry unknown[] = {{(uint32_t)host, 0, 0}};
  write_map(mine_region, unknown, 1, unix_ms(), 3000, 0, 0);
  l = list_in("mine");
  CHECK(listed(&l, host) && absent(&l, alias), "without a container pid the host pid is shown");

  /* 5. Stale, torn, absent, written in the future: today's behaviour (slot pids only). */
  struct {
    const char *what;
    uint64_t published;
    int torn;
  } fallbacks[] = {
      {"stale", unix_ms() - 10000, 0},
      {"torn", unix_ms(), 1},
      {"from the future", unix_ms() + 60000, 0},
  };
  for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++) {
    write_map(mine_region, own_map, 1, fallbacks[i].published, 3000, VC_PIDMAP_FLAG_OWN_PID_NAMESPACE, fallbacks[i].torn);
    l = list_in("mine");
    CHECK(l.ok && absent(&l, alias) && listed(&l, mine) && absent(&l, tenant) && absent(&l, host),
          "%s map: falls back to the slot pids", fallbacks[i].what);
  }
  clear_map(mine_region);
  l = list_in("mine");
  CHECK(absent(&l, alias) && listed(&l, mine) && l.n3 == 1, "absent map: slot pids only");

  /* 6. The container-side process is gone: its entry no longer matches. */
  write_map(mine_region, own_map, 1, unix_ms(), 3000, 0, 0);
  kill(alias, SIGKILL);
  waitpid(alias, NULL, 0);
  l = list_in("mine");
  CHECK(absent(&l, alias) && absent(&l, host), "an entry whose container pid is gone is not shown");

  close(fd_mine);
  close(fd_host);
  close(fd_tenant);
  waitpid(mine, NULL, 0);
  waitpid(host, NULL, 0);
  waitpid(tenant, NULL, 0);
}

/* The reader on its own: consistency, freshness, sorting, truncation. */
static void test_reader(void) {
  char region[256];
  snprintf(region, sizeof region, "%s/reader.region", dir);
  char err[256];
  CHECK(vc_region_open(region, 1, err, sizeof err) == 0, "open region: %s", err);
  struct vc_pidmap_entry out[8];
  uint32_t flags = 99;
  CHECK(vc_region_host_pids(out, 8, unix_ms(), &flags) == -1, "a never-written map is absent");
  struct entry e[] = {{300, 3, 7}, {100, 1, 5}, {200, 0, 0}};
  uint64_t now = unix_ms();
  write_map(region, e, 3, now, 1000, VC_PIDMAP_FLAG_OWN_PID_NAMESPACE, 0);
  CHECK(vc_region_host_pids(out, 8, now + 1000, &flags) == 3, "fresh at the edge of valid_ms");
  CHECK(out[0].host_pid == 100 && out[1].host_pid == 200 && out[2].host_pid == 300, "sorted by host pid");
  CHECK(out[0].container_pid == 1 && out[0].start_ticks == 5, "entries copied whole");
  CHECK(flags == VC_PIDMAP_FLAG_OWN_PID_NAMESPACE, "flags (%u)", flags);
  CHECK(vc_region_host_pids(out, 2, now, &flags) == 2 && (flags & VC_PIDMAP_FLAG_TRUNCATED), "short buffer: truncated");
  CHECK(vc_region_host_pids(out, 8, now + 1001, &flags) == -1, "stale after valid_ms");
  write_map(region, e, 3, now, 1000, 0, 1);
  CHECK(vc_region_host_pids(out, 8, now, &flags) == -1, "odd seq: torn, not trusted");
  vc_region_close();
}

static int dump(const char *region) {
  char err[256];
  if (vc_region_open(region, 1, err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  static struct vc_pidmap_entry out[VC_REGION_PIDMAP_CAPACITY];
  uint32_t flags = 0;
  int n = vc_region_host_pids(out, VC_REGION_PIDMAP_CAPACITY, unix_ms(), &flags);
  printf("{\"count\":%d,\"flags\":%u,\"entries\":[", n, n < 0 ? 0 : flags);
  for (int i = 0; i < n; i++)
    printf("%s{\"hostPid\":%u,\"containerPid\":%u,\"startTicks\":%llu}", i ? "," : "", out[i].host_pid,
           out[i].container_pid, (unsigned long long)out[i].start_ticks);
  printf("]}\n");
  vc_region_close();
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--dump") == 0) return dump(argv[2]);
  const char *b = getenv("VC_BUILD");
  snprintf(build, sizeof build, "%s", b ? b : "build");
  snprintf(client, sizeof client, "%s/test/pidns_client", build);
  snprintf(dir, sizeof dir, "/tmp/vcuda-pidns-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  test_reader();
  test_lists();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}
