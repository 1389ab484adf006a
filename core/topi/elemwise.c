/*
** elemwise.c -- element-wise and broadcast operators.
**
**   unary (tag "elemwise", pattern elemwise): relu, leaky_relu {alpha},
**     clip {a_min, a_max}, sigmoid, tanh, exp, log, sqrt, rsqrt, abs,
**     negative, floor, ceil, round, erf, identity. Transcendentals need a
**     float dtype.
**   binary (tag "broadcast", pattern broadcast; numpy broadcasting, one
**     dtype on both sides): add, subtract, multiply, divide (float
**     division; C truncation on integers), maximum, minimum, power,
**     right_shift / left_shift (integers).
**   bias_add {axis = 1}: data + bias[i_axis].
**   batch_norm inference form {axis = 1, epsilon = 1e-5, center, scale}:
**     (x - mean) / sqrt(var + eps) * gamma + beta, per channel of axis;
**     inputs data, gamma, beta, moving_mean, moving_var.
**   cast {dtype}.
*/
#include "topi.h"

#include <math.h>
#include <stdio.h>

static int unary_emit(tl_topi_call *c, int x, const char *name, tl_ref (*fn)(tl_topi_call *, tl_ref, void *),
                      void *ud, json_t *aj) {
  tl_dag *dag = c->dag;
  int n = tl_topi_ndim(dag, x);
  tl_ref ax[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  tl_ref v = fn(c, tl_te_load(dag, x, ax, n), ud);
  int out;
  int rc = tl_topi_emit(c, name, "elemwise", "elemwise", n, tl_topi_shape(dag, x), ax, v,
                        TL_RED_NONE, NULL, 0, 0, aj, &out);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

typedef struct unary_ud {
  int kind;
  double a, b;
} unary_ud;

enum { U_RELU, U_LEAKY, U_CLIP, U_INTRIN, U_ABS, U_NEG, U_ID };

static tl_ref unary_body(tl_topi_call *c, tl_ref x, void *p) {
  unary_ud *u = p;
  tl_ir *ir = c->dag->ir;
  tl_type t = tl_ir_type(ir, x);
  switch (u->kind) {
  case U_RELU: return tl_max(ir, x, tl_topi_const(c->dag, t, 0));
  case U_LEAKY:
    return tl_select(ir, tl_binary(ir, TL_IR_GT, x, tl_topi_const(c->dag, t, 0)), x,
                     tl_mul(ir, x, tl_topi_const(c->dag, t, u->a)));
  case U_CLIP:
    return tl_min(ir, tl_max(ir, x, tl_topi_const(c->dag, t, u->a)), tl_topi_const(c->dag, t, u->b));
  case U_ABS:
    if (tl_type_is_float(t)) return tl_call(ir, TL_INTRIN_FABS, t, &x, 1);
    if (t.code == TL_TC_UINT) return x;
    return tl_select(ir, tl_lt(ir, x, tl_topi_const(c->dag, t, 0)),
                     tl_sub(ir, tl_topi_const(c->dag, t, 0), x), x);
  case U_NEG: return tl_sub(ir, tl_topi_const(c->dag, t, 0), x);
  case U_ID: return x;
  default: return tl_call(ir, (int)u->a, t, &x, 1);
  }
}

int tl_topi_unary(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  int x = c->in[0];
  tl_type t = tl_topi_dtype(c->dag, x);
  unary_ud u = {U_INTRIN, 0, 0};
  json_t *aj = json_object();
  const char *name = c->op;
  static const struct { const char *op; int intrin; } intrins[] = {
    {"sigmoid", TL_INTRIN_SIGMOID}, {"tanh", TL_INTRIN_TANH}, {"exp", TL_INTRIN_EXP},
    {"log", TL_INTRIN_LOG}, {"sqrt", TL_INTRIN_SQRT}, {"rsqrt", TL_INTRIN_RSQRT},
    {"floor", TL_INTRIN_FLOOR}, {"ceil", TL_INTRIN_CEIL}, {"round", TL_INTRIN_ROUND},
    {"erf", TL_INTRIN_ERF}};
  if (strcmp(c->op, "relu") == 0) {
    u.kind = U_RELU;
  } else if (strcmp(c->op, "leaky_relu") == 0) {
    u.kind = U_LEAKY;
    if ((rc = tl_topi_get_float(c, "alpha", 0.01, &u.a))) goto done;
    json_object_set_new(aj, "alpha", json_real(u.a));
  } else if (strcmp(c->op, "clip") == 0) {
    u.kind = U_CLIP;
    if ((rc = tl_topi_get_float(c, "a_min", -3.4028234663852886e38, &u.a)) ||
        (rc = tl_topi_get_float(c, "a_max", 3.4028234663852886e38, &u.b)))
      goto done;
    if (u.a > u.b) {
      rc = tl_err(c->ctx, TL_E_ARG, "%s: a_min (%g) is greater than a_max (%g)", c->op, u.a, u.b);
      goto done;
    }
    if (!tl_type_is_float(t)) {
      /* integer clip: bounds clamp to the dtype */
      double lo = t.code == TL_TC_UINT ? 0 : -ldexp(1, t.bits - 1);
      double hi = t.code == TL_TC_UINT ? ldexp(1, t.bits) - 1 : ldexp(1, t.bits - 1) - 1;
      u.a = ceil(TL_MAX(u.a, lo));
      u.b = floor(TL_MIN(u.b, hi));
    }
    json_object_set_new(aj, "a_min", json_real(u.a));
    json_object_set_new(aj, "a_max", json_real(u.b));
  } else if (strcmp(c->op, "abs") == 0) {
    u.kind = U_ABS;
  } else if (strcmp(c->op, "negative") == 0) {
    u.kind = U_NEG;
  } else if (strcmp(c->op, "identity") == 0) {
    u.kind = U_ID;
  } else {
    size_t i;
    for (i = 0; i < TL_ARRAY_SIZE(intrins); i++)
      if (strcmp(intrins[i].op, c->op) == 0) break;
    if (i == TL_ARRAY_SIZE(intrins)) {
      rc = tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: not a unary operator", c->op);
      goto done;
    }
    if (!tl_type_is_float(t)) {
      char tb[24];
      rc = tl_err(c->ctx, TL_E_DTYPE, "%s: needs a float input, got %s", c->op, tl_type_str(t, tb));
      goto done;
    }
    u.a = intrins[i].intrin;
  }
  {
    char nm[64];
    snprintf(nm, sizeof nm, "T_%s", name);
    rc = unary_emit(c, x, nm, unary_body, &u, aj);
  }
done:
  json_decref(aj);
  return rc;
}

int tl_topi_binary(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 2, 2))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int a = c->in[0], b = c->in[1];
  tl_type ta = tl_topi_dtype(dag, a), tb = tl_topi_dtype(dag, b);
  if (!tl_type_eq(ta, tb)) {
    char s1[24], s2[24];
    return tl_err(c->ctx, TL_E_DTYPE, "%s: operands have different dtypes: %s and %s", c->op,
                  tl_type_str(ta, s1), tl_type_str(tb, s2));
  }
  int64_t shape[TL_TOPI_MAXDIM];
  int n;
  if ((rc = tl_topi_broadcast_shape(c, a, b, shape, &n))) return rc;
  tl_ref ax[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  tl_ref x = tl_topi_load_bcast(dag, a, ax, n), y = tl_topi_load_bcast(dag, b, ax, n), v;
  int isf = tl_type_is_float(ta);
  const char *op = c->op;
  if (!strcmp(op, "add")) v = tl_add(ir, x, y);
  else if (!strcmp(op, "subtract")) v = tl_sub(ir, x, y);
  else if (!strcmp(op, "multiply")) v = tl_mul(ir, x, y);
  else if (!strcmp(op, "divide")) v = tl_binary(ir, isf ? TL_IR_DIV : TL_IR_TRUNCDIV, x, y);
  else if (!strcmp(op, "maximum")) v = tl_max(ir, x, y);
  else if (!strcmp(op, "minimum")) v = tl_min(ir, x, y);
  else if (!strcmp(op, "power")) {
    if (!isf) return tl_err(c->ctx, TL_E_DTYPE, "%s: needs float operands", op);
    tl_ref args[2] = {x, y};
    v = tl_call(ir, TL_INTRIN_POW, ta, args, 2);
  } else if (!strcmp(op, "right_shift") || !strcmp(op, "left_shift")) {
    if (isf) return tl_err(c->ctx, TL_E_DTYPE, "%s: needs integer operands", op);
    v = tl_binary(ir, op[0] == 'r' ? TL_IR_SHR : TL_IR_SHL, x, y);
  } else {
    return tl_err(c->ctx, TL_E_UNSUPPORTED, "%s: not a binary operator", op);
  }
  char nm[64];
  snprintf(nm, sizeof nm, "T_%s", op);
  int out;
  if ((rc = tl_topi_emit(c, nm, "broadcast", "broadcast", n, shape, ax, v, TL_RED_NONE, NULL, 0,
                         0, NULL, &out)))
    return rc;
  return tl_topi_push_out(c, out);
}

static int norm_axis(tl_topi_call *c, int64_t axis, int n, int *out) {
  if (axis < -n || axis >= n)
    return tl_err(c->ctx, TL_E_ARG, "%s: axis %lld is out of range for %d dimensions", c->op,
                  (long long)axis, n);
  *out = (int)(axis < 0 ? axis + n : axis);
  return TL_OK;
}

static int check_vec(tl_topi_call *c, int t, const char *what, int64_t len, tl_type dt) {
  char b[160];
  if (tl_topi_ndim(c->dag, t) != 1 || tl_topi_shape(c->dag, t)[0] != len)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: %s must have shape (%lld), got %s", c->op, what,
                  (long long)len, tl_topi_shape_str(c->dag, t, b));
  if (!tl_type_eq(tl_topi_dtype(c->dag, t), dt))
    return tl_err(c->ctx, TL_E_DTYPE, "%s: %s has another dtype than the data", c->op, what);
  return TL_OK;
}

int tl_topi_bias_add(tl_topi_call *c) {
  int rc, axis = 0;
  int64_t ax64;
  if ((rc = tl_topi_nin(c, 2, 2)) || (rc = tl_topi_get_int(c, "axis", 1, &ax64))) return rc;
  tl_dag *dag = c->dag;
  int x = c->in[0], b = c->in[1], n = tl_topi_ndim(dag, x);
  if ((rc = norm_axis(c, ax64, n, &axis))) return rc;
  const int64_t *s = tl_topi_shape(dag, x);
  if ((rc = check_vec(c, b, "bias", s[axis], tl_topi_dtype(dag, x)))) return rc;
  tl_ref ax[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  tl_ref v = tl_add(dag->ir, tl_te_load(dag, x, ax, n), tl_te_load(dag, b, &ax[axis], 1));
  json_t *aj = json_object();
  json_object_set_new(aj, "axis", json_integer(axis));
  int out;
  rc = tl_topi_emit(c, "T_add", "broadcast", "broadcast", n, s, ax, v, TL_RED_NONE, NULL, 0, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

int tl_topi_batch_norm(tl_topi_call *c) {
  int rc, axis = 0;
  int64_t ax64, center, scale;
  double eps;
  if ((rc = tl_topi_nin(c, 5, 5)) || (rc = tl_topi_get_int(c, "axis", 1, &ax64)) ||
      (rc = tl_topi_get_float(c, "epsilon", 1e-5, &eps)) ||
      (rc = tl_topi_get_int(c, "center", 1, &center)) ||
      (rc = tl_topi_get_int(c, "scale", 1, &scale)))
    return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  if ((rc = norm_axis(c, ax64, n, &axis))) return rc;
  if (eps < 0) return tl_err(c->ctx, TL_E_ARG, "%s: epsilon must be non-negative, got %g", c->op, eps);
  tl_type dt = tl_topi_dtype(dag, x);
  if (!tl_type_is_float(dt)) return tl_err(c->ctx, TL_E_DTYPE, "%s: needs a float input", c->op);
  const int64_t *s = tl_topi_shape(dag, x);
  static const char *const what[4] = {"gamma", "beta", "moving_mean", "moving_var"};
  for (int i = 0; i < 4; i++)
    if ((rc = check_vec(c, c->in[i + 1], what[i], s[axis], dt))) return rc;
  tl_ref ax[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  tl_ref ch = ax[axis];
  tl_ref g = tl_te_load(dag, c->in[1], &ch, 1), b = tl_te_load(dag, c->in[2], &ch, 1);
  tl_ref m = tl_te_load(dag, c->in[3], &ch, 1), var = tl_te_load(dag, c->in[4], &ch, 1);
  tl_ref den = tl_add(ir, var, tl_imm_float(ir, dt, eps));
  den = tl_call(ir, TL_INTRIN_SQRT, dt, &den, 1);
  tl_ref v = tl_binary(ir, TL_IR_DIV, tl_sub(ir, tl_te_load(dag, x, ax, n), m), den);
  if (scale) v = tl_mul(ir, v, g);
  if (center) v = tl_add(ir, v, b);
  json_t *aj = json_object();
  json_object_set_new(aj, "axis", json_integer(axis));
  json_object_set_new(aj, "epsilon", json_real(eps));
  json_object_set_new(aj, "center", json_boolean(center));
  json_object_set_new(aj, "scale", json_boolean(scale));
  int out;
  rc = tl_topi_emit(c, "T_batch_norm", "broadcast", "broadcast", n, s, ax, v, TL_RED_NONE, NULL,
                    0, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

int tl_topi_cast(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  tl_type to;
  if ((rc = tl_topi_get_dtype(c, "dtype", TL_T_VOID, &to))) return rc;
  if (to.code == TL_TC_VOID) return tl_err(c->ctx, TL_E_ARG, "%s: attribute 'dtype' is required", c->op);
  tl_dag *dag = c->dag;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  tl_ref ax[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  tl_ref v = tl_te_load(dag, x, ax, n);
  if (!tl_type_eq(to, tl_topi_dtype(dag, x))) v = tl_cast(dag->ir, to, v);
  char tb[24];
  json_t *aj = json_object();
  json_object_set_new(aj, "dtype", json_string(tl_type_str(to, tb)));
  int out;
  rc = tl_topi_emit(c, "T_cast", "elemwise", "elemwise", n, tl_topi_shape(dag, x), ax, v,
                    TL_RED_NONE, NULL, 0, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}
