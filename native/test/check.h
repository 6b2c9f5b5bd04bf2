/* Minimal test harness: CHECK records a failure with its location; tests exit non-zero on any. */
#ifndef VCUDA_TEST_CHECK_H
#define VCUDA_TEST_CHECK_H

#include <stdio.h>

static int check_failures;
#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      check_failures++;                                     \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);  \
      fprintf(stderr, __VA_ARGS__);                         \
      fputc('\n', stderr);                                  \
    }                                                       \
  } while (0)

#endif
