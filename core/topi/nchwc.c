/*
** nchwc.c -- convolutions on the channel-blocked layout NCHW[x]c.
**
**   conv2d_NCHWc {strides, padding, dilation, out_dtype}:
**       data [N, C/ib, H, W, ib] (NCHW[ib]c), kernel [O/ob, C, KH, KW, ob]
**       (OIHW[ob]o: a block of ob output channels innermost)
**       -> [N, O/ob, OH, OW, ob] (NCHW[ob]c). The data may also be 4-D NCHW (read
**       in place: the first conv of a graph reads its input without a conversion).
**       out[n, oc, y, x, ob] = sum_{ico, ry, rx, ici}
**           pad[n, ico, y*s + ry*d, x*s + rx*d, ici] * kernel[oc, ico*ib + ici, ry, rx, ob]
**   depthwise_conv2d_NCHWc {strides, padding, dilation, out_dtype}:
**       data [N, C/b, H, W, b], kernel [C/b, 1, KH, KW, b] (channel multiplier 1)
**       -> [N, C/b, OH, OW, b].
** The padding is a "pad" stage over H and W (a schedule keeps it at root).
** These are what AlterOpLayout turns an x86 graph's NCHW convolutions into
** (the block of each comes from its AutoTVM config); the x86 templates
** (targets/x86/templates.c) schedule them, and the reference interpreter
** runs them with the default schedule.
*/
#include "topi.h"

#include <stdio.h>

typedef struct nchwc_attrs {
  int64_t stride[2], pad[4], dil[2];
  tl_type out_dtype;
} nchwc_attrs;

static int nchwc_parse(tl_topi_call *c, int data, int kernel, nchwc_attrs *a, int allow_nchw) {
  static const int64_t one2[2] = {1, 1};
  int rc;
  char b1[160], b2[160];
  if ((rc = tl_topi_get_ints(c, "strides", 2, one2, a->stride, NULL))) return rc;
  if ((rc = tl_topi_get_ints(c, "dilation", 2, one2, a->dil, NULL))) return rc;
  if ((rc = tl_topi_get_padding(c, a->pad))) return rc;
  for (int i = 0; i < 2; i++)
    if (a->stride[i] <= 0 || a->dil[i] <= 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: strides and dilation must be positive", c->op);
  for (int i = 0; i < 4; i++)
    if (a->pad[i] < 0) return tl_err(c->ctx, TL_E_ARG, "%s: padding must be non-negative", c->op);
  int dn = tl_topi_ndim(c->dag, data);
  if ((dn != 5 && !(dn == 4 && allow_nchw)) || tl_topi_ndim(c->dag, kernel) != 5)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: data must be 5-D NCHW[x]c and kernel 5-D OIHW[x]o, got data %s and kernel %s", c->op,
                  tl_topi_shape_str(c->dag, data, b1), tl_topi_shape_str(c->dag, kernel, b2));
  tl_type dt = tl_topi_dtype(c->dag, data), kt = tl_topi_dtype(c->dag, kernel);
  if (!tl_type_eq(dt, kt)) {
    char t1[24], t2[24];
    return tl_err(c->ctx, TL_E_DTYPE, "%s: data is %s but kernel is %s", c->op, tl_type_str(dt, t1),
                  tl_type_str(kt, t2));
  }
  return tl_topi_get_dtype(c, "out_dtype", dt, &a->out_dtype);
}

/* The padded data (H, W of a 5-D NCHW[x]c tensor) and the output extent. */
static int nchwc_pad(tl_topi_call *c, int data, const nchwc_attrs *a, int64_t KH, int64_t KW,
                     int64_t *OH, int64_t *OW, int *pad) {
  const int64_t *ds = tl_topi_shape(c->dag, data);
  int64_t KHd = (KH - 1) * a->dil[0] + 1, KWd = (KW - 1) * a->dil[1] + 1;
  int64_t HP = ds[2] + a->pad[0] + a->pad[2], WP = ds[3] + a->pad[1] + a->pad[3];
  if (KHd > HP || KWd > WP)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: kernel %lldx%lld (dilated) is larger than the padded input %lldx%lld",
                  c->op, (long long)KHd, (long long)KWd, (long long)HP, (long long)WP);
  *OH = (HP - KHd) / a->stride[0] + 1;
  *OW = (WP - KWd) / a->stride[1] + 1;
  int64_t before[5] = {0, 0, a->pad[0], a->pad[1], 0};
  int64_t pshape[5] = {ds[0], ds[1], HP, WP, tl_topi_ndim(c->dag, data) == 5 ? ds[4] : 1};
  return tl_topi_pad_stage(c, data, before, pshape, 0, "data_pad", pad);
}

static json_t *nchwc_attrs_json(const nchwc_attrs *a) {
  char tb[24];
  json_t *j = json_object(), *s = json_array(), *p = json_array(), *d = json_array();
  for (int i = 0; i < 2; i++) json_array_append_new(s, json_integer(a->stride[i]));
  for (int i = 0; i < 4; i++) json_array_append_new(p, json_integer(a->pad[i]));
  for (int i = 0; i < 2; i++) json_array_append_new(d, json_integer(a->dil[i]));
  json_object_set_new(j, "strides", s);
  json_object_set_new(j, "padding", p);
  json_object_set_new(j, "dilation", d);
  json_object_set_new(j, "out_dtype", json_string(tl_type_str(a->out_dtype, tb)));
  return j;
}

int tl_topi_conv2d_nchwc(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  int data = c->in[0], kernel = c->in[1];
  nchwc_attrs a;
  if ((rc = nchwc_parse(c, data, kernel, &a, 1))) return rc;
  const int64_t *ds = tl_topi_shape(c->dag, data), *ks = tl_topi_shape(c->dag, kernel);
  int nchw = tl_topi_ndim(c->dag, data) == 4;
  /* 4-D NCHW data: one block of all C channels (ic_outer has extent 1) */
  int64_t N = ds[0], C1 = nchw ? 1 : ds[1], ib = nchw ? ds[1] : ds[4], C = C1 * ib;
  int64_t O1 = ks[0], KH = ks[2], KW = ks[3], ob = ks[4];
  char b1[160], b2[160];
  if (ks[1] != C)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: channel mismatch: data %s has %lld channels but kernel %s expects %lld",
                  c->op, tl_topi_shape_str(c->dag, data, b1), (long long)C,
                  tl_topi_shape_str(c->dag, kernel, b2), (long long)ks[1]);
  int64_t OH, OW;
  int pad;
  if ((rc = nchwc_pad(c, data, &a, KH, KW, &OH, &OW, &pad))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  static const char *const names[5] = {"n", "oc_chunk", "oh", "ow", "oc_block"};
  tl_ref ax[5];
  tl_te_axis_vars(dag, 5, names, ax);
  tl_ref rco = tl_te_reduce_axis(dag, "ic_outer", C1), ry = tl_te_reduce_axis(dag, "kh", KH),
         rx = tl_te_reduce_axis(dag, "kw", KW), rci = tl_te_reduce_axis(dag, "ic_inner", ib);
  tl_ref di[5] = {ax[0], rco, tl_topi_window(dag, ax[2], a.stride[0], ry, a.dil[0]),
                  tl_topi_window(dag, ax[3], a.stride[1], rx, a.dil[1]), rci};
  if (nchw)
    di[1] = rci, di[2] = tl_topi_window(dag, ax[2], a.stride[0], ry, a.dil[0]),
    di[3] = tl_topi_window(dag, ax[3], a.stride[1], rx, a.dil[1]);
  tl_ref ki[5] = {ax[1], nchw ? rci : tl_add(ir, tl_mul(ir, rco, tl_int(ir, ib)), rci), ry, rx, ax[4]};
  int64_t oshape[5] = {N, O1, OH, OW, ob};
  tl_ref rv[4] = {rco, ry, rx, rci};
  return tl_topi_conv_sum(c, data, a.out_dtype, "conv2d_NCHWc", 5, oshape, ax,
                          tl_te_load(dag, pad, di, nchw ? 4 : 5), tl_te_load(dag, kernel, ki, 5), rv,
                          4, nchwc_attrs_json(&a));
}

int tl_topi_depthwise_conv2d_nchwc(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  int data = c->in[0], kernel = c->in[1];
  nchwc_attrs a;
  if ((rc = nchwc_parse(c, data, kernel, &a, 0))) return rc;
  const int64_t *ds = tl_topi_shape(c->dag, data), *ks = tl_topi_shape(c->dag, kernel);
  char b1[160], b2[160];
  if (ks[0] != ds[1] || ks[1] != 1 || ks[4] != ds[4])
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: kernel %s does not match data %s (expected [C/b, 1, KH, KW, b] with the data's block)",
                  c->op, tl_topi_shape_str(c->dag, kernel, b2), tl_topi_shape_str(c->dag, data, b1));
  int64_t OH, OW;
  int pad;
  if ((rc = nchwc_pad(c, data, &a, ks[2], ks[3], &OH, &OW, &pad))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  static const char *const names[5] = {"n", "c_chunk", "oh", "ow", "c_block"};
  tl_ref ax[5];
  tl_te_axis_vars(dag, 5, names, ax);
  tl_ref ry = tl_te_reduce_axis(dag, "kh", ks[2]), rx = tl_te_reduce_axis(dag, "kw", ks[3]);
  tl_ref di[5] = {ax[0], ax[1], tl_topi_window(dag, ax[2], a.stride[0], ry, a.dil[0]),
                  tl_topi_window(dag, ax[3], a.stride[1], rx, a.dil[1]), ax[4]};
  tl_ref ki[5] = {ax[1], tl_int(ir, 0), ry, rx, ax[4]};
  int64_t oshape[5] = {ds[0], ds[1], OH, OW, ds[4]};
  tl_ref rv[2] = {ry, rx};
  return tl_topi_conv_sum(c, data, a.out_dtype, "depthwise_conv2d_NCHWc", 5, oshape, ax,
                          tl_te_load(dag, pad, di, 5), tl_te_load(dag, kernel, ki, 5), rv, 2,
                          nchwc_attrs_json(&a));
}
