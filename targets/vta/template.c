/*
** template.c -- conv2d_packed.vta as an AutoTVM template: TVM's knobs (the
** config space of conv2d.c), the computation as a tensor expression (the
** packed int8 convolution, right_shift 8, clip(0, 127), cast int8), and a
** CPU schedule that applies the output tiling of the config (tile_h, tile_w,
** tile_co; the conv computed per output tile).
**
** The lowered CPU form is what the engine knows of a config: the tuner's
** loop features, task:lower(), the CPU run of the computation. The VTA
** instruction stream of a config comes from the same tensor expression with
** the VTA schedule of lower.c (cache stages, dma_copy / gemm / alu marks,
** virtual threads), lowered and passed through the VTA passes there, and is
** measured on vta-sim (measure.c).
*/
#include "conv2d.h"

#include <jansson.h>
#include <stdio.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

static int workload(tl_ctx *ctx, const tl_atvm_args *a, tl_vta_conv2d *w) {
  char *text = json_dumps(a->json, JSON_COMPACT);
  int rc = tl_vta_conv2d_parse(ctx, NULL, text, w);
  free(text);
  return rc;
}

static int conv2d_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_vta_conv2d w;
  TRY(workload(cfg->ctx, a, &w));
  TRY(tl_vta_conv2d_define(cfg->ctx, &w, cfg->space));
  cfg->flop = w.flop;
  return TL_OK;
}

static int var(tl_ctx *ctx, tl_dag *dag, const char *nm, uint32_t *v) {
  return tl_dag_var(ctx, dag, nm, TL_INT32, v);
}

/* a * s + b */
static int lin(tl_ctx *ctx, tl_dag *dag, uint32_t a, int64_t s, uint32_t b, uint32_t *out) {
  uint32_t cs, x;
  TRY(tl_dag_const_int(ctx, dag, TL_INT32, s, &cs));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, a, cs, &x));
  return tl_dag_binary(ctx, dag, TL_EXPR_ADD, x, b, out);
}

/* An element-wise stage of the 6-D output: op(x, imm), or a cast when op < 0. */
static int ewise(tl_ctx *ctx, tl_dag *dag, const char *name, int in, const int64_t *shape, int op,
                 int64_t imm, int *out) {
  static const char *const nm[6] = {"bo", "co", "i", "j", "bi", "ci"};
  uint32_t ax[6], x, c, body;
  for (int i = 0; i < 6; i++) TRY(var(ctx, dag, nm[i], &ax[i]));
  TRY(tl_dag_load(ctx, dag, in, 6, ax, &x));
  if (op < 0) {
    TRY(tl_dag_cast(ctx, dag, TL_INT8, x, &body));
  } else {
    TRY(tl_dag_const_int(ctx, dag, TL_INT32, imm, &c));
    TRY(tl_dag_binary(ctx, dag, op, x, c, &body));
  }
  return tl_dag_compute(ctx, dag, name, "elemwise", 6, shape, ax, 1, &body, TL_REDUCE_NONE, 0,
                        NULL, 0, out);
}

static int conv2d_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                          int *out, int max_out, int *nout) {
  tl_vta_conv2d w;
  TRY(workload(ctx, a, &w));
  if (nin < 2 || max_out < 1)
    return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: needs data and kernel");
  int data = in[0], kernel = in[1];
  if (w.ph || w.pw) {
    char attrs[160];
    snprintf(attrs, sizeof attrs,
             "{\"pad_before\":[0,0,%lld,%lld,0,0],\"pad_after\":[0,0,%lld,%lld,0,0]}",
             (long long)w.ph, (long long)w.pw, (long long)w.ph, (long long)w.pw);
    int pn = 0, p;
    TRY(tl_topi_op(ctx, dag, "pad", &data, 1, attrs, &p, 1, &pn));
    data = p;
  }
  /* res[bo, co, i, j, bi, ci] = sum_{ko, di, dj, ki} int32(pad[bo, ko, i*sh+di, j*sw+dj, bi, ki])
  **                                                 * int32(kernel[co, ko, di, dj, ci, ki]) */
  static const char *const nm[6] = {"bo", "co", "i", "j", "bi", "ci"};
  uint32_t ax[6], rv[4], di[6], ki[6], x, y, cx, cy, body;
  for (int i = 0; i < 6; i++) TRY(var(ctx, dag, nm[i], &ax[i]));
  TRY(tl_dag_reduce_axis(ctx, dag, "ko", w.CIo, &rv[0]));
  TRY(tl_dag_reduce_axis(ctx, dag, "di", w.KH, &rv[1]));
  TRY(tl_dag_reduce_axis(ctx, dag, "dj", w.KW, &rv[2]));
  TRY(tl_dag_reduce_axis(ctx, dag, "ki", w.B, &rv[3]));
  di[0] = ax[0], di[1] = rv[0], di[4] = ax[4], di[5] = rv[3];
  TRY(lin(ctx, dag, ax[2], w.sh, rv[1], &di[2]));
  TRY(lin(ctx, dag, ax[3], w.sw, rv[2], &di[3]));
  ki[0] = ax[1], ki[1] = rv[0], ki[2] = rv[1], ki[3] = rv[2], ki[4] = ax[5], ki[5] = rv[3];
  TRY(tl_dag_load(ctx, dag, data, 6, di, &x));
  TRY(tl_dag_load(ctx, dag, kernel, 6, ki, &y));
  TRY(tl_dag_cast(ctx, dag, TL_INT32, x, &cx));
  TRY(tl_dag_cast(ctx, dag, TL_INT32, y, &cy));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, cx, cy, &body));
  int64_t oshape[6] = {w.No, w.COo, w.OH, w.OW, w.b, w.B};
  int res, shr, mn, mx;
  TRY(tl_dag_compute(ctx, dag, "conv2d_packed", "conv2d_dense", 6, oshape, ax, 1, &body,
                     TL_REDUCE_SUM, 4, rv, 0, &res));
  TRY(ewise(ctx, dag, "right_shift", res, oshape, TL_EXPR_SHR, 8, &shr));
  TRY(ewise(ctx, dag, "clipA", shr, oshape, TL_EXPR_MIN, 127, &mn));
  TRY(ewise(ctx, dag, "clipB", mn, oshape, TL_EXPR_MAX, 0, &mx));
  TRY(ewise(ctx, dag, "cast", mx, oshape, -1, 0, out));
  *nout = 1;
  return TL_OK;
}

/* Output tiling as the VTA schedule tiles: bo, i0, co0, j0 | co1, i1, j1, bi, ci with the
** conv computed at j0. */
static int conv2d_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  int C = tl_atvm_stage_by_tag(s, "conv2d_dense");
  if (C < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_packed.vta: no conv2d_dense stage");
  TRY(tl_atvm_inline_injective(ctx, s, C));
  int O = tl_sched_num_stages(s) - 1;
  int wh, ww, wc;
  const int64_t *th = tl_cfg_ints(cfg, "tile_h", &wh), *tw = tl_cfg_ints(cfg, "tile_w", &ww),
                *tc = tl_cfg_ints(cfg, "tile_co", &wc);
  if (!th || !tw || !tc) return tl_errcode(ctx);
  int t[2], co0, co1, i0, i1, j0, j1;
  TRY(tl_atvm_split_node(ctx, s, O, 1, 1, &tc[1], t)); co0 = t[0], co1 = t[1];
  TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &th[1], t)); i0 = t[0], i1 = t[1];
  TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &tw[1], t)); j0 = t[0], j1 = t[1];
  int order[7] = {i0, co0, j0, co1, i1, j1};
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, 6));
  if (O != C) TRY(tl_sched_compute_at(ctx, s, C, O, tl_sched_node_iter(s, O, j0)));
  return TL_OK;
}

const tl_atvm_template tl_vta_conv2d_packed = {"conv2d_packed.vta", conv2d_define,
                                               conv2d_compute, conv2d_schedule};
