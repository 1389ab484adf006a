/*
** analysis.c -- the auto-scheduler's static analysis of a compute DAG.
**
** One pass over the ops in dag order classifies every load in each compute
** body by how its indices use the reader's axes (simple access, complete,
** ordered, repeated) and which of the reader's axes it touches at all; the
** per-stage predicates of ansor.h follow from those facts, and the
** producer and consumer lists from the ops' inputs. The element-wise match
** relation is asked per pair and walks the chain of single consumers. The
** sketch rules read this; it never changes the dag.
*/
#include <stdio.h>
#include <string.h>

#include "ansor.h"

/* ---- expressions -------------------------------------------------------------------------- */

/* Loads of buffer buf in e, appended to *v (a hash-consed body repeats a
** shared subtree; a repeated load is harmless to every check below). */
typedef TL_VEC(tl_ref) refvec;

static void loads_of(const tl_ir *ir, tl_ref e, int buf, refvec *v) {
  const tl_node *n = tl_ir_node(ir, e);
  if (n->op == TL_IR_LOAD && (int)n->imm.u == buf) TL_VEC_PUSH(*v, e);
  for (int i = 0; i < n->nkids; i++) loads_of(ir, tl_ir_kid(ir, e, i), buf, v);
}

/* Branches (select, if_then_else) and exp calls anywhere in e. */
static void scan_body(const tl_ir *ir, tl_ref e, uint8_t *branch, uint8_t *expensive) {
  const tl_node *n = tl_ir_node(ir, e);
  if (n->op == TL_IR_SELECT || n->op == TL_IR_IF_THEN_ELSE) *branch = 1;
  if (n->op == TL_IR_CALL && n->imm.u == TL_INTRIN_EXP) *expensive = 1;
  for (int i = 0; i < n->nkids; i++) scan_body(ir, tl_ir_kid(ir, e, i), branch, expensive);
}

/* Position of VAR v among op's spatial axes, or -1. */
static int axis_pos(const tl_te_op *op, tl_ref v) {
  for (int i = 0; i < op->ndim; i++)
    if (op->axis[i].var == v) return i;
  return -1;
}

/* The axis an index names when it is a simple access (axis, axis + c,
** c + axis, axis - c): its position, -2 for a constant, -1 otherwise. */
static int simple_index(const tl_ir *ir, const tl_te_op *op, tl_ref e) {
  int k = tl_ir_op(ir, e);
  if (k == TL_IR_INT) return -2;
  if (k == TL_IR_VAR) return axis_pos(op, e);
  if (k == TL_IR_ADD || k == TL_IR_SUB) {
    tl_ref a = tl_ir_kid(ir, e, 0), b = tl_ir_kid(ir, e, 1);
    if (tl_ir_op(ir, a) == TL_IR_VAR && tl_ir_op(ir, b) == TL_IR_INT) return axis_pos(op, a);
    if (k == TL_IR_ADD && tl_ir_op(ir, b) == TL_IR_VAR && tl_ir_op(ir, a) == TL_IR_INT)
      return axis_pos(op, b);
  }
  return -1;
}

/* How one load uses the axes of its reader. */
typedef struct {
  int simple;                     /* every index is a simple access */
  int missing;                    /* some axis of extent > 1 is not named */
  int repeated;                   /* some axis is named twice */
  int ordered;                    /* named axes appear in axis order */
} access;

static access classify(const tl_ir *ir, const tl_te_op *op, tl_ref load) {
  access a = {1, 0, 0, 1};
  int nidx = tl_ir_nkids(ir, load), last = -1;
  uint8_t seen[64];
  int track = op->ndim <= 64;
  if (track) memset(seen, 0, sizeof seen);
  for (int i = 0; i < nidx; i++) {
    int p = simple_index(ir, op, tl_ir_kid(ir, load, i));
    if (p == -1) { a.simple = 0; continue; }
    if (p == -2) continue;
    if (track) {
      if (seen[p]) a.repeated = 1;
      seen[p] = 1;
    }
    if (p <= last) a.ordered = 0;
    last = p;
  }
  if (!a.simple) return a;
  if (!track) { a.simple = 0; return a; }   /* beyond any dag we make */
  for (int i = 0; i < op->ndim; i++)   /* an axis of extent 1 needs no name */
    if (!seen[i] && op->axis[i].extent > 1) a.missing = 1;
  return a;
}

/* Mark in touched[] (op->ndim bytes) the axes any VAR of e names. */
static void touch_vars(const tl_ir *ir, const tl_te_op *op, tl_ref e, uint8_t *touched) {
  if (tl_ir_op(ir, e) == TL_IR_VAR) {
    int p = axis_pos(op, e);
    if (p >= 0) touched[p] = 1;
    return;
  }
  for (int i = 0; i < tl_ir_nkids(ir, e); i++) touch_vars(ir, op, tl_ir_kid(ir, e, i), touched);
}

/* Loads by op of any output tensor of producer p. */
static void loads_from(const tl_dag *dag, const tl_te_op *op, int p, refvec *v) {
  const tl_te_op *prod = tl_dag_op(dag, p);
  for (int j = 0; j < prod->nout; j++) {
    int buf = tl_dag_tensor(dag, prod->out_tensors[j])->buf;
    for (int b = 0; b < op->nout; b++) loads_of(dag->ir, op->body[b], buf, v);
    if (op->red_cond) loads_of(dag->ir, op->red_cond, buf, v);
  }
}

/* ---- the analysis --------------------------------------------------------------------------- */

static int has_attr(const tl_te_op *op, const char *key) {
  if (!op->attrs_json) return 0;
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  return strstr(op->attrs_json, pat) != NULL;
}

static void analyze_compute(const tl_dag *dag, int o, tl_ansor_stage *s, refvec *v,
                            uint8_t *touched) {
  const tl_te_op *op = tl_dag_op(dag, o);
  const tl_ir *ir = dag->ir;
  s->compute = 1;
  s->has_reduce = op->nreduce > 0;
  for (int b = 0; b < op->nout; b++) scan_body(ir, op->body[b], &s->has_branch, &s->has_expensive);
  if (op->red_cond) scan_body(ir, op->red_cond, &s->has_branch, &s->has_expensive);
  int injective = 1, inlinable = 1, nmissing = 0;
  for (int k = 0; k < s->nproducers; k++) {
    v->n = 0;
    loads_from(dag, op, s->producers[k], v);
    memset(touched, 0, (size_t)TL_MAX(op->ndim, 1));
    for (int i = 0; i < v->n; i++) {
      access a = classify(ir, op, v->v[i]);
      if (!a.simple) injective = inlinable = 0;
      if (!a.ordered || a.repeated) inlinable = 0;
      for (int j = 0; j < tl_ir_nkids(ir, v->v[i]); j++)
        touch_vars(ir, op, tl_ir_kid(ir, v->v[i], j), touched);
    }
    for (int i = 0; i < op->ndim; i++)
      if (op->axis[i].extent > 1 && !touched[i]) { nmissing++; break; }
  }
  if (s->has_branch || s->has_expensive) inlinable = 0;
  s->injective = (uint8_t)injective;
  s->strictly_inlinable = (uint8_t)(injective && inlinable);
  s->has_reuse = nmissing >= 1;
  s->needs_mlt = (nmissing >= 2 || (nmissing >= 1 && s->has_reduce)) &&
                 !has_attr(op, "simplify_const_tensor_indices");
}

TL_EXPORT int tl_ansor_analyze(tl_ctx *ctx, const tl_dag *dag, tl_ansor_analysis **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "ansor analysis: no place for the result");
  *out = NULL;
  if (!dag) return tl_err(ctx, TL_E_ARG, "ansor analysis: expected a compute DAG, got none");
  int n = dag->ops.n;
  tl_ansor_analysis *a = tl_calloc(1, sizeof *a);
  a->dag = dag;
  a->nops = n;
  a->st = tl_calloc((size_t)TL_MAX(n, 1), sizeof *a->st);
  /* edge storage: each producer edge is also a consumer edge */
  int nedges = 0, maxdim = 1;
  for (int o = 0; o < n; o++) {
    nedges += tl_dag_op(dag, o)->ninputs;
    maxdim = TL_MAX(maxdim, tl_dag_op(dag, o)->ndim);
  }
  a->ids = tl_malloc(sizeof(int) * (size_t)TL_MAX(2 * nedges, 1));
  int *next = a->ids;
  for (int o = 0; o < n; o++) {
    const tl_te_op *op = tl_dag_op(dag, o);
    tl_ansor_stage *s = &a->st[o];
    s->producers = next;
    for (int k = 0; k < op->ninputs; k++) {
      int p = tl_dag_tensor(dag, op->inputs[k])->op, dup = 0;
      for (int j = 0; j < s->nproducers; j++) dup |= s->producers[j] == p;
      if (!dup) s->producers[s->nproducers++] = p;
    }
    /* ascending (inputs come in first-use order) */
    for (int i = 1; i < s->nproducers; i++)
      for (int j = i; j > 0 && s->producers[j - 1] > s->producers[j]; j--) {
        int t = s->producers[j];
        s->producers[j] = s->producers[j - 1];
        s->producers[j - 1] = t;
      }
    next += s->nproducers;
  }
  for (int o = 0; o < n; o++) {
    tl_ansor_stage *s = &a->st[o];
    s->consumers = next;
    s->nconsumers = tl_dag_consumers(dag, o, s->consumers);
    next += s->nconsumers;
  }
  int nout = tl_dag_output_list(dag, NULL);
  int *outs = tl_malloc(sizeof(int) * (size_t)TL_MAX(nout, 1));
  tl_dag_output_list(dag, outs);
  for (int i = 0; i < nout; i++) a->st[tl_dag_tensor(dag, outs[i])->op].is_output = 1;
  free(outs);
  refvec v = {0};
  uint8_t *touched = tl_malloc((size_t)maxdim);
  for (int o = 0; o < n; o++) {
    if (tl_dag_op(dag, o)->kind == TL_OP_COMPUTE) analyze_compute(dag, o, &a->st[o], &v, touched);
    else a->st[o].injective = 1;
  }
  free(touched);
  TL_VEC_FREE(v);
  *out = a;
  return TL_OK;
}

TL_EXPORT void tl_ansor_analysis_free(tl_ansor_analysis *a) {
  if (!a) return;
  free(a->ids);
  free(a->st);
  free(a);
}

/* ---- queries -------------------------------------------------------------------------------- */

static const tl_ansor_stage *stage(const tl_ansor_analysis *a, int op) {
  return a && op >= 0 && op < a->nops ? &a->st[op] : NULL;
}

TL_EXPORT int tl_ansor_num_ops(const tl_ansor_analysis *a) { return a ? a->nops : -1; }

#define PREDICATE(fn, field)                                                  \
  TL_EXPORT int fn(const tl_ansor_analysis *a, int op) {                      \
    const tl_ansor_stage *s = stage(a, op);                                   \
    return s ? s->field : -1;                                                 \
  }
PREDICATE(tl_ansor_is_injective, injective)
PREDICATE(tl_ansor_is_strictly_inlinable, strictly_inlinable)
PREDICATE(tl_ansor_needs_multi_level_tiling, needs_mlt)
PREDICATE(tl_ansor_has_reuse, has_reuse)
PREDICATE(tl_ansor_is_output, is_output)
PREDICATE(tl_ansor_has_reduce, has_reduce)
PREDICATE(tl_ansor_num_consumers, nconsumers)
PREDICATE(tl_ansor_num_producers, nproducers)
#undef PREDICATE

TL_EXPORT int tl_ansor_consumer(const tl_ansor_analysis *a, int op, int i) {
  const tl_ansor_stage *s = stage(a, op);
  return s && i >= 0 && i < s->nconsumers ? s->consumers[i] : -1;
}

TL_EXPORT int tl_ansor_producer(const tl_ansor_analysis *a, int op, int i) {
  const tl_ansor_stage *s = stage(a, op);
  return s && i >= 0 && i < s->nproducers ? s->producers[i] : -1;
}

static int same_shape(const tl_te_op *x, const tl_te_op *y) {
  if (x->ndim != y->ndim) return 0;
  for (int i = 0; i < x->ndim; i++)
    if (x->shape[i] != y->shape[i]) return 0;
  return 1;
}

TL_EXPORT int tl_ansor_elementwise_match(const tl_ansor_analysis *a, int op, int target) {
  if (!stage(a, op) || !stage(a, target)) return -1;
  const tl_dag *dag = a->dag;
  refvec v = {0};
  int cur = op, ok = 1;
  while (ok && cur != target) {
    const tl_ansor_stage *s = &a->st[cur];
    if (s->nconsumers != 1 || !s->compute) { ok = 0; break; }
    int nx = s->consumers[0];
    const tl_te_op *c = tl_dag_op(dag, cur), *x = tl_dag_op(dag, nx);
    if (!same_shape(c, x)) { ok = 0; break; }
    v.n = 0;
    loads_from(dag, x, cur, &v);
    for (int i = 0; i < v.n && ok; i++) {
      access acc = classify(dag->ir, x, v.v[i]);
      if (!acc.simple || acc.missing || acc.repeated || !acc.ordered) ok = 0;
    }
    cur = nx;
  }
  TL_VEC_FREE(v);
  return ok;
}

int tl_ansor_consumers_through(const tl_ansor_analysis *a, int op, const uint8_t *inlined,
                               int *out) {
  /* mark reachable consumers: ops only grow along the dag order */
  uint8_t *mark = tl_calloc((size_t)TL_MAX(a->nops, 1), 1);
  for (int i = 0; i < a->st[op].nconsumers; i++) mark[a->st[op].consumers[i]] = 1;
  int n = 0;
  for (int o = op + 1; o < a->nops; o++) {
    if (!mark[o]) continue;
    if (inlined && inlined[o]) {
      for (int i = 0; i < a->st[o].nconsumers; i++) mark[a->st[o].consumers[i]] = 1;
    } else {
      out[n++] = o;
    }
  }
  free(mark);
  return n;
}

TL_EXPORT int tl_ansor_elementwise_consumer(const tl_ansor_analysis *a, int op,
                                            const uint8_t *inlined, int *consumer) {
  if (consumer) *consumer = -1;
  if (!stage(a, op)) return -1;
  int *cons = tl_malloc(sizeof(int) * (size_t)TL_MAX(a->nops, 1));
  int n = tl_ansor_consumers_through(a, op, inlined, cons), c = n == 1 ? cons[0] : -1;
  free(cons);
  if (c < 0 || tl_ansor_elementwise_match(a, op, c) != 1) return 0;
  if (a->st[op].has_reduce && a->st[c].has_reduce) return 0;
  if (consumer) *consumer = c;
  return 1;
}
