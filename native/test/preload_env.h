/* What the end-to-end C tests share: clients run under LD_PRELOAD=libvcuda.so over the fake
 * driver from $VC_BUILD (default build/), and a scratch directory under /tmp that the test removes
 * with everything the cases left in it. */
#ifndef VCUDA_TEST_PRELOAD_ENV_H
#define VCUDA_TEST_PRELOAD_ENV_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* Fills `build` (bn bytes) and the path of test client `client_name` (cn bytes), makes the scratch
 * directory /tmp/vcuda-STEM-XXXXXX in `dir` (dn bytes) and sets the preload environment. */
static void preload_env(char *build, size_t bn, char *client, size_t cn, const char *client_name, char *dir,
                        size_t dn, const char *stem) {
  const char *b = getenv("VC_BUILD");
  snprintf(build, bn, "%s", b ? b : "build");
  snprintf(client, cn, "%s/test/%s", build, client_name);
  snprintf(dir, dn, "/tmp/vcuda-%s-XXXXXX", stem);
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char v[1024];
  snprintf(v, sizeof v, "%s/libvcuda.so", build);
  setenv("LD_PRELOAD", v, 1);
  snprintf(v, sizeof v, "%s/fake", build);
  setenv("LD_LIBRARY_PATH", v, 1);
}

/* The scratch directory and every file the cases left in it: a test run leaves nothing in /tmp. */
static void remove_scratch(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

#endif
