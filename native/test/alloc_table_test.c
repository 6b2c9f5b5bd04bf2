/* The per-process allocation table as plain functions: entries survive growth and tombstones,
 * and VMM memory is given back exactly once, after release AND the last unmap, in either order. */
#include <errno.h>

#include "alloc_table.h"
#include "check.h"

static void test_growth(void) {
  for (uint64_t i = 1; i <= 20000; i++) CHECK(vc_alloc_put(VC_ALLOC_LINEAR, i << 12, 0, i) == 0, "put %llu", (unsigned long long)i);
  for (uint64_t i = 1; i <= 20000; i += 2) {
    struct vc_alloc a;
    CHECK(vc_alloc_take(VC_ALLOC_LINEAR, i << 12, &a) == 0 && a.bytes == i, "take %llu", (unsigned long long)i);
  }
  CHECK(vc_alloc_count() == 10000, "half left: %llu", (unsigned long long)vc_alloc_count());
  struct vc_alloc a;
  CHECK(vc_alloc_take(VC_ALLOC_LINEAR, 1 << 12, &a) == -ENOENT, "taken twice");
  CHECK(vc_alloc_take(VC_ALLOC_ARRAY, 2 << 12, &a) == -ENOENT, "kinds are separate key spaces");
  for (uint64_t i = 2; i <= 20000; i += 2) CHECK(vc_alloc_take(VC_ALLOC_LINEAR, i << 12, &a) == 0, "drain");
  CHECK(vc_alloc_count() == 0, "empty");
}

static void test_vmm(void) {
  int dev = -1;
  uint64_t bytes = 0;
  /* create -> map twice -> release -> unmap, unmap: given back at the last unmap */
  CHECK(vc_alloc_put(VC_ALLOC_VMM_HANDLE, 7, 1, 4096) == 0, "create");
  CHECK(vc_alloc_vmm_map(0x1000, 7) == 0 && vc_alloc_vmm_map(0x2000, 7) == 0, "map twice");
  CHECK(vc_alloc_vmm_release(7, &dev, &bytes) == 0, "release while mapped keeps it");
  CHECK(vc_alloc_vmm_unmap(0x1000, &dev, &bytes) == 0, "one mapping left");
  CHECK(vc_alloc_vmm_unmap(0x2000, &dev, &bytes) == 1 && dev == 1 && bytes == 4096, "last unmap gives it back");
  CHECK(vc_alloc_vmm_release(7, &dev, &bytes) == 0, "never twice");
  /* create -> map -> unmap -> release: given back at the release */
  CHECK(vc_alloc_put(VC_ALLOC_VMM_HANDLE, 8, 0, 8192) == 0 && vc_alloc_vmm_map(0x3000, 8) == 0, "create, map");
  CHECK(vc_alloc_vmm_unmap(0x3000, &dev, &bytes) == 0, "unmapped but not released");
  CHECK(vc_alloc_vmm_release(8, &dev, &bytes) == 1 && bytes == 8192, "release gives it back");
  /* mappings of handles this process did not create (imported) are ignored */
  CHECK(vc_alloc_vmm_map(0x4000, 99) == 0 && vc_alloc_vmm_unmap(0x4000, &dev, &bytes) == 0, "imported handle");
  CHECK(vc_alloc_count() == 0, "nothing left: %llu", (unsigned long long)vc_alloc_count());
}

int main(void) {
  test_growth();
  test_vmm();
  return check_failures ? 1 : 0;
}
