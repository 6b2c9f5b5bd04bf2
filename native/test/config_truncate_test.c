/* The limit file truncated in place while a reader runs (`vcuda config write --out` over a live
 * file does this): reads see a corrupt file (limit 0, fail closed) and then the new contents,
 * and never die of SIGBUS. The reader runs in a child so that a signal is reported, not fatal. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "config_writer.h"

static const char *const uuids[] = {"GPU-fa4e6770-0000-4000-8000-000000000000"};
static atomic_int stop;
static atomic_long wrong;

static void *reader(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    uint64_t limit = vc_config_memory_limit(0);
    if (limit != 0 && limit != (64ull << 20)) atomic_fetch_add(&wrong, 1);
  }
  return NULL;
}

/* Child: a reader thread while this thread truncates and rewrites the file in place. */
static int truncate_while_reading(const char *path, const unsigned char *buf, size_t len) {
  char err[300];
  if (vc_config_open(path, err, sizeof err) != 0) return 10;
  pthread_t t;
  if (pthread_create(&t, NULL, reader, NULL) != 0) return 11;
  int fd = open(path, O_WRONLY);
  for (int i = 0; fd >= 0 && i < 2000; i++) {
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, len, 0) != (ssize_t)len) return 12;
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);
  if (fd < 0) return 13;
  close(fd);
  if (atomic_load(&wrong) != 0) return 14;
  return vc_config_memory_limit(0) == (64ull << 20) ? 0 : 15;
}

int main(void) {
  char dir[] = "/tmp/vcuda-cfgtrunc-XXXXXX", path[64];
  if (!mkdtemp(dir)) return 1;
  snprintf(path, sizeof path, "%s/vcuda.conf", dir);
  unsigned char buf[1024];
  uint64_t limits[] = {64ull << 20};
  size_t len = build_config(buf, "/tmp/none.region", 1, uuids, limits, 0);
  CHECK(write_file(path, buf, len) == 0, "write config");
  pid_t pid = fork();
  if (pid == 0) _exit(truncate_while_reading(path, buf, len));
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "child ran");
  CHECK(!WIFSIGNALED(status), "the reader died of signal %d (SIGBUS is %d)", WTERMSIG(status), SIGBUS);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader saw only the limit or 0, then the limit (exit %d)",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  unlink(path);
  rmdir(dir);
  return check_failures ? 1 : 0;
}
