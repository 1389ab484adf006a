/*
** test_autotvm.c -- AutoTVM config spaces (algorithms.md A1): split
** enumeration orders per policy, reorder/annotate counts, the mixed-radix
** index mapping, entity parsing against TVM's log, fallback configs, and
** the fused template schedule (conv2d + bias_add + relu) against an
** unscheduled build.
*/
#include <math.h>
#include <stdio.h>

#include "autotvm/autotvm.h"
#include "tl_test.h"

static char *entities(tl_atvm_space *sp, int k) {
  tl_buf b = {0};
  for (int64_t j = 0; j < tl_atvm_space_dim(sp, k); j++) {
    if (j) tl_buf_puts(&b, " ");
    tl_knob_entity_json(&sp->knobs.v[k], j, &b);
  }
  return tl_buf_take(&b);
}

#define CHECK_ENTS(sp, k, want)                                              \
  do {                                                                       \
    char *e_ = entities(sp, k);                                              \
    CHECK_STREQ(e_, want);                                                   \
    free(e_);                                                                \
  } while (0)

TL_TEST(atvm_split_policies) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_space *sp = tl_atvm_space_new();
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "a", 8, "factors", 2, 0, -1, NULL, 0), 0);
  CHECK_ENTS(sp, 0, "[-1, 1] [-1, 2] [-1, 4] [-1, 8]");
  /* position 0 (the innermost size) varies slowest */
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "b", 8, "factors", 3, 0, -1, NULL, 0), 1);
  CHECK_ENTS(sp, 1, "[-1, 1, 1] [-1, 2, 1] [-1, 4, 1] [-1, 8, 1] [-1, 1, 2] [-1, 2, 2] [-1, 4, 2] "
                    "[-1, 1, 4] [-1, 2, 4] [-1, 1, 8]");
  /* power2 keeps tails: any product <= L */
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "c", 6, "power2", 2, 0, -1, NULL, 0), 2);
  CHECK_ENTS(sp, 2, "[-1, 1] [-1, 2] [-1, 4]");
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "d", 6, "power2", 3, 0, -1, NULL, 0), 3);
  CHECK_ENTS(sp, 3, "[-1, 1, 1] [-1, 2, 1] [-1, 4, 1] [-1, 1, 2] [-1, 2, 2] [-1, 1, 4]");
  /* max_factor */
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "e", 12, "factors", 2, 4, -1, NULL, 0), 4);
  CHECK_ENTS(sp, 4, "[-1, 1] [-1, 2] [-1, 3] [-1, 4]");
  /* verbose: divisors and powers of two (ascending), tails allowed */
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "f", 12, "verbose", 2, 0, -1, NULL, 0), 5);
  CHECK_ENTS(sp, 5, "[-1, 1] [-1, 2] [-1, 3] [-1, 4] [-1, 6] [-1, 8] [-1, 12]");
  /* ... in CPython's set order: list(set(divisors) | set(pow2s)) for 64 and 100 */
  CHECK(tl_atvm_space_define_split(ctx, sp, "v64", 64, "verbose", 2, 0, -1, NULL, 0) > 0);
  CHECK_ENTS(sp, 6, "[-1, 32] [-1, 1] [-1, 2] [-1, 64] [-1, 4] [-1, 8] [-1, 16]");
  CHECK(tl_atvm_space_define_split(ctx, sp, "v100", 100, "verbose", 2, 0, -1, NULL, 0) > 0);
  CHECK_ENTS(sp, 7, "[-1, 32] [-1, 1] [-1, 2] [-1, 64] [-1, 4] [-1, 5] [-1, 100] [-1, 8] [-1, 10] "
                    "[-1, 16] [-1, 50] [-1, 20] [-1, 25]");
  /* candidate */
  int64_t cand[6] = {-1, 2, 4, -1, 1, 8};
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "g", 64, "candidate", 3, 0, -1, cand, 2), 8);
  CHECK_ENTS(sp, 8, "[-1, 2, 4] [-1, 1, 8]");
  /* errors name the knob */
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "a", 8, "factors", 2, 0, -1, NULL, 0), -1);
  CHECK(strstr(tl_errmsg(ctx), "knob 'a' is already defined") != NULL);
  CHECK_EQ_INT(tl_atvm_space_define_split(ctx, sp, "h", 8, "fancy", 2, 0, -1, NULL, 0), -1);
  CHECK(strstr(tl_errmsg(ctx), "define_split 'h': unknown policy 'fancy'") != NULL);
  CHECK_EQ_INT(tl_atvm_space_total(sp), 4 * 10 * 3 * 6 * 4 * 7 * 7 * 13 * 2);
  tl_atvm_space_free(sp);
  tl_ctx_free(ctx);
}

TL_TEST(atvm_reorder_annotate_knob) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_space *sp = tl_atvm_space_new();
  CHECK_EQ_INT(tl_atvm_space_define_reorder(ctx, sp, "r", 3, "all", 0, 0, NULL, 0), 0);
  CHECK_ENTS(sp, 0, "[0, 1, 2] [0, 2, 1] [1, 0, 2] [1, 2, 0] [2, 0, 1] [2, 1, 0]");
  CHECK_EQ_INT(tl_atvm_space_define_reorder(ctx, sp, "ri", 4, "interval_all", 1, 3, NULL, 0), 1);
  CHECK_ENTS(sp, 1, "[0, 1, 2, 3] [0, 2, 1, 3]");
  CHECK_EQ_INT(tl_atvm_space_define_reorder(ctx, sp, "id", 4, "identity", 0, 0, NULL, 0), 2);
  CHECK_EQ_INT(tl_atvm_space_dim(sp, 2), 1);
  CHECK_EQ_INT(tl_atvm_space_define_reorder(ctx, sp, "il", 5, "interleave", 3, 0, NULL, 0), 3);
  CHECK_ENTS(sp, 3, "[0, 1, 3, 2, 4]");
  CHECK_EQ_INT(tl_atvm_space_define_annotate(ctx, sp, "a", 2, "try_unroll_vec", 0), 4);
  /* 3 x 3 options minus (vec, vec); axis 0 varies slowest */
  CHECK_ENTS(sp, 4, "[\"none\", \"none\"] [\"none\", \"unroll\"] [\"none\", \"vec\"] "
                    "[\"unroll\", \"none\"] [\"unroll\", \"unroll\"] [\"unroll\", \"vec\"] "
                    "[\"vec\", \"none\"] [\"vec\", \"unroll\"]");
  CHECK_EQ_INT(tl_atvm_space_define_annotate(ctx, sp, "b", 3, "try_unroll", 0), 5);
  CHECK_EQ_INT(tl_atvm_space_dim(sp, 5), 8);
  CHECK_EQ_INT(tl_atvm_space_define_annotate(ctx, sp, "c", 4, "locate_cache", 2), 6);
  CHECK_ENTS(sp, 6, "[0, 1] [0, 2] [0, 3] [1, 2] [1, 3] [2, 3]");
  CHECK_EQ_INT(tl_atvm_space_define_knob(ctx, sp, "k", "[1500, 0, false, \"x\"]"), 7);
  CHECK_ENTS(sp, 7, "1500 0 false \"x\"");
  CHECK_EQ_INT(tl_atvm_space_define_knob(ctx, sp, "bad", "[]"), -1);
  CHECK(strstr(tl_errmsg(ctx), "define_knob 'bad'") != NULL);
  tl_atvm_space_free(sp);
  tl_ctx_free(ctx);
}

static const char *conv_args =
    "[[\"TENSOR\", [1, 3, 224, 224], \"float32\"], [\"TENSOR\", [64, 3, 7, 7], \"float32\"], "
    "[2, 2], [3, 3, 3, 3], [1, 1], \"NCHW\", \"NCHW\", \"float32\"]";

TL_TEST(atvm_index_mapping) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_task *t;
  CHECK_EQ_INT(tl_atvm_task_create(ctx, "conv2d_NCHWc.x86", conv_args, "llvm", &t), 0);
  /* dims 2 (tile_ic), 7 (tile_oc), 9 (tile_ow <= 64), 2 (unroll_kw) */
  CHECK_EQ_INT(tl_atvm_space_num_knobs(t), 4);
  CHECK_EQ_INT(tl_atvm_space_knob_dim(t, 2), 9);
  CHECK_EQ_INT(tl_atvm_space_len(t), 252);
  int64_t d[4];
  tl_atvm_space_point2knob(t, 193, d);
  CHECK(d[0] == 1 && d[1] == 5 && d[2] == 4 && d[3] == 1);
  CHECK_EQ_INT(tl_atvm_space_knob2point(t, d), 193);
  for (int64_t i = 0; i < 252; i++) {
    tl_atvm_space_point2knob(t, i, d);
    CHECK_EQ_INT(tl_atvm_space_knob2point(t, d), i);
  }
  /* TVM's entity (with the pre-2019 concrete outer sizes) maps to its index */
  int64_t idx;
  CHECK_EQ_INT(tl_atvm_space_index_of_entity(ctx, t,
      "[[\"tile_ic\", \"sp\", [1, 3]], [\"tile_oc\", \"sp\", [2, 32]], [\"tile_ow\", \"sp\", [14, 8]], "
      "[\"unroll_kw\", \"ot\", false]]", &idx), 0);
  CHECK_EQ_INT(idx, 193);
  CHECK_STREQ(tl_atvm_config_json(t, 193),
              "{\"index\": 193, \"code_hash\": null, \"entity\": [[\"tile_ic\", \"sp\", [-1, 3]], "
              "[\"tile_oc\", \"sp\", [-1, 32]], [\"tile_ow\", \"sp\", [-1, 8]], [\"unroll_kw\", \"ot\", false]]}");
  CHECK_EQ_INT(tl_atvm_space_index_of_entity(ctx, t,
      "[[\"tile_ic\", \"sp\", [1, 3]], [\"tile_oc\", \"sp\", [2, 32]], [\"tile_ow\", \"sp\", [1, 112]], "
      "[\"unroll_kw\", \"ot\", false]]", &idx), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "knob 'tile_ow' has no entity [1, 112]") != NULL);
  float f[16];
  CHECK_EQ_INT(tl_atvm_config_knob_features(t, 193, f, 16), 7);
  CHECK(f[1] == 3 && f[3] == 32 && f[5] == 8 && f[6] == 0);
  /* the fallback config of a plain target takes the host's lanes: oc_bn 32 (two
  ** 16-lane vectors on 32 registers) with AVX-512, 8 with AVX2 and FMA, else 4 */
  int lanes = tl_test_cpu_has("avx512f") ? 32 : tl_test_cpu_has("avx2") && tl_test_cpu_has("fma") ? 8 : 4;
  char oc[64];
  snprintf(oc, sizeof oc, "[\"tile_oc\", \"sp\", [-1, %d]]", lanes);
  CHECK(strstr(tl_atvm_config_json(t, -1), oc) != NULL);
  /* lowering: the arguments are data, kernel, output; the kernel is the weight as the
  ** graph executor deploys it, packed to [O/B, C, KH, KW, B] (B = 16 here) */
  tl_lowered *lf = NULL;
  CHECK_MSG(tl_atvm_lower(ctx, t, 193, "conv_193", &lf) == 0, "%s", tl_errmsg(ctx));
  CHECK(strstr(tl_lowered_text(lf), "func conv_193(data: float32[1, 3, 224, 224], kernel: float32[4, 3, 7, 7, 16]") != NULL);
  tl_lowered_free(lf);
  CHECK_EQ_INT(tl_atvm_lower(ctx, t, 252, "x", &lf), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "config index 252 out of range [-1, 252)") != NULL);
  tl_atvm_task_free(t);
  CHECK_EQ_INT(tl_atvm_task_create(ctx, "conv2d_NCHWc.cuda", conv_args, "llvm", &t), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "unknown template 'conv2d_NCHWc.cuda'") != NULL);
  CHECK_EQ_INT(tl_atvm_task_create(ctx, "dense_pack.x86", "[1, 2", "llvm", &t), TL_E_PARSE);
  tl_ctx_free(ctx);
}

/* The fallback config's entity of knob name in task t, as JSON text ("[-1, 8]"). */
static int fallback_has(tl_ctx *ctx, const char *tmpl, const char *args, const char *target,
                        const char *knob) {
  tl_atvm_task *t = NULL;
  if (tl_atvm_task_create(ctx, tmpl, args, target, &t)) return 0;
  int has = strstr(tl_atvm_config_json(t, -1), knob) != NULL;
  if (!has) fprintf(stderr, "%s on '%s': %s lacks %s\n", tmpl, target, tl_atvm_config_json(t, -1), knob);
  tl_atvm_task_free(t);
  return has;
}

/* Fallback configs keep their accumulators in registers: on AVX2 (16 ymm of 8
** floats) rows of one vector, at most 14 of them (a kernel vector and a
** broadcast beside; a 3x3 conv over a width that is a multiple of 7: 7 of them,
** kw unrolled), on AVX-512 (32 zmm) rows of two vectors, at most 14. */
TL_TEST(atvm_fallback_register_budget) {
  tl_ctx *ctx = tl_ctx_new();
  const char *avx2 = "llvm -mcpu=core-avx2", *avx512 = "llvm -mcpu=skylake-avx512";
  /* conv 3x3 over a 112-wide output: 7 rows with kw unrolled on AVX2, 14 rows of two
  ** vectors on AVX-512 */
  const char *conv = "[[\"TENSOR\", [1, 64, 112, 112], \"float32\"], [\"TENSOR\", [64, 64, 3, 3], "
                     "\"float32\"], [1, 1], [1, 1, 1, 1], [1, 1], \"NCHW\", \"NCHW\", \"float32\"]";
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", conv, avx2, "[\"tile_oc\", \"sp\", [-1, 8]]"));
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", conv, avx2, "[\"tile_ow\", \"sp\", [-1, 7]]"));
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", conv, avx2, "[\"unroll_kw\", \"ot\", true]"));
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", conv, avx512, "[\"tile_oc\", \"sp\", [-1, 32]]"));
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", conv, avx512, "[\"tile_ow\", \"sp\", [-1, 14]]"));
  /* a 7-wide output: AVX-512 takes two vectors of channels; on AVX2 7 rows of
  ** two ymm (14 + 2 kernel vectors + a broadcast) would not fit */
  const char *narrow = "[[\"TENSOR\", [1, 512, 7, 7], \"float32\"], [\"TENSOR\", [512, 512, 3, 3], "
                       "\"float32\"], [1, 1], [1, 1, 1, 1], [1, 1], \"NCHW\", \"NCHW\", \"float32\"]";
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", narrow, avx512, "[\"tile_oc\", \"sp\", [-1, 32]]"));
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", narrow, avx2, "[\"tile_oc\", \"sp\", [-1, 8]]"));
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", narrow, avx2, "[\"tile_ow\", \"sp\", [-1, 7]]"));
  /* 1x1 over 14x14: one output row of 14 positions by two vectors on AVX-512 (28
  ** accumulators: a second row would not fit), one on AVX2; over 6x6 two rows of 6 */
  const char *pw = "[[\"TENSOR\", [1, 256, 14, 14], \"float32\"], [\"TENSOR\", [256, 256, 1, 1], "
                   "\"float32\"], [1, 1], [0, 0, 0, 0], [1, 1], \"NCHW\", \"NCHW\", \"float32\"]";
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", pw, avx512, "[\"tile_oh\", \"ot\", 1]"));
  const char *pw6 = "[[\"TENSOR\", [1, 256, 6, 6], \"float32\"], [\"TENSOR\", [256, 256, 1, 1], "
                    "\"float32\"], [1, 1], [0, 0, 0, 0], [1, 1], \"NCHW\", \"NCHW\", \"float32\"]";
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", pw6, avx512, "[\"tile_oh\", \"ot\", 2]"));
  CHECK(fallback_has(ctx, "conv2d_NCHWc.x86", pw, avx2, "[\"tile_oh\", \"ot\", 1]"));
  /* depthwise over a 112-wide output: 14 rows on AVX2, 8 rows of two vectors on AVX-512 */
  const char *dw = "[[\"TENSOR\", [1, 32, 112, 112], \"float32\"], [\"TENSOR\", [32, 1, 3, 3], "
                   "\"float32\"], [1, 1], [1, 1, 1, 1], [1, 1], \"float32\"]";
  CHECK(fallback_has(ctx, "depthwise_conv2d_NCHWc.x86", dw, avx2, "[\"tile_ow\", \"sp\", [-1, 14]]"));
  CHECK(fallback_has(ctx, "depthwise_conv2d_NCHWc.x86", dw, avx512, "[\"tile_ow\", \"sp\", [-1, 8]]"));
  /* dense_pack, M = 8: rows of 16 outputs (two ymm) x 4 on AVX2, x 8 on AVX-512 */
  const char *dense = "[[\"TENSOR\", [8, 64], \"float32\"], [\"TENSOR\", [64, 64], \"float32\"], null, "
                      "\"float32\"]";
  CHECK(fallback_has(ctx, "dense_pack.x86", dense, avx2, "[\"tile_inner\", \"sp\", [-1, 4]]"));
  CHECK(fallback_has(ctx, "dense_pack.x86", dense, avx512, "[\"tile_inner\", \"sp\", [-1, 8]]"));
  tl_ctx_free(ctx);
}

/* A template's compute followed by injective consumers (bias_add, relu), as
** the graph executor fuses them, scheduled by the template at two configs,
** against the unscheduled build of the same group. */
typedef struct fused_case {
  const char *tmpl, *args;
  int nin;                       /* template tensor inputs */
  int ndim[2];
  int64_t shape[2][4];
  int bias_axis;                 /* -1: relu only */
  int64_t bias_len;
  int64_t config;
} fused_case;

static void check_fused(const fused_case *fc, int with_fallback) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_task *t;
  CHECK_MSG(tl_atvm_task_create(ctx, fc->tmpl, fc->args, "llvm", &t) == 0, "%s", tl_errmsg(ctx));
  tl_dag *dag = tl_dag_new();
  int in[3], out[4], nout, x, nb, nargs = fc->nin;
  static const char *const names[3] = {"in0", "in1", "bias"};
  for (int i = 0; i < fc->nin; i++)
    CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, names[i], fc->ndim[i], fc->shape[i], TL_FLOAT32, &in[i]), 0);
  CHECK_EQ_INT(tl_atvm_template_compute(ctx, fc->tmpl, fc->args, dag, in, fc->nin, out, 4, &nout), 0);
  x = out[nout - 1];
  if (fc->bias_axis >= 0) {
    CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "bias", 1, &fc->bias_len, TL_FLOAT32, &in[nargs++]), 0);
    int bi[2] = {x, in[2]};
    char attrs[32];
    snprintf(attrs, sizeof attrs, "{\"axis\": %d}", fc->bias_axis);
    CHECK_EQ_INT(tl_topi_op(ctx, dag, "bias_add", bi, 2, attrs, &x, 1, &nb), 0);
  }
  int r;
  CHECK_EQ_INT(tl_topi_op(ctx, dag, "relu", &x, 1, NULL, &r, 1, &nb), 0);
  tl_array *arr[4], *ref = NULL, *got = NULL;
  for (int i = 0; i < nargs; i++) {
    CHECK_EQ_INT(tl_array_empty(ctx, tl_dag_tensor_ndim(dag, in[i]), tl_dag_tensor_shape(dag, in[i]),
                                TL_FLOAT32, TL_DEV_CPU, 0, &arr[i]), 0);
    CHECK_EQ_INT(tl_array_random(ctx, arr[i], 0, -1, 1, 11 + i), 0);
  }
  int ond = tl_dag_tensor_ndim(dag, r);
  CHECK_EQ_INT(tl_array_empty(ctx, ond, tl_dag_tensor_shape(dag, r), TL_FLOAT32, TL_DEV_CPU, 0, &ref), 0);
  CHECK_EQ_INT(tl_array_empty(ctx, ond, tl_dag_tensor_shape(dag, r), TL_FLOAT32, TL_DEV_CPU, 0, &got), 0);
  /* -2: the unscheduled reference; the fallback (-1) for the first case only */
  int64_t configs[3] = {-2, fc->config, -1};
  int nconf = with_fallback ? 3 : 2;
  for (int c = 0; c < nconf; c++) {
    tl_sched *s;
    CHECK_EQ_INT(tl_sched_new(ctx, dag, &r, 1, &s), 0);
    if (configs[c] >= -1)
      CHECK_MSG(tl_atvm_template_schedule(ctx, t, configs[c], s) == 0, "%s", tl_errmsg(ctx));
    int a[4];
    for (int i = 0; i < nargs; i++) a[i] = tl_sched_stage_tensor(s, tl_sched_stage_find(s, names[i]), 0);
    a[nargs] = tl_sched_stage_tensor(s, tl_sched_num_stages(s) - 1, 0);
    tl_lowered *f;
    CHECK_MSG(tl_lower(ctx, s, a, nargs + 1, "fused", &f) == 0, "%s", tl_errmsg(ctx));
    tl_module *m;
    CHECK_MSG(tl_lowered_build(ctx, f, NULL, NULL, &m) == 0, "%s", tl_errmsg(ctx));
    arr[nargs] = c == 0 ? ref : got;
    CHECK_EQ_INT(tl_module_call(ctx, m, "fused", arr, nargs + 1), 0);
    if (c > 0) {
      int64_t nbad = 0;
      CHECK_EQ_INT(tl_array_compare(ctx, got, ref, 1e-4, 1e-4, &nbad, NULL, NULL), 0);
      CHECK_MSG(nbad == 0, "%s config %lld: %lld elements differ", fc->tmpl, (long long)configs[c],
                (long long)nbad);
    }
    tl_module_free(m);
    tl_lowered_free(f);
    tl_sched_free(s);
  }
  for (int i = 0; i < nargs; i++) tl_array_free(arr[i]);
  tl_array_free(ref);
  tl_array_free(got);
  tl_dag_free(dag);
  tl_atvm_task_free(t);
  tl_ctx_free(ctx);
}

static const fused_case fused_cases[] = {
      {"conv2d_NCHWc.x86",
       "[[\"TENSOR\", [1, 8, 10, 10], \"float32\"], [\"TENSOR\", [16, 8, 3, 3], \"float32\"], "
       "[1, 1], [1, 1, 1, 1], [1, 1], \"NCHW\", \"NCHW\", \"float32\"]",
       2, {4, 4}, {{1, 8, 10, 10}, {16, 8, 3, 3}}, 1, 16, 101},
      {"depthwise_conv2d_NCHWc.x86",
       "[[\"TENSOR\", [1, 8, 9, 9], \"float32\"], [\"TENSOR\", [8, 1, 3, 3], \"float32\"], "
       "[2, 2], [1, 1, 1, 1], [1, 1], \"float32\"]",
       2, {4, 4}, {{1, 8, 9, 9}, {8, 1, 3, 3}}, 1, 8, 17},
      {"dense_nopack.x86",
       "[[\"TENSOR\", [4, 16], \"float32\"], [\"TENSOR\", [12, 16], \"float32\"], null, \"float32\"]",
       2, {2, 2}, {{4, 16}, {12, 16}}, 1, 12, 40},
      {"dense_pack.x86",
       "[[\"TENSOR\", [4, 16], \"float32\"], [\"TENSOR\", [12, 16], \"float32\"], null, \"float32\"]",
       2, {2, 2}, {{4, 16}, {12, 16}}, -1, 0, 77},
};

TL_TEST(atvm_fused_group) {
  for (size_t i = 0; i < TL_ARRAY_SIZE(fused_cases); i++) check_fused(&fused_cases[i], i == 0);
}

TL_TEST(atvm_instantiate_speed) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_task *t;
  CHECK_EQ_INT(tl_atvm_task_create(ctx, "conv2d_NCHWc.x86", conv_args, "llvm", &t), 0);
  double t0 = tl_now();
  int n = 0;
  for (int64_t i = 0; i < 252; i++, n++) {
    tl_sched *s;
    int a[8], na;
    CHECK_MSG(tl_atvm_instantiate(ctx, t, i, &s, a, 8, &na) == 0, "%s", tl_errmsg(ctx));
    CHECK_EQ_INT(na, 3);
    tl_sched_free(s);
  }
  double per = (tl_now() - t0) / n;
  printf("     conv2d_NCHWc.x86: instantiate %.1f us per config\n", per * 1e6);
  CHECK(per < 5e-3);
  tl_atvm_task_free(t);
  tl_ctx_free(ctx);
}
