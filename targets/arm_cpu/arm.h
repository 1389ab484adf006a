/*
** arm.h -- ARM CPUs (target "llvm -device=arm_cpu ..."): the AutoTVM
** templates (targets/arm_cpu/templates.c, TVM's names and knobs, so TopHub's
** arm_cpu_v0.08.log applies) and the family (target.c: cross toolchains per
** -mtriple, the strategy). See docs/arm.md.
*/
#ifndef TL_ARM_H
#define TL_ARM_H

#include "../target.h"

extern const tl_atvm_template tl_arm_conv2d_spatial_pack, tl_arm_conv2d_winograd,
    tl_arm_depthwise_conv2d, tl_arm_depthwise_spatial_pack;

#endif
