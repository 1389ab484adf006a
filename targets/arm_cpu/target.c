/*
** target.c -- ARM CPUs ("llvm -device=arm_cpu -mtriple=... [-mattr=+neon]
** [-model=rk3399]"): parsed, keyed and matched to TopHub's arm_cpu package;
** the templates of templates.c, TVM's arm_cpu strategy, and kernels cross
** compiled for the -mtriple's machine by the C backend.
**
** The -mtriple picks the toolchain (one static row per machine kind, the
** compiler's Debian package named when it cannot be run):
**
**   aarch64-linux-gnu (and -unknown-/-none-)  aarch64-linux-gnu-gcc      gcc-aarch64-linux-gnu
**   arm64-/aarch64-linux-android             aarch64-linux-android24-clang  the Android NDK
**   armv7l-/armv7a-linux-gnueabihf, armv7a-linux-eabi, arm-linux-gnueabihf
**                                            arm-linux-gnueabihf-gcc    gcc-arm-linux-gnueabihf
**   x86_64-*                                 the host compiler (arm_cpu schedules on the host)
**
** No -mtriple means AArch64 Linux. Vectors are 128-bit (NEON): the C code
** generator prints GCC vector types of at most 16 bytes for these targets.
** Kernels built for an ARM triple do not run on an x86 host: arm_host_check
** says so, and they are measured through RPC on a device (tunelua-rpc) or
** under qemu-user.
*/
#include "arm.h"

#include <stdio.h>

typedef struct arm_triple {
  const char *prefix;          /* -mtriple starts with it */
  int a64;                     /* AArch64 (32 vector registers) */
  tl_toolchain tc;
} arm_triple;

#define A64_FLAGS "-O3 -march=armv8-a"
#define A32_FLAGS "-O3 -march=armv7-a -mfpu=neon -mfloat-abi=hard"

static const arm_triple triples[] = {
    {"aarch64-linux-gnu", 1, {NULL, A64_FLAGS, "aarch64-linux-gnu-", "the Debian package gcc-aarch64-linux-gnu", 16}},
    {"aarch64-unknown-linux-gnu", 1, {NULL, A64_FLAGS, "aarch64-linux-gnu-", "the Debian package gcc-aarch64-linux-gnu", 16}},
    {"aarch64-none-linux-gnu", 1, {NULL, A64_FLAGS, "aarch64-linux-gnu-", "the Debian package gcc-aarch64-linux-gnu", 16}},
    {"arm64-linux-android", 1, {"aarch64-linux-android24-clang", A64_FLAGS, NULL, "the Android NDK (its toolchains/llvm/prebuilt/linux-x86_64/bin on PATH)", 16}},
    {"aarch64-linux-android", 1, {"aarch64-linux-android24-clang", A64_FLAGS, NULL, "the Android NDK (its toolchains/llvm/prebuilt/linux-x86_64/bin on PATH)", 16}},
    {"armv7l-linux-gnueabihf", 0, {NULL, A32_FLAGS, "arm-linux-gnueabihf-", "the Debian package gcc-arm-linux-gnueabihf", 16}},
    {"armv7a-linux-gnueabihf", 0, {NULL, A32_FLAGS, "arm-linux-gnueabihf-", "the Debian package gcc-arm-linux-gnueabihf", 16}},
    {"armv7a-linux-eabi", 0, {NULL, A32_FLAGS, "arm-linux-gnueabihf-", "the Debian package gcc-arm-linux-gnueabihf", 16}},
    {"arm-linux-gnueabihf", 0, {NULL, A32_FLAGS, "arm-linux-gnueabihf-", "the Debian package gcc-arm-linux-gnueabihf", 16}},
    {"x86_64", 1, {NULL, NULL, NULL, NULL, 0}},
};

/* The row of t's -mtriple (no -mtriple: AArch64 Linux; NULL: unknown). */
static const arm_triple *triple_of(const tl_target *t) {
  const char *m = tl_target_option(t, "mtriple");
  if (!m) return &triples[0];
  for (size_t i = 0; i < TL_ARRAY_SIZE(triples); i++) {
    size_t n = strlen(triples[i].prefix);
    if (strncmp(m, triples[i].prefix, n) == 0 && (m[n] == 0 || m[n] == '-')) return &triples[i];
  }
  return NULL;
}

/* NEON: 4 float32 lanes; 32 vector registers on AArch64, else 16. */
static void arm_hw(const tl_target *t, tl_target_hw *hw) {
  const arm_triple *r = triple_of(t);
  hw->lanes = 4;
  hw->registers = !r || r->a64 ? 32 : 16;
}

static const tl_toolchain *arm_toolchain(const tl_target *t) {
  const arm_triple *r = triple_of(t);
  return r ? &r->tc : NULL;
}

static int arm_check(tl_ctx *ctx, const tl_target *t) {
  if (triple_of(t)) return TL_OK;
  tl_buf b = {0};
  for (size_t i = 0; i < TL_ARRAY_SIZE(triples); i++)
    tl_buf_printf(&b, "%s%s%s", i ? ", " : "", triples[i].prefix,
                  strcmp(triples[i].prefix, "x86_64") == 0 ? "-*" : "");
  int rc = tl_err(ctx, TL_E_ARG, "unknown -mtriple '%s' in target '%s' (arm_cpu targets take %s)",
                  tl_target_option(t, "mtriple"), t->str, b.s);
  tl_buf_free(&b);
  return rc;
}

/* Kernels for an ARM triple run on an ARM host only. */
static int arm_host_check(tl_ctx *ctx, const tl_target *t) {
  const arm_triple *r = triple_of(t);
  int host_a64 = 0, host_x86 = 0;
#if defined(__aarch64__)
  host_a64 = 1;
#elif defined(__x86_64__)
  host_x86 = 1;
#endif
  if (!r || !r->tc.cross_prefix) {
    if (r && strcmp(r->prefix, "x86_64") == 0 && !host_x86)
      return tl_err(ctx, TL_E_UNSUPPORTED, "target '%s' is for x86_64; this host is not", t->str);
    if (r && r->tc.cc && !host_a64)
      return tl_err(ctx, TL_E_UNSUPPORTED,
                    "target '%s' builds kernels for an Android device: they run there (through "
                    "tunelua-rpc), not on this host", t->str);
    return TL_OK;
  }
  if (r->a64 && host_a64) return TL_OK;
  return tl_err(ctx, TL_E_UNSUPPORTED,
                "target '%s' builds kernels for %s (cross compiled with %sgcc): they run on that "
                "device, through tunelua-rpc (see docs/arm.md; qemu-aarch64 here), not on this host",
                t->str, r->prefix, r->tc.cross_prefix);
}

static const tl_atvm_template *const templates[] = {
    &tl_arm_conv2d_spatial_pack, &tl_arm_conv2d_winograd, &tl_arm_depthwise_conv2d,
    &tl_arm_depthwise_spatial_pack, NULL};

/* TVM's arm_cpu strategy for NCHW float32: spatial pack for every conv2d,
** Winograd beside it for 3x3 stride-1 ones; depthwise by the plain
** template and the spatial pack; dense by the CPU dense templates. */
static const tl_target_impl_row impls[] = {
    {"conv2d", "conv2d_nchw_spatial_pack.arm_cpu", "conv", NULL},
    {"conv2d", "conv2d_nchw_winograd.arm_cpu", "conv", "3x3s1"},
    {"depthwise_conv2d", "depthwise_conv2d_nchw.arm_cpu", "conv", NULL},
    {"depthwise_conv2d", "depthwise_conv2d_nchw_spatial_pack.arm_cpu", "conv", NULL},
    {"dense", "dense_nopack.x86", "dense", NULL},
    {"dense", "dense_pack.x86", "dense", NULL},
};

const tl_family tl_family_arm_cpu = {
    .name = "arm_cpu",
    .kinds = (const char *const[]){"llvm", "c", NULL},
    .device = "arm_cpu",
    .options = (const char *const[]){"num-cores", NULL},
    .keys = (const char *const[]){"cpu", NULL},
    .schedules = "cpu",
    .backend = &tl_backend_c,
    .toolchain = {NULL, A64_FLAGS, "aarch64-linux-gnu-", "the Debian package gcc-aarch64-linux-gnu", 16},
    .tophub_package = "arm_cpu",
    .tophub_version = "v0.08",
    .templates = templates,
    .impls = impls,
    .nimpls = TL_ARRAY_SIZE(impls),
    .fallback_untuned = 0,
    .hw = arm_hw,
    .host_check = arm_host_check,
    .toolchain_of = arm_toolchain,
    .check = arm_check,
};
