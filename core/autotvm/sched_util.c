/*
** sched_util.c -- helpers shared by the C templates of every device family
** (each family's templates.c under targets/): schedule steps addressed by stable iterator nodes,
** stages found by tag, injective stages inlined, and the dense operator's
** arguments and compute, the NCHW convolutions' arguments, computes and anchor stages.
*/
#include <stdio.h>
#include <string.h>

#include "autotvm.h"

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

int tl_atvm_split_node(tl_ctx *ctx, tl_sched *s, int st, int node, int n, const int64_t *f,
                       int *out) {
  int p = tl_sched_node_iter(s, st, node);
  if (p < 0) return tl_err(ctx, TL_E_INTERNAL, "template: lost an iterator");
  int rc = tl_sched_split(ctx, s, st, p, n, f, 1);
  if (rc) return rc;
  for (int i = 0; i <= n; i++) out[i] = tl_sched_iter_node(s, st, p + i);
  return TL_OK;
}

int tl_atvm_fuse_nodes(tl_ctx *ctx, tl_sched *s, int st, const int *nodes, int n, int *out) {
  int ps[16];
  if (n > 16) return tl_err(ctx, TL_E_INTERNAL, "template: fuse: too many iterators");
  for (int i = 0; i < n; i++) ps[i] = tl_sched_node_iter(s, st, nodes[i]);
  int rc = n > 1 ? tl_sched_fuse(ctx, s, st, n, ps) : TL_OK;
  if (rc) return rc;
  *out = tl_sched_iter_node(s, st, ps[0]);
  return TL_OK;
}

int tl_atvm_reorder_nodes(tl_ctx *ctx, tl_sched *s, int st, const int *nodes, int n) {
  int ni = tl_sched_num_iters(s, st), order[64], slots[64], ps[64], ns = 0;
  if (ni > 64 || n > 64) return tl_err(ctx, TL_E_INTERNAL, "template: too many iterators");
  for (int i = 0; i < ni; i++) order[i] = i;
  for (int i = 0; i < n; i++) {
    ps[i] = tl_sched_node_iter(s, st, nodes[i]);
    if (ps[i] < 0) return tl_err(ctx, TL_E_INTERNAL, "template: reorder: lost an iterator");
  }
  /* the positions the listed nodes hold, in order, take the nodes in list order */
  for (int i = 0; i < ni; i++)
    for (int j = 0; j < n; j++)
      if (ps[j] == i) slots[ns++] = i;
  for (int j = 0; j < n; j++) order[slots[j]] = ps[j];
  return tl_sched_reorder(ctx, s, st, ni, order);
}

int tl_atvm_same_shape(tl_sched *s, int a, int b) {
  tl_dag *dag = tl_sched_dag(s);
  int ta = tl_sched_stage_tensor(s, a, 0), tb = tl_sched_stage_tensor(s, b, 0);
  int n = tl_dag_tensor_ndim(dag, ta);
  if (n != tl_dag_tensor_ndim(dag, tb)) return 0;
  return memcmp(tl_dag_tensor_shape(dag, ta), tl_dag_tensor_shape(dag, tb),
                (size_t)n * sizeof(int64_t)) == 0;
}

int tl_atvm_dense_dims(tl_ctx *ctx, const tl_atvm_args *a, int64_t *M, int64_t *N, int64_t *K) {
  if (a->ntensors < 2)
    return tl_err(ctx, TL_E_ARG, "expected args [data, weight, bias or null, out_dtype] with 2 or 3 tensors, got %d",
                  a->ntensors);
  if (a->ndim[0] != 2 || a->ndim[1] != 2)
    return tl_err(ctx, TL_E_SHAPE, "data and weight must be 2-D, got %d-D and %d-D", a->ndim[0], a->ndim[1]);
  *M = a->shape[0][0], *K = a->shape[0][1], *N = a->shape[1][0];
  if (a->shape[1][1] != *K)
    return tl_err(ctx, TL_E_SHAPE, "data has K=%lld but weight has K=%lld", (long long)*K,
                  (long long)a->shape[1][1]);
  return TL_OK;
}

int tl_atvm_dense_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                          int *out, int max_out, int *nout) {
  int64_t M = 0, N = 0, K = 0;
  int rc = tl_atvm_dense_dims(ctx, a, &M, &N, &K);
  if (rc) return rc;
  size_t n = json_array_size(a->json);
  const char *od = json_string_value(json_array_get(a->json, n - 1));
  char attrs[128];
  snprintf(attrs, sizeof attrs, "{\"units\":%lld%s%s%s}", (long long)N, od ? ",\"out_dtype\":\"" : "",
           od ? od : "", od ? "\"" : "");
  return tl_topi_op(ctx, dag, "dense", in, nin >= 3 ? 3 : 2, attrs, out, max_out, nout);
}

int tl_atvm_stage_by_tag(tl_sched *s, const char *tag_prefix) {
  tl_dag *dag = tl_sched_dag(s);
  for (int i = 0; i < tl_sched_num_stages(s); i++) {
    const char *tag = tl_dag_op_tag(dag, i);
    if (tl_sched_stage_op_kind(s, i) == TL_DAG_COMPUTE && tag &&
        strncmp(tag, tag_prefix, strlen(tag_prefix)) == 0)
      return i;
  }
  return -1;
}

int tl_atvm_inline_injective(tl_ctx *ctx, tl_sched *s, int anchor) {
  tl_dag *dag = tl_sched_dag(s);
  int last = tl_sched_num_stages(s) - 1;
  for (int i = 0; i < last; i++) {
    if (i == anchor || tl_sched_stage_op_kind(s, i) != TL_DAG_COMPUTE) continue;
    const char *nm = tl_sched_stage_name(s, i);
    if (i < anchor && (strcmp(nm, "pad_temp") == 0 || strcmp(nm, "PaddedInput") == 0)) continue;
    if (tl_dag_op_nreduce(dag, i) > 0) continue;
    int rc = tl_sched_compute_inline(ctx, s, i);
    if (rc) return rc;
  }
  return TL_OK;
}

/* ---- 2-D convolutions of the arm_cpu and mali templates ------------------------------ */

int tl_atvm_conv_read(tl_ctx *ctx, const tl_atvm_args *a, int depthwise, tl_atvm_conv *ci) {
  if (a->ndim[0] != 4 || a->ndim[1] != 4)
    return tl_err(ctx, TL_E_SHAPE, "data and kernel must be 4-D (NCHW, OIHW), got %d-D and %d-D",
                  a->ndim[0], a->ndim[1]);
  TRY(tl_atvm_args_ints(ctx, a, 2, 2, ci->stride, "strides"));
  TRY(tl_atvm_args_ints(ctx, a, 3, 4, ci->pad, "padding"));
  TRY(tl_atvm_args_ints(ctx, a, 4, 2, ci->dil, "dilation"));
  size_t n = json_array_size(a->json);
  ci->out_dtype = json_string_value(json_array_get(a->json, n - 1));
  ci->N = a->shape[0][0], ci->C = a->shape[0][1], ci->H = a->shape[0][2], ci->W = a->shape[0][3];
  ci->KH = a->shape[1][2], ci->KW = a->shape[1][3];
  ci->O = depthwise ? a->shape[1][0] * a->shape[1][1] : a->shape[1][0];
  return TL_OK;
}

int tl_atvm_conv_size(tl_ctx *ctx, tl_atvm_conv *ci, int check_dilation) {
  if (ci->stride[0] < 1 || ci->stride[1] < 1) return tl_err(ctx, TL_E_ARG, "strides must be positive");
  if (check_dilation && (ci->dil[0] < 1 || ci->dil[1] < 1))
    return tl_err(ctx, TL_E_ARG, "dilation must be positive");
  int64_t KHd = (ci->KH - 1) * ci->dil[0] + 1, KWd = (ci->KW - 1) * ci->dil[1] + 1;
  ci->OH = (ci->H + ci->pad[0] + ci->pad[2] - KHd) / ci->stride[0] + 1;
  ci->OW = (ci->W + ci->pad[1] + ci->pad[3] - KWd) / ci->stride[1] + 1;
  if (ci->OH < 1 || ci->OW < 1) return tl_err(ctx, TL_E_SHAPE, "the kernel is larger than the padded input");
  return TL_OK;
}

int tl_atvm_conv_of(tl_ctx *ctx, const tl_atvm_args *a, int depthwise, tl_atvm_conv *ci) {
  if (a->ntensors < 2 || json_array_size(a->json) < 5)
    return tl_err(ctx, TL_E_ARG,
                  "expected args [data, kernel, strides, padding, dilation, out_dtype] with 2 tensors, got %d tensors",
                  a->ntensors);
  TRY(tl_atvm_conv_read(ctx, a, depthwise, ci));
  if (!depthwise && a->shape[1][1] != ci->C)
    return tl_err(ctx, TL_E_SHAPE, "data has %lld channels but the kernel expects %lld",
                  (long long)ci->C, (long long)a->shape[1][1]);
  if (depthwise && a->shape[1][0] != ci->C)
    return tl_err(ctx, TL_E_SHAPE, "depthwise: data has %lld channels but the kernel has %lld",
                  (long long)ci->C, (long long)a->shape[1][0]);
  return tl_atvm_conv_size(ctx, ci, 1);
}

void tl_atvm_conv_attrs(const tl_atvm_conv *ci, const char *extra, char *buf, size_t cap) {
  snprintf(buf, cap,
           "{\"strides\":[%lld,%lld],\"padding\":[%lld,%lld,%lld,%lld],\"dilation\":[%lld,%lld]%s%s%s%s}",
           (long long)ci->stride[0], (long long)ci->stride[1], (long long)ci->pad[0],
           (long long)ci->pad[1], (long long)ci->pad[2], (long long)ci->pad[3], (long long)ci->dil[0],
           (long long)ci->dil[1], ci->out_dtype ? ",\"out_dtype\":\"" : "",
           ci->out_dtype ? ci->out_dtype : "", ci->out_dtype ? "\"" : "", extra ? extra : "");
}

void tl_atvm_pack_kernel_oihw(const tl_atvm_args *a, int64_t B, const void *src, void *dst) {
  const float *w = src;
  float *p = dst;
  int64_t O = a->shape[1][0], C = a->shape[1][1], khw = a->shape[1][2] * a->shape[1][3];
  for (int64_t o = 0; o < O; o++)
    for (int64_t c = 0; c < C; c++) {
      const float *s = w + (o * C + c) * khw;
      float *d = p + ((o / B) * C + c) * khw * B + o % B;
      for (int64_t k = 0; k < khw; k++) d[k * B] = s[k];
    }
}

int tl_atvm_conv2d_nchw_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                      int *out, int max_out, int *nout) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 0, &ci));
  char attrs[512];
  tl_atvm_conv_attrs(&ci, ",\"layout\":\"NCHW\"", attrs, sizeof attrs);
  return tl_topi_op(ctx, dag, "conv2d", in, 2, attrs, out, max_out, nout);
}

int tl_atvm_depthwise_nchw_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                      int *out, int max_out, int *nout) {
  tl_atvm_conv ci;
  TRY(tl_atvm_conv_of(ctx, a, 1, &ci));
  char attrs[512];
  tl_atvm_conv_attrs(&ci, NULL, attrs, sizeof attrs);
  return tl_topi_op(ctx, dag, "depthwise_conv2d", in, 2, attrs, out, max_out, nout);
}

int tl_atvm_anchor_stages(tl_ctx *ctx, tl_sched *s, const char *tag, const char *tmpl, int *O,
                         int *L, int *other) {
  int C = tl_atvm_stage_by_tag(s, tag);
  if (C < 0) return tl_err(ctx, TL_E_SCHED, "%s: no '%s' stage", tmpl, tag);
  TRY(tl_atvm_inline_injective(ctx, s, C));
  C = tl_atvm_stage_by_tag(s, tag);
  char cname[128];
  snprintf(cname, sizeof cname, "%s", tl_sched_stage_name(s, C));
  int last = tl_sched_num_stages(s) - 1;
  *other = -1;
  if (last != C && tl_atvm_same_shape(s, C, last)) {
    *O = last, *L = C;
    return TL_OK;
  }
  int ns;
  TRY(tl_sched_cache_write(ctx, s, C, "local", &ns));
  *L = ns;
  *O = tl_sched_stage_find(s, cname);
  if (last != C) *other = tl_sched_num_stages(s) - 1;
  return TL_OK;
}

int tl_atvm_inline_named(tl_ctx *ctx, tl_sched *s, const char *name) {
  int p = tl_sched_stage_find(s, name);
  if (p < 0 || tl_sched_stage_op_kind(s, p) != TL_DAG_COMPUTE) return TL_OK;
  if (tl_sched_stage_compute_at(s, p, NULL, NULL) != TL_CA_ROOT) return TL_OK;
  return tl_sched_compute_inline(ctx, s, p);
}

void tl_cfg_fallback_ints(tl_atvm_cfg *cfg, const char *name, const int64_t *ints) {
  int k = tl_atvm_space_find(cfg->space, name);
  if (k < 0) return;
  tl_knob *kb = &cfg->space->knobs.v[k];
  for (int64_t j = 0; j < kb->dim; j++)
    if (memcmp(tl_knob_entity(kb, j), ints, (size_t)kb->width * sizeof(int64_t)) == 0) {
      kb->fallback = j;
      return;
    }
}

int tl_atvm_winograd_output(tl_ctx *ctx, tl_sched *s, const char *tmpl, int *O, int *other) {
  int W = tl_atvm_stage_by_tag(s, "conv2d_nchw_winograd");
  if (W < 0) return tl_err(ctx, TL_E_SCHED, "%s: no winograd output stage", tmpl);
  int last = tl_sched_num_stages(s) - 1;
  for (int i = last - 1; i > W; i--)
    if (tl_dag_op_nreduce(tl_sched_dag(s), i) == 0 && tl_sched_stage_op_kind(s, i) == TL_DAG_COMPUTE)
      TRY(tl_sched_compute_inline(ctx, s, i));
  last = tl_sched_num_stages(s) - 1;
  *O = last, *other = -1;
  if (last != W) {
    if (tl_atvm_same_shape(s, W, last)) TRY(tl_sched_compute_inline(ctx, s, W));
    else *other = last, *O = W;
  }
  return TL_OK;
}

int tl_atvm_move_innermost(tl_ctx *ctx, tl_sched *s, int st, int node, const char *family) {
  int ni = tl_sched_num_iters(s, st), p = tl_sched_node_iter(s, st, node), order[64], k = 0;
  if (p < 0 || ni > 64) return tl_err(ctx, TL_E_INTERNAL, "%s template: lost an iterator", family);
  if (p == ni - 1) return TL_OK;
  for (int i = 0; i < ni; i++)
    if (i != p) order[k++] = i;
  order[k] = p;
  return tl_sched_reorder(ctx, s, st, ni, order);
}
