/*
** annotate.c -- random annotation of sketches and mutation of states
** (algorithms spec B5 and B6).
**
** Annotation fills the open split lengths of a sketch with a factorization
** drawn uniformly from all nested-divisor tuples of the split's extent whose
** innermost length is at most max_innermost_split_factor, replays the steps
** on a fresh DAG copy, then applies the init rules:
**
**   CPU  change compute location, parallel, auto-unroll pragma, vectorize, the
**        partition marks of a tiled stage that reads a padded input
**   GPU  thread binding (blockIdx over the first two tile levels, threadIdx over the
**        third; cooperative fetch of shared stages; a cross-thread reduction's outer
**        spatial iterators over blockIdx), auto-unroll pragma
**
** A cross-thread reduction's thread count (the one length of its split) is drawn from
** thread_counts (multiples of the warp, up to max_threads_per_block) and mutated among
** them.
**
** Mutations edit the step list (a tile size moved between two levels of one
** split, an auto_unroll_max_step value, a compute location, the number of
** outer iterators fused into a parallel loop) and replay it.
** A rule that finds the state invalid (too few or too many threads, a block over
** the register file) returns NULL with the reason in ctx.
*/
#include <stdio.h>
#include <stdlib.h>

#include "search.h"
#include "../te/partition.h"

static const tl_te_op *op_of(const tl_sched *s, int st) {
  return &s->dag->ops.v[s->stages.v[st].op];
}
static const tl_iter *leaf_of(const tl_sched *s, int st, int i) {
  const tl_stage *sg = &s->stages.v[st];
  return &sg->nodes.v[sg->leaves.v[i]];
}
static int pick(uint64_t *rng, int n) { return n <= 1 ? 0 : (int)(tl_ansor_rand(rng) % (uint64_t)n); }

/* ---- cross-thread reductions: the block's thread count ------------------------------------ */

/* Thread counts for a cross-thread reduction of `reduce` elements (sketch.c): W x 2^a and
** W x 3 x 2^a (W the warp, at least 2; the second kind makes the tree fold a
** non-power-of-two count) up to max_threads_per_block, ending at the first that covers the
** reduction. Ascending; returns the count (at least 1). */
static int thread_counts(const tl_ansor_env *env, int64_t reduce, int64_t *out, int cap) {
  int64_t warp = env->hw.v[7] > 1 ? env->hw.v[7] : 2;
  int64_t maxt = env->hw.v[5] > 0 ? env->hw.v[5] : 1024;
  int n = 0;
  for (int64_t x = warp; x <= maxt && n < cap; x *= 2) {
    out[n++] = x;
    if (x >= reduce) break;
    if (x % 2 == 0 && x / 2 * 3 <= maxt && n < cap) {
      out[n++] = x / 2 * 3;
      if (x / 2 * 3 >= reduce) break;
    }
  }
  if (!n) out[n++] = maxt < warp ? maxt : warp;
  return n;
}

/* Whether step i of s is the thread-count split of a cross-thread reduction: a split of one
** length whose inner part the next step binds to threadIdx.x (the sketch rule's form). */
static int is_thread_split(const tl_sched *s, int i) {
  const tl_step *t = &s->steps.v[i];
  if (t->kind != TL_STEP_SP || t->nints != 1 || i + 1 >= s->steps.n) return 0;
  const tl_step *a = &s->steps.v[i + 1];
  return a->kind == TL_STEP_AN && a->stage_id == t->stage_id && a->iter_id == t->iter_id + 1 &&
         a->annotation == TL_ANN_THREAD_X;
}

/* ---- factorizations ---------------------------------------------------------------------- */

static int divisors(int64_t n, int64_t *out, int cap) {
  int k = 0, hi = 0;
  int64_t big[128];
  for (int64_t d = 1; d * d <= n; d++)
    if (n % d == 0) {
      if (k < cap) out[k++] = d;
      if (d * d != n && hi < 128) big[hi++] = n / d;
    }
  for (int i = hi - 1; i >= 0 && k < cap; i--) out[k++] = big[i];
  return k;
}

/* Tuples (l1..lk) with l1*..*lk dividing rem, lk <= maxin and lk a multiple
** of mult. */
static double count_schemes(int64_t rem, int k, int64_t maxin, int64_t mult) {
  int64_t d[256];
  int nd = divisors(rem, d, 256);
  double c = 0;
  for (int i = 0; i < nd; i++) {
    if (k == 1) c += d[i] <= maxin && d[i] % mult == 0;
    else c += count_schemes(rem / d[i], k - 1, maxin, mult);
  }
  return c;
}

static void nth_scheme(int64_t rem, int k, int64_t maxin, int64_t mult, double r, int64_t *out) {
  int64_t d[256];
  int nd = divisors(rem, d, 256);
  for (int i = 0; i < nd; i++) {
    double c = k == 1 ? (d[i] <= maxin && d[i] % mult == 0)
                      : count_schemes(rem / d[i], k - 1, maxin, mult);
    if (r < c || i == nd - 1) {
      out[0] = d[i];
      if (k > 1) nth_scheme(rem / d[i], k - 1, maxin, mult, r, out + 1);
      return;
    }
    r -= c;
  }
}

/* A uniform draw among the schemes of extent into k lengths (innermost at
** most maxin); with mult > 1, among those whose innermost is a multiple of
** mult when there are any. */
static void random_scheme(int64_t extent, int k, int64_t maxin, int64_t mult, uint64_t *rng,
                          int64_t *out) {
  if (extent <= 0) extent = 1;
  double total = mult > 1 ? count_schemes(extent, k, maxin, mult) : 0;
  if (total < 1) {
    mult = 1;
    total = count_schemes(extent, k, maxin, 1);
  }
  if (total < 1) {
    for (int i = 0; i < k; i++) out[i] = 1;
    return;
  }
  double r = (double)(tl_ansor_rand(rng) % (uint64_t)total);
  nth_scheme(extent, k, maxin, mult, r, out);
}

/* The vector lanes of the target for 32-bit elements (vector_unit_bytes / 4). */
static int64_t target_lanes(const tl_ansor_env *env) {
  int64_t l = env->hw.v[1] / 4;
  return l > 1 ? l : 1;
}

/* Vector registers: 32 with 16 lanes (AVX-512) or 4 (AArch64 NEON), else 16
** (AVX2, SSE). */
static int64_t target_vregs(const tl_ansor_env *env) {
  int64_t l = target_lanes(env);
  return l >= 16 || l == 4 ? 32 : 16;
}

/* Fill the open lengths of one tiled stage (tiles: n and its n spatial split
** step ids) drawn as a register tile: the innermost length of the last axis
** a multiple of the lanes, and the accumulators (the product of the
** innermost lengths over the lanes) between a quarter of the vector registers
** and all but four of them, so that a vectorized, unrolled innermost tile
** keeps its partial sums in registers and has enough independent FMAs in
** flight. Up to 64 joint draws; the last one stays when none fits. store:
** each step's lengths (16 per step, indexed like the steps). */
static void register_tile(const tl_ansor_env *env, const int *tiles, tl_step *steps,
                          int64_t *len_of_step, uint64_t *rng) {
  int n = tiles[0];
  int64_t lanes = target_lanes(env), regs = target_vregs(env);
  int64_t lo = TL_MAX(2, regs / 4), hi = regs - 4;
  int64_t maxin = env->p.max_innermost_split_factor;
  for (int tries = 0; tries < 64; tries++) {
    double acc = 1;
    for (int a = 0; a < n; a++) {
      int id = tiles[1 + a];
      if (id < 0) continue;
      tl_step *t = &steps[id];
      int64_t *l = len_of_step + 16 * (int64_t)id;
      random_scheme(t->extent, t->nints, maxin, a == n - 1 ? lanes : 1, rng, l);
      int64_t in = l[t->nints - 1];
      acc *= a == n - 1 ? (double)in / (double)lanes : (double)in;
    }
    if (acc >= (double)lo && acc <= (double)hi) return;
  }
}

/* ---- replay ------------------------------------------------------------------------------- */

tl_sched *tl_ansor_replay(tl_ctx *ctx, const tl_sched *base, const tl_step *steps, int n) {
  tl_sched *s;
  if (tl_sched_fresh(ctx, base, &s)) return NULL;
  for (int i = 0; i < n; i++)
    if (tl_sched_apply(ctx, s, &steps[i])) {
      tl_err_prefix(ctx, "replay: step %d: ", i);
      tl_sched_free(s);
      return NULL;
    }
  return s;
}

/* Shallow copies of a state's steps (ints replaced where a caller edits them). */
static tl_step *steps_copy(const tl_sched *s) {
  tl_step *v = tl_malloc(sizeof(tl_step) * (size_t)(s->steps.n + 1));
  if (s->steps.n > 0) memcpy(v, s->steps.v, sizeof(tl_step) * (size_t)s->steps.n);
  return v;
}

/* ---- init rules --------------------------------------------------------------------------- */

/* CPU: the serial loops of a tiled reduction that reads a padded input (a producer holding
** an if_then_else(c, x, 0)), from the end of its first run of reduction loops in, marked
** "loop_partition_each". Where the padding is inlined into the reduction, its border
** iterations then drop the taps that read only padding, and a guard that the loops inside
** do not change is tested once around them (core/te/partition.h): a 3x3 conv on a 7x7 map
** does 18% fewer FMAs and has no guard in its inner loop. Where the padding has a stage of
** its own, the marks change nothing: a producer is computed at most as deep as the first
** run of reduction loops (location_candidates), outside every marked loop, whose pieces
** would each repeat it. */
static int init_partition(tl_ctx *ctx, tl_sched *s) {
  for (int st = 0; st < s->stages.n; st++) {
    const tl_te_op *op = op_of(s, st);
    const tl_stage *sg = &s->stages.v[st];
    if (op->kind == TL_OP_PLACEHOLDER || !op->nreduce || sg->compute_at == TL_CA_INLINED ||
        !tl_ansor_stage_tiled(s, st))
      continue;
    int padded = 0;
    for (int i = 0; i < op->ninputs && !padded; i++) {
      const tl_te_op *po = &s->dag->ops.v[s->dag->tensors.v[op->inputs[i]].op];
      for (int b = 0; po->kind != TL_OP_PLACEHOLDER && b < po->nout && !padded; b++)
        padded = tl_partition_zero_guard(s->dag->ir, po->body[b]);
    }
    if (!padded) continue;
    int phase = 0, last_at = -1;  /* phase 0: before the first reduction loop, 1: in that run, 2: after */
    for (int i = 0; i < sg->leaves.n; i++)
      if (tl_sched_attached_at(s, st, sg->leaves.v[i]) >= 0) last_at = i;
    for (int i = 0; i < sg->leaves.n; i++) {
      const tl_iter *it = leaf_of(s, st, i);
      if (phase == 0 && it->kind == TL_ITER_REDUCE) phase = 1;
      else if (phase == 1 && it->kind != TL_ITER_REDUCE) phase = 2;
      if (phase < 2 || i <= last_at || it->ann != TL_ANN_NONE) continue;
      if (tl_sched_step(ctx, s, TL_STEP_PR, (int64_t[]){st, i}, 2, NULL, 0, "loop_partition_each", NULL))
        return -1;
    }
  }
  return 0;
}

/* Compute-location candidates of stage st: iterator positions of its single
** consumer (through inlined stages). Returns the count; *target the consumer. */
static int location_candidates(const tl_sched *s, int st, int *target, int *cand, int cap) {
  *target = -1;
  int ncons = 0, c = -1;
  for (int o = st + 1; o < s->stages.n; o++) {
    /* direct readers, or readers through inlined stages */
    const tl_te_op *op = op_of(s, o);
    int reads = 0;
    for (int i = 0; i < op->ninputs && !reads; i++) {
      int p = s->dag->tensors.v[op->inputs[i]].op;
      if (p == st) reads = 1;
    }
    if (!reads || s->stages.v[o].compute_at == TL_CA_INLINED) {
      if (reads) return 0;   /* read through an inlined stage: keep it simple */
      continue;
    }
    ncons++;
    c = o;
  }
  if (ncons != 1) return 0;
  *target = c;
  const tl_stage *tg = &s->stages.v[c];
  int tiled = tl_ansor_stage_tiled(s, c), seen_reduce = 0, n = 0;
  for (int i = 0; i < tg->leaves.n && n < cap; i++) {
    const tl_iter *it = leaf_of(s, c, i);
    if (it->kind == TL_ITER_REDUCE) {
      if (!tiled) break;
      seen_reduce = 1;
    } else if (seen_reduce) {
      break;
    }
    if (it->ann == TL_ANN_UNROLL) break;
    if (it->extent == 1) continue;
    size_t ln = strlen(it->name);
    if (tg->compute_at == TL_CA_ITER && it->kind == TL_ITER_SPATIAL && ln > 2 &&
        strcmp(it->name + ln - 2, ".0") == 0)
      continue;
    cand[n++] = i;
    if (tl_sched_attached_at(s, c, tg->leaves.v[i]) >= 0) break;
  }
  return n;
}

static int change_compute_location(tl_ctx *ctx, const tl_ansor_env *env, tl_sched *s,
                                   uint64_t *rng) {
  if (env->p.disable_change_compute_location) return 0;
  for (int st = s->stages.n - 1; st >= 0; st--) {
    const tl_te_op *op = op_of(s, st);
    const tl_stage *sg = &s->stages.v[st];
    if (op->kind == TL_OP_PLACEHOLDER || sg->compute_at == TL_CA_INLINED || sg->is_output) continue;
    if (tl_ansor_stage_tiled(s, st) || tl_ansor_needs_mlt(ctx, s, st) != 0) continue;
    int cand[64], target;
    int n = location_candidates(s, st, &target, cand, 64);
    int choice = pick(rng, n + 2);
    if (choice == 0) {
      if (!op->nreduce && tl_sched_attached_at(s, st, -1) < 0) {
        tl_ctx sub = {0};
        tl_sched_compute_inline(&sub, s, st);   /* kept at root when not inlinable */
      }
    } else if (choice == 1) {
      if (sg->compute_at != TL_CA_ROOT && tl_sched_step(ctx, s, TL_STEP_CR, (int64_t[]){st}, 1, NULL, 0, NULL, NULL))
        return -1;
    } else if (tl_sched_compute_at(ctx, s, st, target, cand[choice - 2])) {
      return -1;
    }
  }
  return 0;
}

static int annotate_parallel(tl_ctx *ctx, const tl_ansor_env *env, tl_sched *s, int st) {
  const tl_stage *sg = &s->stages.v[st];
  int64_t cores = env->hw.v[0] > 0 ? env->hw.v[0] : 1, prod = 1;
  int n = 0;
  for (int i = 0; i < sg->leaves.n; i++) {
    const tl_iter *it = leaf_of(s, st, i);
    if (it->kind != TL_ITER_SPATIAL || it->ann != TL_ANN_NONE) break;
    prod *= it->extent > 0 ? it->extent : 1;
    n++;
    if (tl_sched_attached_at(s, st, sg->leaves.v[i]) >= 0 || prod > cores * 16) break;
  }
  if (n == 0) return 0;
  if (n > 1) {
    int ids[64];
    for (int i = 0; i < n && i < 64; i++) ids[i] = i;
    if (tl_sched_fuse(ctx, s, st, n > 64 ? 64 : n, ids)) return -1;
  }
  return tl_sched_annotate(ctx, s, st, 0, TL_ANN_PARALLEL);
}

static int init_parallel(tl_ctx *ctx, const tl_ansor_env *env, tl_sched *s) {
  for (int st = 0; st < s->stages.n; st++) {
    const tl_stage *sg = &s->stages.v[st];
    if (op_of(s, st)->kind == TL_OP_PLACEHOLDER || sg->compute_at != TL_CA_ROOT) continue;
    if (annotate_parallel(ctx, env, s, st)) return -1;
  }
  return 0;
}

static const int unroll_cpu[] = {0, 16, 64, 512}, unroll_gpu[] = {0, 16, 64, 512, 1024};

static int init_unroll(tl_ctx *ctx, const tl_ansor_env *env, tl_sched *s, uint64_t *rng) {
  for (int st = 0; st < s->stages.n; st++) {
    const tl_te_op *op = op_of(s, st);
    if (op->kind == TL_OP_PLACEHOLDER || s->stages.v[st].compute_at == TL_CA_INLINED) continue;
    if (!op->nreduce || s->stages.v[st].leaves.n == 0) continue;
    int v = env->gpu ? unroll_gpu[pick(rng, 5)] : unroll_cpu[pick(rng, 4)];
    char text[48];
    snprintf(text, sizeof text, "auto_unroll_max_step$%d", v);
    if (tl_sched_step(ctx, s, TL_STEP_PR, (int64_t[]){st, 0}, 2, NULL, 0, text, NULL)) return -1;
  }
  return 0;
}

static int init_vectorize(tl_ctx *ctx, const tl_ansor_env *env, tl_sched *s, uint64_t *rng) {
  for (int st = 0; st < s->stages.n; st++) {
    const tl_te_op *op = op_of(s, st);
    const tl_stage *sg = &s->stages.v[st];
    if (op->kind == TL_OP_PLACEHOLDER || sg->compute_at == TL_CA_INLINED) continue;
    int tiled = tl_ansor_stage_tiled(s, st), n = 0, nl = sg->leaves.n;
    int64_t cum = 1;
    for (int i = nl - 1; i >= 0; i--) {
      const tl_iter *it = leaf_of(s, st, i);
      if (tl_sched_attached_at(s, st, sg->leaves.v[i]) >= 0) break;
      if (it->kind != TL_ITER_SPATIAL || it->ann != TL_ANN_NONE) break;
      int64_t e = it->extent > 0 ? it->extent : 1;
      /* the innermost iterator (of any stage; of a tiled one, the only one) also
      ** when it is a multiple of the lanes (several vector registers, each
      ** reusing the same loads) */
      int lanes_ok = (tiled || n == 0) && e % target_lanes(env) == 0 && e <= env->p.max_innermost_split_factor;
      if (cum * e > env->p.max_vectorize_size && !lanes_ok) break;
      cum *= e;
      n++;
      if (tiled) break;
    }
    if (n == 0) continue;
    if (n > 1) n = 1 + pick(rng, n - 1);
    if (n > 1) {
      int ids[64];
      for (int i = 0; i < n; i++) ids[i] = nl - n + i;
      if (tl_sched_fuse(ctx, s, st, n, ids)) return -1;
    }
    if (tl_sched_annotate(ctx, s, st, s->stages.v[st].leaves.n - 1, TL_ANN_VECTORIZE)) return -1;
  }
  return 0;
}

/* GPU register budgets: of one block (32-bit registers: NVIDIA's 64 K per multiprocessor,
** AMD's per compute unit), of one thread (NVIDIA's 255, AMD's 256 VGPRs), and the registers
** a thread needs besides its accumulators. */
enum { REG_FILE = 65536, REG_THREAD = 255, REG_OVERHEAD = 32 };

/* Fuse leaves [first, first+n) of st (nothing for one) and bind the result. */
static int fuse_bind(tl_ctx *ctx, tl_sched *s, int st, int first, int n, int ann, int64_t *ext) {
  if (n > 1) {
    int ids[64];
    for (int i = 0; i < n; i++) ids[i] = first + i;
    if (tl_sched_fuse(ctx, s, st, n, ids)) return -1;
  }
  *ext = leaf_of(s, st, first)->extent;
  return tl_sched_annotate(ctx, s, st, first, ann);
}

static int init_thread_bind(tl_ctx *ctx, const tl_ansor_env *env, tl_sched *s, uint64_t *rng) {
  int64_t warp = env->hw.v[7] > 0 ? env->hw.v[7] : 1;
  int64_t max_threads = env->hw.v[5] > 0 ? env->hw.v[5] : 1024;
  /* the root of every multi-level tiled stage */
  uint8_t *mlt_root = tl_calloc((size_t)s->stages.n + 1, 1);
  for (int st = 0; st < s->stages.n; st++) {
    if (op_of(s, st)->kind == TL_OP_PLACEHOLDER || !tl_ansor_stage_tiled(s, st)) continue;
    if (tl_ansor_needs_mlt(ctx, s, st) != 1) continue;
    const tl_stage *sg = &s->stages.v[st];
    mlt_root[sg->compute_at == TL_CA_ITER ? sg->at_stage : st] = 1;
  }
  int rc = 0;
  for (int st = s->stages.n - 1; st >= 0 && !rc; st--) {
    const tl_te_op *op = op_of(s, st);
    const tl_stage *sg = &s->stages.v[st];
    if (op->kind == TL_OP_PLACEHOLDER || sg->compute_at == TL_CA_INLINED) continue;
    if (sg->compute_at == TL_CA_ROOT &&
        (tl_ansor_stage_xred(s, st) || tl_ansor_stage_xred(s, tl_sched_attached_at(s, st, -1)))) {
      /* a cross-thread reduction, or the consumer it is computed in: its threadIdx.x is the
      ** sketch's; the outer spatial iterators go to blockIdx.x */
      int n = 0;
      while (n < sg->leaves.n && n < 64 && leaf_of(s, st, n)->kind == TL_ITER_SPATIAL &&
             leaf_of(s, st, n)->ann == TL_ANN_NONE)
        n++;
      int64_t e;
      if (n > 0 && (rc = fuse_bind(ctx, s, st, 0, n, TL_ANN_BLOCK_X, &e)) != 0) break;
      continue;
    }
    int bound = 0;
    for (int i = 0; i < sg->leaves.n; i++) bound |= leaf_of(s, st, i)->ann == TL_ANN_THREAD_X;
    if (bound) continue;
    if (sg->compute_at == TL_CA_ROOT && !mlt_root[st]) {
      int n = 0;
      while (n < sg->leaves.n && leaf_of(s, st, n)->kind == TL_ITER_SPATIAL &&
             leaf_of(s, st, n)->ann == TL_ANN_NONE)
        n++;
      if (n == 0) continue;
      if (n > 1) {
        int ids[64];
        for (int i = 0; i < n && i < 64; i++) ids[i] = i;
        if ((rc = tl_sched_fuse(ctx, s, st, n > 64 ? 64 : n, ids)) != 0) break;
      }
      int64_t e = leaf_of(s, st, 0)->extent;
      if (e <= warp) {
        rc = tl_sched_annotate(ctx, s, st, 0, TL_ANN_THREAD_X);
      } else {
        int64_t w = warp;
        if ((rc = tl_sched_split(ctx, s, st, 0, 1, &w, 1)) != 0) break;
        rc = tl_sched_annotate(ctx, s, st, 0, TL_ANN_BLOCK_X);
        if (!rc) rc = tl_sched_annotate(ctx, s, st, 1, TL_ANN_THREAD_X);
      }
    } else if (sg->compute_at == TL_CA_ROOT) {
      int nsp = op->ndim;
      if (nsp < 1 || nsp > 64 || sg->leaves.n < 3 * nsp) {
        rc = tl_err(ctx, TL_E_SCHED, "thread bind: stage '%s' is not tiled in three spatial levels",
                    op->name);
        break;
      }
      for (int i = 0; i < 3 * nsp; i++)
        if (leaf_of(s, st, i)->kind != TL_ITER_SPATIAL) {
          rc = tl_err(ctx, TL_E_SCHED, "thread bind: stage '%s': iterator '%s' is not spatial",
                      op->name, leaf_of(s, st, i)->name);
          break;
        }
      if (rc) break;
      int64_t total = 1;
      for (int d = 0; d < nsp; d++) total *= op->shape[d];
      int64_t eb, et;
      /* the first two tile levels (TVM's blockIdx and vthread) both go to blockIdx: a
      ** vthread lowers to a serial loop around the thread's whole tile, shared-memory fills
      ** included (no virtual-thread injection), so it would only fetch the same tile again;
      ** as blocks its sub-tiles run in parallel */
      int64_t ev = 1;
      if ((rc = fuse_bind(ctx, s, st, 0, 2 * nsp, TL_ANN_BLOCK_X, &eb)) != 0) break;
      if ((rc = fuse_bind(ctx, s, st, 1, nsp, TL_ANN_THREAD_X, &et)) != 0) break;
      if (et < warp && total > 2 * warp) {
        rc = tl_err(ctx, TL_E_SCHED, "thread bind: stage '%s': %lld threads, fewer than the warp (%lld)",
                    op->name, (long long)et, (long long)warp);
        break;
      }
      if (et > max_threads) {
        rc = tl_err(ctx, TL_E_SCHED, "thread bind: stage '%s': %lld threads exceed %lld", op->name,
                    (long long)et, (long long)max_threads);
        break;
      }
      /* the register file: each thread keeps its tile of accumulators (what the block, the
      ** vthreads and the threads leave of the output) plus about REG_OVERHEAD registers of
      ** addresses and operands; a block needing more than one register file is refused by
      ** the driver at launch (CL_KERNEL_WORK_GROUP_SIZE below the block size) */
      int64_t tile = eb * ev * et > 0 ? total / (eb * ev * et) : 1;
      if (warp > 1 && et * (tile + REG_OVERHEAD) > REG_FILE) {
        rc = tl_err(ctx, TL_E_SCHED, "thread bind: stage '%s': %lld threads x (%lld accumulators "
                    "+ %d) registers exceed a register file of %d", op->name, (long long)et,
                    (long long)tile, REG_OVERHEAD, REG_FILE);
        break;
      }
      if (warp > 1 && tile + REG_OVERHEAD > REG_THREAD) {
        rc = tl_err(ctx, TL_E_SCHED, "thread bind: stage '%s': %lld accumulators + %d registers "
                    "per thread exceed %d (they would spill)", op->name, (long long)tile,
                    REG_OVERHEAD, REG_THREAD);
        break;
      }
    } else if (sg->scope == TL_SCOPE_SHARED) {
      /* cooperative fetch: fused, a vector part, the rest spread over the threads. The
      ** vector length is drawn from {1, 2, 4} among those dividing the innermost extent, so
      ** that a vector's lanes are contiguous in the source (float4 loads and stores) */
      int n = sg->leaves.n;
      int64_t inner = n > 0 ? leaf_of(s, st, n - 1)->extent : 1, vl[3] = {1, 0, 0};
      int nvl = 1;
      if (inner % 2 == 0) vl[nvl++] = 2;
      if (inner % 4 == 0) vl[nvl++] = 4;
      if (n > 1) {
        int ids[64];
        if (n > 64) { rc = tl_err(ctx, TL_E_SCHED, "thread bind: too many iterators"); break; }
        for (int i = 0; i < n; i++) ids[i] = i;
        if ((rc = tl_sched_fuse(ctx, s, st, n, ids)) != 0) break;
      }
      int64_t one = vl[pick(rng, nvl)];
      if ((rc = tl_sched_split(ctx, s, st, 0, 1, &one, 1)) != 0) break;
      if ((rc = tl_sched_annotate(ctx, s, st, 1, TL_ANN_VECTORIZE)) != 0) break;
      int sp[64];
      int nsp = tl_ansor_spatial_split_steps(s, sg->at_stage, sp, 64);
      if (nsp == 0) { rc = tl_err(ctx, TL_E_SCHED, "thread bind: stage '%s' has no tiles to follow", tl_sched_stage_name(s, sg->at_stage)); break; }
      int64_t ids[64];
      for (int i = 0; i < nsp; i++) ids[i] = sp[i];
      int64_t args[4] = {st, 0, 1, 1};   /* stage, iter, level, factor */
      if ((rc = tl_sched_step(ctx, s, TL_STEP_FFSP, args, 4, ids, nsp, NULL, NULL)) != 0) break;
      rc = tl_sched_annotate(ctx, s, st, 1, TL_ANN_THREAD_X);
    }
  }
  free(mlt_root);
  return rc;
}

tl_sched *tl_ansor_annotate(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                            uint64_t *rng) {
  const tl_sched *k = sk->s;
  tl_step *steps = steps_copy(k);
  /* lengths per step id (16 each): uniform draws, then for half the tiled
  ** stages (CPU) a register-tile draw of their spatial splits */
  int64_t *store = tl_malloc(sizeof(int64_t) * 16 * (size_t)(k->steps.n + 1));
  for (int i = 0; i < sk->open.n; i++) {
    tl_step *t = &steps[sk->open.v[i]];
    random_scheme(t->extent, t->nints, env->p.max_innermost_split_factor, 1, rng,
                  store + 16 * (int64_t)sk->open.v[i]);
  }
  for (int i = 0; i < sk->lanes.n; i++) {   /* vector tiles: a multiple of the lanes */
    const tl_step *t = &steps[sk->lanes.v[i]];
    random_scheme(t->extent, t->nints, env->p.max_innermost_split_factor, target_lanes(env), rng,
                  store + 16 * (int64_t)sk->lanes.v[i]);
  }
  for (int at = 0; at < sk->tiles.n; at += 1 + sk->tiles.v[at])
    if (tl_ansor_uniform(rng) < 0.5) register_tile(env, &sk->tiles.v[at], steps, store, rng);
  for (int i = 0; i < sk->open.n; i++) steps[sk->open.v[i]].ints = store + 16 * (int64_t)sk->open.v[i];
  for (int i = 0; i + 1 < sk->threads.n; i += 2) {   /* cross-thread reductions: thread counts */
    int64_t id = sk->threads.v[i], counts[64];
    int nc = thread_counts(env, sk->threads.v[i + 1], counts, 64);
    store[16 * id] = counts[pick(rng, nc)];
    steps[id].ints = store + 16 * id;
  }
  tl_sched *s = tl_ansor_replay(ctx, k, steps, k->steps.n);
  free(steps);
  free(store);
  if (!s) return NULL;
  int rc;
  if (env->gpu) {
    rc = init_thread_bind(ctx, env, s, rng);
    if (!rc) rc = init_unroll(ctx, env, s, rng);
  } else {
    rc = change_compute_location(ctx, env, s, rng);
    if (!rc) rc = init_parallel(ctx, env, s);
    if (!rc) rc = init_unroll(ctx, env, s, rng);
    if (!rc) rc = init_vectorize(ctx, env, s, rng);
    if (!rc) rc = init_partition(ctx, s);
  }
  if (rc) {
    tl_sched_free(s);
    return NULL;
  }
  return s;
}

/* ---- mutations ------------------------------------------------------------------------------ */

static tl_sched *mutate_tile(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *s, uint64_t *rng) {
  int cand[512], n = 0;
  int64_t maxin = env->p.max_innermost_split_factor;
  for (int i = 0; i < s->steps.n && n < 512; i++) {
    const tl_step *t = &s->steps.v[i];
    if (env->gpu && is_thread_split(s, i)) cand[n++] = i;
    else if (t->kind == TL_STEP_SP && t->extent > 1 && t->nints > 0 && t->nints < 16 &&
             t->ints[t->nints - 1] <= maxin && t->inner_to_outer)
      cand[n++] = i;
  }
  if (!n) { tl_err(ctx, TL_E_SCHED, "mutate tile size: no split to mutate"); return NULL; }
  int si = cand[pick(rng, n)];
  if (env->gpu && is_thread_split(s, si)) {
    /* a cross-thread reduction's thread count: another one of the candidates, bounded by
    ** the reduction's extent */
    const tl_step *t = &s->steps.v[si];
    int follows = si + 2 < s->steps.n && s->steps.v[si + 2].kind == TL_STEP_FSP &&
                  s->steps.v[si + 2].src_step_id == si;
    int64_t reduce = t->extent > 0 ? t->extent : INT64_MAX;
    if (follows) {   /* the consumer's split: the reductions computed in consumers bound it */
      reduce = 0;
      for (int st = 0; st < s->stages.n; st++) {
        if (s->stages.v[st].compute_at != TL_CA_ITER || !tl_ansor_stage_xred(s, st)) continue;
        int64_t r = 1;
        for (int a = 0; a < op_of(s, st)->nreduce; a++) r *= op_of(s, st)->reduce_axis[a].extent;
        reduce = TL_MAX(reduce, r);
      }
      if (!reduce) reduce = INT64_MAX;
    }
    int64_t counts[64], other[64];
    int nc = thread_counts(env, reduce, counts, 64), no = 0;
    for (int i = 0; i < nc; i++)
      if (counts[i] != t->ints[0]) other[no++] = counts[i];
    if (!no) { tl_err(ctx, TL_E_SCHED, "mutate thread count: no other count"); return NULL; }
    int64_t cnt = other[pick(rng, no)];
    tl_step *steps = steps_copy(s);
    steps[si].ints = &cnt;
    tl_sched *out = tl_ansor_replay(ctx, s, steps, s->steps.n);
    free(steps);
    return out;
  }
  const tl_step *t = &s->steps.v[si];
  int k = t->nints + 1;
  int64_t len[17], prod = 1;
  for (int i = 0; i < t->nints; i++) prod *= t->ints[i];
  if (prod <= 0 || t->extent % prod) { tl_err(ctx, TL_E_SCHED, "mutate tile size: inexact split"); return NULL; }
  len[0] = t->extent / prod;
  for (int i = 0; i < t->nints; i++) len[i + 1] = t->ints[i];
  int perm[17];
  for (int i = 0; i < k; i++) perm[i] = i;
  for (int i = k - 1; i > 0; i--) {
    int j = pick(rng, i + 1), x = perm[i];
    perm[i] = perm[j];
    perm[j] = x;
  }
  for (int pi = 0; pi < k; pi++) {
    int src = perm[pi], dst = perm[(pi + 1) % k];
    if (len[src] <= 1 || src == dst) continue;
    int64_t d[256], f[256];
    int nd = divisors(len[src], d, 256), nf = 0;
    for (int i = 1; i < nd; i++) {   /* divisors > 1 */
      if (dst == k - 1 && d[i] * len[dst] > maxin) continue;
      f[nf++] = d[i];
    }
    if (!nf) continue;
    int64_t g = f[pick(rng, nf)];
    len[src] /= g;
    len[dst] *= g;
    tl_step *steps = steps_copy(s);
    steps[si].ints = len + 1;
    tl_sched *out = tl_ansor_replay(ctx, s, steps, s->steps.n);
    free(steps);
    return out;
  }
  tl_err(ctx, TL_E_SCHED, "mutate tile size: no length can move");
  return NULL;
}

static tl_sched *mutate_unroll(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *s, uint64_t *rng) {
  int cand[256], n = 0;
  for (int i = 0; i < s->steps.n && n < 256; i++) {
    const tl_step *t = &s->steps.v[i];
    if (t->kind == TL_STEP_PR && t->str && strncmp(t->str, "auto_unroll_max_step$", 21) == 0)
      cand[n++] = i;
  }
  if (!n) { tl_err(ctx, TL_E_SCHED, "mutate auto-unroll: no pragma"); return NULL; }
  int si = cand[pick(rng, n)];
  /* another value than the current one */
  const int *vals = env->gpu ? unroll_gpu : unroll_cpu;
  int nv = env->gpu ? 5 : 4, cur = atoi(s->steps.v[si].str + 21), other[5], no = 0;
  for (int i = 0; i < nv; i++)
    if (vals[i] != cur) other[no++] = vals[i];
  int v = other[pick(rng, no)];
  char text[48];
  snprintf(text, sizeof text, "auto_unroll_max_step$%d", v);
  tl_step *steps = steps_copy(s);
  steps[si].str = text;
  tl_sched *out = tl_ansor_replay(ctx, s, steps, s->steps.n);
  free(steps);
  return out;
}

static tl_sched *mutate_location(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *s, uint64_t *rng) {
  (void)env;
  int cand[256], n = 0;
  for (int i = 0; i < s->steps.n && n < 256; i++) {
    const tl_step *t = &s->steps.v[i];
    if (t->kind != TL_STEP_CA) continue;
    if (tl_ansor_stage_tiled(s, t->stage_id) || tl_ansor_needs_mlt(ctx, s, t->stage_id) != 0) continue;
    cand[n++] = i;
  }
  if (!n) { tl_err(ctx, TL_E_SCHED, "mutate compute location: no movable stage"); return NULL; }
  int si = cand[pick(rng, n)];
  tl_sched *pre = tl_ansor_replay(ctx, s, s->steps.v, si);
  if (!pre) return NULL;
  int loc[64], target;
  int nl = location_candidates(pre, s->steps.v[si].stage_id, &target, loc, 64);
  tl_sched_free(pre);
  if (nl == 0 || target != s->steps.v[si].target_stage_id) {
    tl_err(ctx, TL_E_SCHED, "mutate compute location: no other location");
    return NULL;
  }
  int it = loc[pick(rng, nl)];
  if (it == s->steps.v[si].target_iter_id) {
    tl_err(ctx, TL_E_SCHED, "mutate compute location: same location drawn");
    return NULL;
  }
  tl_step *steps = steps_copy(s);
  steps[si].target_iter_id = it;
  tl_sched *out = tl_ansor_replay(ctx, s, steps, s->steps.n);
  free(steps);
  return out;
}

/* A new fuse length for a parallel loop made by fusing the outer iterators:
** the later steps of that stage shift their iterator positions. */
static tl_sched *mutate_parallel(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *s,
                                 uint64_t *rng) {
  (void)env;
  int cand[256], n = 0;
  for (int i = 1; i < s->steps.n && n < 256; i++) {
    const tl_step *a = &s->steps.v[i], *f = &s->steps.v[i - 1];
    if (a->kind == TL_STEP_AN && a->annotation == TL_ANN_PARALLEL && a->iter_id == 0 &&
        f->kind == TL_STEP_FU && f->stage_id == a->stage_id && f->nints > 0 && f->ints[0] == 0)
      cand[n++] = i - 1;
  }
  if (!n) { tl_err(ctx, TL_E_SCHED, "mutate parallel: no fused parallel loop"); return NULL; }
  int fi = cand[pick(rng, n)], st = s->steps.v[fi].stage_id, old = s->steps.v[fi].nints;
  tl_sched *pre = tl_ansor_replay(ctx, s, s->steps.v, fi);
  if (!pre) return NULL;
  int maxf = 0;
  const tl_stage *sg = &pre->stages.v[st];
  for (int i = 0; i < sg->leaves.n && i < 64; i++) {
    const tl_iter *it = leaf_of(pre, st, i);
    if (it->kind != TL_ITER_SPATIAL || it->ann != TL_ANN_NONE) break;
    maxf++;
    if (tl_sched_attached_at(pre, st, sg->leaves.v[i]) >= 0) break;
  }
  tl_sched_free(pre);
  int len = maxf ? 1 + pick(rng, maxf) : 0;
  if (len == old || len == 0) {
    tl_err(ctx, TL_E_SCHED, "mutate parallel: same fuse length drawn");
    return NULL;
  }
  int delta = old - len;   /* later positions of the stage move by this much */
  tl_step *steps = steps_copy(s);
  size_t need = (size_t)len + 1;
  for (int i = fi + 2; i < s->steps.n; i++) need += (size_t)(s->steps.v[i].nints > 0 ? s->steps.v[i].nints : 0);
  int64_t *ids = tl_malloc(sizeof(int64_t) * need);
  int used = 0;
  int64_t *fids = ids + used;
  for (int i = 0; i < len; i++) fids[i] = i;
  used += len;
  steps[fi].ints = fids;
  steps[fi].nints = len;
  for (int i = fi + 2; i < s->steps.n; i++) {
    tl_step *t = &steps[i];
    if (t->stage_id != st) continue;
    if ((t->kind == TL_STEP_AN || t->kind == TL_STEP_PR || t->kind == TL_STEP_SP) && t->iter_id > 0)
      t->iter_id += delta;
    else if (t->kind == TL_STEP_FU && t->nints > 0 && t->ints[0] > 0 && t->nints <= 64) {
      int64_t *v = ids + used;
      for (int k = 0; k < t->nints; k++) v[k] = t->ints[k] + delta;
      used += t->nints;
      t->ints = v;
    } else if (t->kind != TL_STEP_AN && t->kind != TL_STEP_PR && t->kind != TL_STEP_FU) {
      int kind = t->kind;
      free(ids);
      free(steps);
      tl_err(ctx, TL_E_SCHED, "mutate parallel: a later %s step on the stage", tl_step_name(kind));
      return NULL;
    }
  }
  tl_sched *out = tl_ansor_replay(ctx, s, steps, s->steps.n);
  free(ids);
  free(steps);
  return out;
}

tl_sched *tl_ansor_mutate_kind(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *state,
                               int kind, uint64_t *rng) {
  switch (kind) {
  case TL_ANSOR_MUT_TILE: return mutate_tile(ctx, env, state, rng);
  case TL_ANSOR_MUT_UNROLL: return mutate_unroll(ctx, env, state, rng);
  case TL_ANSOR_MUT_LOCATION: return mutate_location(ctx, env, state, rng);
  case TL_ANSOR_MUT_PARALLEL: return mutate_parallel(ctx, env, state, rng);
  default: tl_err(ctx, TL_E_ARG, "mutate: unknown mutation %d", kind); return NULL;
  }
}

tl_sched *tl_ansor_mutate(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *state,
                          uint64_t *rng) {
  /* weights: CPU tile 0.90, unroll 0.04, compute location 0.05, parallel 0.01;
  ** GPU tile 0.90, unroll 0.10 */
  double u = tl_ansor_uniform(rng);
  int kind;
  if (env->gpu) kind = u < 0.90 ? TL_ANSOR_MUT_TILE : TL_ANSOR_MUT_UNROLL;
  else kind = u < 0.90 ? TL_ANSOR_MUT_TILE : u < 0.94 ? TL_ANSOR_MUT_UNROLL
            : u < 0.99 ? TL_ANSOR_MUT_LOCATION : TL_ANSOR_MUT_PARALLEL;
  return tl_ansor_mutate_kind(ctx, env, state, kind, rng);
}
