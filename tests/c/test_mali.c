/*
** test_mali.c -- the Mali templates (targets/mali): registration, TVM's
** index for a TopHub record, fallback configs, instantiation errors of
** TVM's kind, lowering; the default OpenCL schedule lowers (no device
** needed: numerics are in tests/lua/test_mali.lua).
*/
#include <stdio.h>

#include "../../targets/mali/mali.h"
#include "tl_test.h"

static const char *sp_args =
    "[[\"TENSOR\", [1, 992, 7, 7], \"float32\"], [\"TENSOR\", [128, 992, 1, 1], \"float32\"], "
    "[1, 1], [0, 0, 0, 0], [1, 1], \"float32\"]";

TL_TEST(mali_spatial_pack_record) {
  tl_ctx *ctx = tl_ctx_new();
  CHECK(tl_atvm_template_exists("conv2d_nchw_spatial_pack.mali"));
  CHECK(tl_atvm_template_exists("conv2d_nchw_winograd.mali"));
  CHECK(tl_atvm_template_exists("depthwise_conv2d_nchw.mali"));
  CHECK(tl_atvm_template_exists("dense.mali"));
  tl_atvm_task *t;
  CHECK_MSG(tl_atvm_task_create(ctx, "conv2d_nchw_spatial_pack.mali", sp_args,
                                "opencl -model=rk3399 -device=mali", &t) == 0, "%s", tl_errmsg(ctx));
  /* tile_co 36 (3-way factorizations of 128) x tile_oh 3 x tile_ow 3 x 2 x 4 x 20 */
  CHECK_EQ_INT(tl_atvm_space_num_knobs(t), 6);
  CHECK_EQ_INT(tl_atvm_space_len(t), 36 * 3 * 3 * 2 * 4 * 20);
  int64_t idx;
  CHECK_EQ_INT(tl_atvm_space_index_of_entity(ctx, t,
      "[[\"tile_co\", \"sp\", [32, 2, 2]], [\"tile_oh\", \"sp\", [1, 7, 1]], [\"tile_ow\", \"sp\", [1, 1, 7]], "
      "[\"reorder_0\", \"re\", [0, 1, 2, 3, 4, 5, 6, 9, 7, 8]], [\"ann_reduce\", \"an\", [\"unroll\", \"unroll\"]], "
      "[\"ann_spatial\", \"an\", [\"unroll\", \"unroll\", \"vec\"]]]", &idx), 0);
  CHECK_EQ_INT(idx, 36225);
  /* the record's config and the fallback lower */
  tl_lowered *lf = NULL;
  CHECK_MSG(tl_atvm_lower(ctx, t, 36225, "sp_36225", &lf) == 0, "%s", tl_errmsg(ctx));
  tl_lowered_free(lf);
  CHECK_MSG(tl_atvm_lower(ctx, t, -1, "sp_fallback", &lf) == 0, "%s", tl_errmsg(ctx));
  tl_lowered_free(lf);
  CHECK(strstr(tl_atvm_config_json(t, -1), "[\"ann_spatial\", \"an\", [\"unroll\", \"unroll\", \"vec\"]]") != NULL);
  /* vec over 7 lanes (ann_spatial vec on vw = 7): TVM's instantiation error */
  CHECK_EQ_INT(tl_atvm_space_index_of_entity(ctx, t,
      "[[\"tile_co\", \"sp\", [32, 2, 2]], [\"tile_oh\", \"sp\", [1, 7, 1]], [\"tile_ow\", \"sp\", [1, 1, 7]], "
      "[\"reorder_0\", \"re\", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]], [\"ann_reduce\", \"an\", [\"unroll\", \"unroll\"]], "
      "[\"ann_spatial\", \"an\", [\"none\", \"vec\", \"none\"]]]", &idx), 0);
  CHECK(tl_atvm_lower(ctx, t, idx, "sp_bad", &lf) != 0);
  CHECK(strstr(tl_errmsg(ctx), "wrong size of lanes") != NULL);
  tl_clearerr(ctx);
  tl_atvm_task_free(t);
  tl_ctx_free(ctx);
}

TL_TEST(mali_winograd_fallback) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_task *t;
  const char *args =
      "[[\"TENSOR\", [1, 128, 7, 7], \"float32\"], [\"TENSOR\", [32, 128, 3, 3], \"float32\"], "
      "[1, 1], [1, 1, 1, 1], [1, 1], \"float32\"]";
  CHECK_MSG(tl_atvm_task_create(ctx, "conv2d_nchw_winograd.mali", args, "opencl -device=mali", &t) == 0,
            "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(tl_atvm_space_len(t), 5 * 5 * 8 * 6 * 4 * 6);
  int64_t idx;
  CHECK_EQ_INT(tl_atvm_space_index_of_entity(ctx, t,
      "[[\"tile_bna\", \"ot\", 4], [\"tile_bnb\", \"ot\", 4], [\"tile_t1\", \"sp\", [1, 128]], "
      "[\"tile_t2\", \"sp\", [32, 1]], [\"c_unroll\", \"sp\", [128, 1]], [\"yt\", \"ot\", 8]]", &idx), 0);
  CHECK_EQ_INT(idx, 14587);
  CHECK(strstr(tl_atvm_config_json(t, -1),
               "[[\"tile_bna\", \"ot\", 4], [\"tile_bnb\", \"ot\", 4], [\"tile_t1\", \"sp\", [-1, 128]], "
               "[\"tile_t2\", \"sp\", [-1, 32]], [\"c_unroll\", \"sp\", [-1, 8]], [\"yt\", \"ot\", 8]]") != NULL);
  tl_lowered *lf = NULL;
  CHECK_MSG(tl_atvm_lower(ctx, t, idx, "wino", &lf) == 0, "%s", tl_errmsg(ctx));
  tl_lowered_free(lf);
  tl_atvm_task_free(t);
  tl_ctx_free(ctx);
}

TL_TEST(mali_default_schedule_gpu) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag = tl_dag_new();
  int64_t shape[2] = {4, 100};
  int x, outs[8], nout;
  CHECK_EQ_INT(tl_dag_placeholder(ctx, dag, "X", 2, shape, TL_FLOAT32, &x), 0);
  CHECK_MSG(tl_topi_op(ctx, dag, "softmax", &x, 1, "{\"axis\": -1}", outs, 8, &nout) == 0, "%s",
            tl_errmsg(ctx));
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &outs[nout - 1], 1, &s), 0);
  CHECK_MSG(tl_topi_default_schedule_gpu(ctx, s) == 0, "%s", tl_errmsg(ctx));
  CHECK(tl_sched_num_steps(s) > 0);
  /* a second call on a scheduled schedule is refused */
  CHECK(tl_topi_default_schedule_gpu(ctx, s) == TL_E_ARG);
  tl_clearerr(ctx);
  int args[2] = {tl_sched_stage_tensor(s, 0, 0), tl_sched_stage_tensor(s, tl_sched_num_stages(s) - 1, 0)};
  tl_lowered *lf = NULL;
  CHECK_MSG(tl_lower(ctx, s, args, 2, "softmax_gpu", &lf) == 0, "%s", tl_errmsg(ctx));
  tl_lowered_free(lf);
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}
