/*
** ansor_model.c -- the auto-scheduler's cost model: XGBoost over per-store
** feature rows (core/ansor/feature.c) with a "pack-sum" objective, and the
** random model used before any measurement.
**
** A state is a group of rows (one per store of its lowered function); its
** score is the sum of its rows' raw predictions. Training data is every
** state the model was updated with: label y = throughput / the largest
** throughput seen (failed measurements, throughput 0, get 0), and every row
** of a state is weighted by its state's label. Boosting is driven through
** XGBoosterBoostOneIter with our own gradient: for a row r of state s,
**   P(s) = sum of s's row margins,  grad(r) = (P(s) - y(s)) w(s),  hess(r) = w(s)
** i.e. weighted squared error on the summed score (base_score 0). Trees:
** depth 10, eta 0.2, gamma 0.001, min_child_weight 0, histogram method. Up
** to max_rounds (10000) rounds; every second round the training p-rmse (over
** states with y > 0) is checked and boosting stops once it has not improved
** by 1e-4 (of the normalized label) for early_stopping (50) rounds: the
** training error of depth-10 trees keeps shrinking geometrically, so a
** strict "improved at all" test would run every round. The trees up to the
** best round are kept.
**
** update appends the states and retrains from scratch on all of them,
** unless adaptive_training is on and fewer than a fifth of the states used
** by the last fit are new. predict scores with the trees once the model is
** trained on more than num_warmup_sample (100) states (or was loaded),
** before that (and always for the random model) uniformly in [0, 1) from
** the model's seeded generator. A state with no rows, or only zero rows
** (its lowering failed), scores -inf in either case.
**
** Throughputs are normalized over all states of a model: use one model per
** task, or pass throughputs already normalized per task.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xgboost/c_api.h>

#include "tuner.h"

#define NFEAT TL_ANSOR_NFEAT

struct tl_ansor_model {
  int kind;                       /* 0 random, 1 xgb */
  uint64_t rng;
  uint64_t seed;
  BoosterHandle bst;              /* NULL until trained or loaded */
  int rounds;
  int loaded;
  TL_VEC(float) x;                /* every row, NFEAT each */
  TL_VEC(int) off;                /* per state: first row (n + 1 entries) */
  TL_VEC(double) tp;              /* per state: throughput */
  int last_fit;                   /* states in the last fit */
  /* parameters */
  int warmup, nthread, max_rounds, stopping, adaptive;
};

TL_EXPORT int tl_ansor_num_features(void) { return NFEAT; }

TL_EXPORT tl_ansor_model *tl_ansor_model_new(tl_ctx *ctx, int kind, uint64_t seed) {
  if (kind != 0 && kind != 1) {
    tl_err(ctx, TL_E_ARG, "ansor cost model: kind %d is not 0 (random) or 1 (xgb)", kind);
    return NULL;
  }
  tl_ansor_model *m = tl_calloc(1, sizeof *m);
  m->kind = kind;
  m->seed = seed;
  m->rng = seed ? seed : 0x5eed5eedull;
  m->warmup = 100;
  m->nthread = 1;
  m->max_rounds = 10000;
  m->stopping = 50;
  m->adaptive = 1;
  TL_VEC_PUSH(m->off, 0);
  return m;
}

TL_EXPORT void tl_ansor_model_free(tl_ansor_model *m) {
  if (!m) return;
  if (m->bst) XGBoosterFree(m->bst);
  TL_VEC_FREE(m->x);
  TL_VEC_FREE(m->off);
  TL_VEC_FREE(m->tp);
  free(m);
}

TL_EXPORT int tl_ansor_model_set(tl_ctx *ctx, tl_ansor_model *m, const char *key, double value) {
  if (!m || !key) return tl_err(ctx, TL_E_ARG, "ansor cost model: NULL %s", !m ? "model" : "key");
  int *slot = NULL;
  double lo = 0;
  if (strcmp(key, "num_warmup_sample") == 0) slot = &m->warmup, lo = -1;
  else if (strcmp(key, "nthread") == 0) slot = &m->nthread, lo = 1;
  else if (strcmp(key, "max_rounds") == 0) slot = &m->max_rounds, lo = 1;
  else if (strcmp(key, "early_stopping") == 0) slot = &m->stopping, lo = 1;
  else if (strcmp(key, "adaptive_training") == 0) slot = &m->adaptive;
  else
    return tl_err(ctx, TL_E_ARG, "ansor cost model: unknown parameter '%s' (expected "
                  "num_warmup_sample, nthread, max_rounds, early_stopping or adaptive_training)",
                  key);
  if (!(value >= lo && value <= 1e9) || value != floor(value))
    return tl_err(ctx, TL_E_ARG, "ansor cost model: %s = %g is not an integer in [%g, 1e9]", key,
                  value, lo);
  *slot = (int)value;
  return TL_OK;
}

TL_EXPORT int tl_ansor_model_num_samples(const tl_ansor_model *m) { return m ? m->tp.n : 0; }
TL_EXPORT int tl_ansor_model_rounds(const tl_ansor_model *m) { return m ? m->rounds : 0; }
TL_EXPORT int tl_ansor_model_trained(const tl_ansor_model *m) {
  return m && m->bst && (m->loaded || m->last_fit > m->warmup);
}

/* ---- argument checks ------------------------------------------------------------- */

static int check_batch(tl_ctx *ctx, const char *fn, tl_ansor_model *m, int n, const float *rows,
                       const int *row_off, const void *vals, const char *vname) {
  if (!m) return tl_err(ctx, TL_E_ARG, "%s: NULL model", fn);
  if (n < 0) return tl_err(ctx, TL_E_ARG, "%s: negative state count %d", fn, n);
  if (n == 0) return TL_OK;
  if (!row_off) return tl_err(ctx, TL_E_ARG, "%s: row_off is NULL (expected %d + 1 offsets)", fn, n);
  if (!vals) return tl_err(ctx, TL_E_ARG, "%s: %s is NULL", fn, vname);
  if (row_off[0] != 0)
    return tl_err(ctx, TL_E_ARG, "%s: row_off[0] is %d (expected 0)", fn, row_off[0]);
  for (int i = 0; i < n; i++)
    if (row_off[i + 1] < row_off[i])
      return tl_err(ctx, TL_E_ARG, "%s: row_off[%d] = %d is below row_off[%d] = %d (offsets "
                    "must not decrease)", fn, i + 1, row_off[i + 1], i, row_off[i]);
  if (row_off[n] > 0 && !rows)
    return tl_err(ctx, TL_E_ARG, "%s: rows is NULL but row_off[%d] = %d", fn, n, row_off[n]);
  if ((size_t)row_off[n] > (size_t)INT32_MAX / NFEAT)
    return tl_err(ctx, TL_E_ARG, "%s: %d rows are too many", fn, row_off[n]);
  return TL_OK;
}

/* ---- training -------------------------------------------------------------------------- */

static int set_params(tl_ctx *ctx, tl_ansor_model *m, BoosterHandle b) {
  char nt[32], seed[32];
  snprintf(nt, sizeof nt, "%d", m->nthread);
  snprintf(seed, sizeof seed, "%u", (unsigned)(m->rng & 0x7fffffff));
  const char *kv[][2] = {
    {"max_depth", "10"}, {"gamma", "0.001"}, {"min_child_weight", "0"}, {"eta", "0.2"},
    {"lambda", "1"}, {"base_score", "0"}, {"disable_default_eval_metric", "1"},
    {"tree_method", "hist"}, {"verbosity", "0"}, {"nthread", nt}, {"seed", seed},
  };
  for (size_t i = 0; i < TL_ARRAY_SIZE(kv); i++)
    if (XGBoosterSetParam(b, kv[i][0], kv[i][1])) return tl_xgb_error(ctx, "set param");
  return TL_OK;
}

static int fit(tl_ctx *ctx, tl_ansor_model *m) {
  int ns = m->tp.n, nr = m->off.v[ns];
  double ymax = 0;
  for (int s = 0; s < ns; s++) ymax = TL_MAX(ymax, m->tp.v[s]);
  if (ymax <= 0 || nr == 0) return TL_OK;         /* nothing succeeded yet: nothing to learn */
  double *y = tl_malloc(sizeof(double) * (size_t)ns);
  float *grad = tl_malloc(sizeof(float) * (size_t)nr), *hess = tl_malloc(sizeof(float) * (size_t)nr);
  double *P = tl_malloc(sizeof(double) * (size_t)ns);
  for (int s = 0; s < ns; s++) y[s] = m->tp.v[s] / ymax;
  int rc = TL_OK;
  DMatrixHandle d = NULL;
  BoosterHandle b = NULL;
  if (XGDMatrixCreateFromMat(m->x.v, (bst_ulong)nr, (bst_ulong)NFEAT, NAN, &d)) {
    rc = tl_xgb_error(ctx, "DMatrix");
    goto done;
  }
  if (XGBoosterCreate(&d, 1, &b)) { rc = tl_xgb_error(ctx, "create"); goto done; }
  if ((rc = set_params(ctx, m, b))) goto done;
  double best = INFINITY;
  int best_it = 0, it;
  for (it = 0; it < m->max_rounds; it++) {
    bst_ulong len = 0;
    const float *r = NULL;
    if (it == 0) {
      for (int s = 0; s < ns; s++) P[s] = 0;
    } else {
      if (XGBoosterPredict(b, d, 1, 0, 1, &len, &r) || len != (bst_ulong)nr) {
        rc = tl_xgb_error(ctx, "predict");
        goto done;
      }
      for (int s = 0; s < ns; s++) {
        double p = 0;
        for (int k = m->off.v[s]; k < m->off.v[s + 1]; k++) p += r[k];
        P[s] = p;
      }
    }
    if (it % 2 == 0) {
      double se = 0;
      int cnt = 0;
      for (int s = 0; s < ns; s++)
        if (y[s] > 0) se += (P[s] - y[s]) * (P[s] - y[s]), cnt++;
      double rmse = sqrt(se / TL_MAX(cnt, 1));
      if (rmse < best - 1e-4) {
        best = rmse;
        best_it = it;
      } else if (it - best_it >= m->stopping) {
        break;
      }
    }
    for (int s = 0; s < ns; s++) {
      double w = y[s];
      for (int k = m->off.v[s]; k < m->off.v[s + 1]; k++) {
        grad[k] = (float)((P[s] - y[s]) * w);
        hess[k] = (float)w;
      }
    }
    if (XGBoosterBoostOneIter(b, d, grad, hess, (bst_ulong)nr)) {
      rc = tl_xgb_error(ctx, "train");
      goto done;
    }
  }
  /* the trees up to the best checked round (best_it rounds were applied) */
  int keep = tl_xgb_keep_rounds((void **)&b, TL_MAX(best_it, 1));
  if (m->bst) XGBoosterFree(m->bst);
  m->bst = b;
  b = NULL;
  m->rounds = keep;
  m->loaded = 0;
  m->last_fit = ns;
done:
  if (b) XGBoosterFree(b);
  if (d) XGDMatrixFree(d);
  free(y);
  free(grad);
  free(hess);
  free(P);
  return rc;
}

TL_EXPORT int tl_ansor_model_update(tl_ctx *ctx, tl_ansor_model *m, int nstates, const float *rows,
                                    const int *row_off, const double *throughput) {
  static const char fn[] = "tl_ansor_model_update";
  int rc = check_batch(ctx, fn, m, nstates, rows, row_off, throughput, "throughput");
  if (rc || nstates == 0) return rc;
  for (int s = 0; s < nstates; s++)
    if (!(throughput[s] >= 0) || isinf(throughput[s]))
      return tl_err(ctx, TL_E_ARG, "%s: throughput[%d] = %g (expected a finite value >= 0; 0 "
                    "for a failed measurement)", fn, s, throughput[s]);
  size_t nf = (size_t)row_off[nstates] * NFEAT;
  for (size_t i = 0; i < nf; i++)
    if (!isfinite(rows[i]))
      return tl_err(ctx, TL_E_ARG, "%s: rows[%zu] (row %zu, feature %zu) is not finite", fn, i,
                    i / NFEAT, i % NFEAT);
  if ((size_t)m->x.n + nf > (size_t)INT32_MAX)
    return tl_err(ctx, TL_E_ARG, "%s: the model holds too many rows", fn);
  if (m->kind == 0) return TL_OK;
  int base = m->off.v[m->tp.n];
  TL_VEC_RESERVE(m->x, m->x.n + (int)nf);
  memcpy(m->x.v + m->x.n, rows, sizeof(float) * nf);
  m->x.n += (int)nf;
  for (int s = 0; s < nstates; s++) {
    TL_VEC_PUSH(m->tp, throughput[s]);
    TL_VEC_PUSH(m->off, base + row_off[s + 1]);
  }
  if (m->tp.n <= m->warmup) return TL_OK;   /* predictions stay random until then */
  if (m->adaptive && m->bst && !m->loaded && m->tp.n - m->last_fit < m->last_fit / 5) return TL_OK;
  return fit(ctx, m);
}

static int all_zero(const float *r, int nrow) {
  for (size_t i = 0; i < (size_t)nrow * NFEAT; i++)
    if (r[i] != 0) return 0;
  return 1;
}

TL_EXPORT int tl_ansor_model_predict(tl_ctx *ctx, tl_ansor_model *m, int nstates,
                                     const float *rows, const int *row_off, double *scores) {
  static const char fn[] = "tl_ansor_model_predict";
  int rc = check_batch(ctx, fn, m, nstates, rows, row_off, scores, "scores");
  if (rc || nstates == 0) return rc;
  int nr = row_off[nstates];
  if (!tl_ansor_model_trained(m) || nr == 0) {
    for (int s = 0; s < nstates; s++) scores[s] = tl_rng_uniform(&m->rng);
  } else {
    /* in-place prediction over the caller's rows: no DMatrix copy */
    char arr[160];
    snprintf(arr, sizeof arr, "{\"data\": [%llu, true], \"shape\": [%d, %d], \"typestr\": "
             "\"<f4\", \"version\": 3}", (unsigned long long)(uintptr_t)rows, nr, NFEAT);
    static const char cfg[] = "{\"type\": 1, \"training\": false, \"iteration_begin\": 0, "
                              "\"iteration_end\": 0, \"strict_shape\": false, "
                              "\"missing\": NaN, \"cache_id\": 0}";
    const bst_ulong *shape = NULL;
    bst_ulong dim = 0;
    const float *p = NULL;
    if (XGBoosterPredictFromDense(m->bst, arr, cfg, NULL, &shape, &dim, &p))
      return tl_xgb_error(ctx, "predict");
    for (int s = 0; s < nstates; s++) {
      double v = 0;
      for (int k = row_off[s]; k < row_off[s + 1]; k++) v += p[k];
      scores[s] = v;
    }
  }
  for (int s = 0; s < nstates; s++) {
    int n = row_off[s + 1] - row_off[s];
    if (n == 0 || all_zero(rows + (size_t)row_off[s] * NFEAT, n)) scores[s] = -INFINITY;
  }
  return TL_OK;
}

/* ---- save and load: the trees only (libxgboost's UBJSON model) ------------------------ */

TL_EXPORT int tl_ansor_model_save(tl_ctx *ctx, tl_ansor_model *m, const char *path) {
  if (!m || !path) return tl_err(ctx, TL_E_ARG, "tl_ansor_model_save: NULL %s", !m ? "model" : "path");
  if (!m->bst)
    return tl_err(ctx, TL_E_ARG, "tl_ansor_model_save: the model has no trees yet (%s)",
                  m->kind == 0 ? "a random model" : "not trained");
  bst_ulong len = 0;
  const char *buf = NULL;
  if (XGBoosterSaveModelToBuffer(m->bst, "{\"format\": \"ubj\"}", &len, &buf))
    return tl_xgb_error(ctx, "save");
  return tl_write_file_atomic(ctx, path, buf, (size_t)len);
}

TL_EXPORT int tl_ansor_model_load(tl_ctx *ctx, tl_ansor_model *m, const char *path) {
  if (!m || !path) return tl_err(ctx, TL_E_ARG, "tl_ansor_model_load: NULL %s", !m ? "model" : "path");
  if (m->kind != 1)
    return tl_err(ctx, TL_E_ARG, "tl_ansor_model_load: '%s': a random model has no trees to load",
                  path);
  char *data = NULL;
  size_t len = 0;
  int rc = tl_read_file(ctx, path, &data, &len);
  if (rc) return rc;
  BoosterHandle b = NULL;
  if (XGBoosterCreate(NULL, 0, &b)) {
    free(data);
    return tl_xgb_error(ctx, "create");
  }
  if (XGBoosterLoadModelFromBuffer(b, data, (bst_ulong)len)) {
    free(data);
    XGBoosterFree(b);
    return tl_err(ctx, TL_E_PARSE, "tl_ansor_model_load: '%s' is not an XGBoost model: %s", path,
                  XGBGetLastError());
  }
  free(data);
  bst_ulong nf = 0;
  if (XGBoosterGetNumFeature(b, &nf) || nf != NFEAT) {
    XGBoosterFree(b);
    return tl_err(ctx, TL_E_PARSE, "tl_ansor_model_load: '%s' has %llu features (expected %d)",
                  path, (unsigned long long)nf, NFEAT);
  }
  char nt[32];
  snprintf(nt, sizeof nt, "%d", m->nthread);
  XGBoosterSetParam(b, "nthread", nt);
  if (m->bst) XGBoosterFree(m->bst);
  m->bst = b;
  XGBoosterBoostedRounds(b, &m->rounds);
  m->loaded = 1;
  return TL_OK;
}
