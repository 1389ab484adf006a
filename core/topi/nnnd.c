/*
** nnnd.c -- convolution and pooling over 1 or 3 spatial dimensions (the
** 2-D operators, with their schedules and templates, live in nn.c and
** pool.c).
**
**   conv1d / conv3d   NCW / NCDHW data x OIW / OIDHW kernel, or channels
**                     last NWC / NDHWC x WIO / DHWIO; strides, dilation (1 or
**                     D values), padding (1, D or 2D values: every "before"
**                     then every "after", TVM's (front, top, left, back,
**                     bottom, right) for 3-D), groups, out_dtype. Tag
**                     conv3d_ncdhw / conv3d_ndhwc (group_ prefix for groups >
**                     1), conv1d_ncw / conv1d_nwc.
**   pool1d / pool3d / max_pool3d / avg_pool3d (and _1d)  kernel (pool_size),
**                     strides, padding, dilation, ceil_mode,
**                     count_include_pad, pool_type, layout: as pool2d.
**   global_avg_pool3d / global_max_pool3d  reduce every spatial axis.
**   conv1d_transpose / conv3d_transpose  NCW / NCDHW data x [C, O/groups,
**                     K...] kernel; strides, padding, dilation, groups,
**                     output_padding (as conv2d_transpose).
*/
#include "pool.h"

#include <stdio.h>

#define ND_MAX 3

typedef struct nd_layout {
  int D;                          /* spatial dims */
  int cl;                         /* channels last */
  int cdim;                       /* channel dimension of the data */
  int sdim[ND_MAX];               /* spatial dimensions of the data */
  const char *name;
} nd_layout;

static int nd_dims_of(const char *op) {
  if (strstr(op, "1d")) return 1;
  if (strstr(op, "3d")) return 3;
  return 0;
}

static int parse_layout(tl_topi_call *c, int D, nd_layout *L) {
  static const char *const first[4] = {"", "NCW", "NCHW", "NCDHW"};
  static const char *const last[4] = {"", "NWC", "NHWC", "NDHWC"};
  const char *lay;
  int rc = tl_topi_get_str(c, "layout", first[D], &lay);
  if (rc) return rc;
  if ((rc = tl_topi_get_str(c, "data_layout", lay, &lay))) return rc;
  L->D = D;
  L->name = lay;
  if (strcmp(lay, first[D]) == 0) L->cl = 0;
  else if (strcmp(lay, last[D]) == 0) L->cl = 1;
  else
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: layout '%s' is not supported (%s or %s)", c->op,
                  lay, first[D], last[D]);
  L->cdim = L->cl ? D + 1 : 1;
  for (int i = 0; i < D; i++) L->sdim[i] = L->cl ? 1 + i : 2 + i;
  return TL_OK;
}

static int check_rank(tl_topi_call *c, int t, int n, const char *what) {
  if (tl_topi_ndim(c->dag, t) != n) {
    char b[160];
    return tl_err(c->ctx, TL_E_SHAPE, "%s: %s must be %d-D, got shape %s", c->op, what, n,
                  tl_topi_shape_str(c->dag, t, b));
  }
  return TL_OK;
}

static json_t *ints_json(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static const char *ints_str(const int64_t *v, int n, char *buf) {
  int pos = snprintf(buf, 160, "(");
  for (int i = 0; i < n && pos < 140; i++)
    pos += snprintf(buf + pos, 160 - (size_t)pos, "%s%lld", i ? ", " : "", (long long)v[i]);
  snprintf(buf + pos, 160 - (size_t)pos, ")");
  return buf;
}

/* Window attributes shared by conv and pool: strides, dilation, padding
** (before[D], after[D]). */
static int window_attrs(tl_topi_call *c, int D, int64_t *s, int64_t *d, int64_t *pb, int64_t *pa) {
  static const int64_t one[ND_MAX] = {1, 1, 1};
  int rc, n;
  if ((rc = tl_topi_get_ints(c, "strides", D, one, s, NULL))) return rc;
  if ((rc = tl_topi_get_ints(c, "dilation", D, one, d, NULL))) return rc;
  int64_t p[2 * TL_TOPI_MAXDIM];
  if ((rc = tl_topi_get_ints(c, "padding", -1, NULL, p, &n))) return rc;
  for (int i = 0; i < D; i++) {
    if (n <= 0) pb[i] = pa[i] = 0;
    else if (n == 1) pb[i] = pa[i] = p[0];
    else if (n == D) pb[i] = pa[i] = p[i];
    else if (n == 2 * D) pb[i] = p[i], pa[i] = p[D + i];
    else
      return tl_err(c->ctx, TL_E_ARG, "%s: padding must have 1, %d or %d values, got %d", c->op, D,
                    2 * D, n);
  }
  char ib[400], b1[160];
  for (int i = 0; i < D; i++) {
    if (s[i] <= 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: strides must be positive, got %s %s", c->op,
                    ints_str(s, D, b1), tl_topi_inputs_str(c, ib));
    if (d[i] <= 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: dilation must be positive, got %s %s", c->op,
                    ints_str(d, D, b1), tl_topi_inputs_str(c, ib));
    if (pb[i] < 0 || pa[i] < 0) {
      int64_t all[2 * ND_MAX];
      for (int j = 0; j < D; j++) all[j] = pb[j], all[D + j] = pa[j];
      return tl_err(c->ctx, TL_E_ARG, "%s: padding must be non-negative, got %s %s", c->op,
                    ints_str(all, 2 * D, b1), tl_topi_inputs_str(c, ib));
    }
  }
  return TL_OK;
}

static tl_ref win(tl_ir *ir, tl_ref y, int64_t s, tl_ref r, int64_t d) {
  return tl_add(ir, tl_mul(ir, y, tl_int(ir, s)), tl_mul(ir, r, tl_int(ir, d)));
}

/* ---- conv1d / conv3d --------------------------------------------------------- */

/* The start of every op here: nin inputs, the first (data) of rank D + 2 with D spatial
** dims (1 to 3: from the op's name, else from data's rank) in layout L. */
static int nd_start(tl_topi_call *c, int nin, int *D, nd_layout *L) {
  int rc;
  if ((rc = tl_topi_nin(c, nin, nin))) return rc;
  int data = c->in[0];
  *D = nd_dims_of(c->op);
  if (*D == 0) *D = tl_topi_ndim(c->dag, data) - 2;
  if (*D < 1 || *D > ND_MAX) return tl_err(c->ctx, TL_E_ARG, "%s: 1 to 3 spatial dimensions", c->op);
  if ((rc = parse_layout(c, *D, L))) return rc;
  return check_rank(c, data, *D + 2, "data");
}

/* The common start of conv1d/3d and their transposes: two inputs (data, kernel) of rank D + 2,
** the layout, strides/dilation/padding, groups (> 0), one dtype and out_dtype. */
static int conv_prologue(tl_topi_call *c, int *D, nd_layout *L, int64_t *s, int64_t *d, int64_t *pb,
                         int64_t *pa, int64_t *g, tl_type *dt, tl_type *ot) {
  int rc;
  if ((rc = nd_start(c, 2, D, L))) return rc;
  int data = c->in[0], kernel = c->in[1];
  if ((rc = check_rank(c, kernel, *D + 2, "kernel"))) return rc;
  if ((rc = window_attrs(c, *D, s, d, pb, pa))) return rc;
  if ((rc = tl_topi_get_int(c, "groups", 1, g))) return rc;
  char ib[400];
  if (*g <= 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups must be positive, got %lld %s", c->op,
                  (long long)*g, tl_topi_inputs_str(c, ib));
  *dt = tl_topi_dtype(c->dag, data);
  if (!tl_type_eq(*dt, tl_topi_dtype(c->dag, kernel))) {
    char t1[24], t2[24];
    return tl_err(c->ctx, TL_E_DTYPE, "%s: data is %s but kernel is %s", c->op,
                  tl_type_str(*dt, t1), tl_type_str(tl_topi_dtype(c->dag, kernel), t2));
  }
  return tl_topi_get_dtype(c, "out_dtype", *dt, ot);
}


/* The convolution's output stage: sum of prod over the reduce vars rv, attrs aj (consumed). */
static int emit_conv(tl_topi_call *c, const char *tag, int nd, const int64_t *oshape,
                     const tl_ref *ax, tl_ref prod, const tl_ref *rv, int nrv, json_t *aj) {
  int out;
  int rc = tl_topi_emit(c, tag, tag, "out_elemwise_fusable", nd, oshape, ax, prod,
                        TL_RED_SUM, rv, nrv, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

int tl_topi_conv_nd(tl_topi_call *c) {
  int rc, D;
  nd_layout L;
  int64_t s[ND_MAX], d[ND_MAX], pb[ND_MAX], pa[ND_MAX], g;
  tl_type dt, ot;
  if ((rc = conv_prologue(c, &D, &L, s, d, pb, pa, &g, &dt, &ot))) return rc;
  int data = c->in[0], kernel = c->in[1];
  char ib[400];
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  /* kernel: OI<spatial> with channels first, <spatial>IO with channels last */
  static const char *const kfirst[4] = {"", "OIW", "OIHW", "OIDHW"};
  static const char *const klast[4] = {"", "WIO", "HWIO", "DHWIO"};
  const char *kl;
  if ((rc = tl_topi_get_str(c, "kernel_layout", L.cl ? klast[D] : kfirst[D], &kl))) return rc;
  if (strcmp(kl, L.cl ? klast[D] : kfirst[D]) != 0)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: kernel_layout '%s' with layout %s is not supported (%s)",
                  c->op, kl, L.name, L.cl ? klast[D] : kfirst[D]);
  const int64_t *ds = tl_topi_shape(dag, data), *ks = tl_topi_shape(dag, kernel);
  int64_t N = ds[0], C = ds[L.cdim];
  int64_t O = L.cl ? ks[D + 1] : ks[0], CG = L.cl ? ks[D] : ks[1], K[ND_MAX];
  for (int i = 0; i < D; i++) K[i] = L.cl ? ks[i] : ks[2 + i];
  if (C % g != 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups=%lld does not divide %lld input channels %s",
                  c->op, (long long)g, (long long)C, tl_topi_inputs_str(c, ib));
  if (O % g != 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups=%lld does not divide %lld output channels %s",
                  c->op, (long long)g, (long long)O, tl_topi_inputs_str(c, ib));
  if (C / g != CG)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: channel mismatch: data has %lld channels (groups=%lld) but kernel expects %lld %s",
                  c->op, (long long)C, (long long)g, (long long)(CG * g), tl_topi_inputs_str(c, ib));
  int64_t OS[ND_MAX], before[ND_MAX + 2] = {0}, pshape[ND_MAX + 2];
  memcpy(pshape, ds, sizeof(int64_t) * (size_t)(D + 2));
  for (int i = 0; i < D; i++) {
    int64_t in = ds[L.sdim[i]], kd = (K[i] - 1) * d[i] + 1, padded = in + pb[i] + pa[i];
    if (kd > padded) {
      char b1[160], b2[160], b3[160];
      int64_t kdv[ND_MAX], pv[ND_MAX];
      for (int j = 0; j < D; j++) kdv[j] = (K[j] - 1) * d[j] + 1, pv[j] = ds[L.sdim[j]] + pb[j] + pa[j];
      return tl_err(c->ctx, TL_E_SHAPE,
                    "%s: kernel %s (dilated %s) is larger than the padded input %s %s", c->op,
                    ints_str(K, D, b1), ints_str(kdv, D, b2), ints_str(pv, D, b3),
                    tl_topi_inputs_str(c, ib));
    }
    OS[i] = (padded - kd) / s[i] + 1;
    before[L.sdim[i]] = pb[i];
    pshape[L.sdim[i]] = padded;
  }
  int pad;
  if ((rc = tl_topi_pad_stage(c, data, before, pshape, 0, "pad_temp", &pad))) return rc;
  int nd = D + 2;
  tl_ref ax[ND_MAX + 2];
  tl_te_axis_vars(dag, nd, NULL, ax);
  tl_ref rcv = tl_te_reduce_axis(dag, "rc", CG), rk[ND_MAX];
  static const char *const rnames[ND_MAX] = {"rd", "rh", "rw"};
  for (int i = 0; i < D; i++) rk[i] = tl_te_reduce_axis(dag, rnames[ND_MAX - D + i], K[i]);
  tl_ref f = ax[L.cdim];
  tl_ref ci = rcv;
  if (g > 1) ci = tl_add(ir, tl_mul(ir, tl_floordiv(ir, f, tl_int(ir, O / g)), tl_int(ir, CG)), rcv);
  tl_ref di[ND_MAX + 2], ki[ND_MAX + 2];
  di[0] = ax[0];
  di[L.cdim] = ci;
  for (int i = 0; i < D; i++) di[L.sdim[i]] = win(ir, ax[L.sdim[i]], s[i], rk[i], d[i]);
  if (L.cl) {
    for (int i = 0; i < D; i++) ki[i] = rk[i];
    ki[D] = rcv, ki[D + 1] = f;
  } else {
    ki[0] = f, ki[1] = rcv;
    for (int i = 0; i < D; i++) ki[2 + i] = rk[i];
  }
  tl_ref lhs = tl_te_load(dag, pad, di, nd), rhs = tl_te_load(dag, kernel, ki, nd);
  if (!tl_type_eq(dt, ot)) {
    lhs = tl_cast(ir, ot, lhs);
    rhs = tl_cast(ir, ot, rhs);
  }
  int64_t oshape[ND_MAX + 2];
  oshape[0] = N;
  oshape[L.cdim] = O;
  for (int i = 0; i < D; i++) oshape[L.sdim[i]] = OS[i];
  tl_ref rv[ND_MAX + 1] = {rcv};
  for (int i = 0; i < D; i++) rv[1 + i] = rk[i];
  char tag[40], lay[8];
  snprintf(lay, sizeof lay, "%s", L.name);
  for (char *p = lay; *p; p++) *p = (char)(*p - 'A' + 'a');
  snprintf(tag, sizeof tag, "%sconv%dd_%s", g > 1 ? "group_" : "", D, lay);
  char tb[24];
  json_t *aj = json_object();
  json_object_set_new(aj, "strides", ints_json(s, D));
  int64_t all[2 * ND_MAX];
  for (int j = 0; j < D; j++) all[j] = pb[j], all[D + j] = pa[j];
  json_object_set_new(aj, "padding", ints_json(all, 2 * D));
  json_object_set_new(aj, "dilation", ints_json(d, D));
  json_object_set_new(aj, "groups", json_integer(g));
  json_object_set_new(aj, "layout", json_string(L.name));
  json_object_set_new(aj, "out_dtype", json_string(tl_type_str(ot, tb)));
  json_object_set_new(aj, "kernel_size", ints_json(K, D));
  return emit_conv(c, tag, nd, oshape, ax, tl_mul(ir, lhs, rhs), rv, D + 1, aj);
}

/* ---- conv1d_transpose / conv3d_transpose (channels first) ------------------------
** As conv2d_transpose: the input dilated by the stride and padded by
** (Kd - 1 - pad_before) (may be negative) in a "data_pad" stage, then a
** direct convolution with the flipped kernel [C, O/groups, K...]. */

int tl_topi_conv_transpose_nd(tl_topi_call *c) {
  int rc, D;
  nd_layout L;
  int64_t s[ND_MAX], d[ND_MAX], pb[ND_MAX], pa[ND_MAX], op[ND_MAX], g;
  static const int64_t zero[ND_MAX] = {0, 0, 0};
  tl_type dt, ot;
  if ((rc = conv_prologue(c, &D, &L, s, d, pb, pa, &g, &dt, &ot))) return rc;
  if (L.cl)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: layout '%s' is not supported (channels first only)",
                  c->op, L.name);
  if ((rc = tl_topi_get_ints(c, "output_padding", D, zero, op, NULL))) return rc;
  int data = c->in[0], kernel = c->in[1];
  char ib[400], b1[160];
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  const int64_t *ds = tl_topi_shape(dag, data), *ks = tl_topi_shape(dag, kernel);
  int64_t N = ds[0], C = ds[1], KC = ks[0], OG = ks[1], K[ND_MAX], Kd[ND_MAX], OS[ND_MAX];
  if (C % g != 0)
    return tl_err(c->ctx, TL_E_ARG, "%s: groups=%lld does not divide %lld input channels %s",
                  c->op, (long long)g, (long long)C, tl_topi_inputs_str(c, ib));
  if (KC != C)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: channel mismatch: data has %lld channels but kernel expects %lld %s", c->op,
                  (long long)C, (long long)KC, tl_topi_inputs_str(c, ib));
  for (int i = 0; i < D; i++) {
    K[i] = ks[2 + i];
    Kd[i] = (K[i] - 1) * d[i] + 1;
    if (op[i] < 0 || (op[i] >= s[i] && op[i] >= d[i]))
      return tl_err(c->ctx, TL_E_ARG,
                    "%s: output_padding %s must be non-negative and smaller than the stride or the dilation %s",
                    c->op, ints_str(op, D, b1), tl_topi_inputs_str(c, ib));
    OS[i] = (ds[2 + i] - 1) * s[i] + Kd[i] - pb[i] - pa[i] + op[i];
    if (OS[i] < 1)
      return tl_err(c->ctx, TL_E_SHAPE, "%s: the padding leaves an empty output (dimension %d: %lld) %s",
                    c->op, 2 + i, (long long)OS[i], tl_topi_inputs_str(c, ib));
  }
  int nd = D + 2;
  int64_t pshape[ND_MAX + 2] = {N, C};
  tl_ref pax[ND_MAX + 2], didx[ND_MAX + 2];
  tl_te_axis_vars(dag, nd, NULL, pax);
  didx[0] = pax[0], didx[1] = pax[1];
  tl_ref cond = 0;
  for (int i = 0; i < D; i++) {
    pshape[2 + i] = OS[i] + Kd[i] - 1;
    tl_ref hh = tl_sub(ir, pax[2 + i], tl_int(ir, Kd[i] - 1 - pb[i]));
    cond = tl_topi_and(dag, cond, tl_topi_cmp(dag, TL_IR_GE, hh, tl_int(ir, 0)));
    cond = tl_topi_and(dag, cond, tl_lt(ir, hh, tl_int(ir, (ds[2 + i] - 1) * s[i] + 1)));
    if (s[i] > 1)
      cond = tl_topi_and(dag, cond, tl_binary(ir, TL_IR_EQ, tl_floormod(ir, hh, tl_int(ir, s[i])), tl_int(ir, 0)));
    didx[2 + i] = s[i] > 1 ? tl_floordiv(ir, hh, tl_int(ir, s[i])) : hh;
  }
  tl_ref pbody = tl_if_then_else(ir, cond, tl_te_load(dag, data, didx, nd), tl_topi_const(dag, dt, 0));
  int pad;
  if ((rc = tl_topi_emit(c, "data_pad", "injective,pad", "injective", nd, pshape, pax, pbody,
                         TL_RED_NONE, NULL, 0, 0, NULL, &pad)))
    return rc;
  tl_ref ax[ND_MAX + 2];
  tl_te_axis_vars(dag, nd, NULL, ax);
  int64_t CG = C / g;
  tl_ref dc = tl_te_reduce_axis(dag, "dc", CG), rk[ND_MAX];
  static const char *const rnames[ND_MAX] = {"rd", "rh", "rw"};
  for (int i = 0; i < D; i++) rk[i] = tl_te_reduce_axis(dag, rnames[ND_MAX - D + i], K[i]);
  tl_ref ci = dc, ko = ax[1];
  if (g > 1) {
    ci = tl_add(ir, tl_mul(ir, tl_floordiv(ir, ax[1], tl_int(ir, OG)), tl_int(ir, CG)), dc);
    ko = tl_floormod(ir, ax[1], tl_int(ir, OG));
  }
  tl_ref pi[ND_MAX + 2] = {ax[0], ci}, ki[ND_MAX + 2] = {ci, ko};
  for (int i = 0; i < D; i++) {
    pi[2 + i] = win(ir, ax[2 + i], 1, rk[i], d[i]);
    ki[2 + i] = tl_sub(ir, tl_int(ir, K[i] - 1), rk[i]);
  }
  tl_ref lhs = tl_te_load(dag, pad, pi, nd), rhs = tl_te_load(dag, kernel, ki, nd);
  if (!tl_type_eq(dt, ot)) {
    lhs = tl_cast(ir, ot, lhs);
    rhs = tl_cast(ir, ot, rhs);
  }
  int64_t oshape[ND_MAX + 2] = {N, OG * g};
  for (int i = 0; i < D; i++) oshape[2 + i] = OS[i];
  tl_ref rv[ND_MAX + 1] = {dc};
  for (int i = 0; i < D; i++) rv[1 + i] = rk[i];
  json_t *aj = json_object();
  int64_t all[2 * ND_MAX];
  for (int j = 0; j < D; j++) all[j] = pb[j], all[D + j] = pa[j];
  json_object_set_new(aj, "strides", ints_json(s, D));
  json_object_set_new(aj, "padding", ints_json(all, 2 * D));
  json_object_set_new(aj, "dilation", ints_json(d, D));
  json_object_set_new(aj, "output_padding", ints_json(op, D));
  json_object_set_new(aj, "groups", json_integer(g));
  json_object_set_new(aj, "layout", json_string(L.name));
  json_object_set_new(aj, "kernel_size", ints_json(K, D));
  char tag[40];
  snprintf(tag, sizeof tag, "conv%dd_transpose_%s", D, D == 1 ? "ncw" : "ncdhw");
  return emit_conv(c, tag, nd, oshape, ax, tl_mul(ir, lhs, rhs), rv, D + 1, aj);
}

/* ---- pool1d / pool3d ------------------------------------------------------------- */

int tl_topi_pool_nd(tl_topi_call *c) {
  int rc, is_max = 0, np, D;
  nd_layout L;
  if ((rc = nd_start(c, 1, &D, &L)) || (rc = tl_topi_pool_kind(c, &is_max))) return rc;
  int data = c->in[0];
  int64_t k[ND_MAX], s[ND_MAX], d[ND_MAX], pb[ND_MAX], pa[ND_MAX], ceil_mode, cip;
  json_t *kv = json_object_get(c->attrs, "kernel") ? NULL : json_object_get(c->attrs, "pool_size");
  if ((rc = tl_topi_get_ints(c, kv ? "pool_size" : "kernel", D, NULL, k, &np))) return rc;
  if (np < 0) return tl_err(c->ctx, TL_E_ARG, "%s: attribute 'kernel' is required", c->op);
  if ((rc = window_attrs(c, D, s, d, pb, pa)) ||
      (rc = tl_topi_get_int(c, "ceil_mode", 0, &ceil_mode)) ||
      (rc = tl_topi_get_int(c, "count_include_pad", 0, &cip)))
    return rc;
  char ib[400], b1[160], b2[160], b3[160];
  for (int i = 0; i < D; i++)
    if (k[i] <= 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: kernel must be positive, got %s %s", c->op,
                    ints_str(k, D, b1), tl_topi_inputs_str(c, ib));
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  const int64_t *ds = tl_topi_shape(dag, data);
  int nd = D + 2;
  int64_t o[ND_MAX], kd[ND_MAX], in[ND_MAX];
  for (int i = 0; i < D; i++) {
    in[i] = ds[L.sdim[i]];
    kd[i] = (k[i] - 1) * d[i] + 1;
    int64_t span = in[i] + pb[i] + pa[i] - kd[i];
    if (span < 0) {
      int64_t pv[ND_MAX], kdv[ND_MAX];
      for (int j = 0; j < D; j++) kdv[j] = (k[j] - 1) * d[j] + 1, pv[j] = ds[L.sdim[j]] + pb[j] + pa[j];
      return tl_err(c->ctx, TL_E_SHAPE, "%s: kernel %s (dilated %s) is larger than the padded input %s %s",
                    c->op, ints_str(k, D, b1), ints_str(kdv, D, b2), ints_str(pv, D, b3),
                    tl_topi_inputs_str(c, ib));
    }
    o[i] = (ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
    if (ceil_mode && (o[i] - 1) * s[i] >= in[i] + pb[i]) o[i]--;
  }
  int64_t before[ND_MAX + 2] = {0}, pshape[ND_MAX + 2];
  memcpy(pshape, ds, sizeof(int64_t) * (size_t)nd);
  for (int i = 0; i < D; i++) {
    before[L.sdim[i]] = pb[i];
    pshape[L.sdim[i]] = TL_MAX((o[i] - 1) * s[i] + kd[i], in[i] + pb[i]);
  }
  tl_type dt = tl_topi_dtype(dag, data);
  double padv = tl_topi_pool_pad_value(dag, dt, is_max);
  int pad;
  if ((rc = tl_topi_pad_stage(c, data, before, pshape, padv, "pad_temp", &pad))) return rc;
  int64_t oshape[ND_MAX + 2];
  memcpy(oshape, ds, sizeof(int64_t) * (size_t)nd);
  for (int i = 0; i < D; i++) oshape[L.sdim[i]] = o[i];
  tl_ref ax[ND_MAX + 2], rv[ND_MAX], idx[ND_MAX + 2];
  tl_te_axis_vars(dag, nd, NULL, ax);
  static const char *const rnames[ND_MAX] = {"rv0", "rv1", "rv2"};
  for (int i = 0; i < D; i++) rv[i] = tl_te_reduce_axis(dag, rnames[i], k[i]);
  for (int i = 0; i < nd; i++) idx[i] = ax[i];
  for (int i = 0; i < D; i++) idx[L.sdim[i]] = win(ir, ax[L.sdim[i]], s[i], rv[i], d[i]);
  tl_ref body = tl_te_load(dag, pad, idx, nd);
  json_t *aj = json_object();
  int64_t all[2 * ND_MAX];
  for (int j = 0; j < D; j++) all[j] = pb[j], all[D + j] = pa[j];
  json_object_set_new(aj, "kernel", ints_json(k, D));
  json_object_set_new(aj, "strides", ints_json(s, D));
  json_object_set_new(aj, "padding", ints_json(all, 2 * D));
  json_object_set_new(aj, "dilation", ints_json(d, D));
  json_object_set_new(aj, "ceil_mode", json_boolean(ceil_mode));
  json_object_set_new(aj, "count_include_pad", json_boolean(cip));
  json_object_set_new(aj, "layout", json_string(L.name));
  json_object_set_new(aj, "pool_type", json_string(is_max ? "max" : "avg"));
  int out;
  if (is_max) {
    rc = tl_topi_emit(c, "pool_max", "pool_max", "out_elemwise_fusable", nd, oshape, ax, body,
                      TL_RED_MAX, rv, D, 0, aj, &out);
    json_decref(aj);
    if (rc) return rc;
    return tl_topi_push_out(c, out);
  }
  int sum;
  rc = tl_topi_emit(c, "pool_sum", "pool_sum", "out_elemwise_fusable", nd, oshape, ax, body,
                    TL_RED_SUM, rv, D, 0, aj, &sum);
  if (rc) { json_decref(aj); return rc; }
  tl_ref bx[ND_MAX + 2];
  tl_te_axis_vars(dag, nd, NULL, bx);
  tl_ref count = 0;
  for (int i = 0; i < D; i++) {
    tl_ref start = tl_sub(ir, tl_mul(ir, bx[L.sdim[i]], tl_int(ir, s[i])), tl_int(ir, pb[i]));
    int64_t lo = cip ? -pb[i] : 0, hi = cip ? in[i] + pa[i] : in[i];
    tl_ref cnt = tl_topi_window_count(ir, start, k[i], d[i], lo, hi);
    count = count ? tl_mul(ir, count, cnt) : cnt;
  }
  count = tl_max(ir, count, tl_int(ir, 1));
  tl_ref sv = tl_te_load(dag, sum, bx, nd);
  tl_ref avg = tl_type_is_float(dt) ? tl_binary(ir, TL_IR_DIV, sv, tl_cast(ir, dt, count))
                                    : tl_binary(ir, TL_IR_TRUNCDIV, sv, tl_cast(ir, dt, count));
  rc = tl_topi_emit(c, "pool_avg", "elemwise", "elemwise", nd, oshape, bx, avg, TL_RED_NONE, NULL,
                    0, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

/* ---- global pool over 1 or 3 spatial dims ------------------------------------------ */

int tl_topi_global_pool_nd(tl_topi_call *c) {
  int rc, is_max = 0, D;
  nd_layout L;
  if ((rc = nd_start(c, 1, &D, &L)) || (rc = tl_topi_pool_kind(c, &is_max))) return rc;
  int data = c->in[0];
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  const int64_t *ds = tl_topi_shape(dag, data);
  int nd = D + 2;
  int64_t oshape[ND_MAX + 2];
  memcpy(oshape, ds, sizeof(int64_t) * (size_t)nd);
  double n = 1;
  tl_ref ax[ND_MAX + 2], rv[ND_MAX], idx[ND_MAX + 2];
  tl_te_axis_vars(dag, nd, NULL, ax);
  static const char *const rnames[ND_MAX] = {"rv0", "rv1", "rv2"};
  for (int i = 0; i < nd; i++) idx[i] = ax[i];
  for (int i = 0; i < D; i++) {
    oshape[L.sdim[i]] = 1;
    n *= (double)ds[L.sdim[i]];
    rv[i] = tl_te_reduce_axis(dag, rnames[i], ds[L.sdim[i]]);
    idx[L.sdim[i]] = rv[i];
  }
  json_t *aj = json_object();
  json_object_set_new(aj, "layout", json_string(L.name));
  json_object_set_new(aj, "pool_type", json_string(is_max ? "max" : "avg"));
  int out;
  tl_type dt = tl_topi_dtype(dag, data);
  rc = tl_topi_emit(c, is_max ? "adaptive_pool_max" : "adaptive_pool_sum",
                    is_max ? "adaptive_pool_max" : "adaptive_pool_sum", "out_elemwise_fusable", nd,
                    oshape, ax, tl_te_load(dag, data, idx, nd), is_max ? TL_RED_MAX : TL_RED_SUM,
                    rv, D, 0, aj, &out);
  if (rc == TL_OK && !is_max) {
    tl_ref bx[ND_MAX + 2];
    tl_te_axis_vars(dag, nd, NULL, bx);
    tl_ref sv = tl_te_load(dag, out, bx, nd);
    tl_ref v = tl_type_is_float(dt) ? tl_binary(ir, TL_IR_DIV, sv, tl_topi_const(dag, dt, n))
                                    : tl_binary(ir, TL_IR_TRUNCDIV, sv, tl_topi_const(dag, dt, n));
    rc = tl_topi_emit(c, "adaptive_pool_avg", "elemwise", "elemwise", nd, oshape, bx, v,
                      TL_RED_NONE, NULL, 0, 0, aj, &out);
  }
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}
