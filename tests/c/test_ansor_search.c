/* Unit tests for the auto-scheduler's sketches, annotation and mutations
** (core/ansor/sketch.c, annotate.c): a conv2d + relu under the CPU rules
** (three sketches: cache write with fusion at two levels... as listed
** below), random states that lower, and every mutation kind giving states
** that lower and differ from their parent in the mutated step only. */
#include <string.h>

#include "ansor/search.h"
#include "topi/topi.h"
#include "conv_dag.h"
#include "tl_test.h"

/* A conv2d (op "conv2d" or "conv2d_nhwc", stride 1, padding 1) of data xs
** by kernel ws, followed by a relu when relu is set, scheduled; args gets the
** placeholders and the output of the schedule's dag. */
static tl_sched *conv_sched(tl_ctx *ctx, const char *op, int64_t xs[4], int64_t ws[4], int relu,
                            int *args, int *nargs) {
  tl_dag *dag = tl_dag_new();
  int x = -1, w = -1, out[8], n = 0;
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "data", 4, xs, TL_FLOAT32, &x), 0);
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "kernel", 4, ws, TL_FLOAT32, &w), 0);
  int in[2] = {x, w};
  CHECK_EQ_INT(tl_topi_op(ctx, dag, op, in, 2,
                          "{\"strides\":[1,1],\"padding\":[1,1,1,1],\"dilation\":[1,1]}", out, 8, &n), 0);
  return tl_test_sched_topi(ctx, dag, out, n, relu, args, nargs);
}

static tl_sched *conv_relu(tl_ctx *ctx, int *args, int *nargs) {
  int64_t xs[4] = {1, 8, 12, 12}, ws[4] = {16, 8, 3, 3};
  return conv_sched(ctx, "conv2d", xs, ws, 1, args, nargs);
}

static void lowers(tl_ctx *ctx, tl_sched *s, const int *args, int nargs) {
  tl_lowered *f;
  CHECK_MSG(tl_lower(ctx, s, args, nargs, "f", &f) == 0, "%s\n%s", tl_errmsg(ctx), tl_sched_json(s));
  tl_lowered_free(f);
}

static tl_ansor_env cpu_env(void) {
  tl_ansor_env env;
  memset(&env, 0, sizeof env);
  env.structure = "SSRSRS";
  env.hw.v[0] = 4;
  env.hw.v[1] = env.hw.v[2] = 64;
  tl_ansor_params p = {0.05, 1, 50, 0.2, 2048, 4, 0.85, 64, 16, 0};
  env.p = p;
  return env;
}

TL_TEST(ansor_sketch_annotate_mutate) {
  tl_ctx *ctx = tl_ctx_new();
  int args[8], nargs;
  tl_sched *init = conv_relu(ctx, args, &nargs);
  tl_ansor_env env = cpu_env();
  tl_ansor_sketch_vec sk = {0};
  CHECK_EQ_INT(tl_ansor_gen_sketches(ctx, &env, init, &sk), 0);
  /* fusion of relu at tile levels 1 and 2, plain tiling */
  CHECK_EQ_INT(sk.n, 3);
  CHECK_MSG(strstr(tl_sched_json(sk.v[0].s), "[\"CA\", 3, 4, 3]") != NULL, "%s", tl_sched_json(sk.v[0].s));
  CHECK(strstr(tl_sched_json(sk.v[1].s), "[\"CA\", 3, 4, 7]") != NULL);
  CHECK(strstr(tl_sched_json(sk.v[2].s), "\"FSP\"") == NULL);
  for (int i = 0; i < sk.n; i++) {
    CHECK_EQ_INT(sk.v[i].open.n, 7);   /* 4 spatial and 3 reduction splits */
    lowers(ctx, sk.v[i].s, args, nargs);
  }
  uint64_t rng = 42;
  int made[4] = {0}, par_changed = 0;
  for (int k = 0; k < 60; k++) {
    tl_sched *s = tl_ansor_annotate(ctx, &env, &sk.v[k % sk.n], &rng);
    CHECK_MSG(s != NULL, "%s", tl_errmsg(ctx));
    lowers(ctx, s, args, nargs);
    for (int kind = TL_ANSOR_MUT_TILE; kind <= TL_ANSOR_MUT_PARALLEL; kind++) {
      tl_ctx *sub = tl_ctx_new();
      tl_sched *m = tl_ansor_mutate_kind(sub, &env, s, kind, &rng);
      if (m) {
        made[kind]++;
        CHECK_EQ_INT(tl_sched_num_steps(m), tl_sched_num_steps(s));
        CHECK(tl_sched_hash(m) != tl_sched_hash(s));
        lowers(ctx, m, args, nargs);
        if (kind == TL_ANSOR_MUT_PARALLEL) par_changed++;
        tl_sched_free(m);
      }
      tl_ctx_free(sub);
    }
    tl_sched_free(s);
  }
  CHECK_MSG(made[0] > 30 && made[1] > 10 && made[3] > 5, "mutations made: tile %d unroll %d "
            "location %d parallel %d", made[0], made[1], made[2], made[3]);
  CHECK(par_changed > 0);
  for (int i = 0; i < sk.n; i++) tl_ansor_sketch_free(&sk.v[i]);
  TL_VEC_FREE(sk);
  tl_sched_free(init);
  tl_ctx_free(ctx);
}

/* An NHWC conv2d with 32 output channels (the vectorized axis), under CPU
** rules with 16 lanes (vector_unit_bytes 64): about half the tiled states
** draw a register tile (the innermost output-channel length a multiple of
** 16, vectorized; 8..28 accumulators), and every state lowers. */
static tl_sched *conv_nhwc(tl_ctx *ctx, int *args, int *nargs) {
  int64_t xs[4] = {1, 14, 14, 8}, ws[4] = {3, 3, 8, 32};
  return conv_sched(ctx, "conv2d_nhwc", xs, ws, 0, args, nargs);
}

TL_TEST(ansor_register_tile) {
  tl_ctx *ctx = tl_ctx_new();
  int args[8], nargs;
  tl_sched *init = conv_nhwc(ctx, args, &nargs);
  tl_ansor_env env = cpu_env();
  tl_ansor_sketch_vec sk = {0};
  CHECK_EQ_INT(tl_ansor_gen_sketches(ctx, &env, init, &sk), 0);
  CHECK(sk.n >= 2);
  for (int i = 0; i < sk.n; i++) CHECK_EQ_INT(sk.v[i].tiles.n, 5);   /* 4 spatial splits */
  uint64_t rng = 7;
  int reg = 0, wide_vec = 0, total = 200;
  for (int k = 0; k < total; k++) {
    const tl_ansor_sketch *t = &sk.v[k % sk.n];
    tl_sched *s = tl_ansor_annotate(ctx, &env, t, &rng);
    CHECK_MSG(s != NULL, "%s", tl_errmsg(ctx));
    lowers(ctx, s, args, nargs);
    /* the innermost lengths of the tiled stage's spatial splits */
    double acc = 1;
    int64_t last = 1;
    for (int a = 0; a < 4; a++) {
      const tl_step *st = &s->steps.v[t->tiles.v[1 + a]];
      int64_t in = st->ints[st->nints - 1];
      if (a == 3) last = in;
      acc *= a == 3 ? (double)in / 16 : (double)in;
    }
    if (last % 16 == 0 && acc >= 8 && acc <= 28) reg++;
    /* a vectorized iterator of 32 or 64 lanes (several registers) */
    for (int st = 0; st < tl_sched_num_stages(s); st++)
      for (int i = 0; i < tl_sched_num_iters(s, st); i++) {
        int64_t e = tl_sched_iter_extent(s, st, i);
        if (tl_sched_iter_annotation(s, st, i) == TL_ANN_VECTORIZE && e > 16 && e % 16 == 0) wide_vec++;
      }
    tl_sched_free(s);
  }
  CHECK_MSG(reg > total / 4, "register tiles drawn: %d of %d", reg, total);
  CHECK_MSG(wide_vec > 0, "no vectorized iterator of a multiple of the lanes above them");
  for (int i = 0; i < sk.n; i++) tl_ansor_sketch_free(&sk.v[i]);
  TL_VEC_FREE(sk);
  tl_sched_free(init);
  tl_ctx_free(ctx);
}
