/* Test controls exported by the fake driver (dlsym them, or link the fake libraries):
 * libcuda.so.1:      fakegpu_set_function_cost_ns, fakegpu_graph_set_cost_ns, fakegpu_device_used_bytes,
 *                    fakegpu_managed_residency
 * libnvidia-ml.so.1: fakegpu_inject_xid (also `fakegpu-ctl xid DEV XID`) */
#ifndef FAKEGPU_H
#define FAKEGPU_H

#include <stdint.h>

#include "vc_cuda.h"

/* cuFuncSetAttribute(f, FAKEGPU_FUNC_ATTRIBUTE_WAVE_US, us): the same as the call below, in µs. */
#define FAKEGPU_FUNC_ATTRIBUTE_WAVE_US 0x7FAC0001

/* Cost of one wave of `f` (0 restores FAKEGPU_KERNEL_US). */
int fakegpu_set_function_cost_ns(CUfunction f, uint64_t wave_ns);
/* Cost of one launch of graphs instantiated from `g` (captured launches add to it). */
int fakegpu_graph_set_cost_ns(CUgraph g, uint64_t cost_ns);
/* Bytes device `dev` has allocated, all processes (libcuda.so.1). */
uint64_t fakegpu_device_used_bytes(int dev);
/* This process's managed memory on CUDA ordinal `dev`: bytes resident on the device, bytes on the
 * host (evicted, or never fitted), and how many times an ordinary allocation evicted some
 * (libcuda.so.1). 0, or -1 for an unknown device. */
int fakegpu_managed_residency(int dev, uint64_t *resident, uint64_t *host, uint64_t *evictions);
/* Queues an Xid event on device `index` for nvmlEventSetWait_v2. 0 or -1. */
int fakegpu_inject_xid(unsigned int index, unsigned long long xid);

#endif
