/** nvmlReturn_t values the NVML bindings act on (nvml.h), and koffi's function type for them. */
import type * as K from 'koffi';

export const NVML_SUCCESS = 0;
export const NVML_ERROR_INVALID_ARGUMENT = 2;
export const NVML_ERROR_NOT_SUPPORTED = 3;
export const NVML_ERROR_NOT_FOUND = 6;
export const NVML_ERROR_INSUFFICIENT_SIZE = 7;
export const NVML_ERROR_TIMEOUT = 10;
export const NVML_ERROR_FUNCTION_NOT_FOUND = 13;
export const NVML_ERROR_GPU_IS_LOST = 15;

// biome-ignore lint/suspicious/noExplicitAny: foreign functions take and return untyped values.
export type NvmlFn = K.KoffiFunc<(...args: any[]) => any>;
