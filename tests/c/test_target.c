/*
** test_target.c -- target strings parsed into tl_target (targets/targets.c):
** families, keys, hardware facts, strategy rows, and the errors that name
** the bad option or kind and the string.
*/
#define _GNU_SOURCE
#if defined(__aarch64__)
#define TL_HOST_ARCH "aarch64"
#else
#define TL_HOST_ARCH "other"
#endif
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
  /* a plain target takes the host's vectors: AVX-512 16 lanes and 32 registers,
  ** AVX2 with FMA 8 and 16, else 4 and 16 */
  int host_lanes = tl_test_cpu_has("avx512f") ? 16 : tl_test_cpu_has("avx2") && tl_test_cpu_has("fma") ? 8 : 4;
  const char *plain[] = {"llvm", "c", "llvm -num-cores=2"};
  for (int i = 0; i < 3; i++) {
    t = parse_ok(ctx, plain[i]);
    CHECK(t && tl_target_lanes(t) == host_lanes);
    CHECK(t && tl_target_registers(t) == (host_lanes == 16 ? 32 : 16));
    tl_target_free(t);
  }
  const char *eight[] = {"llvm -mcpu=core-avx2", "llvm -mattr=+avx2,+fma", "c -mcpu=haswell"};
  for (int i = 0; i < 3; i++) {
    t = parse_ok(ctx, eight[i]);
    CHECK(t && tl_target_lanes(t) == 8 && tl_target_registers(t) == 16);
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
  CHECK_STREQ(tl_errmsg(ctx), "unknown target 'cuda' (expected \"c\", \"ext_dev\", \"llvm\" or \"opencl\", with options)");
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
  CHECK_EQ_INT(n, 14);   /* x86 5, arm_cpu 4, mali 4, vta 1 */
  CHECK(tl_atvm_template_exists("conv2d_nchw_winograd.arm_cpu"));
  CHECK(tl_atvm_template_exists("conv2d_NCHWc_winograd.x86"));
  CHECK_EQ_INT(tl_atvm_template_flags("conv2d_NCHWc_winograd.x86"), 0);
}

/* arm_cpu: the -mtriple picks the cross toolchain (its Debian package named), an
** unknown -mtriple is an error naming it, records keep any triple. */
TL_TEST(target_arm_cpu_toolchains) {
  tl_ctx *ctx = tl_ctx_new();
  tl_target *t = parse_ok(ctx, "llvm -device=arm_cpu -model=rk3399 -mtriple=aarch64-linux-gnu -mattr=+neon");
  CHECK(t != NULL);
  const tl_toolchain *tc = tl_target_toolchain(t);
  CHECK(tc && tc->vector_bytes == 16);
  CHECK_STREQ(tl_target_cross_prefix(t), "aarch64-linux-gnu-");
  CHECK(tc && tc->package && strstr(tc->package, "gcc-aarch64-linux-gnu"));
  CHECK_EQ_INT(tl_target_lanes(t), 4);
  CHECK_EQ_INT(tl_target_registers(t), 32);
  CHECK(tl_target_check_host(ctx, t) != TL_OK || strcmp(TL_HOST_ARCH, "aarch64") == 0);
  tl_target_free(t);
  t = parse_ok(ctx, "llvm -device=arm_cpu -model=pynq -mtriple=armv7a-linux-eabi -mattr=+neon");
  CHECK(t != NULL);
  CHECK_STREQ(tl_target_cross_prefix(t), "arm-linux-gnueabihf-");
  CHECK_EQ_INT(tl_target_registers(t), 16);
  tl_target_free(t);
  t = NULL;
  CHECK(tl_target_parse(ctx, "llvm -device=arm_cpu -mtriple=sparc-sun-solaris", &t) == TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "unknown -mtriple 'sparc-sun-solaris'") != NULL);
  CHECK_EQ_INT(tl_target_parse_record(ctx, "llvm -device=arm_cpu -mtriple=sparc-sun-solaris", &t), TL_OK);
  tl_target_free(t);
  /* the compiler that cannot run is named with where it comes from */
  tl_toolchain missing = {"tunelua-no-such-cc", NULL, NULL, "the Debian package gcc-nothing", 16};
  const char *srcs[1] = {"/dev/null"};
  CHECK_EQ_INT(tl_cc_shared(ctx, &missing, srcs, 1, "/nonexistent/x.so", 10), TL_E_BUILD);
  CHECK(strstr(tl_errmsg(ctx), "tunelua-no-such-cc") && strstr(tl_errmsg(ctx), "gcc-nothing"));
  tl_ctx_free(ctx);
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
  CHECK(tl_target_toolchain(t) != &t->family->toolchain);       /* -mcpu: that machine's row */
  CHECK(tl_target_cc(t) == NULL);                                /* the default compiler */
  CHECK_STREQ(tl_target_cflags(t), "-O3 -march=core-avx2");     /* AVX2 code on any host */
  {
    tl_target *h = parse_ok(ctx, "llvm");                       /* a plain target: the host */
    CHECK(tl_target_toolchain(h) == &h->family->toolchain);     /* static: outlives h */
    CHECK_STREQ(tl_target_cflags(h), "-O3 -march=native");
    tl_target_free(h);
  }
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

/* The host probe's test hook: $TUNELUA_HOST_CPU_FLAGS stands for the CPU's
** /proc/cpuinfo flags. */
static int lanes_as(tl_ctx *ctx, const char *flags, const char *str, int *registers) {
  setenv("TUNELUA_HOST_CPU_FLAGS", flags, 1);
  tl_target *t = parse_ok(ctx, str);
  unsetenv("TUNELUA_HOST_CPU_FLAGS");
  int lanes = t ? tl_target_lanes(t) : -1;
  *registers = t ? tl_target_registers(t) : -1;
  tl_target_free(t);
  return lanes;
}

static int check_as(tl_ctx *ctx, const char *flags, const char *str) {
  tl_target *t = parse_ok(ctx, str);
  if (!t) return -1;
  if (flags) setenv("TUNELUA_HOST_CPU_FLAGS", flags, 1);
  int rc = tl_target_check_host(ctx, t);
  unsetenv("TUNELUA_HOST_CPU_FLAGS");
  tl_target_free(t);
  return rc;
}

#define AVX2_HOST "fpu sse sse2 ssse3 sse4_1 sse4_2 avx fma avx2"
#define AVX512_HOST AVX2_HOST " avx512f avx512dq avx512cd avx512bw avx512vl avx512_vnni avx512_bf16"

TL_TEST(target_host_cpu) {
  tl_ctx *ctx = tl_ctx_new();
  int regs;
  CHECK_EQ_INT(lanes_as(ctx, AVX2_HOST, "llvm", &regs), 8);
  CHECK_EQ_INT(regs, 16);
  CHECK_EQ_INT(lanes_as(ctx, AVX512_HOST, "c", &regs), 16);
  CHECK_EQ_INT(regs, 32);
  CHECK_EQ_INT(lanes_as(ctx, "fpu sse sse2 sse4_2", "llvm", &regs), 4);
  CHECK_EQ_INT(regs, 16);
  CHECK_EQ_INT(lanes_as(ctx, "fpu sse sse2 avx avx2", "llvm", &regs), 4);   /* no FMA */
  /* a target naming its machine keeps it, whatever the host */
  CHECK_EQ_INT(lanes_as(ctx, AVX2_HOST, "llvm -mcpu=skylake-avx512", &regs), 16);
  CHECK_EQ_INT(lanes_as(ctx, AVX512_HOST, "llvm -mcpu=core-avx2", &regs), 8);
  CHECK_EQ_INT(regs, 16);

  /* kernels for a CPU the host cannot run: an error naming the extension */
  CHECK_EQ_INT(check_as(ctx, AVX2_HOST, "llvm -mcpu=skylake-avx512"), TL_E_UNSUPPORTED);
  CHECK(strstr(tl_errmsg(ctx), "target 'llvm -mcpu=skylake-avx512' needs AVX-512, which this CPU (") ==
        tl_errmsg(ctx));
  CHECK(strstr(tl_errmsg(ctx), ") lacks: kernels built for it cannot run here") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(check_as(ctx, AVX2_HOST, "llvm -mattr=+avx512f"), TL_E_UNSUPPORTED);
  CHECK(strstr(tl_errmsg(ctx), "needs AVX-512,") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(check_as(ctx, AVX512_HOST, "llvm -mcpu=sapphirerapids"), TL_E_UNSUPPORTED);
  CHECK(strstr(tl_errmsg(ctx), "needs AVX-512 FP16,") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(check_as(ctx, AVX512_HOST, "llvm -mattr=+avx2,+amx-tile"), TL_E_UNSUPPORTED);
  CHECK(strstr(tl_errmsg(ctx), "needs AMX,") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(check_as(ctx, "fpu sse sse2", "llvm -mcpu=haswell"), TL_E_UNSUPPORTED);
  CHECK(strstr(tl_errmsg(ctx), "needs SSE4.2,") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(check_as(ctx, AVX512_HOST, "llvm -mcpu=skylake-avx512"), TL_OK);
  CHECK_EQ_INT(check_as(ctx, AVX512_HOST, "llvm -mcpu=cascadelake -mattr=+avx512f"), TL_OK);
  CHECK_EQ_INT(check_as(ctx, AVX2_HOST, "llvm -mcpu=core-avx2"), TL_OK);
  CHECK_EQ_INT(check_as(ctx, "fpu sse sse2", "llvm"), TL_OK);             /* the host itself */
  CHECK_EQ_INT(check_as(ctx, "fpu sse sse2", "opencl -device=mali"), TL_OK);  /* not host code */
  /* such a target still parses, reads from logs and makes tasks (RPC) */
  setenv("TUNELUA_HOST_CPU_FLAGS", AVX2_HOST, 1);
  tl_atvm_task *task = NULL;
  int rc = tl_atvm_task_create(ctx, "dense_pack.x86",
      "[[\"TENSOR\", [1, 64], \"float32\"], [\"TENSOR\", [32, 64], \"float32\"], null, \"float32\"]",
      "llvm -mcpu=skylake-avx512", &task);
  unsetenv("TUNELUA_HOST_CPU_FLAGS");
  CHECK_EQ_INT(rc, TL_OK);
  tl_atvm_task_free(task);

  /* the real CPU, without the hook: as its /proc/cpuinfo flags say */
  int spr = tl_test_cpu_has("avx512f") && tl_test_cpu_has("avx512bw") && tl_test_cpu_has("avx512_vnni") &&
            tl_test_cpu_has("avx512_bf16") && tl_test_cpu_has("avx512_fp16") && tl_test_cpu_has("amx_tile");
  CHECK_EQ_INT(check_as(ctx, NULL, "llvm -mcpu=sapphirerapids"), spr ? TL_OK : TL_E_UNSUPPORTED);
  tl_clearerr(ctx);
  CHECK_EQ_INT(check_as(ctx, NULL, "llvm -mcpu=skylake-avx512"),
               tl_test_cpu_has("avx512f") && tl_test_cpu_has("avx512bw") ? TL_OK : TL_E_UNSUPPORTED);
  tl_clearerr(ctx);
  tl_ctx_free(ctx);
}
