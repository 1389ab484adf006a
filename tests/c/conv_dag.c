/* conv_dag.c -- the conv2d DAG shared by the C tests (conv_dag.h). */
#include "conv_dag.h"

#include "tl_test.h"

int tl_test_conv2d(tl_dag *dag, tl_ctx *ctx, int64_t N, int64_t CI, int64_t H, int64_t W,
                   int64_t CO, int64_t K, int64_t pad, int64_t stride, int *tx, int *tw) {
  tl_ir *ir = dag->ir;
  int64_t sx[4] = {N, CI, H, W}, sw[4] = {CO, CI, K, K};
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "X", 4, sx, TL_T_F32, tx), 0);
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "W", 4, sw, TL_T_F32, tw), 0);
  const char *pn[4] = {"n", "c", "h", "w"};
  tl_ref pv[4];
  tl_te_axis_vars(dag, 4, pn, pv);
  tl_ref p = tl_int(ir, pad);
  tl_ref cond = tl_and(ir, tl_and(ir, tl_binary(ir, TL_IR_GE, pv[2], p), tl_lt(ir, pv[2], tl_int(ir, H + pad))),
                       tl_and(ir, tl_binary(ir, TL_IR_GE, pv[3], p), tl_lt(ir, pv[3], tl_int(ir, W + pad))));
  tl_ref xi[4] = {pv[0], pv[1], tl_sub(ir, pv[2], p), tl_sub(ir, pv[3], p)};
  tl_ref pbody = tl_if_then_else(ir, cond, tl_te_load(dag, *tx, xi, 4), tl_imm_float(ir, TL_T_F32, 0));
  int64_t sp[4] = {N, CI, H + 2 * pad, W + 2 * pad};
  int tp = -1;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "pad", "", 4, sp, pv, 1, &pbody, TL_RED_NONE, NULL, 0, 0, &tp), 0);
  const char *cn[4] = {"n", "f", "y", "x"};
  tl_ref cv[4];
  tl_te_axis_vars(dag, 4, cn, cv);
  tl_ref r[3] = {tl_te_reduce_axis(dag, "rc", CI), tl_te_reduce_axis(dag, "ry", K), tl_te_reduce_axis(dag, "rx", K)};
  tl_ref y = cv[2], x = cv[3];
  if (stride != 1) {
    tl_ref s = tl_int(ir, stride);
    y = tl_mul(ir, y, s);
    x = tl_mul(ir, x, s);
  }
  tl_ref pi[4] = {cv[0], r[0], tl_add(ir, y, r[1]), tl_add(ir, x, r[2])};
  tl_ref wi[4] = {cv[1], r[0], r[1], r[2]};
  tl_ref body = tl_mul(ir, tl_te_load(dag, tp, pi, 4), tl_te_load(dag, *tw, wi, 4));
  int64_t OH = (H + 2 * pad - K) / stride + 1, OW = (W + 2 * pad - K) / stride + 1;
  int64_t so[4] = {N, CO, OH, OW};
  int to = -1;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "conv", "conv2d_nchw", 4, so, cv, 1, &body, TL_RED_SUM, r, 3, 0, &to), 0);
  return to;
}

int tl_test_tensor(tl_sched *s, const char *name) {
  return tl_sched_stage_tensor(s, tl_sched_stage_find(s, name), 0);
}

tl_sched *tl_test_sched_topi(tl_ctx *ctx, tl_dag *dag, int *out, int no, int relu, int *args, int *nargs) {
  if (relu) {
    int y = out[no - 1];
    CHECK_EQ_INT(tl_topi_op(ctx, dag, "relu", &y, 1, NULL, out, 8, &no), 0);
  }
  int r = out[no - 1];
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &r, 1, &s), 0);
  tl_dag_free(dag);
  tl_dag *d = tl_sched_dag(s);
  *nargs = 0;
  for (int t = 0; t < tl_dag_num_tensors(d); t++)
    if (tl_dag_op_kind(d, tl_dag_tensor_op(d, t)) == TL_DAG_PLACEHOLDER) args[(*nargs)++] = t;
  args[(*nargs)++] = tl_dag_output(d, 0);
  return s;
}
