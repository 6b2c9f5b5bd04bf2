#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int current_level(void) {
  static int level = -1;
  int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
  if (l >= 0) return l;
  const char *env = getenv("VCUDA_LOG_LEVEL");
  l = VC_LOG_WARN;
  if (env) {
    if (strcmp(env, "error") == 0) l = VC_LOG_ERROR;
    else if (strcmp(env, "info") == 0) l = VC_LOG_INFO;
    else if (strcmp(env, "debug") == 0) l = VC_LOG_DEBUG;
  }
  __atomic_store_n(&level, l, __ATOMIC_RELAXED);
  return l;
}

void vc_log(enum vc_log_level level, const char *fmt, ...) {
  if ((int)level > current_level()) return;
  static const char *names[] = {"error", "warn", "info", "debug"};
  char line[1024];
  int n = snprintf(line, sizeof line, "vcuda: %s: [pid %d] ", names[level], (int)getpid());
  if (n < 0 || (size_t)n >= sizeof line) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = strlen(line);
  line[len] = '\n';
  /* One write(2) so lines of concurrent processes do not interleave. */
  ssize_t rc = write(STDERR_FILENO, line, len + 1);
  (void)rc;
}
