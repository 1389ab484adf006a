/*
** schedule_gpu.c -- default OpenCL schedules: tl_topi_default_schedule_gpu.
**
** Correct for any DAG of topi operators (and plain te computes), on a
** schedule without steps; what the graph executor and the ONNX runner use
** on OpenCL when no tuned configuration exists:
**
**   1. inline   every compute stage without a reduction that is not an
**               output and has one output tensor (pad, bias_add, relu,
**               softmax's exp, the injective producers of a fused group).
**   2. anchor   a reduction stage (conv2d, dense, pool, ...) whose only
**               loop consumer after inlining is one root stage without a
**               reduction and of its shape (conv2d + bias_add + relu) is
**               computed at that stage's thread loop: one kernel, the
**               accumulator private to the work-item.
**   3. bind     every other root stage with loops: its spatial axes fused
**               into one loop, split by the work-group size (64 threads
**               below 8192 iterations, 128 below 65536, else 256; the whole
**               extent when it is smaller than 64) and bound to blockIdx.x /
**               threadIdx.x (a non-divisible extent gets a guard); the
**               reduction axes stay inside the work-item, in order.
**
** A stage with no spatial axis (a full reduction to a scalar) is a kernel
** of one work-item.
*/
#include "topi.h"

#include "../te/schedule.h"

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

static int is_output(const tl_dag *dag, int op) {
  for (int i = 0; i < tl_dag_num_outputs(dag); i++)
    if (tl_dag_tensor_op(dag, tl_dag_output(dag, i)) == op) return 1;
  return 0;
}

/* Loop stages (not inlined) reading stage st, looking through inlined ones;
** returns the count (stops counting past max). */
static int loop_consumers(const tl_sched *s, int st, int *out, int max, int n) {
  const tl_dag *dag = tl_sched_dag((tl_sched *)s);
  int nops = tl_dag_num_ops(dag);
  for (int j = st + 1; j < nops && n <= max; j++) {
    int reads = 0;
    for (int i = 0; i < tl_dag_op_ninputs(dag, j) && !reads; i++)
      reads = tl_dag_tensor_op(dag, tl_dag_op_input(dag, j, i)) == st;
    if (!reads) continue;
    if (tl_sched_stage_compute_at(s, j, NULL, NULL) == TL_CA_INLINED) {
      n = loop_consumers(s, j, out, max, n);
    } else {
      int dup = 0;
      for (int k = 0; k < n && k < max; k++) dup |= out[k] == j;
      if (dup) continue;
      if (n < max) out[n] = j;
      n++;
    }
  }
  return n;
}

static int same_shape(const tl_dag *dag, int a, int b) {
  int ta = tl_dag_op_output(dag, a, 0), tb = tl_dag_op_output(dag, b, 0);
  int n = tl_dag_tensor_ndim(dag, ta);
  if (n != tl_dag_tensor_ndim(dag, tb)) return 0;
  return memcmp(tl_dag_tensor_shape(dag, ta), tl_dag_tensor_shape(dag, tb),
                (size_t)n * sizeof(int64_t)) == 0;
}

/* Fuse the ndim spatial axes of a fresh stage, split by the work-group size
** and bind; writes the thread loop's position (or -1). */
static int bind_stage(tl_ctx *ctx, tl_sched *s, int st, int *thread_pos) {
  const tl_dag *dag = tl_sched_dag(s);
  int nd = tl_dag_op_ndim(dag, st);
  *thread_pos = -1;
  if (nd < 1) return TL_OK;
  if (tl_sched_num_iters(s, st) != nd + tl_dag_op_nreduce(dag, st)) return TL_OK;   /* not fresh */
  if (nd > 1) {
    int f[64];
    if (nd > 64) return TL_OK;
    for (int i = 0; i < nd; i++) f[i] = i;
    TRY(tl_sched_fuse(ctx, s, st, nd, f));
  }
  int64_t e = tl_sched_iter_extent(s, st, 0);
  if (e <= 1) return TL_OK;
  int64_t wg = e < 8192 ? 64 : e < 65536 ? 128 : 256;
  if (e <= wg) {
    TRY(tl_sched_annotate(ctx, s, st, 0, TL_ANN_THREAD_X));
    *thread_pos = 0;
    return TL_OK;
  }
  TRY(tl_sched_split(ctx, s, st, 0, 1, &wg, 1));
  TRY(tl_sched_annotate(ctx, s, st, 0, TL_ANN_BLOCK_X));
  TRY(tl_sched_annotate(ctx, s, st, 1, TL_ANN_THREAD_X));
  *thread_pos = 1;
  return TL_OK;
}

TL_EXPORT int tl_topi_default_schedule_gpu(tl_ctx *ctx, tl_sched *s) {
  if (!s) return tl_err(ctx, TL_E_ARG, "default_schedule_gpu: no schedule");
  if (tl_sched_num_steps(s) != 0)
    return tl_err(ctx, TL_E_ARG, "default_schedule_gpu: the schedule already has %d steps",
                  tl_sched_num_steps(s));
  const tl_dag *dag = tl_sched_dag(s);
  int ns = tl_sched_num_stages(s);
  /* 1. inline */
  for (int st = 0; st < ns; st++) {
    if (tl_sched_stage_op_kind(s, st) != TL_DAG_COMPUTE) continue;
    if (tl_dag_op_nreduce(dag, st) > 0 || tl_dag_op_nout(dag, st) != 1 || is_output(dag, st))
      continue;
    TRY(tl_sched_compute_inline(ctx, s, st));
  }
  /* 2. anchors: reductions computed at their same-shape consumer's thread */
  int *anchor_of = tl_calloc((size_t)ns, sizeof(int));
  for (int st = 0; st < ns; st++) anchor_of[st] = -1;
  for (int st = 0; st < ns; st++) {
    if (tl_sched_stage_op_kind(s, st) != TL_DAG_COMPUTE || tl_dag_op_nreduce(dag, st) == 0 ||
        tl_dag_op_nout(dag, st) != 1 || is_output(dag, st) ||
        tl_sched_stage_compute_at(s, st, NULL, NULL) != TL_CA_ROOT)
      continue;
    int cons[2];
    int nc = loop_consumers(s, st, cons, 2, 0);
    if (nc != 1) continue;
    int o = cons[0];
    if (tl_dag_op_nreduce(dag, o) > 0 || anchor_of[o] >= 0 || !same_shape(dag, st, o)) continue;
    anchor_of[o] = st;
  }
  /* 3. bind (consumers first is not needed: stage ids do not shift) */
  int rc = TL_OK;
  for (int st = 0; st < ns && rc == TL_OK; st++) {
    if (tl_sched_stage_op_kind(s, st) != TL_DAG_COMPUTE) continue;
    if (tl_sched_stage_compute_at(s, st, NULL, NULL) != TL_CA_ROOT) continue;
    int is_anchor = 0;
    for (int o = 0; o < ns; o++) is_anchor |= anchor_of[o] == st;
    if (is_anchor) continue;
    int tp;
    rc = bind_stage(ctx, s, st, &tp);
    if (rc == TL_OK && anchor_of[st] >= 0) {
      int a = anchor_of[st];
      if (tp >= 0) {
        rc = tl_sched_compute_at(ctx, s, a, st, tp);
      } else {
        rc = bind_stage(ctx, s, a, &tp);
      }
    }
  }
  free(anchor_of);
  return rc;
}
