/*
** model.c -- the XGBoost cost model of the template tuner (TVM's
** XGBoostCostModel over libxgboost's C API).
**
** fit: y = flops / max(flops) (failed trials 0), rows shuffled, gradient
** boosted trees of depth 3 (eta 0.3, gamma 1e-4, lambda 1) with squared
** error (loss "reg") or the pairwise rank objective ("rank", "rank-binary").
** Boosting runs up to 8000 rounds and stops when the training-set
** a-recall@plan_size has not improved for 20 rounds (checked every second
** round). Unlike TVM we keep the trees only up to the best round, and the
** a-recall curve counts the element at position i (TVM's starts at 0).
** "rank-binary" scores the early stop against labels binarised at 0.5.
**
** Transfer learning (fit_log): a model trained on the task's history becomes
** the base model; later fits start from discount x its margin, discount =
** 2^-(n/64), dropped below 0.05.
**
** Features of task configs are cached per model (index -> row), cleared at
** 100000 rows.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

#include "tuner.h"

int tl_tune_rows(tl_ctx *ctx, tl_atvm_task *t, int type, const int64_t *idx, int n, int nthreads,
                 float **rows, int *lens);

#define CACHE_MAX 100000

struct tl_tune_model {
  tl_atvm_task *task;
  int ftype, loss, nthreads;
  uint64_t rng;
  BoosterHandle bst;              /* NULL until trained */
  int ncol, rounds;
  BoosterHandle base;             /* transfer learning; NULL: none */
  int base_ncol;
  double base_discount;
  /* feature cache: open addressing on the index */
  int64_t *ckey;                  /* -1 = empty */
  float **crow;
  int *clen;
  int ccap, ccount;
};

static int xgb_err(tl_ctx *ctx, const char *what) {
  return tl_err(ctx, TL_E_INTERNAL, "xgboost %s: %s", what, XGBGetLastError());
}

TL_EXPORT int tl_tune_model_new(tl_ctx *ctx, struct tl_atvm_task *t, int feature_type,
                                int loss_type, int num_threads, uint64_t seed,
                                tl_tune_model **out) {
  *out = NULL;
  if (feature_type < TL_FEAT_ITERVAR || feature_type > TL_FEAT_CURVE)
    return tl_err(ctx, TL_E_ARG, "XGBoost model: feature_type %d is not itervar, knob or curve",
                  feature_type);
  if (loss_type < TL_LOSS_REG || loss_type > TL_LOSS_RANK_BINARY)
    return tl_err(ctx, TL_E_ARG, "XGBoost model: loss_type %d is not reg, rank or rank-binary",
                  loss_type);
  tl_tune_model *m = tl_calloc(1, sizeof *m);
  m->task = t;
  m->ftype = feature_type;
  m->loss = loss_type;
  m->nthreads = num_threads > 0 ? num_threads : tl_num_cores();
  m->rng = seed ? seed : 0x1234567ull;
  *out = m;
  return TL_OK;
}

static void cache_clear(tl_tune_model *m) {
  for (int i = 0; i < m->ccap; i++) free(m->crow[i]);
  free(m->ckey);
  free(m->crow);
  free(m->clen);
  m->ckey = NULL;
  m->crow = NULL;
  m->clen = NULL;
  m->ccap = m->ccount = 0;
}

TL_EXPORT void tl_tune_model_free(tl_tune_model *m) {
  if (!m) return;
  if (m->bst) XGBoosterFree(m->bst);
  if (m->base) XGBoosterFree(m->base);
  cache_clear(m);
  free(m);
}

TL_EXPORT int tl_tune_model_rounds(const tl_tune_model *m) { return m ? m->rounds : 0; }
TL_EXPORT int tl_tune_model_trained(const tl_tune_model *m) {
  return m && (m->bst != NULL || m->base != NULL);
}

/* ---- feature cache ---------------------------------------------------------- */

static int cache_find(const tl_tune_model *m, int64_t key) {
  if (!m->ccap) return -1;
  uint32_t mask = (uint32_t)m->ccap - 1;
  uint32_t h = (uint32_t)tl_hash_mix(0, (uint64_t)key) & mask;
  while (m->ckey[h] != -1) {
    if (m->ckey[h] == key) return (int)h;
    h = (h + 1) & mask;
  }
  return -1;
}

static void cache_put(tl_tune_model *m, int64_t key, float *row, int len);

static void cache_grow(tl_tune_model *m) {
  int oc = m->ccap;
  int64_t *ok = m->ckey;
  float **orow = m->crow;
  int *olen = m->clen;
  m->ccap = oc ? oc * 2 : 1024;
  m->ckey = tl_malloc(sizeof(int64_t) * (size_t)m->ccap);
  for (int i = 0; i < m->ccap; i++) m->ckey[i] = -1;
  m->crow = tl_calloc((size_t)m->ccap, sizeof(float *));
  m->clen = tl_calloc((size_t)m->ccap, sizeof(int));
  m->ccount = 0;
  for (int i = 0; i < oc; i++)
    if (ok[i] != -1) cache_put(m, ok[i], orow[i], olen[i]);
  free(ok);
  free(orow);
  free(olen);
}

static void cache_put(tl_tune_model *m, int64_t key, float *row, int len) {
  if ((m->ccount + 1) * 2 > m->ccap) cache_grow(m);
  uint32_t mask = (uint32_t)m->ccap - 1;
  uint32_t h = (uint32_t)tl_hash_mix(0, (uint64_t)key) & mask;
  while (m->ckey[h] != -1 && m->ckey[h] != key) h = (h + 1) & mask;
  if (m->ckey[h] == -1) m->ccount++;
  else free(m->crow[h]);
  m->ckey[h] = key;
  m->crow[h] = row;
  m->clen[h] = len;
}

/* Feature matrix of configs xs: n x width (width <= 0: the longest row). */
static int task_matrix(tl_ctx *ctx, tl_tune_model *m, const int64_t *xs, int n, int width,
                       float **out, int *out_width) {
  if (!m->task) return tl_err(ctx, TL_E_ARG, "XGBoost model: no task to extract features from");
  if (m->ccount + n >= CACHE_MAX) cache_clear(m);
  /* the missing, de-duplicated */
  int64_t *miss = tl_malloc(sizeof(int64_t) * (size_t)(n + 1));
  int nmiss = 0;
  for (int i = 0; i < n; i++) {
    if (cache_find(m, xs[i]) >= 0) continue;
    int dup = 0;
    for (int j = nmiss - 1; j >= 0 && j >= nmiss - 64; j--) dup |= miss[j] == xs[i];
    if (!dup) miss[nmiss++] = xs[i];
  }
  if (nmiss) {
    float **rows = tl_calloc((size_t)nmiss, sizeof(float *));
    int *lens = tl_calloc((size_t)nmiss, sizeof(int));
    int rc = tl_tune_rows(ctx, m->task, m->ftype, miss, nmiss, m->nthreads, rows, lens);
    if (rc) {
      free(rows); free(lens); free(miss);
      return rc;
    }
    for (int i = 0; i < nmiss; i++)
      if (cache_find(m, miss[i]) < 0) cache_put(m, miss[i], rows[i], lens[i] < 0 ? 0 : lens[i]);
      else free(rows[i]);
    free(rows);
    free(lens);
  }
  free(miss);
  int w = width;
  if (w <= 0) {
    w = 1;
    for (int i = 0; i < n; i++) w = TL_MAX(w, m->clen[cache_find(m, xs[i])]);
  }
  float *x = tl_calloc((size_t)n * (size_t)w, sizeof(float));
  for (int i = 0; i < n; i++) {
    int c = cache_find(m, xs[i]);
    memcpy(x + (size_t)i * (size_t)w, m->crow[c], sizeof(float) * (size_t)TL_MIN(w, m->clen[c]));
  }
  *out = x;
  *out_width = w;
  return TL_OK;
}

/* ---- booster helpers ------------------------------------------------------------ */

static int set_params(tl_ctx *ctx, tl_tune_model *m, BoosterHandle b) {
  /* XGBoost trains on one thread: the sets are small (hundreds to a few
  ** thousand rows), and OpenMP's spinning workers made a fit 100x slower on a
  ** loaded machine (4.8 s vs 0.03 s for 128 rows). num_threads drives the
  ** feature extraction instead. */
  char nt[32], seed[32];
  snprintf(nt, sizeof nt, "%d", 1);
  snprintf(seed, sizeof seed, "%u", (unsigned)(m->rng & 0x7fffffff));
  const char *kv[][2] = {
    {"max_depth", "3"}, {"gamma", "0.0001"}, {"min_child_weight", "1"}, {"subsample", "1.0"},
    {"eta", "0.3"}, {"lambda", "1.0"}, {"alpha", "0"}, {"verbosity", "0"}, {"nthread", nt},
    {"seed", seed},
    {"objective", m->loss == TL_LOSS_REG ? "reg:squarederror" : "rank:pairwise"},
  };
  for (size_t i = 0; i < TL_ARRAY_SIZE(kv); i++)
    if (XGBoosterSetParam(b, kv[i][0], kv[i][1])) return xgb_err(ctx, "set param");
  return TL_OK;
}

/* Margin predictions of booster b on x (nrow x ncol, padded/cut to bcol). */
static int booster_predict(tl_ctx *ctx, BoosterHandle b, int bcol, const float *x, int nrow,
                           int ncol, int margin, double *out) {
  const float *use = x;
  float *tmp = NULL;
  if (ncol != bcol) {
    tmp = tl_calloc((size_t)nrow * (size_t)bcol, sizeof(float));
    for (int i = 0; i < nrow; i++)
      memcpy(tmp + (size_t)i * (size_t)bcol, x + (size_t)i * (size_t)ncol,
             sizeof(float) * (size_t)TL_MIN(ncol, bcol));
    use = tmp;
  }
  DMatrixHandle d;
  if (XGDMatrixCreateFromMat(use, (bst_ulong)nrow, (bst_ulong)bcol, NAN, &d)) {
    free(tmp);
    return xgb_err(ctx, "DMatrix");
  }
  bst_ulong len = 0;
  const float *r = NULL;
  int rc = XGBoosterPredict(b, d, margin ? 1 : 0, 0, 0, &len, &r);
  if (!rc)
    for (int i = 0; i < nrow && (bst_ulong)i < len; i++) out[i] = r[i];
  XGDMatrixFree(d);
  free(tmp);
  return rc ? xgb_err(ctx, "predict") : TL_OK;
}

/* The two helpers above and tl_xgb_keep_rounds, for ansor_model.c too (tuner.h). */
int tl_xgb_error(tl_ctx *ctx, const char *what) { return xgb_err(ctx, what); }
int tl_xgb_predict(tl_ctx *ctx, void *booster, int bcol, const float *x, int nrow, int ncol,
                   int margin, double *out) {
  return booster_predict(ctx, (BoosterHandle)booster, bcol, x, nrow, ncol, margin, out);
}

int tl_xgb_keep_rounds(void **booster, int keep) {
  BoosterHandle b = (BoosterHandle)*booster;
  int have = 0;
  XGBoosterBoostedRounds(b, &have);
  if (keep >= have) return have;
  BoosterHandle sl = NULL;
  if (XGBoosterSlice(b, 0, keep, 1, &sl) != 0 || !sl) return have;
  XGBoosterFree(b);
  *booster = sl;
  return keep;
}

/* a-recall@N: the mean over i < N of the fraction of the i+1 best-predicted
** rows that are among the i+1 best by label. */
typedef struct kv { double k; int i; } kv;
static int cmp_kv_desc(const void *a, const void *b) {
  const kv *x = a, *y = b;
  if (x->k != y->k) return x->k > y->k ? -1 : 1;
  return x->i - y->i;
}

static double a_recall(const double *pred, const float *label, int n, int N) {
  if (n == 0) return 0;
  kv *p = tl_malloc(sizeof(kv) * (size_t)n), *l = tl_malloc(sizeof(kv) * (size_t)n);
  int *rank = tl_malloc(sizeof(int) * (size_t)n), *cnt = tl_calloc((size_t)n + 1, sizeof(int));
  for (int i = 0; i < n; i++) {
    p[i].k = pred[i], p[i].i = i;
    l[i].k = label[i], l[i].i = i;
  }
  qsort(p, (size_t)n, sizeof(kv), cmp_kv_desc);
  qsort(l, (size_t)n, sizeof(kv), cmp_kv_desc);
  for (int i = 0; i < n; i++) rank[l[i].i] = i;
  int k = TL_MIN(N, n), hit = 0;
  double sum = 0;
  for (int i = 0; i < k; i++) {
    int r = rank[p[i].i];
    cnt[r]++;
    hit += (r < i) + cnt[i];   /* the new row if better; every seen row of rank i */
    sum += (double)hit / (double)(i + 1);
  }
  free(p);
  free(l);
  free(rank);
  free(cnt);
  return sum / (double)k;
}

static uint64_t rng_next(tl_tune_model *m) { return tl_rng_next(&m->rng); }

static int train(tl_ctx *ctx, tl_tune_model *m, const float *x0, int nrow, int ncol,
                 const double *y0, int plan_size, int max_rounds, int stopping, int use_base,
                 BoosterHandle *out, int *out_rounds) {
  *out = NULL;
  double ymax = 1e-8;
  for (int i = 0; i < nrow; i++) ymax = TL_MAX(ymax, y0[i]);
  /* shuffle */
  int *perm = tl_malloc(sizeof(int) * (size_t)nrow);
  for (int i = 0; i < nrow; i++) perm[i] = i;
  for (int i = nrow - 1; i > 0; i--) {
    int j = (int)(rng_next(m) % (uint64_t)(i + 1));
    int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
  }
  float *x = tl_malloc(sizeof(float) * (size_t)nrow * (size_t)ncol + 4);
  float *y = tl_malloc(sizeof(float) * (size_t)nrow + 4);
  float *yeval = tl_malloc(sizeof(float) * (size_t)nrow + 4);
  for (int i = 0; i < nrow; i++) {
    memcpy(x + (size_t)i * (size_t)ncol, x0 + (size_t)perm[i] * (size_t)ncol,
           sizeof(float) * (size_t)ncol);
    y[i] = (float)(y0[perm[i]] / ymax);
    yeval[i] = m->loss == TL_LOSS_RANK_BINARY ? (y[i] >= 0.5f ? 1.0f : 0.0f) : y[i];
  }
  free(perm);
  int rc = TL_OK;
  DMatrixHandle d = NULL;
  BoosterHandle b = NULL;
  double *pred = tl_calloc((size_t)nrow + 1, sizeof(double));
  float *margin = NULL;
  if (XGDMatrixCreateFromMat(x, (bst_ulong)nrow, (bst_ulong)ncol, NAN, &d)) {
    rc = xgb_err(ctx, "DMatrix");
    goto done;
  }
  if (XGDMatrixSetFloatInfo(d, "label", y, (bst_ulong)nrow)) { rc = xgb_err(ctx, "label"); goto done; }
  if (use_base && m->base) {
    rc = booster_predict(ctx, m->base, m->base_ncol, x, nrow, ncol, 1, pred);
    if (rc) goto done;
    margin = tl_malloc(sizeof(float) * (size_t)nrow);
    for (int i = 0; i < nrow; i++) margin[i] = (float)(m->base_discount * pred[i]);
    if (XGDMatrixSetFloatInfo(d, "base_margin", margin, (bst_ulong)nrow)) {
      rc = xgb_err(ctx, "base_margin");
      goto done;
    }
  }
  if (XGBoosterCreate(&d, 1, &b)) { rc = xgb_err(ctx, "create"); goto done; }
  if ((rc = set_params(ctx, m, b))) goto done;
  double best = -1;
  int best_it = 0, it;
  for (it = 0; it < max_rounds; it++) {
    if (XGBoosterUpdateOneIter(b, it, d)) { rc = xgb_err(ctx, "train"); goto done; }
    if (it % 2) continue;
    bst_ulong len = 0;
    const float *r = NULL;
    if (XGBoosterPredict(b, d, 0, 0, 0, &len, &r)) { rc = xgb_err(ctx, "predict"); goto done; }
    for (int i = 0; i < nrow; i++) pred[i] = r[i];
    double s = a_recall(pred, yeval, nrow, plan_size);
    if (s > best) {
      best = s;
      best_it = it;
    } else if (it - best_it >= stopping) {
      break;
    }
  }
  /* keep the trees up to the best round */
  *out_rounds = tl_xgb_keep_rounds((void **)&b, best_it + 1);
  *out = b;
  b = NULL;
done:
  if (b) XGBoosterFree(b);
  if (d) XGDMatrixFree(d);
  free(margin);
  free(pred);
  free(x);
  free(y);
  free(yeval);
  return rc;
}

TL_EXPORT int tl_tune_model_fit_matrix(tl_ctx *ctx, tl_tune_model *m, const float *x, int nrow,
                                       int ncol, const double *y, int plan_size) {
  if (nrow <= 0 || ncol <= 0)
    return tl_err(ctx, TL_E_ARG, "XGBoost fit: empty training set (%d rows, %d columns)", nrow,
                  ncol);
  if (m->base) {
    m->base_discount = 1.0 / pow(2.0, (double)nrow / 64.0);
    if (m->base_discount < 0.05) {
      XGBoosterFree(m->base);
      m->base = NULL;
    }
  }
  BoosterHandle b;
  int rounds;
  int rc = train(ctx, m, x, nrow, ncol, y, plan_size > 0 ? plan_size : 64, 8000, 20, 1, &b,
                 &rounds);
  if (rc) return rc;
  if (m->bst) XGBoosterFree(m->bst);
  m->bst = b;
  m->ncol = ncol;
  m->rounds = rounds;
  return TL_OK;
}

TL_EXPORT int tl_tune_model_predict_matrix(tl_ctx *ctx, tl_tune_model *m, const float *x,
                                           int nrow, int ncol, double *out) {
  if (!m->bst && !m->base)
    return tl_err(ctx, TL_E_ARG, "XGBoost predict: the model is not trained");
  if (nrow <= 0) return TL_OK;
  int rc;
  if (m->bst) {
    rc = booster_predict(ctx, m->bst, m->ncol, x, nrow, ncol, 0, out);
    if (rc) return rc;
  } else {
    for (int i = 0; i < nrow; i++) out[i] = 0;
  }
  if (m->base) {
    double *b = tl_malloc(sizeof(double) * (size_t)nrow);
    rc = booster_predict(ctx, m->base, m->base_ncol, x, nrow, ncol, 1, b);
    double disc = m->bst ? m->base_discount : 1.0;
    if (!rc)
      for (int i = 0; i < nrow; i++) out[i] += disc * b[i];
    free(b);
    if (rc) return rc;
  }
  return TL_OK;
}

TL_EXPORT int tl_tune_model_fit(tl_ctx *ctx, tl_tune_model *m, const int64_t *xs,
                                const double *ys, int n, int plan_size) {
  float *x;
  int w;
  int rc = task_matrix(ctx, m, xs, n, 0, &x, &w);
  if (rc) return rc;
  rc = tl_tune_model_fit_matrix(ctx, m, x, n, w, ys, plan_size);
  free(x);
  return rc;
}

TL_EXPORT int tl_tune_model_predict(tl_ctx *ctx, tl_tune_model *m, const int64_t *xs, int n,
                                    double *out) {
  if (!m->bst && !m->base)
    return tl_err(ctx, TL_E_ARG, "XGBoost predict: the model is not trained");
  if (n <= 0) return TL_OK;
  float *x;
  int w;
  int rc = task_matrix(ctx, m, xs, n, TL_MAX(m->bst ? m->ncol : 0, m->base ? m->base_ncol : 0),
                       &x, &w);
  if (rc) return rc;
  rc = tl_tune_model_predict_matrix(ctx, m, x, n, w, out);
  free(x);
  return rc;
}

TL_EXPORT int tl_tune_model_fit_log_matrix(tl_ctx *ctx, tl_tune_model *m, const float *x,
                                           int nrow, int ncol, const double *y, int plan_size) {
  if (nrow <= 0 || ncol <= 0)
    return tl_err(ctx, TL_E_ARG, "XGBoost fit_log: empty training set");
  BoosterHandle b;
  int rounds;
  int rc = train(ctx, m, x, nrow, ncol, y, 2 * (plan_size > 0 ? plan_size : 64), 400, 100, 0, &b,
                 &rounds);
  if (rc) return rc;
  if (m->base) XGBoosterFree(m->base);
  m->base = b;
  m->base_ncol = ncol;
  m->base_discount = 1.0;
  return TL_OK;
}

/* The scorer of the model optimizer. */
int tl_tune_model_score(tl_ctx *ctx, void *ud, const int64_t *pts, int n, double *out);
int tl_tune_model_score(tl_ctx *ctx, void *ud, const int64_t *pts, int n, double *out) {
  return tl_tune_model_predict(ctx, (tl_tune_model *)ud, pts, n, out);
}
