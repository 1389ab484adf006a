/*
** target.c -- VTA ("ext_dev -device=vta -keys=vta,cpu -model=<MODEL>"): the
** accelerator of targets/vta, its template conv2d_packed.vta, and its
** backend: instruction streams built by conv2d.c and measured on vta-sim
** (measure.c), not C or OpenCL compiled by a toolchain. The -model names the
** hardware configuration (sim_1x16_i8w8a32_15_15_18_17 for the default
** vta_config.json; tunelua.vta.config_of_model reads it back).
*/
#include "../target.h"

extern const tl_atvm_template tl_vta_conv2d_packed;

const tl_backend tl_backend_vta = {"vta", TL_DEV_EXT_DEV, 0};

const tl_family tl_family_vta = {
    .name = "vta",
    .kinds = (const char *const[]){"ext_dev", NULL},
    .device = "vta",
    .keys = (const char *const[]){"vta", "cpu", NULL},
    .schedules = "cpu",
    .backend = &tl_backend_vta,
    .tophub_package = "vta",
    .tophub_version = "v0.10",
    .templates = (const tl_atvm_template *const[]){&tl_vta_conv2d_packed, NULL},
};
