/*
** ir.c -- the node table: hash-consed construction, typed constructors with
** light folding, variables, buffers, interned strings, and generic traversal
** (visit, mutate, substitute). Printing, verification, ranges and the
** simplifier live in their own files of core/ir.
*/
#include "ir.h"
#include "arith.h"

#include <math.h>
#include <stdio.h>

const char *const tl_ir_opname[TL_IR__MAX] = {
#define TL_IRNAME(name, n, f) #name,
  TL_IRDEF(TL_IRNAME)
#undef TL_IRNAME
};
const int8_t tl_ir_opnkids[TL_IR__MAX] = {
#define TL_IRNK(name, n, f) n,
  TL_IRDEF(TL_IRNK)
#undef TL_IRNK
};
const uint8_t tl_ir_opflags[TL_IR__MAX] = {
#define TL_IRFL(name, n, f) f,
  TL_IRDEF(TL_IRFL)
#undef TL_IRFL
};
const char *const tl_ir_intrinname[TL_INTRIN__MAX] = {
#define TL_INAME(name, str, n) str,
  TL_INTRINDEF(TL_INAME)
#undef TL_INAME
};
const int8_t tl_ir_intrinnargs[TL_INTRIN__MAX] = {
#define TL_INARGS(name, str, n) n,
  TL_INTRINDEF(TL_INARGS)
#undef TL_INARGS
};
const char *const tl_ir_tagname[8] = {"", "blockIdx.x", "blockIdx.y", "blockIdx.z",
                                      "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread"};
const char *const tl_ir_scopename[3] = {"global", "local", "shared"};

int tl_ir_tag_parse(const char *name) {
  for (int i = 1; i < 8; i++)
    if (strcmp(name, tl_ir_tagname[i]) == 0) return i;
  if (strcmp(name, "cthread") == 0) return TL_TAG_VTHREAD;
  return -1;
}

/* ---- types ----------------------------------------------------------------- */

const char *tl_type_str(tl_type t, char *buf) {
  const char *base;
  if (t.code == TL_TC_VOID) return strcpy(buf, "void");
  if (t.code == TL_TC_UINT && t.bits == 1) base = "bool";
  else if (t.code == TL_TC_INT) base = "int";
  else if (t.code == TL_TC_UINT) base = "uint";
  else if (t.code == TL_TC_FLOAT) base = "float";
  else base = "handle";
  if (t.code == TL_TC_UINT && t.bits == 1)
    snprintf(buf, 24, "bool");
  else if (t.code == TL_TC_HANDLE)
    snprintf(buf, 24, "handle");
  else
    snprintf(buf, 24, "%s%d", base, t.bits);
  if (t.lanes > 1) snprintf(buf + strlen(buf), 24 - strlen(buf), "x%d", t.lanes);
  return buf;
}

tl_type tl_type_from_dtype(int dtype) {
  switch (dtype) {
  case TL_FLOAT32: return tl_type_make(TL_TC_FLOAT, 32, 1);
  case TL_FLOAT16: return tl_type_make(TL_TC_FLOAT, 16, 1);
  case TL_FLOAT64: return tl_type_make(TL_TC_FLOAT, 64, 1);
  case TL_INT8: return tl_type_make(TL_TC_INT, 8, 1);
  case TL_INT16: return tl_type_make(TL_TC_INT, 16, 1);
  case TL_INT32: return tl_type_make(TL_TC_INT, 32, 1);
  case TL_INT64: return tl_type_make(TL_TC_INT, 64, 1);
  case TL_UINT8: return tl_type_make(TL_TC_UINT, 8, 1);
  case TL_BOOL: return TL_T_BOOL;
  default: return TL_T_VOID;
  }
}

int tl_type_to_dtype(tl_type t) {
  if (t.lanes != 1) return -1;
  switch (t.code) {
  case TL_TC_FLOAT: return t.bits == 32 ? TL_FLOAT32 : t.bits == 16 ? TL_FLOAT16 : t.bits == 64 ? TL_FLOAT64 : -1;
  case TL_TC_INT:
    return t.bits == 8 ? TL_INT8 : t.bits == 16 ? TL_INT16 : t.bits == 32 ? TL_INT32 : t.bits == 64 ? TL_INT64 : -1;
  case TL_TC_UINT: return t.bits == 1 ? TL_BOOL : t.bits == 8 ? TL_UINT8 : -1;
  default: return -1;
  }
}

/* ---- table ------------------------------------------------------------------- */

tl_ir *tl_ir_new(void) {
  tl_ir *ir = tl_calloc(1, sizeof *ir);
  tl_arena_init(&ir->arena);
  tl_node none = {0};
  none.type = TL_T_VOID;
  TL_VEC_PUSH(ir->nodes, none);
  TL_VEC_PUSH(ir->kids, TL_NOREF);
  ir->hcap = 1024;
  ir->htab = tl_calloc(ir->hcap, sizeof(uint32_t));
  return ir;
}

void tl_ir_free(tl_ir *ir) {
  if (!ir) return;
  TL_VEC_FREE(ir->nodes);
  TL_VEC_FREE(ir->kids);
  TL_VEC_FREE(ir->vars);
  TL_VEC_FREE(ir->bufs);
  TL_VEC_FREE(ir->strs);
  free(ir->htab);
  tl_arena_free(&ir->arena);
  free(ir);
}

static uint64_t node_hash(int op, tl_type type, uint64_t imm, const tl_ref *kids, int n) {
  uint64_t h = tl_hash_mix((uint64_t)op, ((uint64_t)type.code << 24) | ((uint64_t)type.bits << 16) | type.lanes);
  h = tl_hash_mix(h, imm);
  for (int i = 0; i < n; i++) h = tl_hash_mix(h, kids[i]);
  return h;
}

static int node_equal(const tl_ir *ir, tl_ref r, int op, tl_type type, uint64_t imm,
                      const tl_ref *kids, int n) {
  const tl_node *nd = &ir->nodes.v[r];
  if (nd->op != op || nd->nkids != n || !tl_type_eq(nd->type, type) || nd->imm.u != imm) return 0;
  const tl_ref *k = ir->kids.v + nd->kids;
  for (int i = 0; i < n; i++)
    if (k[i] != kids[i]) return 0;
  return 1;
}

static void rehash(tl_ir *ir) {
  uint32_t ncap = ir->hcap * 2;
  uint32_t *nt = tl_calloc(ncap, sizeof(uint32_t));
  for (uint32_t i = 0; i < ir->hcap; i++) {
    tl_ref r = ir->htab[i];
    if (!r) continue;
    const tl_node *nd = &ir->nodes.v[r];
    uint64_t h = node_hash(nd->op, nd->type, nd->imm.u, ir->kids.v + nd->kids, nd->nkids);
    uint32_t j = (uint32_t)h & (ncap - 1);
    while (nt[j]) j = (j + 1) & (ncap - 1);
    nt[j] = r;
  }
  free(ir->htab);
  ir->htab = nt;
  ir->hcap = ncap;
}

tl_ref tl_ir_make(tl_ir *ir, int op, tl_type type, uint64_t imm, const tl_ref *kids, int nkids) {
  tl_assert(op >= 0 && op < TL_IR__MAX);
  tl_assert(tl_ir_opnkids[op] < 0 || tl_ir_opnkids[op] == nkids);
  if (ir->hcount * 2 >= ir->hcap) rehash(ir);
  uint64_t h = node_hash(op, type, imm, kids, nkids);
  uint32_t j = (uint32_t)h & (ir->hcap - 1);
  while (ir->htab[j]) {
    if (node_equal(ir, ir->htab[j], op, type, imm, kids, nkids)) return ir->htab[j];
    j = (j + 1) & (ir->hcap - 1);
  }
  tl_node nd;
  memset(&nd, 0, sizeof nd);
  nd.op = (uint16_t)op;
  nd.nkids = (uint16_t)nkids;
  nd.type = type;
  nd.imm.u = imm;
  nd.kids = (uint32_t)ir->kids.n;
  /* kids may point into ir->kids itself, which growing may move: copy out first */
  tl_ref stack[16], *tmp = NULL;
  if (nkids > 0 && kids >= ir->kids.v && kids < ir->kids.v + ir->kids.cap) {
    tmp = nkids <= 16 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)nkids);
    memcpy(tmp, kids, sizeof(tl_ref) * (size_t)nkids);
    kids = tmp;
  }
  TL_VEC_RESERVE(ir->kids, ir->kids.n + nkids);
  for (int i = 0; i < nkids; i++) ir->kids.v[ir->kids.n + i] = kids[i];
  if (tmp && tmp != stack) free(tmp);
  ir->kids.n += nkids;
  tl_ref r = (tl_ref)ir->nodes.n;
  TL_VEC_PUSH(ir->nodes, nd);
  ir->htab[j] = r;
  ir->hcount++;
  return r;
}

uint32_t tl_ir_intern(tl_ir *ir, const char *s) {
  for (int i = 0; i < ir->strs.n; i++)
    if (strcmp(ir->strs.v[i], s) == 0) return (uint32_t)i;
  TL_VEC_PUSH(ir->strs, tl_arena_strdup(&ir->arena, s));
  return (uint32_t)(ir->strs.n - 1);
}

tl_ref tl_var_new(tl_ir *ir, const char *name, tl_type type) {
  tl_var v = {tl_arena_strdup(&ir->arena, name ? name : "v"), type};
  TL_VEC_PUSH(ir->vars, v);
  return tl_ir_make(ir, TL_IR_VAR, type, (uint64_t)(ir->vars.n - 1), NULL, 0);
}

int tl_buffer_new(tl_ir *ir, const char *name, tl_type dtype, int ndim, const tl_ref *shape,
                  int scope) {
  tl_buffer b;
  memset(&b, 0, sizeof b);
  b.name = tl_arena_strdup(&ir->arena, name ? name : "buf");
  b.dtype = dtype;
  b.ndim = ndim;
  b.shape = tl_arena_alloc(&ir->arena, sizeof(tl_ref) * (size_t)(ndim > 0 ? ndim : 1));
  for (int i = 0; i < ndim; i++) b.shape[i] = shape[i];
  b.scope = scope;
  b.arg = -1;
  TL_VEC_PUSH(ir->bufs, b);
  return ir->bufs.n - 1;
}

/* ---- immediates ---------------------------------------------------------------- */

static int64_t wrap_int(tl_type t, int64_t v) {
  int bits = t.bits;
  if (bits >= 64 || bits == 0) return v;
  if (t.code == TL_TC_UINT) return (int64_t)((uint64_t)v & ((1ull << bits) - 1));
  uint64_t m = 1ull << (bits - 1);
  uint64_t x = (uint64_t)v & ((1ull << bits) - 1);
  return (int64_t)((x ^ m) - m);
}

tl_ref tl_imm_int(tl_ir *ir, tl_type t, int64_t v) {
  if (t.code == TL_TC_FLOAT) return tl_imm_float(ir, t, (double)v);
  tl_type s = tl_type_scalar(t);
  tl_ref r = tl_ir_make(ir, TL_IR_INT, s, (uint64_t)wrap_int(s, v), NULL, 0);
  return t.lanes > 1 ? tl_broadcast(ir, r, t.lanes) : r;
}

tl_ref tl_imm_float(tl_ir *ir, tl_type t, double v) {
  if (t.code != TL_TC_FLOAT) return tl_imm_int(ir, t, (int64_t)v);
  tl_type s = tl_type_scalar(t);
  if (s.bits == 32) v = (double)(float)v;
  if (v == 0) v = 0; /* one zero: -0.0 and 0.0 hash alike */
  union { double f; uint64_t u; } c;
  c.f = v;
  tl_ref r = tl_ir_make(ir, TL_IR_FLOAT, s, c.u, NULL, 0);
  return t.lanes > 1 ? tl_broadcast(ir, r, t.lanes) : r;
}

int tl_ir_is_int(const tl_ir *ir, tl_ref r, int64_t *v) {
  const tl_node *n = &ir->nodes.v[r];
  if (n->op != TL_IR_INT) return 0;
  if (v) *v = n->imm.i;
  return 1;
}

int tl_ir_is_float(const tl_ir *ir, tl_ref r, double *v) {
  const tl_node *n = &ir->nodes.v[r];
  if (n->op != TL_IR_FLOAT) return 0;
  if (v) *v = n->imm.f;
  return 1;
}

/* ---- typed constructors -------------------------------------------------------- */

/* Bring an immediate operand to the type of the other operand. */
static tl_ref coerce(tl_ir *ir, tl_ref imm, tl_type t) {
  const tl_node *n = &ir->nodes.v[imm];
  if (tl_type_eq(n->type, t)) return imm;
  if (n->op == TL_IR_INT) return tl_imm_int(ir, t, n->imm.i);
  if (n->op == TL_IR_FLOAT) return tl_imm_float(ir, t, n->imm.f);
  if (n->type.lanes == 1 && t.lanes > 1 && tl_type_eq(n->type, tl_type_scalar(t)))
    return tl_broadcast(ir, imm, t.lanes);
  return imm;
}


static int fold_int(int op, int64_t a, int64_t b, int64_t *out) {
  switch (op) {
  case TL_IR_ADD: *out = (int64_t)((uint64_t)a + (uint64_t)b); return 1;
  case TL_IR_SUB: *out = (int64_t)((uint64_t)a - (uint64_t)b); return 1;
  case TL_IR_MUL: *out = (int64_t)((uint64_t)a * (uint64_t)b); return 1;
  case TL_IR_FLOORDIV: if (!b) return 0; *out = fdiv64(a, b); return 1;
  case TL_IR_FLOORMOD: if (!b) return 0; *out = fmod64(a, b); return 1;
  case TL_IR_TRUNCDIV: if (!b) return 0; *out = a / b; return 1;
  case TL_IR_TRUNCMOD: if (!b) return 0; *out = a % b; return 1;
  case TL_IR_MIN: *out = a < b ? a : b; return 1;
  case TL_IR_MAX: *out = a > b ? a : b; return 1;
  case TL_IR_SHL: *out = (int64_t)((uint64_t)a << (b & 63)); return 1;
  case TL_IR_SHR: *out = a >> (b & 63); return 1;
  case TL_IR_BITAND: *out = a & b; return 1;
  case TL_IR_BITOR: *out = a | b; return 1;
  case TL_IR_BITXOR: *out = a ^ b; return 1;
  case TL_IR_EQ: *out = a == b; return 1;
  case TL_IR_NE: *out = a != b; return 1;
  case TL_IR_LT: *out = a < b; return 1;
  case TL_IR_LE: *out = a <= b; return 1;
  case TL_IR_GT: *out = a > b; return 1;
  case TL_IR_GE: *out = a >= b; return 1;
  case TL_IR_AND: *out = a && b; return 1;
  case TL_IR_OR: *out = a || b; return 1;
  default: return 0;
  }
}

static int fold_float(int op, double a, double b, double *out, int *is_bool) {
  *is_bool = 0;
  switch (op) {
  case TL_IR_ADD: *out = a + b; return 1;
  case TL_IR_SUB: *out = a - b; return 1;
  case TL_IR_MUL: *out = a * b; return 1;
  case TL_IR_DIV: if (b == 0) return 0; *out = a / b; return 1;
  case TL_IR_MIN: *out = a < b ? a : b; return 1;
  case TL_IR_MAX: *out = a > b ? a : b; return 1;
  case TL_IR_EQ: *is_bool = 1; *out = a == b; return 1;
  case TL_IR_NE: *is_bool = 1; *out = a != b; return 1;
  case TL_IR_LT: *is_bool = 1; *out = a < b; return 1;
  case TL_IR_LE: *is_bool = 1; *out = a <= b; return 1;
  case TL_IR_GT: *is_bool = 1; *out = a > b; return 1;
  case TL_IR_GE: *is_bool = 1; *out = a >= b; return 1;
  default: return 0;
  }
}

tl_ref tl_binary(tl_ir *ir, int op, tl_ref a, tl_ref b) {
  tl_assert(tl_ir_opflags[op] & TL_IRF_E);
  const tl_node *na = &ir->nodes.v[a], *nb = &ir->nodes.v[b];
  int ia = na->op == TL_IR_INT || na->op == TL_IR_FLOAT;
  int ib = nb->op == TL_IR_INT || nb->op == TL_IR_FLOAT;
  if (ia && !ib) a = coerce(ir, a, nb->type);
  else if (ib && !ia) b = coerce(ir, b, na->type);
  else if (ia && ib && !tl_type_eq(na->type, nb->type)) {
    /* two immediates: the wider / float one wins */
    tl_type t = na->type.code == TL_TC_FLOAT || na->type.bits >= nb->type.bits ? na->type : nb->type;
    if (nb->type.code == TL_TC_FLOAT && na->type.code != TL_TC_FLOAT) t = nb->type;
    a = coerce(ir, a, t);
    b = coerce(ir, b, t);
  }
  na = &ir->nodes.v[a];
  nb = &ir->nodes.v[b];
  tl_type t = na->type;
  tl_assert(tl_type_eq(na->type, nb->type));
  int pred = (tl_ir_opflags[op] & TL_IRF_P) != 0;
  tl_type rt = pred ? tl_type_lanes(TL_T_BOOL, t.lanes) : t;

  /* folding of immediates */
  if (na->op == TL_IR_INT && nb->op == TL_IR_INT) {
    int64_t v;
    if (fold_int(op, na->imm.i, nb->imm.i, &v)) return tl_imm_int(ir, rt, v);
  } else if (na->op == TL_IR_FLOAT && nb->op == TL_IR_FLOAT) {
    double v;
    int isb;
    if (fold_float(op, na->imm.f, nb->imm.f, &v, &isb))
      return isb ? tl_imm_int(ir, rt, (int64_t)v) : tl_imm_float(ir, rt, v);
  }
  /* trivial identities (exact for integers; x*0 only for integers) */
  int64_t ka = 0, kb = 0;
  int ca = tl_ir_is_int(ir, a, &ka), cb = tl_ir_is_int(ir, b, &kb);
  double fa = 0, fb = 0;
  int fa_ok = tl_ir_is_float(ir, a, &fa), fb_ok = tl_ir_is_float(ir, b, &fb);
  switch (op) {
  case TL_IR_ADD:
    if ((ca && ka == 0) || (fa_ok && fa == 0)) return b;
    if ((cb && kb == 0) || (fb_ok && fb == 0)) return a;
    break;
  case TL_IR_SUB:
    if ((cb && kb == 0) || (fb_ok && fb == 0)) return a;
    if (a == b && tl_type_is_int(t)) return tl_imm_int(ir, t, 0);
    break;
  case TL_IR_MUL:
    if ((ca && ka == 1) || (fa_ok && fa == 1)) return b;
    if ((cb && kb == 1) || (fb_ok && fb == 1)) return a;
    if ((ca && ka == 0) || (cb && kb == 0)) return tl_imm_int(ir, t, 0);
    break;
  case TL_IR_DIV:
    if (fb_ok && fb == 1) return a;
    break;
  case TL_IR_FLOORDIV:
  case TL_IR_TRUNCDIV:
    if (cb && kb == 1) return a;
    if (ca && ka == 0) return a;
    break;
  case TL_IR_FLOORMOD:
  case TL_IR_TRUNCMOD:
    if (cb && kb == 1) return tl_imm_int(ir, t, 0);
    break;
  case TL_IR_MIN:
  case TL_IR_MAX:
    if (a == b) return a;
    break;
  case TL_IR_AND:
    if (ca) return ka ? b : a;
    if (cb) return kb ? a : b;
    break;
  case TL_IR_OR:
    if (ca) return ka ? a : b;
    if (cb) return kb ? b : a;
    break;
  }
  if ((tl_ir_opflags[op] & TL_IRF_C) && a > b && (ca || fa_ok)) {
    tl_ref k[2] = {b, a};   /* immediates go right */
    return tl_ir_make(ir, op, rt, 0, k, 2);
  }
  tl_ref k[2] = {a, b};
  return tl_ir_make(ir, op, rt, 0, k, 2);
}

tl_ref tl_not(tl_ir *ir, tl_ref a) {
  int64_t v;
  if (tl_ir_is_int(ir, a, &v)) return tl_imm_int(ir, tl_ir_type(ir, a), !v);
  if (tl_ir_op(ir, a) == TL_IR_NOT) return tl_ir_kid(ir, a, 0);
  return tl_ir_make(ir, TL_IR_NOT, tl_ir_type(ir, a), 0, &a, 1);
}

tl_ref tl_select(tl_ir *ir, tl_ref c, tl_ref a, tl_ref b) {
  int64_t v;
  if (tl_ir_is_int(ir, c, &v)) return v ? a : b;
  if (a == b) return a;
  tl_type t = tl_ir_type(ir, a);
  b = coerce(ir, b, t);
  a = coerce(ir, a, tl_ir_type(ir, b));
  tl_ref k[3] = {c, a, b};
  return tl_ir_make(ir, TL_IR_SELECT, tl_ir_type(ir, a), 0, k, 3);
}

tl_ref tl_if_then_else(tl_ir *ir, tl_ref c, tl_ref a, tl_ref b) {
  int64_t v;
  if (tl_ir_is_int(ir, c, &v)) return v ? a : b;
  if (a == b) return a;
  b = coerce(ir, b, tl_ir_type(ir, a));
  a = coerce(ir, a, tl_ir_type(ir, b));
  tl_ref k[3] = {c, a, b};
  return tl_ir_make(ir, TL_IR_IF_THEN_ELSE, tl_ir_type(ir, a), 0, k, 3);
}

tl_ref tl_cast(tl_ir *ir, tl_type t, tl_ref a) {
  const tl_node *n = &ir->nodes.v[a];
  if (tl_type_eq(n->type, t)) return a;
  if (n->op == TL_IR_INT) return tl_type_is_float(t) ? tl_imm_float(ir, t, (double)n->imm.i) : tl_imm_int(ir, t, n->imm.i);
  if (n->op == TL_IR_FLOAT) {
    if (tl_type_is_float(t)) return tl_imm_float(ir, t, n->imm.f);
    if (tl_type_is_bool(t)) return tl_imm_int(ir, t, n->imm.f != 0);
    return tl_imm_int(ir, t, (int64_t)n->imm.f);
  }
  return tl_ir_make(ir, TL_IR_CAST, t, 0, &a, 1);
}

tl_ref tl_call(tl_ir *ir, int intrin, tl_type t, const tl_ref *args, int nargs) {
  tl_assert(intrin >= 0 && intrin < TL_INTRIN__MAX);
  return tl_ir_make(ir, TL_IR_CALL, t, (uint64_t)intrin, args, nargs);
}

tl_ref tl_load(tl_ir *ir, int buf, const tl_ref *idx, int nidx) {
  return tl_load_typed(ir, ir->bufs.v[buf].dtype, buf, idx, nidx);
}

tl_ref tl_load_typed(tl_ir *ir, tl_type t, int buf, const tl_ref *idx, int nidx) {
  tl_assert(buf >= 0 && buf < ir->bufs.n);
  return tl_ir_make(ir, TL_IR_LOAD, t, (uint64_t)buf, idx, nidx);
}

tl_ref tl_ramp(tl_ir *ir, tl_ref base, tl_ref stride, int lanes) {
  if (lanes == 1) return base;
  stride = coerce(ir, stride, tl_ir_type(ir, base));
  tl_ref k[2] = {base, stride};
  return tl_ir_make(ir, TL_IR_RAMP, tl_type_lanes(tl_ir_type(ir, base), lanes), 0, k, 2);
}

tl_ref tl_broadcast(tl_ir *ir, tl_ref v, int lanes) {
  if (lanes == 1) return v;
  tl_assert(tl_ir_type(ir, v).lanes == 1);
  return tl_ir_make(ir, TL_IR_BROADCAST, tl_type_lanes(tl_ir_type(ir, v), lanes), 0, &v, 1);
}

tl_ref tl_let(tl_ir *ir, tl_ref var, tl_ref value, tl_ref body) {
  tl_ref k[3] = {var, value, body};
  return tl_ir_make(ir, TL_IR_LET, tl_ir_type(ir, body), 0, k, 3);
}

tl_ref tl_for(tl_ir *ir, tl_ref var, tl_ref min, tl_ref extent, int kind, int tag, tl_ref body) {
  tl_type t = tl_ir_type(ir, var);
  min = coerce(ir, min, t);
  extent = coerce(ir, extent, t);
  tl_ref k[4] = {var, min, extent, body};
  return tl_ir_make(ir, TL_IR_FOR, TL_T_VOID, (uint64_t)(kind | (tag << 8)), k, 4);
}

tl_ref tl_let_stmt(tl_ir *ir, tl_ref var, tl_ref value, tl_ref body) {
  tl_ref k[3] = {var, value, body};
  return tl_ir_make(ir, TL_IR_LET_STMT, TL_T_VOID, 0, k, 3);
}

tl_ref tl_if(tl_ir *ir, tl_ref cond, tl_ref then_s, tl_ref else_s) {
  int64_t v;
  if (tl_ir_is_int(ir, cond, &v)) {
    if (v) return then_s;
    return else_s ? else_s : tl_nop(ir);
  }
  tl_ref k[3] = {cond, then_s, else_s};
  return tl_ir_make(ir, TL_IR_IF, TL_T_VOID, 0, k, 3);
}

tl_ref tl_store(tl_ir *ir, int buf, tl_ref value, const tl_ref *idx, int nidx) {
  tl_ref stack[16];
  tl_ref *k = nidx + 1 <= 16 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)(nidx + 1));
  k[0] = value;
  for (int i = 0; i < nidx; i++) k[i + 1] = idx[i];
  tl_ref r = tl_ir_make(ir, TL_IR_STORE, TL_T_VOID, (uint64_t)buf, k, nidx + 1);
  if (k != stack) free(k);
  return r;
}

tl_ref tl_alloc(tl_ir *ir, int buf, tl_ref body) {
  return tl_ir_make(ir, TL_IR_ALLOC, TL_T_VOID, (uint64_t)buf, &body, 1);
}

tl_ref tl_seq(tl_ir *ir, const tl_ref *stmts, int n) {
  TL_VEC(tl_ref) flat = {0};
  for (int i = 0; i < n; i++) {
    tl_ref s = stmts[i];
    if (!s || tl_ir_op(ir, s) == TL_IR_NOP) continue;
    if (tl_ir_op(ir, s) == TL_IR_SEQ) {
      for (int j = 0; j < tl_ir_nkids(ir, s); j++) TL_VEC_PUSH(flat, tl_ir_kid(ir, s, j));
    } else {
      TL_VEC_PUSH(flat, s);
    }
  }
  tl_ref r;
  if (flat.n == 0) r = tl_nop(ir);
  else if (flat.n == 1) r = flat.v[0];
  else r = tl_ir_make(ir, TL_IR_SEQ, TL_T_VOID, 0, flat.v, flat.n);
  TL_VEC_FREE(flat);
  return r;
}

tl_ref tl_attr(tl_ir *ir, const char *key, tl_ref value, tl_ref body) {
  tl_ref k[2] = {value, body};
  return tl_ir_make(ir, TL_IR_ATTR, TL_T_VOID, tl_ir_intern(ir, key), k, 2);
}

tl_ref tl_barrier(tl_ir *ir, int scope) {
  return tl_ir_make(ir, TL_IR_BARRIER, TL_T_VOID, (uint64_t)scope, NULL, 0);
}

tl_ref tl_eval(tl_ir *ir, tl_ref e) { return tl_ir_make(ir, TL_IR_EVAL, TL_T_VOID, 0, &e, 1); }

tl_ref tl_nop(tl_ir *ir) { return tl_ir_make(ir, TL_IR_NOP, TL_T_VOID, 0, NULL, 0); }

/* ---- traversal -------------------------------------------------------------------
** Memo tables are dense arrays over the node count at entry: nodes created
** during a rewrite have larger refs and are never revisited. */

typedef struct {
  tl_ir_rewrite_fn fn;
  void *ud;
  tl_ref *memo;                  /* 0 = not visited */
  tl_ref limit;                  /* nodes >= limit are new: returned as is */
} mutate_st;

static tl_ref mutate_rec(tl_ir *ir, tl_ref r, mutate_st *st) {
  if (!r) return r;
  if (r >= st->limit) return r;
  if (st->memo[r]) return st->memo[r];
  tl_node nd = ir->nodes.v[r];
  tl_ref stack[8];
  tl_ref *nk = nd.nkids <= 8 ? stack : tl_malloc(sizeof(tl_ref) * nd.nkids);
  int changed = 0;
  for (int i = 0; i < nd.nkids; i++) {
    tl_ref k = ir->kids.v[nd.kids + (uint32_t)i];
    nk[i] = mutate_rec(ir, k, st);
    changed |= nk[i] != k;
  }
  tl_ref out = r;
  if (changed) out = tl_ir_make(ir, nd.op, nd.type, nd.imm.u, nk, nd.nkids);
  if (nk != stack) free(nk);
  if (st->fn) out = st->fn(ir, out, st->ud);
  st->memo[r] = out;
  return out;
}

tl_ref tl_ir_mutate(tl_ir *ir, tl_ref root, tl_ir_rewrite_fn fn, void *ud) {
  mutate_st st = {fn, ud, tl_calloc((size_t)ir->nodes.n, sizeof(tl_ref)), (tl_ref)ir->nodes.n};
  tl_ref r = mutate_rec(ir, root, &st);
  free(st.memo);
  return r;
}

typedef struct {
  const tl_ref *from, *to;
  int n;
} subst_st;

static tl_ref subst_fn(tl_ir *ir, tl_ref node, void *ud) {
  subst_st *s = ud;
  if (tl_ir_op(ir, node) != TL_IR_VAR) return node;
  for (int i = 0; i < s->n; i++)
    if (s->from[i] == node) return s->to[i];
  return node;
}

tl_ref tl_ir_substitute(tl_ir *ir, tl_ref root, const tl_ref *from, const tl_ref *to, int n) {
  if (n == 0) return root;
  subst_st s = {from, to, n};
  return tl_ir_mutate(ir, root, subst_fn, &s);
}

static void visit_rec(const tl_ir *ir, tl_ref r, tl_ir_visit_fn fn, void *ud, uint8_t *seen) {
  if (!r || seen[r]) return;
  seen[r] = 1;
  if (!fn(ir, r, ud)) return;
  const tl_node *nd = &ir->nodes.v[r];
  for (int i = 0; i < nd->nkids; i++) visit_rec(ir, ir->kids.v[nd->kids + (uint32_t)i], fn, ud, seen);
}

void tl_ir_visit(const tl_ir *ir, tl_ref root, tl_ir_visit_fn fn, void *ud) {
  uint8_t *seen = tl_calloc((size_t)ir->nodes.n, 1);
  visit_rec(ir, root, fn, ud, seen);
  free(seen);
}

typedef struct {
  tl_ref var;
  int found;
} uses_st;

static int uses_fn(const tl_ir *ir, tl_ref node, void *ud) {
  uses_st *u = ud;
  if (node == u->var) u->found = 1;
  return !u->found;
}

int tl_ir_uses_var(const tl_ir *ir, tl_ref root, tl_ref var) {
  uses_st u = {var, 0};
  tl_ir_visit(ir, root, uses_fn, &u);
  return u.found;
}
