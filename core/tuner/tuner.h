/*
** tuner.h -- internal interface of the tuner core (core/tuner): the config
** space as the tuners see it, the scoring hook of the model optimizer, and
** the config-space functions this part calls.
**
** The tuner core reads config spaces only through the task's tl_atvm_space_*
** functions of the public header (core/tunelua_autotvm.h), never the
** AutoTVM internals.
*/
#ifndef TL_TUNER_H
#define TL_TUNER_H

#include "../base/base.h"
#include "../ir/ir.h"
#include "../tunelua.h"

/* ---- the space view ------------------------------------------------------
** Index <-> knob digits: through the task when there is one, else a plain
** mixed-radix product space (knob 0 varies fastest), used by the tests. */
#define TL_TS_MAXKNOBS 64

typedef struct tl_tspace {
  tl_atvm_task *task;             /* NULL: product space of dims */
  int nknobs;
  int64_t dims[TL_TS_MAXKNOBS];
  int64_t range_len;              /* product of dims */
  int64_t len;                    /* number of valid indices */
  int (*valid)(void *ud, int64_t idx);   /* task == NULL; NULL = all valid */
  void *ud;
} tl_tspace;

int tl_tspace_from_task(tl_ctx *ctx, tl_atvm_task *t, tl_tspace *out);
void tl_tspace_point2knob(const tl_tspace *s, int64_t idx, int64_t *digits);
int64_t tl_tspace_knob2point(const tl_tspace *s, const int64_t *digits);
int tl_tspace_valid(const tl_tspace *s, int64_t idx);

/* ---- random numbers (splitmix64) ---------------------------------------- */
static inline uint64_t tl_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline double tl_rng_uniform(uint64_t *s) {   /* [0, 1) */
  return (double)(tl_rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}
static inline int64_t tl_rng_below(uint64_t *s, int64_t n) {   /* [0, n) */
  return n <= 1 ? 0 : (int64_t)(tl_rng_next(s) % (uint64_t)n);
}

/* ---- simulated annealing over any scorer ---------------------------------- */
typedef int (*tl_score_fn)(tl_ctx *ctx, void *ud, const int64_t *pts, int n, double *out);

int tl_sa_new_space(const tl_tspace *space, int n_iter, double temp0, double temp1,
                    int persistent, int parallel_size, int early_stop, uint64_t seed,
                    tl_tune_sa **out);
int tl_sa_search(tl_ctx *ctx, tl_tune_sa *sa, tl_score_fn score, void *ud, int num,
                 const int64_t *exclusive, int nexcl, int64_t *out, int *nout);

/* ---- XGBoost plumbing shared by the cost models (model.c) ----------------
** tl_xgb_error records libxgboost's last error as TL_E_INTERNAL naming what
** failed; tl_xgb_predict predicts with a BoosterHandle on x (nrow x ncol
** floats, padded or cut to the booster's bcol columns), margins if margin. */
int tl_xgb_error(tl_ctx *ctx, const char *what);
int tl_xgb_predict(tl_ctx *ctx, void *booster, int bcol, const float *x, int nrow, int ncol,
                   int margin, double *out);
/* tl_xgb_keep_rounds cuts *booster (a BoosterHandle) to its first keep boosted
** rounds (at most the rounds it has, freeing the uncut one); it returns the
** rounds *booster keeps: all of them where slicing fails. */
int tl_xgb_keep_rounds(void **booster, int keep);

#endif
