/*
** target.c -- Mali GPUs ("opencl -device=mali"): OpenCL C kernels, the
** Mali templates (templates.c), TopHub's mali package.
*/
#include "mali.h"

/* 128-bit vectors: 4 float32 lanes. */
static void mali_hw(const tl_target *t, tl_target_hw *hw) { hw->lanes = 4; }

/* The auto-scheduler's defaults for Mali GPUs (TVM's table): cores unknown,
** 16-byte vectors, 64-byte lines, 32 KiB shared memory, local memory
** unchecked, 256 threads, vthread 1, warp 1. */
static int mali_fixed_hw_params(const tl_target *t, int64_t *v) {
  (void)t;
  const int64_t mali[8] = {-1, 16, 64, 32768, INT32_MAX, 256, 1, 1};
  memcpy(v, mali, sizeof mali);
  return 1;
}

static const tl_atvm_template *const templates[] = {
    &tl_mali_conv2d_spatial_pack, &tl_mali_conv2d_winograd, &tl_mali_depthwise_conv2d,
    &tl_mali_dense, NULL};

static const tl_target_impl_row impls[] = {
    {"conv2d", "conv2d_nchw_spatial_pack.mali", "conv", NULL},
    {"conv2d", "conv2d_nchw_winograd.mali", "conv", "3x3s1"},
    {"depthwise_conv2d", "depthwise_conv2d_nchw.mali", "conv", NULL},
    {"dense", "dense.mali", "dense", NULL},
};

const tl_family tl_family_mali = {
    .name = "mali",
    .kinds = (const char *const[]){"opencl", NULL},
    .device = "mali",
    .options = (const char *const[]){"device_id", "device-id", NULL},
    .keys = (const char *const[]){"opencl", "gpu", NULL},
    .schedules = "opencl",
    .backend = &tl_backend_opencl,
    .tophub_package = "mali",
    .tophub_version = "v0.06",
    .templates = templates,
    .impls = impls,
    .nimpls = TL_ARRAY_SIZE(impls),
    .fallback_untuned = 1,   /* as TVM: the first template's fallback config */
    .hw = mali_hw,
    .fixed_hw_params = mali_fixed_hw_params,
};
