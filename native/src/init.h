/* Lazy process initialisation: limit file + accounting region, once, at the first CUDA or NVML
 * call that needs them (not at load: libvcuda is preloaded into every process of a container,
 * most of which never touch a GPU). */
#ifndef VCUDA_INIT_H
#define VCUDA_INIT_H

#include <stdint.h>

/* 0 when the limit file and region are usable; -1 when they are not (the reason was logged once
 * on stderr and every allocation is refused: fail closed). */
int vc_init_ensure(void);

/* Why vc_init_ensure failed ("" when it did not). */
const char *vc_init_error(void);

/* Bytes charged once per (process, device) for the driver context; VCUDA_CONTEXT_OVERHEAD_MIB,
 * default 300 MiB. */
uint64_t vc_init_context_overhead_bytes(void);

#endif
