/* The driver hands out an address again whose free libvcuda never saw (it freed the memory by
 * itself, e.g. at a context reset): recording the new allocation must release the old charge,
 * not overwrite the entry and strand its bytes in the budget. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "alloc_table.h"
#include "charge.h"
#include "check.h"
#include "region.h"

int main(void) {
  char dir[] = "/tmp/vcuda-reuse-XXXXXX", path[64], err[200];
  if (!mkdtemp(dir)) return 1;
  snprintf(path, sizeof path, "%s/region", dir);
  CHECK(vc_region_open(path, 1, err, sizeof err) == 0, "open: %s", err);

  struct vc_alloc old = {0}, v = {.bytes = 7, .device = 0, .ctx = 0xc7}, got;
  CHECK(vc_alloc_record(VC_ALLOC_LINEAR, 0x1000, &v, &old) == 0, "first record");
  v.bytes = 9;
  CHECK(vc_alloc_record(VC_ALLOC_LINEAR, 0x1000, &v, &old) == 1 && old.bytes == 7 && old.ctx == 0xc7,
        "a key still recorded is reported with its old value");
  CHECK(vc_alloc_take(VC_ALLOC_LINEAR, 0x1000, &got) == 0 && got.bytes == 9, "the new value replaced it");

  CHECK(vc_region_reserve(0, 100, 1000) == 0 && vc_charge_record(VC_ALLOC_LINEAR, 0x2000, 0, 100, 0) == 0, "100");
  CHECK(vc_region_reserve(0, 60, 1000) == 0 && vc_charge_record(VC_ALLOC_LINEAR, 0x2000, 0, 60, 0) == 0, "reused");
  CHECK(vc_region_used(0) == 60, "the old 100 bytes were released: %llu", (unsigned long long)vc_region_used(0));
  CHECK(vc_alloc_count() == 1, "one entry");

  vc_region_close();
  unlink(path);
  rmdir(dir);
  return check_failures ? 1 : 0;
}
