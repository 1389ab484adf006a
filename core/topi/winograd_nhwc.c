/*
** winograd_nhwc.c -- Winograd F(m x m, 3 x 3) on NHWC (stride 1, dilation 1,
** groups 1, float), the compute the auto-scheduler searches for such convs of
** a network (lua/tunelua/auto_scheduler/winograd.lua).
**
**   conv2d_winograd_nhwc {padding, out_dtype}:
**       data [N, H, W, CI] (NHWC),
**       kernel U [a, a, CI, CO], the weight transformed once
**       (tl_topi_winograd_nhwc_weight; a = m + 2, so the kernel's shape
**       tells m: 4, 6 or 8 for m = 2, 4, 6)
**       -> [N, OH, OW, CO] (NHWC).
**
** Stages (P = N * nH * nW output tiles of m x m, numbered n, tile row, tile
** column; channels innermost everywhere, so a stage's inner loop is a vector
** of channels):
**   data_pad   [N, nH*m+2 (or more), nW*m+2 (or more), CI] the zero-padded
**              input (only where the padding or the last tiles need it)
**   data_pack_rows T[e, rb, P, CI] = (BT d)[e, rb] of tile p's a x a window
**              of data_pad (the input tiles, read in place), then
**   data_pack  V[e, u, P, CI] = (T B)[e, u]
**   bgemm      M[e, u, P, CO] = sum_ci V[e, u, p, ci] * U[e, u, ci, co] (a
**              batched GEMM over the a x a tile positions, the one reduction)
**   inverse_rows R[vh, rb, P, CO] = (AT M)[vh, rb], then
**   conv2d_winograd_nhwc  Y[n, h, w, co] = (R A)[h % m, w % m] of tile
**              (n, h / m, w / m) (the fused bias / add / relu go after it)
** Each transform pass is element-wise: for each position of its output along
** the transformed axis, a sum of the matrix's non-zero terms only
** (tl_topi_wg_position_sum), so the search schedules it as a loop nest
** (never inlined into the GEMM: its select makes it a branch) and a position
** loop that is unrolled leaves one short sum per element. FLOPs: the output
** op records "FLOP" = the direct convolution's 2*N*CO*OH*OW*CI*9, every other
** stage "FLOP": 0 (as conv2d_winograd).
*/
#include "topi.h"

#include <stdio.h>

#define WGN_MAX 8

static json_t *flop_json(double flop) {
  json_t *j = json_object();
  json_object_set_new(j, "FLOP", json_real(flop));
  return j;
}

/* Emit a transform pass: no FLOPs, and its first two axes (names[0], names[1])
** named as those that select the constant matrix's entries (the
** auto-scheduler's simplify-const-tensor rule unrolls them). */
static int emit_transform(tl_topi_call *c, const char *name, const char *tag, const int64_t *shape,
                          const char *const *names, const tl_ref *ax, tl_ref body, int *out) {
  json_t *at = flop_json(0);
  json_object_set_new(at, "simplify_const_tensor_indices", json_pack("[ss]", names[0], names[1]));
  int rc = tl_topi_emit(c, name, tag, "injective", 4, shape, ax, body, TL_RED_NONE, NULL, 0, 0, at, out);
  json_decref(at);
  return rc;
}

int tl_topi_conv2d_winograd_nhwc(tl_topi_call *c) {
  int rc;
  int64_t p[4];
  tl_type dt;
  if ((rc = tl_topi_wg_check(c, 4, "data must be 4-D NHWC and kernel the 4-D transformed weight [a, a, CI, CO]",
                             p, &dt)))
    return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int data = c->in[0], kernel = c->in[1];
  char b1[160], b2[160];
  const int64_t *ds = tl_topi_shape(dag, data), *us = tl_topi_shape(dag, kernel);
  int64_t N = ds[0], H = ds[1], W = ds[2], CI = ds[3];
  int a = (int)us[0];
  int64_t m = a - 2, CO = us[3];
  if ((a != 4 && a != 6 && a != 8) || us[1] != a || us[2] != CI)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: kernel must be [a, a, %lld, CO] with a = 4, 6 or 8 (tile 2, 4, 6) for data %s, got %s",
                  c->op, (long long)CI, tl_topi_shape_str(dag, data, b1), tl_topi_shape_str(dag, kernel, b2));
  int64_t HP = H + p[0] + p[2], WP = W + p[1] + p[3];
  if (HP < 3 || WP < 3)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: kernel 3x3 is larger than the padded input %lldx%lld", c->op,
                  (long long)HP, (long long)WP);
  int64_t OH = HP - 2, OW = WP - 2, nH = (OH + m - 1) / m, nW = (OW + m - 1) / m, P = N * nH * nW;
  double B[WGN_MAX * WGN_MAX], A[WGN_MAX * WGN_MAX];   /* B[ra][e] = BT[e][ra], A[ra][v] = AT[v][ra] */
  if (tl_topi_winograd_passes((int)m, B, A))
    return tl_err(c->ctx, TL_E_ARG, "%s: tile %lld is not supported", c->op, (long long)m);
  int64_t before[4] = {0, p[0], p[1], 0};
  int64_t pshape[4] = {N, TL_MAX(nH * m + 2, H + p[0]), TL_MAX(nW * m + 2, W + p[1]), CI};
  int pad;
  if ((rc = tl_topi_pad_stage(c, data, before, pshape, 0, "data_pad", &pad))) return rc;
  json_t *z = flop_json(0);
  if (pad != data && (rc = tl_topi_zero_flop(c, pad))) goto done;
  /* T[e, rb, p, ci] = sum_ra B[ra][e] d[th*m + ra, tw*m + rb] */
  int T;
  {
    static const char *const names[4] = {"eps", "r_b", "p", "ci"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref n = tl_floordiv(ir, ax[2], tl_int(ir, nH * nW));
    tl_ref th = tl_floormod(ir, tl_floordiv(ir, ax[2], tl_int(ir, nW)), tl_int(ir, nH));
    tl_ref tw = tl_floormod(ir, ax[2], tl_int(ir, nW));
    tl_topi_wg_load lc = {dag, pad, 4, 1, {n, 0, tl_add(ir, tl_mul(ir, tw, tl_int(ir, m)), ax[1]), ax[3]},
                          tl_mul(ir, th, tl_int(ir, m))};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, ax[0], a, B, a, &lc);
    int64_t shape[4] = {a, a, P, CI};
    if ((rc = emit_transform(c, "data_pack_rows", "winograd_nhwc_rows", shape, names, ax, body, &T))) goto done;
  }
  /* V[e, u, p, ci] = sum_rb B[rb][u] T[e, rb, p, ci] */
  int V;
  {
    static const char *const names[4] = {"eps", "nu", "p", "ci"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_topi_wg_load lc = {dag, T, 4, 1, {ax[0], 0, ax[2], ax[3]}, 0};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, ax[1], a, B, a, &lc);
    int64_t shape[4] = {a, a, P, CI};
    if ((rc = emit_transform(c, "data_pack", "winograd_nhwc_data_pack", shape, names, ax, body, &V))) goto done;
  }
  /* M[e, u, p, co] = sum_ci V[e, u, p, ci] * U[e, u, ci, co] */
  int M;
  {
    static const char *const names[4] = {"eps", "nu", "p", "co"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref ci = tl_te_reduce_axis(dag, "ci", CI);
    tl_ref vi[4] = {ax[0], ax[1], ax[2], ci}, ui[4] = {ax[0], ax[1], ci, ax[3]};
    int64_t shape[4] = {a, a, P, CO};
    if ((rc = tl_topi_emit(c, "bgemm", "winograd_nhwc_bgemm", "out_elemwise_fusable", 4, shape, ax,
                           tl_mul(ir, tl_te_load(dag, V, vi, 4), tl_te_load(dag, kernel, ui, 4)), TL_RED_SUM,
                           &ci, 1, 0, z, &M)))
      goto done;
  }
  /* R[vh, rb, p, co] = sum_ra A[ra][vh] M[ra, rb, p, co] */
  int R;
  {
    static const char *const names[4] = {"vh", "r_b", "p", "co"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_topi_wg_load lc = {dag, M, 4, 0, {0, ax[1], ax[2], ax[3]}, 0};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, ax[0], (int)m, A, a, &lc);
    int64_t shape[4] = {m, a, P, CO};
    if ((rc = emit_transform(c, "inverse_rows", "winograd_nhwc_inverse", shape, names, ax, body, &R))) goto done;
  }
  /* Y[n, h, w, co] = sum_rb A[rb][w % m] R[h % m, rb, p(n, h / m, w / m), co] */
  {
    static const char *const names[4] = {"n", "h", "w", "co"};
    tl_ref ax[4];
    tl_te_axis_vars(dag, 4, names, ax);
    tl_ref mm = tl_int(ir, m);
    tl_ref pp = tl_add(ir, tl_add(ir, tl_mul(ir, ax[0], tl_int(ir, nH * nW)),
                                  tl_mul(ir, tl_floordiv(ir, ax[1], mm), tl_int(ir, nW))),
                       tl_floordiv(ir, ax[2], mm));
    tl_topi_wg_load lc = {dag, R, 4, 1, {tl_floormod(ir, ax[1], mm), 0, pp, ax[3]}, 0};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, tl_floormod(ir, ax[2], mm), (int)m, A, a, &lc);
    int64_t shape[4] = {N, OH, OW, CO};
    json_t *aj = flop_json(2.0 * (double)N * (double)CO * (double)OH * (double)OW * (double)CI * 9.0);
    json_t *ja = json_array();
    for (int i = 0; i < 4; i++) json_array_append_new(ja, json_integer(p[i]));
    json_object_set_new(aj, "padding", ja);
    json_object_set_new(aj, "tile_size", json_integer(m));
    json_object_set_new(aj, "layout", json_string("NHWC"));
    int out;
    rc = tl_topi_emit(c, "conv2d_winograd_nhwc", "conv2d_winograd_nhwc", "out_elemwise_fusable", 4, shape, ax,
                      body, TL_RED_NONE, NULL, 0, 0, aj, &out);
    json_decref(aj);
    if (rc == TL_OK) rc = tl_topi_push_out(c, out);
  }
done:
  json_decref(z);
  return rc;
}

TL_EXPORT int tl_topi_winograd_nhwc_weight(tl_ctx *ctx, int m, int64_t CI, int64_t CO, const float *src,
                                           float *dst) {
  double AT[WGN_MAX * WGN_MAX], G[WGN_MAX * 3], BT[WGN_MAX * WGN_MAX];
  if ((m != 2 && m != 4 && m != 6) || tl_topi_winograd_matrices(m, 3, AT, G, BT))
    return tl_err(ctx, TL_E_ARG, "winograd nhwc weight: tile size must be 2, 4 or 6, got %d", m);
  if (CI < 1 || CO < 1)
    return tl_err(ctx, TL_E_ARG, "winograd nhwc weight: channels must be positive, got CI = %lld, CO = %lld",
                  (long long)CI, (long long)CO);
  if (!src || !dst) return tl_err(ctx, TL_E_ARG, "winograd nhwc weight: NULL array");
  int a = m + 2;
  for (int64_t ci = 0; ci < CI; ci++)
    for (int64_t co = 0; co < CO; co++) {
      /* g[kh][kw] of the HWIO source [3, 3, CI, CO] */
      double t[WGN_MAX][3];
      for (int e = 0; e < a; e++)
        for (int kw = 0; kw < 3; kw++) {
          double s = 0;
          for (int kh = 0; kh < 3; kh++) s += G[e * 3 + kh] * src[((kh * 3 + kw) * CI + ci) * CO + co];
          t[e][kw] = s;
        }
      for (int e = 0; e < a; e++)
        for (int u = 0; u < a; u++) {
          double s = 0;
          for (int kw = 0; kw < 3; kw++) s += t[e][kw] * G[u * 3 + kw];
          dst[(((int64_t)e * a + u) * CI + ci) * CO + co] = (float)s;
        }
    }
  return TL_OK;
}
