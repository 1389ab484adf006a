/* Unit tests for core/ansor: the static analysis of compute DAGs built
** with the topi operators (matmul, bias and relu, conv2d with its pad
** stage, depthwise conv, pooling, softmax, a transpose), the producer and
** consumer maps, the element-wise match relation and the errors; the
** hardware params (defaults per target, device info, set and get). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "ansor/ansor.h"
#include "topi/topi.h"
#include "tl_test.h"

static int ph(tl_ctx *ctx, tl_dag *dag, const char *name, int n, const int64_t *s) {
  int t = -1;
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, name, n, s, TL_FLOAT32, &t), 0);
  return t;
}

static int op1(tl_ctx *ctx, tl_dag *dag, const char *name, const int *in, int nin,
               const char *attrs) {
  int out[8], n = 0;
  int rc = tl_topi_op(ctx, dag, name, in, nin, attrs, out, 8, &n);
  CHECK_MSG(rc == 0, "%s: %s", name, tl_errmsg(ctx));
  return out[n - 1];
}

/* The extracted dag of outputs (what a task holds) and its analysis. */
typedef struct {
  tl_dag *dag;
  tl_ansor_analysis *a;
  int map[64];                    /* source tensor -> extracted tensor */
} analyzed;

static analyzed analyze(tl_ctx *ctx, tl_dag *src, const int *outs, int nout) {
  analyzed r = {NULL, NULL, {0}};
  CHECK(tl_dag_num_tensors(src) <= 64);
  CHECK_EQ_INT(tl_dag_extract(ctx, src, outs, nout, &r.dag, r.map), 0);
  CHECK_MSG(tl_ansor_analyze(ctx, r.dag, &r.a) == 0, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(tl_ansor_num_ops(r.a), tl_dag_num_ops(r.dag));
  return r;
}

/* Name (in the extracted dag) of the op making source tensor t. */
static const char *nm(const analyzed *r, int t) {
  CHECK(r->map[t] >= 0);
  return tl_dag_op_name(r->dag, tl_dag_tensor_op(r->dag, r->map[t]));
}

static void done(analyzed *r) {
  tl_ansor_analysis_free(r->a);
  tl_dag_free(r->dag);
}

static int op_named(const analyzed *r, const char *name) {
  for (int o = 0; o < tl_dag_num_ops(r->dag); o++)
    if (strcmp(tl_dag_op_name(r->dag, o), name) == 0) return o;
  tl_test_fail(__FILE__, __LINE__, "no op named %s", name);
}

/* flags as "IiMRO" letters: Injective, strictly inlinable, Multi-level
** tiling, data Reuse, Output; '-' where false. */
static void check_flags(const analyzed *r, const char *name, const char *want) {
  int o = op_named(r, name);
  char got[6] = {
    tl_ansor_is_injective(r->a, o) ? 'I' : '-',
    tl_ansor_is_strictly_inlinable(r->a, o) ? 'i' : '-',
    tl_ansor_needs_multi_level_tiling(r->a, o) ? 'M' : '-',
    tl_ansor_has_reuse(r->a, o) ? 'R' : '-',
    tl_ansor_is_output(r->a, o) ? 'O' : '-', 0};
  CHECK_MSG(strcmp(got, want) == 0, "%s: flags %s, expected %s", name, got, want);
}

/* Names of op's consumers (or producers), space-separated. */
static void check_list(const analyzed *r, const char *name, int producers, const char *want) {
  int o = op_named(r, name);
  char got[256] = "";
  int n = producers ? tl_ansor_num_producers(r->a, o) : tl_ansor_num_consumers(r->a, o);
  for (int i = 0; i < n; i++) {
    int x = producers ? tl_ansor_producer(r->a, o, i) : tl_ansor_consumer(r->a, o, i);
    if (i) strcat(got, " ");
    strcat(got, tl_dag_op_name(r->dag, x));
  }
  CHECK_MSG(strcmp(got, want) == 0, "%s %s: '%s', expected '%s'", name,
            producers ? "producers" : "consumers", got, want);
}

static int ematch(const analyzed *r, const char *op, const char *target) {
  return tl_ansor_elementwise_match(r->a, op_named(r, op), op_named(r, target));
}

/* The consumer tiling fuses, by name ("" for none). */
static const char *fused(const analyzed *r, const char *op, const uint8_t *inlined) {
  int c = 7;
  int yes = tl_ansor_elementwise_consumer(r->a, op_named(r, op), inlined, &c);
  CHECK_EQ_INT(yes, c >= 0);
  return yes ? tl_dag_op_name(r->dag, c) : "";
}

TL_TEST(ansor_matmul) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t as[2] = {64, 32}, bs[2] = {32, 48};
  int in[2] = {ph(ctx, dag, "A", 2, as), ph(ctx, dag, "B", 2, bs)};
  int c = op1(ctx, dag, "matmul", in, 2, NULL);
  analyzed r = analyze(ctx, dag, &c, 1);
  const char *mm = nm(&r, c);
  check_flags(&r, mm, "--MRO");
  check_flags(&r, "A", "I----");
  check_flags(&r, "B", "I----");
  check_list(&r, mm, 1, "A B");
  check_list(&r, mm, 0, "");
  check_list(&r, "A", 0, mm);
  CHECK_EQ_INT(tl_ansor_has_reduce(r.a, op_named(&r, mm)), 1);
  CHECK_EQ_INT(ematch(&r, mm, mm), 1);
  CHECK_EQ_INT(ematch(&r, "A", mm), 0);    /* a placeholder matches nothing */
  CHECK_STREQ(fused(&r, mm, NULL), "");
  done(&r);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_matmul_bias_relu) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t as[2] = {64, 32}, bs[2] = {32, 48}, vs[1] = {48};
  int in[2] = {ph(ctx, dag, "A", 2, as), ph(ctx, dag, "B", 2, bs)};
  int c = op1(ctx, dag, "matmul", in, 2, NULL);
  int bin[2] = {c, ph(ctx, dag, "bias", 1, vs)};
  int b = op1(ctx, dag, "bias_add", bin, 2, "{\"axis\":1}");
  int y = op1(ctx, dag, "relu", &b, 1, NULL);
  analyzed r = analyze(ctx, dag, &y, 1);
  const char *mm = nm(&r, c), *ba = nm(&r, b), *relu = nm(&r, y);
  check_flags(&r, mm, "--MR-");
  check_flags(&r, ba, "Ii-R-");            /* bias[j] is read for every i: reuse, no tiling */
  check_flags(&r, relu, "Ii--O");
  char want[128];
  snprintf(want, sizeof want, "%s bias", mm);
  check_list(&r, ba, 1, want);
  check_list(&r, mm, 0, ba);
  check_list(&r, "bias", 0, ba);
  CHECK_EQ_INT(ematch(&r, mm, ba), 1);
  CHECK_EQ_INT(ematch(&r, mm, relu), 1);
  CHECK_EQ_INT(ematch(&r, ba, relu), 1);
  CHECK_EQ_INT(ematch(&r, relu, mm), 0);   /* no chain of consumers leads back */
  CHECK_EQ_INT(ematch(&r, "bias", relu), 0);
  CHECK_STREQ(fused(&r, mm, NULL), ba);
  /* with the bias stage inlined, the fused consumer is the relu */
  uint8_t inl[64] = {0};
  inl[op_named(&r, ba)] = 1;
  CHECK_STREQ(fused(&r, mm, inl), relu);
  int cons[64];
  CHECK_EQ_INT(tl_ansor_consumers_through(r.a, op_named(&r, mm), inl, cons), 1);
  CHECK_EQ_INT(cons[0], op_named(&r, relu));
  CHECK_STREQ(fused(&r, relu, NULL), "");  /* an output without consumers */
  done(&r);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_conv2d_pad) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {1, 16, 14, 14}, ws[4] = {32, 16, 3, 3};
  int in[2] = {ph(ctx, dag, "data", 4, xs), ph(ctx, dag, "kernel", 4, ws)};
  int y = op1(ctx, dag, "conv2d", in, 2, "{\"strides\":[1,1],\"padding\":[1,1,1,1],\"dilation\":[1,1]}");
  analyzed r = analyze(ctx, dag, &y, 1);
  const char *conv = nm(&r, y);
  /* the pad stage: simple accesses (axis - 1), but an if_then_else guard,
  ** so injective and not strictly inlinable */
  check_flags(&r, "pad_temp", "I----");
  check_flags(&r, conv, "--MRO");
  check_list(&r, conv, 1, "pad_temp kernel");
  CHECK_EQ_INT(ematch(&r, "pad_temp", conv), 0);   /* the conv reads pad_temp[.., yy + ry, ..] */
  CHECK_STREQ(fused(&r, "pad_temp", NULL), "");
  done(&r);
  /* without padding there is no pad stage; a 1x1 conv still needs tiling */
  int64_t w1[4] = {32, 16, 1, 1};
  int in1[2] = {in[0], ph(ctx, dag, "k1", 4, w1)};
  int y1 = op1(ctx, dag, "conv2d", in1, 2, "{\"strides\":[1,1],\"padding\":[0,0,0,0],\"dilation\":[1,1]}");
  r = analyze(ctx, dag, &y1, 1);
  CHECK_EQ_INT(tl_dag_num_ops(r.dag), 3);
  check_flags(&r, nm(&r, y1), "--MRO");
  /* the attribute of a const-tensor compute turns tiling off */
  int o = op_named(&r, nm(&r, y1));
  CHECK_EQ_INT(tl_dag_set_attrs(ctx, r.dag, o, "{\"simplify_const_tensor_indices\":[\"eps\"]}"), 0);
  tl_ansor_analysis_free(r.a);
  CHECK_EQ_INT(tl_ansor_analyze(ctx, r.dag, &r.a), 0);
  check_flags(&r, nm(&r, y1), "---RO");
  done(&r);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

/* NHWC conv2d + a [1, 1, 1, C] bias: the add reads conv2d_nhwc[0, i1, i2, i3]
** (a constant for the batch axis of extent 1) and still matches element-wise. */
TL_TEST(ansor_conv2d_nhwc_bias) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {1, 14, 14, 16}, ws[4] = {3, 3, 16, 32}, bs[4] = {1, 1, 1, 32};
  int in[2] = {ph(ctx, dag, "data", 4, xs), ph(ctx, dag, "kernel", 4, ws)};
  int y = op1(ctx, dag, "conv2d", in, 2, "{\"strides\":[1,1],\"padding\":[1,1,1,1],"
              "\"dilation\":[1,1],\"data_layout\":\"NHWC\",\"kernel_layout\":\"HWIO\"}");
  int ain[2] = {y, ph(ctx, dag, "bias", 4, bs)};
  int z = op1(ctx, dag, "add", ain, 2, NULL);
  int r1 = op1(ctx, dag, "relu", &z, 1, NULL);
  analyzed r = analyze(ctx, dag, &r1, 1);
  CHECK_STREQ(nm(&r, y), "conv2d_nhwc");
  check_flags(&r, nm(&r, y), "--MR-");
  check_flags(&r, nm(&r, z), "Ii-R-");
  CHECK_EQ_INT(ematch(&r, nm(&r, y), nm(&r, r1)), 1);
  CHECK_STREQ(fused(&r, nm(&r, y), NULL), nm(&r, z));
  done(&r);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_depthwise_pool) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {1, 8, 12, 12}, ws[4] = {8, 1, 3, 3};
  int x = ph(ctx, dag, "data", 4, xs);
  int in[2] = {x, ph(ctx, dag, "kernel", 4, ws)};
  int y = op1(ctx, dag, "depthwise_conv2d", in, 2, "{\"strides\":[1,1],\"padding\":[0,0,0,0],\"dilation\":[1,1]}");
  analyzed r = analyze(ctx, dag, &y, 1);
  /* the kernel misses the output's spatial axes and the op reduces */
  check_flags(&r, nm(&r, y), "--MRO");
  done(&r);
  /* pooling reduces over windows but every input keeps every output axis:
  ** no reuse in this sense, so no multi-level tiling */
  int p = op1(ctx, dag, "max_pool2d", &x, 1, "{\"kernel\":[2,2],\"strides\":[2,2]}");
  r = analyze(ctx, dag, &p, 1);
  check_flags(&r, nm(&r, p), "----O");
  CHECK_EQ_INT(tl_ansor_has_reduce(r.a, op_named(&r, nm(&r, p))), 1);
  done(&r);
  int g = op1(ctx, dag, "global_avg_pool2d", &x, 1, NULL);
  r = analyze(ctx, dag, &g, 1);
  for (int o = 0; o < tl_dag_num_ops(r.dag); o++) {
    CHECK_EQ_INT(tl_ansor_needs_multi_level_tiling(r.a, o), 0);
    CHECK_EQ_INT(tl_ansor_has_reuse(r.a, o), 0);
  }
  done(&r);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_softmax) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[2] = {4, 16};
  int x = ph(ctx, dag, "x", 2, xs);
  int y = op1(ctx, dag, "softmax", &x, 1, "{\"axis\":-1}");
  analyzed r = analyze(ctx, dag, &y, 1);
  check_flags(&r, "T_softmax_maxelem", "-----");
  check_flags(&r, "T_softmax_exp", "I--R-");     /* exp: never strictly inlined */
  check_flags(&r, "T_softmax_expsum", "-----");
  check_flags(&r, "T_softmax_norm", "Ii-RO");
  check_list(&r, "x", 0, "T_softmax_maxelem T_softmax_exp");
  check_list(&r, "T_softmax_exp", 0, "T_softmax_expsum T_softmax_norm");
  check_list(&r, "T_softmax_norm", 1, "T_softmax_exp T_softmax_expsum");
  /* two consumers: no element-wise chain from exp */
  CHECK_EQ_INT(ematch(&r, "T_softmax_exp", "T_softmax_norm"), 0);
  /* a reduction's consumer of another shape does not match */
  CHECK_EQ_INT(ematch(&r, "T_softmax_expsum", "T_softmax_norm"), 0);
  CHECK_STREQ(fused(&r, "T_softmax_maxelem", NULL), "");
  done(&r);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_output_consumed_and_transpose) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t as[2] = {32, 32};
  int in[2] = {ph(ctx, dag, "A", 2, as), ph(ctx, dag, "B", 2, as)};
  int c = op1(ctx, dag, "matmul", in, 2, NULL);
  int y = op1(ctx, dag, "relu", &c, 1, NULL);
  int outs[2] = {c, y};
  analyzed r = analyze(ctx, dag, outs, 2);
  check_flags(&r, nm(&r, c), "--MRO");           /* an output that relu also reads */
  check_flags(&r, nm(&r, y), "Ii--O");
  check_list(&r, nm(&r, c), 0, nm(&r, y));
  CHECK_STREQ(fused(&r, nm(&r, c), NULL), nm(&r, y));
  done(&r);
  /* a transpose consumer: injective, reordered, so neither strictly
  ** inlinable nor an element-wise match, though the shapes agree */
  int t = op1(ctx, dag, "transpose", &c, 1, "{\"axes\":[1,0]}");
  r = analyze(ctx, dag, &t, 1);
  check_flags(&r, nm(&r, t), "I---O");
  CHECK_EQ_INT(ematch(&r, nm(&r, c), nm(&r, t)), 0);
  CHECK_STREQ(fused(&r, nm(&r, c), NULL), "");
  done(&r);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_const_and_errors) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  /* a compute that reads nothing is strictly inlinable */
  int64_t s[2] = {4, 4};
  tl_ref ax[2];
  tl_te_axis_vars(dag, 2, NULL, ax);
  tl_ref body = tl_imm_float(dag->ir, TL_T_F32, 1.5);
  int k = -1;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "ones", "", 2, s, ax, 1, &body, TL_RED_NONE, NULL, 0, 0, &k), 0);
  analyzed r = analyze(ctx, dag, &k, 1);
  check_flags(&r, "ones", "Ii--O");
  CHECK_EQ_INT(tl_ansor_num_producers(r.a, 0), 0);
  /* bad ids answer -1 */
  CHECK_EQ_INT(tl_ansor_is_injective(r.a, 1), -1);
  CHECK_EQ_INT(tl_ansor_is_output(r.a, -1), -1);
  CHECK_EQ_INT(tl_ansor_consumer(r.a, 0, 0), -1);
  CHECK_EQ_INT(tl_ansor_producer(r.a, 3, 0), -1);
  CHECK_EQ_INT(tl_ansor_elementwise_match(r.a, 0, 5), -1);
  int cons = 3;
  CHECK_EQ_INT(tl_ansor_elementwise_consumer(r.a, 9, NULL, &cons), -1);
  CHECK_EQ_INT(cons, -1);
  CHECK_EQ_INT(tl_ansor_num_ops(NULL), -1);
  done(&r);
  tl_ansor_analysis *a = (tl_ansor_analysis *)&r;
  CHECK_EQ_INT(tl_ansor_analyze(ctx, NULL, &a), TL_E_ARG);
  CHECK(a == NULL);
  CHECK_STREQ(tl_errmsg(ctx), "ansor analysis: expected a compute DAG, got none");
  tl_ansor_analysis_free(NULL);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

/* ---- hardware params ------------------------------------------------------------------ */

static int64_t hw_field(tl_ctx *ctx, const tl_ansor_hw *hw, const char *f) {
  int64_t v = -99;
  CHECK_MSG(tl_ansor_hw_get(ctx, hw, f, &v) == 0, "%s: %s", f, tl_errmsg(ctx));
  return v;
}

static tl_ansor_hw *hw_of(tl_ctx *ctx, const char *target, const char *info) {
  tl_target *t = NULL;
  CHECK_MSG(tl_target_parse(ctx, target, &t) == 0, "%s: %s", target, tl_errmsg(ctx));
  tl_ansor_hw *hw = NULL;
  int rc = tl_ansor_hw_new(ctx, t, info, &hw);
  tl_target_free(t);
  return rc ? NULL : hw;
}

TL_TEST(ansor_hw_cpu_defaults) {
  tl_ctx *ctx = tl_ctx_new();
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK_EQ_INT(sched_getaffinity(0, sizeof set, &set), 0);
  static const struct { const char *target; int64_t vec; } cases[] = {
      {"llvm -mcpu=skylake-avx512", 64}, {"llvm -mcpu=core-avx2", 32}, {"c -mcpu=core-avx2", 32}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tl_ansor_hw *hw = hw_of(ctx, cases[i].target, NULL);
    CHECK_MSG(hw != NULL, "%s: %s", cases[i].target, tl_errmsg(ctx));
    CHECK_EQ_INT(hw_field(ctx, hw, "num_cores"), CPU_COUNT(&set));
    CHECK_EQ_INT(hw_field(ctx, hw, "vector_unit_bytes"), cases[i].vec);
    CHECK_EQ_INT(hw_field(ctx, hw, "cache_line_bytes"), 64);
    CHECK_EQ_INT(hw_field(ctx, hw, "max_threads_per_block"), 0);
    CHECK_EQ_INT(hw_field(ctx, hw, "warp_size"), 0);
    tl_ansor_hw_free(hw);
  }
  tl_ctx_free(ctx);
}

TL_TEST(ansor_hw_opencl_defaults) {
  tl_ctx *ctx = tl_ctx_new();
  const int64_t mali[8] = {-1, 16, 64, 32768, INT32_MAX, 256, 1, 1};
  tl_ansor_hw *hw = hw_of(ctx, "opencl -device=mali", NULL);
  CHECK_MSG(hw != NULL, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(tl_ansor_hw_num_fields(), 8);
  for (int i = 0; i < 8; i++) CHECK_EQ_INT(hw_field(ctx, hw, tl_ansor_hw_field_name(i)), mali[i]);
  CHECK(tl_ansor_hw_field_name(8) == NULL);
  tl_ansor_hw_free(hw);
  /* device info: queried limits; vthread = max(1, warp / 4) */
  hw = hw_of(ctx, "opencl", "{\"max_work_group_size\": 1024, \"local_mem_bytes\": 49152, "
                            "\"subgroup_size\": 32}");
  CHECK_MSG(hw != NULL, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(hw_field(ctx, hw, "max_shared_memory_per_block"), 49152);
  CHECK_EQ_INT(hw_field(ctx, hw, "max_local_memory_per_block"), INT32_MAX);
  CHECK_EQ_INT(hw_field(ctx, hw, "max_threads_per_block"), 1024);
  CHECK_EQ_INT(hw_field(ctx, hw, "warp_size"), 32);
  CHECK_EQ_INT(hw_field(ctx, hw, "max_vthread_extent"), 8);
  CHECK_EQ_INT(hw_field(ctx, hw, "num_cores"), -1);
  tl_ansor_hw_free(hw);
  hw = hw_of(ctx, "opencl -device=mali", "{\"max_work_group_size\": 384, \"local_mem_bytes\": "
                                         "32768, \"subgroup_size\": 4}");
  CHECK_MSG(hw != NULL, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(hw_field(ctx, hw, "max_threads_per_block"), 384);
  CHECK_EQ_INT(hw_field(ctx, hw, "max_vthread_extent"), 1);
  tl_ansor_hw_free(hw);
  /* no defaults without a device; bad device info */
  CHECK(hw_of(ctx, "opencl", NULL) == NULL);
  CHECK(strstr(tl_errmsg(ctx), "target 'opencl' has no defaults without a device") != NULL);
  CHECK(hw_of(ctx, "opencl", "[1]") == NULL);
  CHECK(strstr(tl_errmsg(ctx), "not a JSON object") != NULL);
  CHECK(hw_of(ctx, "opencl", "{\"max_work_group_size\": 64, \"local_mem_bytes\": 1}") == NULL);
  CHECK_STREQ(tl_errmsg(ctx), "hardware params: the device info has no non-negative integer "
                              "'subgroup_size'");
  tl_ctx_free(ctx);
}

TL_TEST(ansor_hw_set_values) {
  tl_ctx *ctx = tl_ctx_new();
  int64_t v[8] = {4, 32, 64, 0, 0, 0, 0, 0};
  tl_ansor_hw *hw = NULL;
  CHECK_MSG(tl_ansor_hw_new_values(ctx, v, &hw) == 0, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(hw_field(ctx, hw, "num_cores"), 4);
  CHECK_EQ_INT(tl_ansor_hw_set(ctx, hw, "warp_size", 16), 0);
  CHECK_EQ_INT(hw_field(ctx, hw, "warp_size"), 16);
  CHECK_EQ_INT(tl_ansor_hw_set(ctx, hw, "num_cores", 0), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "hardware params: num_cores = 0 is out of range (expected -1 "
                              "(unknown) or a positive count)");
  CHECK_EQ_INT(tl_ansor_hw_set(ctx, hw, "cache_line_bytes", 0), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "cache_line_bytes = 0") != NULL);
  CHECK_EQ_INT(tl_ansor_hw_set(ctx, hw, "max_threads_per_block", (int64_t)INT32_MAX + 1), TL_E_ARG);
  CHECK_EQ_INT(tl_ansor_hw_set(ctx, hw, "warp", 1), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "hardware params: unknown field 'warp'");
  int64_t x;
  CHECK_EQ_INT(tl_ansor_hw_get(ctx, hw, NULL, &x), TL_E_ARG);
  CHECK_EQ_INT(hw_field(ctx, hw, "num_cores"), 4);   /* failed sets left it alone */
  tl_ansor_hw_free(hw);
  v[1] = 0;
  hw = (tl_ansor_hw *)v;
  CHECK_EQ_INT(tl_ansor_hw_new_values(ctx, v, &hw), TL_E_ARG);
  CHECK(hw == NULL);
  CHECK(strstr(tl_errmsg(ctx), "vector_unit_bytes = 0") != NULL);
  tl_ansor_hw_free(NULL);
  tl_ctx_free(ctx);
}
