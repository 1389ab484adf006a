/*
** search_model.c -- the search's use of the cost model: per-store features of
** lowered states (feature.h, tl_ansor_features) packed per state, then the
** model's prediction or update. Compiled when core/ansor/feature.h is part
** of the tree; these definitions replace search.c's fallbacks, which answer
** that the build has no cost model.
*/
#if __has_include("feature.h")
#include "feature.h"
#include "search.h"

/* The rows of n lowered states, one block per state (row_off: n + 1 offsets). */
static int pack(tl_ctx *ctx, const struct tl_ansor_hw *hw, int n, tl_lowered **f, float **rows,
                int **row_off) {
  float **per = tl_calloc((size_t)n + 1, sizeof(float *));
  int *cnt = tl_calloc((size_t)n + 1, sizeof(int));
  int total = 0, rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    int k = tl_ansor_features(ctx, f[i], hw, &per[i]);
    if (k < 0) rc = -1;
    else cnt[i] = k, total += k;
  }
  *rows = NULL;
  *row_off = NULL;
  if (!rc) {
    *rows = tl_malloc(sizeof(float) * TL_ANSOR_NFEAT * (size_t)(total + 1));
    *row_off = tl_malloc(sizeof(int) * (size_t)(n + 1));
    int at = 0;
    for (int i = 0; i < n; i++) {
      (*row_off)[i] = at;
      if (cnt[i]) memcpy(*rows + (size_t)at * TL_ANSOR_NFEAT, per[i], sizeof(float) * TL_ANSOR_NFEAT * (size_t)cnt[i]);
      at += cnt[i];
    }
    (*row_off)[n] = at;
  }
  for (int i = 0; i < n; i++) free(per[i]);
  free(per);
  free(cnt);
  return rc;
}

int tl_ansor_search_score(tl_ctx *ctx, struct tl_ansor_model *m, const struct tl_ansor_hw *hw,
                          int n, tl_lowered **f, double *scores) {
  float *rows;
  int *off;
  if (pack(ctx, hw, n, f, &rows, &off)) return -1;
  int rc = tl_ansor_model_predict(ctx, m, n, rows, off, scores);
  free(rows);
  free(off);
  return rc;
}

int tl_ansor_search_train(tl_ctx *ctx, struct tl_ansor_model *m, const struct tl_ansor_hw *hw,
                          int n, tl_lowered **f, const double *flops) {
  float *rows;
  int *off;
  if (pack(ctx, hw, n, f, &rows, &off)) return -1;
  int rc = tl_ansor_model_update(ctx, m, n, rows, off, flops);
  free(rows);
  free(off);
  return rc;
}
#endif
