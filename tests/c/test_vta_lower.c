/*
** test_vta_lower.c -- VTA code generation from the loop IR (targets/vta/lower.c):
** conv2d_packed's VTA schedule lowered by core/te carries the marks the passes read;
** random configs of several workloads (two hardware configurations) and TopHub's records
** run through the IR route on the simulator and equal the CPU reference bit for bit, do
** the same work as the direct generator of conv2d.c (the cross-check), and a config that
** does not fit is refused by the passes too; a lowered function that is not marked for
** VTA is refused naming what it cannot place.
*/
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../targets/vta/conv2d.h"
#include "tl_test.h"
#include "vta_cases.h"

static const char *default_json =
    "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,"
    "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,\"LOG_BLOCK\":4,\"LOG_UOP_BUFF_SIZE\":15,"
    "\"LOG_INP_BUFF_SIZE\":15,\"LOG_WGT_BUFF_SIZE\":18,\"LOG_ACC_BUFF_SIZE\":17}";
/* TVM's pynq_4x8_i8w8a32_15_16_16_18 */
static const char *b4_json =
    "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.1\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,"
    "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":2,\"LOG_BLOCK\":3,\"LOG_UOP_BUFF_SIZE\":15,"
    "\"LOG_INP_BUFF_SIZE\":16,\"LOG_WGT_BUFF_SIZE\":16,\"LOG_ACC_BUFF_SIZE\":18}";

static const char *wl_args =
    "[[\"TENSOR\",[1,3,9,7,1,16],\"int8\"],[\"TENSOR\",[3,3,3,3,16,16],\"int8\"],[2,2],"
    "[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]";

static int64_t index_of(tl_ctx *ctx, tl_vta_task *t, const char *entity) {
  int64_t idx = -1;
  CHECK_MSG(tl_vta_task_index_of_entity(ctx, t, entity, &idx) == 0, "%s", tl_errmsg(ctx));
  return idx;
}

TL_TEST(vta_lower_schedule_marks) {
  /* a config with both virtual threads: the lowered function has one vthread loop of 4, the
  ** cache stages and the output's store marked dma_copy, the GEMM blocks marked gemm (reset
  ** and update) and the three element-wise stages alu */
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config c;
  CHECK(tl_vta_config_parse(ctx, default_json, "test", &c) == 0);
  tl_vta_task *t = NULL;
  CHECK_MSG(tl_vta_task_new(ctx, &c, wl_args, &t) == 0, "%s", tl_errmsg(ctx));
  int64_t idx = index_of(ctx, t,
      "[[\"tile_b\",\"sp\",[-1,1]],[\"tile_h\",\"sp\",[-1,1]],[\"tile_w\",\"sp\",[-1,2]],"
      "[\"tile_ci\",\"sp\",[-1,1]],[\"tile_co\",\"sp\",[-1,1]],[\"oc_nthread\",\"ot\",2],"
      "[\"h_nthread\",\"ot\",2]]");
  tl_vta_knobs k;
  CHECK(tl_vta_task_knobs(ctx, t, idx, &k) == 0);
  tl_lowered *f = NULL;
  CHECK_MSG(tl_vta_conv2d_lower(ctx, tl_vta_task_workload(t), &k, &f) == 0, "%s", tl_errmsg(ctx));
  const char *txt = tl_lowered_text(f);
  int n = 0;
  for (const char *p = txt; (p = strstr(p, "pragma_dma_copy")); p++) n++;
  CHECK_EQ_INT(n, 3);
  n = 0;
  for (const char *p = txt; (p = strstr(p, "pragma_gemm")); p++) n++;
  CHECK_EQ_INT(n, 2);
  n = 0;
  for (const char *p = txt; (p = strstr(p, "pragma_alu")); p++) n++;
  CHECK_EQ_INT(n, 3);
  CHECK_MSG(strstr(txt, "vthread") != NULL, "%s", txt);
  tl_lowered_free(f);
  /* and it runs: the stream equals the CPU reference */
  char *st = NULL;
  CHECK_MSG(tl_vta_task_run_route(ctx, t, idx, 3, 0, &st, NULL) == 0, "%s", tl_errmsg(ctx));
  free(st);
  tl_vta_task_free(t);
  tl_ctx_free(ctx);
}

TL_TEST(vta_lower_refuses_unmarked) {
  /* the template's CPU schedule (no cache stages, no marks) is not a VTA program */
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config c;
  CHECK(tl_vta_config_parse(ctx, default_json, "test", &c) == 0);
  tl_atvm_task *at = NULL;
  CHECK_MSG(tl_atvm_task_create(ctx, "conv2d_packed.vta", wl_args,
                                "ext_dev -device=vta -keys=vta,cpu -model=sim_1x16_i8w8a32_15_15_18_17",
                                &at) == 0, "%s", tl_errmsg(ctx));
  tl_lowered *f = NULL;
  CHECK_MSG(tl_atvm_lower(ctx, at, 0, "cpu", &f) == 0, "%s", tl_errmsg(ctx));
  tl_vta_sim *sim = NULL;
  tl_vta_cmd *q = NULL;
  CHECK(tl_vta_sim_new(ctx, &c, 1 << 20, &sim) == 0);
  CHECK(tl_vta_cmd_new(ctx, sim, &q) == 0);
  uint32_t phys[3];
  for (int i = 0; i < 3; i++) CHECK(tl_vta_sim_alloc(ctx, sim, 4096, &phys[i]) == 0);
  CHECK_EQ_INT(tl_vta_lower_emit(q, ctx, &c, f, phys), TL_E_UNSUPPORTED);
  CHECK_MSG(strstr(tl_errmsg(ctx), "is neither a GEMM operand nor an ALU stage") != NULL, "%s",
            tl_errmsg(ctx));
  tl_vta_cmd_free(q);
  tl_vta_sim_free(sim);
  tl_lowered_free(f);
  tl_atvm_task_free(at);
  tl_ctx_free(ctx);
}

static double stat_of(const char *js, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(js, pat);
  return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* 1 when lowering config idx of t and running the passes fails with TL_E_SCHED naming an
** SRAM buffer */
static int ir_refuses_at(tl_ctx *ctx, tl_vta_task *t, int64_t idx) {
  tl_vta_knobs k;
  CHECK(tl_vta_task_knobs(ctx, t, idx, &k) == 0);
  tl_lowered *f = NULL;
  CHECK_MSG(tl_vta_conv2d_lower(ctx, tl_vta_task_workload(t), &k, &f) == 0, "%s", tl_errmsg(ctx));
  tl_vta_config c;
  CHECK(tl_vta_task_config(t, &c) == 0);
  tl_vta_sim *sim = NULL;
  tl_vta_cmd *q = NULL;
  CHECK(tl_vta_sim_new(ctx, &c, 1 << 20, &sim) == 0);
  CHECK(tl_vta_cmd_new(ctx, sim, &q) == 0);
  uint32_t phys[3] = {4096, 4096, 4096};
  int rc = tl_vta_lower_emit(q, ctx, &c, f, phys);
  int ok = rc == TL_E_SCHED && strstr(tl_errmsg(ctx), " buffer") != NULL;
  tl_vta_cmd_free(q);
  tl_vta_sim_free(sim);
  tl_lowered_free(f);
  return ok;
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
  CHECK(tl_vta_config_parse(ctx, vta_b2_json, "b2", &b2) == 0);
  static const char *const same[] = {"gemm_counter", "alu_counter", "inp_load_nbytes",
                                     "wgt_load_nbytes", "out_store_nbytes"};
  uint64_t st = seed;
  int checked = 0, tries = 0, fewer = 0, equal = 0, more = 0;
  double ratio_sum = 0, rmin = 1e9, rmax = 0;
  while (checked < nconf && tries < 20 * nconf) {
    int which = (int)(rnd(&st) % VTA_CONV_CASES);
    tl_vta_task *t = NULL;
    CHECK_MSG(tl_vta_task_new(ctx, which < VTA_CONV_DEFAULT_CASES ? &d : &b2, vta_conv_cases[which], &t) == 0, "%s", tl_errmsg(ctx));
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

TL_TEST(vta_lower_random_configs) { routes_agree(200, 7, getenv("TL_VTA_VERBOSE") != NULL); }

TL_TEST(vta_lower_refuses_overflow) {
  /* tiles that need more accumulator (and input) elements than the SRAMs hold, with both
  ** virtual threads: the passes refuse the lowered function naming the buffer, as the
  ** config check does */
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config c;
  CHECK(tl_vta_config_parse(ctx, default_json, "test", &c) == 0);
  tl_vta_task *t = NULL;
  CHECK(tl_vta_task_new(ctx, &c,
                        "[[\"TENSOR\",[1,16,14,14,1,16],\"int8\"],[\"TENSOR\",[32,16,3,3,16,16],"
                        "\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
                        &t) == 0);
  int64_t idx = index_of(ctx, t,
      "[[\"tile_b\",\"sp\",[-1,1]],[\"tile_h\",\"sp\",[-1,7]],[\"tile_w\",\"sp\",[-1,7]],"
      "[\"tile_ci\",\"sp\",[-1,16]],[\"tile_co\",\"sp\",[-1,32]],[\"oc_nthread\",\"ot\",2],"
      "[\"h_nthread\",\"ot\",2]]");
  CHECK_EQ_INT(tl_vta_task_check(ctx, t, idx), TL_E_SCHED);
  tl_clearerr(ctx);
  CHECK(ir_refuses_at(ctx, t, idx));
  CHECK_MSG(strstr(tl_errmsg(ctx), "accumulator elements x 4 threads, more than the 2048 of the accumulator buffer") != NULL,
            "%s", tl_errmsg(ctx));
  tl_vta_task_free(t);
  tl_ctx_free(ctx);
}

/* TopHub's vta_v0.10 log: its conv2d_packed.vta records (each on its own configuration,
** pynq 1x16 or 4x8) through both routes. The suite runs the records of at most 2e8 flop
** (the small layers); TL_VTA_TOPHUB_ALL=1 runs all 86. */
TL_TEST(vta_lower_tophub) {
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config c16, c48;
  CHECK(tl_vta_config_parse(ctx, default_json, "pynq_1x16", &c16) == 0);
  CHECK(tl_vta_config_parse(ctx, b4_json, "pynq_4x8", &c48) == 0);
  FILE *fp = fopen(TL_SOURCE_DIR "/data/tophub/vta_v0.10.log", "r");
  CHECK(fp != NULL);
  int all = getenv("TL_VTA_TOPHUB_ALL") != NULL, verbose = getenv("TL_VTA_VERBOSE") != NULL;
  int records = 0, run = 0, fewer = 0, equal = 0, more = 0;
  double ratio_sum = 0, rmin = 1e9, rmax = 0, cyc_ir = 0, cyc_dir = 0;
  char line[8192];
  while (fgets(line, sizeof line, fp)) {
    if (line[0] != '{') continue;
    json_error_t err;
    json_t *rec = json_loads(line, 0, &err);
    CHECK(rec != NULL);
    json_t *in = json_object_get(rec, "input");
    const char *tmpl = json_string_value(json_array_get(in, 1));
    const char *tgt = json_string_value(json_array_get(in, 0));
    if (!tmpl || strcmp(tmpl, "conv2d_packed.vta") || !tgt) {
      json_decref(rec);
      continue;
    }
    records++;
    const tl_vta_config *c = strstr(tgt, "pynq_1x16_i8w8a32_15_15_18_17") ? &c16
                           : strstr(tgt, "pynq_4x8_i8w8a32_15_16_16_18") ? &c48 : NULL;
    CHECK_MSG(c != NULL, "model of %s", tgt);
    char *args = json_dumps(json_array_get(in, 2), JSON_COMPACT);
    char *ent = json_dumps(json_object_get(json_object_get(rec, "config"), "entity"), JSON_COMPACT);
    tl_vta_task *t = NULL;
    CHECK_MSG(tl_vta_task_new(ctx, c, args, &t) == 0, "%s", tl_errmsg(ctx));
    if (all || tl_vta_task_workload(t)->flop <= 2e8) {
      int64_t idx = index_of(ctx, t, ent);
      char *ir = NULL, *dir = NULL;
      CHECK_MSG(tl_vta_task_run_route(ctx, t, idx, 5, 0, &ir, NULL) == 0, "record %d: %s", records,
                tl_errmsg(ctx));
      CHECK_MSG(tl_vta_task_run_route(ctx, t, idx, 5, 1, &dir, NULL) == 0, "record %d: %s", records,
                tl_errmsg(ctx));
      CHECK(stat_of(ir, "gemm_counter") == stat_of(dir, "gemm_counter"));
      CHECK(stat_of(ir, "inp_load_nbytes") == stat_of(dir, "inp_load_nbytes"));
      double ni = stat_of(ir, "insn_count"), nd = stat_of(dir, "insn_count");
      double ci = stat_of(ir, "cycles"), cd = stat_of(dir, "cycles"), r = ci / cd;
      fewer += ni < nd, equal += ni == nd, more += ni > nd;
      ratio_sum += r, rmin = r < rmin ? r : rmin, rmax = r > rmax ? r : rmax;
      cyc_ir += ci, cyc_dir += cd;
      if (verbose)
        printf("record %d %s %s: insns %.0f / %.0f cycles %.0f / %.0f (%.3f)\n", records,
               c == &c16 ? "1x16" : "4x8", args, ni, nd, ci, cd, r);
      free(ir);
      free(dir);
      run++;
    }
    free(args);
    free(ent);
    tl_vta_task_free(t);
    json_decref(rec);
  }
  fclose(fp);
  CHECK_EQ_INT(records, 86);
  CHECK(run > 0);
  printf("     TopHub: %d of %d conv2d_packed.vta records through both routes: instructions fewer "
         "%d, equal %d, more %d; cycles ratio mean %.3f, min %.3f, max %.3f, total %.4f\n",
         run, records, fewer, equal, more, ratio_sum / run, rmin, rmax, cyc_ir / cyc_dir);
  tl_ctx_free(ctx);
}

/* A network's fused groups on VTA: random configs (both virtual threads among them) of three
** layer shapes, each with an ending of the packed network (bias, relu, the rounding add, a
** right shift, the clip; an int8 residual shifted left, an int8 residual as it is, an int32
** residual; immediates only), run through the IR route on the simulator and equal to the C
** reference of the conv and the same ending bit for bit (run_fused checks every output
** byte); the stream loads the bias and the residual into the accumulator (ACC, ACC8) and uses
** ALU tensor ADDs. A bad ending is refused naming the op. */
TL_TEST(vta_lower_fused_endings) {
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config d;
  CHECK(tl_vta_config_parse(ctx, default_json, "test", &d) == 0);
  static const char *const wl[] = {
      "[[\"TENSOR\",[1,2,8,8,1,16],\"int8\"],[\"TENSOR\",[2,2,3,3,16,16],\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
      "[[\"TENSOR\",[1,3,9,7,1,16],\"int8\"],[\"TENSOR\",[4,3,3,3,16,16],\"int8\"],[2,2],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
      "[[\"TENSOR\",[1,2,8,8,1,16],\"int8\"],[\"TENSOR\",[4,2,1,1,16,16],\"int8\"],[2,2],[0,0,0,0],[1,1],\"NCHW1n16c\",\"int32\"]",
  };
  static const char *const ends[] = {
      "[[\"bias\"],[\"max\",0],[\"add\",512],[\"shr\",10],[\"max\",-127],[\"min\",127]]",
      "[[\"bias\"],[\"res\",3],[\"max\",0],[\"add\",256],[\"shr\",9],[\"max\",-127],[\"min\",127]]",
      "[[\"bias\"],[\"res\",0],[\"max\",0],[\"shr\",7],[\"min\",127]]",
      "[[\"add\",-5],[\"shl\",1],[\"shr\",6],[\"max\",-127],[\"min\",127]]",
      "[[\"bias\"],[\"res32\",0],[\"max\",0],[\"add\",1024],[\"shr\",11],[\"max\",-127],[\"min\",127]]",
  };
  uint64_t st = 11;
  int checked = 0, tries = 0;
  while (checked < 25 && tries < 400) {
    int w = (int)(rnd(&st) % TL_ARRAY_SIZE(wl)), e = checked % (int)TL_ARRAY_SIZE(ends);
    tl_vta_task *t = NULL;
    CHECK_MSG(tl_vta_task_new(ctx, &d, wl[w], &t) == 0, "%s", tl_errmsg(ctx));
    int64_t idx = checked < 5 ? 0 : (int64_t)(rnd(&st) % (uint32_t)tl_vta_task_space_len(t));
    tries++;
    if (tl_vta_task_check(ctx, t, idx) == 0) {
      char *stats = NULL;
      int rc = tl_vta_task_run_fused(ctx, t, idx, ends[e], NULL, NULL, NULL, NULL, NULL,
                                     (uint64_t)tries, 1, &stats);
      CHECK_MSG(rc == 0, "workload %d, config %lld, ending %d: %s", w, (long long)idx, e,
                tl_errmsg(ctx));
      CHECK(stat_of(stats, "cycles") > 0);
      free(stats);
      checked++;
    }
    tl_clearerr(ctx);
    tl_vta_task_free(t);
  }
  CHECK_EQ_INT(checked, 25);
  /* a bad ending is refused naming the op */
  tl_vta_task *t = NULL;
  CHECK(tl_vta_task_new(ctx, &d, wl[0], &t) == 0);
  char *stats = NULL;
  CHECK(tl_vta_task_run_fused(ctx, t, 0, "[[\"sqrt\"]]", NULL, NULL, NULL, NULL, NULL, 1, 1,
                              &stats) != 0);
  CHECK(strstr(tl_errmsg(ctx), "sqrt") != NULL);
  tl_clearerr(ctx);
  CHECK(tl_vta_task_run_fused(ctx, t, 0, "[[\"shr\",40]]", NULL, NULL, NULL, NULL, NULL, 1, 1,
                              &stats) != 0);
  tl_clearerr(ctx);
  tl_vta_task_free(t);
  tl_ctx_free(ctx);
}
