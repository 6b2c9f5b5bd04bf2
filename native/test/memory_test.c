/* libvcuda end to end against the fake driver: every allocation path at and above the limit,
 * views agreeing with each other, cuGetProcAddress/dlsym routing, two processes sharing one
 * budget, kill -9 reclaim within a second, context overhead, and a missing/corrupt limit file.
 * Each scenario runs mem_client under LD_PRELOAD=libvcuda.so in a fresh process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "config_writer.h"

static char build[512], dir[64], conf[256], client[600];

static const char *const uuid0[] = {"GPU-fa4e6770-0000-4000-8000-000000000000"};

static void set_env(const char *config) {
  char v[1024];
  snprintf(v, sizeof v, "%s/libvcuda.so", build);
  setenv("LD_PRELOAD", v, 1);
  snprintf(v, sizeof v, "%s/fake", build);
  setenv("LD_LIBRARY_PATH", v, 1);
  snprintf(v, sizeof v, "%s/fakegpu.state", dir);
  setenv("FAKEGPU_STATE", v, 1);
  setenv("FAKEGPU_DEVICES", "2x1024", 1);
  setenv("VCUDA_CONFIG", config, 1);
  setenv("TEST_LIMIT_MIB", "64", 1);
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "0", 1);
}

/* Starts mem_client with args; stdout to *out_fd when given, stderr to `err_path` when given. */
static pid_t start(const char *a1, const char *a2, int *out_fd, const char *err_path) {
  int fds[2];
  if (out_fd && pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    if (out_fd) {
      dup2(fds[1], 1);
      close(fds[0]);
    }
    if (err_path) {
      int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, 2);
    }
    execl(client, client, a1, a2, (char *)NULL);
    _exit(127);
  }
  if (out_fd) {
    close(fds[1]);
    *out_fd = fds[0];
  }
  return pid;
}

static int run(const char *a1, const char *a2, const char *err_path) {
  pid_t pid = start(a1, a2, NULL, err_path);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void write_limit(uint64_t mib) {
  char region[128];
  snprintf(region, sizeof region, "%s/region", dir);
  unsigned char buf[1024];
  uint64_t limits[] = {mib << 20};
  size_t len = build_config(buf, region, 1, uuid0, limits, 0);
  CHECK(write_file(conf, buf, len) == 0, "write config");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_two_processes_and_kill9(void) {
  int fd = -1;
  pid_t holder = start("hold", "40", &fd, NULL);
  char line[16] = "";
  ssize_t n = read(fd, line, sizeof line - 1);
  CHECK(n > 0 && strncmp(line, "ready", 5) == 0, "holder allocated 40 MiB (%s)", line);
  CHECK(run("try", "30", NULL) == 3, "second process: 40 + 30 > 64 MiB is refused");
  CHECK(run("try", "24", NULL) == 0, "second process: 40 + 24 = 64 MiB fits");
  kill(holder, SIGKILL);
  /* Not reaped yet: a zombie's memory must come back too. */
  double t0 = now_s();
  int ok = 0;
  while (now_s() - t0 < 1.0) {
    if (run("try", "60", NULL) == 0) {
      ok = 1;
      break;
    }
    usleep(20000);
  }
  CHECK(ok, "memory of the kill -9'd process came back within 1 s");
  waitpid(holder, NULL, 0);
  close(fd);
}

/* 4 processes x 4 threads race for 1 MiB pieces of a 64 MiB budget: exactly 64 are granted. */
static void test_race(void) {
  pid_t pids[4];
  int fds[4];
  long total = 0;
  for (int i = 0; i < 4; i++) pids[i] = start("grab", NULL, &fds[i], NULL);
  for (int i = 0; i < 4; i++) {
    char line[32] = "";
    ssize_t n = read(fds[i], line, sizeof line - 1);
    CHECK(n > 0, "grabber %d reported", i);
    total += strtol(line, NULL, 10);
  }
  CHECK(total == 64, "racing processes and threads got exactly the 64 MiB budget, got %ld", total);
  for (int i = 0; i < 4; i++) {
    kill(pids[i], SIGKILL);
    waitpid(pids[i], NULL, 0);
    close(fds[i]);
  }
}

static void test_config_failures(void) {
  char err_path[128], text[2048] = "";
  snprintf(err_path, sizeof err_path, "%s/stderr", dir);
  set_env("/nonexistent/vcuda.conf");
  CHECK(run("init", NULL, err_path) == 4, "missing limit file: cuInit fails");
  FILE *f = fopen(err_path, "r");
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  CHECK(strstr(text, "/nonexistent/vcuda.conf") && strstr(text, "refused"), "clear message: %s", text);
  write_limit(64);
  int fd = open(conf, O_WRONLY);
  CHECK(fd >= 0 && pwrite(fd, "\x7f", 1, VC_CONFIG_HEADER_SIZE + VC_CFG_REC_MEMORY_LIMIT + 3) == 1, "corrupt");
  close(fd);
  set_env(conf);
  CHECK(run("init", NULL, err_path) == 4, "corrupt limit file: cuInit fails");
  f = fopen(err_path, "r");
  n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  CHECK(strstr(text, "checksum"), "message names the checksum: %s", text);
  write_limit(64);
}

int main(void) {
  const char *b = getenv("VC_BUILD");
  snprintf(build, sizeof build, "%s", b ? b : "build");
  snprintf(client, sizeof client, "%s/test/mem_client", build);
  snprintf(dir, sizeof dir, "/tmp/vcuda-mem-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  snprintf(conf, sizeof conf, "%s/vcuda.conf", dir);
  write_limit(64);
  set_env(conf);

  CHECK(run("paths", NULL, NULL) == 0, "every allocation path at and above the limit");
  /* Another tenant on the same card (no preload, not in this container's region): the views
   * must show neither its memory nor its process. */
  char preload[700];
  snprintf(preload, sizeof preload, "%s", getenv("LD_PRELOAD"));
  unsetenv("LD_PRELOAD");
  int out = -1;
  pid_t outsider = start("hold", "8", &out, NULL);
  setenv("LD_PRELOAD", preload, 1);
  char line[16] = "";
  CHECK(read(out, line, sizeof line - 1) > 0 && strncmp(line, "ready", 5) == 0, "outsider holds 8 MiB");
  CHECK(run("views", NULL, NULL) == 0, "views agree and show only the container");
  kill(outsider, SIGKILL);
  waitpid(outsider, NULL, 0);
  close(out);
  CHECK(run("getproc", NULL, NULL) == 0, "cuGetProcAddress and dlsym routing");
  char trace[700];
  const char *native = getenv("VC_NATIVE"); /* the native/ folder; default: the build's parent */
  if (native) snprintf(trace, sizeof trace, "%s/test/fixtures/cudart-13.0-getproc-trace.txt", native);
  else snprintf(trace, sizeof trace, "%s/../test/fixtures/cudart-13.0-getproc-trace.txt", build);
  CHECK(run("trace", trace, NULL) == 0, "the CUDA 13.0 runtime's start-up lookups");
  test_two_processes_and_kill9();
  test_race();
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "16", 1);
  CHECK(run("try", "64", NULL) == 3, "context overhead counts: 16 + 64 > 64");
  CHECK(run("try", "48", NULL) == 0, "context overhead counts: 16 + 48 = 64");
  setenv("VCUDA_CONTEXT_OVERHEAD_MIB", "0", 1);
  write_limit(128); /* a live raise by the node agent, seen by new and running processes */
  CHECK(run("try", "100", NULL) == 0, "raised limit applies");
  write_limit(64);
  test_config_failures();

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", dir);
  return check_failures ? 1 : 0;
}
