/*
** templates.c -- AutoTVM templates for Mali GPUs (target "opencl -device=mali"):
** conv2d_nchw_spatial_pack.mali, conv2d_nchw_winograd.mali,
** depthwise_conv2d_nchw.mali, dense.mali.
**
** The knobs are TVM's (names, kinds, policies, definition order), so every
** record of TopHub's mali_v0.06.log maps its entity to a config of ours
** with the same index. The computes are the plain topi operators (conv2d,
** conv2d_winograd, depthwise_conv2d, dense), independent of the config, so
** injective consumers fuse after the anchor; the schedules express TVM's
** tilings on them:
**
**   spatial_pack  the output tiled by tile_co/tile_oh/tile_ow into
**                 (block, thread, inner) levels, blocks and threads bound
**                 z/y/x = co/oh/ow; the accumulation stage (a per-thread
**                 private tile VH x VW x VC) computed at the thread, its
**                 loops ordered by reorder_0, kh/kw annotated by ann_reduce,
**                 vh/vw/vc by ann_spatial (TVM's packed data_vec/kernel_vec
**                 layouts are not materialized: the loads read NCHW/OIHW).
**   winograd      tile_size 4 when H % 4 == 0 else 2 (as TVM picks it);
**                 the input transform per (ci, p) thread, fused and split by
**                 tile_t1; the batched GEMM tiled by tile_bna x tile_bnb per
**                 thread, yt threads along co, c_unroll over the channels;
**                 the output (with the inverse transform computed per
**                 thread) fused and split by tile_t2.
**   depthwise     tile_c/tile_y/tile_x (block, thread, inner), n fused into
**                 blockIdx.z, the per-thread tile annotated by ann_spatial.
**   dense         tile_y/tile_x (block, thread, inner), c_unroll over k.
**
** As in TVM, an "unroll" annotation of an axis longer than 16 (dense: 32)
** or a "vec" of a length that is not 1, 2, 4, 8 or 16 is an instantiation
** error. A vectorized axis is moved innermost of its tile (what TVM's
** vectorizer makes of an outer vectorized loop). Fallback configs: as TVM,
** spatial pack, depthwise and dense take the closest record of TopHub's
** mali_v0.06.log (fallback_with_reference_log, formats §5.5; an annotation
** that would be an instantiation error becomes "none"); without the log,
** fixed heuristics of the same shape. Winograd has TVM's fixed fallback.
*/
#include "mali.h"

#include <stdio.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

/* ---- schedule helpers (node ids are stable across steps) ------------------------ */

static int pos(tl_sched *s, int st, int node) { return tl_sched_node_iter(s, st, node); }
static int node_at(tl_sched *s, int st, int p) { return tl_sched_iter_node(s, st, p); }
static int find(tl_sched *s, const char *name) { return tl_sched_stage_find(s, name); }

static int64_t extent_of(tl_sched *s, int st, int node) {
  int p = pos(s, st, node);
  return p < 0 ? 0 : tl_sched_iter_extent(s, st, p);
}

/* Annotate (or bind) node; extent-1 loops are left alone. */
static int ann(tl_ctx *ctx, tl_sched *s, int st, int node, int a) {
  int p = pos(s, st, node);
  if (p < 0) return tl_err(ctx, TL_E_INTERNAL, "mali template: annotate: lost an iterator");
  if (tl_sched_iter_extent(s, st, p) == 1) return TL_OK;
  return tl_sched_annotate(ctx, s, st, p, a);
}

/* A root stage left without a tiling (an output of another shape than the
** anchor): its spatial axes fused and bound with 64 threads. */
static int bind_simple(tl_ctx *ctx, tl_sched *s, int st) {
  tl_dag *dag = tl_sched_dag(s);
  int nd = tl_dag_tensor_ndim(dag, tl_sched_stage_tensor(s, st, 0));
  if (nd < 1) return TL_OK;
  int f[16];
  for (int i = 0; i < nd && i < 16; i++) f[i] = i;
  if (nd > 1) TRY(tl_sched_fuse(ctx, s, st, nd, f));
  int64_t e = tl_sched_iter_extent(s, st, 0), t = e < 64 ? e : 64;
  if (t > 1) {
    TRY(tl_sched_split(ctx, s, st, 0, 1, &t, 1));
    TRY(tl_sched_annotate(ctx, s, st, 0, TL_ANN_BLOCK_X));
    TRY(tl_sched_annotate(ctx, s, st, 1, TL_ANN_THREAD_X));
  } else if (e > 1) {
    TRY(tl_sched_annotate(ctx, s, st, 0, TL_ANN_THREAD_X));
  }
  return TL_OK;
}

static const int64_t *sizes_of(tl_atvm_cfg *cfg, const char *name, int want) {
  int w;
  const int64_t *e = tl_cfg_ints(cfg, name, &w);
  if (e && w != want) {
    tl_err(cfg->ctx, TL_E_INTERNAL, "mali template: knob '%s' has %d sizes, expected %d", name, w,
           want);
    return NULL;
  }
  return e;
}

/* Apply an annotate entity (TL_AN_* codes) to nodes with lengths lens:
** unroll beyond max_unroll and vec of a length outside {1,2,4,8,16} are
** instantiation errors (as in TVM). The vectorized node (if any) is
** written to *vec (else -1). */
static int apply_ann(tl_atvm_cfg *cfg, tl_sched *s, int st, const char *knob, const int *nodes,
                     const int64_t *lens, int n, int64_t max_unroll, int *vec) {
  int w;
  const int64_t *e = tl_cfg_ints(cfg, knob, &w);
  if (!e) return tl_errcode(cfg->ctx);
  if (w != n) return tl_err(cfg->ctx, TL_E_INTERNAL, "mali template: knob '%s' annotates %d axes", knob, w);
  if (vec) *vec = -1;
  for (int i = 0; i < n; i++) {
    if (e[i] == TL_AN_UNROLL) {
      if (lens[i] > max_unroll)
        return tl_err(cfg->ctx, TL_E_SCHED, "%s: too large factor for unrolling (%lld > %lld)", knob,
                      (long long)lens[i], (long long)max_unroll);
      TRY(ann(cfg->ctx, s, st, nodes[i], TL_ANN_UNROLL));
    } else if (e[i] == TL_AN_VEC) {
      int64_t l = lens[i];
      if (l != 1 && l != 2 && l != 4 && l != 8 && l != 16)
        return tl_err(cfg->ctx, TL_E_SCHED, "%s: wrong size of lanes in vectorization (%lld)", knob,
                      (long long)l);
      TRY(ann(cfg->ctx, s, st, nodes[i], TL_ANN_VECTORIZE));
      if (vec && l > 1) *vec = nodes[i];
    }
  }
  return TL_OK;
}

/* The largest power of two <= cap dividing n. */
static int64_t pow2_divisor(int64_t n, int64_t cap) {
  int64_t f = 1;
  while (f * 2 <= cap && n % (f * 2) == 0) f *= 2;
  return f;
}

static int define_split(tl_atvm_cfg *cfg, const char *name, int64_t len, int nout, int64_t max_factor) {
  int k = tl_atvm_space_define_split(cfg->ctx, cfg->space, name, len, "factors", nout, max_factor,
                                     -1, NULL, 0);
  return k < 0 ? tl_errcode(cfg->ctx) : TL_OK;
}

static int define_knob(tl_atvm_cfg *cfg, const char *name, const char *cands) {
  return tl_atvm_space_define_knob(cfg->ctx, cfg->space, name, cands) < 0 ? tl_errcode(cfg->ctx)
                                                                           : TL_OK;
}

static int define_ann(tl_atvm_cfg *cfg, const char *name, int n, const char *policy) {
  return tl_atvm_space_define_annotate(cfg->ctx, cfg->space, name, n, policy, 0) < 0
             ? tl_errcode(cfg->ctx) : TL_OK;
}

/* ---- fallback from TopHub's reference log (formats §5.5) --------------------------
** TVM's spatial pack, depthwise and dense templates take their fallback
** config from the closest record of mali_v0.06.log (model rk3399): the
** record whose split sizes share the most divisors with our axis lengths
** (summed over split knobs, first best wins); split knobs are recomputed
** with its sizes as caps, the other knobs copied. The log is looked up in
** $TUNELUA_TOPHUB_DIR, <source>/data/tophub, <source>/../shared/data/tophub;
** without it the heuristic fallback stays. The records are read once per
** process (under a lock). */

#include <pthread.h>

#ifndef TL_SOURCE_DIR
#define TL_SOURCE_DIR "."
#endif

static pthread_mutex_t ref_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const char *name;
  int loaded;
  json_t *entities;            /* array of the matching records' entities */
} ref_cache[] = {{"conv2d_nchw_spatial_pack.mali", 0, NULL},
                 {"depthwise_conv2d_nchw.mali", 0, NULL},
                 {"dense.mali", 0, NULL}};

static FILE *open_reference_log(void) {
  char path[1024];
  const char *env = getenv("TUNELUA_TOPHUB_DIR");
  const char *dirs[3] = {env && *env ? env : NULL, TL_SOURCE_DIR "/data/tophub",
                         TL_SOURCE_DIR "/../shared/data/tophub"};
  for (int i = 0; i < 3; i++) {
    if (!dirs[i]) continue;
    snprintf(path, sizeof path, "%s/mali_v0.06.log", dirs[i]);
    FILE *f = fopen(path, "r");
    if (f) return f;
  }
  return NULL;
}

static void load_reference(int c) {
  ref_cache[c].loaded = 1;
  FILE *f = open_reference_log();
  if (!f) return;
  json_t *list = json_array();
  char quoted[96];
  snprintf(quoted, sizeof quoted, "\"%s\"", ref_cache[c].name);
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) >= 0) {
    if (line[0] == '{' && strstr(line, quoted) && strstr(line, "-model=rk3399")) {
      json_t *r = json_loads(line, 0, NULL);
      json_t *inp = json_object_get(r, "input");
      json_t *ent = json_object_get(json_object_get(r, "config"), "entity");
      const char *tn = json_string_value(json_array_get(inp, 1));
      if (tn && strcmp(tn, ref_cache[c].name) == 0 && json_is_array(ent))
        json_array_append(list, ent);
      json_decref(r);
    }
  }
  free(line);
  fclose(f);
  ref_cache[c].entities = list;
}

static json_t *entity_value(json_t *ent, const char *name) {
  size_t i;
  json_t *e;
  json_array_foreach(ent, i, e) {
    const char *n = json_string_value(json_array_get(e, 0));
    if (n && strcmp(n, name) == 0) return json_array_get(e, 2);
  }
  return NULL;
}

static void fallback_with_reference_log(tl_atvm_cfg *cfg, const char *tmpl) {
  int c = -1;
  for (int i = 0; i < (int)TL_ARRAY_SIZE(ref_cache); i++)
    if (strcmp(ref_cache[i].name, tmpl) == 0) c = i;
  if (c < 0) return;
  pthread_mutex_lock(&ref_lock);
  if (!ref_cache[c].loaded) load_reference(c);
  json_t *list = ref_cache[c].entities;
  pthread_mutex_unlock(&ref_lock);
  if (!list || json_array_size(list) == 0) return;
  tl_atvm_space *sp = cfg->space;
  json_t *best = NULL;
  double best_score = 0;
  size_t r;
  json_t *ent;
  json_array_foreach(list, r, ent) {
    double score = 0;
    for (int k = 0; k < sp->knobs.n; k++) {
      tl_knob *kb = &sp->knobs.v[k];
      if (kb->kind != TL_KNOB_SPLIT) continue;
      json_t *v = entity_value(ent, kb->name);
      if (!json_is_array(v)) continue;
      int64_t prod = 1;
      size_t q;
      json_t *x;
      json_array_foreach(v, q, x) prod *= json_integer_value(x);
      int nself = 0, common = 0;
      for (int64_t d = 1; d <= kb->length; d++)
        if (kb->length % d == 0) {
          nself++;
          if (prod > 0 && prod % d == 0) common++;
        }
      score += (double)common / nself;
      if (best_score < score) best_score = score, best = ent;
    }
  }
  if (!best) return;
  for (int k = 0; k < sp->knobs.n; k++) {
    tl_knob *kb = &sp->knobs.v[k];
    json_t *v = entity_value(best, kb->name);
    if (!v) continue;
    if (kb->kind == TL_KNOB_SPLIT) {
      int64_t caps[16];
      if (!json_is_array(v) || (int)json_array_size(v) != kb->width || kb->width > 16) continue;
      caps[0] = -1;
      for (int i = 1; i < kb->width; i++) caps[i] = json_integer_value(json_array_get(v, i));
      if (tl_atvm_space_fallback_split(cfg->ctx, sp, k, caps, kb->width)) tl_clearerr(cfg->ctx);
    } else {
      for (int64_t j = 0; j < kb->dim; j++) {
        tl_buf b = {0};
        tl_knob_entity_json(kb, j, &b);
        json_t *mine = json_loads(b.s ? b.s : "", JSON_DECODE_ANY, NULL);
        int eq = mine && json_equal(mine, v);
        json_decref(mine);
        tl_buf_free(&b);
        if (eq) {
          kb->fallback = j;
          break;
        }
      }
    }
  }
}

/* The fallback entity of split knob name (NULL if absent). */
static const int64_t *fallback_sizes(tl_atvm_cfg *cfg, const char *name) {
  int k = tl_atvm_space_find(cfg->space, name);
  if (k < 0) return NULL;
  tl_knob *kb = &cfg->space->knobs.v[k];
  return tl_knob_entity(kb, kb->fallback);
}

/* Make the fallback of annotate knob name valid for lengths lens: an unroll
** beyond max_unroll or a vec of a length outside {1,2,4,8,16} becomes none
** (TVM would only record the error; our schedules refuse such configs). */
static void sanitize_ann(tl_atvm_cfg *cfg, const char *name, const int64_t *lens, int n,
                         int64_t max_unroll) {
  int k = tl_atvm_space_find(cfg->space, name);
  if (k < 0) return;
  tl_knob *kb = &cfg->space->knobs.v[k];
  if (kb->width != n || n > 8) return;
  int64_t want[8];
  memcpy(want, tl_knob_entity(kb, kb->fallback), (size_t)n * sizeof(int64_t));
  int changed = 0;
  for (int i = 0; i < n; i++) {
    int64_t l = lens[i];
    if ((want[i] == TL_AN_UNROLL && l > max_unroll) ||
        (want[i] == TL_AN_VEC && l != 1 && l != 2 && l != 4 && l != 8 && l != 16))
      want[i] = TL_AN_NONE, changed = 1;
  }
  if (changed) tl_cfg_fallback_ints(cfg, name, want);
}

/* ---- conv2d_nchw_spatial_pack.mali ------------------------------------------------ */

static int sp_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(cfg->ctx, a, 0, &ci));
  TRY(define_split(cfg, "tile_co", ci.O, 3, 0));
  TRY(define_split(cfg, "tile_oh", ci.OH, 3, 0));
  TRY(define_split(cfg, "tile_ow", ci.OW, 3, 0));
  /* [n, co, oh, ow, ci, kh, kw, vh, vw, vc] and [..., vc, vh, vw] */
  static const int64_t cands[20] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 9, 7, 8};
  if (tl_atvm_space_define_reorder(cfg->ctx, cfg->space, "reorder_0", 10, "candidate", 0, 0, cands,
                                   2) < 0)
    return tl_errcode(cfg->ctx);
  TRY(define_ann(cfg, "ann_reduce", 2, "try_unroll"));
  TRY(define_ann(cfg, "ann_spatial", 3, "try_unroll_vec"));
  /* fallback: VC = 4-wide vectors over co, 4 x 4 x 4 threads */
  int64_t vc = pow2_divisor(ci.O, 4), tc = tl_atvm_largest_divisor(ci.O / vc, 4);
  int64_t vw = tl_atvm_largest_divisor(ci.OW, 2), tw = tl_atvm_largest_divisor(ci.OW / vw, 8);
  int64_t th = tl_atvm_largest_divisor(ci.OH, 4);
  int64_t sc[3] = {-1, tc, vc}, sh[3] = {-1, th, 1}, sw[3] = {-1, tw, vw};
  TRY(tl_cfg_fallback_split(cfg, "tile_co", sc, 3));
  TRY(tl_cfg_fallback_split(cfg, "tile_oh", sh, 3));
  TRY(tl_cfg_fallback_split(cfg, "tile_ow", sw, 3));
  int64_t red[2] = {ci.KH <= 16 ? TL_AN_UNROLL : TL_AN_NONE, ci.KW <= 16 ? TL_AN_UNROLL : TL_AN_NONE};
  tl_cfg_fallback_ints(cfg, "ann_reduce", red);
  int64_t spa[3] = {TL_AN_UNROLL, TL_AN_UNROLL, TL_AN_VEC};
  tl_cfg_fallback_ints(cfg, "ann_spatial", spa);
  fallback_with_reference_log(cfg, "conv2d_nchw_spatial_pack.mali");
  const int64_t *fc = fallback_sizes(cfg, "tile_co"), *fh = fallback_sizes(cfg, "tile_oh"),
                *fw = fallback_sizes(cfg, "tile_ow");
  int64_t rl[2] = {ci.KH, ci.KW}, sl[3] = {fh[2], fw[2], fc[2]};
  sanitize_ann(cfg, "ann_reduce", rl, 2, 16);
  sanitize_ann(cfg, "ann_spatial", sl, 3, 16);
  return TL_OK;
}

/* O's 4 axes (n, c, h, w) tiled by 3-level sizes: blocks (n fused into z),
** threads, inner; writes the inner nodes and the innermost thread node. */
static int tile_bind_3d(tl_ctx *ctx, tl_sched *s, int O, const int64_t *tc, const int64_t *th,
                        const int64_t *tw, int *inner, int *tx_node) {
  int c[3], h[3], w[3], bz;
  TRY(tl_atvm_split_node(ctx, s, O, node_at(s, O, 1), 2, tc + 1, c));
  TRY(tl_atvm_split_node(ctx, s, O, node_at(s, O, 4), 2, th + 1, h));
  TRY(tl_atvm_split_node(ctx, s, O, node_at(s, O, 7), 2, tw + 1, w));
  int n = node_at(s, O, 0);
  int order[10] = {n, c[0], h[0], w[0], c[1], h[1], w[1], h[2], w[2], c[2]};
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, 10));
  int f2[2] = {n, c[0]};
  TRY(tl_atvm_fuse_nodes(ctx, s, O, f2, 2, &bz));
  TRY(ann(ctx, s, O, bz, TL_ANN_BLOCK_Z));
  TRY(ann(ctx, s, O, h[0], TL_ANN_BLOCK_Y));
  TRY(ann(ctx, s, O, w[0], TL_ANN_BLOCK_X));
  TRY(ann(ctx, s, O, c[1], TL_ANN_THREAD_Z));
  TRY(ann(ctx, s, O, h[1], TL_ANN_THREAD_Y));
  TRY(ann(ctx, s, O, w[1], TL_ANN_THREAD_X));
  inner[0] = c[2], inner[1] = h[2], inner[2] = w[2];
  *tx_node = w[1];
  return TL_OK;
}

static int sp_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 0, &ci));
  const int64_t *tc = sizes_of(cfg, "tile_co", 3), *th = sizes_of(cfg, "tile_oh", 3),
                *tw = sizes_of(cfg, "tile_ow", 3);
  int wr;
  const int64_t *re = tl_cfg_ints(cfg, "reorder_0", &wr);
  if (!tc || !th || !tw || !re) return tl_errcode(ctx);
  int O, L, other;
  TRY(tl_atvm_anchor_stages(ctx, s, "conv2d_nchw", "conv2d_nchw_spatial_pack.mali", &O, &L, &other));
  TRY(tl_atvm_inline_named(ctx, s, "pad_temp"));
  if (other >= 0) TRY(bind_simple(ctx, s, other));
  int inner[3], txn;
  TRY(tile_bind_3d(ctx, s, O, tc, th, tw, inner, &txn));
  for (int i = 0; i < 3; i++)
    if (extent_of(s, O, inner[i]) > 1 && extent_of(s, O, inner[i]) <= 16)
      TRY(ann(ctx, s, O, inner[i], TL_ANN_UNROLL));
  TRY(tl_sched_compute_at(ctx, s, L, O, pos(s, O, txn)));
  /* L: n co oh ow | rc ry rx -> the inner tile split off each spatial axis */
  int n = node_at(s, L, 0), co = node_at(s, L, 1), oh = node_at(s, L, 2), ow = node_at(s, L, 3);
  int rc = node_at(s, L, 4), ry = node_at(s, L, 5), rx = node_at(s, L, 6), t[2];
  TRY(tl_atvm_split_node(ctx, s, L, co, 1, &tc[2], t)); int coo = t[0], vc = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, oh, 1, &th[2], t)); int oho = t[0], vh = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, ow, 1, &tw[2], t)); int owo = t[0], vw = t[1];
  int axes[10] = {n, coo, oho, owo, rc, ry, rx, vh, vw, vc}, order[10];
  if (wr != 10) return tl_err(ctx, TL_E_INTERNAL, "reorder_0 has %d axes", wr);
  for (int i = 0; i < 10; i++) order[i] = axes[re[i]];
  TRY(tl_atvm_reorder_nodes(ctx, s, L, order, 10));
  int red[2] = {ry, rx};
  int64_t rl[2] = {ci.KH, ci.KW};
  TRY(apply_ann(cfg, s, L, "ann_reduce", red, rl, 2, 16, NULL));
  int spa[3] = {vh, vw, vc}, vec;
  int64_t sl[3] = {th[2], tw[2], tc[2]};
  TRY(apply_ann(cfg, s, L, "ann_spatial", spa, sl, 3, 16, &vec));
  if (vec >= 0) TRY(tl_atvm_move_innermost(ctx, s, L, vec, "mali"));
  return TL_OK;
}

const tl_atvm_template tl_mali_conv2d_spatial_pack = {"conv2d_nchw_spatial_pack.mali", sp_define,
                                                      tl_atvm_conv2d_nchw_compute, sp_schedule};

/* ---- conv2d_nchw_winograd.mali ------------------------------------------------------ */

static int wino_check(tl_ctx *ctx, const tl_atvm_conv *ci) {
  if (ci->KH != 3 || ci->KW != 3 || ci->stride[0] != 1 || ci->stride[1] != 1 || ci->dil[0] != 1 ||
      ci->dil[1] != 1)
    return tl_err(ctx, TL_E_UNSUPPORTED,
                  "conv2d_nchw_winograd.mali: needs a 3x3 kernel, stride 1 and dilation 1, got %lldx%lld stride (%lld, %lld) dilation (%lld, %lld)",
                  (long long)ci->KH, (long long)ci->KW, (long long)ci->stride[0],
                  (long long)ci->stride[1], (long long)ci->dil[0], (long long)ci->dil[1]);
  return TL_OK;
}

static int64_t wino_tile(const tl_atvm_conv *ci) { return ci->H % 4 == 0 ? 4 : 2; }

static int wino_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(cfg->ctx, a, 0, &ci));
  TRY(wino_check(cfg->ctx, &ci));
  char bna[64] = "[";
  static const int cand[5] = {1, 2, 4, 8, 16};
  for (int i = 0, n = 0; i < 5; i++)
    if (ci.O % cand[i] == 0)
      snprintf(bna + strlen(bna), sizeof bna - strlen(bna), "%s%d", n++ ? ", " : "", cand[i]);
  strcat(bna, "]");
  TRY(define_knob(cfg, "tile_bna", bna));
  TRY(define_knob(cfg, "tile_bnb", "[1, 2, 4, 8, 16]"));
  TRY(define_split(cfg, "tile_t1", ci.C, 2, 128));
  TRY(define_split(cfg, "tile_t2", ci.O, 2, 128));
  TRY(define_split(cfg, "c_unroll", ci.C, 2, 8));
  TRY(define_knob(cfg, "yt", "[1, 2, 4, 8, 16, 32]"));
  /* TVM's fallback */
  int64_t b = 4;
  while (ci.O % b) b /= 2;
  tl_cfg_fallback_other(cfg, "tile_bna", (double)b);
  tl_cfg_fallback_other(cfg, "tile_bnb", 4);
  tl_cfg_fallback_other(cfg, "yt", 8);
  int64_t s1[2] = {-1, 128}, s8[2] = {-1, 8};
  TRY(tl_cfg_fallback_split(cfg, "tile_t1", s1, 2));
  TRY(tl_cfg_fallback_split(cfg, "tile_t2", s1, 2));
  return tl_cfg_fallback_split(cfg, "c_unroll", s8, 2);
}

static int wino_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                        int *out, int max_out, int *nout) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 0, &ci));
  TRY(wino_check(ctx, &ci));
  char extra[64], attrs[512];
  snprintf(extra, sizeof extra, ",\"tile_size\":%lld", (long long)wino_tile(&ci));
  tl_atvm_conv_attrs(&ci, extra, attrs, sizeof attrs);
  return tl_topi_op(ctx, dag, "conv2d_winograd", in, 2, attrs, out, max_out, nout);
}

static int is_vec_len(int64_t l) { return l == 2 || l == 4 || l == 8 || l == 16; }

static int wino_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 0, &ci));
  int64_t m = wino_tile(&ci);
  int64_t bna = (int64_t)tl_cfg_other(cfg, "tile_bna"), bnb = (int64_t)tl_cfg_other(cfg, "tile_bnb"),
          yt = (int64_t)tl_cfg_other(cfg, "yt");
  const int64_t *t1 = sizes_of(cfg, "tile_t1", 2), *t2 = sizes_of(cfg, "tile_t2", 2),
                *cu = sizes_of(cfg, "c_unroll", 2);
  if (!t1 || !t2 || !cu || bna < 1 || bnb < 1 || yt < 1) return tl_errcode(ctx);
  int O, other;
  TRY(tl_atvm_winograd_output(ctx, s, "conv2d_nchw_winograd.mali", &O, &other));
  if (other >= 0) TRY(bind_simple(ctx, s, other));
  TRY(tl_atvm_inline_named(ctx, s, "data_pad"));
  char oname[128];
  snprintf(oname, sizeof oname, "%s", tl_sched_stage_name(s, O));

  /* weight transform U[eps, nu, co, ci]: (co, ci) fused over 64 threads */
  int U = find(s, "kernel_pack");
  if (U >= 0) {
    int eps = node_at(s, U, 0), nu = node_at(s, U, 1), co = node_at(s, U, 2), c = node_at(s, U, 3);
    int rh = node_at(s, U, 4), rw = node_at(s, U, 5), f;
    int order[6] = {co, c, eps, nu, rh, rw};
    TRY(tl_atvm_reorder_nodes(ctx, s, U, order, 6));
    int fz[2] = {co, c};
    TRY(tl_atvm_fuse_nodes(ctx, s, U, fz, 2, &f));
    int64_t th = 64;
    int tt[2];
    TRY(tl_atvm_split_node(ctx, s, U, f, 1, &th, tt));
    TRY(ann(ctx, s, U, tt[0], TL_ANN_BLOCK_X));
    TRY(ann(ctx, s, U, tt[1], TL_ANN_THREAD_X));
    (void)eps, (void)nu, (void)rh, (void)rw;
  }

  /* input transform V[eps, nu, ci, p]: (ci, p) fused, split by tile_t1;
  ** the accumulation (VL) and the input tile computed per thread */
  int V = find(s, "data_pack");
  if (V < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_nchw_winograd.mali: no data_pack stage");
  int VL;
  TRY(tl_sched_cache_write(ctx, s, V, "local", &VL));
  V = find(s, "data_pack");
  int vt;
  {
    int eps = node_at(s, V, 0), nu = node_at(s, V, 1), c = node_at(s, V, 2), p = node_at(s, V, 3);
    int order[4] = {c, p, eps, nu}, f, bt[2];
    TRY(tl_atvm_reorder_nodes(ctx, s, V, order, 4));
    int fz[2] = {c, p};
    TRY(tl_atvm_fuse_nodes(ctx, s, V, fz, 2, &f));
    TRY(tl_atvm_split_node(ctx, s, V, f, 1, &t1[1], bt));
    TRY(ann(ctx, s, V, bt[0], TL_ANN_BLOCK_X));
    TRY(ann(ctx, s, V, bt[1], TL_ANN_THREAD_X));
    TRY(ann(ctx, s, V, eps, TL_ANN_UNROLL));
    TRY(ann(ctx, s, V, nu, TL_ANN_UNROLL));
    vt = bt[1];
  }
  VL = find(s, tl_sched_stage_name(s, VL));
  TRY(tl_sched_compute_at(ctx, s, VL, V, pos(s, V, vt)));
  {
    /* VL: eps nu ci p | ra rb -> ci p eps nu ra rb; the input tile at p */
    int order[6] = {2, 3, 0, 1, 4, 5};
    TRY(tl_sched_reorder(ctx, s, VL, 6, order));
    for (int i = 2; i < 4; i++) TRY(ann(ctx, s, VL, node_at(s, VL, i), TL_ANN_UNROLL));
  }
  int D = find(s, "input_tile");
  if (D >= 0) {
    VL = find(s, "data_pack.local");
    TRY(tl_sched_compute_at(ctx, s, D, VL, 1));
    D = find(s, "input_tile");
    TRY(ann(ctx, s, D, node_at(s, D, 2), TL_ANN_UNROLL));
    TRY(ann(ctx, s, D, node_at(s, D, 3), TL_ANN_UNROLL));
  }

  /* batched GEMM M[eps, nu, co, p]: a bna x bnb tile per thread, yt threads
  ** along co, (eps, nu) fused into blockIdx.z; the accumulation (ML) at the thread */
  int M = find(s, "bgemm");
  if (M < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_nchw_winograd.mali: no bgemm stage");
  int ML;
  TRY(tl_sched_cache_write(ctx, s, M, "local", &ML));
  M = find(s, "bgemm");
  int64_t P = tl_dag_tensor_shape(tl_sched_dag(s), tl_sched_stage_tensor(s, M, 0))[3];
  int vec_p = is_vec_len(bnb) && P % bnb == 0;
  int mthr;
  {
    int eps = node_at(s, M, 0), nu = node_at(s, M, 1), co = node_at(s, M, 2), p = node_at(s, M, 3);
    int c2[2], p2[2], y2[2], z;
    TRY(tl_atvm_split_node(ctx, s, M, co, 1, &bna, c2));
    TRY(tl_atvm_split_node(ctx, s, M, p, 1, &bnb, p2));
    TRY(tl_atvm_split_node(ctx, s, M, c2[0], 1, &yt, y2));
    int order[7] = {eps, nu, y2[0], p2[0], y2[1], c2[1], p2[1]};
    TRY(tl_atvm_reorder_nodes(ctx, s, M, order, 7));
    int fz[2] = {eps, nu};
    TRY(tl_atvm_fuse_nodes(ctx, s, M, fz, 2, &z));
    TRY(ann(ctx, s, M, z, TL_ANN_BLOCK_Z));
    TRY(ann(ctx, s, M, y2[0], TL_ANN_BLOCK_Y));
    TRY(ann(ctx, s, M, p2[0], TL_ANN_BLOCK_X));
    TRY(ann(ctx, s, M, y2[1], TL_ANN_THREAD_Y));
    TRY(ann(ctx, s, M, c2[1], TL_ANN_UNROLL));
    TRY(ann(ctx, s, M, p2[1], vec_p ? TL_ANN_VECTORIZE : TL_ANN_UNROLL));
    mthr = y2[1];
  }
  ML = find(s, tl_sched_stage_name(s, ML));
  TRY(tl_sched_compute_at(ctx, s, ML, M, pos(s, M, mthr)));
  {
    int co = node_at(s, ML, 2), p = node_at(s, ML, 3), c = node_at(s, ML, 4);
    int c2[2], p2[2], k2[2];
    TRY(tl_atvm_split_node(ctx, s, ML, co, 1, &bna, c2));
    TRY(tl_atvm_split_node(ctx, s, ML, p, 1, &bnb, p2));
    TRY(tl_atvm_split_node(ctx, s, ML, c, 1, &cu[1], k2));
    int order[4] = {k2[0], k2[1], c2[1], p2[1]};
    TRY(tl_atvm_reorder_nodes(ctx, s, ML, order, 4));
    /* keep the outer (extent-1) spatial parts outside the reduction */
    int ni = tl_sched_num_iters(s, ML);
    int ord2[16], k = 0;
    int ko = pos(s, ML, k2[0]);
    for (int i = 0; i < ni; i++)
      if (i != ko && i < pos(s, ML, k2[1])) ord2[k++] = i;
    ord2[k++] = ko;
    for (int i = pos(s, ML, k2[1]); i < ni; i++) ord2[k++] = i;
    TRY(tl_sched_reorder(ctx, s, ML, ni, ord2));
    TRY(ann(ctx, s, ML, k2[1], TL_ANN_UNROLL));
    TRY(ann(ctx, s, ML, c2[1], TL_ANN_UNROLL));
    TRY(ann(ctx, s, ML, p2[1], vec_p ? TL_ANN_VECTORIZE : TL_ANN_UNROLL));
  }

  /* output: (n, k, h/m, w/m) fused and split by tile_t2, the inverse
  ** transform (Y) per thread */
  O = find(s, oname);
  int ot;
  {
    int n = node_at(s, O, 0), k = node_at(s, O, 1), h = node_at(s, O, 2), w = node_at(s, O, 3);
    int h2[2], w2[2], f, bt[2];
    TRY(tl_atvm_split_node(ctx, s, O, h, 1, &m, h2));
    TRY(tl_atvm_split_node(ctx, s, O, w, 1, &m, w2));
    int order[6] = {n, k, h2[0], w2[0], h2[1], w2[1]};
    TRY(tl_atvm_reorder_nodes(ctx, s, O, order, 6));
    int fz[4] = {n, k, h2[0], w2[0]};
    TRY(tl_atvm_fuse_nodes(ctx, s, O, fz, 4, &f));
    TRY(tl_atvm_split_node(ctx, s, O, f, 1, &t2[1], bt));
    TRY(ann(ctx, s, O, bt[0], TL_ANN_BLOCK_X));
    TRY(ann(ctx, s, O, bt[1], TL_ANN_THREAD_X));
    TRY(ann(ctx, s, O, h2[1], TL_ANN_UNROLL));
    TRY(ann(ctx, s, O, w2[1], TL_ANN_UNROLL));
    ot = bt[1];
  }
  int Y = find(s, "inverse");
  if (Y < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_nchw_winograd.mali: no inverse stage");
  TRY(tl_sched_compute_at(ctx, s, Y, O, pos(s, O, ot)));
  Y = find(s, "inverse");
  for (int i = 2; i < 4; i++) TRY(ann(ctx, s, Y, node_at(s, Y, i), TL_ANN_UNROLL));
  return TL_OK;
}

const tl_atvm_template tl_mali_conv2d_winograd = {"conv2d_nchw_winograd.mali", wino_define,
                                                  wino_compute, wino_schedule};

/* ---- depthwise_conv2d_nchw.mali ------------------------------------------------------ */

static int dw_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(cfg->ctx, a, 1, &ci));
  TRY(define_split(cfg, "tile_c", ci.O, 3, 0));
  TRY(define_split(cfg, "tile_y", ci.OH, 3, 0));
  TRY(define_split(cfg, "tile_x", ci.OW, 3, 0));
  TRY(define_ann(cfg, "ann_spatial", 3, "try_unroll_vec"));
  int64_t tc = tl_atvm_largest_divisor(ci.O, 8), ty = tl_atvm_largest_divisor(ci.OH, 4);
  int64_t xi = pow2_divisor(ci.OW, 4), tx = tl_atvm_largest_divisor(ci.OW / xi, 8);
  int64_t sc[3] = {-1, tc, 1}, sy[3] = {-1, ty, 1}, sx[3] = {-1, tx, xi};
  TRY(tl_cfg_fallback_split(cfg, "tile_c", sc, 3));
  TRY(tl_cfg_fallback_split(cfg, "tile_y", sy, 3));
  TRY(tl_cfg_fallback_split(cfg, "tile_x", sx, 3));
  int64_t spa[3] = {TL_AN_NONE, TL_AN_NONE, TL_AN_VEC};
  tl_cfg_fallback_ints(cfg, "ann_spatial", spa);
  fallback_with_reference_log(cfg, "depthwise_conv2d_nchw.mali");
  const int64_t *fc = fallback_sizes(cfg, "tile_c"), *fy = fallback_sizes(cfg, "tile_y"),
                *fx = fallback_sizes(cfg, "tile_x");
  int64_t sl[3] = {fc[2], fy[2], fx[2]};
  sanitize_ann(cfg, "ann_spatial", sl, 3, 16);
  return TL_OK;
}

static int dw_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  const int64_t *tc = sizes_of(cfg, "tile_c", 3), *ty = sizes_of(cfg, "tile_y", 3),
                *tx = sizes_of(cfg, "tile_x", 3);
  if (!tc || !ty || !tx) return tl_errcode(ctx);
  int O, L, other;
  TRY(tl_atvm_anchor_stages(ctx, s, "depthwise_conv2d_nchw", "depthwise_conv2d_nchw.mali", &O, &L, &other));
  TRY(tl_atvm_inline_named(ctx, s, "PaddedInput"));
  if (other >= 0) TRY(bind_simple(ctx, s, other));
  char lname[128];
  snprintf(lname, sizeof lname, "%s", tl_sched_stage_name(s, L));
  int inner[3], txn;
  TRY(tile_bind_3d(ctx, s, O, tc, ty, tx, inner, &txn));
  for (int i = 0; i < 3; i++)
    if (extent_of(s, O, inner[i]) > 1 && extent_of(s, O, inner[i]) <= 16)
      TRY(ann(ctx, s, O, inner[i], TL_ANN_UNROLL));
  L = find(s, lname);
  TRY(tl_sched_compute_at(ctx, s, L, O, pos(s, O, txn)));
  int c = node_at(s, L, 1), y = node_at(s, L, 2), x = node_at(s, L, 3);
  int di = node_at(s, L, 4), dj = node_at(s, L, 5), t[2];
  TRY(tl_atvm_split_node(ctx, s, L, c, 1, &tc[2], t)); int ci_ = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, y, 1, &ty[2], t)); int yi = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, x, 1, &tx[2], t)); int xi = t[1];
  /* the reduction outside the per-thread tile */
  {
    int ni = tl_sched_num_iters(s, L), ord[16], k = 0, pd = pos(s, L, di), pj = pos(s, L, dj);
    for (int i = 0; i < ni; i++)
      if (i != pd && i != pj && i < pos(s, L, ci_)) ord[k++] = i;
    ord[k++] = pd, ord[k++] = pj;
    for (int i = 0; i < ni; i++)
      if (i != pd && i != pj && i >= pos(s, L, ci_)) ord[k++] = i;
    TRY(tl_sched_reorder(ctx, s, L, ni, ord));
  }
  int64_t kh = extent_of(s, L, di), kw = extent_of(s, L, dj);
  if (kh <= 16) TRY(ann(ctx, s, L, di, TL_ANN_UNROLL));
  if (kw <= 16) TRY(ann(ctx, s, L, dj, TL_ANN_UNROLL));
  int spa[3] = {ci_, yi, xi}, vec;
  int64_t sl[3] = {tc[2], ty[2], tx[2]};
  TRY(apply_ann(cfg, s, L, "ann_spatial", spa, sl, 3, 16, &vec));
  if (vec >= 0) TRY(tl_atvm_move_innermost(ctx, s, L, vec, "mali"));
  return TL_OK;
}

const tl_atvm_template tl_mali_depthwise_conv2d = {"depthwise_conv2d_nchw.mali", dw_define,
                                                   tl_atvm_depthwise_nchw_compute, dw_schedule};

/* ---- dense.mali ------------------------------------------------------------------------ */

static int dense_define(tl_atvm_cfg *cfg, const tl_atvm_args *a) {
  int64_t M = 0, N = 0, K = 0;
  TRY(tl_atvm_dense_dims(cfg->ctx, a, &M, &N, &K));
  TRY(define_split(cfg, "tile_y", M, 3, 0));
  TRY(define_split(cfg, "tile_x", N, 3, 0));
  TRY(define_split(cfg, "c_unroll", K, 2, 64));
  int64_t yi = pow2_divisor(M, 4), ty = tl_atvm_largest_divisor(M / yi, 4);
  int64_t xi = pow2_divisor(N, 4), tx = tl_atvm_largest_divisor(N / xi, 64 / ty);
  int64_t sy[3] = {-1, ty, yi}, sx[3] = {-1, tx, xi}, sk[2] = {-1, tl_atvm_largest_divisor(K, 8)};
  TRY(tl_cfg_fallback_split(cfg, "tile_y", sy, 3));
  TRY(tl_cfg_fallback_split(cfg, "tile_x", sx, 3));
  TRY(tl_cfg_fallback_split(cfg, "c_unroll", sk, 2));
  fallback_with_reference_log(cfg, "dense.mali");
  return TL_OK;
}

static int dense_schedule(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s) {
  tl_ctx *ctx = cfg->ctx;
  const int64_t *ty = sizes_of(cfg, "tile_y", 3), *tx = sizes_of(cfg, "tile_x", 3),
                *cu = sizes_of(cfg, "c_unroll", 2);
  if (!ty || !tx || !cu) return tl_errcode(ctx);
  int O, L, other;
  TRY(tl_atvm_anchor_stages(ctx, s, "dense", "dense.mali", &O, &L, &other));
  if (other >= 0) TRY(bind_simple(ctx, s, other));
  char lname[128];
  snprintf(lname, sizeof lname, "%s", tl_sched_stage_name(s, L));
  int y3[3], x3[3];
  TRY(tl_atvm_split_node(ctx, s, O, node_at(s, O, 0), 2, ty + 1, y3));
  TRY(tl_atvm_split_node(ctx, s, O, node_at(s, O, 3), 2, tx + 1, x3));
  int order[6] = {y3[0], x3[0], y3[1], x3[1], y3[2], x3[2]};
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, 6));
  TRY(ann(ctx, s, O, y3[0], TL_ANN_BLOCK_Y));
  TRY(ann(ctx, s, O, x3[0], TL_ANN_BLOCK_X));
  TRY(ann(ctx, s, O, y3[1], TL_ANN_THREAD_Y));
  TRY(ann(ctx, s, O, x3[1], TL_ANN_THREAD_X));
  int unroll_y = ty[2] < 32, vec_x = tx[2] == 1 || is_vec_len(tx[2]);
  if (unroll_y) TRY(ann(ctx, s, O, y3[2], TL_ANN_UNROLL));
  if (vec_x) TRY(ann(ctx, s, O, x3[2], TL_ANN_VECTORIZE));
  L = find(s, lname);
  TRY(tl_sched_compute_at(ctx, s, L, O, pos(s, O, x3[1])));
  int y = node_at(s, L, 0), x = node_at(s, L, 1), k = node_at(s, L, 2), t[2];
  TRY(tl_atvm_split_node(ctx, s, L, y, 1, &ty[2], t)); int yi = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, x, 1, &tx[2], t)); int xi = t[1];
  TRY(tl_atvm_split_node(ctx, s, L, k, 1, &cu[1], t)); int ko = t[0], ku = t[1];
  int ord[4] = {ko, ku, yi, xi};
  TRY(tl_atvm_reorder_nodes(ctx, s, L, ord, 4));
  TRY(ann(ctx, s, L, ku, TL_ANN_UNROLL));
  if (unroll_y) TRY(ann(ctx, s, L, yi, TL_ANN_UNROLL));
  if (vec_x) TRY(ann(ctx, s, L, xi, TL_ANN_VECTORIZE));
  return TL_OK;
}

const tl_atvm_template tl_mali_dense = {"dense.mali", dense_define, tl_atvm_dense_compute, dense_schedule};
