/* Shares inside a MIG instance, end to end against the fake driver: an H100 80GB in MIG mode with a
 * 3g.40gb instance, two containers given the instance (FAKEGPU_VISIBLE_DEVICES=MIG-…, what the
 * container runtime does) each with its own limit file naming the instance by its MIG- UUID and its
 * own region. Each sees its limit as the device's memory in CUDA and on NVML's MIG handle, stops at
 * it byte-exactly, and does not see the other's bytes; a limit file that names only the parent card
 * refuses the MIG device's memory (fail closed). mem_client runs under LD_PRELOAD=libvcuda.so. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config_writer.h"

static char build[512], dir[64], mig_uuid[64];

static void write_limit(const char *name, const char *uuid, uint64_t mib) {
  char region[160], path[160];
  snprintf(region, sizeof region, "%s/%s.region", dir, name);
  snprintf(path, sizeof path, "%s/%s.conf", dir, name);
  unsigned char buf[1024];
  const char *uuids[] = {uuid};
  uint64_t limits[] = {mib << 20};
  size_t len = build_config(buf, region, 1, uuids, limits, 0);
  CHECK(write_file(path, buf, len) == 0, "write %s", path);
}

/* Starts mem_client a1 [a2] in tenant `name`'s container; its stdout to *out_fd when given. */
static pid_t start_in(const char *name, const char *a1, const char *a2, int *out_fd) {
  int fds[2];
  if (out_fd && pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    char v[700];
    snprintf(v, sizeof v, "%s/libvcuda.so", build);
    setenv("LD_PRELOAD", v, 1);
    snprintf(v, sizeof v, "%s/fake", build);
    setenv("LD_LIBRARY_PATH", v, 1);
    snprintf(v, sizeof v, "%s/%s.conf", dir, name);
    setenv("VCUDA_CONFIG", v, 1);
    setenv("FAKEGPU_VISIBLE_DEVICES", mig_uuid, 1);
    setenv("TEST_MIG_UUID", mig_uuid, 1);
    setenv("TEST_LIMIT_MIB", "4096", 1);
    setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "0", 1);
    if (out_fd) {
      dup2(fds[1], 1);
      close(fds[0]);
    }
    snprintf(v, sizeof v, "%s/test/mem_client", build);
    execl(v, v, a1, a2, (char *)NULL);
    _exit(127);
  }
  if (out_fd) {
    close(fds[1]);
    *out_fd = fds[0];
  }
  return pid;
}

static int run_in(const char *name, const char *a1, const char *a2) {
  pid_t pid = start_in(name, a1, a2, NULL);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void create_instance(void) {
  char cmd[700], line[128] = "";
  snprintf(cmd, sizeof cmd, "%s/fake/fakegpu-ctl mig-create 0 9 0", build);
  FILE *f = popen(cmd, "r");
  CHECK(f && fgets(line, sizeof line, f), "fakegpu-ctl mig-create 0 9 0");
  if (f) pclose(f);
  const char *uuid = strstr(line, "MIG-");
  CHECK(uuid != NULL, "a 3g.40gb instance: %s", line);
  snprintf(mig_uuid, sizeof mig_uuid, "%.*s", uuid ? (int)strcspn(uuid, "\n") : 0, uuid ? uuid : "");
}

int main(void) {
  const char *b = getenv("VC_BUILD");
  snprintf(build, sizeof build, "%s", b ? b : "build");
  snprintf(dir, sizeof dir, "/tmp/vcuda-migshare-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  char state[128];
  snprintf(state, sizeof state, "%s/fakegpu.state", dir);
  setenv("FAKEGPU_STATE", state, 1);
  setenv("FAKEGPU_DEVICES", "81559", 1);
  setenv("FAKEGPU_MIG", "0", 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
  create_instance();

  write_limit("a", mig_uuid, 4096);
  write_limit("b", mig_uuid, 4096);
  CHECK(run_in("a", "migviews", NULL) == 0, "tenant a: its 4096 MiB in CUDA and on the MIG handle, refused past it");
  /* Tenant a holds 4000 MiB while b takes its whole 4096: each budget is its own. */
  int fd = -1;
  pid_t holder = start_in("a", "hold", "4000", &fd);
  char line[16] = "";
  CHECK(holder > 0 && read(fd, line, sizeof line - 1) > 0 && strncmp(line, "ready", 5) == 0, "tenant a holds 4000 MiB");
  CHECK(run_in("b", "migviews", NULL) == 0, "tenant b: its own 4096 MiB beside a's 4000, and only its own bytes");
  CHECK(run_in("a", "try", "97") == 3, "tenant a: 4000 + 97 > 4096 MiB is refused");
  CHECK(run_in("a", "try", "96") == 0, "tenant a: 4000 + 96 = 4096 MiB fits");
  if (holder > 0) {
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
  }
  close(fd);

  write_limit("parent", "GPU-ffffffff-0000-4000-8000-000000000000", 4096);
  CHECK(run_in("parent", "try", "1") == 3, "a limit file without the MIG device refuses its memory");

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", dir);
  return check_failures ? 1 : 0;
}
