/* Leveled logging to stderr with a "vcuda:" prefix. Never called on the launch fast path. */
#ifndef VCUDA_LOG_H
#define VCUDA_LOG_H

enum vc_log_level { VC_LOG_ERROR = 0, VC_LOG_WARN = 1, VC_LOG_INFO = 2, VC_LOG_DEBUG = 3 };

/* Level from VCUDA_LOG_LEVEL (error|warn|info|debug, default warn), read once. */
void vc_log(enum vc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Logs at most once per process for a given `once` flag (a static int at the call site). */
#define VC_LOG_ONCE(once, level, ...)                                                   \
  do {                                                                                   \
    if (!__atomic_exchange_n(&(once), 1, __ATOMIC_RELAXED)) vc_log((level), __VA_ARGS__); \
  } while (0)

#endif
