/*
** search.h -- the auto-scheduler's search over one task (core/ansor):
** sketches (sketch.c), random annotation and mutation (annotate.c), and the
** policy that samples, evolves and hands out states to measure (search.c).
**
** A state is a tl_sched (its step list replays to it). A sketch is a state
** whose tile sizes are still open: the split steps listed in `open` were
** made with placeholder lengths (all 1) that the annotation replaces by a
** factorization of the split's extent before anything else is added:
**
**   sketch  = steps of the sketch rules (inline, cache, tile, follow, compute_at)
**   state   = sketch steps with filled lengths, replayed on a fresh DAG copy
**           + annotation steps (compute location, parallel, vectorize,
**             unroll pragma, thread binding) applied to the replayed state
**
** Nothing here calls back into Lua: the policy is driven by tl_ansor_policy_*
** (core/tunelua_ansor.h), which hands out states and takes measured results.
*/
#ifndef TL_ANSOR_SEARCH_H
#define TL_ANSOR_SEARCH_H

#include "ansor.h"
#include "../te/schedule.h"

/* The search parameters (SketchPolicy's params; names as in the policy's
** parameter table of search.c). */
typedef struct tl_ansor_params {
  double eps_greedy;
  int retry_search_one_round_on_empty;
  int sample_init_min_population;
  double sample_init_use_measured_ratio;
  int evolutionary_search_population;
  int evolutionary_search_num_iters;
  double evolutionary_search_mutation_prob;
  int max_innermost_split_factor;
  int max_vectorize_size;
  int disable_change_compute_location;
} tl_ansor_params;

typedef struct tl_ansor_sketch {
  tl_sched *s;
  TL_VEC(int) open;               /* ids of split steps with open lengths */
  TL_VEC(int) tiles;              /* CPU: per multi-level tiled stage, n and the ids of its n
                                  ** spatial split steps (-1: an axis not split); the
                                  ** innermost length of the last one is vectorized and the
                                  ** innermost lengths together size the register tile */
  TL_VEC(int) lanes;              /* CPU: ids of split steps whose innermost length is drawn
                                  ** as a multiple of the vector lanes (simplify-const-tensor) */
  TL_VEC(int64_t) threads;        /* GPU cross-thread reductions: pairs (id of the split step
                                  ** whose one length is the block's thread count, the
                                  ** reduction's extent); the annotation draws the count */
} tl_ansor_sketch;

/* What the rules read: the task's kind and limits. */
typedef struct tl_ansor_env {
  int gpu;                        /* GPU rules (thread binding, shared memory) */
  const char *structure;          /* "SSRSRS" (CPU) or "SSSRRSRS" (GPU) */
  struct tl_ansor_hw hw;
  tl_ansor_params p;
  tl_buf *trace;                  /* why rules did not apply (may be NULL) */
} tl_ansor_env;

/* A small deterministic generator (splitmix64); one per thread of work. */
static inline uint64_t tl_ansor_rand(uint64_t *st) {
  uint64_t z = (*st += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static inline double tl_ansor_uniform(uint64_t *st) {
  return (double)(tl_ansor_rand(st) >> 11) / 9007199254740992.0;
}

typedef TL_VEC(tl_ansor_sketch) tl_ansor_sketch_vec;

/* sketch.c: the sketches of the schedule init (no steps), appended to
** *out. Returns 0, or an error with the message in ctx. */
int tl_ansor_gen_sketches(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *init,
                          tl_ansor_sketch_vec *out);
void tl_ansor_sketch_free(tl_ansor_sketch *sk);

/* Stage queries the rules and annotations share (sketch.c). */
int tl_ansor_stage_tiled(const tl_sched *s, int st);      /* leaves != op axes */
int tl_ansor_spatial_split_steps(const tl_sched *s, int st, int *out, int cap);
int tl_ansor_needs_mlt(tl_ctx *ctx, const tl_sched *s, int st);
/* Whether stage st (-1: none) reduces across threads: a reduction iterator bound to
** threadIdx.x. */
int tl_ansor_stage_xred(const tl_sched *s, int st);

/* annotate.c: a random complete state from a sketch (NULL when a rule found
** it invalid; ctx then says why). rng is advanced. */
tl_sched *tl_ansor_annotate(tl_ctx *ctx, const tl_ansor_env *env, const tl_ansor_sketch *sk,
                            uint64_t *rng);
/* A mutation of state (tile size, auto-unroll, compute location); NULL if
** the drawn mutation does not apply. */
tl_sched *tl_ansor_mutate(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *state,
                          uint64_t *rng);
/* One mutation of a given kind. */
enum { TL_ANSOR_MUT_TILE = 0, TL_ANSOR_MUT_UNROLL, TL_ANSOR_MUT_LOCATION, TL_ANSOR_MUT_PARALLEL };
tl_sched *tl_ansor_mutate_kind(tl_ctx *ctx, const tl_ansor_env *env, const tl_sched *state,
                               int kind, uint64_t *rng);
/* The cost model's side (search_model.c): the feature rows of one lowered
** state (n rows of TL_ANSOR_NFEAT floats, malloc'd; returns n or -1), and
** prediction and training over rows packed per state (row_off: n + 1
** offsets). */
struct tl_ansor_model;
int tl_ansor_search_rows(tl_ctx *ctx, const struct tl_ansor_hw *hw, const tl_lowered *f,
                         float **rows);
int tl_ansor_search_predict(tl_ctx *ctx, struct tl_ansor_model *m, int n, const float *rows,
                            const int *row_off, double *scores);
int tl_ansor_search_update(tl_ctx *ctx, struct tl_ansor_model *m, int n, const float *rows,
                           const int *row_off, const double *flops);

/* Replay steps (n of them) on a fresh copy of base's DAG; NULL on error. */
tl_sched *tl_ansor_replay(tl_ctx *ctx, const tl_sched *base, const tl_step *steps, int n);

#endif
