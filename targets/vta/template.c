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

/* The packed int32 convolution of data and kernel (data padded first when the workload
** pads): res[bo, co, i, j, bi, ci] = sum_{ko, di, dj, ki} int32(pad[bo, ko, i*sh+di, j*sw+dj,
** bi, ki]) * int32(kernel[co, ko, di, dj, ci, ki]). */
static int conv_stage(tl_ctx *ctx, const tl_vta_conv2d *pw, tl_dag *dag, int data, int kernel,
                      int *res) {
  tl_vta_conv2d w = *pw;
  if (w.ph || w.pw) {
    char attrs[160];
    snprintf(attrs, sizeof attrs,
             "{\"pad_before\":[0,0,%lld,%lld,0,0],\"pad_after\":[0,0,%lld,%lld,0,0]}",
             (long long)w.ph, (long long)w.pw, (long long)w.ph, (long long)w.pw);
    int pn = 0, p;
    TRY(tl_topi_op(ctx, dag, "pad", &data, 1, attrs, &p, 1, &pn));
    data = p;
  }
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
  return tl_dag_compute(ctx, dag, "conv2d_packed", "conv2d_dense", 6, oshape, ax, 1, &body,
                        TL_REDUCE_SUM, 4, rv, 0, res);
}

static int conv2d_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                          int *out, int max_out, int *nout) {
  tl_vta_conv2d w;
  TRY(workload(ctx, a, &w));
  if (nin < 2 || max_out < 1)
    return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: needs data and kernel");
  int64_t oshape[6] = {w.No, w.COo, w.OH, w.OW, w.b, w.B};
  int res, shr, mn, mx;
  TRY(conv_stage(ctx, &w, dag, in[0], in[1], &res));
  TRY(ewise(ctx, dag, "right_shift", res, oshape, TL_EXPR_SHR, 8, &shr));
  TRY(ewise(ctx, dag, "clipA", shr, oshape, TL_EXPR_MIN, 127, &mn));
  TRY(ewise(ctx, dag, "clipB", mn, oshape, TL_EXPR_MAX, 0, &mx));
  TRY(ewise(ctx, dag, "cast", mx, oshape, -1, 0, out));
  *nout = 1;
  return TL_OK;
}

/* x + int32(t) << k over the output (t indexed as the output, or as a per-channel
** (COo, 1, 1, 1, B) bias when bias); tagged so the VTA schedule finds the stage. */
static int tensor_add(tl_ctx *ctx, tl_dag *dag, int x, int t, int bias, const int64_t *shape,
                      int *out) {
  static const char *const nm[6] = {"bo", "co", "i", "j", "bi", "ci"};
  uint32_t ax[6], bi[6], lx, lt, body;
  for (int i = 0; i < 6; i++) TRY(var(ctx, dag, nm[i], &ax[i]));
  TRY(tl_dag_load(ctx, dag, x, 6, ax, &lx));
  if (bias) {
    uint32_t z;
    TRY(tl_dag_const_int(ctx, dag, TL_INT32, 0, &z));
    bi[0] = ax[1], bi[1] = bi[2] = bi[3] = z, bi[4] = ax[5];
    TRY(tl_dag_load(ctx, dag, t, 5, bi, &lt));
  } else {
    uint32_t l8;
    TRY(tl_dag_load(ctx, dag, t, 6, ax, &l8));
    TRY(tl_dag_cast(ctx, dag, TL_INT32, l8, &lt));
  }
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_ADD, lx, lt, &body));
  return tl_dag_compute(ctx, dag, bias ? "bias_add" : "residual_add",
                        bias ? "vta_bias_add" : "vta_residual_add", 6, shape, ax, 1, &body,
                        TL_REDUCE_NONE, 0, NULL, 0, out);
}

int tl_vta_conv2d_fused_compute(tl_ctx *ctx, const tl_vta_conv2d *w, const tl_vta_epilogue *e,
                                tl_dag *dag, const int *in, int *out) {
  int64_t oshape[6] = {w->No, w->COo, w->OH, w->OW, w->b, w->B};
  int x, next = 2;
  int bias = e->bias ? in[next++] : -1, res = e->res ? in[next++] : -1;
  TRY(conv_stage(ctx, w, dag, in[0], in[1], &x));
  for (int i = 0; i < e->n; i++) {
    int y, k = e->kind[i];
    if (k == TL_VTA_EPI_BIAS) {
      TRY(tensor_add(ctx, dag, x, bias, 1, oshape, &y));
    } else if (k == TL_VTA_EPI_RES) {
      int r = res;
      if (e->imm[i]) {   /* the residual shifted left in the accumulator first */
        static const char *const nm[6] = {"bo", "co", "i", "j", "bi", "ci"};
        uint32_t ax[6], l8, l, c, body;
        for (int j = 0; j < 6; j++) TRY(var(ctx, dag, nm[j], &ax[j]));
        TRY(tl_dag_load(ctx, dag, res, 6, ax, &l8));
        TRY(tl_dag_cast(ctx, dag, TL_INT32, l8, &l));
        TRY(tl_dag_const_int(ctx, dag, TL_INT32, e->imm[i], &c));
        TRY(tl_dag_binary(ctx, dag, TL_EXPR_SHL, l, c, &body));
        TRY(tl_dag_compute(ctx, dag, "residual_shift", "vta_residual_shift", 6, oshape, ax, 1,
                           &body, TL_REDUCE_NONE, 0, NULL, 0, &r));
        /* int32 already: add it without the cast */
        uint32_t bx[6], lx, lr, sum;
        for (int j = 0; j < 6; j++) TRY(var(ctx, dag, nm[j], &bx[j]));
        TRY(tl_dag_load(ctx, dag, x, 6, bx, &lx));
        TRY(tl_dag_load(ctx, dag, r, 6, bx, &lr));
        TRY(tl_dag_binary(ctx, dag, TL_EXPR_ADD, lx, lr, &sum));
        TRY(tl_dag_compute(ctx, dag, "residual_add", "vta_residual_add", 6, oshape, bx, 1, &sum,
                           TL_REDUCE_NONE, 0, NULL, 0, &y));
      } else {
        TRY(tensor_add(ctx, dag, x, res, 0, oshape, &y));
      }
    } else {
      static const int op[5] = {TL_EXPR_ADD, TL_EXPR_SHR, TL_EXPR_SHL, TL_EXPR_MIN, TL_EXPR_MAX};
      static const char *const name[5] = {"add", "right_shift", "left_shift", "minimum", "maximum"};
      char nm[32];
      snprintf(nm, sizeof nm, "%s_%d", name[k], i);
      TRY(ewise(ctx, dag, nm, x, oshape, op[k], e->imm[i], &y));
    }
    x = y;
  }
  return ewise(ctx, dag, "cast", x, oshape, -1, 0, out);
}

/* The epilogue's JSON: a list of [op] or [op, integer] with op one of add, shr, shl, min,
** max (an immediate), bias (add the bias tensor) and res (add the residual shifted left by
** the integer). */
int tl_vta_epilogue_parse(tl_ctx *ctx, const char *text, tl_vta_epilogue *e) {
  static const char *const names[8] = {"add", "shr", "shl", "min", "max", "bias", "res", "res32"};
  memset(e, 0, sizeof *e);
  json_error_t err;
  json_t *j = json_loads(text ? text : "", 0, &err);
  int rc = TL_OK;
  if (!j || !json_is_array(j)) {
    rc = tl_err(ctx, TL_E_PARSE, "vta epilogue: expected a JSON list of [op, value], got %s",
                text ? text : "nothing");
    goto done;
  }
  if (json_array_size(j) > TL_VTA_EPI_NOPS) {
    rc = tl_err(ctx, TL_E_ARG, "vta epilogue: %d ops, at most %d", (int)json_array_size(j),
                TL_VTA_EPI_NOPS);
    goto done;
  }
  for (size_t i = 0; i < json_array_size(j); i++) {
    json_t *o = json_array_get(j, i);
    const char *nm = json_string_value(json_array_get(o, 0));
    int k = -1;
    for (int q = 0; q < 8 && nm; q++)
      if (!strcmp(nm, names[q])) k = q;
    int bits = 8;
    if (k == 7) k = TL_VTA_EPI_RES, bits = 32;
    if (k < 0) {
      rc = tl_err(ctx, TL_E_ARG, "vta epilogue: op %d: expected add, shr, shl, min, max, bias, res or res32, got %s",
                  (int)i, nm ? nm : "no name");
      goto done;
    }
    json_t *v = json_array_get(o, 1);
    int64_t imm = json_is_integer(v) ? json_integer_value(v) : 0;
    if (k != TL_VTA_EPI_BIAS && !json_is_integer(v)) {
      rc = tl_err(ctx, TL_E_ARG, "vta epilogue: op %d (%s) needs an integer", (int)i, nm);
      goto done;
    }
    if (imm < -32768 || imm > 32767 ||
        ((k == TL_VTA_EPI_SHR || k == TL_VTA_EPI_SHL || k == TL_VTA_EPI_RES) && (imm < 0 || imm > 31))) {
      rc = tl_err(ctx, TL_E_ARG, "vta epilogue: op %d (%s): %lld does not fit the ALU's immediate",
                  (int)i, nm, (long long)imm);
      goto done;
    }
    if ((k == TL_VTA_EPI_BIAS && e->bias) || (k == TL_VTA_EPI_RES && e->res)) {
      rc = tl_err(ctx, TL_E_ARG, "vta epilogue: op %d: a second %s", (int)i, nm);
      goto done;
    }
    if (k == TL_VTA_EPI_BIAS) e->bias = 1;
    if (k == TL_VTA_EPI_RES) e->res = 1, e->res_bits = bits;
    e->kind[e->n] = k, e->imm[e->n++] = imm;
  }
done:
  json_decref(j);
  return rc;
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
