/*
** verify.c -- structural and type checks of a loop-IR tree.
**
** Lowering, scheduling passes and the simplifier build IR with typed
** constructors that assert little in release builds; the verifier is the
** net run after each pass (and by the tests) before code generation trusts
** the tree. It checks, for every node reachable from the root:
**
**   - refs are in range, fixed-arity ops have their operand count;
**   - statements sit in statement positions (FOR/IF/LET_STMT/ALLOC/ATTR
**     bodies, SEQ items) and expressions in expression positions;
**   - types: binary arithmetic operands and result share one type, integer
**     ops (floordiv, shifts, bit ops) on integers and DIV on floats,
**     comparisons yield bool of the operands' lanes, logic on bools, select
**     branches agree, ramps/broadcasts have consistent lanes;
**   - variables: FOR binds a scalar signed-integer VAR (TL_T_INDEX in
**     practice) with min/extent of that type; every use is under its FOR,
**     LET or LET_STMT or listed in free_vars; a binder never rebinds a var
**     that is already in scope (sibling scopes may reuse a var);
**   - buffers: ids are valid, loads/stores carry ndim indices or exactly one
**     (flattened), integer-typed, element type matches the buffer;
**   - intrinsic calls have the right argument count.
**
** The tree is a DAG (hash-consing shares equal subtrees); a node checked
** OK under one set of variables in scope is not checked again under that
** same set, so the walk is linear in the DAG for real programs. The first
** problem found is reported as TL_E_INTERNAL with the problem named and
** the offending node printed on one line (cut to ~200 characters).
*/
#include "ir.h"

#include <inttypes.h>
#include <stdio.h>

typedef struct {
  tl_ctx *ctx;
  const tl_ir *ir;
  uint8_t *inscope;               /* per var id: bound here */
  uint32_t *memo;                 /* per node: scope id it was checked OK in */
  uint32_t scope, nscopes;        /* current scope id; ids handed out */
  int err;
} vf_st;

#define VF_MSG_MAX 200

static int fail(vf_st *st, tl_ref node, const char *fmt, ...) TL_PRINTF(3, 4);
static int fail(vf_st *st, tl_ref node, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (node && node < (tl_ref)st->ir->nodes.n) {
    char *txt = tl_ir_print_short(st->ir, node, VF_MSG_MAX);
    st->err = tl_err(st->ctx, TL_E_INTERNAL, "ir verify: %s: %s", what, txt);
    free(txt);
  } else {
    st->err = tl_err(st->ctx, TL_E_INTERNAL, "ir verify: %s", what);
  }
  return st->err;
}

static const char *tstr(tl_type t, char *buf) { return tl_type_str(t, buf); }

static int is_sint(tl_type t) { return t.code == TL_TC_INT; }
static int is_intlike(tl_type t) { return tl_type_is_int(t) && !tl_type_is_bool(t); }
static int is_void(tl_type t) { return t.code == TL_TC_VOID; }

static int vf_expr(vf_st *st, tl_ref e);
static int vf_stmt(vf_st *st, tl_ref s);

static int check_ref(vf_st *st, tl_ref parent, tl_ref r, const char *what) {
  if (!r) return fail(st, parent, "missing %s", what);
  if (r >= (tl_ref)st->ir->nodes.n) return fail(st, parent, "%s is a bad ref %u", what, r);
  if (st->ir->nodes.v[r].op >= TL_IR__MAX) return fail(st, parent, "%s has bad op", what);
  return 0;
}

static int want_expr(vf_st *st, tl_ref parent, tl_ref r, const char *what) {
  if (check_ref(st, parent, r, what)) return st->err;
  if (!(tl_ir_opflags[st->ir->nodes.v[r].op] & TL_IRF_E))
    return fail(st, r, "statement where an expression belongs (%s of %s)", what,
                tl_ir_opname[st->ir->nodes.v[parent].op]);
  return vf_expr(st, r);
}

static int want_stmt(vf_st *st, tl_ref parent, tl_ref r, const char *what) {
  if (check_ref(st, parent, r, what)) return st->err;
  if (!(tl_ir_opflags[st->ir->nodes.v[r].op] & TL_IRF_S))
    return fail(st, r, "expression where a statement belongs (%s of %s)", what,
                tl_ir_opname[st->ir->nodes.v[parent].op]);
  return vf_stmt(st, r);
}

/* A binder's variable: a VAR node, not bound already. */
static int check_binder(vf_st *st, tl_ref node, tl_ref var) {
  if (check_ref(st, node, var, "bound variable")) return st->err;
  const tl_node *v = &st->ir->nodes.v[var];
  if (v->op != TL_IR_VAR) return fail(st, node, "%s binds a non-variable", tl_ir_opname[st->ir->nodes.v[node].op]);
  if (v->imm.u >= (uint64_t)st->ir->vars.n) return fail(st, node, "bad variable id %" PRIu64, v->imm.u);
  if (st->inscope[v->imm.u])
    return fail(st, node, "variable '%s' redefined in a nested scope", st->ir->vars.v[v->imm.u].name);
  return 0;
}

/* Check body (statement or expression) with var in scope. */
static int with_var(vf_st *st, tl_ref node, tl_ref var, tl_ref body, int stmt, const char *what) {
  uint64_t id = st->ir->nodes.v[var].imm.u;
  uint32_t saved = st->scope;
  st->scope = ++st->nscopes;
  st->inscope[id] = 1;
  int rc = stmt ? want_stmt(st, node, body, what) : want_expr(st, node, body, what);
  st->inscope[id] = 0;
  st->scope = saved;
  return rc;
}

static int check_buffer(vf_st *st, tl_ref node, uint64_t buf, int nidx, const tl_ref *idx,
                        tl_type elem) {
  const tl_ir *ir = st->ir;
  char b1[24], b2[24];
  if (buf >= (uint64_t)ir->bufs.n) return fail(st, node, "unknown buffer id %" PRIu64, buf);
  const tl_buffer *b = &ir->bufs.v[buf];
  if (nidx != b->ndim && nidx != 1)
    return fail(st, node, "buffer '%s' has %d dimensions but %d indices", b->name, b->ndim, nidx);
  if (!tl_type_eq(tl_type_scalar(elem), tl_type_scalar(b->dtype)))
    return fail(st, node, "element type %s does not match buffer '%s' of %s", tstr(elem, b1),
                b->name, tstr(b->dtype, b2));
  for (int i = 0; i < nidx; i++) {
    if (want_expr(st, node, idx[i], "index")) return st->err;
    tl_type it = ir->nodes.v[idx[i]].type;
    if (!is_intlike(it)) return fail(st, node, "index %d is %s, not an integer", i, tstr(it, b1));
    if (it.lanes != 1 && it.lanes != elem.lanes)
      return fail(st, node, "index %d has %d lanes for a %d-lane access", i, it.lanes, elem.lanes);
  }
  return 0;
}

static int vf_expr(vf_st *st, tl_ref e) {
  const tl_ir *ir = st->ir;
  if (st->memo[e] == st->scope) return 0;
  const tl_node *n = &ir->nodes.v[e];
  const tl_ref *k = ir->kids.v + n->kids;
  int op = n->op, nk = n->nkids;
  tl_type t = n->type;
  char b1[24], b2[24];
  if (tl_ir_opnkids[op] >= 0 && nk != tl_ir_opnkids[op])
    return fail(st, e, "%s has %d operands, not %d", tl_ir_opname[op], nk, tl_ir_opnkids[op]);
  if (is_void(t)) return fail(st, e, "expression of type void");
  if (t.lanes == 0) return fail(st, e, "type with 0 lanes");
  /* operands first: problems are reported at the innermost node */
  if (op != TL_IR_LET)
    for (int i = 0; i < nk; i++)
      if (want_expr(st, e, k[i], "operand")) return st->err;

  uint8_t fl = tl_ir_opflags[op];
  switch (op) {
  case TL_IR_INT:
    if (!tl_type_is_int(t) || t.lanes != 1) return fail(st, e, "integer immediate of type %s", tstr(t, b1));
    break;
  case TL_IR_FLOAT:
    if (!tl_type_is_float(t) || t.lanes != 1) return fail(st, e, "float immediate of type %s", tstr(t, b1));
    break;
  case TL_IR_VAR: {
    if (n->imm.u >= (uint64_t)ir->vars.n) return fail(st, e, "bad variable id %" PRIu64, n->imm.u);
    const tl_var *v = &ir->vars.v[n->imm.u];
    if (!tl_type_eq(v->type, t)) return fail(st, e, "variable node type differs from the variable's");
    if (!st->inscope[n->imm.u]) return fail(st, e, "variable '%s' used outside its scope", v->name);
    break;
  }
  case TL_IR_NOT: {
    tl_type a = ir->nodes.v[k[0]].type;
    if (!tl_type_is_bool(a) || !tl_type_eq(a, t)) return fail(st, e, "! of a non-bool %s", tstr(a, b1));
    break;
  }
  case TL_IR_SELECT:
  case TL_IR_IF_THEN_ELSE: {
    tl_type c = ir->nodes.v[k[0]].type, a = ir->nodes.v[k[1]].type, b = ir->nodes.v[k[2]].type;
    if (!tl_type_is_bool(c)) return fail(st, e, "condition of type %s", tstr(c, b1));
    if (c.lanes != 1 && c.lanes != t.lanes) return fail(st, e, "condition lanes do not match");
    if (!tl_type_eq(a, t) || !tl_type_eq(b, t))
      return fail(st, e, "branches of types %s and %s", tstr(a, b1), tstr(b, b2));
    break;
  }
  case TL_IR_CAST: {
    tl_type a = ir->nodes.v[k[0]].type;
    if (a.lanes != t.lanes) return fail(st, e, "cast changes lanes %d -> %d", a.lanes, t.lanes);
    break;
  }
  case TL_IR_LOAD:
    if (check_buffer(st, e, n->imm.u, nk, k, t)) return st->err;
    break;
  case TL_IR_CALL:
    if (n->imm.u >= TL_INTRIN__MAX) return fail(st, e, "unknown intrinsic %" PRIu64, n->imm.u);
    if (nk != tl_ir_intrinnargs[n->imm.u])
      return fail(st, e, "%s takes %d arguments, not %d", tl_ir_intrinname[n->imm.u],
                  tl_ir_intrinnargs[n->imm.u], nk);
    break;
  case TL_IR_RAMP: {
    tl_type b = ir->nodes.v[k[0]].type, s = ir->nodes.v[k[1]].type;
    if (!is_intlike(b) || b.lanes != 1 || !tl_type_eq(b, s))
      return fail(st, e, "ramp of %s by %s", tstr(b, b1), tstr(s, b2));
    if (t.lanes < 2 || !tl_type_eq(tl_type_scalar(t), b)) return fail(st, e, "ramp of type %s", tstr(t, b1));
    break;
  }
  case TL_IR_BROADCAST: {
    tl_type a = ir->nodes.v[k[0]].type;
    if (a.lanes != 1 || t.lanes < 2 || !tl_type_eq(tl_type_scalar(t), a))
      return fail(st, e, "broadcast of %s to %s", tstr(a, b1), tstr(t, b2));
    break;
  }
  case TL_IR_LET: {
    if (check_binder(st, e, k[0])) return st->err;
    if (want_expr(st, e, k[1], "let value")) return st->err;
    if (!tl_type_eq(ir->nodes.v[k[1]].type, ir->nodes.v[k[0]].type))
      return fail(st, e, "let value of type %s for a %s variable", tstr(ir->nodes.v[k[1]].type, b1),
                  tstr(ir->nodes.v[k[0]].type, b2));
    if (with_var(st, e, k[0], k[2], 0, "let body")) return st->err;
    if (!tl_type_eq(ir->nodes.v[k[2]].type, t)) return fail(st, e, "let type differs from its body's");
    break;
  }
  default:
    if (fl & (TL_IRF_B | TL_IRF_P) || op == TL_IR_AND || op == TL_IR_OR) {
      tl_type a = ir->nodes.v[k[0]].type, b = ir->nodes.v[k[1]].type;
      if (!tl_type_eq(a, b))
        return fail(st, e, "%s operands of types %s and %s", tl_ir_opname[op], tstr(a, b1), tstr(b, b2));
      if (fl & TL_IRF_P) {
        if (!tl_type_eq(t, tl_type_lanes(TL_T_BOOL, a.lanes)))
          return fail(st, e, "comparison of type %s, not bool", tstr(t, b1));
      } else if (!tl_type_eq(t, a)) {
        return fail(st, e, "%s result %s for operands of %s", tl_ir_opname[op], tstr(t, b1), tstr(a, b2));
      }
      switch (op) {
      case TL_IR_AND:
      case TL_IR_OR:
        if (!tl_type_is_bool(a)) return fail(st, e, "%s of non-bool %s", tl_ir_opname[op], tstr(a, b1));
        break;
      case TL_IR_DIV:
        if (!tl_type_is_float(a)) return fail(st, e, "DIV of %s (use floordiv/truncdiv for integers)", tstr(a, b1));
        break;
      case TL_IR_FLOORDIV: case TL_IR_FLOORMOD: case TL_IR_TRUNCDIV: case TL_IR_TRUNCMOD:
      case TL_IR_SHL: case TL_IR_SHR:
        if (!is_intlike(a)) return fail(st, e, "%s of %s", tl_ir_opname[op], tstr(a, b1));
        break;
      case TL_IR_BITAND: case TL_IR_BITOR: case TL_IR_BITXOR:
        if (!tl_type_is_int(a)) return fail(st, e, "%s of %s", tl_ir_opname[op], tstr(a, b1));
        break;
      default:
        if (a.code == TL_TC_HANDLE) return fail(st, e, "arithmetic on a handle");
        break;
      }
    } else {
      return fail(st, e, "%s is not an expression", tl_ir_opname[op]);
    }
    break;
  }
  st->memo[e] = st->scope;
  return 0;
}

static int vf_stmt(vf_st *st, tl_ref s) {
  const tl_ir *ir = st->ir;
  if (st->memo[s] == st->scope) return 0;
  const tl_node *n = &ir->nodes.v[s];
  const tl_ref *k = ir->kids.v + n->kids;
  int op = n->op, nk = n->nkids;
  char b1[24], b2[24];
  if (tl_ir_opnkids[op] >= 0 && nk != tl_ir_opnkids[op])
    return fail(st, s, "%s has %d operands, not %d", tl_ir_opname[op], nk, tl_ir_opnkids[op]);
  switch (op) {
  case TL_IR_FOR: {
    int kind = (int)(n->imm.u & 0xff), tag = (int)((n->imm.u >> 8) & 0xff);
    if (kind > TL_FOR_VTHREAD || tag > TL_TAG_VTHREAD || (n->imm.u >> 16))
      return fail(st, s, "bad loop kind %d / tag %d", kind, tag);
    if (kind == TL_FOR_THREAD && (tag < TL_TAG_BLOCK_X || tag > TL_TAG_THREAD_Z))
      return fail(st, s, "thread loop without a blockIdx/threadIdx tag");
    if (kind != TL_FOR_THREAD && kind != TL_FOR_VTHREAD && tag != TL_TAG_NONE)
      return fail(st, s, "thread tag on a %s loop", kind == TL_FOR_SERIAL ? "serial" : "non-thread");
    if (check_binder(st, s, k[0])) return st->err;
    tl_type vt = ir->nodes.v[k[0]].type;
    if (!is_sint(vt) || vt.lanes != 1) return fail(st, s, "loop variable of type %s", tstr(vt, b1));
    if (want_expr(st, s, k[1], "loop min") || want_expr(st, s, k[2], "loop extent")) return st->err;
    if (!tl_type_eq(ir->nodes.v[k[1]].type, vt) || !tl_type_eq(ir->nodes.v[k[2]].type, vt))
      return fail(st, s, "loop bounds of types %s, %s for a %s variable",
                  tstr(ir->nodes.v[k[1]].type, b1), tstr(ir->nodes.v[k[2]].type, b2),
                  tstr(vt, b2));
    if (with_var(st, s, k[0], k[3], 1, "loop body")) return st->err;
    break;
  }
  case TL_IR_LET_STMT:
    if (check_binder(st, s, k[0])) return st->err;
    if (want_expr(st, s, k[1], "let value")) return st->err;
    if (!tl_type_eq(ir->nodes.v[k[1]].type, ir->nodes.v[k[0]].type))
      return fail(st, s, "let value of type %s for a %s variable", tstr(ir->nodes.v[k[1]].type, b1),
                  tstr(ir->nodes.v[k[0]].type, b2));
    if (with_var(st, s, k[0], k[2], 1, "let body")) return st->err;
    break;
  case TL_IR_IF: {
    if (want_expr(st, s, k[0], "condition")) return st->err;
    tl_type c = ir->nodes.v[k[0]].type;
    if (!tl_type_is_bool(c) || c.lanes != 1) return fail(st, s, "if condition of type %s", tstr(c, b1));
    if (want_stmt(st, s, k[1], "then branch")) return st->err;
    if (k[2] && want_stmt(st, s, k[2], "else branch")) return st->err;
    break;
  }
  case TL_IR_STORE:
    if (nk < 1) return fail(st, s, "store without a value");
    if (want_expr(st, s, k[0], "stored value")) return st->err;
    if (check_buffer(st, s, n->imm.u, nk - 1, k + 1, ir->nodes.v[k[0]].type)) return st->err;
    break;
  case TL_IR_ALLOC:
    if (n->imm.u >= (uint64_t)ir->bufs.n) return fail(st, s, "unknown buffer id %" PRIu64, n->imm.u);
    if (want_stmt(st, s, k[0], "allocate body")) return st->err;
    break;
  case TL_IR_SEQ:
    for (int i = 0; i < nk; i++)
      if (want_stmt(st, s, k[i], "sequence item")) return st->err;
    break;
  case TL_IR_ATTR:
    if (n->imm.u >= (uint64_t)ir->strs.n) return fail(st, s, "attr key id %" PRIu64 " not interned", n->imm.u);
    if (k[0] && want_expr(st, s, k[0], "attr value")) return st->err;
    if (want_stmt(st, s, k[1], "attr body")) return st->err;
    break;
  case TL_IR_BARRIER:
    if (n->imm.u > TL_SCOPE_SHARED) return fail(st, s, "barrier of unknown scope %" PRIu64, n->imm.u);
    break;
  case TL_IR_EVAL:
    if (want_expr(st, s, k[0], "evaluated expression")) return st->err;
    break;
  case TL_IR_NOP:
    break;
  default:
    return fail(st, s, "%s is not a statement", tl_ir_opname[op]);
  }
  if (!is_void(n->type)) return fail(st, s, "statement with a non-void type");
  st->memo[s] = st->scope;
  return 0;
}

int tl_ir_verify(tl_ctx *ctx, const tl_ir *ir, tl_ref root, const tl_ref *free_vars, int nfree) {
  vf_st st;
  memset(&st, 0, sizeof st);
  st.ctx = ctx;
  st.ir = ir;
  st.inscope = tl_calloc((size_t)ir->vars.n + 1, 1);
  st.memo = tl_calloc((size_t)ir->nodes.n, sizeof(uint32_t));
  st.scope = st.nscopes = 1;
  int rc = 0;
  for (int i = 0; i < nfree && !rc; i++) {
    tl_ref v = free_vars[i];
    if (!v || v >= (tl_ref)ir->nodes.n || ir->nodes.v[v].op != TL_IR_VAR ||
        ir->nodes.v[v].imm.u >= (uint64_t)ir->vars.n)
      rc = fail(&st, 0, "free variable %d is not a variable", i);
    else
      st.inscope[ir->nodes.v[v].imm.u] = 1;
  }
  if (!rc) {
    if (check_ref(&st, 0, root, "root")) rc = st.err;
    else if (tl_ir_opflags[ir->nodes.v[root].op] & TL_IRF_S) rc = vf_stmt(&st, root);
    else rc = vf_expr(&st, root);
  }
  free(st.inscope);
  free(st.memo);
  return rc;
}
