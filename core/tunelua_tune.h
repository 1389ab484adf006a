/*
** tunelua_tune.h -- part of the public API (included by core/tunelua.h):
** tuners: features, the XGBoost cost model, simulated annealing (core/tuner/).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_TUNE_H
#define TUNELUA_TUNE_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* ---- tune: features, cost model, model optimizer (core/tuner) -----------
** Config indices are those of the task's config space (tl_atvm_space_*). Tasks are
** named as `struct tl_atvm_task *` so this part compiles on its own.
**
** Feature types (TVM's names): ITERVAR = touch features of every loop of
** the lowered config; KNOB = the config's flattened knob values; CURVE =
** sampled touch curves of the innermost buffers. Rows are zero-padded to the
** longest row of a batch; a config whose lowering fails gets a zero row. */

typedef struct tl_tune_model tl_tune_model;
typedef struct tl_tune_sa tl_tune_sa;

enum { TL_FEAT_ITERVAR = 0, TL_FEAT_KNOB = 1, TL_FEAT_CURVE = 2 };
enum { TL_LOSS_REG = 0, TL_LOSS_RANK = 1, TL_LOSS_RANK_BINARY = 2 };

/* Features of one lowered function (ITERVAR or CURVE): writes up to cap
** floats to out, the full length to *n (call again with a larger cap when
** *n > cap). */
int tl_tune_lowered_features(tl_ctx *ctx, const tl_lowered *f, int feature_type, float *out,
                             int cap, int *n);
/* Features of configs idx[0..n) of a task, one row of ncols floats each
** (out: n * cap_cols floats; *ncols = longest row, capped at cap_cols),
** extracted on nthreads threads (<= 0: one per core). ok[i] (may be NULL)
** = 1 when row i was extracted. */
int tl_tune_task_features(tl_ctx *ctx, struct tl_atvm_task *t, int feature_type,
                          const int64_t *idx, int n, int nthreads, float *out, int cap_cols,
                          int *ncols, int8_t *ok);

/* The XGBoost cost model of one task (t may be NULL for a model trained on
** raw matrices only). seed drives the row shuffle. */
int tl_tune_model_new(tl_ctx *ctx, struct tl_atvm_task *t, int feature_type, int loss_type,
                      int num_threads, uint64_t seed, tl_tune_model **out);
void tl_tune_model_free(tl_tune_model *m);
/* Train on configs xs with measured throughputs ys (0 = failed). */
int tl_tune_model_fit(tl_ctx *ctx, tl_tune_model *m, const int64_t *xs, const double *ys, int n,
                      int plan_size);
/* Predicted scores (higher = faster) of configs xs. */
int tl_tune_model_predict(tl_ctx *ctx, tl_tune_model *m, const int64_t *xs, int n, double *out);
/* The same over raw feature matrices (row-major nrow x ncol). */
int tl_tune_model_fit_matrix(tl_ctx *ctx, tl_tune_model *m, const float *x, int nrow, int ncol,
                             const double *y, int plan_size);
int tl_tune_model_predict_matrix(tl_ctx *ctx, tl_tune_model *m, const float *x, int nrow,
                                 int ncol, double *out);
/* Transfer learning from feature rows computed elsewhere (other tasks of the
** same template: rows of their own configs). */
int tl_tune_model_fit_log_matrix(tl_ctx *ctx, tl_tune_model *m, const float *x, int nrow,
                                 int ncol, const double *y, int plan_size);
int tl_tune_model_rounds(const tl_tune_model *m);   /* boosting rounds kept by the last fit */
int tl_tune_model_trained(const tl_tune_model *m);  /* 1 once a fit (or fit_log) succeeded */

/* Simulated annealing over the task's config indices (temp0 -> temp1 linearly;
** temp0 == temp1 = constant). */
int tl_tune_sa_new(tl_ctx *ctx, struct tl_atvm_task *t, int n_iter, double temp0, double temp1,
                   int persistent, int parallel_size, int early_stop, uint64_t seed,
                   tl_tune_sa **out);
void tl_tune_sa_free(tl_tune_sa *sa);
/* Up to num configs with the highest predicted score, none in exclusive[];
** best first into out (num entries); *nout = how many. */
int tl_tune_sa_find_maximums(tl_ctx *ctx, tl_tune_sa *sa, tl_tune_model *m, int num,
                             const int64_t *exclusive, int nexcl, int64_t *out, int *nout);

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
