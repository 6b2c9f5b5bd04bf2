/* Fake driver: the memory table's lock is held by the forking thread around fork, so a child
 * forked while another thread allocates does not inherit it locked. */
#include <pthread.h>

#include "fake_mem.h"

static void fork_prepare(void) { pthread_mutex_lock(&fg_mem_lock); }
static void fork_release(void) { pthread_mutex_unlock(&fg_mem_lock); }
__attribute__((constructor)) static void register_fork_handlers(void) {
  pthread_atfork(fork_prepare, fork_release, fork_release);
}
