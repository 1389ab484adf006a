/*
** feature.c -- features of a config for the cost model: "itervar" touch
** features and "curve" features over the lowered loop IR, "knob" features
** through the space, and the multi-threaded batch extraction.
**
** Itervar features (our version of TVM's touch extractor). Walk the lowered
** function keeping a stack of loop variables. Each loop records its extent,
** annotation, nesting level, the product of the enclosing extents (topdown)
** and the float add/mul/div operations of its body (counted on the innermost
** loop). Each load or store is a buffer access with key "<buffer>_<k>" (k
** counts the accesses of that buffer); the flattened index is parsed as an
** affine sum, giving each stacked loop its stride in that access (0 when the
** index does not depend on it, 1 when it does non-linearly). On leaving a
** loop v, every stacked loop's count (for accesses whose index moves with v)
** or reuse (for those that do not) of each access of v is multiplied by v's
** extent, so count x reuse = iterations of the access below that loop.
**
**   per loop, in program order:
**     [T(len), nest, T(topdown), T(bottomup), onehot11(ann), T(add), T(mul), T(div)]
**     then per access key in lexicographic order:
**     [T(stride), T(mod) = T(-1), T(count), T(reuse), T(thread_count), T(thread_reuse)]
**   T(x) = x >= 0 ? log2(x + 1) : -log2(1 - x)
**
** The task-level extractor appends the config's knob features to itervar and
** curve rows (TVM appends only define_knob values; all knobs tell the model
** strictly more).
*/
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

enum { ANN_BX = 0, ANN_BY, ANN_BZ, ANN_TX, ANN_TY, ANN_TZ, ANN_UNROLL, ANN_VEC, ANN_PAR,
       ANN_SERIAL, ANN_VTHREAD, ANN_N };

typedef struct touch {
  int key;                        /* index into fx.keys */
  double stride, count, reuse, tcount, treuse;
} touch;

typedef struct ivar {
  tl_ref var;
  int64_t len;                    /* -1: not constant */
  int ann, nest, level;
  double topdown, bottomup;
  double add, mul, div;
  TL_VEC(touch) t;
} ivar;

typedef struct fx {
  const tl_ir *ir;
  TL_VEC(ivar) vars;              /* in order of entry */
  TL_VEC(int) stack;              /* indices into vars */
  TL_VEC(char *) keys;
  int *nacc;                      /* accesses so far per buffer id */
  double topdown;
  /* index parse scratch, one slot per stack entry */
  TL_VEC(double) coef;
  TL_VEC(int8_t) seen;            /* 1 linear, 2 non-linear */
} fx;

static double T(double x) { return x >= 0 ? log2(x + 1) : -log2(1 - x); }

static int key_id(fx *f, const char *s) {
  for (int i = 0; i < f->keys.n; i++)
    if (strcmp(f->keys.v[i], s) == 0) return i;
  TL_VEC_PUSH(f->keys, tl_strdup(s));
  return f->keys.n - 1;
}

static touch *touch_get(ivar *v, int key) {
  for (int i = 0; i < v->t.n; i++)
    if (v->t.v[i].key == key) return &v->t.v[i];
  touch z = {key, 0, 1, 1, 0, 0};
  TL_VEC_PUSH(v->t, z);
  return &v->t.v[v->t.n - 1];
}

static int stack_pos(fx *f, tl_ref var) {
  for (int i = f->stack.n - 1; i >= 0; i--)
    if (f->vars.v[f->stack.v[i]].var == var) return i;
  return -1;
}

/* Coefficients of the stacked loop variables in index e (times mult). */
static void parse_index(fx *f, tl_ref e, double mult, int nonlin) {
  const tl_ir *ir = f->ir;
  int op = tl_ir_op(ir, e);
  int64_t c;
  switch (op) {
  case TL_IR_INT: case TL_IR_FLOAT: return;
  case TL_IR_VAR: {
    int p = stack_pos(f, e);
    if (p >= 0) {
      if (nonlin) f->seen.v[p] = 2;
      else {
        f->coef.v[p] += mult;
        if (!f->seen.v[p]) f->seen.v[p] = 1;
      }
    }
    return;
  }
  case TL_IR_ADD:
    parse_index(f, tl_ir_kid(ir, e, 0), mult, nonlin);
    parse_index(f, tl_ir_kid(ir, e, 1), mult, nonlin);
    return;
  case TL_IR_SUB:
    parse_index(f, tl_ir_kid(ir, e, 0), mult, nonlin);
    parse_index(f, tl_ir_kid(ir, e, 1), -mult, nonlin);
    return;
  case TL_IR_MUL:
    if (tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &c)) {
      parse_index(f, tl_ir_kid(ir, e, 0), mult * (double)c, nonlin);
      return;
    }
    if (tl_ir_is_int(ir, tl_ir_kid(ir, e, 0), &c)) {
      parse_index(f, tl_ir_kid(ir, e, 1), mult * (double)c, nonlin);
      return;
    }
    break;
  case TL_IR_RAMP:    /* base + lane * stride: the base carries the loops */
    parse_index(f, tl_ir_kid(ir, e, 0), mult, nonlin);
    return;
  case TL_IR_BROADCAST: case TL_IR_CAST:
    parse_index(f, tl_ir_kid(ir, e, 0), mult, nonlin);
    return;
  default: break;
  }
  int n = tl_ir_nkids(ir, e);
  for (int i = 0; i < n; i++) parse_index(f, tl_ir_kid(ir, e, i), mult, 1);
}

static void access(fx *f, int buf, const tl_ref *idx, int nidx) {
  if (f->stack.n == 0) return;
  const tl_buffer *b = tl_ir_buffer(f->ir, buf);
  char name[256];
  snprintf(name, sizeof name, "%s_%d", b->name ? b->name : "buf", f->nacc[buf]++);
  int key = key_id(f, name);
  TL_VEC_RESERVE(f->coef, f->stack.n);
  TL_VEC_RESERVE(f->seen, f->stack.n);
  for (int i = 0; i < f->stack.n; i++) f->coef.v[i] = 0, f->seen.v[i] = 0;
  for (int i = 0; i < nidx; i++) parse_index(f, idx[i], 1.0, 0);
  for (int i = 0; i < f->stack.n; i++) {
    ivar *u = &f->vars.v[f->stack.v[i]];
    touch *tp = touch_get(u, key);
    double s = f->seen.v[i] == 2 ? 1 : f->seen.v[i] == 1 ? fabs(f->coef.v[i]) : 0;
    tp->stride = s;
    tp->count = tp->reuse = 1;
    tp->tcount = tp->treuse = 0;
  }
}

static void walk_expr(fx *f, tl_ref e) {
  const tl_ir *ir = f->ir;
  int op = tl_ir_op(ir, e);
  if (op == TL_IR_LOAD) {
    access(f, (int)tl_ir_node(ir, e)->imm.u, tl_ir_kids(ir, e), tl_ir_nkids(ir, e));
    return;
  }
  if (f->stack.n && tl_type_is_float(tl_ir_type(ir, e))) {
    ivar *in = &f->vars.v[f->stack.v[f->stack.n - 1]];
    if (op == TL_IR_ADD || op == TL_IR_SUB) in->add += 1;
    else if (op == TL_IR_MUL) in->mul += 1;
    else if (op == TL_IR_DIV || op == TL_IR_FLOORMOD || op == TL_IR_TRUNCMOD) in->div += 1;
  }
  int n = tl_ir_nkids(ir, e);
  for (int i = 0; i < n; i++) walk_expr(f, tl_ir_kid(ir, e, i));
}

static int ann_of(int kind, int tag) {
  switch (kind) {
  case TL_FOR_PARALLEL: return ANN_PAR;
  case TL_FOR_VECTORIZED: return ANN_VEC;
  case TL_FOR_UNROLLED: return ANN_UNROLL;
  case TL_FOR_VTHREAD: return ANN_VTHREAD;
  case TL_FOR_THREAD:
    switch (tag) {
    case TL_TAG_BLOCK_X: return ANN_BX;
    case TL_TAG_BLOCK_Y: return ANN_BY;
    case TL_TAG_BLOCK_Z: return ANN_BZ;
    case TL_TAG_THREAD_X: return ANN_TX;
    case TL_TAG_THREAD_Y: return ANN_TY;
    case TL_TAG_THREAD_Z: return ANN_TZ;
    case TL_TAG_VTHREAD: return ANN_VTHREAD;
    default: return ANN_SERIAL;
    }
  default: return ANN_SERIAL;
  }
}

static void walk_stmt(fx *f, tl_ref s);

static void enter_loop(fx *f, tl_ref s) {
  const tl_ir *ir = f->ir;
  ivar v;
  memset(&v, 0, sizeof v);
  v.var = tl_ir_kid(ir, s, 0);
  int64_t len;
  v.len = tl_ir_is_int(ir, tl_ir_kid(ir, s, 2), &len) ? len : -1;
  v.ann = ann_of(tl_for_kind(ir, s), tl_for_tag(ir, s));
  v.level = v.ann <= ANN_BZ ? 2 : (v.ann <= ANN_TZ || v.ann == ANN_PAR) ? 1 : 0;
  v.nest = f->stack.n;
  double l = v.len > 0 ? (double)v.len : 1;
  f->topdown *= l;
  v.topdown = f->topdown;
  TL_VEC_PUSH(f->vars, v);
  int vi = f->vars.n - 1;
  TL_VEC_PUSH(f->stack, vi);
  walk_stmt(f, tl_ir_kid(ir, s, 3));
  /* exit */
  ivar *x = &f->vars.v[vi];
  for (int b = 0; b < x->t.n; b++) {
    touch tb = x->t.v[b];
    for (int i = 0; i < f->stack.n; i++) {
      touch *tp = touch_get(&f->vars.v[f->stack.v[i]], tb.key);
      x = &f->vars.v[vi];
      if (tb.stride != 0) tp->count *= l;
      else tp->reuse *= l;
    }
  }
  f->stack.n--;
  f->topdown /= l;
  x = &f->vars.v[vi];
  double bu = -1;
  for (int b = 0; b < x->t.n; b++) bu = TL_MAX(bu, x->t.v[b].count * x->t.v[b].reuse);
  x->bottomup = bu;
  /* parallel levels: the outer loop one level up sees how much of each
  ** access one parallel unit of v does */
  if (f->stack.n) {
    ivar *top = &f->vars.v[f->stack.v[f->stack.n - 1]];
    if (top->level == x->level + 1) {
      for (int i = 0; i < f->stack.n; i++) {
        ivar *u = &f->vars.v[f->stack.v[i]];
        if (u->level != top->level) continue;
        for (int b = 0; b < x->t.n; b++) {
          touch tb = f->vars.v[vi].t.v[b];
          touch *tp = touch_get(u, tb.key);
          tp->tcount = -tb.count;
          tp->treuse = -tb.reuse;
        }
      }
    }
  }
  x = &f->vars.v[vi];
  for (int b = 0; b < x->t.n; b++) {
    touch *tp = &x->t.v[b];
    if (tp->tcount < 0) {
      tp->tcount = (double)(int64_t)(tp->count / -tp->tcount);
      tp->treuse = tp->treuse < 0 ? (double)(int64_t)(tp->reuse / -tp->treuse) : 0;
    }
  }
}

static void walk_stmt(fx *f, tl_ref s) {
  if (!s) return;
  const tl_ir *ir = f->ir;
  switch (tl_ir_op(ir, s)) {
  case TL_IR_FOR: enter_loop(f, s); return;
  case TL_IR_STORE: {
    const tl_ref *k = tl_ir_kids(ir, s);
    walk_expr(f, k[0]);
    access(f, (int)tl_ir_node(ir, s)->imm.u, k + 1, tl_ir_nkids(ir, s) - 1);
    return;
  }
  case TL_IR_SEQ:
    for (int i = 0; i < tl_ir_nkids(ir, s); i++) walk_stmt(f, tl_ir_kid(ir, s, i));
    return;
  case TL_IR_LET_STMT:
    walk_expr(f, tl_ir_kid(ir, s, 1));
    walk_stmt(f, tl_ir_kid(ir, s, 2));
    return;
  case TL_IR_IF:
    walk_expr(f, tl_ir_kid(ir, s, 0));
    walk_stmt(f, tl_ir_kid(ir, s, 1));
    walk_stmt(f, tl_ir_kid(ir, s, 2));
    return;
  case TL_IR_ALLOC: walk_stmt(f, tl_ir_kid(ir, s, 0)); return;
  case TL_IR_ATTR: walk_stmt(f, tl_ir_kid(ir, s, 1)); return;
  case TL_IR_EVAL: walk_expr(f, tl_ir_kid(ir, s, 0)); return;
  default: return;
  }
}

static void fx_free(fx *f) {
  for (int i = 0; i < f->vars.n; i++) TL_VEC_FREE(f->vars.v[i].t);
  TL_VEC_FREE(f->vars);
  TL_VEC_FREE(f->stack);
  for (int i = 0; i < f->keys.n; i++) free(f->keys.v[i]);
  TL_VEC_FREE(f->keys);
  TL_VEC_FREE(f->coef);
  TL_VEC_FREE(f->seen);
  free(f->nacc);
}

static const fx *sort_fx;
static int cmp_touch_key(const void *a, const void *b) {
  return strcmp(sort_fx->keys.v[((const touch *)a)->key], sort_fx->keys.v[((const touch *)b)->key]);
}

/* Output sink: counts everything, writes what fits. */
typedef struct sink { float *out; int cap, n; } sink;
static void put(sink *k, double x) {
  if (k->n < k->cap) k->out[k->n] = (float)x;
  k->n++;
}

static void emit_itervar(fx *f, sink *k) {
  for (int i = 0; i < f->vars.n; i++) {
    ivar *v = &f->vars.v[i];
    put(k, T((double)v->len));
    put(k, v->nest);
    put(k, T(v->topdown));
    put(k, T(v->bottomup));
    for (int a = 0; a < ANN_N; a++) put(k, a == v->ann);
    put(k, T(v->add));
    put(k, T(v->mul));
    put(k, T(v->div));
    /* qsort's comparator has no user pointer; sort_fx is only read inside
    ** this call, under sort_lock */
    static pthread_mutex_t sort_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&sort_lock);
    sort_fx = f;
    qsort(v->t.v, (size_t)v->t.n, sizeof(touch), cmp_touch_key);
    pthread_mutex_unlock(&sort_lock);
    for (int b = 0; b < v->t.n; b++) {
      touch *t = &v->t.v[b];
      put(k, T(t->stride));
      put(k, T(-1));
      put(k, T(t->count));
      put(k, T(t->reuse));
      put(k, T(t->tcount));
      put(k, T(t->treuse));
    }
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The buffer name of an access key "<name>_<k>". */
static void raw_name(const char *key, char *out, size_t cap) {
  snprintf(out, cap, "%s", key);
  char *u = strrchr(out, '_');
  if (u) *u = 0;
}

static void sample_curve(sink *k, const double *X, const double *Y, int n) {
  for (int x = 0; x < 20; x++) {
    int j = 0;
    for (int i = 0; i < n; i++)
      if (x > X[i] - 1e-6) j = i;
    put(k, Y[j]);
    put(k, x - X[j]);
  }
}

static void emit_curve(fx *f, sink *k) {
  if (!f->vars.n) return;
  int deep = 0;
  for (int i = 1; i < f->vars.n; i++)
    if (f->vars.v[i].nest > f->vars.v[deep].nest) deep = i;
  ivar *dv = &f->vars.v[deep];
  /* raw names touched by the deepest loop, sorted, unique */
  TL_VEC(char *) names = {0};
  for (int b = 0; b < dv->t.n; b++) {
    char nm[256];
    raw_name(f->keys.v[dv->t.v[b].key], nm, sizeof nm);
    int dup = 0;
    for (int i = 0; i < names.n; i++) dup |= strcmp(names.v[i], nm) == 0;
    if (!dup) TL_VEC_PUSH(names, tl_strdup(nm));
  }
  for (int i = 0; i < names.n; i++)
    for (int j = i + 1; j < names.n; j++)
      if (strcmp(names.v[i], names.v[j]) > 0) {
        char *t = names.v[i]; names.v[i] = names.v[j]; names.v[j] = t;
      }
  int cap = f->vars.n + 1;
  double *cnt = tl_calloc((size_t)cap * 4, sizeof(double));
  double *reu = cnt + cap, *td = reu + cap, *bu = td + cap;
  for (int ni = 0; ni < names.n; ni++) {
    int m = 1;
    cnt[0] = reu[0] = td[0] = bu[0] = 0;
    for (int i = 0; i < f->vars.n; i++) {
      ivar *v = &f->vars.v[i];
      for (int b = 0; b < v->t.n; b++) {
        char nm[256];
        raw_name(f->keys.v[v->t.v[b].key], nm, sizeof nm);
        if (strcmp(nm, names.v[ni]) != 0) continue;
        cnt[m] = log2(TL_MAX(v->t.v[b].count, 1));
        reu[m] = log2(TL_MAX(v->t.v[b].reuse, 1));
        td[m] = log2(TL_MAX(v->topdown, 1));
        bu[m] = log2(TL_MAX(v->bottomup, 1));
        m++;
        break;
      }
    }
    qsort(cnt, (size_t)m, sizeof(double), cmp_double);
    qsort(reu, (size_t)m, sizeof(double), cmp_double);
    qsort(td, (size_t)m, sizeof(double), cmp_double);
    qsort(bu, (size_t)m, sizeof(double), cmp_double);
    sample_curve(k, cnt, reu, m);
    sample_curve(k, reu, cnt, m);
    sample_curve(k, cnt, td, m);
    sample_curve(k, td, cnt, m);
    free(names.v[ni]);
  }
  TL_VEC_FREE(names);
  free(cnt);
}

static int lowered_features(tl_ctx *ctx, const tl_lowered *lf, int type, float *out, int cap,
                            int *n) {
  if (type != TL_FEAT_ITERVAR && type != TL_FEAT_CURVE)
    return tl_err(ctx, TL_E_ARG, "features of a lowered function: feature type %d is not "
                  "itervar (0) or curve (2)", type);
  fx f;
  memset(&f, 0, sizeof f);
  f.ir = lf->ir;
  f.topdown = 1;
  f.nacc = tl_calloc((size_t)lf->ir->bufs.n + 1, sizeof(int));
  walk_stmt(&f, lf->body);
  sink k = {out, cap, 0};
  if (type == TL_FEAT_ITERVAR) emit_itervar(&f, &k);
  else emit_curve(&f, &k);
  fx_free(&f);
  *n = k.n;
  return TL_OK;
}

TL_EXPORT int tl_tune_lowered_features(tl_ctx *ctx, const tl_lowered *f, int feature_type,
                                       float *out, int cap, int *n) {
  if (!f || !n) return tl_err(ctx, TL_E_ARG, "tl_tune_lowered_features: NULL function");
  return lowered_features(ctx, f, feature_type, out, cap, n);
}

/* ---- task features, batched --------------------------------------------- */

/* tl_atvm_lower only reads the task (its DAG and space are copied or read in
** apply mode; no template keeps mutable static state), and every worker uses
** its own tl_ctx, so configs are instantiated, lowered and walked in
** parallel. TUNELUA_SERIAL_LOWER=1 serializes the lowering (a debugging
** switch should a template ever grow shared state). */
static pthread_mutex_t lower_lock = PTHREAD_MUTEX_INITIALIZER;
static int serial_lower(void) {
  const char *e = getenv("TUNELUA_SERIAL_LOWER");
  return e && *e == '1';
}

int tl_tune_row_features(tl_ctx *ctx, tl_atvm_task *t, int type, int64_t idx, float **row,
                         int *len);

int tl_tune_row_features(tl_ctx *ctx, tl_atvm_task *t, int type, int64_t idx, float **row,
                         int *len) {
  *row = NULL;
  *len = 0;
  float kb[512];
  int nk = tl_atvm_config_knob_features(t, idx, kb, (int)TL_ARRAY_SIZE(kb));
  if (nk < 0) return tl_err(ctx, TL_E_ARG, "features: config %lld has no knob features",
                            (long long)idx);
  nk = TL_MIN(nk, (int)TL_ARRAY_SIZE(kb));
  if (type == TL_FEAT_KNOB) {
    *row = tl_malloc(sizeof(float) * (size_t)(nk ? nk : 1));
    memcpy(*row, kb, sizeof(float) * (size_t)nk);
    *len = nk;
    return TL_OK;
  }
  tl_lowered *lf = NULL;
  int serial = serial_lower();
  if (serial) pthread_mutex_lock(&lower_lock);
  int rc = tl_atvm_lower(ctx, t, idx, "feature", &lf);
  if (serial) pthread_mutex_unlock(&lower_lock);
  if (rc) return rc;
  int n = 0;
  rc = lowered_features(ctx, lf, type, NULL, 0, &n);
  if (!rc) {
    float *r = tl_malloc(sizeof(float) * (size_t)(n + nk + 1));
    rc = lowered_features(ctx, lf, type, r, n, &n);
    memcpy(r + n, kb, sizeof(float) * (size_t)nk);
    *row = r;
    *len = n + nk;
  }
  tl_lowered_free(lf);
  return rc;
}

typedef struct batch_job {
  tl_atvm_task *t;
  int type;
  const int64_t *idx;
  float **rows;
  int *lens;
} batch_job;

static void batch_one(int64_t i, void *arg) {
  batch_job *j = arg;
  tl_ctx *c = tl_ctx_new();
  if (tl_tune_row_features(c, j->t, j->type, j->idx[i], &j->rows[i], &j->lens[i]) != TL_OK) {
    free(j->rows[i]);
    j->rows[i] = NULL;
    j->lens[i] = -1;
  }
  tl_ctx_free(c);
}

/* Extract rows[i] (malloc'd, lens[i] floats; NULL and -1 on failure). */
int tl_tune_rows(tl_ctx *ctx, tl_atvm_task *t, int type, const int64_t *idx, int n, int nthreads,
                 float **rows, int *lens);
int tl_tune_rows(tl_ctx *ctx, tl_atvm_task *t, int type, const int64_t *idx, int n, int nthreads,
                 float **rows, int *lens) {
  batch_job j = {t, type, idx, rows, lens};
  if (n <= 0) return TL_OK;
  if (nthreads == 1 || n == 1 || type == TL_FEAT_KNOB) {
    for (int i = 0; i < n; i++) batch_one(i, &j);
  } else {
    tl_pool *p = tl_pool_new(nthreads);
    tl_pool_for(p, n, batch_one, &j);
    tl_pool_free(p);
  }
  return TL_OK;
}

TL_EXPORT int tl_tune_task_features(tl_ctx *ctx, struct tl_atvm_task *t, int feature_type,
                                    const int64_t *idx, int n, int nthreads, float *out,
                                    int cap_cols, int *ncols, int8_t *ok) {
  if (feature_type < TL_FEAT_ITERVAR || feature_type > TL_FEAT_CURVE)
    return tl_err(ctx, TL_E_ARG, "features: feature type %d is not itervar, knob or curve",
                  feature_type);
  float **rows = tl_calloc((size_t)(n > 0 ? n : 1), sizeof(float *));
  int *lens = tl_calloc((size_t)(n > 0 ? n : 1), sizeof(int));
  int rc = tl_tune_rows(ctx, t, feature_type, idx, n, nthreads, rows, lens);
  int w = 0;
  if (!rc) {
    for (int i = 0; i < n; i++) w = TL_MAX(w, lens[i]);
    w = TL_MIN(w, cap_cols);
    for (int i = 0; i < n; i++) {
      float *o = out + (size_t)i * (size_t)cap_cols;
      memset(o, 0, sizeof(float) * (size_t)cap_cols);
      if (lens[i] > 0) memcpy(o, rows[i], sizeof(float) * (size_t)TL_MIN(lens[i], cap_cols));
      if (ok) ok[i] = lens[i] >= 0;
    }
    *ncols = w;
  }
  for (int i = 0; i < n; i++) free(rows[i]);
  free(rows);
  free(lens);
  return rc;
}
