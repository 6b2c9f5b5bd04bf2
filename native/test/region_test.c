/* The shared accounting region as plain functions: one budget across processes, dead-process
 * reclaim (kill -9, pid reuse), repair after a process died holding the lock, and a loud refusal
 * when every process slot is taken. The region file is also mapped directly here to stage states
 * (its layout is documented in native/README.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "region.h"

static char path[128];

static unsigned char *map_raw(void) {
  int fd = open(path, O_RDWR);
  unsigned char *p = mmap(NULL, VC_REGION_FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? NULL : p;
}

static uint64_t start_ticks_of(pid_t pid) {
  char p[64], buf[1024];
  snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
  int fd = open(p, O_RDONLY);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  char *s = strrchr(buf, ')');
  for (int f = 2; f < 22 && s; f++) s = strchr(s + 1, ' ');
  return s ? strtoull(s + 1, NULL, 10) : 0;
}

static void test_budget_and_kill9(void) {
  CHECK(vc_region_reserve(0, 60, 100) == 0, "60 of 100");
  CHECK(vc_region_reserve(0, 41, 100) == -ENOMEM, "101 > 100");
  CHECK(vc_region_reserve(1, 100, 100) == 0, "devices are separate budgets");
  vc_region_release(1, 100);
  pid_t child = fork();
  if (child == 0) {
    char err[200];
    if (vc_region_open(path, 2, err, sizeof err) != 0) _exit(2);
    if (vc_region_reserve(0, 40, 100) != 0) _exit(3);
    if (vc_region_reserve(0, 1, 100) != -ENOMEM) _exit(4); /* the parent's 60 count here too */
    raise(SIGKILL);
  }
  int status;
  waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status), "child was killed (status %d)", status);
  CHECK(vc_region_used(0) >= 60, "usage seen");
  CHECK(vc_region_reserve(0, 40, 100) == 0, "a refused reservation reclaims the dead process first");
  CHECK(vc_region_used(0) == 100, "60 + 40 after reclaim: %llu", (unsigned long long)vc_region_used(0));
  vc_region_release(0, 40);
}

static void test_pid_reuse(void) {
  unsigned char *raw = map_raw();
  CHECK(raw != NULL, "map");
  _Atomic uint32_t *hw = (_Atomic uint32_t *)(raw + 32);
  uint32_t k = atomic_load(hw);
  struct vc_process_slot *s = (struct vc_process_slot *)(raw + VC_REGION_SLOTS_OFFSET + VC_REGION_SLOT_SIZE * k);
  s->pid = 1; /* alive, but this slot's start time is not pid 1's: the pid was reused */
  s->start_ticks = start_ticks_of(1) + 12345;
  atomic_store(&s->used_bytes[0], 7);
  atomic_store(&s->state, VC_SLOT_LIVE);
  atomic_store(hw, k + 1);
  struct vc_device_block *b = (struct vc_device_block *)(raw + VC_REGION_HEADER_SIZE);
  atomic_fetch_add(&b->used_bytes, 7);
  CHECK(vc_region_reclaim_dead() == 1, "slot of a reused pid is freed");
  CHECK(atomic_load(&s->state) == VC_SLOT_FREE && vc_region_used(0) == 60, "its bytes came back");
  munmap(raw, VC_REGION_FILE_SIZE);
}

static void test_owner_died(void) {
  pid_t child = fork();
  if (child == 0) {
    unsigned char *raw = map_raw();
    if (!raw) _exit(2);
    pthread_mutex_lock((pthread_mutex_t *)(raw + 64));
    /* Half an update: the device counter moved, no slot says why. */
    struct vc_device_block *b = (struct vc_device_block *)(raw + VC_REGION_HEADER_SIZE);
    atomic_fetch_add(&b->used_bytes, 999);
    raise(SIGKILL);
  }
  waitpid(child, NULL, 0);
  CHECK(vc_region_reserve(0, 1, 100) == 0, "the lock is usable after its owner died");
  CHECK(vc_region_used(0) == 61, "counters rebuilt from the slots: %llu", (unsigned long long)vc_region_used(0));
  vc_region_release(0, 1);
}

static void test_slots_exhausted(void) {
  unsigned char *raw = map_raw();
  _Atomic uint32_t *hw = (_Atomic uint32_t *)(raw + 32);
  static uint8_t staged[VC_REGION_SLOT_CAPACITY];
  uint64_t init_start = start_ticks_of(1);
  for (uint32_t k = 0; k < VC_REGION_SLOT_CAPACITY; k++) {
    struct vc_process_slot *s = (struct vc_process_slot *)(raw + VC_REGION_SLOTS_OFFSET + VC_REGION_SLOT_SIZE * k);
    if (atomic_load(&s->state) != VC_SLOT_FREE) continue;
    staged[k] = 1;
    s->pid = 1; /* pid 1 is alive: these slots are not reclaimable */
    s->start_ticks = init_start;
    atomic_store(&s->state, VC_SLOT_LIVE);
  }
  atomic_store(hw, VC_REGION_SLOT_CAPACITY);
  pid_t child = fork();
  if (child == 0) {
    char err[200];
    if (vc_region_open(path, 2, err, sizeof err) != 0) _exit(2);
    _exit(vc_region_reserve(0, 1, 100) == -ENOSPC ? 0 : 5);
  }
  int status;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a process finding no free slot is refused (status %d)", status);
  for (uint32_t k = 0; k < VC_REGION_SLOT_CAPACITY; k++)
    if (staged[k])
      atomic_store(&((struct vc_process_slot *)(raw + VC_REGION_SLOTS_OFFSET + VC_REGION_SLOT_SIZE * k))->state,
                 VC_SLOT_FREE);
  munmap(raw, VC_REGION_FILE_SIZE);
}

int main(void) {
  char dir[] = "/tmp/vcuda-region-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  snprintf(path, sizeof path, "%s/region", dir);
  char err[200];
  CHECK(vc_region_open(path, 2, err, sizeof err) == 0, "open: %s", err);
  CHECK(vc_region_device(0) != NULL && vc_region_device(2) == NULL, "device blocks");
  CHECK((unsigned char *)vc_region_device(1) - (unsigned char *)vc_region_device(0) == VC_REGION_DEVICE_BLOCK_SIZE,
        "device block stride");
  test_budget_and_kill9();
  test_pid_reuse();
  test_owner_died();
  test_slots_exhausted();
  uint32_t pids[8];
  CHECK(vc_region_pids(pids, 8) >= 1 && pids[0] == (uint32_t)getpid(), "own pid listed");
  vc_region_close();
  unlink(path);
  rmdir(dir);
  return check_failures ? 1 : 0;
}
