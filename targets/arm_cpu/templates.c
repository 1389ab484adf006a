/*
** templates.c -- AutoTVM templates for ARM CPUs (target "llvm -device=arm_cpu ..."):
** conv2d_nchw_spatial_pack.arm_cpu, conv2d_nchw_winograd.arm_cpu,
** depthwise_conv2d_nchw.arm_cpu, depthwise_conv2d_nchw_spatial_pack.arm_cpu.
** Dense on arm_cpu goes through the CPU dense templates of targets/x86
** (dense_nopack.x86, dense_pack.x86), found by name in the registry: TVM's
** arm_cpu strategy has no tunable dense of its own.
**
** The knobs are TVM's (names, kinds, policies, definition order), so the
** records of TopHub's arm_cpu_v0.08.log map their entities to configs of
** ours with the same index. The computes are the plain topi operators
** (conv2d, conv2d_winograd with 4x4 output tiles, depthwise_conv2d),
** independent of the config, so injective consumers fuse after the anchor.
** The schedules express TVM's tilings for a CPU:
**
**   spatial_pack  the output tiled (co/VC, oh/VH, ow/VW) x (VH, VW, VC),
**                 (n, co/VC, oh/VH) fused and parallel; the accumulation
**                 (a VH x VW x VC register tile) computed per ow/VW, its
**                 loops ordered by reorder_0, kh/kw annotated by
**                 ann_reduce, vh/vw/vc by ann_spatial; a vectorized axis
**                 moves innermost (NEON: VC output channels in one vector,
**                 the data element broadcast). The padded data is computed
**                 once per call, parallel (TVM's data_vec).
**   winograd      F(4x4, 3x3): the weight transform (U) parallel over the
**                 output channels; the input transform (V) with the tiles
**                 split by tile_p, the inner VP tiles vectorized; the
**                 batched GEMM (M) with (eps, nu) fused and parallel, the
**                 tiles split by tile_p, the output channels by tile_k and
**                 the channels by tile_c, ann_reduce on the inner channels,
**                 ann_spatial on (k, p) inner; the output split by tile_k,
**                 the inverse transform computed per output-channel block.
**   depthwise     tile_c/tile_h/tile_w, the accumulation per (c, h, w/VW)
**                 with ann over (vh, vw, vc).
**   dw spatial    as spatial_pack, plus reorder_1 over the output's tile.
**
** As in TVM, an unroll annotation of an axis longer than 16 is an
** instantiation error; vec takes any length (loops that are not a power
** of two are left to the compiler). Fallback configs: fixed heuristics for
** 128-bit vectors (4 float32 lanes), not TopHub's reference log.
*/
#include "arm.h"
#include "../../core/topi/topi.h"

#include <stdio.h>
#include <string.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

#define MAX_UNROLL 16

/* ---- schedule helpers (node ids are stable across steps) ------------------------ */

static int pos(tl_sched *s, int st, int node) { return tl_sched_node_iter(s, st, node); }
static int node_at(tl_sched *s, int st, int p) { return tl_sched_iter_node(s, st, p); }
static int find(tl_sched *s, const char *name) { return tl_sched_stage_find(s, name); }

/* Annotate node; extent-1 loops are left alone (except parallel ones). */
static int ann(tl_ctx *ctx, tl_sched *s, int st, int node, int a) {
  int p = pos(s, st, node);
  if (p < 0) return tl_err(ctx, TL_E_INTERNAL, "arm_cpu template: annotate: lost an iterator");
  if (tl_sched_iter_extent(s, st, p) == 1) return TL_OK;
  return tl_sched_annotate(ctx, s, st, p, a);
}

/* A stage kept at root with its two outer loops fused and parallel (the
** padded data: computed once per call, the inner loops read no guards). */
static int root_parallel(tl_ctx *ctx, tl_sched *s, const char *name) {
  int p = find(s, name);
  if (p < 0 || tl_sched_stage_op_kind(s, p) != TL_DAG_COMPUTE) return TL_OK;
  if (tl_sched_stage_compute_at(s, p, NULL, NULL) != TL_CA_ROOT) return TL_OK;
  int f[2] = {0, 1};
  TRY(tl_sched_fuse(ctx, s, p, 2, f));
  return tl_sched_annotate(ctx, s, p, 0, TL_ANN_PARALLEL);
}

/* A root stage of another shape than the anchor (left by a fused
** consumer): its outer loop parallel. */
static int parallel_simple(tl_ctx *ctx, tl_sched *s, int st) {
  if (tl_sched_num_iters(s, st) < 1) return TL_OK;
  return ann(ctx, s, st, node_at(s, st, 0), TL_ANN_PARALLEL);
}

static const int64_t *sizes_of(tl_atvm_cfg *cfg, const char *name, int want) {
  int w;
  const int64_t *e = tl_cfg_ints(cfg, name, &w);
  if (e && w != want) {
    tl_err(cfg->ctx, TL_E_INTERNAL, "arm_cpu template: knob '%s' has %d sizes, expected %d", name,
           w, want);
    return NULL;
  }
  return e;
}

/* Apply an annotate entity (TL_AN_* codes) to nodes with lengths lens: an
** unroll beyond MAX_UNROLL is an instantiation error (as in TVM). The
** vectorized node (if any) is written to *vec (else -1). */
static int apply_ann(tl_atvm_cfg *cfg, tl_sched *s, int st, const char *knob, const int *nodes,
                     const int64_t *lens, int n, int *vec) {
  int w;
  const int64_t *e = tl_cfg_ints(cfg, knob, &w);
  if (!e) return tl_errcode(cfg->ctx);
  if (w != n)
    return tl_err(cfg->ctx, TL_E_INTERNAL, "arm_cpu template: knob '%s' annotates %d axes", knob, w);
  if (vec) *vec = -1;
  for (int i = 0; i < n; i++) {
    if (e[i] == TL_AN_UNROLL) {
      if (lens[i] > MAX_UNROLL)
        return tl_err(cfg->ctx, TL_E_SCHED, "%s: too large factor for unrolling (%lld > %d)", knob,
                      (long long)lens[i], MAX_UNROLL);
      TRY(ann(cfg->ctx, s, st, nodes[i], TL_ANN_UNROLL));
    } else if (e[i] == TL_AN_VEC) {
      TRY(ann(cfg->ctx, s, st, nodes[i], TL_ANN_VECTORIZE));
      if (vec && lens[i] > 1) *vec = nodes[i];
    }
  }
  return TL_OK;
}

static int define_split(tl_atvm_cfg *cfg, const char *name, int64_t len, int64_t max_factor) {
  int k = tl_atvm_space_define_split(cfg->ctx, cfg->space, name, len, "factors", 2, max_factor, -1,
                                     NULL, 0);
  return k < 0 ? tl_errcode(cfg->ctx) : TL_OK;
}

static int define_ann(tl_atvm_cfg *cfg, const char *name, int n, const char *policy) {
  return tl_atvm_space_define_annotate(cfg->ctx, cfg->space, name, n, policy, 0) < 0
             ? tl_errcode(cfg->ctx) : TL_OK;
}

static int define_reorder(tl_atvm_cfg *cfg, const char *name, int n, const int64_t *cands, int nc) {
  return tl_atvm_space_define_reorder(cfg->ctx, cfg->space, name, n, "candidate", 0, 0, cands, nc) < 0
             ? tl_errcode(cfg->ctx) : TL_OK;
}

static int fallback2(tl_atvm_cfg *cfg, const char *name, int64_t inner) {
  int64_t s[2] = {-1, inner};
  return tl_cfg_fallback_split(cfg, name, s, 2);
}

/* The inner size of the 2-way split knob name (0 when missing). */
static int64_t inner_of(tl_atvm_cfg *cfg, const char *name) {
  const int64_t *e = sizes_of(cfg, name, 2);
  return e ? e[1] : 0;
}

/* float32 lanes of the target's vectors (4 for NEON). */
#define LANES ((int64_t)(cfg->hw && cfg->hw->lanes > 0 ? cfg->hw->lanes : 4))

/* Where (c, h, w) sit among a stage's first four axes: NCHW stages, or the spatial pack's
** accumulation order [n, oh, ow, co] (NHWC). */
static void chw_of(int nhwc, int *c, int *h, int *w) {
  *c = nhwc ? 3 : 1, *h = nhwc ? 1 : 2, *w = nhwc ? 2 : 3;
}

/* O's (n, c, h, w) tiled by inner sizes (vc, vh, vw): n, c/vc, h/vh, w/vw
** [outer order], then the inner tile in order inner (a permutation of
** {vh, vw, vc} as 0, 1, 2); (n, c/vc, h/vh) fused and parallel. Writes the
** node to attach the accumulation at (w/vw). nhwc: O's axes are (n, h, w, c). */
static int tile_outer(tl_ctx *ctx, tl_sched *s, int O, int64_t vc, int64_t vh, int64_t vw,
                      const int *inner, int nhwc, int *attach) {
  int pc, ph, pw;
  chw_of(nhwc, &pc, &ph, &pw);
  int n = node_at(s, O, 0), c = node_at(s, O, pc), h = node_at(s, O, ph), w = node_at(s, O, pw);
  int t[2], co, ci, ho, hi, wo, wi;
  TRY(tl_atvm_split_node(ctx, s, O, c, 1, &vc, t)); co = t[0], ci = t[1];
  TRY(tl_atvm_split_node(ctx, s, O, h, 1, &vh, t)); ho = t[0], hi = t[1];
  TRY(tl_atvm_split_node(ctx, s, O, w, 1, &vw, t)); wo = t[0], wi = t[1];
  int tile[3] = {hi, wi, ci};
  int order[7] = {n, co, ho, wo, tile[inner[0]], tile[inner[1]], tile[inner[2]]};
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, 7));
  int par, f3[3] = {n, co, ho};
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f3, 3, &par));
  TRY(tl_sched_annotate(ctx, s, O, pos(s, O, par), TL_ANN_PARALLEL));
  *attach = wo;
  return TL_OK;
}

/* The start the spatial-pack and depthwise schedules share: the anchor stages of tag (tmpl
** names the template), the padded input pad kept at root and parallel, a last stage of another
** shape parallel, the output *O tiled by (vc, vh, vw) with the inner order inner (tile_outer;
** *attach as there). lname (128 bytes) gets the accumulation stage's name. */
static int pack_outer(tl_ctx *ctx, tl_sched *s, const char *tag, const char *tmpl, const char *pad,
                      int64_t vc, int64_t vh, int64_t vw, const int *inner, int nhwc, int *O,
                      int *attach, char *lname) {
  int L, other;
  TRY(tl_atvm_anchor_stages(ctx, s, tag, tmpl, O, &L, &other));
  char oname[128];
  snprintf(oname, sizeof oname, "%s", tl_sched_stage_name(s, *O));
  snprintf(lname, 128, "%s", tl_sched_stage_name(s, L));
  TRY(root_parallel(ctx, s, pad));
  if (other >= 0) TRY(parallel_simple(ctx, s, tl_sched_num_stages(s) - 1));
  *O = find(s, oname);
  return tile_outer(ctx, s, *O, vc, vh, vw, inner, nhwc, attach);
}

/* ---- conv2d_nchw_spatial_pack.arm_cpu ------------------------------------------------ */

#define SP_ACC "conv2d_nchw_sp"   /* the accumulation stage of sp_compute */

/* The fallback register tile for 128-bit vectors: VC a multiple of the
** lanes where the channels allow (up to two vectors), VW up to 4, VH 1. */
static void sp_fallback(tl_atvm_cfg *cfg, const tl_atvm_conv *ci, const char *co_knob) {
  int64_t vc = tl_atvm_largest_divisor(ci->O, 2 * LANES);
  int64_t vw = tl_atvm_largest_divisor(ci->OW, 4);
  if (fallback2(cfg, co_knob, vc) || fallback2(cfg, "tile_oh", 1) || fallback2(cfg, "tile_ow", vw))
    tl_clearerr(cfg->ctx);
  int64_t red[2] = {ci->KH <= MAX_UNROLL ? TL_AN_UNROLL : TL_AN_NONE,
                    ci->KW <= MAX_UNROLL ? TL_AN_UNROLL : TL_AN_NONE};
  tl_cfg_fallback_ints(cfg, "ann_reduce", red);
  int64_t spa[3] = {TL_AN_NONE, vw <= MAX_UNROLL ? TL_AN_UNROLL : TL_AN_NONE, TL_AN_VEC};
  tl_cfg_fallback_ints(cfg, "ann_spatial", spa);
}

static int sp_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(cfg->ctx, a, 0, &ci));
  TRY(define_split(cfg, "tile_co", ci.O, 0));
  TRY(define_split(cfg, "tile_oh", ci.OH, 0));
  TRY(define_split(cfg, "tile_ow", ci.OW, 0));
  /* [n, co, oh, ow, ci, kh, kw, vh, vw, vc] and [..., vc, vh, vw] */
  static const int64_t cands[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 9, 7, 8};
  TRY(define_reorder(cfg, "reorder_0", 10, cands, 2));
  TRY(define_ann(cfg, "ann_reduce", 2, "try_unroll"));
  TRY(define_ann(cfg, "ann_spatial", 3, "try_unroll_vec"));
  sp_fallback(cfg, &ci, "tile_co");
  return TL_OK;
}

/* The accumulation L computed at O's w/VW loop: its (n, c, h, w) split by
** (VC, VH, VW), ordered by the reorder knob over [n, c/VC, h/VH, w/VW,
** reduce..., vh, vw, vc] (nred reduce axes: ci, kh, kw or kh, kw), the
** reduce knob on (kh, kw), the spatial knob on (vh, vw, vc). nhwc: L's axes are (n, h, w, c)
** (the accumulation order of the spatial pack's compute: the VC channels of a tile are
** contiguous in the accumulation buffer, one vector each). */
static int sp_inner(tl_atvm_cfg *cfg, tl_sched *s, int O, int attach, int L, int nred,
                    int64_t vc, int64_t vh, int64_t vw, int nhwc, const tl_atvm_conv *ci) {
  tl_ctx *ctx = cfg->ctx;
  char lname[128];
  snprintf(lname, sizeof lname, "%s", tl_sched_stage_name(s, L));
  TRY(tl_sched_compute_at(ctx, s, L, O, pos(s, O, attach)));
  L = find(s, lname);
  int wr;
  const int64_t *re = tl_cfg_ints(cfg, "reorder_0", &wr);
  if (!re) return tl_errcode(ctx);
  int pc, ph, pw;
  chw_of(nhwc, &pc, &ph, &pw);
  int n = node_at(s, L, 0), co = node_at(s, L, pc), oh = node_at(s, L, ph), ow = node_at(s, L, pw);
  int red[3];
  for (int i = 0; i < nred; i++) red[i] = node_at(s, L, 4 + i);
  int t[2];
  TRY(tl_atvm_split_node(ctx, s, L, co, 1, &vc, t)); int coo = t[0], vcn = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, oh, 1, &vh, t)); int oho = t[0], vhn = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, ow, 1, &vw, t)); int owo = t[0], vwn = t[1];
  int axes[10], na = 0, order[10];
  axes[na++] = n, axes[na++] = coo, axes[na++] = oho, axes[na++] = owo;
  for (int i = 0; i < nred; i++) axes[na++] = red[i];
  axes[na++] = vhn, axes[na++] = vwn, axes[na++] = vcn;
  if (wr != na) return tl_err(ctx, TL_E_INTERNAL, "reorder_0 has %d axes, expected %d", wr, na);
  for (int i = 0; i < na; i++) order[i] = axes[re[i]];
  TRY(tl_atvm_reorder_nodes(ctx, s, L, order, na));
  int rk[2] = {red[nred - 2], red[nred - 1]};
  int64_t rl[2] = {ci->KH, ci->KW};
  TRY(apply_ann(cfg, s, L, "ann_reduce", rk, rl, 2, NULL));
  int spa[3] = {vhn, vwn, vcn}, vec;
  int64_t sl[3] = {vh, vw, vc};
  TRY(apply_ann(cfg, s, L, "ann_spatial", spa, sl, 3, &vec));
  if (vec >= 0) TRY(tl_atvm_move_innermost(ctx, s, L, vec, "arm_cpu"));
  return TL_OK;
}

static int sp_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 0, &ci));
  int64_t vc = inner_of(cfg, "tile_co"), vh = inner_of(cfg, "tile_oh"), vw = inner_of(cfg, "tile_ow");
  if (!vc || !vh || !vw) return tl_errcode(ctx);
  static const int inner[3] = {0, 1, 2};
  int O, attach;
  char lname[128];
  int C = find(s, SP_ACC), nhwc = C >= 0;   /* sp_compute's accumulation order, else topi's */
  if (nhwc) {
    /* the NCHW output (the unpack with the fused consumers) tiled, the accumulation stage
    ** computed per tile in its own order: no buffer of the whole accumulation */
    TRY(tl_atvm_inline_injective(ctx, s, C));
    C = find(s, SP_ACC);
    int last = tl_sched_num_stages(s) - 1;
    tl_dag *dag = tl_sched_dag(s);
    int lt = tl_sched_stage_tensor(s, last, 0);
    const int64_t *ls = tl_dag_tensor_shape(dag, lt);
    if (last != C && tl_dag_tensor_ndim(dag, lt) == 4 && ls[0] == ci.N && ls[1] == ci.O &&
        ls[2] == ci.OH && ls[3] == ci.OW) {
      TRY(root_parallel(ctx, s, "pad_temp"));
      int attach;
      TRY(tile_outer(ctx, s, last, vc, vh, vw, inner, 0, &attach));
      return sp_inner(cfg, s, last, attach, find(s, SP_ACC), 3, vc, vh, vw, 1, &ci);
    }
  }
  TRY(pack_outer(ctx, s, "conv2d_nchw", "conv2d_nchw_spatial_pack.arm_cpu", "pad_temp", vc, vh, vw,
                 inner, nhwc, &O, &attach, lname));
  return sp_inner(cfg, s, O, attach, find(s, lname), 3, vc, vh, vw, nhwc, &ci);
}

/* The constant weight deployed packed (TVM's kernel_vec of conv2d_nchw_spatial_pack with
** pre-packed weights): [O/B, C, KH, KW, B], a block of B output channels innermost, so a
** vector of output channels reads its weights with one contiguous load instead of a gather
** with the stride C*KH*KW. B is the largest power of two <= SP_BLOCK dividing O: the config's
** VC (tile_co) is a power of two for the channel counts of networks, and then either divides
** B or is a multiple of it, so the vector stays contiguous. float32 without groups only. */
#define SP_BLOCK 16

static int64_t sp_block(int64_t O) {
  int64_t b = 1;
  while (b < SP_BLOCK && O % (b * 2) == 0) b *= 2;
  return b;
}

static int sp_packable(const tl_atvm_args *a, tl_atvm_conv *ci) {
  tl_ctx *ctx = tl_ctx_new();
  int ok = tl_atvm_conv_of(ctx, a, 0, ci) == TL_OK && a->dtype[0] == TL_FLOAT32 &&
           a->dtype[1] == TL_FLOAT32 && a->shape[1][1] == ci->C &&
           (!ci->out_dtype || strcmp(ci->out_dtype, "float32") == 0);
  tl_ctx_free(ctx);
  return ok;
}

static int sp_deployed_input(const tl_atvm_args *a, int i, int *ndim, int64_t *shape) {
  tl_atvm_conv ci;
  if (i != 1 || !sp_packable(a, &ci)) return 0;
  int64_t B = sp_block(ci.O);
  *ndim = 5;
  shape[0] = ci.O / B, shape[1] = ci.C, shape[2] = ci.KH, shape[3] = ci.KW, shape[4] = B;
  return 1;
}

/* OIHW -> [O/B, C, KH, KW, B]. */
static void sp_deploy(const tl_atvm_args *a, int i, const void *src, void *dst) {
  (void)i;
  tl_atvm_pack_kernel_oihw(a, sp_block(a->shape[1][0]), src, dst);
}

/* The spatial pack's compute (float32 without groups; anything else is topi's conv2d):
**   pad_temp[n, c, y, x]     the zero-padded data (only with padding)
**   conv2d_nchw_sp[n, oh, ow, co] = sum_{ci, kh, kw} pad_temp[n, ci, oh*s + kh*d, ow*s + kw*d]
**                                  * W[co, ci, kh, kw]   (tag conv2d_nchw_spatial_pack)
**   conv2d_nchw[n, co, oh, ow] = conv2d_nchw_sp[n, oh, ow, co]   (injective)
** The output channel is the innermost axis of the accumulation (TVM's conv buffer
** [.., VH, VW, VC]), so the VC channels of a register tile are one contiguous vector in the
** accumulation buffer whatever the unrolling. W is the kernel (OIHW) or, deployed, the packed
** weight read as packed[co / B, ci, kh, kw, co % B] (contiguous in co as well). */
static int e_var(tl_ctx *ctx, tl_dag *dag, const char *nm, uint32_t *v) {
  return tl_dag_var(ctx, dag, nm, TL_INT32, v);
}

static int e_int(tl_ctx *ctx, tl_dag *dag, int64_t v, uint32_t *out) {
  return tl_dag_const_int(ctx, dag, TL_INT32, v, out);
}

/* a * s + b * d */
static int e_win(tl_ctx *ctx, tl_dag *dag, uint32_t a, int64_t s, uint32_t b, int64_t d, uint32_t *out) {
  uint32_t cs, cd, x, y;
  TRY(e_int(ctx, dag, s, &cs));
  TRY(e_int(ctx, dag, d, &cd));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, a, cs, &x));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, b, cd, &y));
  return tl_dag_binary(ctx, dag, TL_EXPR_ADD, x, y, out);
}

/* pad_temp of data [N, C, H, W] with ci's padding (data itself when there is none). */
static int sp_pad(tl_ctx *ctx, tl_dag *dag, const tl_atvm_conv *ci, int data, int *out) {
  const int64_t *p = ci->pad;   /* top, left, bottom, right */
  if (!p[0] && !p[1] && !p[2] && !p[3]) {
    *out = data;
    return TL_OK;
  }
  uint32_t ax[4], idx[4], cond = 0, body, zero;
  static const char *const nm[4] = {"i0", "i1", "i2", "i3"};
  for (int i = 0; i < 4; i++) TRY(e_var(ctx, dag, nm[i], &ax[i]));
  idx[0] = ax[0], idx[1] = ax[1];
  int64_t before[2] = {p[0], p[1]}, ext[2] = {ci->H, ci->W};
  for (int d = 0; d < 2; d++) {
    uint32_t b, e, lo, hi, both;
    TRY(e_int(ctx, dag, before[d], &b));
    TRY(e_int(ctx, dag, before[d] + ext[d], &e));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_SUB, ax[2 + d], b, &idx[2 + d]));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_GE, ax[2 + d], b, &lo));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_LT, ax[2 + d], e, &hi));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_AND, lo, hi, &both));
    if (cond) TRY(tl_dag_binary(ctx, dag, TL_EXPR_AND, cond, both, &cond));
    else cond = both;
  }
  TRY(tl_dag_load(ctx, dag, data, 4, idx, &body));
  TRY(tl_dag_const_float(ctx, dag, TL_FLOAT32, 0.0, &zero));
  TRY(tl_dag_select(ctx, dag, TL_EXPR_IF_THEN_ELSE, cond, body, zero, &body));
  int64_t shape[4] = {ci->N, ci->C, ci->H + p[0] + p[2], ci->W + p[1] + p[3]};
  return tl_dag_compute(ctx, dag, "pad_temp", "injective,pad", 4, shape, ax, 1, &body,
                        TL_REDUCE_NONE, 0, NULL, 0, out);
}

static int sp_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                      int *out, int max_out, int *nout) {
  tl_atvm_conv ci;
  if (nin < 2 || max_out < 1 || !sp_packable(a, &ci))
    return tl_atvm_conv2d_nchw_compute(ctx, a, dag, in, nin, out, max_out, nout);
  int kernel = in[1], packed = tl_dag_tensor_ndim(dag, kernel) == 5;
  int64_t B = 1;
  if (packed) {
    const int64_t *ks = tl_dag_tensor_shape(dag, kernel);
    B = ks[4];
    if (B < 1 || ks[0] * B != ci.O || ks[1] != ci.C || ks[2] != ci.KH || ks[3] != ci.KW)
      return tl_err(ctx, TL_E_SHAPE, "conv2d_nchw_spatial_pack.arm_cpu: a packed kernel must be "
                    "[O/B, C, KH, KW, B] for O=%lld, C=%lld, KH=%lld, KW=%lld", (long long)ci.O,
                    (long long)ci.C, (long long)ci.KH, (long long)ci.KW);
  }
  int data;
  TRY(sp_pad(ctx, dag, &ci, in[0], &data));
  uint32_t ax[4], rv[3], di[4], ki[5], lhs, rhs, body;
  static const char *const nm[4] = {"n", "oh", "ow", "co"};
  for (int i = 0; i < 4; i++) TRY(e_var(ctx, dag, nm[i], &ax[i]));
  TRY(tl_dag_reduce_axis(ctx, dag, "rc", ci.C, &rv[0]));
  TRY(tl_dag_reduce_axis(ctx, dag, "ry", ci.KH, &rv[1]));
  TRY(tl_dag_reduce_axis(ctx, dag, "rx", ci.KW, &rv[2]));
  di[0] = ax[0], di[1] = rv[0];
  TRY(e_win(ctx, dag, ax[1], ci.stride[0], rv[1], ci.dil[0], &di[2]));
  TRY(e_win(ctx, dag, ax[2], ci.stride[1], rv[2], ci.dil[1], &di[3]));
  if (packed) {
    uint32_t cB;
    TRY(e_int(ctx, dag, B, &cB));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_FLOORDIV, ax[3], cB, &ki[0]));
    TRY(tl_dag_binary(ctx, dag, TL_EXPR_FLOORMOD, ax[3], cB, &ki[4]));
  } else {
    ki[0] = ax[3];
  }
  ki[1] = rv[0], ki[2] = rv[1], ki[3] = rv[2];
  TRY(tl_dag_load(ctx, dag, data, 4, di, &lhs));
  TRY(tl_dag_load(ctx, dag, kernel, packed ? 5 : 4, ki, &rhs));
  TRY(tl_dag_binary(ctx, dag, TL_EXPR_MUL, lhs, rhs, &body));
  int64_t cshape[4] = {ci.N, ci.OH, ci.OW, ci.O};
  int acc;
  TRY(tl_dag_compute(ctx, dag, SP_ACC, "conv2d_nchw_spatial_pack", 4, cshape, ax, 1, &body,
                     TL_REDUCE_SUM, 3, rv, 0, &acc));
  uint32_t ox[4], oi[4], ob;
  static const char *const onm[4] = {"nn", "ff", "yy", "xx"};
  for (int i = 0; i < 4; i++) TRY(e_var(ctx, dag, onm[i], &ox[i]));
  oi[0] = ox[0], oi[1] = ox[2], oi[2] = ox[3], oi[3] = ox[1];
  TRY(tl_dag_load(ctx, dag, acc, 4, oi, &ob));
  int64_t oshape[4] = {ci.N, ci.O, ci.OH, ci.OW};
  TRY(tl_dag_compute(ctx, dag, "conv2d_nchw", "injective", 4, oshape, ox, 1, &ob, TL_REDUCE_NONE,
                     0, NULL, 0, out));
  *nout = 1;
  return TL_OK;
}

/* Untuned convolutions take the spatial pack's fallback config, as in TVM (where a template's
** fallback is the only schedule there is): it beats the generic default schedule. */
const tl_atvm_template tl_arm_conv2d_spatial_pack = {"conv2d_nchw_spatial_pack.arm_cpu", sp_define,
                                                     sp_compute, sp_schedule, sp_deployed_input,
                                                     sp_deploy, TL_TMPL_FALLBACK_DEPLOYS};

/* ---- depthwise_conv2d_nchw_spatial_pack.arm_cpu ------------------------------------- */

static int dsp_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(cfg->ctx, a, 1, &ci));
  TRY(define_split(cfg, "tile_co", ci.O, 0));
  TRY(define_split(cfg, "tile_oh", ci.OH, 0));
  TRY(define_split(cfg, "tile_ow", ci.OW, 0));
  /* reorder_0 over [n, c, oh, ow, kh, kw, vh, vw, vc]: [..., vh, vw, vc], [..., vc, vh, vw] */
  static const int64_t c0[18] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3, 4, 5, 8, 6, 7};
  TRY(define_reorder(cfg, "reorder_0", 9, c0, 2));
  /* reorder_1 over the output's [n, c, oh, ow, vh, vw, vc] */
  static const int64_t c1[21] = {0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 6, 4, 5, 0, 1, 2, 3, 4, 6, 5};
  TRY(define_reorder(cfg, "reorder_1", 7, c1, 3));
  TRY(define_ann(cfg, "ann_reduce", 2, "try_unroll"));
  TRY(define_ann(cfg, "ann_spatial", 3, "try_unroll_vec"));
  sp_fallback(cfg, &ci, "tile_co");
  return TL_OK;
}

static int dsp_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 1, &ci));
  int64_t vc = inner_of(cfg, "tile_co"), vh = inner_of(cfg, "tile_oh"), vw = inner_of(cfg, "tile_ow");
  int w1;
  const int64_t *r1 = tl_cfg_ints(cfg, "reorder_1", &w1);
  if (!vc || !vh || !vw || !r1) return tl_errcode(ctx);
  if (w1 != 7) return tl_err(ctx, TL_E_INTERNAL, "reorder_1 has %d axes", w1);
  /* reorder_1 permutes the tile (positions 4..6 = vh, vw, vc) */
  int inner[3] = {(int)r1[4] - 4, (int)r1[5] - 4, (int)r1[6] - 4};
  int O, attach;
  char lname[128];
  TRY(pack_outer(ctx, s, "depthwise_conv2d_nchw", "depthwise_conv2d_nchw_spatial_pack.arm_cpu",
                 "PaddedInput", vc, vh, vw, inner, 0, &O, &attach, lname));
  return sp_inner(cfg, s, O, attach, find(s, lname), 2, vc, vh, vw, 0, &ci);
}

const tl_atvm_template tl_arm_depthwise_spatial_pack = {
    "depthwise_conv2d_nchw_spatial_pack.arm_cpu", dsp_define, tl_atvm_depthwise_nchw_compute, dsp_schedule};

/* ---- depthwise_conv2d_nchw.arm_cpu --------------------------------------------------- */

static int dw_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(cfg->ctx, a, 1, &ci));
  TRY(define_split(cfg, "tile_c", ci.O, 0));
  TRY(define_split(cfg, "tile_h", ci.OH, 0));
  TRY(define_split(cfg, "tile_w", ci.OW, 0));
  TRY(define_ann(cfg, "ann", 3, "try_unroll_vec"));
  int64_t vc = tl_atvm_largest_divisor(ci.O, LANES), vw = tl_atvm_largest_divisor(ci.OW, 4);
  TRY(fallback2(cfg, "tile_c", vc));
  TRY(fallback2(cfg, "tile_h", 1));
  TRY(fallback2(cfg, "tile_w", vw));
  int64_t spa[3] = {TL_AN_NONE, vw <= MAX_UNROLL ? TL_AN_UNROLL : TL_AN_NONE, TL_AN_VEC};
  tl_cfg_fallback_ints(cfg, "ann", spa);
  return TL_OK;
}

static int dw_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  int64_t vc = inner_of(cfg, "tile_c"), vh = inner_of(cfg, "tile_h"), vw = inner_of(cfg, "tile_w");
  if (!vc || !vh || !vw) return tl_errcode(ctx);
  static const int inner[3] = {0, 1, 2};
  int O, attach;
  char lname[128];
  TRY(pack_outer(ctx, s, "depthwise_conv2d_nchw", "depthwise_conv2d_nchw.arm_cpu", "PaddedInput", vc,
                 vh, vw, inner, 0, &O, &attach, lname));
  TRY(tl_sched_compute_at(ctx, s, find(s, lname), O, pos(s, O, attach)));
  int L = find(s, lname);
  /* L: n c h w | di dj -> n c/VC h/VH w/VW di dj vh vw vc */
  int n = node_at(s, L, 0), c = node_at(s, L, 1), h = node_at(s, L, 2), w = node_at(s, L, 3);
  int di = node_at(s, L, 4), dj = node_at(s, L, 5), t[2];
  TRY(tl_atvm_split_node(ctx, s, L, c, 1, &vc, t)); int co = t[0], vcn = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, h, 1, &vh, t)); int ho = t[0], vhn = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, w, 1, &vw, t)); int wo = t[0], vwn = t[1];
  int order[9] = {n, co, ho, wo, di, dj, vhn, vwn, vcn};
  TRY(tl_atvm_reorder_nodes(ctx, s, L, order, 9));
  int spa[3] = {vhn, vwn, vcn}, vec;
  int64_t sl[3] = {vh, vw, vc};
  TRY(apply_ann(cfg, s, L, "ann", spa, sl, 3, &vec));
  if (vec >= 0) TRY(tl_atvm_move_innermost(ctx, s, L, vec, "arm_cpu"));
  return TL_OK;
}

const tl_atvm_template tl_arm_depthwise_conv2d = {"depthwise_conv2d_nchw.arm_cpu", dw_define,
                                                  tl_atvm_depthwise_nchw_compute, dw_schedule};

/* ---- conv2d_nchw_winograd.arm_cpu ---------------------------------------------------- */

#define WINO_M 4   /* output tile: F(4x4, 3x3), alpha = 6 */

static int wino_check(tl_ctx *ctx, const tl_atvm_conv *ci) {
  if (ci->KH != 3 || ci->KW != 3 || ci->stride[0] != 1 || ci->stride[1] != 1 || ci->dil[0] != 1 ||
      ci->dil[1] != 1)
    return tl_err(ctx, TL_E_UNSUPPORTED,
                  "conv2d_nchw_winograd.arm_cpu: needs a 3x3 kernel, stride 1 and dilation 1, got %lldx%lld stride (%lld, %lld) dilation (%lld, %lld)",
                  (long long)ci->KH, (long long)ci->KW, (long long)ci->stride[0],
                  (long long)ci->stride[1], (long long)ci->dil[0], (long long)ci->dil[1]);
  return TL_OK;
}

static int wino_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(cfg->ctx, a, 0, &ci));
  TRY(wino_check(cfg->ctx, &ci));
  int64_t nH = (ci.OH + WINO_M - 1) / WINO_M, nW = (ci.OW + WINO_M - 1) / WINO_M;
  int64_t P = ci.N * nH * nW;
  TRY(define_split(cfg, "tile_p", P, 16));
  TRY(define_split(cfg, "tile_k", ci.O, 16));
  TRY(define_split(cfg, "tile_c", ci.C, 16));
  TRY(define_ann(cfg, "ann_reduce", 1, "try_unroll"));
  TRY(define_ann(cfg, "ann_spatial", 2, "try_unroll_vec"));
  TRY(fallback2(cfg, "tile_p", tl_atvm_largest_divisor(P, LANES)));
  TRY(fallback2(cfg, "tile_k", tl_atvm_largest_divisor(ci.O, 2 * LANES)));
  TRY(fallback2(cfg, "tile_c", tl_atvm_largest_divisor(ci.C, 4)));
  int64_t red[1] = {TL_AN_UNROLL}, spa[2] = {TL_AN_UNROLL, TL_AN_VEC};
  tl_cfg_fallback_ints(cfg, "ann_reduce", red);
  tl_cfg_fallback_ints(cfg, "ann_spatial", spa);
  return TL_OK;
}

/* The constant weight deployed transformed (TVM's conv2d_winograd_without_weight_transform
** with pre-computed weights): U = G g G^T, computed once at build time instead of in every
** call (for 512 channels the transform costs about as much as the batched product itself),
** stored [6, 6, C, O]: the output channels innermost, so the batched product's vector of VK
** output channels is one contiguous load (TVM packs U with VK innermost for the same reason).
** float32 without groups only. */
#define WINO_A (WINO_M + 2)

static int wino_deployed_input(const tl_atvm_args *a, int i, int *ndim, int64_t *shape) {
  tl_atvm_conv ci;
  if (i != 1 || !sp_packable(a, &ci) || ci.KH != 3 || ci.KW != 3) return 0;
  *ndim = 4;
  shape[0] = WINO_A, shape[1] = WINO_A, shape[2] = ci.C, shape[3] = ci.O;
  return 1;
}

static void wino_deploy(const tl_atvm_args *a, int i, const void *src, void *dst) {
  (void)i;
  double AT[WINO_A * WINO_A], G[WINO_A * 3], BT[WINO_A * WINO_A];
  tl_topi_winograd_matrices(WINO_M, 3, AT, G, BT);
  const float *w = src;
  float *u = dst;
  int64_t O = a->shape[1][0], C = a->shape[1][1];
  for (int64_t o = 0; o < O; o++)
    for (int64_t c = 0; c < C; c++) {
      const float *g = w + (o * C + c) * 9;
      for (int e = 0; e < WINO_A; e++)
        for (int n = 0; n < WINO_A; n++) {
          double v = 0;
          for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 3; kw++) v += (double)g[kh * 3 + kw] * G[e * 3 + kh] * G[n * 3 + kw];
          u[((e * WINO_A + n) * C + c) * O + o] = (float)v;
        }
    }
}

/* topi's conv2d_winograd; with the transformed weight (in[1] of shape [6, 6, C, O]) the weight
** transform stage is left out ("pre_transformed"): topi reads U[eps, nu, k, c] through the
** injective view kernel_t (inlined by the schedule) of the deployed [eps, nu, c, k]. */
static int wino_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                        int *out, int max_out, int *nout) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 0, &ci));
  TRY(wino_check(ctx, &ci));
  int pre = 0, ins[2] = {in[0], nin >= 2 ? in[1] : -1};
  if (nin >= 2 && tl_dag_tensor_ndim(dag, in[1]) == 4) {
    const int64_t *ks = tl_dag_tensor_shape(dag, in[1]);
    pre = ks[0] == WINO_A && ks[1] == WINO_A && ks[2] == ci.C && ks[3] == ci.O;
  }
  if (pre) {
    uint32_t ax[4], idx[4], body;
    static const char *const nm[4] = {"eps", "nu", "k", "c"};
    for (int i = 0; i < 4; i++) TRY(tl_dag_var(ctx, dag, nm[i], TL_INT32, &ax[i]));
    idx[0] = ax[0], idx[1] = ax[1], idx[2] = ax[3], idx[3] = ax[2];
    TRY(tl_dag_load(ctx, dag, in[1], 4, idx, &body));
    int64_t shape[4] = {WINO_A, WINO_A, ci.O, ci.C};
    TRY(tl_dag_compute(ctx, dag, "kernel_t", "injective", 4, shape, ax, 1, &body, TL_REDUCE_NONE,
                       0, NULL, 0, &ins[1]));
  }
  char extra[96], attrs[512];
  snprintf(extra, sizeof extra, ",\"tile_size\":%d%s", WINO_M, pre ? ",\"pre_transformed\":1" : "");
  tl_atvm_conv_attrs(&ci, extra, attrs, sizeof attrs);
  return tl_topi_op(ctx, dag, "conv2d_winograd", ins, 2, attrs, out, max_out, nout);
}

static int unroll_all(tl_ctx *ctx, tl_sched *s, int st, int from, int to) {
  for (int i = from; i < to; i++) {
    int nd = node_at(s, st, i);
    if (tl_sched_iter_extent(s, st, i) <= MAX_UNROLL) TRY(ann(ctx, s, st, nd, TL_ANN_UNROLL));
  }
  return TL_OK;
}

static int wino_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  int64_t vp = inner_of(cfg, "tile_p"), vk = inner_of(cfg, "tile_k"), vcc = inner_of(cfg, "tile_c");
  if (!vp || !vk || !vcc) return tl_errcode(ctx);
  int O, other;
  TRY(tl_atvm_winograd_output(ctx, s, "conv2d_nchw_winograd.arm_cpu", &O, &other));
  if (other >= 0) TRY(parallel_simple(ctx, s, other));
  char oname[128];
  snprintf(oname, sizeof oname, "%s", tl_sched_stage_name(s, O));
  TRY(tl_atvm_inline_named(ctx, s, "input_tile"));
  TRY(tl_atvm_inline_named(ctx, s, "kernel_t"));
  TRY(root_parallel(ctx, s, "data_pad"));

  /* weight transform U[eps, nu, co, ci] | r_kh r_kw: co ci eps nu r_kh r_kw, co parallel */
  int U = find(s, "kernel_pack");
  if (U >= 0 && tl_sched_num_iters(s, U) == 6) {
    int order[6] = {2, 3, 0, 1, 4, 5};
    TRY(tl_sched_reorder(ctx, s, U, 6, order));
    TRY(ann(ctx, s, U, node_at(s, U, 0), TL_ANN_PARALLEL));
    TRY(unroll_all(ctx, s, U, 2, 6));
  }

  /* input transform V[eps, nu, ci, p] | r_a r_b: (p/VP, ci) fused parallel, eps nu r_a r_b
  ** unrolled, the VP tiles vectorized */
  int V = find(s, "data_pack");
  if (V < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_nchw_winograd.arm_cpu: no data_pack stage");
  {
    int eps = node_at(s, V, 0), nu = node_at(s, V, 1), c = node_at(s, V, 2), p = node_at(s, V, 3);
    int ra = node_at(s, V, 4), rb = node_at(s, V, 5), t[2], par;
    TRY(tl_atvm_split_node(ctx, s, V, p, 1, &vp, t));
    int order[7] = {t[0], c, eps, nu, ra, rb, t[1]};
    TRY(tl_atvm_reorder_nodes(ctx, s, V, order, 7));
    int f2[2] = {t[0], c};
    TRY(tl_atvm_fuse_nodes(ctx, s, V, f2, 2, &par));
    TRY(tl_sched_annotate(ctx, s, V, pos(s, V, par), TL_ANN_PARALLEL));
    int un[4] = {eps, nu, ra, rb};
    for (int i = 0; i < 4; i++) TRY(ann(ctx, s, V, un[i], TL_ANN_UNROLL));
    TRY(ann(ctx, s, V, t[1], TL_ANN_VECTORIZE));
  }

  /* batched GEMM M[eps, nu, k, p] | c: (eps, nu) fused parallel, p/VP, k/VK, c/VC, vk, vc, vp */
  int M = find(s, "bgemm");
  if (M < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_nchw_winograd.arm_cpu: no bgemm stage");
  {
    int eps = node_at(s, M, 0), nu = node_at(s, M, 1), k = node_at(s, M, 2), p = node_at(s, M, 3);
    int c = node_at(s, M, 4), k2[2], p2[2], c2[2], par;
    TRY(tl_atvm_split_node(ctx, s, M, k, 1, &vk, k2));
    TRY(tl_atvm_split_node(ctx, s, M, p, 1, &vp, p2));
    TRY(tl_atvm_split_node(ctx, s, M, c, 1, &vcc, c2));
    int order[8] = {eps, nu, p2[0], k2[0], c2[0], k2[1], c2[1], p2[1]};
    TRY(tl_atvm_reorder_nodes(ctx, s, M, order, 8));
    int f2[2] = {eps, nu};
    TRY(tl_atvm_fuse_nodes(ctx, s, M, f2, 2, &par));
    TRY(tl_sched_annotate(ctx, s, M, pos(s, M, par), TL_ANN_PARALLEL));
    int rn[1] = {c2[1]};
    int64_t rl[1] = {vcc};
    TRY(apply_ann(cfg, s, M, "ann_reduce", rn, rl, 1, NULL));
    int sn[2] = {k2[1], p2[1]}, vec;
    int64_t sl[2] = {vk, vp};
    TRY(apply_ann(cfg, s, M, "ann_spatial", sn, sl, 2, &vec));
    if (vec >= 0) TRY(tl_atvm_move_innermost(ctx, s, M, vec, "arm_cpu"));
  }

  /* output: n k/VK fused parallel, the inverse transform per block of VK channels */
  O = find(s, oname);
  int par;
  {
    int n = node_at(s, O, 0), k = node_at(s, O, 1), t[2];
    TRY(tl_atvm_split_node(ctx, s, O, k, 1, &vk, t));
    int f2[2] = {n, t[0]};
    TRY(tl_atvm_fuse_nodes(ctx, s, O, f2, 2, &par));
    TRY(tl_sched_annotate(ctx, s, O, pos(s, O, par), TL_ANN_PARALLEL));
  }
  int Y = find(s, "inverse");
  if (Y < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_nchw_winograd.arm_cpu: no inverse stage");
  TRY(tl_sched_compute_at(ctx, s, Y, O, pos(s, O, par)));
  Y = find(s, "inverse");
  TRY(unroll_all(ctx, s, Y, 2, 6));
  return TL_OK;
}

const tl_atvm_template tl_arm_conv2d_winograd = {"conv2d_nchw_winograd.arm_cpu", wino_define,
                                                 wino_compute, wino_schedule, wino_deployed_input,
                                                 wino_deploy};
