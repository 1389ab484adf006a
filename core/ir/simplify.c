/*
** simplify.c -- the loop-IR simplifier.
**
** Lowering produces index arithmetic full of split/fuse debris --
** (i_outer*8 + i_inner)*64 + j, floordiv(fused, 64), guards such as
** i_outer*8 + i_inner < 64 that the loop ranges already imply -- and every
** later stage (feature extraction, code generation, the cost model) reads
** the result. tl_ir_simplify rewrites an expression or statement tree
** bottom-up into an equivalent, smaller one:
**
**  - constants fold everywhere (floats only by exact IEEE evaluation of
**    immediates; float expressions are never reassociated);
**  - signed-integer +, -, * are brought to a canonical sum of terms
**    coefficient*atom + constant: like terms merge ((i*8 + j) - i*8 -> j,
**    x*4 + x*4 -> x*8), terms are ordered by decreasing |coefficient| and
**    then by a structural order (variables by creation), the constant goes
**    last: i*512 + k*64 + j - 3; with no positive term the constant leads:
**    6 - x, 0 - x. Products of non-constants are atoms with sorted factors
**    (x*y*6); sums are not distributed over them. floordiv(x, c)*c +
**    floormod(x, c) fuses to x;
**  - floordiv/floormod by a positive constant c: multiples of c come out
**    (floordiv(i*8 + j, 8) -> i + floordiv(j, 8)), and when the rest stays
**    in one period by the ranges it folds (-> i when 0 <= j < 8; floormod
**    -> j); a factor common to all terms cancels (floordiv(x*4, 8) ->
**    floordiv(x, 2)); terms that are multiples of a factor c1 of c with a
**    rest in [0, c1) split: floormod(i*8 + j, 32) -> floormod(i, 4)*8 + j;
**    floordiv(floordiv(x, a), b) -> floordiv(x, a*b); floormod(floormod(x,
**    16), 8) -> floormod(x, 8). truncdiv/truncmod of values proved
**    non-negative follow the same rules; negative divisors only fold;
**  - min/max with a provable order pick a side; comparisons decide when the
**    bound of their canonical difference a - b does; otherwise a common
**    factor divides out (x*4 < 8 -> x < 2) and they read (positive terms)
**    op (negative terms, constant): j + 1 < 8 -> j < 7, 0 < n -> n > 0;
**    select/if_then_else/IF with decided conditions fold; !(a < b) ->
**    a >= b for integers;
**  - ramps and broadcasts: lane-wise identities (ramp(b, s, 4) + x4(c) ->
**    ramp(b + c, s, 4), a stride of 0 is a broadcast);
**  - statements: loops of extent 1 substitute their min and vanish (thread
**    loops stay: they are launch configuration), loops of extent <= 0 and
**    empty bodies (IF, ALLOC, ATTR, LET_STMT, SEQ of NOPs) become NOP,
**    constant lets are substituted, guards that the ranges or the
**    enclosing conditions imply are removed, `if (c) {} else S` becomes
**    `if (!c) S`.
**
** Ranges come from the rangemap argument and, inside statements, from the
** enclosing FOR loops (pushed on a stack while their body is simplified);
** LET / LET_STMT variables get the exact range [value, value]; a variable
** whose range holds one value becomes that value. Symbolic ranges and the
** conditions of enclosing IFs are also kept as facts "G <= 0" in canonical
** form; a comparison whose canonical G differs from a fact by a constant of
** the right sign is decided, so `for (i, 0, n) { if (i < n) ...` and `if (i
** < n) { if (i < n + 1) ...` lose the inner guard and min(x + 1, n) is x + 1
** for x in [0, n). A fact on one variable with constant bounds also
** narrows that variable's range (`if (i < 5)` makes floordiv(i, 8) 0).
** Reasoning is per fact: x < y && y < x is not found contradictory.
**
** Results are memoized per (node, context), where a context id names one
** state of the range / fact / substitution stacks; so a shared subtree is
** simplified once per loop nest and the work stays linear in the tree (a
** conv2d nest takes well under a millisecond). Simplifying a simplified
** tree returns it unchanged (the canonical form is a fixed point; the
** randomized tests check this). Range-based rules assume integer
** arithmetic on int32 / int64 does not overflow, as TVM does; unsigned and
** bool arithmetic is only folded.
*/
#include "ir.h"
#include "arith.h"

#include <limits.h>


/* ---- arithmetic helpers -------------------------------------------------- */

/* wrapping (two's complement) arithmetic on coefficients */
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static int64_t wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }

/* ceil(a / b) for b > 0, without negating a */
static int64_t cdiv64(int64_t a, int64_t b) { return a / b + (a % b != 0 && a > 0); }

static uint64_t uabs64(int64_t a) { return a < 0 ? 0 - (uint64_t)a : (uint64_t)a; }

static uint64_t gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static int is_sint(tl_type t) { return t.code == TL_TC_INT && t.lanes == 1 && t.bits > 0; }

static int is_cmp(int op) { return op >= TL_IR_EQ && op <= TL_IR_GE; }

/* !(a op b) == (a flip(op) b) */
static int cmp_flip(int op) {
  switch (op) {
  case TL_IR_LT: return TL_IR_GE;
  case TL_IR_LE: return TL_IR_GT;
  case TL_IR_GT: return TL_IR_LE;
  case TL_IR_GE: return TL_IR_LT;
  case TL_IR_EQ: return TL_IR_NE;
  default: return TL_IR_EQ;
  }
}

/* (a op b) == (b mirror(op) a) */
static int cmp_mirror(int op) {
  switch (op) {
  case TL_IR_LT: return TL_IR_GT;
  case TL_IR_LE: return TL_IR_GE;
  case TL_IR_GT: return TL_IR_LT;
  case TL_IR_GE: return TL_IR_LE;
  default: return op;
  }
}

/* ---- state ---------------------------------------------------------------- */

typedef struct {
  tl_ref var, to;
} sm_sub;

typedef TL_VEC(tl_ref) refvec;

typedef struct {
  tl_ir *ir;
  tl_rangemap rm;                 /* input ranges, then enclosing loops */
  TL_VEC(sm_sub) subs;            /* var -> replacement */
  refvec facts;                   /* canonical G, each known to be <= 0 */
  uint32_t ctx, nctx;             /* current context id; ids handed out */
  int subdepth;                   /* replacements being simplified */
  uint64_t *mkeys;                /* memo: (ctx << 32 | ref) -> result */
  tl_ref *mvals;
  uint32_t mcap, mcount;
} sm_st;

typedef struct {
  uint32_t ctx;
  int nrm, nsubs, nfacts;
} sm_mark;

static sm_mark sm_enter(sm_st *st) {
  sm_mark m = {st->ctx, st->rm.v.n, st->subs.n, st->facts.n};
  st->ctx = ++st->nctx;
  return m;
}

static void sm_leave(sm_st *st, sm_mark m) {
  st->ctx = m.ctx;
  st->rm.v.n = m.nrm;
  st->subs.n = m.nsubs;
  st->facts.n = m.nfacts;
}

static void push_range(sm_st *st, tl_ref var, tl_ref min, tl_ref extent) {
  tl_range r = {var, min, extent};
  TL_VEC_PUSH(st->rm.v, r);
}

static void push_sub(sm_st *st, tl_ref var, tl_ref to) {
  sm_sub s = {var, to};
  TL_VEC_PUSH(st->subs, s);
}

static tl_ref memo_get(const sm_st *st, tl_ref r) {
  if (!st->mcap) return 0;
  uint64_t key = ((uint64_t)st->ctx << 32) | r;
  for (uint32_t j = (uint32_t)tl_hash_mix(0, key) & (st->mcap - 1); st->mkeys[j]; j = (j + 1) & (st->mcap - 1))
    if (st->mkeys[j] == key) return st->mvals[j];
  return 0;
}

static void memo_put(sm_st *st, tl_ref r, tl_ref v) {
  if ((st->mcount + 1) * 2 > st->mcap) {
    uint32_t nc = st->mcap ? st->mcap * 2 : 256;
    uint64_t *nk = tl_calloc(nc, sizeof *nk);
    tl_ref *nv = tl_malloc(nc * sizeof *nv);
    for (uint32_t i = 0; i < st->mcap; i++) {
      if (!st->mkeys[i]) continue;
      uint32_t j = (uint32_t)tl_hash_mix(0, st->mkeys[i]) & (nc - 1);
      while (nk[j]) j = (j + 1) & (nc - 1);
      nk[j] = st->mkeys[i];
      nv[j] = st->mvals[i];
    }
    free(st->mkeys);
    free(st->mvals);
    st->mkeys = nk;
    st->mvals = nv;
    st->mcap = nc;
  }
  uint64_t key = ((uint64_t)st->ctx << 32) | r;
  uint32_t j = (uint32_t)tl_hash_mix(0, key) & (st->mcap - 1);
  while (st->mkeys[j] && st->mkeys[j] != key) j = (j + 1) & (st->mcap - 1);
  if (!st->mkeys[j]) st->mcount++;
  st->mkeys[j] = key;
  st->mvals[j] = v;
}

static tl_ref imm(sm_st *st, tl_type t, int64_t v) { return tl_imm_int(st->ir, t, v); }

static void bound_of(sm_st *st, tl_ref e, int64_t *lo, int64_t *hi) {
  tl_ir_const_bound_sides(st->ir, e, &st->rm, lo, hi);
}

/* ---- structural order of terms ---------------------------------------------
** A total order on trees, independent of node numbering except through
** variable ids (creation order): op, then immediate, type, operands. */

static int term_cmp(const tl_ir *ir, tl_ref a, tl_ref b) {
  if (a == b) return 0;
  const tl_node *x = &ir->nodes.v[a], *y = &ir->nodes.v[b];
  if (x->op != y->op) return x->op < y->op ? -1 : 1;
  if (x->imm.u != y->imm.u) {
    if (x->op == TL_IR_INT) return x->imm.i < y->imm.i ? -1 : 1;
    if (x->op == TL_IR_FLOAT && x->imm.f != y->imm.f) return x->imm.f < y->imm.f ? -1 : 1;
    return x->imm.u < y->imm.u ? -1 : 1;
  }
  if (x->type.code != y->type.code) return x->type.code < y->type.code ? -1 : 1;
  if (x->type.bits != y->type.bits) return x->type.bits < y->type.bits ? -1 : 1;
  if (x->type.lanes != y->type.lanes) return x->type.lanes < y->type.lanes ? -1 : 1;
  if (x->nkids != y->nkids) return x->nkids < y->nkids ? -1 : 1;
  for (int i = 0; i < x->nkids; i++) {
    int c = term_cmp(ir, ir->kids.v[x->kids + (uint32_t)i], ir->kids.v[y->kids + (uint32_t)i]);
    if (c) return c;
  }
  return a < b ? -1 : 1;   /* distinct nodes never compare equal */
}

/* ---- linear forms ------------------------------------------------------------
** sum(c_i * t_i) + k over atoms t_i (anything but +, -, * by a constant). */

typedef struct {
  tl_ref t;
  int64_t c;
} lterm;

typedef struct {
  TL_VEC(lterm) v;
  int64_t k;
} lin;

static void lin_push(lin *l, tl_ref t, int64_t c) {
  lterm x = {t, c};
  TL_VEC_PUSH(l->v, x);
}

static void lin_free(lin *l) { TL_VEC_FREE(l->v); }

static void lin_copy(lin *dst, const lin *src) {
  memset(dst, 0, sizeof *dst);
  TL_VEC_RESERVE(dst->v, src->v.n);
  if (src->v.n) memcpy(dst->v.v, src->v.v, sizeof(lterm) * (size_t)src->v.n);
  dst->v.n = src->v.n;
  dst->k = src->k;
}

/* order 0: by term (for merging); 1: output order, |c| descending first */
static int lt_cmp(const tl_ir *ir, const lterm *a, const lterm *b, int order) {
  if (order) {
    uint64_t ma = uabs64(a->c), mb = uabs64(b->c);
    if (ma != mb) return ma > mb ? -1 : 1;
  }
  int c = term_cmp(ir, a->t, b->t);
  if (c) return c;
  return a->c == b->c ? 0 : a->c > b->c ? -1 : 1;
}

static void lt_sort(const tl_ir *ir, lterm *v, int n, int order, lterm *tmp) {
  if (n < 2) return;
  if (n <= 8) {
    for (int i = 1; i < n; i++) {
      lterm x = v[i];
      int j = i - 1;
      while (j >= 0 && lt_cmp(ir, &v[j], &x, order) > 0) {
        v[j + 1] = v[j];
        j--;
      }
      v[j + 1] = x;
    }
    return;
  }
  int h = n / 2;
  lt_sort(ir, v, h, order, tmp);
  lt_sort(ir, v + h, n - h, order, tmp);
  int i = 0, j = h, o = 0;
  while (i < h && j < n) tmp[o++] = lt_cmp(ir, &v[j], &v[i], order) < 0 ? v[j++] : v[i++];
  while (i < h) tmp[o++] = v[i++];
  while (j < n) tmp[o++] = v[j++];
  memcpy(v, tmp, sizeof(lterm) * (size_t)n);
}

static void lin_sort(sm_st *st, lin *l, int order) {
  if (l->v.n < 2) return;
  lterm stack[32];
  lterm *tmp = l->v.n <= 32 ? stack : tl_malloc(sizeof(lterm) * (size_t)l->v.n);
  lt_sort(st->ir, l->v.v, l->v.n, order, tmp);
  if (tmp != stack) free(tmp);
}

static void lin_add(sm_st *st, lin *l, tl_ref e, int64_t scale);

static void flatten_factors(sm_st *st, tl_ref e, refvec *fs, int64_t *c) {
  int64_t v;
  if (tl_ir_is_int(st->ir, e, &v)) {
    *c = wmul(*c, v);
  } else if (tl_ir_op(st->ir, e) == TL_IR_MUL) {
    tl_ref a = tl_ir_kid(st->ir, e, 0), b = tl_ir_kid(st->ir, e, 1);
    flatten_factors(st, a, fs, c);
    flatten_factors(st, b, fs, c);
  } else {
    TL_VEC_PUSH(*fs, e);
  }
}

/* scale * a * b into l: a product of non-constants is one atom, its factors
** in structural order, left-deep: x*y*z. */
static void lin_add_mul(sm_st *st, lin *l, tl_ref a, tl_ref b, int64_t scale) {
  int64_t v;
  if (tl_ir_is_int(st->ir, b, &v)) {
    lin_add(st, l, a, wmul(scale, v));
    return;
  }
  if (tl_ir_is_int(st->ir, a, &v)) {
    lin_add(st, l, b, wmul(scale, v));
    return;
  }
  refvec fs = {0};
  int64_t c = 1;
  flatten_factors(st, a, &fs, &c);
  flatten_factors(st, b, &fs, &c);
  if (fs.n == 0) {
    l->k = wadd(l->k, wmul(scale, c));
  } else {
    for (int i = 1; i < fs.n; i++) {   /* insertion sort: products are short */
      tl_ref x = fs.v[i];
      int j = i - 1;
      while (j >= 0 && term_cmp(st->ir, fs.v[j], x) > 0) {
        fs.v[j + 1] = fs.v[j];
        j--;
      }
      fs.v[j + 1] = x;
    }
    tl_ref p = fs.v[0];
    for (int i = 1; i < fs.n; i++) p = tl_binary(st->ir, TL_IR_MUL, p, fs.v[i]);
    lin_push(l, p, wmul(scale, c));
  }
  TL_VEC_FREE(fs);
}

/* Add scale * e (an integer expression) to l. */
static void lin_add(sm_st *st, lin *l, tl_ref e, int64_t scale) {
  tl_ir *ir = st->ir;
  int64_t v;
  switch (tl_ir_op(ir, e)) {
  case TL_IR_INT:
    tl_ir_is_int(ir, e, &v);
    l->k = wadd(l->k, wmul(v, scale));
    return;
  case TL_IR_ADD:
  case TL_IR_SUB: {
    tl_ref a = tl_ir_kid(ir, e, 0), b = tl_ir_kid(ir, e, 1);
    int sub = tl_ir_op(ir, e) == TL_IR_SUB;
    lin_add(st, l, a, scale);
    lin_add(st, l, b, sub ? wneg(scale) : scale);
    return;
  }
  case TL_IR_MUL: {
    tl_ref a = tl_ir_kid(ir, e, 0), b = tl_ir_kid(ir, e, 1);
    lin_add_mul(st, l, a, b, scale);
    return;
  }
  default:
    lin_push(l, e, scale);
    return;
  }
}

/* Merge equal terms, drop zero coefficients. */
static void lin_merge(sm_st *st, lin *l) {
  lin_sort(st, l, 0);
  int w = 0;
  for (int i = 0; i < l->v.n; i++) {
    if (w > 0 && l->v.v[w - 1].t == l->v.v[i].t) {
      l->v.v[w - 1].c = wadd(l->v.v[w - 1].c, l->v.v[i].c);
    } else {
      l->v.v[w++] = l->v.v[i];
    }
  }
  l->v.n = w;
  w = 0;
  for (int i = 0; i < l->v.n; i++)
    if (l->v.v[i].c) l->v.v[w++] = l->v.v[i];
  l->v.n = w;
}

/* floordiv(x, c)*c*k + floormod(x, c)*k -> x*k (and the trunc pair). */
static int lin_fuse_once(sm_st *st, lin *l) {
  tl_ir *ir = st->ir;
  for (int i = 0; i < l->v.n; i++) {
    tl_ref m = l->v.v[i].t;
    int op = tl_ir_op(ir, m);
    if (op != TL_IR_FLOORMOD && op != TL_IR_TRUNCMOD) continue;
    int64_t c;
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, m, 1), &c) || c <= 0) continue;
    int dop = op == TL_IR_FLOORMOD ? TL_IR_FLOORDIV : TL_IR_TRUNCDIV;
    tl_ref x = tl_ir_kid(ir, m, 0), d = tl_ir_kid(ir, m, 1);
    int64_t k = l->v.v[i].c;
    for (int j = 0; j < l->v.n; j++) {
      tl_ref q = l->v.v[j].t;
      if (tl_ir_op(ir, q) != dop || tl_ir_kid(ir, q, 0) != x || tl_ir_kid(ir, q, 1) != d) continue;
      if (l->v.v[j].c != wmul(k, c)) continue;
      l->v.v[i].c = 0;
      l->v.v[j].c = 0;
      lin_add(st, l, x, k);
      lin_merge(st, l);
      return 1;
    }
  }
  return 0;
}

static void lin_norm(sm_st *st, lin *l) {
  lin_merge(st, l);
  for (int guard = 0; guard < 64 && lin_fuse_once(st, l); guard++) {
  }
  lin_sort(st, l, 1);
}

static tl_ref term_times(sm_st *st, tl_ref t, int64_t c, tl_type ty) {
  if (c == 1) return t;
  return tl_binary(st->ir, TL_IR_MUL, t, imm(st, ty, c));
}

/* Rebuild in output order: positive terms lead, subtraction for negative
** coefficients, the constant last; when no term is positive the constant
** leads: 6 - x, 0 - x, -2 - x*4. */
static tl_ref lin_build(sm_st *st, const lin *l, tl_type t) {
  tl_ir *ir = st->ir;
  int first = -1;
  for (int i = 0; i < l->v.n; i++)
    if (l->v.v[i].c > 0) {
      first = i;
      break;
    }
  tl_ref acc;
  int kdone = 0;
  if (first >= 0) {
    acc = term_times(st, l->v.v[first].t, l->v.v[first].c, t);
  } else {
    acc = imm(st, t, l->k);
    kdone = 1;
  }
  for (int i = 0; i < l->v.n; i++) {
    if (i == first) continue;
    int64_t c = l->v.v[i].c;
    if (c > 0) acc = tl_binary(ir, TL_IR_ADD, acc, term_times(st, l->v.v[i].t, c, t));
    else acc = tl_binary(ir, TL_IR_SUB, acc, term_times(st, l->v.v[i].t, wneg(c), t));
  }
  if (!kdone && l->k) {
    if (l->k > 0) acc = tl_binary(ir, TL_IR_ADD, acc, imm(st, t, l->k));
    else acc = tl_binary(ir, TL_IR_SUB, acc, imm(st, t, wneg(l->k)));
  }
  return acc;
}

static void lin_bound(sm_st *st, const lin *l, int64_t *plo, int64_t *phi) {
  int64_t lo = l->k, hi = l->k;
  for (int i = 0; i < l->v.n && (fin(lo) || fin(hi)); i++) {
    int64_t tlo, thi, c = l->v.v[i].c;
    bound_of(st, l->v.v[i].t, &tlo, &thi);
    if (c > 0) {
      lo = sadd(lo, smul(tlo, c));
      hi = sadd(hi, smul(thi, c));
    } else {
      lo = sadd(lo, smul(thi, c));
      hi = sadd(hi, smul(tlo, c));
    }
  }
  *plo = lo;
  *phi = hi;
}

/* Canonical a*sa + b*sb (b may be 0) as an expression. */
static tl_ref canon2(sm_st *st, tl_ref a, int64_t sa, tl_ref b, int64_t sb, int64_t k) {
  lin l = {0};
  lin_add(st, &l, a, sa);
  if (b) lin_add(st, &l, b, sb);
  l.k = wadd(l.k, k);
  lin_norm(st, &l);
  tl_ref r = lin_build(st, &l, tl_ir_type(st->ir, a));
  lin_free(&l);
  return r;
}

/* ---- facts: canonical G with G <= 0 known ------------------------------------ */

/* 1 if some fact F makes G <= 0 follow (G - F is a constant <= 0). */
static int fact_le0(sm_st *st, const lin *g) {
  for (int i = st->facts.n - 1; i >= 0; i--) {
    lin d;
    lin_copy(&d, g);
    lin_add(st, &d, st->facts.v[i], -1);
    lin_merge(st, &d);
    int ok = d.v.n == 0 && d.k <= 0;
    lin_free(&d);
    if (ok) return 1;
  }
  return 0;
}

/* G := s*d + k */
static void lin_affine(lin *g, const lin *d, int64_t s, int64_t k) {
  lin_copy(g, d);
  for (int i = 0; i < g->v.n; i++) g->v.v[i].c = wmul(g->v.v[i].c, s);
  g->k = wadd(wmul(g->k, s), k);
}

static int facts_prove_le0(sm_st *st, const lin *d, int64_t s, int64_t k) {
  if (!st->facts.n) return 0;
  lin g;
  lin_affine(&g, d, s, k);
  /* g*S + k <= 0 <=> S + ceil(k/g) <= 0: the form facts are kept in */
  uint64_t f = 0;
  for (int i = 0; i < g.v.n; i++) f = gcd64(f, uabs64(g.v.v[i].c));
  if (f > 1 && f <= INT64_MAX) {
    for (int i = 0; i < g.v.n; i++) g.v.v[i].c /= (int64_t)f;
    g.k = cdiv64(g.k, (int64_t)f);
  }
  int r = fact_le0(st, &g);
  lin_free(&g);
  return r;
}

/* ---- rules ----------------------------------------------------------------------- */

static tl_ref sx(sm_st *st, tl_ref e);
static tl_ref s_bin(sm_st *st, int op, tl_ref a, tl_ref b);

static tl_ref canon_arith(sm_st *st, int op, tl_ref a, tl_ref b) {
  lin l = {0};
  if (op == TL_IR_MUL) {
    lin_add_mul(st, &l, a, b, 1);
  } else {
    lin_add(st, &l, a, 1);
    lin_add(st, &l, b, op == TL_IR_SUB ? -1 : 1);
  }
  lin_norm(st, &l);
  tl_ref r = lin_build(st, &l, tl_ir_type(st->ir, a));
  lin_free(&l);
  return r;
}

static tl_ref floor_rule(sm_st *st, int op, tl_ref a, int64_t c);

/* L = c1*H + R with c1 dividing c and 0 <= R < c1 (R: the terms whose
** coefficients c1 does not divide, and the constant's remainder):
**   floordiv(L, c) = floordiv(H, c/c1), floormod(L, c) = floormod(H, c/c1)*c1 + R.
** E.g. floormod(i*8 + j, 32) = floormod(i, 4)*8 + j when 0 <= j < 8.
** Tries the factors gcd(coefficient, c) of each term, largest first; 0 if
** none applies. */
static tl_ref partition_rule(sm_st *st, int op, const lin *L, int64_t c, tl_type t) {
  int64_t cand[8];
  int nc = 0;
  for (int i = 0; i < L->v.n && nc < 8; i++) {
    int64_t g = (int64_t)gcd64(uabs64(L->v.v[i].c), (uint64_t)c);
    if (g <= 1 || g >= c) continue;
    int dup = 0;
    for (int j = 0; j < nc; j++) dup |= cand[j] == g;
    if (!dup) cand[nc++] = g;
  }
  for (int i = 1; i < nc; i++)   /* largest first */
    for (int j = i; j > 0 && cand[j] > cand[j - 1]; j--) {
      int64_t x = cand[j];
      cand[j] = cand[j - 1];
      cand[j - 1] = x;
    }
  for (int ci = 0; ci < nc; ci++) {
    int64_t c1 = cand[ci];
    lin H = {0}, R = {0};
    for (int i = 0; i < L->v.n; i++) {
      if (L->v.v[i].c % c1 == 0) lin_push(&H, L->v.v[i].t, L->v.v[i].c / c1);
      else lin_push(&R, L->v.v[i].t, L->v.v[i].c);
    }
    H.k = fdiv64(L->k, c1);
    R.k = fmod64(L->k, c1);
    int64_t lo, hi;
    lin_bound(st, &R, &lo, &hi);
    tl_ref r = 0;
    if (H.v.n && lo >= 0 && hi < c1) {
      lin_norm(st, &H);
      tl_ref q = floor_rule(st, op, lin_build(st, &H, t), c / c1);
      if (op == TL_IR_FLOORDIV) {
        r = q;
      } else {
        lin_add(st, &R, q, c1);
        lin_norm(st, &R);
        r = lin_build(st, &R, t);
      }
    }
    lin_free(&H);
    lin_free(&R);
    if (r) return r;
  }
  return 0;
}

/* floordiv / floormod of a canonical integer expression a by c > 0. */
static tl_ref floor_rule(sm_st *st, int op, tl_ref a, int64_t c) {
  tl_ir *ir = st->ir;
  tl_type t = tl_ir_type(ir, a);
  int div = op == TL_IR_FLOORDIV;
  int64_t v, c1;
  if (c == 1) return div ? a : imm(st, t, 0);
  if (tl_ir_is_int(ir, a, &v)) return imm(st, t, div ? fdiv64(v, c) : fmod64(v, c));
  /* floordiv(floordiv(x, a), b) = floordiv(x, a*b);
  ** floormod(floormod(x, a), b) = floormod(x, b) when b divides a */
  if (tl_ir_op(ir, a) == op && tl_ir_is_int(ir, tl_ir_kid(ir, a, 1), &c1) && c1 > 0) {
    int64_t cc;
    tl_ref x = tl_ir_kid(ir, a, 0);
    if (div && !__builtin_mul_overflow(c1, c, &cc)) return floor_rule(st, op, x, cc);
    if (!div && c1 % c == 0) return floor_rule(st, op, x, c);
  }

  lin L = {0};
  lin_add(st, &L, a, 1);
  lin_merge(st, &L);

  /* a factor common to every coefficient, the constant and c cancels:
  ** floordiv(g*x, g*c) = floordiv(x, c), floormod(g*x, g*c) = g*floormod(x, c) */
  uint64_t g = (uint64_t)c;
  for (int i = 0; i < L.v.n && g > 1; i++) g = gcd64(g, uabs64(L.v.v[i].c));
  if (L.k) g = gcd64(g, uabs64(L.k));
  if (g > 1) {
    for (int i = 0; i < L.v.n; i++) L.v.v[i].c /= (int64_t)g;
    L.k /= (int64_t)g;
    lin_norm(st, &L);
    tl_ref a2 = lin_build(st, &L, t);
    lin_free(&L);
    tl_ref r = floor_rule(st, op, a2, c / (int64_t)g);
    return div ? r : canon2(st, r, (int64_t)g, 0, 0, 0);
  }

  /* a = c*A + B: floordiv(a, c) = A + floordiv(B, c), floormod(a, c) = floormod(B, c) */
  lin A = {0}, B = {0};
  for (int i = 0; i < L.v.n; i++) {
    if (L.v.v[i].c % c == 0) lin_push(&A, L.v.v[i].t, L.v.v[i].c / c);
    else lin_push(&B, L.v.v[i].t, L.v.v[i].c);
  }
  B.k = L.k;
  lin_free(&L);

  tl_ref r = 0;
  int64_t lo, hi;
  lin_bound(st, &B, &lo, &hi);
  if (fin(lo) && fin(hi) && fdiv64(lo, c) == fdiv64(hi, c)) {
    /* B stays within one period [m*c, m*c + c) */
    int64_t m = fdiv64(lo, c);
    if (div) A.k = wadd(A.k, m);
    else B.k = wadd(B.k, wneg(wmul(m, c)));
    lin *res = div ? &A : &B;
    lin_norm(st, res);
    r = lin_build(st, res, t);
    goto done;
  }
  if (A.v.n == 0 && (r = partition_rule(st, op, &B, c, t)) != 0) goto done;
  if (A.v.n == 0) {
    if (!div && uabs64(B.k) >= (uint64_t)c) B.k %= c;   /* floormod(x + 9, 8) = floormod(x + 1, 8) */
    lin_norm(st, &B);
    tl_ref b = lin_build(st, &B, t);
    /* a reduced constant may leave a nested floordiv / floormod */
    r = b != a && tl_ir_op(ir, b) == op ? floor_rule(st, op, b, c) : tl_binary(ir, op, b, imm(st, t, c));
  } else {
    lin_norm(st, &B);
    tl_ref b = lin_build(st, &B, t);
    if (div) {
      lin_add(st, &A, floor_rule(st, op, b, c), 1);
      lin_norm(st, &A);
      r = lin_build(st, &A, t);
    } else {
      r = floor_rule(st, op, b, c);
    }
  }
done:
  lin_free(&A);
  lin_free(&B);
  return r;
}

/* A floordiv / floormod of a non-negative dividend back to the trunc form
** (what C computes directly). */
static tl_ref to_trunc(sm_st *st, tl_ref r) {
  tl_ir *ir = st->ir;
  int op = tl_ir_op(ir, r);
  if (op != TL_IR_FLOORDIV && op != TL_IR_FLOORMOD) return r;
  tl_ref x = tl_ir_kid(ir, r, 0), d = tl_ir_kid(ir, r, 1);
  int64_t c, lo, hi;
  if (!tl_ir_is_int(ir, d, &c) || c <= 0) return r;
  bound_of(st, x, &lo, &hi);
  if (lo < 0) return r;
  return tl_binary(ir, op == TL_IR_FLOORDIV ? TL_IR_TRUNCDIV : TL_IR_TRUNCMOD, x, d);
}

static tl_ref divmod(sm_st *st, int op, tl_ref a, tl_ref b) {
  tl_ir *ir = st->ir;
  int64_t c, v, lo, hi;
  if (!tl_ir_is_int(ir, b, &c) || c == 0 || c == INT64_MIN || tl_ir_is_int(ir, a, &v))
    return tl_binary(ir, op, a, b);
  if (op == TL_IR_FLOORDIV || op == TL_IR_FLOORMOD)
    return c > 0 ? floor_rule(st, op, a, c) : tl_binary(ir, op, a, b);
  if (c == 1) return tl_binary(ir, op, a, b);
  bound_of(st, a, &lo, &hi);
  if (c > 0 && lo >= 0)
    return to_trunc(st, floor_rule(st, op == TL_IR_TRUNCDIV ? TL_IR_FLOORDIV : TL_IR_FLOORMOD, a, c));
  int64_t m = c < 0 ? -c : c;
  if (lo > -m && hi < m) return op == TL_IR_TRUNCDIV ? imm(st, tl_ir_type(ir, a), 0) : a;
  return tl_binary(ir, op, a, b);
}

/* 1 / 0 if `d op 0` is decided by the bounds or the facts, else -1. */
static int decide(sm_st *st, int op, const lin *d) {
  int64_t lo, hi;
  lin_bound(st, d, &lo, &hi);
  switch (op) {
  case TL_IR_LT: if (hi < 0) return 1; if (lo >= 0) return 0; break;
  case TL_IR_LE: if (hi <= 0) return 1; if (lo > 0) return 0; break;
  case TL_IR_GT: if (lo > 0) return 1; if (hi <= 0) return 0; break;
  case TL_IR_GE: if (lo >= 0) return 1; if (hi < 0) return 0; break;
  case TL_IR_EQ: if (lo == 0 && hi == 0) return 1; if (lo > 0 || hi < 0) return 0; break;
  case TL_IR_NE: if (lo == 0 && hi == 0) return 0; if (lo > 0 || hi < 0) return 1; break;
  default: return -1;
  }
  if (!st->facts.n) return -1;
  /* as s*d + k <= 0; its negation is -s*d + 1 - k <= 0 */
  int64_t s = 0, k = 0;
  switch (op) {
  case TL_IR_LT: s = 1, k = 1; break;
  case TL_IR_LE: s = 1, k = 0; break;
  case TL_IR_GT: s = -1, k = 1; break;
  case TL_IR_GE: s = -1, k = 0; break;
  default: {
    int ne = facts_prove_le0(st, d, 1, 1) || facts_prove_le0(st, d, -1, 1);
    int eq = !ne && facts_prove_le0(st, d, 1, 0) && facts_prove_le0(st, d, -1, 0);
    if (ne) return op == TL_IR_NE;
    if (eq) return op == TL_IR_EQ;
    return -1;
  }
  }
  if (facts_prove_le0(st, d, s, k)) return 1;
  if (facts_prove_le0(st, d, -s, 1 - k)) return 0;
  return -1;
}

static tl_ref cmp_rule(sm_st *st, int op, tl_ref a, tl_ref b) {
  tl_ir *ir = st->ir;
  tl_type t = tl_ir_type(ir, a);
  lin d = {0};
  lin_add(st, &d, a, 1);
  lin_add(st, &d, b, -1);
  lin_norm(st, &d);
  /* a common factor of the terms divides out first (x*4 < 8 -> x < 2), so
  ** that the facts, which are reduced alike, can match */
  uint64_t g = 0;
  for (int i = 0; i < d.v.n; i++) g = gcd64(g, uabs64(d.v.v[i].c));
  if (g > 1 && g <= INT64_MAX) {
    int64_t gi = (int64_t)g, k = d.k;
    if ((op == TL_IR_EQ || op == TL_IR_NE) && k % gi != 0) {
      lin_free(&d);
      return tl_bool(ir, op == TL_IR_NE);
    }
    for (int i = 0; i < d.v.n; i++) d.v.v[i].c /= gi;
    switch (op) {
    case TL_IR_LT: case TL_IR_GE: d.k = fdiv64(k, gi); break;          /* floor(k/g) */
    case TL_IR_LE: case TL_IR_GT: d.k = cdiv64(k, gi); break;           /* ceil(k/g) */
    default: d.k = k / gi; break;
    }
  }
  int r = decide(st, op, &d);
  if (r >= 0) {
    lin_free(&d);
    return tl_bool(ir, r);
  }
  /* (positive terms) op (negated negative terms - constant); when no term
  ** is positive, mirror: 7 - j > 0 reads j < 7 */
  int npos = 0;
  for (int i = 0; i < d.v.n; i++) npos += d.v.v[i].c > 0;
  if (npos == 0) {
    for (int i = 0; i < d.v.n; i++) d.v.v[i].c = wneg(d.v.v[i].c);
    d.k = wneg(d.k);
    op = cmp_mirror(op);
  }
  lin P = {0}, N = {0};
  for (int i = 0; i < d.v.n; i++) {
    if (d.v.v[i].c > 0) lin_push(&P, d.v.v[i].t, d.v.v[i].c);
    else lin_push(&N, d.v.v[i].t, wneg(d.v.v[i].c));
  }
  N.k = wneg(d.k);
  tl_ref left = lin_build(st, &P, t), right = lin_build(st, &N, t);
  lin_free(&d);
  lin_free(&P);
  lin_free(&N);
  return tl_binary(ir, op, left, right);
}

static tl_ref minmax_rule(sm_st *st, int op, tl_ref a, tl_ref b) {
  tl_ir *ir = st->ir;
  if (a == b || (tl_ir_is_int(ir, a, NULL) && tl_ir_is_int(ir, b, NULL))) return tl_binary(ir, op, a, b);
  int ismin = op == TL_IR_MIN;
  lin d = {0};
  lin_add(st, &d, a, 1);
  lin_add(st, &d, b, -1);
  lin_merge(st, &d);
  int64_t lo, hi;
  lin_bound(st, &d, &lo, &hi);
  int a_le_b = hi <= 0 || facts_prove_le0(st, &d, 1, 0);
  int b_le_a = !a_le_b && (lo >= 0 || facts_prove_le0(st, &d, -1, 0));
  lin_free(&d);
  if (a_le_b) return ismin ? a : b;
  if (b_le_a) return ismin ? b : a;
  /* absorption: min(min(x, y), x) = min(x, y), min(max(x, y), x) = x */
  int other = ismin ? TL_IR_MAX : TL_IR_MIN;
  int oa = tl_ir_op(ir, a), ob = tl_ir_op(ir, b);
  if (oa == op && (tl_ir_kid(ir, a, 0) == b || tl_ir_kid(ir, a, 1) == b)) return a;
  if (ob == op && (tl_ir_kid(ir, b, 0) == a || tl_ir_kid(ir, b, 1) == a)) return b;
  if (oa == other && (tl_ir_kid(ir, a, 0) == b || tl_ir_kid(ir, a, 1) == b)) return b;
  if (ob == other && (tl_ir_kid(ir, b, 0) == a || tl_ir_kid(ir, b, 1) == a)) return a;
  /* commutative: immediates right, otherwise structural order */
  if (tl_ir_is_int(ir, a, NULL) || (!tl_ir_is_int(ir, b, NULL) && term_cmp(ir, a, b) > 0)) {
    tl_ref x = a;
    a = b;
    b = x;
  }
  return tl_binary(ir, op, a, b);
}

static tl_ref not_rule(sm_st *st, tl_ref a) {
  tl_ir *ir = st->ir;
  int op = tl_ir_op(ir, a);
  if (is_cmp(op)) {
    tl_ref x = tl_ir_kid(ir, a, 0), y = tl_ir_kid(ir, a, 1);
    tl_type t = tl_ir_type(ir, x);
    if (is_sint(t)) return cmp_rule(st, cmp_flip(op), x, y);
    if (op == TL_IR_EQ || op == TL_IR_NE) return tl_binary(ir, cmp_flip(op), x, y);   /* NaN-safe */
  }
  return tl_not(ir, a);
}

static tl_ref mk_ramp(sm_st *st, tl_ref base, tl_ref stride, int lanes) {
  int64_t v;
  if (tl_ir_is_int(st->ir, stride, &v) && v == 0) return tl_broadcast(st->ir, base, lanes);
  return tl_ramp(st->ir, base, stride, lanes);
}

/* Vector arithmetic on broadcasts and ramps: lane-wise identities. */
static tl_ref vec_rule(sm_st *st, int op, tl_ref a, tl_ref b) {
  tl_ir *ir = st->ir;
  tl_type t = tl_ir_type(ir, a);
  int lanes = t.lanes, oa = tl_ir_op(ir, a), ob = tl_ir_op(ir, b);
  if (oa == TL_IR_BROADCAST && ob == TL_IR_BROADCAST)
    return tl_broadcast(ir, s_bin(st, op, tl_ir_kid(ir, a, 0), tl_ir_kid(ir, b, 0)), lanes);
  if (!tl_type_is_int(t) || tl_type_is_bool(t)) return 0;
  if (op == TL_IR_ADD || op == TL_IR_SUB) {
    if (oa == TL_IR_RAMP && ob == TL_IR_BROADCAST)
      return mk_ramp(st, s_bin(st, op, tl_ir_kid(ir, a, 0), tl_ir_kid(ir, b, 0)), tl_ir_kid(ir, a, 1), lanes);
    if (oa == TL_IR_BROADCAST && ob == TL_IR_RAMP) {
      tl_ref base = s_bin(st, op, tl_ir_kid(ir, a, 0), tl_ir_kid(ir, b, 0));
      tl_ref stride = tl_ir_kid(ir, b, 1);
      if (op == TL_IR_SUB) stride = s_bin(st, TL_IR_SUB, imm(st, tl_type_scalar(t), 0), stride);
      return mk_ramp(st, base, stride, lanes);
    }
    if (oa == TL_IR_RAMP && ob == TL_IR_RAMP)
      return mk_ramp(st, s_bin(st, op, tl_ir_kid(ir, a, 0), tl_ir_kid(ir, b, 0)),
                     s_bin(st, op, tl_ir_kid(ir, a, 1), tl_ir_kid(ir, b, 1)), lanes);
  }
  if (op == TL_IR_MUL) {
    if (oa == TL_IR_BROADCAST && ob == TL_IR_RAMP) {
      tl_ref x = a;
      a = b;
      b = x;
      oa = TL_IR_RAMP;
      ob = TL_IR_BROADCAST;
    }
    if (oa == TL_IR_RAMP && ob == TL_IR_BROADCAST) {
      tl_ref x = tl_ir_kid(ir, b, 0);
      return mk_ramp(st, s_bin(st, TL_IR_MUL, tl_ir_kid(ir, a, 0), x),
                     s_bin(st, TL_IR_MUL, tl_ir_kid(ir, a, 1), x), lanes);
    }
  }
  return 0;
}

/* A binary node over simplified operands of one type. */
static tl_ref s_bin(sm_st *st, int op, tl_ref a, tl_ref b) {
  tl_ir *ir = st->ir;
  tl_type t = tl_ir_type(ir, a);
  if (is_sint(t)) {
    switch (op) {
    case TL_IR_ADD: case TL_IR_SUB: case TL_IR_MUL: return canon_arith(st, op, a, b);
    case TL_IR_FLOORDIV: case TL_IR_FLOORMOD: case TL_IR_TRUNCDIV: case TL_IR_TRUNCMOD:
      return divmod(st, op, a, b);
    case TL_IR_MIN: case TL_IR_MAX: return minmax_rule(st, op, a, b);
    case TL_IR_EQ: case TL_IR_NE: case TL_IR_LT: case TL_IR_LE: case TL_IR_GT: case TL_IR_GE:
      return cmp_rule(st, op, a, b);
    default: break;
    }
  } else if (t.lanes > 1) {
    tl_ref r = vec_rule(st, op, a, b);
    if (r) return r;
  }
  if ((op == TL_IR_AND || op == TL_IR_OR) && a == b) return a;
  return tl_binary(ir, op, a, b);
}

static tl_ref rewrite(sm_st *st, int op, tl_type t, uint64_t immv, tl_ref *k, int nk) {
  tl_ir *ir = st->ir;
  uint8_t fl = tl_ir_opflags[op];
  if (nk == 2 && ((fl & (TL_IRF_B | TL_IRF_P)) || op == TL_IR_AND || op == TL_IR_OR) &&
      tl_type_eq(tl_ir_type(ir, k[0]), tl_ir_type(ir, k[1])))
    return s_bin(st, op, k[0], k[1]);
  switch (op) {
  case TL_IR_NOT:
    if (nk == 1) return not_rule(st, k[0]);
    break;
  case TL_IR_SELECT:
    if (nk == 3 && tl_type_eq(tl_ir_type(ir, k[1]), tl_ir_type(ir, k[2]))) return tl_select(ir, k[0], k[1], k[2]);
    break;
  case TL_IR_IF_THEN_ELSE:
    if (nk == 3 && tl_type_eq(tl_ir_type(ir, k[1]), tl_ir_type(ir, k[2])))
      return tl_if_then_else(ir, k[0], k[1], k[2]);
    break;
  case TL_IR_CAST:
    if (nk == 1) return tl_cast(ir, t, k[0]);
    break;
  case TL_IR_RAMP:
    if (nk == 2 && t.lanes > 1) return mk_ramp(st, k[0], k[1], t.lanes);
    break;
  case TL_IR_BROADCAST:
    if (nk == 1 && tl_ir_type(ir, k[0]).lanes == 1 && t.lanes > 1) return tl_broadcast(ir, k[0], t.lanes);
    break;
  default:
    break;
  }
  return tl_ir_make(ir, op, t, immv, k, nk);
}

static tl_ref ss(sm_st *st, tl_ref s);

/* 1 if var occurs in root: a walk with its own visited set, so the cost is
** the subtree's, not the whole table's (tl_ir_uses_var clears a byte per
** node of the IR). */
static int uses_var(const tl_ir *ir, tl_ref root, tl_ref var) {
  refvec stack = {0};
  uint32_t cap = 64, n = 0;
  tl_ref *seen = tl_calloc(cap, sizeof(tl_ref));
  int found = 0;
  TL_VEC_PUSH(stack, root);
  while (stack.n && !found) {
    tl_ref r = stack.v[--stack.n];
    if (!r) continue;
    if (r == var) {
      found = 1;
      break;
    }
    uint32_t j = (uint32_t)tl_hash_mix(0, r) & (cap - 1);
    while (seen[j] && seen[j] != r) j = (j + 1) & (cap - 1);
    if (seen[j]) continue;
    seen[j] = r;
    if (++n * 2 > cap) {
      uint32_t nc = cap * 2;
      tl_ref *ns = tl_calloc(nc, sizeof(tl_ref));
      for (uint32_t i = 0; i < cap; i++) {
        if (!seen[i]) continue;
        uint32_t k = (uint32_t)tl_hash_mix(0, seen[i]) & (nc - 1);
        while (ns[k]) k = (k + 1) & (nc - 1);
        ns[k] = seen[i];
      }
      free(seen);
      seen = ns;
      cap = nc;
    }
    int nk = tl_ir_nkids(ir, r);
    for (int i = 0; i < nk; i++) TL_VEC_PUSH(stack, tl_ir_kid(ir, r, i));
  }
  free(seen);
  TL_VEC_FREE(stack);
  return found;
}

static tl_ref sx_let(sm_st *st, tl_ref e) {
  tl_ir *ir = st->ir;
  tl_ref var = tl_ir_kid(ir, e, 0), val = tl_ir_kid(ir, e, 1), body = tl_ir_kid(ir, e, 2);
  tl_ref v2 = sx(st, val);
  int vop = tl_ir_op(ir, v2);
  sm_mark mk = sm_enter(st);
  if (vop == TL_IR_INT || vop == TL_IR_FLOAT || vop == TL_IR_VAR) {
    push_sub(st, var, v2);
    tl_ref r = sx(st, body);
    sm_leave(st, mk);
    return r;
  }
  if (is_sint(tl_ir_type(ir, var))) push_range(st, var, v2, imm(st, tl_ir_type(ir, var), 1));
  tl_ref b2 = sx(st, body);
  sm_leave(st, mk);
  if (!uses_var(ir, b2, var)) return b2;
  return tl_let(ir, var, v2, b2);
}

static tl_ref sx(sm_st *st, tl_ref e) {
  if (!e) return e;
  tl_ir *ir = st->ir;
  int op = tl_ir_op(ir, e);
  if (op == TL_IR_INT || op == TL_IR_FLOAT) return e;
  if (op == TL_IR_VAR) {
    for (int i = st->subs.n - 1; i >= 0; i--) {
      if (st->subs.v[i].var != e) continue;
      /* the replacement was simplified where it was bound; ranges and
      ** facts here may say more (valid IR never substitutes a var into
      ** itself; the depth cap only guards against malformed trees) */
      if (st->subdepth >= 8) return st->subs.v[i].to;
      st->subdepth++;
      tl_ref r = sx(st, st->subs.v[i].to);
      st->subdepth--;
      return r;
    }
    /* a variable pinned to one value by its range is that value */
    if (is_sint(tl_ir_type(ir, e))) {
      int64_t lo, hi;
      bound_of(st, e, &lo, &hi);
      if (lo == hi) return imm(st, tl_ir_type(ir, e), lo);
    }
    return e;
  }
  if (!(tl_ir_opflags[op] & TL_IRF_E)) return e;   /* malformed: left alone */
  tl_ref m = memo_get(st, e);
  if (m) return m;
  tl_ref r;
  int nk = tl_ir_nkids(ir, e);
  if (op == TL_IR_LET && nk == 3) {
    r = sx_let(st, e);
  } else {
    tl_type t = tl_ir_type(ir, e);
    uint64_t immv = ir->nodes.v[e].imm.u;
    tl_ref stack[8];
    tl_ref *k = nk <= 8 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)nk);
    for (int i = 0; i < nk; i++) k[i] = tl_ir_kid(ir, e, i);
    for (int i = 0; i < nk; i++) k[i] = sx(st, k[i]);
    r = rewrite(st, op, t, immv, k, nk);
    if (k != stack) free(k);
  }
  memo_put(st, e, r);
  return r;
}

/* ---- statements ---------------------------------------------------------------- */

/* Record s*d + k <= 0 (d a merged linear form of type t) as a fact; a fact
** on one variable with constant bounds also narrows its range. */
static void add_fact(sm_st *st, const lin *d, int64_t s, int64_t k, tl_type t) {
  lin g;
  lin_affine(&g, d, s, k);
  lin_norm(st, &g);
  if (g.v.n == 0) {
    lin_free(&g);
    return;
  }
  uint64_t f = 0;   /* reduced as queries are: S + ceil(k/f) <= 0 */
  for (int i = 0; i < g.v.n; i++) f = gcd64(f, uabs64(g.v.v[i].c));
  if (f > 1 && f <= INT64_MAX) {
    for (int i = 0; i < g.v.n; i++) g.v.v[i].c /= (int64_t)f;
    g.k = cdiv64(g.k, (int64_t)f);
  }
  TL_VEC_PUSH(st->facts, lin_build(st, &g, t));
  if (g.v.n == 1 && tl_ir_op(st->ir, g.v.v[0].t) == TL_IR_VAR && uabs64(g.v.v[0].c) == 1) {
    tl_ref v = g.v.v[0].t;
    int64_t lo, hi;
    bound_of(st, v, &lo, &hi);
    if (g.v.v[0].c == 1) hi = TL_MIN(hi, wneg(g.k));   /* v + k <= 0 */
    else lo = TL_MAX(lo, g.k);                         /* -v + k <= 0 */
    if (fin(lo) && fin(hi) && hi >= lo && hi - lo < INT32_MAX)
      push_range(st, v, imm(st, t, lo), imm(st, t, hi - lo + 1));
  }
  lin_free(&g);
}

/* Facts that hold where cond (simplified) is true, or false if neg. */
static void add_facts(sm_st *st, tl_ref c, int neg) {
  tl_ir *ir = st->ir;
  int op = tl_ir_op(ir, c);
  if ((op == TL_IR_AND && !neg) || (op == TL_IR_OR && neg)) {
    tl_ref a = tl_ir_kid(ir, c, 0), b = tl_ir_kid(ir, c, 1);
    add_facts(st, a, neg);
    add_facts(st, b, neg);
    return;
  }
  if (op == TL_IR_NOT) {
    add_facts(st, tl_ir_kid(ir, c, 0), !neg);
    return;
  }
  if (!is_cmp(op)) return;
  tl_ref a = tl_ir_kid(ir, c, 0), b = tl_ir_kid(ir, c, 1);
  tl_type t = tl_ir_type(ir, a);
  if (!is_sint(t)) return;
  if (neg) op = cmp_flip(op);
  lin d = {0};
  lin_add(st, &d, a, 1);
  lin_add(st, &d, b, -1);
  lin_merge(st, &d);
  switch (op) {
  case TL_IR_LT: add_fact(st, &d, 1, 1, t); break;
  case TL_IR_LE: add_fact(st, &d, 1, 0, t); break;
  case TL_IR_GT: add_fact(st, &d, -1, 1, t); break;
  case TL_IR_GE: add_fact(st, &d, -1, 0, t); break;
  case TL_IR_EQ:
    add_fact(st, &d, 1, 0, t);
    add_fact(st, &d, -1, 0, t);
    break;
  default: break;
  }
  lin_free(&d);
}

/* A symbolic range as facts, for what interval arithmetic cannot see:
** min - var <= 0 and var - min - extent + 1 <= 0 (so i < n holds in
** for (i, 0, n) and min(i + 1, n) is i + 1). */
static void push_range_facts(sm_st *st, tl_ref var, tl_ref mn, tl_ref ex) {
  tl_ir *ir = st->ir;
  if (!var || !mn || !ex || !is_sint(tl_ir_type(ir, var))) return;
  if (tl_ir_is_int(ir, mn, NULL) && tl_ir_is_int(ir, ex, NULL)) return;
  if (!tl_type_eq(tl_ir_type(ir, mn), tl_ir_type(ir, var)) || !tl_type_eq(tl_ir_type(ir, ex), tl_ir_type(ir, var)))
    return;
  TL_VEC_PUSH(st->facts, tl_sub(ir, mn, var));
  TL_VEC_PUSH(st->facts, tl_add(ir, tl_sub(ir, tl_sub(ir, var, mn), ex), imm(st, tl_ir_type(ir, var), 1)));
}

static tl_ref ss_for(sm_st *st, tl_ref s) {
  tl_ir *ir = st->ir;
  tl_ref var = tl_ir_kid(ir, s, 0), body = tl_ir_kid(ir, s, 3);
  uint64_t immv = ir->nodes.v[s].imm.u;
  int kind = (int)(immv & 0xff), tag = (int)((immv >> 8) & 0xff);
  tl_ref mn = sx(st, tl_ir_kid(ir, s, 1));
  tl_ref ex = sx(st, tl_ir_kid(ir, s, 2));
  int64_t lo, hi;
  bound_of(st, ex, &lo, &hi);
  if (hi <= 0) return tl_nop(ir);
  sm_mark mk = sm_enter(st);
  if (lo == 1 && hi == 1 && kind != TL_FOR_THREAD) {
    /* one iteration: the variable is its min */
    push_sub(st, var, mn);
    tl_ref b = ss(st, body);
    sm_leave(st, mk);
    return b;
  }
  push_range(st, var, mn, ex);
  push_range_facts(st, var, mn, ex);
  tl_ref b = ss(st, body);
  sm_leave(st, mk);
  if (tl_ir_op(ir, b) == TL_IR_NOP) return b;
  return tl_for(ir, var, mn, ex, kind, tag, b);
}

static tl_ref ss_let(sm_st *st, tl_ref s) {
  tl_ir *ir = st->ir;
  tl_ref var = tl_ir_kid(ir, s, 0), body = tl_ir_kid(ir, s, 2);
  tl_ref v2 = sx(st, tl_ir_kid(ir, s, 1));
  int vop = tl_ir_op(ir, v2);
  sm_mark mk = sm_enter(st);
  if (vop == TL_IR_INT || vop == TL_IR_FLOAT || vop == TL_IR_VAR) {
    push_sub(st, var, v2);
    tl_ref b = ss(st, body);
    sm_leave(st, mk);
    return b;
  }
  if (is_sint(tl_ir_type(ir, var))) {
    push_range(st, var, v2, imm(st, tl_ir_type(ir, var), 1));
    TL_VEC_PUSH(st->facts, tl_sub(ir, var, v2));
    TL_VEC_PUSH(st->facts, tl_sub(ir, v2, var));
  }
  tl_ref b = ss(st, body);
  sm_leave(st, mk);
  if (tl_ir_op(ir, b) == TL_IR_NOP || !uses_var(ir, b, var)) return b;
  return tl_let_stmt(ir, var, v2, b);
}

static tl_ref ss_if(sm_st *st, tl_ref s) {
  tl_ir *ir = st->ir;
  tl_ref then_s = tl_ir_kid(ir, s, 1), else_s = tl_ir_kid(ir, s, 2);
  tl_ref c = sx(st, tl_ir_kid(ir, s, 0));
  int64_t v;
  if (tl_ir_is_int(ir, c, &v)) return v ? ss(st, then_s) : else_s ? ss(st, else_s) : tl_nop(ir);
  sm_mark mk = sm_enter(st);
  add_facts(st, c, 0);
  tl_ref t2 = ss(st, then_s);
  sm_leave(st, mk);
  tl_ref e2 = 0;
  if (else_s) {
    mk = sm_enter(st);
    add_facts(st, c, 1);
    e2 = ss(st, else_s);
    sm_leave(st, mk);
    if (tl_ir_op(ir, e2) == TL_IR_NOP) e2 = 0;
  }
  if (tl_ir_op(ir, t2) == TL_IR_NOP) {
    if (!e2) return t2;
    return tl_if(ir, not_rule(st, c), e2, 0);
  }
  return tl_if(ir, c, t2, e2);
}

static tl_ref ss_compute(sm_st *st, tl_ref s) {
  tl_ir *ir = st->ir;
  int op = tl_ir_op(ir, s), nk = tl_ir_nkids(ir, s);
  uint64_t immv = ir->nodes.v[s].imm.u;
  if (tl_ir_opnkids[op] >= 0 && nk != tl_ir_opnkids[op]) return s;   /* malformed */
  switch (op) {
  case TL_IR_FOR: return ss_for(st, s);
  case TL_IR_LET_STMT: return ss_let(st, s);
  case TL_IR_IF: return ss_if(st, s);
  case TL_IR_STORE:
  case TL_IR_SEQ: {
    tl_ref stack[8];
    tl_ref *k = nk <= 8 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)nk);
    for (int i = 0; i < nk; i++) k[i] = tl_ir_kid(ir, s, i);
    for (int i = 0; i < nk; i++) k[i] = op == TL_IR_SEQ ? ss(st, k[i]) : sx(st, k[i]);
    tl_ref r = op == TL_IR_SEQ ? tl_seq(ir, k, nk) : tl_ir_make(ir, op, TL_T_VOID, immv, k, nk);
    if (k != stack) free(k);
    return r;
  }
  case TL_IR_ALLOC: {
    tl_ref b = ss(st, tl_ir_kid(ir, s, 0));
    return tl_ir_op(ir, b) == TL_IR_NOP ? b : tl_alloc(ir, (int)immv, b);
  }
  case TL_IR_ATTR: {
    tl_ref val = tl_ir_kid(ir, s, 0), body = tl_ir_kid(ir, s, 1);
    tl_ref k[2] = {val ? sx(st, val) : 0, 0};
    k[1] = ss(st, body);
    if (tl_ir_op(ir, k[1]) == TL_IR_NOP) return k[1];
    return tl_ir_make(ir, TL_IR_ATTR, TL_T_VOID, immv, k, 2);
  }
  case TL_IR_EVAL: return tl_eval(ir, sx(st, tl_ir_kid(ir, s, 0)));
  default: return s;
  }
}

static tl_ref ss(sm_st *st, tl_ref s) {
  if (!s) return s;
  int op = tl_ir_op(st->ir, s);
  if (!(tl_ir_opflags[op] & TL_IRF_S) || op == TL_IR_NOP || op == TL_IR_BARRIER) return s;
  tl_ref m = memo_get(st, s);
  if (m) return m;
  tl_ref r = ss_compute(st, s);
  memo_put(st, s, r);
  return r;
}

tl_ref tl_ir_simplify(tl_ir *ir, tl_ref root, const tl_rangemap *ranges) {
  if (!root || root >= (tl_ref)ir->nodes.n) return root;
  sm_st st;
  memset(&st, 0, sizeof st);
  st.ir = ir;
  if (ranges)
    for (int i = 0; i < ranges->v.n; i++) {
      tl_range rg = ranges->v.v[i];
      TL_VEC_PUSH(st.rm.v, rg);
      push_range_facts(&st, rg.var, rg.min, rg.extent);
    }
  tl_ref r = tl_ir_is_stmt(ir, root) ? ss(&st, root) : sx(&st, root);
  tl_rangemap_free(&st.rm);
  TL_VEC_FREE(st.subs);
  TL_VEC_FREE(st.facts);
  free(st.mkeys);
  free(st.mvals);
  return r;
}
