/*
** sketch.c -- sketch generation: the auto-scheduler's rules applied to a
** compute DAG, breadth-first over (state, stage), from the last stage to
** the first (algorithms spec B4).
**
**   CPU: always-inline, simplify-const-tensor, add-rfactor, add-cache-write,
**        multi-level tiling with fusion of the consumer, multi-level tiling
**        ("SSRSRS"), reduce-outside, skip
**   GPU: add-cache-read (shared), always-inline, cross-thread reduction, split-K (rfactor
**        of a small output's long reduction), add-cache-write, multi-level tiling with fusion, multi-level
**        tiling ("SSSRRSRS"), skip
**
** Each rule answers skip, apply, or apply-and-skip-the-rest for (state,
** stage) and produces (new state, next stage). The rules read the static
** analysis of the state's current DAG (cache stages included) and the
** state's inlined stages. A sketch's split steps get placeholder lengths
** (1) and are listed as open; annotate.c fills them. A rule that cannot
** apply writes why to the trace and the search goes on without it.
*/
#include <jansson.h>
#include <stdio.h>

#include "search.h"

enum { R_SKIP = 0, R_APPLY, R_APPLY_SKIP_REST };

typedef struct work {
  tl_ansor_sketch sk;
  int sid;
} work;

typedef TL_VEC(work) workvec;

void tl_ansor_sketch_free(tl_ansor_sketch *sk) {
  tl_sched_free(sk->s);
  sk->s = NULL;
  TL_VEC_FREE(sk->open);
  TL_VEC_FREE(sk->tiles);
  TL_VEC_FREE(sk->lanes);
  TL_VEC_FREE(sk->threads);
}

static int sketch_copy(tl_ctx *ctx, const tl_ansor_sketch *src, tl_ansor_sketch *dst) {
  memset(dst, 0, sizeof *dst);
  if (tl_sched_copy(ctx, src->s, &dst->s)) return -1;
  for (int i = 0; i < src->open.n; i++) TL_VEC_PUSH(dst->open, src->open.v[i]);
  for (int i = 0; i < src->tiles.n; i++) TL_VEC_PUSH(dst->tiles, src->tiles.v[i]);
  for (int i = 0; i < src->lanes.n; i++) TL_VEC_PUSH(dst->lanes, src->lanes.v[i]);
  for (int i = 0; i < src->threads.n; i++) TL_VEC_PUSH(dst->threads, src->threads.v[i]);
  return 0;
}

static void trace(const tl_ansor_env *env, const tl_sched *s, int st, const char *rule,
                  const char *why) {
  if (!env->trace) return;
  tl_buf_printf(env->trace, "%s: stage '%s': %s\n", rule, tl_sched_stage_name(s, st), why);
}

/* ---- stage queries -------------------------------------------------------------------------- */

static const tl_te_op *op_of(const tl_sched *s, int st) {
  return &s->dag->ops.v[s->stages.v[st].op];
}

int tl_ansor_stage_tiled(const tl_sched *s, int st) {
  const tl_te_op *op = op_of(s, st);
  if (op->kind == TL_OP_PLACEHOLDER) return 0;
  return s->stages.v[st].leaves.n != op->ndim + op->nreduce || s->stages.v[st].rels.n > 0;
}

/* The state's analysis and its inlined stages (one byte per stage). */
typedef struct view {
  tl_ansor_analysis *a;
  uint8_t *inl;
} view;

static int view_make(tl_ctx *ctx, const tl_sched *s, view *v) {
  v->a = NULL;
  v->inl = tl_calloc((size_t)s->stages.n + 1, 1);
  for (int i = 0; i < s->stages.n; i++) v->inl[i] = s->stages.v[i].compute_at == TL_CA_INLINED;
  if (tl_ansor_analyze(ctx, s->dag, &v->a)) {
    free(v->inl);
    return -1;
  }
  return 0;
}

static void view_free(view *v) {
  tl_ansor_analysis_free(v->a);
  free(v->inl);
}

int tl_ansor_needs_mlt(tl_ctx *ctx, const tl_sched *s, int st) {
  view v;
  if (view_make(ctx, s, &v)) return -1;
  int r = tl_ansor_needs_multi_level_tiling(v.a, st) == 1;
  view_free(&v);
  return r;
}

/* The split steps of stage st's spatial axes, as the stage was when they were
** made (stage ids shift with later cache stages: walk back through them). */
int tl_ansor_spatial_split_steps(const tl_sched *s, int st, int *out, int cap) {
  int id = st, n = 0;
  int ndim = op_of(s, st)->ndim;
  int found[256];
  int nf = 0;
  for (int i = s->steps.n - 1; i >= 0; i--) {
    const tl_step *t = &s->steps.v[i];
    if (t->kind == TL_STEP_CHR) {
      if (t->stage_id + 1 <= id) id--;
    } else if (t->kind == TL_STEP_CHW || t->kind == TL_STEP_RF) {
      if (t->stage_id <= id) id--;
    } else if (t->kind == TL_STEP_SP && t->stage_id == id && nf < 256) {
      found[nf++] = i;
    }
  }
  /* splits of the spatial axes come first (oldest first) */
  for (int k = nf - 1; k >= 0 && n < ndim && n < cap; k--) out[n++] = found[k];
  return n;
}

static int has_cache_write(const tl_sched *s, int st) {
  return s->stages.v[st].scope == TL_SCOPE_LOCAL;
}

/* Whether stage st reduces across threads (a reduction iterator bound to threadIdx.x). */
int tl_ansor_stage_xred(const tl_sched *s, int st) {
  if (st < 0 || st >= s->stages.n) return 0;
  const tl_stage *sg = &s->stages.v[st];
  for (int i = 0; i < sg->leaves.n; i++) {
    const tl_iter *it = &sg->nodes.v[sg->leaves.v[i]];
    if (it->kind == TL_ITER_REDUCE && it->ann == TL_ANN_THREAD_X) return 1;
  }
  return 0;
}

/* ---- multi-level tiling ---------------------------------------------------------------------- */

/* Split every axis of untiled stage st by the structure (nS parts per spatial
** axis, nR per reduction axis) and reorder level by level. The spatial split
** step ids go to sp (op->ndim of them). */
static int do_mlt(tl_ctx *ctx, tl_ansor_sketch *sk, int st, const char *fmt, int *sp) {
  tl_sched *s = sk->s;
  const tl_te_op *op = op_of(s, st);
  int ndim = op->ndim, nr = op->nreduce, nax = ndim + nr;
  int nS = 0, nR = 0;
  for (const char *c = fmt; *c; c++) nS += *c == 'S', nR += *c == 'R';
  if (nax > 64 || nS > 16 || nR > 16)
    return tl_err(ctx, TL_E_SCHED, "multi-level tiling: stage '%s' has too many axes", op->name);
  int node[64][16];
  int pos = 0;
  for (int a = 0; a < nax; a++) {
    int parts = a < ndim ? nS : nR;
    if (parts > 1) {
      int64_t ones[16];
      for (int k = 0; k < parts - 1; k++) ones[k] = 1;
      if (tl_sched_split(ctx, s, st, pos, parts - 1, ones, 1)) return -1;
      TL_VEC_PUSH(sk->open, s->steps.n - 1);
      if (a < ndim) sp[a] = s->steps.n - 1;
    } else if (a < ndim) {
      sp[a] = -1;
    }
    for (int k = 0; k < (parts > 1 ? parts : 1); k++)
      node[a][k] = s->stages.v[st].leaves.v[pos + k];
    pos += parts > 1 ? parts : 1;
  }
  int order[64 * 16], n = 0, ls = 0, lr = 0;
  for (const char *c = fmt; *c; c++) {
    if (*c == 'S') {
      for (int a = 0; a < ndim; a++)
        if (ls < (nS > 1 ? nS : 1)) order[n++] = tl_sched_leaf_pos(s, st, node[a][ls]);
      ls++;
    } else if (*c == 'R') {
      for (int a = ndim; a < nax; a++)
        if (lr < (nR > 1 ? nR : 1)) order[n++] = tl_sched_leaf_pos(s, st, node[a][lr]);
      lr++;
    }
  }
  if (n != s->stages.v[st].leaves.n)
    return tl_err(ctx, TL_E_INTERNAL, "multi-level tiling: stage '%s': %d of %d iterators ordered",
                  op->name, n, s->stages.v[st].leaves.n);
  return tl_sched_reorder(ctx, s, st, n, order);
}

/* CPU: the spatial split steps sp of a tiled stage, for the annotation's
** register-tile draw (the last axis's innermost iterator is vectorized). */
static void mark_lanes(const tl_ansor_env *env, tl_ansor_sketch *sk, const int *sp, int nsp) {
  if (env->gpu || nsp < 1 || sp[nsp - 1] < 0) return;
  TL_VEC_PUSH(sk->tiles, nsp);
  for (int i = 0; i < nsp; i++) TL_VEC_PUSH(sk->tiles, sp[i]);
}

/* Tile consumer c like its producer's spatial splits sp (n_split levels plus
** the rest), reordered level by level. */
static int follow_tiling(tl_ctx *ctx, tl_sched *s, int c, const int *sp, int nsp, int n_split) {
  const tl_te_op *op = op_of(s, c);
  if (op->ndim != nsp || op->nreduce || tl_ansor_stage_tiled(s, c))
    return tl_err(ctx, TL_E_SCHED, "follow tiling: stage '%s' does not match its producer's tiles",
                  op->name);
  int node[64][8], pos = 0;
  if (nsp > 64 || n_split > 7) return tl_err(ctx, TL_E_SCHED, "follow tiling: too many levels");
  for (int a = 0; a < nsp; a++) {
    if (sp[a] < 0) return tl_err(ctx, TL_E_SCHED, "follow tiling: axis %d was not split", a);
    int64_t args[4] = {c, pos, sp[a], n_split};
    if (tl_sched_step(ctx, s, TL_STEP_FSP, args, 4, NULL, 0, NULL, NULL)) return -1;
    for (int k = 0; k <= n_split; k++) node[a][k] = s->stages.v[c].leaves.v[pos + k];
    pos += n_split + 1;
  }
  int order[64 * 8], n = 0;
  for (int k = 0; k <= n_split; k++)
    for (int a = 0; a < nsp; a++) order[n++] = tl_sched_leaf_pos(s, c, node[a][k]);
  return tl_sched_reorder(ctx, s, c, n, order);
}

/* ---- the rules ----------------------------------------------------------------------------- */

typedef struct rule {
  const char *name;
  int (*cond)(const tl_ansor_env *env, const tl_sched *s, const view *v, int st);
  /* appends (state, next stage) pairs; returns 0 or -1 (the rule did not apply) */
  int (*apply)(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk, const view *v,
               int st, workvec *out);
} rule;

static int push(workvec *out, tl_ansor_sketch *sk, int sid) {
  work w = {*sk, sid};
  TL_VEC_PUSH(*out, w);
  return 0;
}

/* skip */
static int c_skip(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  (void)env, (void)s, (void)v, (void)st;
  return R_APPLY;
}
static int a_skip(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk, const view *v,
                  int st, workvec *out) {
  (void)env, (void)v;
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  return push(out, &n, st - 1);
}

/* always inline */
static int c_inline(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  const tl_te_op *op = op_of(s, st);
  const tl_stage *sg = &s->stages.v[st];
  if (op->kind == TL_OP_PLACEHOLDER || sg->compute_at != TL_CA_ROOT || sg->is_output) return R_SKIP;
  if (op->nreduce || op->nout != 1 || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  if (sg->scope != TL_SCOPE_GLOBAL) return R_SKIP;
  if (env->gpu) return R_APPLY_SKIP_REST;
  return tl_ansor_is_strictly_inlinable(v->a, st) == 1 ? R_APPLY_SKIP_REST : R_SKIP;
}
static int a_inline(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk, const view *v,
                    int st, workvec *out) {
  (void)v;
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  if (tl_sched_compute_inline(ctx, n.s, st)) {
    trace(env, n.s, st, "always-inline", ctx->msg);
    tl_ansor_sketch_free(&n);
    return -1;
  }
  return push(out, &n, st - 1);
}

/* simplify-const-tensor (CPU). An op whose attribute
** "simplify_const_tensor_indices" names axes that select a constant matrix's
** entries (the Winograd transforms' positions: its body is a select over
** them) runs those axes unrolled, so that each position's select folds to one
** short sum: the leaves become [the other axes, last.outer, the named axes
** (unrolled), last.inner], the last axis split with its inner length drawn as
** a multiple of the vector lanes (it is the channel axis, vectorized). A stage
** whose one consumer carries the attribute too is inlined into it instead:
** the consumer's unrolled positions then share its terms (common
** subexpressions) where a stage of its own would be a pass over a whole
** intermediate. kApplyAndSkipRest. */
static int const_axes(const tl_sched *s, int st, uint8_t *named /* may be NULL: count only */) {
  const tl_te_op *op = op_of(s, st);
  const tl_stage *sg = &s->stages.v[st];
  if (!op->attrs_json || !strstr(op->attrs_json, "\"simplify_const_tensor_indices\"")) return 0;
  json_t *j = json_loads(op->attrs_json, 0, NULL);
  json_t *names = json_object_get(j, "simplify_const_tensor_indices");
  int n = 0;
  for (int i = 0; i < sg->leaves.n && i < 64; i++) {
    const char *leaf = sg->nodes.v[sg->leaves.v[i]].name;
    int hit = 0;
    for (size_t k = 0; k < json_array_size(names) && !hit; k++) {
      const char *nm = json_string_value(json_array_get(names, k));
      hit = nm && strcmp(nm, leaf) == 0;
    }
    if (named) named[i] = (uint8_t)hit;
    n += hit;
  }
  json_decref(j);
  return n;
}
static int c_simplify(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  (void)v;
  const tl_te_op *op = op_of(s, st);
  const tl_stage *sg = &s->stages.v[st];
  if (env->gpu || op->kind == TL_OP_PLACEHOLDER || sg->compute_at != TL_CA_ROOT) return R_SKIP;
  if (op->nreduce || op->nout != 1 || sg->scope != TL_SCOPE_GLOBAL || tl_ansor_stage_tiled(s, st))
    return R_SKIP;
  if (sg->leaves.n > 64 || const_axes(s, st, NULL) == 0) return R_SKIP;
  return R_APPLY_SKIP_REST;
}
static int a_simplify(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk, const view *v,
                      int st, workvec *out) {
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  tl_sched *s = n.s;
  uint8_t named[64];
  int nl = s->stages.v[st].leaves.n;
  const_axes(s, st, named);
  int cons[256], nc = v->a->nops <= 256 ? tl_ansor_consumers_through(v->a, st, v->inl, cons) : 0;
  if (!s->stages.v[st].is_output && nc == 1 && const_axes(s, cons[0], NULL) > 0) {
    tl_ctx sub = {0};
    if (tl_sched_compute_inline(&sub, s, st) == 0) return push(out, &n, st - 1);
    trace(env, s, st, "simplify-const-tensor", sub.msg);   /* then tiled as below */
  }
  int last = nl - 1, split = !named[last];
  int node[65], rc = 0;
  for (int i = 0; i < nl; i++) node[i] = s->stages.v[st].leaves.v[i];
  if (split) {
    int64_t one = 1;
    rc = tl_sched_split(ctx, s, st, last, 1, &one, 1);
    if (!rc) {
      TL_VEC_PUSH(n.open, s->steps.n - 1);
      TL_VEC_PUSH(n.lanes, s->steps.n - 1);
      node[last] = s->stages.v[st].leaves.v[last];
      node[nl] = s->stages.v[st].leaves.v[last + 1];
    }
  }
  int order[65], k = 0;
  if (!rc) {
    for (int i = 0; i < last; i++)
      if (!named[i]) order[k++] = tl_sched_leaf_pos(s, st, node[i]);
    if (split) order[k++] = tl_sched_leaf_pos(s, st, node[last]);
    for (int i = 0; i < nl; i++)
      if (named[i]) order[k++] = tl_sched_leaf_pos(s, st, node[i]);
    if (split) order[k++] = tl_sched_leaf_pos(s, st, node[nl]);
    rc = tl_sched_reorder(ctx, s, st, k, order);
  }
  for (int i = 0; !rc && i < nl; i++)
    if (named[i]) rc = tl_sched_annotate(ctx, s, st, tl_sched_leaf_pos(s, st, node[i]), TL_ANN_UNROLL);
  if (rc) {
    trace(env, s, st, "simplify-const-tensor", ctx->msg);
    tl_ansor_sketch_free(&n);
    return -1;
  }
  return push(out, &n, st - 1);
}

/* add cache write */
static int c_cache_write(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  if (op_of(s, st)->kind == TL_OP_PLACEHOLDER || s->stages.v[st].compute_at != TL_CA_ROOT)
    return R_SKIP;
  if (tl_ansor_needs_multi_level_tiling(v->a, st) != 1 || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  if (tl_ansor_elementwise_consumer(v->a, st, v->inl, NULL) == 1) return R_SKIP;
  return env->gpu ? R_APPLY_SKIP_REST : R_APPLY;
}
static int a_cache_write(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                         const view *v, int st, workvec *out) {
  (void)v;
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  if (tl_sched_cache_write(ctx, n.s, st, "local", NULL)) {
    trace(env, n.s, st, "add-cache-write", ctx->msg);
    tl_ansor_sketch_free(&n);
    return -1;
  }
  return push(out, &n, st);   /* st now names the ".local" stage */
}

/* multi-level tiling with fusion of the element-wise consumer */
static int c_mlt_fuse(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  if (op_of(s, st)->kind == TL_OP_PLACEHOLDER || s->stages.v[st].compute_at != TL_CA_ROOT)
    return R_SKIP;
  if (tl_ansor_needs_multi_level_tiling(v->a, st) != 1 || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  int c;
  if (tl_ansor_elementwise_consumer(v->a, st, v->inl, &c) != 1) return R_SKIP;
  if (s->stages.v[c].scope == TL_SCOPE_SHARED || tl_ansor_stage_tiled(s, c)) return R_SKIP;
  return has_cache_write(s, st) || env->gpu ? R_APPLY_SKIP_REST : R_APPLY;
}
static int a_mlt_fuse(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                      const view *v, int st, workvec *out) {
  int c;
  tl_ansor_elementwise_consumer(v->a, st, v->inl, &c);
  const char *fmt = env->structure;
  int nsp = op_of(sk->s, st)->ndim, made = 0;
  for (int level = 1; level <= 3; level++) {
    if (env->gpu ? level != 3 : level > 2) continue;
    if ((int)strlen(fmt) < level || fmt[level - 1] != 'S') continue;
    tl_ansor_sketch n;
    if (sketch_copy(ctx, sk, &n)) return -1;
    int sp[64];
    if (nsp > 64 || do_mlt(ctx, &n, st, fmt, sp) || follow_tiling(ctx, n.s, c, sp, nsp, level) ||
        tl_sched_compute_at(ctx, n.s, st, c, level * nsp - 1)) {
      trace(env, n.s, st, "multi-level-tiling-with-fusion", ctx->msg);
      tl_ansor_sketch_free(&n);
      continue;
    }
    mark_lanes(env, &n, sp, nsp);
    push(out, &n, st - 1);
    made++;
  }
  return made ? 0 : -1;
}

/* plain multi-level tiling */
static int c_mlt(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  (void)env;
  if (op_of(s, st)->kind == TL_OP_PLACEHOLDER || s->stages.v[st].compute_at != TL_CA_ROOT)
    return R_SKIP;
  if (tl_ansor_needs_multi_level_tiling(v->a, st) != 1 || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  return R_APPLY_SKIP_REST;
}
static int a_mlt(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk, const view *v,
                 int st, workvec *out) {
  (void)v;
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  int sp[64];
  if (op_of(n.s, st)->ndim > 64 || do_mlt(ctx, &n, st, env->structure, sp)) {
    trace(env, n.s, st, "multi-level-tiling", ctx->msg);
    tl_ansor_sketch_free(&n);
    return -1;
  }
  mark_lanes(env, &n, sp, op_of(n.s, st)->ndim);
  return push(out, &n, st - 1);
}

/* reduce-outside (CPU): a reduction with no data reuse (no multi-level
** tiling: a pooling) whose last spatial axis is longer than 1 (an NHWC
** pooling's channels) also runs its reduction outside that axis, [the other
** spatial axes, the reduction, the last spatial axis], so that axis is one
** vector reduced in registers instead of one scalar reduction per element.
** kApply: the stage in the DAG's order stays a sketch too. */
static int c_reduce_outside(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  const tl_te_op *op = op_of(s, st);
  if (env->gpu || op->kind == TL_OP_PLACEHOLDER || !op->nreduce || op->ndim < 1) return R_SKIP;
  if (s->stages.v[st].compute_at != TL_CA_ROOT || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  if (has_cache_write(s, st) || s->stages.v[st].scope != TL_SCOPE_GLOBAL) return R_SKIP;
  if (tl_ansor_needs_multi_level_tiling(v->a, st) != 0 || op->shape[op->ndim - 1] < 2) return R_SKIP;
  return op->ndim + op->nreduce <= 64 ? R_APPLY : R_SKIP;
}
static int a_reduce_outside(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                            const view *v, int st, workvec *out) {
  (void)v;
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  const tl_te_op *op = op_of(n.s, st);
  int ndim = op->ndim, nax = ndim + op->nreduce, order[64], k = 0;
  for (int i = 0; i < ndim - 1; i++) order[k++] = i;
  for (int i = ndim; i < nax; i++) order[k++] = i;
  order[k++] = ndim - 1;
  if (tl_sched_reorder(ctx, n.s, st, k, order)) {
    trace(env, n.s, st, "reduce-outside", ctx->msg);
    tl_ansor_sketch_free(&n);
    return -1;
  }
  return push(out, &n, st - 1);
}

/* GPU: cache the inputs of a tiled stage in shared memory, fetched at the
** outermost reduction tile. */
static int c_cache_read(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  if (!env->gpu || s->stages.v[st].compute_at == TL_CA_INLINED) return R_SKIP;
  if (s->stages.v[st].scope != TL_SCOPE_GLOBAL || op_of(s, st)->nout != 1) return R_SKIP;
  int cons[512];
  if (v->a->nops > 512) return R_SKIP;
  int n = tl_ansor_consumers_through(v->a, st, v->inl, cons);
  if (n == 0) return R_SKIP;
  if (tl_ansor_needs_multi_level_tiling(v->a, cons[0]) != 1) return R_SKIP;
  if (tl_ansor_stage_xred(s, cons[0])) {
    trace(env, s, st, "add-cache-read", "its consumer reduces across threads");
    return R_SKIP;
  }
  /* a direct producer of that consumer */
  const tl_te_op *c = op_of(s, cons[0]), *p = op_of(s, st);
  int direct = 0;
  for (int i = 0; i < c->ninputs; i++) direct |= c->inputs[i] == p->out_tensors[0];
  return direct ? R_APPLY_SKIP_REST : R_SKIP;
}
static int a_cache_read(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                        const view *v, int st, workvec *out) {
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  int cons[512];
  int nc = tl_ansor_consumers_through(v->a, st, v->inl, cons);
  int tensor = op_of(n.s, st)->out_tensors[0];
  for (int k = 0; k < nc; k++) {   /* each cache stage shifts the consumers by one */
    int c = cons[k] + k;
    const tl_te_op *cop = op_of(n.s, c);
    int direct = 0;
    for (int i = 0; i < cop->ninputs; i++) direct |= cop->inputs[i] == tensor;
    if (!direct) {
      trace(env, n.s, st, "add-cache-read", "a consumer reads it through an inlined stage");
      tl_ansor_sketch_free(&n);
      return -1;
    }
    int64_t readers[1] = {c};
    int64_t args[1] = {st};
    if (tl_sched_step(ctx, n.s, TL_STEP_CHR, args, 1, readers, 1, "shared", NULL)) goto fail;
    int cs = c + 1, cache = st + 1;
    /* the last iterator of the reader's outermost reduction tile */
    const tl_stage *sg = &n.s->stages.v[cs];
    int first = -1;
    for (int i = 0; i < sg->leaves.n && first < 0; i++)
      if (sg->nodes.v[sg->leaves.v[i]].kind == TL_ITER_REDUCE) first = i;
    if (first < 0) {
      tl_err(ctx, TL_E_SCHED, "stage '%s' has no reduction tile", tl_sched_stage_name(n.s, cs));
      goto fail;
    }
    int at = first + op_of(n.s, cs)->nreduce - 1;
    if (at >= sg->leaves.n) at = sg->leaves.n - 1;
    if (tl_sched_compute_at(ctx, n.s, cache, cs, at)) goto fail;
  }
  return push(out, &n, st);
fail:
  trace(env, n.s, st, "add-cache-read", ctx->msg);
  tl_ansor_sketch_free(&n);
  return -1;
}

/* rfactor: a reduction with little parallel space and a long reduction (CPU).
** Only a stage with one reduction axis: the schedule factors an iterator of
** a split, not of a fused reduction. */
static int c_rfactor(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  const tl_te_op *op = op_of(s, st);
  if (env->gpu || op->kind == TL_OP_PLACEHOLDER || !op->nreduce) return R_SKIP;
  if (s->stages.v[st].compute_at != TL_CA_ROOT || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  if (has_cache_write(s, st) || s->stages.v[st].scope != TL_SCOPE_GLOBAL) return R_SKIP;
  int64_t space = 1, reduce = 1, cores = env->hw.v[0];
  for (int i = 0; i < op->ndim; i++) space *= op->shape[i];
  for (int i = 0; i < op->nreduce; i++) reduce *= op->reduce_axis[i].extent;
  int need;
  if (tl_ansor_needs_multi_level_tiling(v->a, st) == 1)
    need = cores > 0 && space <= reduce && space <= cores * 16;
  else
    need = reduce > 1 && reduce > cores;
  if (!need) return R_SKIP;
  if (op->nreduce != 1) {
    trace(env, s, st, "add-rfactor", "several reduction axes (a fused reduction is not factored)");
    return R_SKIP;
  }
  return R_APPLY;
}
static int a_rfactor(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                     const view *v, int st, workvec *out) {
  (void)v;
  int ndim = op_of(sk->s, st)->ndim, made = 0;
  for (int inner = 0; inner < 2; inner++) {
    tl_ansor_sketch n;
    if (sketch_copy(ctx, sk, &n)) return -1;
    int64_t one = 1;
    int ok = tl_sched_split(ctx, n.s, st, ndim, 1, &one, 1) == 0;
    if (ok) TL_VEC_PUSH(n.open, n.s->steps.n - 1);
    ok = ok && tl_sched_rfactor(ctx, n.s, st, ndim + inner, ndim, NULL) == 0;
    if (ok && inner) {
      /* the factored axis innermost, for vectorization */
      int nl = n.s->stages.v[st].leaves.n, order[66];
      for (int i = 0; i < nl; i++) order[i] = i;
      if (nl >= 2 && nl <= 66) {
        order[nl - 1] = ndim;
        for (int i = ndim; i < nl - 1; i++) order[i] = i + 1;
        ok = tl_sched_reorder(ctx, n.s, st, nl, order) == 0;
      }
    }
    if (!ok) {
      trace(env, n.s, st, "add-rfactor", ctx->msg);
      tl_ansor_sketch_free(&n);
      continue;
    }
    push(out, &n, st - 1);   /* st is the ".rf" stage; the reduction moved to st + 1 */
    made++;
  }
  return made ? 0 : -1;
}

/* GPU split-K: a reduction whose output is too small to fill the device (at most
** SPLIT_K_SPACE blocks of max_threads_per_block threads) and whose reduction is long (at
** least SPLIT_K_REDUCE) also gets sketches with its longest reduction axis split into K
** parts (K from split_k_parts, dividing the axis) and those factored out (rfactor):
** "<op>.rf" computes K partial sums per output with K times the parallelism and is tiled by
** the rules that follow (a stage without data reuse, such as a batch-1 dense or a pooling,
** is not tiled: its partials are spread over threads, the cross-thread reduction of such
** stages done in two kernels); the original stage then adds the K partials up. K is fixed per
** sketch, so the later splits of the ".rf" stage know their extents. Once per state. */
enum { SPLIT_K_SPACE = 64, SPLIT_K_REDUCE = 128 };
static const int64_t split_k_parts[] = {4, 16};

static int c_split_k(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  const tl_te_op *op = op_of(s, st);
  if (!env->gpu || op->kind == TL_OP_PLACEHOLDER || !op->nreduce) return R_SKIP;
  if (s->stages.v[st].compute_at != TL_CA_ROOT || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  if (has_cache_write(s, st) || s->stages.v[st].scope != TL_SCOPE_GLOBAL) return R_SKIP;
  (void)v;
  for (int i = 0; i < s->steps.n; i++)
    if (s->steps.v[i].kind == TL_STEP_RF) return R_SKIP;
  int64_t space = 1, reduce = 1, threads = env->hw.v[5] > 0 ? env->hw.v[5] : 1024;
  for (int i = 0; i < op->ndim; i++) space *= op->shape[i];
  for (int i = 0; i < op->nreduce; i++) reduce *= op->reduce_axis[i].extent;
  if (space > SPLIT_K_SPACE * threads || reduce < SPLIT_K_REDUCE) return R_SKIP;
  return R_APPLY;
}
static int a_split_k(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                     const view *v, int st, workvec *out) {
  (void)v;
  const tl_te_op *op = op_of(sk->s, st);
  int ndim = op->ndim, longest = 0, made = 0;
  for (int i = 1; i < op->nreduce; i++)
    if (op->reduce_axis[i].extent > op->reduce_axis[longest].extent) longest = i;
  int64_t ext = op->reduce_axis[longest].extent;
  for (size_t k = 0; k < TL_ARRAY_SIZE(split_k_parts); k++) {
    int64_t parts = split_k_parts[k];
    if (ext % parts || ext / parts < 2) {
      trace(env, sk->s, st, "split-k", "the longest reduction axis does not divide into parts");
      continue;
    }
    tl_ansor_sketch n;
    if (sketch_copy(ctx, sk, &n)) return -1;
    if (tl_sched_split(ctx, n.s, st, ndim + longest, 1, &parts, 0) ||
        tl_sched_rfactor(ctx, n.s, st, ndim + longest, ndim, NULL)) {
      trace(env, n.s, st, "split-k", ctx->msg);
      tl_ansor_sketch_free(&n);
      continue;
    }
    push(out, &n, st);   /* st is the ".rf" stage now, tiled next */
    made++;
  }
  return made ? 0 : -1;
}

/* GPU cross-thread reduction: a reduction whose output is too small to give every thread
** its own output element but whose reduction is long spreads the reduction of each element
** over the threads of a block, which combine their partial results in shared memory
** (core/te/lower.c, emit_xred). When (algorithms spec B4, CrossThreadReduction; T =
** max_threads_per_block, W = warp_size):
**   multi-level tiling stage   space <= T and space < reduce (TVM's condition), or (an
**                              extension for small outputs that tiling cannot spread:
**                              resnet-18's 7x7x512 convs on a GPU) space <= XRED_SPACE x T
**                              and reduce >= XRED_REDUCE
**   other stages               reduce > W (a pooling, a batch-1 dense)
** never for a stage with a cache-write stage or once an rfactor step exists. The reduction
** iterators are fused. Root form: the fused reduction is split by the thread count, inner
** part bound to threadIdx.x (each block reduces one output element; a consumer is a kernel
** of its own). With a single element-wise consumer (bias, relu, a pooling's division) that
** is not tiled, also the fused form: the consumer's last iterator is split by the thread
** count and its inner part bound to threadIdx.x, the fused reduction follows that split
** (inner part threadIdx.x: the same threads) and the stage is computed at the consumer's
** outer part, so the consumer reads each block's results from shared memory in the same
** kernel. The thread count is open: the annotation draws it (the sketch lists the split in
** `threads`). */
enum { XRED_SPACE = 32, XRED_REDUCE = 128 };

static int c_xred(const tl_ansor_env *env, const tl_sched *s, const view *v, int st) {
  const tl_te_op *op = op_of(s, st);
  if (!env->gpu || op->kind == TL_OP_PLACEHOLDER || !op->nreduce) return R_SKIP;
  if (s->stages.v[st].compute_at != TL_CA_ROOT || tl_ansor_stage_tiled(s, st)) return R_SKIP;
  if (has_cache_write(s, st) || s->stages.v[st].scope != TL_SCOPE_GLOBAL) return R_SKIP;
  for (int i = 0; i < s->steps.n; i++)
    if (s->steps.v[i].kind == TL_STEP_RF) return R_SKIP;
  int64_t space = 1, reduce = 1;
  int64_t threads = env->hw.v[5] > 0 ? env->hw.v[5] : 1024, warp = env->hw.v[7] > 0 ? env->hw.v[7] : 1;
  for (int i = 0; i < op->ndim; i++) space *= op->shape[i];
  for (int i = 0; i < op->nreduce; i++) reduce *= op->reduce_axis[i].extent;
  char why[200];
  if (op->nout != 1) {
    trace(env, s, st, "cross-thread-reduction", "a reduction of several outputs");
    return R_SKIP;
  }
  if (tl_ansor_needs_multi_level_tiling(v->a, st) == 1) {
    if ((space <= threads && space < reduce) ||
        (space <= XRED_SPACE * threads && reduce >= XRED_REDUCE))
      return R_APPLY;
    snprintf(why, sizeof why, "output of %lld elements for a reduction of %lld (applies to at most "
             "%lld elements with a longer reduction, or %lld with one of at least %d)",
             (long long)space, (long long)reduce, (long long)threads,
             (long long)(XRED_SPACE * threads), XRED_REDUCE);
  } else {
    if (reduce > warp) return R_APPLY;
    snprintf(why, sizeof why, "a reduction of %lld, not longer than the warp (%lld)",
             (long long)reduce, (long long)warp);
  }
  trace(env, s, st, "cross-thread-reduction", why);
  return R_SKIP;
}

/* One cross-thread sketch of stage st: computed in consumer c (c >= 0) or at root (c < 0). */
static int make_xred(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk, int st,
                     int c, workvec *out) {
  tl_ansor_sketch n;
  if (sketch_copy(ctx, sk, &n)) return -1;
  tl_sched *s = n.s;
  const tl_te_op *op = op_of(s, st);
  int ndim = op->ndim, nr = op->nreduce;
  int64_t reduce = 1, one = 1;
  for (int i = 0; i < nr; i++) reduce *= op->reduce_axis[i].extent;
  int rc = 0;
  if (nr > 1) {
    int ids[64];
    if (ndim + nr > 64) rc = tl_err(ctx, TL_E_SCHED, "too many iterators");
    for (int i = 0; i < nr && !rc; i++) ids[i] = ndim + i;
    if (!rc) rc = tl_sched_fuse(ctx, s, st, nr, ids);
  }
  if (!rc && c >= 0) {
    /* the consumer's last iterator over the threads; the reduction follows it */
    if (!(rc = tl_sched_split(ctx, s, c, ndim - 1, 1, &one, 1))) {
      int src = s->steps.n - 1;
      TL_VEC_PUSH(n.threads, src);
      TL_VEC_PUSH(n.threads, reduce);
      rc = tl_sched_annotate(ctx, s, c, ndim, TL_ANN_THREAD_X);
      int64_t args[4] = {st, ndim, src, 1};
      if (!rc) rc = tl_sched_step(ctx, s, TL_STEP_FSP, args, 4, NULL, 0, NULL, NULL);
      if (!rc) rc = tl_sched_annotate(ctx, s, st, ndim + 1, TL_ANN_THREAD_X);
      if (!rc) rc = tl_sched_compute_at(ctx, s, st, c, ndim - 1);
    }
  } else if (!rc) {
    if (!(rc = tl_sched_split(ctx, s, st, ndim, 1, &one, 1))) {
      TL_VEC_PUSH(n.threads, s->steps.n - 1);
      TL_VEC_PUSH(n.threads, reduce);
      rc = tl_sched_annotate(ctx, s, st, ndim + 1, TL_ANN_THREAD_X);
    }
  }
  if (rc) {
    trace(env, s, st, "cross-thread-reduction", ctx->msg);
    tl_ansor_sketch_free(&n);
    return -1;
  }
  return push(out, &n, st - 1);
}

/* The root form always; with an element-wise consumer also the form computed in it (one
** kernel, but a block's outputs reduced one after the other: the search weighs the two). */
static int a_xred(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk, const view *v,
                  int st, workvec *out) {
  const tl_sched *s = sk->s;
  int ndim = op_of(s, st)->ndim, c = -1;
  int fused = tl_ansor_elementwise_consumer(v->a, st, v->inl, &c) == 1 &&
              op_of(s, c)->nreduce == 0 && s->stages.v[c].compute_at == TL_CA_ROOT &&
              s->stages.v[c].scope == TL_SCOPE_GLOBAL && !tl_ansor_stage_tiled(s, c) &&
              tl_ansor_needs_multi_level_tiling(v->a, c) != 1 && op_of(s, c)->ndim == ndim &&
              ndim >= 1;
  int made = make_xred(ctx, env, sk, st, -1, out) == 0;
  if (fused) made += make_xred(ctx, env, sk, st, c, out) == 0;
  return made ? 0 : -1;
}

static const rule cpu_rules[] = {
  {"always-inline", c_inline, a_inline},
  {"simplify-const-tensor", c_simplify, a_simplify},
  {"add-rfactor", c_rfactor, a_rfactor},
  {"add-cache-write", c_cache_write, a_cache_write},
  {"multi-level-tiling-with-fusion", c_mlt_fuse, a_mlt_fuse},
  {"multi-level-tiling", c_mlt, a_mlt},
  {"reduce-outside", c_reduce_outside, a_reduce_outside},
  {"skip", c_skip, a_skip},
};

static const rule gpu_rules[] = {
  {"add-cache-read", c_cache_read, a_cache_read},
  {"always-inline", c_inline, a_inline},
  {"cross-thread-reduction", c_xred, a_xred},
  {"split-k", c_split_k, a_split_k},
  {"add-cache-write", c_cache_write, a_cache_write},
  {"multi-level-tiling-with-fusion", c_mlt_fuse, a_mlt_fuse},
  {"multi-level-tiling", c_mlt, a_mlt},
  {"skip", c_skip, a_skip},
};

/* ---- breadth-first generation -------------------------------------------------------------- */

int tl_ansor_gen_sketches(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *init,
                          tl_ansor_sketch_vec *out) {
  const rule *rules = env->gpu ? gpu_rules : cpu_rules;
  int nrules = env->gpu ? (int)TL_ARRAY_SIZE(gpu_rules) : (int)TL_ARRAY_SIZE(cpu_rules);
  workvec cur = {0}, next = {0};
  tl_ansor_sketch first = {0};
  if (tl_sched_copy(ctx, init, &first.s)) return -1;
  push(&cur, &first, init->stages.n - 1);
  int rc = 0;
  while (cur.n && !rc) {
    for (int w = 0; w < cur.n; w++) {
      work *it = &cur.v[w];
      if (it->sid < 0) {
        TL_VEC_PUSH(*out, it->sk);
        it->sk.s = NULL;
        continue;
      }
      view v;
      if (view_make(ctx, it->sk.s, &v)) {
        rc = -1;
        break;
      }
      for (int r = 0; r < nrules; r++) {
        int c = rules[r].cond(env, it->sk.s, &v, it->sid);
        if (c == R_SKIP) continue;
        tl_ctx sub = {0};
        int ok = rules[r].apply(&sub, env, &it->sk, &v, it->sid, &next) == 0;
        if (c == R_APPLY_SKIP_REST && ok) break;
      }
      view_free(&v);
      tl_ansor_sketch_free(&it->sk);
    }
    for (int w = 0; w < cur.n; w++)
      if (cur.v[w].sk.s) tl_ansor_sketch_free(&cur.v[w].sk);
    cur.n = 0;
    workvec t = cur;
    cur = next;
    next = t;
  }
  for (int w = 0; w < cur.n; w++) tl_ansor_sketch_free(&cur.v[w].sk);
  TL_VEC_FREE(cur);
  TL_VEC_FREE(next);
  return rc;
}
