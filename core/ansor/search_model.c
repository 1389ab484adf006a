/*
** search_model.c -- the search's use of the cost model: the per-store feature
** rows of a lowered state (feature.h, tl_ansor_features), and the model's
** prediction and update over rows packed per state (core/tuner/ansor_model.c
** through the public tl_ansor_model_*).
*/
#include "feature.h"
#include "search.h"

int tl_ansor_search_rows(tl_ctx *ctx, const struct tl_ansor_hw *hw, const tl_lowered *f,
                         float **rows) {
  return tl_ansor_features(ctx, f, hw, rows);
}

int tl_ansor_search_predict(tl_ctx *ctx, struct tl_ansor_model *m, int n, const float *rows,
                            const int *row_off, double *scores) {
  return tl_ansor_model_predict(ctx, m, n, rows, row_off, scores);
}

int tl_ansor_search_update(tl_ctx *ctx, struct tl_ansor_model *m, int n, const float *rows,
                           const int *row_off, const double *flops) {
  return tl_ansor_model_update(ctx, m, n, rows, row_off, flops);
}
