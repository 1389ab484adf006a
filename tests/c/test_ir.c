/*
** Unit tests for core/ir: hash-consing, the printer, the verifier, range
** analysis and the simplifier.
**
** Besides hand-written cases there are three harnesses:
**  - golden files tests/ir/simplify/NAME.txt: each case is an integer expression in the
**    printer's syntax and the exact text the simplifier must print for it
**    (under declared variable ranges); a small parser below reads them;
**  - a randomized property test: ~2000 random affine / div / mod / min /
**    max / select expressions over three variables with small ranges are
**    simplified and both versions evaluated by the interpreter below for
**    every assignment; the results must agree, the result must verify and
**    be a fixed point of the simplifier;
**  - a randomized range test: every value an expression takes lies within
**    tl_ir_const_bound and within tl_ir_eval_range's symbolic region.
*/
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ir/ir.h"
#include "tl_test.h"

#define I32 TL_T_INDEX

static tl_ref V(tl_ir *ir, const char *name) { return tl_var_new(ir, name, I32); }
static tl_ref C(tl_ir *ir, int64_t v) { return tl_int(ir, v); }

#define CHECK_PRINT(ir, r, expected)                                         \
  do {                                                                       \
    char *s_ = tl_ir_print((ir), (r));                                       \
    const char *e_ = (expected);                                             \
    if (strcmp(s_, e_) != 0)                                                 \
      tl_test_fail(__FILE__, __LINE__, "print:\n  got:      %s\n  expected: %s", s_, e_); \
    free(s_);                                                                \
  } while (0)

static tl_ref simp(tl_ir *ir, tl_ref e, const tl_rangemap *m) { return tl_ir_simplify(ir, e, m); }

/* ---- a tiny interpreter for integer / bool expressions ------------------ */

static int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

static int64_t eval(const tl_ir *ir, tl_ref e, int64_t *env) {
  const tl_node *n = tl_ir_node(ir, e);
  int64_t a = 0, b = 0;
  switch (n->op) {
  case TL_IR_INT: return n->imm.i;
  case TL_IR_VAR: return env[n->imm.u];
  case TL_IR_SELECT:
  case TL_IR_IF_THEN_ELSE:
    return eval(ir, tl_ir_kid(ir, e, 0), env) ? eval(ir, tl_ir_kid(ir, e, 1), env)
                                              : eval(ir, tl_ir_kid(ir, e, 2), env);
  case TL_IR_NOT: return !eval(ir, tl_ir_kid(ir, e, 0), env);
  case TL_IR_LET: {
    tl_ref v = tl_ir_kid(ir, e, 0);
    int64_t old = env[tl_ir_node(ir, v)->imm.u];
    env[tl_ir_node(ir, v)->imm.u] = eval(ir, tl_ir_kid(ir, e, 1), env);
    int64_t r = eval(ir, tl_ir_kid(ir, e, 2), env);
    env[tl_ir_node(ir, v)->imm.u] = old;
    return r;
  }
  case TL_IR_CAST: return eval(ir, tl_ir_kid(ir, e, 0), env);
  default: break;
  }
  a = eval(ir, tl_ir_kid(ir, e, 0), env);
  b = eval(ir, tl_ir_kid(ir, e, 1), env);
  switch (n->op) {
  case TL_IR_ADD: return a + b;
  case TL_IR_SUB: return a - b;
  case TL_IR_MUL: return a * b;
  case TL_IR_FLOORDIV: return fdiv(a, b);
  case TL_IR_FLOORMOD: return a - fdiv(a, b) * b;
  case TL_IR_TRUNCDIV: return a / b;
  case TL_IR_TRUNCMOD: return a % b;
  case TL_IR_MIN: return a < b ? a : b;
  case TL_IR_MAX: return a > b ? a : b;
  case TL_IR_EQ: return a == b;
  case TL_IR_NE: return a != b;
  case TL_IR_LT: return a < b;
  case TL_IR_LE: return a <= b;
  case TL_IR_GT: return a > b;
  case TL_IR_GE: return a >= b;
  case TL_IR_AND: return a && b;
  case TL_IR_OR: return a || b;
  default:
    tl_test_fail(__FILE__, __LINE__, "eval: unexpected op %s", tl_ir_opname[n->op]);
  }
}

/* ---- a parser for the printer's expression syntax (golden files) ---------- */

typedef struct {
  tl_ir *ir;
  const char *s;
  const char **names;
  tl_ref *vars;
  int nvars;
  char err[128];
} parser;

static void skip_ws(parser *p) {
  while (*p->s == ' ' || *p->s == '\t') p->s++;
}

static int accept(parser *p, const char *tok) {
  skip_ws(p);
  size_t n = strlen(tok);
  if (strncmp(p->s, tok, n) != 0) return 0;
  p->s += n;
  return 1;
}

static tl_ref p_expr(parser *p);

static tl_ref p_fail(parser *p, const char *what) {
  if (!p->err[0]) snprintf(p->err, sizeof p->err, "%s at '%.20s'", what, p->s);
  return C(p->ir, 0);
}

static tl_ref p_primary(parser *p) {
  skip_ws(p);
  if (accept(p, "(")) {
    tl_ref e = p_expr(p);
    if (!accept(p, ")")) return p_fail(p, "expected )");
    return e;
  }
  if (*p->s >= '0' && *p->s <= '9') {
    char *end;
    long long v = strtoll(p->s, &end, 10);
    p->s = end;
    return C(p->ir, v);
  }
  char name[64];
  int n = 0;
  while ((*p->s >= 'a' && *p->s <= 'z') || (*p->s >= 'A' && *p->s <= 'Z') || *p->s == '_' ||
         *p->s == '.' || (n > 0 && *p->s >= '0' && *p->s <= '9')) {
    if (n < 63) name[n++] = *p->s;
    p->s++;
  }
  name[n] = 0;
  if (!n) return p_fail(p, "expected an operand");
  if (!strcmp(name, "True")) return tl_bool(p->ir, 1);
  if (!strcmp(name, "False")) return tl_bool(p->ir, 0);
  static const struct { const char *name; int op; } fns[] = {
    {"floordiv", TL_IR_FLOORDIV}, {"floormod", TL_IR_FLOORMOD}, {"truncdiv", TL_IR_TRUNCDIV},
    {"truncmod", TL_IR_TRUNCMOD}, {"min", TL_IR_MIN}, {"max", TL_IR_MAX}, {"select", TL_IR_SELECT}};
  for (size_t i = 0; i < TL_ARRAY_SIZE(fns); i++) {
    if (strcmp(name, fns[i].name) != 0) continue;
    if (!accept(p, "(")) return p_fail(p, "expected (");
    tl_ref a[3];
    int na = fns[i].op == TL_IR_SELECT ? 3 : 2;
    for (int k = 0; k < na; k++) {
      if (k && !accept(p, ",")) return p_fail(p, "expected ,");
      a[k] = p_expr(p);
    }
    if (!accept(p, ")")) return p_fail(p, "expected )");
    if (fns[i].op == TL_IR_SELECT) return tl_ir_make(p->ir, TL_IR_SELECT, I32, 0, a, 3);
    return tl_ir_make(p->ir, fns[i].op, I32, 0, a, 2);   /* raw: no constructor folding */
  }
  for (int i = 0; i < p->nvars; i++)
    if (!strcmp(p->names[i], name)) return p->vars[i];
  return p_fail(p, "unknown variable");
}

static tl_ref p_unary(parser *p) {
  skip_ws(p);
  if (accept(p, "!")) {
    tl_ref a = p_unary(p);
    return tl_ir_make(p->ir, TL_IR_NOT, TL_T_BOOL, 0, &a, 1);
  }
  if (*p->s == '-' && p->s[1] >= '0' && p->s[1] <= '9') {
    p->s++;
    char *end;
    long long v = strtoll(p->s, &end, 10);
    p->s = end;
    return C(p->ir, -v);
  }
  return p_primary(p);
}

static tl_ref raw2(parser *p, int op, tl_ref a, tl_ref b) {
  tl_ref k[2] = {a, b};
  int pred = (tl_ir_opflags[op] & TL_IRF_P) != 0;
  tl_type t = pred ? TL_T_BOOL : tl_ir_type(p->ir, a);
  return tl_ir_make(p->ir, op, t, 0, k, 2);
}

static tl_ref p_mul(parser *p) {
  tl_ref a = p_unary(p);
  while (accept(p, "*")) a = raw2(p, TL_IR_MUL, a, p_unary(p));
  return a;
}

static tl_ref p_add(parser *p) {
  tl_ref a = p_mul(p);
  for (;;) {
    skip_ws(p);
    if (p->s[0] == '+') {
      p->s++;
      a = raw2(p, TL_IR_ADD, a, p_mul(p));
    } else if (p->s[0] == '-' && p->s[1] == ' ') {
      p->s++;
      a = raw2(p, TL_IR_SUB, a, p_mul(p));
    } else {
      return a;
    }
  }
}

static tl_ref p_cmp(parser *p) {
  tl_ref a = p_add(p);
  static const struct { const char *tok; int op; } ops[] = {
    {"<=", TL_IR_LE}, {">=", TL_IR_GE}, {"==", TL_IR_EQ}, {"!=", TL_IR_NE}, {"<", TL_IR_LT}, {">", TL_IR_GT}};
  for (size_t i = 0; i < TL_ARRAY_SIZE(ops); i++)
    if (accept(p, ops[i].tok)) return raw2(p, ops[i].op, a, p_add(p));
  return a;
}

static tl_ref p_and(parser *p) {
  tl_ref a = p_cmp(p);
  while (accept(p, "&&")) a = raw2(p, TL_IR_AND, a, p_cmp(p));
  return a;
}

static tl_ref p_expr(parser *p) {
  tl_ref a = p_and(p);
  while (accept(p, "||")) a = raw2(p, TL_IR_OR, a, p_and(p));
  return a;
}

static tl_ref parse(parser *p, const char *s) {
  p->s = s;
  p->err[0] = 0;
  tl_ref e = p_expr(p);
  skip_ws(p);
  if (*p->s && !p->err[0]) p_fail(p, "trailing text");
  return e;
}

/* ---- hash-consing ------------------------------------------------------------ */

TL_TEST(ir_hash_consing) {
  tl_ir *ir = tl_ir_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j"), i2 = V(ir, "i");
  CHECK(i != i2);   /* fresh variables never collide, even with one name */
  tl_ref a = tl_add(ir, tl_mul(ir, i, C(ir, 4)), j);
  tl_ref b = tl_add(ir, tl_mul(ir, i, C(ir, 4)), j);
  CHECK_EQ_INT(a, b);
  CHECK(tl_add(ir, tl_mul(ir, i2, C(ir, 4)), j) != a);
  CHECK_EQ_INT(tl_add(ir, C(ir, 3), i), tl_add(ir, i, C(ir, 3)));   /* immediates go right */
  CHECK_EQ_INT(tl_add(ir, C(ir, 2), C(ir, 3)), C(ir, 5));
  int n0 = ir->nodes.n;
  for (int k = 0; k < 100; k++) tl_floordiv(ir, tl_add(ir, a, C(ir, 7)), C(ir, 8));
  CHECK_EQ_INT(ir->nodes.n, n0 + 4);   /* 7, a + 7, 8, floordiv: built once */
  tl_ir_free(ir);
}

/* ---- printer ----------------------------------------------------------------- */

TL_TEST(ir_print_expr) {
  tl_ir *ir = tl_ir_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j"), k = V(ir, "k");
  CHECK_PRINT(ir, tl_add(ir, tl_mul(ir, i, C(ir, 4)), j), "i*4 + j");
  CHECK_PRINT(ir, tl_mul(ir, tl_add(ir, i, j), C(ir, 4)), "(i + j)*4");
  CHECK_PRINT(ir, tl_sub(ir, i, tl_sub(ir, j, k)), "i - (j - k)");
  CHECK_PRINT(ir, tl_sub(ir, tl_sub(ir, i, j), k), "i - j - k");
  CHECK_PRINT(ir, tl_add(ir, i, tl_add(ir, j, k)), "i + (j + k)");
  CHECK_PRINT(ir, tl_mul(ir, i, C(ir, -3)), "i*-3");
  CHECK_PRINT(ir, tl_floordiv(ir, tl_add(ir, i, j), C(ir, 8)), "floordiv(i + j, 8)");
  CHECK_PRINT(ir, tl_floormod(ir, i, C(ir, 8)), "floormod(i, 8)");
  CHECK_PRINT(ir, tl_binary(ir, TL_IR_TRUNCDIV, i, C(ir, 2)), "truncdiv(i, 2)");
  CHECK_PRINT(ir, tl_min(ir, i, tl_max(ir, j, C(ir, 0))), "min(i, max(j, 0))");
  CHECK_PRINT(ir, C(ir, -7), "-7");
  CHECK_PRINT(ir, tl_imm_int(ir, TL_T_I64, 5), "int64(5)");
  CHECK_PRINT(ir, tl_bool(ir, 1), "True");
  CHECK_PRINT(ir, tl_bool(ir, 0), "False");
  CHECK_PRINT(ir, tl_imm_float(ir, TL_T_F32, 1.5), "1.5f");
  CHECK_PRINT(ir, tl_imm_float(ir, TL_T_F32, 1), "1.0f");
  CHECK_PRINT(ir, tl_imm_float(ir, TL_T_F32, 0.1), "0.1f");
  CHECK_PRINT(ir, tl_imm_float(ir, tl_type_make(TL_TC_FLOAT, 64, 1), 2.5), "2.5");
  CHECK_PRINT(ir, tl_imm_float(ir, TL_T_F32, 1e20), "1e+20f");
  CHECK_PRINT(ir, tl_imm_float(ir, TL_T_F32, -2), "-2.0f");
  CHECK_PRINT(ir, tl_imm_float(ir, TL_T_F16, 0.5), "float16(0.5)");

  tl_ref lt = tl_lt(ir, i, j), ge = tl_binary(ir, TL_IR_GE, k, C(ir, 0));
  CHECK_PRINT(ir, tl_and(ir, lt, ge), "i < j && k >= 0");
  CHECK_PRINT(ir, tl_binary(ir, TL_IR_OR, tl_and(ir, lt, ge), lt), "i < j && k >= 0 || i < j");
  CHECK_PRINT(ir, tl_and(ir, tl_binary(ir, TL_IR_OR, lt, ge), lt), "(i < j || k >= 0) && i < j");
  CHECK_PRINT(ir, tl_not(ir, lt), "!(i < j)");
  CHECK_PRINT(ir, tl_select(ir, lt, i, j), "select(i < j, i, j)");
  CHECK_PRINT(ir, tl_if_then_else(ir, lt, i, j), "if_then_else(i < j, i, j)");
  CHECK_PRINT(ir, tl_lt(ir, tl_add(ir, i, C(ir, 1)), tl_mul(ir, j, C(ir, 2))), "i + 1 < j*2");

  tl_ref f = tl_var_new(ir, "x", TL_T_F32);
  tl_ref fy = tl_var_new(ir, "y", TL_T_F32);
  CHECK_PRINT(ir, tl_binary(ir, TL_IR_DIV, f, tl_add(ir, fy, tl_imm_float(ir, TL_T_F32, 2))),
              "x / (y + 2.0f)");
  CHECK_PRINT(ir, tl_binary(ir, TL_IR_DIV, tl_mul(ir, f, fy), fy), "x*y / y");
  CHECK_PRINT(ir, tl_cast(ir, TL_T_F32, i), "float32(i)");
  CHECK_PRINT(ir, tl_call(ir, TL_INTRIN_EXP, TL_T_F32, &f, 1), "exp(x)");
  tl_ref pa[2] = {f, fy};
  CHECK_PRINT(ir, tl_call(ir, TL_INTRIN_POW, TL_T_F32, pa, 2), "pow(x, y)");

  tl_ref shape[2] = {C(ir, 64), C(ir, 64)};
  int A = tl_buffer_new(ir, "A", TL_T_F32, 2, shape, TL_SCOPE_GLOBAL);
  tl_ref idx[2] = {i, j};
  CHECK_PRINT(ir, tl_load(ir, A, idx, 2), "A[i, j]");
  tl_ref flat = tl_add(ir, tl_mul(ir, i, C(ir, 64)), j);
  CHECK_PRINT(ir, tl_load(ir, A, &flat, 1), "A[i*64 + j]");
  tl_ref rmp = tl_ramp(ir, flat, C(ir, 1), 4);
  CHECK_PRINT(ir, rmp, "ramp(i*64 + j, 1, 4)");
  CHECK_PRINT(ir, tl_load_typed(ir, tl_type_lanes(TL_T_F32, 4), A, &rmp, 1), "A[ramp(i*64 + j, 1, 4)]");
  CHECK_PRINT(ir, tl_broadcast(ir, f, 4), "x4(x)");
  CHECK_PRINT(ir, tl_imm_float(ir, tl_type_lanes(TL_T_F32, 8), 0), "x8(0.0f)");
  tl_ref t = V(ir, "t");
  CHECK_PRINT(ir, tl_let(ir, t, tl_add(ir, i, C(ir, 1)), tl_mul(ir, t, t)), "(let t = i + 1 in t*t)");
  tl_ir_free(ir);
}

TL_TEST(ir_print_stmt) {
  tl_ir *ir = tl_ir_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j");
  tl_ref shape[2] = {C(ir, 64), C(ir, 8)};
  int A = tl_buffer_new(ir, "A", TL_T_F32, 2, shape, TL_SCOPE_GLOBAL);
  tl_ref n512 = C(ir, 512);
  int Cb = tl_buffer_new(ir, "C", TL_T_F32, 1, &n512, TL_SCOPE_GLOBAL);
  tl_ref idx[2] = {i, j};
  tl_ref flat = tl_add(ir, tl_mul(ir, i, C(ir, 8)), j);
  tl_ref val = tl_add(ir, tl_load(ir, A, idx, 2), tl_imm_float(ir, TL_T_F32, 1.5));
  tl_ref st = tl_store(ir, Cb, val, &flat, 1);
  tl_ref guard = tl_if(ir, tl_lt(ir, flat, C(ir, 500)), st, 0);
  tl_ref inner = tl_for(ir, j, C(ir, 0), C(ir, 8), TL_FOR_SERIAL, 0, guard);
  tl_ref outer = tl_for(ir, i, C(ir, 0), C(ir, 64), TL_FOR_PARALLEL, 0, inner);
  CHECK_PRINT(ir, outer,
              "parallel (i, 0, 64) {\n"
              "  for (j, 0, 8) {\n"
              "    if (i*8 + j < 500) {\n"
              "      C[i*8 + j] = A[i, j] + 1.5f\n"
              "    }\n"
              "  }\n"
              "}\n");

  /* GPU-style: thread loops, shared allocation, barrier, attr, let, else */
  tl_ref bx = V(ir, "bx"), tx = V(ir, "tx"), v = V(ir, "v"), t = V(ir, "t");
  tl_ref sh[1] = {C(ir, 16)};
  int S = tl_buffer_new(ir, "S", TL_T_F32, 1, sh, TL_SCOPE_SHARED);
  tl_ref s2[2] = {C(ir, 4), C(ir, 4)};
  int L = tl_buffer_new(ir, "L.local", TL_T_F32, 2, s2, TL_SCOPE_LOCAL);
  tl_ref zero = tl_imm_float(ir, TL_T_F32, 0);
  tl_ref body[4];
  body[0] = tl_store(ir, S, tl_load(ir, Cb, &tx, 1), &tx, 1);
  body[1] = tl_barrier(ir, TL_SCOPE_SHARED);
  tl_ref li[2] = {C(ir, 0), v};
  body[2] = tl_for(ir, v, C(ir, 0), C(ir, 4), TL_FOR_VECTORIZED, 0,
                   tl_store(ir, L, tl_load(ir, S, &t, 1), li, 2));
  body[3] = tl_if(ir, tl_binary(ir, TL_IR_EQ, tx, C(ir, 0)), tl_store(ir, Cb, zero, &bx, 1),
                  tl_store(ir, Cb, tl_imm_float(ir, TL_T_F32, 2), &bx, 1));
  tl_ref seq = tl_seq(ir, body, 4);
  tl_ref let = tl_let_stmt(ir, t, tl_add(ir, tx, C(ir, 1)), seq);
  tl_ref al = tl_alloc(ir, S, tl_alloc(ir, L, let));
  tl_ref kern = tl_for(ir, bx, C(ir, 0), C(ir, 32), TL_FOR_THREAD, TL_TAG_BLOCK_X,
                       tl_for(ir, tx, C(ir, 0), C(ir, 16), TL_FOR_THREAD, TL_TAG_THREAD_X,
                              tl_attr(ir, "pragma_unroll", C(ir, 1), al)));
  CHECK_PRINT(ir, kern,
              "launch_thread blockIdx.x (bx, 0, 32) {\n"
              "  launch_thread threadIdx.x (tx, 0, 16) {\n"
              "    // attr [pragma_unroll] = 1\n"
              "    allocate S.shared[float32 * 16] {\n"
              "      allocate L.local[float32 * 16] {\n"
              "        let t = tx + 1\n"
              "        S[tx] = C[tx]\n"
              "        barrier(shared)\n"
              "        vectorized (v, 0, 4) {\n"
              "          L.local[0, v] = S[t]\n"
              "        }\n"
              "        if (tx == 0) {\n"
              "          C[bx] = 0.0f\n"
              "        } else {\n"
              "          C[bx] = 2.0f\n"
              "        }\n"
              "      }\n"
              "    }\n"
              "  }\n"
              "}\n");
  tl_ref u = V(ir, "u");
  CHECK_PRINT(ir, tl_for(ir, u, C(ir, 0), C(ir, 4), TL_FOR_UNROLLED, 0, tl_eval(ir, u)),
              "unrolled (u, 0, 4) {\n  u\n}\n");
  CHECK_PRINT(ir, tl_nop(ir), "nop\n");

  /* symbolic allocation size */
  tl_ref n = V(ir, "n");
  tl_ref dyn[2] = {n, C(ir, 8)};
  int D = tl_buffer_new(ir, "D", TL_T_F32, 2, dyn, TL_SCOPE_GLOBAL);
  CHECK_PRINT(ir, tl_alloc(ir, D, tl_barrier(ir, TL_SCOPE_GLOBAL)),
              "allocate D.global[float32 * 8 * n] {\n  barrier(global)\n}\n");
  tl_ir_free(ir);
}

TL_TEST(ir_print_names) {
  tl_ir *ir = tl_ir_new();
  tl_ref i1 = V(ir, "i"), i2 = V(ir, "i"), i3 = V(ir, "i");
  tl_ref e = tl_add(ir, tl_mul(ir, i2, C(ir, 8)), i1);
  CHECK_PRINT(ir, e, "i*8 + i.1");                /* order of first appearance */
  CHECK_PRINT(ir, tl_add(ir, e, i3), "i*8 + i.1 + i.2");
  CHECK_PRINT(ir, i1, "i");                       /* each print starts afresh */
  /* a buffer and a variable of one name are told apart as well */
  tl_ref one = C(ir, 4);
  int B = tl_buffer_new(ir, "i", TL_T_F32, 1, &one, TL_SCOPE_GLOBAL);
  CHECK_PRINT(ir, tl_load(ir, B, &i1, 1), "i[i.1]");
  /* a var named like a suffixed one does not get confused */
  tl_ref d1 = V(ir, "i.1");
  CHECK_PRINT(ir, tl_add(ir, tl_add(ir, i1, d1), i2), "i + i.1 + i.2");
  char *s = tl_ir_print_short(ir, tl_for(ir, i1, C(ir, 0), C(ir, 4), 0, 0,
                                         tl_for(ir, i2, C(ir, 0), C(ir, 4), 0, 0, tl_eval(ir, e))),
                              200);
  CHECK_STREQ(s, "for (i, 0, 4) { for (i.1, 0, 4) { i.1*8 + i } }");
  free(s);
  s = tl_ir_print_short(ir, e, 8);
  CHECK_STREQ(s, "i*8 +...");
  free(s);
  tl_ir_free(ir);
}

/* ---- verifier ------------------------------------------------------------------- */

static void expect_verify_error(tl_ir *ir, tl_ref root, const tl_ref *fv, int nfv, const char *needle) {
  tl_ctx *ctx = tl_ctx_new();
  int rc = tl_ir_verify(ctx, ir, root, fv, nfv);
  if (rc != TL_E_INTERNAL || !strstr(tl_errmsg(ctx), needle))
    tl_test_fail(__FILE__, __LINE__, "expected a verify error containing '%s', got rc %d: %s", needle,
                 rc, tl_errmsg(ctx));
  tl_ctx_free(ctx);
}

TL_TEST(ir_verify) {
  tl_ir *ir = tl_ir_new();
  tl_ctx *ctx = tl_ctx_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j"), n = V(ir, "n");
  tl_ref shape[2] = {n, C(ir, 8)};
  int A = tl_buffer_new(ir, "A", TL_T_F32, 2, shape, TL_SCOPE_GLOBAL);
  tl_ref idx[2] = {i, j};
  tl_ref flat = tl_add(ir, tl_mul(ir, i, C(ir, 8)), j);
  tl_ref st = tl_store(ir, A, tl_load(ir, A, idx, 2), &flat, 1);
  tl_ref nest = tl_for(ir, i, C(ir, 0), n, 0, 0, tl_for(ir, j, C(ir, 0), C(ir, 8), 0, 0, st));
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, nest, &n, 1), 0);
  /* a shared loop in two sequence items binds j twice, in sibling scopes */
  tl_ref two[2] = {nest, tl_for(ir, i, C(ir, 0), C(ir, 4), 0, 0, tl_for(ir, j, C(ir, 0), C(ir, 8), 0, 0, st))};
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, tl_seq(ir, two, 2), &n, 1), 0);

  /* undefined variable */
  expect_verify_error(ir, nest, NULL, 0, "variable 'n' used outside its scope");
  /* redefinition in a nested scope */
  tl_ref redef = tl_for(ir, i, C(ir, 0), C(ir, 4), 0, 0, tl_for(ir, i, C(ir, 0), C(ir, 4), 0, 0, tl_eval(ir, i)));
  expect_verify_error(ir, redef, NULL, 0, "variable 'i' redefined in a nested scope");
  /* operand types */
  tl_ref f = tl_var_new(ir, "f", TL_T_F32);
  tl_ref bad_add = tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){i, f}, 2);
  expect_verify_error(ir, bad_add, (tl_ref[]){i, f}, 2, "ADD operands of types int32 and float32");
  tl_ref bad_cmp = tl_ir_make(ir, TL_IR_LT, I32, 0, (tl_ref[]){i, j}, 2);
  expect_verify_error(ir, bad_cmp, (tl_ref[]){i, j}, 2, "comparison of type int32, not bool");
  tl_ref bad_div = tl_ir_make(ir, TL_IR_DIV, I32, 0, (tl_ref[]){i, j}, 2);
  expect_verify_error(ir, bad_div, (tl_ref[]){i, j}, 2, "DIV of int32");
  tl_ref bad_fdiv = tl_ir_make(ir, TL_IR_FLOORDIV, TL_T_F32, 0, (tl_ref[]){f, f}, 2);
  expect_verify_error(ir, bad_fdiv, &f, 1, "FLOORDIV of float32");
  /* loop variable type */
  tl_ref fl = tl_ir_make(ir, TL_IR_FOR, TL_T_VOID, 0, (tl_ref[]){f, C(ir, 0), C(ir, 4), tl_nop(ir)}, 4);
  expect_verify_error(ir, fl, NULL, 0, "loop variable of type float32");
  tl_ref nonvar = tl_ir_make(ir, TL_IR_FOR, TL_T_VOID, 0, (tl_ref[]){C(ir, 1), C(ir, 0), C(ir, 4), tl_nop(ir)}, 4);
  expect_verify_error(ir, nonvar, NULL, 0, "FOR binds a non-variable");
  /* statement / expression positions */
  tl_ref body_expr = tl_ir_make(ir, TL_IR_FOR, TL_T_VOID, 0, (tl_ref[]){i, C(ir, 0), C(ir, 4), i}, 4);
  expect_verify_error(ir, body_expr, NULL, 0, "expression where a statement belongs (loop body of FOR)");
  tl_ref stmt_in_expr = tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){i, tl_nop(ir)}, 2);
  expect_verify_error(ir, stmt_in_expr, &i, 1, "statement where an expression belongs");
  expect_verify_error(ir, tl_seq(ir, (tl_ref[]){st, i}, 2), (tl_ref[]){i, j}, 2,
                      "expression where a statement belongs (sequence item of SEQ)");
  /* buffers and index counts */
  tl_ref bad_buf = tl_ir_make(ir, TL_IR_LOAD, TL_T_F32, 7, &i, 1);
  expect_verify_error(ir, bad_buf, &i, 1, "unknown buffer id 7");
  tl_ref three[3] = {i, j, i};
  tl_ref bad_nidx = tl_ir_make(ir, TL_IR_LOAD, TL_T_F32, (uint64_t)A, three, 3);
  expect_verify_error(ir, bad_nidx, (tl_ref[]){i, j}, 2, "buffer 'A' has 2 dimensions but 3 indices");
  tl_ref f_idx = tl_ir_make(ir, TL_IR_LOAD, TL_T_F32, (uint64_t)A, &f, 1);
  expect_verify_error(ir, f_idx, &f, 1, "index 0 is float32, not an integer");
  tl_ref bad_store = tl_store(ir, A, i, &j, 1);
  expect_verify_error(ir, bad_store, (tl_ref[]){i, j}, 2, "element type int32 does not match buffer 'A'");
  /* intrinsics */
  tl_ref bad_call = tl_call(ir, TL_INTRIN_POW, TL_T_F32, &f, 1);
  expect_verify_error(ir, bad_call, &f, 1, "pow takes 2 arguments, not 1");
  /* conditions */
  tl_ref bad_if = tl_ir_make(ir, TL_IR_IF, TL_T_VOID, 0, (tl_ref[]){i, st, 0}, 3);
  expect_verify_error(ir, bad_if, (tl_ref[]){i, j}, 2, "if condition of type int32");
  tl_ref bad_sel = tl_ir_make(ir, TL_IR_SELECT, I32, 0, (tl_ref[]){tl_lt(ir, i, j), i, f}, 3);
  expect_verify_error(ir, bad_sel, (tl_ref[]){i, j, f}, 3, "branches of types int32 and float32");
  /* lets: scope ends with the body */
  tl_ref t = V(ir, "t");
  tl_ref let_ok = tl_let(ir, t, C(ir, 3), tl_add(ir, t, C(ir, 1)));
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, let_ok, NULL, 0), 0);
  expect_verify_error(ir, tl_add(ir, let_ok, t), NULL, 0, "variable 't' used outside its scope");
  /* thread tags */
  tl_ref bad_tag = tl_for(ir, i, C(ir, 0), C(ir, 4), TL_FOR_THREAD, TL_TAG_NONE, tl_nop(ir));
  expect_verify_error(ir, bad_tag, NULL, 0, "thread loop without a blockIdx/threadIdx tag");
  /* the message prints the offending node, one line, cut */
  tl_ref big = i;
  for (int k = 0; k < 100; k++) big = tl_add(ir, big, tl_mul(ir, j, C(ir, k + 2)));
  tl_ref bad_big = tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){big, f}, 2);
  CHECK(tl_ir_verify(ctx, ir, bad_big, (tl_ref[]){i, j, f}, 3) == TL_E_INTERNAL);
  CHECK(strlen(tl_errmsg(ctx)) < 320);
  CHECK(strstr(tl_errmsg(ctx), "...") != NULL);
  tl_ctx_free(ctx);
  tl_ir_free(ir);
}

/* ---- ranges ------------------------------------------------------------------------- */

TL_TEST(ir_range_const_bound) {
  tl_ir *ir = tl_ir_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j"), n = V(ir, "n"), k = V(ir, "k");
  tl_rangemap m = {0};
  tl_rangemap_set(&m, i, C(ir, 0), C(ir, 8));
  tl_rangemap_set(&m, j, C(ir, -3), C(ir, 10));   /* [-3, 6] */
  tl_rangemap_set(&m, n, C(ir, 1), C(ir, 16));    /* [1, 16] */
  tl_rangemap_set(&m, k, C(ir, 0), n);            /* symbolic: [0, 15] */
  int64_t lo, hi;
#define BOUND(e, L, H)                                                          \
  do {                                                                          \
    CHECK(tl_ir_const_bound(ir, (e), &m, &lo, &hi));                            \
    CHECK_EQ_INT(lo, L);                                                        \
    CHECK_EQ_INT(hi, H);                                                        \
  } while (0)
  BOUND(i, 0, 7);
  BOUND(k, 0, 15);
  BOUND(tl_add(ir, tl_mul(ir, i, C(ir, 8)), j), -3, 62);
  BOUND(tl_sub(ir, i, j), -6, 10);
  BOUND(tl_mul(ir, j, C(ir, -2)), -12, 6);
  BOUND(tl_mul(ir, i, j), -21, 42);
  BOUND(tl_floordiv(ir, j, C(ir, 4)), -1, 1);
  BOUND(tl_floormod(ir, j, C(ir, 4)), 0, 3);
  BOUND(tl_floormod(ir, i, C(ir, 16)), 0, 7);              /* within one period */
  BOUND(tl_floormod(ir, tl_add(ir, i, C(ir, 8)), C(ir, 16)), 8, 15);
  BOUND(tl_binary(ir, TL_IR_TRUNCDIV, j, C(ir, 4)), -0, 1);
  BOUND(tl_binary(ir, TL_IR_TRUNCMOD, j, C(ir, 4)), -3, 3);
  BOUND(tl_binary(ir, TL_IR_TRUNCMOD, i, C(ir, 4)), 0, 3);
  BOUND(tl_min(ir, i, j), -3, 6);
  BOUND(tl_max(ir, i, C(ir, 3)), 3, 7);
  BOUND(tl_select(ir, tl_lt(ir, i, j), tl_add(ir, i, C(ir, 100)), j), -3, 107);
  BOUND(tl_select(ir, tl_lt(ir, i, C(ir, 100)), i, j), 0, 7);   /* decided condition */
  BOUND(tl_cast(ir, TL_T_I64, i), 0, 7);
  BOUND(tl_floordiv(ir, tl_mul(ir, k, C(ir, 3)), n), 0, 45);
  tl_ref t = V(ir, "t");
  BOUND(tl_let(ir, t, tl_add(ir, i, C(ir, 1)), tl_mul(ir, t, C(ir, 2))), 2, 16);
  BOUND(tl_cast(ir, tl_type_make(TL_TC_INT, 8, 1), tl_mul(ir, i, C(ir, 100))), -128, 127);
  /* unknown: a variable without range, a load */
  tl_ref x = V(ir, "x");
  CHECK(!tl_ir_const_bound(ir, tl_add(ir, i, x), &m, &lo, &hi));
  tl_ir_const_bound_sides(ir, tl_max(ir, x, C(ir, 0)), &m, &lo, &hi);
  CHECK_EQ_INT(lo, 0);
  CHECK(hi == INT64_MAX);
  /* a self-referential range does not loop */
  tl_rangemap_set(&m, x, x, C(ir, 4));
  CHECK(!tl_ir_const_bound(ir, x, &m, &lo, &hi));
  tl_rangemap_free(&m);
  tl_ir_free(ir);
#undef BOUND
}

TL_TEST(ir_range_eval) {
  tl_ir *ir = tl_ir_new();
  tl_ref io = V(ir, "i_outer"), ii = V(ir, "i_inner");
  tl_rangemap relax = {0}, known = {0};
  tl_ref mn, ex;
  /* i_outer*8 + i_inner, i_inner relaxed over [0, 8) */
  tl_rangemap_set(&relax, ii, C(ir, 0), C(ir, 8));
  tl_rangemap_set(&known, io, C(ir, 0), C(ir, 4));
  CHECK(tl_ir_eval_range(ir, tl_add(ir, tl_mul(ir, io, C(ir, 8)), ii), &relax, &known, &mn, &ex));
  CHECK_PRINT(ir, mn, "i_outer*8");
  CHECK_PRINT(ir, ex, "8");
  /* the same through a split written out: (i_outer*8 + i_inner)*64 + j, j relaxed */
  tl_ref j = V(ir, "j");
  tl_rangemap_set(&relax, j, C(ir, 0), C(ir, 64));
  tl_ref flat = tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, io, C(ir, 8)), ii), C(ir, 64)), j);
  CHECK(tl_ir_eval_range(ir, flat, &relax, &known, &mn, &ex));
  CHECK_PRINT(ir, mn, "i_outer*512");
  CHECK_PRINT(ir, ex, "512");
  tl_rangemap_free(&relax);

  /* stride-2 convolution: i*2 + k with i over [0, ei) and k over [0, ek) */
  tl_ref i = V(ir, "i"), k = V(ir, "k"), ei = V(ir, "ei"), ek = V(ir, "ek");
  tl_rangemap_set(&relax, i, C(ir, 0), ei);
  tl_rangemap_set(&relax, k, C(ir, 0), ek);
  CHECK(tl_ir_eval_range(ir, tl_add(ir, tl_mul(ir, i, C(ir, 2)), k), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "0");
  tl_ref want = simp(ir, tl_add(ir, tl_mul(ir, tl_sub(ir, ei, C(ir, 1)), C(ir, 2)), ek), NULL);
  CHECK_EQ_INT(ex, want);
  CHECK_PRINT(ir, ex, "ei*2 + ek - 2");
  tl_rangemap_free(&relax);
  /* constant extents give constants */
  tl_rangemap_set(&relax, i, C(ir, 0), C(ir, 28));
  tl_rangemap_set(&relax, k, C(ir, 0), C(ir, 3));
  CHECK(tl_ir_eval_range(ir, tl_add(ir, tl_mul(ir, i, C(ir, 2)), k), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "0");
  CHECK_PRINT(ir, ex, "57");
  /* an offset loop: i over [base, base + 4) */
  tl_ref base = V(ir, "base");
  tl_rangemap_set(&relax, i, base, C(ir, 4));
  CHECK(tl_ir_eval_range(ir, tl_sub(ir, tl_mul(ir, i, C(ir, 2)), C(ir, 1)), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "base*2 - 1");
  CHECK_PRINT(ir, ex, "7");
  tl_rangemap_free(&relax);

  /* floordiv of a fused variable */
  tl_ref fused = V(ir, "fused");
  tl_rangemap_set(&relax, fused, C(ir, 0), C(ir, 4096));
  CHECK(tl_ir_eval_range(ir, tl_floordiv(ir, fused, C(ir, 64)), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "0");
  CHECK_PRINT(ir, ex, "64");
  CHECK(tl_ir_eval_range(ir, tl_floormod(ir, fused, C(ir, 64)), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "0");
  CHECK_PRINT(ir, ex, "64");
  tl_rangemap_free(&relax);
  /* fused = fo*64 + fi over a 64-aligned tile: one row of floordiv, all of floormod */
  tl_ref fo = V(ir, "fo");
  tl_rangemap_set(&relax, fused, tl_mul(ir, fo, C(ir, 64)), C(ir, 64));
  CHECK(tl_ir_eval_range(ir, tl_floordiv(ir, fused, C(ir, 64)), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "fo");
  CHECK_PRINT(ir, ex, "1");
  CHECK(tl_ir_eval_range(ir, tl_floormod(ir, fused, C(ir, 64)), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "0");
  CHECK_PRINT(ir, ex, "64");
  tl_rangemap_free(&relax);

  /* variables not relaxed stay symbolic; min/max keep their structure */
  tl_ref n = V(ir, "n");
  tl_rangemap_set(&relax, i, C(ir, 0), C(ir, 8));
  CHECK(tl_ir_eval_range(ir, tl_min(ir, tl_add(ir, n, i), C(ir, 100)), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "min(n, 100)");
  CHECK_PRINT(ir, ex, "min(n + 7, 100) - min(n, 100) + 1");
  /* nothing relaxed: a point */
  CHECK(tl_ir_eval_range(ir, tl_add(ir, n, C(ir, 1)), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "n + 1");
  CHECK_PRINT(ir, ex, "1");
  /* non-affine: i*i over [0, 8): over-approximated, still correct */
  CHECK(tl_ir_eval_range(ir, tl_mul(ir, i, i), &relax, NULL, &mn, &ex));
  CHECK_PRINT(ir, mn, "0");
  CHECK_PRINT(ir, ex, "50");
  /* unknown: a relaxed index through a load */
  tl_ref sh = C(ir, 8);
  int B = tl_buffer_new(ir, "B", I32, 1, &sh, TL_SCOPE_GLOBAL);
  CHECK(!tl_ir_eval_range(ir, tl_load(ir, B, &i, 1), &relax, NULL, &mn, &ex));
  tl_rangemap_free(&relax);
  tl_rangemap_free(&known);
  tl_ir_free(ir);
}

TL_TEST(ir_prove) {
  tl_ir *ir = tl_ir_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j"), n = V(ir, "n");
  tl_rangemap m = {0};
  tl_rangemap_set(&m, i, C(ir, 0), C(ir, 8));
  tl_rangemap_set(&m, j, C(ir, 0), C(ir, 8));
  tl_ref ij = tl_add(ir, tl_mul(ir, i, C(ir, 8)), j);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_lt(ir, ij, C(ir, 64)), &m), 1);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_lt(ir, ij, C(ir, 63)), &m), -1);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_binary(ir, TL_IR_GE, ij, C(ir, 64)), &m), 0);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_binary(ir, TL_IR_GE, tl_sub(ir, ij, tl_mul(ir, i, C(ir, 8))), C(ir, 0)), &m), 1);
  tl_ref t = tl_lt(ir, i, C(ir, 8)), u = tl_lt(ir, n, C(ir, 3)), f = tl_lt(ir, C(ir, 9), j);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_and(ir, t, u), &m), -1);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_and(ir, f, u), &m), 0);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_binary(ir, TL_IR_OR, u, t), &m), 1);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_not(ir, f), &m), 1);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_binary(ir, TL_IR_EQ, tl_floormod(ir, tl_mul(ir, n, C(ir, 4)), C(ir, 2)), C(ir, 0)), NULL), 1);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_binary(ir, TL_IR_NE, n, tl_add(ir, n, C(ir, 1))), NULL), 1);
  CHECK_EQ_INT(tl_ir_prove(ir, tl_lt(ir, n, tl_add(ir, n, C(ir, 1))), NULL), 1);
  tl_rangemap_free(&m);
  tl_ir_free(ir);
}

/* ---- simplifier: rules ---------------------------------------------------------------- */

TL_TEST(ir_simplify_rules) {
  tl_ir *ir = tl_ir_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j"), x = V(ir, "x"), y = V(ir, "y"), n = V(ir, "n");
  tl_rangemap m = {0};
  tl_rangemap_set(&m, i, C(ir, 0), C(ir, 16));
  tl_rangemap_set(&m, j, C(ir, 0), C(ir, 8));
#define SIMP(e, s) CHECK_PRINT(ir, simp(ir, (e), &m), s)
  tl_ref i8 = tl_mul(ir, i, C(ir, 8));
  tl_ref i8j = tl_add(ir, i8, j);
  /* canonical sums */
  SIMP(tl_sub(ir, i8j, i8), "j");
  SIMP(tl_add(ir, tl_mul(ir, x, C(ir, 4)), tl_mul(ir, x, C(ir, 4))), "x*8");
  SIMP(tl_add(ir, j, tl_mul(ir, i, C(ir, 8))), "i*8 + j");
  SIMP(tl_add(ir, tl_add(ir, C(ir, 3), x), tl_sub(ir, y, C(ir, 5))), "x + y - 2");
  SIMP(tl_mul(ir, tl_add(ir, tl_mul(ir, x, C(ir, 8)), y), C(ir, 64)), "x*512 + y*64");
  SIMP(tl_sub(ir, C(ir, 7), tl_add(ir, x, C(ir, 1))), "6 - x");
  SIMP(tl_sub(ir, C(ir, 0), x), "0 - x");
  SIMP(tl_sub(ir, tl_sub(ir, C(ir, 0), x), C(ir, 2)), "-2 - x");
  SIMP(tl_sub(ir, tl_mul(ir, x, y), tl_mul(ir, y, x)), "0");
  SIMP(tl_mul(ir, tl_mul(ir, y, C(ir, 2)), tl_mul(ir, x, C(ir, 3))), "x*y*6");
  SIMP(tl_sub(ir, tl_add(ir, x, y), tl_add(ir, y, x)), "0");
  /* floordiv / floormod */
  SIMP(tl_floordiv(ir, i8j, C(ir, 8)), "i");
  SIMP(tl_floormod(ir, i8j, C(ir, 8)), "j");
  SIMP(tl_floordiv(ir, x, C(ir, 1)), "x");
  SIMP(tl_floordiv(ir, tl_floordiv(ir, x, C(ir, 4)), C(ir, 8)), "floordiv(x, 32)");
  SIMP(tl_floormod(ir, tl_floormod(ir, x, C(ir, 16)), C(ir, 8)), "floormod(x, 8)");
  SIMP(tl_floormod(ir, tl_floormod(ir, x, C(ir, 8)), C(ir, 16)), "floormod(x, 8)");   /* bound */
  SIMP(tl_floordiv(ir, j, C(ir, 8)), "0");
  SIMP(tl_floormod(ir, j, C(ir, 8)), "j");
  SIMP(tl_floordiv(ir, tl_add(ir, tl_mul(ir, x, C(ir, 8)), y), C(ir, 8)), "x + floordiv(y, 8)");
  SIMP(tl_floormod(ir, tl_add(ir, tl_mul(ir, x, C(ir, 8)), y), C(ir, 8)), "floormod(y, 8)");
  SIMP(tl_floordiv(ir, tl_mul(ir, x, C(ir, 4)), C(ir, 8)), "floordiv(x, 2)");
  SIMP(tl_floormod(ir, tl_mul(ir, x, C(ir, 4)), C(ir, 8)), "floormod(x, 2)*4");
  SIMP(tl_floordiv(ir, tl_add(ir, i8j, C(ir, 8)), C(ir, 8)), "i + 1");
  SIMP(tl_floordiv(ir, tl_add(ir, i8, C(ir, 9)), C(ir, 8)), "i + 1");
  SIMP(tl_floormod(ir, tl_add(ir, x, C(ir, 9)), C(ir, 8)), "floormod(x + 1, 8)");
  SIMP(tl_floordiv(ir, tl_add(ir, tl_mul(ir, i, C(ir, 4)), tl_floordiv(ir, j, C(ir, 2))), C(ir, 4)), "i");
  SIMP(tl_add(ir, tl_mul(ir, tl_floordiv(ir, x, C(ir, 64)), C(ir, 64)), tl_floormod(ir, x, C(ir, 64))), "x");
  SIMP(tl_add(ir, tl_mul(ir, tl_floordiv(ir, x, C(ir, 4)), C(ir, 8)),
              tl_mul(ir, tl_floormod(ir, x, C(ir, 4)), C(ir, 2))), "x*2");
  SIMP(tl_binary(ir, TL_IR_TRUNCDIV, i8j, C(ir, 8)), "i");
  SIMP(tl_binary(ir, TL_IR_TRUNCMOD, i8j, C(ir, 8)), "j");
  SIMP(tl_binary(ir, TL_IR_TRUNCDIV, tl_add(ir, i, C(ir, 3)), C(ir, 2)), "truncdiv(i + 3, 2)");
  SIMP(tl_binary(ir, TL_IR_TRUNCDIV, x, C(ir, 2)), "truncdiv(x, 2)");
  SIMP(tl_floordiv(ir, C(ir, -7), C(ir, 2)), "-4");
  SIMP(tl_floormod(ir, C(ir, -7), C(ir, 2)), "1");
  SIMP(tl_binary(ir, TL_IR_TRUNCDIV, C(ir, -7), C(ir, 2)), "-3");
  /* min / max */
  SIMP(tl_min(ir, j, C(ir, 8)), "j");
  SIMP(tl_max(ir, j, C(ir, 8)), "8");
  SIMP(tl_min(ir, tl_add(ir, x, C(ir, 1)), tl_add(ir, x, C(ir, 3))), "x + 1");
  SIMP(tl_max(ir, tl_add(ir, x, C(ir, 1)), tl_add(ir, x, C(ir, 3))), "x + 3");
  SIMP(tl_min(ir, y, x), "min(x, y)");
  SIMP(tl_min(ir, C(ir, 4), x), "min(x, 4)");
  SIMP(tl_min(ir, tl_min(ir, x, y), x), "min(x, y)");
  SIMP(tl_min(ir, tl_max(ir, x, y), x), "x");
  SIMP(tl_min(ir, tl_min(ir, x, C(ir, 4)), C(ir, 8)), "min(x, 4)");
  /* comparisons */
  SIMP(tl_lt(ir, i8j, C(ir, 128)), "True");
  SIMP(tl_lt(ir, i8j, C(ir, 127)), "i*8 + j < 127");
  SIMP(tl_binary(ir, TL_IR_GE, j, C(ir, 0)), "True");
  SIMP(tl_binary(ir, TL_IR_EQ, tl_sub(ir, i8j, i8), C(ir, 9)), "False");
  SIMP(tl_lt(ir, tl_add(ir, x, C(ir, 1)), C(ir, 8)), "x < 7");
  SIMP(tl_binary(ir, TL_IR_GT, C(ir, 8), tl_add(ir, x, C(ir, 1))), "x < 7");
  SIMP(tl_lt(ir, C(ir, 0), n), "n > 0");
  SIMP(tl_lt(ir, tl_add(ir, x, y), tl_add(ir, y, C(ir, 2))), "x < 2");
  SIMP(tl_lt(ir, x, tl_add(ir, x, C(ir, 1))), "True");
  SIMP(tl_not(ir, tl_lt(ir, x, y)), "x >= y");
  SIMP(tl_and(ir, tl_lt(ir, x, y), tl_lt(ir, j, C(ir, 8))), "x < y");
  SIMP(tl_binary(ir, TL_IR_OR, tl_lt(ir, x, y), tl_lt(ir, j, C(ir, 8))), "True");
  SIMP(tl_and(ir, tl_lt(ir, x, y), tl_lt(ir, y, x)), "x < y && y < x");   /* no reasoning across */
  /* select / if_then_else */
  SIMP(tl_select(ir, tl_lt(ir, j, C(ir, 8)), x, y), "x");
  SIMP(tl_if_then_else(ir, tl_binary(ir, TL_IR_GE, i, C(ir, 16)), x, y), "y");
  SIMP(tl_select(ir, tl_lt(ir, x, y), tl_add(ir, x, C(ir, 0)), tl_mul(ir, x, C(ir, 1))), "x");
  /* lets */
  tl_ref t = V(ir, "t");
  SIMP(tl_let(ir, t, C(ir, 3), tl_add(ir, t, x)), "x + 3");
  SIMP(tl_let(ir, t, tl_add(ir, x, y), tl_mul(ir, t, t)), "(let t = x + y in t*t)");
  SIMP(tl_let(ir, t, tl_add(ir, x, y), x), "x");
  SIMP(tl_let(ir, t, tl_add(ir, j, C(ir, 8)), tl_floordiv(ir, t, C(ir, 8))), "1");
  /* floats: exact folding only, no reassociation */
  tl_ref f = tl_var_new(ir, "f", TL_T_F32);
  tl_ref h = tl_imm_float(ir, TL_T_F32, 0.5);
  SIMP(tl_add(ir, tl_add(ir, f, h), h), "f + 0.5f + 0.5f");
  SIMP(tl_mul(ir, tl_add(ir, h, h), f), "f");
  SIMP(tl_sub(ir, f, f), "f - f");
  SIMP(tl_binary(ir, TL_IR_DIV, tl_imm_float(ir, TL_T_F32, 1), tl_imm_float(ir, TL_T_F32, 4)), "0.25f");
  tl_rangemap_free(&m);
  tl_ir_free(ir);
#undef SIMP
}

/* ---- simplifier: statements -------------------------------------------------------- */

TL_TEST(ir_simplify_stmt) {
  tl_ir *ir = tl_ir_new();
  tl_ref io = V(ir, "io"), ii = V(ir, "ii"), k = V(ir, "k"), n = V(ir, "n"), x = V(ir, "x");
  tl_ref sh = C(ir, 1024);
  int A = tl_buffer_new(ir, "A", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  tl_ref zero = tl_imm_float(ir, TL_T_F32, 0), one = tl_imm_float(ir, TL_T_F32, 1);
  tl_ref h = tl_add(ir, tl_mul(ir, io, C(ir, 4)), ii);
  tl_ref guarded = tl_if(ir, tl_lt(ir, h, C(ir, 56)), tl_store(ir, A, zero, &h, 1), 0);

  /* the loop ranges imply the guard: it goes */
  tl_ref nest = tl_for(ir, io, C(ir, 0), C(ir, 14), 0, 0, tl_for(ir, ii, C(ir, 0), C(ir, 4), 0, 0, guarded));
  CHECK_PRINT(ir, simp(ir, nest, NULL),
              "for (io, 0, 14) {\n  for (ii, 0, 4) {\n    A[io*4 + ii] = 0.0f\n  }\n}\n");
  /* a tail: it stays */
  nest = tl_for(ir, io, C(ir, 0), C(ir, 15), 0, 0, tl_for(ir, ii, C(ir, 0), C(ir, 4), 0, 0, guarded));
  CHECK_PRINT(ir, simp(ir, nest, NULL),
              "for (io, 0, 15) {\n  for (ii, 0, 4) {\n    if (io*4 + ii < 56) {\n"
              "      A[io*4 + ii] = 0.0f\n    }\n  }\n}\n");
  /* symbolic extent: i < n inside for (i, 0, n) */
  tl_ref g2 = tl_if(ir, tl_lt(ir, io, n), tl_store(ir, A, zero, &io, 1), 0);
  CHECK_PRINT(ir, simp(ir, tl_for(ir, io, C(ir, 0), n, 0, 0, g2), NULL),
              "for (io, 0, n) {\n  A[io] = 0.0f\n}\n");
  tl_ref g3 = tl_if(ir, tl_lt(ir, tl_add(ir, io, C(ir, 1)), n), tl_store(ir, A, zero, &io, 1), 0);
  CHECK_PRINT(ir, simp(ir, tl_for(ir, io, C(ir, 0), n, 0, 0, g3), NULL),
              "for (io, 0, n) {\n  if (io < n - 1) {\n    A[io] = 0.0f\n  }\n}\n");

  /* extent 1: substituted and dropped; extent 0: gone */
  tl_ref ik = tl_add(ir, x, k);
  tl_ref st_k = tl_store(ir, A, one, &ik, 1);
  CHECK_PRINT(ir, simp(ir, tl_for(ir, k, C(ir, 3), C(ir, 1), 0, 0, st_k), NULL), "A[x + 3] = 1.0f\n");
  CHECK_PRINT(ir, simp(ir, tl_for(ir, k, C(ir, 0), C(ir, 0), 0, 0, st_k), NULL), "nop\n");
  CHECK_PRINT(ir, simp(ir, tl_for(ir, k, C(ir, 0), tl_sub(ir, n, n), 0, 0, st_k), NULL), "nop\n");
  tl_ref tx = V(ir, "tx");
  CHECK_PRINT(ir, simp(ir, tl_for(ir, tx, C(ir, 0), C(ir, 1), TL_FOR_THREAD, TL_TAG_THREAD_X,
                                  tl_store(ir, A, one, &tx, 1)), NULL),
              "launch_thread threadIdx.x (tx, 0, 1) {\n  A[0] = 1.0f\n}\n");
  tl_ref empty[3] = {tl_for(ir, k, C(ir, 0), C(ir, 0), 0, 0, st_k), tl_nop(ir),
                     tl_for(ir, k, C(ir, 0), C(ir, 4), 0, 0, tl_if(ir, tl_lt(ir, k, C(ir, 0)), st_k, 0))};
  CHECK_PRINT(ir, simp(ir, tl_ir_make(ir, TL_IR_SEQ, TL_T_VOID, 0, empty, 3), NULL), "nop\n");

  /* ranges drive div/mod inside loops */
  tl_ref i8 = tl_add(ir, tl_mul(ir, io, C(ir, 8)), ii);
  tl_ref q = tl_floordiv(ir, i8, C(ir, 8)), r = tl_floormod(ir, i8, C(ir, 8));
  tl_ref qr[2] = {q, r};
  tl_ref s2[2] = {C(ir, 8), C(ir, 8)};
  int B = tl_buffer_new(ir, "B", TL_T_F32, 2, s2, TL_SCOPE_GLOBAL);
  CHECK_PRINT(ir, simp(ir, tl_for(ir, ii, C(ir, 0), C(ir, 8), 0, 0, tl_store(ir, B, one, qr, 2)), NULL),
              "for (ii, 0, 8) {\n  B[io, ii] = 1.0f\n}\n");
  /* a guard narrows a variable for what it guards */
  tl_ref fd = tl_floordiv(ir, io, C(ir, 8));
  tl_ref narrow = tl_for(ir, io, C(ir, 0), C(ir, 64), 0, 0,
                         tl_if(ir, tl_lt(ir, io, C(ir, 5)), tl_store(ir, A, one, &fd, 1),
                               tl_store(ir, A, zero, &fd, 1)));
  CHECK_PRINT(ir, simp(ir, narrow, NULL),
              "for (io, 0, 64) {\n  if (io < 5) {\n    A[0] = 1.0f\n  } else {\n"
              "    A[floordiv(io, 8)] = 0.0f\n  }\n}\n");

  /* nested guards: the outer condition decides the inner one */
  tl_ref y = V(ir, "y");
  tl_ref inner = tl_if(ir, tl_lt(ir, x, tl_add(ir, y, C(ir, 3))), st_k, tl_store(ir, A, zero, &x, 1));
  tl_ref outer = tl_if(ir, tl_lt(ir, x, y), inner, 0);
  CHECK_PRINT(ir, simp(ir, outer, NULL), "if (x < y) {\n  A[k + x] = 1.0f\n}\n");
  tl_ref outer2 = tl_if(ir, tl_lt(ir, x, y), tl_nop(ir), tl_if(ir, tl_binary(ir, TL_IR_GE, x, y), st_k, 0));
  CHECK_PRINT(ir, simp(ir, outer2, NULL), "if (x >= y) {\n  A[k + x] = 1.0f\n}\n");
  tl_ref outer3 = tl_if(ir, tl_and(ir, tl_lt(ir, x, y), tl_lt(ir, C(ir, 0), x)),
                        tl_if(ir, tl_binary(ir, TL_IR_GE, x, C(ir, 1)), st_k, 0), 0);
  CHECK_PRINT(ir, simp(ir, outer3, NULL), "if (x < y && x > 0) {\n  A[k + x] = 1.0f\n}\n");
  tl_ref eq = tl_if(ir, tl_binary(ir, TL_IR_EQ, x, tl_add(ir, y, C(ir, 2))),
                    tl_if(ir, tl_binary(ir, TL_IR_NE, tl_sub(ir, x, y), C(ir, 2)), st_k, 0), 0);
  CHECK_PRINT(ir, simp(ir, eq, NULL), "nop\n");
  /* decided guards with else branches */
  CHECK_PRINT(ir, simp(ir, tl_if(ir, tl_lt(ir, x, tl_sub(ir, x, C(ir, 1))), st_k, tl_store(ir, A, zero, &x, 1)), NULL),
              "A[x] = 0.0f\n");

  /* lets: constants substitute, others stay and give a range */
  tl_ref t = V(ir, "t");
  tl_ref tt = tl_add(ir, t, x);
  CHECK_PRINT(ir, simp(ir, tl_let_stmt(ir, t, C(ir, 5), tl_store(ir, A, one, &tt, 1)), NULL), "A[x + 5] = 1.0f\n");
  tl_ref ft = tl_floordiv(ir, t, C(ir, 16));
  tl_ref let2 = tl_for(ir, ii, C(ir, 0), C(ir, 8), 0, 0,
                       tl_let_stmt(ir, t, tl_add(ir, ii, C(ir, 2)), tl_store(ir, A, one, &ft, 1)));
  CHECK_PRINT(ir, simp(ir, let2, NULL), "for (ii, 0, 8) {\n  A[0] = 1.0f\n}\n");
  tl_ref let3 = tl_let_stmt(ir, t, tl_mul(ir, x, y), tl_store(ir, A, one, &tt, 1));
  CHECK_PRINT(ir, simp(ir, let3, NULL), "let t = x*y\nA[x + t] = 1.0f\n");

  /* attr / allocate around nothing vanish; statements keep their order */
  int L = tl_buffer_new(ir, "L", TL_T_F32, 1, &sh, TL_SCOPE_LOCAL);
  tl_ref al = tl_alloc(ir, L, tl_attr(ir, "pragma", C(ir, 1), tl_for(ir, k, C(ir, 0), C(ir, 0), 0, 0, st_k)));
  CHECK_PRINT(ir, simp(ir, al, NULL), "nop\n");

  /* the result verifies */
  tl_ctx *ctx = tl_ctx_new();
  tl_ref fv[4] = {n, x, y, io};
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, simp(ir, let3, NULL), fv, 4), 0);
  tl_ctx_free(ctx);
  tl_ir_free(ir);
}

TL_TEST(ir_simplify_vector) {
  tl_ir *ir = tl_ir_new();
  tl_ref i = V(ir, "i"), j = V(ir, "j");
  tl_ref r = tl_ramp(ir, tl_mul(ir, i, C(ir, 8)), C(ir, 1), 4);
  tl_ref b = tl_broadcast(ir, tl_add(ir, j, C(ir, 1)), 4);
  CHECK_PRINT(ir, simp(ir, tl_add(ir, r, b), NULL), "ramp(i*8 + j + 1, 1, 4)");
  CHECK_PRINT(ir, simp(ir, tl_mul(ir, r, tl_broadcast(ir, C(ir, 2), 4)), NULL), "ramp(i*16, 2, 4)");
  CHECK_PRINT(ir, simp(ir, tl_sub(ir, r, r), NULL), "x4(0)");
  CHECK_PRINT(ir, simp(ir, tl_add(ir, b, b), NULL), "x4(j*2 + 2)");
  CHECK_PRINT(ir, simp(ir, tl_ramp(ir, i, tl_sub(ir, j, j), 4), NULL), "x4(i)");
  tl_ir_free(ir);
}

/* ---- performance: a conv2d-shaped loop nest ------------------------------------------ */

TL_TEST(ir_simplify_perf) {
  tl_ir *ir = tl_ir_new();
  /* NCHW conv2d, 1x64x56x56, 64 filters 3x3, pad 1; co and h split by 8 and 4,
  ** indices written as lowering produces them before simplification */
  tl_ref n = V(ir, "n"), coo = V(ir, "co.outer"), ho = V(ir, "h.outer"), w = V(ir, "w");
  tl_ref coi = V(ir, "co.inner"), hi = V(ir, "h.inner"), ci = V(ir, "ci"), kh = V(ir, "kh"), kw = V(ir, "kw");
  tl_ref one = C(ir, 1);
  tl_ref shp[4] = {C(ir, 1), C(ir, 64), C(ir, 58), C(ir, 58)};
  int D = tl_buffer_new(ir, "data", TL_T_F32, 4, shp, TL_SCOPE_GLOBAL);
  tl_ref shw[4] = {C(ir, 64), C(ir, 64), C(ir, 3), C(ir, 3)};
  int W = tl_buffer_new(ir, "weight", TL_T_F32, 4, shw, TL_SCOPE_GLOBAL);
  tl_ref sho[4] = {C(ir, 1), C(ir, 64), C(ir, 56), C(ir, 56)};
  int O = tl_buffer_new(ir, "out", TL_T_F32, 4, sho, TL_SCOPE_GLOBAL);
  tl_ref co = tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){tl_ir_make(ir, TL_IR_MUL, I32, 0, (tl_ref[]){coo, C(ir, 8)}, 2), coi}, 2);
  tl_ref h = tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){tl_ir_make(ir, TL_IR_MUL, I32, 0, (tl_ref[]){ho, C(ir, 4)}, 2), hi}, 2);
  /* flattened row-major index, unsimplified */
  tl_ref oidx = tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){tl_ir_make(ir, TL_IR_MUL, I32, 0, (tl_ref[]){
      tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){tl_ir_make(ir, TL_IR_MUL, I32, 0, (tl_ref[]){
          tl_ir_make(ir, TL_IR_ADD, I32, 0, (tl_ref[]){tl_ir_make(ir, TL_IR_MUL, I32, 0, (tl_ref[]){n, C(ir, 64)}, 2), co}, 2),
          C(ir, 56)}, 2), h}, 2), C(ir, 56)}, 2), w}, 2);
  tl_ref hh = tl_add(ir, h, kh), ww = tl_add(ir, w, kw);
  tl_ref didx = tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, n, C(ir, 64)), ci), C(ir, 58)), hh), C(ir, 58)), ww);
  tl_ref widx = tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, co, C(ir, 64)), ci), C(ir, 3)), kh), C(ir, 3)), kw);
  tl_ref acc = tl_add(ir, tl_load(ir, O, &oidx, 1), tl_mul(ir, tl_load(ir, D, &didx, 1), tl_load(ir, W, &widx, 1)));
  /* padding guard (partly implied), a redundant split guard, an extent-1 loop */
  tl_ref pad = tl_and(ir, tl_binary(ir, TL_IR_GE, hh, C(ir, 1)), tl_lt(ir, hh, C(ir, 57)));
  tl_ref red = tl_if(ir, pad, tl_store(ir, O, acc, &oidx, 1), 0);
  tl_ref body = tl_for(ir, ci, C(ir, 0), C(ir, 64), 0, 0,
                tl_for(ir, kh, C(ir, 0), C(ir, 3), 0, 0, tl_for(ir, kw, C(ir, 0), C(ir, 3), TL_FOR_UNROLLED, 0, red)));
  tl_ref init = tl_store(ir, O, tl_imm_float(ir, TL_T_F32, 0), &oidx, 1);
  tl_ref both[2] = {init, body};
  tl_ref guard = tl_if(ir, tl_lt(ir, h, C(ir, 56)), tl_seq(ir, both, 2), 0);
  tl_ref nest = tl_for(ir, n, C(ir, 0), one, 0, 0,
                tl_for(ir, coo, C(ir, 0), C(ir, 8), TL_FOR_PARALLEL, 0,
                tl_for(ir, ho, C(ir, 0), C(ir, 14), 0, 0,
                tl_for(ir, w, C(ir, 0), C(ir, 56), 0, 0,
                tl_for(ir, coi, C(ir, 0), C(ir, 8), 0, 0,
                tl_for(ir, hi, C(ir, 0), C(ir, 4), TL_FOR_VECTORIZED, 0, guard))))));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  tl_ref s = simp(ir, nest, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
  CHECK_MSG(ms < 10, "conv2d simplify took %.2f ms", ms);
  if (getenv("TL_TEST_VERBOSE")) printf("     conv2d nest simplified in %.3f ms\n", ms);
  char *txt = tl_ir_print(ir, s);
  CHECK_MSG(strstr(txt, "out[co.outer*25088 + co.inner*3136 + h.outer*224 + h.inner*56 + w] = 0.0f"), "%s", txt);
  CHECK_MSG(strstr(txt, "if (h.outer*4 + h.inner < 56)") == NULL, "%s", txt);   /* split guard gone */
  CHECK_MSG(strstr(txt, "for (n,") == NULL, "%s", txt);                         /* extent 1 gone */
  CHECK_MSG(strstr(txt, "if (h.outer*4 + h.inner + kh >= 1 && h.outer*4 + h.inner + kh < 57)"), "%s", txt);
  CHECK_MSG(strstr(txt, "data[ci*3364 + h.outer*232 + h.inner*58 + kh*58 + w + kw]"), "%s", txt);
  CHECK_MSG(strstr(txt, "weight[co.outer*4608 + co.inner*576 + ci*9 + kh*3 + kw]"), "%s", txt);
  free(txt);
  /* simplified once more: nothing changes */
  CHECK_EQ_INT(simp(ir, s, NULL), s);
  tl_ctx *ctx = tl_ctx_new();
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, s, NULL, 0), 0);
  tl_ctx_free(ctx);
  tl_ir_free(ir);
}

/* ---- randomized property tests ----------------------------------------------------- */

typedef struct {
  uint64_t s;
} rng_t;

static uint32_t rnd(rng_t *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(r->s >> 33);
}
static int rint_(rng_t *r, int lo, int hi) { return lo + (int)(rnd(r) % (uint32_t)(hi - lo + 1)); }

static tl_ref mk2(tl_ir *ir, int op, tl_ref a, tl_ref b) {
  tl_ref k[2] = {a, b};
  tl_type t = (tl_ir_opflags[op] & TL_IRF_P) ? TL_T_BOOL : tl_ir_type(ir, a);
  return tl_ir_make(ir, op, t, 0, k, 2);   /* raw: the simplifier sees it all */
}

static tl_ref rand_divisor(tl_ir *ir, rng_t *r, int allow_neg) {
  static const int pos[] = {1, 2, 3, 4, 5, 8, 16};
  static const int neg[] = {-1, -2, -3, -4};
  if (allow_neg && rint_(r, 0, 5) == 0) return C(ir, neg[rint_(r, 0, 3)]);
  return C(ir, pos[rint_(r, 0, 6)]);
}

static tl_ref gen_cond(tl_ir *ir, rng_t *r, const tl_ref *vars, int nv, int depth);

static tl_ref gen_expr(tl_ir *ir, rng_t *r, const tl_ref *vars, int nv, int depth) {
  int choice = depth <= 0 ? rint_(r, 0, 1) : rint_(r, 0, 14);
  tl_ref v = vars[rint_(r, 0, nv - 1)];
  switch (choice) {
  case 0: return v;
  case 1: return C(ir, rint_(r, -6, 12));
  case 2: return mk2(ir, TL_IR_ADD, gen_expr(ir, r, vars, nv, depth - 1), gen_expr(ir, r, vars, nv, depth - 1));
  case 3: return mk2(ir, TL_IR_SUB, gen_expr(ir, r, vars, nv, depth - 1), gen_expr(ir, r, vars, nv, depth - 1));
  case 4: return mk2(ir, TL_IR_MUL, gen_expr(ir, r, vars, nv, depth - 1), C(ir, rint_(r, -4, 9)));
  case 5: return mk2(ir, TL_IR_MUL, gen_expr(ir, r, vars, nv, depth - 2), gen_expr(ir, r, vars, nv, depth - 2));
  case 6: return mk2(ir, TL_IR_FLOORDIV, gen_expr(ir, r, vars, nv, depth - 1), rand_divisor(ir, r, 1));
  case 7: return mk2(ir, TL_IR_FLOORMOD, gen_expr(ir, r, vars, nv, depth - 1), rand_divisor(ir, r, 1));
  case 8: return mk2(ir, TL_IR_TRUNCDIV, gen_expr(ir, r, vars, nv, depth - 1), rand_divisor(ir, r, 1));
  case 9: return mk2(ir, TL_IR_TRUNCMOD, gen_expr(ir, r, vars, nv, depth - 1), rand_divisor(ir, r, 1));
  case 10:
    return mk2(ir, rint_(r, 0, 1) ? TL_IR_MIN : TL_IR_MAX, gen_expr(ir, r, vars, nv, depth - 1),
               gen_expr(ir, r, vars, nv, depth - 1));
  case 11: {
    tl_ref k[3] = {gen_cond(ir, r, vars, nv, depth - 1), gen_expr(ir, r, vars, nv, depth - 1),
                   gen_expr(ir, r, vars, nv, depth - 1)};
    return tl_ir_make(ir, TL_IR_SELECT, I32, 0, k, 3);
  }
  case 12: {
    /* split / fuse debris: floordiv or floormod of (a*c + b) by c, or the fused pair */
    tl_ref c = rand_divisor(ir, r, 0);
    tl_ref a = gen_expr(ir, r, vars, nv, depth - 2), b = gen_expr(ir, r, vars, nv, depth - 2);
    tl_ref s = mk2(ir, TL_IR_ADD, mk2(ir, TL_IR_MUL, a, c), b);
    int which = rint_(r, 0, 2);
    if (which == 2)
      return mk2(ir, TL_IR_ADD, mk2(ir, TL_IR_MUL, mk2(ir, TL_IR_FLOORDIV, b, c), c), mk2(ir, TL_IR_FLOORMOD, b, c));
    return mk2(ir, which ? TL_IR_FLOORDIV : TL_IR_FLOORMOD, s, c);
  }
  case 13: {
    tl_ref t = tl_var_new(ir, "t", I32);
    tl_ref k[3] = {t, gen_expr(ir, r, vars, nv, depth - 1), 0};
    tl_ref vs[4] = {vars[0], nv > 1 ? vars[1] : vars[0], nv > 2 ? vars[2] : vars[0], t};
    k[2] = gen_expr(ir, r, vs, 4, depth - 1);
    return tl_ir_make(ir, TL_IR_LET, I32, 0, k, 3);
  }
  default:
    return mk2(ir, TL_IR_ADD, mk2(ir, TL_IR_MUL, v, C(ir, rint_(r, 1, 8))), gen_expr(ir, r, vars, nv, depth - 1));
  }
}

static tl_ref gen_cond(tl_ir *ir, rng_t *r, const tl_ref *vars, int nv, int depth) {
  static const int cmps[] = {TL_IR_LT, TL_IR_LE, TL_IR_GT, TL_IR_GE, TL_IR_EQ, TL_IR_NE};
  int c = rint_(r, 0, 7);
  if (c == 6 && depth > 0)
    return mk2(ir, rint_(r, 0, 1) ? TL_IR_AND : TL_IR_OR, gen_cond(ir, r, vars, nv, depth - 1),
               gen_cond(ir, r, vars, nv, depth - 1));
  if (c == 7 && depth > 0) {
    tl_ref a = gen_cond(ir, r, vars, nv, depth - 1);
    return tl_ir_make(ir, TL_IR_NOT, TL_T_BOOL, 0, &a, 1);
  }
  return mk2(ir, cmps[rint_(r, 0, 5)], gen_expr(ir, r, vars, nv, depth), gen_expr(ir, r, vars, nv, depth));
}

static uint64_t vid(const tl_ir *ir, tl_ref v) { return tl_ir_node(ir, v)->imm.u; }

/* TL_IR_STRESS=N runs N times the random cases (with other seeds for N > 1). */
static int stress(void) {
  const char *s = getenv("TL_IR_STRESS");
  int n = s ? atoi(s) : 1;
  return n > 0 ? n : 1;
}

TL_TEST(ir_simplify_random) {
  rng_t rng = {12345 + (uint64_t)(stress() - 1)};
  int64_t env[4096];
  for (int cs = 0; cs < 2000 * stress(); cs++) {
    tl_ir *ir = tl_ir_new();
    tl_ref x = V(ir, "x"), y = V(ir, "y"), z = V(ir, "z");
    tl_ref vars[3] = {x, y, z};
    /* x in [0, 7), y in [-3, 5), z in [1, 5) */
    int64_t lo[3] = {0, -3, 1}, ext[3] = {7, 8, 4};
    tl_rangemap m = {0};
    for (int i = 0; i < 3; i++) tl_rangemap_set(&m, vars[i], C(ir, lo[i]), C(ir, ext[i]));
    int nv = rint_(&rng, 2, 3);
    tl_ref e = rint_(&rng, 0, 4) ? gen_expr(ir, &rng, vars, nv, 4) : gen_cond(ir, &rng, vars, nv, 2);
    tl_ref s = simp(ir, e, &m);
    tl_ref s_nomap = simp(ir, e, NULL);
    for (int a = 0; a < ext[0]; a++)
      for (int b = 0; b < ext[1]; b++)
        for (int c = 0; c < ext[2]; c++) {
          env[vid(ir, x)] = lo[0] + a;
          env[vid(ir, y)] = lo[1] + b;
          env[vid(ir, z)] = lo[2] + c;
          int64_t want = eval(ir, e, env), got = eval(ir, s, env), got2 = eval(ir, s_nomap, env);
          if (want != got || want != got2) {
            char *ps = tl_ir_print(ir, e), *ss = tl_ir_print(ir, want != got ? s : s_nomap);
            tl_test_fail(__FILE__, __LINE__, "case %d: x=%d y=%d z=%d:\n  %s = %" PRId64 "\n  %s = %" PRId64
                         " (%s)", cs, (int)(lo[0] + a), (int)(lo[1] + b), (int)(lo[2] + c), ps, want, ss,
                         want != got ? got : got2, want != got ? "with ranges" : "without ranges");
          }
        }
    /* a fixed point, and well-formed */
    tl_ref s2 = simp(ir, s, &m);
    if (s2 != s) {
      char *a = tl_ir_print(ir, s), *b = tl_ir_print(ir, s2), *o = tl_ir_print(ir, e);
      tl_test_fail(__FILE__, __LINE__, "case %d: not a fixed point:\n  %s\n  -> %s\n  -> %s", cs, o, a, b);
    }
    CHECK_EQ_INT(simp(ir, s_nomap, NULL), s_nomap);
    tl_ctx *ctx = tl_ctx_new();
    if (tl_ir_verify(ctx, ir, s, vars, 3)) tl_test_fail(__FILE__, __LINE__, "case %d: %s", cs, tl_errmsg(ctx));
    tl_ctx_free(ctx);
    tl_rangemap_free(&m);
    tl_ir_free(ir);
  }
}

TL_TEST(ir_range_random) {
  rng_t rng = {777 + (uint64_t)(stress() - 1)};
  int64_t env[4096];
  int nsym = 0, nconst = 0;
  for (int cs = 0; cs < 2000 * stress(); cs++) {
    tl_ir *ir = tl_ir_new();
    tl_ref x = V(ir, "x"), y = V(ir, "y"), z = V(ir, "z");
    tl_ref vars[3] = {x, y, z};
    int64_t lo[3] = {0, -3, 1}, ext[3] = {7, 8, 4};
    tl_rangemap all = {0}, relax = {0}, known = {0};
    for (int i = 0; i < 3; i++) tl_rangemap_set(&all, vars[i], C(ir, lo[i]), C(ir, ext[i]));
    /* x, y relaxed; y's range may depend on z: [z - 3, z + 5) (z in [1, 5)) */
    int dep = rint_(&rng, 0, 1);
    tl_rangemap_set(&relax, x, C(ir, 0), C(ir, 7));
    if (dep) tl_rangemap_set(&relax, y, tl_sub(ir, z, C(ir, 4)), C(ir, 8));
    else tl_rangemap_set(&relax, y, C(ir, -3), C(ir, 8));
    tl_rangemap_set(&known, z, C(ir, 1), C(ir, 4));
    tl_ref e = gen_expr(ir, &rng, vars, 3, 4);
    int64_t blo, bhi;
    int hasb = tl_ir_const_bound(ir, e, &all, &blo, &bhi);
    tl_ref mn = 0, ex = 0, cmn = 0, cex = 0;
    int hasr = tl_ir_eval_range(ir, e, &relax, &known, &mn, &ex);
    int hasc = tl_ir_eval_range(ir, e, &all, NULL, &cmn, &cex);
    if (hasr) {
      CHECK(!tl_ir_uses_var(ir, mn, x) && !tl_ir_uses_var(ir, mn, y));
      CHECK(!tl_ir_uses_var(ir, ex, x) && !tl_ir_uses_var(ir, ex, y));
      nsym++;
    }
    if (hasc) {
      CHECK(tl_ir_is_int(ir, cmn, NULL) && tl_ir_is_int(ir, cex, NULL));
      nconst++;
    }
    for (int c = 0; c < ext[2]; c++) {
      env[vid(ir, z)] = lo[2] + c;
      int64_t rmin = hasr ? eval(ir, mn, env) : 0, rext = hasr ? eval(ir, ex, env) : 0;
      int64_t ylo = dep ? lo[2] + c - 4 : -3;
      for (int a = 0; a < ext[0]; a++)
        for (int b = 0; b < ext[1]; b++) {
          env[vid(ir, x)] = a;
          env[vid(ir, y)] = ylo + b;
          int64_t v = eval(ir, e, env);
          char *ps = NULL;
          if (!dep && hasb && (v < blo || v > bhi)) {
            ps = tl_ir_print(ir, e);
            tl_test_fail(__FILE__, __LINE__, "case %d: %s = %" PRId64 " outside const bound [%" PRId64 ", %" PRId64 "]",
                         cs, ps, v, blo, bhi);
          }
          if (hasr && (v < rmin || v >= rmin + rext)) {
            char *pm = tl_ir_print(ir, mn), *pe = tl_ir_print(ir, ex);
            ps = tl_ir_print(ir, e);
            tl_test_fail(__FILE__, __LINE__, "case %d: %s = %" PRId64 " (x=%d y=%d z=%d) outside [%s, +%s) = [%" PRId64
                         ", +%" PRId64 ")", cs, ps, v, a, (int)(ylo + b), (int)(lo[2] + c), pm, pe, rmin, rext);
          }
          if (!dep && hasc) {
            int64_t k0, k1;
            tl_ir_is_int(ir, cmn, &k0);
            tl_ir_is_int(ir, cex, &k1);
            if (v < k0 || v >= k0 + k1) {
              ps = tl_ir_print(ir, e);
              tl_test_fail(__FILE__, __LINE__, "case %d: %s = %" PRId64 " outside [%" PRId64 ", +%" PRId64 ")", cs, ps,
                           v, k0, k1);
            }
          }
        }
    }
    tl_rangemap_free(&all);
    tl_rangemap_free(&relax);
    tl_rangemap_free(&known);
    tl_ir_free(ir);
  }
  /* the analysis answers for nearly everything these expressions contain */
  CHECK_MSG(nsym > 1900 * stress() && nconst > 1900 * stress(), "symbolic %d, constant %d of %d", nsym, nconst,
            2000 * stress());
}

/* A statement interpreter: runs a tree, logging every store as (site, value). */
typedef struct {
  int64_t *env;
  TL_VEC(int64_t) log;
} exec_st;

static void exec(const tl_ir *ir, tl_ref s, exec_st *x) {
  const tl_node *n = tl_ir_node(ir, s);
  switch (n->op) {
  case TL_IR_FOR: {
    tl_ref v = tl_ir_kid(ir, s, 0);
    int64_t mn = eval(ir, tl_ir_kid(ir, s, 1), x->env), ex = eval(ir, tl_ir_kid(ir, s, 2), x->env);
    for (int64_t i = mn; i < mn + ex; i++) {
      x->env[vid(ir, v)] = i;
      exec(ir, tl_ir_kid(ir, s, 3), x);
    }
    break;
  }
  case TL_IR_IF:
    if (eval(ir, tl_ir_kid(ir, s, 0), x->env)) exec(ir, tl_ir_kid(ir, s, 1), x);
    else if (tl_ir_kid(ir, s, 2)) exec(ir, tl_ir_kid(ir, s, 2), x);
    break;
  case TL_IR_LET_STMT:
    x->env[vid(ir, tl_ir_kid(ir, s, 0))] = eval(ir, tl_ir_kid(ir, s, 1), x->env);
    exec(ir, tl_ir_kid(ir, s, 2), x);
    break;
  case TL_IR_SEQ:
    for (int i = 0; i < n->nkids; i++) exec(ir, tl_ir_kid(ir, s, i), x);
    break;
  case TL_IR_STORE:
    TL_VEC_PUSH(x->log, eval(ir, tl_ir_kid(ir, s, 1), x->env));
    TL_VEC_PUSH(x->log, eval(ir, tl_ir_kid(ir, s, 0), x->env));
    break;
  case TL_IR_NOP: break;
  default: tl_test_fail(__FILE__, __LINE__, "exec: unexpected %s", tl_ir_opname[n->op]);
  }
}

static tl_ref gen_stmt(tl_ir *ir, rng_t *r, tl_ref *vars, int nv, int depth, int buf, int *site) {
  int c = depth <= 0 ? 0 : rint_(r, 0, 5);
  switch (c) {
  case 1:
  case 2: {
    tl_ref v = tl_var_new(ir, "i", I32);
    tl_ref mn = rint_(r, 0, 2) ? C(ir, rint_(r, -2, 3)) : gen_expr(ir, r, vars, nv, 1);
    tl_ref ex = rint_(r, 0, 3) ? C(ir, rint_(r, 0, 4)) : mk2(ir, TL_IR_ADD, vars[rint_(r, 0, nv - 1)], C(ir, rint_(r, -1, 2)));
    vars[nv] = v;
    tl_ref body = gen_stmt(ir, r, vars, nv + 1, depth - 1, buf, site);
    return tl_ir_make(ir, TL_IR_FOR, TL_T_VOID, 0, (tl_ref[]){v, mn, ex, body}, 4);
  }
  case 3: {
    tl_ref cond = gen_cond(ir, r, vars, nv, 2);
    tl_ref th = gen_stmt(ir, r, vars, nv, depth - 1, buf, site);
    tl_ref el = rint_(r, 0, 1) ? gen_stmt(ir, r, vars, nv, depth - 1, buf, site) : 0;
    return tl_ir_make(ir, TL_IR_IF, TL_T_VOID, 0, (tl_ref[]){cond, th, el}, 3);
  }
  case 4: {
    tl_ref k[2] = {gen_stmt(ir, r, vars, nv, depth - 1, buf, site), gen_stmt(ir, r, vars, nv, depth - 1, buf, site)};
    return tl_ir_make(ir, TL_IR_SEQ, TL_T_VOID, 0, k, 2);
  }
  case 5: {
    tl_ref t = tl_var_new(ir, "t", I32);
    tl_ref val = gen_expr(ir, r, vars, nv, 2);
    vars[nv] = t;
    tl_ref body = gen_stmt(ir, r, vars, nv + 1, depth - 1, buf, site);
    return tl_ir_make(ir, TL_IR_LET_STMT, TL_T_VOID, 0, (tl_ref[]){t, val, body}, 3);
  }
  default: {
    tl_ref idx = C(ir, (*site)++);
    return tl_store(ir, buf, gen_expr(ir, r, vars, nv, 3), &idx, 1);
  }
  }
}

TL_TEST(ir_simplify_random_stmt) {
  rng_t rng = {99 + (uint64_t)(stress() - 1)};
  int64_t env[4096];
  for (int cs = 0; cs < 600 * stress(); cs++) {
    tl_ir *ir = tl_ir_new();
    tl_ref sh = C(ir, 1000);
    int buf = tl_buffer_new(ir, "B", I32, 1, &sh, TL_SCOPE_GLOBAL);
    tl_ref vars[16];
    vars[0] = V(ir, "x");
    vars[1] = V(ir, "y");
    int site = 0;
    tl_ref s = gen_stmt(ir, &rng, vars, 2, 4, buf, &site);
    tl_rangemap m = {0};
    tl_rangemap_set(&m, vars[0], C(ir, 0), C(ir, 4));
    tl_rangemap_set(&m, vars[1], C(ir, -2), C(ir, 5));
    tl_ref t = simp(ir, s, &m);
    for (int a = 0; a < 4; a++)
      for (int b = -2; b < 3; b++) {
        exec_st e1 = {env, {0}}, e2 = {env, {0}};
        env[vid(ir, vars[0])] = a;
        env[vid(ir, vars[1])] = b;
        exec(ir, s, &e1);
        env[vid(ir, vars[0])] = a;
        env[vid(ir, vars[1])] = b;
        exec(ir, t, &e2);
        int same = e1.log.n == e2.log.n &&
                   (e1.log.n == 0 || !memcmp(e1.log.v, e2.log.v, sizeof(int64_t) * (size_t)e1.log.n));
        if (!same) {
          char *ps = tl_ir_print(ir, s), *pt = tl_ir_print(ir, t);
          tl_test_fail(__FILE__, __LINE__, "case %d (x=%d, y=%d): stores differ (%d vs %d values)\n%s\n--->\n%s", cs,
                       a, b, e1.log.n, e2.log.n, ps, pt);
        }
        TL_VEC_FREE(e1.log);
        TL_VEC_FREE(e2.log);
      }
    if (simp(ir, t, &m) != t) {
      char *ps = tl_ir_print(ir, s), *pt = tl_ir_print(ir, t), *p2 = tl_ir_print(ir, simp(ir, t, &m));
      tl_test_fail(__FILE__, __LINE__, "case %d: not a fixed point:\n%s\n--->\n%s\n--->\n%s", cs, ps, pt, p2);
    }
    tl_ctx *ctx = tl_ctx_new();
    if (tl_ir_verify(ctx, ir, t, vars, 2)) tl_test_fail(__FILE__, __LINE__, "case %d: %s", cs, tl_errmsg(ctx));
    tl_ctx_free(ctx);
    tl_rangemap_free(&m);
    tl_ir_free(ir);
  }
}

/* ---- golden files: tests/ir/simplify/NAME.txt ------------------------------------------------------
**
**   # comment
**   vars i[0,16) j[0,8) x n        variables for the cases below; [lo,hi) a range
**   floordiv(i*8 + j, 8) => i      input => exactly what the simplifier prints
**
** Each case is also checked for a fixed point (the expected text simplifies
** to itself) and evaluated at random points of the ranges (unranged vars in
** [-20, 20]) against the input. TL_UPDATE_GOLDEN=1 rewrites the outputs
** with what the simplifier prints now (review the diff!). */

static void golden_file(const char *path) {
  char *text;
  size_t len;
  tl_ctx *ctx = tl_ctx_new();
  if (tl_read_file(ctx, path, &text, &len)) tl_test_fail(__FILE__, __LINE__, "%s", tl_errmsg(ctx));
  tl_ctx_free(ctx);
  tl_ir *ir = tl_ir_new();
  tl_rangemap m = {0};
  const char *names[32];
  char namebuf[32][32];
  tl_ref vars[32];
  int nvars = 0, ncases = 0, lineno = 0;
  rng_t rng = {4242};
  int64_t env[8192];
  parser p = {ir, NULL, names, vars, 0, {0}};
  int update = getenv("TL_UPDATE_GOLDEN") && !strcmp(getenv("TL_UPDATE_GOLDEN"), "1");
  tl_buf upd = {0};
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    lineno++;
    char *s = line;
    line = nl ? nl + 1 : NULL;
    while (*s == ' ') s++;
    if (update && (!*s || *s == '#' || !strncmp(s, "vars", 4))) tl_buf_printf(&upd, "%s\n", s);
    if (!*s || *s == '#') continue;
    if (!strncmp(s, "vars", 4)) {
      tl_rangemap_free(&m);
      nvars = 0;
      p.nvars = 0;
      for (char *tok = strtok(s + 4, " \t"); tok; tok = strtok(NULL, " \t")) {
        char *br = strchr(tok, '[');
        int nl2 = br ? (int)(br - tok) : (int)strlen(tok);
        snprintf(namebuf[nvars], sizeof namebuf[nvars], "%.*s", nl2, tok);
        names[nvars] = namebuf[nvars];
        vars[nvars] = V(ir, namebuf[nvars]);
        if (br) {
          char *comma = strchr(br, ','), *close = strchr(br, ')');
          CHECK_MSG(comma && close, "%s:%d: bad range '%s'", path, lineno, tok);
          *comma = 0;
          *close = 0;
          tl_ref lo = parse(&p, br + 1), hi = parse(&p, comma + 1);
          CHECK_MSG(!p.err[0], "%s:%d: %s", path, lineno, p.err);
          tl_rangemap_set(&m, vars[nvars], simp(ir, lo, NULL), simp(ir, tl_sub(ir, hi, lo), NULL));
        }
        nvars++;
        p.nvars = nvars;
      }
      continue;
    }
    char *arrow = strstr(s, "=>");
    CHECK_MSG(arrow, "%s:%d: expected 'input => output'", path, lineno);
    *arrow = 0;
    char *want = arrow + 2;
    while (*want == ' ') want++;
    size_t wl = strlen(want);
    while (wl && (want[wl - 1] == ' ' || want[wl - 1] == '\r')) want[--wl] = 0;
    tl_ref in = parse(&p, s);
    CHECK_MSG(!p.err[0], "%s:%d: %s", path, lineno, p.err);
    tl_ref out = simp(ir, in, &m);
    char *got = tl_ir_print(ir, out);
    if (update) {
      size_t il = strlen(s);
      while (il && s[il - 1] == ' ') s[--il] = 0;
      tl_buf_printf(&upd, "%s => %s\n", s, got);
      want = tl_strdup(got);   /* the checks below run against the new text */
    }
    if (strcmp(got, want) != 0)
      tl_test_fail(__FILE__, __LINE__, "%s:%d: %s\n  got:      %s\n  expected: %s", path, lineno, s, got, want);
    free(got);
    tl_ref w = parse(&p, want);
    CHECK_MSG(!p.err[0], "%s:%d: expected text: %s", path, lineno, p.err);
    got = tl_ir_print(ir, simp(ir, w, &m));
    if (strcmp(got, want) != 0)
      tl_test_fail(__FILE__, __LINE__, "%s:%d: expected text is no fixed point: %s -> %s", path, lineno, want, got);
    free(got);
    for (int k = 0, tries = 0; k < 64 && tries < 1000; tries++) {
      /* sample in declaration order so that dependent ranges hold; an
      ** empty range makes the sample void */
      int empty = 0;
      for (int v = 0; v < nvars && !empty; v++) {
        const tl_range *rg = tl_rangemap_get(&m, vars[v]);
        int64_t lo = -20, hi = 20;
        if (rg) {
          lo = eval(ir, rg->min, env);
          hi = lo + eval(ir, rg->extent, env) - 1;
        }
        empty = hi < lo;
        if (!empty) env[vid(ir, vars[v])] = lo + (int64_t)(rnd(&rng) % (uint64_t)(hi - lo + 1));
      }
      if (empty) continue;
      k++;
      int64_t a = eval(ir, in, env), b = eval(ir, out, env);
      CHECK_MSG(a == b, "%s:%d: %s: input gives %" PRId64 ", output %" PRId64, path, lineno, s, a, b);
    }
    if (update) free(want);
    ncases++;
  }
  if (update) {
    ctx = tl_ctx_new();
    CHECK_MSG(!tl_write_file_atomic(ctx, path, upd.s, upd.n), "%s", tl_errmsg(ctx));
    tl_ctx_free(ctx);
    tl_buf_free(&upd);
  }
  CHECK_MSG(ncases > 0, "%s: no cases", path);
  tl_rangemap_free(&m);
  tl_ir_free(ir);
  free(text);
}

TL_TEST(ir_simplify_golden) {
  const char *dir = TL_SOURCE_DIR "/tests/ir/simplify";
  DIR *d = opendir(dir);
  CHECK_MSG(d, "cannot open %s", dir);
  char *files[64];
  int n = 0;
  for (struct dirent *de; (de = readdir(d)) && n < 64;) {
    size_t l = strlen(de->d_name);
    if (l > 4 && !strcmp(de->d_name + l - 4, ".txt")) files[n++] = tl_sprintf("%s/%s", dir, de->d_name);
  }
  closedir(d);
  CHECK_MSG(n > 0, "no golden files in %s", dir);
  for (int i = 0; i < n; i++) {
    golden_file(files[i]);
    free(files[i]);
  }
}
