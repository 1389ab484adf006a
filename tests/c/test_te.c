/* Unit tests for core/te (te.c, dag.c): building compute DAGs, the checks
** and their messages, printing, extraction, workload keys and FLOP counts. */
#include <string.h>

#include "te/te.h"
#include "tl_test.h"

/* C[i, j] = sum_k A[i, k] * B[k, j] in dag; returns C's tensor id. */
static int build_matmul(tl_dag *dag, tl_ctx *ctx, int64_t M, int64_t N, int64_t K, int *ta, int *tb) {
  int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 2, sa, TL_T_F32, ta), 0);
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "B", 2, sb, TL_T_F32, tb), 0);
  const char *names[2] = {"i", "j"};
  tl_ref ax[2];
  tl_te_axis_vars(dag, 2, names, ax);
  tl_ref k = tl_te_reduce_axis(dag, "k", K);
  tl_ref ia[2] = {ax[0], k}, ib[2] = {k, ax[1]};
  tl_ref body = tl_mul(dag->ir, tl_te_load(dag, *ta, ia, 2), tl_te_load(dag, *tb, ib, 2));
  int tc = -1;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "C", "matmul", 2, sc, ax, 1, &body, TL_RED_SUM, &k, 1, 0, &tc), 0);
  return tc;
}

/* T_relu(ax0, ax1) = max(X[ax0, ax1], 0f) */
static int build_relu(tl_dag *dag, tl_ctx *ctx, int x) {
  const tl_te_op *xo = tl_dag_op(dag, tl_dag_tensor(dag, x)->op);
  int64_t shape[2] = {xo->shape[0], xo->shape[1]};
  tl_ref ax[2];
  const char *names[2] = {"ax0", "ax1"};
  tl_te_axis_vars(dag, 2, names, ax);
  tl_ref body = tl_max(dag->ir, tl_te_load(dag, x, ax, 2), tl_imm_float(dag->ir, TL_T_F32, 0));
  int t = -1;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "T_relu", "elemwise", 2, shape, ax, 1, &body, TL_RED_NONE, NULL, 0, 0, &t), 0);
  return t;
}

TL_TEST(te_matmul_build) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int a, b;
  int c = build_matmul(dag, ctx, 128, 64, 32, &a, &b);
  CHECK_EQ_INT(dag->ops.n, 3);
  CHECK_EQ_INT(c, 2);
  const tl_te_op *op = tl_dag_op(dag, 2);
  CHECK_EQ_INT(op->ninputs, 2);
  CHECK_EQ_INT(op->inputs[0], a);
  CHECK_EQ_INT(op->inputs[1], b);
  CHECK_EQ_INT(op->nreduce, 1);
  CHECK_EQ_INT(op->reduce_axis[0].extent, 32);
  CHECK_EQ_INT(op->reduce_axis[0].kind, TL_ITER_REDUCE);
  CHECK_EQ_INT(op->axis[1].extent, 64);
  CHECK_STREQ(op->red_name, "sum");
  CHECK_STREQ(tl_dag_tensor_buf(dag, c)->name, "C");
  char *s = tl_dag_print(dag);
  CHECK_STREQ(s, "A = PLACEHOLDER [128, 32]\n"
                 "B = PLACEHOLDER [32, 64]\n"
                 "C(i, j) += (A[i, k]*B[k, j])\n");
  free(s);
  CHECK_NEAR(tl_dag_flop(dag), 2.0 * 128 * 64 * 32, 0);
  CHECK_NEAR(tl_dag_flop_ansor(dag), 2.0 * 128 * 64 * 32, 0);
  int outs[4];
  CHECK_EQ_INT(tl_dag_output_list(dag, outs), 1);
  CHECK_EQ_INT(outs[0], c);
  /* reducer helpers */
  tl_buf b2 = {0};
  tl_te_print_expr(dag, tl_te_reducer_identity(dag, TL_RED_MAX, TL_T_F32), &b2);
  tl_buf_puts(&b2, " ");
  tl_te_print_expr(dag, tl_te_reducer_identity(dag, TL_RED_MIN, TL_T_I32), &b2);
  tl_buf_puts(&b2, " ");
  tl_te_print_expr(dag, tl_te_op_identity(dag, op), &b2);
  tl_buf_puts(&b2, " ");
  tl_te_print_expr(dag, tl_te_reducer_combine(dag, op, op->axis[0].var, op->axis[1].var), &b2);
  CHECK_STREQ(b2.s, "-3.4028235e+38f 2147483647 0f (i + j)");
  tl_buf_free(&b2);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(te_elementwise_flop_and_outputs) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int a, b;
  int c = build_matmul(dag, ctx, 16, 8, 4, &a, &b);
  int r = build_relu(dag, ctx, c);
  CHECK_NEAR(tl_dag_flop(dag), 2.0 * 16 * 8 * 4 + 16 * 8, 0);
  int outs[8];
  CHECK_EQ_INT(tl_dag_output_list(dag, outs), 1);
  CHECK_EQ_INT(outs[0], r);
  int cons[4];
  CHECK_EQ_INT(tl_dag_consumers(dag, 2, cons), 1);
  CHECK_EQ_INT(cons[0], 3);
  char *s = tl_dag_print(dag);
  CHECK(strstr(s, "T_relu(ax0, ax1) = max(C[ax0, ax1], 0f)\n") != NULL);
  free(s);
  /* int index math is free for the auto-scheduler, counted by AutoTVM */
  int64_t sh[1] = {10};
  int x;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "X", 1, sh, TL_T_F32, &x), 0);
  tl_ref i = tl_te_axis_var(dag, "i");
  tl_ref idx = tl_sub(dag->ir, tl_int(dag->ir, 9), i);
  tl_ref twice = tl_cast(dag->ir, TL_T_F32, tl_mul(dag->ir, i, tl_int(dag->ir, 2)));
  tl_ref body = tl_add(dag->ir, tl_te_load(dag, x, &idx, 1), twice);
  int y;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "rev", "", 1, sh, &i, 1, &body, 0, NULL, 0, 0, &y), 0);
  int ex[1] = {y};
  tl_dag *sub;
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, ex, 1, &sub, NULL), 0);
  CHECK_NEAR(tl_dag_flop(sub), 10 * 2, 0);       /* add + mul; a load costs 0 */
  CHECK_NEAR(tl_dag_flop_ansor(sub), 10 * 1, 0); /* the int mul is free */
  tl_dag_free(sub);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

/* conv2d NCHW, stride 1, on a padded input made with if_then_else. */
static int build_conv(tl_dag *dag, tl_ctx *ctx, int64_t N, int64_t C, int64_t H, int64_t W,
                      int64_t K, int64_t R, int pad_op) {
  tl_ir *ir = dag->ir;
  int64_t sd[4] = {N, C, H, W}, sw[4] = {K, C, R, R};
  int data, kern, src;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "data", 4, sd, TL_T_F32, &data), 0);
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "kernel", 4, sw, TL_T_F32, &kern), 0);
  int64_t p = pad_op ? R / 2 : 0;
  int64_t sp[4] = {N, C, H + 2 * p, W + 2 * p};
  if (pad_op) {
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, NULL, ax);
    tl_ref c = tl_and(ir, tl_binary(ir, TL_IR_GE, ax[2], tl_int(ir, p)), tl_lt(ir, ax[2], tl_int(ir, H + p)));
    c = tl_and(ir, c, tl_binary(ir, TL_IR_GE, ax[3], tl_int(ir, p)));
    c = tl_and(ir, c, tl_lt(ir, ax[3], tl_int(ir, W + p)));
    tl_ref idx[4] = {ax[0], ax[1], tl_sub(ir, ax[2], tl_int(ir, p)), tl_sub(ir, ax[3], tl_int(ir, p))};
    tl_ref body = tl_if_then_else(ir, c, tl_te_load(dag, data, idx, 4),
                                  tl_imm_float(ir, TL_T_F32, 0));
    CHECK_EQ_INT(tl_te_compute(ctx, dag, "pad", "injective", 4, sp, ax, 1, &body, 0, NULL, 0, 0, &src), 0);
  } else {
    src = data;
  }
  int64_t OH = sp[2] - R + 1, OW = sp[3] - R + 1;
  int64_t so[4] = {N, K, OH, OW};
  const char *names[4] = {"nn", "ff", "yy", "xx"};
  tl_ref ax[4];
  tl_te_axis_vars(dag, 4, names, ax);
  tl_ref rc = tl_te_reduce_axis(dag, "rc", C), ry = tl_te_reduce_axis(dag, "ry", R),
         rx = tl_te_reduce_axis(dag, "rx", R);
  tl_ref id[4] = {ax[0], rc, tl_add(ir, ax[2], ry), tl_add(ir, ax[3], rx)};
  tl_ref iw[4] = {ax[1], rc, ry, rx};
  tl_ref body = tl_mul(ir, tl_te_load(dag, src, id, 4), tl_te_load(dag, kern, iw, 4));
  tl_ref rv[3] = {rc, ry, rx};
  int out;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "conv", "conv2d_nchw", 4, so, ax, 1, &body, TL_RED_SUM, rv, 3, 0, &out), 0);
  return out;
}

TL_TEST(te_conv2d_flop) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  build_conv(dag, ctx, 1, 16, 14, 14, 32, 3, 0);
  /* OH = OW = 12 */
  CHECK_NEAR(tl_dag_flop(dag), 2.0 * 1 * 32 * 12 * 12 * 16 * 3 * 3, 0);
  CHECK_NEAR(tl_dag_flop_ansor(dag), 2.0 * 1 * 32 * 12 * 12 * 16 * 3 * 3, 0);
  tl_dag_free(dag);

  dag = tl_dag_new();
  build_conv(dag, ctx, 1, 16, 14, 14, 32, 3, 1);
  double conv = 2.0 * 1 * 32 * 14 * 14 * 16 * 3 * 3;
  double pad_elems = 1.0 * 16 * 16 * 16;
  /* AutoTVM: 4 compares + 3 ands in the condition (if_then_else is a call:
  ** sum of its args; the index subtractions sit in a load: 0) */
  CHECK_NEAR(tl_dag_flop(dag), conv + pad_elems * 7, 0);
  /* FlopEstimator: int compares and bool ands have no float operand */
  CHECK_NEAR(tl_dag_flop_ansor(dag), conv, 0);
  char *s = tl_dag_print(dag);
  CHECK_STREQ(s, "data = PLACEHOLDER [1, 16, 14, 14]\n"
                 "kernel = PLACEHOLDER [32, 16, 3, 3]\n"
                 "pad(i0, i1, i2, i3) = tir.if_then_else(((((i2 >= 1) && (i2 < 15)) && (i3 >= 1)) && (i3 < 15)), data[i0, i1, (i2 - 1), (i3 - 1)], 0f)\n"
                 "conv(nn, ff, yy, xx) += (pad[nn, rc, (yy + ry), (xx + rx)]*kernel[ff, rc, ry, rx])\n");
  free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(te_validation_errors) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  tl_ir *ir = dag->ir;
  int64_t bad[2] = {4, 0}, sh[2] = {4, 4};
  int a, t;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 2, bad, TL_T_F32, &a), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "placeholder 'A': dimension 1 has extent 0 (must be >= 1)");
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 2, sh, TL_T_VOID, &a), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "placeholder 'A': unsupported dtype void");
  CHECK_EQ_INT(dag->ops.n, 0);
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 2, sh, TL_T_F32, &a), 0);

  tl_ref ax[2];
  tl_te_axis_vars(dag, 2, NULL, ax);
  /* wrong number of indices (the public load checks it too) */
  tl_ref body = tl_load(ir, tl_dag_tensor(dag, a)->buf, ax, 1);
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 2, sh, ax, 1, &body, 0, NULL, 0, 0, &t), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': tensor 'A' has 2 dimensions, got 1 index");
  uint32_t pub;
  CHECK_EQ_INT(tl_dag_load(ctx, dag, a, 1, ax, &pub), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "tensor 'A' has 2 dimensions, got 1 index");
  /* a foreign variable */
  tl_ref stray = tl_te_axis_var(dag, "z");
  tl_ref ix[2] = {ax[0], stray};
  body = tl_te_load(dag, a, ix, 2);
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 2, sh, ax, 1, &body, 0, NULL, 0, 0, &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': variable 'z' is not an axis of this compute");
  /* a reduce axis outside a reduction */
  tl_ref k = tl_te_reduce_axis(dag, "k", 4);
  tl_ref ik[2] = {ax[0], k};
  body = tl_te_load(dag, a, ik, 2);
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 2, sh, ax, 1, &body, 0, NULL, 0, 0, &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': reduce axis 'k' used outside a reduction");
  /* a reduce axis of another reduction */
  tl_ref k2 = tl_te_reduce_axis(dag, "k2", 4);
  int64_t s1[1] = {4};
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 1, s1, ax, 1, &body, TL_RED_SUM, &k2, 1, 0, &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': reduce axis 'k' is not an axis of this reduction");
  /* reducer without axes, axes without reducer */
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 1, s1, ax, 1, &body, TL_RED_SUM, NULL, 0, 0, &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': reduction over no reduce axis");
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 1, s1, ax, 1, &body, TL_RED_NONE, &k, 1, 0, &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': reduce axes given without a reducer");
  /* a non-positive output extent */
  body = tl_te_load(dag, a, ax, 2);
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 2, bad, ax, 1, &body, 0, NULL, 0, 0, &t), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': dimension 1 has extent 0 (must be >= 1)");
  /* a where-condition that is not bool */
  tl_ref ia[2] = {ax[0], k};
  body = tl_te_load(dag, a, ia, 2);
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 1, s1, ax, 1, &body, TL_RED_SUM, &k, 1, ax[0], &t), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': the where-condition is int32, expected bool");
  /* multi-output reductions */
  tl_ref two[2] = {body, body};
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 1, s1, ax, 2, two, TL_RED_SUM, &k, 1, 0, &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'B': a reduction has one output, got 2 bodies");
  CHECK_EQ_INT(dag->ops.n, 1);
  /* a good one; then its axes cannot be reused */
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 1, s1, ax, 1, &body, TL_RED_SUM, &k, 1, 0, &t), 0);
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "D", "", 1, s1, ax, 1, &body, TL_RED_SUM, &k, 1, 0, &t), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "compute 'D': axis var 'i0' already belongs to op 'B'");

  /* public builders: dtype checks */
  uint32_t x, y, r;
  int ti;
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "I", 2, sh, TL_INT32, &ti), 0);
  CHECK_EQ_INT(tl_dag_load(ctx, dag, a, 2, ax, &x), 0);
  CHECK_EQ_INT(tl_dag_load(ctx, dag, ti, 2, ax, &y), 0);
  CHECK_EQ_INT(tl_dag_binary(ctx, dag, TL_EXPR_ADD, x, y, &r), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "add: operands have different dtypes float32 and int32 (cast one side)");
  CHECK_EQ_INT(tl_dag_binary(ctx, dag, TL_EXPR_DIV, y, y, &r), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "div: int32 operands (use floordiv or truncdiv for integers)");
  uint32_t half;
  CHECK_EQ_INT(tl_dag_const_float(ctx, dag, TL_FLOAT32, 0.5, &half), 0);
  CHECK_EQ_INT(tl_dag_binary(ctx, dag, TL_EXPR_MUL, y, half, &r), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "mul: constant 0.5 does not fit the int32 operand (cast one side)");
  CHECK_EQ_INT(tl_dag_binary(ctx, dag, TL_EXPR_MUL, x, half, &r), 0);
  CHECK_EQ_INT(tl_dag_expr_dtype(dag, r), TL_FLOAT32);
  CHECK_EQ_INT(tl_dag_load(ctx, dag, a, 2, (uint32_t[]){ax[0], x}, &r), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "index 1 of tensor 'A' is float32, expected an integer");
  CHECK_EQ_INT(tl_dag_call(ctx, dag, "exp", 1, &y, &r), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "exp: int32 argument, expected a float (cast it first)");
  CHECK_EQ_INT(tl_dag_call(ctx, dag, "expo", 1, &x, &r), TL_E_ARG);
  CHECK(strncmp(tl_errmsg(ctx), "unknown intrinsic 'expo' (expected one of exp, log,", 50) == 0);
  CHECK_EQ_INT(tl_dag_call(ctx, dag, "pow", 2, (uint32_t[]){x, half}, &r), 0);
  CHECK_STREQ(tl_dag_expr_text(dag, r), "tir.pow(A[i0, i1], 0.5f)");
  CHECK_EQ_INT(tl_dag_select(ctx, dag, TL_EXPR_SELECT, x, x, x, &r), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "select: condition is float32, expected bool");
  CHECK_EQ_INT(tl_dag_reduce_axis(ctx, dag, "kk", 0, &r), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "reduce axis 'kk': extent 0 (must be >= 1)");
  CHECK_EQ_INT(tl_dag_const_int(ctx, dag, TL_INT8, 300, &r), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "constant 300 does not fit int8");
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(te_names_unique_and_multi_output) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  tl_ir *ir = dag->ir;
  int64_t sh[1] = {8};
  int a, a2;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 1, sh, TL_T_F32, &a), 0);
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 1, sh, TL_T_F32, &a2), 0);
  CHECK_STREQ(tl_dag_op(dag, 1)->name, "A");      /* a building dag keeps names */
  tl_ref i = tl_te_axis_var(dag, "i");
  tl_ref x = tl_te_load(dag, a, &i, 1), y = tl_te_load(dag, a2, &i, 1);
  tl_ref bodies[2] = {tl_add(ir, x, y), tl_sub(ir, y, x)};
  int outs[2];
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "M", "", 1, sh, &i, 2, bodies, 0, NULL, 0, 0, outs), 0);
  CHECK_EQ_INT(outs[0], 2);
  CHECK_EQ_INT(outs[1], 3);
  CHECK_EQ_INT(tl_dag_tensor(dag, 3)->out_index, 1);
  CHECK_STREQ(tl_dag_tensor_buf(dag, 3)->name, "M_v1");
  /* inputs in first-use order: A_1 is read first by body 1 only after A */
  CHECK_EQ_INT(tl_dag_op(dag, 2)->ninputs, 2);
  CHECK_EQ_INT(tl_dag_op(dag, 2)->inputs[0], a);
  CHECK_EQ_INT(tl_dag_op(dag, 2)->inputs[1], a2);
  char *s = tl_dag_print(dag);
  CHECK_STREQ(s, "A = PLACEHOLDER [8]\nA = PLACEHOLDER [8]\n"
                 "M.v0(i) = (A[i] + A[i])\nM.v1(i) = (A[i] - A[i])\n");
  free(s);
  tl_dag *ex;
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, outs, 2, &ex, NULL), 0);
  s = tl_dag_print(ex);
  CHECK_STREQ(s, "A = PLACEHOLDER [8]\nA_1 = PLACEHOLDER [8]\n"
                 "M.v0(i) = (A[i] + A_1[i])\nM.v1(i) = (A_1[i] - A[i])\n");
  free(s);
  CHECK_EQ_INT(ex->outputs.n, 2);
  tl_dag_free(ex);
  CHECK_NEAR(tl_dag_flop(dag), 16, 0);
  int o[4];
  CHECK_EQ_INT(tl_dag_output_list(dag, o), 2);
  /* one consumer of both outputs */
  tl_ref j = tl_te_axis_var(dag, "j");
  tl_ref b = tl_mul(ir, tl_te_load(dag, outs[0], &j, 1), tl_te_load(dag, outs[1], &j, 1));
  int p;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "P", "", 1, sh, &j, 1, &b, 0, NULL, 0, 0, &p), 0);
  /* AutoTVM recursion: M is reached through two input tensors: counted twice */
  CHECK_NEAR(tl_dag_flop(dag), 8 + 2 * 16, 0);
  CHECK_NEAR(tl_dag_flop_ansor(dag), 8 + 16, 0);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(te_custom_reducer_and_shared_reduce_axis) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  tl_ir *ir = dag->ir;
  int64_t sh[2] = {4, 10}, s1[1] = {4};
  int x;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "X", 2, sh, TL_T_F32, &x), 0);
  tl_ref l = tl_var_new(ir, "a", TL_T_F32), r = tl_var_new(ir, "b", TL_T_F32);
  int red;
  tl_ref stray = tl_var_new(ir, "c", TL_T_F32);
  CHECK_EQ_INT(tl_te_comm_reducer(ctx, dag, "bad", l, r, tl_add(ir, l, stray),
                                  tl_imm_float(ir, TL_T_F32, 0), &red), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "comm_reducer 'bad': combiner uses variable 'c' (only its two arguments may appear)");
  tl_ref comb = tl_add(ir, l, tl_mul(ir, r, r));   /* sum of squares, as a combiner of partials */
  CHECK_EQ_INT(tl_te_comm_reducer(ctx, dag, "sumsq", l, r, comb, tl_imm_float(ir, TL_T_F32, 0), &red), 0);
  CHECK_EQ_INT(red, TL_RED_CUSTOM);
  tl_ref k = tl_te_reduce_axis(dag, "k", 10);
  tl_ref i = tl_te_axis_var(dag, "i");
  tl_ref ix[2] = {i, k};
  tl_ref src = tl_te_load(dag, x, ix, 2);
  int ss, mx;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "SS", "", 1, s1, &i, 1, &src, red, &k, 1, 0, &ss), 0);
  /* the same reduce axis in a second reduction: a fresh var there */
  tl_ref i2 = tl_te_axis_var(dag, "i");
  tl_ref ix2[2] = {i2, k};
  tl_ref src2 = tl_te_load(dag, x, ix2, 2);
  tl_ref cond = tl_lt(ir, k, tl_int(ir, 5));
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "MX", "", 1, s1, &i2, 1, &src2, TL_RED_MAX, &k, 1, cond, &mx), 0);
  const tl_te_op *m = tl_dag_op(dag, 2);
  CHECK(m->reduce_axis[0].var != k);
  CHECK_EQ_INT(tl_dag_op(dag, 1)->reduce_axis[0].var, k);
  CHECK(!tl_ir_uses_var(ir, m->body[0], k));
  CHECK(tl_ir_uses_var(ir, m->red_cond, m->reduce_axis[0].var));
  char *s = tl_dag_print(dag);
  CHECK_STREQ(s, "X = PLACEHOLDER [4, 10]\n"
                 "SS(i) sumsq= X[i, k]\n"
                 "MX(i) max= X[i, k] where (k < 5)\n");
  free(s);
  /* flop: combiner (add + mul = 2) + source 0 */
  CHECK_NEAR(tl_dag_flop_ansor(dag), 4 * 10 * 2 + 4 * 10 * 1, 0);
  tl_buf b = {0};
  const tl_te_op *so = tl_dag_op(dag, 1);
  tl_te_print_expr(dag, tl_te_reducer_combine(dag, so, so->axis[0].var, src), &b);
  CHECK_STREQ(b.s, "(i + (X[i, k]*X[i, k]))");
  tl_buf_free(&b);
  /* combine in another IR */
  tl_ir *other = tl_ir_new();
  tl_ref acc = tl_var_new(other, "acc", TL_T_F32), v = tl_var_new(other, "v", TL_T_F32);
  tl_ref cmb = tl_te_reducer_combine_in(other, dag, so, acc, v);
  CHECK_EQ_INT(tl_ir_op(other, cmb), TL_IR_ADD);
  CHECK_EQ_INT(tl_ir_kid(other, cmb, 0), acc);
  CHECK_EQ_INT(tl_ir_op(other, tl_ir_kid(other, cmb, 1)), TL_IR_MUL);
  tl_ir_free(other);
  /* extract keeps the reducer */
  int outs[1] = {ss};
  tl_dag *sub;
  int map[8];
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, outs, 1, &sub, map), 0);
  CHECK_EQ_INT(sub->ops.n, 2);
  CHECK_EQ_INT(map[mx], -1);
  CHECK_EQ_INT(map[ss], 1);
  s = tl_dag_print(sub);
  CHECK_STREQ(s, "X = PLACEHOLDER [4, 10]\nSS(i) sumsq= X[i, k]\n");
  free(s);
  CHECK_NEAR(tl_dag_flop(sub), 4 * 10 * 2, 0);
  tl_dag_free(sub);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(te_extract_and_workload_key) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int a, b;
  int64_t sh[1] = {3};
  int junk;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "unrelated", 1, sh, TL_T_F32, &junk), 0);
  int c = build_matmul(dag, ctx, 8, 4, 2, &a, &b);
  int r = build_relu(dag, ctx, c);
  int outs[1] = {r};
  tl_dag *sub;
  int map[16];
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, outs, 1, &sub, map), 0);
  CHECK_EQ_INT(sub->ops.n, 4);
  CHECK_EQ_INT(map[junk], -1);
  CHECK_EQ_INT(map[a], 0);
  CHECK_EQ_INT(map[r], 3);
  CHECK_EQ_INT(sub->outputs.n, 1);
  CHECK_EQ_INT(sub->outputs.v[0], 3);
  char *s = tl_dag_print(sub);
  CHECK_STREQ(s, "A = PLACEHOLDER [8, 2]\nB = PLACEHOLDER [2, 4]\n"
                 "C(i, j) += (A[i, k]*B[k, j])\nT_relu(ax0, ax1) = max(C[ax0, ax1], 0f)\n");
  free(s);
  CHECK(sub->ir != dag->ir);
  CHECK_EQ_INT(tl_dag_op(sub, 2)->ninputs, 2);

  /* the same dag built separately (other names, other creation history) */
  tl_dag *again = tl_dag_new();
  tl_ref junkvar = tl_te_axis_var(again, "junk");
  (void)junkvar;
  int a2, b2;
  int c2 = build_matmul(again, ctx, 8, 4, 2, &a2, &b2);
  build_relu(again, ctx, c2);
  char *k1 = tl_dag_workload_key(sub), *k2 = tl_dag_workload_key(again);
  CHECK_STREQ(k1, k2);
  CHECK_EQ_INT(strlen(k1), strlen("[\"0123456789abcdef0123456789abcdef\", [8, 2], [2, 4], [8, 4]]"));
  CHECK(strstr(k1, "\", [8, 2], [2, 4], [8, 4]]") != NULL);
  /* the extract's explicit output list: C as an extra output */
  int both[2] = {c, r};
  tl_dag *sub2;
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, both, 2, &sub2, NULL), 0);
  char *k3 = tl_dag_workload_key(sub2);
  CHECK(strstr(k3, "\", [8, 2], [2, 4], [8, 4], [8, 4]]") != NULL);
  CHECK(strncmp(k1, k3, 36) == 0);      /* same ops: same hash */
  /* a different shape: a different hash */
  tl_dag *other = tl_dag_new();
  int c3 = build_matmul(other, ctx, 8, 4, 3, &a2, &b2);
  build_relu(other, ctx, c3);
  char *k4 = tl_dag_workload_key(other);
  CHECK(strncmp(k1, k4, 36) != 0);
  /* the canonical form names nothing the user chose */
  char *canon = tl_dag_canonical(sub);
  CHECK(strstr(canon, "T2 = compute float32 [8, 4] reduce sum[2] : (T0[i0, r0]*T1[r0, i1])") != NULL);
  free(canon);
  free(k1);
  free(k2);
  free(k3);
  free(k4);
  tl_dag_free(sub2);
  /* errors */
  int badout[1] = {99};
  CHECK_EQ_INT(tl_dag_extract(ctx, dag, badout, 1, &sub2, NULL), TL_E_ARG);
  CHECK(sub2 == NULL);
  CHECK_STREQ(tl_errmsg(ctx), "extract: no tensor 99 in this dag");
  tl_dag_free(other);
  tl_dag_free(again);
  tl_dag_free(sub);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(te_ir_copy) {
  tl_ir *src = tl_ir_new(), *dst = tl_ir_new();
  tl_ref x = tl_var_new(src, "x", TL_T_INDEX);
  tl_ref sh[1] = {tl_int(src, 16)};
  int buf = tl_buffer_new(src, "buf", TL_T_F32, 1, sh, TL_SCOPE_SHARED);
  tl_ref idx = tl_add(src, tl_mul(src, x, tl_int(src, 2)), tl_int(src, 1));
  tl_ref e = tl_add(src, tl_load(src, buf, &idx, 1), tl_load(src, buf, &x, 1));
  tl_ref st = tl_for(src, x, tl_int(src, 0), tl_int(src, 8), TL_FOR_SERIAL, 0,
                     tl_store(src, buf, e, &x, 1));
  tl_ref *vmap = tl_calloc((size_t)src->vars.n, sizeof(tl_ref));
  int bmap[1] = {-1};
  tl_ref c1 = tl_ir_copy(dst, src, st, vmap, bmap);
  CHECK_EQ_INT(tl_ir_op(dst, c1), TL_IR_FOR);
  CHECK(vmap[0] != 0);
  CHECK_EQ_INT(bmap[0], 0);
  CHECK_STREQ(tl_ir_buffer(dst, 0)->name, "buf");
  CHECK_EQ_INT(tl_ir_buffer(dst, 0)->scope, TL_SCOPE_SHARED);
  CHECK_EQ_INT(dst->vars.n, 1);
  /* a second copy with the same maps shares the var and the buffer */
  tl_ref c2 = tl_ir_copy(dst, src, e, vmap, bmap);
  CHECK_EQ_INT(tl_ir_kid(dst, tl_ir_kid(dst, c1, 3), 0), c2);
  CHECK_EQ_INT(dst->bufs.n, 1);
  /* a var mapped to an expression substitutes it */
  tl_ref vm2[1] = {tl_int(dst, 3)};
  tl_ref c3 = tl_ir_copy(dst, src, idx, vm2, bmap);
  int64_t v;
  CHECK(tl_ir_is_int(dst, tl_ir_kid(dst, c3, 1), &v) && v == 1);
  free(vmap);
  tl_ir_free(src);
  tl_ir_free(dst);
}
