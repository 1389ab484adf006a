/*
** schedule_json.c -- a schedule's step list as text: the §2.4 JSON encoding
** (written by hand, byte-exact: `["SP", 2, 0, 1024, [2, 1, 4], 1]`, read
** with jansson), the readable print (steps and the stage/iterator table)
** and the state hash.
**
** Writer and reader follow the fields of each kind's row in steps.h.
** Reading is strict about shape (field count and types, per step kind) and
** all-or-nothing: tl_sched_apply_json parses every step first, applies them
** to a copy, and only then takes the result, so a malformed or illegal step
** list leaves the schedule as it was.
*/
#include "schedule.h"

#include <jansson.h>
#include <stdio.h>

/* ---- writing ------------------------------------------------------------------- */

static void put_str(tl_buf *b, const char *s) {
  tl_buf_puts(b, "\"");
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
    case '"': tl_buf_puts(b, "\\\""); break;
    case '\\': tl_buf_puts(b, "\\\\"); break;
    case '\n': tl_buf_puts(b, "\\n"); break;
    case '\t': tl_buf_puts(b, "\\t"); break;
    case '\r': tl_buf_puts(b, "\\r"); break;
    default:
      if (*p < 0x20) tl_buf_printf(b, "\\u%04x", *p);
      else tl_buf_putn(b, (const char *)p, 1);
    }
  }
  tl_buf_puts(b, "\"");
}

static void put_ints(tl_buf *b, const int64_t *v, int n) {
  tl_buf_puts(b, "[");
  for (int i = 0; i < n; i++) tl_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v[i]);
  tl_buf_puts(b, "]");
}

/* "[" prefix, then each field of the kind's row in order. */
void tl_step_to_json(const tl_step *t, tl_buf *b) {
  const tl_step_desc *d = &tl_step_table[t->kind];
  tl_buf_printf(b, "[\"%s\"", d->name);
  for (int f = 0; f < d->nfields; f++) {
    const tl_step_field *fd = &d->fields[f];
    tl_buf_puts(b, ", ");
    switch (fd->type) {
    case 'I': put_ints(b, t->ints, t->nints); break;
    case 's': put_str(b, t->str); break;
    case 'b': tl_buf_puts(b, tl_step_get(t, fd) ? "1" : "0"); break;
    default: tl_buf_printf(b, "%lld", (long long)tl_step_get(t, fd)); break;
    }
  }
  tl_buf_puts(b, "]");
}

static void steps_json(const tl_sched *s, tl_buf *b) {
  tl_buf_puts(b, "[");
  for (int i = 0; i < s->steps.n; i++) {
    if (i) tl_buf_puts(b, ", ");
    tl_step_to_json(&s->steps.v[i], b);
  }
  tl_buf_puts(b, "]");
}

TL_EXPORT const char *tl_sched_json(tl_sched *s) {
  tl_buf_free(&s->text);
  steps_json(s, &s->text);
  return s->text.s;
}

TL_EXPORT const char *tl_sched_step_json(tl_sched *s, int i) {
  tl_buf_free(&s->text);
  if (i < 0 || i >= s->steps.n) return NULL;
  tl_step_to_json(&s->steps.v[i], &s->text);
  return s->text.s;
}

TL_EXPORT uint64_t tl_sched_hash(const tl_sched *s) {
  tl_buf b = {0};
  steps_json(s, &b);
  uint64_t h = tl_hash_bytes(b.s, b.n, 0x5ced5ced);
  tl_buf_free(&b);
  return h;
}

/* ---- reading ------------------------------------------------------------------- */

static const char *json_type_name(const json_t *j) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: return "an object";
  case JSON_ARRAY: return "an array";
  case JSON_STRING: return "a string";
  case JSON_INTEGER: return "an integer";
  case JSON_REAL: return "a number with a fraction";
  case JSON_TRUE:
  case JSON_FALSE: return "a boolean";
  default: return "null";
  }
}

static int get_int(tl_ctx *ctx, const json_t *j, const char *kind, const char *field, int64_t lo,
                   int64_t hi, int64_t *out) {
  if (!json_is_integer(j))
    return tl_err(ctx, TL_E_PARSE, "step \"%s\": %s should be an integer, got %s", kind, field,
                  json_type_name(j));
  json_int_t v = json_integer_value(j);
  if (v < lo || v > hi)
    return tl_err(ctx, TL_E_PARSE, "step \"%s\": %s = %lld is out of range", kind, field, (long long)v);
  *out = (int64_t)v;
  return 0;
}

void tl_step_release(tl_step *t) {
  free(t->ints);
  free((char *)t->str);
  t->ints = NULL;
  t->str = NULL;
}

int tl_step_from_json(tl_ctx *ctx, const void *jv, tl_step *t) {
  const json_t *j = jv;
  memset(t, 0, sizeof *t);
  if (!json_is_array(j))
    return tl_err(ctx, TL_E_PARSE, "step: expected an array like [\"SP\", ...], got %s", json_type_name(j));
  if (json_array_size(j) == 0 || !json_is_string(json_array_get(j, 0)))
    return tl_err(ctx, TL_E_PARSE, "step: expected a kind string (\"SP\", \"RE\", ...) first");
  const char *kname = json_string_value(json_array_get(j, 0));
  int kind = tl_step_kind(kname);
  if (kind < 0) {
    char names[256];
    size_t n = 0;
    for (int k = 0; k < TL_STEP__MAX && n < sizeof names; k++)
      n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", k ? " " : "", tl_step_table[k].name);
    return tl_err(ctx, TL_E_PARSE, "step: unknown kind \"%s\" (expected one of %s)", kname, names);
  }
  const tl_step_desc *d = &tl_step_table[kind];
  size_t nf = (size_t)d->nfields;
  if (json_array_size(j) != nf + 1)
    return tl_err(ctx, TL_E_PARSE, "step \"%s\": expected %zu fields after the kind, got %zu", kname,
                  nf, json_array_size(j) - 1);
  t->kind = kind;
  for (size_t f = 0; f < nf; f++) {
    const json_t *x = json_array_get(j, f + 1);
    const tl_step_field *fd = &d->fields[f];
    const char *fname = fd->name;
    int64_t v = 0;
    switch (fd->type) {
    case 'i':
    case 'e':
      if (get_int(ctx, x, kname, fname, INT32_MIN, INT32_MAX, &v)) goto fail;
      tl_step_set(t, fd, v);
      break;
    case 'b':
      if (json_is_boolean(x)) v = json_is_true(x);
      else if (get_int(ctx, x, kname, fname, 0, 1, &v)) goto fail;
      tl_step_set(t, fd, v);
      break;
    case 's':
      if (!json_is_string(x)) {
        tl_err(ctx, TL_E_PARSE, "step \"%s\": %s should be a string, got %s", kname, fname,
               json_type_name(x));
        goto fail;
      }
      t->str = tl_strdup(json_string_value(x));
      break;
    case 'I': {
      if (!json_is_array(x)) {
        tl_err(ctx, TL_E_PARSE, "step \"%s\": %s should be an array of integers, got %s", kname,
               fname, json_type_name(x));
        goto fail;
      }
      size_t n = json_array_size(x);
      if (n > 4096) {
        tl_err(ctx, TL_E_PARSE, "step \"%s\": %s has too many entries (%zu)", kname, fname, n);
        goto fail;
      }
      t->nints = (int)n;
      t->ints = tl_malloc(sizeof(int64_t) * (n + 1));
      for (size_t k = 0; k < n; k++) {
        char fn[64];
        snprintf(fn, sizeof fn, "%s[%zu]", fname, k);
        if (get_int(ctx, json_array_get(x, k), kname, fn, INT32_MIN, INT32_MAX, &t->ints[k])) goto fail;
      }
      break;
    }
    }
  }
  return 0;
fail:
  tl_step_release(t);
  return TL_E_PARSE;
}

int tl_sched_copy(tl_ctx *ctx, const tl_sched *src, tl_sched **out);
void tl_sched_free(tl_sched *s);

TL_EXPORT int tl_sched_apply_json(tl_ctx *ctx, tl_sched *s, const char *text) {
  json_error_t jerr;
  json_t *root = json_loads(text ? text : "", JSON_DECODE_ANY, &jerr);
  if (!root)
    return tl_err(ctx, TL_E_PARSE, "steps: invalid JSON at line %d, column %d: %s", jerr.line,
                  jerr.column, jerr.text);
  if (!json_is_array(root)) {
    tl_err(ctx, TL_E_PARSE, "steps: expected an array of steps, got %s", json_type_name(root));
    json_decref(root);
    return TL_E_PARSE;
  }
  /* a single step, a list of steps, or a state [[], [steps]] */
  const json_t *list = root;
  int single = json_array_size(root) > 0 && json_is_string(json_array_get(root, 0));
  if (json_array_size(root) == 2 && json_is_array(json_array_get(root, 0)) &&
      json_array_size(json_array_get(root, 0)) == 0 && json_is_array(json_array_get(root, 1)))
    list = json_array_get(root, 1);
  size_t n = single ? 1 : json_array_size(list);
  tl_step *steps = tl_calloc(n + 1, sizeof(tl_step));
  int rc = 0;
  size_t parsed = 0;
  for (; parsed < n; parsed++) {
    rc = tl_step_from_json(ctx, single ? root : json_array_get(list, parsed), &steps[parsed]);
    if (rc) {
      if (!single) tl_err_prefix(ctx, "steps[%zu]: ", parsed);
      break;
    }
  }
  json_decref(root);
  tl_sched *tmp = NULL;
  if (!rc) rc = tl_sched_copy(ctx, s, &tmp);
  for (size_t i = 0; !rc && i < n; i++) {
    rc = tl_sched_apply(ctx, tmp, &steps[i]);
    if (rc && !single) tl_err_prefix(ctx, "steps[%zu]: ", i);
  }
  for (size_t i = 0; i < parsed; i++) tl_step_release(&steps[i]);
  free(steps);
  if (rc) {
    tl_sched_free(tmp);
    return rc;
  }
  /* take tmp's state */
  tl_sched swap = *s;
  *s = *tmp;
  *tmp = swap;
  tl_sched_free(tmp);
  return 0;
}

/* ---- the readable print ----------------------------------------------------------- */

static const char *kind_word(int kind) {
  switch (kind) {
  case TL_ITER_REDUCE: return " reduce";
  case TL_ITER_MIXED: return " mixed";
  case TL_ITER_SPECIAL: return " special";
  default: return "";
  }
}

TL_EXPORT const char *tl_sched_print(tl_sched *s) {
  tl_buf *b = &s->text;
  tl_buf_free(b);
  tl_buf_printf(b, "steps (%d):\n", s->steps.n);
  for (int i = 0; i < s->steps.n; i++) {
    tl_buf_printf(b, "  %d: ", i);
    tl_step_to_json(&s->steps.v[i], b);
    tl_buf_puts(b, "\n");
  }
  tl_buf_printf(b, "stages (%d):\n", s->stages.n);
  for (int i = 0; i < s->stages.n; i++) {
    const tl_stage *sg = &s->stages.v[i];
    const tl_te_op *op = &s->dag->ops.v[sg->op];
    tl_buf_printf(b, "  %d %s: ", i, op->name);
    if (op->kind == TL_OP_PLACEHOLDER) {
      tl_buf_puts(b, "placeholder [");
      for (int d = 0; d < op->ndim; d++) tl_buf_printf(b, "%s%lld", d ? ", " : "", (long long)op->shape[d]);
      tl_buf_puts(b, "]\n");
      continue;
    }
    if (sg->compute_at == TL_CA_INLINED) tl_buf_puts(b, "inlined");
    else if (sg->compute_at == TL_CA_ITER) {
      const tl_stage *tg = &s->stages.v[sg->at_stage];
      tl_buf_printf(b, "at %s.%s", s->dag->ops.v[tg->op].name, tg->nodes.v[sg->at_node].name);
    } else tl_buf_puts(b, "root");
    if (sg->scope != TL_SCOPE_GLOBAL) tl_buf_printf(b, ", scope %s", tl_ir_scopename[sg->scope]);
    if (sg->is_output) tl_buf_puts(b, ", output");
    for (int k = 0; k < sg->aligns.n; k++)
      tl_buf_printf(b, ", align %s %d %d", sg->nodes.v[sg->aligns.v[k].axis].name,
                    sg->aligns.v[k].factor, sg->aligns.v[k].offset);
    tl_buf_puts(b, "\n");
    if (sg->compute_at == TL_CA_INLINED) continue;
    for (int k = 0; k < sg->leaves.n; k++) {
      const tl_iter *it = &sg->nodes.v[sg->leaves.v[k]];
      tl_buf_printf(b, "      %d %s", k, it->name);
      if (it->extent > 0) tl_buf_printf(b, " (%lld)", (long long)it->extent);
      else tl_buf_puts(b, " (?)");
      tl_buf_puts(b, kind_word(it->kind));
      if (it->ann != TL_ANN_NONE) tl_buf_printf(b, " %s", tl_ann_name[it->ann]);
      for (int p = 0; p < sg->pragmas.n; p++)
        if (sg->pragmas.v[p].node == sg->leaves.v[k]) tl_buf_printf(b, " pragma %s", sg->pragmas.v[p].text);
      tl_buf_puts(b, "\n");
    }
  }
  return b->s;
}
