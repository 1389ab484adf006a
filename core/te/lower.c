/*
** lower.c -- schedule to loop IR: tl_lower.
**
** The pipeline, one function each:
**
**   classify     placeholders, inlined stages and stages with loops; args
**   infer        consumers before producers (reverse stage order): the
**                region of each stage (whole tensor at root; at an attach
**                point, the union of what its consumers read there, with the
**                loops outside the attach point fixed and those inside
**                relaxed), the loop extents through the iterator graph (an
**                attached stage's factor larger than what remains of its region
**                shrinks to it, innermost first), the
**                value of every op axis from the loop vars, the guards, and
**                the body imported into the function's IR with inlined
**                producers substituted into their loads
**   buffers      arguments, global temporaries for root stages, region
**                buffers (indexed relative to the region min) for attached
**                stages; loads re-pointed
**   nest         each root stage's loop nest, attached stages (with their
**                ALLOC) inside the target loop, reduction init before the
**                first reduction loop, guards as deep as their vars allow
**
** GPU schedules: loops bound to blockIdx/threadIdx/vthread become THREAD and
** VTHREAD loops with their tags. A stage of "shared" scope attached inside
** threadIdx-bound loops is filled by every thread of a block together: its
** region relaxes those threadIdx loops (it covers what the whole block
** reads), and its nest is wrapped in barriers (before: the previous fill's
** readers are done; after: the fill is complete). A reduction stage with a
** reduction iterator bound to threadIdx.x is a cross-thread reduction
** (classify_xred, emit_xred): private partials, a tree in shared memory, one
** writer; attached to a consumer, its buffer is shared memory. Without thread
** binding nothing changes, so CPU schedules lower as before.
**   flatten      one row-major element index per LOAD/STORE (storage_align
**                pads strides); the loops a schedule marks with the pragma
**                "loop_partition" split into border and interior ranges
**                (partition.c); then tl_ir_simplify (which drops the guards
**                the interior ranges prove)
**
** The result is a fresh tl_ir owned by the tl_lowered (the schedule's DAG is
** only read), handed to the build layer (core/build) and its code generators.
*/
#include "schedule.h"
#include "partition.h"

#include <stdio.h>


/* What tl_lower hands out: the codegen's view first. */
typedef struct lowered_full {
  tl_lowered pub;
  tl_buf text;                    /* tl_lowered_text, made on demand */
  double seconds;                 /* time spent in tl_lower */
} lowered_full;

enum { LS_PLACEHOLDER = 0, LS_INLINED, LS_LOOPS };

/* A guard: cond must hold at leaf level `level` (-1: outside all loops).
** spatial guards also wrap the reduction init. */
typedef struct guard {
  tl_ref cond;
  int level;
  int spatial;
} guard;

/* Per stage, in the lowering's IR. Arrays live in the lowering arena.
** nval/next index the stage's iterator nodes; axis_val the op's axes
** (spatial then reduce); vmin/vext the op's spatial dims (its region). */
typedef struct lstage {
  int kind;                       /* LS_* */
  int nleaf;
  tl_ref *lvar;                   /* loop var per leaf position */
  int64_t *lext;                  /* loop extent per leaf position */
  tl_ref *nval;                   /* value per node (relative to the region) */
  int64_t *next;                  /* extent per node */
  tl_ref *axis_val;               /* absolute value per op axis */
  tl_ref *vmin;                   /* region min per spatial dim */
  int64_t *vext;                  /* region extent per spatial dim */
  int npath;
  tl_ref *path;                   /* loop vars enclosing the stage's nest */
  tl_ref *body;                   /* nout imported bodies */
  tl_ref cond;                    /* reduction where-condition or 0 */
  TL_VEC(guard) guards;
  int offset;                     /* buffer indexed relative to vmin */
  int alloc;                      /* 0 none (argument), 1 at attach point, 2 at top */
  int xred;                       /* cross-thread reduction: leaf position of the reduction
                                  ** iterator bound to threadIdx.x, or -1 */
} lstage;

/* A load of tensor `tensor` (logical buffer) by stage `stage`. */
typedef struct access {
  int stage, tensor;
  tl_ref load;
} access;

typedef struct lw {
  tl_ctx *ctx;
  tl_sched *s;
  tl_dag *dag;
  tl_ir *ir;                      /* the function's IR (owned by the result) */
  tl_arena arena;
  lstage *st;                     /* per stage */
  int *logical;                   /* per tensor: buffer id while bodies are built */
  int *real;                      /* per tensor: final buffer id */
  int *arg_of;                    /* per tensor: argument position or -1 */
  int *tensor_of_buf;             /* per dag buffer: tensor or -1 */
  tl_ref *varmap;                 /* per dag var id: var in ir (0: none yet) */
  TL_VEC(access) accs;
  tl_rangemap ranges;             /* every loop var made so far: [0, extent) */
  TL_VEC(tl_ref) thread_vars;     /* loop vars bound to threadIdx.x/y/z */
} lw;

static int is_thread_var(const lw *L, tl_ref v) {
  for (int i = 0; i < L->thread_vars.n; i++)
    if (L->thread_vars.v[i] == v) return 1;
  return 0;
}

static void *lw_alloc(lw *L, size_t n) { return tl_arena_alloc(&L->arena, n ? n : 1); }

static const char *op_name(lw *L, int st) { return L->dag->ops.v[st].name; }

/* ---- importing DAG expressions ------------------------------------------------- */

static tl_ref import_rec(lw *L, tl_ref *memo, tl_ref r);

/* The body of inlined op `op` (output k) at indices idx (in L->ir). */
static tl_ref import_inlined(lw *L, int op_index, int k, const tl_ref *idx) {
  const tl_te_op *op = &L->dag->ops.v[op_index];
  tl_ref *memo = tl_calloc((size_t)L->dag->ir->nodes.n, sizeof(tl_ref));
  for (int d = 0; d < op->ndim; d++) memo[op->axis[d].var] = idx[d];
  tl_ref out = import_rec(L, memo, op->body[k]);
  free(memo);
  return out;
}

static tl_ref import_rec(lw *L, tl_ref *memo, tl_ref r) {
  if (!r) return 0;
  if (memo[r]) return memo[r];
  const tl_ir *src = L->dag->ir;
  const tl_node *nd = tl_ir_node(src, r);
  tl_ref out;
  if (nd->op == TL_IR_VAR) {
    uint64_t id = nd->imm.u;
    if (!L->varmap[id]) {
      const tl_var *v = &src->vars.v[id];
      L->varmap[id] = tl_var_new(L->ir, v->name, v->type);
    }
    out = L->varmap[id];
  } else if (nd->nkids == 0) {
    out = tl_ir_make(L->ir, nd->op, nd->type, nd->imm.u, NULL, 0);
  } else {
    int n = nd->nkids;
    tl_ref stack[16];
    tl_ref *k = n <= 16 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)n);
    for (int i = 0; i < n; i++) k[i] = import_rec(L, memo, tl_ir_kid(src, r, i));
    if (nd->op == TL_IR_LOAD) {
      int t = L->tensor_of_buf[nd->imm.u];
      tl_assert(t >= 0);
      int op = L->dag->tensors.v[t].op;
      if (L->st[op].kind == LS_INLINED)
        out = import_inlined(L, op, L->dag->tensors.v[t].out_index, k);
      else
        out = tl_ir_make(L->ir, TL_IR_LOAD, nd->type, (uint64_t)L->logical[t], k, n);
    } else {
      out = tl_ir_make(L->ir, nd->op, nd->type, nd->imm.u, k, n);
    }
    if (k != stack) free(k);
  }
  memo[r] = out;
  return out;
}

/* Import e with the op's axis vars replaced by the stage's axis values. */
static tl_ref import_stage_expr(lw *L, int st, tl_ref e) {
  const tl_te_op *op = &L->dag->ops.v[st];
  tl_ref *memo = tl_calloc((size_t)L->dag->ir->nodes.n, sizeof(tl_ref));
  for (int d = 0; d < op->ndim; d++) memo[op->axis[d].var] = L->st[st].axis_val[d];
  for (int r = 0; r < op->nreduce; r++) memo[op->reduce_axis[r].var] = L->st[st].axis_val[op->ndim + r];
  tl_ref out = import_rec(L, memo, e);
  free(memo);
  return out;
}

typedef struct {
  lw *L;
  int stage;
} collect_st;

static int collect_fn(const tl_ir *ir, tl_ref node, void *ud) {
  collect_st *c = ud;
  if (tl_ir_op(ir, node) != TL_IR_LOAD) return 1;
  lw *L = c->L;
  int buf = (int)tl_ir_node(ir, node)->imm.u;
  for (int t = 0; t < L->dag->tensors.n; t++)
    if (L->logical[t] == buf) {
      access a = {c->stage, t, node};
      TL_VEC_PUSH(L->accs, a);
      break;
    }
  return 1;
}

/* ---- classify -------------------------------------------------------------------- */

/* A cross-thread reduction: one reduction iterator of stage st bound to
** threadIdx.x. Its form: every spatial iterator before every reduction
** iterator, spatial iterators serial or bound to blockIdx, the other reduction
** iterators serial (or unrolled), one output, no stage attached inside the
** reduction, the stage's own buffer in global scope (shared when attached). */
static int classify_xred(lw *L, int st) {
  const tl_stage *sg = &L->s->stages.v[st];
  const tl_te_op *op = &L->dag->ops.v[st];
  int pos = -1, first_red = -1;
  for (int k = 0; k < sg->leaves.n; k++) {
    const tl_iter *it = &sg->nodes.v[sg->leaves.v[k]];
    int thread = it->ann == TL_ANN_THREAD_X || it->ann == TL_ANN_THREAD_Y ||
                 it->ann == TL_ANN_THREAD_Z;
    if (it->kind == TL_ITER_REDUCE) {
      if (first_red < 0) first_red = k;
      if (it->ann == TL_ANN_THREAD_X && pos < 0) {
        pos = k;
      } else if (thread || it->ann == TL_ANN_VTHREAD ||
                 (it->ann >= TL_ANN_BLOCK_X && it->ann <= TL_ANN_THREAD_Z)) {
        return tl_err(L->ctx, TL_E_UNSUPPORTED,
                      "lower: stage '%s': reduction iterator '%s' is bound to %s (a reduction "
                      "goes across threads only through one iterator bound to threadIdx.x)",
                      op->name, it->name, tl_ann_name[it->ann]);
      }
    }
  }
  if (pos < 0) return 0;
  for (int k = 0; k < sg->leaves.n; k++) {
    const tl_iter *it = &sg->nodes.v[sg->leaves.v[k]];
    if (it->kind != TL_ITER_SPATIAL) continue;
    if (k > first_red)
      return tl_err(L->ctx, TL_E_UNSUPPORTED,
                    "lower: stage '%s' reduces across threads but spatial iterator '%s' is "
                    "inside its reduction", op->name, it->name);
    if (it->ann == TL_ANN_THREAD_X || it->ann == TL_ANN_THREAD_Y || it->ann == TL_ANN_THREAD_Z ||
        it->ann == TL_ANN_VTHREAD || it->ann == TL_ANN_VECTORIZE)
      return tl_err(L->ctx, TL_E_UNSUPPORTED,
                    "lower: stage '%s' reduces across threads but spatial iterator '%s' is "
                    "bound to %s (serial or blockIdx only)", op->name, it->name,
                    tl_ann_name[it->ann]);
  }
  if (op->nout != 1 || sg->scope != TL_SCOPE_GLOBAL)
    return tl_err(L->ctx, TL_E_UNSUPPORTED,
                  "lower: stage '%s' reduces across threads: only a single-output reduction in "
                  "global scope does", op->name);
  for (int a = 0; a < L->s->stages.n; a++) {
    const tl_stage *ag = &L->s->stages.v[a];
    if (ag->compute_at == TL_CA_ITER && ag->at_stage == st &&
        tl_sched_leaf_pos(L->s, st, ag->at_node) >= first_red)
      return tl_err(L->ctx, TL_E_UNSUPPORTED,
                    "lower: stage '%s' is computed inside the cross-thread reduction of '%s'",
                    op_name(L, a), op->name);
  }
  L->st[st].xred = pos;
  return 0;
}


static int classify(lw *L, const int *args, int nargs) {
  tl_sched *s = L->s;
  tl_dag *dag = L->dag;
  for (int i = 0; i < nargs; i++) {
    if (args[i] < 0 || args[i] >= dag->tensors.n)
      return tl_err(L->ctx, TL_E_ARG, "lower: argument %d: no tensor %d in the schedule's dag", i,
                    args[i]);
    if (L->arg_of[args[i]] >= 0)
      return tl_err(L->ctx, TL_E_ARG, "lower: tensor '%s' is given twice as an argument",
                    op_name(L, dag->tensors.v[args[i]].op));
    L->arg_of[args[i]] = i;
  }
  for (int i = 0; i < s->stages.n; i++) {
    const tl_stage *sg = &s->stages.v[i];
    const tl_te_op *op = &dag->ops.v[i];
    lstage *ls = &L->st[i];
    ls->xred = -1;
    if (op->kind == TL_OP_PLACEHOLDER) {
      ls->kind = LS_PLACEHOLDER;
      if (L->arg_of[op->out_tensors[0]] < 0)
        return tl_err(L->ctx, TL_E_ARG, "lower: placeholder '%s' is not among the arguments", op->name);
      continue;
    }
    ls->kind = sg->compute_at == TL_CA_INLINED ? LS_INLINED : LS_LOOPS;
    for (int k = 0; k < op->nout; k++)
      if (ls->kind == LS_INLINED && L->arg_of[op->out_tensors[k]] >= 0)
        return tl_err(L->ctx, TL_E_SCHED, "lower: stage '%s' is inlined but is an argument", op->name);
    if (ls->kind == LS_LOOPS && op->reducer != TL_RED_NONE)
      for (int k = 0; k < sg->leaves.n; k++)
        if (sg->nodes.v[sg->leaves.v[k]].kind == TL_ITER_MIXED)
          return tl_err(L->ctx, TL_E_UNSUPPORTED,
                        "lower: stage '%s' fuses spatial and reduction iterators ('%s')", op->name,
                        sg->nodes.v[sg->leaves.v[k]].name);
    if (ls->kind == LS_LOOPS && op->reducer != TL_RED_NONE) {
      int rc = classify_xred(L, i);
      if (rc) return rc;
    }
  }
  return 0;
}

/* ---- infer: regions, loops, values, guards, bodies --------------------------------- */

/* ---- constant sizes of symbolic extents ----------------------------------------------
** A region's extent may depend on the loops outside the attach point, e.g.
** floordiv(8a + 7, 7) - floordiv(8a, 7) + 1 for a tile of a fused-then-split
** loop. Interval bounds of such a difference are loose (each floordiv on its
** own), so when the extent mentions few loop variables with few values in
** all, its exact maximum is taken by trying them all; otherwise it falls back
** to tl_ir_const_bound. */

#define ENUM_MAX 1024           /* value combinations tried at most */

typedef struct {
  tl_ref vars[4];
  int n, over;
} var_set;

static int vars_fn(const tl_ir *ir, tl_ref node, void *ud) {
  var_set *vs = ud;
  if (tl_ir_op(ir, node) != TL_IR_VAR) return 1;
  for (int i = 0; i < vs->n; i++)
    if (vs->vars[i] == node) return 1;
  if (vs->n == 4) vs->over = 1;
  else vs->vars[vs->n++] = node;
  return 1;
}

static int const_max(lw *L, tl_ref e, const tl_rangemap *known, int64_t *out) {
  tl_ir *ir = L->ir;
  if (tl_ir_is_int(ir, e, out)) return 1;
  var_set vs = {{0}, 0, 0};
  tl_ir_visit(ir, e, vars_fn, &vs);
  int64_t lo[4], ext[4], combos = 1;
  int ok = !vs.over;
  for (int i = 0; ok && i < vs.n; i++) {
    const tl_range *r = tl_rangemap_get(known, vs.vars[i]);
    if (!r || !r->var || !tl_ir_is_int(ir, r->min, &lo[i]) || !tl_ir_is_int(ir, r->extent, &ext[i]) ||
        ext[i] < 1)
      ok = 0;
    else if ((combos *= ext[i]) > ENUM_MAX)
      ok = 0;
  }
  if (ok) {
    int64_t best = INT64_MIN;
    for (int64_t c = 0; ok && c < combos; c++) {
      tl_ref to[4];
      int64_t rest = c, v;
      for (int i = 0; i < vs.n; i++) {
        to[i] = tl_int(ir, lo[i] + rest % ext[i]);
        rest /= ext[i];
      }
      tl_ref x = tl_ir_simplify(ir, tl_ir_substitute(ir, e, vs.vars, to, vs.n), NULL);
      if (!tl_ir_is_int(ir, x, &v)) ok = 0;
      else if (v > best) best = v;
    }
    if (ok) {
      *out = best;
      return 1;
    }
  }
  int64_t l, h;
  if (!tl_ir_const_bound(ir, e, known, &l, &h)) return 0;
  *out = h;
  return 1;
}

/* Union of two ranges [m1, m1+e1) and [m2, m2+e2); extent kept constant. */
static int range_union(lw *L, tl_ref *m1, int64_t *e1, tl_ref m2, int64_t e2, const tl_rangemap *known) {
  tl_ir *ir = L->ir;
  int64_t c;
  tl_ref diff = tl_ir_simplify(ir, tl_sub(ir, m2, *m1), known);
  if (tl_ir_is_int(ir, diff, &c)) {
    int64_t lo = TL_MIN(0, c), hi = TL_MAX(*e1, c + e2);
    if (c < 0) *m1 = m2;
    *e1 = hi - lo;
    return 0;
  }
  tl_ref mn = tl_ir_simplify(ir, tl_min(ir, *m1, m2), known);
  tl_ref mx = tl_max(ir, tl_add(ir, *m1, tl_int(ir, *e1)), tl_add(ir, m2, tl_int(ir, e2)));
  tl_ref ext = tl_ir_simplify(ir, tl_sub(ir, mx, mn), known);
  int64_t hi;
  if (!const_max(L, ext, known, &hi)) return -1;
  *m1 = mn;
  *e1 = hi;
  return 0;
}

static int var_in(const tl_ref *v, int n, tl_ref x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return 1;
  return 0;
}

/* Region of attached stage st from the accesses of its consumers. */
static int infer_region(lw *L, int st) {
  tl_sched *s = L->s;
  const tl_stage *sg = &s->stages.v[st];
  const tl_te_op *op = &L->dag->ops.v[st];
  lstage *ls = &L->st[st];
  int ts = sg->at_stage;
  lstage *tgt = &L->st[ts];
  int pos = tl_sched_leaf_pos(s, ts, sg->at_node);
  tl_assert(pos >= 0);
  /* fixed: the loops enclosing the attach point */
  ls->npath = tgt->npath + pos + 1;
  ls->path = lw_alloc(L, sizeof(tl_ref) * (size_t)ls->npath);
  if (tgt->npath) memcpy(ls->path, tgt->path, sizeof(tl_ref) * (size_t)tgt->npath);
  memcpy(ls->path + tgt->npath, tgt->lvar, sizeof(tl_ref) * (size_t)(pos + 1));
  tl_ref attach_var = tgt->lvar[pos];
  tl_rangemap relax = {0}, known = {0};
  /* shared memory is filled by all threads of a block together: the region
  ** covers what every thread of the block reads (threadIdx loops relaxed) */
  int shared = sg->scope == TL_SCOPE_SHARED;
  for (int i = 0; i < L->ranges.v.n; i++) {
    const tl_range *r = &L->ranges.v.v[i];
    if (var_in(ls->path, ls->npath, r->var) && !(shared && is_thread_var(L, r->var)))
      tl_rangemap_set(&known, r->var, r->min, r->extent);
    else tl_rangemap_set(&relax, r->var, r->min, r->extent);
  }
  int found = 0, rc = 0;
  for (int a = 0; a < L->accs.n && !rc; a++) {
    const access *ac = &L->accs.v[a];
    if (L->dag->tensors.v[ac->tensor].op != st) continue;
    const lstage *q = &L->st[ac->stage];
    if (ac->stage != ts && !var_in(q->path, q->npath, attach_var)) {
      rc = tl_err(L->ctx, TL_E_SCHED,
                  "lower: stage '%s' is computed at '%s.%s' but '%s' reads it outside that loop",
                  op->name, op_name(L, ts), sg->at_node >= 0 ? s->stages.v[ts].nodes.v[sg->at_node].name : "?",
                  op_name(L, ac->stage));
      break;
    }
    for (int d = 0; d < op->ndim; d++) {
      tl_ref mn, ex;
      int64_t e;
      if (!tl_ir_eval_range(L->ir, tl_ir_kid(L->ir, ac->load, d), &relax, &known, &mn, &ex)) {
        rc = tl_err(L->ctx, TL_E_UNSUPPORTED,
                    "lower: cannot bound the region of '%s' read by '%s' (dimension %d)", op->name,
                    op_name(L, ac->stage), d);
        break;
      }
      if (!const_max(L, ex, &known, &e)) {
        rc = tl_err(L->ctx, TL_E_UNSUPPORTED,
                    "lower: the region of '%s' read by '%s' has no constant size (dimension %d)",
                    op->name, op_name(L, ac->stage), d);
        break;
      }
      if (e < 1) e = 1;
      if (!found) {
        ls->vmin[d] = mn;
        ls->vext[d] = e;
      } else if (range_union(L, &ls->vmin[d], &ls->vext[d], mn, e, &known)) {
        rc = tl_err(L->ctx, TL_E_UNSUPPORTED,
                    "lower: the region of '%s' read by its consumers has no constant size (dimension %d)",
                    op->name, d);
        break;
      }
    }
    found = 1;
  }
  tl_rangemap_free(&relax);
  tl_rangemap_free(&known);
  if (rc) return rc;
  if (!found)
    return tl_err(L->ctx, TL_E_SCHED, "lower: stage '%s' is computed at '%s', which does not read it",
                  op->name, op_name(L, ts));
  for (int d = 0; d < op->ndim; d++)
    if (ls->vext[d] > op->shape[d] && tl_ir_is_int(L->ir, ls->vmin[d], NULL)) {
      /* a constant region larger than the tensor: clamp to the tensor */
      int64_t m;
      tl_ir_is_int(L->ir, ls->vmin[d], &m);
      if (m <= 0) {
        ls->vmin[d] = tl_int(L->ir, 0);
        ls->vext[d] = op->shape[d];
      }
    }
  return 0;
}

static void add_guard(lw *L, lstage *ls, tl_ref cond, int spatial) {
  int level = -1;
  for (int j = ls->nleaf - 1; j >= 0; j--)
    if (tl_ir_uses_var(L->ir, cond, ls->lvar[j])) {
      level = j;
      break;
    }
  guard g = {cond, level, spatial};
  TL_VEC_PUSH(ls->guards, g);
}

/* Whether node's loop may run shorter than its split length: a leaf that is not
** bound to a thread, or a node split further (fused ones keep their length). */
static int clampable(const tl_stage *sg, int node) {
  for (int r = 0; r < sg->rels.n; r++) {
    const tl_rel *rel = &sg->rels.v[r];
    for (int i = 0; i < rel->nin; i++)
      if (rel->in[i] == node) return rel->kind == TL_REL_SPLIT;
  }
  int ann = sg->nodes.v[node].ann;
  return ann == TL_ANN_NONE || ann == TL_ANN_UNROLL || ann == TL_ANN_VECTORIZE;
}

static int infer_stage(lw *L, int st) {
  tl_sched *s = L->s;
  tl_ir *ir = L->ir;
  const tl_stage *sg = &s->stages.v[st];
  const tl_te_op *op = &L->dag->ops.v[st];
  lstage *ls = &L->st[st];
  int nax = op->ndim + op->nreduce;
  ls->vmin = lw_alloc(L, sizeof(tl_ref) * (size_t)(op->ndim + 1));
  ls->vext = lw_alloc(L, sizeof(int64_t) * (size_t)(op->ndim + 1));
  if (sg->compute_at == TL_CA_ITER) {
    int rc = infer_region(L, st);
    if (rc) return rc;
  } else {
    for (int d = 0; d < op->ndim; d++) {
      ls->vmin[d] = tl_int(ir, 0);
      ls->vext[d] = op->shape[d];
    }
  }
  /* node extents, forward through the relations */
  int nn = sg->nodes.n;
  ls->next = lw_alloc(L, sizeof(int64_t) * (size_t)nn);
  ls->nval = lw_alloc(L, sizeof(tl_ref) * (size_t)nn);
  for (int d = 0; d < op->ndim; d++) ls->next[d] = ls->vext[d];
  for (int r = 0; r < op->nreduce; r++) ls->next[op->ndim + r] = op->reduce_axis[r].extent;
  for (int r = 0; r < sg->rels.n; r++) {
    const tl_rel *rel = &sg->rels.v[r];
    if (rel->kind == TL_REL_SPLIT) {
      int64_t e = ls->next[rel->in[0]], prod = 1;
      for (int k = 0; k < rel->nlengths; k++) prod *= rel->lengths[k];
      int64_t rest = (e + prod - 1) / prod;
      if (rel->inner_to_outer && sg->compute_at == TL_CA_ITER && prod > e) {
        /* an attached stage's region may be smaller than its tiles (a consumer's inner
        ** tile): a factor over what remains of the region shrinks to it, innermost
        ** first, so the outer tile loops run once instead of idling under guards */
        int64_t rem = e;
        for (int c = rel->nout - 1; c >= 1; c--) {
          int64_t l = rel->lengths[c - 1];
          int64_t x = l > rem && clampable(sg, rel->out[c]) ? rem : l;
          ls->next[rel->out[c]] = x;
          rem = (rem + x - 1) / x;
        }
        ls->next[rel->out[0]] = rem;
        continue;
      }
      for (int c = 0; c < rel->nout; c++) {
        int64_t x;
        if (rel->inner_to_outer) x = c == 0 ? rest : rel->lengths[c - 1];
        else x = c == rel->nout - 1 ? rest : rel->lengths[c];
        ls->next[rel->out[c]] = x;
      }
    } else {
      int64_t prod = 1;
      for (int c = 0; c < rel->nin; c++) prod *= ls->next[rel->in[c]];
      ls->next[rel->out[0]] = prod;
    }
  }
  /* loop vars */
  ls->nleaf = sg->leaves.n;
  ls->lvar = lw_alloc(L, sizeof(tl_ref) * (size_t)ls->nleaf);
  ls->lext = lw_alloc(L, sizeof(int64_t) * (size_t)ls->nleaf);
  for (int j = 0; j < ls->nleaf; j++) {
    int n = sg->leaves.v[j];
    ls->lvar[j] = tl_var_new(ir, sg->nodes.v[n].name, TL_T_INDEX);
    int ann = sg->nodes.v[n].ann;
    if (ann == TL_ANN_THREAD_X || ann == TL_ANN_THREAD_Y || ann == TL_ANN_THREAD_Z)
      TL_VEC_PUSH(L->thread_vars, ls->lvar[j]);
    ls->lext[j] = ls->next[n];
    ls->nval[n] = ls->lvar[j];
    tl_rangemap_set(&L->ranges, ls->lvar[j], tl_int(ir, 0), tl_int(ir, ls->lext[j]));
  }
  /* node values, newest relation first */
  for (int r = sg->rels.n - 1; r >= 0; r--) {
    const tl_rel *rel = &sg->rels.v[r];
    if (rel->kind == TL_REL_SPLIT) {
      tl_ref acc = ls->nval[rel->out[0]];
      for (int c = 1; c < rel->nout; c++)
        acc = tl_add(ir, tl_mul(ir, acc, tl_int(ir, ls->next[rel->out[c]])), ls->nval[rel->out[c]]);
      ls->nval[rel->in[0]] = acc;
    } else {
      tl_ref f = ls->nval[rel->out[0]];
      int64_t inner = 1;
      for (int c = rel->nin - 1; c >= 0; c--) {
        int64_t e = ls->next[rel->in[c]];
        tl_ref q = inner == 1 ? f : tl_floordiv(ir, f, tl_int(ir, inner));
        ls->nval[rel->in[c]] = c == 0 ? q : tl_floormod(ir, q, tl_int(ir, e));
        inner *= e;
      }
    }
  }
  /* axis values and guards */
  ls->axis_val = lw_alloc(L, sizeof(tl_ref) * (size_t)(nax + 1));
  for (int a = 0; a < nax; a++) {
    tl_ref nv = ls->nval[a];
    tl_assert(nv);
    int spatial = a < op->ndim;
    int64_t ext = spatial ? ls->vext[a] : op->reduce_axis[a - op->ndim].extent;
    int64_t lo = 0, hi = 0;
    if (!tl_ir_const_bound(ir, nv, &L->ranges, &lo, &hi) || hi >= ext || lo < 0) {
      add_guard(L, ls, tl_lt(ir, nv, tl_int(ir, ext)), spatial);
    }
    tl_ref v = spatial ? tl_add(ir, ls->vmin[a], nv) : nv;
    ls->axis_val[a] = v;
    if (spatial && sg->compute_at == TL_CA_ITER) {
      /* a region from a non-divisible consumer may poke out of the tensor */
      tl_ref hi_c = tl_lt(ir, v, tl_int(ir, op->shape[a]));
      tl_ref lo_c = tl_binary(ir, TL_IR_GE, v, tl_int(ir, 0));
      if (tl_ir_prove(ir, hi_c, &L->ranges) != 1) add_guard(L, ls, hi_c, 1);
      if (tl_ir_prove(ir, lo_c, &L->ranges) != 1) add_guard(L, ls, lo_c, 1);
    }
  }
  /* bodies */
  ls->body = lw_alloc(L, sizeof(tl_ref) * (size_t)op->nout);
  collect_st cs = {L, st};
  for (int k = 0; k < op->nout; k++) {
    ls->body[k] = import_stage_expr(L, st, op->body[k]);
    tl_ir_visit(ir, ls->body[k], collect_fn, &cs);
  }
  if (op->red_cond) {
    ls->cond = import_stage_expr(L, st, op->red_cond);
    tl_ir_visit(ir, ls->cond, collect_fn, &cs);
  }
  return 0;
}

/* ---- buffers ----------------------------------------------------------------------- */

typedef struct {
  lw *L;
} repoint_st;

static tl_ref repoint_fn(tl_ir *ir, tl_ref node, void *ud) {
  lw *L = ((repoint_st *)ud)->L;
  if (tl_ir_op(ir, node) != TL_IR_LOAD) return node;
  int buf = (int)tl_ir_node(ir, node)->imm.u;
  for (int t = 0; t < L->dag->tensors.n; t++) {
    if (L->logical[t] != buf) continue;
    const lstage *p = &L->st[L->dag->tensors.v[t].op];
    int n = tl_ir_nkids(ir, node);
    tl_ref idx[64];
    for (int d = 0; d < n && d < 64; d++) {
      idx[d] = tl_ir_kid(ir, node, d);
      if (p->offset) idx[d] = tl_sub(ir, idx[d], p->vmin[d]);
    }
    return tl_load_typed(ir, tl_ir_type(ir, node), L->real[t], idx, n);
  }
  return node;
}

static int make_buffers(lw *L) {
  tl_ir *ir = L->ir;
  tl_dag *dag = L->dag;
  for (int st = 0; st < L->s->stages.n; st++) {
    lstage *ls = &L->st[st];
    const tl_te_op *op = &dag->ops.v[st];
    const tl_stage *sg = &L->s->stages.v[st];
    for (int k = 0; k < op->nout; k++) {
      int t = op->out_tensors[k];
      const tl_buffer *db = tl_dag_tensor_buf(dag, t);
      if (L->arg_of[t] >= 0) {
        L->real[t] = L->logical[t];
        continue;
      }
      if (ls->kind != LS_LOOPS) continue;
      int attached = sg->compute_at == TL_CA_ITER;
      ls->offset = attached;
      ls->alloc = attached ? 1 : 2;
      tl_ref shp[64];
      int nd = op->ndim;
      if (nd > 64) return tl_err(L->ctx, TL_E_UNSUPPORTED, "lower: '%s' has too many dimensions", op->name);
      for (int d = 0; d < nd; d++) shp[d] = tl_int(ir, attached ? ls->vext[d] : op->shape[d]);
      /* an attached cross-thread reduction: its one writer and its consumer's threads
      ** meet in shared memory */
      int scope = ls->xred >= 0 && attached ? TL_SCOPE_SHARED : sg->scope;
      L->real[t] = tl_buffer_new(ir, db->name, db->dtype, nd, shp, ls->kind == LS_LOOPS ? scope : TL_SCOPE_GLOBAL);
    }
  }
  repoint_st rs = {L};
  for (int st = 0; st < L->s->stages.n; st++) {
    lstage *ls = &L->st[st];
    if (ls->kind != LS_LOOPS) continue;
    for (int k = 0; k < L->dag->ops.v[st].nout; k++) ls->body[k] = tl_ir_mutate(ir, ls->body[k], repoint_fn, &rs);
    if (ls->cond) ls->cond = tl_ir_mutate(ir, ls->cond, repoint_fn, &rs);
  }
  return 0;
}

/* ---- nests ---------------------------------------------------------------------------- */

static tl_ref emit_stage(lw *L, int st);

static void for_kind(int ann, int *kind, int *tag) {
  *tag = TL_TAG_NONE;
  switch (ann) {
  case TL_ANN_UNROLL: *kind = TL_FOR_UNROLLED; break;
  case TL_ANN_VECTORIZE: *kind = TL_FOR_VECTORIZED; break;
  case TL_ANN_PARALLEL: *kind = TL_FOR_PARALLEL; break;
  case TL_ANN_VTHREAD: *kind = TL_FOR_VTHREAD; *tag = TL_TAG_VTHREAD; break;
  case TL_ANN_BLOCK_X: *kind = TL_FOR_THREAD; *tag = TL_TAG_BLOCK_X; break;
  case TL_ANN_BLOCK_Y: *kind = TL_FOR_THREAD; *tag = TL_TAG_BLOCK_Y; break;
  case TL_ANN_BLOCK_Z: *kind = TL_FOR_THREAD; *tag = TL_TAG_BLOCK_Z; break;
  case TL_ANN_THREAD_X: *kind = TL_FOR_THREAD; *tag = TL_TAG_THREAD_X; break;
  case TL_ANN_THREAD_Y: *kind = TL_FOR_THREAD; *tag = TL_TAG_THREAD_Y; break;
  case TL_ANN_THREAD_Z: *kind = TL_FOR_THREAD; *tag = TL_TAG_THREAD_Z; break;
  default: *kind = TL_FOR_SERIAL; break;
  }
}

/* Store index of output k of stage st (relative to its buffer). */
static void store_index(lw *L, int st, tl_ref *idx) {
  const lstage *ls = &L->st[st];
  const tl_te_op *op = &L->dag->ops.v[st];
  for (int d = 0; d < op->ndim; d++)
    idx[d] = ls->offset ? tl_ir_simplify(L->ir, tl_sub(L->ir, ls->axis_val[d], ls->vmin[d]), NULL)
                        : ls->axis_val[d];
}

static tl_ref wrap_guards(lw *L, const lstage *ls, int level, int only_spatial, tl_ref body) {
  tl_ref c = 0;
  for (int g = 0; g < ls->guards.n; g++) {
    const guard *gd = &ls->guards.v[g];
    if (gd->level != level || (only_spatial && !gd->spatial)) continue;
    c = c ? tl_and(L->ir, c, gd->cond) : gd->cond;
  }
  return c ? tl_if(L->ir, c, body, 0) : body;
}

/* Leaf position of the first reduction iterator, or nleaf. */
static int first_reduce(lw *L, int st) {
  const tl_stage *sg = &L->s->stages.v[st];
  if (L->dag->ops.v[st].reducer == TL_RED_NONE) return sg->leaves.n;
  for (int j = 0; j < sg->leaves.n; j++)
    if (sg->nodes.v[sg->leaves.v[j]].kind != TL_ITER_SPATIAL) return j;
  return sg->leaves.n;
}

static tl_ref loop_wrap(lw *L, int st, int j, tl_ref var, tl_ref body) {
  const tl_stage *sg = &L->s->stages.v[st];
  const lstage *ls = &L->st[st];
  int node = sg->leaves.v[j], kind, tag;
  for_kind(sg->nodes.v[node].ann, &kind, &tag);
  for (int p = 0; p < sg->pragmas.n; p++)
    if (sg->pragmas.v[p].node == node && strcmp(sg->pragmas.v[p].text, "debug_skip_region") == 0)
      body = tl_nop(L->ir);
  tl_ref loop = tl_for(L->ir, var, tl_int(L->ir, 0), tl_int(L->ir, ls->lext[j]), kind, tag, body);
  for (int p = sg->pragmas.n - 1; p >= 0; p--) {
    if (sg->pragmas.v[p].node != node) continue;
    const char *text = sg->pragmas.v[p].text;
    const char *dollar = strchr(text, '$');
    char key[256];
    int64_t val = 1;
    size_t kl = dollar ? (size_t)(dollar - text) : strlen(text);
    snprintf(key, sizeof key, "pragma_%.*s", (int)TL_MIN(kl, 200), text);
    if (dollar) {
      char *end;
      long long v = strtoll(dollar + 1, &end, 10);
      if (end != dollar + 1 && !*end) val = v;
    }
    loop = tl_attr(L->ir, key, tl_int(L->ir, val), loop);
  }
  return loop;
}

/* The reduction init: spatial leaves from position p on, fresh vars. */
static tl_ref emit_init(lw *L, int st, int p) {
  tl_ir *ir = L->ir;
  const tl_stage *sg = &L->s->stages.v[st];
  const tl_te_op *op = &L->dag->ops.v[st];
  const lstage *ls = &L->st[st];
  int n = ls->nleaf;
  tl_ref *from = tl_malloc(sizeof(tl_ref) * (size_t)(n + 1));
  tl_ref *to = tl_malloc(sizeof(tl_ref) * (size_t)(n + 1));
  int nsub = 0;
  for (int j = p; j < n; j++) {
    if (sg->nodes.v[sg->leaves.v[j]].kind != TL_ITER_SPATIAL) continue;
    char name[300];
    snprintf(name, sizeof name, "%s.init", sg->nodes.v[sg->leaves.v[j]].name);
    from[nsub] = ls->lvar[j];
    to[nsub++] = tl_var_new(ir, name, TL_T_INDEX);
  }
  tl_ref idx[64];
  store_index(L, st, idx);
  for (int d = 0; d < op->ndim; d++) idx[d] = tl_ir_substitute(ir, idx[d], from, to, nsub);
  tl_ref init = tl_store(ir, L->real[op->out_tensors[0]], tl_te_op_identity_in(ir, L->dag, op), idx, op->ndim);
  tl_ref c = 0;
  for (int g = 0; g < ls->guards.n; g++) {
    const guard *gd = &ls->guards.v[g];
    if (!gd->spatial || gd->level < p) continue;
    tl_ref cc = tl_ir_substitute(ir, gd->cond, from, to, nsub);
    c = c ? tl_and(ir, c, cc) : cc;
  }
  if (c) init = tl_if(ir, c, init, 0);
  for (int j = n - 1, k = nsub - 1; j >= p; j--) {
    if (sg->nodes.v[sg->leaves.v[j]].kind != TL_ITER_SPATIAL) continue;
    init = loop_wrap(L, st, j, to[k--], init);
  }
  free(from);
  free(to);
  return init;
}

/* The innermost statement: stores of the outputs, or the reduction update. */
static tl_ref emit_body(lw *L, int st) {
  tl_ir *ir = L->ir;
  const tl_te_op *op = &L->dag->ops.v[st];
  const lstage *ls = &L->st[st];
  tl_ref idx[64];
  store_index(L, st, idx);
  if (op->reducer != TL_RED_NONE) {
    int buf = L->real[op->out_tensors[0]];
    tl_ref acc = tl_load(ir, buf, idx, op->ndim);
    tl_ref upd = tl_store(ir, buf, tl_te_reducer_combine_in(ir, L->dag, op, acc, ls->body[0]), idx, op->ndim);
    return ls->cond ? tl_if(ir, ls->cond, upd, 0) : upd;
  }
  tl_ref stores[16];
  int n = TL_MIN(op->nout, 16);
  for (int k = 0; k < n; k++) stores[k] = tl_store(ir, L->real[op->out_tensors[k]], ls->body[k], idx, op->ndim);
  return tl_seq(ir, stores, n);
}

/* body without the barrier it starts with (looking through ALLOCs), or 0. */
static tl_ref strip_leading_barrier(tl_ir *ir, tl_ref body) {
  int op = tl_ir_op(ir, body);
  if (op == TL_IR_ALLOC) {
    tl_ref k = strip_leading_barrier(ir, tl_ir_kid(ir, body, 0));
    return k ? tl_alloc(ir, (int)tl_ir_node(ir, body)->imm.u, k) : 0;
  }
  if (op != TL_IR_SEQ || tl_ir_op(ir, tl_ir_kid(ir, body, 0)) != TL_IR_BARRIER) return 0;
  int n = tl_ir_nkids(ir, body);
  tl_ref *parts = tl_malloc(sizeof(tl_ref) * (size_t)n);
  for (int i = 1; i < n; i++) parts[i - 1] = tl_ir_kid(ir, body, i);
  tl_ref r = tl_seq(ir, parts, n - 1);
  free(parts);
  return r;
}

/* Stages computed at leaf j of stage st, wrapped around body (their nests
** first, each in its ALLOC). */
static tl_ref wrap_attached(lw *L, int st, int j, tl_ref body) {
  const tl_stage *sg = &L->s->stages.v[st];
  int node = sg->leaves.v[j];
  int prev_synced = 0;            /* the stage wrapped just before filled shared memory */
  for (int a = L->s->stages.n - 1; a >= 0; a--) {
    const tl_stage *ag = &L->s->stages.v[a];
    if (L->st[a].kind != LS_LOOPS || ag->compute_at != TL_CA_ITER || ag->at_stage != st ||
        ag->at_node != node)
      continue;
    tl_ref nest = emit_stage(L, a);
    int synced = 0;
    if (ag->scope == TL_SCOPE_SHARED)
      for (int p = 0; p < L->st[a].npath && !synced; p++) synced = is_thread_var(L, L->st[a].path[p]);
    tl_ref rest = synced && prev_synced ? strip_leading_barrier(L->ir, body) : 0;
    if (rest) {
      /* the next shared fill at this point waits already: both fills between
      ** the same two barriers */
      tl_ref parts[3] = {tl_barrier(L->ir, TL_SCOPE_SHARED), nest, rest};
      body = tl_seq(L->ir, parts, 3);
    } else if (synced) {
      /* threads of a block fill shared memory together: wait for the readers
      ** of the previous fill, then for the fill itself */
      tl_ref parts[4] = {tl_barrier(L->ir, TL_SCOPE_SHARED), nest, tl_barrier(L->ir, TL_SCOPE_SHARED),
                         body};
      body = tl_seq(L->ir, parts, 4);
    } else {
      tl_ref parts[2] = {nest, body};
      body = tl_seq(L->ir, parts, 2);
    }
    prev_synced = synced;
    if (L->st[a].alloc == 1) {
      const tl_te_op *op = &L->dag->ops.v[a];
      for (int k = op->nout - 1; k >= 0; k--) body = tl_alloc(L->ir, L->real[op->out_tensors[k]], body);
    }
  }
  return body;
}

static tl_ref emit_level(lw *L, int st, int j, int p, int init_done) {
  const lstage *ls = &L->st[st];
  if (j == p && !init_done) {
    tl_ref parts[2] = {emit_init(L, st, p), emit_level(L, st, j, p, 1)};
    return tl_seq(L->ir, parts, 2);
  }
  if (j == ls->nleaf) return emit_body(L, st);
  tl_ref inner = emit_level(L, st, j + 1, p, init_done);
  inner = wrap_guards(L, ls, j, 0, inner);
  inner = wrap_attached(L, st, j, inner);
  return loop_wrap(L, st, j, ls->lvar[j], inner);
}

/* A cross-thread reduction (classify_xred): per output element (the spatial loops as
** usual), every thread of the block folds its share of the reduction into a private
** accumulator, the block combines the accumulators in shared memory by a tree (each step
** halves the active threads; a non-power-of-two thread count folds its tail in the first
** step), and thread 0 stores the result. Barriers separate the steps and end each element,
** so the next element's partials never overwrite what a thread still reads, and a
** consumer computed in the same kernel reads the result after it. Guards of the reduction
** (a thread count that does not divide it) wrap the accumulation only: every thread
** reaches every barrier. */
static tl_ref emit_xred(lw *L, int st) {
  tl_ir *ir = L->ir;
  const lstage *ls = &L->st[st];
  const tl_te_op *op = &L->dag->ops.v[st];
  int p = first_reduce(L, st), tx = ls->xred, out = L->real[op->out_tensors[0]];
  tl_type dt = tl_ir_buffer(ir, out)->dtype;
  tl_ref tv = ls->lvar[tx];
  int64_t T = ls->lext[tx];
  char name[300];
  tl_ref one = tl_int(ir, 1), zero = tl_int(ir, 0), tref = tl_int(ir, T);
  snprintf(name, sizeof name, "%s.acc", op->name);
  int acc = tl_buffer_new(ir, name, dt, 1, &one, TL_SCOPE_LOCAL);
  snprintf(name, sizeof name, "%s.red", op->name);
  int red = tl_buffer_new(ir, name, dt, 1, &tref, TL_SCOPE_SHARED);
  /* this thread's share */
  tl_ref upd = tl_store(ir, acc, tl_te_reducer_combine_in(ir, L->dag, op, tl_load(ir, acc, &zero, 1),
                                                          ls->body[0]), &zero, 1);
  tl_ref c = ls->cond;
  for (int g = 0; g < ls->guards.n; g++)
    if (ls->guards.v[g].level >= p) c = c ? tl_and(ir, c, ls->guards.v[g].cond) : ls->guards.v[g].cond;
  if (c) upd = tl_if(ir, c, upd, 0);
  for (int j = ls->nleaf - 1; j >= p; j--)
    if (j != tx) upd = loop_wrap(L, st, j, ls->lvar[j], upd);
  TL_VEC(tl_ref) parts = {0};
  TL_VEC_PUSH(parts, tl_store(ir, acc, tl_te_op_identity_in(ir, L->dag, op), &zero, 1));
  TL_VEC_PUSH(parts, upd);
  TL_VEC_PUSH(parts, tl_store(ir, red, tl_load(ir, acc, &zero, 1), &tv, 1));
  TL_VEC_PUSH(parts, tl_barrier(ir, TL_SCOPE_SHARED));
  /* the tree: step s folds red[tx + s] into red[tx] for tx < min(s, T - s) */
  int64_t s0 = 1;
  while (s0 * 2 < T) s0 *= 2;
  for (int64_t s = T > 1 ? s0 : 0; s >= 1; s /= 2) {
    tl_ref other = tl_add(ir, tv, tl_int(ir, s));
    tl_ref v = tl_te_reducer_combine_in(ir, L->dag, op, tl_load(ir, red, &tv, 1), tl_load(ir, red, &other, 1));
    TL_VEC_PUSH(parts, tl_if(ir, tl_lt(ir, tv, tl_int(ir, TL_MIN(s, T - s))), tl_store(ir, red, v, &tv, 1), 0));
    TL_VEC_PUSH(parts, tl_barrier(ir, TL_SCOPE_SHARED));
  }
  tl_ref idx[64];
  store_index(L, st, idx);
  tl_ref res = tl_store(ir, out, tl_load(ir, red, &zero, 1), idx, op->ndim);
  TL_VEC_PUSH(parts, tl_if(ir, tl_lt(ir, tv, one), res, 0));   /* thread 0 (`==` in an if draws
                                                                 ** a warning from clang) */
  TL_VEC_PUSH(parts, tl_barrier(ir, TL_SCOPE_SHARED));
  tl_ref body = tl_alloc(ir, acc, tl_seq(ir, parts.v, parts.n));
  TL_VEC_FREE(parts);
  body = tl_alloc(ir, red, loop_wrap(L, st, tx, tv, body));
  for (int j = p - 1; j >= 0; j--) {
    body = wrap_guards(L, ls, j, 0, body);
    body = wrap_attached(L, st, j, body);
    body = loop_wrap(L, st, j, ls->lvar[j], body);
  }
  return wrap_guards(L, ls, -1, 0, body);
}

static tl_ref emit_stage(lw *L, int st) {
  const lstage *ls = &L->st[st];
  if (ls->xred >= 0) return emit_xred(L, st);
  int p = first_reduce(L, st);
  int has_init = L->dag->ops.v[st].reducer != TL_RED_NONE;
  tl_ref body = emit_level(L, st, 0, p, !has_init);
  return wrap_guards(L, ls, -1, 0, body);
}

/* ---- flatten ------------------------------------------------------------------------------ */

typedef struct {
  int64_t **strides;              /* per buffer id: one stride per dimension */
  int *ndim;                      /* per buffer id: dimensions before flattening */
  int64_t *padded;                /* per buffer id: padded size, or 0 */
  int nbufs;
} flat_st;

static tl_ref flat_index(tl_ir *ir, const int64_t *strides, const tl_ref *idx, int n) {
  tl_ref e = tl_int(ir, 0);
  for (int d = 0; d < n; d++) e = tl_add(ir, e, tl_mul(ir, idx[d], tl_int(ir, strides[d])));
  return e;
}

static tl_ref flatten_fn(tl_ir *ir, tl_ref node, void *ud) {
  flat_st *f = ud;
  int op = tl_ir_op(ir, node);
  if (op != TL_IR_LOAD && op != TL_IR_STORE) return node;
  int buf = (int)tl_ir_node(ir, node)->imm.u;
  if (buf >= f->nbufs) return node;
  int first = op == TL_IR_STORE ? 1 : 0;
  int n = tl_ir_nkids(ir, node) - first;
  if (n == 1 && f->ndim[buf] == 1 && !f->padded[buf]) return node;
  tl_assert(n == f->ndim[buf]);
  if (n > 64) return node;
  tl_ref idx[64];
  for (int d = 0; d < n; d++) idx[d] = tl_ir_kid(ir, node, first + d);
  tl_ref flat = flat_index(ir, f->strides[buf], idx, n);
  if (op == TL_IR_LOAD) return tl_load_typed(ir, tl_ir_type(ir, node), buf, &flat, 1);
  return tl_store(ir, buf, tl_ir_kid(ir, node, 0), &flat, 1);
}

/* Row-major strides of every buffer; storage_align pads the strides of the
** stage buffers it names (then the buffer becomes 1-D of the padded size). */
static void compute_strides(lw *L, flat_st *f) {
  tl_ir *ir = L->ir;
  f->nbufs = ir->bufs.n;
  f->strides = lw_alloc(L, sizeof(int64_t *) * (size_t)(f->nbufs + 1));
  f->ndim = lw_alloc(L, sizeof(int) * (size_t)(f->nbufs + 1));
  f->padded = lw_alloc(L, sizeof(int64_t) * (size_t)(f->nbufs + 1));
  for (int b = 0; b < f->nbufs; b++) {
    tl_buffer *bf = tl_ir_buffer(ir, b);
    int nd = bf->ndim;
    f->ndim[b] = nd;
    f->strides[b] = lw_alloc(L, sizeof(int64_t) * (size_t)(nd + 1));
    const tl_stage *sg = NULL;
    for (int t = 0; t < L->dag->tensors.n && !sg; t++)
      if (L->real[t] == b && L->arg_of[t] < 0) sg = &L->s->stages.v[L->dag->tensors.v[t].op];
    int64_t stride = 1;
    int aligned = 0;
    for (int d = nd - 1; d >= 0; d--) {
      if (sg)
        for (int a = 0; a < sg->aligns.n; a++)
          if (sg->aligns.v[a].axis == d) {
            int64_t fa = sg->aligns.v[a].factor, off = sg->aligns.v[a].offset;
            stride += ((fa + off - stride % fa) % fa);
            aligned = 1;
          }
      f->strides[b][d] = stride;
      int64_t e = 1;
      tl_ir_is_int(ir, bf->shape[d], &e);
      stride *= e;
    }
    if (aligned) f->padded[b] = stride;
  }
}

/* Aligned buffers become 1-D of their padded size (after flattening). */
static void apply_padding(lw *L, const flat_st *f) {
  for (int b = 0; b < f->nbufs; b++) {
    if (!f->padded[b]) continue;
    tl_buffer *bf = tl_ir_buffer(L->ir, b);
    bf->ndim = 1;
    bf->shape = tl_arena_alloc(&L->ir->arena, sizeof(tl_ref));
    bf->shape[0] = tl_int(L->ir, f->padded[b]);
  }
}

/* ---- entry ---------------------------------------------------------------------------------- */

static int run(lw *L, const int *args, int nargs, const char *name, lowered_full *out) {
  tl_sched *s = L->s;
  tl_dag *dag = L->dag;
  tl_ir *ir = L->ir;
  int rc = classify(L, args, nargs);
  if (rc) return rc;
  /* logical buffers: arguments get their final buffers right away */
  for (int t = 0; t < dag->tensors.n; t++) {
    const tl_buffer *db = tl_dag_tensor_buf(dag, t);
    const tl_te_op *op = &dag->ops.v[dag->tensors.v[t].op];
    tl_ref shp[64];
    int nd = op->ndim;
    if (nd > 64) return tl_err(L->ctx, TL_E_UNSUPPORTED, "lower: '%s' has too many dimensions", op->name);
    for (int d = 0; d < nd; d++) shp[d] = tl_int(ir, op->shape[d]);
    L->logical[t] = tl_buffer_new(ir, db->name, db->dtype, nd, shp, TL_SCOPE_GLOBAL);
    if (L->arg_of[t] >= 0) tl_ir_buffer(ir, L->logical[t])->arg = L->arg_of[t];
    L->real[t] = -1;
  }
  for (int st = s->stages.n - 1; st >= 0; st--) {
    if (L->st[st].kind != LS_LOOPS) continue;
    rc = infer_stage(L, st);
    if (rc) return rc;
  }
  rc = make_buffers(L);
  if (rc) return rc;
  /* root stages in order, global temporaries around everything */
  TL_VEC(tl_ref) parts = {0};
  for (int st = 0; st < s->stages.n; st++)
    if (L->st[st].kind == LS_LOOPS && s->stages.v[st].compute_at != TL_CA_ITER)
      TL_VEC_PUSH(parts, emit_stage(L, st));
  tl_ref body = tl_seq(ir, parts.v, parts.n);
  TL_VEC_FREE(parts);
  for (int st = s->stages.n - 1; st >= 0; st--) {
    if (L->st[st].kind != LS_LOOPS || L->st[st].alloc != 2) continue;
    const tl_te_op *op = &dag->ops.v[st];
    for (int k = op->nout - 1; k >= 0; k--) body = tl_alloc(ir, L->real[op->out_tensors[k]], body);
  }
#ifndef NDEBUG
  if ((rc = tl_ir_verify(L->ctx, ir, body, NULL, 0)) != 0) {
    tl_err_prefix(L->ctx, "lower: after building the loop nests: ");
    return TL_E_INTERNAL;
  }
#endif
  flat_st fs;
  compute_strides(L, &fs);
  body = tl_ir_mutate(ir, body, flatten_fn, &fs);
  apply_padding(L, &fs);
  /* loops marked "loop_partition" (partition.h); the body before stays for layout.c, whose
  ** analysis wants each loop variable bound by one loop */
  out->pub.unpartitioned = tl_partition_marked(ir, body) ? body : TL_NOREF;
  body = tl_partition_loops(ir, body);
  body = tl_ir_simplify(ir, body, NULL);
#ifndef NDEBUG
  if ((rc = tl_ir_verify(L->ctx, ir, body, NULL, 0)) != 0) {
    tl_err_prefix(L->ctx, "lower: after flattening: ");
    return TL_E_INTERNAL;
  }
#endif
  out->pub.ir = ir;
  out->pub.body = body;
  out->pub.name = tl_arena_strdup(&ir->arena, name && *name ? name : "main");
  out->pub.nargs = nargs;
  out->pub.arg_bufs = tl_malloc(sizeof(int) * (size_t)(nargs + 1));
  for (int i = 0; i < nargs; i++) out->pub.arg_bufs[i] = L->logical[args[i]];
  return 0;
}

TL_EXPORT int tl_lower(tl_ctx *ctx, tl_sched *s, const int *args, int nargs, const char *name,
                       tl_lowered **out) {
  double t0 = tl_now();
  *out = NULL;
  lw L;
  memset(&L, 0, sizeof L);
  L.ctx = ctx;
  L.s = s;
  L.dag = s->dag;
  L.ir = tl_ir_new();
  tl_arena_init(&L.arena);
  int nt = s->dag->tensors.n;
  L.st = tl_calloc((size_t)s->stages.n + 1, sizeof(lstage));
  L.logical = tl_malloc(sizeof(int) * (size_t)(nt + 1));
  L.real = tl_malloc(sizeof(int) * (size_t)(nt + 1));
  L.arg_of = tl_malloc(sizeof(int) * (size_t)(nt + 1));
  for (int t = 0; t < nt; t++) L.arg_of[t] = -1;
  L.tensor_of_buf = tl_malloc(sizeof(int) * (size_t)(s->dag->ir->bufs.n + 1));
  for (int b = 0; b < s->dag->ir->bufs.n; b++) L.tensor_of_buf[b] = -1;
  for (int t = 0; t < nt; t++) L.tensor_of_buf[s->dag->tensors.v[t].buf] = t;
  L.varmap = tl_calloc((size_t)s->dag->ir->vars.n + 1, sizeof(tl_ref));
  lowered_full *f = tl_calloc(1, sizeof *f);
  int rc = nargs < 0 ? tl_err(ctx, TL_E_ARG, "lower: negative argument count") : run(&L, args, nargs, name, f);
  for (int i = 0; i < s->stages.n; i++) TL_VEC_FREE(L.st[i].guards);
  free(L.st);
  free(L.logical);
  free(L.real);
  free(L.arg_of);
  free(L.tensor_of_buf);
  free(L.varmap);
  TL_VEC_FREE(L.accs);
  TL_VEC_FREE(L.thread_vars);
  tl_rangemap_free(&L.ranges);
  tl_arena_free(&L.arena);
  if (rc) {
    tl_ir_free(L.ir);
    free(f);
    return rc;
  }
  f->seconds = tl_now() - t0;
  *out = &f->pub;
  return 0;
}

TL_EXPORT void tl_lowered_free(tl_lowered *f) {
  if (!f) return;
  lowered_full *full = (lowered_full *)f;
  tl_ir_free(f->ir);
  free(f->arg_bufs);
  tl_buf_free(&full->text);
  free(full);
}

TL_EXPORT double tl_lowered_seconds(const tl_lowered *f) { return ((const lowered_full *)f)->seconds; }

TL_EXPORT const char *tl_lowered_text(tl_lowered *f) {
  lowered_full *full = (lowered_full *)f;
  tl_buf *b = &full->text;
  tl_buf_free(b);
  tl_buf_printf(b, "func %s(", f->name);
  for (int i = 0; i < f->nargs; i++) {
    const tl_buffer *bf = tl_ir_buffer(f->ir, f->arg_bufs[i]);
    char tb[24];
    tl_buf_printf(b, "%s%s: %s[", i ? ", " : "", bf->name, tl_type_str(bf->dtype, tb));
    for (int d = 0; d < bf->ndim; d++) {
      int64_t e = 0;
      tl_ir_is_int(f->ir, bf->shape[d], &e);
      tl_buf_printf(b, "%s%lld", d ? ", " : "", (long long)e);
    }
    tl_buf_puts(b, "]");
  }
  tl_buf_puts(b, ")\n");
  tl_ir_print_buf(f->ir, f->body, b);
  return b->s;
}
