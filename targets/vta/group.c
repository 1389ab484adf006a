/*
** group.c -- a network's packed conv group as a kernel of the graph executor:
** the conv of one config with the group's own ending (lower.c's fused route),
** its instruction stream built once on a simulator the network's groups share,
** each with its own DRAM buffers; a run copies the step's arrays (data, kernel,
** then bias and residual when the ending has them) into DRAM, runs the stream
** and copies the int8 result back. The cycles of every run are kept per group.
*/
#include "conv2d.h"

struct tl_vta_group {
  tl_vta_sim *sim;               /* shared; not owned */
  tl_vta_cmd *q;                 /* holds the closed stream and its micro-op kernels */
  tl_vta_conv2d w;
  tl_vta_epilogue e;
  int nin;                       /* data, kernel[, bias][, residual] */
  uint32_t phys[5];
  int64_t bytes[5];
  uint64_t last_cycles, total_cycles, runs;
};

TL_EXPORT void tl_vta_group_free(tl_vta_group *g) {
  if (!g) return;
  tl_vta_cmd_free(g->q);
  for (int i = 0; i < g->nin + 1; i++)
    if (g->phys[i]) tl_vta_sim_release(NULL, g->sim, g->phys[i]);
  free(g);
}

TL_EXPORT int tl_vta_group_new(tl_ctx *ctx, tl_vta_sim *sim, tl_vta_task *t, int64_t index,
                               const char *epilogue_json, tl_vta_group **out) {
  *out = NULL;
  tl_vta_group *g = tl_calloc(1, sizeof *g);
  g->sim = sim;
  g->w = *tl_vta_task_workload(t);
  tl_vta_config c;
  tl_vta_task_config(t, &c);
  const tl_vta_config *sc = tl_vta_sim_config(sim);
  tl_vta_knobs k;
  int rc;
  if (sc->batch != c.batch || sc->block_in != c.block_in || sc->block_out != c.block_out) {
    rc = tl_err(ctx, TL_E_ARG, "vta group: the task's configuration (%s) is not the simulator's (%s)",
                c.model, sc->model);
    goto fail;
  }
  if ((rc = tl_vta_epilogue_parse(ctx, epilogue_json, &g->e)) ||
      (rc = tl_vta_task_knobs(ctx, t, index, &k)))
    goto fail;
  g->bytes[g->nin++] = tl_vta_conv2d_bytes(sc, &g->w, 0);
  g->bytes[g->nin++] = tl_vta_conv2d_bytes(sc, &g->w, 1);
  if (g->e.bias) g->bytes[g->nin++] = g->w.COo * g->w.B * 4;
  if (g->e.res) g->bytes[g->nin++] = tl_vta_conv2d_bytes(sc, &g->w, 2) * (g->e.res_bits / 8);
  g->bytes[g->nin] = tl_vta_conv2d_bytes(sc, &g->w, 2);
  for (int i = 0; i <= g->nin; i++)
    if ((rc = tl_vta_sim_alloc(ctx, sim, (size_t)g->bytes[i], &g->phys[i]))) goto fail;
  if ((rc = tl_vta_cmd_new(ctx, sim, &g->q)) ||
      (rc = tl_vta_conv2d_fused_emit(g->q, ctx, sc, &g->w, &g->e, &k, g->phys)) ||
      (rc = tl_vta_cmd_close(g->q)))
    goto fail;
  *out = g;
  return TL_OK;
fail:
  tl_vta_group_free(g);
  return rc;
}

static int group_run(void *ud, tl_ctx *ctx, tl_array *const *args, int nargs) {
  tl_vta_group *g = ud;
  if (nargs != g->nin + 1)
    return tl_err(ctx, TL_E_ARG, "vta group: %d arguments, expected %d", nargs, g->nin + 1);
  for (int i = 0; i <= g->nin; i++)
    if ((int64_t)tl_array_nbytes(args[i]) != g->bytes[i] || !tl_array_data(args[i]))
      return tl_err(ctx, TL_E_ARG, "vta group: argument %d has %lld bytes, expected %lld", i,
                    (long long)tl_array_nbytes(args[i]), (long long)g->bytes[i]);
  for (int i = 0; i < g->nin; i++)
    memcpy(tl_vta_sim_host_ptr(g->sim, g->phys[i], (size_t)g->bytes[i]), tl_array_data(args[i]),
           (size_t)g->bytes[i]);
  uint64_t c0 = tl_vta_sim_stats(g->sim)->cycles;
  int rc = tl_vta_cmd_rerun(g->q);
  if (rc) return rc;
  g->last_cycles = tl_vta_sim_stats(g->sim)->cycles - c0;
  g->total_cycles += g->last_cycles;
  g->runs++;
  memcpy(tl_array_data(args[g->nin]),
         tl_vta_sim_host_ptr(g->sim, g->phys[g->nin], (size_t)g->bytes[g->nin]),
         (size_t)g->bytes[g->nin]);
  return TL_OK;
}

TL_EXPORT int tl_vta_group_attach(tl_ctx *ctx, tl_vta_group *g, tl_graph_exec *e,
                                  const char *name, int *kernel) {
  return tl_graph_exec_add_kernel_host(ctx, e, name, group_run, g, kernel);
}

TL_EXPORT int tl_vta_group_num_args(const tl_vta_group *g) { return g->nin + 1; }
TL_EXPORT uint64_t tl_vta_group_cycles(const tl_vta_group *g, int total) {
  return total ? g->total_cycles : g->last_cycles;
}
TL_EXPORT uint64_t tl_vta_group_runs(const tl_vta_group *g) { return g->runs; }
