/*
** sa.c -- the config space as the tuners see it, and the simulated-annealing
** model optimizer (TVM's SimulatedAnnealingOptimizer).
**
** find_maximums keeps parallel_size walkers. Each iteration moves every
** walker one random knob step (to a valid config), scores the moves with the
** model, accepts a move with probability exp(min((new - old) / (t + 1e-5), 1)),
** and offers every proposal to a top-num heap that skips the exclusive set
** (configs already measured). The temperature falls linearly from temp0 to
** temp1 over n_iter iterations; the search stops early when the heap did not
** change for early_stop iterations. With persistent, the walkers carry over
** to the next call. Unlike TVM, configs with negative scores (common under
** the rank objective) are kept in the result: they are still the model's
** best guesses.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

struct tl_tune_sa {
  tl_tspace sp;
  int n_iter, persistent, parallel_size, early_stop;
  double t0, t1;
  uint64_t rng;
  int64_t *points;                /* persistent walkers */
  int npoints;
};

/* ---- space view -------------------------------------------------------------- */

int tl_tspace_from_task(tl_ctx *ctx, tl_atvm_task *t, tl_tspace *out) {
  memset(out, 0, sizeof *out);
  if (!t) return tl_err(ctx, TL_E_ARG, "tuner: NULL task");
  out->task = t;
  out->nknobs = tl_atvm_space_num_knobs(t);
  if (out->nknobs > TL_TS_MAXKNOBS)
    return tl_err(ctx, TL_E_UNSUPPORTED, "tuner: %d knobs (at most %d)", out->nknobs,
                  TL_TS_MAXKNOBS);
  for (int k = 0; k < out->nknobs; k++) out->dims[k] = tl_atvm_space_knob_dim(t, k);
  out->range_len = tl_atvm_space_range_length(t);
  out->len = tl_atvm_space_len(t);
  return TL_OK;
}

void tl_tspace_point2knob(const tl_tspace *s, int64_t idx, int64_t *d) {
  if (s->task) {
    tl_atvm_space_point2knob(s->task, idx, d);
    return;
  }
  for (int k = 0; k < s->nknobs; k++) {
    d[k] = idx % s->dims[k];
    idx /= s->dims[k];
  }
}

int64_t tl_tspace_knob2point(const tl_tspace *s, const int64_t *d) {
  if (s->task) return tl_atvm_space_knob2point(s->task, d);
  int64_t p = 0, m = 1;
  for (int k = 0; k < s->nknobs; k++) {
    p += d[k] * m;
    m *= s->dims[k];
  }
  return p;
}

int tl_tspace_valid(const tl_tspace *s, int64_t idx) {
  if (idx < 0 || idx >= s->range_len) return 0;
  if (s->task) return tl_atvm_space_is_valid(s->task, idx);
  return s->valid ? s->valid(s->ud, idx) : 1;
}

/* ---- sets of indices (sorted arrays; small) ----------------------------------- */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}
static int in_sorted(const int64_t *v, int n, int64_t x) {
  return n > 0 && bsearch(&x, v, (size_t)n, sizeof(int64_t), cmp_i64) != NULL;
}

static int64_t random_valid(tl_tune_sa *sa) {
  for (int tries = 0; tries < 1000; tries++) {
    int64_t p = tl_rng_below(&sa->rng, sa->sp.range_len);
    if (tl_tspace_valid(&sa->sp, p)) return p;
  }
  for (int64_t p = tl_rng_below(&sa->rng, sa->sp.range_len), k = 0; k < sa->sp.range_len;
       k++, p = (p + 1) % sa->sp.range_len)
    if (tl_tspace_valid(&sa->sp, p)) return p;
  return -1;
}

static int64_t random_walk(tl_tune_sa *sa, int64_t p) {
  int64_t d[TL_TS_MAXKNOBS];
  int movable = 0;
  for (int k = 0; k < sa->sp.nknobs; k++) movable += sa->sp.dims[k] > 1;
  if (!movable) return p;
  for (int tries = 0; tries < 64; tries++) {
    tl_tspace_point2knob(&sa->sp, p, d);
    int k;
    do k = (int)tl_rng_below(&sa->rng, sa->sp.nknobs); while (sa->sp.dims[k] <= 1);
    int64_t v;
    do v = tl_rng_below(&sa->rng, sa->sp.dims[k]); while (v == d[k]);
    d[k] = v;
    int64_t q = tl_tspace_knob2point(&sa->sp, d);
    if (tl_tspace_valid(&sa->sp, q)) return q;
  }
  return p;
}

int tl_sa_new_space(const tl_tspace *space, int n_iter, double temp0, double temp1,
                    int persistent, int parallel_size, int early_stop, uint64_t seed,
                    tl_tune_sa **out) {
  tl_tune_sa *sa = tl_calloc(1, sizeof *sa);
  sa->sp = *space;
  sa->n_iter = n_iter > 0 ? n_iter : 500;
  sa->t0 = temp0;
  sa->t1 = temp1;
  sa->persistent = persistent;
  int64_t ps = parallel_size > 0 ? parallel_size : 128;
  if (ps > space->len) ps = space->len;
  sa->parallel_size = (int)(ps > 0 ? ps : 1);
  sa->early_stop = early_stop > 0 ? early_stop : 50;
  sa->rng = seed ? seed : 0x5eed5eedull;
  *out = sa;
  return TL_OK;
}

TL_EXPORT int tl_tune_sa_new(tl_ctx *ctx, struct tl_atvm_task *t, int n_iter, double temp0,
                             double temp1, int persistent, int parallel_size, int early_stop,
                             uint64_t seed, tl_tune_sa **out) {
  *out = NULL;
  tl_tspace sp;
  int rc = tl_tspace_from_task(ctx, t, &sp);
  if (rc) return rc;
  if (sp.len <= 0) return tl_err(ctx, TL_E_ARG, "simulated annealing: the config space is empty");
  return tl_sa_new_space(&sp, n_iter, temp0, temp1, persistent, parallel_size, early_stop, seed,
                         out);
}

TL_EXPORT void tl_tune_sa_free(tl_tune_sa *sa) {
  if (!sa) return;
  free(sa->points);
  free(sa);
}

/* ---- the top-num heap (min-heap on score) ---------------------------------------- */

typedef struct hent { double s; int64_t p; uint64_t r; } hent;   /* r: random tie-break */

static void heap_down(hent *h, int n, int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && h[l].s < h[m].s) m = l;
    if (r < n && h[r].s < h[m].s) m = r;
    if (m == i) return;
    hent t = h[i]; h[i] = h[m]; h[m] = t;
    i = m;
  }
}

static int heap_has(const hent *h, int n, int64_t p) {
  for (int i = 0; i < n; i++)
    if (h[i].p == p) return 1;
  return 0;
}

static int cmp_hent_desc(const void *a, const void *b) {
  const hent *x = a, *y = b;
  return x->s > y->s ? -1 : x->s < y->s;
}
static int cmp_hent_tie(const void *a, const void *b) {
  const hent *x = a, *y = b;
  if (x->s != y->s) return x->s > y->s ? -1 : 1;
  return x->r < y->r ? -1 : x->r > y->r;
}

/* A small space is scored whole: with the defaults (up to 128 points, early stop
** after 50 iterations) annealing scores at least 6400 points, more than a
** space of TL_SA_EXHAUSTIVE configs holds, and may still miss the model's
** best. Scoring every valid config returns the exact top num. Ties (trees
** predict piecewise constants) are broken at random, from the seed. */
#define TL_SA_EXHAUSTIVE 4096

static int exhaustive(tl_ctx *ctx, tl_tune_sa *sa, tl_score_fn score, void *ud, int num,
                      const int64_t *ex, int nexcl, int64_t *out, int *nout) {
  int64_t *pts = tl_malloc(sizeof(int64_t) * (size_t)(sa->sp.len + 1));
  int n = 0;
  for (int64_t p = 0; p < sa->sp.range_len && n < sa->sp.len; p++)
    if (tl_tspace_valid(&sa->sp, p) && !in_sorted(ex, nexcl, p)) pts[n++] = p;
  hent *h = tl_malloc(sizeof(hent) * (size_t)(n + 1));
  double *sc = tl_malloc(sizeof(double) * (size_t)(n + 1));
  int rc = n ? score(ctx, ud, pts, n, sc) : TL_OK;
  if (!rc) {
    for (int i = 0; i < n; i++) h[i].s = sc[i], h[i].p = pts[i], h[i].r = tl_rng_next(&sa->rng);
    qsort(h, (size_t)n, sizeof(hent), cmp_hent_tie);
    for (int i = 0; i < n && i < num; i++) out[(*nout)++] = h[i].p;
  }
  free(pts);
  free(h);
  free(sc);
  return rc;
}

int tl_sa_search(tl_ctx *ctx, tl_tune_sa *sa, tl_score_fn score, void *ud, int num,
                 const int64_t *exclusive, int nexcl, int64_t *out, int *nout) {
  *nout = 0;
  if (num <= 0) return TL_OK;
  int64_t *ex = tl_malloc(sizeof(int64_t) * (size_t)(nexcl + 1));
  if (nexcl) memcpy(ex, exclusive, sizeof(int64_t) * (size_t)nexcl);
  qsort(ex, (size_t)nexcl, sizeof(int64_t), cmp_i64);
  int P = sa->parallel_size, rc = TL_OK;
  if (sa->sp.len <= TL_SA_EXHAUSTIVE && sa->sp.range_len <= 16 * TL_SA_EXHAUSTIVE) {
    rc = exhaustive(ctx, sa, score, ud, num, ex, nexcl, out, nout);
    free(ex);
    return rc;
  }
  int64_t *pts = tl_malloc(sizeof(int64_t) * (size_t)P), *npts = tl_malloc(sizeof(int64_t) * (size_t)P);
  double *sc = tl_malloc(sizeof(double) * (size_t)P), *nsc = tl_malloc(sizeof(double) * (size_t)P);
  hent *h = tl_malloc(sizeof(hent) * (size_t)num);
  for (int i = 0; i < num; i++) h[i].s = -INFINITY, h[i].p = -1 - i;
  if (sa->persistent && sa->points && sa->npoints == P) {
    memcpy(pts, sa->points, sizeof(int64_t) * (size_t)P);
  } else {   /* distinct random valid starting points */
    int n = 0;
    for (int tries = 0; n < P && tries < 50 * P + 1000; tries++) {
      int64_t p = random_valid(sa);
      if (p < 0) break;
      int dup = 0;
      for (int j = 0; j < n && !dup; j++) dup = pts[j] == p;
      if (!dup) pts[n++] = p;
    }
    for (int64_t p = 0; n < P && p < sa->sp.range_len; p++) {
      int dup = !tl_tspace_valid(&sa->sp, p);
      for (int j = 0; j < n && !dup; j++) dup = pts[j] == p;
      if (!dup) pts[n++] = p;
    }
    if (n < P) P = n;
  }
  if (P == 0) goto done;
  if ((rc = score(ctx, ud, pts, P, sc))) goto done;
  for (int i = 0; i < P; i++)
    if (sc[i] > h[0].s && !in_sorted(ex, nexcl, pts[i]) && !heap_has(h, num, pts[i])) {
      h[0].s = sc[i], h[0].p = pts[i];
      heap_down(h, num, 0);
    }
  double t = sa->t0, cool = (sa->t0 - sa->t1) / (double)(sa->n_iter + 1);
  for (int k = 0, last = 0; k < sa->n_iter && k < last + sa->early_stop; k++) {
    for (int i = 0; i < P; i++) npts[i] = random_walk(sa, pts[i]);
    if ((rc = score(ctx, ud, npts, P, nsc))) goto done;
    for (int i = 0; i < P; i++) {
      double a = exp(TL_MIN((nsc[i] - sc[i]) / (t + 1e-5), 1.0));
      if (tl_rng_uniform(&sa->rng) < a) pts[i] = npts[i], sc[i] = nsc[i];
    }
    for (int i = 0; i < P; i++)
      if (nsc[i] > h[0].s && !in_sorted(ex, nexcl, npts[i]) && !heap_has(h, num, npts[i])) {
        h[0].s = nsc[i], h[0].p = npts[i];
        heap_down(h, num, 0);
        last = k;
      }
    t -= cool;
  }
  if (sa->persistent) {
    free(sa->points);
    sa->points = tl_malloc(sizeof(int64_t) * (size_t)P);
    memcpy(sa->points, pts, sizeof(int64_t) * (size_t)P);
    sa->npoints = P;
  }
  qsort(h, (size_t)num, sizeof(hent), cmp_hent_desc);
  for (int i = 0; i < num; i++)
    if (h[i].p >= 0) out[(*nout)++] = h[i].p;
done:
  free(ex);
  free(pts);
  free(npts);
  free(sc);
  free(nsc);
  free(h);
  return rc;
}

int tl_tune_model_score(tl_ctx *ctx, void *ud, const int64_t *pts, int n, double *out);

TL_EXPORT int tl_tune_sa_find_maximums(tl_ctx *ctx, tl_tune_sa *sa, tl_tune_model *m, int num,
                                       const int64_t *exclusive, int nexcl, int64_t *out,
                                       int *nout) {
  if (!tl_tune_model_trained(m))
    return tl_err(ctx, TL_E_ARG, "simulated annealing: the cost model is not trained");
  return tl_sa_search(ctx, sa, tl_tune_model_score, m, num, exclusive, nexcl, out, nout);
}
