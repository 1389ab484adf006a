/*
** feature.h -- the auto-scheduler's per-store features and its cost model.
**
** tl_ansor_features walks a lowered function (core/ir/ir.h's tl_lowered)
** and writes one row of TL_ANSOR_NFEAT floats per STORE statement, in
** program order; the layout is documented in feature.c and named slot by
** slot by tl_ansor_feature_name. The cost model (core/tuner/ansor_model.c,
** where the XGBoost plumbing lives) scores a state as the sum of its rows'
** predictions ("pack-sum").
**
** The functions are public (core/tunelua_ansor.h's cdef region declares
** them too, for Lua); this header adds TL_ANSOR_NFEAT for C callers.
*/
#ifndef TL_ANSOR_FEATURE_H
#define TL_ANSOR_FEATURE_H

#include "ansor.h"

#define TL_ANSOR_NFEAT 164

/* rows: malloc'd n x TL_ANSOR_NFEAT floats (NULL when n = 0), one row per
** buffer store statement; returns n >= 0, or -1 with the error in ctx.
** hw may be NULL (cache_line_bytes 64). Thread-safe when called with
** distinct ctx (f is only read). */
int tl_ansor_features(tl_ctx *ctx, const tl_lowered *f, const struct tl_ansor_hw *hw,
                      float **rows);
/* Name of slot i ("float_addsub", "B0.bytes", ...), NULL past the end. */
const char *tl_ansor_feature_name(int i);
/* Features of n lowered functions on nthreads threads (<= 0: one per
** core): rows gets their rows concatenated (malloc'd; NULL when none),
** row_off (n + 1 ints, caller's) the offsets in rows; a NULL function or
** one whose extraction fails gets no rows (the model scores it -inf).
** Returns the total row count, or -1 with the error in ctx. */
int tl_ansor_features_batch(tl_ctx *ctx, tl_lowered *const *fs, int n,
                            const struct tl_ansor_hw *hw, int nthreads, float **rows,
                            int *row_off);

typedef struct tl_ansor_model tl_ansor_model;
tl_ansor_model *tl_ansor_model_new(tl_ctx *ctx, int kind /* 0 random, 1 xgb */, uint64_t seed);
void tl_ansor_model_free(tl_ansor_model *m);
int tl_ansor_model_update(tl_ctx *ctx, tl_ansor_model *m, int nstates, const float *rows,
                          const int *row_off /* nstates+1 offsets into rows, in rows */,
                          const double *throughput /* flop/s; 0 = failed measurement */);
int tl_ansor_model_predict(tl_ctx *ctx, tl_ansor_model *m, int nstates, const float *rows,
                           const int *row_off, double *scores /* higher is better */);

#endif
