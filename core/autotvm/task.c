/*
** task.c -- AutoTVM tasks: a template applied to args (formats §1.2) for a
** target. The registry (targets/targets.c) finds the template by name and
** parses the target; creating a task runs the template's define step (the config
** space), builds the compute DAG once and counts its FLOPs; instantiating
** config i replays the template's schedule on a fresh schedule of that DAG.
*/
#include "autotvm.h"

#include <math.h>
#include <stdio.h>

struct tl_atvm_task {
  char *name, *args_json;
  const tl_atvm_template *tmpl;
  tl_atvm_args args;
  tl_atvm_space *space;
  tl_dag *dag;                 /* placeholders + template compute */
  int ninputs, noutputs;
  int inputs[8], outputs[8];   /* tensor ids in dag */
  char *in_names[8];
  char *out_names[8];
  double flop;
  tl_buf text;
  tl_target_hw hw;             /* the target's hardware facts */
  int blocked;                 /* instantiate in the blocked layout (tl_atvm_task_set_blocked) */
};

/* ---- template arguments ----------------------------------------------------- */

int tl_atvm_args_ints(tl_ctx *ctx, const tl_atvm_args *a, int i, int n, int64_t *out,
                      const char *what) {
  json_t *v = json_array_get(a->json, i);
  if (json_is_integer(v)) {
    for (int k = 0; k < n; k++) out[k] = json_integer_value(v);
    return TL_OK;
  }
  if (!json_is_array(v)) return tl_err(ctx, TL_E_ARG, "args[%d] (%s) must be a list of ints", i, what);
  size_t m = json_array_size(v);
  if (n == 4 && m == 2) {   /* (top/bottom, left/right) padding */
    out[0] = out[2] = json_integer_value(json_array_get(v, 0));
    out[1] = out[3] = json_integer_value(json_array_get(v, 1));
    return TL_OK;
  }
  if ((int)m != n) return tl_err(ctx, TL_E_ARG, "args[%d] (%s) must have %d values", i, what, n);
  for (int k = 0; k < n; k++) out[k] = json_integer_value(json_array_get(v, k));
  return TL_OK;
}

/* ---- args ------------------------------------------------------------------------ */

int tl_atvm_parse_args(tl_ctx *ctx, const char *args_json, tl_atvm_args *a) {
  memset(a, 0, sizeof *a);
  json_error_t err;
  a->json = json_loads(args_json ? args_json : "", 0, &err);
  if (!a->json || !json_is_array(a->json)) {
    json_decref(a->json);
    a->json = NULL;
    return tl_err(ctx, TL_E_PARSE, "autotvm: args must be a JSON array, got '%.200s'",
                  args_json ? args_json : "NULL");
  }
  size_t i;
  json_t *v;
  json_array_foreach(a->json, i, v) {
    if (!json_is_array(v) || json_array_size(v) != 3 || !json_is_string(json_array_get(v, 0)) ||
        strcmp(json_string_value(json_array_get(v, 0)), "TENSOR") != 0)
      continue;
    json_t *shape = json_array_get(v, 1), *dt = json_array_get(v, 2);
    int t = a->ntensors;
    if (t >= 8 || !json_is_array(shape) || json_array_size(shape) > 8 || !json_is_string(dt)) {
      tl_atvm_args_free(a);
      return tl_err(ctx, TL_E_PARSE, "autotvm: args: bad TENSOR entry %zu", i);
    }
    a->ndim[t] = (int)json_array_size(shape);
    for (int d = 0; d < a->ndim[t]; d++) {
      json_t *e = json_array_get(shape, d);
      if (!json_is_integer(e) || json_integer_value(e) < 1) {
        tl_atvm_args_free(a);
        return tl_err(ctx, TL_E_PARSE, "autotvm: args: TENSOR %zu: dimension %d must be a positive integer", i, d);
      }
      a->shape[t][d] = json_integer_value(e);
    }
    if (tl_dtype_parse(ctx, json_string_value(dt), &a->dtype[t])) {
      tl_atvm_args_free(a);
      return tl_err_prefix(ctx, "autotvm: args: TENSOR %zu: ", i);
    }
    a->ntensors++;
  }
  return TL_OK;
}

void tl_atvm_args_free(tl_atvm_args *a) {
  json_decref(a->json);
  a->json = NULL;
}

/* ---- tasks -------------------------------------------------------------------------- */

TL_EXPORT void tl_atvm_task_free(tl_atvm_task *t) {
  if (!t) return;
  free(t->name), free(t->args_json);
  tl_atvm_args_free(&t->args);
  tl_atvm_space_free(t->space);
  tl_dag_free(t->dag);
  for (int i = 0; i < 8; i++) free(t->in_names[i]), free(t->out_names[i]);
  tl_buf_free(&t->text);
  free(t);
}

int tl_atvm_task_new(tl_ctx *ctx, const tl_atvm_template *tm, const char *args_json,
                     const tl_target_hw *hw, tl_atvm_task **out) {
  *out = NULL;
  const char *template_name = tm->name;
  tl_atvm_task *t = tl_calloc(1, sizeof *t);
  t->tmpl = tm;
  t->name = tl_strdup(template_name);
  t->hw = *hw;
  int rc;
  if ((rc = tl_atvm_parse_args(ctx, args_json, &t->args))) goto fail;
  t->args_json = json_dumps(t->args.json, JSON_COMPACT);
  t->space = tl_atvm_space_new();
  tl_atvm_cfg cfg = {ctx, t->space, NULL, 0, &t->hw};
  if ((rc = tm->define(&cfg, &t->args))) goto fail;
  t->dag = tl_dag_new();
  static const char *const names[] = {"data", "kernel", "bias", "in3", "in4", "in5", "in6", "in7"};
  static const char *const dnames[] = {"data", "weight", "bias", "in3", "in4", "in5", "in6", "in7"};
  int dense = strstr(template_name, "dense") != NULL;
  for (int i = 0; i < t->args.ntensors; i++) {
    t->in_names[i] = tl_strdup(dense ? dnames[i] : names[i]);
    int nd = t->args.ndim[i];
    int64_t dshape[8];
    const int64_t *shape = t->args.shape[i];
    if (tm->deployed_input && tm->deployed_input(&t->args, i, &nd, dshape)) shape = dshape;
    if ((rc = tl_dag_placeholder(ctx, t->dag, t->in_names[i], nd, shape, t->args.dtype[i],
                                 &t->inputs[i])))
      goto fail;
  }
  t->ninputs = t->args.ntensors;
  if ((rc = tm->compute(ctx, &t->args, t->dag, t->inputs, t->ninputs, t->outputs, 8, &t->noutputs)))
    goto fail;
  for (int i = 0; i < t->noutputs; i++)
    t->out_names[i] = tl_strdup(tl_dag_tensor_name(t->dag, t->outputs[i]));
  t->flop = cfg.flop > 0 ? cfg.flop : tl_dag_flop(t->dag);
  if (!(t->flop > 0)) {
    rc = tl_err(ctx, TL_E_INTERNAL, "autotvm: task %s: could not count FLOPs", template_name);
    goto fail;
  }
  *out = t;
  return TL_OK;
fail:
  tl_err_prefix(ctx, "autotvm.task.create(%s): ", template_name);
  tl_atvm_task_free(t);
  return rc;
}

TL_EXPORT const char *tl_atvm_task_args_json(const tl_atvm_task *t) { return t ? t->args_json : NULL; }
TL_EXPORT double tl_atvm_task_flop(const tl_atvm_task *t) { return t ? t->flop : 0; }
TL_EXPORT tl_atvm_space *tl_atvm_task_space(tl_atvm_task *t) { return t ? t->space : NULL; }

/* ---- space queries ------------------------------------------------------------------ */

TL_EXPORT int64_t tl_atvm_space_range_length(const tl_atvm_task *t) {
  return tl_atvm_space_total(t->space);
}
TL_EXPORT int64_t tl_atvm_space_len(const tl_atvm_task *t) { return tl_atvm_space_total(t->space); }
TL_EXPORT int tl_atvm_space_num_knobs(const tl_atvm_task *t) { return t->space->knobs.n; }
TL_EXPORT int64_t tl_atvm_space_knob_dim(const tl_atvm_task *t, int k) {
  return tl_atvm_space_dim(t->space, k);
}
TL_EXPORT int tl_atvm_space_is_valid(const tl_atvm_task *t, int64_t index) {
  return index >= 0 && index < tl_atvm_space_total(t->space);
}
TL_EXPORT void tl_atvm_space_point2knob(const tl_atvm_task *t, int64_t index, int64_t *digits) {
  for (int k = 0; k < t->space->knobs.n; k++) {
    int64_t d = t->space->knobs.v[k].dim;
    digits[k] = index % d;
    index /= d;
  }
}
TL_EXPORT int64_t tl_atvm_space_knob2point(const tl_atvm_task *t, const int64_t *digits) {
  int64_t p = 0, m = 1;
  for (int k = 0; k < t->space->knobs.n; k++) {
    p += digits[k] * m;
    m *= t->space->knobs.v[k].dim;
  }
  return p;
}
TL_EXPORT void tl_atvm_fallback_knobs(const tl_atvm_task *t, int64_t *digits) {
  for (int k = 0; k < t->space->knobs.n; k++) digits[k] = t->space->knobs.v[k].fallback;
}

/* Value equality as Python compares the log's values: numbers by value (bools too). */
static int json_value_eq(json_t *a, json_t *b) {
  int an = json_is_number(a) || json_is_boolean(a), bn = json_is_number(b) || json_is_boolean(b);
  if (an && bn) {
    double x = json_is_number(a) ? json_number_value(a) : json_is_true(a);
    double y = json_is_number(b) ? json_number_value(b) : json_is_true(b);
    return x == y;
  }
  return json_equal(a, b);
}

static int64_t find_entity_json(tl_knob *kb, json_t *v) {
  if (kb->kind == TL_KNOB_OTHER) {
    for (int64_t j = 0; j < kb->dim; j++) {
      json_t *c = json_loads(kb->other[j], JSON_DECODE_ANY, NULL);
      int eq = c && json_value_eq(c, v);
      json_decref(c);
      if (eq) return j;
    }
    return -1;
  }
  if (!json_is_array(v) || (int)json_array_size(v) != kb->width) return -1;
  int64_t e[16];
  for (int i = 0; i < kb->width; i++) {
    json_t *x = json_array_get(v, i);
    if (kb->kind == TL_KNOB_ANNOTATE && !kb->locate_cache) {
      if (!json_is_string(x)) return -1;
      e[i] = -1;
      for (int c = 0; c < TL_AN_NCODES; c++)
        if (strcmp(tl_an_names[c], json_string_value(x)) == 0) e[i] = c;
      if (e[i] < 0) return -1;
    } else {
      if (!json_is_number(x)) return -1;
      e[i] = (int64_t)json_number_value(x);
    }
  }
  int first = kb->kind == TL_KNOB_SPLIT ? 1 : 0;   /* size[0] is never used */
  for (int64_t j = 0; j < kb->dim; j++) {
    const int64_t *c = kb->ints + j * kb->width;
    int same = 1;
    for (int i = first; i < kb->width && same; i++) same = c[i] == e[i];
    if (same) return j;
  }
  return -1;
}

TL_EXPORT int64_t tl_atvm_space_find_entity(tl_atvm_space *sp, int k, const char *value_json) {
  if (k < 0 || k >= sp->knobs.n) return -1;
  json_t *v = json_loads(value_json ? value_json : "", JSON_DECODE_ANY, NULL);
  if (!v) return -1;
  int64_t j = find_entity_json(&sp->knobs.v[k], v);
  json_decref(v);
  return j;
}

static const char *kind_str[4] = {"sp", "re", "an", "ot"};

TL_EXPORT int tl_atvm_space_index_of_entity(tl_ctx *ctx, tl_atvm_task *t, const char *entity_json,
                                            int64_t *index) {
  *index = -1;
  json_error_t err;
  json_t *e = json_loads(entity_json ? entity_json : "", 0, &err);
  if (!e || !json_is_array(e)) {
    json_decref(e);
    return tl_err(ctx, TL_E_PARSE, "autotvm: entity must be a JSON array of [name, kind, value]");
  }
  tl_atvm_space *sp = t->space;
  int64_t digits[64] = {0};
  int rc = TL_OK;
  if ((int)json_array_size(e) != sp->knobs.n) {
    rc = tl_err(ctx, TL_E_ARG, "autotvm: %s: entity has %zu knobs, the space has %d", t->name,
                json_array_size(e), sp->knobs.n);
    goto done;
  }
  for (int k = 0; k < sp->knobs.n; k++) {
    json_t *it = json_array_get(e, k);
    tl_knob *kb = &sp->knobs.v[k];
    const char *nm = json_string_value(json_array_get(it, 0));
    const char *kd = json_string_value(json_array_get(it, 1));
    if (!json_is_array(it) || json_array_size(it) != 3 || !nm || !kd) {
      rc = tl_err(ctx, TL_E_PARSE, "autotvm: entity item %d is not [name, kind, value]", k);
      goto done;
    }
    if (strcmp(nm, kb->name) != 0 || strcmp(kd, kind_str[kb->kind]) != 0) {
      rc = tl_err(ctx, TL_E_ARG, "autotvm: %s: entity knob %d is '%s' (%s), the space has '%s' (%s)",
                  t->name, k, nm, kd, kb->name, kind_str[kb->kind]);
      goto done;
    }
    digits[k] = find_entity_json(kb, json_array_get(it, 2));
    if (digits[k] < 0) {
      char *txt = json_dumps(json_array_get(it, 2), JSON_ENCODE_ANY);
      rc = tl_err(ctx, TL_E_ARG, "autotvm: %s: knob '%s' has no entity %s", t->name, kb->name,
                  txt ? txt : "?");
      free(txt);
      goto done;
    }
  }
  *index = tl_atvm_space_knob2point(t, digits);
done:
  json_decref(e);
  return rc;
}

static void digits_of(const tl_atvm_task *t, int64_t index, int64_t *digits) {
  if (index < 0) tl_atvm_fallback_knobs(t, digits);
  else tl_atvm_space_point2knob(t, index, digits);
}

TL_EXPORT const char *tl_atvm_config_json(tl_atvm_task *t, int64_t index) {
  int64_t digits[64];
  digits_of(t, index, digits);
  t->text.n = 0;
  if (t->text.s) t->text.s[0] = 0;
  tl_buf_printf(&t->text, "{\"index\": %lld, \"code_hash\": null, \"entity\": [",
                (long long)(index < 0 ? tl_atvm_space_knob2point(t, digits) : index));
  for (int k = 0; k < t->space->knobs.n; k++) {
    tl_knob *kb = &t->space->knobs.v[k];
    tl_buf_printf(&t->text, "%s[\"%s\", \"%s\", ", k ? ", " : "", kb->name, kind_str[kb->kind]);
    tl_knob_entity_json(kb, digits[k], &t->text);
    tl_buf_puts(&t->text, "]");
  }
  tl_buf_puts(&t->text, "]}");
  return t->text.s;
}

TL_EXPORT int tl_atvm_config_knob_features(const tl_atvm_task *t, int64_t index, float *out,
                                           int cap) {
  int64_t digits[64];
  digits_of(t, index, digits);
  int n = 0;
#define PUT(v) do { if (n < cap) out[n] = (float)(v); n++; } while (0)
  for (int k = 0; k < t->space->knobs.n; k++) {
    const tl_knob *kb = &t->space->knobs.v[k];
    const int64_t *e = tl_knob_entity(kb, digits[k]);
    switch (kb->kind) {
    case TL_KNOB_SPLIT:
    case TL_KNOB_REORDER:
      for (int i = 0; i < kb->width; i++) PUT(e[i]);
      break;
    case TL_KNOB_ANNOTATE:
      for (int i = 0; i < kb->width; i++) {
        if (kb->locate_cache) { PUT(e[i]); continue; }
        for (int c = 0; c < TL_AN_NCODES; c++) PUT(e[i] == c);
      }
      break;
    default: PUT(kb->other_num[digits[k]]); break;
    }
  }
#undef PUT
  return TL_MIN(n, cap);
}

/* ---- instantiation ------------------------------------------------------------------- */

static int check_index(tl_ctx *ctx, const tl_atvm_task *t, int64_t index) {
  if (index < -1 || index >= tl_atvm_space_total(t->space))
    return tl_err(ctx, TL_E_ARG, "autotvm: %s: config index %lld out of range [-1, %lld)", t->name,
                  (long long)index, (long long)tl_atvm_space_total(t->space));
  return TL_OK;
}

TL_EXPORT int tl_atvm_template_schedule(tl_ctx *ctx, tl_atvm_task *t, int64_t index, tl_sched *s) {
  int rc;
  if ((rc = check_index(ctx, t, index))) return rc;
  int64_t digits[64];
  digits_of(t, index, digits);
  tl_atvm_cfg cfg = {ctx, t->space, digits, 0, &t->hw};
  if ((rc = t->tmpl->schedule(&cfg, &t->args, s)))
    return tl_err_prefix(ctx, "%s config %lld: ", t->name, (long long)index);
  return TL_OK;
}

/* The blocked form of config index's compute: a fresh DAG whose inputs take
** the template's blocked shapes (tl_atvm_template.blocked_input), its outputs'
** names in out_names (freed by the caller); *dag NULL when the config has
** none (an input without a blocked shape). */
static int blocked_dag(tl_ctx *ctx, tl_atvm_task *t, int64_t index, tl_dag **dag, int *outs,
                       int *nout, char **out_names) {
  *dag = NULL, *nout = 0;
  int64_t digits[64];
  digits_of(t, index, digits);
  tl_atvm_cfg cfg = {ctx, t->space, digits, 0, &t->hw};
  int nd[8];
  int64_t shape[8][8];
  for (int i = 0; i < t->ninputs; i++)
    if (!t->tmpl->blocked_input(&cfg, &t->args, i, &nd[i], shape[i])) {
      tl_clearerr(ctx);
      return TL_OK;
    }
  tl_dag *d = tl_dag_new();
  int in[8], rc = TL_OK;
  for (int i = 0; i < t->ninputs && !rc; i++)
    rc = tl_dag_placeholder(ctx, d, t->in_names[i], nd[i], shape[i], t->args.dtype[i], &in[i]);
  if (!rc) rc = t->tmpl->compute(ctx, &t->args, d, in, t->ninputs, outs, 8, nout);
  if (rc) {
    tl_dag_free(d);
    return tl_err_prefix(ctx, "autotvm: %s config %lld (blocked): ", t->name, (long long)index);
  }
  for (int i = 0; i < *nout; i++) out_names[i] = tl_strdup(tl_dag_tensor_name(d, outs[i]));
  *dag = d;
  return TL_OK;
}

TL_EXPORT int tl_atvm_task_set_blocked(tl_atvm_task *t, int on) {
  if (!t) return 0;
  if (!on || !t->tmpl->blocked_input) {
    t->blocked = 0;
    return 0;
  }
  /* the fallback config tells whether the args have a blocked form */
  tl_ctx *ctx = tl_ctx_new();
  int64_t digits[64];
  digits_of(t, -1, digits);
  tl_atvm_cfg cfg = {ctx, t->space, digits, 0, &t->hw};
  int nd;
  int64_t shape[8];
  int ok = 1;
  for (int i = 0; i < t->ninputs && ok; i++) ok = t->tmpl->blocked_input(&cfg, &t->args, i, &nd, shape);
  tl_ctx_free(ctx);
  t->blocked = ok;
  return ok;
}

TL_EXPORT int tl_atvm_instantiate(tl_ctx *ctx, tl_atvm_task *t, int64_t index, tl_sched **sched,
                                  int *args, int max_args, int *nargs) {
  *sched = NULL;
  int rc;
  if ((rc = check_index(ctx, t, index))) return rc;
  if (max_args < t->ninputs + t->noutputs)
    return tl_err(ctx, TL_E_ARG, "autotvm: instantiate: room for %d args, need %d", max_args,
                  t->ninputs + t->noutputs);
  tl_sched *s;
  if (t->blocked) {
    tl_dag *d;
    int outs[8], nout;
    char *onames[8] = {0};
    if ((rc = blocked_dag(ctx, t, index, &d, outs, &nout, onames))) return rc;
    if (d) {
      rc = nout == t->noutputs ? tl_sched_new(ctx, d, outs, nout, &s)
                               : tl_err(ctx, TL_E_INTERNAL, "autotvm: %s: the blocked form has %d outputs, "
                                        "the task %d", t->name, nout, t->noutputs);
      tl_dag_free(d);
      if (!rc && (rc = tl_atvm_template_schedule(ctx, t, index, s))) tl_sched_free(s);
      int n = 0;
      for (int i = 0; !rc && i < t->ninputs; i++)
        args[n++] = tl_sched_stage_tensor(s, tl_sched_stage_find(s, t->in_names[i]), 0);
      for (int i = 0; !rc && i < nout; i++)
        args[n++] = tl_sched_stage_tensor(s, tl_sched_stage_find(s, onames[i]), 0);
      for (int i = 0; i < 8; i++) free(onames[i]);
      if (rc) return rc;
      for (int i = 0; i < n; i++)
        if (args[i] < 0) {
          tl_sched_free(s);
          return tl_err(ctx, TL_E_INTERNAL, "autotvm: instantiate: lost an argument tensor");
        }
      *nargs = n;
      *sched = s;
      return TL_OK;
    }
  }
  if ((rc = tl_sched_new(ctx, t->dag, t->outputs, t->noutputs, &s))) return rc;
  if ((rc = tl_atvm_template_schedule(ctx, t, index, s))) {
    tl_sched_free(s);
    return rc;
  }
  int n = 0;
  for (int i = 0; i < t->ninputs; i++)
    args[n++] = tl_sched_stage_tensor(s, tl_sched_stage_find(s, t->in_names[i]), 0);
  for (int i = 0; i < t->noutputs; i++)
    args[n++] = tl_sched_stage_tensor(s, tl_sched_stage_find(s, t->out_names[i]), 0);
  for (int i = 0; i < n; i++)
    if (args[i] < 0) {
      tl_sched_free(s);
      return tl_err(ctx, TL_E_INTERNAL, "autotvm: instantiate: lost an argument tensor");
    }
  *nargs = n;
  *sched = s;
  return TL_OK;
}

TL_EXPORT int tl_atvm_lower(tl_ctx *ctx, tl_atvm_task *t, int64_t index, const char *name,
                            tl_lowered **out) {
  *out = NULL;
  tl_sched *s;
  int args[16], n, rc;
  if ((rc = tl_atvm_instantiate(ctx, t, index, &s, args, 16, &n))) return rc;
  rc = tl_lower(ctx, s, args, n, name ? name : "default_function", out);
  tl_sched_free(s);
  return rc;
}

int tl_atvm_template_compute_with(tl_ctx *ctx, const tl_atvm_template *tm, const char *args_json,
                                  tl_dag *dag, const int *in, int nin, int *out, int max_out,
                                  int *nout) {
  *nout = 0;
  const char *template_name = tm->name;
  tl_atvm_args a;
  int rc;
  if ((rc = tl_atvm_parse_args(ctx, args_json, &a))) return rc;
  if (nin != a.ntensors) {
    tl_atvm_args_free(&a);
    return tl_err(ctx, TL_E_ARG, "%s: %d input tensors given, args name %d", template_name, nin,
                  a.ntensors);
  }
  rc = tm->compute(ctx, &a, dag, in, nin, out, max_out, nout);
  tl_atvm_args_free(&a);
  return rc;
}
