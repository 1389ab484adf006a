/*
** layout.c -- rewrite the layout of a constant argument of a lowered function
** so that its loop nest reads it in order (tl_lowered_rewrite_layout).
**
** A tuned CPU kernel reads a weight through the tiles of its loops: a 1x1
** conv on HWIO weights [CI, CO] with output channels cut into chunks of 256
** reads 1 KiB of each 4 KiB row per chunk, so every step of the reduction
** jumps to another page, where the hardware prefetchers stop. When the weight
** is a constant of the graph, it can be stored in the order the loops read
** it instead, once, when the network is built. (TVM's auto-scheduler calls
** this layout rewriting of its "layout-free" placeholders.)
**
** The pass works on the flattened loop IR. Every load of the argument must
** index it by
**
**     offset + sum_j coef_j * atom_j
**
** where an atom is a loop variable v of a loop starting at 0, or floor(v / a),
** or v mod m, or floor(v / a) mod m (a fused loop's pieces), each with a
** known range [0, ext_j). All loads must agree on atoms, coefficients and
** offset. The new layout has one dimension per atom, ordered as the loops
** nest (outermost first; pieces of one variable by divisor, larger first),
** and a load indexes it as sum_j atom_j * stride_j, row-major in that order:
** the innermost loop walks the new buffer contiguously, a vectorized loop
** among them. The map says how to fill the new buffer from the old one:
** new[a_0, ..., a_n-1] = old[offset + sum_j coef_j * a_j] (zero where that
** falls outside the old buffer: an index only a guarded load could form).
**
** A function whose loops were partitioned (core/te/partition.h) is analysed and rewritten
** as it was before the partitioning, and then partitioned again.
**
** The rewrite is skipped (no map, no error) when the analysis does not apply,
** when the new layout would be larger than the old buffer (atoms that revisit
** elements), or when it equals the old one.
*/
#include "te.h"
#include "partition.h"

#include <stdlib.h>
#include <string.h>

#define MAX_ATOMS 24

struct tl_layout_map {
  int natoms;
  int64_t ext[MAX_ATOMS];
  int64_t coef[MAX_ATOMS];
  int64_t offset;
  int64_t old_numel;
  int dtype_bytes;
};

typedef struct {
  tl_ref var;
  int64_t min, extent;
  int order;                      /* pre-order position of its loop */
  int ambiguous;                  /* bound by two loops that differ */
} loopinfo;

typedef struct {
  tl_ref atom;                    /* the atom's expression */
  int64_t coef;
} term;

typedef struct {
  const tl_ir *ir;
  int buf;
  TL_VEC(loopinfo) loops;
  TL_VEC(tl_ref) loads;
  int bad;                        /* a store to the buffer, a vector or multi-index load */
} scan_st;

static int scan_fn(const tl_ir *ir, tl_ref node, void *ud) {
  scan_st *s = ud;
  int op = tl_ir_op(ir, node);
  if (op == TL_IR_FOR) {
    tl_ref v = tl_ir_kid(ir, node, 0);
    int64_t mn = -1, ex = -1;
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, node, 1), &mn)) mn = -1;
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, node, 2), &ex)) ex = -1;
    for (int i = 0; i < s->loops.n; i++)
      if (s->loops.v[i].var == v) {
        if (s->loops.v[i].min != mn || s->loops.v[i].extent != ex) s->loops.v[i].ambiguous = 1;
        return 1;
      }
    loopinfo li = {v, mn, ex, s->loops.n, 0};
    TL_VEC_PUSH(s->loops, li);
  } else if (op == TL_IR_LOAD || op == TL_IR_STORE) {
    if ((int)tl_ir_node(ir, node)->imm.u != s->buf) return 1;
    if (op == TL_IR_STORE || tl_ir_nkids(ir, node) != 1 || tl_ir_type(ir, node).lanes != 1) {
      s->bad = 1;
      return 1;
    }
    for (int i = 0; i < s->loads.n; i++)
      if (s->loads.v[i] == node) return 1;
    TL_VEC_PUSH(s->loads, node);
  }
  return 1;
}

static const loopinfo *loop_of(const scan_st *s, tl_ref var) {
  for (int i = 0; i < s->loops.n; i++)
    if (s->loops.v[i].var == var) return s->loops.v[i].ambiguous ? NULL : &s->loops.v[i];
  return NULL;
}

/* An atom: var, floor(var / a), var mod m, floor(var / a) mod m. Its loop, its
** divisor (1 without one) and its range. */
static int atom_info(const scan_st *s, tl_ref e, const loopinfo **lp, int64_t *div, int64_t *ext) {
  const tl_ir *ir = s->ir;
  int64_t mod = 0, a = 1;
  int op = tl_ir_op(ir, e);
  if (op == TL_IR_FLOORMOD) {
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &mod) || mod <= 0) return 0;
    e = tl_ir_kid(ir, e, 0);
    op = tl_ir_op(ir, e);
  }
  if (op == TL_IR_FLOORDIV) {
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &a) || a <= 0) return 0;
    e = tl_ir_kid(ir, e, 0);
    op = tl_ir_op(ir, e);
  }
  if (op != TL_IR_VAR) return 0;
  const loopinfo *li = loop_of(s, e);
  if (!li || li->min != 0 || li->extent <= 0) return 0;
  int64_t x = (li->extent + a - 1) / a;
  if (mod && mod < x) x = mod;
  *lp = li;
  *div = a;
  *ext = x;
  return 1;
}

static int add_term(term *t, int *n, tl_ref atom, int64_t coef) {
  for (int i = 0; i < *n; i++)
    if (t[i].atom == atom) {
      t[i].coef += coef;
      return 1;
    }
  if (*n >= MAX_ATOMS) return 0;
  t[*n].atom = atom;
  t[*n].coef = coef;
  (*n)++;
  return 1;
}

/* e * scale as offset + terms; 0 where e is not of that form. */
static int linearize(const scan_st *s, tl_ref e, int64_t scale, term *t, int *n, int64_t *offset) {
  const tl_ir *ir = s->ir;
  int64_t v;
  switch (tl_ir_op(ir, e)) {
  case TL_IR_INT:
    tl_ir_is_int(ir, e, &v);
    *offset += v * scale;
    return 1;
  case TL_IR_ADD:
    return linearize(s, tl_ir_kid(ir, e, 0), scale, t, n, offset) &&
           linearize(s, tl_ir_kid(ir, e, 1), scale, t, n, offset);
  case TL_IR_SUB:
    return linearize(s, tl_ir_kid(ir, e, 0), scale, t, n, offset) &&
           linearize(s, tl_ir_kid(ir, e, 1), -scale, t, n, offset);
  case TL_IR_MUL:
    if (tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &v)) return linearize(s, tl_ir_kid(ir, e, 0), scale * v, t, n, offset);
    if (tl_ir_is_int(ir, tl_ir_kid(ir, e, 0), &v)) return linearize(s, tl_ir_kid(ir, e, 1), scale * v, t, n, offset);
    return 0;
  case TL_IR_VAR:
  case TL_IR_FLOORDIV:
  case TL_IR_FLOORMOD: {
    const loopinfo *li;
    int64_t div, ext;
    if (!atom_info(s, e, &li, &div, &ext)) return 0;
    return add_term(t, n, e, scale);
  }
  default:
    return 0;
  }
}

typedef struct {
  int buf;
  tl_ref idx;                     /* the new index, the same for every load */
} apply_st;

static tl_ref rewrite_fn(tl_ir *ir, tl_ref node, void *ud) {
  apply_st *a = ud;
  if (tl_ir_op(ir, node) != TL_IR_LOAD || (int)tl_ir_node(ir, node)->imm.u != a->buf) return node;
  return tl_load_typed(ir, tl_ir_type(ir, node), a->buf, &a->idx, 1);
}

/* An atom of the new layout: its term, its loop's nesting position and divisor, its range. */
typedef struct {
  term t;
  int order;
  int64_t div, ext;
} slot;

/* By loop nesting, then larger divisor first (the outer piece of a fused loop). */
static int slot_cmp(const void *pa, const void *pb) {
  const slot *a = pa, *b = pb;
  if (a->order != b->order) return a->order < b->order ? -1 : 1;
  return a->div > b->div ? -1 : a->div < b->div;
}

static int dtype_bytes(tl_type t) { return t.bits >= 8 ? t.bits / 8 : 1; }

TL_EXPORT int tl_lowered_rewrite_layout(tl_ctx *ctx, tl_lowered *f, int arg, tl_layout_map **out) {
  *out = NULL;
  if (!f || arg < 0 || arg >= f->nargs)
    return tl_err(ctx, TL_E_ARG, "rewrite_layout: argument %d of a function of %d", arg, f ? f->nargs : 0);
  tl_ir *ir = f->ir;
  int buf = f->arg_bufs[arg];
  tl_buffer *bf = tl_ir_buffer(ir, buf);
  int64_t numel = 1;
  for (int d = 0; d < bf->ndim; d++) {
    int64_t e;
    if (!tl_ir_is_int(ir, bf->shape[d], &e) || e <= 0) return 0;
    numel *= e;
  }
  scan_st s;
  memset(&s, 0, sizeof s);
  s.ir = ir;
  s.buf = buf;
  /* a function with partitioned loops is analysed as it was before the partitioning (a
  ** variable bound by several pieces of a loop would be ambiguous), then partitioned again */
  tl_ref root = f->unpartitioned != TL_NOREF ? tl_ir_simplify(ir, f->unpartitioned, NULL) : f->body;
  tl_ir_visit(ir, root, scan_fn, &s);
  term first[MAX_ATOMS];
  int nfirst = 0, ok = !s.bad && s.loads.n > 0;
  int64_t off_first = 0;
  for (int i = 0; ok && i < s.loads.n; i++) {
    term t[MAX_ATOMS];
    int n = 0;
    int64_t off = 0;
    if (!linearize(&s, tl_ir_kid(ir, s.loads.v[i], 0), 1, t, &n, &off)) {
      ok = 0;
      break;
    }
    int m = 0;                      /* drop zero coefficients */
    for (int j = 0; j < n; j++)
      if (t[j].coef != 0) t[m++] = t[j];
    n = m;
    if (i == 0) {
      memcpy(first, t, sizeof(term) * (size_t)n);
      nfirst = n;
      off_first = off;
      continue;
    }
    if (n != nfirst || off != off_first) ok = 0;
    for (int j = 0; ok && j < n; j++) {
      int found = 0;
      for (int k = 0; k < nfirst; k++)
        if (first[k].atom == t[j].atom && first[k].coef == t[j].coef) found = 1;
      if (!found) ok = 0;
    }
  }
  if (!ok || nfirst == 0) {
    TL_VEC_FREE(s.loops);
    TL_VEC_FREE(s.loads);
    return 0;
  }
  slot sl[MAX_ATOMS];
  for (int j = 0; j < nfirst; j++) {
    const loopinfo *li;
    sl[j].t = first[j];
    atom_info(&s, first[j].atom, &li, &sl[j].div, &sl[j].ext);
    sl[j].order = li->order;
  }
  qsort(sl, (size_t)nfirst, sizeof *sl, slot_cmp);
  /* row-major strides in that order; the same layout already, or atoms that revisit (or
  ** skip) elements: nothing to do */
  int64_t stride[MAX_ATOMS], size = 1;
  int same = off_first == 0, fits = 1;
  for (int j = nfirst - 1; j >= 0 && fits; j--) {
    stride[j] = size;
    if (sl[j].t.coef != size) same = 0;
    if (sl[j].ext > numel / size) fits = 0;
    else size *= sl[j].ext;
  }
  if (same || !fits || size != numel) {
    TL_VEC_FREE(s.loops);
    TL_VEC_FREE(s.loads);
    return 0;
  }
  tl_layout_map *m = tl_calloc(1, sizeof *m);
  m->natoms = nfirst;
  m->offset = off_first;
  m->old_numel = numel;
  m->dtype_bytes = dtype_bytes(bf->dtype);
  apply_st a = {buf, tl_int(ir, 0)};
  for (int j = 0; j < nfirst; j++) {
    m->ext[j] = sl[j].ext;
    m->coef[j] = sl[j].t.coef;
    a.idx = tl_add(ir, a.idx, tl_mul(ir, sl[j].t.atom, tl_int(ir, stride[j])));
  }
  root = tl_ir_simplify(ir, tl_ir_mutate(ir, root, rewrite_fn, &a), NULL);
  if (f->unpartitioned != TL_NOREF) {
    f->unpartitioned = root;
    root = tl_ir_simplify(ir, tl_partition_loops(ir, root), NULL);
  }
  f->body = root;
  tl_ref *shape = tl_arena_alloc(&ir->arena, sizeof(tl_ref) * (size_t)nfirst);
  for (int j = 0; j < nfirst; j++) shape[j] = tl_int(ir, sl[j].ext);
  bf = tl_ir_buffer(ir, buf);               /* building nodes may have grown the tables */
  bf->ndim = nfirst;
  bf->shape = shape;
  TL_VEC_FREE(s.loops);
  TL_VEC_FREE(s.loads);
  *out = m;
  return 0;
}

TL_EXPORT void tl_layout_map_free(tl_layout_map *m) { free(m); }

TL_EXPORT int tl_layout_map_ndim(const tl_layout_map *m) { return m ? m->natoms : 0; }

TL_EXPORT int64_t tl_layout_map_extent(const tl_layout_map *m, int j) {
  return m && j >= 0 && j < m->natoms ? m->ext[j] : 0;
}

TL_EXPORT int64_t tl_layout_map_coef(const tl_layout_map *m, int j) {
  return m && j >= 0 && j < m->natoms ? m->coef[j] : 0;
}

TL_EXPORT int64_t tl_layout_map_offset(const tl_layout_map *m) { return m ? m->offset : 0; }

TL_EXPORT int tl_layout_map_apply(tl_ctx *ctx, const tl_layout_map *m, const tl_array *src, tl_array *dst) {
  if (!m || !src || !dst) return tl_err(ctx, TL_E_ARG, "layout_map_apply: NULL argument");
  const char *sp = tl_array_data(src);
  char *dp = tl_array_data(dst);
  if (!sp || !dp) return tl_err(ctx, TL_E_ARG, "layout_map_apply: the arrays must be on the host");
  if (tl_array_numel(src) != m->old_numel)
    return tl_err(ctx, TL_E_SHAPE, "layout_map_apply: the source has %lld elements, expected %lld",
                  (long long)tl_array_numel(src), (long long)m->old_numel);
  int64_t n = 1;
  for (int j = 0; j < m->natoms; j++) n *= m->ext[j];
  if (tl_array_numel(dst) != n)
    return tl_err(ctx, TL_E_SHAPE, "layout_map_apply: the destination has %lld elements, expected %lld",
                  (long long)tl_array_numel(dst), (long long)n);
  size_t eb = tl_array_nbytes(src) / (size_t)(m->old_numel ? m->old_numel : 1);
  if (tl_array_dtype(src) != tl_array_dtype(dst) || (int)eb != m->dtype_bytes)
    return tl_err(ctx, TL_E_DTYPE, "layout_map_apply: source and destination types differ from the function's");
  int64_t a[MAX_ATOMS] = {0};
  int64_t idx = m->offset;
  for (int64_t k = 0; k < n; k++) {
    if (idx >= 0 && idx < m->old_numel) memcpy(dp + (size_t)k * eb, sp + (size_t)idx * eb, eb);
    else memset(dp + (size_t)k * eb, 0, eb);
    for (int j = m->natoms - 1; j >= 0; j--) {     /* odometer, the last atom fastest */
      idx += m->coef[j];
      if (++a[j] < m->ext[j]) break;
      idx -= m->coef[j] * m->ext[j];
      a[j] = 0;
    }
  }
  return 0;
}
