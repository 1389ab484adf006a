/*
** cfamily.c -- the parts of the C and OpenCL C printers that are the same
** (see cfamily.h).
*/
#define TL_CF_NO_SHORTHANDS
#include "cfamily.h"

#include <math.h>
#include <stdio.h>

#define P(c, s) tl_buf_puts((c)->o, s)
#define PF(c, ...) tl_buf_printf((c)->o, __VA_ARGS__)

void tl_cf_init(tl_cf *c, const tl_cf_lang *h, tl_ctx *ctx, const tl_lowered *f) {
  tl_ir *ir = f->ir;
  c->h = h;
  c->ctx = ctx;
  c->ir = ir;
  c->f = f;
  c->nvars = ir->vars.n;
  c->vname = tl_calloc((size_t)c->nvars + 1, sizeof(char *));
  c->vbound = tl_calloc((size_t)c->nvars + 1, sizeof(int));
  c->nonneg = tl_calloc((size_t)c->nvars + 1, 1);
  c->nbufs = ir->bufs.n;
  c->bname = tl_calloc((size_t)c->nbufs + 1, sizeof(char *));
  c->bscope = tl_calloc((size_t)c->nbufs + 1, sizeof(int));
  for (int i = 0; i < h->nreserved; i++) TL_VEC_PUSH(c->names, tl_strdup(h->reserved[i]));
  TL_VEC_PUSH(c->names, tl_strdup(f->name));
}

void tl_cf_free(tl_cf *c) {
  for (int i = 0; i < c->names.n; i++) free(c->names.v[i]);
  TL_VEC_FREE(c->names);
  free(c->vname);
  free(c->vbound);
  free(c->nonneg);
  free(c->bname);
  free(c->bscope);
}

void tl_cf_err(tl_cf *c, int code, const char *fmt, ...) {
  if (c->err) return;
  char msg[TL_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->err = tl_err(c->ctx, code, "%s: %s: %s", c->h->who, c->f->name ? c->f->name : "?", msg);
}

void tl_cf_indent(tl_cf *c) {
  for (int i = 0; i < c->ind; i++) P(c, "  ");
}

void tl_cf_line(tl_cf *c, const char *fmt, ...) {
  tl_cf_indent(c);
  va_list ap;
  va_start(ap, fmt);
  tl_buf_vprintf(c->o, fmt, ap);
  va_end(ap);
  P(c, "\n");
}

/* ---- names ---------------------------------------------------------------------- */

int tl_cf_name_taken(const tl_cf *c, const char *s) {
  for (int i = 0; i < c->names.n; i++)
    if (strcmp(c->names.v[i], s) == 0) return 1;
  return 0;
}

/* A fresh identifier derived from base. Owned by c->names. */
const char *tl_cf_fresh_name(tl_cf *c, const char *base) {
  char b[64];
  int n = 0;
  for (const char *p = base ? base : ""; *p && n < 40; p++) {
    char ch = *p;
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' ||
             (ch >= '0' && ch <= '9');
    b[n++] = ok ? ch : '_';
  }
  b[n] = 0;
  if (n == 0 || (b[0] >= '0' && b[0] <= '9') || b[0] == '_' || c->h->reserved_prefix(b)) {
    memmove(b + 2, b, (size_t)n + 1);
    b[0] = 'v';
    b[1] = '_';
  }
  char cand[80];
  snprintf(cand, sizeof cand, "%s", b);
  for (int k = 1; tl_cf_name_taken(c, cand); k++) snprintf(cand, sizeof cand, "%s_%d", b, k);
  char *s = tl_strdup(cand);
  TL_VEC_PUSH(c->names, s);
  return s;
}

int tl_cf_var_id(const tl_cf *c, tl_ref v) { return (int)c->ir->nodes.v[v].imm.u; }

const char *tl_cf_var_bind(tl_cf *c, tl_ref v, int nonneg) {
  int id = tl_cf_var_id(c, v);
  if (!c->vname[id]) c->vname[id] = (char *)tl_cf_fresh_name(c, tl_ir_var(c->ir, v)->name);
  c->vbound[id]++;
  c->nonneg[id] = (uint8_t)nonneg;
  return c->vname[id];
}

void tl_cf_var_unbind(tl_cf *c, tl_ref v) { c->vbound[tl_cf_var_id(c, v)]--; }

const char *tl_cf_var_use_id(tl_cf *c, int id) {
  if (!c->vbound[id]) {
    tl_cf_err(c, TL_E_ARG, "variable '%s' is used where it is not bound (%s)",
              c->ir->vars.v[id].name, c->h->unbound_hint);
    return "0";
  }
  return c->vname[id];
}

const char *tl_cf_buf_use(tl_cf *c, int b) {
  if (b < 0 || b >= c->nbufs) {
    tl_cf_err(c, TL_E_ARG, "buffer id %d does not exist", b);
    return "0";
  }
  if (!c->bscope[b]) {
    tl_cf_err(c, TL_E_ARG, "buffer '%s' is used but is neither an argument nor allocated in scope",
              tl_ir_buffer(c->ir, b)->name);
    return "0";
  }
  return c->bname[b];
}

void tl_cf_buf_bind(tl_cf *c, int b) {
  if (!c->bname[b]) c->bname[b] = (char *)tl_cf_fresh_name(c, tl_ir_buffer(c->ir, b)->name);
  c->bscope[b]++;
}

/* A positive constant divisor (scalar or broadcast immediate), else 0. */
int64_t tl_cf_const_divisor(tl_cf *c, tl_ref b) {
  int64_t k;
  if (tl_ir_op(c->ir, b) == TL_IR_BROADCAST) b = tl_ir_kid(c->ir, b, 0);
  if (tl_ir_is_int(c->ir, b, &k) && k > 0) return k;
  return 0;
}

/* Known >= 0 (conservative). */
int tl_cf_nonneg(tl_cf *c, tl_ref e) {
  const tl_ir *ir = c->ir;
  const tl_node *n = tl_ir_node(ir, e);
  if (n->type.code == TL_TC_UINT) return 1;
  if (n->type.code != TL_TC_INT) return 0;
  tl_ref a = n->nkids > 0 ? tl_ir_kid(ir, e, 0) : 0, b = n->nkids > 1 ? tl_ir_kid(ir, e, 1) : 0;
  int64_t k;
  switch (n->op) {
  case TL_IR_INT: return n->imm.i >= 0;
  case TL_IR_VAR: return c->nonneg[n->imm.u];
  case TL_IR_ADD:
  case TL_IR_MUL:
  case TL_IR_MIN:
  case TL_IR_RAMP:
  case TL_IR_FLOORDIV:
  case TL_IR_TRUNCDIV:
  case TL_IR_TRUNCMOD:
    return tl_cf_nonneg(c, a) && tl_cf_nonneg(c, b);
  case TL_IR_FLOORMOD:
    return (tl_ir_is_int(ir, b, &k) && k > 0) || (tl_cf_nonneg(c, a) && tl_cf_nonneg(c, b));
  case TL_IR_MAX:
  case TL_IR_BITAND:
    return tl_cf_nonneg(c, a) || tl_cf_nonneg(c, b);
  case TL_IR_SHR:
  case TL_IR_BROADCAST:
  case TL_IR_CAST:
    return tl_cf_nonneg(c, a);
  default:
    return 0;
  }
}

/* ---- literals ------------------------------------------------------------------- */

void tl_cf_put_int(tl_cf *c, tl_type t, int64_t v) {
  t = tl_type_scalar(t);
  if (tl_type_is_bool(t)) {
    P(c, c->h->bool_lit[v != 0]);
  } else if (t.code == TL_TC_INT && t.bits == 32) {
    if (v == INT32_MIN) P(c, "(-2147483647 - 1)");
    else if (v < 0) PF(c, "(%lld)", (long long)v);
    else PF(c, "%lld", (long long)v);
  } else if (t.code == TL_TC_INT && t.bits == 64) {
    if (v == INT64_MIN) P(c, c->h->int64_min);
    else PF(c, c->h->int64_fmt, (long long)v);
  } else if (t.code == TL_TC_UINT && t.bits == 64) {
    PF(c, c->h->uint64_fmt, (unsigned long long)v);
  } else {
    char tb[32];
    PF(c, "((%s)%lld)", c->h->decl_type(c, t, tb), (long long)v);
  }
}

void tl_cf_put_float(tl_cf *c, tl_type t, double v) {
  const char *half_name = c->h->half_name;
  char cast[40];
  if (t.bits == 16) c->fp16 = 1;
  if (t.bits == 64) c->fp64 = 1;
  if (t.bits == 64) snprintf(cast, sizeof cast, "(double)");
  else if (t.bits == 16) snprintf(cast, sizeof cast, "(%s)", half_name);
  else cast[0] = 0;
  if (isnan(v)) {
    PF(c, "(%sNAN)", cast);
    return;
  }
  if (isinf(v)) {
    PF(c, "(%s%sINFINITY)", cast, v < 0 ? "-" : "");
    return;
  }
  char b[64];
  snprintf(b, sizeof b, t.bits == 64 ? "%.17g" : "%.9g", v);
  if (!strpbrk(b, ".e")) strcat(b, ".0");
  if (t.bits == 16) PF(c, "((%s)%sf)", half_name, b);
  else if (t.bits == 64) PF(c, c->h->paren_f64 || v < 0 ? "(%s)" : "%s", b);
  else PF(c, v < 0 ? "(%sf)" : "%sf", b);
}

/* ---- binary arithmetic --------------------------------------------------------- */

const char *tl_cf_infix_sym(tl_cf *c, int op, tl_type et) {
  switch (op) {
  case TL_IR_ADD: return "+";
  case TL_IR_SUB: return "-";
  case TL_IR_MUL: return "*";
  case TL_IR_DIV: return "/";
  case TL_IR_SHL: return "<<";
  case TL_IR_SHR: return ">>";
  case TL_IR_BITAND: return "&";
  case TL_IR_BITOR: return "|";
  case TL_IR_BITXOR: return "^";
  case TL_IR_TRUNCDIV:
  case TL_IR_TRUNCMOD:
    if (et.code == TL_TC_FLOAT) {
      tl_cf_err(c, TL_E_UNSUPPORTED, "%s on a floating-point type", tl_ir_opname[op]);
      return NULL;
    }
    return op == TL_IR_TRUNCDIV ? "/" : "%";
  default:
    return NULL;
  }
}

int tl_cf_int_floordiv(tl_cf *c, int op, tl_type et, tl_ref a, tl_ref b, int lane,
                       const char **sym) {
  int64_t k = tl_cf_const_divisor(c, b);
  if (k > 0 && (k & (k - 1)) == 0) {
    int sh = 0;
    while ((INT64_C(1) << sh) < k) sh++;
    P(c, "(");
    tl_cf_expr(c, a, lane);
    if (op == TL_IR_FLOORDIV) {
      PF(c, " >> %d)", sh);
    } else {
      P(c, " & ");
      tl_cf_put_int(c, et, k - 1);
      P(c, ")");
    }
    return 1;
  }
  if (k > 0 && tl_cf_nonneg(c, a)) *sym = op == TL_IR_FLOORDIV ? "/" : "%";
  return 0;
}

/* An operand of vector arithmetic: a broadcast beside a non-broadcast is
** printed as its scalar where the language widens scalars itself. GCC then
** broadcasts into a register per native-width piece of the vector; a
** broadcast value of a vector type wider than the machine's (float32x32 on
** AVX2 or AVX-512) was built on the stack and reloaded, once per use. */
static void infix_operand(tl_cf *c, tl_type et, tl_ref x, tl_ref other, int lane, int vec) {
  const tl_ir *ir = c->ir;
  if (vec && c->h->scalar_operand && et.code == TL_TC_FLOAT && (et.bits == 32 || et.bits == 64) &&
      tl_ir_op(ir, x) == TL_IR_BROADCAST && tl_ir_op(ir, other) != TL_IR_BROADCAST) {
    char tb[32];
    PF(c, "((%s)", c->h->decl_type(c, et, tb));
    tl_cf_expr(c, tl_ir_kid(ir, x, 0), -1);
    P(c, ")");
    return;
  }
  tl_cf_expr(c, x, lane);
}

void tl_cf_infix(tl_cf *c, const char *sym, tl_type et, tl_ref a, tl_ref b, int lane, int vec) {
  /* narrow integers: C computes in int; wrap back to the IR's type */
  int narrow = !vec && tl_type_is_int(et) && !tl_type_is_bool(et) && et.bits < 32;
  char tb[32];
  if (narrow) PF(c, "((%s)", c->h->decl_type(c, et, tb));
  P(c, "(");
  infix_operand(c, et, a, b, lane, vec);
  PF(c, " %s ", sym);
  infix_operand(c, et, b, a, lane, vec);
  P(c, ")");
  if (narrow) P(c, ")");
}

const char *tl_cf_cmp_sym(int op) {
  return op == TL_IR_EQ ? "==" : op == TL_IR_NE ? "!=" : op == TL_IR_LT ? "<"
       : op == TL_IR_LE ? "<=" : op == TL_IR_GT ? ">" : ">=";
}

static void put_arith(tl_cf *c, int op, tl_type t, tl_ref a, tl_ref b, int lane, int vec) {
  tl_type et = tl_type_scalar(t);
  const char *sym = tl_cf_infix_sym(c, op, et);
  if (c->err) return;
  if (!sym) switch (op) {
  case TL_IR_FLOORDIV:
  case TL_IR_FLOORMOD:
    if (et.code == TL_TC_UINT) {
      sym = op == TL_IR_FLOORDIV ? "/" : "%";
      break;
    }
    if (et.code == TL_TC_INT) {
      if (tl_cf_int_floordiv(c, op, et, a, b, lane, &sym)) return;
      if (sym) break;
    } else if (et.code != TL_TC_FLOAT) {
      tl_cf_err(c, TL_E_UNSUPPORTED, "%s on a boolean", tl_ir_opname[op]);
      return;
    }
    c->h->binop(c, op, t, a, b, lane, vec);
    return;
  case TL_IR_MIN:
  case TL_IR_MAX:
    c->h->binop(c, op, t, a, b, lane, vec);
    return;
  default:
    tl_cf_err(c, TL_E_INTERNAL, "unexpected binary op %s", tl_ir_opname[op]);
    return;
  }
  tl_cf_infix(c, sym, et, a, b, lane, vec);
}

/* ---- expressions ---------------------------------------------------------------- */

void tl_cf_lanes(tl_cf *c, tl_ref e) {
  tl_type t = tl_ir_type(c->ir, e);
  char tb[32];
  PF(c, "((%s)%s", c->h->decl_type(c, t, tb), c->h->vec_open);
  for (int i = 0; i < t.lanes; i++) {
    if (i) P(c, ", ");
    if (tl_type_is_bool(t)) P(c, c->h->bool_lane);
    tl_cf_expr(c, e, i);
  }
  PF(c, "%s)", c->h->vec_close);
}

static void put_load(tl_cf *c, tl_ref e, int lane, int vec) {
  const tl_ir *ir = c->ir;
  const tl_node *n = tl_ir_node(ir, e);
  int b = (int)n->imm.u;
  if (n->nkids != 1) {
    tl_cf_err(c, TL_E_ARG, "load from '%s' has %d indices; codegen needs one flattened index",
              b < c->nbufs ? tl_ir_buffer(ir, b)->name : "?", n->nkids);
    return;
  }
  const char *bn = tl_cf_buf_use(c, b);
  tl_ref ix = tl_ir_kid(ir, e, 0);
  if (vec) {
    c->h->vec_load(c, e, bn, ix);
    return;
  }
  int ne0 = c->h->bool_load_ne0 && tl_type_is_bool(n->type);
  if (ne0) P(c, "(");
  PF(c, "%s[", bn);
  tl_cf_expr(c, ix, lane);
  P(c, ne0 ? "] != 0)" : "]");
}

static void put_cast(tl_cf *c, tl_ref e, int lane, int vec) {
  tl_type t = tl_ir_type(c->ir, e);
  tl_ref a = tl_ir_kid(c->ir, e, 0);
  char tb[32];
  if (vec) {
    c->h->vec_cast(c, e);
  } else if (tl_type_is_bool(t)) {
    P(c, "(");
    tl_cf_expr(c, a, lane);
    P(c, " != 0)");
  } else {
    PF(c, "((%s)(", c->h->decl_type(c, tl_type_scalar(t), tb));
    tl_cf_expr(c, a, lane);
    P(c, "))");
  }
}

static void put_select(tl_cf *c, tl_ref e, int lane, int vec) {
  const tl_ir *ir = c->ir;
  tl_ref cond = tl_ir_kid(ir, e, 0), a = tl_ir_kid(ir, e, 1), b = tl_ir_kid(ir, e, 2);
  if (!vec || tl_ir_type(ir, cond).lanes == 1) {
    P(c, "(");
    tl_cf_expr(c, cond, lane);
    P(c, " ? ");
    tl_cf_expr(c, a, lane);
    P(c, " : ");
    tl_cf_expr(c, b, lane);
    P(c, ")");
  } else if (tl_ir_op(ir, e) == TL_IR_SELECT && c->h->vec_select) {
    c->h->vec_select(c, e);
  } else {
    /* if_then_else on a vector condition: lane by lane, only the taken branch */
    tl_cf_lanes(c, e);
  }
}

static void put_let(tl_cf *c, tl_ref e, int lane) {
  if (c->h->let) {
    c->h->let(c, e, lane);
    return;
  }
  tl_ir *ir = c->ir;
  tl_ref var = tl_ir_kid(ir, e, 0), val = tl_ir_kid(ir, e, 1);
  tl_cf_expr(c, tl_ir_substitute(ir, tl_ir_kid(ir, e, 2), &var, &val, 1), lane);
}

void tl_cf_expr(tl_cf *c, tl_ref e, int lane) {
  if (c->err) return;
  const tl_ir *ir = c->ir;
  const tl_node *n = tl_ir_node(ir, e);
  tl_type t = n->type;
  if (t.lanes == 1) lane = -1;
  int vec = t.lanes > 1 && lane < 0;
  if (vec && c->h->vec_whole && !c->h->vec_whole(c, e)) {
    tl_cf_lanes(c, e);
    return;
  }
  int op = n->op;
  tl_ref a = n->nkids > 0 ? tl_ir_kid(ir, e, 0) : 0, b = n->nkids > 1 ? tl_ir_kid(ir, e, 1) : 0;
  switch (op) {
  case TL_IR_INT:
    tl_cf_put_int(c, t, n->imm.i);
    return;
  case TL_IR_FLOAT:
    tl_cf_put_float(c, t, n->imm.f);
    return;
  case TL_IR_VAR: {
    const char *nm = tl_cf_var_use_id(c, tl_cf_var_id(c, e));
    if (lane < 0) {
      P(c, nm);
      return;
    }
    int bl = tl_type_is_bool(t);
    if (bl) P(c, "(");
    PF(c, c->h->lane_fmt, nm, lane);
    if (bl) P(c, " != 0)");
    return;
  }
  case TL_IR_RAMP: {
    int64_t k;
    if (vec) {
      c->h->vec_ramp(c, e);
      return;
    }
    P(c, "(");
    tl_cf_expr(c, a, -1);
    P(c, " + ");
    if (tl_ir_is_int(ir, b, &k)) {
      tl_cf_put_int(c, t, k * lane);
    } else {
      tl_cf_expr(c, b, -1);
      PF(c, " * %d", lane);
    }
    P(c, ")");
    return;
  }
  case TL_IR_BROADCAST:
    if (vec) c->h->vec_bcast(c, e);
    else tl_cf_expr(c, a, -1);
    return;
  case TL_IR_LOAD:
    put_load(c, e, lane, vec);
    return;
  case TL_IR_CALL:
    c->h->call(c, e, lane, vec);
    return;
  case TL_IR_LET:
    put_let(c, e, lane);
    return;
  case TL_IR_CAST:
    put_cast(c, e, lane, vec);
    return;
  case TL_IR_SELECT:
  case TL_IR_IF_THEN_ELSE:
    put_select(c, e, lane, vec);
    return;
  case TL_IR_NOT:
    P(c, vec ? "(~" : "(!");
    tl_cf_expr(c, a, lane);
    P(c, ")");
    return;
  case TL_IR_AND:
  case TL_IR_OR:
    P(c, "(");
    tl_cf_expr(c, a, lane);
    P(c, vec ? (op == TL_IR_AND ? " & " : " | ") : (op == TL_IR_AND ? " && " : " || "));
    tl_cf_expr(c, b, lane);
    P(c, ")");
    return;
  default:
    if (tl_ir_opflags[op] & TL_IRF_P) {
      if (vec && c->h->vec_cmp) {
        c->h->vec_cmp(c, e);
      } else if (vec) {
        tl_cf_lanes(c, e);
      } else {
        P(c, "(");
        tl_cf_expr(c, a, lane);
        PF(c, " %s ", tl_cf_cmp_sym(op));
        tl_cf_expr(c, b, lane);
        P(c, ")");
      }
      return;
    }
    if (tl_ir_opflags[op] & TL_IRF_B) {
      put_arith(c, op, t, a, b, lane, vec);
      return;
    }
    tl_cf_err(c, TL_E_ARG, "%s node where an expression is expected", tl_ir_opname[op]);
    return;
  }
}

/* ---- statements ----------------------------------------------------------------- */

int tl_cf_loop_var_ok(tl_cf *c, tl_ref loop) {
  tl_ref var = tl_ir_kid(c->ir, loop, 0);
  tl_type vt = tl_ir_type(c->ir, var);
  if (vt.lanes != 1 || !tl_type_is_int(vt) || tl_type_is_bool(vt)) {
    tl_cf_err(c, TL_E_ARG, "loop variable '%s' is not a scalar integer", tl_ir_var(c->ir, var)->name);
    return 0;
  }
  return 1;
}

tl_type tl_cf_loop_type(const tl_cf *c, tl_type t) {
  if (c->h->wide_loop_var && t.lanes == 1 && t.code == TL_TC_INT && t.bits < 64) t.bits = 64;
  return t;
}

void tl_cf_for(tl_cf *c, tl_ref loop) { tl_cf_for_upto(c, loop, -1); }

void tl_cf_for_upto(tl_cf *c, tl_ref loop, int64_t n) {
  tl_ir *ir = c->ir;
  char ty[32];
  tl_ref var = tl_ir_kid(ir, loop, 0), min = tl_ir_kid(ir, loop, 1), ext = tl_ir_kid(ir, loop, 2);
  tl_type vt = tl_cf_loop_type(c, tl_ir_type(ir, var));
  c->h->decl_type(c, vt, ty);
  int64_t kmin = 0, kext = 0;
  int cmin = tl_ir_is_int(ir, min, &kmin), cext = tl_ir_is_int(ir, ext, &kext);
  int nn = tl_cf_nonneg(c, min);
  if (n >= 0) {
    if (!cmin || !cext || n > kext) {
      tl_cf_err(c, TL_E_INTERNAL, "a loop's first %lld iterations: its bounds are not constants "
                "or it has fewer", (long long)n);
      return;
    }
    kext = n;
  }
  tl_cf_indent(c);
  if (cmin && cext) {
    const char *vn = tl_cf_var_bind(c, var, nn);
    PF(c, "for (%s %s = ", ty, vn);
    tl_cf_put_int(c, vt, kmin);
    PF(c, "; %s < ", vn);
    tl_cf_put_int(c, vt, kmin + kext);
    PF(c, "; ++%s) {\n", vn);
  } else {
    char endname[80];
    snprintf(endname, sizeof endname, "%s_end", tl_ir_var(ir, var)->name);
    const char *en = tl_cf_fresh_name(c, endname);
    /* min and extent are evaluated once, in declaration order */
    tl_buf lo = {0};
    tl_buf *saved = c->o;
    c->o = &lo;
    tl_cf_expr(c, min, -1);
    c->o = saved;
    const char *vn = tl_cf_var_bind(c, var, nn);
    PF(c, "for (%s %s = %s, %s = %s + (", ty, vn, lo.s ? lo.s : "0", en, vn);
    tl_buf_free(&lo);
    tl_cf_expr(c, ext, -1);
    PF(c, "); %s < %s; ++%s) {\n", vn, en, vn);
  }
  tl_cf_block(c, tl_ir_kid(ir, loop, 3));
  tl_cf_var_unbind(c, var);
  tl_cf_line(c, "}");
}

void tl_cf_block(tl_cf *c, tl_ref body) {
  c->ind++;
  c->h->ps(c, body);
  c->ind--;
}

void tl_cf_stmt(tl_cf *c, tl_ref s) {
  tl_ir *ir = c->ir;
  int op = tl_ir_op(ir, s);
  switch (op) {
  case TL_IR_SEQ: {
    int n = tl_ir_nkids(ir, s);
    for (int i = 0; i < n; i++) {
      tl_ref k = tl_ir_kid(ir, s, i);
      if (tl_ir_op(ir, k) == TL_IR_LET_STMT && i < n - 1) {
        tl_cf_line(c, "{");
        tl_cf_block(c, k);
        tl_cf_line(c, "}");
      } else {
        c->h->ps(c, k);
      }
    }
    return;
  }
  case TL_IR_LET_STMT: {
    tl_ref var = tl_ir_kid(ir, s, 0), val = tl_ir_kid(ir, s, 1);
    char dt[32];
    c->h->decl_type(c, tl_ir_type(ir, val), dt);
    int nn = tl_cf_nonneg(c, val);
    /* the value is printed before the variable is bound */
    tl_buf tmp = {0};
    tl_buf *saved = c->o;
    c->o = &tmp;
    tl_cf_expr(c, val, -1);
    c->o = saved;
    tl_cf_indent(c);
    PF(c, "%s %s = %s;\n", dt, tl_cf_var_bind(c, var, nn), tmp.s ? tmp.s : "0");
    tl_buf_free(&tmp);
    c->h->ps(c, tl_ir_kid(ir, s, 2));
    tl_cf_var_unbind(c, var);
    return;
  }
  case TL_IR_IF: {
    tl_ref cond = tl_ir_kid(ir, s, 0), el = tl_ir_kid(ir, s, 2);
    if (tl_ir_type(ir, cond).lanes != 1) {
      tl_cf_err(c, TL_E_ARG, "IF statement on a vector condition");
      return;
    }
    tl_cf_indent(c);
    P(c, "if (");
    tl_cf_expr(c, cond, -1);
    P(c, ") {\n");
    tl_cf_block(c, tl_ir_kid(ir, s, 1));
    if (el && tl_ir_op(ir, el) != TL_IR_NOP) {
      tl_cf_line(c, "} else {");
      tl_cf_block(c, el);
    }
    tl_cf_line(c, "}");
    return;
  }
  case TL_IR_EVAL:
    tl_cf_indent(c);
    P(c, "(void)(");
    tl_cf_expr(c, tl_ir_kid(ir, s, 0), -1);
    P(c, ");\n");
    return;
  case TL_IR_NOP:
    return;
  default:
    tl_cf_err(c, TL_E_ARG, "%s node where a statement is expected", tl_ir_opname[op]);
    return;
  }
}

int tl_cf_store_begin(tl_cf *c, tl_ref s, tl_cf_store *st) {
  const tl_ir *ir = c->ir;
  const tl_node *n = tl_ir_node(ir, s);
  int b = (int)n->imm.u;
  if (n->nkids != 2) {
    tl_cf_err(c, TL_E_ARG, "store to '%s' has %d indices; codegen needs one flattened index",
              b < c->nbufs ? tl_ir_buffer(ir, b)->name : "?", n->nkids - 1);
    return 0;
  }
  const char *bn = tl_cf_buf_use(c, b);
  tl_ref val = tl_ir_kid(ir, s, 0), ix = tl_ir_kid(ir, s, 1);
  tl_type vt = tl_ir_type(ir, val), it = tl_ir_type(ir, ix);
  tl_type bt = tl_ir_buffer(ir, b < c->nbufs ? b : 0)->dtype;
  int isbool = tl_type_is_bool(bt);
  if (it.lanes == 1) {
    if (vt.lanes != 1) {
      tl_cf_err(c, TL_E_ARG, "vector value stored through a scalar index into '%s'", bn);
      return 0;
    }
    tl_cf_indent(c);
    PF(c, "%s[", bn);
    tl_cf_expr(c, ix, -1);
    P(c, "] = ");
    if (isbool) P(c, c->h->bool_store_cast);
    tl_cf_expr(c, val, -1);
    P(c, isbool ? ");\n" : ";\n");
    return 0;
  }
  if (vt.lanes != it.lanes) {
    tl_cf_err(c, TL_E_ARG, "vector store into '%s': index and value lanes differ", bn);
    return 0;
  }
  st->b = b;
  st->bn = bn;
  st->val = val;
  st->ix = ix;
  st->vt = vt;
  st->it = it;
  st->bt = bt;
  return 1;
}
