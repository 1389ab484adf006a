/*
** target.c -- the host CPU family: "llvm" and "c" targets (the system C
** compiler builds both), AVX2 or AVX-512 by -mcpu/-mattr.
*/
#include "x86.h"

/* float32 lanes: 16 when -mcpu or -mattr names an AVX-512 machine, else 8
** (AVX2); 32 vector registers with AVX-512, else 16. */
static void x86_hw(const tl_target *t, tl_target_hw *hw) {
  static const char *const avx512[] = {"avx512",     "skylake-avx512", "cascadelake", "icelake",
                                       "cooperlake", "sapphirerapids", "tigerlake",   "znver4"};
  const char *opts[2] = {tl_target_option(t, "mcpu"), tl_target_option(t, "mattr")};
  int wide = 0;
  for (int o = 0; o < 2; o++)
    for (size_t i = 0; opts[o] && i < TL_ARRAY_SIZE(avx512); i++) wide |= strstr(opts[o], avx512[i]) != NULL;
  hw->lanes = wide ? 16 : 8;
  hw->registers = wide ? 32 : 16;
}

static const tl_atvm_template *const templates[] = {&tl_x86_conv2d_nchwc, &tl_x86_depthwise_nchwc,
                                                    &tl_x86_dense_pack, &tl_x86_dense_nopack, NULL};

static const tl_target_impl_row impls[] = {
    {"conv2d", "conv2d_NCHWc.x86", "conv_layout", NULL},
    {"depthwise_conv2d", "depthwise_conv2d_NCHWc.x86", "conv_layout", NULL},
    {"dense", "dense_nopack.x86", "dense", NULL},
    {"dense", "dense_pack.x86", "dense", NULL},
};

const tl_family tl_family_x86 = {
    .name = "x86",
    .kinds = (const char *const[]){"llvm", "c", NULL},
    .device = NULL,
    .options = (const char *const[]){"num-cores", NULL},
    .keys = (const char *const[]){"cpu", NULL},
    .schedules = "cpu",
    .backend = &tl_backend_c,
    .toolchain = {NULL, NULL, NULL},   /* the host compiler, "-O3 -march=native" */
    .tophub_package = "llvm",
    .tophub_version = "v0.04",
    .templates = templates,
    .impls = impls,
    .nimpls = TL_ARRAY_SIZE(impls),
    .fallback_untuned = 0,
    .hw = x86_hw,
};
