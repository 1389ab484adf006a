/*
** search.c -- the auto-scheduler's policy for one task: sketches, the
** initial population, the evolutionary search and the measured set
** (algorithms spec B3, B5-B7).
**
** The loop is pull-style. The caller (lua/tunelua/auto_scheduler) asks for
** the next batch of states to measure (tl_ansor_policy_next_batch), measures
** them with the one builder/runner path, and hands the results back
** (tl_ansor_policy_add_measured), then lets the cost model learn from them
** (tl_ansor_policy_update_model). A round:
**
**   init   = random annotations of random sketches (all valid and new ones of
**            a batch of `population` draws, until sample_init_min_population)
**          + the best measured states (sample_init_use_measured_ratio)
**   best   = evolutionary search from init: num_iters generations of
**            roulette selection by predicted score and mutation (tile size,
**            auto-unroll, compute location), the 2 x n best-scored states
**            never measured kept in a bounded heap
**   batch  = the best states, with eps_greedy x n random init states mixed
**            in; each one lowered and checked (GPU: threads, vthreads and
**            shared memory within the hardware params) before it is handed out
**
** Every state handed out is marked measured (hash of its steps), so a round
** never proposes it again, nor anything a resumed log already holds
** (tl_ansor_policy_add_measured before the first round). States are scored by
** the cost model when one is given (per-store features of the lowered state,
** core/ansor/feature.h), else by a random score. Work over a population runs
** on the global thread pool, one tl_ctx and one generator per item.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "feature.h"
#include "search.h"

struct tl_ansor_model;

#define NFEAT TL_ANSOR_NFEAT

/* ---- the measured set ------------------------------------------------------------------- */

typedef struct measured {
  char *json;                     /* steps */
  uint64_t hash;
  double flops;                   /* 0: failed or not yet known */
  int has_result, trained;
  float *rows;                    /* its feature rows once featurized (kept: the model is
                                  ** retrained on every measured state each round) */
  int nrows;                      /* -1: does not lower; valid once featurized */
  int featurized;
} measured;

typedef struct hset {
  uint64_t *v;                    /* 0 = empty (hash 0 is stored as 1) */
  int n, cap;
} hset;

static uint64_t hkey(uint64_t h) { return h ? h : 1; }

static int hset_has(const hset *s, uint64_t h) {
  if (!s->cap) return 0;
  h = hkey(h);
  for (size_t i = h & (size_t)(s->cap - 1);; i = (i + 1) & (size_t)(s->cap - 1)) {
    if (s->v[i] == h) return 1;
    if (!s->v[i]) return 0;
  }
}

static void hset_add(hset *s, uint64_t h) {
  if (hset_has(s, h)) return;
  if (2 * (s->n + 1) > s->cap) {
    hset o = *s;
    s->cap = o.cap ? o.cap * 2 : 256;
    s->v = tl_calloc((size_t)s->cap, sizeof(uint64_t));
    s->n = 0;
    for (int i = 0; i < o.cap; i++)
      if (o.v[i]) hset_add(s, o.v[i]);
    free(o.v);
  }
  h = hkey(h);
  size_t i = h & (size_t)(s->cap - 1);
  while (s->v[i]) i = (i + 1) & (size_t)(s->cap - 1);
  s->v[i] = h;
  s->n++;
}

/* ---- the policy ------------------------------------------------------------------------------ */

struct tl_ansor_policy {
  tl_sched *init;                 /* the state with no steps */
  tl_ansor_env env;
  char structure[32];
  int sketched;
  tl_ansor_sketch_vec sketches;
  tl_buf trace;
  uint64_t rng;
  int nargs;
  int *args;                      /* placeholders, then outputs (tensor ids) */
  uint8_t *rewrite;               /* per argument: its layout is rewritten (layout-free) */
  hset seen;                      /* measured or handed out */
  TL_VEC(measured) meas;
  double round_seconds;
  int round_population;           /* states scored in the last round */
  double prof[6];                 /* last round: sample, lower, features, predict, mutate, pick */
  tl_buf text;
};

static const struct {
  const char *name;
  size_t off;
  char type;                      /* 'd' double, 'i' int */
  double lo, hi;
} params[] = {
#define P(n, t, lo, hi) {#n, offsetof(tl_ansor_params, n), t, lo, hi}
  P(eps_greedy, 'd', 0, 1),
  P(retry_search_one_round_on_empty, 'i', 0, 100),
  P(sample_init_min_population, 'i', 1, 1 << 20),
  P(sample_init_use_measured_ratio, 'd', 0, 1),
  P(evolutionary_search_population, 'i', 1, 1 << 20),
  P(evolutionary_search_num_iters, 'i', 0, 1000),
  P(evolutionary_search_mutation_prob, 'd', 0, 1),
  P(max_innermost_split_factor, 'i', 1, 1 << 20),
  P(max_vectorize_size, 'i', 1, 1 << 20),
  P(disable_change_compute_location, 'i', 0, 1),
#undef P
};

TL_EXPORT int tl_ansor_policy_new(tl_ctx *ctx, const tl_dag *dag, const tl_ansor_hw *hw, int gpu,
                                  uint64_t seed, tl_ansor_policy **out) {
  *out = NULL;
  if (!dag || !hw) return tl_err(ctx, TL_E_ARG, "search policy: a compute DAG and hardware params are required");
  tl_ansor_policy *p = tl_calloc(1, sizeof *p);
  if (tl_sched_new(ctx, dag, NULL, 0, &p->init)) {
    free(p);
    return tl_err_prefix(ctx, "search policy: ");
  }
  p->env.gpu = gpu != 0;
  p->env.hw = *hw;
  snprintf(p->structure, sizeof p->structure, "%s", gpu ? "SSSRRSRS" : "SSRSRS");
  p->env.structure = p->structure;
  p->env.trace = &p->trace;
  tl_ansor_params d = {0.05, 1, 50, 0.2, 2048, 4, 0.85, 64, 16, 0};
  p->env.p = d;
  p->rng = seed ? seed : 1;
  const tl_dag *b = p->init->base;
  int *outs = tl_malloc(sizeof(int) * (size_t)(b->tensors.n + 1));
  int nout = tl_dag_output_list(b, outs);
  p->args = tl_malloc(sizeof(int) * (size_t)(b->tensors.n + 1));
  p->rewrite = tl_calloc((size_t)b->tensors.n + 1, 1);
  for (int o = 0; o < b->ops.n; o++)
    if (b->ops.v[o].kind == TL_OP_PLACEHOLDER) p->args[p->nargs++] = b->ops.v[o].out_tensors[0];
  for (int i = 0; i < nout; i++) p->args[p->nargs++] = outs[i];
  free(outs);
  /* GPU rules need thread limits */
  if (gpu && (hw->v[5] <= 0 || hw->v[7] <= 0)) {
    tl_ansor_policy_free(p);
    return tl_err(ctx, TL_E_ARG,
                  "search policy: hardware params allow no threads (max_threads_per_block %lld, "
                  "warp_size %lld): a GPU task needs both >= 1",
                  (long long)hw->v[5], (long long)hw->v[7]);
  }
  if (!gpu && hw->v[0] == 0) {
    tl_ansor_policy_free(p);
    return tl_err(ctx, TL_E_ARG, "search policy: hardware params allow no cores (num_cores 0)");
  }
  *out = p;
  return 0;
}

TL_EXPORT void tl_ansor_policy_free(tl_ansor_policy *p) {
  if (!p) return;
  tl_sched_free(p->init);
  for (int i = 0; i < p->sketches.n; i++) tl_ansor_sketch_free(&p->sketches.v[i]);
  TL_VEC_FREE(p->sketches);
  tl_buf_free(&p->trace);
  tl_buf_free(&p->text);
  free(p->args);
  free(p->rewrite);
  free(p->seen.v);
  for (int i = 0; i < p->meas.n; i++) {
    free(p->meas.v[i].json);
    free(p->meas.v[i].rows);
  }
  TL_VEC_FREE(p->meas);
  free(p);
}

TL_EXPORT int tl_ansor_policy_set_param(tl_ctx *ctx, tl_ansor_policy *p, const char *name, double v) {
  for (size_t i = 0; i < TL_ARRAY_SIZE(params); i++) {
    if (strcmp(params[i].name, name) != 0) continue;
    if (!(v >= params[i].lo && v <= params[i].hi) || (params[i].type == 'i' && v != floor(v)))
      return tl_err(ctx, TL_E_ARG, "search policy: %s = %g is out of range (expected %s in [%g, %g])",
                    name, v, params[i].type == 'i' ? "an integer" : "a number", params[i].lo,
                    params[i].hi);
    char *f = (char *)&p->env.p + params[i].off;
    if (params[i].type == 'd') *(double *)f = v;
    else *(int *)f = (int)v;
    return 0;
  }
  tl_buf b = {0};
  for (size_t i = 0; i < TL_ARRAY_SIZE(params); i++) tl_buf_printf(&b, "%s%s", i ? ", " : "", params[i].name);
  tl_err(ctx, TL_E_ARG, "search policy: unknown parameter '%s' (known: %s)", name, b.s);
  tl_buf_free(&b);
  return TL_E_ARG;
}

TL_EXPORT int tl_ansor_policy_get_param(const tl_ansor_policy *p, const char *name, double *v) {
  for (size_t i = 0; i < TL_ARRAY_SIZE(params); i++) {
    if (strcmp(params[i].name, name) != 0) continue;
    const char *f = (const char *)&p->env.p + params[i].off;
    *v = params[i].type == 'd' ? *(const double *)f : *(const int *)f;
    return 0;
  }
  return -1;
}

static int ensure_sketches(tl_ctx *ctx, tl_ansor_policy *p) {
  if (p->sketched) return p->sketches.n ? 0 : tl_err(ctx, TL_E_SCHED, "search: no sketch for this task");
  p->sketched = 1;
  if (tl_ansor_gen_sketches(ctx, &p->env, p->init, &p->sketches)) return tl_err_prefix(ctx, "sketches: ");
  if (!p->sketches.n) return tl_err(ctx, TL_E_SCHED, "search: no sketch for this task");
  return 0;
}

TL_EXPORT int tl_ansor_policy_num_sketches(tl_ctx *ctx, tl_ansor_policy *p) {
  if (ensure_sketches(ctx, p)) return -1;
  return p->sketches.n;
}

TL_EXPORT int tl_ansor_policy_sketch(tl_ctx *ctx, tl_ansor_policy *p, int i, tl_sched **out) {
  *out = NULL;
  if (ensure_sketches(ctx, p)) return -1;
  if (i < 0 || i >= p->sketches.n)
    return tl_err(ctx, TL_E_ARG, "search: no sketch %d (the task has %d)", i, p->sketches.n);
  return tl_sched_copy(ctx, p->sketches.v[i].s, out);
}

TL_EXPORT const char *tl_ansor_policy_trace(tl_ansor_policy *p) { return p->trace.s ? p->trace.s : ""; }

TL_EXPORT int tl_ansor_policy_num_args(const tl_ansor_policy *p) { return p->nargs; }

TL_EXPORT int tl_ansor_policy_set_layout_free(tl_ctx *ctx, tl_ansor_policy *p, const int *tensors, int n) {
  for (int i = 0; i < p->nargs; i++) p->rewrite[i] = 0;
  for (int k = 0; k < n; k++) {
    int found = 0;
    for (int i = 0; i < p->nargs; i++)
      if (p->args[i] == tensors[k]) p->rewrite[i] = 1, found = 1;
    if (!found)
      return tl_err(ctx, TL_E_ARG, "search policy: tensor %d is not an argument of the task", tensors[k]);
  }
  return 0;
}
TL_EXPORT int tl_ansor_policy_arg(const tl_ansor_policy *p, int i) {
  return i >= 0 && i < p->nargs ? p->args[i] : -1;
}
TL_EXPORT const tl_sched *tl_ansor_policy_init_state(const tl_ansor_policy *p) { return p->init; }

/* ---- checking a state ---------------------------------------------------------------------- */

typedef struct gpu_use {
  int64_t threads[3], vthread, shared;
} gpu_use;

static void scan_gpu(const tl_ir *ir, tl_ref r, gpu_use *u) {
  const tl_node *n = tl_ir_node(ir, r);
  if (n->op == TL_IR_FOR) {
    int kind = (int)(n->imm.u & 0xff), tag = (int)(n->imm.u >> 8);
    int64_t e = 0;
    tl_ir_is_int(ir, tl_ir_kid(ir, r, 2), &e);
    if (kind == TL_FOR_THREAD && tag >= TL_TAG_THREAD_X && tag <= TL_TAG_THREAD_Z)
      u->threads[tag - TL_TAG_THREAD_X] = TL_MAX(u->threads[tag - TL_TAG_THREAD_X], e);
    if (kind == TL_FOR_VTHREAD) u->vthread = TL_MAX(u->vthread, e);
  } else if (n->op == TL_IR_ALLOC) {
    const tl_buffer *b = tl_ir_buffer(ir, (int)n->imm.u);
    if (b->scope == TL_SCOPE_SHARED) {
      int64_t sz = (b->dtype.bits + 7) / 8 * (b->dtype.lanes ? b->dtype.lanes : 1);
      for (int d = 0; d < b->ndim; d++) {
        int64_t e = 1;
        tl_ir_is_int(ir, b->shape[d], &e);
        sz *= e;
      }
      u->shared += sz;
    }
  }
  if (!(tl_ir_opflags[n->op] & TL_IRF_S)) return;
  for (int i = 0; i < n->nkids; i++) {
    tl_ref k = tl_ir_kid(ir, r, i);
    if (k && k != TL_NOREF) scan_gpu(ir, k, u);
  }
}

TL_EXPORT int tl_ansor_policy_lower(tl_ctx *ctx, const tl_ansor_policy *p, tl_sched *s, const char *name,
                                    int rewrite, tl_lowered **out) {
  *out = NULL;
  tl_lowered *f;
  int rc = tl_lower(ctx, s, p->args, p->nargs, name, &f);
  if (rc) return rc;
  for (int i = 0; rewrite && i < p->nargs; i++) {
    tl_layout_map *m = NULL;
    if (!p->rewrite[i]) continue;
    if ((rc = tl_lowered_rewrite_layout(ctx, f, i, &m)) != 0) {
      tl_lowered_free(f);
      return rc;
    }
    tl_layout_map_free(m);
  }
  *out = f;
  return 0;
}

/* Lower s (the policy's arguments, the layout-free ones rewritten) and check it against the
** hardware params. */
static int lower_check(tl_ctx *ctx, const tl_ansor_policy *p, tl_sched *s, tl_lowered **out) {
  *out = NULL;
  tl_lowered *f;
  if (tl_ansor_policy_lower(ctx, p, s, "default_function_kernel", 1, &f)) return -1;
  if (p->env.gpu) {
    gpu_use u = {{1, 1, 1}, 1, 0};
    scan_gpu(f->ir, f->body, &u);
    const int64_t *hw = p->env.hw.v;
    int64_t threads = u.threads[0] * u.threads[1] * u.threads[2];
    const char *why = NULL;
    char msg[160];
    if (hw[5] > 0 && threads > hw[5]) {
      snprintf(msg, sizeof msg, "%lld threads per block exceed max_threads_per_block %lld",
               (long long)threads, (long long)hw[5]);
      why = msg;
    } else if (hw[6] > 0 && u.vthread > hw[6]) {
      snprintf(msg, sizeof msg, "vthread extent %lld exceeds max_vthread_extent %lld",
               (long long)u.vthread, (long long)hw[6]);
      why = msg;
    } else if (hw[3] > 0 && u.shared > hw[3]) {
      snprintf(msg, sizeof msg, "%lld bytes of shared memory exceed max_shared_memory_per_block %lld",
               (long long)u.shared, (long long)hw[3]);
      why = msg;
    }
    if (why) {
      tl_lowered_free(f);
      return tl_err(ctx, TL_E_SCHED, "check: %s", why);
    }
  }
  *out = f;
  return 0;
}

TL_EXPORT int tl_ansor_policy_check(tl_ctx *ctx, tl_ansor_policy *p, tl_sched *s) {
  tl_lowered *f;
  if (lower_check(ctx, p, s, &f)) return -1;
  tl_lowered_free(f);
  return 0;
}

/* ---- sampling -------------------------------------------------------------------------------- */

typedef struct cand {
  tl_sched *s;
  uint64_t hash;
  double score;
  float *rows;                    /* feature rows, when featurized */
  int nrows;                      /* -1: the state does not lower or check */
  int *refs;                      /* NULL: s and rows are this entry's own; else how many
                                  ** entries share them (an unmutated child shares its
                                  ** parent's state and rows: no copy, no new lowering) */
} cand;

typedef TL_VEC(cand) candvec;

static void cand_release(cand *c) {
  if (c->refs && --*c->refs > 0) return;
  tl_sched_free(c->s);
  free(c->rows);
  free(c->refs);
}

/* A second entry for c's state (serial code only). */
static cand cand_share(cand *c) {
  if (!c->refs) {
    c->refs = tl_malloc(sizeof(int));
    *c->refs = 1;
  }
  ++*c->refs;
  return *c;
}

static void cands_free(candvec *v) {
  for (int i = 0; i < v->n; i++) cand_release(&v->v[i]);
  TL_VEC_FREE(*v);
}

typedef struct sample_job {
  tl_ansor_policy *p;
  uint64_t base;
  tl_sched **out;
  int check;                      /* lower and check each state */
} sample_job;

static void sample_one(int64_t i, void *arg) {
  sample_job *j = arg;
  uint64_t rng = j->base ^ (0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1));
  tl_ansor_rand(&rng);
  tl_ctx ctx = {0};
  const tl_ansor_sketch *sk = &j->p->sketches.v[tl_ansor_rand(&rng) % (uint64_t)j->p->sketches.n];
  tl_ansor_env env = j->p->env;
  env.trace = NULL;
  tl_sched *s = tl_ansor_annotate(&ctx, &env, sk, &rng);
  if (s && j->check && tl_ansor_policy_check(&ctx, j->p, s)) {
    tl_sched_free(s);
    s = NULL;
  }
  j->out[i] = s;
}

/* n annotated states (NULL where invalid), in parallel. */
static tl_sched **sample_batch(tl_ansor_policy *p, int n, int check) {
  double t0 = tl_now();
  sample_job j = {p, tl_ansor_rand(&p->rng), tl_calloc((size_t)n + 1, sizeof(tl_sched *)), check};
  tl_pool_for(tl_pool_global(), n, sample_one, &j);
  p->prof[0] += tl_now() - t0;
  return j.out;
}

TL_EXPORT int tl_ansor_policy_sample(tl_ctx *ctx, tl_ansor_policy *p, int n, tl_sched **out,
                                     int *nout) {
  *nout = 0;
  if (n < 0) return tl_err(ctx, TL_E_ARG, "sample: negative count %d", n);
  if (ensure_sketches(ctx, p)) return -1;
  int tries = 0;
  while (*nout < n && tries < 8) {
    int want = TL_MAX(2 * (n - *nout), 64);
    tl_sched **b = sample_batch(p, want, 1);
    int got = 0;
    for (int i = 0; i < want; i++) {
      if (b[i] && *nout < n) out[(*nout)++] = b[i], got++;
      else tl_sched_free(b[i]);
    }
    free(b);
    tries = got ? 0 : tries + 1;
  }
  if (*nout < n) {
    /* tell why: the reason of one failing draw */
    tl_ansor_env env = p->env;
    env.trace = NULL;
    uint64_t rng = p->rng;
    tl_sched *s = tl_ansor_annotate(ctx, &env, &p->sketches.v[0], &rng);
    if (s && tl_ansor_policy_check(ctx, p, s) == 0) tl_err(ctx, TL_E_SCHED, "sample: too few valid states");
    tl_sched_free(s);
    return tl_err_prefix(ctx, "sample: %d of %d states valid: ", *nout, n);
  }
  return 0;
}

/* The initial population: valid states not measured, at least the minimum
** population (halved after five fruitless batches), plus the best measured. */
static int init_population(tl_ctx *ctx, tl_ansor_policy *p, candvec *pop) {
  int pop_size = p->env.p.evolutionary_search_population;
  int target = p->env.p.sample_init_min_population, unchanged = 0;
  hset local = {0};
  while (pop->n < target) {
    tl_sched **b = sample_batch(p, pop_size, 0);
    int added = 0;
    for (int i = 0; i < pop_size; i++) {
      if (!b[i]) continue;
      uint64_t h = tl_sched_hash(b[i]);
      if (hset_has(&p->seen, h) || hset_has(&local, h)) {
        tl_sched_free(b[i]);
        continue;
      }
      hset_add(&local, h);
      cand c = {b[i], h, 0, NULL, 0, NULL};
      TL_VEC_PUSH(*pop, c);
      added++;
    }
    free(b);
    if (!added && ++unchanged >= 5) {
      if (target <= 1 || pop->n > 0) break;
      target = TL_MAX(1, target / 2);
      unchanged = 0;
    }
    if (!added && unchanged >= 5 && pop->n == 0) break;
  }
  free(local.v);
  /* the best measured states */
  int nm = (int)(p->env.p.sample_init_use_measured_ratio * pop_size);
  if (nm > 0 && p->meas.n) {
    int *idx = tl_malloc(sizeof(int) * (size_t)p->meas.n);
    int k = 0;
    for (int i = 0; i < p->meas.n; i++)
      if (p->meas.v[i].flops > 0) idx[k++] = i;
    /* partial selection sort: the best nm */
    for (int a = 0; a < k && a < nm; a++) {
      int best = a;
      for (int b = a + 1; b < k; b++)
        if (p->meas.v[idx[b]].flops > p->meas.v[idx[best]].flops) best = b;
      int t = idx[a];
      idx[a] = idx[best];
      idx[best] = t;
      tl_sched *s;
      tl_ctx sub = {0};
      if (tl_sched_fresh(&sub, p->init, &s)) continue;
      if (tl_sched_apply_json(&sub, s, p->meas.v[idx[a]].json)) {
        tl_sched_free(s);
        continue;
      }
      const measured *me = &p->meas.v[idx[a]];
      cand c = {s, me->hash, 0, NULL, 0, NULL};
      if (me->featurized) {           /* its rows from the model's update: no new lowering */
        c.nrows = me->nrows;
        if (me->nrows > 0) {
          size_t sz = sizeof(float) * TL_ANSOR_NFEAT * (size_t)me->nrows;
          c.rows = tl_malloc(sz);
          memcpy(c.rows, me->rows, sz);
        }
      }
      TL_VEC_PUSH(*pop, c);
    }
    free(idx);
  }
  if (!pop->n) return tl_err(ctx, TL_E_SCHED, "search: no valid state in the initial population");
  return 0;
}

/* ---- scoring --------------------------------------------------------------------------------- */

typedef struct lower_job {
  tl_ansor_policy *p;
  cand *c;
  int64_t ns[2];                  /* thread time lowering, featurizing (summed) */
} lower_job;

/* Lower, check and featurize one state (rows freed by cands_free). */
static void featurize_one(int64_t i, void *arg) {
  lower_job *j = arg;
  cand *c = &j->c[i];
  if (c->rows || c->nrows < 0 || c->refs) return;   /* shared: featurized with its parent */
  tl_ctx ctx = {0};
  tl_lowered *f;
  c->nrows = -1;
  double t0 = tl_now();
  int bad = lower_check(&ctx, j->p, c->s, &f);
  double t1 = tl_now();
  __atomic_fetch_add(&j->ns[0], (int64_t)((t1 - t0) * 1e9), __ATOMIC_RELAXED);
  if (bad) return;
  int n = tl_ansor_search_rows(&ctx, &j->p->env.hw, f, &c->rows);
  tl_lowered_free(f);
  __atomic_fetch_add(&j->ns[1], (int64_t)((tl_now() - t1) * 1e9), __ATOMIC_RELAXED);
  if (n >= 0) c->nrows = n;
}

/* The rows of the featurized states of v packed per state; map[k] = index in v. */
static int pack_rows(const candvec *v, float **rows, int **off, int **map) {
  int total = 0, k = 0;
  for (int i = 0; i < v->n; i++)
    if (v->v[i].nrows >= 0) total += v->v[i].nrows;
  *rows = tl_malloc(sizeof(float) * NFEAT * (size_t)(total + 1));
  *off = tl_malloc(sizeof(int) * (size_t)(v->n + 1));
  *map = tl_malloc(sizeof(int) * (size_t)(v->n + 1));
  int at = 0;
  for (int i = 0; i < v->n; i++) {
    const cand *c = &v->v[i];
    if (c->nrows < 0) continue;
    (*off)[k] = at;
    if (c->nrows) memcpy(*rows + (size_t)at * NFEAT, c->rows, sizeof(float) * NFEAT * (size_t)c->nrows);
    at += c->nrows;
    (*map)[k++] = i;
  }
  (*off)[k] = at;
  return k;
}

/* Scores of the population: the model's prediction (a state that does not
** lower or check gets -inf), or random. */
static int score_population(tl_ctx *ctx, tl_ansor_policy *p, struct tl_ansor_model *m,
                            candvec *pop) {
  if (!m) {
    for (int i = 0; i < pop->n; i++) pop->v[i].score = tl_ansor_uniform(&p->rng);
    return 0;
  }
  lower_job j = {p, pop->v, {0, 0}};
  double t0 = tl_now();
  tl_pool_for(tl_pool_global(), pop->n, featurize_one, &j);
  /* wall time of the pool split by the thread time of each part */
  double wall = tl_now() - t0, sum = (double)(j.ns[0] + j.ns[1]);
  p->prof[1] += sum > 0 ? wall * (double)j.ns[0] / sum : 0;
  p->prof[2] += sum > 0 ? wall * (double)j.ns[1] / sum : 0;
  t0 = tl_now();
  for (int i = 0; i < pop->n; i++) pop->v[i].score = -INFINITY;
  float *rows;
  int *off, *map;
  int k = pack_rows(pop, &rows, &off, &map);
  double *sc = tl_malloc(sizeof(double) * (size_t)(k + 1));
  int rc = k ? tl_ansor_search_predict(ctx, m, k, rows, off, sc) : 0;
  for (int i = 0; !rc && i < k; i++) pop->v[map[i]].score = sc[i];
  p->prof[3] += tl_now() - t0;
  free(sc);
  free(rows);
  free(off);
  free(map);
  return rc;
}

/* ---- evolution ------------------------------------------------------------------------------- */

typedef struct best {
  char *json;
  uint64_t hash;
  double score;
} best;

typedef struct heap {
  best *v;
  int n, cap;
  hset in;
} heap;

static void heap_offer(heap *h, const cand *c) {
  if (c->score == -INFINITY || hset_has(&h->in, c->hash)) return;
  int at = -1;
  if (h->n < h->cap) {
    at = h->n++;
  } else {
    int lo = 0;
    for (int i = 1; i < h->n; i++)
      if (h->v[i].score < h->v[lo].score) lo = i;
    if (c->score <= h->v[lo].score) return;
    free(h->v[lo].json);
    at = lo;
  }
  h->v[at].json = tl_strdup(tl_sched_json(c->s));
  h->v[at].hash = c->hash;
  h->v[at].score = c->score;
  hset_add(&h->in, c->hash);
}

typedef struct mutate_job {
  tl_ansor_policy *p;
  const candvec *pop;
  const double *cum;              /* roulette prefix sums, normalized */
  uint64_t base;
  cand *out;
  int *parent;                    /* out[i] unmutated: the parent's index, else -1 */
} mutate_job;

static int roulette(const double *cum, int n, double u) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (cum[mid] < u) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static void mutate_one(int64_t i, void *arg) {
  mutate_job *j = arg;
  uint64_t rng = j->base ^ (0xD1B54A32D192ED03ULL * (uint64_t)(i + 1));
  tl_ansor_rand(&rng);
  tl_ctx ctx = {0};
  tl_ansor_env env = j->p->env;
  env.trace = NULL;
  tl_sched *child = NULL;
  j->parent[i] = -1;
  for (int tries = 0; tries < 8 && !child; tries++) {
    int pi = roulette(j->cum, j->pop->n, tl_ansor_uniform(&rng));
    const cand *parent = &j->pop->v[pi];
    if (tl_ansor_uniform(&rng) < env.p.evolutionary_search_mutation_prob) {
      child = tl_ansor_mutate(&ctx, &env, parent->s, &rng);
    } else {
      j->parent[i] = pi;          /* shared after the pool: see evolve */
      break;
    }
  }
  memset(&j->out[i], 0, sizeof j->out[i]);
  j->out[i].s = child;
  j->out[i].hash = child ? tl_sched_hash(child) : 0;
}

static int evolve(tl_ctx *ctx, tl_ansor_policy *p, struct tl_ansor_model *m, candvec *pop,
                  int out_size, heap *h) {
  int iters = p->env.p.evolutionary_search_num_iters;
  if (!m && iters > 2) iters = 2;   /* random scores: little to gain */
  int pop_size = p->env.p.evolutionary_search_population;
  for (int k = 0;; k++) {
    if (score_population(ctx, p, m, pop)) return -1;
    p->round_population += pop->n;
    for (int i = 0; i < pop->n; i++)
      if (!hset_has(&p->seen, pop->v[i].hash)) heap_offer(h, &pop->v[i]);
    if (k >= iters) break;
    double *cum = tl_malloc(sizeof(double) * (size_t)(pop->n + 1)), acc = 0;
    for (int i = 0; i < pop->n; i++) {
      double sc = pop->v[i].score;
      acc += sc > 0 && isfinite(sc) ? sc : 0;
      cum[i] = acc;
    }
    if (acc <= 0)
      for (int i = 0; i < pop->n; i++) cum[i] = (double)(i + 1) / pop->n;
    else
      for (int i = 0; i < pop->n; i++) cum[i] /= acc;
    cand *next = tl_calloc((size_t)pop_size + 1, sizeof(cand));
    int *parent = tl_malloc(sizeof(int) * (size_t)(pop_size + 1));
    mutate_job j = {p, pop, cum, tl_ansor_rand(&p->rng), next, parent};
    double t0 = tl_now();
    tl_pool_for(tl_pool_global(), pop_size, mutate_one, &j);
    p->prof[4] += tl_now() - t0;
    for (int i = 0; i < pop_size; i++)
      if (parent[i] >= 0) next[i] = cand_share(&pop->v[parent[i]]);
    free(cum);
    free(parent);
    cands_free(pop);
    for (int i = 0; i < pop_size; i++)
      if (next[i].s) TL_VEC_PUSH(*pop, next[i]);
    free(next);
    if (!pop->n) break;
  }
  (void)out_size;
  return 0;
}

static int cmp_best(const void *a, const void *b) {
  double x = ((const best *)a)->score, y = ((const best *)b)->score;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* A state from steps JSON, lowered and checked; NULL if it fails. */
static tl_sched *state_of(tl_ctx *ctx, tl_ansor_policy *p, const char *json) {
  tl_sched *s;
  if (tl_sched_fresh(ctx, p->init, &s)) return NULL;
  if (tl_sched_apply_json(ctx, s, json) || tl_ansor_policy_check(ctx, p, s)) {
    tl_sched_free(s);
    return NULL;
  }
  return s;
}

TL_EXPORT int tl_ansor_policy_next_batch(tl_ctx *ctx, tl_ansor_policy *p, struct tl_ansor_model *m,
                                         int n, tl_sched **out, int *nout) {
  *nout = 0;
  if (n < 1) return tl_err(ctx, TL_E_ARG, "search: batch size %d (expected >= 1)", n);
  if (ensure_sketches(ctx, p)) return -1;
  double t0 = tl_now();
  p->round_population = 0;
  memset(p->prof, 0, sizeof p->prof);
  int nrand = (int)(p->env.p.eps_greedy * n);
  for (int attempt = 0; attempt <= p->env.p.retry_search_one_round_on_empty && !*nout; attempt++) {
    candvec pop = {0};
    if (init_population(ctx, p, &pop)) {
      cands_free(&pop);
      return -1;
    }
    /* random states: drawn from the initial population before it evolves */
    int nr = TL_MIN(nrand * 3, pop.n);
    char **rjson = tl_calloc((size_t)nr + 1, sizeof(char *));
    uint64_t *rhash = tl_calloc((size_t)nr + 1, sizeof(uint64_t));
    for (int i = 0; i < nr; i++) {
      const cand *c = &pop.v[tl_ansor_rand(&p->rng) % (uint64_t)pop.n];
      rjson[i] = tl_strdup(tl_sched_json(c->s));
      rhash[i] = c->hash;
    }
    heap h = {tl_calloc((size_t)2 * n + 1, sizeof(best)), 0, 2 * n, {0}};
    int rc = evolve(ctx, p, m, &pop, 2 * n, &h);
    cands_free(&pop);
    if (!rc) {
      qsort(h.v, (size_t)h.n, sizeof(best), cmp_best);
      int ngood = n - nrand, bi = 0, ri = 0;
      while (*nout < n && (bi < h.n || ri < nr)) {
        int from_best = (*nout < ngood && bi < h.n) || ri >= nr;
        const char *json = from_best ? h.v[bi].json : rjson[ri];
        uint64_t hash = from_best ? h.v[bi].hash : rhash[ri];
        if (from_best) bi++;
        else ri++;
        if (hset_has(&p->seen, hash)) continue;
        hset_add(&p->seen, hash);
        tl_ctx sub = {0};
        tl_sched *s = state_of(&sub, p, json);
        if (s) out[(*nout)++] = s;
      }
    }
    for (int i = 0; i < h.n; i++) free(h.v[i].json);
    free(h.v);
    free(h.in.v);
    for (int i = 0; i < nr; i++) free(rjson[i]);
    free(rjson);
    free(rhash);
    if (rc) return -1;
  }
  p->round_seconds = tl_now() - t0;
  if (getenv("TUNELUA_ANSOR_PROFILE"))
    fprintf(stderr, "search round %.3f s: sample %.3f, lower %.3f, features %.3f, predict %.3f, "
            "mutate %.3f; %d states scored\n", p->round_seconds, p->prof[0], p->prof[1], p->prof[2],
            p->prof[3], p->prof[4], p->round_population);
  return 0;
}

TL_EXPORT double tl_ansor_policy_round_seconds(const tl_ansor_policy *p) { return p->round_seconds; }
TL_EXPORT int tl_ansor_policy_round_population(const tl_ansor_policy *p) { return p->round_population; }

/* ---- measured states --------------------------------------------------------------------- */

TL_EXPORT int tl_ansor_policy_add_measured(tl_ctx *ctx, tl_ansor_policy *p, const char *steps_json,
                                           double flops) {
  if (!steps_json) return tl_err(ctx, TL_E_ARG, "add_measured: no steps");
  tl_sched *s;
  if (tl_sched_fresh(ctx, p->init, &s)) return -1;
  if (tl_sched_apply_json(ctx, s, steps_json)) {
    tl_sched_free(s);
    return tl_err_prefix(ctx, "add_measured: the steps do not replay on this task: ");
  }
  uint64_t h = tl_sched_hash(s);
  measured m = {tl_strdup(tl_sched_json(s)), h, flops > 0 && isfinite(flops) ? flops : 0, 1, 0,
                NULL, 0, 0};
  tl_sched_free(s);
  hset_add(&p->seen, h);
  TL_VEC_PUSH(p->meas, m);
  return 0;
}

TL_EXPORT int tl_ansor_policy_num_measured(const tl_ansor_policy *p) { return p->meas.n; }

TL_EXPORT int tl_ansor_policy_is_measured(const tl_ansor_policy *p, const tl_sched *s) {
  return hset_has(&p->seen, tl_sched_hash(s));
}

/* Give the model the measured states it has not had yet (the model keeps
** every state it was given and retrains on all of them); each state is
** lowered and featurized once and its rows are kept for the initial
** populations of later rounds. */
TL_EXPORT int tl_ansor_policy_update_model(tl_ctx *ctx, tl_ansor_policy *p, struct tl_ansor_model *m) {
  if (!m || !p->meas.n) return 0;
  /* featurize the states not featurized yet */
  candvec v = {0};
  int *which = tl_malloc(sizeof(int) * (size_t)p->meas.n);
  for (int i = 0; i < p->meas.n; i++) {
    measured *me = &p->meas.v[i];
    if (me->featurized) continue;
    me->featurized = 1;
    me->nrows = -1;
    tl_ctx sub = {0};
    tl_sched *s;
    if (tl_sched_fresh(&sub, p->init, &s)) continue;
    if (tl_sched_apply_json(&sub, s, me->json)) {
      tl_sched_free(s);
      continue;
    }
    cand c = {s, me->hash, 0, NULL, 0, NULL};
    which[v.n] = i;
    TL_VEC_PUSH(v, c);
  }
  lower_job j = {p, v.v, {0, 0}};
  tl_pool_for(tl_pool_global(), v.n, featurize_one, &j);
  for (int k = 0; k < v.n; k++) {
    measured *me = &p->meas.v[which[k]];
    me->nrows = v.v[k].nrows;
    me->rows = v.v[k].rows;
    v.v[k].rows = NULL;
  }
  free(which);
  cands_free(&v);
  /* the featurized states the model has not had, packed */
  int total = 0, k = 0;
  for (int i = 0; i < p->meas.n; i++)
    if (p->meas.v[i].nrows >= 0 && !p->meas.v[i].trained) total += p->meas.v[i].nrows;
  float *rows = tl_malloc(sizeof(float) * NFEAT * (size_t)(total + 1));
  int *off = tl_malloc(sizeof(int) * (size_t)(p->meas.n + 1));
  double *fk = tl_malloc(sizeof(double) * (size_t)(p->meas.n + 1));
  int at = 0;
  for (int i = 0; i < p->meas.n; i++) {
    measured *me = &p->meas.v[i];
    if (me->nrows < 0 || me->trained) continue;
    me->trained = 1;
    off[k] = at;
    if (me->nrows) memcpy(rows + (size_t)at * NFEAT, me->rows, sizeof(float) * NFEAT * (size_t)me->nrows);
    at += me->nrows;
    fk[k++] = me->flops;
  }
  off[k] = at;
  int rc = k ? tl_ansor_search_update(ctx, m, k, rows, off, fk) : 0;
  free(fk);
  free(rows);
  free(off);
  return rc;
}
