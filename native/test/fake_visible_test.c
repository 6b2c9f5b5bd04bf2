/* FAKEGPU_VISIBLE_DEVICES: the fake driver describes a whole node and each process enumerates only
 * the devices it is given, in the given order, each with its own node identity and its own slot in
 * the node-wide state. The parser is tested as a plain function; enumeration and shared state
 * through fake_visible_client processes with different visible sets on one state file. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "check.h"
#include "fake_env.c" /* the pure parser, without the rest of the fake driver */

static char build[512], state[600];

/* Starts the client on the test node (4 devices, seed 7) with a visible list (NULL: unset). */
static FILE *start(const char *visible, const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "env -u FAKEGPU_VISIBLE_DEVICES LD_LIBRARY_PATH=%s/fake FAKEGPU_STATE=%s FAKEGPU_DEVICES=1024,2048,3072,4096 "
           "FAKEGPU_UUID_SEED=7 %s%s%s %s/test/fake_visible_client %s",
           build, state, visible ? "FAKEGPU_VISIBLE_DEVICES='" : "", visible ? visible : "", visible ? "'" : "", build,
           args);
  return popen(cmd, "r");
}

static char *finish(FILE *p) {
  static char out[8][8192];
  static int next;
  char *buf = out[next++ % 8];
  size_t n = fread(buf, 1, sizeof out[0] - 1, p);
  buf[n] = '\0';
  pclose(p);
  return buf;
}

static char *run(const char *visible, const char *args) { return finish(start(visible, args)); }

/* The value of `key=` in the output, or "" (a static copy). */
static const char *value(const char *out, const char *key) {
  static char v[8][128];
  static int next;
  char *slot = v[next++ % 8];
  slot[0] = '\0';
  char pat[96];
  snprintf(pat, sizeof pat, "%s=", key);
  for (const char *p = out; (p = strstr(p, pat)) != NULL; p++) {
    if (p != out && p[-1] != '\n') continue;
    p += strlen(pat);
    size_t len = strcspn(p, "\n");
    snprintf(slot, 128, "%.*s", (int)len, p);
    break;
  }
  return slot;
}

static void uuid(int index, char out[48]) { fg_uuid_text_of(7, index, out); }

static void test_parser(void) {
  int nodes[FG_MAX_DEVICES];
  char err[160], u3[48], u1[48];
  uuid(3, u3);
  uuid(1, u1);
  CHECK(fg_parse_visible(NULL, 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 4 && nodes[3] == 3, "unset: all");
  CHECK(fg_parse_visible("", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 4, "empty: all");
  CHECK(fg_parse_visible("all", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 4, "all");
  CHECK(fg_parse_visible("none", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 0, "none");
  CHECK(fg_parse_visible("void", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 0, "void");
  CHECK(fg_parse_visible("2,0", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 2 && nodes[0] == 2 && nodes[1] == 0,
        "indexes keep their order");
  char spec[128];
  snprintf(spec, sizeof spec, "%s,%s", u3, u1);
  CHECK(fg_parse_visible(spec, 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 2 && nodes[0] == 3 && nodes[1] == 1,
        "UUIDs keep their order");
  for (char *c = spec; *c; c++) *c = (char)(*c >= 'a' && *c <= 'f' ? *c - 32 : *c);
  CHECK(fg_parse_visible(spec, 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 2, "UUIDs in upper case");
  snprintf(spec, sizeof spec, "%s,2", u1);
  CHECK(fg_parse_visible(spec, 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 2 && nodes[0] == 1 && nodes[1] == 2,
        "UUIDs and indexes mixed");
  CHECK(fg_parse_visible(u3, 4, 8, nodes, FG_MAX_DEVICES, err, sizeof err) == -1 && strstr(err, "names no device"),
        "a UUID of another node's seed is refused: %s", err);
  CHECK(fg_parse_visible("4", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == -1, "index out of range");
  CHECK(fg_parse_visible("1,1", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == -1 && strstr(err, "twice"),
        "duplicate: %s", err);
  CHECK(fg_parse_visible(" 2 , 0", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == 2 && nodes[0] == 2 && nodes[1] == 0,
        "spaces around entries");
  CHECK(fg_parse_visible("1, ,2", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == -1, "a blank entry");
  CHECK(fg_parse_visible("1,", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == -1, "trailing comma");
  CHECK(fg_parse_visible(",1", 4, 7, nodes, FG_MAX_DEVICES, err, sizeof err) == -1, "empty entry");
  CHECK(fg_parse_visible("1", 4, 7, nodes, 0, err, sizeof err) == -1, "more entries than room");
}

static void test_enumeration(void) {
  char u[4][48];
  for (int i = 0; i < 4; i++) uuid(i, u[i]);
  const char *all = run(NULL, "list");
  CHECK(strcmp(value(all, "cuda.count"), "4") == 0, "unset: every device\n%s", all);
  CHECK(strcmp(value(all, "cuda.2.uuid"), u[2]) == 0, "unset: node order");
  CHECK(strcmp(value(all, "nvml.count"), "4") == 0, "unset: NVML sees every device");

  char spec[128];
  snprintf(spec, sizeof spec, "%s,1", u[3]);
  const char *two = run(spec, "list");
  CHECK(strcmp(value(two, "cuda.count"), "2") == 0, "two visible\n%s", two);
  CHECK(strcmp(value(two, "cuda.0.uuid"), u[3]) == 0, "ordinal 0 is node device 3: %s", value(two, "cuda.0.uuid"));
  CHECK(strcmp(value(two, "cuda.0.total_mib"), "4096") == 0, "ordinal 0 has node device 3's memory");
  CHECK(strcasecmp(value(two, "cuda.0.pci"), "0000:3d:00.0") == 0, "and its PCI bus: %s", value(two, "cuda.0.pci"));
  CHECK(strcmp(value(two, "cuda.1.uuid"), u[1]) == 0, "ordinal 1 is node device 1");
  CHECK(strcmp(value(two, "cuda.1.total_mib"), "2048") == 0, "ordinal 1 has node device 1's memory");
  CHECK(strcmp(value(two, "nvml.count"), "2") == 0, "NVML enumerates the same two");
  CHECK(strcmp(value(two, "nvml.0.uuid"), u[3]) == 0 && strcmp(value(two, "nvml.1.uuid"), u[1]) == 0,
        "NVML keeps the order");
  CHECK(strcmp(value(two, "nvml.0.index"), "0") == 0, "NVML index is the position in the list");
  CHECK(strcmp(value(two, "nvml.0.minor"), "3") == 0, "the minor number stays the node's");
  CHECK(strcmp(value(two, "nvml.0.by_uuid"), "1") == 0 && strcmp(value(two, "nvml.1.by_uuid"), "1") == 0,
        "handle by UUID finds the visible devices");
  CHECK(strcmp(value(two, "nvml.0.total_mib"), "4096") == 0, "NVML memory is the node device's");
}

static void test_refused(const char *spec) {
  const char *out = run(spec, "list");
  CHECK(strcmp(value(out, "cuda.init"), "100") == 0, "%s: cuInit says CUDA_ERROR_NO_DEVICE\n%s", spec, out);
  CHECK(strcmp(value(out, "cuda.count"), "0") == 0, "%s: no CUDA device", spec);
  CHECK(strcmp(value(out, "nvml.count"), "0") == 0, "%s: no NVML device", spec);
}

static void test_shared_state(void) {
  char u3[48], spec[128];
  uuid(3, u3);
  /* A holds 1000 MiB on node device 3, which it sees as its only device. */
  FILE *a = start("3", "alloc 0 1000 100 1500");
  char line[256];
  int ready = 0;
  while (fgets(line, sizeof line, a))
    if (strncmp(line, "alloc.0.result=", 15) == 0) {
      ready = strcmp(line + 15, "ok\n") == 0;
      break;
    }
  CHECK(ready, "holder allocated");
  const char *all = run(NULL, "list");
  CHECK(strcmp(value(all, "nvml.3.used_mib"), "1000") == 0, "all-visible sees it on device 3: %s",
        value(all, "nvml.3.used_mib"));
  CHECK(strcmp(value(all, "nvml.0.used_mib"), "0") == 0, "and nothing on device 0");
  const char *pair = run("2,3", "list");
  CHECK(strcmp(value(pair, "nvml.1.used_mib"), "1000") == 0, "a process seeing 2,3 sees it on its device 1");
  CHECK(strcmp(value(pair, "nvml.0.used_mib"), "0") == 0, "and not on its device 0");
  /* D sees node device 3 by UUID, as its device 0: 3096 MiB remain there. */
  snprintf(spec, sizeof spec, "%s", u3);
  const char *d = run(spec, "alloc 0 3500 100 0");
  CHECK(strcmp(value(d, "alloc.0.result"), "out-of-memory") == 0, "device 3 is full for D\n%s", d);
  CHECK(strcmp(value(d, "alloc.0.allocated_mib"), "3000") == 0, "D got what A left: %s",
        value(d, "alloc.0.allocated_mib"));
  const char *other = run("1", "alloc 0 2048 1024 0");
  CHECK(strcmp(value(other, "alloc.0.result"), "ok") == 0, "node device 1 is untouched\n%s", other);
  finish(a);
}

/* Kernels of a process that sees node device 2 as its device 0 land on node device 2's timeline:
 * others see that card busy, whatever their visible set. */
static void test_shared_timeline(void) {
  const char *b = run("2", "busy 0 400");
  CHECK(strcmp(value(b, "busy.0.result"), "ok") == 0, "kernels ran\n%s", b);
  const char *all = run(NULL, "list");
  CHECK(atoi(value(all, "nvml.2.util")) > 0, "node device 2 busy: %s%%", value(all, "nvml.2.util"));
  CHECK(strcmp(value(all, "nvml.0.util"), "0") == 0, "node device 0 idle: %s%%", value(all, "nvml.0.util"));
  const char *pair = run("3,2", "list");
  CHECK(atoi(value(pair, "nvml.1.util")) > 0, "seen as ordinal 1 by another process: %s%%", value(pair, "nvml.1.util"));
  CHECK(strcmp(value(pair, "nvml.0.util"), "0") == 0, "node device 3 idle");
}

/* Xid events: injected by node index (a node-level act), delivered through the visible handle, and
 * never for a device the process does not see. */
static void test_events(void) {
  FILE *w = start("2,0", "events 1500");
  char line[256];
  int ready = 0;
  while (!ready && fgets(line, sizeof line, w)) ready = strcmp(line, "events.ready=1\n") == 0;
  CHECK(ready, "event waiter registered");
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "env -u FAKEGPU_VISIBLE_DEVICES FAKEGPU_STATE=%s %s/fake/fakegpu-ctl xid 1 31 && "
           "env -u FAKEGPU_VISIBLE_DEVICES FAKEGPU_STATE=%s %s/fake/fakegpu-ctl xid 2 79",
           state, build, state, build);
  CHECK(system(cmd) == 0, "fakegpu-ctl xid");
  const char *out = finish(w);
  CHECK(strcmp(value(out, "events.count"), "1") == 0, "only the visible device's event\n%s", out);
  CHECK(strcmp(value(out, "event.0.xid"), "79") == 0, "the Xid of node device 2");
  CHECK(strcmp(value(out, "event.0.index"), "0") == 0, "reported on the handle of ordinal 0");
}

int main(void) {
  const char *b = getenv("VC_BUILD");
  snprintf(build, sizeof build, "%s", b ? b : "build");
  char dir[] = "/tmp/vcuda-fake-visible-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  snprintf(state, sizeof state, "%s/fakegpu.state", dir);
  test_parser();
  test_enumeration();
  test_refused("none");
  test_refused("4");
  test_refused("1,1");
  test_refused("GPU-00000000-0000-0000-0000-000000000000");
  test_shared_state();
  test_shared_timeline();
  test_events();
  unlink(state);
  rmdir(dir);
  if (check_failures) fprintf(stderr, "%d check(s) failed\n", check_failures);
  return check_failures ? 1 : 0;
}
