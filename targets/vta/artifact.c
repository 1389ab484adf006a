/*
** artifact.c -- VTA groups in a graph artifact (core/graph/artifact.c): the host
** kind "vta" of tl_graph_artifact_load_kind, so that a network with packed conv
** groups on VTA travels as files and runs where it is loaded (an RPC server's
** graph_load) with a simulator of its own.
**
** The description's section and kernels (written by tunelua.graph.executor's
** export):
**
**   "vta": {"config": "<the vta_config.json text>", "model": "1x16_i8w8a32_15_15_18_17",
**           "dram_bytes": BYTES}
**   "kernels": [..., {"vta": {"args": [task args], "config": INDEX, "epilogue": {...}}}]
**
** A kernel is rebuilt as the build made it: the conv2d_packed.vta task of its
** args on the section's configuration, config INDEX, its ending, its stream
** emitted once on the artifact's simulator (group.c); the weights and biases
** are the steps' param slots, copied to DRAM each run as locally. Everything is
** checked, and errors name the field: the configuration is parsed and its model
** must be the section's, the task args are checked as a task's, the index must
** lie in the task's space, and the group must fit the configuration.
*/
#include "conv2d.h"

#include <jansson.h>

typedef struct {
  tl_vta_config *cfg;
  tl_vta_sim *sim;
  tl_vta_group **g;
  int n, cap;
} vta_net;

static void net_close(void *state) {
  vta_net *v = state;
  if (!v) return;
  for (int i = 0; i < v->n; i++) tl_vta_group_free(v->g[i]);   /* before the simulator */
  free(v->g);
  tl_vta_sim_free(v->sim);
  tl_vta_config_free(v->cfg);
  free(v);
}

static int net_open(tl_ctx *ctx, const char *text, int64_t max_bytes, void **state) {
  *state = NULL;
  json_t *r = json_loads(text, 0, NULL);
  vta_net *v = tl_calloc(1, sizeof *v);
  const char *cfg = json_string_value(json_object_get(r, "config"));
  const char *model = json_string_value(json_object_get(r, "model"));
  json_t *db = json_object_get(r, "dram_bytes");
  int64_t lim = INT64_C(1) << 31;
  if (max_bytes < lim) lim = max_bytes;
  int rc = TL_OK;
  if (!cfg)
    rc = tl_err(ctx, TL_E_PARSE, "config: expected the vta_config.json text (a string)");
  else if (!model)
    rc = tl_err(ctx, TL_E_PARSE, "model: expected a string");
  else if (!json_is_integer(db) || json_integer_value(db) < (1 << 20) || json_integer_value(db) > lim)
    rc = tl_err(ctx, TL_E_PARSE, "dram_bytes: expected an integer in [%d, %lld]", 1 << 20,
                (long long)lim);
  else if ((rc = tl_vta_config_from_string(ctx, cfg, "the artifact's vta_config.json", &v->cfg)))
    tl_err_prefix(ctx, "config: ");
  else if (strcmp(v->cfg->model, model))
    rc = tl_err(ctx, TL_E_PARSE, "model: the configuration is %s, the artifact was built for %s",
                v->cfg->model, model);
  else
    rc = tl_vta_sim_new(ctx, v->cfg, (size_t)json_integer_value(db), &v->sim);
  json_decref(r);
  if (rc) {
    net_close(v);
    return rc;
  }
  *state = v;
  return TL_OK;
}

static int net_add(tl_ctx *ctx, void *state, const char *text, tl_graph_exec *e, int *kernel,
                   int *nargs) {
  vta_net *v = state;
  json_t *r = json_loads(text, 0, NULL);
  json_t *args = json_object_get(r, "args"), *ix = json_object_get(r, "config");
  json_t *ep = json_object_get(r, "epilogue");
  tl_vta_task *t = NULL;
  tl_vta_group *g = NULL;
  char *at = NULL, *et = NULL;
  int rc = TL_OK;
  if (!json_is_array(args)) {
    rc = tl_err(ctx, TL_E_PARSE, "args: expected the task's args (a list)");
    goto done;
  }
  at = json_dumps(args, JSON_COMPACT);
  if ((rc = tl_vta_task_new(ctx, v->cfg, at, &t))) {
    tl_err_prefix(ctx, "args: ");
    goto done;
  }
  int64_t len = tl_vta_task_space_len(t);
  if (!json_is_integer(ix) || json_integer_value(ix) < 0 || json_integer_value(ix) >= len) {
    rc = tl_err(ctx, TL_E_PARSE, "config: expected an integer in [0, %lld]", (long long)len - 1);
    goto done;
  }
  if (json_is_string(ep)) et = tl_strdup(json_string_value(ep));
  else if (json_is_object(ep) || json_is_array(ep)) et = json_dumps(ep, JSON_COMPACT);
  else {
    rc = tl_err(ctx, TL_E_PARSE, "epilogue: expected the group's ending (a list of ops)");
    goto done;
  }
  if ((rc = tl_vta_group_new(ctx, v->sim, t, json_integer_value(ix), et, &g))) goto done;
  char name[32];
  snprintf(name, sizeof name, "vta_%d", v->n);
  if (v->n == v->cap) {
    v->cap = v->cap ? 2 * v->cap : 16;
    v->g = tl_realloc(v->g, (size_t)v->cap * sizeof *v->g);
  }
  v->g[v->n++] = g;
  rc = tl_vta_group_attach(ctx, g, e, name, kernel);
  *nargs = tl_vta_group_num_args(g);
done:
  tl_vta_task_free(t);
  free(at);
  free(et);
  json_decref(r);
  return rc;
}

static const tl_graph_host_kind vta_kind = { "vta", net_open, net_add, net_close };

TL_EXPORT const tl_graph_host_kind *tl_vta_graph_kind(void) { return &vta_kind; }

TL_EXPORT const char *tl_vta_graph_model(const void *state) {
  const vta_net *v = state;
  return v ? v->cfg->model : NULL;
}

TL_EXPORT int tl_vta_graph_cycles(const void *state, int total, uint64_t *cycles, int max) {
  const vta_net *v = state;
  if (!v) return 0;
  for (int i = 0; i < v->n && i < max; i++) cycles[i] = tl_vta_group_cycles(v->g[i], total);
  return v->n;
}
