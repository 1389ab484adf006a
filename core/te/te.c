/*
** te.c -- building compute DAGs: placeholders, computes, reductions, custom
** reducers, and the checks that make a DAG safe to schedule and lower.
**
** Everything a compute body may contain is validated here once, so later
** stages (schedule steps, bound inference, lowering, codegen, feature
** extraction) can rely on the invariants listed in te.h. The public
** builders (tl_dag_* in core/tunelua.h) check operand types themselves --
** the IR's typed constructors only assert -- and then call the internal
** tl_te_* functions. Queries, printing, keys, FLOPs and extraction are in
** dag.c.
*/
#include "te.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>

/* The public enums mirror the internal ones. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(TL_EXPR_INT, TL_IR_INT) && SAME(TL_EXPR_FLOAT, TL_IR_FLOAT) &&
               SAME(TL_EXPR_VAR, TL_IR_VAR), "TL_EXPR leaves");
_Static_assert(SAME(TL_EXPR_ADD, TL_IR_ADD) && SAME(TL_EXPR_SUB, TL_IR_SUB) && SAME(TL_EXPR_MUL, TL_IR_MUL) &&
               SAME(TL_EXPR_DIV, TL_IR_DIV) && SAME(TL_EXPR_FLOORDIV, TL_IR_FLOORDIV) &&
               SAME(TL_EXPR_FLOORMOD, TL_IR_FLOORMOD) && SAME(TL_EXPR_TRUNCDIV, TL_IR_TRUNCDIV) &&
               SAME(TL_EXPR_TRUNCMOD, TL_IR_TRUNCMOD) && SAME(TL_EXPR_MIN, TL_IR_MIN) &&
               SAME(TL_EXPR_MAX, TL_IR_MAX) && SAME(TL_EXPR_SHL, TL_IR_SHL) && SAME(TL_EXPR_SHR, TL_IR_SHR) &&
               SAME(TL_EXPR_BITAND, TL_IR_BITAND) && SAME(TL_EXPR_BITOR, TL_IR_BITOR) &&
               SAME(TL_EXPR_BITXOR, TL_IR_BITXOR), "TL_EXPR arithmetic");
_Static_assert(SAME(TL_EXPR_EQ, TL_IR_EQ) && SAME(TL_EXPR_NE, TL_IR_NE) && SAME(TL_EXPR_LT, TL_IR_LT) &&
               SAME(TL_EXPR_LE, TL_IR_LE) && SAME(TL_EXPR_GT, TL_IR_GT) && SAME(TL_EXPR_GE, TL_IR_GE) &&
               SAME(TL_EXPR_AND, TL_IR_AND) && SAME(TL_EXPR_OR, TL_IR_OR) && SAME(TL_EXPR_NOT, TL_IR_NOT),
               "TL_EXPR logic");
_Static_assert(SAME(TL_EXPR_SELECT, TL_IR_SELECT) && SAME(TL_EXPR_IF_THEN_ELSE, TL_IR_IF_THEN_ELSE) &&
               SAME(TL_EXPR_CAST, TL_IR_CAST) && SAME(TL_EXPR_LOAD, TL_IR_LOAD) &&
               SAME(TL_EXPR_CALL, TL_IR_CALL), "TL_EXPR others");
_Static_assert(SAME(TL_REDUCE_NONE, TL_RED_NONE) && SAME(TL_REDUCE_SUM, TL_RED_SUM) &&
               SAME(TL_REDUCE_MAX, TL_RED_MAX) && SAME(TL_REDUCE_MIN, TL_RED_MIN) &&
               SAME(TL_REDUCE_PROD, TL_RED_PROD) && SAME(TL_REDUCE_CUSTOM, TL_RED_CUSTOM), "TL_REDUCE");
_Static_assert(SAME(TL_DAG_PLACEHOLDER, TL_OP_PLACEHOLDER) && SAME(TL_DAG_COMPUTE, TL_OP_COMPUTE),
               "TL_DAG op kinds");

static const char *const red_names[] = {"", "sum", "max", "min", "prod"};

/* ---- the dag ---------------------------------------------------------------- */

TL_EXPORT tl_dag *tl_dag_new(void) {
  tl_dag *dag = tl_calloc(1, sizeof *dag);
  dag->ir = tl_ir_new();
  tl_arena_init(&dag->arena);
  return dag;
}

TL_EXPORT void tl_dag_free(tl_dag *dag) {
  if (!dag) return;
  tl_ir_free(dag->ir);
  TL_VEC_FREE(dag->ops);
  TL_VEC_FREE(dag->tensors);
  TL_VEC_FREE(dag->raxes);
  TL_VEC_FREE(dag->reducers);
  TL_VEC_FREE(dag->outputs);
  tl_buf_free(&dag->scratch);
  tl_arena_free(&dag->arena);
  free(dag);
}

int tl_dag_buf_tensor(const tl_dag *dag, int buf) {
  for (int t = 0; t < dag->tensors.n; t++)
    if (dag->tensors.v[t].buf == buf) return t;
  return -1;
}

/* 1 if some op reads tensor t. */
static int tensor_is_read(const tl_dag *dag, int t) {
  for (int o = dag->tensors.v[t].op + 1; o < dag->ops.n; o++) {
    const tl_te_op *op = &dag->ops.v[o];
    for (int k = 0; k < op->ninputs; k++)
      if (op->inputs[k] == t) return 1;
  }
  return 0;
}

int tl_dag_output_list(const tl_dag *dag, int *out) {
  if (dag->outputs.n > 0) {
    if (out) memcpy(out, dag->outputs.v, sizeof(int) * (size_t)dag->outputs.n);
    return dag->outputs.n;
  }
  int n = 0;
  for (int t = 0; t < dag->tensors.n; t++) {
    if (dag->ops.v[dag->tensors.v[t].op].kind != TL_OP_COMPUTE || tensor_is_read(dag, t)) continue;
    if (out) out[n] = t;
    n++;
  }
  return n;
}

int tl_dag_consumers(const tl_dag *dag, int op, int *out) {
  const tl_te_op *p = &dag->ops.v[op];
  int n = 0;
  for (int o = op + 1; o < dag->ops.n; o++) {
    const tl_te_op *c = &dag->ops.v[o];
    int reads = 0;
    for (int k = 0; k < c->ninputs && !reads; k++)
      for (int j = 0; j < p->nout; j++)
        if (c->inputs[k] == p->out_tensors[j]) reads = 1;
    if (reads) {
      if (out) out[n] = o;
      n++;
    }
  }
  return n;
}

/* The name of a new op (arena): as given, or in a dag with unique names the
** first of name, name_1, name_2, ... not yet used. */
static const char *unique_name(tl_dag *dag, const char *name) {
  if (!dag->unique_names) return tl_arena_strdup(&dag->arena, name);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", name);
  for (int k = 1;; k++) {
    int clash = 0;
    for (int o = 0; o < dag->ops.n && !clash; o++) clash = strcmp(dag->ops.v[o].name, buf) == 0;
    if (!clash) return tl_arena_strdup(&dag->arena, buf);
    snprintf(buf, sizeof buf, "%.200s_%d", name, k);
  }
}

static int check_shape(tl_ctx *ctx, const char *what, const char *name, int ndim,
                       const int64_t *shape) {
  if (ndim < 0) return tl_err(ctx, TL_E_SHAPE, "%s '%s': negative ndim %d", what, name, ndim);
  if (ndim > 0 && !shape) return tl_err(ctx, TL_E_ARG, "%s '%s': shape is NULL", what, name);
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 1)
      return tl_err(ctx, TL_E_SHAPE, "%s '%s': dimension %d has extent %lld (must be >= 1)",
                    what, name, i, (long long)shape[i]);
    if (shape[i] > INT32_MAX)
      return tl_err(ctx, TL_E_SHAPE, "%s '%s': dimension %d has extent %lld (beyond the int32 index range)",
                    what, name, i, (long long)shape[i]);
  }
  return TL_OK;
}

static int check_dtype(tl_ctx *ctx, const char *what, const char *name, tl_type t) {
  if (t.code == TL_TC_VOID || t.code == TL_TC_HANDLE || t.lanes != 1 || tl_type_to_dtype(t) < 0) {
    char tb[24];
    return tl_err(ctx, TL_E_DTYPE, "%s '%s': unsupported dtype %s", what, name, tl_type_str(t, tb));
  }
  return TL_OK;
}

/* Buffer shape refs for an int64 shape. */
static tl_ref *shape_refs(tl_dag *dag, int ndim, const int64_t *shape) {
  tl_ref *s = tl_arena_alloc(&dag->arena, sizeof(tl_ref) * (size_t)(ndim > 0 ? ndim : 1));
  for (int i = 0; i < ndim; i++) s[i] = tl_int(dag->ir, shape[i]);
  return s;
}

int tl_te_placeholder(tl_ctx *ctx, tl_dag *dag, const char *name, int ndim,
                      const int64_t *shape, tl_type dtype, int *tensor) {
  if (!name || !*name) name = "placeholder";
  int rc;
  if ((rc = check_shape(ctx, "placeholder", name, ndim, shape))) return rc;
  if ((rc = check_dtype(ctx, "placeholder", name, dtype))) return rc;
  tl_te_op op;
  memset(&op, 0, sizeof op);
  op.kind = TL_OP_PLACEHOLDER;
  op.name = unique_name(dag, name);
  op.tag = "";
  op.ndim = ndim;
  op.shape = tl_arena_alloc(&dag->arena, sizeof(int64_t) * (size_t)(ndim > 0 ? ndim : 1));
  for (int i = 0; i < ndim; i++) op.shape[i] = shape[i];
  op.dtype = dtype;
  op.nout = 1;
  op.out_tensors = tl_arena_alloc(&dag->arena, sizeof(int));
  op.out_tensors[0] = dag->tensors.n;
  tl_tensor t = {dag->ops.n, 0, tl_buffer_new(dag->ir, op.name, dtype, ndim, shape_refs(dag, ndim, shape),
                                                TL_SCOPE_GLOBAL)};
  TL_VEC_PUSH(dag->ops, op);
  TL_VEC_PUSH(dag->tensors, t);
  if (tensor) *tensor = dag->tensors.n - 1;
  return TL_OK;
}

tl_ref tl_te_axis_var(tl_dag *dag, const char *name) {
  return tl_var_new(dag->ir, name && *name ? name : "i", TL_T_INDEX);
}

void tl_te_axis_vars(tl_dag *dag, int n, const char *const *names, tl_ref *out) {
  char buf[32];
  for (int i = 0; i < n; i++) {
    const char *nm = names ? names[i] : NULL;
    if (!nm) {
      snprintf(buf, sizeof buf, "i%d", i);
      nm = buf;
    }
    out[i] = tl_te_axis_var(dag, nm);
  }
}

tl_ref tl_te_reduce_axis(tl_dag *dag, const char *name, int64_t extent) {
  tl_te_raxis ra = {tl_var_new(dag->ir, name && *name ? name : "k", TL_T_INDEX), extent, -1};
  TL_VEC_PUSH(dag->raxes, ra);
  return ra.var;
}

static int raxis_find(const tl_dag *dag, tl_ref var) {
  for (int i = 0; i < dag->raxes.n; i++)
    if (dag->raxes.v[i].var == var) return i;
  return -1;
}

int64_t tl_te_reduce_extent(const tl_dag *dag, tl_ref var) {
  int i = raxis_find(dag, var);
  return i < 0 ? -1 : dag->raxes.v[i].extent;
}

tl_ref tl_te_load(tl_dag *dag, int tensor, const tl_ref *idx, int nidx) {
  tl_assert(tensor >= 0 && tensor < dag->tensors.n);
  tl_assert(nidx == tl_dag_tensor_buf(dag, tensor)->ndim);
  return tl_load(dag->ir, dag->tensors.v[tensor].buf, idx, nidx);
}

static int valid_ref(const tl_dag *dag, tl_ref r) {
  return r > 0 && r < (tl_ref)dag->ir->nodes.n && !tl_ir_is_stmt(dag->ir, r);
}

static const char *var_name(const tl_dag *dag, tl_ref v) { return tl_ir_var(dag->ir, v)->name; }

/* ---- custom reducers -------------------------------------------------------- */

typedef struct {
  tl_ref lhs, rhs;
  int bad;                        /* 1 foreign var, 2 load, 3 other node */
  tl_ref what;
} comb_st;

static int comb_visit(const tl_ir *ir, tl_ref r, void *ud) {
  comb_st *s = ud;
  if (s->bad) return 0;
  int op = tl_ir_op(ir, r);
  if (op == TL_IR_VAR && r != s->lhs && r != s->rhs) s->bad = 1, s->what = r;
  else if (op == TL_IR_LOAD) s->bad = 2, s->what = r;
  else if (op == TL_IR_RAMP || op == TL_IR_BROADCAST || op == TL_IR_LET) s->bad = 3, s->what = r;
  return !s->bad;
}

int tl_te_comm_reducer(tl_ctx *ctx, tl_dag *dag, const char *name, tl_ref lhs, tl_ref rhs,
                       tl_ref combiner, tl_ref identity, int *reducer) {
  if (!name || !*name) name = "reducer";
  tl_ir *ir = dag->ir;
  if (!valid_ref(dag, lhs) || !valid_ref(dag, rhs) || tl_ir_op(ir, lhs) != TL_IR_VAR ||
      tl_ir_op(ir, rhs) != TL_IR_VAR || lhs == rhs)
    return tl_err(ctx, TL_E_ARG, "comm_reducer '%s': lhs and rhs must be two distinct variables", name);
  tl_type t = tl_ir_type(ir, lhs);
  char tb[24], tb2[24];
  if (!tl_type_eq(t, tl_ir_type(ir, rhs)))
    return tl_err(ctx, TL_E_DTYPE, "comm_reducer '%s': lhs is %s but rhs is %s", name,
                  tl_type_str(t, tb), tl_type_str(tl_ir_type(ir, rhs), tb2));
  if (check_dtype(ctx, "comm_reducer", name, t)) return tl_errcode(ctx);
  if (!valid_ref(dag, combiner))
    return tl_err(ctx, TL_E_ARG, "comm_reducer '%s': invalid combiner expression", name);
  if (!tl_type_eq(tl_ir_type(ir, combiner), t))
    return tl_err(ctx, TL_E_DTYPE, "comm_reducer '%s': combiner is %s, expected %s", name,
                  tl_type_str(tl_ir_type(ir, combiner), tb), tl_type_str(t, tb2));
  comb_st s = {lhs, rhs, 0, 0};
  tl_ir_visit(ir, combiner, comb_visit, &s);
  if (s.bad == 1)
    return tl_err(ctx, TL_E_ARG,
                  "comm_reducer '%s': combiner uses variable '%s' (only its two arguments may appear)",
                  name, var_name(dag, s.what));
  if (s.bad == 2)
    return tl_err(ctx, TL_E_ARG, "comm_reducer '%s': combiner may not read tensors", name);
  if (s.bad)
    return tl_err(ctx, TL_E_ARG, "comm_reducer '%s': combiner holds a %s node", name,
                  tl_ir_opname[tl_ir_op(ir, s.what)]);
  if (!valid_ref(dag, identity) ||
      (tl_ir_op(ir, identity) != TL_IR_INT && tl_ir_op(ir, identity) != TL_IR_FLOAT))
    return tl_err(ctx, TL_E_ARG, "comm_reducer '%s': identity must be a constant", name);
  if (!tl_type_eq(tl_ir_type(ir, identity), t))
    return tl_err(ctx, TL_E_DTYPE, "comm_reducer '%s': identity is %s, expected %s", name,
                  tl_type_str(tl_ir_type(ir, identity), tb), tl_type_str(t, tb2));
  tl_te_reducer r = {tl_arena_strdup(&dag->arena, name), t, lhs, rhs, combiner, identity};
  TL_VEC_PUSH(dag->reducers, r);
  if (reducer) *reducer = TL_RED_CUSTOM + dag->reducers.n - 1;
  return TL_OK;
}

static tl_ref lowest(tl_ir *ir, tl_type t, int lo) {
  if (tl_type_is_float(t)) {
    double v = t.bits == 64 ? DBL_MAX : t.bits == 16 ? 65504.0 : FLT_MAX;
    return tl_imm_float(ir, t, lo ? -v : v);
  }
  if (t.code == TL_TC_UINT) {
    uint64_t hi = t.bits >= 64 ? UINT64_MAX : (1ull << t.bits) - 1;
    return tl_imm_int(ir, t, lo ? 0 : (int64_t)hi);
  }
  int64_t hi = t.bits >= 64 ? INT64_MAX : (int64_t)((1ull << (t.bits - 1)) - 1);
  return tl_imm_int(ir, t, lo ? -hi - 1 : hi);
}

static tl_ref identity_in(tl_ir *ir, int reducer, tl_type t) {
  switch (reducer) {
  case TL_RED_SUM: return tl_imm_int(ir, t, 0);
  case TL_RED_PROD: return tl_imm_int(ir, t, 1);
  case TL_RED_MAX: return lowest(ir, t, 1);
  case TL_RED_MIN: return lowest(ir, t, 0);
  default: tl_assert(!"not a built-in reducer"); return TL_NOREF;
  }
}

tl_ref tl_te_reducer_identity(tl_dag *dag, int reducer, tl_type t) {
  return identity_in(dag->ir, reducer, t);
}

tl_ref tl_te_op_identity(tl_dag *dag, const tl_te_op *op) {
  return op->reducer == TL_RED_CUSTOM ? op->identity : identity_in(dag->ir, op->reducer, op->dtype);
}

tl_ref tl_te_op_identity_in(tl_ir *ir, const tl_dag *dag, const tl_te_op *op) {
  if (op->reducer == TL_RED_CUSTOM) return tl_ir_copy(ir, dag->ir, op->identity, NULL, NULL);
  return identity_in(ir, op->reducer, op->dtype);
}

static tl_ref combine_builtin(tl_ir *ir, int reducer, tl_ref acc, tl_ref x) {
  switch (reducer) {
  case TL_RED_SUM: return tl_add(ir, acc, x);
  case TL_RED_PROD: return tl_mul(ir, acc, x);
  case TL_RED_MAX: return tl_max(ir, acc, x);
  case TL_RED_MIN: return tl_min(ir, acc, x);
  default: tl_assert(!"not a built-in reducer"); return TL_NOREF;
  }
}

tl_ref tl_te_reducer_combine(tl_dag *dag, const tl_te_op *op, tl_ref acc, tl_ref x) {
  if (op->reducer != TL_RED_CUSTOM) return combine_builtin(dag->ir, op->reducer, acc, x);
  tl_ref from[2] = {op->comb_lhs, op->comb_rhs}, to[2] = {acc, x};
  return tl_ir_substitute(dag->ir, op->combiner, from, to, 2);
}

tl_ref tl_te_reducer_combine_in(tl_ir *ir, const tl_dag *dag, const tl_te_op *op, tl_ref acc,
                                tl_ref x) {
  if (op->reducer != TL_RED_CUSTOM) return combine_builtin(ir, op->reducer, acc, x);
  tl_ref *vmap = tl_calloc((size_t)dag->ir->vars.n, sizeof(tl_ref));
  vmap[dag->ir->nodes.v[op->comb_lhs].imm.u] = acc;
  vmap[dag->ir->nodes.v[op->comb_rhs].imm.u] = x;
  tl_ref r = tl_ir_copy(ir, dag->ir, op->combiner, vmap, NULL);
  free(vmap);
  return r;
}

/* ---- compute ------------------------------------------------------------------ */

/* The walk over a body: checks every node, collects the tensors read. */
typedef struct {
  tl_dag *dag;
  const tl_ref *axis;
  int ndim;
  const tl_ref *rvars;
  int nreduce;
  int reducing;                   /* rvars may appear */
  TL_VEC(int) inputs;
  char msg[512];                  /* first problem, "" if none */
  int code;
} body_st;

static int body_visit(const tl_ir *ir, tl_ref r, void *ud) {
  body_st *s = ud;
  if (s->msg[0]) return 0;
  const tl_node *nd = tl_ir_node(ir, r);
  char tb[24];
  switch (nd->op) {
  case TL_IR_VAR: {
    for (int i = 0; i < s->ndim; i++)
      if (s->axis[i] == r) return 1;
    if (s->reducing)
      for (int i = 0; i < s->nreduce; i++)
        if (s->rvars[i] == r) return 1;
    const char *vn = tl_ir_var(ir, r)->name;
    s->code = TL_E_ARG;
    if (raxis_find(s->dag, r) >= 0) {
      if (s->reducing)
        snprintf(s->msg, sizeof s->msg, "reduce axis '%s' is not an axis of this reduction", vn);
      else
        snprintf(s->msg, sizeof s->msg, "reduce axis '%s' used outside a reduction", vn);
    } else {
      snprintf(s->msg, sizeof s->msg, "variable '%s' is not an axis of this compute", vn);
    }
    return 0;
  }
  case TL_IR_LOAD: {
    int t = tl_dag_buf_tensor(s->dag, (int)nd->imm.u);
    if (t < 0) {
      s->code = TL_E_ARG;
      snprintf(s->msg, sizeof s->msg, "reads buffer '%s', which is not a tensor of this dag",
               tl_ir_buffer(ir, (int)nd->imm.u)->name);
      return 0;
    }
    const tl_buffer *b = tl_ir_buffer(ir, (int)nd->imm.u);
    const char *tn = s->dag->ops.v[s->dag->tensors.v[t].op].name;
    if (nd->nkids != b->ndim) {
      s->code = TL_E_SHAPE;
      snprintf(s->msg, sizeof s->msg, "tensor '%s' has %d dimension%s, got %d ind%s", tn, b->ndim,
               b->ndim == 1 ? "" : "s", nd->nkids, nd->nkids == 1 ? "ex" : "ices");
      return 0;
    }
    for (int i = 0; i < nd->nkids; i++) {
      tl_type it = tl_ir_type(ir, tl_ir_kid(ir, r, i));
      if (!tl_type_eq(it, TL_T_INDEX)) {
        s->code = TL_E_DTYPE;
        snprintf(s->msg, sizeof s->msg, "index %d of tensor '%s' is %s, expected int32", i, tn,
                 tl_type_str(it, tb));
        return 0;
      }
    }
    if (!tl_type_eq(nd->type, b->dtype)) {
      s->code = TL_E_DTYPE;
      snprintf(s->msg, sizeof s->msg, "load of tensor '%s' has type %s, expected its dtype", tn,
               tl_type_str(nd->type, tb));
      return 0;
    }
    int seen = 0;
    for (int i = 0; i < s->inputs.n && !seen; i++) seen = s->inputs.v[i] == t;
    if (!seen) TL_VEC_PUSH(s->inputs, t);
    return 1;
  }
  case TL_IR_RAMP:
  case TL_IR_BROADCAST:
  case TL_IR_LET:
    s->code = TL_E_ARG;
    snprintf(s->msg, sizeof s->msg, "a %s node may not appear in a compute body",
             tl_ir_opname[nd->op]);
    return 0;
  default:
    if (tl_ir_opflags[nd->op] & TL_IRF_S) {
      s->code = TL_E_ARG;
      snprintf(s->msg, sizeof s->msg, "a statement (%s) may not appear in a compute body",
               tl_ir_opname[nd->op]);
      return 0;
    }
    if (nd->type.lanes != 1) {
      s->code = TL_E_DTYPE;
      snprintf(s->msg, sizeof s->msg, "vector expression of type %s in a compute body",
               tl_type_str(nd->type, tb));
      return 0;
    }
    return 1;
  }
}

/* Is var an axis of an existing op (spatial or reduce)? Returns the op or -1. */
static int var_owner(const tl_dag *dag, tl_ref var) {
  for (int o = 0; o < dag->ops.n; o++) {
    const tl_te_op *op = &dag->ops.v[o];
    if (op->kind != TL_OP_COMPUTE) continue;
    for (int i = 0; i < op->ndim; i++)
      if (op->axis[i].var == var) return o;
    for (int i = 0; i < op->nreduce; i++)
      if (op->reduce_axis[i].var == var) return o;
  }
  return -1;
}

int tl_te_compute(tl_ctx *ctx, tl_dag *dag, const char *name, const char *tag, int ndim,
                  const int64_t *shape, const tl_ref *axis, int nout, const tl_ref *bodies,
                  int reducer, const tl_ref *reduce_vars, int nreduce, tl_ref cond,
                  int *out_tensors) {
  if (!name || !*name) name = "compute";
  if (!tag) tag = "";
  tl_ir *ir = dag->ir;
  char tb[24], tb2[24];
  int rc;
  if ((rc = check_shape(ctx, "compute", name, ndim, shape))) return rc;
  if (ndim > 0 && !axis) return tl_err(ctx, TL_E_ARG, "compute '%s': axis vars are NULL", name);
  for (int i = 0; i < ndim; i++) {
    if (!valid_ref(dag, axis[i]) || tl_ir_op(ir, axis[i]) != TL_IR_VAR ||
        !tl_type_eq(tl_ir_type(ir, axis[i]), TL_T_INDEX))
      return tl_err(ctx, TL_E_ARG, "compute '%s': axis %d is not an int32 variable", name, i);
    for (int j = 0; j < i; j++)
      if (axis[j] == axis[i])
        return tl_err(ctx, TL_E_ARG, "compute '%s': axis var '%s' given twice", name,
                      var_name(dag, axis[i]));
    int owner = var_owner(dag, axis[i]);
    if (owner >= 0)
      return tl_err(ctx, TL_E_ARG, "compute '%s': axis var '%s' already belongs to op '%s'", name,
                    var_name(dag, axis[i]), dag->ops.v[owner].name);
    if (raxis_find(dag, axis[i]) >= 0)
      return tl_err(ctx, TL_E_ARG, "compute '%s': axis var '%s' is a reduce axis", name,
                    var_name(dag, axis[i]));
  }
  if (nout < 1 || !bodies) return tl_err(ctx, TL_E_ARG, "compute '%s': no body", name);
  const tl_te_reducer *cr = NULL;
  if (reducer < TL_RED_NONE || reducer >= TL_RED_CUSTOM + dag->reducers.n)
    return tl_err(ctx, TL_E_ARG, "compute '%s': unknown reducer %d", name, reducer);
  if (reducer >= TL_RED_CUSTOM) cr = &dag->reducers.v[reducer - TL_RED_CUSTOM];
  if (reducer != TL_RED_NONE) {
    if (nout != 1)
      return tl_err(ctx, TL_E_ARG, "compute '%s': a reduction has one output, got %d bodies", name, nout);
    if (nreduce < 1 || !reduce_vars)
      return tl_err(ctx, TL_E_ARG, "compute '%s': reduction over no reduce axis", name);
  } else {
    if (nreduce > 0)
      return tl_err(ctx, TL_E_ARG, "compute '%s': reduce axes given without a reducer", name);
    if (cond)
      return tl_err(ctx, TL_E_ARG, "compute '%s': a where-condition needs a reduction", name);
  }
  for (int i = 0; i < nreduce; i++) {
    int ra = raxis_find(dag, reduce_vars[i]);
    if (ra < 0) {
      if (valid_ref(dag, reduce_vars[i]) && tl_ir_op(ir, reduce_vars[i]) == TL_IR_VAR)
        return tl_err(ctx, TL_E_ARG, "compute '%s': '%s' is not a reduce axis", name,
                      var_name(dag, reduce_vars[i]));
      return tl_err(ctx, TL_E_ARG, "compute '%s': reduce axis %d is not a reduce axis variable",
                    name, i);
    }
    if (dag->raxes.v[ra].extent < 1)
      return tl_err(ctx, TL_E_SHAPE, "compute '%s': reduce axis '%s' has extent %lld (must be >= 1)",
                    name, var_name(dag, reduce_vars[i]), (long long)dag->raxes.v[ra].extent);
    for (int j = 0; j < i; j++)
      if (reduce_vars[j] == reduce_vars[i])
        return tl_err(ctx, TL_E_ARG, "compute '%s': reduce axis '%s' given twice", name,
                      var_name(dag, reduce_vars[i]));
  }
  /* body types */
  tl_type dtype = TL_T_VOID;
  for (int k = 0; k < nout; k++) {
    if (!valid_ref(dag, bodies[k]))
      return tl_err(ctx, TL_E_ARG, "compute '%s': body %d is not an expression", name, k);
    tl_type t = tl_ir_type(ir, bodies[k]);
    if (t.lanes != 1 || t.code == TL_TC_VOID || t.code == TL_TC_HANDLE || tl_type_to_dtype(t) < 0)
      return tl_err(ctx, TL_E_DTYPE, "compute '%s': body %d has unsupported type %s", name, k,
                    tl_type_str(t, tb));
    if (k == 0) dtype = t;
    else if (!tl_type_eq(t, dtype))
      return tl_err(ctx, TL_E_DTYPE, "compute '%s': outputs have different dtypes %s and %s", name,
                    tl_type_str(dtype, tb), tl_type_str(t, tb2));
  }
  if (reducer != TL_RED_NONE && !cr && tl_type_is_bool(dtype))
    return tl_err(ctx, TL_E_DTYPE, "compute '%s': cannot %s bool values", name, red_names[reducer]);
  if (cr && !tl_type_eq(cr->dtype, dtype))
    return tl_err(ctx, TL_E_DTYPE, "compute '%s': reducer '%s' combines %s, the source is %s", name,
                  cr->name, tl_type_str(cr->dtype, tb), tl_type_str(dtype, tb2));
  if (cond) {
    if (!valid_ref(dag, cond))
      return tl_err(ctx, TL_E_ARG, "compute '%s': the where-condition is not an expression", name);
    if (!tl_type_is_bool(tl_ir_type(ir, cond)))
      return tl_err(ctx, TL_E_DTYPE, "compute '%s': the where-condition is %s, expected bool", name,
                    tl_type_str(tl_ir_type(ir, cond), tb));
  }
  /* walk the bodies */
  body_st st;
  memset(&st, 0, sizeof st);
  st.dag = dag;
  st.axis = axis;
  st.ndim = ndim;
  st.rvars = reduce_vars;
  st.nreduce = nreduce;
  st.reducing = reducer != TL_RED_NONE;
  for (int k = 0; k < nout && !st.msg[0]; k++) tl_ir_visit(ir, bodies[k], body_visit, &st);
  if (cond && !st.msg[0]) tl_ir_visit(ir, cond, body_visit, &st);
  if (st.msg[0]) {
    TL_VEC_FREE(st.inputs);
    return tl_err(ctx, st.code, "compute '%s': %s", name, st.msg);
  }

  /* reduce axes already owned by another op get fresh vars here */
  tl_ref *rv = tl_arena_alloc(&dag->arena, sizeof(tl_ref) * (size_t)(nreduce > 0 ? nreduce : 1));
  TL_VEC(tl_ref) from = {0};
  TL_VEC(tl_ref) to = {0};
  for (int i = 0; i < nreduce; i++) {
    int ra = raxis_find(dag, reduce_vars[i]);
    rv[i] = reduce_vars[i];
    if (dag->raxes.v[ra].owner >= 0) {
      rv[i] = tl_te_reduce_axis(dag, var_name(dag, reduce_vars[i]), dag->raxes.v[ra].extent);
      TL_VEC_PUSH(from, reduce_vars[i]);
      TL_VEC_PUSH(to, rv[i]);
    }
  }

  tl_te_op op;
  memset(&op, 0, sizeof op);
  int oid = dag->ops.n;
  op.kind = TL_OP_COMPUTE;
  op.name = unique_name(dag, name);
  op.tag = tl_arena_strdup(&dag->arena, tag);
  op.ndim = ndim;
  op.shape = tl_arena_alloc(&dag->arena, sizeof(int64_t) * (size_t)(ndim > 0 ? ndim : 1));
  op.axis = tl_arena_alloc(&dag->arena, sizeof(tl_axis) * (size_t)(ndim > 0 ? ndim : 1));
  for (int i = 0; i < ndim; i++) {
    op.shape[i] = shape[i];
    op.axis[i].var = axis[i];
    op.axis[i].extent = shape[i];
    op.axis[i].kind = TL_ITER_SPATIAL;
  }
  op.dtype = dtype;
  op.nreduce = nreduce;
  op.reduce_axis = tl_arena_alloc(&dag->arena, sizeof(tl_axis) * (size_t)(nreduce > 0 ? nreduce : 1));
  for (int i = 0; i < nreduce; i++) {
    int ra = raxis_find(dag, rv[i]);
    op.reduce_axis[i].var = rv[i];
    op.reduce_axis[i].extent = dag->raxes.v[ra].extent;
    op.reduce_axis[i].kind = TL_ITER_REDUCE;
    dag->raxes.v[ra].owner = oid;
  }
  op.nout = nout;
  op.body = tl_arena_alloc(&dag->arena, sizeof(tl_ref) * (size_t)nout);
  for (int k = 0; k < nout; k++)
    op.body[k] = tl_ir_substitute(ir, bodies[k], from.v, to.v, from.n);
  op.red_cond = cond ? tl_ir_substitute(ir, cond, from.v, to.v, from.n) : TL_NOREF;
  TL_VEC_FREE(from);
  TL_VEC_FREE(to);
  op.reducer = cr ? TL_RED_CUSTOM : reducer;
  if (cr) {
    op.comb_lhs = cr->lhs;
    op.comb_rhs = cr->rhs;
    op.combiner = cr->combiner;
    op.identity = cr->identity;
    op.red_name = cr->name;
  } else if (reducer != TL_RED_NONE) {
    op.red_name = red_names[reducer];
  }
  op.ninputs = st.inputs.n;
  op.inputs = tl_arena_alloc(&dag->arena, sizeof(int) * (size_t)(st.inputs.n > 0 ? st.inputs.n : 1));
  for (int i = 0; i < st.inputs.n; i++) op.inputs[i] = st.inputs.v[i];
  TL_VEC_FREE(st.inputs);
  op.out_tensors = tl_arena_alloc(&dag->arena, sizeof(int) * (size_t)nout);
  tl_ref *srefs = shape_refs(dag, ndim, shape);
  for (int k = 0; k < nout; k++) {
    char bname[300];
    if (nout == 1) snprintf(bname, sizeof bname, "%s", op.name);
    else snprintf(bname, sizeof bname, "%s_v%d", op.name, k);
    tl_tensor t = {oid, k, tl_buffer_new(ir, bname, dtype, ndim, srefs, TL_SCOPE_GLOBAL)};
    op.out_tensors[k] = dag->tensors.n;
    if (out_tensors) out_tensors[k] = dag->tensors.n;
    TL_VEC_PUSH(dag->tensors, t);
  }
  TL_VEC_PUSH(dag->ops, op);
  return TL_OK;
}

int tl_te_set_attrs(tl_ctx *ctx, tl_dag *dag, int op, const char *json) {
  if (op < -1 || op >= dag->ops.n) return tl_err(ctx, TL_E_ARG, "set_attrs: no op %d", op);
  const char *name = op >= 0 ? dag->ops.v[op].name : "?";
  if (json) {
    json_error_t jerr;
    json_t *j = json_loads(json, 0, &jerr);
    int parsed = j != NULL, isobj = j && json_is_object(j);
    json_decref(j);
    if (!isobj)
      return tl_err(ctx, TL_E_PARSE, "op '%s': attributes must be a JSON object (%s)", name,
                    parsed ? "not an object" : jerr.text);
  }
  if (op < 0) return TL_OK;
  dag->ops.v[op].attrs_json = json ? tl_arena_strdup(&dag->arena, json) : NULL;
  dag->ops.v[op].attrs_json_len = json ? (int)strlen(json) : 0;
  return TL_OK;
}

/* ---- public builders ------------------------------------------------------------- */

static int get_type(tl_ctx *ctx, int dtype, tl_type *t) {
  *t = tl_type_from_dtype(dtype);
  if (t->code == TL_TC_VOID) return tl_err(ctx, TL_E_DTYPE, "unknown dtype code %d", dtype);
  return TL_OK;
}

static int get_ref(tl_ctx *ctx, const tl_dag *dag, uint32_t r, const char *what) {
  if (!valid_ref(dag, r)) return tl_err(ctx, TL_E_ARG, "%s: invalid expression ref %u", what, r);
  return TL_OK;
}

static const char *dtname(tl_type t, char *buf) { return tl_type_str(t, buf); }

static int is_imm(const tl_ir *ir, tl_ref r) {
  int op = tl_ir_op(ir, r);
  return op == TL_IR_INT || op == TL_IR_FLOAT;
}

/* Can immediate r take type t without losing its value? */
static int imm_fits(const tl_ir *ir, tl_ref r, tl_type t) {
  double v;
  if (tl_type_is_float(t)) return 1;
  if (tl_ir_is_float(ir, r, &v)) {
    if (v != floor(v) || isinf(v)) return 0;
  } else {
    int64_t i = 0;
    tl_ir_is_int(ir, r, &i);
    v = (double)i;
  }
  if (tl_type_is_bool(t)) return v == 0 || v == 1;
  if (t.code == TL_TC_UINT) return v >= 0 && v <= ldexp(1, t.bits) - 1;
  return v >= -ldexp(1, t.bits - 1) && v <= ldexp(1, t.bits - 1) - 1;
}

static void imm_str(const tl_ir *ir, tl_ref r, char *buf, size_t n) {
  double v;
  int64_t i;
  if (tl_ir_is_float(ir, r, &v)) snprintf(buf, n, "%g", v);
  else if (tl_ir_is_int(ir, r, &i)) snprintf(buf, n, "%lld", (long long)i);
  else snprintf(buf, n, "?");
}

/* Bring a and b to one type: an immediate adapts to the other side. */
static int unify(tl_ctx *ctx, tl_dag *dag, const char *what, tl_ref *a, tl_ref *b, tl_type *t) {
  tl_ir *ir = dag->ir;
  tl_type ta = tl_ir_type(ir, *a), tb = tl_ir_type(ir, *b);
  char b1[24], b2[24], vb[48];
  if (ta.lanes != 1 || tb.lanes != 1 || ta.code == TL_TC_VOID || tb.code == TL_TC_VOID)
    return tl_err(ctx, TL_E_DTYPE, "%s: operands must be scalar values", what);
  if (tl_type_eq(ta, tb)) {
    *t = ta;
    return TL_OK;
  }
  int ia = is_imm(ir, *a), ib = is_imm(ir, *b);
  if (ia && !ib) {
    if (!imm_fits(ir, *a, tb)) {
      imm_str(ir, *a, vb, sizeof vb);
      return tl_err(ctx, TL_E_DTYPE, "%s: constant %s does not fit the %s operand (cast one side)",
                    what, vb, dtname(tb, b1));
    }
    *a = tl_cast(ir, tb, *a);
    *t = tb;
    return TL_OK;
  }
  if (ib && !ia) {
    if (!imm_fits(ir, *b, ta)) {
      imm_str(ir, *b, vb, sizeof vb);
      return tl_err(ctx, TL_E_DTYPE, "%s: constant %s does not fit the %s operand (cast one side)",
                    what, vb, dtname(ta, b1));
    }
    *b = tl_cast(ir, ta, *b);
    *t = ta;
    return TL_OK;
  }
  if (ia && ib) {
    tl_type w = ta;
    if (tl_type_is_float(tb) && !tl_type_is_float(ta)) w = tb;
    else if (tl_type_is_float(ta) == tl_type_is_float(tb) && tb.bits > ta.bits) w = tb;
    *a = tl_cast(ir, w, *a);
    *b = tl_cast(ir, w, *b);
    *t = w;
    return TL_OK;
  }
  return tl_err(ctx, TL_E_DTYPE, "%s: operands have different dtypes %s and %s (cast one side)",
                what, dtname(ta, b1), dtname(tb, b2));
}

static void lower_name(int op, char *buf) {
  const char *s = tl_ir_opname[op];
  size_t i = 0;
  for (; s[i] && i < 23; i++) buf[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
  buf[i] = 0;
}

TL_EXPORT int tl_dag_placeholder(tl_ctx *ctx, tl_dag *dag, const char *name, int ndim,
                                 const int64_t *shape, int dtype, int *tensor) {
  tl_type t;
  if (get_type(ctx, dtype, &t)) return tl_errcode(ctx);
  return tl_te_placeholder(ctx, dag, name, ndim, shape, t, tensor);
}

TL_EXPORT int tl_dag_var(tl_ctx *ctx, tl_dag *dag, const char *name, int dtype, uint32_t *out) {
  tl_type t;
  if (get_type(ctx, dtype, &t)) return tl_errcode(ctx);
  *out = tl_var_new(dag->ir, name && *name ? name : "v", t);
  return TL_OK;
}

TL_EXPORT int tl_dag_reduce_axis(tl_ctx *ctx, tl_dag *dag, const char *name, int64_t extent,
                                 uint32_t *out) {
  if (!name || !*name) name = "k";
  if (extent < 1)
    return tl_err(ctx, TL_E_SHAPE, "reduce axis '%s': extent %lld (must be >= 1)", name,
                  (long long)extent);
  if (extent > INT32_MAX)
    return tl_err(ctx, TL_E_SHAPE, "reduce axis '%s': extent %lld (beyond the int32 index range)",
                  name, (long long)extent);
  *out = tl_te_reduce_axis(dag, name, extent);
  return TL_OK;
}

TL_EXPORT int tl_dag_const_int(tl_ctx *ctx, tl_dag *dag, int dtype, int64_t v, uint32_t *out) {
  tl_type t;
  if (get_type(ctx, dtype, &t)) return tl_errcode(ctx);
  tl_ref r = tl_imm_int(dag->ir, TL_T_I64, v);
  char b[24];
  if (!imm_fits(dag->ir, r, t))
    return tl_err(ctx, TL_E_DTYPE, "constant %lld does not fit %s", (long long)v, dtname(t, b));
  *out = tl_type_is_float(t) ? tl_imm_float(dag->ir, t, (double)v) : tl_imm_int(dag->ir, t, v);
  return TL_OK;
}

TL_EXPORT int tl_dag_const_float(tl_ctx *ctx, tl_dag *dag, int dtype, double v, uint32_t *out) {
  tl_type t;
  if (get_type(ctx, dtype, &t)) return tl_errcode(ctx);
  if (!tl_type_is_float(t)) {
    char b[24];
    if (v != floor(v) || isinf(v) || isnan(v) || v < -9.2e18 || v > 9.2e18)
      return tl_err(ctx, TL_E_DTYPE, "constant %g does not fit %s", v, dtname(t, b));
    return tl_dag_const_int(ctx, dag, dtype, (int64_t)v, out);
  }
  *out = tl_imm_float(dag->ir, t, v);
  return TL_OK;
}

TL_EXPORT int tl_dag_binary(tl_ctx *ctx, tl_dag *dag, int op, uint32_t a, uint32_t b,
                            uint32_t *out) {
  if (op < TL_IR_ADD || op > TL_IR_OR)
    return tl_err(ctx, TL_E_ARG, "binary: op %d is not a binary operator", op);
  char what[24], b1[24];
  lower_name(op, what);
  if (get_ref(ctx, dag, a, what) || get_ref(ctx, dag, b, what)) return tl_errcode(ctx);
  tl_type t;
  if (unify(ctx, dag, what, &a, &b, &t)) return tl_errcode(ctx);
  int isint = tl_type_is_int(t) && !tl_type_is_bool(t);
  switch (op) {
  case TL_IR_DIV:
    if (!tl_type_is_float(t))
      return tl_err(ctx, TL_E_DTYPE, "div: %s operands (use floordiv or truncdiv for integers)",
                    dtname(t, b1));
    break;
  case TL_IR_FLOORDIV: case TL_IR_FLOORMOD: case TL_IR_TRUNCDIV: case TL_IR_TRUNCMOD:
  case TL_IR_SHL: case TL_IR_SHR: case TL_IR_BITAND: case TL_IR_BITOR: case TL_IR_BITXOR:
    if (!isint)
      return tl_err(ctx, TL_E_DTYPE, "%s: %s operands, expected integers", what, dtname(t, b1));
    break;
  case TL_IR_AND: case TL_IR_OR:
    if (!tl_type_is_bool(t))
      return tl_err(ctx, TL_E_DTYPE, "%s: %s operands, expected bool", what, dtname(t, b1));
    break;
  case TL_IR_EQ: case TL_IR_NE:
    break;
  default:
    if (tl_type_is_bool(t)) return tl_err(ctx, TL_E_DTYPE, "%s: bool operands", what);
    break;
  }
  *out = tl_binary(dag->ir, op, a, b);
  return TL_OK;
}

TL_EXPORT int tl_dag_not(tl_ctx *ctx, tl_dag *dag, uint32_t a, uint32_t *out) {
  if (get_ref(ctx, dag, a, "not")) return tl_errcode(ctx);
  char b1[24];
  if (!tl_type_is_bool(tl_ir_type(dag->ir, a)) || tl_ir_type(dag->ir, a).lanes != 1)
    return tl_err(ctx, TL_E_DTYPE, "not: %s operand, expected bool", dtname(tl_ir_type(dag->ir, a), b1));
  *out = tl_not(dag->ir, a);
  return TL_OK;
}

TL_EXPORT int tl_dag_select(tl_ctx *ctx, tl_dag *dag, int op, uint32_t cond, uint32_t a, uint32_t b,
                            uint32_t *out) {
  if (op != TL_IR_SELECT && op != TL_IR_IF_THEN_ELSE)
    return tl_err(ctx, TL_E_ARG, "select: op %d is neither SELECT nor IF_THEN_ELSE", op);
  const char *what = op == TL_IR_SELECT ? "select" : "if_then_else";
  if (get_ref(ctx, dag, cond, what) || get_ref(ctx, dag, a, what) || get_ref(ctx, dag, b, what))
    return tl_errcode(ctx);
  char b1[24];
  tl_type ct = tl_ir_type(dag->ir, cond);
  if (!tl_type_is_bool(ct) || ct.lanes != 1)
    return tl_err(ctx, TL_E_DTYPE, "%s: condition is %s, expected bool", what, dtname(ct, b1));
  tl_type t;
  if (unify(ctx, dag, what, &a, &b, &t)) return tl_errcode(ctx);
  *out = op == TL_IR_SELECT ? tl_select(dag->ir, cond, a, b) : tl_if_then_else(dag->ir, cond, a, b);
  return TL_OK;
}

TL_EXPORT int tl_dag_cast(tl_ctx *ctx, tl_dag *dag, int dtype, uint32_t a, uint32_t *out) {
  tl_type t;
  if (get_type(ctx, dtype, &t) || get_ref(ctx, dag, a, "cast")) return tl_errcode(ctx);
  if (tl_ir_type(dag->ir, a).lanes != 1 || tl_ir_type(dag->ir, a).code == TL_TC_VOID)
    return tl_err(ctx, TL_E_DTYPE, "cast: operand must be a scalar value");
  *out = tl_cast(dag->ir, t, a);
  return TL_OK;
}

TL_EXPORT int tl_dag_call(tl_ctx *ctx, tl_dag *dag, const char *name, int nargs,
                          const uint32_t *args, uint32_t *out) {
  int in = -1;
  for (int i = 0; name && i < TL_INTRIN__MAX; i++)
    if (strcmp(tl_ir_intrinname[i], name) == 0) in = i;
  if (in < 0) {
    char list[256] = "";
    size_t n = 0;
    for (int i = 0; i < TL_INTRIN__MAX; i++)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", tl_ir_intrinname[i]);
    return tl_err(ctx, TL_E_ARG, "unknown intrinsic '%s' (expected one of %s)", name ? name : "(null)", list);
  }
  if (nargs != tl_ir_intrinnargs[in])
    return tl_err(ctx, TL_E_ARG, "%s: expected %d argument%s, got %d", name, tl_ir_intrinnargs[in],
                  tl_ir_intrinnargs[in] == 1 ? "" : "s", nargs);
  tl_ref a[4];
  tl_type t = TL_T_VOID;
  char b1[24];
  for (int i = 0; i < nargs; i++) {
    if (get_ref(ctx, dag, args[i], name)) return tl_errcode(ctx);
    a[i] = args[i];
  }
  /* the type: the first non-immediate argument's, else the first one's */
  for (int i = 0; i < nargs && t.code == TL_TC_VOID; i++)
    if (!is_imm(dag->ir, a[i])) t = tl_ir_type(dag->ir, a[i]);
  if (t.code == TL_TC_VOID) t = tl_ir_type(dag->ir, a[0]);
  if (!tl_type_is_float(t) || t.lanes != 1)
    return tl_err(ctx, TL_E_DTYPE, "%s: %s argument, expected a float (cast it first)", name,
                  dtname(t, b1));
  for (int i = 0; i < nargs; i++) {
    if (is_imm(dag->ir, a[i])) {
      a[i] = tl_cast(dag->ir, t, a[i]);
    } else if (!tl_type_eq(tl_ir_type(dag->ir, a[i]), t)) {
      char b2[24];
      return tl_err(ctx, TL_E_DTYPE, "%s: arguments have different dtypes %s and %s (cast one side)",
                    name, dtname(t, b1), dtname(tl_ir_type(dag->ir, a[i]), b2));
    }
  }
  *out = tl_call(dag->ir, in, t, a, nargs);
  return TL_OK;
}

TL_EXPORT int tl_dag_load(tl_ctx *ctx, tl_dag *dag, int tensor, int nidx, const uint32_t *idx,
                          uint32_t *out) {
  if (tensor < 0 || tensor >= dag->tensors.n)
    return tl_err(ctx, TL_E_ARG, "load: no tensor %d in this dag", tensor);
  const char *tn = dag->ops.v[dag->tensors.v[tensor].op].name;
  int ndim = tl_dag_tensor_buf(dag, tensor)->ndim;
  if (nidx != ndim)
    return tl_err(ctx, TL_E_SHAPE, "tensor '%s' has %d dimension%s, got %d ind%s", tn, ndim,
                  ndim == 1 ? "" : "s", nidx, nidx == 1 ? "ex" : "ices");
  tl_ref stack[8] = {0};
  tl_ref *ix = nidx <= 8 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)nidx);
  char b1[24];
  for (int i = 0; i < nidx; i++) {
    if (get_ref(ctx, dag, idx[i], "load")) goto fail;
    tl_type it = tl_ir_type(dag->ir, idx[i]);
    if (!tl_type_is_int(it) || tl_type_is_bool(it) || it.lanes != 1) {
      tl_err(ctx, TL_E_DTYPE, "index %d of tensor '%s' is %s, expected an integer", i, tn,
             dtname(it, b1));
      goto fail;
    }
    ix[i] = tl_cast(dag->ir, TL_T_INDEX, idx[i]);
  }
  *out = tl_load(dag->ir, dag->tensors.v[tensor].buf, ix, nidx);
  if (ix != stack) free(ix);
  return TL_OK;
fail:
  if (ix != stack) free(ix);
  return tl_errcode(ctx);
}

TL_EXPORT int tl_dag_comm_reducer(tl_ctx *ctx, tl_dag *dag, const char *name, uint32_t lhs,
                                  uint32_t rhs, uint32_t combiner, uint32_t identity,
                                  int *reducer) {
  /* an immediate identity adapts to the reducer's type */
  if (valid_ref(dag, lhs) && valid_ref(dag, identity) && is_imm(dag->ir, identity) &&
      imm_fits(dag->ir, identity, tl_ir_type(dag->ir, lhs)))
    identity = tl_cast(dag->ir, tl_ir_type(dag->ir, lhs), identity);
  return tl_te_comm_reducer(ctx, dag, name, lhs, rhs, combiner, identity, reducer);
}

TL_EXPORT int tl_dag_compute(tl_ctx *ctx, tl_dag *dag, const char *name, const char *tag, int ndim,
                             const int64_t *shape, const uint32_t *axis, int nout,
                             const uint32_t *bodies, int reducer, int nreduce,
                             const uint32_t *reduce_vars, uint32_t cond, int *out_tensors) {
  return tl_te_compute(ctx, dag, name, tag, ndim, shape, axis, nout, bodies, reducer,
                       reduce_vars, nreduce, cond, out_tensors);
}

TL_EXPORT int tl_dag_set_attrs(tl_ctx *ctx, tl_dag *dag, int op, const char *json) {
  return tl_te_set_attrs(ctx, dag, op, json);
}
