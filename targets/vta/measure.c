/*
** measure.c -- measuring a conv2d_packed.vta config: in a forked child (the
** isolation every measurement has: a crash or a hang is an error record),
** the config's stream is built, run on vta-sim with random data and checked
** against the CPU reference; the cost is the simulated time from the cycle
** model (deterministic: every repeat gives the same figure), never host time.
** The local runner and the RPC server (kind "vta") call the same function.
*/
#include "../../core/measure/measure.h"
#include "conv2d.h"

#include <stdio.h>

typedef struct measure_args {
  const char *config, *args;
  int64_t index;
  int repeat;
} measure_args;

static int measure_child(void *arg, int out_fd) {
  measure_args *m = arg;
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config *c = NULL;
  tl_vta_task *t = NULL;
  char *stats = NULL;
  int eno = TL_MEASURE_NO_ERROR;
  if (tl_vta_config_from_string(ctx, m->config, "vta config", &c) ||
      tl_vta_task_new(ctx, c, m->args, &t)) {
    eno = TL_MEASURE_INSTANTIATION_ERROR;
  } else if (tl_vta_task_check(ctx, t, m->index)) {
    eno = TL_MEASURE_INSTANTIATION_ERROR;
  } else if (tl_vta_task_run(ctx, t, m->index, 1, 1, &stats)) {
    eno = strstr(tl_errmsg(ctx), "wrong answer") ? TL_MEASURE_WRONG_ANSWER
                                                 : TL_MEASURE_RUNTIME_DEVICE;
  }
  if (eno) {
    tl_measure_child_reply(out_fd, eno, 0, NULL, tl_errmsg(ctx));
  } else {
    json_t *j = json_loads(stats, 0, NULL);
    double secs = json_number_value(json_object_get(j, "seconds"));
    json_decref(j);
    double costs[TL_MEASURE_MAX_REPEAT];
    for (int i = 0; i < m->repeat; i++) costs[i] = secs;
    /* the simulator's figures ride along as the message */
    tl_measure_child_reply(out_fd, TL_MEASURE_NO_ERROR, m->repeat, costs, stats);
  }
  free(stats);
  tl_vta_task_free(t);
  tl_vta_config_free(c);
  tl_ctx_free(ctx);
  return 0;
}

TL_EXPORT int tl_vta_measure(tl_ctx *ctx, const char *config_json, const char *args_json,
                             int64_t index, int repeat, double timeout_s, double *costs,
                             int *ncosts, int *error_no, char **msg) {
  *ncosts = 0;
  *msg = NULL;
  *error_no = TL_MEASURE_UNKNOWN_ERROR;
  if (!config_json || !args_json || repeat < 1 || repeat > TL_MEASURE_MAX_REPEAT)
    return tl_err(ctx, TL_E_ARG, "vta measure: needs a config, args and repeat in [1, %d]",
                  TL_MEASURE_MAX_REPEAT);
  measure_args m = {config_json, args_json, index, repeat};
  tl_proc_result *res = NULL;
  int rc = tl_proc_call(ctx, measure_child, &m, timeout_s, (size_t)1 << 20, &res);
  if (rc) return rc;
  size_t elen = 0;
  const char *e = tl_proc_stderr(res, &elen);
  switch (tl_proc_status(res)) {
  case TL_PROC_OK:
    tl_measure_ok_reply(res, repeat, "vta measure: the child", costs, ncosts, error_no, msg);
    break;
  case TL_PROC_TIMEOUT:
    *error_no = TL_MEASURE_RUN_TIMEOUT;
    *msg = tl_sprintf("vta measure: config %lld timed out after %.1f s", (long long)index,
                      timeout_s);
    break;
  default:
    *error_no = TL_MEASURE_RUNTIME_DEVICE;
    *msg = tl_sprintf("vta measure: the child failed (status %d)%s%.*s", tl_proc_code(res),
                      elen ? ": " : "", (int)(elen > 2000 ? 2000 : elen), e ? e : "");
    break;
  }
  tl_proc_result_free(res);
  return TL_OK;
}
