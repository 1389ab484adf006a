/*
** bound.c -- range analysis over the loop IR.
**
** Three questions are answered here, for the simplifier and for bound
** inference in lowering:
**
**   tl_ir_const_bound    constant [lo, hi] of an integer expression, given
**                        the ranges of its variables (interval arithmetic);
**   tl_ir_eval_range     the symbolic region [min, min + extent) that an
**                        expression sweeps when some variables ("relax")
**                        run over their whole ranges and the others stay
**                        fixed -- e.g. the producer rows a consumer's inner
**                        loops read: A[i_outer*8 + i_inner], i_inner relaxed
**                        over [0, 8), touches min i_outer*8, extent 8;
**   tl_ir_prove          true / false / unknown for a condition.
**
** Constant bounds: each node gets an interval with INT64_MIN / INT64_MAX
** standing for "unbounded"; arithmetic saturates (an overflow widens to
** unbounded, never wraps into a wrong finite bound). A variable's range
** {min, extent} may be symbolic; its bound is [lo(min), hi(min) + hi(extent)
** - 1], resolving through other ranges to a fixed depth. Narrow integer
** types clamp to their value range; int32/int64 expressions are assumed
** not to overflow (as TVM does). Division and modulo by constants are
** exact (floormod by c > 0 is [0, c-1] unless the dividend stays within one
** period). Results are memoized per call, so shared subtrees cost once.
**
** Symbolic ranges: the expression is first simplified with both range maps
** (so like terms cancel: i*8 + j - i*8 is j), then evaluated bottom-up into
** [lo, hi] expression pairs. Sums, differences, products by values of known
** sign, floordiv/truncdiv by positive values, min/max, select and widening
** casts are exact interval rules, so affine expressions whose relaxed
** variables occur once get tight results; a variable occurring in several
** places, or a non-monotone operator, gives a correct over-approximation.
** A side that cannot be expressed falls back to a constant bound; if none
** exists the range is unknown (return 0). min and extent are simplified
** against the known ranges, so constant inputs give constant results.
**
** tl_ir_prove runs the simplifier on the condition (which decides
** comparisons from the constant bound of their canonical difference a - b
** and folds &&, ||, !) and reports whether it became a constant.
*/
#include "ir.h"
#include "arith.h"

#include <limits.h>

#define VAR_DEPTH_MAX 16            /* symbolic ranges resolved this deep */

/* ---- rangemap -------------------------------------------------------------- */

void tl_rangemap_set(tl_rangemap *m, tl_ref var, tl_ref min, tl_ref extent) {
  for (int i = m->v.n - 1; i >= 0; i--) {
    if (m->v.v[i].var == var) {
      m->v.v[i].min = min;
      m->v.v[i].extent = extent;
      return;
    }
  }
  tl_range r = {var, min, extent};
  TL_VEC_PUSH(m->v, r);
}

const tl_range *tl_rangemap_get(const tl_rangemap *m, tl_ref var) {
  if (!m) return NULL;
  for (int i = m->v.n - 1; i >= 0; i--)     /* innermost (latest) first */
    if (m->v.v[i].var == var) return &m->v.v[i];
  return NULL;
}

void tl_rangemap_free(tl_rangemap *m) { TL_VEC_FREE(m->v); }

/* ---- saturating interval arithmetic --------------------------------------- */

typedef struct {
  int64_t lo, hi;                 /* lo never POS_INF, hi never NEG_INF */
} ival;

static ival iv(int64_t lo, int64_t hi) {
  ival r = {lo, hi};
  return r;
}
static ival iv_all(void) { return iv(NEG_INF, POS_INF); }

static int64_t sneg(int64_t x) { return x == NEG_INF ? POS_INF : x == POS_INF ? NEG_INF : -x; }


/* Quotient with infinite operands as limits; *ok = 0 for inf / inf. */
static int64_t sdiv(int64_t a, int64_t b, int floor, int *ok) {
  if (!fin(a) && !fin(b)) {
    *ok = 0;
    return 0;
  }
  if (!fin(a)) return (a < 0) != (b < 0) ? NEG_INF : POS_INF;
  if (!fin(b)) {
    if (!floor || a == 0) return 0;
    return (a < 0) != (b < 0) ? -1 : 0;   /* floor of a tiny fraction */
  }
  if (a == INT64_MIN + 1 && b == -1) return POS_INF;
  return floor ? fdiv64(a, b) : a / b;
}

static ival iv_add(ival a, ival b) { return iv(sadd(a.lo, b.lo), sadd(a.hi, b.hi)); }
static ival iv_sub(ival a, ival b) { return iv(sadd(a.lo, sneg(b.hi)), sadd(a.hi, sneg(b.lo))); }

static ival iv_mul(ival a, ival b) {
  int64_t c[4] = {smul(a.lo, b.lo), smul(a.lo, b.hi), smul(a.hi, b.lo), smul(a.hi, b.hi)};
  ival r = iv(c[0], c[0]);
  for (int i = 1; i < 4; i++) {
    r.lo = TL_MIN(r.lo, c[i]);
    r.hi = TL_MAX(r.hi, c[i]);
  }
  return r;
}

/* Division by an interval not containing 0: the quotient is monotone in
** each operand separately, so the corners bound it. */
static ival iv_div(ival a, ival b, int floor) {
  if (b.lo <= 0 && b.hi >= 0) return iv_all();
  int ok = 1;
  int64_t c[4] = {sdiv(a.lo, b.lo, floor, &ok), sdiv(a.lo, b.hi, floor, &ok),
                  sdiv(a.hi, b.lo, floor, &ok), sdiv(a.hi, b.hi, floor, &ok)};
  if (!ok) return iv_all();
  ival r = iv(c[0], c[0]);
  for (int i = 1; i < 4; i++) {
    r.lo = TL_MIN(r.lo, c[i]);
    r.hi = TL_MAX(r.hi, c[i]);
  }
  if (r.lo == POS_INF || r.hi == NEG_INF) return iv_all();
  return r;
}

static ival iv_floormod(ival a, ival b) {
  if (b.lo > 0) {
    if (b.lo == b.hi && fin(a.lo) && fin(a.hi) && fdiv64(a.lo, b.lo) == fdiv64(a.hi, b.lo))
      return iv(fmod64(a.lo, b.lo), fmod64(a.hi, b.lo));     /* one period */
    int64_t hi = sadd(b.hi, -1);
    if (a.lo >= 0) hi = TL_MIN(hi, a.hi);
    return iv(0, hi);
  }
  if (b.hi < 0) {
    if (b.lo == b.hi && fin(a.lo) && fin(a.hi) && fdiv64(a.lo, b.lo) == fdiv64(a.hi, b.lo))
      return iv(fmod64(a.lo, b.lo), fmod64(a.hi, b.lo));
    return iv(sadd(b.lo, 1), 0);
  }
  return iv_all();
}

static ival iv_truncmod(ival a, ival b) {
  if (b.lo <= 0 && b.hi >= 0) return iv_all();
  /* |result| < |divisor|, sign of the dividend */
  int64_t m = POS_INF;
  if (fin(b.lo) && fin(b.hi)) m = TL_MAX(b.lo < 0 ? -b.lo : b.lo, b.hi < 0 ? -b.hi : b.hi);
  int64_t lim = m == POS_INF ? POS_INF : m - 1;
  if (a.lo >= 0) {
    if (b.lo == b.hi && fin(a.hi) && a.lo / m == a.hi / m) return iv(a.lo % m, a.hi % m);
    return iv(0, TL_MIN(a.hi, lim));
  }
  if (a.hi <= 0) {
    if (b.lo == b.hi && fin(a.lo) && a.lo / m == a.hi / m) return iv(a.lo % m, a.hi % m);
    return iv(TL_MAX(a.lo, sneg(lim)), 0);
  }
  return iv(sneg(lim), lim);
}

static ival iv_union(ival a, ival b) { return iv(TL_MIN(a.lo, b.lo), TL_MAX(a.hi, b.hi)); }

/* The values a type can hold, as far as it narrows int64 (int32 and int64
** count as unbounded: they are assumed not to overflow). */
static ival type_range(tl_type t) {
  if (tl_type_is_bool(t)) return iv(0, 1);
  if (t.code == TL_TC_UINT) return t.bits < 63 ? iv(0, (int64_t)((1ull << t.bits) - 1)) : iv(0, POS_INF);
  if (t.code == TL_TC_INT && t.bits < 32 && t.bits > 0)
    return iv(-(int64_t)(1ull << (t.bits - 1)), (int64_t)(1ull << (t.bits - 1)) - 1);
  return iv_all();
}

/* r if every value of r fits the type, else the type's range (it wraps). */
static ival fit(ival r, tl_type t) {
  ival tr = type_range(t);
  if (r.lo >= tr.lo && r.hi <= tr.hi) return r;
  return tr;
}

/* ---- constant bounds ------------------------------------------------------- */

typedef struct {
  tl_ref var;
  ival v;
} let_bind;

typedef struct {
  const tl_ir *ir;
  const tl_rangemap *m;
  TL_VEC(let_bind) lets;          /* LET variables in scope */
  uint32_t ctx, nctx;             /* let-context id (memo key part) */
  int vdepth;                     /* symbolic-range resolution depth */
  uint64_t *keys;                 /* memo: (ctx << 32 | ref) -> interval */
  ival *vals;
  uint32_t cap, n;
  uint64_t skeys[32];             /* the memo's first table, in place */
  ival svals[32];
} bctx;

static int memo_find(const bctx *b, uint64_t key, ival *out) {
  if (!b->cap) return 0;
  for (uint32_t j = (uint32_t)tl_hash_mix(0, key) & (b->cap - 1); b->keys[j]; j = (j + 1) & (b->cap - 1)) {
    if (b->keys[j] == key) {
      *out = b->vals[j];
      return 1;
    }
  }
  return 0;
}

static void memo_put(bctx *b, uint64_t key, ival v) {
  if (!b->cap) {   /* small queries never touch the heap */
    memset(b->skeys, 0, sizeof b->skeys);
    b->keys = b->skeys;
    b->vals = b->svals;
    b->cap = 32;
  }
  if ((b->n + 1) * 2 > b->cap) {
    uint32_t nc = b->cap * 2;
    uint64_t *nk = tl_calloc(nc, sizeof *nk);
    ival *nv = tl_malloc(nc * sizeof *nv);
    for (uint32_t i = 0; i < b->cap; i++) {
      if (!b->keys[i]) continue;
      uint32_t j = (uint32_t)tl_hash_mix(0, b->keys[i]) & (nc - 1);
      while (nk[j]) j = (j + 1) & (nc - 1);
      nk[j] = b->keys[i];
      nv[j] = b->vals[i];
    }
    if (b->keys != b->skeys) {
      free(b->keys);
      free(b->vals);
    }
    b->keys = nk;
    b->vals = nv;
    b->cap = nc;
  }
  uint32_t j = (uint32_t)tl_hash_mix(0, key) & (b->cap - 1);
  while (b->keys[j] && b->keys[j] != key) j = (j + 1) & (b->cap - 1);
  if (!b->keys[j]) b->n++;
  b->keys[j] = key;
  b->vals[j] = v;
}

static ival bnd(bctx *b, tl_ref e);

static int is_const(const tl_ir *ir, tl_ref r, int64_t *v) { return tl_ir_is_int(ir, r, v); }

static ival bnd_var(bctx *b, tl_ref e) {
  for (int i = b->lets.n - 1; i >= 0; i--)
    if (b->lets.v[i].var == e) return b->lets.v[i].v;
  const tl_range *r = tl_rangemap_get(b->m, e);
  tl_type t = tl_ir_type(b->ir, e);
  if (!r || b->vdepth >= VAR_DEPTH_MAX) return type_range(t);
  b->vdepth++;
  ival mn = bnd(b, r->min), ex = bnd(b, r->extent);
  b->vdepth--;
  ival out = iv(mn.lo, sadd(mn.hi, sadd(ex.hi, -1)));
  if (out.hi < out.lo) out.hi = out.lo;   /* empty loop: any value will do */
  return out;
}

/* 1 / 0 when a comparison of the intervals is decided, else -1. */
static int cmp_decide(int op, ival a, ival b) {
  switch (op) {
  case TL_IR_LT: return a.hi < b.lo ? 1 : a.lo >= b.hi ? 0 : -1;
  case TL_IR_LE: return a.hi <= b.lo ? 1 : a.lo > b.hi ? 0 : -1;
  case TL_IR_GT: return a.lo > b.hi ? 1 : a.hi <= b.lo ? 0 : -1;
  case TL_IR_GE: return a.lo >= b.hi ? 1 : a.hi < b.lo ? 0 : -1;
  case TL_IR_EQ:
    if (a.lo == a.hi && b.lo == b.hi && a.lo == b.lo && fin(a.lo)) return 1;
    return a.hi < b.lo || a.lo > b.hi ? 0 : -1;
  case TL_IR_NE: {
    int r = cmp_decide(TL_IR_EQ, a, b);
    return r < 0 ? -1 : !r;
  }
  default: return -1;
  }
}

static ival bool_iv(int decided) { return decided < 0 ? iv(0, 1) : iv(decided, decided); }

static ival bnd_compute(bctx *b, tl_ref e) {
  const tl_ir *ir = b->ir;
  const tl_node *n = &ir->nodes.v[e];
  tl_type t = n->type;
  int op = n->op;
  tl_ref k[3] = {0, 0, 0};
  for (int i = 0; i < n->nkids && i < 3; i++) k[i] = tl_ir_kid(ir, e, i);
  int64_t c;
  switch (op) {
  case TL_IR_VAR: return bnd_var(b, e);
  case TL_IR_ADD: return iv_add(bnd(b, k[0]), bnd(b, k[1]));
  case TL_IR_SUB: return iv_sub(bnd(b, k[0]), bnd(b, k[1]));
  case TL_IR_MUL: return iv_mul(bnd(b, k[0]), bnd(b, k[1]));
  case TL_IR_FLOORDIV: return iv_div(bnd(b, k[0]), bnd(b, k[1]), 1);
  case TL_IR_TRUNCDIV: return iv_div(bnd(b, k[0]), bnd(b, k[1]), 0);
  case TL_IR_FLOORMOD: return iv_floormod(bnd(b, k[0]), bnd(b, k[1]));
  case TL_IR_TRUNCMOD: return iv_truncmod(bnd(b, k[0]), bnd(b, k[1]));
  case TL_IR_MIN: {
    ival x = bnd(b, k[0]), y = bnd(b, k[1]);
    return iv(TL_MIN(x.lo, y.lo), TL_MIN(x.hi, y.hi));
  }
  case TL_IR_MAX: {
    ival x = bnd(b, k[0]), y = bnd(b, k[1]);
    return iv(TL_MAX(x.lo, y.lo), TL_MAX(x.hi, y.hi));
  }
  case TL_IR_SHL:
    if (is_const(ir, k[1], &c) && c >= 0 && c < 62) return iv_mul(bnd(b, k[0]), iv(1ll << c, 1ll << c));
    return type_range(t);
  case TL_IR_SHR:
    if (is_const(ir, k[1], &c) && c >= 0 && c < 62) return iv_div(bnd(b, k[0]), iv(1ll << c, 1ll << c), 1);
    return type_range(t);
  case TL_IR_BITAND: {
    ival x = bnd(b, k[0]), y = bnd(b, k[1]);
    if (x.lo >= 0 && y.lo >= 0) return iv(0, TL_MIN(x.hi, y.hi));
    if (x.lo >= 0) return iv(0, x.hi);
    if (y.lo >= 0) return iv(0, y.hi);
    return type_range(t);
  }
  case TL_IR_BITOR:
  case TL_IR_BITXOR: {
    ival x = bnd(b, k[0]), y = bnd(b, k[1]);
    if (x.lo >= 0 && y.lo >= 0 && fin(x.hi) && fin(y.hi)) {
      int64_t m = TL_MAX(x.hi, y.hi), p = 1;
      while (p <= m && p < (1ll << 62)) p <<= 1;
      return iv(op == TL_IR_BITOR ? TL_MAX(x.lo, y.lo) : 0, p - 1);
    }
    return type_range(t);
  }
  case TL_IR_EQ: case TL_IR_NE: case TL_IR_LT: case TL_IR_LE: case TL_IR_GT: case TL_IR_GE:
    if (tl_type_is_int(tl_ir_type(ir, k[0]))) return bool_iv(cmp_decide(op, bnd(b, k[0]), bnd(b, k[1])));
    return iv(0, 1);
  case TL_IR_AND: {
    ival x = bnd(b, k[0]), y = bnd(b, k[1]);
    if (x.hi == 0 || y.hi == 0) return iv(0, 0);
    if (x.lo > 0 && y.lo > 0) return iv(1, 1);
    return iv(0, 1);
  }
  case TL_IR_OR: {
    ival x = bnd(b, k[0]), y = bnd(b, k[1]);
    if (x.lo > 0 || y.lo > 0) return iv(1, 1);
    if (x.hi == 0 && y.hi == 0) return iv(0, 0);
    return iv(0, 1);
  }
  case TL_IR_NOT: {
    ival x = bnd(b, k[0]);
    return x.lo > 0 ? iv(0, 0) : x.hi == 0 ? iv(1, 1) : iv(0, 1);
  }
  case TL_IR_SELECT:
  case TL_IR_IF_THEN_ELSE: {
    ival cnd = bnd(b, k[0]);
    if (cnd.lo > 0) return bnd(b, k[1]);
    if (cnd.hi == 0) return bnd(b, k[2]);
    return iv_union(bnd(b, k[1]), bnd(b, k[2]));
  }
  case TL_IR_CAST: {
    tl_type s = tl_ir_type(ir, k[0]);
    if (tl_type_is_bool(t)) {
      if (!tl_type_is_int(s)) return iv(0, 1);
      ival x = bnd(b, k[0]);
      return x.lo > 0 || x.hi < 0 ? iv(1, 1) : x.lo == 0 && x.hi == 0 ? iv(0, 0) : iv(0, 1);
    }
    if (tl_type_is_int(t) && tl_type_is_int(s)) return bnd(b, k[0]);   /* fit() clamps */
    return type_range(t);
  }
  case TL_IR_LET: {
    if (tl_ir_op(ir, k[0]) != TL_IR_VAR) return type_range(t);
    let_bind lb = {k[0], bnd(b, k[1])};
    uint32_t saved = b->ctx;
    b->ctx = ++b->nctx;
    TL_VEC_PUSH(b->lets, lb);
    ival r = bnd(b, k[2]);
    b->lets.n--;
    b->ctx = saved;
    return r;
  }
  case TL_IR_RAMP: {
    int lanes = t.lanes;
    return iv_add(bnd(b, k[0]), iv_mul(bnd(b, k[1]), iv(0, lanes - 1)));
  }
  case TL_IR_BROADCAST: return bnd(b, k[0]);
  default: return type_range(t);
  }
}

static ival bnd(bctx *b, tl_ref e) {
  const tl_node *n = &b->ir->nodes.v[e];
  if (n->op == TL_IR_INT) {
    if (n->type.code == TL_TC_UINT && n->type.bits == 64 && n->imm.i < 0) return iv(0, POS_INF);
    return iv(n->imm.i, n->imm.i);
  }
  if (!tl_type_is_int(n->type)) return iv_all();
  /* operators and variables with symbolic ranges are worth remembering */
  int memo = n->nkids > 0;
  if (n->op == TL_IR_VAR) {
    const tl_range *rg = b->lets.n ? NULL : tl_rangemap_get(b->m, e);
    memo = b->lets.n || (rg && (!is_const(b->ir, rg->min, NULL) || !is_const(b->ir, rg->extent, NULL)));
  }
  uint64_t key = ((uint64_t)b->ctx << 32) | e;
  ival r;
  if (memo && memo_find(b, key, &r)) return r;
  r = fit(bnd_compute(b, e), n->type);
  if (memo) memo_put(b, key, r);
  return r;
}

void tl_ir_const_bound_sides(tl_ir *ir, tl_ref e, const tl_rangemap *ranges, int64_t *lo, int64_t *hi) {
  ival r = iv_all();
  if (e && e < (tl_ref)ir->nodes.n) {
    bctx b;
    b.ir = ir;
    b.m = ranges;
    memset(&b.lets, 0, sizeof b.lets);
    b.ctx = b.nctx = 0;
    b.vdepth = 0;
    b.keys = NULL;
    b.vals = NULL;
    b.cap = b.n = 0;
    r = bnd(&b, e);
    TL_VEC_FREE(b.lets);
    if (b.keys != b.skeys) {
      free(b.keys);
      free(b.vals);
    }
  }
  *lo = r.lo;
  *hi = r.hi;
}

int tl_ir_const_bound(tl_ir *ir, tl_ref e, const tl_rangemap *ranges, int64_t *lo, int64_t *hi) {
  int64_t l, h;
  tl_ir_const_bound_sides(ir, e, ranges, &l, &h);
  if (!fin(l) || !fin(h)) return 0;
  *lo = l;
  *hi = h;
  return 1;
}

/* ---- symbolic ranges --------------------------------------------------------- */

typedef struct {
  tl_ref lo, hi;                  /* TL_NOREF: that side unknown */
} sint;

typedef struct {
  tl_ir *ir;
  const tl_rangemap *relax, *known;
  tl_rangemap all;                /* known, then relax (relax wins) */
  uint8_t *uses;                  /* per node: 0 unknown, 1 no, 2 yes */
  uint32_t nuses;
  int depth;
} ev_st;

static int uses_relax(ev_st *s, tl_ref e) {
  if (!e) return 0;
  if (e < s->nuses && s->uses[e]) return s->uses[e] - 1;
  int r = 0;
  if (tl_ir_op(s->ir, e) == TL_IR_VAR) {
    r = tl_rangemap_get(s->relax, e) != NULL;
  } else {
    int nk = tl_ir_nkids(s->ir, e);
    for (int i = 0; i < nk && !r; i++) r = uses_relax(s, tl_ir_kid(s->ir, e, i));
  }
  if (e < s->nuses) s->uses[e] = (uint8_t)(r + 1);
  return r;
}

static sint sv(tl_ref lo, tl_ref hi) {
  sint r = {lo, hi};
  return r;
}

/* Sign of an expression: 2 (> 0), 1 (>= 0), -1 (<= 0), 0 (unknown). */
static int sign_of(ev_st *s, tl_ref e) {
  int64_t lo, hi;
  tl_ir_const_bound_sides(s->ir, e, &s->all, &lo, &hi);
  if (lo > 0) return 2;
  if (lo >= 0) return 1;
  if (hi <= 0) return -1;
  return 0;
}

static tl_ref bin(ev_st *s, int op, tl_ref a, tl_ref b) { return a && b ? tl_binary(s->ir, op, a, b) : 0; }

static sint ev(ev_st *s, tl_ref e);

/* [a.lo, a.hi] * p for p free of relaxed variables. */
static sint ev_scale(ev_st *s, sint a, tl_ref p) {
  int sg = sign_of(s, p);
  if (sg > 0) return sv(bin(s, TL_IR_MUL, a.lo, p), bin(s, TL_IR_MUL, a.hi, p));
  if (sg < 0) return sv(bin(s, TL_IR_MUL, a.hi, p), bin(s, TL_IR_MUL, a.lo, p));
  return sv(0, 0);
}

static sint ev_compute(ev_st *s, tl_ref e) {
  tl_ir *ir = s->ir;
  int op = tl_ir_op(ir, e);
  tl_type t = tl_ir_type(ir, e);
  tl_ref k[3] = {0, 0, 0};
  int nk = tl_ir_nkids(ir, e);
  for (int i = 0; i < nk && i < 3; i++) k[i] = tl_ir_kid(ir, e, i);
  int64_t c;
  switch (op) {
  case TL_IR_VAR: {
    const tl_range *rg = tl_rangemap_get(s->relax, e);
    if (!rg || s->depth >= VAR_DEPTH_MAX) return sv(0, 0);
    tl_ref rmin = rg->min, rext = rg->extent;   /* rg may move: copy first */
    s->depth++;
    sint mn = ev(s, rmin);
    tl_ref last = tl_sub(ir, tl_add(ir, rmin, rext), tl_imm_int(ir, t, 1));
    sint mx = ev(s, last);
    s->depth--;
    return sv(mn.lo, mx.hi);
  }
  case TL_IR_ADD: {
    sint a = ev(s, k[0]), b = ev(s, k[1]);
    return sv(bin(s, TL_IR_ADD, a.lo, b.lo), bin(s, TL_IR_ADD, a.hi, b.hi));
  }
  case TL_IR_SUB: {
    sint a = ev(s, k[0]), b = ev(s, k[1]);
    return sv(bin(s, TL_IR_SUB, a.lo, b.hi), bin(s, TL_IR_SUB, a.hi, b.lo));
  }
  case TL_IR_MUL: {
    int ra = uses_relax(s, k[0]), rb = uses_relax(s, k[1]);
    if (!rb) return ev_scale(s, ev(s, k[0]), k[1]);
    if (!ra) return ev_scale(s, ev(s, k[1]), k[0]);
    sint a = ev(s, k[0]), b = ev(s, k[1]);
    if (a.lo && a.hi && b.lo && b.hi && sign_of(s, a.lo) > 0 && sign_of(s, b.lo) > 0)
      return sv(tl_mul(ir, a.lo, b.lo), tl_mul(ir, a.hi, b.hi));
    return sv(0, 0);
  }
  case TL_IR_FLOORDIV:
  case TL_IR_TRUNCDIV:
  case TL_IR_SHR: {
    tl_ref d = k[1];
    if (op == TL_IR_SHR) {
      if (!tl_ir_is_int(ir, d, &c) || c < 0 || c >= 62) return sv(0, 0);
      d = tl_imm_int(ir, t, 1ll << c);
      op = TL_IR_FLOORDIV;
    }
    if (uses_relax(s, d)) return sv(0, 0);
    sint a = ev(s, k[0]);
    if (sign_of(s, d) == 2) return sv(bin(s, op, a.lo, d), bin(s, op, a.hi, d));
    return sv(0, 0);
  }
  case TL_IR_SHL:
    if (!tl_ir_is_int(ir, k[1], &c) || c < 0 || c >= 62) return sv(0, 0);
    return ev_scale(s, ev(s, k[0]), tl_imm_int(ir, t, 1ll << c));
  case TL_IR_FLOORMOD:
  case TL_IR_TRUNCMOD: {
    tl_ref d = k[1];
    if (uses_relax(s, d) || sign_of(s, d) != 2) return sv(0, 0);
    int64_t lo, hi;
    tl_ir_const_bound_sides(ir, k[0], &s->all, &lo, &hi);
    if (op == TL_IR_TRUNCMOD && lo < 0) return sv(0, 0);
    sint a = ev(s, k[0]);
    if (a.lo && a.hi && tl_ir_is_int(ir, d, &c) && c > 0) {
      /* within one period the remainder is monotone */
      tl_ref q1 = tl_ir_simplify(ir, tl_floordiv(ir, a.lo, d), s->known);
      tl_ref q2 = tl_ir_simplify(ir, tl_floordiv(ir, a.hi, d), s->known);
      if (q1 == q2) return sv(tl_binary(ir, op, a.lo, d), tl_binary(ir, op, a.hi, d));
    }
    /* [0, d - 1]: a constant bound of the whole node is at least as tight */
    tl_ir_const_bound_sides(ir, e, &s->all, &lo, &hi);
    if (fin(lo) && fin(hi)) return sv(tl_imm_int(ir, t, lo), tl_imm_int(ir, t, hi));
    return sv(tl_imm_int(ir, t, 0), tl_sub(ir, d, tl_imm_int(ir, t, 1)));
  }
  case TL_IR_MIN: {
    sint a = ev(s, k[0]), b = ev(s, k[1]);
    return sv(bin(s, TL_IR_MIN, a.lo, b.lo),
              a.hi && b.hi ? tl_min(ir, a.hi, b.hi) : a.hi ? a.hi : b.hi);
  }
  case TL_IR_MAX: {
    sint a = ev(s, k[0]), b = ev(s, k[1]);
    return sv(a.lo && b.lo ? tl_max(ir, a.lo, b.lo) : a.lo ? a.lo : b.lo,
              bin(s, TL_IR_MAX, a.hi, b.hi));
  }
  case TL_IR_SELECT:
  case TL_IR_IF_THEN_ELSE: {
    sint a = ev(s, k[1]), b = ev(s, k[2]);
    return sv(bin(s, TL_IR_MIN, a.lo, b.lo), bin(s, TL_IR_MAX, a.hi, b.hi));
  }
  case TL_IR_CAST: {
    tl_type src = tl_ir_type(ir, k[0]);
    if (src.code != TL_TC_INT || t.code != TL_TC_INT || t.bits < src.bits || t.lanes != 1) return sv(0, 0);
    sint a = ev(s, k[0]);
    return sv(a.lo ? tl_cast(ir, t, a.lo) : 0, a.hi ? tl_cast(ir, t, a.hi) : 0);
  }
  default:
    return sv(0, 0);
  }
}

static sint ev(ev_st *s, tl_ref e) {
  if (!uses_relax(s, e)) return sv(e, e);
  sint r = ev_compute(s, e);
  if (!r.lo || !r.hi) {
    int64_t lo, hi;
    tl_ir_const_bound_sides(s->ir, e, &s->all, &lo, &hi);
    tl_type t = tl_ir_type(s->ir, e);
    if (!r.lo && fin(lo)) r.lo = tl_imm_int(s->ir, t, lo);
    if (!r.hi && fin(hi)) r.hi = tl_imm_int(s->ir, t, hi);
  }
  return r;
}

int tl_ir_eval_range(tl_ir *ir, tl_ref e, const tl_rangemap *relax, const tl_rangemap *known,
                     tl_ref *min, tl_ref *extent) {
  tl_type t = tl_ir_type(ir, e);
  if (!e || t.code != TL_TC_INT || t.lanes != 1) return 0;
  ev_st s;
  memset(&s, 0, sizeof s);
  s.ir = ir;
  s.relax = relax;
  s.known = known;
  if (known)
    for (int i = 0; i < known->v.n; i++) TL_VEC_PUSH(s.all.v, known->v.v[i]);
  if (relax)
    for (int i = 0; i < relax->v.n; i++) TL_VEC_PUSH(s.all.v, relax->v.v[i]);
  tl_ref se = tl_ir_simplify(ir, e, &s.all);
  s.nuses = (uint32_t)ir->nodes.n;
  s.uses = tl_calloc(s.nuses, 1);
  sint r = ev(&s, se);
  int ok = r.lo && r.hi;
  if (ok) {
    tl_ref lo = tl_ir_simplify(ir, r.lo, known);
    tl_ref ext = tl_add(ir, tl_sub(ir, r.hi, lo), tl_imm_int(ir, t, 1));
    *min = lo;
    *extent = tl_ir_simplify(ir, ext, known);
  }
  free(s.uses);
  tl_rangemap_free(&s.all);
  return ok;
}

/* ---- proving ------------------------------------------------------------------ */

int tl_ir_prove(tl_ir *ir, tl_ref cond, const tl_rangemap *ranges) {
  if (!cond) return -1;
  tl_ref s = tl_ir_simplify(ir, cond, ranges);
  int64_t v;
  if (tl_ir_is_int(ir, s, &v)) return v != 0;
  return -1;
}
