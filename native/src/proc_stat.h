/* Process identity from /proc: a pid plus its start time names one process, even after the pid
 * is reused. */
#ifndef VCUDA_PROC_STAT_H
#define VCUDA_PROC_STAT_H

#include <stdint.h>
#include <sys/types.h>

/* Reads the state letter and start time (field 22, clock ticks since boot) of `pid`.
 * 0, or -1 when the process is gone. */
int vc_proc_stat(pid_t pid, char *state, uint64_t *start_ticks);

#endif
