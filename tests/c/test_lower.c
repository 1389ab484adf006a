/* Unit tests for core/te/lower.c: lowered functions verify, region buffers
** have the inferred sizes, the argument and schedule errors of tl_lower,
** and the time to lower and emit a tiled conv2d (printed, not asserted:
** the target is well under 10 ms). */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "conv_dag.h"
#include "te/schedule.h"
#include "tl_test.h"

static int apply(tl_ctx *ctx, tl_sched *s, const char *json) {
  int rc = tl_sched_apply_json(ctx, s, json);
  if (rc) tl_test_fail(__FILE__, __LINE__, "%s", tl_errmsg(ctx));
  return rc;
}

/* the lowered text must verify, with every access flattened */
typedef struct {
  int bad;
} flat_check;

static int flat_fn(const tl_ir *ir, tl_ref n, void *ud) {
  int op = tl_ir_op(ir, n);
  if (op == TL_IR_LOAD && tl_ir_nkids(ir, n) != 1) ((flat_check *)ud)->bad++;
  if (op == TL_IR_STORE && tl_ir_nkids(ir, n) != 2) ((flat_check *)ud)->bad++;
  return 1;
}

static void check_lowered(tl_ctx *ctx, tl_lowered *f) {
  CHECK_EQ_INT(tl_ir_verify(ctx, f->ir, f->body, NULL, 0), 0);
  flat_check fc = {0};
  tl_ir_visit(f->ir, f->body, flat_fn, &fc);
  CHECK_EQ_INT(fc.bad, 0);
}

TL_TEST(lower_conv2d_time) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int x, w;
  int o = tl_test_conv2d(dag, ctx, 1, 64, 56, 56, 64, 3, 1, 1, &x, &w);
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &o, 1, &s), 0);
  /* stages: X pad W conv -> X pad W conv.local conv; an Ansor-like CPU
  ** sketch: cache_write, multi-level tiles, pad computed per tile */
  apply(ctx, s, TL_TEST_CONV_SKETCH);
  int args[3] = {tl_test_tensor(s, "X"), tl_test_tensor(s, "W"), tl_test_tensor(s, "conv")};
  tl_lowered *f = NULL;
  double best_lower = 1e9, best_emit = 1e9;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = tl_now();
    CHECK_EQ_INT(tl_lower(ctx, s, args, 3, "conv2d", &f), 0);
    double t1 = tl_now();
    tl_buf src = {0};
    CHECK_EQ_INT(tl_codegen_c(ctx, f, &src), 0);
    double t2 = tl_now();
    CHECK(src.n > 1000);
    tl_buf_free(&src);
    best_lower = TL_MIN(best_lower, t1 - t0);
    best_emit = TL_MIN(best_emit, t2 - t1);
    if (rep < 4) tl_lowered_free(f);
  }
  printf("     conv2d 1x64x56x56 k3: lower %.2f ms, emit C %.2f ms\n", best_lower * 1e3, best_emit * 1e3);
  check_lowered(ctx, f);
  /* per parallel tile, 32 channels x 14 rows x 8 columns of conv.local;
  ** per rc.outer, 16 channels x (14+2) rows x (8+2) columns of pad */
  const char *text = tl_lowered_text(f);
  CHECK(strstr(text, "allocate pad.global[float32 * 2560]") != NULL);
  CHECK(strstr(text, "allocate conv.local[float32 * 3584]") != NULL);
  tl_lowered_free(f);
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(lower_arguments) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int x, w;
  int o = tl_test_conv2d(dag, ctx, 1, 2, 6, 6, 2, 3, 1, 1, &x, &w);
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &o, 1, &s), 0);
  tl_lowered *f = NULL;
  int X = tl_test_tensor(s, "X"), Wt = tl_test_tensor(s, "W"), P = tl_test_tensor(s, "pad"),
      O = tl_test_tensor(s, "conv");
  int a1[2] = {Wt, O};
  CHECK_EQ_INT(tl_lower(ctx, s, a1, 2, "f", &f), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "lower: placeholder 'X' is not among the arguments");
  tl_clearerr(ctx);
  int a2[3] = {X, X, O};
  CHECK_EQ_INT(tl_lower(ctx, s, a2, 3, "f", &f), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "lower: tensor 'X' is given twice as an argument");
  tl_clearerr(ctx);
  int a3[1] = {42};
  CHECK_EQ_INT(tl_lower(ctx, s, a3, 1, "f", &f), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "lower: argument 0: no tensor 42 in the schedule's dag");
  tl_clearerr(ctx);
  /* an inlined stage cannot be an argument */
  CHECK_EQ_INT(tl_sched_compute_inline(ctx, s, tl_sched_stage_find(s, "pad")), 0);
  int a4[4] = {X, Wt, P, O};
  CHECK_EQ_INT(tl_lower(ctx, s, a4, 4, "f", &f), TL_E_SCHED);
  CHECK_STREQ(tl_errmsg(ctx), "lower: stage 'pad' is inlined but is an argument");
  tl_clearerr(ctx);
  /* an intermediate as an argument: computed into it (no temporary) */
  int64_t pad = tl_sched_stage_find(s, "pad");
  CHECK_EQ_INT(tl_sched_step(ctx, s, TL_STEP_CR, &pad, 1, NULL, 0, NULL, NULL), 0);
  CHECK_EQ_INT(tl_lower(ctx, s, a4, 4, "f", &f), 0);
  check_lowered(ctx, f);
  CHECK(strstr(tl_lowered_text(f), "allocate") == NULL);
  CHECK_EQ_INT(f->nargs, 4);
  CHECK_EQ_INT(tl_ir_buffer(f->ir, f->arg_bufs[2])->arg, 2);
  tl_lowered_free(f);
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

/* P feeds B and C; P computed inside B's loop cannot serve C */
TL_TEST(lower_attach_outside_consumer) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  tl_ir *ir = dag->ir;
  int64_t sh[2] = {8, 8};
  int a, p, b, c;
  CHECK_EQ_INT(tl_te_placeholder(ctx, dag, "A", 2, sh, TL_T_F32, &a), 0);
  const char *nm[2] = {"i", "j"};
  tl_ref v[2];
  tl_te_axis_vars(dag, 2, nm, v);
  tl_ref body = tl_add(ir, tl_te_load(dag, a, v, 2), tl_imm_float(ir, TL_T_F32, 1));
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "P", "", 2, sh, v, 1, &body, TL_RED_NONE, NULL, 0, 0, &p), 0);
  tl_te_axis_vars(dag, 2, nm, v);
  body = tl_mul(ir, tl_te_load(dag, p, v, 2), tl_imm_float(ir, TL_T_F32, 2));
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "B", "", 2, sh, v, 1, &body, TL_RED_NONE, NULL, 0, 0, &b), 0);
  tl_te_axis_vars(dag, 2, nm, v);
  body = tl_add(ir, tl_te_load(dag, p, v, 2), tl_te_load(dag, b, v, 2));
  CHECK_EQ_INT(tl_te_compute(ctx, dag, "C", "", 2, sh, v, 1, &body, TL_RED_NONE, NULL, 0, 0, &c), 0);
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &c, 1, &s), 0);
  int args[2] = {tl_test_tensor(s, "A"), tl_test_tensor(s, "C")};
  tl_lowered *f = NULL;
  CHECK_EQ_INT(tl_sched_compute_at(ctx, s, 1, 2, 0), 0);
  CHECK_EQ_INT(tl_lower(ctx, s, args, 2, "f", &f), TL_E_SCHED);
  CHECK_STREQ(tl_errmsg(ctx), "lower: stage 'P' is computed at 'B.i' but 'C' reads it outside that loop");
  tl_clearerr(ctx);
  /* with B computed inside C's row loop too, both readers are under C.i */
  CHECK_EQ_INT(tl_sched_compute_at(ctx, s, 1, 3, 0), 0);
  CHECK_EQ_INT(tl_sched_compute_at(ctx, s, 2, 3, 0), 0);
  CHECK_EQ_INT(tl_lower(ctx, s, args, 2, "f", &f), 0);
  check_lowered(ctx, f);
  CHECK(strstr(tl_lowered_text(f), "allocate P.global[float32 * 8]") != NULL);
  CHECK(strstr(tl_lowered_text(f), "allocate B.global[float32 * 8]") != NULL);
  tl_lowered_free(f);
  /* a fuse of spatial and reduction iterators cannot get its init */
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(lower_mixed_fuse_refused) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int x, w;
  int o = tl_test_conv2d(dag, ctx, 1, 2, 6, 6, 2, 3, 1, 1, &x, &w);
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &o, 1, &s), 0);
  apply(ctx, s, "[[\"FU\", 3, [3, 4]]]");
  int args[3] = {tl_test_tensor(s, "X"), tl_test_tensor(s, "W"), tl_test_tensor(s, "conv")};
  tl_lowered *f = NULL;
  int rc = tl_lower(ctx, s, args, 3, "f", &f);
  CHECK_STREQ(tl_errmsg(ctx), "lower: stage 'conv' fuses spatial and reduction iterators ('x.rc.fused')");
  CHECK_EQ_INT(rc, TL_E_UNSUPPORTED);
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}
