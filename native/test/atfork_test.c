/* fork while other threads hold libvcuda's process-local locks (limit file, allocation table):
 * the child must get them unlocked. Each child takes both locks and exits; a child that is still
 * running after its deadline inherited a lock held by a thread it does not have. The pool lock
 * (hooks_pool.c) is checked end to end by leak_test.c's "fork" scenario. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc_table.h"
#include "check.h"
#include "config.h"
#include "config_writer.h"

static const char *const uuids[] = {"GPU-fa4e6770-0000-4000-8000-000000000000"};
static atomic_int stop;

static void *hammer(void *arg) {
  uint64_t key = (uint64_t)(uintptr_t)arg << 32;
  struct vc_alloc a;
  while (!atomic_load(&stop)) {
    vc_alloc_put(VC_ALLOC_LINEAR, ++key, 0, 1);
    vc_alloc_take(VC_ALLOC_LINEAR, key, &a);
    (void)vc_config_memory_limit(0);
  }
  return NULL;
}

/* 0 when the child exited by itself within 5 s; 1 when it had to be killed. */
static int wait_deadline(pid_t pid) {
  for (int i = 0; i < 500; i++) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return 1;
}

int main(void) {
  char dir[] = "/tmp/vcuda-atfork-XXXXXX", path[64], err[300];
  if (!mkdtemp(dir)) return 1;
  snprintf(path, sizeof path, "%s/vcuda.conf", dir);
  unsigned char buf[1024];
  uint64_t limits[] = {64ull << 20};
  size_t len = build_config(buf, "/tmp/none.region", 1, uuids, limits, 0);
  CHECK(write_file(path, buf, len) == 0 && vc_config_open(path, err, sizeof err) == 0, "config: %s", err);
  pthread_t t[3];
  for (uintptr_t i = 0; i < 3; i++) pthread_create(&t[i], NULL, hammer, (void *)(i + 1));
  int hung = 0;
  for (int i = 0; i < 200 && !hung; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      struct vc_alloc a;
      vc_alloc_put(VC_ALLOC_LINEAR, 1, 0, 1);
      vc_alloc_take(VC_ALLOC_LINEAR, 1, &a);
      _exit(vc_config_memory_limit(0) == (64ull << 20) ? 0 : 2);
    }
    hung = pid < 0 || wait_deadline(pid);
  }
  CHECK(!hung, "a child forked while other threads held the locks could not take them");
  atomic_store(&stop, 1);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  unlink(path);
  rmdir(dir);
  return check_failures ? 1 : 0;
}
