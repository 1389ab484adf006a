/*
** test_vta_lower.c -- VTA code generation from the loop IR (targets/vta/lower.c).
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "../../targets/vta/conv2d.h"
#include "tl_test.h"

static const char *default_json =
    "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,"
    "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,\"LOG_BLOCK\":4,\"LOG_UOP_BUFF_SIZE\":15,"
    "\"LOG_INP_BUFF_SIZE\":15,\"LOG_WGT_BUFF_SIZE\":18,\"LOG_ACC_BUFF_SIZE\":17}";

TL_TEST(vta_lower_debug) {
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config c;
  CHECK(tl_vta_config_parse(ctx, getenv("VTA_CFG") ? getenv("VTA_CFG") : default_json, "test", &c) == 0);
  const char *args = getenv("VTA_ARGS") ? getenv("VTA_ARGS") :
      "[[\"TENSOR\",[1,2,8,8,1,16],\"int8\"],[\"TENSOR\",[4,2,3,3,16,16],\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]";
  tl_vta_task *t = NULL;
  CHECK_MSG(tl_vta_task_new(ctx, &c, args, &t) == 0, "%s", tl_errmsg(ctx));
  int64_t idx = getenv("VTA_IDX") ? atoll(getenv("VTA_IDX")) : 0;
  tl_vta_knobs k;
  CHECK(tl_vta_task_knobs(ctx, t, idx, &k) == 0);
  tl_lowered *f = NULL;
  int rc = tl_vta_conv2d_lower(ctx, tl_vta_task_workload(t), &k, &f);
  CHECK_MSG(rc == 0, "%s", tl_errmsg(ctx));
  if (getenv("VTA_PRINT")) printf("%s\n", tl_lowered_text(f));
  tl_lowered_free(f);
  char *st = NULL, *dis = NULL;
  double t0 = tl_now();
  rc = tl_vta_task_run_route(ctx, t, idx, 1, 0, &st, getenv("VTA_DIS") ? &dis : NULL);
  printf("ir route %.3f s\n", tl_now() - t0);
  t0 = tl_now();
  CHECK_MSG(rc == 0, "%s", tl_errmsg(ctx));
  printf("ir: %s\n%s\n", st ? st : "", dis ? dis : "");
  free(st), free(dis);
  rc = tl_vta_task_run_route(ctx, t, idx, 1, 1, &st, getenv("VTA_DIS") ? &dis : NULL);
  printf("direct %.3f s: %s\n%s\n", tl_now() - t0, st ? st : "", dis ? dis : "");
  free(st), free(dis);
  tl_vta_task_free(t);
  tl_ctx_free(ctx);
}

static double stat_of(const char *js, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(js, pat);
  return p ? strtod(p + strlen(pat), NULL) : -1;
}

static uint32_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}

/* Random configs of several workloads (two hardware configurations): the IR route's
** stream runs on the simulator and equals the CPU reference bit for bit (run_route
** checks every output byte); the direct generator runs the same config, and both do the
** same work (GEMM and ALU iterations, input, weight and output bytes). */
static void routes_agree(int nconf, uint64_t seed, int verbose) {
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config d, b2;
  CHECK(tl_vta_config_parse(ctx, default_json, "test", &d) == 0);
  CHECK(tl_vta_config_parse(ctx,
                            "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,"
                            "\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":1,"
                            "\"LOG_BLOCK\":3,\"LOG_UOP_BUFF_SIZE\":15,\"LOG_INP_BUFF_SIZE\":15,"
                            "\"LOG_WGT_BUFF_SIZE\":16,\"LOG_ACC_BUFF_SIZE\":17}",
                            "b2", &b2) == 0);
  struct { tl_vta_config *c; const char *args; } wl[] = {
      {&d, "[[\"TENSOR\",[1,2,8,8,1,16],\"int8\"],[\"TENSOR\",[4,2,3,3,16,16],\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]"},
      {&d, "[[\"TENSOR\",[1,3,9,7,1,16],\"int8\"],[\"TENSOR\",[2,3,3,3,16,16],\"int8\"],[2,2],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]"},
      {&d, "[[\"TENSOR\",[1,2,6,6,1,16],\"int8\"],[\"TENSOR\",[6,2,1,1,16,16],\"int8\"],[1,1],[0,0,0,0],[1,1],\"NCHW1n16c\",\"int32\"]"},
      {&d, "[[\"TENSOR\",[2,1,10,10,1,16],\"int8\"],[\"TENSOR\",[3,1,3,3,16,16],\"int8\"],[2,2],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]"},
      {&d, "[[\"TENSOR\",[1,2,8,8,1,16],\"int8\"],[\"TENSOR\",[2,2,1,1,16,16],\"int8\"],[2,2],[0,0,0,0],[1,1],\"NCHW1n16c\",\"int32\"]"},
      {&b2, "[[\"TENSOR\",[1,3,6,6,2,8],\"int8\"],[\"TENSOR\",[4,3,3,3,8,8],\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW2n8c\",\"int32\"]"},
  };
  static const char *const same[] = {"gemm_counter", "alu_counter", "inp_load_nbytes",
                                     "wgt_load_nbytes", "out_store_nbytes"};
  uint64_t st = seed;
  int checked = 0, tries = 0, fewer = 0, equal = 0, more = 0;
  double ratio_sum = 0, rmin = 1e9, rmax = 0;
  while (checked < nconf && tries < 20 * nconf) {
    int which = (int)(rnd(&st) % TL_ARRAY_SIZE(wl));
    tl_vta_task *t = NULL;
    CHECK_MSG(tl_vta_task_new(ctx, wl[which].c, wl[which].args, &t) == 0, "%s", tl_errmsg(ctx));
    int64_t idx = (int64_t)(rnd(&st) % (uint32_t)tl_vta_task_space_len(t));
    tries++;
    if (tl_vta_task_check(ctx, t, idx) == 0) {
      char *ir = NULL, *dir = NULL;
      int rc = tl_vta_task_run_route(ctx, t, idx, (uint64_t)tries, 0, &ir, NULL);
      CHECK_MSG(rc == 0, "workload %d, config %lld: IR route: %s", which, (long long)idx,
                tl_errmsg(ctx));
      rc = tl_vta_task_run_route(ctx, t, idx, (uint64_t)tries, 1, &dir, NULL);
      CHECK_MSG(rc == 0, "workload %d, config %lld: direct: %s", which, (long long)idx,
                tl_errmsg(ctx));
      for (size_t i = 0; i < TL_ARRAY_SIZE(same); i++)
        CHECK_MSG(stat_of(ir, same[i]) == stat_of(dir, same[i]),
                  "workload %d, config %lld: %s %.0f (IR) vs %.0f (direct)", which,
                  (long long)idx, same[i], stat_of(ir, same[i]), stat_of(dir, same[i]));
      double ni = stat_of(ir, "insn_count"), nd = stat_of(dir, "insn_count");
      double r = stat_of(ir, "cycles") / stat_of(dir, "cycles");
      fewer += ni < nd, equal += ni == nd, more += ni > nd;
      ratio_sum += r, rmin = r < rmin ? r : rmin, rmax = r > rmax ? r : rmax;
      if (verbose)
        printf("wl %d cfg %lld: insns %.0f / %.0f cycles %.0f / %.0f (%.3f)\n", which,
               (long long)idx, ni, nd, stat_of(ir, "cycles"), stat_of(dir, "cycles"), r);
      free(ir);
      free(dir);
      checked++;
    } else {
      CHECK_EQ_INT(tl_errcode(ctx), TL_E_SCHED);
    }
    tl_clearerr(ctx);
    tl_vta_task_free(t);
  }
  CHECK_EQ_INT(checked, nconf);
  printf("     IR route vs direct on %d configs: instructions fewer %d, equal %d, more %d; "
         "cycles ratio mean %.3f, min %.3f, max %.3f\n",
         checked, fewer, equal, more, ratio_sum / checked, rmin, rmax);
  tl_ctx_free(ctx);
}

TL_TEST(vta_lower_random_configs) { routes_agree(getenv("VTA_N") ? atoi(getenv("VTA_N")) : 200, 7, getenv("VTA_V") != NULL); }
