/*
** test_target.c -- target strings parsed into tl_target (targets/targets.c):
** families, keys, hardware facts, strategy rows, and the errors that name
** the bad option or kind and the string.
*/
#include <stdio.h>

#include "../../targets/target.h"
#include "tl_test.h"

static tl_target *parse_ok(tl_ctx *ctx, const char *s) {
  tl_target *t = NULL;
  int rc = tl_target_parse(ctx, s, &t);
  if (rc) fprintf(stderr, "parse '%s': %s\n", s, tl_errmsg(ctx));
  return t;
}

TL_TEST(target_families_and_lanes) {
  tl_ctx *ctx = tl_ctx_new();
  tl_target *t = parse_ok(ctx, "llvm -mcpu=skylake-avx512");
  CHECK(t != NULL);
  CHECK_STREQ(tl_target_family(t), "x86");
  CHECK_STREQ(tl_target_kind(t), "llvm");
  CHECK_EQ_INT(tl_target_lanes(t), 16);
  CHECK_STREQ(tl_target_schedules(t), "cpu");
  CHECK_STREQ(tl_target_backend(t), "c");
  CHECK_EQ_INT(tl_target_device_type(t), TL_DEV_CPU);
  CHECK_STREQ(tl_target_tophub_package(t), "llvm");
  CHECK_EQ_INT(tl_target_num_keys(t), 1);
  CHECK_STREQ(tl_target_key(t, 0), "cpu");
  tl_target_free(t);
  const char *eight[] = {"llvm", "c", "llvm -mcpu=core-avx2", "llvm -mattr=+avx2,+fma"};
  for (int i = 0; i < 4; i++) {
    t = parse_ok(ctx, eight[i]);
    CHECK(t && tl_target_lanes(t) == 8);
    tl_target_free(t);
  }
  t = parse_ok(ctx, "llvm -mattr=+avx512f");
  CHECK(t && tl_target_lanes(t) == 16);
  tl_target_free(t);
  t = parse_ok(ctx, "opencl -device=mali -model=rk3399");
  CHECK(t != NULL);
  CHECK_STREQ(tl_target_family(t), "mali");
  CHECK_STREQ(tl_target_device(t), "mali");
  CHECK_STREQ(tl_target_model(t), "rk3399");
  CHECK_STREQ(tl_target_backend(t), "opencl");
  CHECK_STREQ(tl_target_schedules(t), "opencl");
  CHECK_EQ_INT(tl_target_fallback_untuned(t), 1);
  CHECK_EQ_INT(tl_target_num_keys(t), 3);   /* mali, opencl, gpu */
  CHECK_STREQ(tl_target_key(t, 0), "mali");
  CHECK_STREQ(tl_target_key(t, 2), "gpu");
  const char *op, *tm, *args, *when;
  CHECK_EQ_INT(tl_target_impl(t, 1, &op, &tm, &args, &when), 0);
  CHECK_STREQ(tm, "conv2d_nchw_winograd.mali");
  CHECK_STREQ(when, "3x3s1");
  CHECK_EQ_INT(tl_target_impl(t, 99, &op, &tm, &args, &when), -1);
  tl_target_free(t);
  t = parse_ok(ctx, "opencl -device_id=1");
  CHECK(t && strcmp(tl_target_family(t), "opencl") == 0 && tl_target_num_impls(t) == 0);
  tl_target_free(t);
  t = parse_ok(ctx, "llvm -device=arm_cpu -keys=arm_cpu,cpu,x -mtriple=aarch64-linux-gnu");
  CHECK(t && strcmp(tl_target_family(t), "arm_cpu") == 0);
  CHECK_EQ_INT(tl_target_num_keys(t), 3);   /* arm_cpu, cpu, x: -keys, then -device once */
  CHECK_STREQ(tl_target_tophub_package(t), "arm_cpu");
  tl_target_free(t);
  tl_ctx_free(ctx);
}

TL_TEST(target_errors_name_the_input) {
  tl_ctx *ctx = tl_ctx_new();
  tl_target *t = NULL;
  CHECK_EQ_INT(tl_target_parse(ctx, "llvm -mcpu=core-avx2 -foo=1", &t), TL_E_ARG);
  CHECK(t == NULL);
  CHECK(strstr(tl_errmsg(ctx), "'-foo'") && strstr(tl_errmsg(ctx), "'llvm -mcpu=core-avx2 -foo=1'"));
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_target_parse(ctx, "cuda -arch=sm_80", &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "unknown target 'cuda' (expected \"c\", \"llvm\" or \"opencl\", with options)");
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_target_parse(ctx, "llvm mcpu", &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "target option 'mcpu' should look like -key=value");
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_target_parse(ctx, "", &t), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "unknown target ''") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_target_parse(ctx, "llvm -device_id=1", &t), TL_E_ARG);   /* an OpenCL option */
  tl_clearerr(ctx);
  /* a log's target: any kind and option */
  CHECK_EQ_INT(tl_target_parse_record(ctx, "cuda -arch=sm_80 -model=x", &t), 0);
  CHECK_STREQ(tl_target_family(t), "");
  CHECK_STREQ(tl_target_key(t, 0), "cuda");
  CHECK_STREQ(tl_target_model(t), "x");
  CHECK(tl_target_backend(t) == NULL);
  tl_target_free(t);
  CHECK_EQ_INT(tl_target_parse_record(ctx, "llvm -device=arm_cpu -target=aarch64-linux-gnu", &t), 0);
  CHECK_STREQ(tl_target_option_name(t, 1), "mtriple");
  tl_target_free(t);
  tl_ctx_free(ctx);
}

TL_TEST(target_template_registry) {
  CHECK(tl_atvm_template_exists("conv2d_NCHWc.x86"));
  CHECK_EQ_INT(tl_atvm_template_flags("conv2d_NCHWc.x86"), TL_TMPL_PREPACKED_WEIGHT | TL_TMPL_FALLBACK_DEPLOYS);
  CHECK_EQ_INT(tl_atvm_template_flags("dense_pack.x86"), 0);
  CHECK_EQ_INT(tl_atvm_template_flags("nope"), 0);
  CHECK_STREQ(tl_atvm_template_list(0), "conv2d_NCHWc.x86");
  int n = 0;
  while (tl_atvm_template_list(n)) n++;
  CHECK_EQ_INT(n, 8);
}
