/*
** mali.h -- AutoTVM templates for Mali GPUs (target "opencl -device=mali")
** (targets/mali/templates.c) and the family (target.c). The default OpenCL
** schedules they fall back on live with the operators
** (core/topi/schedule_gpu.c).
**
** The templates carry TVM's template names and knob definitions
** (conv2d_nchw_spatial_pack.mali, conv2d_nchw_winograd.mali,
** depthwise_conv2d_nchw.mali, dense.mali), so the records of TopHub's
** mali_v0.06.log map to configs of our spaces. See docs/mali.md.
*/
#ifndef TL_MALI_H
#define TL_MALI_H

#include "../target.h"

extern const tl_atvm_template tl_mali_conv2d_spatial_pack, tl_mali_conv2d_winograd,
    tl_mali_depthwise_conv2d, tl_mali_dense;

#endif
