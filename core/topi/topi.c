/*
** topi.c -- the operator registry, the public entry tl_topi_op and the
** helpers every operator file shares (attribute parsing, emitting a compute
** with its tag/pattern/attrs, the pad stage, numpy broadcasting).
**
** The registry maps TVM's operator names to an implementation and the
** operator's fusion pattern (the TVM OpPatternKind numbering). An operator
** reads its attributes from one JSON object; unknown keys are ignored so a
** frontend may pass through what it has, but a known key with the wrong
** type or value is an error naming the operator and the attribute.
*/
#include "topi.h"

#include <math.h>
#include <stdio.h>

/* ---- registry ------------------------------------------------------------ */

typedef struct topi_entry {
  const char *name;
  tl_topi_fn fn;
  int pattern;                    /* TL_PAT_* of the operator as a whole */
} topi_entry;

static const topi_entry registry[] = {
  {"conv2d", tl_topi_conv2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_nchw", tl_topi_conv2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_nhwc", tl_topi_conv2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_packed", tl_topi_conv2d_packed, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"depthwise_conv2d", tl_topi_depthwise_conv2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"depthwise_conv2d_nchw", tl_topi_depthwise_conv2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"depthwise_conv2d_nhwc", tl_topi_depthwise_conv2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_transpose", tl_topi_conv2d_transpose, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_transpose_nchw", tl_topi_conv2d_transpose, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_transpose_nhwc", tl_topi_conv2d_transpose, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_winograd", tl_topi_conv2d_winograd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_winograd_nchw", tl_topi_conv2d_winograd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"winograd_weight_transform", tl_topi_winograd_weight_transform, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv1d", tl_topi_conv_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv1d_ncw", tl_topi_conv_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv1d_nwc", tl_topi_conv_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv3d", tl_topi_conv_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv3d_ncdhw", tl_topi_conv_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv3d_ndhwc", tl_topi_conv_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv1d_transpose", tl_topi_conv_transpose_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv1d_transpose_ncw", tl_topi_conv_transpose_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv3d_transpose", tl_topi_conv_transpose_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv3d_transpose_ncdhw", tl_topi_conv_transpose_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"dense", tl_topi_dense, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"batch_matmul", tl_topi_batch_matmul, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"matmul", tl_topi_matmul, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"pool2d", tl_topi_pool2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"max_pool2d", tl_topi_pool2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"avg_pool2d", tl_topi_pool2d, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"pool1d", tl_topi_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"max_pool1d", tl_topi_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"avg_pool1d", tl_topi_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"pool3d", tl_topi_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"max_pool3d", tl_topi_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"avg_pool3d", tl_topi_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_NCHWc", tl_topi_conv2d_nchwc, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"depthwise_conv2d_NCHWc", tl_topi_depthwise_conv2d_nchwc, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_NCHWc_winograd", tl_topi_conv2d_nchwc_winograd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"conv2d_winograd_nhwc", tl_topi_conv2d_winograd_nhwc, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"global_pool", tl_topi_global_pool, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"global_pool1d", tl_topi_global_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"global_pool3d", tl_topi_global_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"global_avg_pool3d", tl_topi_global_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"global_max_pool3d", tl_topi_global_pool_nd, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"global_avg_pool2d", tl_topi_global_pool, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"global_max_pool2d", tl_topi_global_pool, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"adaptive_pool", tl_topi_adaptive_pool, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"adaptive_avg_pool2d", tl_topi_adaptive_pool, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"adaptive_max_pool2d", tl_topi_adaptive_pool, TL_PAT_OUT_ELEMWISE_FUSABLE},
  {"relu", tl_topi_unary, TL_PAT_ELEMWISE},
  {"leaky_relu", tl_topi_unary, TL_PAT_ELEMWISE},
  {"clip", tl_topi_unary, TL_PAT_ELEMWISE},
  {"sigmoid", tl_topi_unary, TL_PAT_ELEMWISE},
  {"tanh", tl_topi_unary, TL_PAT_ELEMWISE},
  {"exp", tl_topi_unary, TL_PAT_ELEMWISE},
  {"log", tl_topi_unary, TL_PAT_ELEMWISE},
  {"sqrt", tl_topi_unary, TL_PAT_ELEMWISE},
  {"rsqrt", tl_topi_unary, TL_PAT_ELEMWISE},
  {"abs", tl_topi_unary, TL_PAT_ELEMWISE},
  {"negative", tl_topi_unary, TL_PAT_ELEMWISE},
  {"floor", tl_topi_unary, TL_PAT_ELEMWISE},
  {"ceil", tl_topi_unary, TL_PAT_ELEMWISE},
  {"round", tl_topi_unary, TL_PAT_ELEMWISE},
  {"erf", tl_topi_unary, TL_PAT_ELEMWISE},
  {"identity", tl_topi_unary, TL_PAT_ELEMWISE},
  {"add", tl_topi_binary, TL_PAT_BROADCAST},
  {"subtract", tl_topi_binary, TL_PAT_BROADCAST},
  {"multiply", tl_topi_binary, TL_PAT_BROADCAST},
  {"divide", tl_topi_binary, TL_PAT_BROADCAST},
  {"maximum", tl_topi_binary, TL_PAT_BROADCAST},
  {"minimum", tl_topi_binary, TL_PAT_BROADCAST},
  {"power", tl_topi_binary, TL_PAT_BROADCAST},
  {"right_shift", tl_topi_binary, TL_PAT_BROADCAST},
  {"left_shift", tl_topi_binary, TL_PAT_BROADCAST},
  {"bias_add", tl_topi_bias_add, TL_PAT_BROADCAST},
  {"batch_norm", tl_topi_batch_norm, TL_PAT_BROADCAST},
  {"cast", tl_topi_cast, TL_PAT_ELEMWISE},
  {"softmax", tl_topi_softmax, TL_PAT_OPAQUE},
  {"log_softmax", tl_topi_softmax, TL_PAT_OPAQUE},
  {"concatenate", tl_topi_concatenate, TL_PAT_INJECTIVE},
  {"split", tl_topi_split, TL_PAT_INJECTIVE},
  {"flatten", tl_topi_reshape, TL_PAT_INJECTIVE},
  {"reshape", tl_topi_reshape, TL_PAT_INJECTIVE},
  {"transpose", tl_topi_transpose, TL_PAT_INJECTIVE},
  {"squeeze", tl_topi_squeeze, TL_PAT_INJECTIVE},
  {"expand_dims", tl_topi_expand_dims, TL_PAT_INJECTIVE},
  {"pad", tl_topi_pad, TL_PAT_INJECTIVE},
  {"layout_transform", tl_topi_layout_transform, TL_PAT_INJECTIVE},
};

static const topi_entry *find_op(const char *name) {
  for (size_t i = 0; i < TL_ARRAY_SIZE(registry); i++)
    if (strcmp(registry[i].name, name) == 0) return &registry[i];
  return NULL;
}

static const char *const pattern_names[] = {
  "elemwise", "broadcast", "injective", "comm_reduce", "out_elemwise_fusable",
  "?", "?", "tuple", "opaque"};

TL_EXPORT const char *tl_topi_list(int i) {
  if (i < 0 || (size_t)i >= TL_ARRAY_SIZE(registry)) return NULL;
  return registry[i].name;
}

TL_EXPORT int tl_topi_pattern(const char *op_name) {
  const topi_entry *e = op_name ? find_op(op_name) : NULL;
  return e ? e->pattern : -1;
}

TL_EXPORT const char *tl_topi_pattern_name(int pattern) {
  if (pattern < 0 || (size_t)pattern >= TL_ARRAY_SIZE(pattern_names)) return "?";
  return pattern_names[pattern];
}

TL_EXPORT int tl_topi_op(tl_ctx *ctx, tl_dag *dag, const char *op_name, const int *inputs,
                         int ninputs, const char *attrs_json, int *outputs, int max_outputs,
                         int *noutputs) {
  if (noutputs) *noutputs = 0;
  if (!op_name) return tl_err(ctx, TL_E_ARG, "topi: no operator name");
  const topi_entry *e = find_op(op_name);
  if (!e) return tl_err(ctx, TL_E_UNSUPPORTED, "topi: unknown operator '%s'", op_name);
  for (int i = 0; i < ninputs; i++)
    if (inputs[i] < 0 || inputs[i] >= dag->tensors.n)
      return tl_err(ctx, TL_E_ARG, "%s: input %d is not a tensor of this dag (id %d)", op_name,
                    i, inputs[i]);
  json_t *attrs = NULL;
  if (attrs_json && *attrs_json) {
    json_error_t jerr;
    attrs = json_loads(attrs_json, 0, &jerr);
    if (!attrs) return tl_err(ctx, TL_E_PARSE, "%s: attributes: %s", op_name, jerr.text);
    if (!json_is_object(attrs)) {
      json_decref(attrs);
      return tl_err(ctx, TL_E_PARSE, "%s: attributes must be a JSON object", op_name);
    }
  } else {
    attrs = json_object();
  }
  int tmp[64];
  tl_topi_call c = {ctx, dag, op_name, inputs, ninputs, attrs,
                    outputs ? outputs : tmp, outputs ? max_outputs : 64, 0};
  int rc = e->fn(&c);
  json_decref(attrs);
  if (rc == TL_OK && noutputs) *noutputs = c.nout;
  return rc;
}

/* ---- helpers ------------------------------------------------------------ */

int tl_topi_ndim(const tl_dag *dag, int t) { return dag->ops.v[dag->tensors.v[t].op].ndim; }
const int64_t *tl_topi_shape(const tl_dag *dag, int t) {
  return dag->ops.v[dag->tensors.v[t].op].shape;
}
tl_type tl_topi_dtype(const tl_dag *dag, int t) { return dag->ops.v[dag->tensors.v[t].op].dtype; }

const char *tl_topi_shape_str(const tl_dag *dag, int t, char *buf) {
  int n = tl_topi_ndim(dag, t), pos = 0;
  const int64_t *s = tl_topi_shape(dag, t);
  pos += snprintf(buf + pos, 160 - (size_t)pos, "(");
  for (int i = 0; i < n && pos < 140; i++)
    pos += snprintf(buf + pos, 160 - (size_t)pos, "%s%lld", i ? ", " : "", (long long)s[i]);
  snprintf(buf + pos, 160 - (size_t)pos, ")");
  return buf;
}

const char *tl_topi_inputs_str(tl_topi_call *c, char *buf) {
  char b1[160], b2[160];
  if (c->nin <= 0) {
    buf[0] = 0;
  } else if (c->nin == 1) {
    snprintf(buf, 400, "for data %s", tl_topi_shape_str(c->dag, c->in[0], b1));
  } else {
    snprintf(buf, 400, "for data %s and kernel %s", tl_topi_shape_str(c->dag, c->in[0], b1),
             tl_topi_shape_str(c->dag, c->in[1], b2));
  }
  return buf;
}

int tl_topi_nin(tl_topi_call *c, int min, int max) {
  if (c->nin < min || c->nin > max) {
    if (min == max)
      return tl_err(c->ctx, TL_E_ARG, "%s: expected %d input%s, got %d", c->op, min,
                    min == 1 ? "" : "s", c->nin);
    return tl_err(c->ctx, TL_E_ARG, "%s: expected %d to %d inputs, got %d", c->op, min, max,
                  c->nin);
  }
  return TL_OK;
}

int tl_topi_get_int(tl_topi_call *c, const char *key, int64_t dflt, int64_t *out) {
  json_t *v = json_object_get(c->attrs, key);
  if (!v || json_is_null(v)) { *out = dflt; return TL_OK; }
  if (json_is_boolean(v)) { *out = json_is_true(v); return TL_OK; }
  if (json_is_integer(v)) { *out = json_integer_value(v); return TL_OK; }
  if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v))) {
    *out = (int64_t)json_real_value(v);
    return TL_OK;
  }
  return tl_err(c->ctx, TL_E_ARG, "%s: attribute '%s' must be an integer", c->op, key);
}

int tl_topi_get_float(tl_topi_call *c, const char *key, double dflt, double *out) {
  json_t *v = json_object_get(c->attrs, key);
  if (!v || json_is_null(v)) { *out = dflt; return TL_OK; }
  if (json_is_number(v)) { *out = json_number_value(v); return TL_OK; }
  return tl_err(c->ctx, TL_E_ARG, "%s: attribute '%s' must be a number", c->op, key);
}

int tl_topi_get_str(tl_topi_call *c, const char *key, const char *dflt, const char **out) {
  json_t *v = json_object_get(c->attrs, key);
  if (!v || json_is_null(v)) { *out = dflt; return TL_OK; }
  if (json_is_string(v)) { *out = json_string_value(v); return TL_OK; }
  return tl_err(c->ctx, TL_E_ARG, "%s: attribute '%s' must be a string", c->op, key);
}

int tl_topi_get_ints(tl_topi_call *c, const char *key, int n, const int64_t *dflt,
                     int64_t *out, int *count) {
  json_t *v = json_object_get(c->attrs, key);
  if (!v || json_is_null(v)) {
    if (!dflt) {
      if (count) *count = -1;
      return TL_OK;
    }
    for (int i = 0; i < n; i++) out[i] = dflt[i];
    if (count) *count = n;
    return TL_OK;
  }
  if (json_is_integer(v) && n > 0) {
    for (int i = 0; i < n; i++) out[i] = json_integer_value(v);
    if (count) *count = n;
    return TL_OK;
  }
  if (json_is_integer(v) && n < 0) {   /* any length: one value */
    out[0] = json_integer_value(v);
    if (count) *count = 1;
    return TL_OK;
  }
  if (!json_is_array(v))
    return tl_err(c->ctx, TL_E_ARG, "%s: attribute '%s' must be a list of integers", c->op, key);
  int len = (int)json_array_size(v);
  if (n >= 0 && len != n)
    return tl_err(c->ctx, TL_E_ARG, "%s: attribute '%s' must have %d values, got %d", c->op,
                  key, n, len);
  if (len > TL_TOPI_MAXDIM * 2)
    return tl_err(c->ctx, TL_E_ARG, "%s: attribute '%s' has too many values (%d)", c->op, key,
                  len);
  for (int i = 0; i < len; i++) {
    json_t *x = json_array_get(v, (size_t)i);
    if (!json_is_integer(x))
      return tl_err(c->ctx, TL_E_ARG, "%s: attribute '%s' must be a list of integers", c->op,
                    key);
    out[i] = json_integer_value(x);
  }
  if (count) *count = len;
  return TL_OK;
}

int tl_topi_get_padding(tl_topi_call *c, int64_t pad[4]) {
  int64_t p[TL_TOPI_MAXDIM * 2];
  int n, rc;
  if ((rc = tl_topi_get_ints(c, "padding", -1, NULL, p, &n))) return rc;
  if (n <= 0) memset(pad, 0, 4 * sizeof *pad);
  else if (n == 1) pad[0] = pad[1] = pad[2] = pad[3] = p[0];
  else if (n == 2) pad[0] = pad[2] = p[0], pad[1] = pad[3] = p[1];
  else if (n == 4) memcpy(pad, p, 4 * sizeof *pad);
  else return tl_err(c->ctx, TL_E_ARG, "%s: padding must have 1, 2 or 4 values, got %d", c->op, n);
  return TL_OK;
}

int tl_topi_get_dtype(tl_topi_call *c, const char *key, tl_type dflt, tl_type *out) {
  const char *s = NULL;
  int rc = tl_topi_get_str(c, key, NULL, &s);
  if (rc) return rc;
  if (!s || !*s) { *out = dflt; return TL_OK; }
  int dt;
  if (tl_dtype_parse(NULL, s, &dt) != TL_OK)
    return tl_err(c->ctx, TL_E_DTYPE, "%s: attribute '%s': unknown dtype '%s'", c->op, key, s);
  *out = tl_type_from_dtype(dt);
  return TL_OK;
}

int tl_topi_push_out(tl_topi_call *c, int t) {
  if (c->nout >= c->max_out)
    return tl_err(c->ctx, TL_E_ARG, "%s: more than %d outputs (max_outputs)", c->op, c->max_out);
  c->out[c->nout++] = t;
  return TL_OK;
}

int tl_topi_emit(tl_topi_call *c, const char *name, const char *tag, const char *pattern,
                 int ndim, const int64_t *shape, const tl_ref *axis, tl_ref body, int reducer,
                 const tl_ref *rvars, int nreduce, tl_ref cond, json_t *attrs, int *out) {
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 1)
      return tl_err(c->ctx, TL_E_SHAPE, "%s: output dimension %d of '%s' is %lld (must be >= 1)",
                    c->op, i, name, (long long)shape[i]);
  int rc = tl_te_compute(c->ctx, c->dag, name, tag, ndim, shape, axis, 1, &body, reducer, rvars,
                         nreduce, cond, out);
  if (rc) return tl_err_prefix(c->ctx, "%s: ", c->op);
  json_t *a = attrs ? json_deep_copy(attrs) : json_object();
  json_object_set_new(a, "pattern", json_string(pattern));
  char *txt = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(a);
  rc = tl_te_set_attrs(c->ctx, c->dag, c->dag->tensors.v[*out].op, txt);
  free(txt);
  return rc;
}

tl_ref tl_topi_const(tl_dag *dag, tl_type t, double v) {
  if (tl_type_is_float(t)) return tl_imm_float(dag->ir, t, v);
  return tl_imm_int(dag->ir, t, (int64_t)v);
}

tl_ref tl_topi_cmp(tl_dag *dag, int op, tl_ref a, tl_ref b) { return tl_binary(dag->ir, op, a, b); }

tl_ref tl_topi_and(tl_dag *dag, tl_ref a, tl_ref b) { return a ? tl_and(dag->ir, a, b) : b; }

int tl_topi_pad_stage(tl_topi_call *c, int data, const int64_t *before, const int64_t *out_shape,
                      double value, const char *name, int *out) {
  tl_dag *dag = c->dag;
  int n = tl_topi_ndim(dag, data);
  const int64_t *s = tl_topi_shape(dag, data);
  int trivial = 1;
  for (int i = 0; i < n; i++)
    if (before[i] != 0 || out_shape[i] != s[i]) trivial = 0;
  if (trivial) { *out = data; return TL_OK; }
  tl_ref axis[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, axis);
  tl_ref cond = 0;
  for (int i = 0; i < n; i++) {
    idx[i] = tl_sub(dag->ir, axis[i], tl_int(dag->ir, before[i]));
    if (before[i] > 0) cond = tl_topi_and(dag, cond, tl_topi_cmp(dag, TL_IR_GE, axis[i], tl_int(dag->ir, before[i])));
    if (out_shape[i] - before[i] > s[i])
      cond = tl_topi_and(dag, cond, tl_lt(dag->ir, axis[i], tl_int(dag->ir, before[i] + s[i])));
  }
  tl_ref body = tl_te_load(dag, data, idx, n);
  if (cond) body = tl_if_then_else(dag->ir, cond, body, tl_topi_const(dag, tl_topi_dtype(dag, data), value));
  json_t *a = json_object();
  json_t *pb = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(pb, json_integer(before[i]));
  json_object_set_new(a, "pad_before", pb);
  json_object_set_new(a, "pad_value", json_real(value));
  int rc = tl_topi_emit(c, name, "injective,pad", "injective", n, out_shape, axis, body, TL_RED_NONE,
                        NULL, 0, 0, a, out);
  json_decref(a);
  return rc;
}

int tl_topi_broadcast_shape(tl_topi_call *c, int ta, int tb, int64_t *out, int *nout) {
  int na = tl_topi_ndim(c->dag, ta), nb = tl_topi_ndim(c->dag, tb);
  const int64_t *sa = tl_topi_shape(c->dag, ta), *sb = tl_topi_shape(c->dag, tb);
  int n = TL_MAX(na, nb);
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t x = ia >= 0 ? sa[ia] : 1, y = ib >= 0 ? sb[ib] : 1;
    if (x != y && x != 1 && y != 1) {
      char b1[160], b2[160];
      return tl_err(c->ctx, TL_E_SHAPE, "%s: shapes %s and %s do not broadcast (dimension %d: %lld vs %lld)",
                    c->op, tl_topi_shape_str(c->dag, ta, b1), tl_topi_shape_str(c->dag, tb, b2), i,
                    (long long)x, (long long)y);
    }
    out[i] = x == 1 ? y : x;
  }
  *nout = n;
  return TL_OK;
}

tl_ref tl_topi_load_bcast(tl_dag *dag, int t, const tl_ref *axis, int ndim) {
  int n = tl_topi_ndim(dag, t);
  const int64_t *s = tl_topi_shape(dag, t);
  tl_ref idx[TL_TOPI_MAXDIM];
  for (int i = 0; i < n; i++) {
    int oi = ndim - n + i;
    idx[i] = s[i] == 1 ? tl_int(dag->ir, 0) : axis[oi];
  }
  return tl_te_load(dag, t, idx, n);
}
