/* The in-process compute sensor: the container's own GPU busy time per device, measured with
 * timing events around sampled launches and added to the region device block's busy-ns counter
 * (+32, all processes of the container; contract/region-layout.ts). The node agent turns it into
 * measured shares where NVML has no per-process utilization (MIG). Law and cost: native/COMPUTE.md,
 * "The in-process sensor".
 *
 * Called only from the launch hooks' cold path (hooks_launch.c), once per in-flight marker: the
 * launch fast path makes no call here. Per thread and config record; not async-signal-safe. */
#ifndef VCUDA_SENSOR_H
#define VCUDA_SENSOR_H

#include <stdint.h>

#include "vc_cuda.h"

struct vc_device_block;

/* Before launch `launch_ns` (its estimated cost) on `stream` of context `ctx`, with `charged_ns` the
 * thread's charges on record `rec` including this launch: adds the busy time of completed samples
 * to `block`, then prepares a sample of this launch when a slot is free. 1 when the launch is to
 * be timed: the caller then calls vc_sensor_start right before handing it to the driver and
 * vc_sensor_end right after (as close as can be: on a stream that ran dry the start event is
 * reached at once, so what runs between the two calls is counted too). The caller has checked
 * that `stream` is not being captured. */
int vc_sensor_begin(int rec, struct vc_device_block *block, CUcontext ctx, CUstream stream, uint64_t charged_ns,
                    uint64_t launch_ns);

/* Records the prepared sample's start event. */
void vc_sensor_start(void);

/* After the timed launch: `rc` is what the driver answered. Records the end event on success;
 * otherwise the sample is dropped and its weight passes to the next one. */
void vc_sensor_end(CUresult rc);

/* Adds the busy time of this thread's completed samples on record `rec` (while it waits for
 * tokens, so the counter does not lag by a throttled tenant's wait). */
void vc_sensor_poll(int rec);

/* The busy time one sample stands for: the sampled launch's measured `elapsed_ns`, scaled by the
 * charges it represents (`weight_ns`, every charge since the previous sample) over its own
 * (`launch_ns`). Pure; saturates instead of overflowing. */
uint64_t vc_sensor_scaled_ns(uint64_t elapsed_ns, uint64_t weight_ns, uint64_t launch_ns);

#endif
