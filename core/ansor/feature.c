/*
** feature.c -- the auto-scheduler's per-store features: one row of 164
** floats per STORE statement of a lowered function, the input of the
** pack-sum cost model (core/tuner/ansor_model.c).
**
** The walk keeps the stack of enclosing loops (extent, kind, thread tag),
** outer_prod = the product of their extents, the thread-binding lengths
** (blockIdx/threadIdx set, vthread multiplies), the enclosing
** pragma_auto_unroll_max_step, and per loop the access records of the
** stores seen so far inside it. At each STORE it reads the stored value and
** every access (the store's and each LOAD of the value, equal accesses
** once) and writes a row. Unlike a row per stored buffer, a reduction's
** init and update are two rows; the cost model sums rows, so a state's
** score still covers all its stores.
**
** Touched regions. An access's flattened index is split into terms
** c * e (e a loop var, a let var expanded, or a non-affine part such as
** floordiv(fused, 56)) plus a constant. Each term goes to the buffer
** dimension with the largest row-major stride dividing c, so the element
** index becomes per-dimension indices again. At loop level i (loops i and
** inward take their whole range, outer loops one point) each dimension's
** interval is the sum of its terms' intervals, the accesses of one buffer
** are unioned, and touched(i) = the product of the extents, each capped
** at the dimension's size; touched(depth) is the region of one iteration.
**
** Layout (the value of each slot goes through log2p(x) = sign(x) *
** log2(1 + |x|) except the one-hots and is_gpu):
**
**   0..15    op counts in the stored value, each x lanes x outer_prod
**            (index arithmetic of loads and stores is not counted):
**            float_{mad, addsub, mul, divmod, cmp, math_func, other_func},
**            int_{mad, addsub, mul, divmod, cmp, math_func, other_func},
**            bool_op, select_op. mad and other_func stay 0 (the IR has no
**            fused multiply-add and no opaque calls); min/max count as cmp,
**            every intrinsic (exp, sqrt, ...) as math_func; an op is float
**            or int by its first operand's type.
**   16..26   vec_{num, prod, len}, vec_pos onehot8: the vectorized loops
**            around the store: how many, the product of their extents,
**            the innermost one's extent, and where the innermost sits:
**            {none, inner_spatial, middle_spatial, outer_spatial,
**            inner_reduce, middle_reduce, outer_reduce, mixed}; spatial =
**            its var indexes the store, inner/outer = innermost/outermost
**            of the whole nest; mixed = several of both kinds.
**   27..37   unroll_{num, prod, len}, unroll_pos onehot8 (the same)
**   38..48   parallel_{num, prod, len}, parallel_pos onehot8 (the same)
**   49..56   is_gpu (any thread-bound loop in the function), then the
**            enclosing blockIdx.{x,y,z}, threadIdx.{x,y,z} extents and the
**            product of the vthread extents (1 where unbound)
**   57..146  buffer access features of the top 5 buffers (sorted by lines,
**            then bytes, descending; zero rows when fewer), 18 each, Bk.*:
**              acc_type onehot3 {read, write, read_write}
**              bytes         outer_prod x element bytes x accesses
**              unique_bytes  touched(0) x element bytes
**              lines         max(1, outer_prod / reduce_ratio x
**                            min(1, stride x element bytes / cache line))
**              unique_lines  max(1, unique_bytes / min(run bytes, line)),
**                            run = the contiguous elements of touched(0)
**              reuse_type onehot3 {loop_multiple_read,
**                            serial_multiple_read_write, no_reuse}
**              reuse_dis_iter, reuse_dis_bytes, reuse_ct
**              bytes, unique_bytes, lines, unique_lines / reuse_ct
**                            (reuse_ct below 0.5 counts as 0.5)
**              stride        the smallest |coefficient| of the innermost
**                            loop's var in the accesses (0 when that var
**                            does not index the buffer)
**            stride/reduce_ratio: loops are scanned inner to outer; the
**            first whose var indexes the buffer gives the stride, the
**            extents of those skipped multiply reduce_ratio. Reuse, inner
**            to outer: a loop whose var indexes the buffer multiplies
**            dis_iter by its extent and sets dis_bytes to the bytes its
**            records touch; if the loop holds several records of the
**            buffer (another store inside it touched it too) the reuse is
**            serial (ct = records - 1, dis_iter = the least touched / extent,
**            dis_bytes / extent); the first loop whose var does not index
**            the buffer makes it a loop reuse (ct = its extent, dis_bytes
**            = the records' element bytes when still 0); else no reuse.
**   147..156 arithmetic intensity curve: ops(k) = float ops of the store x
**            the extents of loops k and inward, bytes(k) = sum of the
**            buffers' touched(k) x element bytes; ten samples of
**            ops/bytes at ops = ops(0) x (s+1)/10, interpolated linearly
**            between levels (zeros without float ops or loops)
**   157..160 alloc_{size, prod, outer_prod, inner_prod}: for a stored
**            buffer that an ALLOC introduced: its bytes, its elements x
**            outer_prod at the ALLOC, that outer_prod, and the row's
**            outer_prod / that outer_prod
**   161..163 outer_prod, num_loops (the loop depth), auto_unroll_max_step
**
** tl_ansor_feature_name(i) names slot i.
*/
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feature.h"

enum {
  F_OPS = 0, F_VEC = 16, F_UNROLL = 27, F_PAR = 38, F_GPU = 49, F_BUF = 57, F_CURVE = 147,
  F_ALLOC = 157, F_OUTER = 161
};
#define BUF_NFEAT 18
#define NBUF 5
#define CURVE_N 10
#define MAX_VISITS (1 << 22)      /* expression nodes walked per function */

_Static_assert(F_OUTER + 3 == TL_ANSOR_NFEAT, "feature layout");
_Static_assert(F_BUF + NBUF * BUF_NFEAT == F_CURVE, "feature layout");

/* ---- slot names ------------------------------------------------------------ */

static char g_names[TL_ANSOR_NFEAT][40];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;

static void names_init(void) {
  static const char *ops[7] = {"mad", "addsub", "mul", "divmod", "cmp", "math_func", "other_func"};
  static const char *pos[8] = {"none", "inner_spatial", "middle_spatial", "outer_spatial",
                               "inner_reduce", "middle_reduce", "outer_reduce", "mixed"};
  static const char *ann[3] = {"vec", "unroll", "parallel"};
  static const char *gpu[8] = {"is_gpu", "blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len",
                               "threadIdx_x_len", "threadIdx_y_len", "threadIdx_z_len",
                               "vthread_len"};
  static const char *buf[BUF_NFEAT] = {
    "acc_type.read", "acc_type.write", "acc_type.read_write", "bytes", "unique_bytes", "lines",
    "unique_lines", "reuse_type.loop_multiple_read", "reuse_type.serial_multiple_read_write",
    "reuse_type.no_reuse", "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
    "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
    "unique_lines_d_reuse_ct", "stride"};
  static const char *tail[7] = {"alloc_size", "alloc_prod", "alloc_outer_prod",
                                "alloc_inner_prod", "outer_prod", "num_loops",
                                "auto_unroll_max_step"};
  int k = 0;
  for (int i = 0; i < 7; i++) snprintf(g_names[k++], 40, "float_%s", ops[i]);
  for (int i = 0; i < 7; i++) snprintf(g_names[k++], 40, "int_%s", ops[i]);
  snprintf(g_names[k++], 40, "bool_op");
  snprintf(g_names[k++], 40, "select_op");
  for (int a = 0; a < 3; a++) {
    snprintf(g_names[k++], 40, "%s_num", ann[a]);
    snprintf(g_names[k++], 40, "%s_prod", ann[a]);
    snprintf(g_names[k++], 40, "%s_len", ann[a]);
    for (int p = 0; p < 8; p++) snprintf(g_names[k++], 40, "%s_pos.%s", ann[a], pos[p]);
  }
  for (int i = 0; i < 8; i++) snprintf(g_names[k++], 40, "%s", gpu[i]);
  for (int b = 0; b < NBUF; b++)
    for (int i = 0; i < BUF_NFEAT; i++) snprintf(g_names[k++], 40, "B%d.%s", b, buf[i]);
  for (int i = 0; i < CURVE_N; i++) snprintf(g_names[k++], 40, "arith_intensity_curve_%d", i);
  for (int i = 0; i < 7; i++) snprintf(g_names[k++], 40, "%s", tail[i]);
}

TL_EXPORT const char *tl_ansor_feature_name(int i) {
  if (i < 0 || i >= TL_ANSOR_NFEAT) return NULL;
  pthread_once(&g_names_once, names_init);
  return g_names[i];
}

/* ---- walker state ------------------------------------------------------------ */

typedef struct rec { int buf; double touched, eb; } rec;

typedef struct loop {
  tl_ref var;
  double min, ext;                /* ext >= 1 */
  int kind;
  TL_VEC(rec) recs;               /* accesses of the stores inside so far */
} loop;

typedef struct letb { tl_ref var, value; } letb;

typedef struct allocinfo { double bytes, prod, outer; int set; } allocinfo;

typedef struct ival { double lo, hi; } ival;

/* one term c * e of an access's index; e = TL_NOREF never (constants are
** folded into the access) */
typedef struct term {
  double c;
  tl_ref e;
  int dim;                        /* buffer dimension it indexes */
  double scale;                   /* 1 / that dimension's stride */
  int pos;                        /* e is the var of loop pos; -1: another expression */
  uint64_t mask;                  /* loops (positions < 64) whose vars e uses */
  int deep;                       /* e uses a loop at position >= 64 */
} term;

typedef struct acc {
  int buf;
  tl_ref index;
  int read, write;
  int t0, nt;                     /* terms in walker.terms */
  int c0;                         /* per-dimension constants in walker.consts */
  uint64_t mask;                  /* the union of its terms' */
  int deep;
} acc;

typedef struct bufinfo {
  int buf;
  int read, write, naccess;
  double eb;
  int ndim;
  const double *shape;            /* per dimension (INFINITY: unknown) */
  double *touched;                /* depth + 1 levels */
  double *ext0;                   /* per-dimension extents at level 0 */
  float f[BUF_NFEAT];
  double lines, bytes;
} bufinfo;

typedef struct walker {
  tl_ctx *ctx;
  const tl_ir *ir;
  double cache_line;
  TL_VEC(loop) st;
  TL_VEC(letb) lets;
  double outer_prod;
  double unroll_max;
  double bind[7];                 /* bx by bz tx ty tz vthread */
  int is_gpu;
  allocinfo *alloc;               /* per buffer id */
  double **shapes;                /* per buffer id, lazily: dims, INFINITY unknown */
  int *ndims;
  TL_VEC(float) out;
  int nrows;
  long visits;
  int failed;
  /* per-store scratch */
  TL_VEC(acc) accs;
  TL_VEC(term) terms;
  TL_VEC(double) consts;
  double ops[16];
  double fops;                    /* float ops of one execution */
} walker;

static double log2p(double x) { return x >= 0 ? log2(1 + x) : -log2(1 - x); }

static int loop_pos(const walker *w, tl_ref var) {
  for (int i = w->st.n - 1; i >= 0; i--)
    if (w->st.v[i].var == var) return i;
  return -1;
}

static tl_ref let_value(const walker *w, tl_ref var) {
  for (int i = w->lets.n - 1; i >= 0; i--)
    if (w->lets.v[i].var == var) return w->lets.v[i].value;
  return TL_NOREF;
}

static int budget(walker *w) {
  if (++w->visits <= MAX_VISITS) return 1;
  if (!w->failed)
    tl_err(w->ctx, TL_E_ARG, "features: the lowered function's expressions exceed %d nodes",
           MAX_VISITS);
  w->failed = 1;
  return 0;
}

/* ---- intervals: loops at position >= level take their range, others their min */

static ival iv_eval(walker *w, tl_ref e, int level, int depth) {
  const tl_ir *ir = w->ir;
  ival z = {0, 0};
  if (!e || depth > 64 || !budget(w)) return z;
  int op = tl_ir_op(ir, e);
  const tl_node *n = tl_ir_node(ir, e);
  ival a, b, r;
  double c;
  switch (op) {
  case TL_IR_INT: r.lo = r.hi = (double)n->imm.i; return r;
  case TL_IR_FLOAT: r.lo = r.hi = n->imm.f; return r;
  case TL_IR_VAR: {
    int p = loop_pos(w, e);
    if (p >= 0) {
      const loop *l = &w->st.v[p];
      r.lo = l->min;
      r.hi = p >= level ? l->min + l->ext - 1 : l->min;
      return r;
    }
    tl_ref v = let_value(w, e);
    return v ? iv_eval(w, v, level, depth + 1) : z;
  }
  case TL_IR_CAST: case TL_IR_BROADCAST:
    return iv_eval(w, tl_ir_kid(ir, e, 0), level, depth + 1);
  case TL_IR_ADD: case TL_IR_SUB: case TL_IR_MUL: case TL_IR_MIN: case TL_IR_MAX:
  case TL_IR_FLOORDIV: case TL_IR_TRUNCDIV: case TL_IR_FLOORMOD: case TL_IR_TRUNCMOD:
  case TL_IR_DIV: case TL_IR_SHL: case TL_IR_SHR:
    a = iv_eval(w, tl_ir_kid(ir, e, 0), level, depth + 1);
    b = iv_eval(w, tl_ir_kid(ir, e, 1), level, depth + 1);
    break;
  case TL_IR_SELECT: case TL_IR_IF_THEN_ELSE:
    a = iv_eval(w, tl_ir_kid(ir, e, 1), level, depth + 1);
    b = iv_eval(w, tl_ir_kid(ir, e, 2), level, depth + 1);
    r.lo = TL_MIN(a.lo, b.lo);
    r.hi = TL_MAX(a.hi, b.hi);
    return r;
  case TL_IR_RAMP: {
    a = iv_eval(w, tl_ir_kid(ir, e, 0), level, depth + 1);
    b = iv_eval(w, tl_ir_kid(ir, e, 1), level, depth + 1);
    double l = (double)(tl_ir_type(ir, e).lanes - 1);
    r.lo = a.lo + TL_MIN(0, TL_MIN(b.lo, b.hi) * l);
    r.hi = a.hi + TL_MAX(0, TL_MAX(b.lo, b.hi) * l);
    return r;
  }
  case TL_IR_LET:
    return iv_eval(w, tl_ir_kid(ir, e, 2), level, depth + 1);
  default:
    if (tl_ir_opflags[op] & TL_IRF_P) { r.lo = 0; r.hi = 1; return r; }
    return z;
  }
  switch (op) {
  case TL_IR_ADD: r.lo = a.lo + b.lo; r.hi = a.hi + b.hi; return r;
  case TL_IR_SUB: r.lo = a.lo - b.hi; r.hi = a.hi - b.lo; return r;
  case TL_IR_MUL: {
    double p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
    r.lo = r.hi = p[0];
    for (int i = 1; i < 4; i++) r.lo = TL_MIN(r.lo, p[i]), r.hi = TL_MAX(r.hi, p[i]);
    return r;
  }
  case TL_IR_MIN: r.lo = TL_MIN(a.lo, b.lo); r.hi = TL_MIN(a.hi, b.hi); return r;
  case TL_IR_MAX: r.lo = TL_MAX(a.lo, b.lo); r.hi = TL_MAX(a.hi, b.hi); return r;
  case TL_IR_FLOORDIV: case TL_IR_TRUNCDIV: case TL_IR_DIV:
    if (b.lo == b.hi && b.lo > 0) {
      c = b.lo;
      if (op == TL_IR_DIV) { r.lo = a.lo / c; r.hi = a.hi / c; }
      else { r.lo = floor(a.lo / c); r.hi = floor(a.hi / c); }
      return r;
    }
    return a;
  case TL_IR_FLOORMOD: case TL_IR_TRUNCMOD:
    if (b.lo == b.hi && b.lo > 0) {
      c = b.lo;
      if (a.hi - a.lo + 1 >= c) { r.lo = 0; r.hi = c - 1; return r; }
      double l = a.lo - floor(a.lo / c) * c, h = a.hi - floor(a.hi / c) * c;
      if (l <= h) { r.lo = l; r.hi = h; }
      else { r.lo = 0; r.hi = c - 1; }
      return r;
    }
    r.lo = 0;
    r.hi = TL_MAX(fabs(b.lo), fabs(b.hi));
    return r;
  case TL_IR_SHL:
    if (b.lo == b.hi && b.lo >= 0 && b.lo < 62) {
      c = ldexp(1, (int)b.lo);
      r.lo = a.lo * c; r.hi = a.hi * c;
      return r;
    }
    return a;
  case TL_IR_SHR:
    if (b.lo == b.hi && b.lo >= 0 && b.lo < 62) {
      c = ldexp(1, (int)b.lo);
      r.lo = floor(a.lo / c); r.hi = floor(a.hi / c);
      return r;
    }
    return a;
  default: return z;
  }
}

/* ---- index terms ----------------------------------------------------------------- */

static void split_terms(walker *w, tl_ref e, double c, double *cst, int depth) {
  const tl_ir *ir = w->ir;
  if (!e || !budget(w)) return;
  int op = tl_ir_op(ir, e);
  int64_t k;
  if (depth < 32) {
    switch (op) {
    case TL_IR_INT: *cst += c * (double)tl_ir_node(ir, e)->imm.i; return;
    case TL_IR_VAR: {
      tl_ref v = loop_pos(w, e) < 0 ? let_value(w, e) : TL_NOREF;
      if (v) { split_terms(w, v, c, cst, depth + 1); return; }
      break;
    }
    case TL_IR_ADD:
      split_terms(w, tl_ir_kid(ir, e, 0), c, cst, depth + 1);
      split_terms(w, tl_ir_kid(ir, e, 1), c, cst, depth + 1);
      return;
    case TL_IR_SUB:
      split_terms(w, tl_ir_kid(ir, e, 0), c, cst, depth + 1);
      split_terms(w, tl_ir_kid(ir, e, 1), -c, cst, depth + 1);
      return;
    case TL_IR_MUL:
      if (tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &k)) {
        split_terms(w, tl_ir_kid(ir, e, 0), c * (double)k, cst, depth + 1);
        return;
      }
      if (tl_ir_is_int(ir, tl_ir_kid(ir, e, 0), &k)) {
        split_terms(w, tl_ir_kid(ir, e, 1), c * (double)k, cst, depth + 1);
        return;
      }
      break;
    case TL_IR_CAST:
      if (tl_type_is_int(tl_ir_type(ir, e))) {
        split_terms(w, tl_ir_kid(ir, e, 0), c, cst, depth + 1);
        return;
      }
      break;
    default: break;
    }
  }
  if (c == 0) return;
  term t = {c, e, 0, 1, -1, 0, 0};
  TL_VEC_PUSH(w->terms, t);
}

/* Whether loop position p occurs in e (let vars expanded). */
static int uses_loop(walker *w, tl_ref e, tl_ref var, int depth) {
  const tl_ir *ir = w->ir;
  if (!e || depth > 64 || !budget(w)) return 0;
  int op = tl_ir_op(ir, e);
  if (op == TL_IR_VAR) {
    if (e == var) return 1;
    if (loop_pos(w, e) >= 0) return 0;
    tl_ref v = let_value(w, e);
    return v ? uses_loop(w, v, var, depth + 1) : 0;
  }
  int n = tl_ir_nkids(ir, e);
  for (int i = 0; i < n; i++)
    if (uses_loop(w, tl_ir_kid(ir, e, i), var, depth + 1)) return 1;
  return 0;
}

/* The loops whose vars e uses, as a mask of positions < 64 (*deep: some
** position beyond). */
static uint64_t loop_mask(walker *w, tl_ref e, int *deep, int depth) {
  const tl_ir *ir = w->ir;
  if (!e || depth > 64 || !budget(w)) return 0;
  int op = tl_ir_op(ir, e);
  if (op == TL_IR_INT || op == TL_IR_FLOAT) return 0;
  if (op == TL_IR_VAR) {
    int p = loop_pos(w, e);
    if (p >= 64) *deep = 1;
    if (p >= 0) return p < 64 ? (uint64_t)1 << p : 0;
    tl_ref v = let_value(w, e);
    return v ? loop_mask(w, v, deep, depth + 1) : 0;
  }
  uint64_t m = 0;
  int n = tl_ir_nkids(ir, e);
  for (int i = 0; i < n; i++) m |= loop_mask(w, tl_ir_kid(ir, e, i), deep, depth + 1);
  return m;
}

static int term_uses(walker *w, const term *t, int pos) {
  if (pos < 64 && !t->deep) return (int)((t->mask >> pos) & 1);
  return uses_loop(w, t->e, w->st.v[pos].var, 0);
}

static int acc_uses(walker *w, const acc *a, int pos) {
  if (pos < 64 && !a->deep) return (int)((a->mask >> pos) & 1);
  return uses_loop(w, a->index, w->st.v[pos].var, 0);
}

/* |coefficient| of loop var in access a: summed over terms that are the
** var itself; failing those, the least |c| of a term whose part uses it;
** 0 if it does not occur. */
static double coef_of(walker *w, const acc *a, int pos) {
  double direct = 0, indirect = INFINITY;
  int has_direct = 0;
  if (!acc_uses(w, a, pos)) return 0;
  for (int i = 0; i < a->nt; i++) {
    const term *t = &w->terms.v[a->t0 + i];
    if (t->pos == pos) {
      direct += t->c;
      has_direct = 1;
    } else if (term_uses(w, t, pos)) {
      indirect = TL_MIN(indirect, fabs(t->c));
    }
  }
  if (has_direct && direct != 0) return fabs(direct);
  return isinf(indirect) ? (has_direct ? 1 : 0) : indirect;
}

/* ---- buffer shapes ------------------------------------------------------------------ */

static const double *buf_shape(walker *w, int b, int *ndim) {
  if (!w->shapes[b]) {
    const tl_buffer *bf = tl_ir_buffer(w->ir, b);
    int nd = bf->ndim > 0 ? bf->ndim : 1;
    double *s = tl_malloc(sizeof(double) * (size_t)nd);
    int known = bf->ndim > 0;
    for (int i = 0; i < bf->ndim; i++) {
      int64_t v;
      if (bf->shape && tl_ir_is_int(w->ir, bf->shape[i], &v) && v > 0) s[i] = (double)v;
      else known = 0;
    }
    if (!known) {
      nd = 1;
      s[0] = INFINITY;
    }
    w->shapes[b] = s;
    w->ndims[b] = nd;
  }
  *ndim = w->ndims[b];
  return w->shapes[b];
}

static double elem_bytes(const walker *w, int b) {
  tl_type t = tl_ir_buffer(w->ir, b)->dtype;
  double bytes = (double)t.bits * (double)(t.lanes ? t.lanes : 1) / 8.0;
  return bytes > 0 ? bytes : 1;
}

/* Split access a's index into terms, each assigned a dimension. */
static void add_access(walker *w, int buf, tl_ref index, int write) {
  for (int i = 0; i < w->accs.n; i++)
    if (w->accs.v[i].buf == buf && w->accs.v[i].index == index) {
      if (write) w->accs.v[i].write = 1;
      else w->accs.v[i].read = 1;
      return;
    }
  if (buf < 0 || buf >= w->ir->bufs.n || !index) {
    if (!w->failed) {
      char *t = tl_ir_print_short(w->ir, index, 80);
      tl_err(w->ctx, TL_E_ARG, "features: an access to buffer %d (of %d) at index %s", buf,
             w->ir->bufs.n, t);
      free(t);
    }
    w->failed = 1;
    return;
  }
  acc a = {buf, index, !write, write, w->terms.n, 0, w->consts.n, 0, 0};
  double cst = 0;
  split_terms(w, index, 1, &cst, 0);
  a.nt = w->terms.n - a.t0;
  int nd;
  const double *shape = buf_shape(w, buf, &nd);
  double stride[16];
  int ndim = TL_MIN(nd, 16), off = nd - ndim;   /* the innermost 16 dims */
  double s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    stride[d] = s;
    s *= isinf(shape[off + d]) ? 1 : shape[off + d];
  }
  for (int i = a.t0; i < w->terms.n; i++) {
    term *t = &w->terms.v[i];
    double c = fabs(t->c);
    t->dim = ndim - 1;
    for (int d = 0; d < ndim; d++)
      if (stride[d] > 1 && stride[d] <= c && fmod(c, stride[d]) == 0) {
        t->dim = d;
        break;
      }
    t->scale = 1.0 / stride[t->dim];
    t->pos = tl_ir_op(w->ir, t->e) == TL_IR_VAR ? loop_pos(w, t->e) : -1;
    t->mask = loop_mask(w, t->e, &t->deep, 0);
    a.mask |= t->mask;
    a.deep |= t->deep;
  }
  /* the constant, digit by digit (truncating toward zero) */
  for (int d = 0; d < ndim; d++) {
    double q = trunc(cst / stride[d]);
    TL_VEC_PUSH(w->consts, q);
    cst -= q * stride[d];
  }
  TL_VEC_PUSH(w->accs, a);
}

static void collect_loads(walker *w, tl_ref e) {
  const tl_ir *ir = w->ir;
  if (!e || !budget(w)) return;
  int op = tl_ir_op(ir, e);
  if (op == TL_IR_LOAD)
    add_access(w, (int)tl_ir_node(ir, e)->imm.u, tl_ir_nkids(ir, e) ? tl_ir_kid(ir, e, 0) : 0, 0);
  int n = tl_ir_nkids(ir, e);
  for (int i = 0; i < n; i++) collect_loads(w, tl_ir_kid(ir, e, i));
}

/* Touched elements of buffer bi's accesses at level (loops >= level relaxed);
** ext (may be NULL) receives the per-dimension extents. */
static double touched_at(walker *w, const bufinfo *bi, int level, double *ext) {
  int ndim = TL_MIN(bi->ndim, 16), off = bi->ndim - ndim;
  double lo[16], hi[16];
  int first = 1;
  for (int ai = 0; ai < w->accs.n; ai++) {
    const acc *a = &w->accs.v[ai];
    if (a->buf != bi->buf) continue;
    double l[16], h[16];
    for (int d = 0; d < ndim; d++) l[d] = h[d] = w->consts.v[a->c0 + d];
    for (int i = 0; i < a->nt; i++) {
      const term *t = &w->terms.v[a->t0 + i];
      ival v;
      if (t->pos >= 0) {
        const loop *l = &w->st.v[t->pos];
        v.lo = l->min;
        v.hi = t->pos >= level ? l->min + l->ext - 1 : l->min;
      } else {
        v = iv_eval(w, t->e, level, 0);
      }
      double c = t->c * t->scale;
      if (c >= 0) { l[t->dim] += c * v.lo; h[t->dim] += c * v.hi; }
      else { l[t->dim] += c * v.hi; h[t->dim] += c * v.lo; }
    }
    for (int d = 0; d < ndim; d++) {
      if (first || l[d] < lo[d]) lo[d] = l[d];
      if (first || h[d] > hi[d]) hi[d] = h[d];
    }
    first = 0;
  }
  double t = 1;
  for (int d = 0; d < ndim; d++) {
    double e = first ? 1 : TL_MIN(hi[d] - lo[d] + 1, bi->shape[off + d]);
    if (!(e >= 1)) e = 1;
    if (ext) ext[d] = e;
    t *= e;
  }
  return t;
}

/* ---- op counts ------------------------------------------------------------------------- */

enum { K_MAD = 0, K_ADDSUB, K_MUL, K_DIVMOD, K_CMP, K_MATH, K_OTHER };

static void count_ops(walker *w, tl_ref e) {
  const tl_ir *ir = w->ir;
  if (!e || !budget(w)) return;
  int op = tl_ir_op(ir, e);
  if (op == TL_IR_LOAD) return;              /* index arithmetic is not counted */
  int n = tl_ir_nkids(ir, e);
  double lanes = tl_ir_type(ir, e).lanes ? tl_ir_type(ir, e).lanes : 1;
  int kind = -1;
  switch (op) {
  case TL_IR_ADD: case TL_IR_SUB: kind = K_ADDSUB; break;
  case TL_IR_MUL: kind = K_MUL; break;
  case TL_IR_DIV: case TL_IR_FLOORDIV: case TL_IR_FLOORMOD: case TL_IR_TRUNCDIV:
  case TL_IR_TRUNCMOD: kind = K_DIVMOD; break;
  case TL_IR_MIN: case TL_IR_MAX: case TL_IR_EQ: case TL_IR_NE: case TL_IR_LT: case TL_IR_LE:
  case TL_IR_GT: case TL_IR_GE: kind = K_CMP; break;
  case TL_IR_CALL: kind = K_MATH; break;
  case TL_IR_AND: case TL_IR_OR: case TL_IR_NOT: w->ops[14] += lanes; break;
  case TL_IR_SELECT: case TL_IR_IF_THEN_ELSE: w->ops[15] += lanes; break;
  default: break;
  }
  if (kind >= 0) {
    tl_type t = n > 0 ? tl_ir_type(ir, tl_ir_kid(ir, e, 0)) : tl_ir_type(ir, e);
    if (tl_type_is_float(t)) {
      w->ops[kind] += lanes;
      w->fops += lanes;
    } else {
      w->ops[7 + kind] += lanes;
    }
  }
  for (int i = 0; i < n; i++) count_ops(w, tl_ir_kid(ir, e, i));
}

/* ---- one row ---------------------------------------------------------------------------------- */

/* vec/unroll/parallel features of loops of kind k at out[0..10] */
static void ann_feats(walker *w, int kind, float *out) {
  int d = w->st.n, num = 0, inner = -1, nsp = 0, nre = 0;
  double prod = 1;
  for (int i = 0; i < d; i++) {
    if (w->st.v[i].kind != kind) continue;
    num++;
    prod *= w->st.v[i].ext;
    inner = i;
    if (acc_uses(w, &w->accs.v[0], i)) nsp++;
    else nre++;
  }
  out[0] = (float)log2p(num);
  out[1] = (float)log2p(num ? prod : 0);
  out[2] = (float)log2p(num ? w->st.v[inner].ext : 0);
  int pos = 0;
  if (num) {
    if (nsp && nre) pos = 7;
    else {
      int place = inner == d - 1 ? 0 : inner == 0 ? 2 : 1;
      pos = (nsp ? 1 : 4) + place;
    }
  }
  out[3 + pos] = 1;
}

static int cmp_buf(const void *x, const void *y) {
  const bufinfo *a = x, *b = y;
  if (a->lines != b->lines) return a->lines > b->lines ? -1 : 1;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  return a->buf - b->buf;
}

static void buffer_feats(walker *w, bufinfo *bi) {
  int d = w->st.n;
  double eb = bi->eb, op = w->outer_prod;
  double bytes = op * eb * bi->naccess;
  double unique_bytes = bi->touched[0] * eb;
  /* stride and reduce_ratio */
  double stride = 0, reduce_ratio = 1;
  int found = -1;
  for (int i = d - 1; i >= 0; i--) {
    double best = INFINITY;
    for (int ai = 0; ai < w->accs.n; ai++) {
      const acc *a = &w->accs.v[ai];
      if (a->buf != bi->buf) continue;
      double c = coef_of(w, a, i);
      if (c > 0) best = TL_MIN(best, c);
    }
    if (!isinf(best)) {
      stride = best;
      found = i;
      break;
    }
    reduce_ratio *= w->st.v[i].ext;
  }
  double lines = found < 0 ? 1
                 : TL_MAX(1, op / reduce_ratio * TL_MIN(1, stride * eb / w->cache_line));
  double stride_out = found == d - 1 ? stride : 0;
  /* contiguous run of touched(0) */
  int nd = TL_MIN(bi->ndim, 16), off = bi->ndim - nd;
  double run = bi->ext0[nd - 1];
  for (int k = nd - 1; k > 0 && bi->ext0[k] >= bi->shape[off + k]; k--) run *= bi->ext0[k - 1];
  double unique_lines = TL_MAX(1, unique_bytes / TL_MIN(run * eb, w->cache_line));
  /* reuse */
  int rtype = 2;
  double dis_iter = 1, dis_bytes = 0, ct = 0;
  for (int i = d - 1; i >= 0; i--) {
    const loop *l = &w->st.v[i];
    int used = 0;
    for (int ai = 0; ai < w->accs.n && !used; ai++)
      if (w->accs.v[ai].buf == bi->buf) used = acc_uses(w, &w->accs.v[ai], i);
    if (!used) {
      rtype = 0;
      ct = l->ext;
      if (dis_bytes == 0)
        for (int r = 0; r < l->recs.n; r++) dis_bytes += l->recs.v[r].eb;
      break;
    }
    dis_iter *= l->ext;
    dis_bytes = 0;
    int cnt = 0;
    double least = INFINITY;
    for (int r = 0; r < l->recs.n; r++) {
      dis_bytes += l->recs.v[r].touched * l->recs.v[r].eb;
      if (l->recs.v[r].buf == bi->buf) {
        cnt++;
        least = TL_MIN(least, l->recs.v[r].touched);
      }
    }
    if (cnt > 1) {
      rtype = 1;
      ct = cnt - 1;
      dis_iter = least / l->ext;
      dis_bytes /= l->ext;
      break;
    }
  }
  if (rtype == 2) dis_iter = dis_bytes = ct = 0;
  double rc = ct > 0.5 ? ct : 0.5;
  float *f = bi->f;
  memset(f, 0, sizeof bi->f);
  f[bi->read && bi->write ? 2 : bi->write ? 1 : 0] = 1;
  f[3] = (float)log2p(bytes);
  f[4] = (float)log2p(unique_bytes);
  f[5] = (float)log2p(lines);
  f[6] = (float)log2p(unique_lines);
  f[7 + rtype] = 1;
  f[10] = (float)log2p(dis_iter);
  f[11] = (float)log2p(dis_bytes);
  f[12] = (float)log2p(ct);
  f[13] = (float)log2p(bytes / rc);
  f[14] = (float)log2p(unique_bytes / rc);
  f[15] = (float)log2p(lines / rc);
  f[16] = (float)log2p(unique_lines / rc);
  f[17] = (float)log2p(stride_out);
  bi->lines = lines;
  bi->bytes = bytes;
}

static void store_row(walker *w, tl_ref s) {
  const tl_ir *ir = w->ir;
  int sbuf = (int)tl_ir_node(ir, s)->imm.u;
  if (tl_ir_nkids(ir, s) != 2) {
    char *t = tl_ir_print_short(ir, s, 80);
    tl_err(w->ctx, TL_E_ARG, "features: a store without one flattened index: %s", t);
    free(t);
    w->failed = 1;
    return;
  }
  tl_ref value = tl_ir_kid(ir, s, 0), index = tl_ir_kid(ir, s, 1);
  int d = w->st.n;
  w->accs.n = w->terms.n = w->consts.n = 0;
  memset(w->ops, 0, sizeof w->ops);
  w->fops = 0;
  count_ops(w, value);
  add_access(w, sbuf, index, 1);
  collect_loads(w, value);
  if (w->failed) return;
  /* buffers: the stored one first, then loads in order */
  int nb = 0;
  bufinfo *bis = tl_calloc((size_t)w->accs.n, sizeof(bufinfo));
  for (int ai = 0; ai < w->accs.n; ai++) {
    const acc *a = &w->accs.v[ai];
    int j = 0;
    while (j < nb && bis[j].buf != a->buf) j++;
    if (j == nb) {
      bis[nb].buf = a->buf;
      bis[nb].eb = elem_bytes(w, a->buf);
      bis[nb].shape = buf_shape(w, a->buf, &bis[nb].ndim);
      nb++;
    }
    bis[j].naccess++;
    bis[j].write |= a->write;
    bis[j].read |= a->read;
  }
  for (int j = 0; j < nb; j++) {
    bufinfo *bi = &bis[j];
    bi->touched = tl_malloc(sizeof(double) * (size_t)(d + 1));
    bi->ext0 = tl_malloc(sizeof(double) * 16);
    for (int i = 0; i <= d; i++) bi->touched[i] = touched_at(w, bi, i, i == 0 ? bi->ext0 : NULL);
  }
  /* records of this store in every enclosing loop */
  for (int i = 0; i < d; i++)
    for (int j = 0; j < nb; j++) {
      rec r = {bis[j].buf, bis[j].touched[i], bis[j].eb};
      TL_VEC_PUSH(w->st.v[i].recs, r);
    }
  for (int j = 0; j < nb; j++) buffer_feats(w, &bis[j]);

  TL_VEC_RESERVE(w->out, (w->nrows + 1) * TL_ANSOR_NFEAT);
  float *row = w->out.v + (size_t)w->nrows * TL_ANSOR_NFEAT;
  memset(row, 0, sizeof(float) * TL_ANSOR_NFEAT);
  double op = w->outer_prod;
  for (int k = 0; k < 16; k++) row[F_OPS + k] = (float)log2p(w->ops[k] * op);
  ann_feats(w, TL_FOR_VECTORIZED, row + F_VEC);
  ann_feats(w, TL_FOR_UNROLLED, row + F_UNROLL);
  ann_feats(w, TL_FOR_PARALLEL, row + F_PAR);
  row[F_GPU] = (float)w->is_gpu;
  for (int k = 0; k < 7; k++) row[F_GPU + 1 + k] = (float)log2p(w->bind[k]);
  /* top buffers */
  bufinfo *sorted = tl_malloc(sizeof(bufinfo) * (size_t)nb);
  memcpy(sorted, bis, sizeof(bufinfo) * (size_t)nb);
  qsort(sorted, (size_t)nb, sizeof(bufinfo), cmp_buf);
  for (int j = 0; j < nb && j < NBUF; j++)
    memcpy(row + F_BUF + j * BUF_NFEAT, sorted[j].f, sizeof(float) * BUF_NFEAT);
  free(sorted);
  /* arithmetic intensity curve: levels inner to outer */
  if (w->fops > 0 && d > 0) {
    double *ops = tl_malloc(sizeof(double) * (size_t)d * 2), *ai = ops + d;
    double prod = 1;
    for (int k = d - 1, m = 0; k >= 0; k--, m++) {
      prod *= w->st.v[k].ext;
      ops[m] = w->fops * prod;
      double bytes = 0;
      for (int j = 0; j < nb; j++) bytes += bis[j].touched[k] * bis[j].eb;
      ai[m] = ops[m] / TL_MAX(bytes, 1);
    }
    int pt = 0;
    for (int s2 = 0; s2 < CURVE_N; s2++) {
      double x = ops[d - 1] * (s2 + 1) / CURVE_N;
      while (pt < d - 1 && ops[pt] < x * (1 - 1e-9)) pt++;
      double y;
      if (pt == 0 || ops[pt] == ops[pt - 1]) y = ai[pt];
      else y = ai[pt - 1] + (ai[pt] - ai[pt - 1]) * (x - ops[pt - 1]) / (ops[pt] - ops[pt - 1]);
      row[F_CURVE + s2] = (float)log2p(y);
    }
    free(ops);
  }
  /* allocation */
  const allocinfo *al = &w->alloc[sbuf];
  if (al->set) {
    row[F_ALLOC + 0] = (float)log2p(al->bytes);
    row[F_ALLOC + 1] = (float)log2p(al->prod);
    row[F_ALLOC + 2] = (float)log2p(al->outer);
    row[F_ALLOC + 3] = (float)log2p(op / al->outer);
  }
  row[F_OUTER + 0] = (float)log2p(op);
  row[F_OUTER + 1] = (float)log2p(d);
  row[F_OUTER + 2] = (float)log2p(w->unroll_max);
  w->nrows++;
  for (int j = 0; j < nb; j++) {
    free(bis[j].touched);
    free(bis[j].ext0);
  }
  free(bis);
}

/* ---- statements ---------------------------------------------------------------------------------- */

static void walk_stmt(walker *w, tl_ref s, int depth);

static void walk_for(walker *w, tl_ref s, int depth) {
  const tl_ir *ir = w->ir;
  int nl = w->st.n;
  ival mn = iv_eval(w, tl_ir_kid(ir, s, 1), 0, 0);
  ival ex = iv_eval(w, tl_ir_kid(ir, s, 2), 0, 0);
  loop l;
  memset(&l, 0, sizeof l);
  l.var = tl_ir_kid(ir, s, 0);
  l.min = mn.lo;
  l.ext = ex.hi >= 1 ? ex.hi : 1;
  l.kind = tl_for_kind(ir, s);
  double saved[7];
  memcpy(saved, w->bind, sizeof saved);
  if (l.kind == TL_FOR_THREAD) {
    int tag = tl_for_tag(ir, s);
    if (tag >= TL_TAG_BLOCK_X && tag <= TL_TAG_THREAD_Z) w->bind[tag - TL_TAG_BLOCK_X] = l.ext;
    else if (tag == TL_TAG_VTHREAD) w->bind[6] *= l.ext;
  } else if (l.kind == TL_FOR_VTHREAD) {
    w->bind[6] *= l.ext;
  }
  TL_VEC_PUSH(w->st, l);
  double saved_op = w->outer_prod;
  w->outer_prod *= l.ext;
  walk_stmt(w, tl_ir_kid(ir, s, 3), depth + 1);
  w->outer_prod = saved_op;
  TL_VEC_FREE(w->st.v[nl].recs);
  w->st.n = nl;
  memcpy(w->bind, saved, sizeof saved);
}

static void walk_stmt(walker *w, tl_ref s, int depth) {
  const tl_ir *ir = w->ir;
  if (!s || w->failed) return;
  if (depth > 1000) {
    tl_err(w->ctx, TL_E_ARG, "features: statements nested deeper than 1000");
    w->failed = 1;
    return;
  }
  switch (tl_ir_op(ir, s)) {
  case TL_IR_FOR: walk_for(w, s, depth); return;
  case TL_IR_STORE: store_row(w, s); return;
  case TL_IR_SEQ:
    for (int i = 0; i < tl_ir_nkids(ir, s); i++) walk_stmt(w, tl_ir_kid(ir, s, i), depth + 1);
    return;
  case TL_IR_IF:
    walk_stmt(w, tl_ir_kid(ir, s, 1), depth + 1);
    walk_stmt(w, tl_ir_kid(ir, s, 2), depth + 1);
    return;
  case TL_IR_LET_STMT: {
    letb b = {tl_ir_kid(ir, s, 0), tl_ir_kid(ir, s, 1)};
    int nl = w->lets.n;
    TL_VEC_PUSH(w->lets, b);
    walk_stmt(w, tl_ir_kid(ir, s, 2), depth + 1);
    w->lets.n = nl;
    return;
  }
  case TL_IR_ALLOC: {
    int b = (int)tl_ir_node(ir, s)->imm.u;
    if (b >= 0 && b < ir->bufs.n) {
      int nd;
      const double *shape = buf_shape(w, b, &nd);
      double elems = 1;
      for (int i = 0; i < nd; i++) elems *= isinf(shape[i]) ? 1 : shape[i];
      allocinfo *a = &w->alloc[b];
      a->bytes = elems * elem_bytes(w, b);
      a->prod = elems * w->outer_prod;
      a->outer = w->outer_prod;
      a->set = 1;
    }
    walk_stmt(w, tl_ir_kid(ir, s, 0), depth + 1);
    return;
  }
  case TL_IR_ATTR: {
    const char *key = tl_ir_str(ir, (uint32_t)tl_ir_node(ir, s)->imm.u);
    double saved = w->unroll_max;
    int64_t v;
    if (key && strcmp(key, "pragma_auto_unroll_max_step") == 0 &&
        tl_ir_is_int(ir, tl_ir_kid(ir, s, 0), &v))
      w->unroll_max = (double)v;
    walk_stmt(w, tl_ir_kid(ir, s, 1), depth + 1);
    w->unroll_max = saved;
    return;
  }
  default: return;
  }
}

/* Whether a thread-bound loop occurs among the statements of s. */
static int has_threads(const tl_ir *ir, tl_ref s, int depth) {
  if (!s || depth > 1000 || !tl_ir_is_stmt(ir, s)) return 0;
  if (tl_ir_op(ir, s) == TL_IR_FOR &&
      (tl_for_kind(ir, s) == TL_FOR_THREAD || tl_for_kind(ir, s) == TL_FOR_VTHREAD))
    return 1;
  int n = tl_ir_nkids(ir, s);
  for (int i = 0; i < n; i++)
    if (has_threads(ir, tl_ir_kid(ir, s, i), depth + 1)) return 1;
  return 0;
}

TL_EXPORT int tl_ansor_features(tl_ctx *ctx, const tl_lowered *f, const struct tl_ansor_hw *hw,
                                float **rows) {
  if (!rows) {
    tl_err(ctx, TL_E_ARG, "tl_ansor_features: rows (the output pointer) is NULL");
    return -1;
  }
  *rows = NULL;
  if (!f || !f->ir) {
    tl_err(ctx, TL_E_ARG, "tl_ansor_features: the lowered function is NULL");
    return -1;
  }
  const tl_ir *ir = f->ir;
  if (f->body >= (tl_ref)ir->nodes.n || (f->body && !tl_ir_is_stmt(ir, f->body))) {
    tl_err(ctx, TL_E_ARG, "tl_ansor_features: the body of '%s' is not a statement",
           f->name ? f->name : "?");
    return -1;
  }
  if (!f->body) return 0;
  walker w;
  memset(&w, 0, sizeof w);
  w.ctx = ctx;
  w.ir = ir;
  w.cache_line = hw && hw->v[2] > 0 ? (double)hw->v[2] : 64;
  w.outer_prod = 1;
  for (int i = 0; i < 7; i++) w.bind[i] = 1;
  w.alloc = tl_calloc((size_t)ir->bufs.n + 1, sizeof(allocinfo));
  w.shapes = tl_calloc((size_t)ir->bufs.n + 1, sizeof(double *));
  w.ndims = tl_calloc((size_t)ir->bufs.n + 1, sizeof(int));
  w.is_gpu = has_threads(ir, f->body, 0);
  walk_stmt(&w, f->body, 0);
  for (int i = 0; i < w.st.n; i++) TL_VEC_FREE(w.st.v[i].recs);
  TL_VEC_FREE(w.st);
  TL_VEC_FREE(w.lets);
  TL_VEC_FREE(w.accs);
  TL_VEC_FREE(w.terms);
  TL_VEC_FREE(w.consts);
  for (int i = 0; i < ir->bufs.n; i++) free(w.shapes[i]);
  free(w.shapes);
  free(w.ndims);
  free(w.alloc);
  if (w.failed) {
    TL_VEC_FREE(w.out);
    tl_err_prefix(ctx, "tl_ansor_features: '%s': ", f->name ? f->name : "?");
    return -1;
  }
  if (w.nrows == 0) TL_VEC_FREE(w.out);
  *rows = w.out.v;
  return w.nrows;
}

/* ---- batches ---------------------------------------------------------------------------------------- */

typedef struct batch {
  tl_lowered *const *fs;
  const struct tl_ansor_hw *hw;
  float **rows;
  int *n;
} batch;

static void batch_one(int64_t i, void *arg) {
  batch *b = arg;
  b->rows[i] = NULL;
  b->n[i] = 0;
  if (!b->fs[i]) return;
  tl_ctx *c = tl_ctx_new();
  int n = tl_ansor_features(c, b->fs[i], b->hw, &b->rows[i]);
  b->n[i] = n < 0 ? 0 : n;
  tl_ctx_free(c);
}

TL_EXPORT int tl_ansor_features_batch(tl_ctx *ctx, tl_lowered *const *fs, int n,
                                      const struct tl_ansor_hw *hw, int nthreads, float **rows,
                                      int *row_off) {
  if (!rows || !row_off || (n > 0 && !fs)) {
    tl_err(ctx, TL_E_ARG, "tl_ansor_features_batch: NULL %s", !rows ? "rows" : !row_off ? "row_off"
                                                                               : "functions");
    return -1;
  }
  *rows = NULL;
  if (n < 0) {
    tl_err(ctx, TL_E_ARG, "tl_ansor_features_batch: negative count %d", n);
    return -1;
  }
  row_off[0] = 0;
  if (n == 0) return 0;
  batch b = {fs, hw, tl_calloc((size_t)n, sizeof(float *)), tl_calloc((size_t)n, sizeof(int))};
  if (nthreads == 1 || n == 1) {
    for (int i = 0; i < n; i++) batch_one(i, &b);
  } else {
    tl_pool *p = tl_pool_new(nthreads);
    tl_pool_for(p, n, batch_one, &b);
    tl_pool_free(p);
  }
  size_t total = 0;
  for (int i = 0; i < n; i++) total += (size_t)b.n[i];
  if (total > (size_t)INT32_MAX / TL_ANSOR_NFEAT) {
    for (int i = 0; i < n; i++) free(b.rows[i]);
    free(b.rows);
    free(b.n);
    tl_err(ctx, TL_E_ARG, "tl_ansor_features_batch: %zu rows are too many", total);
    return -1;
  }
  float *out = total ? tl_malloc(sizeof(float) * total * TL_ANSOR_NFEAT) : NULL;
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    if (b.n[i]) memcpy(out + at * TL_ANSOR_NFEAT, b.rows[i],
                       sizeof(float) * (size_t)b.n[i] * TL_ANSOR_NFEAT);
    at += (size_t)b.n[i];
    row_off[i + 1] = (int)at;
    free(b.rows[i]);
  }
  free(b.rows);
  free(b.n);
  *rows = out;
  return (int)total;
}
