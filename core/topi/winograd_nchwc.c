/*
** winograd_nchwc.c -- Winograd F(m x m, 3 x 3) on the channel-blocked layout
** NCHW[x]c (stride 1, dilation 1, float).
**
**   conv2d_NCHWc_winograd {padding, out_dtype}:
**       data [N, C/ib, H, W, ib] (NCHW[ib]c),
**       kernel U [a, a, K/ob, C, ob], the weight transformed once
**       (tl_topi_winograd_nchwc_weight; a = m + 2, so the kernel's shape
**       tells m: 4, 6 or 8 for m = 2, 4, 6)
**       -> [N, K/ob, OH, OW, ob] (NCHW[ob]c).
**
** Stages (P = N * nH * nW output tiles of m x m; nW rounded up to a multiple of 8
** where it has no divisor from 4 to 16):
**   data_pad   [N, C/ib, nH*m+2 (or more), nW*m+2, ib]   zero-padded input (a
**              schedule may inline it: guarded loads of the unpadded input)
**   data_pack_rows T[e, rb, C/ib, P, ib] = (BT d)[e, rb] of the tile's a x a
**              window, then
**   data_pack  V[e, u, C/ib, P, ib] = (T B)[e, u] (channel block innermost:
**              one vector per (e, u))
**   bgemm      M[e, u, K/ob, P, ob] = sum_c U[e, u, k, c, :] * V[e, u, c, p]
**              (a batched GEMM over the a*a tile positions: the FMA
**              micro-kernel of the direct conv, a block of ob output
**              channels as the vector, one broadcast V element per row)
**   inverse_rows R[K/ob, P, m, a, ob] = (AT M)[vh, rb], then
**   conv2d_NCHWc_winograd  Y[n, k, h, w, :] = (R A)[h % m, w % m] of tile
**              (n, h / m, w / m)   (injective: the fused bias / add / relu go
**              after it, on the output's own shape)
** Each transform pass is injective: for each position of its output along
** the transformed axis, a sum over the other with the matrix's non-zero
** entries only (no multiply for +-1), selected by the position; a schedule
** that unrolls the position loop leaves one short sum per element. FLOPs: the
** output op records "FLOP" = the direct convolution's 2*N*K*OH*OW*C*9, the
** other stages "FLOP": 0 (as conv2d_winograd).
*/
#include "topi.h"

#include <stdio.h>

#define WGA_MAX 8

static json_t *flop_json(double flop) {
  json_t *j = json_object();
  json_object_set_new(j, "FLOP", json_real(flop));
  return j;
}

/* tl_topi_wg_position_sum (topi.h) */
typedef tl_topi_wg_load load_ctx;

static tl_ref load_at(load_ctx *lc, int i) {
  tl_ir *ir = lc->dag->ir;
  tl_ref idx[8];
  memcpy(idx, lc->idx, sizeof idx);
  idx[lc->si] = lc->base ? tl_add(ir, lc->base, tl_int(ir, i)) : tl_int(ir, i);
  return tl_te_load(lc->dag, lc->buf, idx, lc->ndim);
}

tl_ref tl_topi_wg_position_sum(tl_dag *dag, tl_type t, tl_ref q, int nq, const double *L, int ni,
                               tl_topi_wg_load *lc) {
  tl_ir *ir = dag->ir;
  tl_ref v = 0;
  for (int b = nq - 1; b >= 0; b--) {
    tl_ref acc = 0;
    for (int i = 0; i < ni; i++) {
      double c = L[i * nq + b];
      if (c == 0) continue;
      tl_ref x = load_at(lc, i);
      if (c == 1 || c == -1) {
        if (!acc) acc = c == 1 ? x : tl_sub(ir, tl_topi_const(dag, t, 0), x);
        else acc = c == 1 ? tl_add(ir, acc, x) : tl_sub(ir, acc, x);
      } else {
        tl_ref term = tl_mul(ir, x, tl_topi_const(dag, t, c));
        acc = acc ? tl_add(ir, acc, term) : term;
      }
    }
    if (!acc) acc = tl_topi_const(dag, t, 0);
    v = v ? tl_select(ir, tl_binary(ir, TL_IR_EQ, q, tl_int(ir, b)), acc, v) : acc;
  }
  return v;
}

int tl_topi_wg_check(tl_topi_call *c, int ndim, const char *expect, int64_t p[4], tl_type *dt) {
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2)) || (rc = tl_topi_get_padding(c, p))) return rc;
  for (int i = 0; i < 4; i++)
    if (p[i] < 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: padding must be non-negative, got (%lld, %lld, %lld, %lld)", c->op,
                    (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3]);
  tl_dag *dag = c->dag;
  int data = c->in[0], kernel = c->in[1];
  char b1[160], b2[160];
  if (tl_topi_ndim(dag, data) != ndim || tl_topi_ndim(dag, kernel) != ndim)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: %s, got data %s and kernel %s", c->op, expect,
                  tl_topi_shape_str(dag, data, b1), tl_topi_shape_str(dag, kernel, b2));
  *dt = tl_topi_dtype(dag, data);
  if (!tl_type_is_float(*dt) || !tl_type_eq(*dt, tl_topi_dtype(dag, kernel)))
    return tl_err(c->ctx, TL_E_DTYPE, "%s: needs float data and kernel of one dtype", c->op);
  tl_type odt;
  if ((rc = tl_topi_get_dtype(c, "out_dtype", *dt, &odt))) return rc;
  if (!tl_type_eq(odt, *dt)) return tl_err(c->ctx, TL_E_DTYPE, "%s: out_dtype must be the data's dtype", c->op);
  return TL_OK;
}

int tl_topi_conv2d_nchwc_winograd(tl_topi_call *c) {
  int rc;
  int64_t p[4];
  tl_type dt;
  if ((rc = tl_topi_wg_check(c, 5, "data must be 5-D NCHW[x]c and kernel the 5-D transformed weight "
                             "[a, a, K/ob, C, ob]", p, &dt)))
    return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int data = c->in[0], kernel = c->in[1];
  char b1[160], b2[160];
  const int64_t *ds = tl_topi_shape(dag, data), *us = tl_topi_shape(dag, kernel);
  int64_t N = ds[0], C1 = ds[1], H = ds[2], W = ds[3], ib = ds[4], C = C1 * ib;
  int a = (int)us[0];
  int64_t m = a - 2, K1 = us[2], ob = us[4];
  if ((a != 4 && a != 6 && a != 8) || us[1] != a || us[3] != C)
    return tl_err(c->ctx, TL_E_SHAPE,
                  "%s: kernel must be [a, a, K/ob, %lld, ob] with a = 4, 6 or 8 (tile 2, 4, 6) for data %s, got %s",
                  c->op, (long long)C, tl_topi_shape_str(dag, data, b1), tl_topi_shape_str(dag, kernel, b2));
  int64_t HP = H + p[0] + p[2], WP = W + p[1] + p[3];
  if (HP < 3 || WP < 3)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: kernel 3x3 is larger than the padded input %lldx%lld", c->op,
                  (long long)HP, (long long)WP);
  int64_t OH = HP - 2, OW = WP - 2, nH = (OH + m - 1) / m, nW = (OW + m - 1) / m;
  /* a row of tiles with no divisor from 4 to 16 (37: 147 wide with m = 4) gets padding tiles
  ** up to a multiple of 8, computed on zeros and never read back, so that a schedule can
  ** keep several GEMM rows in registers without a guard (inception's 32 -> 64 conv on
  ** 147x147: 3.5 -> 1.9 ms, AVX-512, 1 thread) */
  if (nW > 16) {
    int64_t d = 1;
    for (int64_t k = 16; k >= 1; k--)
      if (nW % k == 0) { d = k; break; }
    if (d < 4) nW = (nW + 7) / 8 * 8;
  }
  int64_t P = N * nH * nW;
  /* B[ra][e] = BT[e][ra]: V[e][u] = sum_{ra,rb} B[ra][e] B[rb][u] d[ra][rb];
  ** A[ra][v] = AT[v][ra]: Y[vh][vw] = sum A[ra][vh] A[rb][vw] M[ra][rb] */
  double B[WGA_MAX * WGA_MAX], A[WGA_MAX * WGA_MAX];
  if (tl_topi_winograd_passes((int)m, B, A))
    return tl_err(c->ctx, TL_E_ARG, "%s: tile %lld is not supported", c->op, (long long)m);
  int64_t before[5] = {0, 0, p[0], p[1], 0};
  int64_t pshape[5] = {N, C1, TL_MAX(nH * m + 2, H + p[0]), TL_MAX(nW * m + 2, W + p[1]), ib};
  int pad;
  if ((rc = tl_topi_pad_stage(c, data, before, pshape, 0, "data_pad", &pad))) return rc;
  json_t *z = flop_json(0);
  if (pad != data && (rc = tl_topi_zero_flop(c, pad))) goto done;
  /* the input transform in two passes, each a sum over one axis of the tile:
  ** T[e, rb, c1, p, ci] = sum_ra B[ra][e] d[ra][rb],  V[e, u, c1, p, ci] = sum_rb B[rb][u] T[e, rb] */
  int T, V;
  {
    static const char *const names[5] = {"eps", "r_b", "c_chunk", "p", "c_block"};
    tl_ref ax[5];
    tl_te_axis_vars(dag, 5, names, ax);
    tl_ref n = tl_floordiv(ir, ax[3], tl_int(ir, nH * nW));
    tl_ref th = tl_floormod(ir, tl_floordiv(ir, ax[3], tl_int(ir, nW)), tl_int(ir, nH));
    tl_ref tw = tl_floormod(ir, ax[3], tl_int(ir, nW));
    load_ctx lc = {dag, pad, 5, 2, {n, ax[2], 0, tl_add(ir, tl_mul(ir, tw, tl_int(ir, m)), ax[1]), ax[4]},
                   tl_mul(ir, th, tl_int(ir, m))};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, ax[0], a, B, a, &lc);
    int64_t shape[5] = {a, a, C1, P, ib};
    if ((rc = tl_topi_emit(c, "data_pack_rows", "winograd_nchwc_rows", "injective", 5, shape, ax, body,
                           TL_RED_NONE, NULL, 0, 0, z, &T)))
      goto done;
  }
  {
    static const char *const names[5] = {"eps", "nu", "c_chunk", "p", "c_block"};
    tl_ref ax[5];
    tl_te_axis_vars(dag, 5, names, ax);
    load_ctx lc = {dag, T, 5, 1, {ax[0], 0, ax[2], ax[3], ax[4]}, 0};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, ax[1], a, B, a, &lc);
    int64_t shape[5] = {a, a, C1, P, ib};
    if ((rc = tl_topi_emit(c, "data_pack", "winograd_nchwc_data_pack", "injective", 5, shape, ax, body,
                           TL_RED_NONE, NULL, 0, 0, z, &V)))
      goto done;
  }
  /* M[e, u, k1, p, ko] = sum_{c1, ci} U[e, u, k1, c1*ib + ci, ko] * V[e, u, c1, p, ci] */
  int M;
  {
    static const char *const names[5] = {"eps", "nu", "k_chunk", "p", "k_block"};
    tl_ref ax[5];
    tl_te_axis_vars(dag, 5, names, ax);
    tl_ref rco = tl_te_reduce_axis(dag, "ic_outer", C1), rci = tl_te_reduce_axis(dag, "ic_inner", ib);
    tl_ref ui[5] = {ax[0], ax[1], ax[2], tl_add(ir, tl_mul(ir, rco, tl_int(ir, ib)), rci), ax[4]};
    tl_ref vi[5] = {ax[0], ax[1], rco, ax[3], rci};
    tl_ref rv[2] = {rco, rci};
    int64_t shape[5] = {a, a, K1, P, ob};
    if ((rc = tl_topi_emit(c, "bgemm", "winograd_nchwc_bgemm", "out_elemwise_fusable", 5, shape, ax,
                           tl_mul(ir, tl_te_load(dag, kernel, ui, 5), tl_te_load(dag, V, vi, 5)),
                           TL_RED_SUM, rv, 2, 0, z, &M)))
      goto done;
  }
  /* the output transform in two passes: R[k1, p, vh, rb, ko] = sum_ra A[ra][vh] M[ra, rb],
  ** Y[n, k1, h, w, ko] = sum_rb A[rb][w % m] R[k1, p(n, h / m, w / m), h % m, rb] */
  int R;
  {
    static const char *const names[5] = {"k_chunk", "p", "vh", "r_b", "k_block"};
    tl_ref ax[5];
    tl_te_axis_vars(dag, 5, names, ax);
    load_ctx lc = {dag, M, 5, 0, {0, ax[3], ax[0], ax[1], ax[4]}, 0};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, ax[2], (int)m, A, a, &lc);
    int64_t shape[5] = {K1, P, m, a, ob};
    if ((rc = tl_topi_emit(c, "inverse_rows", "winograd_nchwc_inverse", "injective", 5, shape, ax, body,
                           TL_RED_NONE, NULL, 0, 0, z, &R)))
      goto done;
  }
  {
    static const char *const names[5] = {"n", "oc_chunk", "oh", "ow", "oc_block"};
    tl_ref ax[5];
    tl_te_axis_vars(dag, 5, names, ax);
    tl_ref mm = tl_int(ir, m);
    tl_ref pp = tl_add(ir, tl_add(ir, tl_mul(ir, ax[0], tl_int(ir, nH * nW)),
                                  tl_mul(ir, tl_floordiv(ir, ax[2], mm), tl_int(ir, nW))),
                       tl_floordiv(ir, ax[3], mm));
    load_ctx lc = {dag, R, 5, 3, {ax[1], pp, tl_floormod(ir, ax[2], mm), 0, ax[4]}, 0};
    tl_ref body = tl_topi_wg_position_sum(dag, dt, tl_floormod(ir, ax[3], mm), (int)m, A, a, &lc);
    int64_t shape[5] = {N, K1, OH, OW, ob};
    json_t *aj = flop_json(2.0 * (double)N * (double)(K1 * ob) * (double)OH * (double)OW * (double)C * 9.0);
    json_t *ja = json_array();
    for (int i = 0; i < 4; i++) json_array_append_new(ja, json_integer(p[i]));
    json_object_set_new(aj, "padding", ja);
    json_object_set_new(aj, "tile_size", json_integer(m));
    int out;
    rc = tl_topi_emit(c, "conv2d_NCHWc_winograd", "conv2d_NCHWc_winograd", "out_elemwise_fusable", 5, shape,
                      ax, body, TL_RED_NONE, NULL, 0, 0, aj, &out);
    json_decref(aj);
    if (rc == TL_OK) rc = tl_topi_push_out(c, out);
  }
done:
  json_decref(z);
  return rc;
}

TL_EXPORT int tl_topi_winograd_nchwc_weight(tl_ctx *ctx, int m, int64_t K, int64_t C, int64_t src_block,
                                            int64_t out_block, const float *src, float *dst) {
  double AT[WGA_MAX * WGA_MAX], G[WGA_MAX * 3], BT[WGA_MAX * WGA_MAX];
  if ((m != 2 && m != 4 && m != 6) || tl_topi_winograd_matrices(m, 3, AT, G, BT))
    return tl_err(ctx, TL_E_ARG, "winograd weight: tile size must be 2, 4 or 6, got %d", m);
  if (K < 1 || C < 1 || src_block < 1 || out_block < 1 || K % src_block || K % out_block)
    return tl_err(ctx, TL_E_ARG,
                  "winograd weight: blocks %lld (source) and %lld (output) must divide K = %lld (C = %lld)",
                  (long long)src_block, (long long)out_block, (long long)K, (long long)C);
  if (!src || !dst) return tl_err(ctx, TL_E_ARG, "winograd weight: NULL array");
  int a = m + 2;
  for (int64_t k = 0; k < K; k++)
    for (int64_t c = 0; c < C; c++) {
      /* g[kh][kw] of source [K/sb, C, 3, 3, sb] */
      const float *g = src + (((k / src_block) * C + c) * 9) * src_block + k % src_block;
      double t[WGA_MAX][3];
      for (int e = 0; e < a; e++)
        for (int kw = 0; kw < 3; kw++) {
          double s = 0;
          for (int kh = 0; kh < 3; kh++) s += G[e * 3 + kh] * g[(kh * 3 + kw) * src_block];
          t[e][kw] = s;
        }
      for (int e = 0; e < a; e++)
        for (int u = 0; u < a; u++) {
          double s = 0;
          for (int kw = 0; kw < 3; kw++) s += t[e][kw] * G[u * 3 + kw];
          dst[((((int64_t)e * a + u) * (K / out_block) + k / out_block) * C + c) * out_block + k % out_block] =
              (float)s;
        }
    }
  return TL_OK;
}
