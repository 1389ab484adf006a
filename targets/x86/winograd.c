/*
** winograd.c -- conv2d_NCHWc_winograd.x86: Winograd F(m x m, 3 x 3) for
** float32 3x3, stride-1, dilation-1 convolutions in the graph's blocked
** layout (NCHW[ib]c data in, NCHW[ob]c out, the weight transformed once at
** build time to [a, a, K/ob, C, ob] by tl_topi_winograd_nchwc_weight).
**
** The compute is topi's conv2d_NCHWc_winograd (core/topi/winograd_nchwc.c):
** padding, input transform in two passes (data_pack_rows, data_pack), batched
** GEMM (bgemm), output transform in two passes (inverse_rows, the output); the
** fused bias / residual add / relu of the graph follow the output transform in
** one pass over the output. Schedule:
**   data_pad   on 32 registers inlined: the rows pass loads the unpadded
**              blocked input through guards (no padded copy); on 16 at root,
**              (n, c_chunk, h) fused and parallel, the channel block vectorized;
**   data_pack  at root (tile_order 3: per row of tiles at the output's parallel
**              loop, c_chunk, p, the row's first and last tiles and the image's
**              first and last rows split off so the interior loads unguarded),
**              (c_chunk, p) fused and parallel (32 registers: p as
**              (n, tile row, tile column), par(c_chunk, n, rows / chunk), the
**              rows of a chunk partitioned one border row at a time and the
**              tiles of a row partitioned, so interior tiles load unguarded; where
**              that leaves fewer than 4 chunks, the tiles of a row cut too and
**              the cut fused into the parallel loop),
**              nu unrolled (the position its pass selects), the channel block
**              vectorized; its rows pass computed there per tile (eps unrolled);
**   output     par(n, k_chunk, oh/m) (tile_order 1: par(n, oh/m, k_chunk); 2:
**              par(n, k_chunk), oh/m; 3: par(n, oh/m), k_chunk),
**              ow/m, oh%m, ow%m (unrolled), the block vectorized (the fused
**              endings computed there, once per output vector);
**   inverse_rows per row of tiles and block at the output's parallel loop (tile_order
**              2: per block, over every tile of the image; 3: at the block loop)
**              (vh unrolled), and inside it
**   bgemm      for the row (tile_order 2: the image) and block (tile_order 3: the
**              row and every block, at the output's parallel loop before the
**              blocks' inverse transforms): eps, nu, p/tile_p, accumulated in
**              registers (cache_write): ic_outer, ic_inner, tile_p rows
**              (unrolled), ob (vectorized, in vectors of the target's width)
**              -- the direct conv's FMA micro-kernel, a kernel vector per
**              input channel and a broadcast V element per row.
** Knobs: tile_ic, tile_oc (the graph's blocks, as conv2d_NCHWc.x86's), tile_size
** (m: 2, 4, 6), tile_p (most register rows of the GEMM; the largest divisor of
** the row's tile count up to it is taken), tile_order (0: the rows of a block
** one after the other; 1: the blocks of a row one after the other, so the row's
** transformed input stays in cache; 2: a block's GEMM over the whole image, so its
** slab of the transformed weight is read once, not once per row; 3: the rows in
** parallel, each row's input transform and GEMM kept in cache for all the blocks).
** The NCHW form of the task (no blocked shapes) is the plain conv2d and has no
** schedule here: the template runs blocked only.
*/
#include "x86.h"

#include <stdio.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

static const char *const TMPL = "conv2d_NCHWc_winograd.x86";

static int wg_info(tl_ctx *ctx, const tl_atvm_args *a, tl_atvm_conv *ci) {
  if (a->ntensors < 2)
    return tl_err(ctx, TL_E_ARG,
                  "%s: expected args [data, kernel, strides, padding, dilation, ...] with 2 tensors, got %d", TMPL,
                  a->ntensors);
  TRY(tl_atvm_conv_read(ctx, a, 0, ci));
  if (json_array_size(a->json) >= 6) {
    const char *layout = json_string_value(json_array_get(a->json, 5));
    if (layout && strcmp(layout, "NCHW") != 0)
      return tl_err(ctx, TL_E_UNSUPPORTED, "%s: data layout '%s' is not supported (NCHW)", TMPL, layout);
  }
  return tl_atvm_conv_size(ctx, ci, 0);
}

/* float32, groups 1, 3x3, stride 1, dilation 1: the convs it computes. */
static int wg_ok(const tl_atvm_args *a, const tl_atvm_conv *ci) {
  if (a->dtype[0] != TL_FLOAT32 || a->dtype[1] != TL_FLOAT32) return 0;
  if (ci->out_dtype && strcmp(ci->out_dtype, "float32") != 0) return 0;
  return a->shape[1][1] == ci->C && ci->KH == 3 && ci->KW == 3 && ci->stride[0] == 1 &&
         ci->stride[1] == 1 && ci->dil[0] == 1 && ci->dil[1] == 1;
}

static int64_t last_of(tl_atvm_cfg *cfg, const char *name) {
  int w;
  const int64_t *e = tl_cfg_ints(cfg, name, &w);
  return e ? e[w - 1] : 0;
}

static int wg_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_ctx *ctx = cfg->ctx;
  tl_atvm_conv ci;
  TRY(wg_info(ctx, a, &ci));
  cfg->flop = 2.0 * (double)(ci.N * ci.O * ci.OH * ci.OW) * (double)(ci.C * ci.KH * ci.KW);
  if (tl_atvm_space_define_split(ctx, cfg->space, "tile_ic", ci.C, "factors", 2, 0, -1, NULL, 0) < 0 ||
      tl_atvm_space_define_split(ctx, cfg->space, "tile_oc", ci.O, "factors", 2, 0, -1, NULL, 0) < 0 ||
      tl_atvm_space_define_knob(ctx, cfg->space, "tile_size", "[4, 2, 6]") < 0 ||
      tl_atvm_space_define_knob(ctx, cfg->space, "tile_p", "[8, 4, 6, 12, 14, 16, 24, 28]") < 0 ||
      tl_atvm_space_define_knob(ctx, cfg->space, "tile_order", "[0, 1, 2, 3]") < 0)
    return tl_errcode(ctx);
  /* fallback: a block of one vector of output channels, the input block at most that;
  ** F(4x4) from 28x28 outputs up, else F(2x2) (measured on AVX-512, 1 thread: F(4x4) was
  ** 2.4-2.6x the direct conv on 56x56x64 and 28x28x128, F(2x2) 2.0x on 14x14x256 where
  ** F(4x4)'s 4x4 tiles of 16x16 cover 14x14 with 30% waste; F(6x6) never ahead of
  ** both); up to 16 GEMM register rows (12 on 16 registers). On 32 registers, where K
  ** allows, two vectors of output channels by up to 14 rows: each broadcast V element
  ** feeds two FMAs and a 7-tile row keeps 14 accumulators instead of 7 (AVX-512, 1
  ** thread: 56x56x64 0.368 -> 0.316 ms, 28x28x128 0.327 -> 0.277, 14x14x256 0.547 ->
  ** 0.433, 35x35x96 0.359 -> 0.275) */
  int64_t lanes = cfg->hw->lanes > 0 ? cfg->hw->lanes : 16;
  int64_t regs = cfg->hw->registers > 0 ? cfg->hw->registers : 32;
  int64_t m = ci.OH >= 28 && ci.OW >= 28 ? 4 : 2;
  int64_t row_tiles = (ci.OW + m - 1) / m;
  int64_t oc_bn = tl_atvm_largest_divisor(ci.O, lanes);
  int wide = regs >= 32 && ci.O % (2 * lanes) == 0;
  /* On 16 registers, two vectors of output channels where a row has at most (16 - 4) / 2
  ** tiles: the 7x7 outputs of F(2x2) (rows of 4 tiles) keep 8 accumulators instead of 4
  ** (4 dependent FMA chains cannot fill two FMA ports of 4-cycle latency) */
  int wide16 = !wide && ci.O % (2 * lanes) == 0 && row_tiles >= 2 && row_tiles <= (regs - 4) / 2;
  if (wide || wide16) oc_bn = 2 * lanes;
  int64_t ic_bn = tl_atvm_largest_divisor(ci.C, oc_bn);
  int64_t s_ic[2] = {-1, ic_bn}, s_oc[2] = {-1, oc_bn};
  TRY(tl_cfg_fallback_split(cfg, "tile_ic", s_ic, 2));
  TRY(tl_cfg_fallback_split(cfg, "tile_oc", s_oc, 2));
  tl_cfg_fallback_other(cfg, "tile_size", (double)m);
  tl_cfg_fallback_other(cfg, "tile_p", wide ? 14 : wide16 ? (double)((regs - 4) / 2) : regs >= 32 ? 16 : 12);
  /* tile_order: 0 the rows of tiles of a block one after the other, each row's GEMM on its
  ** own; 1 the blocks of a row one after the other, so the row's transformed input stays in
  ** cache across them; 2 a block's GEMM over all the image's tiles at once, so its slab of
  ** the transformed weight (a*a*C*ob floats) is read once instead of once per row; 3 the
  ** rows in parallel, each row's input transform computed there and kept in cache for all
  ** the blocks (no transformed input in memory).
  ** The fallback (each order of the fallback config timed alone on the Xeon and the EPYC,
  ** 2 threads, AVX-512 and AVX2): 3 from 8 rows of tiles (56x56 F(4x4): 0.285 against 0.401
  ** ms for 0 at 64 channels, 0.630 against 1.187 as AVX2 code); 2 on 2-7 rows (28x28 F(4x4),
  ** 14x14 and 7x7 F(2x2)) where the blocks give at least 4 parallel chunks (0.62-0.90x the
  ** time of 0 on AVX-512, where 3 leaves 7 rows to share and took 0.96-1.34x the time of
  ** 2); else 0. */
  int64_t rows_n = ci.N * ((ci.OH + m - 1) / m), chunks = ci.N * (ci.O / oc_bn);
  int order = rows_n >= 8 ? 3 : rows_n >= 2 && chunks >= 4 ? 2 : 0;
  tl_cfg_fallback_other(cfg, "tile_order", (double)order);
  return TL_OK;
}

/* The NCHW form (task creation, a task that is not blocked): the plain conv2d. */
static int wg_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin, int *out,
                      int max_out, int *nout) {
  tl_atvm_conv ci;
  TRY(wg_info(ctx, a, &ci));
  if (nin < 2 || tl_dag_tensor_ndim(dag, in[0]) != 5 || tl_dag_tensor_ndim(dag, in[1]) != 5)
    return tl_atvm_conv2d_nchw_compute(ctx, a, dag, in, nin, out, max_out, nout);
  if (!wg_ok(a, &ci))
    return tl_err(ctx, TL_E_UNSUPPORTED, "%s: only float32 3x3 convolutions of stride 1 and dilation 1",
                  TMPL);
  char attrs[256];
  snprintf(attrs, sizeof attrs, "{\"padding\":[%lld,%lld,%lld,%lld],\"out_dtype\":\"float32\"}",
           (long long)ci.pad[0], (long long)ci.pad[1], (long long)ci.pad[2], (long long)ci.pad[3]);
  return tl_topi_op(ctx, dag, "conv2d_NCHWc_winograd", in, 2, attrs, out, max_out, nout);
}

static int pos(tl_sched *s, int st, int node) { return tl_sched_node_iter(s, st, node); }

static int ann(tl_ctx *ctx, tl_sched *s, int st, int node, int a) {
  int p = pos(s, st, node);
  if (p < 0) return tl_err(ctx, TL_E_INTERNAL, "%s: annotate: lost an iterator", TMPL);
  if (tl_sched_iter_extent(s, st, p) == 1 && a != TL_ANN_PARALLEL) return TL_OK;
  return tl_sched_annotate(ctx, s, st, p, a);
}

/* The input transform's annotations where it is computed: data_pack V's nu unrolled (the
** position its pass selects) and channel block vectorized, its rows pass T at V's node
** vat, eps unrolled and the channel block vectorized. */
static int wg_pack(tl_ctx *ctx, tl_sched *s, int V, int T, int vat) {
  TRY(ann(ctx, s, V, 1, TL_ANN_UNROLL));
  TRY(ann(ctx, s, V, 4, TL_ANN_VECTORIZE));
  TRY(tl_sched_compute_at(ctx, s, T, V, pos(s, V, vat)));
  TRY(ann(ctx, s, T, 0, TL_ANN_UNROLL));
  return ann(ctx, s, T, 4, TL_ANN_VECTORIZE);
}

/* The output loops of stage O (n, k_chunk, oh, ow, ob) by tile_order (3 as 1, with the
** parallel loop over (n, oh/m) only: the blocks of a row a serial loop inside it):
**   0: par(n, k_chunk, oh/m), ow/m, oh%m, ow%m (unrolled: the position of the last
**      transform pass), ob (vectorized);
**   1: par(n, oh/m, k_chunk), ...: the blocks of a row of tiles one after the other (on
**      one thread), so the row's transformed input stays in cache across them;
**   2: par(n, k_chunk), oh/m, ...: the parallel loop per block, so the GEMM and the
**      inverse's rows pass computed there cover every tile of the image.
** *par: the parallel loop. */
static int wg_output(tl_ctx *ctx, tl_sched *s, int O, int64_t m, int order, int *par_out) {
  int t[3];
  TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &m, t));
  int oho = t[0], ohi = t[1];
  TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &m, t));
  int owo = t[0], owi = t[1];
  int rows_first = order == 1 || order == 3;   /* n, oh/m, k_chunk: a row of tiles for every block */
  int seq[7] = {0, 1, oho, owo, ohi, owi, 4};
  if (rows_first) seq[1] = oho, seq[2] = 1;
  TRY(tl_atvm_reorder_nodes(ctx, s, O, seq, 7));
  int par;
  TRY(tl_atvm_fuse_nodes(ctx, s, O, seq, order >= 2 ? 2 : 3, &par));
  TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
  *par_out = par;
  TRY(ann(ctx, s, O, owi, TL_ANN_UNROLL));
  return ann(ctx, s, O, 4, TL_ANN_VECTORIZE);
}

/* Tiles along a row of the transformed input: P / (N * ceil(OH / m)) of the GEMM stage M
** (at least ceil(OW / m): topi pads a row whose count has no divisor from 4 to 16). */
static int64_t wg_tiles_w(tl_sched *s, tl_dag *dag, int O, int M, int64_t m) {
  const int64_t *os = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, O, 0));
  const int64_t *ms = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, M, 0));
  int64_t rows = os[0] * ((os[2] + m - 1) / m);
  return rows > 0 && ms[3] % rows == 0 ? ms[3] / rows : (os[3] + m - 1) / m;
}

static int pragma(tl_ctx *ctx, tl_sched *s, int st, int node, const char *text) {
  int64_t a[2] = {st, pos(s, st, node)};
  if (a[1] < 0) return tl_err(ctx, TL_E_INTERNAL, "%s: pragma: lost an iterator", TMPL);
  return tl_sched_step(ctx, s, TL_STEP_PR, a, 2, NULL, 0, text, NULL);
}

static int stage_named(tl_ctx *ctx, tl_sched *s, const char *name) {
  int st = tl_sched_stage_find(s, name);
  if (st < 0) return tl_err(ctx, TL_E_INTERNAL, "%s: lost stage %s", TMPL, name);
  return st;
}

static int wg_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  tl_dag *dag = tl_sched_dag(s);
  (void)a;
  int Y = tl_atvm_stage_by_tag(s, "conv2d_NCHWc_winograd");
  int T = tl_atvm_stage_by_tag(s, "winograd_nchwc_rows");
  int V = tl_atvm_stage_by_tag(s, "winograd_nchwc_data_pack");
  int M = tl_atvm_stage_by_tag(s, "winograd_nchwc_bgemm");
  int R = tl_atvm_stage_by_tag(s, "winograd_nchwc_inverse");
  if (Y < 0 || T < 0 || V < 0 || M < 0 || R < 0)
    return tl_err(ctx, TL_E_UNSUPPORTED,
                  "%s: runs on the graph's blocked layout only (NCHW[x]c data and the transformed weight); "
                  "this is the task's NCHW form",
                  TMPL);
  int64_t m = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, M, 0))[0] - 2;
  int64_t rows = (int64_t)tl_cfg_other(cfg, "tile_p");
  int order = (int)tl_cfg_other(cfg, "tile_order");
  int64_t lanes = cfg->hw->lanes > 0 ? cfg->hw->lanes : 16;
  int64_t ob = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, M, 0))[4];
  char tname[128], vname[128], mname[128], rname[128], oname[128];
  snprintf(tname, sizeof tname, "%s", tl_sched_stage_name(s, T));
  snprintf(vname, sizeof vname, "%s", tl_sched_stage_name(s, V));
  snprintf(mname, sizeof mname, "%s", tl_sched_stage_name(s, M));
  snprintf(rname, sizeof rname, "%s", tl_sched_stage_name(s, R));
  /* the tiles: N x nH rows of nW (topi's row count, padded where it has no divisor) */
  const int64_t *ys = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, Y, 0));
  int64_t nN = ys[0], nH = (ys[2] + m - 1) / m;
  int64_t nW = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, M, 0))[3] / (nN * nH);
  /* inline the injective stages but the transform passes and the output; the padding too on
  ** 32 registers (border: the rows pass loads the unpadded input through guards, its tile
  ** loops partitioned), else at root: on 16 registers GCC spills the border pieces' rows
  ** pass (16 stack reloads among its FMAs at 56x56, F(4x4)) and the padded copy stays */
  int64_t regs = cfg->hw->registers > 0 ? cfg->hw->registers : 32;
  int border = 0;
  int last = tl_sched_num_stages(s) - 1;
  for (int i = 0; i < last; i++) {
    if (i == T || i == V || i == M || i == R || tl_sched_stage_op_kind(s, i) != TL_DAG_COMPUTE) continue;
    if (tl_dag_op_nreduce(dag, i) > 0) continue;
    const char *tag = tl_dag_op_tag(dag, i);
    if (i < T && tag && strncmp(tag, "injective,pad", 13) == 0 && regs >= 32 && nW >= 1) {
      TRY(tl_sched_compute_inline(ctx, s, i));
      border = 1;
      continue;
    }
    if (i < T && tag && strncmp(tag, "injective,pad", 13) == 0) {
      int f[3] = {0, 1, 2};
      TRY(tl_sched_fuse(ctx, s, i, 3, f));
      TRY(tl_sched_annotate(ctx, s, i, 0, TL_ANN_PARALLEL));
      TRY(ann(ctx, s, i, tl_sched_iter_node(s, i, tl_sched_num_iters(s, i) - 1), TL_ANN_VECTORIZE));
      continue;
    }
    if (i == Y && !tl_atvm_same_shape(s, Y, last)) continue;
    TRY(tl_sched_compute_inline(ctx, s, i));
  }
  /* data_pack at root: par(c_chunk, p), eps, nu (unrolled), c_block (vectorized); its rows
  ** pass T at the parallel loop: eps (unrolled), r_b, c_block (vectorized) */
  if (order != 3) {
    V = stage_named(ctx, s, vname);
    if (V < 0) return tl_errcode(ctx);
    int vpar, vat, thi = -1, tw = -1;
    if (border) {
      /* p as (n, th/rows, th%rows, tw): par(c_chunk, n, th/rows), the rows of a chunk and
      ** the tiles of a row partitioned, so interior tiles load unguarded */
      int t[3];
      TRY(tl_atvm_split_node(ctx, s, V, 3, 1, &nW, t));
      int p1 = t[0];
      tw = t[1];
      TRY(tl_atvm_split_node(ctx, s, V, p1, 1, &nH, t));
      int nn = t[0], th = t[1];
      int64_t rows = tl_x86_border_rows(nH, 0, nN * tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, V, 0))[2]);
      TRY(tl_atvm_split_node(ctx, s, V, th, 1, &rows, t));
      int tho = t[0];
      thi = t[1];
      /* fewer than 4 parallel chunks (inception's 147x147 on one block of 32 channels: 37
      ** rows of tiles, a prime, ran serially): the tiles of a row cut too, by the smallest
      ** divisor giving 8 chunks in all with at least 4 tiles each, the cut (c_chunk, n,
      ** th/rows, tw/cols) parallel; the tiles of a cut keep their column guards (the
      ** partition cannot prove a column range interior for every cut) */
      int64_t chunks = nN * tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, V, 0))[2] * (nH / rows), cols = nW;
      if (chunks < 4)
        for (int64_t x = 2; x <= nW; x++) {
          if (nW % x || nW / x < 4) continue;
          cols = nW / x;
          if (chunks * x >= 8) break;
        }
      if (cols < nW) {
        TRY(tl_atvm_split_node(ctx, s, V, tw, 1, &cols, t));
        int two = t[0];
        tw = t[1];
        int order[9] = {2, nn, tho, two, thi, tw, 0, 1, 4};
        TRY(tl_atvm_reorder_nodes(ctx, s, V, order, 9));
        int f4[4] = {2, nn, tho, two};
        TRY(tl_atvm_fuse_nodes(ctx, s, V, f4, 4, &vpar));
      } else {
        int order[8] = {2, nn, tho, thi, tw, 0, 1, 4};
        TRY(tl_atvm_reorder_nodes(ctx, s, V, order, 8));
        int f3[3] = {2, nn, tho};
        TRY(tl_atvm_fuse_nodes(ctx, s, V, f3, 3, &vpar));
      }
      vat = tw;
    } else {
      int order[5] = {2, 3, 0, 1, 4};
      TRY(tl_atvm_reorder_nodes(ctx, s, V, order, 5));
      int f2[2] = {2, 3};
      TRY(tl_atvm_fuse_nodes(ctx, s, V, f2, 2, &vpar));
      vat = vpar;
    }
    TRY(ann(ctx, s, V, vpar, TL_ANN_PARALLEL));
    if (border) {
      TRY(pragma(ctx, s, V, thi, "loop_partition_each"));
      TRY(pragma(ctx, s, V, tw, "loop_partition"));
    }
    T = stage_named(ctx, s, tname);
    if (T < 0) return tl_errcode(ctx);
    TRY(wg_pack(ctx, s, V, T, vat));
  }
  /* the output transform (with the fused endings): O */
  last = tl_sched_num_stages(s) - 1;
  Y = tl_atvm_stage_by_tag(s, "conv2d_NCHWc_winograd");
  int O = last, opar;
  if (Y >= 0 && Y != last && tl_sched_stage_compute_at(s, Y, NULL, NULL) == TL_CA_ROOT) {
    /* a last stage of another shape: its outer loops in parallel, Y at root */
    int f[2] = {0, 1};
    TRY(tl_sched_fuse(ctx, s, last, 2, f));
    TRY(tl_sched_annotate(ctx, s, last, 0, TL_ANN_PARALLEL));
    O = Y;
  }
  snprintf(oname, sizeof oname, "%s", tl_sched_stage_name(s, O));
  TRY(wg_output(ctx, s, O, m, order, &opar));
  if (order == 3) {
    /* data_pack per row of tiles at the output's parallel loop: c_chunk, p, eps, nu
    ** (unrolled), c_block (vectorized); its rows pass at p */
    V = stage_named(ctx, s, vname);
    T = stage_named(ctx, s, tname);
    if (V < 0 || T < 0) return tl_errcode(ctx);
    int vo[5] = {2, 3, 0, 1, 4};
    TRY(tl_atvm_reorder_nodes(ctx, s, V, vo, 5));
    TRY(tl_sched_compute_at(ctx, s, V, O, pos(s, O, opar)));
    if (border) TRY(pragma(ctx, s, V, 3, "loop_partition_each"));
    TRY(wg_pack(ctx, s, V, T, 3));
  }
  /* the inverse's rows pass per row of tiles and block, at the output's parallel loop
  ** (tile_order 3: at the block loop inside it): p, vh (unrolled), r_b, k_block (vectorized) */
  R = stage_named(ctx, s, rname);
  if (R < 0) return tl_errcode(ctx);
  TRY(tl_sched_compute_at(ctx, s, R, O, pos(s, O, order == 3 ? 1 : opar)));
  int rat = 0, t[3];
  TRY(ann(ctx, s, R, 2, TL_ANN_UNROLL));
  TRY(ann(ctx, s, R, 4, TL_ANN_VECTORIZE));
  /* bgemm: computed per row of tiles and block of output channels where the inverse's
  ** rows pass is (a buffer of a*a*nW*ob), accumulated in registers (CC) per tile_p tiles:
  ** ic_outer, ic_inner, tile_p rows (unrolled), k_block (vectorized) */
  {
    int CC;
    M = stage_named(ctx, s, mname);
    if (M < 0) return tl_errcode(ctx);
    int64_t rp = tl_atvm_largest_divisor(wg_tiles_w(s, dag, O, M, m), rows > 0 ? rows : 8);
    TRY(tl_sched_cache_write(ctx, s, M, "local", &CC));
    M = stage_named(ctx, s, mname);
    R = stage_named(ctx, s, rname);
    if (M < 0 || R < 0) return tl_errcode(ctx);
    if (order == 3) {
      /* the whole row's GEMM (every block) at the output's parallel loop, before the blocks'
      ** inverse transforms: no transform constants held in registers across the GEMM */
      O = stage_named(ctx, s, oname);
      if (O < 0) return tl_errcode(ctx);
      TRY(tl_sched_compute_at(ctx, s, M, O, pos(s, O, opar)));
    } else {
      TRY(tl_sched_compute_at(ctx, s, M, R, pos(s, R, rat)));
    }
    TRY(tl_atvm_split_node(ctx, s, M, 3, 1, &rp, t));
    int po = t[0], pi = t[1];
    int mo[6] = {2, 0, 1, po, pi, 4};
    TRY(tl_atvm_reorder_nodes(ctx, s, M, mo, 6));
    TRY(ann(ctx, s, M, 4, TL_ANN_VECTORIZE));
    TRY(tl_sched_compute_at(ctx, s, CC, M, pos(s, M, po)));
    /* CC: eps nu k_chunk p k_block | ic_outer ic_inner */
    TRY(tl_atvm_split_node(ctx, s, CC, 3, 1, &rp, t));
    po = t[0], pi = t[1];
    int bo = -1, bi = 4;
    if (ob > lanes && ob % lanes == 0) {
      TRY(tl_atvm_split_node(ctx, s, CC, 4, 1, &lanes, t));
      bo = t[0], bi = t[1];
    }
    int o2[10], no = 0;
    o2[no++] = 0, o2[no++] = 1, o2[no++] = 2, o2[no++] = po, o2[no++] = 5, o2[no++] = 6, o2[no++] = pi;
    if (bo >= 0) o2[no++] = bo;
    o2[no++] = bi;
    TRY(tl_atvm_reorder_nodes(ctx, s, CC, o2, no));
    TRY(ann(ctx, s, CC, pi, TL_ANN_UNROLL));
    if (bo >= 0) TRY(ann(ctx, s, CC, bo, TL_ANN_UNROLL));
    TRY(ann(ctx, s, CC, bi, TL_ANN_VECTORIZE));
  }
  return TL_OK;
}

/* The graph's blocked inputs under cfg: data [N, C/ib, H, W, ib], the transformed
** weight [m+2, m+2, K/ob, C, ob]. */
static int wg_blocked_input(tl_atvm_cfg *cfg, const tl_atvm_args *a, int i, int *ndim, int64_t *shape) {
  tl_atvm_conv ci;
  if (i > 1 || wg_info(cfg->ctx, a, &ci) || !wg_ok(a, &ci)) return 0;
  int64_t ob = last_of(cfg, "tile_oc"), ib = last_of(cfg, "tile_ic");
  int64_t m = (int64_t)tl_cfg_other(cfg, "tile_size");
  if (ib < 1 || ob < 1 || ci.C % ib || ci.O % ob || (m != 2 && m != 4 && m != 6)) return 0;
  *ndim = 5;
  if (i == 0) {
    int64_t d[5] = {ci.N, ci.C / ib, ci.H, ci.W, ib};
    memcpy(shape, d, sizeof d);
  } else {
    int64_t k[5] = {m + 2, m + 2, ci.O / ob, ci.C, ob};
    memcpy(shape, k, sizeof k);
  }
  return 1;
}

const tl_atvm_template tl_x86_conv2d_nchwc_winograd = {
    "conv2d_NCHWc_winograd.x86", wg_define, wg_compute, wg_schedule, NULL, NULL, 0, wg_blocked_input};
