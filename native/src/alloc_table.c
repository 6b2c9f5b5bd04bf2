/* Open-addressing hash table (linear probing, tombstones) behind one mutex. Allocation calls
 * cost microseconds in the driver, so a lock here is not a bottleneck; the launch path never
 * comes here. */
#include "alloc_table.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

enum { SLOT_EMPTY = 0, SLOT_USED = 1, SLOT_TOMB = 2 };

struct entry {
  uint64_t key;
  uint8_t kind;
  uint8_t state;
  struct vc_alloc value;
};

static struct {
  pthread_mutex_t lock;
  struct entry *slots;
  uint64_t capacity; /* power of two */
  uint64_t used;     /* live entries */
  uint64_t filled;   /* live + tombstones */
} t = {.lock = PTHREAD_MUTEX_INITIALIZER};
VC_FORK_SAFE_MUTEX(t.lock, VC_ATFORK_ALLOC_TABLE)

static uint64_t hash(uint8_t kind, uint64_t key) {
  uint64_t x = key ^ ((uint64_t)kind << 56);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

static struct entry *find_locked(uint8_t kind, uint64_t key) {
  if (!t.slots) return NULL;
  uint64_t mask = t.capacity - 1;
  for (uint64_t i = hash(kind, key) & mask, n = 0; n < t.capacity; i = (i + 1) & mask, n++) {
    struct entry *e = &t.slots[i];
    if (e->state == SLOT_EMPTY) return NULL;
    if (e->state == SLOT_USED && e->kind == kind && e->key == key) return e;
  }
  return NULL;
}

static int grow_locked(void) {
  uint64_t cap = t.capacity ? t.capacity * 2 : 1024;
  if (t.used * 4 < t.capacity) cap = t.capacity; /* mostly tombstones: rehash in place */
  struct entry *slots = calloc(cap, sizeof *slots);
  if (!slots) return -ENOMEM;
  for (uint64_t i = 0; i < t.capacity; i++) {
    struct entry *e = &t.slots[i];
    if (e->state != SLOT_USED) continue;
    uint64_t j = hash(e->kind, e->key) & (cap - 1);
    while (slots[j].state == SLOT_USED) j = (j + 1) & (cap - 1);
    slots[j] = *e;
  }
  free(t.slots);
  t.slots = slots;
  t.capacity = cap;
  t.filled = t.used;
  return 0;
}

/* 0 inserted; 1 replaced an entry still recorded under the key (old value in *replaced). */
static int insert_locked(uint8_t kind, uint64_t key, const struct vc_alloc *value, struct vc_alloc *replaced) {
  struct entry *existing = find_locked(kind, key);
  if (existing) {
    if (replaced) *replaced = existing->value;
    existing->value = *value;
    return 1;
  }
  if ((t.filled + 1) * 10 > t.capacity * 7 && grow_locked() != 0) return -ENOMEM;
  uint64_t mask = t.capacity - 1;
  uint64_t i = hash(kind, key) & mask;
  while (t.slots[i].state == SLOT_USED) i = (i + 1) & mask;
  if (t.slots[i].state == SLOT_EMPTY) t.filled++;
  t.slots[i] = (struct entry){.key = key, .kind = kind, .state = SLOT_USED, .value = *value};
  t.used++;
  return 0;
}

static void remove_locked(struct entry *e) {
  e->state = SLOT_TOMB;
  t.used--;
}

int vc_alloc_record(enum vc_alloc_kind kind, uint64_t key, const struct vc_alloc *value, struct vc_alloc *replaced) {
  pthread_mutex_lock(&t.lock);
  int rc = insert_locked((uint8_t)kind, key, value, replaced);
  pthread_mutex_unlock(&t.lock);
  return rc;
}

int vc_alloc_drop_if(int (*match)(enum vc_alloc_kind kind, const struct vc_alloc *a, const void *arg),
                     void (*each)(enum vc_alloc_kind kind, const struct vc_alloc *a, void *arg), void *arg) {
  int n = 0;
  pthread_mutex_lock(&t.lock);
  for (uint64_t i = 0; i < t.capacity; i++) {
    struct entry *e = &t.slots[i];
    if (e->state != SLOT_USED || !match((enum vc_alloc_kind)e->kind, &e->value, arg)) continue;
    each((enum vc_alloc_kind)e->kind, &e->value, arg);
    remove_locked(e);
    n++;
  }
  pthread_mutex_unlock(&t.lock);
  return n;
}

int vc_alloc_put(enum vc_alloc_kind kind, uint64_t key, int device, uint64_t bytes) {
  struct vc_alloc v = {.bytes = bytes, .device = device};
  int rc = vc_alloc_record(kind, key, &v, NULL);
  return rc < 0 ? rc : 0;
}

int vc_alloc_take(enum vc_alloc_kind kind, uint64_t key, struct vc_alloc *out) {
  pthread_mutex_lock(&t.lock);
  struct entry *e = find_locked((uint8_t)kind, key);
  if (e) {
    *out = e->value;
    remove_locked(e);
  }
  pthread_mutex_unlock(&t.lock);
  return e ? 0 : -ENOENT;
}

int vc_alloc_vmm_map(uint64_t va, uint64_t handle) {
  pthread_mutex_lock(&t.lock);
  struct entry *h = find_locked(VC_ALLOC_VMM_HANDLE, handle);
  int rc = 0;
  if (h) {
    struct vc_alloc m = {.handle = handle, .device = h->value.device};
    rc = insert_locked(VC_ALLOC_VMM_MAPPING, va, &m, NULL);
    if (rc > 0) rc = 0; /* a mapping we never saw unmapped: the driver reused the address */
    h = find_locked(VC_ALLOC_VMM_HANDLE, handle); /* insert may have rehashed */
    if (rc == 0 && h) h->value.map_count++;
  }
  pthread_mutex_unlock(&t.lock);
  return rc;
}

static int drop_handle_if_done_locked(struct entry *h, int *device, uint64_t *bytes) {
  if (!h->value.released || h->value.map_count > 0) return 0;
  *device = h->value.device;
  *bytes = h->value.bytes;
  remove_locked(h);
  return 1;
}

int vc_alloc_vmm_unmap(uint64_t va, int *device, uint64_t *bytes) {
  pthread_mutex_lock(&t.lock);
  int done = 0;
  struct entry *m = find_locked(VC_ALLOC_VMM_MAPPING, va);
  if (m) {
    uint64_t handle = m->value.handle;
    remove_locked(m);
    struct entry *h = find_locked(VC_ALLOC_VMM_HANDLE, handle);
    if (h) {
      if (h->value.map_count > 0) h->value.map_count--;
      done = drop_handle_if_done_locked(h, device, bytes);
    }
  }
  pthread_mutex_unlock(&t.lock);
  return done;
}

int vc_alloc_vmm_release(uint64_t handle, int *device, uint64_t *bytes) {
  pthread_mutex_lock(&t.lock);
  int done = 0;
  struct entry *h = find_locked(VC_ALLOC_VMM_HANDLE, handle);
  if (h) {
    h->value.released = 1;
    done = drop_handle_if_done_locked(h, device, bytes);
  }
  pthread_mutex_unlock(&t.lock);
  return done;
}

uint64_t vc_alloc_count(void) {
  pthread_mutex_lock(&t.lock);
  uint64_t n = t.used;
  pthread_mutex_unlock(&t.lock);
  return n;
}
