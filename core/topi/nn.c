/*
** nn.c -- convolutions and matrix products as compute declarations.
**
**   conv2d            NCHW data x OIHW kernel, or NHWC data x HWIO kernel;
**                     strides, padding (1, 2 or 4 values: [top, left,
**                     bottom, right]), dilation, groups, out_dtype (the
**                     accumulation type: int8 x int8 -> int32 works by
**                     casting both operands). Tag conv2d_nchw / conv2d_nhwc
**                     (group_conv2d_* when groups > 1).
**   conv2d_packed     VTA's blocked layouts: data NCHW<b>n<c>c (N/b, C/c, H, W, b,
**                     c) x kernel OIHW<o>o<c>i (O/o, C/c, KH, KW, o, c); groups 1.
**   depthwise_conv2d  NCHW data x [C, M, KH, KW] or NHWC x [KH, KW, C, M];
**                     channel multiplier M gives C*M output channels.
**   conv2d_transpose  NCHW data x [C, O/groups, KH, KW] (IOHW, the ONNX/TVM
**                     layout), or NHWC data x [KH, KW, O/groups, C] (HWOI;
**                     kernel_layout "IOHW" also works), output_padding; a "dilate+pad" stage then a
**                     direct convolution with the flipped kernel.
**   dense             data [B, K] x weight [U, K] (+ bias [U]: a separate
**                     broadcast stage).
**   batch_matmul      [B, M, K] x [B, N, K] (transpose_b, default true;
**                     transpose_a), a batch of 1 broadcasts.
**   matmul            numpy matmul: 1-D operands promoted, batch broadcast.
**
** Padding is always a separate "pad" stage so a schedule can inline it or
** compute it at a loop of the consumer.
*/
#include "topi.h"

#include <stdio.h>

typedef struct conv_attrs {
  int64_t stride[2], pad[4], dil[2], groups, out_pad[2];
  const char *layout;
  tl_type out_dtype;
} conv_attrs;

static json_t *ints_json(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static json_t *conv_attrs_json(const conv_attrs *a, const int64_t *ksize) {
  char tb[24];
  json_t *j = json_object();
  json_object_set_new(j, "strides", ints_json(a->stride, 2));
  json_object_set_new(j, "padding", ints_json(a->pad, 4));
  json_object_set_new(j, "dilation", ints_json(a->dil, 2));
  json_object_set_new(j, "groups", json_integer(a->groups));
  json_object_set_new(j, "layout", json_string(a->layout));
  json_object_set_new(j, "out_dtype", json_string(tl_type_str(a->out_dtype, tb)));
  json_object_set_new(j, "kernel_size", ints_json(ksize, 2));
  return j;
}

/* Parse and check the attributes every convolution shares; a packed layout (conv2d_packed)
** is checked by its caller. */
static int conv_parse(tl_topi_call *c, conv_attrs *a, int packed) {
  static const int64_t one2[2] = {1, 1}, zero2[2] = {0, 0};
  int rc;
  if ((rc = tl_topi_get_ints(c, "strides", 2, one2, a->stride, NULL))) return rc;
  if ((rc = tl_topi_get_ints(c, "dilation", 2, one2, a->dil, NULL))) return rc;
  if ((rc = tl_topi_get_int(c, "groups", 1, &a->groups))) return rc;
  if ((rc = tl_topi_get_ints(c, "output_padding", 2, zero2, a->out_pad, NULL))) return rc;
  if ((rc = tl_topi_get_padding(c, a->pad))) return rc;
  const char *dflt = strstr(c->op, "nhwc") ? "NHWC" : "NCHW";
  if ((rc = tl_topi_get_str(c, "layout", dflt, &a->layout))) return rc;
  if ((rc = tl_topi_get_str(c, "data_layout", a->layout, &a->layout))) return rc;
  if (!packed && strcmp(a->layout, "NCHW") != 0 && strcmp(a->layout, "NHWC") != 0)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: layout '%s' is not supported (NCHW or NHWC)", c->op,
                  a->layout);
  char ib[400];
  if (a->stride[0] <= 0 || a->stride[1] <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: strides must be positive, got (%lld, %lld) %s", c->op,
                  (long long)a->stride[0], (long long)a->stride[1], tl_topi_inputs_str(c, ib));
  if (a->dil[0] <= 0 || a->dil[1] <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: dilation must be positive, got (%lld, %lld) %s", c->op,
                  (long long)a->dil[0], (long long)a->dil[1], tl_topi_inputs_str(c, ib));
  for (int i = 0; i < 4; i++)
    if (a->pad[i] < 0)
      return tl_err(c->ctx, TL_E_ARG,
                    "%s: padding must be non-negative, got (%lld, %lld, %lld, %lld) %s", c->op,
                    (long long)a->pad[0], (long long)a->pad[1], (long long)a->pad[2],
                    (long long)a->pad[3], tl_topi_inputs_str(c, ib));
  if (a->groups <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups must be positive, got %lld %s", c->op,
                  (long long)a->groups, tl_topi_inputs_str(c, ib));
  return TL_OK;
}

static int check_4d(tl_topi_call *c, int t, const char *what) {
  if (tl_topi_ndim(c->dag, t) != 4) {
    char b[160];
    return tl_err(c->ctx, TL_E_SHAPE, "%s: %s must be 4-D, got shape %s", c->op, what,
                  tl_topi_shape_str(c->dag, t, b));
  }
  return TL_OK;
}

/* Operand dtypes: data and kernel of one dtype; out_dtype defaults to it. */
static int conv_dtypes(tl_topi_call *c, int data, int kernel, conv_attrs *a) {
  tl_type dt = tl_topi_dtype(c->dag, data), kt = tl_topi_dtype(c->dag, kernel);
  if (!tl_type_eq(dt, kt)) {
    char b1[24], b2[24];
    return tl_err(c->ctx, TL_E_DTYPE, "%s: data is %s but kernel is %s", c->op,
                  tl_type_str(dt, b1), tl_type_str(kt, b2));
  }
  return tl_topi_get_dtype(c, "out_dtype", dt, &a->out_dtype);
}

/* Output extent of a window: checks that the dilated kernel fits. */
static int conv_out_hw(tl_topi_call *c, const conv_attrs *a, int64_t H, int64_t W, int64_t KH,
                       int64_t KW, int64_t *OH, int64_t *OW) {
  int64_t KHd = (KH - 1) * a->dil[0] + 1, KWd = (KW - 1) * a->dil[1] + 1;
  int64_t HP = H + a->pad[0] + a->pad[2], WP = W + a->pad[1] + a->pad[3];
  char ib[400];
  if (KHd > HP || KWd > WP)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: kernel %lldx%lld (dilated %lldx%lld) is larger than the padded input %lldx%lld "
                  "(padding (%lld, %lld, %lld, %lld)) %s",
                  c->op, (long long)KH, (long long)KW, (long long)KHd, (long long)KWd,
                  (long long)HP, (long long)WP, (long long)a->pad[0], (long long)a->pad[1],
                  (long long)a->pad[2], (long long)a->pad[3], tl_topi_inputs_str(c, ib));
  *OH = (HP - KHd) / a->stride[0] + 1;
  *OW = (WP - KWd) / a->stride[1] + 1;
  return TL_OK;
}

/* The padded input of a 2-D convolution, NCHW or NHWC: a pad stage named name. */
static int conv_pad(tl_topi_call *c, int data, const conv_attrs *a, int nhwc, int64_t N,
                    int64_t C, int64_t H, int64_t W, const char *name, int *pad) {
  int cd = nhwc ? 3 : 1, hd = nhwc ? 1 : 2, wd = nhwc ? 2 : 3;
  int64_t before[4] = {0, 0, 0, 0}, pshape[4];
  before[hd] = a->pad[0], before[wd] = a->pad[1];
  pshape[0] = N, pshape[cd] = C;
  pshape[hd] = H + a->pad[0] + a->pad[2], pshape[wd] = W + a->pad[1] + a->pad[3];
  return tl_topi_pad_stage(c, data, before, pshape, 0, name, pad);
}

int tl_topi_conv_sum(tl_topi_call *c, int data, tl_type out_dtype, const char *tag, int ndim,
                     const int64_t *oshape, const tl_ref *ax, tl_ref lhs, tl_ref rhs,
                     const tl_ref *rv, int nrv, json_t *aj) {
  tl_ir *ir = c->dag->ir;
  if (!tl_type_eq(tl_topi_dtype(c->dag, data), out_dtype)) {
    lhs = tl_cast(ir, out_dtype, lhs);
    rhs = tl_cast(ir, out_dtype, rhs);
  }
  int out;
  int rc = tl_topi_emit(c, tag, tag, "out_elemwise_fusable", ndim, oshape, ax,
                        tl_mul(ir, lhs, rhs), TL_RED_SUM, rv, nrv, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

tl_ref tl_topi_window(tl_dag *dag, tl_ref y, int64_t s, tl_ref r, int64_t d) {
  tl_ir *ir = dag->ir;
  return tl_add(ir, tl_mul(ir, y, tl_int(ir, s)), tl_mul(ir, r, tl_int(ir, d)));
}

/* ---- conv2d ------------------------------------------------------------- */

int tl_topi_conv2d(tl_topi_call *c) {
  char ib[400];
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  int data = c->in[0], kernel = c->in[1];
  conv_attrs a;
  if ((rc = conv_parse(c, &a, 0))) return rc;
  if ((rc = check_4d(c, data, "data")) || (rc = check_4d(c, kernel, "kernel"))) return rc;
  if ((rc = conv_dtypes(c, data, kernel, &a))) return rc;
  int nhwc = strcmp(a.layout, "NHWC") == 0;
  const int64_t *ds = tl_topi_shape(c->dag, data), *ks = tl_topi_shape(c->dag, kernel);
  int64_t N = ds[0], C = nhwc ? ds[3] : ds[1], H = nhwc ? ds[1] : ds[2], W = nhwc ? ds[2] : ds[3];
  int64_t O = nhwc ? ks[3] : ks[0], CG = nhwc ? ks[2] : ks[1];
  int64_t KH = nhwc ? ks[0] : ks[2], KW = nhwc ? ks[1] : ks[3];
  int64_t g = a.groups;
  if (C % g != 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups=%lld does not divide %lld input channels %s", c->op,
                  (long long)g, (long long)C, tl_topi_inputs_str(c, ib));
  if (O % g != 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups=%lld does not divide %lld output channels %s", c->op,
                  (long long)g, (long long)O, tl_topi_inputs_str(c, ib));
  if (C / g != CG)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: channel mismatch: data has %lld channels (groups=%lld) but kernel expects %lld %s",
                  c->op, (long long)C, (long long)g, (long long)(CG * g), tl_topi_inputs_str(c, ib));
  int64_t OH = 0, OW = 0;
  if ((rc = conv_out_hw(c, &a, H, W, KH, KW, &OH, &OW))) return rc;

  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int pad;
  if ((rc = conv_pad(c, data, &a, nhwc, N, C, H, W, "pad_temp", &pad))) return rc;

  static const char *const nchw_names[4] = {"nn", "ff", "yy", "xx"};
  static const char *const nhwc_names[4] = {"nn", "yy", "xx", "ff"};
  tl_ref ax[4];
  tl_te_axis_vars(dag, 4, nhwc ? nhwc_names : nchw_names, ax);
  tl_ref rcv = tl_te_reduce_axis(dag, "rc", CG), ry = tl_te_reduce_axis(dag, "ry", KH),
         rx = tl_te_reduce_axis(dag, "rx", KW);
  tl_ref n = ax[0], f = nhwc ? ax[3] : ax[1], y = nhwc ? ax[1] : ax[2], x = nhwc ? ax[2] : ax[3];
  tl_ref ci = rcv;
  if (g > 1) ci = tl_add(ir, tl_mul(ir, tl_floordiv(ir, f, tl_int(ir, O / g)), tl_int(ir, CG)), rcv);
  tl_ref iy = tl_topi_window(dag, y, a.stride[0], ry, a.dil[0]), ix = tl_topi_window(dag, x, a.stride[1], rx, a.dil[1]);
  tl_ref di[4], ki[4];
  if (nhwc) {
    di[0] = n, di[1] = iy, di[2] = ix, di[3] = ci;
    ki[0] = ry, ki[1] = rx, ki[2] = rcv, ki[3] = f;
  } else {
    di[0] = n, di[1] = ci, di[2] = iy, di[3] = ix;
    ki[0] = f, ki[1] = rcv, ki[2] = ry, ki[3] = rx;
  }
  tl_ref rv[3] = {rcv, ry, rx};
  int64_t oshape[4];
  if (nhwc) oshape[0] = N, oshape[1] = OH, oshape[2] = OW, oshape[3] = O;
  else oshape[0] = N, oshape[1] = O, oshape[2] = OH, oshape[3] = OW;
  char tag[32];
  snprintf(tag, sizeof tag, "%sconv2d_%s", g > 1 ? "group_" : "", nhwc ? "nhwc" : "nchw");
  int64_t ksz[2] = {KH, KW};
  return tl_topi_conv_sum(c, data, a.out_dtype, tag, 4, oshape, ax, tl_te_load(dag, pad, di, 4),
                       tl_te_load(dag, kernel, ki, 4), rv, 3, conv_attrs_json(&a, ksz));
}

/* ---- conv2d_packed ---------------------------------------------------------- */

/* "NCHW<b>n<c>c" -> b, c; "OIHW<o>o<i>i" -> o, i (0 on a mismatch). */
static int packed_factors(const char *layout, const char *head, char l1, char l2, int64_t *f1,
                          int64_t *f2) {
  size_t n = strlen(head);
  if (!layout || strncmp(layout, head, n) != 0) return 0;
  char a, b, extra;
  long long x, y;
  if (sscanf(layout + n, "%lld%c%lld%c%c", &x, &a, &y, &b, &extra) != 4) return 0;
  if (a != l1 || b != l2 || x <= 0 || y <= 0) return 0;
  *f1 = x, *f2 = y;
  return 1;
}

/* VTA's blocked convolution: data (N/b, C/c, H, W, b, c) x kernel (O/o, C/c, KH, KW, o, c)
** -> (N/b, O/o, OH, OW, b, o); sums over the input-channel blocks, the window and the block
** lanes, with both operands cast to out_dtype. Attributes: strides, padding, dilation,
** out_dtype, data_layout ("NCHW<b>n<c>c") and kernel_layout ("OIHW<o>o<c>i"), which must
** name the block sizes of the shapes. Tag conv2d_packed. */
int tl_topi_conv2d_packed(tl_topi_call *c) {
  char ib[400], b1[160], b2[160];
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  int data = c->in[0], kernel = c->in[1];
  conv_attrs a;
  const char *kl = NULL;
  if ((rc = conv_parse(c, &a, 1))) return rc;
  if ((rc = tl_topi_get_str(c, "kernel_layout", NULL, &kl))) return rc;
  const char *dl = a.layout;
  int64_t bn = 0, bc = 0, bo = 0, bi = 0;
  if (!packed_factors(dl, "NCHW", 'n', 'c', &bn, &bc))
    return tl_err(c->ctx, TL_E_ARG, "%s: data_layout must be NCHW<b>n<c>c, got '%s'", c->op,
                  dl ? dl : "");
  if (!packed_factors(kl, "OIHW", 'o', 'i', &bo, &bi))
    return tl_err(c->ctx, TL_E_ARG, "%s: kernel_layout must be OIHW<o>o<i>i, got '%s'", c->op,
                  kl ? kl : "");
  if (tl_topi_ndim(c->dag, data) != 6 || tl_topi_ndim(c->dag, kernel) != 6)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: data and kernel must be 6-D, got %s and %s", c->op,
                  tl_topi_shape_str(c->dag, data, b1), tl_topi_shape_str(c->dag, kernel, b2));
  if ((rc = conv_dtypes(c, data, kernel, &a))) return rc;
  if (a.groups != 1)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: groups must be 1, got %lld %s", c->op,
                  (long long)a.groups, tl_topi_inputs_str(c, ib));
  const int64_t *ds = tl_topi_shape(c->dag, data), *ks = tl_topi_shape(c->dag, kernel);
  if (ds[4] != bn || ds[5] != bc || ks[4] != bo || ks[5] != bi || bi != bc)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: shapes %s and %s do not match the layouts %s and %s", c->op,
                  tl_topi_shape_str(c->dag, data, b1), tl_topi_shape_str(c->dag, kernel, b2), dl, kl);
  if (ks[1] != ds[1])
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: channel mismatch: data has %lld channel blocks but kernel expects %lld %s",
                  c->op, (long long)ds[1], (long long)ks[1], tl_topi_inputs_str(c, ib));
  int64_t H = ds[2], W = ds[3], KH = ks[2], KW = ks[3], OH = 0, OW = 0;
  if ((rc = conv_out_hw(c, &a, H, W, KH, KW, &OH, &OW))) return rc;
  tl_dag *dag = c->dag;
  int64_t before[6] = {0, 0, a.pad[0], a.pad[1], 0, 0};
  int64_t pshape[6] = {ds[0], ds[1], H + a.pad[0] + a.pad[2], W + a.pad[1] + a.pad[3], ds[4], ds[5]};
  int pad;
  if ((rc = tl_topi_pad_stage(c, data, before, pshape, 0, "pad_data", &pad))) return rc;
  static const char *const names[6] = {"b_o", "c_o", "i", "j", "b_i", "c_i"};
  tl_ref ax[6];
  tl_te_axis_vars(dag, 6, names, ax);
  tl_ref ko = tl_te_reduce_axis(dag, "k_o", ds[1]), dy = tl_te_reduce_axis(dag, "d_i", KH),
         dx = tl_te_reduce_axis(dag, "d_j", KW), ki = tl_te_reduce_axis(dag, "k_i", bc);
  tl_ref di[6] = {ax[0], ko, tl_topi_window(dag, ax[2], a.stride[0], dy, a.dil[0]),
                  tl_topi_window(dag, ax[3], a.stride[1], dx, a.dil[1]), ax[4], ki};
  tl_ref kidx[6] = {ax[1], ko, dy, dx, ax[5], ki};
  tl_ref lhs = tl_te_load(dag, pad, di, 6), rhs = tl_te_load(dag, kernel, kidx, 6);
  tl_ref rv[4] = {ko, dy, dx, ki};
  int64_t oshape[6] = {ds[0], ks[0], OH, OW, bn, bo};
  int64_t ksz[2] = {KH, KW};
  json_t *aj = conv_attrs_json(&a, ksz);
  json_object_set_new(aj, "kernel_layout", json_string(kl));
  return tl_topi_conv_sum(c, data, a.out_dtype, "conv2d_packed", 6, oshape, ax, lhs, rhs, rv, 4,
                          aj);
}

/* ---- depthwise conv2d ------------------------------------------------------ */

int tl_topi_depthwise_conv2d(tl_topi_call *c) {
  char ib[400];
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  int data = c->in[0], kernel = c->in[1];
  conv_attrs a;
  if ((rc = conv_parse(c, &a, 0))) return rc;
  if ((rc = check_4d(c, data, "data")) || (rc = check_4d(c, kernel, "kernel"))) return rc;
  if ((rc = conv_dtypes(c, data, kernel, &a))) return rc;
  int nhwc = strcmp(a.layout, "NHWC") == 0;
  const int64_t *ds = tl_topi_shape(c->dag, data), *ks = tl_topi_shape(c->dag, kernel);
  int64_t N = ds[0], C = nhwc ? ds[3] : ds[1], H = nhwc ? ds[1] : ds[2], W = nhwc ? ds[2] : ds[3];
  int64_t KC = nhwc ? ks[2] : ks[0], M = nhwc ? ks[3] : ks[1];
  int64_t KH = nhwc ? ks[0] : ks[2], KW = nhwc ? ks[1] : ks[3];
  if (KC != C)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: channel mismatch: data has %lld channels but kernel expects %lld %s", c->op,
                  (long long)C, (long long)KC, tl_topi_inputs_str(c, ib));
  a.groups = C;
  int64_t OH = 0, OW = 0;
  if ((rc = conv_out_hw(c, &a, H, W, KH, KW, &OH, &OW))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int pad;
  if ((rc = conv_pad(c, data, &a, nhwc, N, C, H, W, "PaddedInput", &pad))) return rc;
  static const char *const nchw_names[4] = {"b", "c", "i", "j"};
  static const char *const nhwc_names[4] = {"b", "i", "j", "c"};
  tl_ref ax[4];
  tl_te_axis_vars(dag, 4, nhwc ? nhwc_names : nchw_names, ax);
  tl_ref di = tl_te_reduce_axis(dag, "di", KH), dj = tl_te_reduce_axis(dag, "dj", KW);
  tl_ref ch = nhwc ? ax[3] : ax[1], y = nhwc ? ax[1] : ax[2], x = nhwc ? ax[2] : ax[3];
  tl_ref ic = M == 1 ? ch : tl_floordiv(ir, ch, tl_int(ir, M));
  tl_ref mm = M == 1 ? tl_int(ir, 0) : tl_floormod(ir, ch, tl_int(ir, M));
  tl_ref iy = tl_topi_window(dag, y, a.stride[0], di, a.dil[0]), ix = tl_topi_window(dag, x, a.stride[1], dj, a.dil[1]);
  tl_ref dI[4], kI[4];
  if (nhwc) {
    dI[0] = ax[0], dI[1] = iy, dI[2] = ix, dI[3] = ic;
    kI[0] = di, kI[1] = dj, kI[2] = ic, kI[3] = mm;
  } else {
    dI[0] = ax[0], dI[1] = ic, dI[2] = iy, dI[3] = ix;
    kI[0] = ic, kI[1] = mm, kI[2] = di, kI[3] = dj;
  }
  int64_t oshape[4];
  if (nhwc) oshape[0] = N, oshape[1] = OH, oshape[2] = OW, oshape[3] = C * M;
  else oshape[0] = N, oshape[1] = C * M, oshape[2] = OH, oshape[3] = OW;
  const char *tag = nhwc ? "depthwise_conv2d_nhwc" : "depthwise_conv2d_nchw";
  int64_t ksz[2] = {KH, KW};
  json_t *aj = conv_attrs_json(&a, ksz);
  json_object_set_new(aj, "channel_multiplier", json_integer(M));
  tl_ref rv[2] = {di, dj};
  return tl_topi_conv_sum(c, data, a.out_dtype, tag, 4, oshape, ax, tl_te_load(dag, pad, dI, 4),
                       tl_te_load(dag, kernel, kI, 4), rv, 2, aj);
}

/* ---- conv2d_transpose (NCHW, NHWC) ----------------------------------------------
** out[n, o, y, x] = sum_{c, ry, rx} P[n, c, y + ry*dh, x + rx*dw] * w[c, o', KH-1-ry, KW-1-rx]
** where P is the input dilated by the stride and padded by (KHd - 1 - pt)
** on top (the offset may be negative when the padding exceeds the kernel).
** NHWC data takes an HWOI kernel [KH, KW, O/groups, C] by default, or IOHW
** with kernel_layout = "IOHW" (NCHW data: IOHW only). */

int tl_topi_conv2d_transpose(tl_topi_call *c) {
  char ib[400];
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  int data = c->in[0], kernel = c->in[1];
  conv_attrs a;
  if ((rc = conv_parse(c, &a, 0))) return rc;
  if ((rc = check_4d(c, data, "data")) || (rc = check_4d(c, kernel, "kernel"))) return rc;
  if ((rc = conv_dtypes(c, data, kernel, &a))) return rc;
  int nhwc = strcmp(a.layout, "NHWC") == 0;
  const char *kl;
  if ((rc = tl_topi_get_str(c, "kernel_layout", nhwc ? "HWOI" : "IOHW", &kl))) return rc;
  int hwoi = strcmp(kl, "HWOI") == 0;
  if (!hwoi && strcmp(kl, "IOHW") != 0)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: kernel_layout '%s' is not supported (IOHW or HWOI)",
                  c->op, kl);
  if (hwoi && !nhwc)
    return tl_err(c->ctx, TL_E_UNSUPPORTED,
                  "%s: kernel_layout 'HWOI' needs data_layout NHWC, got %s", c->op, a.layout);
  const int64_t *ds = tl_topi_shape(c->dag, data), *ks = tl_topi_shape(c->dag, kernel);
  int64_t N = ds[0], C = nhwc ? ds[3] : ds[1], H = nhwc ? ds[1] : ds[2], W = nhwc ? ds[2] : ds[3];
  int64_t KC = hwoi ? ks[3] : ks[0], OG = hwoi ? ks[2] : ks[1];
  int64_t KH = hwoi ? ks[0] : ks[2], KW = hwoi ? ks[1] : ks[3], g = a.groups;
  if (C % g != 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups=%lld does not divide %lld input channels %s", c->op,
                  (long long)g, (long long)C, tl_topi_inputs_str(c, ib));
  if (KC != C)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: channel mismatch: data has %lld channels but kernel expects %lld %s", c->op,
                  (long long)C, (long long)KC, tl_topi_inputs_str(c, ib));
  for (int i = 0; i < 2; i++)
    if (a.out_pad[i] < 0 || (a.out_pad[i] >= a.stride[i] && a.out_pad[i] >= a.dil[i]))
      return tl_err(c->ctx, TL_E_ARG,
                    "%s: output_padding (%lld, %lld) must be non-negative and smaller than the stride (%lld, %lld) or the dilation",
                    c->op, (long long)a.out_pad[0], (long long)a.out_pad[1],
                    (long long)a.stride[0], (long long)a.stride[1]);
  int64_t KHd = (KH - 1) * a.dil[0] + 1, KWd = (KW - 1) * a.dil[1] + 1;
  int64_t OH = (H - 1) * a.stride[0] + KHd - a.pad[0] - a.pad[2] + a.out_pad[0];
  int64_t OW = (W - 1) * a.stride[1] + KWd - a.pad[1] - a.pad[3] + a.out_pad[1];
  if (OH < 1 || OW < 1)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: padding (%lld, %lld, %lld, %lld) leaves an empty output (%lldx%lld) for input %lldx%lld and kernel %lldx%lld",
                  c->op, (long long)a.pad[0], (long long)a.pad[1], (long long)a.pad[2],
                  (long long)a.pad[3], (long long)OH, (long long)OW, (long long)H, (long long)W,
                  (long long)KH, (long long)KW);
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int hd = nhwc ? 1 : 2, wd = nhwc ? 2 : 3, cd = nhwc ? 3 : 1;
  /* the dilated, padded input */
  int64_t offh = KHd - 1 - a.pad[0], offw = KWd - 1 - a.pad[1];
  int64_t pshape[4];
  pshape[0] = N, pshape[cd] = C, pshape[hd] = OH + KHd - 1, pshape[wd] = OW + KWd - 1;
  tl_ref pax[4];
  tl_te_axis_vars(dag, 4, NULL, pax);
  tl_ref hh = tl_sub(ir, pax[hd], tl_int(ir, offh)), ww = tl_sub(ir, pax[wd], tl_int(ir, offw));
  tl_ref cond = tl_topi_cmp(dag, TL_IR_GE, hh, tl_int(ir, 0));
  cond = tl_and(ir, cond, tl_topi_cmp(dag, TL_IR_GE, ww, tl_int(ir, 0)));
  cond = tl_and(ir, cond, tl_lt(ir, hh, tl_int(ir, (H - 1) * a.stride[0] + 1)));
  cond = tl_and(ir, cond, tl_lt(ir, ww, tl_int(ir, (W - 1) * a.stride[1] + 1)));
  if (a.stride[0] > 1)
    cond = tl_and(ir, cond, tl_binary(ir, TL_IR_EQ, tl_floormod(ir, hh, tl_int(ir, a.stride[0])), tl_int(ir, 0)));
  if (a.stride[1] > 1)
    cond = tl_and(ir, cond, tl_binary(ir, TL_IR_EQ, tl_floormod(ir, ww, tl_int(ir, a.stride[1])), tl_int(ir, 0)));
  tl_ref didx[4];
  didx[0] = pax[0], didx[cd] = pax[cd];
  didx[hd] = a.stride[0] > 1 ? tl_floordiv(ir, hh, tl_int(ir, a.stride[0])) : hh;
  didx[wd] = a.stride[1] > 1 ? tl_floordiv(ir, ww, tl_int(ir, a.stride[1])) : ww;
  tl_type dt = tl_topi_dtype(dag, data);
  tl_ref pbody = tl_if_then_else(ir, cond, tl_te_load(dag, data, didx, 4), tl_topi_const(dag, dt, 0));
  int pad;
  if ((rc = tl_topi_emit(c, "data_pad", "injective,pad", "injective", 4, pshape, pax, pbody,
                         TL_RED_NONE, NULL, 0, 0, NULL, &pad)))
    return rc;
  static const char *const names[4] = {"b", "c", "h", "w"};
  static const char *const nhwc_names[4] = {"b", "h", "w", "c"};
  tl_ref ax[4];
  tl_te_axis_vars(dag, 4, nhwc ? nhwc_names : names, ax);
  int64_t CG = C / g;
  tl_ref dc = tl_te_reduce_axis(dag, "dc", CG), dh = tl_te_reduce_axis(dag, "dh", KH),
         dw = tl_te_reduce_axis(dag, "dw", KW);
  tl_ref ci = dc, ko = ax[cd];
  if (g > 1) {
    ci = tl_add(ir, tl_mul(ir, tl_floordiv(ir, ax[cd], tl_int(ir, OG)), tl_int(ir, CG)), dc);
    ko = tl_floormod(ir, ax[cd], tl_int(ir, OG));
  }
  tl_ref pi[4], ki[4];
  pi[0] = ax[0], pi[cd] = ci;
  pi[hd] = tl_topi_window(dag, ax[hd], 1, dh, a.dil[0]);
  pi[wd] = tl_topi_window(dag, ax[wd], 1, dw, a.dil[1]);
  tl_ref fy = tl_sub(ir, tl_int(ir, KH - 1), dh), fx = tl_sub(ir, tl_int(ir, KW - 1), dw);
  if (hwoi) ki[0] = fy, ki[1] = fx, ki[2] = ko, ki[3] = ci;
  else ki[0] = ci, ki[1] = ko, ki[2] = fy, ki[3] = fx;
  int64_t oshape[4];
  oshape[0] = N, oshape[cd] = OG * g, oshape[hd] = OH, oshape[wd] = OW;
  int64_t ksz[2] = {KH, KW};
  json_t *aj = conv_attrs_json(&a, ksz);
  json_object_set_new(aj, "output_padding", ints_json(a.out_pad, 2));
  json_object_set_new(aj, "kernel_layout", json_string(kl));
  tl_ref rv[3] = {dc, dh, dw};
  const char *tag = nhwc ? "conv2d_transpose_nhwc" : "conv2d_transpose_nchw";
  return tl_topi_conv_sum(c, data, a.out_dtype, tag, 4, oshape, ax, tl_te_load(dag, pad, pi, 4),
                       tl_te_load(dag, kernel, ki, 4), rv, 3, aj);
}

/* ---- dense ------------------------------------------------------------------- */

int tl_topi_dense(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 2, 3))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int data = c->in[0], weight = c->in[1];
  char b1[160], b2[160];
  if (tl_topi_ndim(dag, data) != 2 || tl_topi_ndim(dag, weight) != 2)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: data and weight must be 2-D, got %s and %s", c->op,
                  tl_topi_shape_str(dag, data, b1), tl_topi_shape_str(dag, weight, b2));
  const int64_t *ds = tl_topi_shape(dag, data), *ws = tl_topi_shape(dag, weight);
  if (ds[1] != ws[1])
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: reduction mismatch: data %s has %lld input features but weight %s has %lld",
                  c->op, tl_topi_shape_str(dag, data, b1), (long long)ds[1],
                  tl_topi_shape_str(dag, weight, b2), (long long)ws[1]);
  tl_type dt = tl_topi_dtype(dag, data), ot;
  if (!tl_type_eq(dt, tl_topi_dtype(dag, weight))) {
    char t1[24], t2[24];
    return tl_err(c->ctx, TL_E_DTYPE, "%s: data is %s but weight is %s", c->op, tl_type_str(dt, t1),
                  tl_type_str(tl_topi_dtype(dag, weight), t2));
  }
  if ((rc = tl_topi_get_dtype(c, "out_dtype", dt, &ot))) return rc;
  int bias = c->nin == 3 ? c->in[2] : -1;
  if (bias >= 0 && (tl_topi_ndim(dag, bias) != 1 || tl_topi_shape(dag, bias)[0] != ws[0]))
    return tl_err(c->ctx, TL_E_SHAPE, "%s: bias must have shape (%lld), got %s", c->op,
                  (long long)ws[0], tl_topi_shape_str(dag, bias, b1));
  if (bias >= 0 && !tl_type_eq(tl_topi_dtype(dag, bias), ot)) {
    char t1[24], t2[24];
    return tl_err(c->ctx, TL_E_DTYPE, "%s: bias is %s but the output is %s", c->op,
                  tl_type_str(tl_topi_dtype(dag, bias), t1), tl_type_str(ot, t2));
  }
  static const char *const names[2] = {"i", "j"};
  tl_ref ax[2];
  tl_te_axis_vars(dag, 2, names, ax);
  tl_ref k = tl_te_reduce_axis(dag, "k", ds[1]);
  tl_ref di[2] = {ax[0], k}, wi[2] = {ax[1], k};
  tl_ref lhs = tl_te_load(dag, data, di, 2), rhs = tl_te_load(dag, weight, wi, 2);
  if (!tl_type_eq(dt, ot)) {
    lhs = tl_cast(ir, ot, lhs);
    rhs = tl_cast(ir, ot, rhs);
  }
  int64_t oshape[2] = {ds[0], ws[0]};
  char tb[24];
  json_t *aj = json_object();
  json_object_set_new(aj, "units", json_integer(ws[0]));
  json_object_set_new(aj, "out_dtype", json_string(tl_type_str(ot, tb)));
  int out;
  rc = tl_topi_emit(c, "T_dense", "dense", "out_elemwise_fusable", 2, oshape, ax,
                    tl_mul(ir, lhs, rhs), TL_RED_SUM, &k, 1, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  if (bias >= 0) {
    tl_ref bx[2];
    tl_te_axis_vars(dag, 2, names, bx);
    tl_ref oi[2] = {bx[0], bx[1]};
    tl_ref body = tl_add(ir, tl_te_load(dag, out, oi, 2), tl_te_load(dag, bias, &bx[1], 1));
    if ((rc = tl_topi_emit(c, "T_add", "broadcast", "broadcast", 2, oshape, bx, body,
                           TL_RED_NONE, NULL, 0, 0, NULL, &out)))
      return rc;
  }
  return tl_topi_push_out(c, out);
}

/* ---- batch_matmul --------------------------------------------------------------- */

int tl_topi_batch_matmul(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int x = c->in[0], y = c->in[1];
  int64_t ta, tb;
  if ((rc = tl_topi_get_int(c, "transpose_a", 0, &ta)) ||
      (rc = tl_topi_get_int(c, "transpose_b", 1, &tb)))
    return rc;
  char b1[160], b2[160];
  if (tl_topi_ndim(dag, x) != 3 || tl_topi_ndim(dag, y) != 3)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: operands must be 3-D, got %s and %s", c->op,
                  tl_topi_shape_str(dag, x, b1), tl_topi_shape_str(dag, y, b2));
  const int64_t *xs = tl_topi_shape(dag, x), *ys = tl_topi_shape(dag, y);
  int64_t XB = xs[0], YB = ys[0];
  int64_t M = ta ? xs[2] : xs[1], K = ta ? xs[1] : xs[2];
  int64_t N = tb ? ys[1] : ys[2], K2 = tb ? ys[2] : ys[1];
  if (XB != YB && XB != 1 && YB != 1)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: batch sizes of %s and %s do not broadcast", c->op,
                  tl_topi_shape_str(dag, x, b1), tl_topi_shape_str(dag, y, b2));
  if (K != K2)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: reduction mismatch: %s (transpose_a=%d) and %s (transpose_b=%d) give K = %lld vs %lld",
                  c->op, tl_topi_shape_str(dag, x, b1), (int)ta, tl_topi_shape_str(dag, y, b2),
                  (int)tb, (long long)K, (long long)K2);
  tl_type dt = tl_topi_dtype(dag, x), ot;
  if (!tl_type_eq(dt, tl_topi_dtype(dag, y)))
    return tl_err(c->ctx, TL_E_DTYPE, "%s: operands have different dtypes", c->op);
  if ((rc = tl_topi_get_dtype(c, "out_dtype", dt, &ot))) return rc;
  static const char *const names[3] = {"b", "i", "j"};
  tl_ref ax[3];
  tl_te_axis_vars(dag, 3, names, ax);
  tl_ref k = tl_te_reduce_axis(dag, "k", K);
  tl_ref zero = tl_int(ir, 0);
  tl_ref xi[3] = {XB == 1 ? zero : ax[0], ta ? k : ax[1], ta ? ax[1] : k};
  tl_ref yi[3] = {YB == 1 ? zero : ax[0], tb ? ax[2] : k, tb ? k : ax[2]};
  tl_ref lhs = tl_te_load(dag, x, xi, 3), rhs = tl_te_load(dag, y, yi, 3);
  if (!tl_type_eq(dt, ot)) {
    lhs = tl_cast(ir, ot, lhs);
    rhs = tl_cast(ir, ot, rhs);
  }
  int64_t oshape[3] = {TL_MAX(XB, YB), M, N};
  json_t *aj = json_object();
  json_object_set_new(aj, "transpose_a", json_boolean(ta));
  json_object_set_new(aj, "transpose_b", json_boolean(tb));
  int out;
  rc = tl_topi_emit(c, "T_batch_matmul", "batch_matmul", "out_elemwise_fusable", 3, oshape, ax,
                    tl_mul(ir, lhs, rhs), TL_RED_SUM, &k, 1, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

/* ---- matmul (numpy semantics) ---------------------------------------------------- */

int tl_topi_matmul(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int A = c->in[0], B = c->in[1];
  int na = tl_topi_ndim(dag, A), nb = tl_topi_ndim(dag, B);
  const int64_t *as = tl_topi_shape(dag, A), *bs = tl_topi_shape(dag, B);
  char b1[160], b2[160];
  if (na < 1 || nb < 1 || na > TL_TOPI_MAXDIM - 2 || nb > TL_TOPI_MAXDIM - 2)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: operands must have 1 to %d dimensions, got %s and %s",
                  c->op, TL_TOPI_MAXDIM - 2, tl_topi_shape_str(dag, A, b1),
                  tl_topi_shape_str(dag, B, b2));
  int64_t K = as[na - 1], KB = nb == 1 ? bs[0] : bs[nb - 2];
  if (K != KB)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: reduction mismatch: %s and %s (K = %lld vs %lld)", c->op,
                  tl_topi_shape_str(dag, A, b1), tl_topi_shape_str(dag, B, b2), (long long)K,
                  (long long)KB);
  tl_type dt = tl_topi_dtype(dag, A);
  if (!tl_type_eq(dt, tl_topi_dtype(dag, B)))
    return tl_err(c->ctx, TL_E_DTYPE, "%s: operands have different dtypes", c->op);
  int ba = na >= 2 ? na - 2 : 0, bb = nb >= 2 ? nb - 2 : 0, nbatch = TL_MAX(ba, bb);
  int64_t oshape[TL_TOPI_MAXDIM];
  int no = 0;
  for (int i = 0; i < nbatch; i++) {
    int ia = ba - nbatch + i, ib = bb - nbatch + i;
    int64_t x = ia >= 0 ? as[ia] : 1, y = ib >= 0 ? bs[ib] : 1;
    if (x != y && x != 1 && y != 1)
      return tl_err(c->ctx, TL_E_SHAPE, "%s: batch dimensions of %s and %s do not broadcast", c->op,
                    tl_topi_shape_str(dag, A, b1), tl_topi_shape_str(dag, B, b2));
    oshape[no++] = x == 1 ? y : x;
  }
  int has_m = na >= 2, has_n = nb >= 2;
  if (has_m) oshape[no++] = as[na - 2];
  if (has_n) oshape[no++] = bs[nb - 1];
  tl_ref ax[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, no, NULL, ax);
  tl_ref k = tl_te_reduce_axis(dag, "k", K);
  tl_ref ai[TL_TOPI_MAXDIM], bi[TL_TOPI_MAXDIM];
  for (int i = 0; i < ba; i++) ai[i] = as[i] == 1 ? tl_int(ir, 0) : ax[nbatch - ba + i];
  if (has_m) ai[ba] = ax[nbatch];
  ai[na - 1] = k;
  for (int i = 0; i < bb; i++) bi[i] = bs[i] == 1 ? tl_int(ir, 0) : ax[nbatch - bb + i];
  if (has_n) {
    bi[nb - 2] = k;
    bi[nb - 1] = ax[nbatch + has_m];
  } else {
    bi[0] = k;
  }
  tl_ref body = tl_mul(ir, tl_te_load(dag, A, ai, na), tl_te_load(dag, B, bi, nb));
  int out;
  if (no == 0) {
    /* 1-D x 1-D: a scalar */
    rc = tl_topi_emit(c, "T_matmul", "matmul", "out_elemwise_fusable", 0, oshape, ax, body,
                      TL_RED_SUM, &k, 1, 0, NULL, &out);
  } else {
    rc = tl_topi_emit(c, "T_matmul", "matmul", "out_elemwise_fusable", no, oshape, ax, body,
                      TL_RED_SUM, &k, 1, 0, NULL, &out);
  }
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}
