/*
** test_target.c -- target strings parsed into tl_target (targets/targets.c):
** families, keys, hardware facts, strategy rows, and the errors that name
** the bad option or kind and the string.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

/* What a family builds with: its backend (code generator, device) and, for a
** C backend, its toolchain; a log's GPU kind no family takes keeps a device
** type (measured on a device) but no backend or toolchain. */
TL_TEST(target_backend_and_toolchain) {
  tl_ctx *ctx = tl_ctx_new();
  tl_target *t = parse_ok(ctx, "llvm -mcpu=core-avx2");
  CHECK(t != NULL);
  CHECK(t->family->backend == &tl_backend_c);
  CHECK_EQ_INT(tl_backend_c.device_type, TL_DEV_CPU);
  CHECK_STREQ(t->family->name, "x86");
  CHECK(tl_target_toolchain(t) == &t->family->toolchain);       /* static: outlives t */
  CHECK(tl_target_cc(t) == NULL);                                /* the default compiler */
  CHECK_STREQ(tl_target_cflags(t), "-O3 -march=native");
  CHECK_STREQ(tl_target_cross_prefix(t), "");
  char *cc = tl_toolchain_cc(tl_target_toolchain(t));
  char *dflt = tl_toolchain_cc(NULL);
  CHECK_STREQ(cc, dflt);   /* x86 builds as a build without a target: same cache key */
  free(cc), free(dflt);
  tl_target_free(t);
  t = parse_ok(ctx, "opencl -device=mali");
  CHECK(t && t->family->backend == &tl_backend_opencl);
  CHECK_EQ_INT(tl_target_device_type(t), TL_DEV_OPENCL);
  CHECK(tl_target_toolchain(t) == NULL);
  tl_target_free(t);
  CHECK_EQ_INT(tl_target_parse_record(ctx, "cuda -arch=sm_80", &t), TL_OK);
  CHECK(tl_target_backend(t) == NULL && tl_target_toolchain(t) == NULL);
  CHECK_EQ_INT(tl_target_device_type(t), kDLCUDA);
  tl_target_free(t);
  CHECK_EQ_INT(tl_target_parse_record(ctx, "foo", &t), TL_OK);
  CHECK_EQ_INT(tl_target_device_type(t), 0);
  tl_target_free(t);
  tl_ctx_free(ctx);
}

/* A build given a toolchain uses it (compiler with its cross prefix, flags),
** and explicit flags replace the toolchain's. The toolchains here are test
** data, not families. */
TL_TEST(target_toolchain_reaches_the_compiler) {
  tl_ctx *ctx = tl_ctx_new();
  char dir[] = "/tmp/tl-test-toolchain-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char *so = tl_sprintf("%s/k.so", dir);
  const char *srcs[1] = {"int f(void) { return 1; }\n"};
  const char *paths[1] = {so};
  int code = -1;
  double secs = 0;
  char *msg = NULL;
  tl_toolchain cross = {NULL, NULL, "tl-no-such-prefix-"};
  CHECK_EQ_INT(tl_measure_build_batch(ctx, 1, srcs, paths, &cross, NULL, 30, 1, &code, &secs, &msg),
               TL_OK);
  CHECK_EQ_INT(code, TL_E_BUILD);
  CHECK_MSG(msg && strstr(msg, "tl-no-such-prefix-gcc"), "%s", msg ? msg : "(none)");
  free(msg), msg = NULL;
  tl_toolchain bad_flags = {NULL, "-fno-such-flag-tl", NULL};
  CHECK_EQ_INT(tl_measure_build_batch(ctx, 1, srcs, paths, &bad_flags, NULL, 60, 1, &code, &secs,
                                      &msg), TL_OK);
  CHECK_EQ_INT(code, TL_E_BUILD);
  CHECK_MSG(msg && strstr(msg, "-fno-such-flag-tl"), "%s", msg ? msg : "(none)");
  free(msg), msg = NULL;
  CHECK_EQ_INT(tl_measure_build_batch(ctx, 1, srcs, paths, &bad_flags, "-O1", 60, 1, &code, &secs,
                                      &msg), TL_OK);
  CHECK_MSG(code == TL_OK, "%s", msg ? msg : "(none)");   /* the caller's flags win */
  free(msg);
  unlink(so);
  rmdir(dir);
  free(so);
  tl_ctx_free(ctx);
}
