/*
** winograd.c -- Winograd convolution F(m x m, 3 x 3), stride 1, NCHW.
**
** The transform matrices come from Cook-Toom interpolation, computed here in
** double: with alpha = m + r - 1 and points p_0..p_{alpha-2} (0, 1, -1, 2,
** -2, 1/2, -1/2, ... as is standard) plus the point at infinity, the linear
** convolution s = g * h is recovered from s(p_j) = g(p_j) h(p_j) and the
** leading coefficient g_{r-1} h_{m-1} by Lagrange interpolation:
**     s(x) = sum_j s(p_j) M_j(x) / N_j + s_inf * M(x),
** M(x) = prod_l (x - p_l), M_j = M / (x - p_j), N_j = M_j(p_j). The
** correlation F(m, r) is that map transposed:
**     y = AT [ (G g) . (BT d) ],
**     AT[i][j] = p_j^i (column alpha-1: [i == m-1]),
**     G[j][k]  = p_j^k / N_j (row alpha-1: [k == r-1]),
**     BT[j][n] = coefficient of x^n in M_j (row alpha-1: in M).
** In 2-D: Y = AT [ (G g GT) . (BT d B) ] A.
**
** Stages: pad (data_pad), the weight transform (kernel_pack, its own
** operator "winograd_weight_transform" so it can be precomputed; conv2d_
** winograd takes the packed weight with "pre_transformed": true), the
** input tiles (input_tile), the input transform (data_pack), the batched
** elementwise product -- a batch_matmul over the alpha x alpha tile
** positions (bgemm) --, the output transform (inverse) and the output
** (conv2d_winograd). The constant matrices enter the bodies as select
** chains over their indices, as TVM's const_matrix. FLOPs: the output op
** records "FLOP" = 2*N*K*OH*OW*C*9 (the direct convolution's count) in its
** attrs and the other stages (the pad stage included) "FLOP": 0, which
** tl_dag_flop and tl_dag_flop_ansor honour.
*/
#include "topi.h"

#include <stdio.h>

#define WG_MAXA 8

static double wg_point(int i) {
  /* 0, 1, -1, 2, -2, 1/2, -1/2, 3, -3, 1/3, -1/3, ... */
  if (i == 0) return 0;
  int k = (i - 1) / 2, sign = (i - 1) % 2 ? -1 : 1;
  static const double mags[] = {1, 2, 0.5, 3, 1.0 / 3, 4, 0.25};
  return sign * mags[k];
}

int tl_topi_winograd_matrices(int m, int r, double *AT, double *G, double *BT) {
  int a = m + r - 1;
  if (m < 1 || r < 1 || a > WG_MAXA || a < 2) return -1;
  double p[WG_MAXA];
  for (int j = 0; j < a - 1; j++) p[j] = wg_point(j);
  for (int i = 0; i < m; i++)
    for (int j = 0; j < a; j++) {
      double v = 1;
      if (j < a - 1) for (int e = 0; e < i; e++) v *= p[j];
      else v = i == m - 1;
      AT[i * a + j] = v;
    }
  for (int j = 0; j < a; j++) {
    double N = 1;
    if (j < a - 1)
      for (int l = 0; l < a - 1; l++)
        if (l != j) N *= p[j] - p[l];
    for (int k = 0; k < r; k++) {
      double v = 1;
      if (j < a - 1) {
        for (int e = 0; e < k; e++) v *= p[j];
        v /= N;
      } else {
        v = k == r - 1;
      }
      G[j * r + k] = v;
    }
    /* coefficients of M_j (j < a-1) or M (j = a-1): multiply out (x - p_l) */
    double coef[WG_MAXA + 1] = {1};
    int deg = 0;
    for (int l = 0; l < a - 1; l++) {
      if (l == j) continue;
      for (int e = deg + 1; e >= 1; e--) coef[e] = coef[e - 1] - p[l] * coef[e];
      coef[0] = -p[l] * coef[0];
      deg++;
    }
    for (int n = 0; n < a; n++) BT[j * a + n] = n <= deg ? coef[n] : 0;
  }
  return 0;
}

int tl_topi_winograd_passes(int m, double *B, double *A) {
  double AT[WG_MAXA * WG_MAXA], G[WG_MAXA * 3], BT[WG_MAXA * WG_MAXA];
  if (m < 1 || m + 2 > WG_MAXA || tl_topi_winograd_matrices(m, 3, AT, G, BT)) return -1;
  int a = m + 2;
  for (int i = 0; i < a; i++)
    for (int j = 0; j < a; j++) B[i * a + j] = BT[j * a + i];
  for (int i = 0; i < a; i++)
    for (int v = 0; v < m; v++) A[i * m + v] = AT[v * a + i];
  return 0;
}

/* mat[i][j] as an expression of INDEX i and j: a select chain. */
static tl_ref const_matrix(tl_dag *dag, const double *mat, int rows, int cols, tl_ref i, tl_ref j,
                           tl_type t) {
  tl_ir *ir = dag->ir;
  tl_ref v = tl_topi_const(dag, t, 0);
  for (int a = 0; a < rows; a++)
    for (int b = 0; b < cols; b++) {
      double x = mat[a * cols + b];
      if (x == 0) continue;
      tl_ref cond = tl_and(ir, tl_binary(ir, TL_IR_EQ, i, tl_int(ir, a)),
                           tl_binary(ir, TL_IR_EQ, j, tl_int(ir, b)));
      v = tl_select(ir, cond, tl_topi_const(dag, t, x), v);
    }
  return v;
}

static int tile_attr(tl_topi_call *c, int64_t *m) {
  int rc = tl_topi_get_int(c, "tile_size", 4, m);
  if (rc) return rc;
  if (*m != 2 && *m != 4 && *m != 6)
    return tl_err(c->ctx, TL_E_ARG, "%s: tile_size must be 2, 4 or 6, got %lld", c->op, (long long)*m);
  return TL_OK;
}

static json_t *flop_attrs(int64_t m, double flop) {
  json_t *aj = json_object();
  json_object_set_new(aj, "tile_size", json_integer(m));
  json_object_set_new(aj, "FLOP", json_real(flop));
  return aj;
}

int tl_topi_zero_flop(tl_topi_call *c, int t) {
  int op = c->dag->tensors.v[t].op;
  const char *txt = c->dag->ops.v[op].attrs_json;
  json_t *j = txt ? json_loads(txt, 0, NULL) : NULL;
  if (!j) j = json_object();
  json_object_set_new(j, "FLOP", json_real(0));
  char *out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(j);
  int rc = tl_te_set_attrs(c->ctx, c->dag, op, out);
  free(out);
  return rc;
}

/* U[eps, nu, co, ci] = sum_{kh, kw} k[co, ci, kh, kw] * G[eps][kh] * G[nu][kw] */
static int weight_transform(tl_topi_call *c, int kernel, int64_t m, int *out) {
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  char b[160];
  if (tl_topi_ndim(dag, kernel) != 4 || tl_topi_shape(dag, kernel)[2] != 3 ||
      tl_topi_shape(dag, kernel)[3] != 3)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: kernel must be [O, C, 3, 3], got %s", c->op,
                  tl_topi_shape_str(dag, kernel, b));
  tl_type dt = tl_topi_dtype(dag, kernel);
  if (!tl_type_is_float(dt)) return tl_err(c->ctx, TL_E_DTYPE, "%s: needs a float kernel", c->op);
  const int64_t *ks = tl_topi_shape(dag, kernel);
  int a = (int)m + 2;
  double AT[WG_MAXA * WG_MAXA], G[WG_MAXA * 3], BT[WG_MAXA * WG_MAXA];
  tl_topi_winograd_matrices((int)m, 3, AT, G, BT);
  int64_t shape[4] = {a, a, ks[0], ks[1]};
  static const char *const names[4] = {"eps", "nu", "co", "ci"};
  tl_ref ax[4];
  tl_te_axis_vars(dag, 4, names, ax);
  tl_ref rh = tl_te_reduce_axis(dag, "r_kh", 3), rw = tl_te_reduce_axis(dag, "r_kw", 3);
  tl_ref ki[4] = {ax[2], ax[3], rh, rw};
  tl_ref v = tl_mul(ir, tl_mul(ir, tl_te_load(dag, kernel, ki, 4), const_matrix(dag, G, a, 3, ax[0], rh, dt)),
                    const_matrix(dag, G, a, 3, ax[1], rw, dt));
  tl_ref rv[2] = {rh, rw};
  json_t *aj = flop_attrs(m, 0);
  int rc = tl_topi_emit(c, "kernel_pack", "winograd_kernel_pack", "out_elemwise_fusable", 4, shape,
                        ax, v, TL_RED_SUM, rv, 2, 0, aj, out);
  json_decref(aj);
  return rc;
}

int tl_topi_winograd_weight_transform(tl_topi_call *c) {
  int rc, out;
  int64_t m;
  if ((rc = tl_topi_nin(c, 1, 1)) || (rc = tile_attr(c, &m))) return rc;
  if ((rc = weight_transform(c, c->in[0], m, &out))) return rc;
  return tl_topi_push_out(c, out);
}

int tl_topi_conv2d_winograd(tl_topi_call *c) {
  int rc;
  int64_t m, pre, st[2], dil[2], groups, p[4];
  static const int64_t one2[2] = {1, 1};
  if ((rc = tl_topi_nin(c, 2, 2)) || (rc = tile_attr(c, &m)) ||
      (rc = tl_topi_get_int(c, "pre_transformed", 0, &pre)) ||
      (rc = tl_topi_get_ints(c, "strides", 2, one2, st, NULL)) ||
      (rc = tl_topi_get_ints(c, "dilation", 2, one2, dil, NULL)) ||
      (rc = tl_topi_get_int(c, "groups", 1, &groups)) ||
      (rc = tl_topi_get_padding(c, p)))
    return rc;
  for (int i = 0; i < 4; i++)
    if (p[i] < 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: padding must be non-negative, got (%lld, %lld, %lld, %lld)",
                    c->op, (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
  if (st[0] != 1 || st[1] != 1)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: only stride 1 is supported, got (%lld, %lld)", c->op,
                  (long long)st[0], (long long)st[1]);
  if (dil[0] != 1 || dil[1] != 1)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: only dilation 1 is supported, got (%lld, %lld)", c->op,
                  (long long)dil[0], (long long)dil[1]);
  if (groups != 1)
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: only groups=1 is supported, got %lld", c->op,
                  (long long)groups);
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int data = c->in[0], kernel = c->in[1];
  char b1[160], b2[160];
  if (tl_topi_ndim(dag, data) != 4)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: data must be 4-D, got shape %s", c->op,
                  tl_topi_shape_str(dag, data, b1));
  tl_type dt = tl_topi_dtype(dag, data);
  if (!tl_type_is_float(dt) || !tl_type_eq(dt, tl_topi_dtype(dag, kernel)))
    return tl_err(c->ctx, TL_E_DTYPE, "%s: needs float data and kernel of one dtype", c->op);
  const int64_t *ds = tl_topi_shape(dag, data);
  int64_t N = ds[0], C = ds[1], H = ds[2], W = ds[3];
  int a = (int)m + 2;
  int U;
  int64_t K;
  if (pre) {
    const int64_t *us = tl_topi_shape(dag, kernel);
    if (tl_topi_ndim(dag, kernel) != 4 || us[0] != a || us[1] != a || us[3] != C)
      return tl_err(c->ctx, TL_E_SHAPE,
                    "%s: pre-transformed kernel must be [%d, %d, K, %lld] for data %s, got %s", c->op,
                    a, a, (long long)C, tl_topi_shape_str(dag, data, b1),
                    tl_topi_shape_str(dag, kernel, b2));
    U = kernel;
    K = us[2];
  } else {
    const int64_t *ks = tl_topi_shape(dag, kernel);
    if (tl_topi_ndim(dag, kernel) == 4 && ks[1] != C)
      return tl_err(c->ctx, TL_E_SHAPE,
                    "%s: channel mismatch: data has %lld channels (groups=1) but kernel expects %lld",
                    c->op, (long long)C, (long long)ks[1]);
    if ((rc = weight_transform(c, kernel, m, &U))) return rc;
    K = ks[0];
  }
  int64_t HP = H + p[0] + p[2], WP = W + p[1] + p[3];
  if (HP < 3 || WP < 3)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: kernel 3x3 (dilated 3x3) is larger than the padded input %lldx%lld", c->op,
                  (long long)HP, (long long)WP);
  int64_t OH = HP - 2, OW = WP - 2, nH = (OH + m - 1) / m, nW = (OW + m - 1) / m, P = N * nH * nW;
  double AT[WG_MAXA * WG_MAXA], G[WG_MAXA * 3], BT[WG_MAXA * WG_MAXA];
  tl_topi_winograd_matrices((int)m, 3, AT, G, BT);
  /* B[a][e] = BT[e][a], A[a][v] = AT[v][a] */
  double B[WG_MAXA * WG_MAXA], A[WG_MAXA * WG_MAXA];
  for (int i = 0; i < a; i++)
    for (int j = 0; j < a; j++) B[i * a + j] = BT[j * a + i];
  for (int i = 0; i < a; i++)
    for (int v = 0; v < m; v++) A[i * m + v] = AT[v * a + i];
  int64_t before[4] = {0, 0, p[0], p[1]};
  int64_t pshape[4] = {N, C, TL_MAX(nH * m + 2, H + p[0]), TL_MAX(nW * m + 2, W + p[1])};
  int pad;
  if ((rc = tl_topi_pad_stage(c, data, before, pshape, 0, "data_pad", &pad))) return rc;
  if (pad != data && (rc = tl_topi_zero_flop(c, pad))) return rc;
  json_t *aj0 = flop_attrs(m, 0);
  /* input tiles d[ci, p, eps, nu] */
  int tile;
  {
    static const char *const names[4] = {"c", "p", "eps", "nu"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref nn = tl_floordiv(ir, ax[1], tl_int(ir, nH * nW));
    tl_ref hh = tl_floormod(ir, tl_floordiv(ir, ax[1], tl_int(ir, nW)), tl_int(ir, nH));
    tl_ref ww = tl_floormod(ir, ax[1], tl_int(ir, nW));
    tl_ref pi[4] = {nn, ax[0], tl_add(ir, tl_mul(ir, hh, tl_int(ir, m)), ax[2]),
                    tl_add(ir, tl_mul(ir, ww, tl_int(ir, m)), ax[3])};
    int64_t shape[4] = {C, P, a, a};
    if ((rc = tl_topi_emit(c, "input_tile", "injective", "injective", 4, shape, ax,
                           tl_te_load(dag, pad, pi, 4), TL_RED_NONE, NULL, 0, 0, aj0, &tile)))
      goto done;
  }
  /* V[eps, nu, ci, p] = sum d[ci, p, ra, rb] * B[ra][eps] * B[rb][nu] */
  int V;
  {
    static const char *const names[4] = {"eps", "nu", "ci", "p"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref ra = tl_te_reduce_axis(dag, "r_a", a), rb = tl_te_reduce_axis(dag, "r_b", a);
    tl_ref ti[4] = {ax[2], ax[3], ra, rb};
    tl_ref v = tl_mul(ir, tl_mul(ir, tl_te_load(dag, tile, ti, 4), const_matrix(dag, B, a, a, ra, ax[0], dt)),
                      const_matrix(dag, B, a, a, rb, ax[1], dt));
    int64_t shape[4] = {a, a, C, P};
    tl_ref rv[2] = {ra, rb};
    if ((rc = tl_topi_emit(c, "data_pack", "winograd_data_pack", "out_elemwise_fusable", 4, shape,
                           ax, v, TL_RED_SUM, rv, 2, 0, aj0, &V)))
      goto done;
  }
  /* M[eps, nu, co, p] = sum_ci U[eps, nu, co, ci] * V[eps, nu, ci, p] */
  int Mt;
  {
    static const char *const names[4] = {"eps", "nu", "co", "p"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref ci = tl_te_reduce_axis(dag, "ci", C);
    tl_ref ui[4] = {ax[0], ax[1], ax[2], ci}, vi[4] = {ax[0], ax[1], ci, ax[3]};
    int64_t shape[4] = {a, a, K, P};
    if ((rc = tl_topi_emit(c, "bgemm", "batch_matmul", "out_elemwise_fusable", 4, shape, ax,
                           tl_mul(ir, tl_te_load(dag, U, ui, 4), tl_te_load(dag, V, vi, 4)),
                           TL_RED_SUM, &ci, 1, 0, aj0, &Mt)))
      goto done;
  }
  /* Y[co, p, vh, vw] = sum M[ra, rb, co, p] * A[ra][vh] * A[rb][vw] */
  int Y;
  {
    static const char *const names[4] = {"co", "p", "vh", "vw"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref ra = tl_te_reduce_axis(dag, "r_a", a), rb = tl_te_reduce_axis(dag, "r_b", a);
    tl_ref mi[4] = {ra, rb, ax[0], ax[1]};
    tl_ref v = tl_mul(ir, tl_mul(ir, tl_te_load(dag, Mt, mi, 4), const_matrix(dag, A, a, (int)m, ra, ax[2], dt)),
                      const_matrix(dag, A, a, (int)m, rb, ax[3], dt));
    int64_t shape[4] = {K, P, m, m};
    tl_ref rv[2] = {ra, rb};
    if ((rc = tl_topi_emit(c, "inverse", "winograd_inverse", "out_elemwise_fusable", 4, shape, ax,
                           v, TL_RED_SUM, rv, 2, 0, aj0, &Y)))
      goto done;
  }
  {
    static const char *const names[4] = {"n", "k", "h", "w"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref mm = tl_int(ir, m);
    tl_ref pp = tl_add(ir, tl_add(ir, tl_mul(ir, ax[0], tl_int(ir, nH * nW)),
                                  tl_mul(ir, tl_floordiv(ir, ax[2], mm), tl_int(ir, nW))),
                       tl_floordiv(ir, ax[3], mm));
    tl_ref yi[4] = {ax[1], pp, tl_floormod(ir, ax[2], mm), tl_floormod(ir, ax[3], mm)};
    int64_t shape[4] = {N, K, OH, OW};
    json_t *aj = flop_attrs(m, 2.0 * (double)N * (double)K * (double)OH * (double)OW * (double)C * 9.0);
    json_t *ja = json_array();
    for (int i = 0; i < 4; i++) json_array_append_new(ja, json_integer(p[i]));
    json_object_set_new(aj, "padding", ja);
    json_object_set_new(aj, "layout", json_string("NCHW"));
    int out;
    rc = tl_topi_emit(c, "conv2d_winograd", "conv2d_nchw_winograd", "out_elemwise_fusable", 4,
                      shape, ax, tl_te_load(dag, Y, yi, 4), TL_RED_NONE, NULL, 0, 0, aj, &out);
    json_decref(aj);
    if (rc == TL_OK) rc = tl_topi_push_out(c, out);
  }
done:
  json_decref(aj0);
  return rc;
}
