/* Memory the driver frees (or allocates) behind the allocation hooks' back: each scenario runs
 * leak_client under LD_PRELOAD=libvcuda.so over the fake driver in a fresh process and a fresh
 * region, and passes only when the container's budget follows what the driver really holds. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config_writer.h"

static char build[512], dir[64], conf[256], client[600];

static const char *const uuid0[] = {"GPU-fa4e6770-0000-4000-8000-000000000000"};

/* A fresh limit file and region of `mib` for the next scenario (no charge carried over). */
static void write_limit(uint64_t mib, const char *name) {
  char region[160], v[1024];
  snprintf(region, sizeof region, "%s/%s.region", dir, name);
  unsigned char buf[1024];
  uint64_t limits[] = {mib << 20};
  size_t len = build_config(buf, region, 1, uuid0, limits, 0);
  CHECK(write_file(conf, buf, len) == 0, "write config");
  snprintf(v, sizeof v, "%llu", (unsigned long long)mib);
  setenv("TEST_LIMIT_MIB", v, 1);
  snprintf(v, sizeof v, "%s/%s.fakegpu", dir, name);
  setenv("FAKEGPU_STATE", v, 1);
}

static int run(const char *scenario, uint64_t limit_mib) {
  write_limit(limit_mib, scenario);
  pid_t pid = fork();
  if (pid == 0) {
    execl(client, client, scenario, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(void) {
  const char *b = getenv("VC_BUILD");
  snprintf(build, sizeof build, "%s", b ? b : "build");
  snprintf(client, sizeof client, "%s/test/leak_client", build);
  snprintf(dir, sizeof dir, "/tmp/vcuda-leak-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  snprintf(conf, sizeof conf, "%s/vcuda.conf", dir);
  char v[1024];
  snprintf(v, sizeof v, "%s/libvcuda.so", build);
  setenv("LD_PRELOAD", v, 1);
  snprintf(v, sizeof v, "%s/fake", build);
  setenv("LD_LIBRARY_PATH", v, 1);
  setenv("FAKEGPU_DEVICES", "1x8192", 1);
  setenv("VCUDA_CONFIG", conf, 1);
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "0", 1);

  CHECK(run("async-free", 64) == 0, "cuMemFree of a stream-ordered pointer releases its charge");
  CHECK(run("pool-destroy", 64) == 0, "a destroyed pool's reserved memory stops being charged");
  CHECK(run("reset", 4096) == 0, "a primary context reset gives back what the driver freed");
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "16", 1);
  CHECK(run("release", 64) == 0, "the last primary context release gives back the context's memory");
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "0", 1);
  CHECK(run("destroy", 64) == 0, "cuCtxDestroy gives back the context's linear memory only");
  CHECK(run("graph-mem", 64) == 0, "graph memory is counted by the graph pool's reserved memory");
  CHECK(run("capture", 64) == 0, "capture is never throttled; a replay is charged by the kernels it holds");
  CHECK(run("exec", 64) == 0, "a process that execs itself gets its old image's memory back");
  CHECK(run("fork", 64) == 0, "fork during stream-ordered allocations: the child's pool lock is free");

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", dir);
  return check_failures ? 1 : 0;
}
