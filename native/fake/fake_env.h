/* The simulated machine as described by the environment (read once per process):
 *   FAKEGPU_DEVICES   "2x81559" (count x MiB) or a list "81559,40960"; default "1x81559"
 *   FAKEGPU_SMS       SMs per device (default 132)
 *   FAKEGPU_STATE     host-wide shared state file (default /tmp/fakegpu-<uid>.state)
 *   FAKEGPU_KERNEL_US cost of one wave of a kernel, microseconds (default 10)
 *   FAKEGPU_SAMPLE_MS busy-time accounting period, ms (default 100): the driver's exact figures
 *   FAKEGPU_NVML_SAMPLE_MS NVML's sampling interval, ms (default 167, about 1/6 s)
 *   FAKEGPU_NVML_DELAY_MS  how long after an interval ends NVML publishes its samples (default 100)
 *   FAKEGPU_NVML_STAMP     what a sample's timeStamp marks: "end" of its interval (default) or when
 *                     it was "published" (late by the delay)
 *   FAKEGPU_NVML_UTIL_INFO 0: nvmlDeviceGetProcessesUtilizationInfo answers NOT_SUPPORTED, as a driver
 *                     without it does (default 1)
 *   FAKEGPU_NVML_PROCESS_UTIL 0: per-process utilization (both calls) answers NOT_SUPPORTED on every
 *                     card, as on MIG, while the rest of NVML works (default 1)
 *   FAKEGPU_MIG       cards in MIG mode when the state is created: "all" or node indexes "0,2"
 *                     (default none; later: `fakegpu-ctl mig DEVICE on|off`)
 *   FAKEGPU_UTIL_WINDOW_MS window of nvmlDeviceGetUtilizationRates, ms (default 1000)
 *   FAKEGPU_CONTEXT_MIB device memory a context takes (default 0)
 *   FAKEGPU_UVM_NS_PER_MIB what a kernel pays per MiB of its process's managed memory that is on
 *                     the host (migrated back, or read across the bus), ns (default 40000: 25 GiB/s)
 *   FAKEGPU_CONCURRENT_MANAGED 0: the device reports no concurrent managed access (default 1)
 *   FAKEGPU_NAME      device name (default "NVIDIA H100 80GB HBM3")
 *   FAKEGPU_UUID_SEED number mixed into UUIDs so simulated nodes differ (default 0)
 *   FAKEGPU_NVLINK    0 disables NVLink (default: on when there are 2+ devices)
 *   FAKEGPU_VISIBLE_DEVICES  the devices this process enumerates, in order: node indexes or UUIDs
 *                     ("3,1", "GPU-…,GPU-…"), "all" (the default), or "none"/"void". The other
 *                     variables describe the whole node; this one is what the container runtime
 *                     exposes to one container (NVIDIA_VISIBLE_DEVICES). */
#ifndef FAKEGPU_ENV_H
#define FAKEGPU_ENV_H

#include <stddef.h>
#include <stdint.h>

#define FG_MAX_DEVICES 16

struct fg_env {
  int device_count;
  uint64_t memory_mib[FG_MAX_DEVICES];
  uint32_t sms;
  char state_path[512];
  uint64_t wave_ns;
  uint64_t sample_ns;
  uint64_t util_window_ns;
  uint64_t nvml_sample_ns;
  uint64_t nvml_delay_ns;
  int nvml_stamp_published; /* FAKEGPU_NVML_STAMP=published */
  int nvml_util_info;       /* FAKEGPU_NVML_UTIL_INFO=0: nvmlDeviceGetProcessesUtilizationInfo is NOT_SUPPORTED */
  int nvml_process_util;    /* FAKEGPU_NVML_PROCESS_UTIL=0: no per-process utilization at all */
  int nvml_one_process;     /* FAKEGPU_NVML_ONE_PROCESS=1: an interval's busy time all to its busiest process (an H200's answer) */
  char mig[256];            /* FAKEGPU_MIG as given ("" when unset) */
  uint64_t context_bytes;
  uint64_t uvm_ns_per_mib;
  int concurrent_managed;
  char name[96];
  uint32_t uuid_seed;
  int nvlink;
  char visible[1024]; /* FAKEGPU_VISIBLE_DEVICES as given ("" when unset) */
};

/* Parsed once; never NULL (bad values fall back to defaults with a message on stderr). */
const struct fg_env *fg_env(void);

/* Pure parser for FAKEGPU_DEVICES; returns the count or -1. */
int fg_parse_devices(const char *spec, uint64_t *mib, int max);

/* Deterministic identity of node device `index` (FAKEGPU_VISIBLE_DEVICES does not apply). */
void fg_device_uuid(int index, unsigned char out[16]);
void fg_device_uuid_text(int index, char out[48]);
unsigned int fg_device_pci_bus(int index);
/* The same for an explicit seed (pure). */
void fg_uuid_text_of(uint32_t seed, int index, char out[48]);

/* Pure parser for FAKEGPU_VISIBLE_DEVICES over a node of `node_count` devices whose UUIDs come from
 * `seed`: fills nodes[ordinal] = node index and returns the count (0..max). Unset, "" or "all":
 * every device in node order; "none" or "void": 0. -1 for an entry that names no device or names
 * one twice, with the reason in err (the caller then shows no device: fail closed, as the
 * container runtime refuses a container whose device list it cannot satisfy). */
int fg_parse_visible(const char *spec, int node_count, uint32_t seed, int *nodes, int max, char *err, size_t errlen);
/* The same, asking `lookup(entry, ctx)` for an entry that names no card (a MIG device's UUID):
 * the index it returns, or -1. */
typedef int (*fg_visible_lookup)(const char *entry, void *ctx);
int fg_parse_visible_with(const char *spec, int node_count, uint32_t seed, fg_visible_lookup lookup, void *ctx,
                          int *nodes, int max, char *err, size_t errlen);

#endif
