/*
** transform.c -- softmax and the injective (data movement) operators.
**
**   softmax / log_softmax {axis = -1}: multi-stage computes --
**     T_softmax_maxelem (max-reduce over axis), T_softmax_exp (exp(x - max)),
**     T_softmax_expsum (sum-reduce), T_softmax_norm (exp / sum); log_softmax
**     sums exp(x - max) directly and returns x - max - log(sum).
**   concatenate {axis = 0}, split {axis, sections | indices | sizes} (one
**   output per piece), reshape {newshape: -1 infers, 0 copies the input's
**   dim}, flatten {axis = 1: [prod(:axis), prod(axis:)]}, transpose {axes
**   = reversed}, squeeze {axis: list, absent = every size-1 dim},
**   expand_dims {axis, num_newaxis = 1} or {axes: positions in the output
**   (ONNX Unsqueeze)}, pad {pad_before, pad_after, pad_value = 0},
**   layout_transform {src_layout, dst_layout}: any pair of layouts made of
**   primal axes (upper case) and split sub-axes ("8c"), e.g. NCHW <-> NHWC,
**   NCHW -> NCHW8c and back.
** All tagged "injective" with pattern injective (softmax: opaque).
*/
#include "topi.h"

#include <ctype.h>
#include <stdio.h>

static int axis_norm(tl_topi_call *c, int64_t axis, int n, int *out) {
  if (axis < -n || axis >= n)
    return tl_err(c->ctx, TL_E_ARG, "%s: axis %lld is out of range for %d dimensions", c->op,
                  (long long)axis, n);
  *out = (int)(axis < 0 ? axis + n : axis);
  return TL_OK;
}

static int emit_out(tl_topi_call *c, const char *name, int n, const int64_t *shape,
                    const tl_ref *ax, tl_ref body, json_t *aj) {
  int out;
  int rc = tl_topi_emit(c, name, "injective", "injective", n, shape, ax, body, TL_RED_NONE, NULL,
                        0, 0, aj, &out);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

/* ---- softmax ---------------------------------------------------------------- */

int tl_topi_softmax(tl_topi_call *c) {
  int rc, axis = 0;
  int64_t a64;
  if ((rc = tl_topi_nin(c, 1, 1)) || (rc = tl_topi_get_int(c, "axis", -1, &a64))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  if (n == 0) return tl_err(c->ctx, TL_E_SHAPE, "%s: needs at least 1 dimension", c->op);
  if ((rc = axis_norm(c, a64, n, &axis))) return rc;
  tl_type dt = tl_topi_dtype(dag, x);
  if (!tl_type_is_float(dt)) return tl_err(c->ctx, TL_E_DTYPE, "%s: needs a float input", c->op);
  int logsm = strcmp(c->op, "log_softmax") == 0;
  const int64_t *s = tl_topi_shape(dag, x);
  int64_t rshape[TL_TOPI_MAXDIM];
  for (int i = 0, j = 0; i < n; i++)
    if (i != axis) rshape[j++] = s[i];
  json_t *aj = json_object();
  json_object_set_new(aj, "axis", json_integer(axis));
  tl_ref rax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  /* max over axis */
  tl_te_axis_vars(dag, n - 1, NULL, rax);
  tl_ref k = tl_te_reduce_axis(dag, "k", s[axis]);
  for (int i = 0, j = 0; i < n; i++) idx[i] = i == axis ? k : rax[j++];
  int maxe, expt = -1, sum, out;
  rc = tl_topi_emit(c, "T_softmax_maxelem", "softmax", "opaque", n - 1, rshape, rax,
                    tl_te_load(dag, x, idx, n), TL_RED_MAX, &k, 1, 0, aj, &maxe);
  if (rc) goto done;
  if (!logsm) {
    tl_ref ax[TL_TOPI_MAXDIM], ri[TL_TOPI_MAXDIM];
    tl_te_axis_vars(dag, n, NULL, ax);
    for (int i = 0, j = 0; i < n; i++)
      if (i != axis) ri[j++] = ax[i];
    tl_ref d = tl_sub(ir, tl_te_load(dag, x, ax, n), tl_te_load(dag, maxe, ri, n - 1));
    rc = tl_topi_emit(c, "T_softmax_exp", "softmax", "opaque", n, s, ax,
                      tl_call(ir, TL_INTRIN_EXP, dt, &d, 1), TL_RED_NONE, NULL, 0, 0, aj, &expt);
    if (rc) goto done;
  }
  tl_te_axis_vars(dag, n - 1, NULL, rax);
  k = tl_te_reduce_axis(dag, "k", s[axis]);
  for (int i = 0, j = 0; i < n; i++) idx[i] = i == axis ? k : rax[j++];
  tl_ref sbody;
  if (logsm) {
    tl_ref d = tl_sub(ir, tl_te_load(dag, x, idx, n), tl_te_load(dag, maxe, rax, n - 1));
    sbody = tl_call(ir, TL_INTRIN_EXP, dt, &d, 1);
  } else {
    sbody = tl_te_load(dag, expt, idx, n);
  }
  rc = tl_topi_emit(c, "T_softmax_expsum", "softmax", "opaque", n - 1, rshape, rax, sbody,
                    TL_RED_SUM, &k, 1, 0, aj, &sum);
  if (rc) goto done;
  {
    tl_ref ax[TL_TOPI_MAXDIM], ri[TL_TOPI_MAXDIM];
    tl_te_axis_vars(dag, n, NULL, ax);
    for (int i = 0, j = 0; i < n; i++)
      if (i != axis) ri[j++] = ax[i];
    tl_ref v, sv = tl_te_load(dag, sum, ri, n - 1);
    if (logsm) {
      tl_ref lg = tl_call(ir, TL_INTRIN_LOG, dt, &sv, 1);
      v = tl_sub(ir, tl_sub(ir, tl_te_load(dag, x, ax, n), tl_te_load(dag, maxe, ri, n - 1)), lg);
    } else {
      v = tl_binary(ir, TL_IR_DIV, tl_te_load(dag, expt, ax, n), sv);
    }
    rc = tl_topi_emit(c, logsm ? "T_log_softmax_norm" : "T_softmax_norm",
                      logsm ? "log_softmax_output" : "softmax_output", "opaque", n, s, ax, v,
                      TL_RED_NONE, NULL, 0, 0, aj, &out);
    if (rc) goto done;
    rc = tl_topi_push_out(c, out);
  }
done:
  json_decref(aj);
  return rc;
}

/* ---- concatenate / split ------------------------------------------------------- */

int tl_topi_concatenate(tl_topi_call *c) {
  int rc, axis = 0;
  int64_t a64;
  if ((rc = tl_topi_nin(c, 1, 1 << 20)) || (rc = tl_topi_get_int(c, "axis", 0, &a64))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int t0 = c->in[0], n = tl_topi_ndim(dag, t0);
  if (n == 0) return tl_err(c->ctx, TL_E_SHAPE, "%s: cannot concatenate scalars", c->op);
  if ((rc = axis_norm(c, a64, n, &axis))) return rc;
  const int64_t *s0 = tl_topi_shape(dag, t0);
  int64_t *off = tl_malloc(sizeof(int64_t) * ((size_t)c->nin + 1));
  off[0] = 0;
  for (int i = 0; i < c->nin; i++) {
    int t = c->in[i];
    const int64_t *s = tl_topi_shape(dag, t);
    int bad = tl_topi_ndim(dag, t) != n || !tl_type_eq(tl_topi_dtype(dag, t), tl_topi_dtype(dag, t0));
    for (int d = 0; d < n && !bad; d++)
      if (d != axis && s[d] != s0[d]) bad = 1;
    if (bad) {
      char b1[160], b2[160];
      free(off);
      return tl_err(c->ctx, TL_E_SHAPE, "%s: input %d %s does not match input 0 %s outside axis %d (or its dtype differs)",
                    c->op, i, tl_topi_shape_str(dag, t, b1), tl_topi_shape_str(dag, t0, b2), axis);
    }
    off[i + 1] = off[i] + s[axis];
  }
  int64_t shape[TL_TOPI_MAXDIM];
  memcpy(shape, s0, sizeof(int64_t) * (size_t)n);
  shape[axis] = off[c->nin];
  tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  memcpy(idx, ax, sizeof(tl_ref) * (size_t)n);
  tl_ref v = 0;
  for (int i = c->nin - 1; i >= 0; i--) {
    idx[axis] = tl_sub(ir, ax[axis], tl_int(ir, off[i]));
    tl_ref li = tl_te_load(dag, c->in[i], idx, n);
    v = v ? tl_if_then_else(ir, tl_lt(ir, ax[axis], tl_int(ir, off[i + 1])), li, v) : li;
  }
  free(off);
  json_t *aj = json_object();
  json_object_set_new(aj, "axis", json_integer(axis));
  rc = emit_out(c, "T_concat", n, shape, ax, v, aj);
  json_decref(aj);
  return rc;
}

int tl_topi_split(tl_topi_call *c) {
  int rc, axis = 0, ni = -1, nz = -1;
  int64_t a64, sections, ind[2 * TL_TOPI_MAXDIM], sizes[2 * TL_TOPI_MAXDIM];
  if ((rc = tl_topi_nin(c, 1, 1)) || (rc = tl_topi_get_int(c, "axis", 0, &a64)) ||
      (rc = tl_topi_get_int(c, "sections", 0, &sections)))
    return rc;
  json_t *ios = json_object_get(c->attrs, "indices_or_sections");
  if (ios && json_is_integer(ios)) sections = json_integer_value(ios);
  else if (ios && (rc = tl_topi_get_ints(c, "indices_or_sections", -1, NULL, ind, &ni))) return rc;
  if (ni < 0 && (rc = tl_topi_get_ints(c, "indices", -1, NULL, ind, &ni))) return rc;
  if ((rc = tl_topi_get_ints(c, "sizes", -1, NULL, sizes, &nz))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  if (n == 0) return tl_err(c->ctx, TL_E_SHAPE, "%s: cannot split a scalar", c->op);
  if ((rc = axis_norm(c, a64, n, &axis))) return rc;
  const int64_t *s = tl_topi_shape(dag, x);
  int64_t len = s[axis];
  int64_t begin[2 * TL_TOPI_MAXDIM + 1];
  int np = 0;
  if (nz >= 0) {
    int64_t acc = 0;
    for (int i = 0; i < nz; i++) {
      if (sizes[i] <= 0) return tl_err(c->ctx, TL_E_ARG, "%s: sizes must be positive", c->op);
      begin[np++] = acc;
      acc += sizes[i];
    }
    if (acc != len)
      return tl_err(c->ctx, TL_E_SHAPE, "%s: sizes add up to %lld but axis %d has %lld", c->op,
                    (long long)acc, axis, (long long)len);
    begin[np] = len;
  } else if (ni >= 0) {
    begin[np++] = 0;
    for (int i = 0; i < ni; i++) {
      if (ind[i] <= begin[np - 1] || ind[i] >= len)
        return tl_err(c->ctx, TL_E_ARG, "%s: indices must increase inside (0, %lld), got %lld", c->op,
                      (long long)len, (long long)ind[i]);
      begin[np++] = ind[i];
    }
    begin[np] = len;
  } else {
    if (sections <= 0 || len % sections != 0 || sections > 2 * TL_TOPI_MAXDIM)
      return tl_err(c->ctx, TL_E_ARG, "%s: sections=%lld does not divide axis %d of length %lld",
                    c->op, (long long)sections, axis, (long long)len);
    for (int64_t i = 0; i < sections; i++) begin[np++] = i * (len / sections);
    begin[np] = len;
  }
  json_t *aj = json_object();
  json_object_set_new(aj, "axis", json_integer(axis));
  for (int p = 0; p < np; p++) {
    int64_t shape[TL_TOPI_MAXDIM];
    memcpy(shape, s, sizeof(int64_t) * (size_t)n);
    shape[axis] = begin[p + 1] - begin[p];
    tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
    tl_te_axis_vars(dag, n, NULL, ax);
    memcpy(idx, ax, sizeof(tl_ref) * (size_t)n);
    idx[axis] = tl_add(ir, ax[axis], tl_int(ir, begin[p]));
    char nm[32];
    snprintf(nm, sizeof nm, p ? "T_split_%d" : "T_split", p);
    if ((rc = emit_out(c, nm, n, shape, ax, tl_te_load(dag, x, idx, n), aj))) break;
  }
  json_decref(aj);
  return rc;
}

/* ---- reshape / flatten ------------------------------------------------------------ */

int tl_topi_reshape(tl_topi_call *c) {
  int rc, nn;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  const int64_t *s = tl_topi_shape(dag, x);
  int64_t total = 1, shape[2 * TL_TOPI_MAXDIM];
  for (int i = 0; i < n; i++) total *= s[i];
  char b[160];
  if (strcmp(c->op, "flatten") == 0) {
    int64_t a64;
    int axis;
    if ((rc = tl_topi_get_int(c, "axis", 1, &a64))) return rc;
    if (a64 < -n || a64 > n)
      return tl_err(c->ctx, TL_E_ARG, "%s: axis %lld is out of range for %d dimensions", c->op,
                    (long long)a64, n);
    axis = (int)(a64 < 0 ? a64 + n : a64);
    shape[0] = 1;
    for (int i = 0; i < axis; i++) shape[0] *= s[i];
    shape[1] = total / shape[0];
    nn = 2;
  } else {
    if ((rc = tl_topi_get_ints(c, "newshape", -1, NULL, shape, &nn))) return rc;
    if (nn < 0) return tl_err(c->ctx, TL_E_ARG, "%s: attribute 'newshape' is required", c->op);
    if (nn > TL_TOPI_MAXDIM) return tl_err(c->ctx, TL_E_ARG, "%s: too many dimensions", c->op);
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < nn; i++) {
      if (shape[i] == 0) {
        if (i >= n) return tl_err(c->ctx, TL_E_ARG, "%s: newshape[%d] = 0 copies a dimension %s does not have", c->op, i, tl_topi_shape_str(dag, x, b));
        shape[i] = s[i];
      }
      if (shape[i] == -1) {
        if (infer >= 0) return tl_err(c->ctx, TL_E_ARG, "%s: newshape has more than one -1", c->op);
        infer = i;
      } else if (shape[i] < 0) {
        return tl_err(c->ctx, TL_E_ARG, "%s: newshape[%d] = %lld is negative", c->op, i, (long long)shape[i]);
      } else {
        known *= shape[i];
      }
    }
    if (infer >= 0) {
      if (known == 0 || total % known != 0)
        return tl_err(c->ctx, TL_E_SHAPE, "%s: cannot infer the -1 in newshape: %lld elements of %s over %lld",
                      c->op, (long long)total, tl_topi_shape_str(dag, x, b), (long long)known);
      shape[infer] = total / known;
      known = total;
    }
    if (known != total)
      return tl_err(c->ctx, TL_E_SHAPE, "%s: newshape has %lld elements but %s has %lld", c->op,
                    (long long)known, tl_topi_shape_str(dag, x, b), (long long)total);
  }
  tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, nn, NULL, ax);
  tl_ref flat = tl_int(ir, 0);
  for (int i = 0; i < nn; i++) flat = tl_add(ir, tl_mul(ir, flat, tl_int(ir, shape[i])), ax[i]);
  for (int i = n - 1; i >= 0; i--) {
    idx[i] = i == 0 ? flat : tl_floormod(ir, flat, tl_int(ir, s[i]));
    if (i > 0) flat = tl_floordiv(ir, flat, tl_int(ir, s[i]));
  }
  json_t *aj = json_object();
  json_t *ja = json_array();
  for (int i = 0; i < nn; i++) json_array_append_new(ja, json_integer(shape[i]));
  json_object_set_new(aj, "newshape", ja);
  rc = emit_out(c, strcmp(c->op, "flatten") == 0 ? "T_flatten" : "T_reshape", nn, shape, ax,
                tl_te_load(dag, x, idx, n), aj);
  json_decref(aj);
  return rc;
}

/* ---- transpose / squeeze / expand_dims ---------------------------------------------- */

int tl_topi_transpose(tl_topi_call *c) {
  int rc, np;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  tl_dag *dag = c->dag;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  int64_t perm[2 * TL_TOPI_MAXDIM];
  if ((rc = tl_topi_get_ints(c, "axes", -1, NULL, perm, &np))) return rc;
  if (np < 0) {
    np = n;
    for (int i = 0; i < n; i++) perm[i] = n - 1 - i;
  }
  char b[160];
  if (np != n)
    return tl_err(c->ctx, TL_E_ARG, "%s: axes has %d entries but the input %s has %d dimensions",
                  c->op, np, tl_topi_shape_str(dag, x, b), n);
  int seen[TL_TOPI_MAXDIM] = {0};
  for (int i = 0; i < n; i++) {
    if (perm[i] < 0) perm[i] += n;
    if (perm[i] < 0 || perm[i] >= n || seen[perm[i]]++)
      return tl_err(c->ctx, TL_E_ARG, "%s: axes is not a permutation of 0..%d", c->op, n - 1);
  }
  const int64_t *s = tl_topi_shape(dag, x);
  int64_t shape[TL_TOPI_MAXDIM];
  tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  for (int i = 0; i < n; i++) {
    shape[i] = s[perm[i]];
    idx[perm[i]] = ax[i];
  }
  json_t *aj = json_object();
  json_t *ja = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(ja, json_integer(perm[i]));
  json_object_set_new(aj, "axes", ja);
  rc = emit_out(c, "T_transpose", n, shape, ax, tl_te_load(dag, x, idx, n), aj);
  json_decref(aj);
  return rc;
}

int tl_topi_squeeze(tl_topi_call *c) {
  int rc, na;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  tl_dag *dag = c->dag;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  const int64_t *s = tl_topi_shape(dag, x);
  int64_t axes[2 * TL_TOPI_MAXDIM];
  json_t *av = json_object_get(c->attrs, "axis");
  if (av && json_is_integer(av)) {
    axes[0] = json_integer_value(av);
    na = 1;
  } else if ((rc = tl_topi_get_ints(c, "axis", -1, NULL, axes, &na))) {
    return rc;
  }
  int drop[TL_TOPI_MAXDIM] = {0};
  char b[160];
  if (na < 0) {
    for (int i = 0; i < n; i++) drop[i] = s[i] == 1;
  } else {
    for (int i = 0; i < na; i++) {
      int a = 0;
      if ((rc = axis_norm(c, axes[i], n, &a))) return rc;
      if (s[a] != 1)
        return tl_err(c->ctx, TL_E_SHAPE, "%s: axis %d of %s has size %lld, not 1", c->op, a,
                      tl_topi_shape_str(dag, x, b), (long long)s[a]);
      drop[a] = 1;
    }
  }
  int64_t shape[TL_TOPI_MAXDIM];
  int nn = 0;
  for (int i = 0; i < n; i++)
    if (!drop[i]) shape[nn++] = s[i];
  tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, nn, NULL, ax);
  for (int i = 0, j = 0; i < n; i++) idx[i] = drop[i] ? tl_int(dag->ir, 0) : ax[j++];
  return emit_out(c, "T_squeeze", nn, shape, ax, tl_te_load(dag, x, idx, n), NULL);
}

int tl_topi_expand_dims(tl_topi_call *c) {
  int rc, na;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  tl_dag *dag = c->dag;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  const int64_t *s = tl_topi_shape(dag, x);
  int64_t axes[2 * TL_TOPI_MAXDIM];
  if ((rc = tl_topi_get_ints(c, "axes", -1, NULL, axes, &na))) return rc;
  int isnew[TL_TOPI_MAXDIM] = {0}, nn;
  if (na < 0) {
    int64_t a64, num;
    if ((rc = tl_topi_get_int(c, "axis", 0, &a64)) || (rc = tl_topi_get_int(c, "num_newaxis", 1, &num)))
      return rc;
    if (a64 < -n - 1 || a64 > n)
      return tl_err(c->ctx, TL_E_ARG, "%s: axis %lld is out of range for %d dimensions", c->op, (long long)a64, n);
    if (num < 0 || n + num > TL_TOPI_MAXDIM)
      return tl_err(c->ctx, TL_E_ARG, "%s: num_newaxis %lld is out of range", c->op, (long long)num);
    int a = (int)(a64 < 0 ? a64 + n + 1 : a64);
    nn = n + (int)num;
    for (int i = 0; i < num; i++) isnew[a + i] = 1;
  } else {
    nn = n + na;
    if (nn > TL_TOPI_MAXDIM) return tl_err(c->ctx, TL_E_ARG, "%s: too many dimensions", c->op);
    for (int i = 0; i < na; i++) {
      int64_t a = axes[i] < 0 ? axes[i] + nn : axes[i];
      if (a < 0 || a >= nn || isnew[a])
        return tl_err(c->ctx, TL_E_ARG, "%s: axes entry %lld is out of range or repeated for %d output dimensions",
                      c->op, (long long)axes[i], nn);
      isnew[a] = 1;
    }
  }
  int64_t shape[TL_TOPI_MAXDIM];
  tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, nn, NULL, ax);
  for (int i = 0, j = 0; i < nn; i++) {
    if (isnew[i]) {
      shape[i] = 1;
    } else {
      shape[i] = s[j];
      idx[j++] = ax[i];
    }
  }
  return emit_out(c, "T_expand_dims", nn, shape, ax, tl_te_load(dag, x, idx, n), NULL);
}

/* ---- pad -------------------------------------------------------------------------- */

int tl_topi_pad(tl_topi_call *c) {
  int rc, nb, na;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  tl_dag *dag = c->dag;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  const int64_t *s = tl_topi_shape(dag, x);
  int64_t before[2 * TL_TOPI_MAXDIM], after[2 * TL_TOPI_MAXDIM];
  double value;
  if ((rc = tl_topi_get_ints(c, "pad_before", -1, NULL, before, &nb)) ||
      (rc = tl_topi_get_ints(c, "pad_after", -1, NULL, after, &na)) ||
      (rc = tl_topi_get_float(c, "pad_value", 0, &value)))
    return rc;
  if (nb < 0) return tl_err(c->ctx, TL_E_ARG, "%s: attribute 'pad_before' is required", c->op);
  if (na < 0) {
    memcpy(after, before, sizeof(int64_t) * (size_t)nb);
    na = nb;
  }
  char b[160];
  if (nb != n || na != n)
    return tl_err(c->ctx, TL_E_ARG, "%s: pad_before and pad_after need %d values for %s, got %d and %d",
                  c->op, n, tl_topi_shape_str(dag, x, b), nb, na);
  int64_t shape[TL_TOPI_MAXDIM];
  for (int i = 0; i < n; i++) {
    if (before[i] < 0 || after[i] < 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: padding must be non-negative, got %lld/%lld on axis %d",
                    c->op, (long long)before[i], (long long)after[i], i);
    shape[i] = before[i] + s[i] + after[i];
  }
  /* always a stage of its own, even without padding: the operator's output */
  tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, n, NULL, ax);
  tl_ref cond = 0;
  tl_ir *ir = dag->ir;
  for (int i = 0; i < n; i++) {
    idx[i] = tl_sub(ir, ax[i], tl_int(ir, before[i]));
    if (before[i] > 0) cond = tl_topi_and(dag, cond, tl_topi_cmp(dag, TL_IR_GE, ax[i], tl_int(ir, before[i])));
    if (after[i] > 0) cond = tl_topi_and(dag, cond, tl_lt(ir, ax[i], tl_int(ir, before[i] + s[i])));
  }
  tl_ref v = tl_te_load(dag, x, idx, n);
  if (cond) v = tl_if_then_else(ir, cond, v, tl_topi_const(dag, tl_topi_dtype(dag, x), value));
  json_t *aj = json_object();
  json_t *jb = json_array(), *ja = json_array();
  for (int i = 0; i < n; i++) {
    json_array_append_new(jb, json_integer(before[i]));
    json_array_append_new(ja, json_integer(after[i]));
  }
  json_object_set_new(aj, "pad_before", jb);
  json_object_set_new(aj, "pad_after", ja);
  json_object_set_new(aj, "pad_value", json_real(value));
  int out;
  rc = tl_topi_emit(c, "T_pad", "injective,pad", "injective", n, shape, ax, v, TL_RED_NONE, NULL,
                    0, 0, aj, &out);
  json_decref(aj);
  if (rc) return rc;
  return tl_topi_push_out(c, out);
}

/* ---- layout_transform --------------------------------------------------------------- */

typedef struct layout {
  int n;
  char axis[TL_TOPI_MAXDIM];      /* upper case: primal; lower case: sub-axis */
  int64_t factor[TL_TOPI_MAXDIM]; /* sub-axis extent (0 for primal) */
} layout;

static int layout_parse(tl_topi_call *c, const char *s, layout *l) {
  l->n = 0;
  const char *p = s;
  while (*p) {
    int64_t f = 0;
    while (isdigit((unsigned char)*p)) f = f * 10 + (*p++ - '0');
    if (!isalpha((unsigned char)*p) || l->n >= TL_TOPI_MAXDIM || (f > 0) != (islower((unsigned char)*p) != 0))
      return tl_err(c->ctx, TL_E_ARG, "%s: bad layout '%s' (e.g. \"NCHW\", \"NCHW8c\")", c->op, s);
    l->axis[l->n] = *p++;
    l->factor[l->n++] = f;
  }
  for (int i = 0; i < l->n; i++) {
    int up = 0, dup = 0;
    for (int j = 0; j < l->n; j++) {
      if (j != i && l->axis[j] == l->axis[i]) dup = 1;
      if (l->axis[j] == toupper((unsigned char)l->axis[i])) up = 1;
    }
    if (dup || !up)
      return tl_err(c->ctx, TL_E_ARG, "%s: bad layout '%s' (repeated axis or sub-axis without its primal axis)", c->op, s);
  }
  return TL_OK;
}

static int layout_find(const layout *l, char a) {
  for (int i = 0; i < l->n; i++)
    if (l->axis[i] == a) return i;
  return -1;
}

int tl_topi_layout_transform(tl_topi_call *c) {
  int rc;
  if ((rc = tl_topi_nin(c, 1, 1))) return rc;
  const char *ss, *ds;
  if ((rc = tl_topi_get_str(c, "src_layout", NULL, &ss)) || (rc = tl_topi_get_str(c, "dst_layout", NULL, &ds)))
    return rc;
  if (!ss || !ds) return tl_err(c->ctx, TL_E_ARG, "%s: attributes 'src_layout' and 'dst_layout' are required", c->op);
  layout src, dst;
  if ((rc = layout_parse(c, ss, &src)) || (rc = layout_parse(c, ds, &dst))) return rc;
  tl_dag *dag = c->dag;
  tl_ir *ir = dag->ir;
  int x = c->in[0], n = tl_topi_ndim(dag, x);
  const int64_t *s = tl_topi_shape(dag, x);
  char b[160];
  if (n != src.n)
    return tl_err(c->ctx, TL_E_SHAPE, "%s: input %s does not have the %d dimensions of '%s'", c->op,
                  tl_topi_shape_str(dag, x, b), src.n, ss);
  /* the full extent of each primal axis */
  int64_t full[TL_TOPI_MAXDIM];
  for (int i = 0; i < src.n; i++) {
    if (!isupper((unsigned char)src.axis[i])) continue;
    int sub = layout_find(&src, (char)tolower((unsigned char)src.axis[i]));
    if (sub >= 0 && s[sub] != src.factor[sub])
      return tl_err(c->ctx, TL_E_SHAPE, "%s: input %s: axis '%c' has %lld, the layout '%s' says %lld",
                    c->op, tl_topi_shape_str(dag, x, b), src.axis[sub], (long long)s[sub], ss,
                    (long long)src.factor[sub]);
    full[i] = s[i] * (sub >= 0 ? src.factor[sub] : 1);
    if (layout_find(&dst, src.axis[i]) < 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: layouts '%s' and '%s' do not have the same axes", c->op, ss, ds);
  }
  for (int i = 0; i < dst.n; i++)
    if (isupper((unsigned char)dst.axis[i]) && layout_find(&src, dst.axis[i]) < 0)
      return tl_err(c->ctx, TL_E_ARG, "%s: layouts '%s' and '%s' do not have the same axes", c->op, ss, ds);
  int64_t shape[TL_TOPI_MAXDIM];
  for (int i = 0; i < dst.n; i++) {
    char P = (char)toupper((unsigned char)dst.axis[i]);
    int64_t f = full[layout_find(&src, P)];
    if (islower((unsigned char)dst.axis[i])) {
      if (f % dst.factor[i] != 0)
        return tl_err(c->ctx, TL_E_SHAPE, "%s: axis '%c' of extent %lld is not divisible by %lld", c->op, P,
                      (long long)f, (long long)dst.factor[i]);
      shape[i] = dst.factor[i];
    } else {
      int sub = layout_find(&dst, (char)tolower((unsigned char)P));
      if (sub >= 0 && f % dst.factor[sub] != 0)
        return tl_err(c->ctx, TL_E_SHAPE, "%s: axis '%c' of extent %lld is not divisible by %lld", c->op, P,
                      (long long)f, (long long)dst.factor[sub]);
      shape[i] = sub >= 0 ? f / dst.factor[sub] : f;
    }
  }
  tl_ref ax[TL_TOPI_MAXDIM], idx[TL_TOPI_MAXDIM];
  tl_te_axis_vars(dag, dst.n, NULL, ax);
  for (int i = 0; i < src.n; i++) {
    if (!isupper((unsigned char)src.axis[i])) continue;
    char P = src.axis[i], p = (char)tolower((unsigned char)P);
    int dP = layout_find(&dst, P), dp = layout_find(&dst, p);
    tl_ref fv = dp >= 0 ? tl_add(ir, tl_mul(ir, ax[dP], tl_int(ir, dst.factor[dp])), ax[dp]) : ax[dP];
    int sp = layout_find(&src, p);
    if (sp >= 0) {
      idx[i] = tl_floordiv(ir, fv, tl_int(ir, src.factor[sp]));
      idx[sp] = tl_floormod(ir, fv, tl_int(ir, src.factor[sp]));
    } else {
      idx[i] = fv;
    }
  }
  json_t *aj = json_object();
  json_object_set_new(aj, "src_layout", json_string(ss));
  json_object_set_new(aj, "dst_layout", json_string(ds));
  rc = emit_out(c, "T_layout_trans", dst.n, shape, ax, tl_te_load(dag, x, idx, n), aj);
  json_decref(aj);
  return rc;
}
