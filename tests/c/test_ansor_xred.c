/* Unit tests for the auto-scheduler's GPU cross-thread reduction (core/ansor/sketch.c
** rule "cross-thread-reduction", annotate.c thread counts, core/te/lower.c emit_xred), on
** NVIDIA-like hardware params (1024 threads, warp 32; no device needed):
**   - a batch-2 dense + relu gets two sketches: the root form and the fused one (the
**     reduction computed at the relu's outer iterator, both bound to threadIdx.x through one
**     split); the fused one's states draw thread
**     counts 32 x 2^a or 48 x 2^a up to 1024, lower to one tree in shared memory with
**     barriers, replay from their printed steps to the same state and lowering, and the
**     tile-size mutation moves the thread count among the same candidates;
**   - a dense without consumer gets the plain form (the fused reduction split by the
**     thread count);
**   - a 56x56 conv does not get it, and the trace says why. */
#include <string.h>

#include "ansor/search.h"
#include "topi/topi.h"
#include "conv_dag.h"
#include "tl_test.h"

static tl_sched *dense_sched(tl_ctx *ctx, int64_t m, int64_t k, int64_t n, int relu, int *args,
                             int *nargs) {
  tl_dag *dag = tl_dag_new();
  int x = -1, w = -1, out[8], no = 0;
  int64_t xs[2] = {m, k}, ws[2] = {n, k};
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "x", 2, xs, TL_FLOAT32, &x), 0);
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "w", 2, ws, TL_FLOAT32, &w), 0);
  int in[2] = {x, w};
  CHECK_EQ_INT(tl_topi_op(ctx, dag, "dense", in, 2, NULL, out, 8, &no), 0);
  return tl_test_sched_topi(ctx, dag, out, no, relu, args, nargs);
}

static tl_ansor_env gpu_env(tl_buf *trace) {
  tl_ansor_env env;
  memset(&env, 0, sizeof env);
  env.gpu = 1;
  env.structure = "SSSRRSRS";
  int64_t hw[8] = {-1, 16, 64, 49152, 2147483647, 1024, 8, 32};
  memcpy(env.hw.v, hw, sizeof hw);
  tl_ansor_params p = {0.05, 1, 50, 0.2, 2048, 4, 0.85, 64, 16, 0};
  env.p = p;
  env.trace = trace;
  return env;
}

/* The cross-thread sketch computed in its consumer (fused) or at root (not fused), or -1. */
static int xred_sketch(const tl_ansor_sketch_vec *sk, int fused) {
  for (int i = 0; i < sk->n; i++)
    for (int st = 0; st < sk->v[i].s->stages.n; st++)
      if (tl_ansor_stage_xred(sk->v[i].s, st) &&
          (sk->v[i].s->stages.v[st].compute_at == TL_CA_ITER) == fused)
        return i;
  return -1;
}

/* The thread count of state s: the one length of the split its AN threadIdx.x follows. */
static int64_t thread_count(const tl_sched *s) {
  for (int i = 0; i + 1 < s->steps.n; i++) {
    const tl_step *t = &s->steps.v[i], *a = &s->steps.v[i + 1];
    if (t->kind == TL_STEP_SP && t->nints == 1 && a->kind == TL_STEP_AN &&
        a->annotation == TL_ANN_THREAD_X && a->stage_id == t->stage_id && a->iter_id == t->iter_id + 1)
      return t->ints[0];
  }
  return -1;
}

static int valid_count(int64_t t) {
  for (int64_t x = 32; x <= 1024; x *= 2)
    if (t == x || (t == x / 2 * 3 && x / 2 * 3 <= 1024)) return 1;
  return 0;
}

static void lowers_like_replay(tl_ctx *ctx, tl_sched *s, const int *args, int nargs) {
  tl_lowered *f;
  CHECK_MSG(tl_lower(ctx, s, args, nargs, "f", &f) == 0, "%s\n%s", tl_errmsg(ctx), tl_sched_json(s));
  const char *text = tl_lowered_text(f);
  CHECK_MSG(strstr(text, "barrier") || strstr(text, "BARRIER") || strstr(text, "sync"), "%s", text);
  /* printed steps -> parsed and replayed on a fresh state: the same state, the same loops */
  tl_sched *r;
  CHECK_EQ_INT(tl_sched_fresh(ctx, s, &r), 0);
  char *json = strdup(tl_sched_json(s));
  CHECK_MSG(tl_sched_apply_json(ctx, r, json) == 0, "%s\n%s", tl_errmsg(ctx), json);
  CHECK_STREQ(tl_sched_json(r), json);
  tl_lowered *g;
  CHECK_EQ_INT(tl_lower(ctx, r, args, nargs, "f", &g), 0);
  CHECK_STREQ(tl_lowered_text(g), text);
  tl_lowered_free(g);
  tl_lowered_free(f);
  tl_sched_free(r);
  free(json);
}

TL_TEST(ansor_xred_dense_relu) {
  tl_ctx *ctx = tl_ctx_new();
  int args[8], nargs;
  tl_sched *init = dense_sched(ctx, 2, 768, 16, 1, args, &nargs);
  tl_buf trace = {0};
  tl_ansor_env env = gpu_env(&trace);
  tl_ansor_sketch_vec sk = {0};
  CHECK_EQ_INT(tl_ansor_gen_sketches(ctx, &env, init, &sk), 0);
  int xi = xred_sketch(&sk, 1), xr = xred_sketch(&sk, 0);
  CHECK_MSG(xi >= 0 && xr >= 0, "fused and root cross-thread sketches among %d: %d, %d", sk.n, xi, xr);
  CHECK_MSG(!strstr(tl_sched_json(sk.v[xr].s), "\"CA\""), "%s", tl_sched_json(sk.v[xr].s));
  const char *j = tl_sched_json(sk.v[xi].s);
  /* the relu's last axis split by the thread count (open), bound; the dense follows it */
  CHECK_MSG(strstr(j, "\"FSP\"") && strstr(j, "\"CA\"") && sk.v[xi].threads.n == 2, "%s", j);
  uint64_t rng = 7;
  int seen_pow2 = 0, seen_3 = 0, changed = 0;
  for (int k = 0; k < 40; k++) {
    tl_ctx *sub = tl_ctx_new();
    tl_sched *s = tl_ansor_annotate(sub, &env, &sk.v[xi], &rng);
    CHECK_MSG(s != NULL, "%s", tl_errmsg(sub));
    int64_t t = thread_count(s);
    CHECK_MSG(valid_count(t), "thread count %lld", (long long)t);
    seen_pow2 |= (t & (t - 1)) == 0;
    seen_3 |= (t & (t - 1)) != 0;
    lowers_like_replay(ctx, s, args, nargs);
    for (int m = 0; m < 6; m++) {
      tl_sched *mu = tl_ansor_mutate_kind(sub, &env, s, TL_ANSOR_MUT_TILE, &rng);
      if (!mu) continue;
      int64_t u = thread_count(mu);
      CHECK_MSG(valid_count(u), "mutated thread count %lld", (long long)u);
      changed += u != t;
      lowers_like_replay(ctx, mu, args, nargs);
      tl_sched_free(mu);
    }
    tl_sched_free(s);
    tl_ctx_free(sub);
  }
  CHECK_MSG(seen_pow2 && seen_3, "thread counts: powers of two %d, 3 x 2^a %d", seen_pow2, seen_3);
  CHECK_MSG(changed > 0, "no mutation changed the thread count");
  for (int k = 0; k < 10; k++) {   /* the root form: the relu is a kernel of its own */
    tl_sched *s = tl_ansor_annotate(ctx, &env, &sk.v[xr], &rng);
    CHECK_MSG(s != NULL, "%s", tl_errmsg(ctx));
    CHECK(valid_count(thread_count(s)));
    lowers_like_replay(ctx, s, args, nargs);
    tl_sched_free(s);
  }
  for (int i = 0; i < sk.n; i++) tl_ansor_sketch_free(&sk.v[i]);
  TL_VEC_FREE(sk);
  tl_buf_free(&trace);
  tl_sched_free(init);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_xred_plain_and_trace) {
  tl_ctx *ctx = tl_ctx_new();
  int args[8], nargs;
  /* no consumer: the fused reduction is split by the thread count */
  tl_sched *init = dense_sched(ctx, 1, 4096, 8, 0, args, &nargs);
  tl_buf trace = {0};
  tl_ansor_env env = gpu_env(&trace);
  tl_ansor_sketch_vec sk = {0};
  CHECK_EQ_INT(tl_ansor_gen_sketches(ctx, &env, init, &sk), 0);
  int xi = xred_sketch(&sk, 0);
  CHECK(xi >= 0 && xred_sketch(&sk, 1) < 0);
  CHECK_MSG(!strstr(tl_sched_json(sk.v[xi].s), "\"CA\""), "%s", tl_sched_json(sk.v[xi].s));
  uint64_t rng = 3;
  for (int k = 0; k < 10; k++) {
    tl_sched *s = tl_ansor_annotate(ctx, &env, &sk.v[xi], &rng);
    CHECK_MSG(s != NULL, "%s", tl_errmsg(ctx));
    lowers_like_replay(ctx, s, args, nargs);
    tl_sched_free(s);
  }
  for (int i = 0; i < sk.n; i++) tl_ansor_sketch_free(&sk.v[i]);
  TL_VEC_FREE(sk);
  sk.n = 0;
  tl_sched_free(init);
  /* a big output: no cross-thread reduction, and the trace says why */
  tl_dag *dag = tl_dag_new();
  int x = -1, w = -1, out[8], no = 0;
  int64_t xs[4] = {1, 56, 56, 64}, ws[4] = {3, 3, 64, 64};
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "data", 4, xs, TL_FLOAT32, &x), 0);
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "kernel", 4, ws, TL_FLOAT32, &w), 0);
  int in[2] = {x, w};
  CHECK_EQ_INT(tl_topi_op(ctx, dag, "conv2d_nhwc", in, 2,
                          "{\"strides\":[1,1],\"padding\":[1,1,1,1],\"dilation\":[1,1]}", out, 8, &no), 0);
  int r = out[no - 1];
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &r, 1, &init), 0);
  tl_dag_free(dag);
  CHECK_EQ_INT(tl_ansor_gen_sketches(ctx, &env, init, &sk), 0);
  CHECK_EQ_INT(xred_sketch(&sk, 0), -1);
  CHECK_EQ_INT(xred_sketch(&sk, 1), -1);
  CHECK_MSG(trace.s && strstr(trace.s, "cross-thread-reduction: stage 'conv2d_nhwc': output of 200704 "
                                       "elements for a reduction of 576"),
            "%s", trace.s ? trace.s : "(no trace)");
  for (int i = 0; i < sk.n; i++) tl_ansor_sketch_free(&sk.v[i]);
  TL_VEC_FREE(sk);
  tl_buf_free(&trace);
  tl_sched_free(init);
  tl_ctx_free(ctx);
}
