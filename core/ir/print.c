/*
** print.c -- the loop IR as readable, deterministic text.
**
** Every stage that shows IR to a person goes through here: the verifier's
** error messages, the `lower` dump of the REPL, debugging output, and the
** golden tests that compare printed IR across the project. The format is
** close to TVM's:
**
**   parallel (i, 0, 64) {
**     for (j, 0, 8) {
**       if (i*8 + j < 500) {
**         C[i*8 + j] = floordiv(A[i, j], 2) + 1.5f
**       }
**     }
**   }
**
** Expressions are infix with the fewest parentheses that keep the tree
** unambiguous (binary operators associate to the left, so a right operand
** of equal precedence is parenthesized); division-like and min/max/select
** forms are written as calls. Immediates: int32 plain (-3), other integer
** types as int64(5), bool True/False, float32 1.5f, float64 1.5, float16
** float16(1.5). Variable names are printed as given; two distinct variables
** with one name get ".1", ".2" ... in order of first appearance in the
** output, so the text is a function of the tree alone (buffers likewise).
**
** Statements are one per line with two-space indent; LET_STMT and ATTR do
** not open a block (their body follows at the same indent), as in TVM.
** Loops read `for (i, 0, 64) {` (parallel / vectorized / unrolled for the
** other kinds, `launch_thread threadIdx.x (tx, 0, 32) {` for bound ones);
** allocations read `allocate C.local[float32 * 16] {`: the buffer's name
** with ".scope" appended unless it already ends so, the element type, and
** the product of the constant dimensions times any symbolic ones.
** A root that is an expression prints on one line without newline.
** tl_ir_print_short gives a one-line, length-capped rendering for messages;
** it stops walking the tree once the cap is reached, so a huge DAG printed
** as a tree costs no more than the cap.
*/
#include "ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- unique display names ----------------------------------------------- */

typedef struct {
  char **keys;                    /* owned strings; NULL = empty slot */
  uint32_t cap, n;
} name_set;

static uint64_t str_hash(const char *s) { return tl_hash_bytes(s, strlen(s), 0x5eed); }

static int name_set_has(const name_set *s, const char *k) {
  if (!s->cap) return 0;
  for (uint32_t j = (uint32_t)str_hash(k) & (s->cap - 1); s->keys[j]; j = (j + 1) & (s->cap - 1))
    if (strcmp(s->keys[j], k) == 0) return 1;
  return 0;
}

static void name_set_add(name_set *s, char *k) {
  if ((s->n + 1) * 2 > s->cap) {
    uint32_t nc = s->cap ? s->cap * 2 : 64;
    char **nk = tl_calloc(nc, sizeof(char *));
    for (uint32_t i = 0; i < s->cap; i++) {
      if (!s->keys[i]) continue;
      uint32_t j = (uint32_t)str_hash(s->keys[i]) & (nc - 1);
      while (nk[j]) j = (j + 1) & (nc - 1);
      nk[j] = s->keys[i];
    }
    free(s->keys);
    s->keys = nk;
    s->cap = nc;
  }
  uint32_t j = (uint32_t)str_hash(k) & (s->cap - 1);
  while (s->keys[j]) j = (j + 1) & (s->cap - 1);
  s->keys[j] = k;
  s->n++;
}

static void name_set_free(name_set *s) {
  for (uint32_t i = 0; i < s->cap; i++) free(s->keys[i]);
  free(s->keys);
}

/* Variables and buffers share one namespace: `A` the buffer and `A` a loop
** variable would otherwise be confusing in the same listing. */
typedef struct {
  const tl_ir *ir;
  tl_buf *out;
  size_t limit;                   /* stop emitting past this length; 0 = none */
  const char **vname;             /* per var id, assigned on first use */
  const char **bname;             /* per buffer id */
  name_set used;
} pr_st;

static const char *unique_name(pr_st *p, const char *base) {
  if (!base || !*base) base = "v";
  char *cand = tl_strdup(base);
  for (int k = 1; name_set_has(&p->used, cand); k++) {
    free(cand);
    cand = tl_sprintf("%s.%d", base, k);
  }
  name_set_add(&p->used, cand);
  return cand;
}

static const char *var_name(pr_st *p, tl_ref v) {
  uint64_t id = p->ir->nodes.v[v].imm.u;
  if (id >= (uint64_t)p->ir->vars.n) return "<badvar>";
  if (!p->vname[id]) p->vname[id] = unique_name(p, p->ir->vars.v[id].name);
  return p->vname[id];
}

static const char *buf_name(pr_st *p, uint64_t id) {
  if (id >= (uint64_t)p->ir->bufs.n) return NULL;
  if (!p->bname[id]) p->bname[id] = unique_name(p, p->ir->bufs.v[id].name);
  return p->bname[id];
}

/* ---- output helpers ------------------------------------------------------ */

static int full(const pr_st *p) { return p->limit && p->out->n >= p->limit; }
static void puts_(pr_st *p, const char *s) { tl_buf_puts(p->out, s); }
static void indent(pr_st *p, int ind) {
  for (int i = 0; i < ind; i++) tl_buf_puts(p->out, "  ");
}

static int valid_ref(const pr_st *p, tl_ref r) { return r && r < (tl_ref)p->ir->nodes.n; }

/* Shortest decimal that reads back to the same value in the given width. */
static void fmt_float(char *b, size_t cap, double v, int bits) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(b, cap, "%.*g", prec, v);
    double back = strtod(b, NULL);
    if (bits == 32 ? (float)back == (float)v : bits == 16 ? fabs(back - v) <= fabs(v) * 1e-3 : back == v)
      break;
  }
  if (!strpbrk(b, ".eEn")) strcat(b, ".0");   /* 1 -> 1.0; "inf"/"nan" untouched */
}

/* ---- expressions ---------------------------------------------------------- */

enum {
  P_LOWEST = 0, P_OR, P_AND, P_BOR, P_BXOR, P_BAND, P_CMP, P_SHIFT, P_ADD, P_MUL,
  P_UNARY, P_ATOM
};

static const char *infix_sym(int op) {
  switch (op) {
  case TL_IR_ADD: return " + ";
  case TL_IR_SUB: return " - ";
  case TL_IR_MUL: return "*";
  case TL_IR_DIV: return " / ";
  case TL_IR_SHL: return " << ";
  case TL_IR_SHR: return " >> ";
  case TL_IR_BITAND: return " & ";
  case TL_IR_BITOR: return " | ";
  case TL_IR_BITXOR: return " ^ ";
  case TL_IR_EQ: return " == ";
  case TL_IR_NE: return " != ";
  case TL_IR_LT: return " < ";
  case TL_IR_LE: return " <= ";
  case TL_IR_GT: return " > ";
  case TL_IR_GE: return " >= ";
  case TL_IR_AND: return " && ";
  case TL_IR_OR: return " || ";
  default: return NULL;
  }
}

static int infix_prec(int op) {
  switch (op) {
  case TL_IR_OR: return P_OR;
  case TL_IR_AND: return P_AND;
  case TL_IR_BITOR: return P_BOR;
  case TL_IR_BITXOR: return P_BXOR;
  case TL_IR_BITAND: return P_BAND;
  case TL_IR_EQ: case TL_IR_NE: case TL_IR_LT: case TL_IR_LE: case TL_IR_GT: case TL_IR_GE:
    return P_CMP;
  case TL_IR_SHL: case TL_IR_SHR: return P_SHIFT;
  case TL_IR_ADD: case TL_IR_SUB: return P_ADD;
  case TL_IR_MUL: case TL_IR_DIV: return P_MUL;
  default: return -1;
  }
}

/* The precedence at which e prints (P_ATOM for call-like forms). */
static int expr_prec(const pr_st *p, tl_ref e) {
  if (!valid_ref(p, e)) return P_ATOM;
  const tl_node *n = &p->ir->nodes.v[e];
  int pr = infix_prec(n->op);
  if (pr >= 0 && n->nkids == 2) return pr;
  if (n->op == TL_IR_NOT) return P_UNARY;
  if (n->op == TL_IR_INT && n->imm.i < 0 && tl_type_eq(n->type, TL_T_I32)) return P_UNARY;
  if (n->op == TL_IR_FLOAT && (n->imm.f < 0 || signbit(n->imm.f))) return P_UNARY;
  return P_ATOM;
}

static void pr_expr(pr_st *p, tl_ref e, int minprec);

static void pr_args(pr_st *p, const tl_ref *k, int n) {
  for (int i = 0; i < n; i++) {
    if (i) puts_(p, ", ");
    pr_expr(p, k[i], P_LOWEST);
  }
}

static void pr_call(pr_st *p, const char *fn, const tl_ref *k, int n) {
  puts_(p, fn);
  puts_(p, "(");
  pr_args(p, k, n);
  puts_(p, ")");
}

static void pr_imm(pr_st *p, const tl_node *n) {
  char tb[24], b[64];
  if (n->op == TL_IR_INT) {
    if (tl_type_is_bool(n->type)) {
      puts_(p, n->imm.i ? "True" : "False");
    } else if (tl_type_eq(n->type, TL_T_I32)) {
      tl_buf_printf(p->out, "%" PRId64, n->imm.i);
    } else if (n->type.code == TL_TC_UINT && n->type.bits == 64) {
      tl_buf_printf(p->out, "%s(%" PRIu64 ")", tl_type_str(n->type, tb), n->imm.u);
    } else {
      tl_buf_printf(p->out, "%s(%" PRId64 ")", tl_type_str(n->type, tb), n->imm.i);
    }
    return;
  }
  double v = n->imm.f;
  fmt_float(b, sizeof b, v, n->type.bits);
  if (n->type.bits == 32 && isfinite(v)) tl_buf_printf(p->out, "%sf", b);
  else if (n->type.bits == 64 && isfinite(v)) puts_(p, b);
  else tl_buf_printf(p->out, "%s(%s)", tl_type_str(n->type, tb), b);
}

static void pr_load_idx(pr_st *p, uint64_t buf, const tl_ref *k, int n) {
  const char *bn = buf_name(p, buf);
  if (bn) puts_(p, bn);
  else tl_buf_printf(p->out, "<buf %" PRIu64 ">", buf);
  puts_(p, "[");
  pr_args(p, k, n);
  puts_(p, "]");
}

static void pr_expr(pr_st *p, tl_ref e, int minprec) {
  if (full(p)) return;
  if (!e) {
    puts_(p, "<none>");
    return;
  }
  if (e >= (tl_ref)p->ir->nodes.n) {
    tl_buf_printf(p->out, "<bad ref %u>", e);
    return;
  }
  const tl_ir *ir = p->ir;
  const tl_node *n = &ir->nodes.v[e];
  const tl_ref *k = ir->kids.v + n->kids;
  char tb[24];
  if (n->op >= TL_IR__MAX) {
    tl_buf_printf(p->out, "<bad op %u>", n->op);
    return;
  }
  if (!(tl_ir_opflags[n->op] & TL_IRF_E)) {
    tl_buf_printf(p->out, "<stmt %s>", tl_ir_opname[n->op]);
    return;
  }
  int prec = expr_prec(p, e);
  int paren = prec < minprec;
  if (paren) puts_(p, "(");
  const char *sym = infix_sym(n->op);
  if (sym && n->nkids == 2) {
    /* left-associative: a - (b - c), a - b - c; comparisons never chain */
    int lmin = prec == P_CMP ? prec + 1 : prec;
    pr_expr(p, k[0], lmin);
    puts_(p, sym);
    pr_expr(p, k[1], prec + 1);
  } else {
    switch (n->op) {
    case TL_IR_INT:
    case TL_IR_FLOAT: pr_imm(p, n); break;
    case TL_IR_VAR: puts_(p, var_name(p, e)); break;
    case TL_IR_FLOORDIV: pr_call(p, "floordiv", k, n->nkids); break;
    case TL_IR_FLOORMOD: pr_call(p, "floormod", k, n->nkids); break;
    case TL_IR_TRUNCDIV: pr_call(p, "truncdiv", k, n->nkids); break;
    case TL_IR_TRUNCMOD: pr_call(p, "truncmod", k, n->nkids); break;
    case TL_IR_MIN: pr_call(p, "min", k, n->nkids); break;
    case TL_IR_MAX: pr_call(p, "max", k, n->nkids); break;
    case TL_IR_NOT:
      puts_(p, "!");
      pr_expr(p, n->nkids ? k[0] : 0, P_UNARY);
      break;
    case TL_IR_SELECT: pr_call(p, "select", k, n->nkids); break;
    case TL_IR_IF_THEN_ELSE: pr_call(p, "if_then_else", k, n->nkids); break;
    case TL_IR_CAST: pr_call(p, tl_type_str(n->type, tb), k, n->nkids); break;
    case TL_IR_LOAD: pr_load_idx(p, n->imm.u, k, n->nkids); break;
    case TL_IR_CALL:
      if (n->imm.u < TL_INTRIN__MAX) {
        pr_call(p, tl_ir_intrinname[n->imm.u], k, n->nkids);
      } else {
        tl_buf_printf(p->out, "call%" PRIu64, n->imm.u);
        pr_call(p, "", k, n->nkids);
      }
      break;
    case TL_IR_RAMP:
      puts_(p, "ramp(");
      pr_args(p, k, n->nkids);
      tl_buf_printf(p->out, ", %d)", n->type.lanes);
      break;
    case TL_IR_BROADCAST:
      tl_buf_printf(p->out, "x%d", n->type.lanes);
      pr_call(p, "", k, n->nkids);
      break;
    case TL_IR_LET:
      if (n->nkids != 3) {
        pr_call(p, "let", k, n->nkids);
        break;
      }
      puts_(p, "(let ");
      pr_expr(p, k[0], P_LOWEST);
      puts_(p, " = ");
      pr_expr(p, k[1], P_LOWEST);
      puts_(p, " in ");
      pr_expr(p, k[2], P_LOWEST);
      puts_(p, ")");
      break;
    default:
      /* a malformed infix node (wrong operand count) or a future op */
      pr_call(p, tl_ir_opname[n->op], k, n->nkids);
      break;
    }
  }
  if (paren) puts_(p, ")");
}

/* ---- statements ------------------------------------------------------------ */

static void pr_stmt(pr_st *p, tl_ref s, int ind);

static void pr_block(pr_st *p, tl_ref body, int ind) {
  puts_(p, " {\n");
  pr_stmt(p, body, ind + 1);
  indent(p, ind);
  puts_(p, "}\n");
}

static void pr_alloc_size(pr_st *p, const tl_buffer *b) {
  /* constant dimensions multiply into one number; symbolic ones follow it */
  int64_t c = 1;
  int nsym = 0;
  for (int i = 0; i < b->ndim; i++) {
    int64_t v;
    if (valid_ref(p, b->shape[i]) && tl_ir_is_int(p->ir, b->shape[i], &v)) c *= v;
    else nsym++;
  }
  if (c != 1 || nsym == 0) tl_buf_printf(p->out, " * %" PRId64, c);
  for (int i = 0; i < b->ndim; i++) {
    if (valid_ref(p, b->shape[i]) && tl_ir_is_int(p->ir, b->shape[i], NULL)) continue;
    puts_(p, " * ");
    pr_expr(p, b->shape[i], P_MUL + 1);
  }
}

static void pr_stmt(pr_st *p, tl_ref s, int ind) {
  if (full(p)) return;
  const tl_ir *ir = p->ir;
  if (!valid_ref(p, s) || ir->nodes.v[s].op >= TL_IR__MAX ||
      !(tl_ir_opflags[ir->nodes.v[s].op] & TL_IRF_S)) {
    /* an expression (or garbage) where a statement belongs: show it anyway */
    indent(p, ind);
    pr_expr(p, s, P_LOWEST);
    puts_(p, "\n");
    return;
  }
  const tl_node *n = &ir->nodes.v[s];
  const tl_ref *k = ir->kids.v + n->kids;
  char tb[24];
  if (n->op == TL_IR_SEQ) {
    for (int i = 0; i < n->nkids; i++) pr_stmt(p, k[i], ind);
    return;
  }
  if (n->nkids != tl_ir_opnkids[n->op] && tl_ir_opnkids[n->op] >= 0) {
    indent(p, ind);
    tl_buf_printf(p->out, "<malformed %s>\n", tl_ir_opname[n->op]);
    return;
  }
  indent(p, ind);
  switch (n->op) {
  case TL_IR_FOR: {
    int kind = (int)(n->imm.u & 0xff), tag = (int)((n->imm.u >> 8) & 0xff);
    static const char *const kw[] = {"for", "parallel", "vectorized", "unrolled"};
    if (kind == TL_FOR_THREAD || kind == TL_FOR_VTHREAD) {
      const char *tn = tag > 0 && tag < 8 ? tl_ir_tagname[tag] : "vthread";
      tl_buf_printf(p->out, "launch_thread %s (", tn);
    } else if (kind >= 0 && kind < 4) {
      tl_buf_printf(p->out, "%s (", kw[kind]);
    } else {
      tl_buf_printf(p->out, "for<%d> (", kind);
    }
    pr_args(p, k, 3);
    puts_(p, ")");
    pr_block(p, k[3], ind);
    break;
  }
  case TL_IR_IF:
    puts_(p, "if (");
    pr_expr(p, k[0], P_LOWEST);
    puts_(p, ") {\n");
    pr_stmt(p, k[1], ind + 1);
    if (k[2]) {
      indent(p, ind);
      puts_(p, "} else {\n");
      pr_stmt(p, k[2], ind + 1);
    }
    indent(p, ind);
    puts_(p, "}\n");
    break;
  case TL_IR_STORE:
    pr_load_idx(p, n->imm.u, k + 1, n->nkids - 1);
    puts_(p, " = ");
    pr_expr(p, n->nkids ? k[0] : 0, P_LOWEST);
    puts_(p, "\n");
    break;
  case TL_IR_ALLOC: {
    const char *bn = buf_name(p, n->imm.u);
    if (!bn) {
      tl_buf_printf(p->out, "allocate <buf %" PRIu64 ">", n->imm.u);
      pr_block(p, k[0], ind);
      break;
    }
    const tl_buffer *b = &ir->bufs.v[n->imm.u];
    const char *scope = b->scope >= 0 && b->scope < 3 ? tl_ir_scopename[b->scope] : "?";
    size_t bl = strlen(bn), sl = strlen(scope);
    int has_scope = bl > sl && bn[bl - sl - 1] == '.' && strcmp(bn + bl - sl, scope) == 0;
    tl_buf_printf(p->out, "allocate %s%s%s[%s", bn, has_scope ? "" : ".", has_scope ? "" : scope,
                  tl_type_str(b->dtype, tb));
    pr_alloc_size(p, b);
    puts_(p, "]");
    pr_block(p, k[0], ind);
    break;
  }
  case TL_IR_ATTR: {
    const char *key = n->imm.u < (uint64_t)ir->strs.n ? ir->strs.v[n->imm.u] : "?";
    tl_buf_printf(p->out, "// attr [%s]", key);
    if (k[0]) {
      puts_(p, " = ");
      pr_expr(p, k[0], P_LOWEST);
    }
    puts_(p, "\n");
    pr_stmt(p, k[1], ind);
    break;
  }
  case TL_IR_LET_STMT:
    puts_(p, "let ");
    pr_expr(p, k[0], P_LOWEST);
    puts_(p, " = ");
    pr_expr(p, k[1], P_LOWEST);
    puts_(p, "\n");
    pr_stmt(p, k[2], ind);
    break;
  case TL_IR_BARRIER:
    tl_buf_printf(p->out, "barrier(%s)\n",
                  n->imm.u < 3 ? tl_ir_scopename[n->imm.u] : "?");
    break;
  case TL_IR_EVAL:
    pr_expr(p, k[0], P_LOWEST);
    puts_(p, "\n");
    break;
  case TL_IR_NOP:
    puts_(p, "nop\n");
    break;
  default:
    tl_buf_printf(p->out, "<%s>\n", tl_ir_opname[n->op]);
    break;
  }
}

/* ---- entry points ----------------------------------------------------------- */

static void print_into(const tl_ir *ir, tl_ref root, tl_buf *out, size_t limit) {
  pr_st p;
  memset(&p, 0, sizeof p);
  p.ir = ir;
  p.out = out;
  p.limit = limit ? out->n + limit : 0;
  p.vname = tl_calloc((size_t)ir->vars.n + 1, sizeof(char *));
  p.bname = tl_calloc((size_t)ir->bufs.n + 1, sizeof(char *));
  tl_buf_puts(out, "");   /* a NUL-terminated string even if nothing prints */
  if (valid_ref(&p, root) && ir->nodes.v[root].op < TL_IR__MAX &&
      (tl_ir_opflags[ir->nodes.v[root].op] & TL_IRF_S))
    pr_stmt(&p, root, 0);
  else
    pr_expr(&p, root, P_LOWEST);
  /* names point into the set, which owns them */
  free(p.vname);
  free(p.bname);
  name_set_free(&p.used);
}

void tl_ir_print_buf(const tl_ir *ir, tl_ref root, tl_buf *out) { print_into(ir, root, out, 0); }

char *tl_ir_print(const tl_ir *ir, tl_ref root) {
  tl_buf b = {0};
  print_into(ir, root, &b, 0);
  return tl_buf_take(&b);
}

char *tl_ir_print_short(const tl_ir *ir, tl_ref root, size_t max) {
  if (max < 8) max = 8;
  tl_buf b = {0};
  print_into(ir, root, &b, max + 1);
  /* fold lines: "for (i, 0, 4) {\n  A[i] = 0\n}\n" -> "for (i, 0, 4) { A[i] = 0 }" */
  size_t w = 0;
  for (size_t r = 0; r < b.n; r++) {
    char c = b.s[r];
    if (c == '\n') {
      while (r + 1 < b.n && b.s[r + 1] == ' ') r++;
      if (r + 1 < b.n && w > 0) b.s[w++] = ' ';
      continue;
    }
    b.s[w++] = c;
  }
  b.n = w;
  if (b.n > max) {
    b.n = max - 3;
    memcpy(b.s + b.n, "...", 3);
    b.n += 3;
  }
  if (b.s) b.s[b.n] = 0;
  return tl_buf_take(&b);
}
