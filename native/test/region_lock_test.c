/* Every wait for the region lock is bounded and a lock that can never be released is recovered:
 * an owner that died outside the robust-list protocol (a region that outlived a node crash, or a
 * process that took the word without glibc), and lock words that are plain garbage. Each
 * reservation runs in a child with a deadline, so a hang is reported instead of hanging the test. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "region.h"

#define LOCK_OFFSET 64 /* native/README.md: pthread_mutex_t at 64 */

static char path[128];

static unsigned char *map_raw(void) {
  int fd = open(path, O_RDWR);
  unsigned char *p = mmap(NULL, VC_REGION_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

/* Reserves 1 byte in a child: 0 when it succeeded within `ms`, 1 when refused, 2 when it hung. */
static int reserve_within(unsigned ms) {
  pid_t pid = fork();
  if (pid == 0) {
    char err[200];
    if (vc_region_open(path, 1, err, sizeof err) != 0) _exit(3);
    int rc = vc_region_reserve(0, 1, 100);
    if (rc == 0) vc_region_release(0, 1);
    _exit(rc == 0 ? 0 : 1);
  }
  for (unsigned waited = 0; waited < ms; waited += 10) {
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return 2;
}

/* A child takes the lock word the way glibc does but is not on its robust list, then exits. */
static void test_dead_owner_off_the_robust_list(unsigned char *raw) {
  pid_t child = fork();
  if (child == 0) {
    _Atomic uint32_t *word = (_Atomic uint32_t *)(raw + LOCK_OFFSET);
    uint32_t zero = 0;
    _exit(atomic_compare_exchange_strong(word, &zero, (uint32_t)gettid()) ? 0 : 1);
  }
  int status;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child took the lock word");
  CHECK(reserve_within(3000) == 0, "a lock whose owner is dead is recovered within a bounded wait");
}

static void test_garbage(unsigned char *raw) {
  *(_Atomic uint32_t *)(raw + LOCK_OFFSET) = 0x3ffffff0u; /* a thread id no kernel hands out */
  CHECK(reserve_within(3000) == 0, "a garbage owner id is recovered");
  memset(raw + LOCK_OFFSET, 0xa5, sizeof(pthread_mutex_t));
  CHECK(reserve_within(3000) == 0, "a mutex overwritten with garbage is recovered");
  /* A live owner that never lets go (here: this test's own pid, which is alive) is broken after
   * the stuck deadline rather than blocking every allocation forever. */
  *(_Atomic uint32_t *)(raw + LOCK_OFFSET) = (uint32_t)getpid();
  CHECK(reserve_within(9000) == 0, "a lock word stuck on a live id is recovered after the stuck deadline");
}

int main(void) {
  char dir[] = "/tmp/vcuda-rlock-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  snprintf(path, sizeof path, "%s/region", dir);
  char err[200];
  CHECK(vc_region_open(path, 1, err, sizeof err) == 0, "open: %s", err);
  CHECK(vc_region_reserve(0, 10, 100) == 0, "10 bytes held by this process");
  unsigned char *raw = map_raw();
  CHECK(raw != NULL, "map");
  if (raw) {
    test_dead_owner_off_the_robust_list(raw);
    test_garbage(raw);
    CHECK(vc_region_used(0) == 10, "counters rebuilt from the slots: %llu", (unsigned long long)vc_region_used(0));
    munmap(raw, VC_REGION_FILE_SIZE);
  }
  vc_region_close();
  unlink(path);
  rmdir(dir);
  return check_failures ? 1 : 0;
}
