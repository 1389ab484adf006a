/*
** vectorize.c -- turn vectorized loops into explicit vector IR.
**
** A FOR of kind VECTORIZED with a constant power-of-two extent L in [2, 64]
** and a straight-line body is replaced by its body evaluated once on L lanes:
** the loop variable v becomes ramp(min, 1, L); every expression is rebuilt
** bottom-up and is either lane-invariant (kept scalar) or a vector of L
** lanes, scalars being broadcast only where they meet a vector. Integer
** ADD/SUB/MUL on ramps fold into ramps (ramp(b, s) + x = ramp(b + x, s),
** ramp(b, s) * c = ramp(b * c, s * c)), which is the affine coefficient
** extraction of an index: a load or store whose index ends up as
** ramp(base, 1, L) is contiguous, one with ramp(base, s, L) is strided, any
** other vector index is a gather or scatter, a scalar index a plain scalar
** access. The C backend prints each of these forms.
**
** Vector evaluation computes every lane of a statement before the next
** statement, where the loop interleaves them; the rewrite is only done when
** that cannot be observed: no element is touched by two different lanes
** through two accesses of which one is a store. Two accesses through one
** index are fine when both are stores (the lanes write in loop order) or the
** index is a ramp with a non-zero constant stride (lane k touches only its
** own slot); accesses through different ramps of one constant stride s whose
** bases differ by a constant d are fine when d is not a multiple of s or
** |d| >= |s| * L; anything else that involves a store falls back. A store
** through a lane-invariant index is kept when its value is invariant. if_then_else with a vector
** condition becomes a select when neither branch can fault (no loads, no
** integer division), and otherwise stays a vector if_then_else that the
** backend evaluates lane by lane.
**
** Anything else (inner loops, allocations, an IF statement on a vector
** condition, nodes that are already vectors, a non-power-of-two extent)
** leaves the loop unchanged, still of kind VECTORIZED: the C backend prints
** it as a scalar loop with `#pragma GCC ivdep` (when provably safe) and
** `#pragma GCC unroll`. Loops are visited innermost first, so an outer
** vectorized loop around an already vectorized one falls back.
*/
#include "codegen.h"

typedef struct {
  int buf;
  tl_ref idx;                     /* vectorized index (scalar or vector) */
  int store;
} vec_access;

/* Open-addressing map from original node to its vectorized form. */
typedef struct {
  tl_ref *keys, *vals;
  uint32_t cap, n;
} vec_map;

typedef struct {
  tl_ir *ir;
  tl_ref var;                     /* the loop variable */
  tl_ref ramp;                    /* ramp(min, 1, L) */
  int lanes;
  int fail;
  vec_map memo;
  TL_VEC(tl_ref) let_from;        /* let-bound scalars that became vectors */
  TL_VEC(tl_ref) let_to;
  TL_VEC(tl_ref) bound;           /* every var bound in the body */
  TL_VEC(vec_access) acc;
} vec_st;

static void map_init(vec_map *m) {
  m->cap = 64;
  m->n = 0;
  m->keys = tl_calloc(m->cap, sizeof(tl_ref));
  m->vals = tl_calloc(m->cap, sizeof(tl_ref));
}

static void map_free(vec_map *m) {
  free(m->keys);
  free(m->vals);
}

static tl_ref map_get(const vec_map *m, tl_ref k) {
  uint32_t j = (uint32_t)tl_hash_mix(0, k) & (m->cap - 1);
  while (m->keys[j]) {
    if (m->keys[j] == k) return m->vals[j];
    j = (j + 1) & (m->cap - 1);
  }
  return TL_NOREF;
}

static void map_put(vec_map *m, tl_ref k, tl_ref v) {
  if ((m->n + 1) * 2 > m->cap) {
    vec_map g = {tl_calloc(m->cap * 2, sizeof(tl_ref)), tl_calloc(m->cap * 2, sizeof(tl_ref)),
                 m->cap * 2, 0};
    for (uint32_t i = 0; i < m->cap; i++)
      if (m->keys[i]) map_put(&g, m->keys[i], m->vals[i]);
    map_free(m);
    *m = g;
  }
  uint32_t j = (uint32_t)tl_hash_mix(0, k) & (m->cap - 1);
  while (m->keys[j] && m->keys[j] != k) j = (j + 1) & (m->cap - 1);
  if (!m->keys[j]) m->n++;
  m->keys[j] = k;
  m->vals[j] = v;
}

static int lanes_of(const vec_st *s, tl_ref r) { return tl_ir_type(s->ir, r).lanes; }
static int is_vec(const vec_st *s, tl_ref r) { return lanes_of(s, r) > 1; }

static tl_ref bcast(vec_st *s, tl_ref r) {
  return is_vec(s, r) ? r : tl_broadcast(s->ir, r, s->lanes);
}

/* ramp(base, stride), or the scalar base when the stride is zero. */
static tl_ref mk_ramp(vec_st *s, tl_ref base, tl_ref stride) {
  int64_t k;
  if (tl_ir_is_int(s->ir, stride, &k) && k == 0) return base;
  return tl_ramp(s->ir, base, stride, s->lanes);
}

static int is_ramp(const vec_st *s, tl_ref r) { return tl_ir_op(s->ir, r) == TL_IR_RAMP; }

static tl_ref vbinary(vec_st *s, int op, tl_ref a, tl_ref b) {
  tl_ir *ir = s->ir;
  int va = is_vec(s, a), vb = is_vec(s, b);
  if (!va && !vb) return tl_binary(ir, op, a, b);
  tl_type et = tl_type_scalar(tl_ir_type(ir, va ? a : b));
  if (tl_type_is_int(et) && !tl_type_is_bool(et)) {
    int ra = is_ramp(s, a), rb = is_ramp(s, b);
    tl_ref ab = ra ? tl_ir_kid(ir, a, 0) : 0, as = ra ? tl_ir_kid(ir, a, 1) : 0;
    tl_ref bb = rb ? tl_ir_kid(ir, b, 0) : 0, bs = rb ? tl_ir_kid(ir, b, 1) : 0;
    switch (op) {
    case TL_IR_ADD:
      if (ra && !vb) return mk_ramp(s, tl_add(ir, ab, b), as);
      if (rb && !va) return mk_ramp(s, tl_add(ir, a, bb), bs);
      if (ra && rb) return mk_ramp(s, tl_add(ir, ab, bb), tl_add(ir, as, bs));
      break;
    case TL_IR_SUB:
      if (ra && !vb) return mk_ramp(s, tl_sub(ir, ab, b), as);
      if (rb && !va) return mk_ramp(s, tl_sub(ir, a, bb), tl_sub(ir, tl_imm_int(ir, et, 0), bs));
      if (ra && rb) return mk_ramp(s, tl_sub(ir, ab, bb), tl_sub(ir, as, bs));
      break;
    case TL_IR_MUL:
      if (ra && !vb) return mk_ramp(s, tl_mul(ir, ab, b), tl_mul(ir, as, b));
      if (rb && !va) return mk_ramp(s, tl_mul(ir, a, bb), tl_mul(ir, a, bs));
      break;
    }
  }
  return tl_binary(ir, op, bcast(s, a), bcast(s, b));
}

typedef struct {
  int found;
} fault_st;

static int fault_fn(const tl_ir *ir, tl_ref r, void *ud) {
  fault_st *f = ud;
  int op = tl_ir_op(ir, r);
  if (op == TL_IR_LOAD) f->found = 1;
  if ((op == TL_IR_FLOORDIV || op == TL_IR_FLOORMOD || op == TL_IR_TRUNCDIV ||
       op == TL_IR_TRUNCMOD || op == TL_IR_DIV) && tl_type_is_int(tl_ir_type(ir, r)))
    f->found = 1;
  return !f->found;
}

/* 1 if evaluating e on a lane whose condition is false could fault. */
static int may_fault(const tl_ir *ir, tl_ref e) {
  fault_st f = {0};
  tl_ir_visit(ir, e, fault_fn, &f);
  return f.found;
}

static tl_ref vexpr(vec_st *s, tl_ref e);

/* A var bound (by LET or LET_STMT) inside the body; value vectorized. Returns
** the var to bind: the original one or a new vector var. */
static tl_ref bind_var(vec_st *s, tl_ref var, tl_ref val) {
  tl_ir *ir = s->ir;
  for (int i = 0; i < s->bound.n; i++)
    if (s->bound.v[i] == var) s->fail = 1;   /* rebound: memo would be ambiguous */
  TL_VEC_PUSH(s->bound, var);
  if (!is_vec(s, val)) return var;
  tl_var v = *tl_ir_var(ir, var);
  tl_ref nv = tl_var_new(ir, v.name, tl_type_lanes(v.type, s->lanes));
  TL_VEC_PUSH(s->let_from, var);
  TL_VEC_PUSH(s->let_to, nv);
  return nv;
}

static void record(vec_st *s, int buf, tl_ref idx, int store) {
  vec_access a = {buf, idx, store};
  TL_VEC_PUSH(s->acc, a);
}

static tl_ref vexpr_(vec_st *s, tl_ref e) {
  tl_ir *ir = s->ir;
  tl_node nd = *tl_ir_node(ir, e);
  if (nd.type.lanes > 1) {
    s->fail = 1;
    return e;
  }
  switch (nd.op) {
  case TL_IR_INT:
  case TL_IR_FLOAT:
    return e;
  case TL_IR_VAR:
    if (e == s->var) return s->ramp;
    for (int i = 0; i < s->let_from.n; i++)
      if (s->let_from.v[i] == e) return s->let_to.v[i];
    return e;
  case TL_IR_LET: {
    tl_ref val = vexpr(s, tl_ir_kid(ir, e, 1));
    tl_ref var = bind_var(s, tl_ir_kid(ir, e, 0), val);
    tl_ref body = vexpr(s, tl_ir_kid(ir, e, 2));
    return tl_let(ir, var, val, body);
  }
  case TL_IR_NOT:
    return tl_not(ir, vexpr(s, tl_ir_kid(ir, e, 0)));
  case TL_IR_SELECT:
  case TL_IR_IF_THEN_ELSE: {
    tl_ref c = vexpr(s, tl_ir_kid(ir, e, 0));
    tl_ref a = vexpr(s, tl_ir_kid(ir, e, 1));
    tl_ref b = vexpr(s, tl_ir_kid(ir, e, 2));
    if (is_vec(s, a) || is_vec(s, b) || is_vec(s, c)) {
      a = bcast(s, a);
      b = bcast(s, b);
    }
    if (!is_vec(s, c))
      return nd.op == TL_IR_SELECT ? tl_select(ir, c, a, b) : tl_if_then_else(ir, c, a, b);
    if (nd.op == TL_IR_SELECT || (!may_fault(ir, a) && !may_fault(ir, b)))
      return tl_select(ir, c, a, b);
    return tl_if_then_else(ir, c, a, b);
  }
  case TL_IR_CAST: {
    tl_ref a = vexpr(s, tl_ir_kid(ir, e, 0));
    return tl_cast(ir, tl_type_lanes(nd.type, lanes_of(s, a)), a);
  }
  case TL_IR_LOAD: {
    if (nd.nkids != 1) {
      s->fail = 1;
      return e;
    }
    tl_ref idx = vexpr(s, tl_ir_kid(ir, e, 0));
    record(s, (int)nd.imm.u, idx, 0);
    return tl_load_typed(ir, tl_type_lanes(nd.type, lanes_of(s, idx)), (int)nd.imm.u, &idx, 1);
  }
  case TL_IR_CALL: {
    tl_ref args[8];
    int any = 0;
    if (nd.nkids > 8) {
      s->fail = 1;
      return e;
    }
    for (int i = 0; i < nd.nkids; i++) {
      args[i] = vexpr(s, tl_ir_kid(ir, e, i));
      any |= is_vec(s, args[i]);
    }
    if (!any) return tl_call(ir, (int)nd.imm.u, nd.type, args, nd.nkids);
    for (int i = 0; i < nd.nkids; i++) args[i] = bcast(s, args[i]);
    return tl_call(ir, (int)nd.imm.u, tl_type_lanes(nd.type, s->lanes), args, nd.nkids);
  }
  default:
    if ((tl_ir_opflags[nd.op] & TL_IRF_E) && nd.nkids == 2 && nd.op != TL_IR_RAMP) {
      tl_ref a = vexpr(s, tl_ir_kid(ir, e, 0));
      tl_ref b = vexpr(s, tl_ir_kid(ir, e, 1));
      return vbinary(s, nd.op, a, b);
    }
    s->fail = 1;             /* RAMP, BROADCAST, statements */
    return e;
  }
}

static tl_ref vexpr(vec_st *s, tl_ref e) {
  if (s->fail) return e;
  tl_ref r = map_get(&s->memo, e);
  if (r) return r;
  r = vexpr_(s, e);
  if (!s->fail) map_put(&s->memo, e, r);
  return r;
}

static tl_ref vstmt(vec_st *s, tl_ref st) {
  tl_ir *ir = s->ir;
  if (s->fail) return st;
  tl_node nd = *tl_ir_node(ir, st);
  switch (nd.op) {
  case TL_IR_STORE: {
    if (nd.nkids != 2) break;
    int buf = (int)nd.imm.u;
    tl_ref val = vexpr(s, tl_ir_kid(ir, st, 0));
    tl_ref idx = vexpr(s, tl_ir_kid(ir, st, 1));
    if (s->fail) return st;
    if (!is_vec(s, idx)) {
      if (is_vec(s, val)) break;  /* lanes race for one slot: a reduction */
      record(s, buf, idx, 1);
      return tl_store(ir, buf, val, &idx, 1);
    }
    record(s, buf, idx, 1);
    val = bcast(s, val);
    return tl_store(ir, buf, val, &idx, 1);
  }
  case TL_IR_SEQ: {
    TL_VEC(tl_ref) kids = {0};
    for (int i = 0; i < nd.nkids && !s->fail; i++) {
      tl_ref k = vstmt(s, tl_ir_kid(ir, st, i));
      TL_VEC_PUSH(kids, k);
    }
    tl_ref r = s->fail ? st : tl_seq(ir, kids.v, kids.n);
    TL_VEC_FREE(kids);
    return r;
  }
  case TL_IR_LET_STMT: {
    tl_ref val = vexpr(s, tl_ir_kid(ir, st, 1));
    tl_ref var = bind_var(s, tl_ir_kid(ir, st, 0), val);
    tl_ref body = vstmt(s, tl_ir_kid(ir, st, 2));
    return s->fail ? st : tl_let_stmt(ir, var, val, body);
  }
  case TL_IR_IF: {
    tl_ref c = vexpr(s, tl_ir_kid(ir, st, 0));
    if (s->fail || is_vec(s, c)) break;
    tl_ref t = vstmt(s, tl_ir_kid(ir, st, 1));
    tl_ref el = tl_ir_kid(ir, st, 2);
    if (el) el = vstmt(s, el);
    return s->fail ? st : tl_if(ir, c, t, el);
  }
  case TL_IR_ATTR: {
    tl_ref body = vstmt(s, tl_ir_kid(ir, st, 1));
    tl_ref k[2] = {tl_ir_kid(ir, st, 0), body};
    return s->fail ? st : tl_ir_make(ir, TL_IR_ATTR, TL_T_VOID, nd.imm.u, k, 2);
  }
  case TL_IR_EVAL: {
    tl_ref e = vexpr(s, tl_ir_kid(ir, st, 0));
    return s->fail ? st : tl_eval(ir, e);
  }
  case TL_IR_NOP:
    return st;
  default:
    break;                      /* FOR, ALLOC, BARRIER */
  }
  s->fail = 1;
  return st;
}

/* e = rest + constant: peel immediate addends. */
static tl_ref peel_const(const tl_ir *ir, tl_ref e, int64_t *c) {
  *c = 0;
  for (;;) {
    int op = tl_ir_op(ir, e);
    int64_t k;
    if (op == TL_IR_INT) {
      *c += tl_ir_node(ir, e)->imm.i;
      return TL_NOREF;
    }
    if (op == TL_IR_ADD && tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &k)) {
      *c += k;
      e = tl_ir_kid(ir, e, 0);
    } else if (op == TL_IR_ADD && tl_ir_is_int(ir, tl_ir_kid(ir, e, 0), &k)) {
      *c += k;
      e = tl_ir_kid(ir, e, 1);
    } else if (op == TL_IR_SUB && tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &k)) {
      *c -= k;
      e = tl_ir_kid(ir, e, 0);
    } else {
      return e;
    }
  }
}

/* Constant stride of a ramp index, 0 if not a ramp with one. */
static int64_t ramp_stride(const tl_ir *ir, tl_ref idx) {
  int64_t k;
  if (tl_ir_op(ir, idx) != TL_IR_RAMP || !tl_ir_is_int(ir, tl_ir_kid(ir, idx, 1), &k)) return 0;
  return k;
}

/* Can lane k1 of access x and lane k2 != k1 of access y touch one element?
** (Then vector order, statement by statement, could differ from the loop's
** order, lane by lane.) */
static int lanes_may_collide(const vec_st *s, const vec_access *x, const vec_access *y) {
  const tl_ir *ir = s->ir;
  if (x->idx == y->idx) {
    if (x->store && y->store) return 0;     /* same slots written in lane order */
    return ramp_stride(ir, x->idx) == 0;    /* injective ramps only */
  }
  int64_t sx = ramp_stride(ir, x->idx), sy = ramp_stride(ir, y->idx);
  if (sx == 0 || sx != sy) return 1;
  int64_t cx, cy;
  tl_ref rx = peel_const(ir, tl_ir_kid(ir, x->idx, 0), &cx);
  tl_ref ry = peel_const(ir, tl_ir_kid(ir, y->idx, 0), &cy);
  if (rx != ry) return 1;
  int64_t d = cx - cy, as = sx < 0 ? -sx : sx;
  if (d % sx != 0) return 0;
  return (d < 0 ? -d : d) < as * s->lanes;
}

/* The lanes of one statement run before the next: see the file comment. */
static int deps_ok(const vec_st *s) {
  for (int i = 0; i < s->acc.n; i++) {
    const vec_access *w = &s->acc.v[i];
    if (!w->store) continue;
    for (int j = 0; j < s->acc.n; j++) {
      const vec_access *a = &s->acc.v[j];
      if (a->buf == w->buf && (j != i || !a->store) && lanes_may_collide(s, w, a)) return 0;
    }
  }
  return 1;
}

static tl_ref vectorize_whole(tl_ir *ir, tl_ref f, int64_t L) {
  vec_st s;
  memset(&s, 0, sizeof s);
  s.ir = ir;
  s.var = tl_ir_kid(ir, f, 0);
  s.lanes = (int)L;
  tl_type vt = tl_ir_type(ir, s.var);
  if (!tl_type_is_int(vt) || vt.lanes != 1) return f;
  s.ramp = tl_ramp(ir, tl_ir_kid(ir, f, 1), tl_imm_int(ir, vt, 1), s.lanes);
  map_init(&s.memo);
  tl_ref body = vstmt(&s, tl_ir_kid(ir, f, 3));
  int ok = !s.fail && deps_ok(&s);
  map_free(&s.memo);
  TL_VEC_FREE(s.let_from);
  TL_VEC_FREE(s.let_to);
  TL_VEC_FREE(s.bound);
  TL_VEC_FREE(s.acc);
  return ok ? body : f;
}

typedef struct {
  int max_bytes;                  /* widest vector wanted (0: any) */
  int nsplit;                     /* loops split into pieces */
} split_st;

typedef struct {
  int lanes, bits;
} width_st;

static int width_fn(const tl_ir *ir, tl_ref r, void *ud) {
  width_st *w = ud;
  tl_type t = tl_ir_type(ir, r);
  int bits = tl_type_is_bool(t) ? 32 : t.bits;   /* bool vectors are int32 masks */
  if (t.lanes == w->lanes && bits > w->bits) w->bits = bits;
  return 1;
}

/* A vectorized loop of L lanes; where its widest vector is more than
** sp->max_bytes, L/P copies of the loop on P lanes each (P * widest element
** = max_bytes), lanes in order. The copies keep each vector value within one
** machine register: GCC lowers a vector type wider than the machine's through
** stack temporaries. A piece is legal where the whole is: the check found no
** element touched by two lanes through a store (stores through one index
** keep lane order, as the copies run in order). */
static tl_ref vectorize_loop(tl_ir *ir, tl_ref f, split_st *sp) {
  if (tl_ir_op(ir, f) != TL_IR_FOR || tl_for_kind(ir, f) != TL_FOR_VECTORIZED) return f;
  int64_t L;
  if (!tl_ir_is_int(ir, tl_ir_kid(ir, f, 2), &L) || L < 2 || L > 64 || (L & (L - 1))) return f;
  tl_ref whole = vectorize_whole(ir, f, L);
  if (whole == f || !sp || sp->max_bytes <= 0) return whole;
  width_st w = {(int)L, 8};
  tl_ir_visit(ir, whole, width_fn, &w);
  int64_t P = (int64_t)sp->max_bytes * 8 / w.bits;
  if (P < 2 || L <= P) return whole;
  tl_ref var = tl_ir_kid(ir, f, 0), min = tl_ir_kid(ir, f, 1);
  tl_type vt = tl_ir_type(ir, var);
  int n = (int)(L / P);
  tl_ref *pieces = tl_calloc((size_t)n, sizeof(tl_ref));
  int ok = 1;
  for (int i = 0; i < n && ok; i++) {
    tl_ref lo = tl_add(ir, min, tl_imm_int(ir, vt, (int64_t)i * P));
    tl_ref g = tl_for(ir, var, lo, tl_imm_int(ir, vt, P), TL_FOR_VECTORIZED, tl_for_tag(ir, f),
                      tl_ir_kid(ir, f, 3));
    pieces[i] = vectorize_whole(ir, g, P);
    ok = pieces[i] != g;
  }
  tl_ref r = ok ? tl_seq(ir, pieces, n) : whole;
  if (ok) sp->nsplit++;
  free(pieces);
  return r;
}

static tl_ref vectorize_fn(tl_ir *ir, tl_ref node, void *ud) {
  return vectorize_loop(ir, node, ud);
}

tl_ref tl_codegen_vectorize(tl_ir *ir, tl_ref stmt) {
  return tl_ir_mutate(ir, stmt, vectorize_fn, NULL);
}

tl_ref tl_codegen_vectorize_to(tl_ir *ir, tl_ref stmt, int max_bytes, int *nsplit) {
  split_st sp = {max_bytes, 0};
  tl_ref r = tl_ir_mutate(ir, stmt, vectorize_fn, &sp);
  if (nsplit) *nsplit = sp.nsplit;
  return r;
}
