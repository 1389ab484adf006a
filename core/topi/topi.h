/*
** topi.h -- the operator library: TVM's topi as compute declarations over a
** tl_dag, in C.
**
** Each operator adds one or more compute ops to a dag (a "pad" stage, the
** main computation, a softmax sum stage...) and returns its output tensor
** id(s). Every op it adds carries a tag ("conv2d_nchw", "pool_max",
** "elemwise", "broadcast", "injective"...) and an attributes JSON object
** (tl_te_set_attrs) holding the operator's attributes plus "pattern": the
** fusion pattern name ("elemwise", "broadcast", "injective", "comm_reduce",
** "out_elemwise_fusable", "opaque"). The pattern of an operator as a whole
** (what a graph fuser asks) is tl_topi_pattern(name).
**
** Operators are called through one generic entry (tl_topi_op in
** core/tunelua.h) with their attributes as a JSON object; the table in
** core/topi/topi.c maps names to the implementations below. Invalid
** attributes are refused with TL_E_ARG / TL_E_SHAPE and a message naming the
** operator, the attribute and the shapes ("conv2d: strides must be positive,
** got (0, 1) for data (1, 3, 5, 5) and kernel (2, 3, 7, 7)").
**
** FLOPs: ops count the direct algorithm through tl_dag_flop's rules; the
** Winograd convolution records "FLOP" (the direct convolution's count) in
** the attrs of its output op and "FLOP": 0 in its other stages, which the
** auto-scheduler's estimator (tl_dag_flop_ansor) honours.
**
** Files: topi.c (registry, attribute parsing, shared helpers), nn.c
** (convolutions, dense, matmul), nnnd.c (conv and pool over 1 or 3 spatial
** dims), pool.c, elemwise.c, transform.c, winograd.c, schedule.c (default
** schedules per target class).
*/
#ifndef TL_TOPI_H
#define TL_TOPI_H

#include <jansson.h>

#include "../te/te.h"

#define TL_TOPI_MAXDIM 16

/* One operator call: inputs, parsed attributes, outputs written by the op. */
typedef struct tl_topi_call {
  tl_ctx *ctx;
  tl_dag *dag;
  const char *op;                 /* operator name, prefixes messages */
  const int *in;
  int nin;
  json_t *attrs;                  /* a JSON object (never NULL) */
  int *out;
  int max_out;
  int nout;                       /* outputs written */
} tl_topi_call;

typedef int (*tl_topi_fn)(tl_topi_call *c);

/* ---- shared helpers (topi.c) -------------------------------------------- */

int tl_topi_ndim(const tl_dag *dag, int t);
const int64_t *tl_topi_shape(const tl_dag *dag, int t);
tl_type tl_topi_dtype(const tl_dag *dag, int t);
/* "(1, 3, 224, 224)" into buf (>= 160 bytes). */
const char *tl_topi_shape_str(const tl_dag *dag, int t, char *buf);

/* "for data (1, 3, 5, 5) and kernel (8, 3, 3, 3)" (one input: data only)
** into buf (>= 400 bytes): the shapes an attribute error names. */
const char *tl_topi_inputs_str(tl_topi_call *c, char *buf);

/* Attribute getters: the default when absent; an error naming the op and
** the attribute when the type is wrong. get_ints accepts a number (repeated
** n times) or a list of exactly n numbers; n < 0: any length (a number is a
** list of one), *count set. */
int tl_topi_get_int(tl_topi_call *c, const char *key, int64_t dflt, int64_t *out);
int tl_topi_get_float(tl_topi_call *c, const char *key, double dflt, double *out);
int tl_topi_get_str(tl_topi_call *c, const char *key, const char *dflt, const char **out);
int tl_topi_get_ints(tl_topi_call *c, const char *key, int n, const int64_t *dflt,
                     int64_t *out, int *count);
/* "padding" as (top, left, bottom, right): absent 0; one value for all four, two for
** (top/bottom, left/right), or four; any other count is an error naming the op. */
int tl_topi_get_padding(tl_topi_call *c, int64_t pad[4]);
/* "out_dtype" (or key) as a tl_type; dflt when absent. */
int tl_topi_get_dtype(tl_topi_call *c, const char *key, tl_type dflt, tl_type *out);
/* Check the input count (min..max). */
int tl_topi_nin(tl_topi_call *c, int min, int max);

/* Add a compute op and attach attrs (+ "pattern") to it. attrs may be NULL
** (an empty object); it is not consumed. Writes the output tensor. */
int tl_topi_emit(tl_topi_call *c, const char *name, const char *tag, const char *pattern,
                 int ndim, const int64_t *shape, const tl_ref *axis, tl_ref body, int reducer,
                 const tl_ref *rvars, int nreduce, tl_ref cond, json_t *attrs, int *out);
/* Record an output of the operator. */
int tl_topi_push_out(tl_topi_call *c, int t);

/* A "pad" stage: out[i] = in-range ? data[i - before] : value, with output
** extents shape (before + n + after normally). All-zero padding with the
** same shape returns data itself. */
int tl_topi_pad_stage(tl_topi_call *c, int data, const int64_t *before, const int64_t *out_shape,
                      double value, const char *name, int *out);
/* A typed constant (float or int dtype). */
tl_ref tl_topi_const(tl_dag *dag, tl_type t, double v);
/* Comparison helpers over INDEX. */
tl_ref tl_topi_cmp(tl_dag *dag, int op, tl_ref a, tl_ref b);
tl_ref tl_topi_and(tl_dag *dag, tl_ref a, tl_ref b);   /* a may be 0 (true) */
/* Numpy broadcast of shapes a and b into out (ndim *nout); error names op. */
int tl_topi_broadcast_shape(tl_topi_call *c, int ta, int tb, int64_t *out, int *nout);
/* Load t broadcast against output axes (right-aligned). */
tl_ref tl_topi_load_bcast(tl_dag *dag, int t, const tl_ref *axis, int ndim);

/* ---- operators ------------------------------------------------------------ */

/* nn.c */
int tl_topi_conv2d(tl_topi_call *c);
int tl_topi_conv2d_packed(tl_topi_call *c);
int tl_topi_depthwise_conv2d(tl_topi_call *c);
int tl_topi_conv2d_transpose(tl_topi_call *c);
int tl_topi_dense(tl_topi_call *c);
int tl_topi_batch_matmul(tl_topi_call *c);
int tl_topi_matmul(tl_topi_call *c);
/* The convolution stage of ndim output axes ax: the sum over rv of lhs * rhs (both
** cast to out_dtype when data is of another type), named and tagged tag, with
** attrs aj (consumed); pushed as the output. */
int tl_topi_conv_sum(tl_topi_call *c, int data, tl_type out_dtype, const char *tag, int ndim,
                     const int64_t *oshape, const tl_ref *ax, tl_ref lhs, tl_ref rhs,
                     const tl_ref *rv, int nrv, json_t *aj);
/* A convolution window's input index: y * s + r * d. */
tl_ref tl_topi_window(tl_dag *dag, tl_ref y, int64_t s, tl_ref r, int64_t d);
/* nchwc.c (the channel-blocked layout NCHW[x]c) */
int tl_topi_conv2d_nchwc(tl_topi_call *c);
int tl_topi_depthwise_conv2d_nchwc(tl_topi_call *c);
/* winograd_nchwc.c (Winograd F(m x m, 3 x 3) on NCHW[x]c, the weight transformed once) */
int tl_topi_conv2d_nchwc_winograd(tl_topi_call *c);
/* A Winograd transform pass, element-wise: by position q (0..nq-1), sum_{i < ni} L[i][q] *
** load(i) with the non-zero terms only (no multiply for +-1), as select(q == 0, S0,
** select(q == 1, S1, ...)). L is [ni][nq] row-major; load(i) reads buf at idx with slot si
** replaced by base + i (base 0: i). */
typedef struct {
  tl_dag *dag;
  int buf, ndim, si;
  tl_ref idx[8];
  tl_ref base;
} tl_topi_wg_load;
tl_ref tl_topi_wg_position_sum(tl_dag *dag, tl_type t, tl_ref q, int nq, const double *L, int ni,
                               tl_topi_wg_load *lc);
/* "FLOP": 0 added to the attrs of the op of tensor t (winograd.c; a Winograd conv's pad stage:
** the direct count on the output op covers the whole convolution). */
int tl_topi_zero_flop(tl_topi_call *c, int t);
/* The checks a Winograd conv starts with (winograd_nchwc.c): two inputs; padding p, read from
** the call, non-negative; data and kernel of ndim dimensions (expect says which, for the error);
** float data and kernel of one dtype *dt, and out_dtype the same. */
int tl_topi_wg_check(tl_topi_call *c, int ndim, const char *expect, int64_t p[4], tl_type *dt);
/* winograd_nhwc.c (Winograd F(m x m, 3 x 3) on NHWC, the weight [a, a, CI, CO] transformed once) */
int tl_topi_conv2d_winograd_nhwc(tl_topi_call *c);
/* pool.c */
int tl_topi_pool2d(tl_topi_call *c);
int tl_topi_global_pool(tl_topi_call *c);
int tl_topi_adaptive_pool(tl_topi_call *c);
/* nnnd.c (1-D and 3-D windows) */
int tl_topi_conv_nd(tl_topi_call *c);
int tl_topi_pool_nd(tl_topi_call *c);
int tl_topi_global_pool_nd(tl_topi_call *c);
int tl_topi_conv_transpose_nd(tl_topi_call *c);
/* elemwise.c */
int tl_topi_unary(tl_topi_call *c);
int tl_topi_binary(tl_topi_call *c);
int tl_topi_bias_add(tl_topi_call *c);
int tl_topi_batch_norm(tl_topi_call *c);
int tl_topi_cast(tl_topi_call *c);
/* transform.c */
int tl_topi_softmax(tl_topi_call *c);
int tl_topi_concatenate(tl_topi_call *c);
int tl_topi_split(tl_topi_call *c);
int tl_topi_reshape(tl_topi_call *c);
int tl_topi_transpose(tl_topi_call *c);
int tl_topi_squeeze(tl_topi_call *c);
int tl_topi_expand_dims(tl_topi_call *c);
int tl_topi_pad(tl_topi_call *c);
int tl_topi_layout_transform(tl_topi_call *c);
/* schedule_gpu.c: the OpenCL default schedule (tl_topi_default_schedule
** routes "opencl" here): injective producers inlined, every root stage's
** spatial axes fused, split by a work-group size and bound to blockIdx.x /
** threadIdx.x, reductions kept inside each work-item. */
int tl_topi_default_schedule_gpu(tl_ctx *ctx, tl_sched *s);
int tl_topi_default_schedule_gpu_for(tl_ctx *ctx, tl_sched *s, int shapes, int64_t compute_units);
/* winograd.c */
int tl_topi_conv2d_winograd(tl_topi_call *c);
int tl_topi_winograd_weight_transform(tl_topi_call *c);
/* The transform matrices of F(m x m, r x r) from Cook-Toom interpolation
** points (alpha = m + r - 1): AT (m x alpha), G (alpha x r), BT (alpha x
** alpha), row-major doubles. 0, or -1 for an unsupported m (2, 4, 6 with r = 3;
** any m + r - 1 <= 8 works). */
int tl_topi_winograd_matrices(int m, int r, double *AT, double *G, double *BT);
/* F(m x m, 3 x 3)'s transforms as the transform passes read them, a = m + 2 (at most 8):
** B[ra * a + e] = BT[e][ra] (input) and A[ra * m + v] = AT[v][ra] (output). Nonzero for a
** tile size tl_topi_winograd_matrices refuses. */
int tl_topi_winograd_passes(int m, double *B, double *A);

#endif
