/*
** tunelua_ansor.h -- part of the public API (included by core/tunelua.h):
** the auto-scheduler's static analysis of a compute DAG (core/ansor/).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_ANSOR_H
#define TUNELUA_ANSOR_H

/* Floats per feature row of tl_ansor_features (tl_ansor_num_features()). */
#define TL_ANSOR_NFEAT 164

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* ---- ansor: static analysis of a compute DAG (core/ansor) ----------------
** Per op (placeholders included, dag order): injective, strictly inlinable,
** needs multi-level tiling, has data reuse, is an output; its producers and
** consumers; the element-wise match relation the sketch rules fuse
** consumers by (definitions in core/ansor/ansor.h). The analysis reads the
** dag, which must outlive it. Predicates return 1 or 0, and -1 for a bad op
** id; list queries return -1 for a bad op or index. */

typedef struct tl_ansor_analysis tl_ansor_analysis;

int tl_ansor_analyze(tl_ctx *ctx, const tl_dag *dag, tl_ansor_analysis **out);
void tl_ansor_analysis_free(tl_ansor_analysis *a);
int tl_ansor_num_ops(const tl_ansor_analysis *a);
int tl_ansor_is_injective(const tl_ansor_analysis *a, int op);
int tl_ansor_is_strictly_inlinable(const tl_ansor_analysis *a, int op);
int tl_ansor_needs_multi_level_tiling(const tl_ansor_analysis *a, int op);
int tl_ansor_has_reuse(const tl_ansor_analysis *a, int op);
int tl_ansor_is_output(const tl_ansor_analysis *a, int op);
int tl_ansor_has_reduce(const tl_ansor_analysis *a, int op);
int tl_ansor_num_consumers(const tl_ansor_analysis *a, int op);
int tl_ansor_consumer(const tl_ansor_analysis *a, int op, int i);
int tl_ansor_num_producers(const tl_ansor_analysis *a, int op);
int tl_ansor_producer(const tl_ansor_analysis *a, int op, int i);
/* Whether op element-wise matches target (op itself: 1). */
int tl_ansor_elementwise_match(const tl_ansor_analysis *a, int op, int target);
/* Whether op has exactly one consumer, looking through the ops marked in
** inlined (one byte per op, may be NULL), that it element-wise matches and
** that does not reduce when op does: the consumer multi-level tiling fuses.
** Writes that consumer to *consumer (-1 when the answer is 0). */
int tl_ansor_elementwise_consumer(const tl_ansor_analysis *a, int op, const uint8_t *inlined,
                                  int *consumer);

/* ---- ansor: hardware params (core/ansor/hwparams.c) ----------------------
** Eight int64 fields, by name: num_cores, vector_unit_bytes,
** cache_line_bytes, max_shared_memory_per_block, max_local_memory_per_block,
** max_threads_per_block, max_vthread_extent, warp_size. tl_ansor_hw_new
** gives a target's defaults: a CPU target's from this process's affinity
** mask and the target's float32 lanes (the host's, or -mcpu's); an OpenCL
** target's from device_info (tl_opencl_device_info's JSON, of a local
** device or an RPC server's; NULL: none), else its family's fixed table
** (tl_target_fixed_hw_params); an OpenCL target with neither is an error.
** tl_ansor_hw_new_values takes all eight values in that order. Set and get
** name the field; an unknown field or a value out of range (num_cores: -1
** or >= 1; vector and cache-line bytes >= 1; the others >= 0; all at most
** INT32_MAX) is TL_E_ARG naming it. */

typedef struct tl_ansor_hw tl_ansor_hw;
struct tl_target;                   /* tunelua_target.h's tl_target */

int tl_ansor_hw_new(tl_ctx *ctx, const struct tl_target *t, const char *device_info, tl_ansor_hw **out);
int tl_ansor_hw_new_values(tl_ctx *ctx, const int64_t *values, tl_ansor_hw **out);
void tl_ansor_hw_free(tl_ansor_hw *hw);
int tl_ansor_hw_num_fields(void);
const char *tl_ansor_hw_field_name(int i);     /* NULL past the end */
int tl_ansor_hw_get(tl_ctx *ctx, const tl_ansor_hw *hw, const char *field, int64_t *value);
int tl_ansor_hw_set(tl_ctx *ctx, tl_ansor_hw *hw, const char *field, int64_t value);

/* ---- ansor: per-store features (core/ansor/feature.c) -------------------
** One row of tl_ansor_num_features() (164) floats per STORE statement of a
** lowered function, in program order: op counts, vectorize/unroll/parallel
** loops, GPU binding, the top 5 buffers' access features, the arithmetic
** intensity curve, allocation and outer-loop features (the layout is in
** feature.c; tl_ansor_feature_name names each slot). rows: malloc'd (free()),
** NULL when the function stores nothing; returns the row count or -1 with
** the error in ctx. hw may be NULL (cache line 64 bytes). Thread-safe with
** distinct ctx. The batch form extracts n functions on nthreads threads (<=
** 0: one per core) into one malloc'd matrix with row_off (n + 1 ints,
** caller's) offsets; a NULL function or a failed extraction gets no rows. */

int tl_ansor_num_features(void);
const char *tl_ansor_feature_name(int i);
int tl_ansor_features(tl_ctx *ctx, const tl_lowered *f, const tl_ansor_hw *hw, float **rows);
int tl_ansor_features_batch(tl_ctx *ctx, tl_lowered *const *fs, int n, const tl_ansor_hw *hw,
                            int nthreads, float **rows, int *row_off);

/* ---- ansor: the cost model (core/tuner/ansor_model.c) -------------------
** kind 0: random scores in [0, 1); kind 1: XGBoost over feature rows, a
** state scoring the sum of its rows' predictions (pack-sum), trained with
** each state's throughput / the largest seen as the target and weight of its
** rows. States are given as rows (row_off[nstates] rows of 164 floats) and
** row_off (nstates + 1 offsets, row_off[0] = 0, not decreasing); a state
** without rows or with all-zero rows predicts -inf. Throughput in flop/s, 0
** for a failed measurement. Until trained on more than num_warmup_sample
** states (default 100) an xgb model predicts random scores too. Parameters
** (tl_ansor_model_set): num_warmup_sample, nthread (1), max_rounds (10000),
** early_stopping (50), adaptive_training (1: skip a refit when fewer than a
** fifth of the states are new). save/load write and read the trees
** (XGBoost UBJSON); a loaded model predicts with them at once. */

typedef struct tl_ansor_model tl_ansor_model;
tl_ansor_model *tl_ansor_model_new(tl_ctx *ctx, int kind, uint64_t seed);
void tl_ansor_model_free(tl_ansor_model *m);
int tl_ansor_model_update(tl_ctx *ctx, tl_ansor_model *m, int nstates, const float *rows,
                          const int *row_off, const double *throughput);
int tl_ansor_model_predict(tl_ctx *ctx, tl_ansor_model *m, int nstates, const float *rows,
                           const int *row_off, double *scores);
int tl_ansor_model_set(tl_ctx *ctx, tl_ansor_model *m, const char *key, double value);
int tl_ansor_model_num_samples(const tl_ansor_model *m);
int tl_ansor_model_rounds(const tl_ansor_model *m);
int tl_ansor_model_trained(const tl_ansor_model *m);
int tl_ansor_model_save(tl_ctx *ctx, tl_ansor_model *m, const char *path);
int tl_ansor_model_load(tl_ctx *ctx, tl_ansor_model *m, const char *path);
/* ---- ansor: the search policy of one task (core/ansor/search.c) ----------
** A policy holds a task's compute DAG (copied), its hardware params and
** whether GPU rules apply (thread binding, shared memory; else CPU rules).
** Sketches are made on first use; tl_ansor_policy_sketch copies sketch i (its
** split lengths are placeholders). tl_ansor_policy_sample draws n random
** complete states, each lowered and checked. tl_ansor_policy_next_batch runs
** one search round (initial population, evolutionary search scored by the
** cost model m, or by random scores when m is NULL) and writes up to n new
** states to out (the caller frees them); every state handed out counts as
** measured. add_measured takes a measured state's steps (the §2.4 list) and
** its throughput in flop/s (0: failed); update_model trains m on all of them.
** Parameters go by their SketchPolicy names (tl_ansor_policy_set_param).
** The trace holds why rules did not apply while making sketches. Lowering
** arguments: num_args tensor ids of the schedules' DAG (placeholders, then
** outputs). */

typedef struct tl_ansor_policy tl_ansor_policy;
struct tl_ansor_model;              /* the cost model (core/ansor/feature.h) */

int tl_ansor_policy_new(tl_ctx *ctx, const tl_dag *dag, const tl_ansor_hw *hw, int gpu,
                        uint64_t seed, tl_ansor_policy **out);
void tl_ansor_policy_free(tl_ansor_policy *p);
int tl_ansor_policy_set_param(tl_ctx *ctx, tl_ansor_policy *p, const char *name, double value);
int tl_ansor_policy_get_param(const tl_ansor_policy *p, const char *name, double *value);
int tl_ansor_policy_num_sketches(tl_ctx *ctx, tl_ansor_policy *p);
int tl_ansor_policy_sketch(tl_ctx *ctx, tl_ansor_policy *p, int i, tl_sched **out);
const char *tl_ansor_policy_trace(tl_ansor_policy *p);
int tl_ansor_policy_num_args(const tl_ansor_policy *p);
int tl_ansor_policy_arg(const tl_ansor_policy *p, int i);
/* The layout-free arguments (tensor ids: constant weights of a network): lowered for
** features with their layouts rewritten (tl_lowered_rewrite_layout), as trials build them. */
int tl_ansor_policy_set_layout_free(tl_ctx *ctx, tl_ansor_policy *p, const int *tensors, int n);
/* Lower a state of the policy's DAG to a function of the policy's arguments (placeholders,
** then outputs) named name; rewrite != 0: with the layout-free ones rewritten. */
int tl_ansor_policy_lower(tl_ctx *ctx, const tl_ansor_policy *p, tl_sched *s, const char *name,
                          int rewrite, tl_lowered **out);
const tl_sched *tl_ansor_policy_init_state(const tl_ansor_policy *p);
int tl_ansor_policy_check(tl_ctx *ctx, tl_ansor_policy *p, tl_sched *s);
int tl_ansor_policy_sample(tl_ctx *ctx, tl_ansor_policy *p, int n, tl_sched **out, int *nout);
int tl_ansor_policy_next_batch(tl_ctx *ctx, tl_ansor_policy *p, struct tl_ansor_model *m, int n,
                               tl_sched **out, int *nout);
double tl_ansor_policy_round_seconds(const tl_ansor_policy *p);
int tl_ansor_policy_round_population(const tl_ansor_policy *p);
int tl_ansor_policy_add_measured(tl_ctx *ctx, tl_ansor_policy *p, const char *steps_json,
                                 double flops);
int tl_ansor_policy_num_measured(const tl_ansor_policy *p);
int tl_ansor_policy_is_measured(const tl_ansor_policy *p, const tl_sched *s);
int tl_ansor_policy_update_model(tl_ctx *ctx, tl_ansor_policy *p, struct tl_ansor_model *m);

/* cdef:end */

#ifdef __cplusplus
}
#endif

#endif
