/* MIG in the fake driver: the profile tables of the cards the fake models (fake_mig_profiles.c) and
 * the node-wide MIG state in the shared file (fake_mig.c).
 *
 * A card in MIG mode is split on two axes: 8 memory slices (where a GPU instance is placed: start
 * and size, from the profile's legal placements) and 7 compute slices (how many the GPU instances
 * take together). A compute instance inside a GPU instance is what CUDA and NVML see as a MIG
 * device: it takes one of the node's FG_MIG_SLOTS state devices (index FG_MAX_DEVICES + slot), with
 * the GPU instance's memory and its own SM count, kernel timeline and busy-time buckets. */
#ifndef FAKEGPU_MIG_H
#define FAKEGPU_MIG_H

#include <stddef.h>
#include <stdint.h>

#include "fake_env.h"

#define FG_MIG_SLOTS 32   /* MIG devices (compute instances) on the node */
#define FG_MIG_GIS 8      /* GPU instances per card (at most 7 fit) */
#define FG_MIG_CIS 8      /* compute instances per GPU instance (at most 7 fit) */
#define FG_MIG_MEMORY_SLICES 8
#define FG_MIG_COMPUTE_SLICES 7
#define FG_STATE_DEVICES (FG_MAX_DEVICES + FG_MIG_SLOTS)

/* One GPU-instance profile: NVML's profile index (NVML_GPU_INSTANCE_PROFILE_*), the profile ID
 * (`nvidia-smi mig -lgip`), its shape and its legal placements on the memory-slice axis. */
struct fg_gi_profile {
  unsigned int index;
  unsigned int id;
  const char *name; /* "1g.10gb" */
  unsigned int memory_slices;
  unsigned int compute_slices;
  unsigned int instances; /* at most this many at once */
  unsigned int sms;
  unsigned int copy_engines, decoders, encoders, jpegs, ofas;
  unsigned long long memory_mib;
  unsigned int placement_count;
  unsigned int placements[FG_MIG_MEMORY_SLICES]; /* legal start slices */
};

struct fg_mig_model {
  const char *card; /* "H100 80GB" */
  unsigned int profile_count;
  const struct fg_gi_profile *profiles;
};

/* The profile table of a card of `memory_mib` (the H100 80GB or the H200 141GB); NULL when the
 * card is not one the fake models as MIG-capable. */
const struct fg_mig_model *fg_mig_model_for(uint64_t memory_mib);
const struct fg_gi_profile *fg_mig_profile_by_index(const struct fg_mig_model *m, unsigned int index);
const struct fg_gi_profile *fg_mig_profile_by_id(const struct fg_mig_model *m, unsigned int id);
/* Whether `start` is a legal placement of `p`. */
int fg_mig_placement_legal(const struct fg_gi_profile *p, unsigned int start);
/* The GPU-instance ID the driver gives a placement (size 8 -> 0, 4 -> 1..2, 2 -> 3..6, 1 -> 7..14). */
unsigned int fg_mig_gi_id_of(unsigned int start, unsigned int size);
/* Compute-instance profiles of a GPU instance with `compute_slices`: profile index i takes
 * fg_mig_ci_slices(i) compute slices; 0 when the index does not exist or does not fit. */
unsigned int fg_mig_ci_slices(unsigned int index, unsigned int gi_compute_slices);

/* `MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` of a MIG device's 16 UUID bytes. */
void fg_mig_uuid_text(const unsigned char uuid[16], char out[48]);

/* ---- state (shared file) ---- */

struct fg_mig_ci {
  uint32_t live;
  uint32_t id;
  uint32_t profile_id; /* compute-instance profile ID (= its NVML profile index) */
  uint32_t start;      /* compute slices within the GPU instance */
  uint32_t size;
  uint32_t slot; /* MIG device slot */
};

struct fg_mig_gi {
  uint32_t live;
  uint32_t id;
  uint32_t profile_id;
  uint32_t start; /* memory slices */
  uint32_t size;
  uint32_t compute_slices;
  struct fg_mig_ci ci[FG_MIG_CIS];
};

struct fg_mig_card {
  uint32_t mode; /* NVML_DEVICE_MIG_ENABLE / _DISABLE */
  uint32_t reserved;
  struct fg_mig_gi gi[FG_MIG_GIS];
};

struct fg_mig_slot {
  uint32_t live;
  uint32_t parent; /* node index of the card */
  uint32_t gi_id;
  uint32_t ci_id;
  uint32_t sms;
  uint32_t reserved;
  unsigned char uuid[16];
};

/* Results of the state operations: the NVML codes they map to. */
enum fg_mig_rc {
  FG_MIG_OK = 0,
  FG_MIG_INVALID = 2,        /* NVML_ERROR_INVALID_ARGUMENT */
  FG_MIG_NOT_SUPPORTED = 3,  /* NVML_ERROR_NOT_SUPPORTED */
  FG_MIG_NOT_FOUND = 6,      /* NVML_ERROR_NOT_FOUND */
  FG_MIG_IN_USE = 19,        /* NVML_ERROR_IN_USE */
  FG_MIG_NO_RESOURCES = 23,  /* NVML_ERROR_INSUFFICIENT_RESOURCES */
};

/* All take the state lock themselves. `node` is a card's node index. */
const struct fg_mig_model *fg_mig_model_of(int node); /* NULL: the card has no MIG */
int fg_mig_set_mode(int node, unsigned int mode);
unsigned int fg_mig_mode(int node);
/* Creates a GPU instance of profile `profile_id` at memory slice `start` (-1: the first free legal
 * placement); its ID in *gi_id. */
int fg_mig_create_gi(int node, unsigned int profile_id, int start, unsigned int *gi_id);
int fg_mig_destroy_gi(int node, unsigned int gi_id);
/* Creates a compute instance of CI profile `profile_id` in GPU instance `gi_id`; its ID in *ci_id. */
int fg_mig_create_ci(int node, unsigned int gi_id, unsigned int profile_id, unsigned int *ci_id);
int fg_mig_destroy_ci(int node, unsigned int gi_id, unsigned int ci_id);
/* How many more GPU instances of `profile_id` fit, placed first-fit. */
int fg_mig_remaining(int node, unsigned int profile_id, unsigned int *count);
/* IDs of the card's GPU instances of `profile_id` (~0u: any), ascending; returns how many. */
int fg_mig_gi_ids(int node, unsigned int profile_id, unsigned int ids[FG_MIG_GIS]);
/* A copy of GPU instance `gi_id` of the card; 0, or FG_MIG_NOT_FOUND. */
int fg_mig_gi(int node, unsigned int gi_id, struct fg_mig_gi *out);
/* The state index (FG_MAX_DEVICES + slot) of the card's index-th MIG device, ordered by GPU
 * instance ID then compute-instance ID; -1 when there is none. */
int fg_mig_device(int node, unsigned int index);
/* The state index of the MIG device with this `MIG-…` UUID (any case); -1 when none. */
int fg_mig_device_by_uuid(const char *uuid);
/* A copy of the slot behind state index `dev`; 0, or -1 when `dev` is no live MIG device. */
int fg_mig_slot(int dev, struct fg_mig_slot *out);

/* Identity of any state index: a card's, or a MIG device's (its UUID, its parent's PCI bus). */
void fg_dev_uuid(int dev, unsigned char out[16]);
void fg_dev_uuid_text(int dev, char out[48]);
unsigned int fg_dev_pci_bus(int dev);
/* NVML's and CUDA's name: the card's, with " MIG <profile>" for a MIG device. */
void fg_dev_name(int dev, char *out, size_t len);
/* The card a state index belongs to (itself for a card); -1 when none. */
int fg_dev_parent(int dev);
/* SMs of a state index (the card's FAKEGPU_SMS, or the compute instance's). */
unsigned int fg_dev_sms(int dev);

#endif
