/*
** pool.c -- pooling as compute declarations.
**
**   pool2d / max_pool2d / avg_pool2d  attrs: kernel (pool_size), strides,
**       padding (1, 2 or 4 values [top, left, bottom, right]), dilation,
**       ceil_mode, count_include_pad, pool_type ("max" | "avg"), layout
**       (NCHW | NHWC | NCHW[b]c, 5-D). A "pad" stage (the dtype's lowest value for max, 0
**       for avg) feeds a max- or sum-reduction; avg divides in a second
**       stage by the window's element count: every position inside the
**       explicit padding (count_include_pad) or inside the input only --
**       the extra rows that ceil_mode adds never count (ONNX/PyTorch).
**       ceil_mode drops a last window that would start in the padding.
**   global_pool / global_avg_pool2d / global_max_pool2d  reduce H and W.
**   adaptive_pool / adaptive_*_pool2d  output_size; window y covers
**       [floor(y*H/OH), ceil((y+1)*H/OH)): a reduction over the largest
**       window with a where-condition.
*/
#include "pool.h"

#include <stdio.h>

/* The H and W dimensions of layout and the data's rank: NCHW, NHWC (4-D) or
** NCHW[b]c (5-D, a block of b channels innermost: the x86 graph's blocked
** layout; the pools work on any dims but H and W, so the block passes through). */
static int layout_hw(tl_topi_call *c, int data, int *hd, int *wd, const char **layout, int *nd) {
  int rc = tl_topi_get_str(c, "layout", "NCHW", layout);
  if (rc) return rc;
  int n = tl_topi_ndim(c->dag, data), want = 4;
  long long blk = 0;
  char tail[4] = {0};
  if (strcmp(*layout, "NCHW") == 0) *hd = 2, *wd = 3;
  else if (strcmp(*layout, "NHWC") == 0) *hd = 1, *wd = 2;
  else if (sscanf(*layout, "NCHW%lld%1s", &blk, tail) == 2 && tail[0] == 'c' && blk > 0 &&
           strchr(*layout, 'c')[1] == 0)
    *hd = 2, *wd = 3, want = 5;
  else return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: layout '%s' is not supported (NCHW, NHWC or NCHW[x]c)", c->op, *layout);
  char b[160];
  if (n != want)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: data must be %d-D for layout '%s', got shape %s", c->op, want,
                  *layout, tl_topi_shape_str(c->dag, data, b));
  if (want == 5 && tl_topi_shape(c->dag, data)[4] != blk)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: data %s: the channel block is %lld, layout '%s' says %lld", c->op,
                  tl_topi_shape_str(c->dag, data, b), (long long)tl_topi_shape(c->dag, data)[4], *layout, blk);
  *nd = n;
  return TL_OK;
}

int tl_topi_pool_kind(tl_topi_call *c, int *is_max) {
  const char *pt;
  const char *dflt = strstr(c->op, "max") ? "max" : strstr(c->op, "avg") ? "avg" : NULL;
  int rc = tl_topi_get_str(c, "pool_type", dflt, &pt);
  if (rc) return rc;
  if (!pt) return tl_err(c->ctx, TL_E_ARG, "%s: attribute 'pool_type' is required (\"max\" or \"avg\")", c->op);
  if (strcmp(pt, "max") == 0) *is_max = 1;
  else if (strcmp(pt, "avg") == 0) *is_max = 0;
  else return tl_err(c->ctx, TL_E_ARG, "%s: pool_type must be \"max\" or \"avg\", got \"%s\"", c->op, pt);
  return TL_OK;
}

tl_ref tl_topi_window_count(tl_ir *ir, tl_ref start, int64_t K, int64_t d, int64_t lo, int64_t hi) {
  tl_ref rlo = tl_floordiv(ir, tl_add(ir, tl_sub(ir, tl_int(ir, lo), start), tl_int(ir, d - 1)), tl_int(ir, d));
  rlo = tl_max(ir, rlo, tl_int(ir, 0));
  tl_ref rhi = tl_floordiv(ir, tl_sub(ir, tl_int(ir, hi - 1), start), tl_int(ir, d));
  rhi = tl_min(ir, rhi, tl_int(ir, K - 1));
  return tl_max(ir, tl_add(ir, tl_sub(ir, rhi, rlo), tl_int(ir, 1)), tl_int(ir, 0));
}

double tl_topi_pool_pad_value(tl_dag *dag, tl_type dt, int is_max) {
  double padv = 0;
  if (is_max) {
    tl_ref lo = tl_te_reducer_identity(dag, TL_RED_MAX, dt);
    int64_t iv;
    double fv;
    if (tl_ir_is_float(dag->ir, lo, &fv)) padv = fv;
    else if (tl_ir_is_int(dag->ir, lo, &iv)) padv = (double)iv;
  }
  return padv;
}

int tl_topi_pool2d(tl_topi_call *c) {
  int rc, hd = 2, wd = 3, is_max = 0, np, nd = 4;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  int data = c->in[0];
  const char *layout;
  if ((rc = layout_hw(c, data, &hd, &wd, &layout, &nd)) || (rc = tl_topi_pool_kind(c, &is_max))) return rc;
  static const int64_t one2[2] = {1, 1};
  int64_t k[2], s[2], d[2], p[4], ceil_mode, cip;
  json_t *kv = json_object_get(c->attrs, "kernel") ? NULL : json_object_get(c->attrs, "pool_size");
  if ((rc = tl_topi_get_ints(c, kv ? "pool_size" : "kernel", 2, NULL, k, &np))) return rc;
  if (np < 0) return tl_err(c->ctx, TL_E_ARG, "%s: attribute 'kernel' is required", c->op);
  if ((rc = tl_topi_get_ints(c, "strides", 2, one2, s, NULL)) ||
      (rc = tl_topi_get_ints(c, "dilation", 2, one2, d, NULL)) ||
      (rc = tl_topi_get_int(c, "ceil_mode", 0, &ceil_mode)) ||
      (rc = tl_topi_get_int(c, "count_include_pad", 0, &cip)) ||
      (rc = tl_topi_get_padding(c, p)))
    return rc;
  char ib[400];
  if (k[0] <= 0 || k[1] <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: kernel must be positive, got (%lld, %lld) %s", c->op,
                  (long long)k[0], (long long)k[1], tl_topi_inputs_str(c, ib));
  if (s[0] <= 0 || s[1] <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: strides must be positive, got (%lld, %lld) %s", c->op,
                  (long long)s[0], (long long)s[1], tl_topi_inputs_str(c, ib));
  if (d[0] <= 0 || d[1] <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: dilation must be positive, got (%lld, %lld) %s", c->op,
                  (long long)d[0], (long long)d[1], tl_topi_inputs_str(c, ib));
  for (int i = 0; i < 4; i++)
    if (p[i] < 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: padding must be non-negative, got (%lld, %lld, %lld, %lld) %s", c->op,
                    (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3],
                    tl_topi_inputs_str(c, ib));
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  const int64_t *ds = tl_topi_shape(dag, data);
  int64_t H = ds[hd], W = ds[wd];
  int64_t kd[2] = {(k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1};
  int64_t in[2] = {H, W}, o[2];
  for (int i = 0; i < 2; i++) {
    int64_t span = in[i] + p[i] + p[i + 2] - kd[i];
    if (span < 0)
      return tl_err(c->ctx, TL_E_SHAPE,
                    "%s: kernel %lldx%lld (dilated %lldx%lld) is larger than the padded input %lldx%lld "
                    "(padding (%lld, %lld, %lld, %lld)) %s",
                    c->op, (long long)k[0], (long long)k[1], (long long)kd[0], (long long)kd[1],
                    (long long)(H + p[0] + p[2]), (long long)(W + p[1] + p[3]), (long long)p[0],
                    (long long)p[1], (long long)p[2], (long long)p[3], tl_topi_inputs_str(c, ib));
    o[i] = (ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
    if (ceil_mode && (o[i] - 1) * s[i] >= in[i] + p[i]) o[i]--;
  }
  int64_t before[5] = {0, 0, 0, 0, 0}, pshape[5];
  memcpy(pshape, ds, sizeof(int64_t) * nd);
  for (int i = 0; i < 2; i++) {
    int dim = i ? wd : hd;
    before[dim] = p[i];
    pshape[dim] = TL_MAX((o[i] - 1) * s[i] + kd[i], in[i] + p[i]);
  }
  tl_type dt = tl_topi_dtype(dag, data);
  double padv = tl_topi_pool_pad_value(dag, dt, is_max);
  int pad;
  if ((rc = tl_topi_pad_stage(c, data, before, pshape, padv, "pad_temp", &pad))) return rc;
  int64_t oshape[5];
  memcpy(oshape, ds, sizeof(int64_t) * nd);
  oshape[hd] = o[0], oshape[wd] = o[1];
  static const char *const nchw_names[5] = {"ax0", "ax1", "ax2", "ax3", "ax4"};
  tl_ref ax[5];
  tl_te_axis_vars(dag, nd, nchw_names, ax);
  tl_ref rv[2] = {tl_te_reduce_axis(dag, "rv0", k[0]), tl_te_reduce_axis(dag, "rv1", k[1])};
  tl_ref idx[5];
  for (int i = 0; i < nd; i++) idx[i] = ax[i];
  idx[hd] = tl_add(ir, tl_mul(ir, ax[hd], tl_int(ir, s[0])), tl_mul(ir, rv[0], tl_int(ir, d[0])));
  idx[wd] = tl_add(ir, tl_mul(ir, ax[wd], tl_int(ir, s[1])), tl_mul(ir, rv[1], tl_int(ir, d[1])));
  tl_ref body = tl_te_load(dag, pad, idx, nd);
  json_t *aj = json_object();
  json_t *ja = json_array();
  for (int i = 0; i < 2; i++) json_array_append_new(ja, json_integer(k[i]));
  json_object_set_new(aj, "kernel", ja);
  ja = json_array();
  for (int i = 0; i < 2; i++) json_array_append_new(ja, json_integer(s[i]));
  json_object_set_new(aj, "strides", ja);
  ja = json_array();
  for (int i = 0; i < 4; i++) json_array_append_new(ja, json_integer(p[i]));
  json_object_set_new(aj, "padding", ja);
  ja = json_array();
  for (int i = 0; i < 2; i++) json_array_append_new(ja, json_integer(d[i]));
  json_object_set_new(aj, "dilation", ja);
  json_object_set_new(aj, "ceil_mode", json_boolean(ceil_mode));
  json_object_set_new(aj, "count_include_pad", json_boolean(cip));
  json_object_set_new(aj, "layout", json_string(layout));
  json_object_set_new(aj, "pool_type", json_string(is_max ? "max" : "avg"));
  int out;
  if (is_max) {
    rc = tl_topi_emit(c, "pool_max", "pool_max", "out_elemwise_fusable", nd, oshape, ax, body,
                      TL_RED_MAX, rv, 2, 0, aj, &out);
    json_decref(aj);
    if (rc) return rc;
    return tl_topi_push_out(c, out);
  }
  int sum;
  rc = tl_topi_emit(c, "pool_sum", "pool_sum", "out_elemwise_fusable", nd, oshape, ax, body,
                    TL_RED_SUM, rv, 2, 0, aj, &sum);
  if (rc) { json_decref(aj); return rc; }
  tl_ref bx[5];
  tl_te_axis_vars(dag, nd, nchw_names, bx);
  tl_ref cnt[2];
  for (int i = 0; i < 2; i++) {
    int dim = i ? wd : hd;
    tl_ref start = tl_sub(ir, tl_mul(ir, bx[dim], tl_int(ir, s[i])), tl_int(ir, p[i]));
    int64_t lo = cip ? -p[i] : 0, hi = cip ? in[i] + p[i + 2] : in[i];
    cnt[i] = tl_topi_window_count(ir, start, k[i], d[i], lo, hi);
  }
  tl_ref count = tl_max(ir, tl_mul(ir, cnt[0], cnt[1]), tl_int(ir, 1));
  tl_ref sv = tl_te_load(dag, sum, bx, nd);
  tl_ref avg = tl_type_is_float(dt) ? tl_binary(ir, TL_IR_DIV, sv, tl_cast(ir, dt, count))
                                    : tl_binary(ir, TL_IR_TRUNCDIV, sv, tl_cast(ir, dt, count));
  rc = tl_topi_emit(c, "pool_avg", "elemwise", "elemwise", nd, oshape, bx, avg, TL_RED_NONE, NULL,
                    0, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

int tl_topi_global_pool(tl_topi_call *c) {
  int rc, hd = 2, wd = 3, is_max = 0, nd = 4;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  int data = c->in[0];
  const char *layout;
  if ((rc = layout_hw(c, data, &hd, &wd, &layout, &nd)) || (rc = tl_topi_pool_kind(c, &is_max))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  const int64_t *ds = tl_topi_shape(dag, data);
  int64_t oshape[5];
  memcpy(oshape, ds, sizeof(int64_t) * nd);
  oshape[hd] = oshape[wd] = 1;
  tl_ref ax[5];
  tl_te_axis_vars(dag, nd, NULL, ax);
  tl_ref rv[2] = {tl_te_reduce_axis(dag, "rv0", ds[hd]), tl_te_reduce_axis(dag, "rv1", ds[wd])};
  tl_ref idx[5];
  for (int i = 0; i < nd; i++) idx[i] = ax[i];
  idx[hd] = rv[0], idx[wd] = rv[1];
  json_t *aj = json_object();
  json_object_set_new(aj, "layout", json_string(layout));
  json_object_set_new(aj, "pool_type", json_string(is_max ? "max" : "avg"));
  int out;
  tl_type dt = tl_topi_dtype(dag, data);
  rc = tl_topi_emit(c, is_max ? "adaptive_pool_max" : "adaptive_pool_sum",
                    is_max ? "adaptive_pool_max" : "adaptive_pool_sum", "out_elemwise_fusable", nd,
                    oshape, ax, tl_te_load(dag, data, idx, nd), is_max ? TL_RED_MAX : TL_RED_SUM,
                    rv, 2, 0, aj, &out);
  if (rc == TL_OK && !is_max) {
    tl_ref bx[5];
    tl_te_axis_vars(dag, nd, NULL, bx);
    tl_ref sv = tl_te_load(dag, out, bx, nd);
    double n = (double)(ds[hd] * ds[wd]);
    tl_ref v = tl_type_is_float(dt) ? tl_binary(ir, TL_IR_DIV, sv, tl_topi_const(dag, dt, n))
                                    : tl_binary(ir, TL_IR_TRUNCDIV, sv, tl_topi_const(dag, dt, n));
    rc = tl_topi_emit(c, "adaptive_pool_avg", "elemwise", "elemwise", nd, oshape, bx, v,
                      TL_RED_NONE, NULL, 0, 0, aj, &out);
  }
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

int tl_topi_adaptive_pool(tl_topi_call *c) {
  int rc, hd = 2, wd = 3, is_max = 0, n, nd = 4;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  int data = c->in[0];
  const char *layout;
  if ((rc = layout_hw(c, data, &hd, &wd, &layout, &nd)) || (rc = tl_topi_pool_kind(c, &is_max))) return rc;
  if (nd != 4) return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: layout '%s' is not supported (NCHW or NHWC)", c->op, layout);
  int64_t osz[2];
  if ((rc = tl_topi_get_ints(c, "output_size", 2, NULL, osz, &n))) return rc;
  if (n < 0) return tl_err(c->ctx, TL_E_ARG, "%s: attribute 'output_size' is required", c->op);
  if (osz[0] <= 0 || osz[1] <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: output_size must be positive, got (%lld, %lld)", c->op,
                  (long long)osz[0], (long long)osz[1]);
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  const int64_t *ds = tl_topi_shape(dag, data);
  int64_t in[2] = {ds[hd], ds[wd]}, kmax[2];
  for (int i = 0; i < 2; i++) {
    kmax[i] = 1;
    for (int64_t y = 0; y < osz[i]; y++) {
      int64_t st = y * in[i] / osz[i], en = ((y + 1) * in[i] + osz[i] - 1) / osz[i];
      kmax[i] = TL_MAX(kmax[i], en - st);
    }
  }
  int64_t oshape[4];
  memcpy(oshape, ds, sizeof oshape);
  oshape[hd] = osz[0], oshape[wd] = osz[1];
  tl_ref ax[4];
  tl_te_axis_vars(dag, 4, NULL, ax);
  tl_ref rv[2] = {tl_te_reduce_axis(dag, "rv0", kmax[0]), tl_te_reduce_axis(dag, "rv1", kmax[1])};
  tl_ref idx[4] = {ax[0], ax[1], ax[2], ax[3]}, cond = 0, len[2];
  for (int i = 0; i < 2; i++) {
    int dim = i ? wd : hd;
    tl_ref st = tl_floordiv(ir, tl_mul(ir, ax[dim], tl_int(ir, in[i])), tl_int(ir, osz[i]));
    tl_ref en = tl_floordiv(ir, tl_add(ir, tl_mul(ir, tl_add(ir, ax[dim], tl_int(ir, 1)), tl_int(ir, in[i])), tl_int(ir, osz[i] - 1)), tl_int(ir, osz[i]));
    len[i] = tl_sub(ir, en, st);
    idx[dim] = tl_add(ir, st, rv[i]);
    if (in[i] % osz[i] != 0) cond = tl_topi_and(dag, cond, tl_lt(ir, rv[i], len[i]));
  }
  json_t *aj = json_object();
  json_t *ja = json_array();
  json_array_append_new(ja, json_integer(osz[0]));
  json_array_append_new(ja, json_integer(osz[1]));
  json_object_set_new(aj, "output_size", ja);
  json_object_set_new(aj, "layout", json_string(layout));
  json_object_set_new(aj, "pool_type", json_string(is_max ? "max" : "avg"));
  int out;
  tl_type dt = tl_topi_dtype(dag, data);
  rc = tl_topi_emit(c, is_max ? "adaptive_pool_max" : "adaptive_pool_sum",
                    is_max ? "adaptive_pool_max" : "adaptive_pool_sum", "out_elemwise_fusable", 4,
                    oshape, ax, tl_te_load(dag, data, idx, 4), is_max ? TL_RED_MAX : TL_RED_SUM,
                    rv, 2, cond, aj, &out);
  if (rc == TL_OK && !is_max) {
    tl_ref bx[4];
    tl_te_axis_vars(dag, 4, NULL, bx);
    tl_ref cnt = tl_int(ir, 1);
    for (int i = 0; i < 2; i++) {
      int dim = i ? wd : hd;
      tl_ref st = tl_floordiv(ir, tl_mul(ir, bx[dim], tl_int(ir, in[i])), tl_int(ir, osz[i]));
      tl_ref en = tl_floordiv(ir, tl_add(ir, tl_mul(ir, tl_add(ir, bx[dim], tl_int(ir, 1)), tl_int(ir, in[i])), tl_int(ir, osz[i] - 1)), tl_int(ir, osz[i]));
      cnt = tl_mul(ir, cnt, tl_sub(ir, en, st));
    }
    tl_ref sv = tl_te_load(dag, out, bx, 4);
    tl_ref v = tl_type_is_float(dt) ? tl_binary(ir, TL_IR_DIV, sv, tl_cast(ir, dt, cnt))
                                    : tl_binary(ir, TL_IR_TRUNCDIV, sv, tl_cast(ir, dt, cnt));
    rc = tl_topi_emit(c, "adaptive_pool_avg", "elemwise", "elemwise", 4, oshape, bx, v,
                      TL_RED_NONE, NULL, 0, 0, aj, &out);
  }
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}
