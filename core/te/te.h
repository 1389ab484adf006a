/*
** te.h -- tensor expressions: placeholders, computes and reductions, and the
** compute DAG they form.
**
** An operator is declared once as a compute over tensors (the algorithm);
** a schedule (core/te/schedule.h) is a list of steps applied to it; lowering
** (core/te/lower.c) turns the pair into a loop nest of the IR.
**
** A tl_dag owns one tl_ir: every tensor has a tl_buffer in it (multi-dim, the
** tensor's shape), and compute bodies are IR expressions over the op's axis
** and reduce-axis variables in which an input tensor element is a LOAD of the
** input's buffer with one INDEX-typed index per dimension.
**
**   dag.tensors[t] = {op, out_index, buf}     buf: buffer id in dag.ir
**   dag.ops[o]     = {kind, name, shape, axis vars, reduce vars, bodies, inputs}
**   ops are kept in topological order: inputs of op o are produced by ops < o
**
** Invariants (checked by tl_te_compute, relied upon by schedules/lowering):
**   - in a dag made by tl_dag_extract (what schedules, lowering and codegen
**     see) op names are unique: a clashing name gets a "_1", "_2"... suffix
**     (a building dag keeps names as given, like TVM); buffer names are the
**     op name, or "<op>_v<k>" for the outputs of a multi-output op;
**   - every VAR in a body is one of the op's axis vars or, inside a
**     reduction, one of its reduce vars; axis and reduce vars belong to one
**     op only (a reduce axis reused by a second compute is replaced there by
**     a fresh var of the same name and extent);
**   - every LOAD in a body reads a tensor buffer of this dag with ndim
**     INDEX-typed indices; the load's type is the tensor's dtype;
**   - a reduction has exactly one output and >= 1 reduce axis; a body of a
**     non-reduction never mentions a reduce var;
**   - all outputs of an op share one dtype and the op's shape;
**   - shape extents are >= 1; ndim may be 0 (a scalar tensor).
**
** The public functions (tl_dag_* in core/tunelua.h) build the same structures
** from uint32_t expression refs and int dtypes; everything below is internal.
*/
#ifndef TL_TE_H
#define TL_TE_H

#include "../ir/ir.h"

enum { TL_OP_PLACEHOLDER = 0, TL_OP_COMPUTE };

/* Reducers. CUSTOM uses the op's combiner expression over (lhs, rhs) and its
** identity; the combiner must be commutative and associative. The public
** TL_REDUCE_* enum has the same values; a custom reducer handle returned by
** tl_te_comm_reducer is TL_RED_CUSTOM + k (k: index in dag.reducers). */
enum { TL_RED_NONE = 0, TL_RED_SUM, TL_RED_MAX, TL_RED_MIN, TL_RED_PROD, TL_RED_CUSTOM };

/* Iterator kinds (the auto-scheduler's numbering). */
enum { TL_ITER_SPATIAL = 0, TL_ITER_REDUCE = 1, TL_ITER_MIXED = 2, TL_ITER_SPECIAL = 3 };

typedef struct tl_axis {
  tl_ref var;                     /* INDEX-typed VAR in dag.ir */
  int64_t extent;                 /* domain [0, extent) */
  int kind;                       /* TL_ITER_SPATIAL or TL_ITER_REDUCE */
} tl_axis;

typedef struct tl_te_op {
  int kind;                       /* TL_OP_* */
  const char *name;               /* arena; unique within an extracted dag */
  const char *tag;                /* e.g. "conv2d_nchw", "elemwise", "" */
  int ndim;
  int64_t *shape;                 /* output shape, shared by every output */
  tl_type dtype;                  /* element type of every output */
  tl_axis *axis;                  /* ndim spatial axes (compute only) */
  int nreduce;
  tl_axis *reduce_axis;           /* reduction axes, outer to inner */
  int nout;                       /* outputs (>= 1) */
  tl_ref *body;                   /* nout bodies; for reductions, the source */
  int *out_tensors;               /* nout tensor ids */
  int reducer;                    /* TL_RED_* (TL_RED_NONE: no reduction) */
  tl_ref red_cond;                /* where-condition of the reduction, or 0 */
  tl_ref comb_lhs, comb_rhs;      /* CUSTOM: vars of the combiner */
  tl_ref combiner, identity;      /* CUSTOM: combiner(lhs, rhs), identity */
  int ninputs;
  int *inputs;                    /* tensor ids read by the bodies, no dups */
  int attrs_json_len;
  const char *attrs_json;         /* operator attributes (JSON object) or NULL */
  const char *red_name;           /* reducer name ("sum", custom name) or NULL */
} tl_te_op;

typedef struct tl_tensor {
  int op;                         /* producing op */
  int out_index;                  /* which output of op */
  int buf;                        /* buffer id in dag.ir (shape = op.shape) */
} tl_tensor;

/* A reduce axis known to the dag: made by tl_te_reduce_axis before the
** compute that uses it; owner is that compute once it exists. */
typedef struct tl_te_raxis {
  tl_ref var;
  int64_t extent;
  int owner;                      /* op index, or -1 while unused */
} tl_te_raxis;

/* A custom commutative reducer: combiner over (lhs, rhs) vars of dtype. */
typedef struct tl_te_reducer {
  const char *name;               /* arena */
  tl_type dtype;
  tl_ref lhs, rhs, combiner, identity;
} tl_te_reducer;

typedef struct tl_dag {
  tl_ir *ir;                      /* expressions, buffers, variables */
  TL_VEC(tl_te_op) ops;           /* topological order */
  TL_VEC(tl_tensor) tensors;
  tl_arena arena;                 /* op arrays and names */
  TL_VEC(tl_te_raxis) raxes;      /* reduce axes ever made in this dag */
  TL_VEC(tl_te_reducer) reducers; /* custom reducers */
  TL_VEC(int) outputs;            /* explicit output tensors (set by extract);
                                     empty: the tensors no op reads */
  tl_buf scratch;                 /* text returned by the public string queries */
  int unique_names;               /* 1: new ops get unique names (extracted dags) */
} tl_dag;

/* tl_dag_new / tl_dag_free / tl_dag_extract / tl_dag_flop are public
** (core/tunelua.h). */

static inline tl_te_op *tl_dag_op(const tl_dag *dag, int op) { return &dag->ops.v[op]; }
static inline tl_tensor *tl_dag_tensor(const tl_dag *dag, int t) { return &dag->tensors.v[t]; }
static inline tl_buffer *tl_dag_tensor_buf(const tl_dag *dag, int t) {
  return tl_ir_buffer(dag->ir, dag->tensors.v[t].buf);
}
/* Tensor id whose buffer is buf, or -1. */
int tl_dag_buf_tensor(const tl_dag *dag, int buf);
/* The dag's output tensors (explicit, else those no op reads), in tensor
** order; writes up to dag->tensors.n ids to out (may be NULL); returns count. */
int tl_dag_output_list(const tl_dag *dag, int *out);
/* Ops that read a tensor of op; writes ids (ascending) to out; returns count. */
int tl_dag_consumers(const tl_dag *dag, int op, int *out);

/* ---- building ------------------------------------------------------------- */

int tl_te_placeholder(tl_ctx *ctx, tl_dag *dag, const char *name, int ndim,
                      const int64_t *shape, tl_type dtype, int *tensor);
/* A fresh INDEX var for a compute's spatial axis. */
tl_ref tl_te_axis_var(tl_dag *dag, const char *name);
/* n fresh axis vars; names may be NULL (then "i0", "i1", ...). */
void tl_te_axis_vars(tl_dag *dag, int n, const char *const *names, tl_ref *out);
/* A reduce axis [0, extent): a fresh INDEX var registered in dag.raxes.
** extent is checked by the compute that uses it (must be >= 1). */
tl_ref tl_te_reduce_axis(tl_dag *dag, const char *name, int64_t extent);
/* Extent of a registered reduce var, or -1. */
int64_t tl_te_reduce_extent(const tl_dag *dag, tl_ref var);
/* Element of a tensor: LOAD of its buffer (asserts the index count). */
tl_ref tl_te_load(tl_dag *dag, int tensor, const tl_ref *idx, int nidx);

/* Register a commutative, associative reducer: combiner is an expression
** over the two vars lhs and rhs (same scalar type), identity a constant of
** that type. Writes the handle (TL_RED_CUSTOM + k) to *reducer. */
int tl_te_comm_reducer(tl_ctx *ctx, tl_dag *dag, const char *name, tl_ref lhs, tl_ref rhs,
                       tl_ref combiner, tl_ref identity, int *reducer);

/* Add a compute op.
**   axis:      ndim INDEX vars (tl_te_axis_var), one per output dimension;
**   bodies:    nout expressions; nout > 1 only without a reducer;
**   reducer:   TL_RED_NONE, a built-in TL_RED_*, or a custom handle;
**   reduce_vars/nreduce: the reduction's axes (tl_te_reduce_axis), >= 1
**              when reducer != NONE, 0 otherwise;
**   cond:      where-condition of the reduction (bool) or 0.
** Validates everything listed at the top of this file; errors name the op
** ("compute 'C': ..."). Writes the nout new tensor ids to out_tensors. */
int tl_te_compute(tl_ctx *ctx, tl_dag *dag, const char *name, const char *tag, int ndim,
                  const int64_t *shape, const tl_ref *axis, int nout, const tl_ref *bodies,
                  int reducer, const tl_ref *reduce_vars, int nreduce, tl_ref cond,
                  int *out_tensors);
/* Attach operator attributes (a JSON object text; NULL clears) to op; op -1
** only checks the text. */
int tl_te_set_attrs(tl_ctx *ctx, tl_dag *dag, int op, const char *json);

/* ---- reducers ---------------------------------------------------------------- */

/* Identity value of a built-in reducer for a dtype, in dag.ir: 0 for SUM, 1
** for PROD, the lowest finite value for MAX (-3.40282347e+38f for float32, as
** TVM's min_value) and the highest for MIN. */
tl_ref tl_te_reducer_identity(tl_dag *dag, int reducer, tl_type t);
/* Identity of op's reduction (built-in or custom). */
tl_ref tl_te_op_identity(tl_dag *dag, const tl_te_op *op);
/* combine(acc, x) for op's reducer (built-in or custom), in dag.ir. */
tl_ref tl_te_reducer_combine(tl_dag *dag, const tl_te_op *op, tl_ref acc, tl_ref x);
/* Same, building in another tl_ir (e.g. a lowering job's). For CUSTOM the
** combiner is copied from dag.ir into ir. */
tl_ref tl_te_reducer_combine_in(tl_ir *ir, const tl_dag *dag, const tl_te_op *op, tl_ref acc,
                                tl_ref x);
tl_ref tl_te_op_identity_in(tl_ir *ir, const tl_dag *dag, const tl_te_op *op);

/* ---- copying, printing, keys ------------------------------------------------- */

/* Copy expression r of src into dst. var_map has src->vars.n entries (by var
** id): a nonzero entry is the dst VAR ref to use, a zero entry gets a fresh
** dst var of the same name and type (written back). buf_map has src->bufs.n
** entries: -1 entries get a copy of the src buffer (written back). Either map
** may be NULL (then everything is fresh, nothing remembered across calls).
** Works for statements too. */
tl_ref tl_ir_copy(tl_ir *dst, const tl_ir *src, tl_ref r, tl_ref *var_map, int *buf_map);

/* Expression text in the dag printer's style (TVM-like, fully parenthesized:
** "(A[i, k]*B[k, j])", "max(x, 0f)", "tir.exp(x)"), appended to out. */
void tl_te_print_expr(const tl_dag *dag, tl_ref e, tl_buf *out);

/* One line per op, in dag order (malloc'd):
**   A = PLACEHOLDER [128, 64]
**   C(i, j) += (A[i, k]*B[k, j])
**   T_relu(ax0, ax1) = max(C[ax0, ax1], 0f)
** max=, min=, *= for the other built-in reducers, "<name>=" for a custom
** one; " where <cond>" after a conditioned reduction; a multi-output op
** prints one line per output "C.v0(i) = ...". */
char *tl_dag_print(const tl_dag *dag);
/* The canonical form that the workload key hashes (malloc'd): op kinds,
** shapes, dtypes, reducers and bodies with tensors named T<id> and vars
** named by position (i<k> axes, r<k> reduce axes, x/y combiner vars); op
** and var names and tags do not enter it. */
char *tl_dag_canonical(const tl_dag *dag);
/* JSON text ["<32 hex>", [in0 shape], ..., [out shape]] (malloc'd): the
** hash is 128 bits of tl_hash_bytes (two seeds) over tl_dag_canonical; the
** shapes are the placeholders' in dag order, then the outputs'. */
char *tl_dag_workload_key(const tl_dag *dag);

#endif
