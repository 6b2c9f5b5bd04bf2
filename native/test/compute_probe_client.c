/* Ground truth for the compute tests and benchmark: reads the fake driver's own busy-time
 * accounting (fake_state.h, the per-period buckets every process's kernels are credited to) and
 * prints each completed period of the first device it sees (FAKEGPU_VISIBLE_DEVICES, as the
 * tenants do: a card, or a MIG device named by its MIG- UUID) as one line, for SECONDS:
 *
 *   uuid GPU-…|MIG-… sms N sample_ns N   (first line)
 *   period P card BUSY_NS PID:NS PID:NS…  (one per completed period)
 *
 * It never calls the CUDA API, so it does not take part in time-slicing. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "fake_env.h"
#include "fake_state.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: compute_probe_client SECONDS\n");
    return 2;
  }
  double seconds = strtod(argv[1], NULL);
  struct fg_state *st = fg_state();
  if (!st) return 2;
  int node = fg_node(0); /* state index: a card's node index, or a MIG device's */
  if (node < 0) {
    fprintf(stderr, "compute_probe_client: no visible device\n");
    return 2;
  }
  char uuid[48];
  fg_dev_uuid_text(node, uuid);
  uint64_t sample_ns = st->sample_ns;
  printf("uuid %s sms %u sample_ns %llu\n", uuid, fg_dev_sms(node), (unsigned long long)sample_ns);
  fflush(stdout);

  uint64_t start = fg_now_ns();
  uint64_t end = start + (uint64_t)(seconds * 1e9);
  uint64_t next_period = start / sample_ns + 1; /* the first period that starts after us */
  struct timespec nap = {0, 20 * 1000 * 1000};
  while (fg_now_ns() < end) {
    nanosleep(&nap, NULL);
    uint64_t current = fg_now_ns() / sample_ns;
    for (; next_period < current; next_period++) {
      struct fg_device *dev = &st->devices[node];
      struct fg_bucket *b = &dev->buckets[next_period % FG_BUCKETS];
      fg_lock();
      printf("period %llu card %llu", (unsigned long long)next_period,
             (unsigned long long)(b->period == next_period ? b->busy_ns : 0));
      if (b->period == next_period) {
        for (int i = 0; i < FG_MAX_PROCS; i++) {
          if (b->proc_busy_ns[i]) printf(" %u:%llu", st->procs[i].pid, (unsigned long long)b->proc_busy_ns[i]);
        }
      }
      fg_unlock();
      printf("\n");
      fflush(stdout);
    }
  }
  return 0;
}
