/*
** test_tuner.c -- the tuner core: itervar/curve features on a hand-made
** loop nest, the XGBoost cost model learning known functions, and simulated
** annealing finding the maximum of a known function over a product space.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/tuner/tuner.h"
#include "tunelua_autotvm.h"
#include "tl_test.h"

/* for i in 0..8: for j in 0..4 (vectorized): C[i*4+j] = A[i*4+j] + B[j] */
static tl_lowered *make_nest(void) {
  tl_ir *ir = tl_ir_new();
  tl_ref sh = tl_int(ir, 32), sh4 = tl_int(ir, 4);
  int A = tl_buffer_new(ir, "A", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  int B = tl_buffer_new(ir, "B", TL_T_F32, 1, &sh4, TL_SCOPE_GLOBAL);
  int C = tl_buffer_new(ir, "C", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  tl_ref i = tl_var_new(ir, "i", TL_T_INDEX), j = tl_var_new(ir, "j", TL_T_INDEX);
  tl_ref ij = tl_add(ir, tl_mul(ir, i, tl_int(ir, 4)), j);
  tl_ref v = tl_add(ir, tl_load(ir, A, &ij, 1), tl_load(ir, B, &j, 1));
  tl_ref st = tl_store(ir, C, v, &ij, 1);
  tl_ref lj = tl_for(ir, j, tl_int(ir, 0), tl_int(ir, 4), TL_FOR_VECTORIZED, 0, st);
  tl_ref li = tl_for(ir, i, tl_int(ir, 0), tl_int(ir, 8), TL_FOR_PARALLEL, 0, lj);
  tl_lowered *f = tl_calloc(1, sizeof *f);
  f->ir = ir;
  f->body = li;
  f->name = "nest";
  return f;
}

static void free_nest(tl_lowered *f) {
  tl_ir_free(f->ir);
  free(f);
}

TL_TEST(tuner_itervar_features) {
  tl_ctx *ctx = tl_ctx_new();
  tl_lowered *f = make_nest();
  float out[256];
  int n = 0;
  CHECK_EQ_INT(tl_tune_lowered_features(ctx, f, TL_FEAT_ITERVAR, out, 256, &n), TL_OK);
  CHECK_EQ_INT(n, 2 * 18 + 2 * 3 * 6);
  /* loop i: len 8, nest 0, topdown 8, bottomup 32 (= count of A), parallel */
  CHECK_NEAR(out[0], log2(9), 1e-5);
  CHECK_NEAR(out[1], 0, 0);
  CHECK_NEAR(out[2], log2(9), 1e-5);
  CHECK_NEAR(out[3], log2(33), 1e-5);
  for (int a = 0; a < 11; a++) CHECK_NEAR(out[4 + a], a == 8, 0);   /* parallel */
  CHECK_NEAR(out[15], 0, 0);   /* the add is counted on the inner loop */
  /* i's accesses, sorted: A_0 (stride 4, count 32), B_0 (stride 0, count 4, reuse 8), C_0 */
  const float *a0 = out + 18, *b0 = out + 24, *c0 = out + 30;
  CHECK_NEAR(a0[0], log2(5), 1e-5);
  CHECK_NEAR(a0[1], -1, 1e-6);
  CHECK_NEAR(a0[2], log2(33), 1e-5);
  CHECK_NEAR(a0[3], 1, 1e-6);
  CHECK_NEAR(b0[0], 0, 0);
  CHECK_NEAR(b0[2], log2(5), 1e-5);
  CHECK_NEAR(b0[3], log2(9), 1e-5);
  CHECK_NEAR(c0[2], log2(33), 1e-5);
  /* loop j: len 4, nest 1, topdown 32, bottomup 4, vectorized, one add */
  const float *j = out + 36;
  CHECK_NEAR(j[0], log2(5), 1e-5);
  CHECK_NEAR(j[1], 1, 0);
  CHECK_NEAR(j[2], log2(33), 1e-5);
  CHECK_NEAR(j[3], log2(5), 1e-5);
  CHECK_NEAR(j[4 + 7], 1, 0);   /* vectorized */
  CHECK_NEAR(j[15], 1, 1e-6);   /* T(1 add) */
  CHECK_NEAR(j[16], 0, 0);
  CHECK_NEAR(j[18 + 0], 1, 1e-6);
  /* a short buffer reports the full length and writes what fits */
  int n2 = 0;
  CHECK_EQ_INT(tl_tune_lowered_features(ctx, f, TL_FEAT_ITERVAR, out, 4, &n2), TL_OK);
  CHECK_EQ_INT(n2, n);
  /* curve: 3 buffers at the deepest loop, 4 curves x 20 samples x 2 each */
  CHECK_EQ_INT(tl_tune_lowered_features(ctx, f, TL_FEAT_CURVE, NULL, 0, &n2), TL_OK);
  CHECK_EQ_INT(n2, 3 * 160);
  float *cv = malloc(sizeof(float) * (size_t)n2);
  CHECK_EQ_INT(tl_tune_lowered_features(ctx, f, TL_FEAT_CURVE, cv, n2, &n2), TL_OK);
  /* buffer A, count->reuse: X = sorted {0, log2 4, log2 32} = {0, 2, 5}, Y = {0, 0, 0};
  ** at x = 3 the last X below is 2: (Y, x - X) = (0, 1) */
  CHECK_NEAR(cv[2 * 3 + 1], 1, 1e-6);
  CHECK_NEAR(cv[2 * 7 + 1], 2, 1e-6);    /* x = 7, X = 5 */
  free(cv);
  CHECK(tl_tune_lowered_features(ctx, f, TL_FEAT_KNOB, out, 256, &n2) == TL_E_ARG);
  free_nest(f);
  tl_ctx_free(ctx);
}

static double target(double a, double b) { return 1.0 + 3.0 * a + (b > 0.5 ? 2.0 : 0.0); }

TL_TEST(tuner_xgb_learns) {
  tl_ctx *ctx = tl_ctx_new();
  uint64_t rng = 42;
  enum { N = 400, T = 100 };
  float *x = malloc(sizeof(float) * N * 2), *tx = malloc(sizeof(float) * T * 2);
  double *y = malloc(sizeof(double) * N), *p = malloc(sizeof(double) * T);
  for (int i = 0; i < N; i++) {
    x[2 * i] = (float)tl_rng_uniform(&rng);
    x[2 * i + 1] = (float)tl_rng_uniform(&rng);
    y[i] = target(x[2 * i], x[2 * i + 1]);
  }
  for (int i = 0; i < T; i++) {
    tx[2 * i] = (float)tl_rng_uniform(&rng);
    tx[2 * i + 1] = (float)tl_rng_uniform(&rng);
  }
  for (int loss = TL_LOSS_REG; loss <= TL_LOSS_RANK_BINARY; loss++) {
    tl_tune_model *m;
    CHECK_EQ_INT(tl_tune_model_new(ctx, NULL, TL_FEAT_KNOB, loss, 1, 7, &m), TL_OK);
    CHECK(!tl_tune_model_trained(m));
    CHECK(tl_tune_model_predict_matrix(ctx, m, tx, T, 2, p) == TL_E_ARG);
    CHECK_EQ_INT(tl_tune_model_fit_matrix(ctx, m, x, N, 2, y, 64), TL_OK);
    CHECK(tl_tune_model_trained(m));
    CHECK(tl_tune_model_rounds(m) >= 1);
    CHECK_EQ_INT(tl_tune_model_predict_matrix(ctx, m, tx, T, 2, p), TL_OK);
    /* pairwise order agreement with the true function */
    int agree = 0, pairs = 0;
    double err = 0;
    for (int i = 0; i < T; i++) {
      double ti = target(tx[2 * i], tx[2 * i + 1]);
      err += fabs(p[i] - ti / 6.0);
      for (int k = i + 1; k < T; k++) {
        double tk = target(tx[2 * k], tx[2 * k + 1]);
        if (fabs(ti - tk) < 0.3) continue;
        pairs++;
        agree += (ti > tk) == (p[i] > p[k]);
      }
    }
    CHECK_MSG(agree > 0.9 * pairs, "loss %d: %d of %d pairs ordered", loss, agree, pairs);
    if (loss == TL_LOSS_REG) CHECK_MSG(err / T < 0.05, "mean abs error %g", err / T);
    tl_tune_model_free(m);
  }
  free(x); free(tx); free(y); free(p);
  tl_ctx_free(ctx);
}

/* score = -(d0-5)^2 - (d1-2)^2 - (d2-7)^2 over an 8x8x8 space, odd d2 = 1 invalid? no:
** indices with d0 == 0 are invalid */
static const tl_tspace *g_sp;
static int score_fn(tl_ctx *ctx, void *ud, const int64_t *pts, int n, double *out) {
  (void)ctx;
  int *calls = ud;
  ++*calls;
  for (int i = 0; i < n; i++) {
    int64_t d[3];
    tl_tspace_point2knob(g_sp, pts[i], d);
    out[i] = -(double)((d[0] - 5) * (d[0] - 5) + (d[1] - 2) * (d[1] - 2) + (d[2] - 7) * (d[2] - 7));
  }
  return TL_OK;
}
static int valid_fn(void *ud, int64_t idx) { (void)ud; return idx % 8 != 0; }

TL_TEST(tuner_sa_finds_max) {
  tl_ctx *ctx = tl_ctx_new();
  tl_tspace sp;
  memset(&sp, 0, sizeof sp);
  sp.nknobs = 3;
  sp.dims[0] = sp.dims[1] = sp.dims[2] = 8;
  sp.range_len = 512;
  sp.len = 512 - 64;
  sp.valid = valid_fn;
  g_sp = &sp;
  int64_t d[3] = {5, 2, 7};
  int64_t best = tl_tspace_knob2point(&sp, d);
  CHECK_EQ_INT(best, 5 + 2 * 8 + 7 * 64);
  int64_t back[3];
  tl_tspace_point2knob(&sp, best, back);
  CHECK(back[0] == 5 && back[1] == 2 && back[2] == 7);
  tl_tune_sa *sa;
  CHECK_EQ_INT(tl_sa_new_space(&sp, 500, 1.0, 0.0, 1, 16, 50, 3, &sa), TL_OK);
  int calls = 0, nout = 0;
  int64_t out[8];
  CHECK_EQ_INT(tl_sa_search(ctx, sa, score_fn, &calls, 4, NULL, 0, out, &nout), TL_OK);
  CHECK_EQ_INT(nout, 4);
  CHECK_EQ_INT(out[0], best);
  for (int i = 0; i < nout; i++) CHECK(valid_fn(NULL, out[i]));
  /* excluding the best: the next are its six neighbours at distance 1 */
  CHECK_EQ_INT(tl_sa_search(ctx, sa, score_fn, &calls, 3, &best, 1, out, &nout), TL_OK);
  CHECK_EQ_INT(nout, 3);
  for (int i = 0; i < 3; i++) {
    int64_t k[3];
    CHECK(out[i] != best);
    tl_tspace_point2knob(&sp, out[i], k);
    int dist = (int)(labs((long)(k[0] - 5)) + labs((long)(k[1] - 2)) + labs((long)(k[2] - 7)));
    CHECK_EQ_INT(dist, 1);
  }
  tl_tune_sa_free(sa);
  /* early stop: a flat function ends after early_stop iterations */
  CHECK_EQ_INT(tl_sa_new_space(&sp, 500, 1.0, 0.0, 0, 8, 10, 3, &sa), TL_OK);
  calls = 0;
  CHECK_EQ_INT(tl_sa_search(ctx, sa, score_fn, &calls, 2, NULL, 0, out, &nout), TL_OK);
  CHECK(calls <= 501);
  tl_tune_sa_free(sa);
  tl_ctx_free(ctx);
}

/* A space larger than the whole-space scoring limit (8x8x8x16 = 8192 points,
** 7168 valid): the annealing path itself must find the known maximum. */
static int score_fn4(tl_ctx *ctx, void *ud, const int64_t *pts, int n, double *out) {
  (void)ctx;
  int *calls = ud;
  ++*calls;
  for (int i = 0; i < n; i++) {
    int64_t d[4];
    tl_tspace_point2knob(g_sp, pts[i], d);
    out[i] = -(double)((d[0] - 5) * (d[0] - 5) + (d[1] - 2) * (d[1] - 2) +
                       (d[2] - 7) * (d[2] - 7) + (d[3] - 11) * (d[3] - 11));
  }
  return TL_OK;
}

TL_TEST(tuner_sa_anneals_large_space) {
  tl_ctx *ctx = tl_ctx_new();
  tl_tspace sp;
  memset(&sp, 0, sizeof sp);
  sp.nknobs = 4;
  sp.dims[0] = sp.dims[1] = sp.dims[2] = 8;
  sp.dims[3] = 16;
  sp.range_len = 8192;
  sp.len = 8192 - 1024;
  sp.valid = valid_fn;
  g_sp = &sp;
  int64_t d[4] = {5, 2, 7, 11};
  int64_t best = tl_tspace_knob2point(&sp, d);
  tl_tune_sa *sa;
  CHECK_EQ_INT(tl_sa_new_space(&sp, 500, 1.0, 0.0, 1, 16, 50, 3, &sa), TL_OK);
  int calls = 0, nout = 0;
  int64_t out[8];
  CHECK_EQ_INT(tl_sa_search(ctx, sa, score_fn4, &calls, 4, NULL, 0, out, &nout), TL_OK);
  CHECK_EQ_INT(nout, 4);
  CHECK_EQ_INT(out[0], best);
  for (int i = 0; i < nout; i++) CHECK(valid_fn(NULL, out[i]));
  CHECK(calls > 1);   /* annealed in steps, not scored whole in one call */
  tl_tune_sa_free(sa);
  tl_ctx_free(ctx);
}

/* The task-level paths: features of a real template's configs (parallel ==
** serial), a model trained on task configs, annealing over the task's space. */
TL_TEST(tuner_task_paths) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_task *t = NULL;
  const char *args = "[[\"TENSOR\", [1, 64], \"float32\"], [\"TENSOR\", [32, 64], \"float32\"], "
                     "\"None\", \"float32\"]";
  CHECK_MSG(tl_atvm_task_create(ctx, "dense_nopack.x86", args, "llvm", &t) == TL_OK, "%s",
            tl_errmsg(ctx));
  int64_t len = tl_atvm_space_len(t);
  CHECK(len >= 8);
  int n = (int)len;
  int64_t *idx = malloc(sizeof(int64_t) * (size_t)n);
  double *y = malloc(sizeof(double) * (size_t)n), *p = malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) idx[i] = i;
  enum { CAP = 2048 };
  float *a = malloc(sizeof(float) * (size_t)n * CAP), *b = malloc(sizeof(float) * (size_t)n * CAP);
  int ca = 0, cb = 0;
  int8_t *ok = malloc((size_t)n);
  CHECK_EQ_INT(tl_tune_task_features(ctx, t, TL_FEAT_ITERVAR, idx, n, 1, a, CAP, &ca, ok), TL_OK);
  CHECK_EQ_INT(tl_tune_task_features(ctx, t, TL_FEAT_ITERVAR, idx, n, 2, b, CAP, &cb, NULL), TL_OK);
  CHECK_EQ_INT(ca, cb);
  CHECK(ca > 18);
  CHECK(memcmp(a, b, sizeof(float) * (size_t)n * CAP) == 0);
  for (int i = 0; i < n; i++) CHECK(ok[i] == 1);
  int nk = 0;
  CHECK_EQ_INT(tl_tune_task_features(ctx, t, TL_FEAT_KNOB, idx, n, 2, a, CAP, &nk, NULL), TL_OK);
  CHECK_EQ_INT(nk, tl_atvm_config_knob_features(t, 0, b, CAP));
  /* synthetic throughput: best at the last knob's value 0; train on half, predict all */
  int nk0 = tl_atvm_space_num_knobs(t);
  int64_t d[TL_TS_MAXKNOBS];
  for (int i = 0; i < n; i++) {
    tl_atvm_space_point2knob(t, i, d);
    y[i] = 1.0 / (1.0 + (double)d[nk0 - 1]);
  }
  tl_tune_model *m;
  CHECK_EQ_INT(tl_tune_model_new(ctx, t, TL_FEAT_KNOB, TL_LOSS_REG, 2, 1, &m), TL_OK);
  CHECK_EQ_INT(tl_tune_model_fit(ctx, m, idx, y, n, 8), TL_OK);
  CHECK_EQ_INT(tl_tune_model_predict(ctx, m, idx, n, p), TL_OK);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < n; k++)
      if (y[i] > y[k] + 0.2) CHECK_MSG(p[i] > p[k], "%d vs %d: %g <= %g", i, k, p[i], p[k]);
  tl_tune_sa *sa;
  CHECK_EQ_INT(tl_tune_sa_new(ctx, t, 100, 1, 0, 1, 16, 20, 9, &sa), TL_OK);
  int64_t out[4];
  int nout = 0;
  CHECK_EQ_INT(tl_tune_sa_find_maximums(ctx, sa, m, 4, idx, 2, out, &nout), TL_OK);
  CHECK_EQ_INT(nout, 4);
  for (int i = 0; i < nout; i++) {
    CHECK(out[i] >= 2 && tl_atvm_space_is_valid(t, out[i]));
    tl_atvm_space_point2knob(t, out[i], d);
    CHECK_EQ_INT(d[nk0 - 1], 0);
  }
  tl_tune_sa_free(sa);
  tl_tune_model_free(m);
  free(idx); free(y); free(p); free(a); free(b); free(ok);
  tl_atvm_task_free(t);
  tl_ctx_free(ctx);
}
