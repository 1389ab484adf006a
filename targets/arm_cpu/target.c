/*
** target.c -- ARM CPUs ("llvm -device=arm_cpu ..."): parsed, keyed and
** matched to TopHub's arm_cpu package; no templates yet (default CPU
** schedules, the C backend).
*/
#include "../target.h"

/* NEON: 4 float32 lanes; 32 vector registers on AArch64, else 16. */
static void arm_hw(const tl_target *t, tl_target_hw *hw) {
  const char *triple = tl_target_option(t, "mtriple");
  int a64 = triple && (strncmp(triple, "aarch64", 7) == 0 || strncmp(triple, "arm64", 5) == 0);
  hw->lanes = 4;
  hw->registers = a64 ? 32 : 16;
}

const tl_family tl_family_arm_cpu = {
    .name = "arm_cpu",
    .kinds = (const char *const[]){"llvm", "c", NULL},
    .device = "arm_cpu",
    .options = (const char *const[]){"num-cores", NULL},
    .keys = (const char *const[]){"cpu", NULL},
    .schedules = "cpu",
    .backend = &tl_backend_c,
    .toolchain = {NULL, NULL, NULL},   /* the host compiler, "-O3 -march=native" */
    .tophub_package = "arm_cpu",
    .tophub_version = "v0.08",
    .hw = arm_hw,
};
