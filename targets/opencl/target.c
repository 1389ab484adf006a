/*
** target.c -- any OpenCL device ("opencl", "opencl -device_id=1"): OpenCL C
** kernels with the default GPU schedules, no templates.
*/
#include "../target.h"

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
};
