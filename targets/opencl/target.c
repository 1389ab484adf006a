/*
** target.c -- any OpenCL device ("opencl", "opencl -device_id=1"): OpenCL C
** kernels with the default GPU schedules, no templates.
*/
#include "../target.h"

#include <stdint.h>

/* An Adreno GPU's auto-scheduler defaults (TVM's table: Mali's with 32 KiB
** of local memory); other devices are asked (their device info). */
static int opencl_fixed_hw_params(const tl_target *t, int64_t *v) {
  for (int i = 0; i < t->nkeys; i++)
    if (strcmp(t->keys[i], "adreno") == 0) {
      const int64_t adreno[8] = {-1, 16, 64, 32768, 32768, 256, 1, 1};
      memcpy(v, adreno, sizeof adreno);
      return 1;
    }
  return 0;
}

const tl_family tl_family_opencl = {
    .name = "opencl",
    .kinds = (const char *const[]){"opencl", NULL},
    .device = NULL,
    .options = (const char *const[]){"device_id", "device-id", NULL},
    .keys = (const char *const[]){"opencl", "gpu", NULL},
    .schedules = "opencl",
    .backend = &tl_backend_opencl,
    .tophub_package = "opencl",
    .tophub_version = "v0.04",
    .fixed_hw_params = opencl_fixed_hw_params,
};
