/* Unit tests for core/te/schedule.c and schedule_json.c: the stage and
** iterator table after each kind of step, the exact messages of illegal
** steps (and that they change nothing), stage-id shifts of cache_read /
** cache_write / rfactor, the §2.4 JSON round trip and its parse errors,
** replay of an auto-scheduler record (with FSP), copies and hashes; every
** row of the step table through JSON and back, and tl_sched_step. */
#include <jansson.h>
#include <string.h>

#include "te/schedule.h"
#include "tl_test.h"

/* C[i, j] = sum_k A[i, k] * B[k, j] */
static int mk_matmul(tl_dag *dag, tl_ctx *ctx, int64_t M, int64_t N, int64_t K) {
  int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  int ta, tb, tc = -1;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 2, sa, TL_T_F32, &ta), 0);
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "B", 2, sb, TL_T_F32, &tb), 0);
  const char *names[2] = {"i", "j"};
  tl_ref ax[2];
  tl_te_axis_vars(dag, 2, names, ax);
  tl_ref k = tl_te_reduce_axis(dag, "k", K);
  tl_ref ia[2] = {ax[0], k}, ib[2] = {k, ax[1]};
  tl_ref body = tl_mul(dag->ir, tl_te_load(dag, ta, ia, 2), tl_te_load(dag, tb, ib, 2));
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "C", "matmul", 2, sc, ax, 1, &body, TL_RED_SUM, &k, 1, 0, &tc), 0);
  return tc;
}

/* out(i, j) = in(i, j) op c: a 2-D elementwise op named name. */
static int mk_ew(tl_dag *dag, tl_ctx *ctx, const char *name, int in, int op, double c) {
  const tl_te_op *xo = tl_dag_op(dag, tl_dag_tensor(dag, in)->op);
  int64_t shape[2] = {xo->shape[0], xo->shape[1]};
  const char *names[2] = {"i", "j"};
  tl_ref ax[2];
  tl_te_axis_vars(dag, 2, names, ax);
  tl_ref body = tl_binary(dag->ir, op, tl_te_load(dag, in, ax, 2), tl_imm_float(dag->ir, TL_T_F32, c));
  int t = -1;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, name, "elemwise", 2, shape, ax, 1, &body, TL_RED_NONE, NULL, 0, 0, &t), 0);
  return t;
}

/* "name(extent)" of each iterator of stage st, space separated. */
static const char *iters(tl_sched *s, int st) {
  static char buf[1024];
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < tl_sched_num_iters(s, st); i++)
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s(%lld)", i ? " " : "", tl_sched_iter_name(s, st, i),
                          (long long)tl_sched_iter_extent(s, st, i));
  return buf;
}

typedef struct {
  tl_ctx *ctx;
  tl_dag *dag;
  tl_sched *s;
  int c;
} fx;

static fx matmul_fx(int64_t M, int64_t N, int64_t K) {
  fx f;
  f.ctx = tl_ctx_new();
  f.dag = tl_dag_new();
  f.c = mk_matmul(f.dag, f.ctx, M, N, K);
  CHECK_EQ_INT(tl_sched_new(f.ctx, f.dag, &f.c, 1, &f.s), 0);
  return f;
}

static void fx_free(fx *f) {
  tl_sched_free(f->s);
  tl_dag_free(f->dag);
  tl_ctx_free(f->ctx);
}

TL_TEST(sched_stages_of_matmul) {
  fx f = matmul_fx(64, 48, 32);
  tl_sched *s = f.s;
  CHECK_EQ_INT(tl_sched_num_stages(s), 3);
  CHECK_STREQ(tl_sched_stage_name(s, 0), "A");
  CHECK_STREQ(tl_sched_stage_name(s, 2), "C");
  CHECK_EQ_INT(tl_sched_stage_find(s, "B"), 1);
  CHECK_EQ_INT(tl_sched_stage_find(s, "nope"), -1);
  CHECK_EQ_INT(tl_sched_num_iters(s, 0), 0);
  CHECK_STREQ(iters(s, 2), "i(64) j(48) k(32)");
  CHECK_EQ_INT(tl_sched_iter_kind(s, 2, 2), TL_ITER_REDUCE);
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 2, NULL, NULL), TL_CA_ROOT);
  CHECK_EQ_INT(tl_sched_num_steps(s), 0);
  CHECK_STREQ(tl_sched_json(s), "[]");
  fx_free(&f);
}

TL_TEST(sched_split_forms) {
  fx f = matmul_fx(64, 48, 30);
  tl_sched *s = f.s;
  int64_t l1[1] = {8}, l3[3] = {2, 1, 4}, lp[1] = {4}, lk[1] = {7};
  CHECK_EQ_INT(tl_sched_split(f.ctx, s, 2, 0, 1, l1, 1), 0);
  CHECK_STREQ(iters(s, 2), "i.outer(8) i.inner(8) j(48) k(30)");
  CHECK_EQ_INT(tl_sched_split(f.ctx, s, 2, 2, 3, l3, 1), 0);
  CHECK_STREQ(iters(s, 2), "i.outer(8) i.inner(8) j.0(6) j.1(2) j.2(1) j.3(4) k(30)");
  CHECK_EQ_INT(tl_sched_split(f.ctx, s, 2, 6, 1, lk, 1), 0);   /* 30 by 7: ceil */
  CHECK_STREQ(iters(s, 2), "i.outer(8) i.inner(8) j.0(6) j.1(2) j.2(1) j.3(4) k.outer(5) k.inner(7)");
  CHECK_EQ_INT(tl_sched_split(f.ctx, s, 2, 0, 1, lp, 0), 0);   /* nparts */
  CHECK_STREQ(iters(s, 2),
              "i.outer.outer(4) i.outer.inner(2) i.inner(8) j.0(6) j.1(2) j.2(1) j.3(4) k.outer(5) k.inner(7)");
  CHECK_EQ_INT(tl_sched_iter_kind(s, 2, 8), TL_ITER_REDUCE);
  CHECK_STREQ(tl_sched_json(s), "[[\"SP\", 2, 0, 64, [8], 1], [\"SP\", 2, 2, 48, [2, 1, 4], 1], "
                                "[\"SP\", 2, 6, 30, [7], 1], [\"SP\", 2, 0, 8, [4], 0]]");
  /* op axes keep node ids 0..2; a split-away node has no position */
  CHECK_EQ_INT(tl_sched_node_iter(s, 2, 0), -1);
  CHECK_STREQ(tl_sched_node_name(s, 2, 2), "k");
  int node = tl_sched_iter_node(s, 2, 2);   /* i.inner */
  int ord[9] = {8, 7, 6, 5, 4, 3, 2, 1, 0};
  CHECK_EQ_INT(tl_sched_reorder(f.ctx, s, 2, 9, ord), 0);
  CHECK_EQ_INT(tl_sched_node_iter(s, 2, node), 6);
  fx_free(&f);
}

TL_TEST(sched_fuse_reorder_annotate) {
  fx f = matmul_fx(16, 12, 8);
  tl_sched *s = f.s;
  int ids[2] = {0, 1};
  CHECK_EQ_INT(tl_sched_fuse(f.ctx, s, 2, 2, ids), 0);
  CHECK_STREQ(iters(s, 2), "i.j.fused(192) k(8)");
  CHECK_EQ_INT(tl_sched_iter_kind(s, 2, 0), TL_ITER_SPATIAL);
  CHECK_EQ_INT(tl_sched_annotate(f.ctx, s, 2, 0, TL_ANN_PARALLEL), 0);
  CHECK_EQ_INT(tl_sched_iter_annotation(s, 2, 0), TL_ANN_PARALLEL);
  CHECK_EQ_INT(tl_sched_annotate(f.ctx, s, 2, 1, TL_ANN_UNROLL), 0);
  int ord[2] = {1, 0};
  CHECK_EQ_INT(tl_sched_reorder(f.ctx, s, 2, 2, ord), 0);
  CHECK_STREQ(iters(s, 2), "k(8) i.j.fused(192)");
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_PR, (int64_t[]){2, 0}, 2, NULL, 0, "auto_unroll_max_step$16", NULL), 0);
  /* a fuse of spatial and reduction iterators is mixed */
  int ids2[2] = {0, 1};
  CHECK_EQ_INT(tl_sched_fuse(f.ctx, s, 2, 2, ids2), 0);
  CHECK_EQ_INT(tl_sched_iter_kind(s, 2, 0), TL_ITER_MIXED);
  CHECK_STREQ(tl_sched_json(s), "[[\"FU\", 2, [0, 1]], [\"AN\", 2, 0, 3], [\"AN\", 2, 1, 1], "
                                "[\"RE\", 2, [1, 0]], [\"PR\", 2, 0, \"auto_unroll_max_step$16\"], "
                                "[\"FU\", 2, [0, 1]]]");
  fx_free(&f);
}

/* step must fail with exactly msg and leave the schedule as it was */
#define CHECK_REFUSED(call, msg)                                              \
  do {                                                                        \
    char before_[4096];                                                       \
    snprintf(before_, sizeof before_, "%s", tl_sched_print(s));               \
    int n_ = tl_sched_num_steps(s);                                           \
    CHECK_EQ_INT((call), TL_E_SCHED);                                         \
    CHECK_STREQ(tl_errmsg(f.ctx), msg);                                       \
    tl_clearerr(f.ctx);                                                       \
    CHECK_EQ_INT(tl_sched_num_steps(s), n_);                                  \
    CHECK_STREQ(tl_sched_print(s), before_);                                  \
  } while (0)

TL_TEST(sched_illegal_steps) {
  fx f = matmul_fx(16, 12, 8);
  tl_sched *s = f.s;
  int64_t l0[1] = {0}, l4[1] = {4};
  int bad[3] = {0, 0, 1}, gap[2] = {0, 2};
  CHECK_REFUSED(tl_sched_split(f.ctx, s, 2, 5, 1, l4, 1),
                "split: stage 'C' has no iterator 5 (it has 3: i, j, k)");
  CHECK_REFUSED(tl_sched_split(f.ctx, s, 2, 0, 1, l0, 1),
                "split: lengths of iterator 'i' of stage 'C' must be positive, got 0");
  CHECK_REFUSED(tl_sched_split(f.ctx, s, 7, 0, 1, l4, 1),
                "split: no stage 7 (the schedule has 3: A, B, C)");
  CHECK_REFUSED(tl_sched_split(f.ctx, s, 0, 0, 1, l4, 1), "split: stage 'A' is a placeholder");
  CHECK_REFUSED(tl_sched_reorder(f.ctx, s, 2, 3, bad),
                "reorder: [0, 0, 1] is not a permutation of the 3 iterators of stage 'C' (i, j, k)");
  CHECK_REFUSED(tl_sched_reorder(f.ctx, s, 2, 2, gap),
                "reorder: [0, 2] is not a permutation of the 3 iterators of stage 'C' (i, j, k)");
  CHECK_REFUSED(tl_sched_fuse(f.ctx, s, 2, 2, gap),
                "fuse: iterators 0 and 2 of stage 'C' are not consecutive ('i', 'k')");
  CHECK_REFUSED(tl_sched_fuse(f.ctx, s, 2, 2, (int[]){2, 3}),
                "fuse: stage 'C' has no iterator 3 (it has 3: i, j, k)");
  CHECK_REFUSED(tl_sched_annotate(f.ctx, s, 2, 2, TL_ANN_THREAD_Y),
                "bind: cannot bind reduction iterator 'k' of stage 'C' to threadIdx.y");
  CHECK_REFUSED(tl_sched_annotate(f.ctx, s, 2, 2, TL_ANN_PARALLEL),
                "parallel: cannot parallelize reduction iterator 'k' of stage 'C'");
  CHECK_REFUSED(tl_sched_annotate(f.ctx, s, 2, 2, TL_ANN_VECTORIZE),
                "vectorize: cannot vectorize reduction iterator 'k' of stage 'C'");
  CHECK_REFUSED(tl_sched_annotate(f.ctx, s, 2, 0, 12),
                "annotate: unknown annotation 12 for iterator 'i' of stage 'C'");
  CHECK_REFUSED(tl_sched_compute_inline(f.ctx, s, 2), "compute_inline: stage 'C' is a reduction");
  CHECK_REFUSED(tl_sched_compute_at(f.ctx, s, 0, 2, 0), "compute_at: stage 'A' is a placeholder");
  CHECK_REFUSED(tl_sched_cache_write(f.ctx, s, 2, "texture", NULL),
                "cache_write: unknown scope 'texture' for stage 'C' (expected global, local or shared)");
  int64_t rd = 1;
  CHECK_REFUSED(tl_sched_step(f.ctx, s, TL_STEP_CHR, (int64_t[]){0}, 1, &rd, 1, "shared", NULL),
                "cache_read: stage 'B' does not read 'A'");
  CHECK_REFUSED(tl_sched_step(f.ctx, s, TL_STEP_SA, (int64_t[]){2, 2, 8, 1}, 4, NULL, 0, NULL, NULL),
                "storage_align: iterator 'k' of stage 'C' is a reduction");
  CHECK_REFUSED(tl_sched_step(f.ctx, s, TL_STEP_PR, (int64_t[]){2, 0}, 2, NULL, 0, "auto_unroll_max_step$x", NULL),
                "pragma: expected \"auto_unroll_max_step$<N>\" for iterator 'i' of stage 'C', got "
                "\"auto_unroll_max_step$x\"");
  /* annotations: no second different one, one thread tag per stage */
  CHECK_EQ_INT(tl_sched_annotate(f.ctx, s, 2, 0, TL_ANN_PARALLEL), 0);
  CHECK_REFUSED(tl_sched_annotate(f.ctx, s, 2, 0, TL_ANN_VECTORIZE),
                "vectorize: iterator 'i' of stage 'C' is already annotated parallel");
  /* cache_write needs an untransformed stage */
  CHECK_REFUSED(tl_sched_cache_write(f.ctx, s, 2, "local", NULL),
                "cache_write: stage 'C' has already been transformed (cache_write must come first)");
  fx_free(&f);
}

/* A -> B (ew) -> C (ew), and A -> D (ew): B is no producer of D */
TL_TEST(sched_compute_at_rules) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t sa[2] = {16, 16};
  int a;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 2, sa, TL_T_F32, &a), 0);
  int b = mk_ew(dag, ctx, "B", a, TL_IR_ADD, 1);
  int c = mk_ew(dag, ctx, "C", b, TL_IR_MUL, 2);
  int d = mk_ew(dag, ctx, "D", a, TL_IR_MUL, 3);
  int outs[2] = {c, d};
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, outs, 2, &s), 0);
  fx f = {ctx, dag, s, c};
  CHECK_EQ_INT(tl_sched_num_stages(s), 4);
  CHECK_REFUSED(tl_sched_compute_at(ctx, s, 1, 3, 0), "compute_at: stage 'B' is not a producer of 'D'");
  CHECK_REFUSED(tl_sched_compute_at(ctx, s, 2, 1, 0), "compute_at: stage 'C' is not a producer of 'B'");
  CHECK_REFUSED(tl_sched_compute_at(ctx, s, 1, 1, 0), "compute_at: stage 'B' cannot be computed at itself");
  CHECK_REFUSED(tl_sched_compute_at(ctx, s, 1, 2, 4),
                "compute_at: stage 'C' has no iterator 4 (it has 2: i, j)");
  CHECK_REFUSED(tl_sched_compute_inline(ctx, s, 2), "compute_inline: stage 'C' is an output");
  int64_t l4[1] = {4};
  CHECK_EQ_INT(tl_sched_split(ctx, s, 2, 0, 1, l4, 1), 0);
  CHECK_EQ_INT(tl_sched_compute_at(ctx, s, 1, 2, 1), 0);     /* B at C.i.inner */
  int at_stage, at_iter;
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 1, &at_stage, &at_iter), TL_CA_ITER);
  CHECK_EQ_INT(at_stage, 2);
  CHECK_EQ_INT(at_iter, 1);
  /* splitting the target iterator moves the attachment to the innermost part */
  CHECK_EQ_INT(tl_sched_split(ctx, s, 2, 1, 1, l4, 0), 0);
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 1, &at_stage, &at_iter), TL_CA_ITER);
  CHECK_EQ_INT(at_iter, 2);
  CHECK_REFUSED(tl_sched_compute_inline(ctx, s, 2), "compute_inline: stage 'C' is an output");
  int fu[2] = {1, 2};
  CHECK_REFUSED(tl_sched_fuse(ctx, s, 2, 2, (int[]){2, 3}),
                "fuse: stage 'B' is computed at iterator 'i.inner.inner' of stage 'C', which is not "
                "the innermost of the fused iterators");
  CHECK_EQ_INT(tl_sched_fuse(ctx, s, 2, 2, fu), 0);          /* the attachment follows the fuse */
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 1, &at_stage, &at_iter), TL_CA_ITER);
  CHECK_EQ_INT(at_iter, 1);
  /* a stage computed inside another cannot be inlined away under it */
  CHECK_EQ_INT(tl_sched_compute_inline(ctx, s, 1), 0);
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 1, NULL, NULL), TL_CA_INLINED);
  CHECK_EQ_INT(tl_sched_step(ctx, s, TL_STEP_CR, (int64_t[]){1}, 1, NULL, 0, NULL, NULL), 0);
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 1, NULL, NULL), TL_CA_ROOT);
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(sched_stage_insertion) {
  fx f = matmul_fx(16, 12, 8);
  tl_sched *s = f.s;
  int64_t rd = 2;
  int ns = -1;
  /* CHR: the cache stage goes right after the read one */
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_CHR, (int64_t[]){1}, 1, &rd, 1, "shared", &ns), 0);
  CHECK_EQ_INT(ns, 2);
  CHECK_STREQ(tl_sched_stage_name(s, 2), "B.shared");
  CHECK_STREQ(tl_sched_stage_name(s, 3), "C");
  CHECK_EQ_INT(tl_sched_stage_scope(s, 2), TL_SCOPE_SHARED);
  CHECK_STREQ(iters(s, 2), "ax0(8) ax1(12)");
  /* CHW: the cache stage takes C's place, C moves one up */
  CHECK_EQ_INT(tl_sched_cache_write(f.ctx, s, 3, "local", &ns), 0);
  CHECK_EQ_INT(ns, 3);
  CHECK_STREQ(tl_sched_stage_name(s, 3), "C.local");
  CHECK_STREQ(tl_sched_stage_name(s, 4), "C");
  CHECK_STREQ(iters(s, 3), "i.c(16) j.c(12) k(8)");
  CHECK_STREQ(iters(s, 4), "i(16) j(12)");
  /* attachments shift with later insertions */
  CHECK_EQ_INT(tl_sched_compute_at(f.ctx, s, 2, 3, 2), 0);   /* B.shared at C.local.k */
  int at_stage, at_iter;
  int64_t rd2 = 4;
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_CHR, (int64_t[]){3}, 1, &rd2, 1, "local", &ns), 0);   /* C.local.local for C */
  CHECK_EQ_INT(ns, 4);
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 2, &at_stage, &at_iter), TL_CA_ITER);
  CHECK_EQ_INT(at_stage, 3);
  CHECK_EQ_INT(at_iter, 2);
  CHECK_STREQ(tl_sched_json(s), "[[\"CHR\", 1, \"shared\", [2]], [\"CHW\", 3, \"local\"], "
                                "[\"CA\", 2, 3, 2], [\"CHR\", 3, \"local\", [4]]]");
  /* the DAG was rewritten: C.local reads B.shared, C reads C.local.local */
  tl_dag *dag = tl_sched_dag(s);
  char *text = tl_dag_print(dag);
  CHECK_STREQ(text, "A = PLACEHOLDER [16, 8]\n"
                    "B = PLACEHOLDER [8, 12]\n"
                    "B.shared(ax0, ax1) = B[ax0, ax1]\n"
                    "C.local(i.c, j.c) += (A[i.c, k]*B.shared[k, j.c])\n"
                    "C.local.local(ax0, ax1) = C.local[ax0, ax1]\n"
                    "C(i, j) = C.local.local[i, j]\n");
  free(text);
  fx_free(&f);
}

TL_TEST(sched_rfactor_state) {
  fx f = matmul_fx(16, 12, 30);
  tl_sched *s = f.s;
  int64_t l[1] = {8};
  CHECK_EQ_INT(tl_sched_split(f.ctx, s, 2, 2, 1, l, 1), 0);
  int ns = -1;
  CHECK_REFUSED(tl_sched_rfactor(f.ctx, s, 2, 0, 0, &ns),
                "rfactor: iterator 'i' of stage 'C' is not a reduction iterator");
  CHECK_EQ_INT(tl_sched_rfactor(f.ctx, s, 2, 3, 1, &ns), 0);
  CHECK_EQ_INT(ns, 2);
  CHECK_STREQ(tl_sched_stage_name(s, 2), "C.rf");
  CHECK_STREQ(iters(s, 2), "i(16) k.inner.v(8) j(12) k.outer(4)");
  CHECK_STREQ(iters(s, 3), "i(16) j(12) k.inner.v(8)");
  char *text = tl_dag_print(tl_sched_dag(s));
  CHECK_STREQ(text, "A = PLACEHOLDER [16, 30]\n"
                    "B = PLACEHOLDER [30, 12]\n"
                    "C.rf(i, k.inner.v, j) += (A[i, ((k.outer*8) + k.inner.v)]*B[((k.outer*8) + k.inner.v), j])"
                    " where (((k.outer*8) + k.inner.v) < 30)\n"
                    "C(i, j) += C.rf[i, k.inner.v, j]\n");
  free(text);
  fx_free(&f);
}

TL_TEST(sched_json_roundtrip) {
  fx f = matmul_fx(64, 48, 32);
  tl_sched *s = f.s;
  const char *steps =
      "[[\"SP\", 2, 0, 64, [2, 4], 1], [\"SP\", 2, 3, 48, [8], 0], [\"RE\", 2, [0, 3, 1, 4, 5, 2]], "
      "[\"FU\", 2, [0, 1]], [\"AN\", 2, 0, 3], [\"PR\", 2, 0, \"auto_unroll_max_step$64\"], "
      "[\"CHR\", 0, \"local\", [2]], [\"CA\", 1, 3, 2], [\"AN\", 3, 4, 2], [\"SA\", 1, 0, 4, 1]]";
  CHECK_EQ_INT(tl_sched_apply_json(f.ctx, s, steps), 0);
  CHECK_STREQ(tl_sched_json(s), steps);
  tl_sched *r;
  CHECK_EQ_INT(tl_sched_fresh(f.ctx, s, &r), 0);
  CHECK_EQ_INT(tl_sched_num_steps(r), 0);
  CHECK_EQ_INT(tl_sched_apply_json(f.ctx, r, tl_sched_json(s)), 0);
  char a[4096];
  snprintf(a, sizeof a, "%s", tl_sched_print(s));
  CHECK_STREQ(tl_sched_print(r), a);
  CHECK(tl_sched_hash(r) == tl_sched_hash(s));
  tl_sched *c;
  CHECK_EQ_INT(tl_sched_copy(f.ctx, s, &c), 0);
  CHECK_STREQ(tl_sched_print(c), a);
  CHECK_EQ_INT(tl_sched_annotate(f.ctx, c, 3, 1, TL_ANN_UNROLL), 0);
  CHECK(tl_sched_hash(c) != tl_sched_hash(s));
  CHECK_STREQ(tl_sched_print(s), a);                        /* the copy is independent */
  /* one step at a time gives the same */
  tl_sched_free(r);
  CHECK_EQ_INT(tl_sched_fresh(f.ctx, s, &r), 0);
  for (int i = 0; i < tl_sched_num_steps(s); i++) {
    char one[512];
    snprintf(one, sizeof one, "%s", tl_sched_step_json(s, i));
    CHECK_EQ_INT(tl_sched_apply_json(f.ctx, r, one), 0);
  }
  CHECK_STREQ(tl_sched_json(r), steps);
  /* the state form [[], [steps]] */
  tl_sched_free(r);
  CHECK_EQ_INT(tl_sched_fresh(f.ctx, s, &r), 0);
  char state[4096];
  snprintf(state, sizeof state, "[[], %s]", steps);
  CHECK_EQ_INT(tl_sched_apply_json(f.ctx, r, state), 0);
  CHECK_STREQ(tl_sched_json(r), steps);
  tl_sched_free(r);
  tl_sched_free(c);
  fx_free(&f);
}

static void check_parse_error(fx *f, const char *json, int code, const char *msg) {
  char before[2048];
  snprintf(before, sizeof before, "%s", tl_sched_json(f->s));
  CHECK_EQ_INT(tl_sched_apply_json(f->ctx, f->s, json), code);
  CHECK_STREQ(tl_errmsg(f->ctx), msg);
  tl_clearerr(f->ctx);
  CHECK_STREQ(tl_sched_json(f->s), before);
}

TL_TEST(sched_json_errors) {
  fx f = matmul_fx(16, 12, 8);
  check_parse_error(&f, "[[\"SP\", 2, 0, 16, [4], 1]", TL_E_PARSE,
                    "steps: invalid JSON at line 1, column 25: ']' expected near end of file");
  check_parse_error(&f, "{\"a\": 1}", TL_E_PARSE, "steps: expected an array of steps, got an object");
  check_parse_error(&f, "[[\"XX\", 2]]", TL_E_PARSE,
                    "steps[0]: step: unknown kind \"XX\" (expected one of AN FU PR RE SP FSP FFSP SA CA CI "
                    "CR CHR CHW RF)");
  check_parse_error(&f, "[[\"SP\", 2, 0, 16, [4]]]", TL_E_PARSE,
                    "steps[0]: step \"SP\": expected 5 fields after the kind, got 4");
  check_parse_error(&f, "[[\"RE\", 2, [0, 1, 2]], [\"SP\", 2, \"i\", 16, [4], 1]]", TL_E_PARSE,
                    "steps[1]: step \"SP\": iter_id should be an integer, got a string");
  check_parse_error(&f, "[[\"SP\", 2, 0, 16, [4, 2.5], 1]]", TL_E_PARSE,
                    "steps[0]: step \"SP\": lengths[1] should be an integer, got a number with a fraction");
  check_parse_error(&f, "[[\"SP\", 2, 0, 16, [4], 2]]", TL_E_PARSE,
                    "steps[0]: step \"SP\": inner_to_outer = 2 is out of range");
  check_parse_error(&f, "[[\"PR\", 2, 0, 5]]", TL_E_PARSE,
                    "steps[0]: step \"PR\": pragma_type should be a string, got an integer");
  check_parse_error(&f, "[7]", TL_E_PARSE,
                    "steps[0]: step: expected an array like [\"SP\", ...], got an integer");
  check_parse_error(&f, "[[1, 2]]", TL_E_PARSE,
                    "steps[0]: step: expected a kind string (\"SP\", \"RE\", ...) first");
  /* legal steps followed by an illegal one: nothing applied */
  check_parse_error(&f, "[[\"SP\", 2, 0, 16, [4], 1], [\"SP\", 2, 9, 16, [4], 1]]", TL_E_SCHED,
                    "steps[1]: split: stage 'C' has no iterator 9 (it has 4: i.outer, i.inner, j, k)");
  check_parse_error(&f, "[[\"FSP\", 2, 0, 0, 2]]", TL_E_SCHED,
                    "steps[0]: follow_split: no step 0 to follow (the schedule has 0 steps)");
  /* a bare step is accepted too */
  CHECK_EQ_INT(tl_sched_apply_json(f.ctx, f.s, "[\"CR\", 2]"), 0);
  CHECK_STREQ(tl_sched_json(f.s), "[[\"CR\", 2]]");
  fx_free(&f);
}

/* The auto-scheduler record of formats.md §2.5 (matmul_add), on a smaller
** DAG: the lengths still apply; FSP follows the splits of stage 2. */
TL_TEST(sched_ansor_record_replay) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int c = mk_matmul(dag, ctx, 64, 64, 64);
  int64_t sd[2] = {64, 64};
  int d;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "D", 2, sd, TL_T_F32, &d), 0);
  const char *names[2] = {"i", "j"};
  tl_ref ax[2];
  tl_te_axis_vars(dag, 2, names, ax);
  tl_ref body = tl_add(dag->ir, tl_te_load(dag, c, ax, 2), tl_te_load(dag, d, ax, 2));
  int e;
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "E", "", 2, sd, ax, 1, &body, TL_RED_NONE, NULL, 0, 0, &e), 0);
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &e, 1, &s), 0);
  const char *rec =
      "[[\"SP\", 2, 0, 1024, [2, 1, 4], 1], [\"SP\", 2, 4, 1024, [1, 1, 8], 1], [\"SP\", 2, 8, 1024, [4], 1], "
      "[\"RE\", 2, [0, 4, 1, 5, 8, 2, 6, 9, 3, 7]], [\"FSP\", 4, 0, 0, 2], [\"FSP\", 4, 3, 1, 2], "
      "[\"RE\", 4, [0, 3, 1, 4, 2, 5]], [\"CA\", 2, 4, 3], [\"FU\", 4, [0, 1]], [\"AN\", 4, 0, 3], "
      "[\"PR\", 2, 0, \"auto_unroll_max_step$8\"], [\"AN\", 2, 9, 2], [\"AN\", 4, 4, 2]]";
  CHECK_EQ_INT(tl_sched_apply_json(ctx, s, rec), 0);
  CHECK_STREQ(tl_sched_json(s), rec);
  CHECK_STREQ(iters(s, 2), "i.0(8) j.0(8) i.1(2) j.1(1) k.outer(16) i.2(1) j.2(1) k.inner(4) i.3(4) j.3(8)");
  CHECK_STREQ(iters(s, 4), "i.0.j.0.fused(64) i.1(2) j.1(1) i.2(4) j.2(8)");
  int at_stage, at_iter;
  CHECK_EQ_INT(tl_sched_stage_compute_at(s, 2, &at_stage, &at_iter), TL_CA_ITER);
  CHECK_EQ_INT(at_stage, 4);
  CHECK_EQ_INT(at_iter, 2);
  CHECK_EQ_INT(tl_sched_iter_annotation(s, 4, 0), TL_ANN_PARALLEL);
  CHECK_EQ_INT(tl_sched_iter_annotation(s, 2, 9), TL_ANN_VECTORIZE);
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(sched_print_table) {
  fx f = matmul_fx(16, 12, 8);
  tl_sched *s = f.s;
  int64_t l[1] = {4};
  int ns;
  CHECK_EQ_INT(tl_sched_cache_write(f.ctx, s, 2, "local", &ns), 0);
  CHECK_EQ_INT(tl_sched_split(f.ctx, s, 3, 0, 1, l, 1), 0);
  CHECK_EQ_INT(tl_sched_compute_at(f.ctx, s, 2, 3, 0), 0);
  CHECK_EQ_INT(tl_sched_annotate(f.ctx, s, 3, 2, TL_ANN_VECTORIZE), 0);
  CHECK_STREQ(tl_sched_print(s),
              "steps (4):\n"
              "  0: [\"CHW\", 2, \"local\"]\n"
              "  1: [\"SP\", 3, 0, 16, [4], 1]\n"
              "  2: [\"CA\", 2, 3, 0]\n"
              "  3: [\"AN\", 3, 2, 2]\n"
              "stages (4):\n"
              "  0 A: placeholder [16, 8]\n"
              "  1 B: placeholder [8, 12]\n"
              "  2 C.local: at C.i.outer, scope local\n"
              "      0 i.c (16)\n"
              "      1 j.c (12)\n"
              "      2 k (8) reduce\n"
              "  3 C: root, output\n"
              "      0 i.outer (4)\n"
              "      1 i.inner (4)\n"
              "      2 j (12) vectorize\n");
  fx_free(&f);
}

TL_TEST(sched_follow_fused_split) {
  fx f = matmul_fx(64, 48, 32);
  tl_sched *s = f.s;
  CHECK_EQ_INT(tl_sched_apply_json(f.ctx, s, "[[\"SP\", 2, 0, 64, [4, 2], 1], [\"SP\", 2, 3, 48, [3], 1]]"), 0);
  CHECK_STREQ(iters(s, 2), "i.0(8) i.1(4) i.2(2) j.outer(16) j.inner(3) k(32)");
  /* level 0 of steps 0 and 1: 4 * 3 = 12, as a factor, then as nparts */
  int64_t src[2] = {0, 1};
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_FFSP, (int64_t[]){2, 5, 0, 1}, 4, src, 2, NULL, NULL), 0);
  CHECK_STREQ(iters(s, 2), "i.0(8) i.1(4) i.2(2) j.outer(16) j.inner(3) k.outer(3) k.inner(12)");
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_FFSP, (int64_t[]){2, 3, 0, 0}, 4, src, 2, NULL, NULL), 0);
  CHECK_STREQ(iters(s, 2), "i.0(8) i.1(4) i.2(2) j.outer.outer(12) j.outer.inner(2) j.inner(3) k.outer(3) k.inner(12)");
  /* FSP with n_split 1: one length, the product of all */
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_FSP, (int64_t[]){2, 0, 0, 1}, 4, NULL, 0, NULL, NULL), 0);
  CHECK_STREQ(iters(s, 2),
              "i.0.outer(1) i.0.inner(8) i.1(4) i.2(2) j.outer.outer(12) j.outer.inner(2) j.inner(3) k.outer(3) "
              "k.inner(12)");
  CHECK_STREQ(tl_sched_json(s), "[[\"SP\", 2, 0, 64, [4, 2], 1], [\"SP\", 2, 3, 48, [3], 1], "
                                "[\"FFSP\", 2, 5, [0, 1], 0, 1], [\"FFSP\", 2, 3, [0, 1], 0, 0], "
                                "[\"FSP\", 2, 0, 0, 1]]");
  CHECK_REFUSED(tl_sched_step(f.ctx, s, TL_STEP_FFSP, (int64_t[]){2, 0, 1, 1}, 4, src, 2, NULL, NULL),
                "follow_fused_split: level 1 out of range for step 1 (1 lengths)");
  CHECK_REFUSED(tl_sched_step(f.ctx, s, TL_STEP_FSP, (int64_t[]){2, 0, 2, 1}, 4, NULL, 0, NULL, NULL),
                "follow_split: step 2 is FFSP, not a split");
  /* a replay gives the same iterators */
  tl_sched *r;
  CHECK_EQ_INT(tl_sched_fresh(f.ctx, s, &r), 0);
  CHECK_EQ_INT(tl_sched_apply_json(f.ctx, r, tl_sched_json(s)), 0);
  char want[1024];
  snprintf(want, sizeof want, "%s", iters(s, 2));
  CHECK_STREQ(iters(r, 2), want);
  tl_sched_free(r);
  fx_free(&f);
}

/* Every row of the step table (te/steps.h): a step with a distinct value in
** each field goes to JSON and back unchanged, field by field, and the
** public table queries agree with the descriptors. */
TL_TEST(sched_step_table_roundtrip) {
  tl_ctx *ctx = tl_ctx_new();
  CHECK_EQ_INT(tl_step_count(), TL_STEP__MAX);
  CHECK(tl_step_name(-1) == NULL && tl_step_name(TL_STEP__MAX) == NULL);
  CHECK(tl_step_field_name(TL_STEP_SP, 5) == NULL);
  CHECK_STREQ(tl_step_field_types(TL_STEP_SP), "iieIb");
  for (int k = 0; k < TL_STEP__MAX; k++) {
    const tl_step_desc *d = &tl_step_table[k];
    CHECK_EQ_INT(tl_step_kind(tl_step_name(k)), k);
    CHECK_STREQ(tl_step_verb(k), d->verb);
    CHECK_EQ_INT((int)strlen(tl_step_field_types(k)), d->nfields);
    CHECK_EQ_INT(tl_step_field_count(k), d->nfields);
    CHECK_STREQ(d->fields[0].name, "stage_id");
    int nlist = 0, nstr = 0;
    int64_t list[3] = {7 + k, 0, 3};
    tl_step t;
    memset(&t, 0, sizeof t);
    t.kind = k;
    for (int f = 0; f < d->nfields; f++) {
      const tl_step_field *fd = &d->fields[f];
      CHECK(fd->type == tl_step_field_types(k)[f]);
      CHECK_STREQ(tl_step_field_name(k, f), fd->name);
      switch (fd->type) {
      case 'i': tl_step_set(&t, fd, 100 * k + f + 1); break;
      case 'e': tl_step_set(&t, fd, 1000 + k); break;
      case 'b': tl_step_set(&t, fd, 1); break;
      case 'I': nlist++; t.ints = list; t.nints = 3; break;
      case 's': nstr++; t.str = "a \"b\"$1"; break;
      default: CHECK(!"unknown field type");
      }
    }
    CHECK(nlist <= 1 && nstr <= 1);
    tl_buf b = {0};
    tl_step_to_json(&t, &b);
    json_error_t jerr;
    json_t *j = json_loads(b.s, 0, &jerr);
    CHECK(j != NULL);
    CHECK_EQ_INT((int)json_array_size(j), d->nfields + 1);
    CHECK_STREQ(json_string_value(json_array_get(j, 0)), d->name);
    tl_step r;
    CHECK_EQ_INT(tl_step_from_json(ctx, j, &r), 0);
    json_decref(j);
    CHECK_EQ_INT(r.kind, k);
    for (int f = 0; f < d->nfields; f++) {
      const tl_step_field *fd = &d->fields[f];
      if (fd->type == 'I') {
        CHECK_EQ_INT(r.nints, 3);
        for (int i = 0; i < 3; i++) CHECK(r.ints[i] == list[i]);
      } else if (fd->type == 's') {
        CHECK_STREQ(r.str, t.str);
      } else {
        CHECK(tl_step_get(&r, fd) == tl_step_get(&t, fd));
      }
    }
    if (!nlist) CHECK(r.ints == NULL && r.nints == 0);
    if (!nstr) CHECK(r.str == NULL);
    tl_buf b2 = {0};
    tl_step_to_json(&r, &b2);
    CHECK_STREQ(b2.s, b.s);
    tl_buf_free(&b2);
    tl_buf_free(&b);
    tl_step_release(&r);
  }
  tl_ctx_free(ctx);
}

/* tl_sched_step: the fields of the row, checked before anything is applied;
** the inserted stage of CHR (after), CHW and RF (before). */
TL_TEST(sched_step_generic) {
  fx f = matmul_fx(16, 12, 8);
  tl_sched *s = f.s;
  int64_t a[4] = {2, 0, 1, 0};
  int64_t four = 4;
  int ns = 99;
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_SP, a, 2, &four, 1, NULL, NULL), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(f.ctx), "split: expected 3 integer fields, got 2");
  tl_clearerr(f.ctx);
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_CI, a, 1, &four, 1, NULL, NULL), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(f.ctx), "compute_inline: 1 list entries given, the step takes none");
  tl_clearerr(f.ctx);
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_CR, a, 1, NULL, 0, "x", NULL), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(f.ctx), "compute_root: the step takes no string");
  tl_clearerr(f.ctx);
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP__MAX, a, 1, NULL, 0, NULL, NULL), TL_E_ARG);
  tl_clearerr(f.ctx);
  int64_t big[3] = {2, 0, (int64_t)1 << 40};
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_AN, big, 3, NULL, 0, NULL, NULL), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(f.ctx), "annotate: annotation = 1099511627776 is out of range");
  tl_clearerr(f.ctx);
  CHECK_EQ_INT(tl_sched_num_steps(s), 0);
  /* SP records the extent of the split iterator; no stage inserted */
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_SP, a, 3, &four, 1, NULL, &ns), 0);
  CHECK_EQ_INT(ns, -1);
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_RF, (int64_t[]){2, 3, 0}, 3, NULL, 0, NULL, &ns), 0);
  CHECK_EQ_INT(ns, 2);
  CHECK_STREQ(tl_sched_stage_name(s, 2), "C.rf");
  int64_t rd = 2;
  CHECK_EQ_INT(tl_sched_step(f.ctx, s, TL_STEP_CHR, (int64_t[]){0}, 1, &rd, 1, "shared", &ns), 0);
  CHECK_EQ_INT(ns, 1);
  CHECK_STREQ(tl_sched_stage_name(s, 1), "A.shared");
  CHECK_STREQ(tl_sched_json(s), "[[\"SP\", 2, 0, 16, [4], 1], [\"RF\", 2, 3, 0], [\"CHR\", 0, \"shared\", [2]]]");
  fx_free(&f);
}
