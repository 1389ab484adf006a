/* Unit tests for core/topi: output shapes, tags, patterns, attrs, FLOP
** counts, the Winograd transform matrices and the attribute errors with
** their exact messages. The numbers are checked from Lua
** (tests/lua/test_topi.lua, tests/lua/test_onnx_ops.lua). */
#include <math.h>
#include <string.h>

#include "te/te.h"
#include "topi/topi.h"
#include "tl_test.h"

static int ph(tl_ctx *ctx, tl_dag *dag, const char *name, int n, const int64_t *s, int dtype) {
  int t = -1;
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, name, n, s, dtype, &t), 0);
  return t;
}

static void check_shape(tl_dag *dag, int t, int n, const int64_t *want) {
  CHECK_EQ_INT(tl_dag_tensor_ndim(dag, t), n);
  const int64_t *s = tl_dag_tensor_shape(dag, t);
  for (int i = 0; i < n; i++) CHECK_EQ_INT(s[i], want[i]);
}

/* Run op expecting success and one output. */
static int op1(tl_ctx *ctx, tl_dag *dag, const char *name, const int *in, int nin, const char *attrs) {
  int out[8], n = 0;
  int rc = tl_topi_op(ctx, dag, name, in, nin, attrs, out, 8, &n);
  CHECK_MSG(rc == 0, "%s: %s", name, tl_errmsg(ctx));
  CHECK_EQ_INT(n, 1);
  return out[0];
}

static void expect_err(tl_ctx *ctx, tl_dag *dag, const char *name, const int *in, int nin,
                       const char *attrs, const char *msg) {
  int out[8], n = 0;
  CHECK(tl_topi_op(ctx, dag, name, in, nin, attrs, out, 8, &n) != 0);
  CHECK_STREQ(tl_errmsg(ctx), msg);
  tl_clearerr(ctx);
}

TL_TEST(topi_conv2d_shapes_flops) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {1, 3, 224, 224}, ws[4] = {64, 3, 7, 7};
  int x = ph(ctx, dag, "data", 4, xs, TL_FLOAT32), w = ph(ctx, dag, "kernel", 4, ws, TL_FLOAT32);
  int in[2] = {x, w};
  int y = op1(ctx, dag, "conv2d", in, 2, "{\"strides\":[2,2],\"padding\":[3,3,3,3],\"dilation\":[1,1]}");
  int64_t want[4] = {1, 64, 112, 112};
  check_shape(dag, y, 4, want);
  int op = tl_dag_tensor_op(dag, y);
  CHECK_STREQ(tl_dag_op_tag(dag, op), "conv2d_nchw");
  CHECK(strstr(tl_dag_op(dag, op)->attrs_json, "\"pattern\":\"out_elemwise_fusable\"") != NULL);
  CHECK(strstr(tl_dag_op(dag, op)->attrs_json, "\"strides\":[2,2]") != NULL);
  /* the pad stage is its own op feeding the conv */
  int pad_t = tl_dag_op_input(dag, op, 0);
  CHECK_STREQ(tl_dag_op_name(dag, tl_dag_tensor_op(dag, pad_t)), "pad_temp");
  tl_dag *sub = NULL;
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, &y, 1, &sub, NULL), 0);
  /* the direct count: 2 * N*K*OH*OW * C*KH*KW, plus the pad stage's guard */
  double conv = 2.0 * 64 * 112 * 112 * 3 * 49;
  CHECK(tl_dag_flop_ansor(sub) >= conv);
  tl_dag_free(sub);

  /* asymmetric padding, dilation, NHWC, groups */
  int64_t x2s[4] = {2, 9, 10, 9}, w2s[4] = {3, 3, 3, 6};
  int x2 = ph(ctx, dag, "x2", 4, x2s, TL_FLOAT32), w2 = ph(ctx, dag, "w2", 4, w2s, TL_FLOAT32);
  int in2[2] = {x2, w2};
  int y2 = op1(ctx, dag, "conv2d", in2, 2,
               "{\"strides\":[1,2],\"padding\":[0,1,2,3],\"dilation\":[2,1],\"groups\":3,\"layout\":\"NHWC\"}");
  /* H: (9 + 0 + 2 - 5)/1 + 1 = 7; W: (10 + 1 + 3 - 3)/2 + 1 = 6 */
  int64_t want2[4] = {2, 7, 6, 6};
  check_shape(dag, y2, 4, want2);
  CHECK_STREQ(tl_dag_op_tag(dag, tl_dag_tensor_op(dag, y2)), "group_conv2d_nhwc");

  /* int8 x int8 -> int32 */
  int64_t qs[4] = {1, 4, 6, 6}, qw[4] = {8, 4, 1, 1};
  int q = ph(ctx, dag, "q", 4, qs, TL_INT8), qk = ph(ctx, dag, "qk", 4, qw, TL_INT8);
  int in3[2] = {q, qk};
  int y3 = op1(ctx, dag, "conv2d", in3, 2, "{\"out_dtype\":\"int32\"}");
  CHECK_EQ_INT(tl_dag_tensor_dtype(dag, y3), TL_INT32);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(topi_conv2d_errors) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {1, 3, 5, 5}, w7[4] = {2, 3, 7, 7}, w4[4] = {2, 4, 3, 3}, x4s[4] = {1, 4, 5, 5};
  int x = ph(ctx, dag, "x", 4, xs, TL_FLOAT32), k7 = ph(ctx, dag, "k7", 4, w7, TL_FLOAT32);
  int k4 = ph(ctx, dag, "k4", 4, w4, TL_FLOAT32), x4 = ph(ctx, dag, "x4", 4, x4s, TL_FLOAT32);
  int a[2] = {x, k7}, b[2] = {x, k4}, c[2] = {x4, k4};
  expect_err(ctx, dag, "conv2d", a, 2, "{\"strides\":[0,1]}", "conv2d: strides must be positive, got (0, 1) for data (1, 3, 5, 5) and kernel (2, 3, 7, 7)");
  expect_err(ctx, dag, "conv2d", a, 2, "{}", "conv2d: kernel 7x7 (dilated 7x7) is larger than the padded input 5x5 (padding (0, 0, 0, 0)) "
             "for data (1, 3, 5, 5) and kernel (2, 3, 7, 7)");
  expect_err(ctx, dag, "conv2d", a, 2, "{\"dilation\":[2,2],\"padding\":[1,1,1,1]}",
             "conv2d: kernel 7x7 (dilated 13x13) is larger than the padded input 7x7 (padding (1, 1, 1, 1)) "
             "for data (1, 3, 5, 5) and kernel (2, 3, 7, 7)");
  expect_err(ctx, dag, "conv2d", b, 2, "{}",
             "conv2d: channel mismatch: data has 3 channels (groups=1) but kernel expects 4 "
             "for data (1, 3, 5, 5) and kernel (2, 4, 3, 3)");
  expect_err(ctx, dag, "conv2d", c, 2, "{\"groups\":3}", "conv2d: groups=3 does not divide 4 input channels for data (1, 4, 5, 5) and kernel (2, 4, 3, 3)");
  expect_err(ctx, dag, "conv2d", a, 2, "{\"padding\":[1,2,3]}", "conv2d: padding must have 1, 2 or 4 values, got 3");
  expect_err(ctx, dag, "conv2d", a, 2, "{\"padding\":[1,1,1,1,1,1,1,1,1,1,1,1]}",
             "conv2d: padding must have 1, 2 or 4 values, got 12");
  expect_err(ctx, dag, "conv2d", a, 2, "{\"layout\":\"NCWH\"}",
             "conv2d: layout 'NCWH' is not supported (NCHW or NHWC)");
  expect_err(ctx, dag, "conv2d", a, 2, "{\"strides\":\"x\"}",
             "conv2d: attribute 'strides' must be a list of integers");
  expect_err(ctx, dag, "conv2d", a, 1, "{}", "conv2d: expected 2 inputs, got 1");
  expect_err(ctx, dag, "conv2d", a, 2, "[1]", "conv2d: attributes must be a JSON object");
  expect_err(ctx, dag, "no_such_op", a, 2, NULL, "topi: unknown operator 'no_such_op'");
  expect_err(ctx, dag, "max_pool2d", &x, 1, "{\"kernel\":[2,2],\"strides\":[1,0]}",
             "max_pool2d: strides must be positive, got (1, 0) for data (1, 3, 5, 5)");
  expect_err(ctx, dag, "max_pool2d", &x, 1, "{\"kernel\":[7,7]}",
             "max_pool2d: kernel 7x7 (dilated 7x7) is larger than the padded input 5x5 (padding (0, 0, 0, 0)) "
             "for data (1, 3, 5, 5)");
  int d[2] = {x, x};
  int64_t ys[2] = {4, 6};
  int y = ph(ctx, dag, "y", 2, ys, TL_FLOAT32);
  int e[2] = {x, y};
  expect_err(ctx, dag, "add", e, 2, NULL,
             "add: shapes (1, 3, 5, 5) and (4, 6) do not broadcast (dimension 2: 5 vs 4)");
  expect_err(ctx, dag, "dense", d, 2, NULL, "dense: data and weight must be 2-D, got (1, 3, 5, 5) and (1, 3, 5, 5)");
  expect_err(ctx, dag, "reshape", &x, 1, "{\"newshape\":[7,-1]}",
             "reshape: cannot infer the -1 in newshape: 75 elements of (1, 3, 5, 5) over 7");
  expect_err(ctx, dag, "softmax", &x, 1, "{\"axis\":4}", "softmax: axis 4 is out of range for 4 dimensions");
  expect_err(ctx, dag, "conv2d_winograd", a, 2, "{\"tile_size\":3}", "conv2d_winograd: tile_size must be 2, 4 or 6, got 3");
  expect_err(ctx, dag, "conv2d_winograd", b, 2, "{\"strides\":[2,2]}",
             "conv2d_winograd: only stride 1 is supported, got (2, 2)");
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(topi_pool_softmax_transform_shapes) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {2, 3, 7, 7};
  int x = ph(ctx, dag, "x", 4, xs, TL_FLOAT32);
  int p = op1(ctx, dag, "max_pool2d", &x, 1, "{\"kernel\":[3,3],\"strides\":[2,2],\"ceil_mode\":true,\"padding\":[1,1,1,1]}");
  int64_t pw[4] = {2, 3, 4, 4};
  check_shape(dag, p, 4, pw);
  CHECK_STREQ(tl_dag_op_tag(dag, tl_dag_tensor_op(dag, p)), "pool_max");
  int ap = op1(ctx, dag, "avg_pool2d", &x, 1, "{\"kernel\":[2,2],\"strides\":[2,2]}");
  int64_t aw[4] = {2, 3, 3, 3};
  check_shape(dag, ap, 4, aw);
  int g = op1(ctx, dag, "global_avg_pool2d", &x, 1, NULL);
  int64_t gw[4] = {2, 3, 1, 1};
  check_shape(dag, g, 4, gw);
  int sm = op1(ctx, dag, "softmax", &x, 1, "{\"axis\":1}");
  check_shape(dag, sm, 4, xs);
  CHECK_STREQ(tl_dag_op_name(dag, tl_dag_tensor_op(dag, sm)), "T_softmax_norm");
  CHECK_EQ_INT(tl_topi_pattern("softmax"), TL_PAT_OPAQUE);
  CHECK_EQ_INT(tl_topi_pattern("relu"), TL_PAT_ELEMWISE);
  CHECK_EQ_INT(tl_topi_pattern("add"), TL_PAT_BROADCAST);
  CHECK_EQ_INT(tl_topi_pattern("concatenate"), TL_PAT_INJECTIVE);
  CHECK_EQ_INT(tl_topi_pattern("dense"), TL_PAT_OUT_ELEMWISE_FUSABLE);
  CHECK_STREQ(tl_topi_pattern_name(TL_PAT_OUT_ELEMWISE_FUSABLE), "out_elemwise_fusable");
  int lt = op1(ctx, dag, "layout_transform", &x, 1, "{\"src_layout\":\"NCHW\",\"dst_layout\":\"NHWC\"}");
  int64_t lw[4] = {2, 7, 7, 3};
  check_shape(dag, lt, 4, lw);
  int outs[8], n = 0;
  CHECK_EQ_INT(tl_topi_op(ctx, dag, "split", &x, 1, "{\"sections\":7,\"axis\":-1}", outs, 8, &n), 0);
  CHECK_EQ_INT(n, 7);
  int f = op1(ctx, dag, "flatten", &x, 1, NULL);
  int64_t fw[2] = {2, 147};
  check_shape(dag, f, 2, fw);
  int t = op1(ctx, dag, "transpose", &x, 1, "{\"axes\":[0,2,3,1]}");
  check_shape(dag, t, 4, lw);
  CHECK_STREQ(tl_dag_op_tag(dag, tl_dag_tensor_op(dag, t)), "injective");
  int64_t ws[2] = {10, 147}, bs[1] = {10};
  int w = ph(ctx, dag, "w", 2, ws, TL_FLOAT32), b = ph(ctx, dag, "b", 1, bs, TL_FLOAT32);
  int din[3] = {f, w, b};
  int dn = op1(ctx, dag, "dense", din, 3, NULL);
  int64_t dw[2] = {2, 10};
  check_shape(dag, dn, 2, dw);
  const char *name;
  int count = 0;
  while ((name = tl_topi_list(count)) != NULL) count++;
  CHECK(count > 40);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

/* The Cook-Toom matrices: F(m, 3) correlation is exact in double. */
TL_TEST(topi_winograd_matrices) {
  for (int m = 2; m <= 6; m += 2) {
    int a = m + 2;
    double AT[64], G[24], BT[64];
    CHECK_EQ_INT(tl_topi_winograd_matrices(m, 3, AT, G, BT), 0);
    double d[8], g[3] = {0.3, -1.25, 0.7};
    for (int i = 0; i < a; i++) d[i] = sin(1.0 + i) * 2;
    double Gg[8], Bd[8];
    for (int j = 0; j < a; j++) {
      Gg[j] = Bd[j] = 0;
      for (int k = 0; k < 3; k++) Gg[j] += G[j * 3 + k] * g[k];
      for (int k = 0; k < a; k++) Bd[j] += BT[j * a + k] * d[k];
    }
    for (int i = 0; i < m; i++) {
      double y = 0, want = 0;
      for (int j = 0; j < a; j++) y += AT[i * a + j] * Gg[j] * Bd[j];
      for (int k = 0; k < 3; k++) want += d[i + k] * g[k];
      CHECK_NEAR(y, want, 1e-9);
    }
  }
  /* F(2x2, 3x3) is Lavin's: AT = [[1,1,1,0],[0,1,-1,1]] (points 0, 1, -1) */
  double AT[64], G[24], BT[64];
  tl_topi_winograd_matrices(2, 3, AT, G, BT);
  const double at2[8] = {1, 1, 1, 0, 0, 1, -1, 1};
  for (int i = 0; i < 8; i++) CHECK_NEAR(AT[i], at2[i], 0);
  CHECK_EQ_INT(tl_topi_winograd_matrices(8, 3, AT, G, BT), -1);
}

TL_TEST(topi_winograd_flop) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {1, 16, 14, 14}, ws[4] = {32, 16, 3, 3};
  int x = ph(ctx, dag, "x", 4, xs, TL_FLOAT32), w = ph(ctx, dag, "w", 4, ws, TL_FLOAT32);
  int in[2] = {x, w};
  int y = op1(ctx, dag, "conv2d_winograd", in, 2, "{\"tile_size\":4,\"padding\":[1,1,1,1]}");
  int64_t want[4] = {1, 32, 14, 14};
  check_shape(dag, y, 4, want);
  CHECK_STREQ(tl_dag_op_tag(dag, tl_dag_tensor_op(dag, y)), "conv2d_nchw_winograd");
  tl_dag *sub = NULL;
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, &y, 1, &sub, NULL), 0);
  double direct = 2.0 * 32 * 14 * 14 * 16 * 9;
  /* the estimator reads FLOP from the attrs; the pad stage adds its guard */
  double f = tl_dag_flop_ansor(sub);
  CHECK_MSG(f >= direct && f < direct * 1.1, "winograd flop %g vs direct %g", f, direct);
  /* stages: data_pad, kernel_pack, input_tile, data_pack, bgemm, inverse, output */
  CHECK_EQ_INT(tl_dag_num_ops(sub), 9);
  tl_dag_free(sub);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

/* Default schedules: the fused conv2d + bias_add + relu group gets the pad as
** a root stage, bias_add inlined, the conv computed at the relu's parallel
** fused loop and vectorized loops; every stage lowers; conv3d and pool3d
** shapes; "opencl" and unknown targets are refused. */
TL_TEST(topi_default_schedule) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t xs[4] = {1, 16, 20, 24}, ws[4] = {32, 16, 3, 3}, bs[1] = {32};
  int x = ph(ctx, dag, "x", 4, xs, TL_FLOAT32), w = ph(ctx, dag, "w", 4, ws, TL_FLOAT32);
  int b = ph(ctx, dag, "b", 1, bs, TL_FLOAT32);
  int in[2] = {x, w};
  int conv = op1(ctx, dag, "conv2d", in, 2, "{\"padding\":[1,1,1,1]}");
  int in2[2] = {conv, b};
  int badd = op1(ctx, dag, "bias_add", in2, 2, "{\"axis\":1}");
  int y = op1(ctx, dag, "relu", &badd, 1, NULL);
  tl_sched *s = NULL;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &y, 1, &s), 0);
  /* opencl: the GPU defaults bind the fused output loops (on a copy) */
  tl_sched *g = NULL;
  CHECK_EQ_INT(tl_sched_fresh(ctx, s, &g), 0);
  CHECK_EQ_INT(tl_topi_default_schedule(ctx, g, "opencl"), 0);
  CHECK(tl_sched_num_steps(g) > 0);
  tl_sched_free(g);
  CHECK_EQ_INT(tl_topi_default_schedule(ctx, s, "vulkan"), TL_E_ARG);
  tl_clearerr(ctx);
  /* a class, not a target string (tl_target_schedules gives the class) */
  CHECK_EQ_INT(tl_topi_default_schedule(ctx, s, "opencl -device=mali"), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "unknown schedule class 'opencl -device=mali'") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_sched_num_steps(s), 0);
  CHECK_EQ_INT(tl_topi_default_schedule(ctx, s, "cpu"), 0);
  int st_pad = tl_sched_stage_find(s, "pad_temp"), st_conv = tl_sched_stage_find(s, "conv2d_nchw");
  int st_add = tl_sched_stage_find(s, "T_add"), st_relu = tl_sched_stage_find(s, "T_relu");
  CHECK(st_pad >= 0 && st_conv >= 0 && st_add >= 0 && st_relu >= 0);
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, st_pad, NULL, NULL), TL_CA_ROOT);
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, st_add, NULL, NULL), TL_CA_INLINED);
  int at_stage = -1, at_iter = -1;
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, st_conv, &at_stage, &at_iter), TL_CA_ITER);
  CHECK_EQ_INT(at_stage, st_relu);
  CHECK_EQ_INT(at_iter, 0);
  CHECK_EQ_INT(tl_sched_iter_annotation(s, st_relu, 0), TL_ANN_PARALLEL);
  int nr = tl_sched_num_iters(s, st_relu), nc = tl_sched_num_iters(s, st_conv);
  CHECK_EQ_INT(tl_sched_iter_annotation(s, st_relu, nr - 1), TL_ANN_VECTORIZE);
  CHECK_EQ_INT(tl_sched_iter_extent(s, st_relu, nr - 1), 8);
  CHECK_EQ_INT(tl_sched_iter_annotation(s, st_conv, nc - 1), TL_ANN_VECTORIZE);
  CHECK_EQ_INT(tl_sched_iter_kind(s, st_conv, nc - 2), 1);   /* reductions inside */
  int args[4] = {tl_sched_stage_tensor(s, tl_sched_stage_find(s, "x"), 0),
                 tl_sched_stage_tensor(s, tl_sched_stage_find(s, "w"), 0),
                 tl_sched_stage_tensor(s, tl_sched_stage_find(s, "b"), 0),
                 tl_sched_stage_tensor(s, st_relu, 0)};
  tl_lowered *f = NULL;
  CHECK_MSG(tl_lower(ctx, s, args, 4, "f", &f) == 0, "%s", tl_errmsg(ctx));
  tl_lowered_free(f);
  tl_sched_free(s);

  /* conv3d NCDHW and pool3d NDHWC shapes */
  int64_t x3s[5] = {1, 4, 6, 8, 8}, w3s[5] = {8, 2, 3, 3, 3};
  int x3 = ph(ctx, dag, "x3", 5, x3s, TL_FLOAT32), w3 = ph(ctx, dag, "w3", 5, w3s, TL_FLOAT32);
  int in3[2] = {x3, w3};
  int c3 = op1(ctx, dag, "conv3d", in3, 2, "{\"strides\":[1,2,2],\"padding\":[1,1,1,1,1,1],\"groups\":2}");
  int64_t want3[5] = {1, 8, 6, 4, 4};
  check_shape(dag, c3, 5, want3);
  CHECK_STREQ(tl_dag_op_tag(dag, tl_dag_tensor_op(dag, c3)), "group_conv3d_ncdhw");
  int64_t p3s[5] = {2, 5, 7, 9, 3};
  int xp = ph(ctx, dag, "xp", 5, p3s, TL_FLOAT32);
  int p3 = op1(ctx, dag, "max_pool3d", &xp, 1,
               "{\"kernel\":[2,3,3],\"strides\":2,\"ceil_mode\":true,\"layout\":\"NDHWC\"}");
  int64_t wantp[5] = {2, 3, 3, 4, 3};
  check_shape(dag, p3, 5, wantp);
  expect_err(ctx, dag, "conv3d", in3, 2, "{\"strides\":[1,-2,1]}",
             "conv3d: strides must be positive, got (1, -2, 1) for data (1, 4, 6, 8, 8) and kernel (8, 2, 3, 3, 3)");
  expect_err(ctx, dag, "conv3d", in3, 2, "{\"groups\":3}",
             "conv3d: groups=3 does not divide 4 input channels for data (1, 4, 6, 8, 8) and kernel (8, 2, 3, 3, 3)");
  expect_err(ctx, dag, "max_pool3d", &xp, 1, "{\"kernel\":[6,3,3],\"layout\":\"NDHWC\"}",
             "max_pool3d: kernel (6, 3, 3) (dilated (6, 3, 3)) is larger than the padded input (5, 7, 9) "
             "for data (2, 5, 7, 9, 3)");
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}
