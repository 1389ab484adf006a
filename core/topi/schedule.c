/*
** schedule.c -- default schedules per target class: tl_topi_default_schedule.
**
** A default schedule is correct for any DAG of topi operators (and of plain
** te computes) and not pathological; it is what the ONNX runner and the
** graph executor use when no tuned configuration exists. For the "cpu" class
** (a target's tl_target_schedules), on a schedule without steps:
**
**   1. inline   every compute stage without a reduction that is not an
**               output and has one output (bias_add, relu, the injective
**               producers of a fused group, softmax's exp ...), except a
**               "pad" stage read by a reduction: inlined, its condition
**               would run in the innermost loop; it stays a root stage
**               (unless only pools read it and its innermost axis is not
**               padded, as in NCHW[x]c: pad_inner_unpadded). So does a stage read
**               by a reduction and another stage (softmax's exp: inlined it
**               would be computed twice).
**   2. anchor   a reduction stage (conv2d, dense, pool, ...) whose only
**               consumer left after inlining is one root stage O without a
**               reduction and of the same shape (the fused conv2d + bias_add
**               + relu case) is computed at O's fused outer loop; its
**               reduction stays inside, its innermost spatial axis goes
**               innermost and is vectorized when O's is.
**   3. loops    every other root stage with loops: the innermost spatial
**               axis of a stage of TL_DS_VEC_MIN elements or more is split by
**               the vector width (64 bytes / element size, at most 16 lanes,
**               or the largest half of it down to 4 that divides the extent:
**               the C backend prints an AVX-512 register's 16 floats as two
**               AVX2 ones where it must) when its extent is a multiple of it (vectorized
**               without a split when it equals it; left alone otherwise;
**               also left alone in a reduction whose loads would gather
**               along it, as dense's weight[j, k]: its contiguous reduction
**               stays innermost); the reduction axes move between the outer
**               spatial axes and that vector axis; a layout read from one
**               whose innermost axis is an outer one v of the output (a
**               copy whose load's last index is v or floormod(v, m): NCHW[x]c -> NCHW,
**               NHWC -> NCHW) has v (its part v mod m) placed just outside
**               the vector axis; the leading spatial
**               axes are fused into one loop (through axes of one iteration,
**               batch 1, at least), parallel when the stage (with what is
**               computed at it) does at least TL_DS_PAR_WORK multiply-adds
**               and the loop has two or more iterations. A reduction with a
**               window of at most TL_DS_SMALL_RED (a depthwise conv; not a
**               pool) over rows of at most TL_DS_ROW is ordered spatial
**               axes, then the window, without vector steps: GCC unrolls the
**               window and vectorizes the row with independent accumulators.
**
** The plan is tried on a copy first and lowered; should the lowering refuse
** an attachment, the plan is applied without attachments (then without
** loop steps), so every DAG gets a schedule that lowers. "opencl" is refused
** (TL_E_ARG) until the OpenCL default schedules exist.
*/
#include "topi.h"

#include <stdio.h>

#include "../te/schedule.h"

#define TL_DS_PAR_WORK (1 << 15)    /* parallel from this much work (multiply-adds) */
#define TL_DS_PAR_ITERS 64          /* enough iterations for the parallel loop */
#define TL_DS_MIN_CHUNK 4096        /* least work per iteration of the fused loop */
#define TL_DS_VEC_MIN 1024          /* vectorize stages of at least this many elements */
#define TL_DS_SMALL_RED 32          /* a reduction window this small goes inside the row ... */
#define TL_DS_ROW 256               /* ... of at most this many elements, unvectorized */

enum { PLAN_INLINE = 1, PLAN_LOOPS = 2, PLAN_ATTACH = 4 };

static int64_t prod_shape(const tl_te_op *op) {
  int64_t n = 1;
  for (int i = 0; i < op->ndim; i++) n *= op->shape[i];
  return n;
}

static int64_t reduce_extent(const tl_te_op *op) {
  int64_t n = 1;
  for (int i = 0; i < op->nreduce; i++) n *= op->reduce_axis[i].extent;
  return n;
}

static int is_compute(const tl_sched *s, int st) {
  return s->dag->ops.v[st].kind == TL_OP_COMPUTE;
}

/* The loop stages (not inlined) that read stage st, looking through inlined
** stages; writes up to max ids to out, returns the count (max + 1 when
** there are more). */
static int loop_consumers(const tl_sched *s, int st, int *out, int max, int n, uint8_t *seen) {
  int nops = s->dag->ops.n;
  int *buf = tl_malloc(sizeof(int) * (size_t)(nops + 1));
  int nc = tl_dag_consumers(s->dag, st, buf);
  for (int i = 0; i < nc && n <= max; i++) {
    int c = buf[i];
    if (seen[c]) continue;
    seen[c] = 1;
    if (s->stages.v[c].compute_at == TL_CA_INLINED) {
      n = loop_consumers(s, c, out, max, n, seen);
    } else {
      if (n < max) out[n] = c;
      n++;
    }
  }
  free(buf);
  return n;
}

/* Vector width for innermost extent e of dtype t: 0 when not vectorized. */
static int64_t vector_width(tl_type t, int64_t e) {
  int bytes = (t.bits * (t.lanes > 0 ? t.lanes : 1) + 7) / 8;
  if (bytes <= 0) bytes = 4;
  int64_t w = 64 / bytes;
  if (w > 16) w = 16;
  for (; w >= 4; w /= 2)
    if (e % w == 0) return w;
  return 0;
}

/* Whether vectorizing op's innermost spatial axis would gather: a load in
** the body indexes by that axis in an outer dimension but not in its last
** one (dense's weight[j, k], softmax's x[i, k]): a reduction then keeps its
** contiguous reduction innermost instead. */
typedef struct {
  tl_ref v;
  int gather;
} gather_st;

static int gather_fn(const tl_ir *ir, tl_ref node, void *ud) {
  gather_st *g = ud;
  if (tl_ir_op(ir, node) != TL_IR_LOAD) return !g->gather;
  int nk = tl_ir_nkids(ir, node);
  if (nk == 0 || tl_ir_uses_var(ir, tl_ir_kid(ir, node, nk - 1), g->v)) return 1;
  for (int d = 0; d < nk - 1; d++)
    if (tl_ir_uses_var(ir, tl_ir_kid(ir, node, d), g->v)) g->gather = 1;
  return !g->gather;
}

static int gathers(const tl_dag *dag, const tl_te_op *op) {
  if (op->ndim == 0) return 0;
  gather_st g = {op->axis[op->ndim - 1].var, 0};
  for (int k = 0; k < op->nout && !g.gather; k++) tl_ir_visit(dag->ir, op->body[k], gather_fn, &g);
  return g.gather;
}

/* A copy (one load) whose last index is an outer output axis v (not the last), or floormod(v, m)
** with m dividing v's extent: a layout whose innermost axis is an outer one of the output (NCHW[x]c
** -> NCHW: out[n, c, h, w] = in[n, c / 32, h, w, c % 32]; NHWC -> NCHW). Returns that axis
** and writes m (0: v whole); -1 when none. In the output's own order (c outside h) each c
** re-reads the whole block of its chunk: 32 passes over 0.4 MB for 128 channels of 56x56,
** 0.24 ms on one core. */
typedef struct {
  const tl_te_op *op;
  int axis, loads;
  int64_t m;
} block_read_st;

static int block_read_fn(const tl_ir *ir, tl_ref node, void *ud) {
  block_read_st *b = ud;
  if (tl_ir_op(ir, node) != TL_IR_LOAD) return 1;
  if (++b->loads > 1) return 0;
  int nk = tl_ir_nkids(ir, node);
  if (nk < 2) return 1;
  tl_ref last = tl_ir_kid(ir, node, nk - 1), v = last;
  int64_t m = 0;
  if (tl_ir_op(ir, last) == TL_IR_FLOORMOD) {
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, last, 1), &m)) return 1;
    v = tl_ir_kid(ir, last, 0);
  }
  for (int j = 0; j + 1 < b->op->ndim; j++) {
    if (b->op->axis[j].var != v) continue;
    int64_t e = b->op->shape[j];
    if (m == 0 || m >= e) m = 0;                      /* the whole axis: moved, not split */
    else if (m < 2 || e % m) return 1;
    b->axis = j, b->m = m;
    return 1;                                         /* on: count the other loads */
  }
  return 1;
}

static int block_read(const tl_dag *dag, const tl_te_op *op, int64_t *m) {
  block_read_st b = {op, -1, 0, 0};
  for (int k = 0; k < op->nout && b.loads <= 1; k++) tl_ir_visit(dag->ir, op->body[k], block_read_fn, &b);
  *m = b.m;
  return b.loads == 1 ? b.axis : -1;
}

/* Position of iterator node in the leaves of stage st. */
static int pos_of(const tl_sched *s, int st, int node) { return tl_sched_leaf_pos(s, st, node); }

/* Loop steps for a stage. Root (attached 0): the innermost spatial axis
** split by the vector width w (vectorized), the reduction axes between the
** outer spatial axes and it, the leading spatial axes fused into one loop
** (parallel when worth it). Attached (attached 1): the same split by w (the
** consumer's; 0: none, -1: vectorize unsplit) and order, no fuse.
** extra_work: the work of the stages computed at this one. Writes the
** node of the fused outer loop (or -1) to *outer and the split width to *wout. */
static int stage_loops(tl_ctx *ctx, tl_sched *s, int st, int attached, int64_t wa,
                       double extra_work, int *outer, int64_t *wout) {
  tl_stage *sg = &s->stages.v[st];
  const tl_te_op *op = &s->dag->ops.v[st];
  *outer = -1;
  *wout = 0;
  int k = op->ndim, nr = op->nreduce, rc;
  if (k == 0 || sg->leaves.n != k + nr || k + nr + 1 > 64) return TL_OK;   /* not fresh */
  int inner = -1;                                      /* node of the vector axis */
  int64_t e = op->shape[k - 1];
  int64_t w = attached ? wa : prod_shape(op) >= TL_DS_VEC_MIN ? vector_width(op->dtype, e) : 0;
  if (nr > 0 && w != 0 && gathers(s->dag, op)) w = 0;
  /* a small window (depthwise conv: at most TL_DS_SMALL_RED multiply-adds per
  ** output) over rows of at most TL_DS_ROW: the window loops go inside the
  ** row loop, which the C compiler vectorizes after unrolling them
  ** (independent accumulators, its own vector width); explicit vectors
  ** around the window loops measured 20-50% slower than no schedule at all
  ** (one chain of dependent multiply-adds per vector) */
  int small_win = nr > 0 && !attached && reduce_extent(op) <= TL_DS_SMALL_RED && e <= TL_DS_ROW &&
                  !(op->tag && strstr(op->tag, "pool"));   /* pools: measured slower */
  if (small_win) w = 0;
  if (w > 0 && e > w && e % w == 0) {
    int64_t f = w;
    if ((rc = tl_sched_split(ctx, s, st, k - 1, 1, &f, 1))) return rc;
    inner = sg->leaves.v[k];
    *wout = w;
  } else if (w != 0) {
    inner = sg->leaves.v[k - 1];
    *wout = -1;
  }
  /* a plain layout read from a blocked one: the block's axis split by the block (or moved
  ** whole), its inner part just outside the vector axis, so one block row serves the block's
  ** channels from cache */
  int bi = -1;
  if (!attached && nr == 0 && k >= 3 && inner >= 0) {
    int64_t m;
    int j = block_read(s->dag, op, &m);
    if (j >= 0 && m > 0) {
      if ((rc = tl_sched_split(ctx, s, st, j, 1, &m, 1))) return rc;
      bi = sg->leaves.v[j + 1];
    } else if (j >= 0) {
      bi = sg->leaves.v[j];
    }
  }
  /* order: outer spatial, reduce, [the block's inner part,] vector axis */
  int n = sg->leaves.n;
  int order[64], no = 0;
  int64_t ext[64];
  for (int i = 0; i < n; i++) {
    const tl_iter *it = &sg->nodes.v[sg->leaves.v[i]];
    if (it->kind == TL_ITER_SPATIAL && sg->leaves.v[i] != inner && sg->leaves.v[i] != bi)
      ext[no] = it->extent, order[no++] = i;
  }
  int nouter = no;
  for (int i = 0; i < n; i++)
    if (sg->nodes.v[sg->leaves.v[i]].kind != TL_ITER_SPATIAL) order[no++] = i;
  if (bi >= 0) order[no++] = pos_of(s, st, bi);
  if (inner >= 0) order[no++] = pos_of(s, st, inner);
  if (no != n) return TL_OK;
  int ident = 1;
  for (int i = 0; i < n; i++)
    if (order[i] != i) ident = 0;
  if (!ident && (rc = tl_sched_reorder(ctx, s, st, n, order))) return rc;
  if (inner >= 0 && (rc = tl_sched_annotate(ctx, s, st, pos_of(s, st, inner), TL_ANN_VECTORIZE)))
    return rc;
  if (small_win) {
    /* the spatial axes (the row innermost of them), then the window */
    int nl = sg->leaves.n, ord[64], m = 0;
    for (int i = 0; i < nl; i++)
      if (sg->nodes.v[sg->leaves.v[i]].kind == TL_ITER_SPATIAL) ord[m++] = i;
    for (int i = 0; i < nl; i++)
      if (sg->nodes.v[sg->leaves.v[i]].kind != TL_ITER_SPATIAL) ord[m++] = i;
    if ((rc = tl_sched_reorder(ctx, s, st, nl, ord))) return rc;
    nouter = 0;
    for (int i = 0; i < nl - nr - 1; i++) ext[nouter++] = sg->nodes.v[sg->leaves.v[i]].extent;
  }
  if (attached || nouter == 0) return TL_OK;
  /* fuse leading axes until the loop has TL_DS_PAR_ITERS iterations, while an
  ** iteration keeps at least TL_DS_MIN_CHUNK of work */
  double work = (double)prod_shape(op) * (double)reduce_extent(op) + extra_work;
  int p = 1;
  double ex = (double)ext[0];
  /* (through leading axes of one iteration -- batch 1 -- so the loop can run in parallel at all:
  ** [1, 128, 56, 56] stopped at the batch, 3136 elements per channel being under the chunk) */
  while (p < nouter && (ex < 2 || (ex < TL_DS_PAR_ITERS && work / (ex * (double)ext[p]) >= TL_DS_MIN_CHUNK)))
    ex *= (double)ext[p++];
  if (p > 1) {
    int iters[64];
    for (int i = 0; i < p; i++) iters[i] = i;
    if ((rc = tl_sched_fuse(ctx, s, st, p, iters))) return rc;
  }
  *outer = sg->leaves.v[0];
  if (work >= TL_DS_PAR_WORK && ex >= 2 && (rc = tl_sched_annotate(ctx, s, st, 0, TL_ANN_PARALLEL)))
    return rc;
  return TL_OK;
}

static int same_shape(const tl_te_op *a, const tl_te_op *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* What reads stage st: how many stages, whether a reduction is among them, whether all of
** them are pools (reductions tagged pool_*). */
typedef struct {
  int n, reduction, pools;
} readers;

static readers readers_of(const tl_sched *s, int st) {
  int *buf = tl_malloc(sizeof(int) * (size_t)(s->dag->ops.n + 1));
  readers r = {tl_dag_consumers(s->dag, st, buf), 0, 0};
  r.pools = r.n > 0;
  for (int i = 0; i < r.n; i++) {
    const tl_te_op *c = &s->dag->ops.v[buf[i]];
    if (c->nreduce > 0) r.reduction = 1;
    if (c->nreduce == 0 || !c->tag || strncmp(c->tag, "pool_", 5) != 0) r.pools = 0;
  }
  free(buf);
  return r;
}

/* Whether pad stage op (read only by pools) keeps its innermost axis unpadded (the channel
** block of NCHW[x]c, NHWC's channels): inlined, its bounds test depends on the window's rows
** and columns only, outside the vector lanes, and the pool reads its input's borders directly
** instead of a padded copy of the whole input (resnet-50's 3x3/2 max pool of 64x112x112 wrote
** and read 3.3 MB more per call). */
static int pad_inner_unpadded(const tl_sched *s, const tl_te_op *op) {
  if (op->ninputs != 1 || op->ndim < 1) return 0;
  const tl_te_op *in = &s->dag->ops.v[s->dag->tensors.v[op->inputs[0]].op];
  return in->ndim == op->ndim && in->shape[op->ndim - 1] == op->shape[op->ndim - 1];
}

static int apply_plan(tl_ctx *ctx, tl_sched *s, int plan) {
  int n = s->stages.n, rc = TL_OK;
  if (plan & PLAN_INLINE) {
    for (int st = 0; st < n; st++) {
      const tl_te_op *op = &s->dag->ops.v[st];
      const tl_stage *sg = &s->stages.v[st];
      if (op->kind != TL_OP_COMPUTE || op->nreduce > 0 || op->nout != 1 || sg->is_output ||
          sg->compute_at != TL_CA_ROOT || sg->leaves.n != op->ndim)
        continue;
      readers r = readers_of(s, st);
      int pad = op->tag && strstr(op->tag, "pad");
      if (r.reduction && ((pad && !(r.pools && pad_inner_unpadded(s, op))) || r.n > 1)) continue;
      if ((rc = tl_sched_compute_inline(ctx, s, st))) return rc;
    }
  }
  if (!(plan & PLAN_LOOPS)) return TL_OK;
  /* anchors: att[r] = the stage r is computed at, or -1 */
  int *att = tl_malloc(sizeof(int) * (size_t)(n + 1));
  uint8_t *seen = tl_malloc((size_t)n + 1);
  double *extra = tl_calloc((size_t)n + 1, sizeof(double));
  int64_t *vec = tl_calloc((size_t)n + 1, sizeof(int64_t));
  for (int st = 0; st < n; st++) {
    att[st] = -1;
    const tl_te_op *op = &s->dag->ops.v[st];
    const tl_stage *sg = &s->stages.v[st];
    if (!(plan & PLAN_ATTACH) || op->kind != TL_OP_COMPUTE || op->nreduce == 0 || op->nout != 1 ||
        sg->is_output || sg->compute_at != TL_CA_ROOT)
      continue;
    memset(seen, 0, (size_t)n + 1);
    int cons[2];
    if (loop_consumers(s, st, cons, 1, 0, seen) != 1) continue;
    const tl_te_op *co = &s->dag->ops.v[cons[0]];
    const tl_stage *cg = &s->stages.v[cons[0]];
    if (co->nreduce > 0 || co->nout != 1 || cg->compute_at != TL_CA_ROOT || !same_shape(op, co) ||
        op->ndim < 2)
      continue;
    att[st] = cons[0];
    extra[cons[0]] += (double)prod_shape(op) * (double)reduce_extent(op);
  }
  /* root stages, consumers first (their outer loop must exist first) */
  int *outer = tl_malloc(sizeof(int) * (size_t)(n + 1));
  for (int st = 0; st < n; st++) outer[st] = -1;
  for (int st = n - 1; st >= 0 && !rc; st--) {
    if (!is_compute(s, st) || att[st] >= 0) continue;
    const tl_stage *sg = &s->stages.v[st];
    if (sg->compute_at != TL_CA_ROOT) continue;
    rc = stage_loops(ctx, s, st, 0, 0, extra[st], &outer[st], &vec[st]);
  }
  for (int st = n - 1; st >= 0 && !rc; st--) {
    int o = att[st], dummy;
    if (o < 0) continue;
    int64_t dw;
    int pos = outer[o] >= 0 ? pos_of(s, o, outer[o]) : -1;
    if (pos < 0) {   /* the consumer has no outer loop: a root stage after all */
      rc = stage_loops(ctx, s, st, 0, 0, 0, &dummy, &dw);
      continue;
    }
    if ((rc = tl_sched_compute_at(ctx, s, st, o, pos))) break;
    rc = stage_loops(ctx, s, st, 1, vec[o], 0, &dummy, &dw);
  }
  free(att);
  free(seen);
  free(extra);
  free(vec);
  free(outer);
  return rc;
}

/* Lower a copy of s with the plan applied: TL_OK when it lowers. */
static int try_plan(tl_ctx *ctx, const tl_sched *s, int plan) {
  tl_sched *c = NULL;
  int rc = tl_sched_copy(ctx, s, &c);
  if (rc) return rc;
  rc = apply_plan(ctx, c, plan);
  if (!rc) {
    int n = c->stages.n, na = 0;
    int *args = tl_malloc(sizeof(int) * (size_t)(c->dag->tensors.n + 1));
    for (int st = 0; st < n; st++) {
      const tl_te_op *op = &c->dag->ops.v[st];
      if (op->kind == TL_OP_PLACEHOLDER || c->stages.v[st].is_output)
        for (int j = 0; j < op->nout; j++) args[na++] = op->out_tensors[j];
    }
    tl_lowered *f = NULL;
    rc = tl_lower(ctx, c, args, na, "default_schedule_trial", &f);
    if (f) tl_lowered_free(f);
    free(args);
  }
  tl_sched_free(c);
  return rc;
}

TL_EXPORT int tl_topi_default_schedule(tl_ctx *ctx, tl_sched *s, const char *sched_class) {
  if (!s) return tl_err(ctx, TL_E_ARG, "default_schedule: no schedule");
  const char *k = sched_class ? sched_class : "cpu";
  if (strcmp(k, "opencl") == 0) return tl_topi_default_schedule_gpu(ctx, s);
  if (strcmp(k, "cpu") != 0)
    return tl_err(ctx, TL_E_ARG,
                  "default_schedule: unknown schedule class '%s' (expected \"cpu\" or \"opencl\", "
                  "a target's schedules)", k);
  static const int plans[3] = {PLAN_INLINE | PLAN_LOOPS | PLAN_ATTACH, PLAN_INLINE | PLAN_LOOPS,
                               PLAN_INLINE};
  for (int i = 0; i < 3; i++) {
    if (try_plan(ctx, s, plans[i]) == TL_OK) return apply_plan(ctx, s, plans[i]);
    tl_clearerr(ctx);   /* a refused plan is not an error: try the next one */
  }
  return TL_OK;   /* nothing lowers better than the schedule as given */
}
