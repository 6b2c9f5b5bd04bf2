/* MIG profile tables of the cards the fake models, as the driver lists them (`nvidia-smi mig -lgip`
 * for IDs, memory (GiB x 1024 = MiB), SMs and engines; `-lgipp` for placements; NVIDIA's MIG user
 * guide, "Supported MIG Profiles", for the slice fractions). The H200 figures were read from an
 * H200 with driver 580.159.04 (memory per profile differs between driver versions: 535-era
 * transcripts list 32.25 GiB for 1g.35gb). Pure: no state. */
#include <stddef.h>
#include <stdio.h>

#include "fake_mig.h"

/* NVML profile indexes (nvml.h, NVML_GPU_INSTANCE_PROFILE_*). */
enum { P_1 = 0x0, P_2 = 0x1, P_3 = 0x2, P_4 = 0x3, P_7 = 0x4, P_1_REV1 = 0x7, P_1_REV2 = 0x9 };

#define ALL7 7, {0, 1, 2, 3, 4, 5, 6}

/* H100 80GB (HBM3). */
static const struct fg_gi_profile h100_80[] = {
    {P_1, 19, "1g.10gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 9984, ALL7},
    {P_2, 14, "2g.20gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 20096, 3, {0, 2, 4}},
    {P_3, 9, "3g.40gb", 4, 3, 2, 60, 3, 3, 0, 3, 0, 40448, 2, {0, 4}},
    {P_4, 5, "4g.40gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 40448, 1, {0}},
    {P_7, 0, "7g.80gb", 8, 7, 1, 132, 8, 7, 0, 7, 1, 81152, 1, {0}},
    {P_1_REV1, 20, "1g.10gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 9984, ALL7},
    {P_1_REV2, 15, "1g.20gb", 2, 1, 4, 26, 1, 1, 0, 1, 0, 20096, 4, {0, 2, 4, 6}},
};

/* H200 141GB (HBM3e): the same slices, SMs and engines, more memory per slice. */
static const struct fg_gi_profile h200_141[] = {
    {P_1, 19, "1g.18gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 16384, ALL7},
    {P_2, 14, "2g.35gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 33280, 3, {0, 2, 4}},
    {P_3, 9, "3g.71gb", 4, 3, 2, 60, 3, 3, 0, 3, 0, 71424, 2, {0, 4}},
    {P_4, 5, "4g.71gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 71424, 1, {0}},
    {P_7, 0, "7g.141gb", 8, 7, 1, 132, 8, 7, 0, 7, 1, 143360, 1, {0}},
    {P_1_REV1, 20, "1g.18gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 16384, ALL7},
    {P_1_REV2, 15, "1g.35gb", 2, 1, 4, 26, 1, 1, 0, 1, 0, 33280, 4, {0, 2, 4, 6}},
};

static const struct fg_mig_model models[] = {
    {"H100 80GB", sizeof h100_80 / sizeof h100_80[0], h100_80},
    {"H200 141GB", sizeof h200_141 / sizeof h200_141[0], h200_141},
};

/* The card by its memory: an H100 80GB has 81559 MiB, an H200 141GB 143771 MiB. */
const struct fg_mig_model *fg_mig_model_for(uint64_t memory_mib) {
  if (memory_mib >= 130000 && memory_mib <= 150000) return &models[1];
  if (memory_mib >= 76000 && memory_mib <= 86000) return &models[0];
  return NULL;
}

const struct fg_gi_profile *fg_mig_profile_by_index(const struct fg_mig_model *m, unsigned int index) {
  for (unsigned int i = 0; m && i < m->profile_count; i++)
    if (m->profiles[i].index == index) return &m->profiles[i];
  return NULL;
}

const struct fg_gi_profile *fg_mig_profile_by_id(const struct fg_mig_model *m, unsigned int id) {
  for (unsigned int i = 0; m && i < m->profile_count; i++)
    if (m->profiles[i].id == id) return &m->profiles[i];
  return NULL;
}

int fg_mig_placement_legal(const struct fg_gi_profile *p, unsigned int start) {
  for (unsigned int i = 0; i < p->placement_count; i++)
    if (p->placements[i] == start) return 1;
  return 0;
}

unsigned int fg_mig_gi_id_of(unsigned int start, unsigned int size) {
  switch (size) {
    case 8: return 0;
    case 4: return 1 + start / 4;
    case 2: return 3 + start / 2;
    default: return 7 + start;
  }
}

/* NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7}_SLICE are indexes 0..4. */
unsigned int fg_mig_ci_slices(unsigned int index, unsigned int gi_compute_slices) {
  static const unsigned int slices[] = {1, 2, 3, 4, 7};
  if (index >= sizeof slices / sizeof slices[0]) return 0;
  return slices[index] <= gi_compute_slices ? slices[index] : 0;
}

void fg_mig_uuid_text(const unsigned char b[16], char out[48]) {
  snprintf(out, 48, "MIG-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
           b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
