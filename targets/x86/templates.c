/*
** templates.c -- AutoTVM templates for the host CPU (x86): conv2d_NCHWc.x86,
** depthwise_conv2d_NCHWc.x86, dense_pack.x86, dense_nopack.x86.
**
** The knobs are TVM's (names, policies, filters, definition order), so a
** TVM log's entity (e.g. tophub llvm_v0.04) maps to a config of ours.
** conv2d_NCHWc.x86 (float32) computes with the output channel innermost: a
** weight packed as [O/16][C][KH][KW][16], a blocked accumulation
** [N][OH][OW][O] vectorized over oc_bn channels with reg_n register
** accumulators (TVM's NCHW[x]c micro-kernel), and an injective stage back
** to NCHW where the fused consumers go; the graph executor passes constant
** weights pre-packed (a 5-D kernel input).
** depthwise_conv2d_NCHWc.x86 (float32, channel multiplier 1) computes with
** a block of 16 channels innermost: the padded data packed once per call to
** [N][C/16][H][W][16], the weight to [C/16][KH][KW][16], the accumulation
** [N][C/16][OH][OW][16] vectorized over the channel block with tile_ow
** register accumulators, and an injective stage back to NCHW (fused
** consumers go there). Where the graph passes NCHW[x]c data (AlterOpLayout),
** both read it in place; the blocked depthwise conv, and the blocked conv on
** 32 vector registers, read the unpadded input with their border loops
** partitioned (no padded copy). The other computes are the plain
** topi operators (NCHW data, OIHW kernel; dense [M, K] x [N, K]) with the
** blocking expressed by splits. No compute depends on the config, so
** injective consumers fuse after the anchor. Fallback configs keep the
** accumulators within the register budget: on 32 registers (AVX-512) two
** vectors of output channels by up to 14 positions, on 16 ymm 8-lane rows
** (rows_max); dense_nopack's fallback is deployed where no record covers a
** layer (TL_TMPL_FALLBACK_DEPLOYS).
*/
#include "x86.h"

#include <stdio.h>

/* float32 lanes of the target's vectors and its vector registers
** (targets/x86/target.c: 16 and 32 with AVX-512, 8 and 16 with AVX2). */
#define SIMD_LANES ((int64_t)cfg->hw->lanes)
#define SIMD_REGS ((int64_t)cfg->hw->registers)

/* Registers of an accumulator row oc_bn channels wide. */
static int64_t row_vectors(tl_atvm_cfg *cfg, int64_t oc_bn) {
  return (oc_bn + SIMD_LANES - 1) / SIMD_LANES;
}

/* The most accumulator rows of oc_bn channels a fallback keeps: on 32
** registers the caps measured on AVX-512 (cap32); else as many as leave one
** kernel vector per row and a broadcast register free (on 16 ymm, 8-wide
** rows: 14), so the accumulators do not spill. */
static int64_t rows_max(tl_atvm_cfg *cfg, int64_t oc_bn, int64_t cap32) {
  if (SIMD_REGS >= 32) return cap32;
  int64_t v = row_vectors(cfg, oc_bn), n = (SIMD_REGS - v - 1) / v;
  return n < 1 ? 1 : n;
}

/* ---- schedule helpers --------------------------------------------------------- */

/* The padding stage feeding the anchor: kept at root, computed once with
** its outer loops fused and parallel, so the inner loops read no guards. */
static int pad_at_root(tl_ctx *ctx, tl_sched *s, const char *name) {
  int p = tl_sched_stage_find(s, name);
  if (p < 0 || tl_sched_stage_op_kind(s, p) != TL_DAG_COMPUTE) return TL_OK;
  if (tl_sched_stage_compute_at(s, p, NULL, NULL) != TL_CA_ROOT) return TL_OK;
  int f[2] = {0, 1};
  int rc = tl_sched_fuse(ctx, s, p, 2, f);
  if (rc) return rc;
  return tl_sched_annotate(ctx, s, p, 0, TL_ANN_PARALLEL);
}

static int pos(tl_sched *s, int st, int node) { return tl_sched_node_iter(s, st, node); }
static int node_at(tl_sched *s, int st, int p) { return tl_sched_iter_node(s, st, p); }

static int ann(tl_ctx *ctx, tl_sched *s, int st, int node, int a) {
  int p = pos(s, st, node);
  if (p < 0) return tl_err(ctx, TL_E_INTERNAL, "template: annotate: lost an iterator");
  if (tl_sched_iter_extent(s, st, p) == 1 && a != TL_ANN_PARALLEL) return TL_OK;
  return tl_sched_annotate(ctx, s, st, p, a);
}

/* The stage named name (after stage-id shifts). */
static int find(tl_sched *s, const char *name) { return tl_sched_stage_find(s, name); }

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

static int64_t last_of(tl_atvm_cfg *cfg, const char *name) {
  int w;
  const int64_t *e = tl_cfg_ints(cfg, name, &w);
  return e ? e[w - 1] : 0;
}

/* ---- args helpers ----------------------------------------------------------------- */

/* conv args: data, kernel, strides, padding, dilation, layout, out_layout, out_dtype
** (depthwise: data, kernel, strides, padding, dilation, out_dtype). */
typedef tl_atvm_conv conv_info;

static int conv_info_of(tl_ctx *ctx, const tl_atvm_args *a, int depthwise, conv_info *ci) {
  if (a->ntensors < 2)
    return tl_err(ctx, TL_E_ARG, "expected args [data, kernel, strides, padding, dilation, ...] with 2 tensors, got %d",
                  a->ntensors);
  TRY(tl_atvm_conv_read(ctx, a, depthwise, ci));
  if (!depthwise && json_array_size(a->json) >= 6) {
    const char *layout = json_string_value(json_array_get(a->json, 5));
    if (layout && strcmp(layout, "NCHW") != 0)
      return tl_err(ctx, TL_E_UNSUPPORTED, "data layout '%s' is not supported (NCHW)", layout);
  }
  return tl_atvm_conv_size(ctx, ci, 0);
}

static int conv_compute_common(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in,
                               int nin, int *out, int max_out, int *nout, int depthwise) {
  conv_info ci;
  TRY(conv_info_of(ctx, a, depthwise, &ci));
  char attrs[512];
  snprintf(attrs, sizeof attrs,
           "{\"strides\":[%lld,%lld],\"padding\":[%lld,%lld,%lld,%lld],\"dilation\":[%lld,%lld],"
           "\"layout\":\"NCHW\"%s%s%s}",
           (long long)ci.stride[0], (long long)ci.stride[1], (long long)ci.pad[0],
           (long long)ci.pad[1], (long long)ci.pad[2], (long long)ci.pad[3], (long long)ci.dil[0],
           (long long)ci.dil[1], ci.out_dtype ? ",\"out_dtype\":\"" : "",
           ci.out_dtype ? ci.out_dtype : "", ci.out_dtype ? "\"" : "");
  return tl_topi_op(ctx, dag, depthwise ? "depthwise_conv2d" : "conv2d", in, 2, attrs, out,
                    max_out, nout);
}

/* ---- the channel-blocked graph layout (NCHW[x]c data in, NCHW[x]c out) ----------------- */

/* The compute when the graph passes its data blocked (5-D NCHW[ib]c, the
** kernel 5-D OIHW[ob]o): topi's conv2d_NCHWc / depthwise_conv2d_NCHWc
** (core/topi/nchwc.c), no packing or unpacking stage. The blocks are the
** ones AlterOpLayout chose from this template's config. */
static int nchwc5_compute(tl_ctx *ctx, const conv_info *ci, tl_dag *dag, const int *in, int *out,
                          int max_out, int *nout, int depthwise) {
  char attrs[320];
  snprintf(attrs, sizeof attrs,
           "{\"strides\":[%lld,%lld],\"padding\":[%lld,%lld,%lld,%lld],\"dilation\":[%lld,%lld]%s%s%s}",
           (long long)ci->stride[0], (long long)ci->stride[1], (long long)ci->pad[0],
           (long long)ci->pad[1], (long long)ci->pad[2], (long long)ci->pad[3], (long long)ci->dil[0],
           (long long)ci->dil[1], ci->out_dtype ? ",\"out_dtype\":\"" : "",
           ci->out_dtype ? ci->out_dtype : "", ci->out_dtype ? "\"" : "");
  return tl_topi_op(ctx, dag, depthwise ? "depthwise_conv2d_NCHWc" : "conv2d_NCHWc", in, 2, attrs,
                    out, max_out, nout);
}

/* Inline the injective stages but the output; the padding stays at root,
** computed once per call with its outer loops fused and parallel (keep_pad:
** left unscheduled, for the caller to place). */
static int nchwc5_inline(tl_ctx *ctx, tl_sched *s, int CV, int keep_pad) {
  tl_dag *dag = tl_sched_dag(s);
  for (int i = 0; i < tl_sched_num_stages(s) - 1; i++) {
    if (i == CV || tl_sched_stage_op_kind(s, i) != TL_DAG_COMPUTE) continue;
    if (tl_dag_op_nreduce(dag, i) > 0) continue;
    const char *tag = tl_dag_op_tag(dag, i);
    if (i < CV && tag && strncmp(tag, "injective,pad", 13) == 0) {
      if (keep_pad) continue;
      int f[3] = {0, 1, 2};
      TRY(tl_sched_fuse(ctx, s, i, 3, f));
      TRY(tl_sched_annotate(ctx, s, i, 0, TL_ANN_PARALLEL));
      TRY(ann(ctx, s, i, node_at(s, i, tl_sched_num_iters(s, i) - 1), TL_ANN_VECTORIZE));
      continue;
    }
    TRY(tl_sched_compute_inline(ctx, s, i));
  }
  return TL_OK;
}

/* The padding stage feeding stage CV, or -1. */
static int pad_stage(tl_sched *s, int CV) {
  tl_dag *dag = tl_sched_dag(s);
  for (int i = 0; i < CV; i++) {
    const char *tag = tl_sched_stage_op_kind(s, i) == TL_DAG_COMPUTE ? tl_dag_op_tag(dag, i) : NULL;
    if (tag && strncmp(tag, "injective,pad", 13) == 0) return i;
  }
  return -1;
}

/* The outer stage of a blocked conv: the fused epilogue when it has the
** conv's shape (bias, relu, residual add computed once per output vector),
** else the conv itself (a cache_write stage accumulates). *O, *CC. */
static int nchwc5_stages(tl_ctx *ctx, tl_sched *s, int CV, int *O, int *CC) {
  int last = tl_sched_num_stages(s) - 1;
  if (last != CV && tl_atvm_same_shape(s, CV, last)) {
    *O = last, *CC = CV;
    return TL_OK;
  }
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, CV));
  int ns;
  TRY(tl_sched_cache_write(ctx, s, CV, "local", &ns));
  *O = find(s, cname), *CC = ns;
  return TL_OK;
}

/* The positions per tile of a row of width OW, oc_bn channels wide, oh_f rows: reg_n, or on
** 32 registers, where a tile of one or two vectors would hold more accumulators than the
** registers (two vectors by 17 positions) and the width has no divisor of 7 up to the
** budget, balanced tiles within it, the last one guarded (17 -> 9 + 8), instead of
** accumulators spilled to the stack. */
static int64_t fit_tile(tl_atvm_cfg *cfg, int64_t OW, int64_t reg_n, int64_t oc_bn, int64_t oh_f) {
  if (SIMD_REGS < 32) return reg_n;
  int64_t v = row_vectors(cfg, oc_bn), rows = (SIMD_REGS - 4) / v / (oh_f > 0 ? oh_f : 1);
  if (v > 2 || rows < 1 || reg_n <= rows || tl_atvm_largest_divisor(OW, rows) >= 7) return reg_n;
  int64_t nt = (reg_n + rows - 1) / rows;
  return (reg_n + nt - 1) / nt;
}

static int pragma(tl_ctx *ctx, tl_sched *s, int st, int node, const char *text) {
  int64_t a[2] = {st, pos(s, st, node)};
  if (a[1] < 0) return tl_err(ctx, TL_E_INTERNAL, "template: pragma: lost an iterator");
  return tl_sched_step(ctx, s, TL_STEP_PR, a, 2, NULL, 0, text, NULL);
}

/* Rows per parallel chunk of a conv that reads its border through guards (the rows
** loop partitioned: the first and last rows of a chunk keep the guards): all OH rows
** unless the (n, oc_chunk) chunks are fewer than 8, then OH cut by its smallest divisor
** giving 8 chunks in all with at least 4 rows each, else the most chunks of 4 rows.
** With uneven (the direct conv), where that leaves fewer than 4 chunks in all, or an odd
** number under 8 (uneven on any even thread count; a prime such as inception's 17 rows),
** and a cut that does not divide OH gives more (its last chunk shorter, its rows
** guarded), that cut: 17 rows of 5 output-channel chunks ran as 5 parallel iterations (3
** against 2 on two threads), now as 10 of 9 or 8 rows. The Winograd input transform
** passes 0: an uneven cut of its tile rows loses the partition's unguarded interior. */
int64_t tl_x86_border_rows(int64_t OH, int uneven, int64_t chunks) {
  int64_t best = 1;
  for (int64_t x = 1; x <= OH; x++) {
    if (OH % x || OH / x < 4) continue;
    best = x;
    if (chunks * x >= 8) break;
  }
  int64_t rows = OH / best, n = chunks * best;
  if (uneven && chunks > 0 && (n < 4 || (n < 8 && n % 2))) {
    int64_t want = (8 + chunks - 1) / chunks;       /* row chunks for 8 in all */
    int64_t r = (OH + want - 1) / want;
    if (r < 4) r = 4;
    if ((OH + r - 1) / r > best) rows = r;
  }
  return rows;
}

/* Paired tiles of a 1x1 conv on 32 registers: where a tile is one row of 6 or 7 positions by
** one chunk of two vectors of output channels (14 accumulators: the fallback's on 7- and
** 35-wide rows, which have no second row to pair with), the tile takes two chunks of output
** channels, four vectors (28 accumulators at 7): each broadcast feeds four FMAs, each kernel
** vector 7. The second chunk's second kernel vector is read at each use (pragma
** "peel_reread", core/codegen/c.c): 28 accumulators, three kernel vectors and the broadcast
** fill the 32 registers. On the Xeon (AVX-512, two FMA units), mobilenet's 7x7 layers as the
** network runs them, three rounds alternated: 512 -> 1024 0.29-0.34 -> 0.19-0.27 ms, 1024 ->
** 1024 0.58-0.73 -> 0.47-0.56 ms. Where 14 positions fit (14-, 28-, 56-wide rows) the
** fallback keeps 14 by one chunk: paired there, mobilenet's 14x14 512 -> 512 steps took
** 0.43-0.45 ms against 0.40-0.42 (four builds in one process, alternated), and resnet-50 2%
** more in all (docs/performance.md). A padded 1x1 conv reads its border through guards
** (border in conv_nchwc5_schedule) and is not paired. */
static int pair_1x1(tl_atvm_cfg *cfg, const conv_info *ci, int64_t oc_bn, int64_t reg_n, int64_t oh_f) {
  return SIMD_REGS >= 32 && ci->KH == 1 && ci->KW == 1 && oc_bn == 2 * SIMD_LANES && oh_f == 1 &&
         reg_n >= 6 && reg_n * 4 <= SIMD_REGS - 4 && ci->OW % reg_n == 0 && ci->O % (2 * oc_bn) == 0;
}

/* The NCHW[x]c conv: O (n, oc_chunk, oh, ow, ob) -> par(n, oc_chunk, oh/oh_f), ow/reg_n,
** [oh_f,] reg_n, ob (vectorized); the accumulation computed at ow/reg_n as
** ic_outer, kh, kw, ic_inner (unroll_kw: kh, ic_inner, kw; 1x1: ic_inner, kh, kw),
** [oh_f,] reg_n (unrolled), ob (vectorized, in vectors of the target's width):
** reg_n (x oh_f) vector accumulators, one kernel vector and one broadcast data
** element per FMA row, the data read in place (no packing). Padded, with oh_f = 1,
** on 32 registers: the padding inlined and O's rows cut into chunks (tl_x86_border_rows:
** par(n, oc_chunk, oh/rows), rows, ow/reg_n, ...), the rows, tiles, kh, kw and the
** tile's positions marked "loop_partition_each" (no padded copy; the border pieces
** run only the taps that read the image). A 1x1 conv over an input of more than 512 KB
** with a weight of at most 256 KB runs its parallel loop as par(n, oh/oh_f), oc_chunk:
** each row of input serves every chunk of output channels while it is in cache. */
static int conv_nchwc5_schedule(tl_atvm_cfg *cfg, const conv_info *ci, tl_sched *s, int CV) {
  tl_ctx *ctx = cfg->ctx;
  tl_dag *dag = tl_sched_dag(s);
  int64_t reg_n = last_of(cfg, "tile_ow");
  if (!reg_n) return tl_errcode(ctx);
  int is1x1 = ci->KH == 1 && ci->KW == 1;
  int64_t oh_f = is1x1 ? (int64_t)tl_cfg_other(cfg, "tile_oh") : 1;
  int unroll_kw = is1x1 ? 0 : tl_cfg_other(cfg, "unroll_kw") != 0;
  if (oh_f < 1 || ci->OH % oh_f != 0) oh_f = 1;
  int64_t ob = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, CV, 0))[4];
  if (reg_n < 4 && ci->OW > 16) {
    /* a width with no divisor from 4 up to the register budget (a prime such as
    ** inception's 71): tiles of up to 8 positions, the last one guarded, instead of
    ** 1-3 positions per tile, where each kernel vector feeds 1-3 FMAs (80 -> 192
    ** channels on 71x71: 20% of the FMA peak -> 75%, AVX-512) */
    int64_t v = row_vectors(cfg, ob), rows = SIMD_REGS >= 32 ? (SIMD_REGS - 4) / v : (SIMD_REGS - v - 1) / v;
    rows /= oh_f;
    reg_n = rows < 8 ? (rows < 1 ? 1 : rows) : 8;
  } else {
    reg_n = fit_tile(cfg, ci->OW, reg_n, ob, oh_f);
  }
  /* padded, one row per accumulator tile, 32 registers: the padding inlined (guarded
  ** loads of the input as the previous layer wrote it, no padded copy) and the rows, tiles,
  ** taps and a tile's positions partitioned, so the interior is the unguarded FMA loop and
  ** the border runs its own pieces. On 16 registers the tile holds all but the kernel vector
  ** and the broadcast, and the border pieces spill (GCC, measured): a padded copy there. */
  int border = SIMD_REGS >= 32 && oh_f == 1 && pad_stage(s, CV) >= 0;
  TRY(nchwc5_inline(ctx, s, CV, border));
  if (border) TRY(tl_sched_compute_inline(ctx, s, pad_stage(s, CV)));
  int O, CC, t[3];
  TRY(nchwc5_stages(ctx, s, CV, &O, &CC));
  int oho = 2, ohi = -1, owo, owi;
  if (oh_f > 1) { TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &oh_f, t)); oho = t[0], ohi = t[1]; }
  if (border) {
    const int64_t *os = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, O, 0));
    int64_t rows = tl_x86_border_rows(ci->OH, 1, os[0] * os[1]);
    TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &rows, t)); oho = t[0], ohi = t[1];
  }
  TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
  int pair = !border && pair_1x1(cfg, ci, ob, reg_n, oh_f), occ = 1, occi = -1;
  if (pair) {
    int64_t two = 2;
    TRY(tl_atvm_split_node(ctx, s, O, 1, 1, &two, t)); occ = t[0], occi = t[1];
  }
  /* A 1x1 conv over a large input with a small weight (mobilenet's and resnet-50's 56x56 and
  ** 112x112 layers): the rows outside the output-channel chunks in the parallel loop, so a
  ** row of input is read from memory once and then from cache by every chunk, instead of
  ** every chunk sweeping the whole input (4 chunks of 32 channels: 4 sweeps of 1.6 MB at
  ** 128 -> 128 channels on 56x56). On the Xeon, in the network: those steps 20-32% faster. */
  int64_t in_bytes = 4 * ci->N * ci->C * ci->H * ci->W, w_bytes = 4 * ci->C * ci->O;
  int rows_outer = is1x1 && !border && in_bytes > ((int64_t)512 << 10) && w_bytes <= ((int64_t)256 << 10);
  int order[12], no = 0;
  order[no++] = 0;
  if (rows_outer) order[no++] = oho, order[no++] = occ;
  else order[no++] = occ, order[no++] = oho;
  if (border) order[no++] = ohi;
  order[no++] = owo;
  if (ohi >= 0 && !border) order[no++] = ohi;
  if (occi >= 0) order[no++] = occi;
  order[no++] = owi, order[no++] = 4;
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, no));
  int par, f3[3] = {0, occ, oho};
  if (rows_outer) f3[1] = oho, f3[2] = occ;
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, rows_outer ? 2 : 3, &par));
  TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
  TRY(ann(ctx, s, O, 4, TL_ANN_VECTORIZE));
  TRY(tl_sched_compute_at(ctx, s, CC, O, pos(s, O, owo)));
  if (border) {
    TRY(pragma(ctx, s, O, ohi, "loop_partition_each"));
    TRY(pragma(ctx, s, O, owo, "loop_partition_each"));
  }
  /* CC: n oc_chunk oh ow ob | ic_outer kh kw ic_inner */
  int rco = 5, ry = 6, rx = 7, rci = 8, obo = -1, obi = 4;
  oho = 2, ohi = -1;
  if (oh_f > 1) { TRY(tl_atvm_split_node(ctx, s, CC, 2, 1, &oh_f, t)); oho = t[0], ohi = t[1]; }
  TRY(tl_atvm_split_node(ctx, s, CC, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
  if (ob > SIMD_LANES && ob % SIMD_LANES == 0) {
    int64_t l = SIMD_LANES;
    TRY(tl_atvm_split_node(ctx, s, CC, 4, 1, &l, t)); obo = t[0], obi = t[1];
  }
  occ = 1, occi = -1;
  if (pair) {
    int64_t two = 2;
    TRY(tl_atvm_split_node(ctx, s, CC, 1, 1, &two, t)); occ = t[0], occi = t[1];
  }
  no = 0;
  order[no++] = 0, order[no++] = occ, order[no++] = oho, order[no++] = owo, order[no++] = rco;
  if (is1x1) order[no++] = rci, order[no++] = ry, order[no++] = rx;
  else if (unroll_kw) order[no++] = ry, order[no++] = rci, order[no++] = rx;
  else order[no++] = ry, order[no++] = rx, order[no++] = rci;
  if (ohi >= 0) order[no++] = ohi;
  order[no++] = owi;
  if (occi >= 0) order[no++] = occi;
  if (obo >= 0) order[no++] = obo;
  order[no++] = obi;
  TRY(tl_atvm_reorder_nodes(ctx, s, CC, order, no));
  if (pair) {
    /* the tile's four kernel vectors as one unrolled loop, its last read at each use */
    int f2[2] = {occi, obo};
    TRY(tl_atvm_fuse_nodes(ctx, s, CC, f2, 2, &obo));
    TRY(pragma(ctx, s, CC, obo, "peel_reread"));
  }
  if (unroll_kw) TRY(ann(ctx, s, CC, rx, TL_ANN_UNROLL));
  if (ohi >= 0) TRY(ann(ctx, s, CC, ohi, TL_ANN_UNROLL));
  if (obo >= 0) TRY(ann(ctx, s, CC, obo, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, owi, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, obi, TL_ANN_VECTORIZE));
  if (border) {
    /* kh, kw and the tile's positions too, each border value its own piece: on a border
    ** row or tile the taps that read only padding are dropped and the others load
    ** unguarded (a runtime guard, at the edge of a chunk of rows, is unswitched) */
    if (ci->KH > 1) TRY(pragma(ctx, s, CC, ry, "loop_partition_each"));
    if (ci->KW > 1) TRY(pragma(ctx, s, CC, rx, "loop_partition_each"));
    if (reg_n > 1) TRY(pragma(ctx, s, CC, owi, "loop_partition_each"));
  }
  return TL_OK;
}

/* The NCHW[x]c depthwise conv, reading the unpadded blocked input in place:
** O (n, c_chunk, oh, ow, b) -> par(n, c_chunk, oh/oh_f), oh_f, ow/reg_n, reg_n, b
** (vectorized); the accumulation at ow/reg_n as [b/lanes,] kh, kw (unrolled), reg_n
** (unrolled), b (vectorized, in vectors of the target's width); where the tile's
** accumulators fit in registers, reg_n of O and b/lanes unrolled too. The padding is inlined (a
** guarded load) and the row loop (oh_f), the tile loop (ow/reg_n) and the
** tile's positions (reg_n) are partitioned (pragma "loop_partition",
** core/te/partition.h): the guards stay on the border rows and columns only,
** the interior runs the unguarded FMA loop on the input as the previous layer
** wrote it (no padded copy). oh_f = OH unless the (n, c_chunk) chunks are too
** few to keep the threads busy (then OH is cut into at least 8 chunks in all, and
** the parallel loop is par(n, oh/oh_f, c_chunk): a thread's share is a band of rows).
** Stride 2 with an even oh_f: oh_f as oh_f/2, ow/reg_n, [b/lanes,] 2, reg_n, b and
** the accumulation over kh, kw, the 2 rows (all unrolled), reg_n, b. */
static int dw_nchwc5_schedule(tl_atvm_cfg *cfg, const conv_info *ci, tl_sched *s, int CV) {
  tl_ctx *ctx = cfg->ctx;
  tl_dag *dag = tl_sched_dag(s);
  int64_t reg_n = last_of(cfg, "tile_ow");
  if (!reg_n) return tl_errcode(ctx);
  const int64_t *os = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, CV, 0));
  int64_t b = os[4], chunks = os[0] * os[1], OH = os[2], x = 1;
  while (x < OH && (chunks * x < 8 || OH % x)) x++;
  int64_t oh_f = OH / x;
  TRY(nchwc5_inline(ctx, s, CV, 1));
  int P = pad_stage(s, CV);
  if (P >= 0) TRY(tl_sched_compute_inline(ctx, s, P));
  int O, CC, t[3];
  TRY(nchwc5_stages(ctx, s, CV, &O, &CC));
  int64_t nvec = (b + SIMD_LANES - 1) / SIMD_LANES;
  /* stride 2: two output rows per tile where both rows' accumulators, the KH x KW kernel
  ** vectors and KW + 2 data vectors fit in the registers (AVX-512's fallback tiles of 7-8
  ** positions; on 16 ymm only one-position tiles). Each tile takes one channel vector at
  ** a time (the accumulator buffer small enough for GCC to keep in registers) and its
  ** accumulation unrolls kh, kw and the two rows, so each kernel vector feeds both rows
  ** and the input row the two share (2*oh + 2) is loaded once; where rows are cut into
  ** chunks, kh and the two rows are partitioned one value at a time so the chunk edge's
  ** runtime guard is unswitched (kept inside, it spills). 11-15% less time on mobilenet's
  ** 64x112, 128x56 and 256x28 stride-2 layers (AVX-512, measured); odd row counts (7x7
  ** outputs) keep one row per tile. */
  int64_t rows2 = 2;
  int two = ci->stride[0] == 2 && ci->KH > 1 && oh_f % 2 == 0 &&
            2 * reg_n + ci->KH * ci->KW + ci->KW + 2 <= SIMD_REGS;
  if (two && x > 1) {
    /* rows cut into chunks: the chunk edge's guards need registers too -- 64x112's
    ** 2 x 8 positions reloaded 9 vectors from the stack (GCC, AVX-512), 2 x 7 none */
    int64_t cap = (SIMD_REGS - 3 - ci->KH * ci->KW - ci->KW - 2) / 2;
    if (reg_n > cap && cap >= 4) reg_n = tl_atvm_largest_divisor(ci->OW, cap);
  }
  int oho = 2, ohi, owo, owi, ohp = -1, ohq = -1;
  TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &oh_f, t)); oho = t[0], ohi = t[1];
  if (two) { TRY(tl_atvm_split_node(ctx, s, O, ohi, 1, &rows2, t)); ohp = t[0], ohq = t[1]; }
  TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
  int Obo = -1, Obi = 4;
  if (two && b > SIMD_LANES && b % SIMD_LANES == 0) {
    int64_t l = SIMD_LANES;
    TRY(tl_atvm_split_node(ctx, s, O, 4, 1, &l, t)); Obo = t[0], Obi = t[1];
  }
  /* Rows cut into chunks (x > 1): the row chunks outside the channel chunks in the parallel
  ** loop, so each thread's share is a band of rows across all channels -- the share the
  ** 1x1 convs around it (rows outside their output-channel chunks on large inputs) write
  ** and read on the same thread (core/base/pool.c gives consecutive loops the same shares),
  ** not one channel chunk's rows written by the other core. */
  int order[12] = {0, 1, oho, ohi, owo, owi, 4}, no = 7;
  if (x > 1) order[1] = oho, order[2] = 1;
  if (two) {
    no = 3;
    order[no++] = ohp, order[no++] = owo;
    if (Obo >= 0) order[no++] = Obo;
    order[no++] = ohq, order[no++] = owi, order[no++] = Obi;
  }
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, no));
  int par, f3[3] = {0, order[1], order[2]};
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, 3, &par));
  TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
  TRY(ann(ctx, s, O, Obi, TL_ANN_VECTORIZE));
  /* all of a tile's accumulators fit in registers beside the kernel vectors: the
  ** epilogue and the channel vectors unrolled, so the compiler keeps the tile in
  ** registers instead of passing it through a stack buffer (12-14% less time over
  ** mobilenet's depthwise layers on AVX-512, measured) */
  int in_regs = reg_n * nvec + ci->KW + 2 <= SIMD_REGS;
  if (in_regs) TRY(ann(ctx, s, O, owi, TL_ANN_UNROLL));
  if (two) TRY(ann(ctx, s, O, ohq, TL_ANN_UNROLL));
  if (two) ohi = ohp;
  TRY(tl_sched_compute_at(ctx, s, CC, O, pos(s, O, Obo >= 0 ? Obo : owo)));
  TRY(pragma(ctx, s, O, ohi, two ? "loop_partition_each" : "loop_partition"));
  TRY(pragma(ctx, s, O, owo, "loop_partition"));
  /* CC: n c_chunk oh ow b | kh kw */
  int bo = -1, bi = 4;
  TRY(tl_atvm_split_node(ctx, s, CC, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
  if (Obo < 0 && b > SIMD_LANES && b % SIMD_LANES == 0) {
    int64_t l = SIMD_LANES;
    TRY(tl_atvm_split_node(ctx, s, CC, 4, 1, &l, t)); bo = t[0], bi = t[1];
  }
  no = 0;
  order[no++] = 0, order[no++] = 1;
  if (!two) order[no++] = 2;
  order[no++] = owo;
  if (bo >= 0) order[no++] = bo;
  order[no++] = 5, order[no++] = 6;
  if (two) order[no++] = 2;
  order[no++] = owi, order[no++] = bi;
  TRY(tl_atvm_reorder_nodes(ctx, s, CC, order, no));
  TRY(ann(ctx, s, CC, owi, TL_ANN_UNROLL));
  if (two) {
    TRY(ann(ctx, s, CC, 2, TL_ANN_UNROLL));
    TRY(ann(ctx, s, CC, 5, TL_ANN_UNROLL));
    if (x > 1) {
      TRY(pragma(ctx, s, CC, 5, "loop_partition_each"));
      TRY(pragma(ctx, s, CC, 2, "loop_partition_each"));
    }
  }
  /* kw unrolled too where its kernel vectors fit beside the accumulators: a data
  ** vector loaded once feeds the neighbouring positions' FMAs of the next kw
  ** (stride 1: 10 loads for 24 FMAs of an 8-wide tile, not 24; 3-25% faster per
  ** layer on AVX-512, measured); 14 accumulators on 16 ymm keep kw a loop */
  if (reg_n + ci->KW + 2 <= SIMD_REGS) TRY(ann(ctx, s, CC, 6, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, bi, TL_ANN_VECTORIZE));
  if (in_regs && bo >= 0) TRY(ann(ctx, s, CC, bo, TL_ANN_UNROLL));
  if (reg_n > 1) TRY(pragma(ctx, s, CC, owi, "loop_partition"));
  return TL_OK;
}

/* ---- conv2d_NCHWc.x86 -------------------------------------------------------------- */

static int filter_ow64(tl_atvm_cfg *cfg, int k) {
  /* filter=lambda y: y.size[-1] <= 64 */
  tl_knob *kb = &cfg->space->knobs.v[k];
  unsigned char keep[4096];
  if (kb->dim > 4096) return TL_OK;
  for (int64_t j = 0; j < kb->dim; j++) keep[j] = tl_knob_entity(kb, j)[kb->width - 1] <= 64;
  tl_atvm_knob_filter(cfg->space, k, keep);
  return TL_OK;
}

static int define_split2(tl_atvm_cfg *cfg, const char *name, int64_t len, int nout) {
  int k = tl_atvm_space_define_split(cfg->ctx, cfg->space, name, len, "factors", nout, 0, -1, NULL, 0);
  return k < 0 ? tl_errcode(cfg->ctx) : TL_OK;
}

static int conv_blocked_ok(const tl_atvm_args *a, const conv_info *ci);

static int conv_nchwc_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  conv_info ci;
  TRY(conv_info_of(cfg->ctx, a, 0, &ci));
  if (conv_blocked_ok(a, &ci))
    cfg->flop = 2.0 * (double)(ci.N * ci.O * ci.OH * ci.OW) * (double)(ci.C * ci.KH * ci.KW);
  TRY(define_split2(cfg, "tile_ic", ci.C, 2));
  TRY(define_split2(cfg, "tile_oc", ci.O, 2));
  TRY(define_split2(cfg, "tile_ow", ci.OW, 2));
  TRY(filter_ow64(cfg, 2));
  int is1x1 = ci.KH == 1 && ci.KW == 1;
  if (is1x1) {
    if (tl_atvm_space_define_knob(cfg->ctx, cfg->space, "tile_oh", ci.OH > 1 ? "[1, 2]" : "[1]") < 0)
      return tl_errcode(cfg->ctx);
  } else if (tl_atvm_space_define_knob(cfg->ctx, cfg->space, "unroll_kw", "[true, false]") < 0) {
    return tl_errcode(cfg->ctx);
  }
  /* fallback: oc_bn <= simd lanes, ic_bn <= oc_bn, reg_n accumulator rows
  ** within the register budget (rows_max: 31 on AVX-512; 1x1: ow*oh < 32);
  ** with fewer than 8 accumulators (narrow outputs, e.g. 7 wide) the blocked
  ** compute takes two vectors of output channels when those rows fit too
  ** (measured 6-10% faster on AVX-512) */
  int64_t oc_bn = tl_atvm_largest_divisor(ci.O, SIMD_LANES);
  int64_t ic_bn = tl_atvm_largest_divisor(ci.C, oc_bn);
  int64_t reg_n = tl_atvm_largest_divisor(ci.OW, rows_max(cfg, oc_bn, 31));
  int wide = 0;
  int64_t reg_w = tl_atvm_largest_divisor(ci.OW, (SIMD_REGS - 4) / 2);
  if (conv_blocked_ok(a, &ci) && SIMD_REGS >= 32 && ci.O % (2 * SIMD_LANES) == 0 &&
      (reg_w >= 7 || 2 * reg_w >= reg_n)) {
    /* 32 registers: two vectors of output channels by at most 14 positions (28
    ** accumulators), so each broadcast feeds two FMAs and each kernel vector up
    ** to 14: 88-100% of the FMA peak on resnet-18's layers against 75-93% with
    ** one vector by up to 28 positions (AVX-512, measured); not where the width
    ** has no divisor of 7-14 but one up to 31 (17: 17 positions by one vector) */
    wide = 1;
    oc_bn = 2 * SIMD_LANES;
    ic_bn = tl_atvm_largest_divisor(ci.C, oc_bn);
    reg_n = reg_w;
  } else if (conv_blocked_ok(a, &ci) && SIMD_REGS >= 32 && ci.O % (2 * SIMD_LANES) == 0 &&
             reg_n > (SIMD_REGS - 4) / 2) {
    /* a row wider than two vectors' budget with no divisor of 7-14 (17, 19, 23:
    ** inception's 17x17 layers): two vectors of output channels all the same, the
    ** row in guarded tiles of at most 14 (conv_nchwc5_schedule: 17 = 9 + 8), each
    ** broadcast feeding two FMAs: 82-84% -> 91-99% of the FMA peak on the 17x17
    ** layers against one vector by 17 positions (AVX-512, measured) */
    oc_bn = 2 * SIMD_LANES;
    ic_bn = tl_atvm_largest_divisor(ci.C, oc_bn);
  } else if (conv_blocked_ok(a, &ci) && reg_n < 8 && oc_bn == SIMD_LANES && ci.O % (2 * oc_bn) == 0 &&
             reg_n <= rows_max(cfg, 2 * oc_bn, 31)) {
    oc_bn *= 2;
  }
  /* 16 registers, a 3x3 conv whose width is a multiple of 7: rows of 7 positions with kw
  ** unrolled (7 accumulators, three kernel vectors, the broadcasts), not 14 accumulators
  ** beside one kernel vector and a broadcast (all 16 ymm). AVX2 code on
  ** the AVX-512 development machine, in resnet-18 between its neighbours: the 3x3 stride-2
  ** steps 0.78-0.84 -> 0.68-0.76 ms. Rows of 8 (8-wide outputs) and the 3-channel stem were
  ** slower so (0.54 -> 0.65, 0.21 -> 0.24 ms) and keep the 14-position rows. */
  int short_kw = 0;
  if (conv_blocked_ok(a, &ci) && SIMD_REGS < 32 && oc_bn == SIMD_LANES && ci.KH == 3 && ci.KW == 3 &&
      ci.C >= SIMD_LANES && ci.OW % 7 == 0) {
    reg_n = 7;
    short_kw = 1;
  }
  int64_t s_ic[2] = {-1, ic_bn}, s_oc[2] = {-1, oc_bn}, s_ow[2] = {-1, reg_n};
  TRY(tl_cfg_fallback_split(cfg, "tile_ic", s_ic, 2));
  TRY(tl_cfg_fallback_split(cfg, "tile_oc", s_oc, 2));
  if (is1x1) {
    int64_t rows = wide ? (SIMD_REGS - 4) / 2 : rows_max(cfg, oc_bn, 31);
    int64_t oh_f = ci.OH > 1 && ci.OH % 2 == 0 && reg_n * 2 <= rows ? 2 : 1;
    tl_cfg_fallback_other(cfg, "tile_oh", (double)oh_f);
  } else {
    /* kw unrolled around short rows (up to 8 positions: 3-7% faster on AVX-512);
    ** around longer ones the unrolled body outgrows the loop buffers (30-40% slower) */
    tl_cfg_fallback_other(cfg, "unroll_kw", (wide && reg_n <= 8) || short_kw ? 1 : 0);
  }
  return tl_cfg_fallback_split(cfg, "tile_ow", s_ow, 2);
}

/* The channel-blocked compute (float32, any stride/padding/dilation):
**   pad_temp[n, c, y, x]       = the zero-padded data (only with padding)
**   kernel_vec[o/B, c, kh, kw, o%B] = kernel[o, c, kh, kw] (B = 16 output
**                                channels innermost, each block's weights
**                                contiguous; a weight-only stage)
**   conv2d_nchwc[n, oh, ow, o] = sum_{c,kh,kw} pad_temp[...] * kernel_vec[o/B, c, kh, kw, o%B]
**   conv2d_nchw[n, o, oh, ow]  = conv2d_nchwc[n, oh, ow, o] (injective)
** With the output channel the innermost axis of the accumulator and of the
** kernel, a block of oc_bn output channels is one contiguous vector and the
** data element is a broadcast scalar: the NCHW[x]c micro-kernel, whatever
** the output width. None of the stages depends on the config. When in[1]
** is already packed (5-D [O/B, C, KH, KW, B]: the graph executor packs
** constant weights once), kernel_vec is not built. */
static int e_var(tl_ctx *ctx, tl_dag *dag, const char *nm, uint32_t *v) {
  return tl_dag_var(ctx, dag, nm, TL_INT32, v);
}

static int e_lin(tl_ctx *ctx, tl_dag *dag, uint32_t a, int64_t s, uint32_t b, int64_t d,
                 uint32_t *out) {
  /* a * s + b * d */
  uint32_t cs, cd, x, y;
  TRY(tl_dag_const_int(ctx, dag, TL_INT32, s, &cs));
  TRY(tl_dag_const_int(ctx, dag, TL_INT32, d, &cd));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, a, cs, &x));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, b, cd, &y));
  return tl_dag_binary(ctx, dag, TL_EXPR_ADD, x, y, out);
}

/* The output-channel block of the packed weight: the largest power of two <= 16
** dividing O. */
static int64_t conv_block(int64_t O) {
  int64_t B = 1;
  while (B < 16 && O % (B * 2) == 0) B *= 2;
  return B;
}

static int conv_blocked_ok(const tl_atvm_args *a, const conv_info *ci) {
  if (a->dtype[0] != TL_FLOAT32 || a->dtype[1] != TL_FLOAT32) return 0;
  if (ci->out_dtype && strcmp(ci->out_dtype, "float32") != 0) return 0;
  return a->shape[1][1] == ci->C;   /* groups = 1 */
}

static int conv_nchwc_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in,
                              int nin, int *out, int max_out, int *nout) {
  conv_info ci;
  TRY(conv_info_of(ctx, a, 0, &ci));
  if (nin >= 2 && tl_dag_tensor_ndim(dag, in[0]) == 5)
    return nchwc5_compute(ctx, &ci, dag, in, out, max_out, nout, 0);
  if (!conv_blocked_ok(a, &ci) || nin < 2 || max_out < 1)
    return conv_compute_common(ctx, a, dag, in, nin, out, max_out, nout, 0);
  int data = in[0], kernel = in[1], rc;
  /* padding */
  if (ci.pad[0] || ci.pad[1] || ci.pad[2] || ci.pad[3]) {
    char attrs[160];
    snprintf(attrs, sizeof attrs, "{\"pad_before\":[0,0,%lld,%lld],\"pad_after\":[0,0,%lld,%lld]}",
             (long long)ci.pad[0], (long long)ci.pad[1], (long long)ci.pad[2], (long long)ci.pad[3]);
    int pn = 0, p;
    TRY(tl_topi_op(ctx, dag, "pad", &data, 1, attrs, &p, 1, &pn));
    data = p;
  }
  /* kernel_vec[O/B, C, KH, KW, B] */
  int64_t B = conv_block(ci.O);
  int packed = tl_dag_tensor_ndim(dag, kernel) == 5;
  if (packed) {
    const int64_t *ks = tl_dag_tensor_shape(dag, kernel);
    if (ks[0] * ks[4] != ci.O || ks[1] != ci.C || ks[2] != ci.KH || ks[3] != ci.KW)
      return tl_err(ctx, TL_E_SHAPE, "conv2d_NCHWc.x86: a packed kernel must be [O/B, C, KH, KW, B]");
    B = ks[4];
  } else {
    uint32_t ax[5], idx[4], body, cB, o;
    static const char *const nm[5] = {"ob", "c", "kh", "kw", "b"};
    for (int i = 0; i < 5; i++) TRY(e_var(ctx, dag, nm[i], &ax[i]));
    TRY(tl_dag_const_int(ctx, dag, TL_INT32, B, &cB));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, ax[0], cB, &o));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_ADD, o, ax[4], &idx[0]));
    idx[1] = ax[1], idx[2] = ax[2], idx[3] = ax[3];
    TRY(tl_dag_load(ctx, dag, kernel, 4, idx, &body));
    int64_t shape[5] = {ci.O / B, ci.C, ci.KH, ci.KW, B};
    int kv;
    TRY(tl_dag_compute(ctx, dag, "kernel_vec", "kernel_vec", 5, shape, ax, 1, &body,
                       TL_REDUCE_NONE, 0, NULL, 0, &kv));
    kernel = kv;
  }
  /* the blocked conv */
  uint32_t ax[4], rv[3], di[4], ki[5], lhs, rhs, body, cB;
  static const char *const nm[4] = {"n", "oh", "ow", "oc"};
  for (int i = 0; i < 4; i++) TRY(e_var(ctx, dag, nm[i], &ax[i]));
  TRY(tl_dag_reduce_axis(ctx, dag, "rc", ci.C, &rv[0]));
  TRY(tl_dag_reduce_axis(ctx, dag, "ry", ci.KH, &rv[1]));
  TRY(tl_dag_reduce_axis(ctx, dag, "rx", ci.KW, &rv[2]));
  di[0] = ax[0], di[1] = rv[0];
  TRY(e_lin(ctx, dag, ax[1], ci.stride[0], rv[1], ci.dil[0], &di[2]));
  TRY(e_lin(ctx, dag, ax[2], ci.stride[1], rv[2], ci.dil[1], &di[3]));
  TRY(tl_dag_const_int(ctx, dag, TL_INT32, B, &cB));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_FLOORDIV, ax[3], cB, &ki[0]));
  ki[1] = rv[0], ki[2] = rv[1], ki[3] = rv[2];
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_FLOORMOD, ax[3], cB, &ki[4]));
  TRY(tl_dag_load(ctx, dag, data, 4, di, &lhs));
  TRY(tl_dag_load(ctx, dag, kernel, 5, ki, &rhs));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, lhs, rhs, &body));
  int64_t cshape[4] = {ci.N, ci.OH, ci.OW, ci.O};
  int cv;
  TRY(tl_dag_compute(ctx, dag, "conv2d_nchwc", "conv2d_x86_blocked", 4, cshape, ax, 1, &body,
                     TL_REDUCE_SUM, 3, rv, 0, &cv));
  /* back to NCHW */
  uint32_t ox[4], oi[4], ob;
  static const char *const onm[4] = {"n", "oc", "oh", "ow"};
  for (int i = 0; i < 4; i++) TRY(e_var(ctx, dag, onm[i], &ox[i]));
  oi[0] = ox[0], oi[1] = ox[2], oi[2] = ox[3], oi[3] = ox[1];
  TRY(tl_dag_load(ctx, dag, cv, 4, oi, &ob));
  int64_t oshape[4] = {ci.N, ci.O, ci.OH, ci.OW};
  rc = tl_dag_compute(ctx, dag, "conv2d_nchw", "injective", 4, oshape, ox, 1, &ob,
                      TL_REDUCE_NONE, 0, NULL, 0, out);
  if (rc) return rc;
  *nout = 1;
  return TL_OK;
}

/* The outer (output) stage: n, oc, oh, ow -> par(n, oco, oho), owo, [ohi], owi, oci.
** Writes the attach node for the inner stage (owo, or par when at_par). */
static int conv_outer(tl_ctx *ctx, tl_sched *s, int O, int64_t oc_bn, int64_t oh_f, int64_t reg_n,
                      int at_par, int vec_oc, int *attach) {
  int n = 0, oc = 1, oh = 2, ow = 3, t[3], oco, oci, oho = oh, ohi = -1, owo, owi;
  TRY(tl_atvm_split_node(ctx, s, O, oc, 1, &oc_bn, t)); oco = t[0], oci = t[1];
  if (oh_f > 1) { TRY(tl_atvm_split_node(ctx, s, O, oh, 1, &oh_f, t)); oho = t[0], ohi = t[1]; }
  TRY(tl_atvm_split_node(ctx, s, O, ow, 1, &reg_n, t)); owo = t[0], owi = t[1];
  int order[7], no = 0;
  order[no++] = n, order[no++] = oco, order[no++] = oho, order[no++] = owo;
  if (ohi >= 0) order[no++] = ohi;
  if (vec_oc) order[no++] = owi, order[no++] = oci;
  else order[no++] = oci, order[no++] = owi;
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, no));
  int par, f3[3] = {n, oco, oho};
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, 3, &par));
  TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
  if (vec_oc) TRY(ann(ctx, s, O, oci, TL_ANN_VECTORIZE));
  else TRY(ann(ctx, s, O, owi, TL_ANN_VECTORIZE));
  *attach = at_par ? par : owo;
  return TL_OK;
}

/* Schedule of the channel-blocked compute. The outer stage (the group's
** NCHW output, or the blocked conv itself when the output has another
** shape) is tiled par(n, oc/oc_bn, oh/oh_f), ow/reg_n, [oh_f,] ...; the
** accumulating stage is computed at ow/reg_n (at the parallel loop for 1x1
** kernels) as ic/ic_bn, kh, [ic_bn, kw | kw, ic_bn], [oh_f,] reg_n
** (unrolled), oc_bn (vectorized): reg_n (x oh_f) vector accumulators, one
** kernel vector load and one broadcast data element per FMA row. */
static int conv_blocked_schedule(tl_atvm_cfg *cfg, const conv_info *ci, tl_sched *s, int CV) {
  tl_ctx *ctx = cfg->ctx;
  tl_dag *dag = tl_sched_dag(s);
  int64_t ic_bn = last_of(cfg, "tile_ic"), oc_bn = last_of(cfg, "tile_oc"),
          reg_n = last_of(cfg, "tile_ow");
  if (!ic_bn || !oc_bn || !reg_n) return tl_errcode(ctx);
  int is1x1 = ci->KH == 1 && ci->KW == 1;
  int64_t oh_f = is1x1 ? (int64_t)tl_cfg_other(cfg, "tile_oh") : 1;
  int unroll_kw = is1x1 ? 0 : tl_cfg_other(cfg, "unroll_kw") != 0;
  if (oh_f < 1 || ci->OH % oh_f != 0) oh_f = 1;
  reg_n = fit_tile(cfg, ci->OW, reg_n, oc_bn, oh_f);
  /* inline the injective stages except the output, the padding and the
  ** weight packing (both kept at root, computed once per call) */
  for (int i = 0; i < tl_sched_num_stages(s) - 1; i++) {
    if (i == CV || tl_sched_stage_op_kind(s, i) != TL_DAG_COMPUTE) continue;
    if (tl_dag_op_nreduce(dag, i) > 0) continue;
    const char *tag = tl_dag_op_tag(dag, i);
    if (i < CV && tag && (strncmp(tag, "injective,pad", 13) == 0 || strcmp(tag, "kernel_vec") == 0)) {
      int f[2] = {0, 1};
      TRY(tl_sched_fuse(ctx, s, i, 2, f));
      TRY(tl_sched_annotate(ctx, s, i, 0, TL_ANN_PARALLEL));
      continue;
    }
    TRY(tl_sched_compute_inline(ctx, s, i));
  }
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, CV));
  int last = tl_sched_num_stages(s) - 1, O, CC, t[3];
  const int64_t *ls = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, last, 0));
  int nchw_out = last != CV && tl_dag_tensor_ndim(dag, tl_sched_stage_tensor(s, last, 0)) == 4 &&
                 ls[0] == ci->N && ls[1] == ci->O && ls[2] == ci->OH && ls[3] == ci->OW;
  int attach;
  if (nchw_out) {
    /* O: n oc oh ow -> par(n, oco, oho), owo, [ohi], oci, owi */
    O = last, CC = CV;
    int oco, oci, oho = 2, ohi = -1, owo, owi;
    TRY(tl_atvm_split_node(ctx, s, O, 1, 1, &oc_bn, t)); oco = t[0], oci = t[1];
    if (oh_f > 1) { TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &oh_f, t)); oho = t[0], ohi = t[1]; }
    TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
    int order[7], no = 0;
    order[no++] = 0, order[no++] = oco, order[no++] = oho, order[no++] = owo;
    if (ohi >= 0) order[no++] = ohi;
    order[no++] = oci, order[no++] = owi;
    TRY(tl_atvm_reorder_nodes(ctx, s, O, order, no));
    int par, f3[3] = {0, oco, oho};
    TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, 3, &par));
    TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
    TRY(ann(ctx, s, O, owi, TL_ANN_VECTORIZE));
    attach = is1x1 ? par : owo;
  } else {
    /* the blocked conv is the outer stage: n oh ow oc -> par(n, oco, oho), owo, [ohi], owi, oci */
    int ns;
    TRY(tl_sched_cache_write(ctx, s, CV, "local", &ns));
    O = find(s, cname), CC = ns;
    int oho = 1, ohi = -1, owo, owi, oco, oci;
    if (oh_f > 1) { TRY(tl_atvm_split_node(ctx, s, O, 1, 1, &oh_f, t)); oho = t[0], ohi = t[1]; }
    TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &reg_n, t)); owo = t[0], owi = t[1];
    TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &oc_bn, t)); oco = t[0], oci = t[1];
    int order[7], no = 0;
    order[no++] = 0, order[no++] = oco, order[no++] = oho, order[no++] = owo;
    if (ohi >= 0) order[no++] = ohi;
    order[no++] = owi, order[no++] = oci;
    TRY(tl_atvm_reorder_nodes(ctx, s, O, order, no));
    int par, f3[3] = {0, oco, oho};
    TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, 3, &par));
    TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
    TRY(ann(ctx, s, O, oci, TL_ANN_VECTORIZE));
    attach = is1x1 ? par : owo;
  }
  TRY(tl_sched_compute_at(ctx, s, CC, O, pos(s, O, attach)));
  /* CC: n oh ow oc | rc ry rx */
  int oho = 1, ohi = -1, owo, owi, oco, oci, rco, rci, ry = 5, rx = 6;
  if (oh_f > 1) { TRY(tl_atvm_split_node(ctx, s, CC, 1, 1, &oh_f, t)); oho = t[0], ohi = t[1]; }
  TRY(tl_atvm_split_node(ctx, s, CC, 2, 1, &reg_n, t)); owo = t[0], owi = t[1];
  TRY(tl_atvm_split_node(ctx, s, CC, 3, 1, &oc_bn, t)); oco = t[0], oci = t[1];
  TRY(tl_atvm_split_node(ctx, s, CC, 4, 1, &ic_bn, t)); rco = t[0], rci = t[1];
  int order[12], no = 0;
  order[no++] = 0, order[no++] = oco, order[no++] = oho, order[no++] = owo, order[no++] = rco;
  if (is1x1) order[no++] = rci, order[no++] = ry, order[no++] = rx;
  else if (unroll_kw) order[no++] = ry, order[no++] = rci, order[no++] = rx;
  else order[no++] = ry, order[no++] = rx, order[no++] = rci;
  /* oc_bn wider than the kernel's block B: oc_bn/B vectors of B lanes each */
  int64_t B = 1;
  while (B < 16 && ci->O % (B * 2) == 0) B *= 2;
  int ocio = -1;
  if (oc_bn > B && oc_bn % B == 0) {
    TRY(tl_atvm_split_node(ctx, s, CC, oci, 1, &B, t));
    ocio = t[0], oci = t[1];
  }
  /* one broadcast data element feeds the oc_bn/B kernel vectors */
  if (ohi >= 0) order[no++] = ohi;
  order[no++] = owi;
  if (ocio >= 0) order[no++] = ocio;
  order[no++] = oci;
  TRY(tl_atvm_reorder_nodes(ctx, s, CC, order, no));
  if (unroll_kw) TRY(ann(ctx, s, CC, rx, TL_ANN_UNROLL));
  if (ohi >= 0) TRY(ann(ctx, s, CC, ohi, TL_ANN_UNROLL));
  if (ocio >= 0) TRY(ann(ctx, s, CC, ocio, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, owi, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, oci, TL_ANN_VECTORIZE));
  return TL_OK;
}

static int conv_nchwc_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  conv_info ci;
  TRY(conv_info_of(ctx, a, 0, &ci));
  int CV = tl_atvm_stage_by_tag(s, "conv2d_NCHWc");
  if (CV >= 0) return conv_nchwc5_schedule(cfg, &ci, s, CV);
  CV = tl_atvm_stage_by_tag(s, "conv2d_x86_blocked");
  if (CV >= 0) return conv_blocked_schedule(cfg, &ci, s, CV);
  int C = tl_atvm_stage_by_tag(s, "conv2d_nchw");
  if (C < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_NCHWc.x86: no conv2d_nchw stage");
  TRY(tl_atvm_inline_injective(ctx, s, C));
  int64_t ic_bn = last_of(cfg, "tile_ic"), oc_bn = last_of(cfg, "tile_oc"),
          reg_n = last_of(cfg, "tile_ow");
  if (!ic_bn || !oc_bn || !reg_n) return tl_errcode(ctx);
  int is1x1 = ci.KH == 1 && ci.KW == 1;
  int64_t oh_f = is1x1 ? (int64_t)tl_cfg_other(cfg, "tile_oh") : 1;
  int unroll_kw = is1x1 ? 0 : tl_cfg_other(cfg, "unroll_kw") != 0;
  if (oh_f > 1 && ci.OH % oh_f != 0) oh_f = 1;
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, C));
  int last = tl_sched_num_stages(s) - 1, O, CC;
  if (last == C) {
    int ns;
    TRY(tl_sched_cache_write(ctx, s, C, "local", &ns));
    O = find(s, cname);
    CC = ns;
  } else if (tl_atvm_same_shape(s, C, last)) {
    O = last;
    CC = C;
  } else {
    /* an output of another shape: the anchor at root, the output left to its defaults */
    int ns;
    TRY(tl_sched_cache_write(ctx, s, C, "local", &ns));
    O = find(s, cname);
    CC = ns;
  }
  int attach;
  TRY(pad_at_root(ctx, s, "pad_temp"));
  TRY(conv_outer(ctx, s, O, oc_bn, oh_f, reg_n, is1x1, 0, &attach));
  TRY(tl_sched_compute_at(ctx, s, CC, O, pos(s, O, attach)));
  /* the inner (accumulating) stage: n oc oh ow | rc ry rx */
  int oc = 1, oh = 2, ow = 3, rc = 4, ry = 5, rx = 6, t[3];
  int oco, oci, oho = oh, ohi = -1, owo, owi, rco, rci;
  TRY(tl_atvm_split_node(ctx, s, CC, oc, 1, &oc_bn, t)); oco = t[0], oci = t[1];
  if (oh_f > 1) { TRY(tl_atvm_split_node(ctx, s, CC, oh, 1, &oh_f, t)); oho = t[0], ohi = t[1]; }
  TRY(tl_atvm_split_node(ctx, s, CC, ow, 1, &reg_n, t)); owo = t[0], owi = t[1];
  TRY(tl_atvm_split_node(ctx, s, CC, rc, 1, &ic_bn, t)); rco = t[0], rci = t[1];
  int order[12], no = 0;
  order[no++] = 0, order[no++] = oco, order[no++] = oho, order[no++] = owo, order[no++] = rco;
  if (is1x1) {
    order[no++] = rci, order[no++] = ry, order[no++] = rx, order[no++] = ohi >= 0 ? ohi : -1;
    if (ohi < 0) no--;
  } else if (unroll_kw) {
    order[no++] = ry, order[no++] = rci, order[no++] = rx;
  } else {
    order[no++] = ry, order[no++] = rx, order[no++] = rci;
  }
  /* NCHW: ow is the contiguous axis, so the reg_n block is the vector and
  ** the oc_bn block of accumulators is the loop around it */
  order[no++] = oci, order[no++] = owi;
  TRY(tl_atvm_reorder_nodes(ctx, s, CC, order, no));
  if (unroll_kw) TRY(ann(ctx, s, CC, rx, TL_ANN_UNROLL));
  if (ohi >= 0) TRY(ann(ctx, s, CC, ohi, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, owi, TL_ANN_VECTORIZE));
  return TL_OK;
}

/* The graph executor packs a constant float32 weight to [O/B, C, KH, KW, B] once
** (conv_nchwc_deploy, through tl_atvm_template_deploy_input), so the task
** measures that kernel too. */
static int conv_nchwc_deployed_input(const tl_atvm_args *a, int i, int *ndim, int64_t *shape) {
  if (i != 1) return 0;
  tl_ctx *ctx = tl_ctx_new();
  conv_info ci;
  int ok = conv_info_of(ctx, a, 0, &ci) == TL_OK && conv_blocked_ok(a, &ci);
  tl_ctx_free(ctx);
  if (!ok) return 0;
  int64_t B = conv_block(ci.O);
  *ndim = 5;
  shape[0] = ci.O / B, shape[1] = ci.C, shape[2] = ci.KH, shape[3] = ci.KW, shape[4] = B;
  return 1;
}

/* OIHW -> [O/B, C, KH, KW, B]: a block of B output channels innermost. */
static void conv_nchwc_deploy(const tl_atvm_args *a, int i, const void *src, void *dst) {
  (void)i;
  tl_atvm_pack_kernel_oihw(a, conv_block(a->shape[1][0]), src, dst);
}

static int dw_blocked_ok(const tl_atvm_args *a, const conv_info *ci);

/* The graph's blocked inputs under cfg (AlterOpLayout's NCHW[x]c form):
** data [N, C/ib, H, W, ib], kernel [O/ob, C, KH, KW, ob] (depthwise: ib = ob,
** kernel [C/ob, 1, KH, KW, ob]), ib and ob the last factors of tile_ic and
** tile_oc (the depthwise block is tile_oc's). */
static int nchwc_blocked_input(tl_atvm_cfg *cfg, const tl_atvm_args *a, int i, int *ndim,
                               int64_t *shape, int depthwise) {
  conv_info ci;
  if (i > 1 || conv_info_of(cfg->ctx, a, depthwise, &ci)) return 0;
  if (depthwise ? !dw_blocked_ok(a, &ci) : !conv_blocked_ok(a, &ci)) return 0;
  int64_t ob = last_of(cfg, "tile_oc"), ib = depthwise ? ob : last_of(cfg, "tile_ic");
  if (ib < 1 || ob < 1 || ci.C % ib || ci.O % ob) return 0;
  *ndim = 5;
  if (i == 0) {
    int64_t d[5] = {ci.N, ci.C / ib, ci.H, ci.W, ib};
    memcpy(shape, d, sizeof d);
  } else {
    int64_t k[5] = {ci.O / ob, depthwise ? 1 : ci.C, ci.KH, ci.KW, ob};
    memcpy(shape, k, sizeof k);
  }
  return 1;
}

static int conv_nchwc_blocked_input(tl_atvm_cfg *cfg, const tl_atvm_args *a, int i, int *ndim,
                                    int64_t *shape) {
  return nchwc_blocked_input(cfg, a, i, ndim, shape, 0);
}

const tl_atvm_template tl_x86_conv2d_nchwc = {"conv2d_NCHWc.x86",       conv_nchwc_define,
                                              conv_nchwc_compute,       conv_nchwc_schedule,
                                              conv_nchwc_deployed_input, conv_nchwc_deploy,
                                              TL_TMPL_FALLBACK_DEPLOYS, conv_nchwc_blocked_input};

/* ---- depthwise_conv2d_NCHWc.x86 --------------------------------------------------- */

static int dw_blocked_ok(const tl_atvm_args *a, const conv_info *ci) {
  if (a->dtype[0] != TL_FLOAT32 || a->dtype[1] != TL_FLOAT32) return 0;
  if (ci->out_dtype && strcmp(ci->out_dtype, "float32") != 0) return 0;
  return a->shape[1][1] == 1 && a->shape[1][0] == ci->C;   /* channel multiplier 1 */
}

/* the channel block of the blocked depthwise compute: the largest power of two <= 16 dividing C */
static int64_t dw_block(int64_t C) {
  int64_t B = 1;
  while (B < 16 && C % (B * 2) == 0) B *= 2;
  return B;
}

static int dw_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  conv_info ci;
  TRY(conv_info_of(cfg->ctx, a, 1, &ci));
  if (dw_blocked_ok(a, &ci))
    cfg->flop = 2.0 * (double)(ci.N * ci.C * ci.OH * ci.OW) * (double)(ci.KH * ci.KW);
  TRY(define_split2(cfg, "tile_ic", ci.C, 2));
  TRY(define_split2(cfg, "tile_oc", ci.O, 2));
  TRY(define_split2(cfg, "tile_ow", ci.OW, 2));
  TRY(filter_ow64(cfg, 2));
  int64_t oc_bn = tl_atvm_largest_divisor(ci.O, SIMD_LANES);
  int64_t ic_bn = tl_atvm_largest_divisor(ci.C, oc_bn);
  /* the blocked compute keeps reg_n vector accumulators plus the data and
  ** kernel vectors in registers: at most 16 on AVX-512 (28 spilled,
  ** measured), within the register budget otherwise */
  int64_t reg_n = tl_atvm_largest_divisor(ci.OW, rows_max(cfg, oc_bn, dw_blocked_ok(a, &ci) ? 16 : 31));
  if (dw_blocked_ok(a, &ci) && SIMD_REGS >= 32 && ci.C % (2 * SIMD_LANES) == 0) {
    /* the block conv2d_NCHWc's fallback gives these channels (two vectors), so
    ** no layout transform comes between them; the same 16 accumulators */
    oc_bn = ic_bn = 2 * SIMD_LANES;
    reg_n = tl_atvm_largest_divisor(ci.OW, 8);
  }
  int64_t s_ic[2] = {-1, ic_bn}, s_oc[2] = {-1, oc_bn}, s_ow[2] = {-1, reg_n};
  TRY(tl_cfg_fallback_split(cfg, "tile_ic", s_ic, 2));
  TRY(tl_cfg_fallback_split(cfg, "tile_oc", s_oc, 2));
  return tl_cfg_fallback_split(cfg, "tile_ow", s_ow, 2);
}

/* The channel-blocked depthwise compute (float32, channel multiplier 1):
**   data_vec[n, cb, y, x, b]  = pad(data)[n, cb*B + b, y, x]  (NCHW -> NCHW[B]c,
**                               the padding folded in; one pass at root)
**   kernel_vec[cb, kh, kw, b] = kernel[cb*B + b, 0, kh, kw]
**   depthwise_nchwc[n, cb, oh, ow, b] = sum_{ry,rx} data_vec[n, cb, oh*s + ry*d, ow*s + rx*d, b]
**                                                   * kernel_vec[cb, ry, rx, b]
**   depthwise_nchw[n, c, oh, ow] = depthwise_nchwc[n, c/B, oh, ow, c%B]  (injective)
** B = 16 channels (fewer when C is not a multiple): a block of channels is one
** contiguous vector in the data, the kernel and the accumulator, whatever the
** stride. No stage depends on the config. */
static int dw_blocked_compute(tl_ctx *ctx, const conv_info *ci, tl_dag *dag, const int *in,
                              int *out, int *nout) {
  int data = in[0], kernel = in[1];
  int64_t B = dw_block(ci->C);
  uint32_t cB;
  TRY(tl_dag_const_int(ctx, dag, TL_INT32, B, &cB));
  if (ci->pad[0] || ci->pad[1] || ci->pad[2] || ci->pad[3]) {
    char attrs[160];
    snprintf(attrs, sizeof attrs, "{\"pad_before\":[0,0,%lld,%lld],\"pad_after\":[0,0,%lld,%lld]}",
             (long long)ci->pad[0], (long long)ci->pad[1], (long long)ci->pad[2], (long long)ci->pad[3]);
    int pn = 0, p;
    TRY(tl_topi_op(ctx, dag, "pad", &data, 1, attrs, &p, 1, &pn));
    data = p;
  }
  const int64_t *ps = tl_dag_tensor_shape(dag, data);
  int64_t PH = ps[2], PW = ps[3];
  { /* data_vec */
    uint32_t ax[5], idx[4], c, body;
    static const char *const nm[5] = {"n", "cb", "y", "x", "b"};
    for (int i = 0; i < 5; i++) TRY(e_var(ctx, dag, nm[i], &ax[i]));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, ax[1], cB, &c));
    idx[0] = ax[0], idx[2] = ax[2], idx[3] = ax[3];
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_ADD, c, ax[4], &idx[1]));
    TRY(tl_dag_load(ctx, dag, data, 4, idx, &body));
    int64_t shape[5] = {ci->N, ci->C / B, PH, PW, B};
    TRY(tl_dag_compute(ctx, dag, "data_vec", "data_vec", 5, shape, ax, 1, &body, TL_REDUCE_NONE,
                       0, NULL, 0, &data));
  }
  { /* kernel_vec */
    uint32_t ax[4], idx[4], c, zero, body;
    static const char *const nm[4] = {"cb", "kh", "kw", "b"};
    for (int i = 0; i < 4; i++) TRY(e_var(ctx, dag, nm[i], &ax[i]));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, ax[0], cB, &c));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_ADD, c, ax[3], &idx[0]));
    TRY(tl_dag_const_int(ctx, dag, TL_INT32, 0, &zero));
    idx[1] = zero, idx[2] = ax[1], idx[3] = ax[2];
    TRY(tl_dag_load(ctx, dag, kernel, 4, idx, &body));
    int64_t shape[4] = {ci->C / B, ci->KH, ci->KW, B};
    TRY(tl_dag_compute(ctx, dag, "kernel_vec", "kernel_vec", 4, shape, ax, 1, &body,
                       TL_REDUCE_NONE, 0, NULL, 0, &kernel));
  }
  uint32_t ax[5], rv[2], di[5], ki[4], lhs, rhs, body;
  static const char *const nm[5] = {"n", "cb", "oh", "ow", "b"};
  for (int i = 0; i < 5; i++) TRY(e_var(ctx, dag, nm[i], &ax[i]));
  TRY(tl_dag_reduce_axis(ctx, dag, "ry", ci->KH, &rv[0]));
  TRY(tl_dag_reduce_axis(ctx, dag, "rx", ci->KW, &rv[1]));
  di[0] = ax[0], di[1] = ax[1], di[4] = ax[4];
  TRY(e_lin(ctx, dag, ax[2], ci->stride[0], rv[0], ci->dil[0], &di[2]));
  TRY(e_lin(ctx, dag, ax[3], ci->stride[1], rv[1], ci->dil[1], &di[3]));
  ki[0] = ax[1], ki[1] = rv[0], ki[2] = rv[1], ki[3] = ax[4];
  TRY(tl_dag_load(ctx, dag, data, 5, di, &lhs));
  TRY(tl_dag_load(ctx, dag, kernel, 4, ki, &rhs));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, lhs, rhs, &body));
  int64_t cshape[5] = {ci->N, ci->C / B, ci->OH, ci->OW, B};
  int cv;
  TRY(tl_dag_compute(ctx, dag, "depthwise_nchwc", "depthwise_x86_blocked", 5, cshape, ax, 1,
                     &body, TL_REDUCE_SUM, 2, rv, 0, &cv));
  uint32_t ox[4], oi[5], ob;
  static const char *const onm[4] = {"n", "c", "oh", "ow"};
  for (int i = 0; i < 4; i++) TRY(e_var(ctx, dag, onm[i], &ox[i]));
  oi[0] = ox[0], oi[2] = ox[2], oi[3] = ox[3];
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_FLOORDIV, ox[1], cB, &oi[1]));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_FLOORMOD, ox[1], cB, &oi[4]));
  TRY(tl_dag_load(ctx, dag, cv, 5, oi, &ob));
  int64_t oshape[4] = {ci->N, ci->C, ci->OH, ci->OW};
  TRY(tl_dag_compute(ctx, dag, "depthwise_nchw", "injective", 4, oshape, ox, 1, &ob,
                     TL_REDUCE_NONE, 0, NULL, 0, out));
  *nout = 1;
  return TL_OK;
}

static int dw_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                      int *out, int max_out, int *nout) {
  conv_info ci;
  TRY(conv_info_of(ctx, a, 1, &ci));
  if (nin >= 2 && tl_dag_tensor_ndim(dag, in[0]) == 5)
    return nchwc5_compute(ctx, &ci, dag, in, out, max_out, nout, 1);
  if (dw_blocked_ok(a, &ci) && nin >= 2 && max_out >= 1 && tl_dag_tensor_ndim(dag, in[1]) == 4)
    return dw_blocked_compute(ctx, &ci, dag, in, out, nout);
  return conv_compute_common(ctx, a, dag, in, nin, out, max_out, nout, 1);
}

/* Schedule of the blocked depthwise compute: the packing stages at root
** (parallel, the padding inlined into data_vec); the NCHW output tiled
** par(n, c/B, oh), ow/reg_n, c%B, reg_n (vectorized), with the accumulation
** computed at ow/reg_n as ry, rx, reg_n (unrolled), vec (vectorized):
** reg_n vector accumulators, one kernel vector per (ry, rx) for all of them.
** vec = tile_oc's block when it divides B (else B). */
static int dw_blocked_schedule(tl_atvm_cfg *cfg, const conv_info *ci, tl_sched *s, int CV) {
  tl_ctx *ctx = cfg->ctx;
  tl_dag *dag = tl_sched_dag(s);
  int64_t oc_bn = last_of(cfg, "tile_oc"), reg_n = last_of(cfg, "tile_ow");
  if (!oc_bn || !reg_n) return tl_errcode(ctx);
  int64_t B = dw_block(ci->C);
  int64_t vec = oc_bn <= B && B % oc_bn == 0 ? oc_bn : B;
  for (int i = 0; i < tl_sched_num_stages(s) - 1; i++) {
    if (i == CV || tl_sched_stage_op_kind(s, i) != TL_DAG_COMPUTE) continue;
    if (tl_dag_op_nreduce(dag, i) > 0) continue;
    const char *tag = tl_dag_op_tag(dag, i);
    if (i < CV && tag && (strcmp(tag, "data_vec") == 0 || strcmp(tag, "kernel_vec") == 0)) {
      if (strcmp(tag, "data_vec") == 0) {
        /* par(n cb y), x, b (vectorized: B strided loads, one vector
        ** store; 5-10% faster than unrolled scalar copies, measured) */
        int f[3] = {0, 1, 2};
        TRY(tl_sched_fuse(ctx, s, i, 3, f));
        TRY(ann(ctx, s, i, node_at(s, i, 2), TL_ANN_VECTORIZE));
      }
      TRY(tl_sched_annotate(ctx, s, i, 0, TL_ANN_PARALLEL));
      continue;
    }
    TRY(tl_sched_compute_inline(ctx, s, i));
  }
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, CV));
  int last = tl_sched_num_stages(s) - 1, O, CC, t[3], attach;
  const int64_t *ls = tl_dag_tensor_shape(dag, tl_sched_stage_tensor(s, last, 0));
  int nchw_out = last != CV && tl_dag_tensor_ndim(dag, tl_sched_stage_tensor(s, last, 0)) == 4 &&
                 ls[0] == ci->N && ls[1] == ci->C && ls[2] == ci->OH && ls[3] == ci->OW;
  if (nchw_out) {
    /* O: n c oh ow -> par(n, cb, oh), owo, ci, owi (vectorized) */
    O = last, CC = CV;
    int cb, cin, owo, owi;
    TRY(tl_atvm_split_node(ctx, s, O, 1, 1, &B, t)); cb = t[0], cin = t[1];
    TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
    int order[6] = {0, cb, 2, owo, cin, owi};
    TRY(tl_atvm_reorder_nodes(ctx, s, O, order, 6));
    int par, f3[3] = {0, cb, 2};
    TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, 3, &par));
    TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
    TRY(ann(ctx, s, O, owi, TL_ANN_VECTORIZE));
    attach = owo;
  } else {
    /* the blocked stage is the outer one: n cb oh ow b -> par(n, cb, oh), owo, owi, b */
    int ns;
    TRY(tl_sched_cache_write(ctx, s, CV, "local", &ns));
    O = find(s, cname), CC = ns;
    TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &reg_n, t));
    int owo = t[0], par, f3[3] = {0, 1, 2};
    TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, 3, &par));
    TRY(ann(ctx, s, O, par, TL_ANN_PARALLEL));
    TRY(ann(ctx, s, O, node_at(s, O, tl_sched_num_iters(s, O) - 1), TL_ANN_VECTORIZE));
    attach = owo;
  }
  TRY(tl_sched_compute_at(ctx, s, CC, O, pos(s, O, attach)));
  /* CC: n cb oh ow b | ry rx -> n cb oh owo, [bo], ry, rx, owi (unrolled), bi (vectorized) */
  int owo, owi, bo = -1, bi = 4, ry = 5, rx = 6;
  TRY(tl_atvm_split_node(ctx, s, CC, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
  if (vec < B) { TRY(tl_atvm_split_node(ctx, s, CC, 4, 1, &vec, t)); bo = t[0], bi = t[1]; }
  int order[10], no = 0;
  order[no++] = 0, order[no++] = 1, order[no++] = 2, order[no++] = owo;
  if (bo >= 0) order[no++] = bo;
  order[no++] = ry, order[no++] = rx, order[no++] = owi, order[no++] = bi;
  TRY(tl_atvm_reorder_nodes(ctx, s, CC, order, no));
  TRY(ann(ctx, s, CC, owi, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, bi, TL_ANN_VECTORIZE));
  return TL_OK;
}

static int dw_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  int CV5 = tl_atvm_stage_by_tag(s, "depthwise_conv2d_NCHWc");
  if (CV5 >= 0) {
    conv_info ci;
    TRY(conv_info_of(ctx, a, 1, &ci));
    return dw_nchwc5_schedule(cfg, &ci, s, CV5);
  }
  int CV = tl_atvm_stage_by_tag(s, "depthwise_x86_blocked");
  if (CV >= 0) {
    conv_info ci;
    TRY(conv_info_of(ctx, a, 1, &ci));
    return dw_blocked_schedule(cfg, &ci, s, CV);
  }
  int C = tl_atvm_stage_by_tag(s, "depthwise_conv2d_nchw");
  if (C < 0) return tl_err(ctx, TL_E_SCHED, "depthwise_conv2d_NCHWc.x86: no depthwise stage");
  TRY(tl_atvm_inline_injective(ctx, s, C));
  int64_t oc_bn = last_of(cfg, "tile_oc"), reg_n = last_of(cfg, "tile_ow");
  if (!oc_bn || !reg_n) return tl_errcode(ctx);
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, C));
  int last = tl_sched_num_stages(s) - 1, O, CC, attach;
  if (last != C && tl_atvm_same_shape(s, C, last)) {
    O = last;
    CC = C;
  } else {
    int ns;
    TRY(tl_sched_cache_write(ctx, s, C, "local", &ns));
    O = find(s, cname);
    CC = ns;
  }
  TRY(pad_at_root(ctx, s, "PaddedInput"));
  TRY(conv_outer(ctx, s, O, oc_bn, 1, reg_n, 0, 0, &attach));
  TRY(tl_sched_compute_at(ctx, s, CC, O, pos(s, O, attach)));
  /* the accumulating stage: n c oh ow | ry rx -> ..., ry, rx, c_bn, ow_inner (vectorized) */
  int t[2], oco, oci, owo, owi;
  TRY(tl_atvm_split_node(ctx, s, CC, 1, 1, &oc_bn, t)); oco = t[0], oci = t[1];
  TRY(tl_atvm_split_node(ctx, s, CC, 3, 1, &reg_n, t)); owo = t[0], owi = t[1];
  int order[8] = {0, oco, 2, owo, 4, 5, oci, owi};
  TRY(tl_atvm_reorder_nodes(ctx, s, CC, order, 8));
  TRY(ann(ctx, s, CC, 5, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, owi, TL_ANN_VECTORIZE));
  return TL_OK;
}

static int dw_blocked_input(tl_atvm_cfg *cfg, const tl_atvm_args *a, int i, int *ndim,
                            int64_t *shape) {
  return nchwc_blocked_input(cfg, a, i, ndim, shape, 1);
}

const tl_atvm_template tl_x86_depthwise_nchwc = {"depthwise_conv2d_NCHWc.x86", dw_define,
                                                 dw_compute, dw_schedule, NULL, NULL, 0,
                                                 dw_blocked_input};

/* ---- dense ---------------------------------------------------------------------------- */

static int dense_nopack_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  int64_t M = 0, N = 0, K = 0;
  TRY(tl_atvm_dense_dims(cfg->ctx, a, &M, &N, &K));
  TRY(define_split2(cfg, "tile_y", M, 2));
  TRY(define_split2(cfg, "tile_x", N, 2));
  TRY(define_split2(cfg, "tile_k", K, 2));
  /* fallback (deployed when no record covers the layer, TL_TMPL_FALLBACK_DEPLOYS): k split
  ** by two vectors and rfactored, one output per iteration; the default CPU schedule left
  ** a scalar chain of dependent FMAs (fc layers at 3-9 GB/s of weights; this: 90-120 GB/s
  ** from L3, DRAM-bound beyond, 1 thread, AVX-512) */
  int64_t tk = tl_atvm_largest_divisor(K, SIMD_LANES * 2);
  int64_t sy[2] = {-1, M}, sx[2] = {-1, 1}, sk[2] = {-1, tk};
  TRY(tl_cfg_fallback_split(cfg, "tile_y", sy, 2));
  TRY(tl_cfg_fallback_split(cfg, "tile_x", sx, 2));
  return tl_cfg_fallback_split(cfg, "tile_k", sk, 2);
}

/* The output stage O (2-D [M, N]) tiled by tile_y/tile_x; writes the fused
** parallel node and the inner nodes. */
static int dense_outer(tl_ctx *ctx, tl_sched *s, int O, const int64_t *ty, int nty,
                       const int64_t *tx, int ntx, int *par, int *yi, int *xi) {
  int yt[4], xt[4];
  TRY(tl_atvm_split_node(ctx, s, O, 0, nty - 1, ty + 1, yt));
  TRY(tl_atvm_split_node(ctx, s, O, 1, ntx - 1, tx + 1, xt));
  int order[8], no = 0;
  for (int i = 0; i < nty - 1; i++) order[no++] = yt[i], order[no++] = xt[i];
  order[no++] = yt[nty - 1], order[no++] = xt[ntx - 1];
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, no));
  int f2[2] = {yt[0], xt[0]};
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f2, 2, par));
  TRY(ann(ctx, s, O, *par, TL_ANN_PARALLEL));
  *yi = yt[nty - 1], *xi = xt[ntx - 1];
  return TL_OK;
}

static int dense_nopack_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  int C = tl_atvm_stage_by_tag(s, "dense");
  if (C < 0) return tl_err(ctx, TL_E_SCHED, "dense_nopack.x86: no dense stage");
  TRY(tl_atvm_inline_injective(ctx, s, C));
  int wy, wx, wk;
  const int64_t *ty = tl_cfg_ints(cfg, "tile_y", &wy), *tx = tl_cfg_ints(cfg, "tile_x", &wx),
                *tk = tl_cfg_ints(cfg, "tile_k", &wk);
  if (!ty || !tx || !tk) return tl_errcode(ctx);
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, C));
  /* C(y, x) = sum_k ... -> split k by vec, rfactor the inner part:
  ** C.rf(y, x, kk) = sum_ko ...; C(y, x) = sum_kk C.rf */
  int t[2], rf;
  TRY(tl_atvm_split_node(ctx, s, C, 2, 1, &tk[1], t));
  int kk = t[1];
  TRY(tl_sched_rfactor(ctx, s, C, pos(s, C, kk), 2, &rf));
  C = find(s, cname);
  int last = tl_sched_num_stages(s) - 1;
  int O = (last != C && tl_atvm_same_shape(s, C, last)) ? last : C;
  int par, yi, xi;
  TRY(dense_outer(ctx, s, O, ty, wy, tx, wx, &par, &yi, &xi));
  if (O != C) TRY(tl_sched_compute_at(ctx, s, C, O, pos(s, O, par)));
  if (O == C) {
    int p = tl_sched_num_iters(s, C) - 1;   /* kk, the reduction, innermost */
    TRY(tl_sched_annotate(ctx, s, C, p, TL_ANN_UNROLL));
  }
  if (O == C) {
    TRY(tl_sched_compute_at(ctx, s, rf, O, pos(s, O, par)));
  } else {
    /* the anchor runs per output element of the fused stage: rf per (y, x) */
    TRY(tl_sched_compute_at(ctx, s, rf, C, 1));
  }
  /* rf: y x kk | ko -> ko, (y x) fused, kk vectorized */
  int ni = tl_sched_num_iters(s, rf);
  if (ni == 4) {
    int order[4] = {3, 0, 1, 2}, f[2] = {1, 2};
    TRY(tl_sched_reorder(ctx, s, rf, 4, order));
    TRY(tl_sched_fuse(ctx, s, rf, 2, f));
    if (tl_sched_iter_extent(s, rf, 1) > 1 && tl_sched_iter_extent(s, rf, 1) <= 64)
      TRY(tl_sched_annotate(ctx, s, rf, 1, TL_ANN_UNROLL));
    TRY(tl_sched_annotate(ctx, s, rf, 2, TL_ANN_VECTORIZE));
  }
  return TL_OK;
}

const tl_atvm_template tl_x86_dense_nopack = {"dense_nopack.x86", dense_nopack_define,
                                              tl_atvm_dense_compute, dense_nopack_schedule,
                                              NULL, NULL, TL_TMPL_FALLBACK_DEPLOYS, NULL};

static int dense_pack_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  int64_t M = 0, N = 0, K = 0;
  TRY(tl_atvm_dense_dims(cfg->ctx, a, &M, &N, &K));
  TRY(define_split2(cfg, "tile_y", M, 3));
  TRY(define_split2(cfg, "tile_x", N, 3));
  TRY(define_split2(cfg, "tile_k", K, 2));
  TRY(define_split2(cfg, "tile_inner", M, 2));
  {
    /* filter: size[-1] <= 16 */
    tl_knob *kb = &cfg->space->knobs.v[3];
    unsigned char keep[4096];
    if (kb->dim <= 4096) {
      for (int64_t j = 0; j < kb->dim; j++) keep[j] = tl_knob_entity(kb, j)[1] <= 16;
      tl_atvm_knob_filter(cfg->space, 3, keep);
    }
  }
  /* TVM's defaults: x inner = largest divisor of N <= 2 lanes, y inner = the
  ** largest power of two <= 8 dividing M whose rows of accumulators fit the
  ** registers with the x vectors and a broadcast; the middle levels double
  ** while the outer extent is even and > 4 */
  int64_t xii = tl_atvm_largest_divisor(N, 2 * SIMD_LANES), NN = N / xii, xoi = 1;
  while (NN / xoi > 4 && (NN / xoi) % 2 == 0) xoi *= 2;
  int64_t yii = 8, xv = row_vectors(cfg, xii);
  while (M % yii || (yii > 1 && yii * xv + xv + 1 > SIMD_REGS)) yii /= 2;   /* rows fit */
  int64_t MM = M / yii, yoi = 1;
  while (MM / yoi > 4 && (MM / yoi) % 2 == 0) yoi *= 2;
  int64_t sy[3] = {-1, yoi, yii}, sx[3] = {-1, xoi, xii}, sk[2] = {-1, 1}, si[2] = {-1, yii};
  TRY(tl_cfg_fallback_split(cfg, "tile_y", sy, 3));
  TRY(tl_cfg_fallback_split(cfg, "tile_x", sx, 3));
  TRY(tl_cfg_fallback_split(cfg, "tile_k", sk, 2));
  return tl_cfg_fallback_split(cfg, "tile_inner", si, 2);
}

static int dense_pack_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  int C = tl_atvm_stage_by_tag(s, "dense");
  if (C < 0) return tl_err(ctx, TL_E_SCHED, "dense_pack.x86: no dense stage");
  TRY(tl_atvm_inline_injective(ctx, s, C));
  int wy, wx, wk, wi;
  const int64_t *ty = tl_cfg_ints(cfg, "tile_y", &wy), *tx = tl_cfg_ints(cfg, "tile_x", &wx),
                *tk = tl_cfg_ints(cfg, "tile_k", &wk), *tin = tl_cfg_ints(cfg, "tile_inner", &wi);
  if (!ty || !tx || !tk || !tin) return tl_errcode(ctx);
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, C));
  int last = tl_sched_num_stages(s) - 1, O, CC;
  if (last == C || !tl_atvm_same_shape(s, C, last)) {
    int ns;
    TRY(tl_sched_cache_write(ctx, s, C, "local", &ns));
    CC = ns;
    O = find(s, cname);
  } else {
    O = last;
    CC = C;
  }
  /* O: (xt, yt) fused and parallel, (yo, xo) fused, yi unrolled, xi vectorized */
  int yt[3], xt[3];
  TRY(tl_atvm_split_node(ctx, s, O, 0, 2, ty + 1, yt));
  TRY(tl_atvm_split_node(ctx, s, O, 1, 2, tx + 1, xt));
  int order[6] = {xt[0], yt[0], yt[1], xt[1], yt[2], xt[2]};
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, 6));
  int xyt, xyo;
  int f1[2] = {xt[0], yt[0]}, f2[2] = {yt[1], xt[1]};
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f1, 2, &xyt));
  TRY(ann(ctx, s, O, xyt, TL_ANN_PARALLEL));
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f2, 2, &xyo));
  TRY(ann(ctx, s, O, yt[2], TL_ANN_UNROLL));
  TRY(ann(ctx, s, O, xt[2], TL_ANN_VECTORIZE));
  TRY(tl_sched_compute_at(ctx, s, CC, O, pos(s, O, xyo)));
  /* CC: y x | k -> ko, [yo,] ki, [yi | y], x with x vectorized */
  int t[2], y = 0, x = 1;
  TRY(tl_atvm_split_node(ctx, s, CC, 2, 1, &tk[1], t));
  int ko = t[0], ki = t[1];
  int64_t inner = tin[1];
  if (inner > 1) {
    int yy[2];
    TRY(tl_atvm_split_node(ctx, s, CC, y, 1, &inner, yy));
    int o2[5] = {ko, yy[0], ki, yy[1], x};
    TRY(tl_atvm_reorder_nodes(ctx, s, CC, o2, 5));
    TRY(ann(ctx, s, CC, yy[0], TL_ANN_UNROLL));
    TRY(ann(ctx, s, CC, yy[1], TL_ANN_UNROLL));
  } else {
    int o2[4] = {ko, ki, y, x};
    TRY(tl_atvm_reorder_nodes(ctx, s, CC, o2, 4));
    TRY(ann(ctx, s, CC, y, TL_ANN_UNROLL));
  }
  TRY(ann(ctx, s, CC, ki, TL_ANN_UNROLL));
  TRY(ann(ctx, s, CC, x, TL_ANN_VECTORIZE));
  return TL_OK;
}

const tl_atvm_template tl_x86_dense_pack = {"dense_pack.x86", dense_pack_define, tl_atvm_dense_compute,
                                            dense_pack_schedule};
