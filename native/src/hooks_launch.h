/* Launch-family hooks: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel,
 * cuLaunchCooperativeKernelMultiDevice, cuGraphLaunch and their _ptsz variants.
 * Owned by the compute limiter (limiter.c); the cuGetProcAddress table in hooks_cuda.c asks
 * this module for every symbol it resolves. */
#ifndef VCUDA_HOOKS_LAUNCH_H
#define VCUDA_HOOKS_LAUNCH_H

#include <stdint.h>

/* Returns the hook that replaces `real_fn` for `symbol` as the driver resolved it for
 * (cuda_version, flags), remembering `real_fn` as what the hook forwards to; NULL when
 * `symbol` is not a launch-family entry point. Thread-safe, idempotent. */
void *vc_launch_hook_wrap(const char *symbol, int cuda_version, uint64_t flags, void *real_fn);

#endif
