/*
** dag.c -- what is done with a built compute DAG: copying expressions
** between IRs, extracting the sub-DAG of some outputs (schedules are made on
** an extracted DAG), printing (TVM's ComputeDAG text), the canonical form and
** workload key, FLOP counting, and the public queries.
**
** FLOP counting follows /work/shared/specs/algorithms.md:
**   tl_dag_flop       AutoTVM's compute_flop: start at each output op, add
**                     prod(axis extents) * count(body) and recurse into the
**                     ops of its input tensors without de-duplication (an op
**                     read along two paths counts twice). count(reduction) =
**                     prod(reduce extents) * (count(combiner) + count(source));
**                     + - * / mod floordiv floormod min max == != < <= > >=
**                     && || ! cost 1 plus their operands; select = cond +
**                     max(then, else); cast = its operand; a call (exp, ...,
**                     and if_then_else, a call in TVM) = sum of its args;
**                     constants, vars and loads 0; anything else (shifts,
**                     bit ops) fails. A "FLOP" number in the attrs of a
**                     topi operator's op (attrs with a "pattern") replaces
**                     its count: the Winograd stages declare the direct
**                     convolution's count (0 in the transform stages).
**   tl_dag_flop_ansor the auto-scheduler's FlopEstimator: every compute op
**                     once; a binary op costs 1 only when an operand has the
**                     type code of the op's output dtype (so index math is
**                     free in float ops), ! only when its type has it; a
**                     "FLOP" integer in the op's attributes overrides.
** Both sum all bodies of a multi-output op (AutoTVM itself refuses those)
** and return -1 on failure.
*/
#include "te.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>

/* ---- copying expressions between IRs ------------------------------------------ */

typedef struct {
  tl_ir *dst;
  const tl_ir *src;
  tl_ref *vmap;                   /* src var id -> dst ref */
  int *bmap;                      /* src buf id -> dst buf id */
  tl_ref *memo;                   /* src node -> dst node */
} copy_st;

static tl_ref copy_rec(copy_st *c, tl_ref r);

static int copy_buf(copy_st *c, int b) {
  if (c->bmap[b] >= 0) return c->bmap[b];
  const tl_buffer *sb = tl_ir_buffer(c->src, b);
  tl_ref stack[8];
  tl_ref *shape = sb->ndim <= 8 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)sb->ndim);
  for (int i = 0; i < sb->ndim; i++) shape[i] = copy_rec(c, sb->shape[i]);
  int nb = tl_buffer_new(c->dst, sb->name, sb->dtype, sb->ndim, shape, sb->scope);
  tl_ir_buffer(c->dst, nb)->arg = sb->arg;
  if (shape != stack) free(shape);
  c->bmap[b] = nb;
  return nb;
}

static tl_ref copy_rec(copy_st *c, tl_ref r) {
  if (!r) return r;
  if (c->memo[r]) return c->memo[r];
  const tl_node *nd = tl_ir_node(c->src, r);
  tl_ref out;
  if (nd->op == TL_IR_VAR) {
    uint32_t id = (uint32_t)nd->imm.u;
    if (!c->vmap[id]) {
      const tl_var *v = tl_ir_var(c->src, r);
      c->vmap[id] = tl_var_new(c->dst, v->name, v->type);
    }
    out = c->vmap[id];
  } else {
    uint64_t imm = nd->imm.u;
    int n = nd->nkids;
    tl_ref stack[8];
    tl_ref *k = n <= 8 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)n);
    for (int i = 0; i < n; i++) k[i] = copy_rec(c, tl_ir_kid(c->src, r, i));
    if (nd->op == TL_IR_LOAD || nd->op == TL_IR_STORE || nd->op == TL_IR_ALLOC)
      imm = (uint64_t)copy_buf(c, (int)nd->imm.u);
    else if (nd->op == TL_IR_ATTR)
      imm = tl_ir_intern(c->dst, tl_ir_str(c->src, (uint32_t)nd->imm.u));
    nd = tl_ir_node(c->src, r);
    out = tl_ir_make(c->dst, nd->op, nd->type, imm, k, n);
    if (k != stack) free(k);
  }
  c->memo[r] = out;
  return out;
}

tl_ref tl_ir_copy(tl_ir *dst, const tl_ir *src, tl_ref r, tl_ref *var_map, int *buf_map) {
  copy_st c = {dst, src, var_map, buf_map, tl_calloc((size_t)src->nodes.n, sizeof(tl_ref))};
  if (!var_map) c.vmap = tl_calloc((size_t)src->vars.n + 1, sizeof(tl_ref));
  if (!buf_map) {
    c.bmap = tl_malloc(sizeof(int) * ((size_t)src->bufs.n + 1));
    for (int i = 0; i < src->bufs.n; i++) c.bmap[i] = -1;
  }
  tl_ref out = copy_rec(&c, r);
  free(c.memo);
  if (!var_map) free(c.vmap);
  if (!buf_map) free(c.bmap);
  return out;
}

/* ---- extraction -------------------------------------------------------------------- */

TL_EXPORT int tl_dag_extract(tl_ctx *ctx, const tl_dag *src, const int *outputs, int nout,
                             tl_dag **out, int *tensor_map) {
  *out = NULL;
  if (nout < 1 || !outputs) return tl_err(ctx, TL_E_ARG, "extract: no output tensors");
  for (int i = 0; i < nout; i++)
    if (outputs[i] < 0 || outputs[i] >= src->tensors.n)
      return tl_err(ctx, TL_E_ARG, "extract: no tensor %d in this dag", outputs[i]);
  /* the order: a post-order walk from the outputs, inputs in first-use
  ** order (as TVM's ComputeDAG prints: a placeholder right before its first
  ** reader); iterative, with an explicit stack of (op, next input) */
  int nops = src->ops.n;
  uint8_t *state = tl_calloc((size_t)nops + 1, 1);      /* 0 new, 1 open, 2 done */
  int *order = tl_malloc(sizeof(int) * ((size_t)nops + 1));
  int *stack = tl_malloc(sizeof(int) * 2 * ((size_t)nops + 1));
  int norder = 0;
  for (int i = 0; i < nout; i++) {
    int root = src->tensors.v[outputs[i]].op, sp = 0;
    if (state[root]) continue;
    state[root] = 1;
    stack[0] = root, stack[1] = 0, sp = 1;
    while (sp > 0) {
      int o = stack[2 * (sp - 1)], k = stack[2 * (sp - 1) + 1];
      const tl_te_op *op = &src->ops.v[o];
      if (k < op->ninputs) {
        stack[2 * (sp - 1) + 1] = k + 1;
        int in = src->tensors.v[op->inputs[k]].op;
        if (!state[in]) {
          state[in] = 1;
          stack[2 * sp] = in, stack[2 * sp + 1] = 0, sp++;
        }
      } else {
        state[o] = 2;
        order[norder++] = o;
        sp--;
      }
    }
  }
  free(stack);
  free(state);

  tl_dag *dst = tl_dag_new();
  dst->unique_names = 1;
  int *tmap = tl_malloc(sizeof(int) * ((size_t)src->tensors.n + 1));
  for (int t = 0; t < src->tensors.n; t++) tmap[t] = -1;
  tl_ref *vmap = tl_calloc((size_t)src->ir->vars.n + 1, sizeof(tl_ref));
  int *bmap = tl_malloc(sizeof(int) * ((size_t)src->ir->bufs.n + 1));
  for (int b = 0; b < src->ir->bufs.n; b++) bmap[b] = -1;
  int *rmap = tl_malloc(sizeof(int) * ((size_t)src->reducers.n + 1));
  for (int r = 0; r < src->reducers.n; r++) rmap[r] = -1;
  TL_VEC(tl_ref) axis = {0};
  TL_VEC(tl_ref) rvars = {0};
  TL_VEC(tl_ref) bodies = {0};
  TL_VEC(int) outs = {0};
  int rc = TL_OK;

  for (int oi = 0; oi < norder && rc == TL_OK; oi++) {
    const tl_te_op *op = &src->ops.v[order[oi]];
    if (op->kind == TL_OP_PLACEHOLDER) {
      int t;
      rc = tl_te_placeholder(ctx, dst, op->name, op->ndim, op->shape, op->dtype, &t);
      if (rc) break;
      tmap[op->out_tensors[0]] = t;
      bmap[src->tensors.v[op->out_tensors[0]].buf] = dst->tensors.v[t].buf;
      continue;
    }
    axis.n = rvars.n = bodies.n = outs.n = 0;
    for (int i = 0; i < op->ndim; i++) {
      const tl_ref v = op->axis[i].var;
      tl_ref nv = tl_te_axis_var(dst, tl_ir_var(src->ir, v)->name);
      vmap[src->ir->nodes.v[v].imm.u] = nv;
      TL_VEC_PUSH(axis, nv);
    }
    for (int i = 0; i < op->nreduce; i++) {
      const tl_ref v = op->reduce_axis[i].var;
      tl_ref nv = tl_te_reduce_axis(dst, tl_ir_var(src->ir, v)->name, op->reduce_axis[i].extent);
      vmap[src->ir->nodes.v[v].imm.u] = nv;
      TL_VEC_PUSH(rvars, nv);
    }
    for (int k = 0; k < op->nout; k++)
      TL_VEC_PUSH(bodies, tl_ir_copy(dst->ir, src->ir, op->body[k], vmap, bmap));
    tl_ref cond = op->red_cond ? tl_ir_copy(dst->ir, src->ir, op->red_cond, vmap, bmap) : TL_NOREF;
    int reducer = op->reducer;
    if (reducer == TL_RED_CUSTOM) {
      int k = 0;
      while (k < src->reducers.n && !(src->reducers.v[k].lhs == op->comb_lhs &&
                                      src->reducers.v[k].combiner == op->combiner))
        k++;
      tl_assert(k < src->reducers.n);
      if (rmap[k] < 0) {
        const tl_te_reducer *r = &src->reducers.v[k];
        tl_ref l = tl_ir_copy(dst->ir, src->ir, r->lhs, vmap, bmap);
        tl_ref rr = tl_ir_copy(dst->ir, src->ir, r->rhs, vmap, bmap);
        tl_ref cb = tl_ir_copy(dst->ir, src->ir, r->combiner, vmap, bmap);
        tl_ref id = tl_ir_copy(dst->ir, src->ir, r->identity, vmap, bmap);
        rc = tl_te_comm_reducer(ctx, dst, r->name, l, rr, cb, id, &rmap[k]);
        if (rc) break;
      }
      reducer = rmap[k];
    }
    TL_VEC_RESERVE(outs, op->nout);
    rc = tl_te_compute(ctx, dst, op->name, op->tag, op->ndim, op->shape, axis.v, op->nout,
                       bodies.v, reducer, rvars.v, op->nreduce, cond, outs.v);
    if (rc) break;
    for (int k = 0; k < op->nout; k++) {
      tmap[op->out_tensors[k]] = outs.v[k];
      bmap[src->tensors.v[op->out_tensors[k]].buf] = dst->tensors.v[outs.v[k]].buf;
    }
    if (op->attrs_json) rc = tl_te_set_attrs(ctx, dst, dst->ops.n - 1, op->attrs_json);
  }
  if (rc == TL_OK) {
    for (int i = 0; i < nout; i++) {
      int t = tmap[outputs[i]], dup = 0;
      for (int j = 0; j < dst->outputs.n; j++) dup |= dst->outputs.v[j] == t;
      if (!dup) TL_VEC_PUSH(dst->outputs, t);
    }
    if (tensor_map) memcpy(tensor_map, tmap, sizeof(int) * (size_t)src->tensors.n);
    *out = dst;
  } else {
    tl_err_prefix(ctx, "extract: ");
    tl_dag_free(dst);
  }
  TL_VEC_FREE(axis);
  TL_VEC_FREE(rvars);
  TL_VEC_FREE(bodies);
  TL_VEC_FREE(outs);
  free(order);
  free(tmap);
  free(vmap);
  free(bmap);
  free(rmap);
  return rc;
}

/* ---- printing ------------------------------------------------------------------------
** Expressions print as TVM does: binary arithmetic fully parenthesized,
** min/max/floordiv/... as calls, int32 constants bare and other integer
** constants with a type prefix, float32 constants with an 'f' suffix. In
** canonical mode (vc != NULL) vars print by position (vc: var id -> code)
** and tensors as T<id>. */

enum { VC_AXIS = 1, VC_REDUCE = 2, VC_LHS = 3, VC_RHS = 4 };
#define VC(kind, k) (((kind) << 24) | ((k) + 1))

static void print_float(tl_buf *b, double v, tl_type t) {
  char s[48];
  if (isnan(v)) snprintf(s, sizeof s, "nan");
  else if (isinf(v)) snprintf(s, sizeof s, v < 0 ? "-inf" : "inf");
  else {
    for (int p = 6; p <= 17; p++) {
      snprintf(s, sizeof s, "%.*g", p, v);
      double x = strtod(s, NULL);
      if (t.bits == 32 ? (float)x == (float)v : x == v) break;
    }
  }
  tl_buf_puts(b, s);
  if (t.bits == 32) tl_buf_puts(b, "f");
  else if (t.bits == 16) tl_buf_puts(b, "h");
}

static void pexpr(const tl_dag *dag, tl_ref e, tl_buf *b, const int *vc) {
  const tl_ir *ir = dag->ir;
  const tl_node *n = tl_ir_node(ir, e);
  char tb[24];
  const char *infix = NULL, *fn = NULL;
  if (!e) {
    tl_buf_puts(b, "<none>");
    return;
  }
  switch (n->op) {
  case TL_IR_INT:
    if (tl_type_eq(n->type, TL_T_I32)) tl_buf_printf(b, "%lld", (long long)n->imm.i);
    else tl_buf_printf(b, "(%s)%lld", tl_type_str(n->type, tb), (long long)n->imm.i);
    return;
  case TL_IR_FLOAT: print_float(b, n->imm.f, n->type); return;
  case TL_IR_VAR:
    if (vc) {
      int c = vc[n->imm.u], kind = c >> 24, k = (c & 0xffffff) - 1;
      if (kind == VC_AXIS) tl_buf_printf(b, "i%d", k);
      else if (kind == VC_REDUCE) tl_buf_printf(b, "r%d", k);
      else if (kind == VC_LHS) tl_buf_puts(b, "x");
      else if (kind == VC_RHS) tl_buf_puts(b, "y");
      else tl_buf_puts(b, "v?");
    } else {
      tl_buf_puts(b, tl_ir_var(ir, e)->name);
    }
    return;
  case TL_IR_ADD: infix = " + "; break;
  case TL_IR_SUB: infix = " - "; break;
  case TL_IR_MUL: infix = "*"; break;
  case TL_IR_DIV: infix = "/"; break;
  case TL_IR_SHL: infix = " << "; break;
  case TL_IR_SHR: infix = " >> "; break;
  case TL_IR_BITAND: infix = " & "; break;
  case TL_IR_BITOR: infix = " | "; break;
  case TL_IR_BITXOR: infix = " ^ "; break;
  case TL_IR_EQ: infix = " == "; break;
  case TL_IR_NE: infix = " != "; break;
  case TL_IR_LT: infix = " < "; break;
  case TL_IR_LE: infix = " <= "; break;
  case TL_IR_GT: infix = " > "; break;
  case TL_IR_GE: infix = " >= "; break;
  case TL_IR_AND: infix = " && "; break;
  case TL_IR_OR: infix = " || "; break;
  case TL_IR_FLOORDIV: fn = "floordiv"; break;
  case TL_IR_FLOORMOD: fn = "floormod"; break;
  case TL_IR_TRUNCDIV: fn = "truncdiv"; break;
  case TL_IR_TRUNCMOD: fn = "truncmod"; break;
  case TL_IR_MIN: fn = "min"; break;
  case TL_IR_MAX: fn = "max"; break;
  case TL_IR_SELECT: fn = "select"; break;
  case TL_IR_IF_THEN_ELSE: fn = "tir.if_then_else"; break;
  case TL_IR_NOT:
    tl_buf_puts(b, "!");
    pexpr(dag, tl_ir_kid(ir, e, 0), b, vc);
    return;
  case TL_IR_CAST:
    tl_buf_printf(b, "%s(", tl_type_str(n->type, tb));
    pexpr(dag, tl_ir_kid(ir, e, 0), b, vc);
    tl_buf_puts(b, ")");
    return;
  case TL_IR_LOAD: {
    int t = vc ? tl_dag_buf_tensor(dag, (int)n->imm.u) : -1;
    if (t >= 0) tl_buf_printf(b, "T%d[", t);
    else tl_buf_printf(b, "%s[", tl_ir_buffer(ir, (int)n->imm.u)->name);
    for (int i = 0; i < n->nkids; i++) {
      if (i) tl_buf_puts(b, ", ");
      pexpr(dag, tl_ir_kid(ir, e, i), b, vc);
    }
    tl_buf_puts(b, "]");
    return;
  }
  case TL_IR_CALL:
    tl_buf_printf(b, "tir.%s", n->imm.u < TL_INTRIN__MAX ? tl_ir_intrinname[n->imm.u] : "?");
    fn = "";
    break;
  default:
    fn = tl_ir_opname[n->op];
    break;
  }
  if (infix) {
    tl_buf_puts(b, "(");
    pexpr(dag, tl_ir_kid(ir, e, 0), b, vc);
    tl_buf_puts(b, infix);
    pexpr(dag, tl_ir_kid(ir, e, 1), b, vc);
    tl_buf_puts(b, ")");
    return;
  }
  tl_buf_printf(b, "%s(", fn);
  for (int i = 0; i < n->nkids; i++) {
    if (i) tl_buf_puts(b, ", ");
    pexpr(dag, tl_ir_kid(ir, e, i), b, vc);
  }
  tl_buf_puts(b, ")");
}

void tl_te_print_expr(const tl_dag *dag, tl_ref e, tl_buf *out) { pexpr(dag, e, out, NULL); }

static const char *assign_str(const tl_te_op *op, char *buf, size_t n) {
  switch (op->reducer) {
  case TL_RED_NONE: return " = ";
  case TL_RED_SUM: return " += ";
  case TL_RED_PROD: return " *= ";
  case TL_RED_MAX: return " max= ";
  case TL_RED_MIN: return " min= ";
  default: snprintf(buf, n, " %s= ", op->red_name ? op->red_name : "reduce"); return buf;
  }
}

char *tl_dag_print(const tl_dag *dag) {
  tl_buf b = {0};
  char ab[160];
  for (int o = 0; o < dag->ops.n; o++) {
    const tl_te_op *op = &dag->ops.v[o];
    if (op->kind == TL_OP_PLACEHOLDER) {
      tl_buf_printf(&b, "%s = PLACEHOLDER [", op->name);
      for (int i = 0; i < op->ndim; i++) tl_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)op->shape[i]);
      tl_buf_puts(&b, "]\n");
      continue;
    }
    for (int k = 0; k < op->nout; k++) {
      tl_buf_puts(&b, op->name);
      if (op->nout > 1) tl_buf_printf(&b, ".v%d", k);
      tl_buf_puts(&b, "(");
      for (int i = 0; i < op->ndim; i++)
        tl_buf_printf(&b, "%s%s", i ? ", " : "", tl_ir_var(dag->ir, op->axis[i].var)->name);
      tl_buf_puts(&b, ")");
      tl_buf_puts(&b, assign_str(op, ab, sizeof ab));
      pexpr(dag, op->body[k], &b, NULL);
      if (op->red_cond) {
        tl_buf_puts(&b, " where ");
        pexpr(dag, op->red_cond, &b, NULL);
      }
      tl_buf_puts(&b, "\n");
    }
  }
  return tl_buf_take(&b);
}

char *tl_dag_canonical(const tl_dag *dag) {
  tl_buf b = {0};
  char tb[24];
  int *vc = tl_calloc((size_t)dag->ir->vars.n + 1, sizeof(int));
  for (int o = 0; o < dag->ops.n; o++) {
    const tl_te_op *op = &dag->ops.v[o];
    for (int k = 0; k < op->nout; k++) tl_buf_printf(&b, "%sT%d", k ? "," : "", op->out_tensors[k]);
    tl_buf_printf(&b, " = %s %s [", op->kind == TL_OP_PLACEHOLDER ? "placeholder" : "compute",
                  tl_type_str(op->dtype, tb));
    for (int i = 0; i < op->ndim; i++) tl_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)op->shape[i]);
    tl_buf_puts(&b, "]");
    if (op->kind == TL_OP_PLACEHOLDER) {
      tl_buf_puts(&b, "\n");
      continue;
    }
    memset(vc, 0, sizeof(int) * (size_t)dag->ir->vars.n);
    for (int i = 0; i < op->ndim; i++) vc[dag->ir->nodes.v[op->axis[i].var].imm.u] = VC(VC_AXIS, i);
    for (int i = 0; i < op->nreduce; i++)
      vc[dag->ir->nodes.v[op->reduce_axis[i].var].imm.u] = VC(VC_REDUCE, i);
    if (op->reducer != TL_RED_NONE) {
      static const char *const rn[] = {"", "sum", "max", "min", "prod"};
      tl_buf_printf(&b, " reduce %s[", op->reducer == TL_RED_CUSTOM ? "custom" : rn[op->reducer]);
      for (int i = 0; i < op->nreduce; i++)
        tl_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)op->reduce_axis[i].extent);
      tl_buf_puts(&b, "]");
      if (op->reducer == TL_RED_CUSTOM) {
        vc[dag->ir->nodes.v[op->comb_lhs].imm.u] = VC(VC_LHS, 0);
        vc[dag->ir->nodes.v[op->comb_rhs].imm.u] = VC(VC_RHS, 0);
        tl_buf_puts(&b, " combiner ");
        pexpr(dag, op->combiner, &b, vc);
        tl_buf_puts(&b, " identity ");
        pexpr(dag, op->identity, &b, vc);
      }
      if (op->red_cond) {
        tl_buf_puts(&b, " where ");
        pexpr(dag, op->red_cond, &b, vc);
      }
    }
    for (int k = 0; k < op->nout; k++) {
      tl_buf_puts(&b, k ? " ; " : " : ");
      pexpr(dag, op->body[k], &b, vc);
    }
    tl_buf_puts(&b, "\n");
  }
  free(vc);
  return tl_buf_take(&b);
}

static void put_shape(tl_buf *b, const tl_te_op *op) {
  tl_buf_puts(b, ", [");
  for (int i = 0; i < op->ndim; i++) tl_buf_printf(b, "%s%lld", i ? ", " : "", (long long)op->shape[i]);
  tl_buf_puts(b, "]");
}

char *tl_dag_workload_key(const tl_dag *dag) {
  char *text = tl_dag_canonical(dag);
  size_t n = strlen(text);
  uint64_t h1 = tl_hash_bytes(text, n, 0x746c5f7465686173ull);
  uint64_t h2 = tl_hash_mix(tl_hash_bytes(text, n, 0x9ae16a3b2f90404full), h1);
  free(text);
  tl_buf b = {0};
  tl_buf_printf(&b, "[\"%016llx%016llx\"", (unsigned long long)h1, (unsigned long long)h2);
  for (int o = 0; o < dag->ops.n; o++)
    if (dag->ops.v[o].kind == TL_OP_PLACEHOLDER) put_shape(&b, &dag->ops.v[o]);
  int *outs = tl_malloc(sizeof(int) * ((size_t)dag->tensors.n + 1));
  int nout = tl_dag_output_list(dag, outs);
  for (int i = 0; i < nout; i++) put_shape(&b, &dag->ops.v[dag->tensors.v[outs[i]].op]);
  free(outs);
  tl_buf_puts(&b, "]");
  return tl_buf_take(&b);
}

/* ---- FLOPs ------------------------------------------------------------------------------- */

typedef struct {
  int ansor;                      /* FlopEstimator rules */
  int code;                       /* type code of the op's output (ansor) */
  int fail;
} flop_st;

static double count(const tl_ir *ir, tl_ref e, flop_st *st) {
  const tl_node *n = tl_ir_node(ir, e);
  switch (n->op) {
  case TL_IR_INT: case TL_IR_FLOAT: case TL_IR_VAR: case TL_IR_LOAD:
    return 0;
  case TL_IR_ADD: case TL_IR_SUB: case TL_IR_MUL: case TL_IR_DIV: case TL_IR_TRUNCDIV:
  case TL_IR_TRUNCMOD: case TL_IR_FLOORDIV: case TL_IR_FLOORMOD: case TL_IR_MIN: case TL_IR_MAX:
  case TL_IR_EQ: case TL_IR_NE: case TL_IR_LT: case TL_IR_LE: case TL_IR_GT: case TL_IR_GE:
  case TL_IR_AND: case TL_IR_OR: {
    tl_ref a = tl_ir_kid(ir, e, 0), b = tl_ir_kid(ir, e, 1);
    double base = 1;
    if (st->ansor && tl_ir_type(ir, a).code != st->code && tl_ir_type(ir, b).code != st->code)
      base = 0;
    return base + count(ir, a, st) + count(ir, b, st);
  }
  case TL_IR_NOT: {
    double base = !st->ansor || n->type.code == st->code ? 1 : 0;
    return base + count(ir, tl_ir_kid(ir, e, 0), st);
  }
  case TL_IR_SELECT: {
    double c = count(ir, tl_ir_kid(ir, e, 0), st);
    double a = count(ir, tl_ir_kid(ir, e, 1), st), b = count(ir, tl_ir_kid(ir, e, 2), st);
    return c + (a > b ? a : b);
  }
  case TL_IR_CAST: return count(ir, tl_ir_kid(ir, e, 0), st);
  case TL_IR_CALL:
  case TL_IR_IF_THEN_ELSE: {
    double s = 0;
    for (int i = 0; i < n->nkids; i++) s += count(ir, tl_ir_kid(ir, e, i), st);
    return s;
  }
  default:
    st->fail = 1;
    return 0;
  }
}

/* FLOPs of one op (0 for placeholders). */
static double op_flop(const tl_dag *dag, const tl_te_op *op, flop_st *st) {
  if (op->kind != TL_OP_COMPUTE) return 0;
  if (op->attrs_json && strstr(op->attrs_json, "\"FLOP\"")) {
    json_t *j = json_loads(op->attrs_json, 0, NULL);
    json_t *f = j ? json_object_get(j, "FLOP") : NULL;
    /* AutoTVM: only a topi operator's count (one with a "pattern") */
    if (f && json_is_number(f) && (st->ansor || json_object_get(j, "pattern"))) {
      double v = json_number_value(f);
      json_decref(j);
      return v;
    }
    json_decref(j);
  }
  st->code = op->dtype.code;
  double elems = 1;
  for (int i = 0; i < op->ndim; i++) elems *= (double)op->shape[i];
  double per = 0;
  for (int k = 0; k < op->nout; k++) {
    if (op->reducer == TL_RED_NONE) {
      per += count(dag->ir, op->body[k], st);
      continue;
    }
    double iters = 1;
    for (int i = 0; i < op->nreduce; i++) iters *= (double)op->reduce_axis[i].extent;
    double comb = op->reducer == TL_RED_CUSTOM ? count(dag->ir, op->combiner, st) : 1;
    per += iters * (comb + count(dag->ir, op->body[k], st));
  }
  return elems * per;
}

/* AutoTVM: the op plus, recursively, the ops of its input tensors. */
static double flop_rec(const tl_dag *dag, int o, double *memo, uint8_t *done, flop_st *st) {
  if (done[o]) return memo[o];
  const tl_te_op *op = &dag->ops.v[o];
  double s = op_flop(dag, op, st);
  for (int k = 0; k < op->ninputs; k++)
    s += flop_rec(dag, dag->tensors.v[op->inputs[k]].op, memo, done, st);
  done[o] = 1;
  memo[o] = s;
  return s;
}

TL_EXPORT double tl_dag_flop(const tl_dag *dag) {
  flop_st st = {0, 0, 0};
  int nt = dag->tensors.n, no = dag->ops.n;
  int *outs = tl_malloc(sizeof(int) * ((size_t)nt + 1));
  double *memo = tl_calloc((size_t)no + 1, sizeof(double));
  uint8_t *done = tl_calloc((size_t)no + 1, 1), *seen = tl_calloc((size_t)no + 1, 1);
  int n = tl_dag_output_list(dag, outs);
  double total = 0;
  for (int i = 0; i < n; i++) {
    int o = dag->tensors.v[outs[i]].op;
    if (seen[o]) continue;          /* output ops, not output tensors */
    seen[o] = 1;
    total += flop_rec(dag, o, memo, done, &st);
  }
  free(outs);
  free(memo);
  free(done);
  free(seen);
  return st.fail ? -1 : total;
}

TL_EXPORT double tl_dag_flop_ansor(const tl_dag *dag) {
  flop_st st = {1, 0, 0};
  double total = 0;
  for (int o = 0; o < dag->ops.n; o++) total += op_flop(dag, &dag->ops.v[o], &st);
  return st.fail ? -1 : total;
}

/* ---- public queries ------------------------------------------------------------------------ */

static int bad_op(const tl_dag *dag, int op) { return !dag || op < 0 || op >= dag->ops.n; }
static int bad_tensor(const tl_dag *dag, int t) { return !dag || t < 0 || t >= dag->tensors.n; }
static int bad_ref(const tl_dag *dag, uint32_t e) {
  return !dag || e == 0 || e >= (uint32_t)dag->ir->nodes.n;
}

TL_EXPORT int tl_dag_num_ops(const tl_dag *dag) { return dag ? dag->ops.n : 0; }
TL_EXPORT int tl_dag_num_tensors(const tl_dag *dag) { return dag ? dag->tensors.n : 0; }
TL_EXPORT int tl_dag_num_outputs(const tl_dag *dag) { return dag ? tl_dag_output_list(dag, NULL) : 0; }

TL_EXPORT int tl_dag_output(const tl_dag *dag, int i) {
  if (!dag) return -1;
  int n = tl_dag_output_list(dag, NULL);
  if (i < 0 || i >= n) return -1;
  int *outs = tl_malloc(sizeof(int) * (size_t)n);
  tl_dag_output_list(dag, outs);
  int t = outs[i];
  free(outs);
  return t;
}

TL_EXPORT int tl_dag_tensor_op(const tl_dag *dag, int t) {
  return bad_tensor(dag, t) ? -1 : dag->tensors.v[t].op;
}
TL_EXPORT int tl_dag_tensor_index(const tl_dag *dag, int t) {
  return bad_tensor(dag, t) ? -1 : dag->tensors.v[t].out_index;
}
TL_EXPORT int tl_dag_tensor_ndim(const tl_dag *dag, int t) {
  return bad_tensor(dag, t) ? -1 : dag->ops.v[dag->tensors.v[t].op].ndim;
}
TL_EXPORT const int64_t *tl_dag_tensor_shape(const tl_dag *dag, int t) {
  return bad_tensor(dag, t) ? NULL : dag->ops.v[dag->tensors.v[t].op].shape;
}
TL_EXPORT int tl_dag_tensor_dtype(const tl_dag *dag, int t) {
  return bad_tensor(dag, t) ? -1 : tl_type_to_dtype(tl_dag_tensor_buf(dag, t)->dtype);
}
TL_EXPORT const char *tl_dag_tensor_name(const tl_dag *dag, int t) {
  return bad_tensor(dag, t) ? NULL : dag->ops.v[dag->tensors.v[t].op].name;
}

TL_EXPORT int tl_dag_op_kind(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? -1 : dag->ops.v[op].kind;
}
TL_EXPORT const char *tl_dag_op_name(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? NULL : dag->ops.v[op].name;
}
TL_EXPORT const char *tl_dag_op_tag(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? NULL : dag->ops.v[op].tag;
}
TL_EXPORT int tl_dag_op_ndim(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? -1 : dag->ops.v[op].ndim;
}
TL_EXPORT uint32_t tl_dag_op_axis(const tl_dag *dag, int op, int i) {
  if (bad_op(dag, op) || dag->ops.v[op].kind != TL_OP_COMPUTE || i < 0 || i >= dag->ops.v[op].ndim)
    return 0;
  return dag->ops.v[op].axis[i].var;
}
TL_EXPORT int64_t tl_dag_op_axis_extent(const tl_dag *dag, int op, int i) {
  if (bad_op(dag, op) || i < 0 || i >= dag->ops.v[op].ndim) return -1;
  return dag->ops.v[op].shape[i];
}
TL_EXPORT int tl_dag_op_nreduce(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? -1 : dag->ops.v[op].nreduce;
}
TL_EXPORT uint32_t tl_dag_op_reduce_axis(const tl_dag *dag, int op, int i) {
  if (bad_op(dag, op) || i < 0 || i >= dag->ops.v[op].nreduce) return 0;
  return dag->ops.v[op].reduce_axis[i].var;
}
TL_EXPORT int64_t tl_dag_op_reduce_extent(const tl_dag *dag, int op, int i) {
  if (bad_op(dag, op) || i < 0 || i >= dag->ops.v[op].nreduce) return -1;
  return dag->ops.v[op].reduce_axis[i].extent;
}
TL_EXPORT int tl_dag_op_reducer(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? -1 : dag->ops.v[op].reducer;
}
TL_EXPORT int tl_dag_op_nout(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? -1 : dag->ops.v[op].nout;
}
TL_EXPORT int tl_dag_op_output(const tl_dag *dag, int op, int i) {
  if (bad_op(dag, op) || i < 0 || i >= dag->ops.v[op].nout) return -1;
  return dag->ops.v[op].out_tensors[i];
}
TL_EXPORT int tl_dag_op_ninputs(const tl_dag *dag, int op) {
  return bad_op(dag, op) ? -1 : dag->ops.v[op].ninputs;
}
TL_EXPORT int tl_dag_op_input(const tl_dag *dag, int op, int i) {
  if (bad_op(dag, op) || i < 0 || i >= dag->ops.v[op].ninputs) return -1;
  return dag->ops.v[op].inputs[i];
}

TL_EXPORT int tl_dag_expr_dtype(const tl_dag *dag, uint32_t e) {
  return bad_ref(dag, e) ? -1 : tl_type_to_dtype(tl_ir_type(dag->ir, e));
}
TL_EXPORT int tl_dag_expr_is_const(const tl_dag *dag, uint32_t e, double *value) {
  if (bad_ref(dag, e)) return 0;
  int64_t i;
  double f;
  if (tl_ir_is_int(dag->ir, e, &i)) f = (double)i;
  else if (!tl_ir_is_float(dag->ir, e, &f)) return 0;
  if (value) *value = f;
  return 1;
}
TL_EXPORT const char *tl_dag_var_name(const tl_dag *dag, uint32_t var) {
  if (bad_ref(dag, var) || tl_ir_op(dag->ir, var) != TL_IR_VAR) return NULL;
  return tl_ir_var(dag->ir, var)->name;
}

/* The scratch buffer holds the last returned text. */
static const char *scratch_set(tl_dag *dag, char *s) {
  tl_buf_free(&dag->scratch);
  tl_buf_puts(&dag->scratch, s);
  free(s);
  return dag->scratch.s ? dag->scratch.s : "";
}

TL_EXPORT const char *tl_dag_expr_text(tl_dag *dag, uint32_t e) {
  if (bad_ref(dag, e)) return "<invalid>";
  tl_buf b = {0};
  pexpr(dag, e, &b, NULL);
  return scratch_set(dag, tl_buf_take(&b));
}
TL_EXPORT const char *tl_dag_text(tl_dag *dag) { return scratch_set(dag, tl_dag_print(dag)); }
TL_EXPORT const char *tl_dag_key_text(tl_dag *dag) {
  return scratch_set(dag, tl_dag_workload_key(dag));
}
