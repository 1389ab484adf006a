/*
** tunelua.h -- the one public header of libtunelua.
**
** Everything a client (the tunelua host, the Lua layer, a C program) may call
** lives here. The region between the cdef markers below holds only opaque
** struct typedefs, enums and prototypes: the build copies it verbatim into the
** LuaJIT FFI bindings (see cmake/gen_cdef.cmake), and tests/lua/test_cdef.lua
** checks that every prototype resolves in the library. Keep it free of
** #define, #include, attributes and inline code.
**
** Conventions (docs/architecture.md):
**   - Functions return an int status, 0 = TL_OK, and write results through
**     out-parameters. On failure the message is kept in the context and read
**     with tl_errmsg(ctx); it names the input and what was expected.
**   - Every *_new has a *_free. C never calls back into Lua.
**   - Sections are grouped by area, in dependency order (base first).
*/
#ifndef TUNELUA_H
#define TUNELUA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* ---- base: context, errors, version ----------------------------------- */

typedef struct tl_ctx tl_ctx;

enum {
  TL_OK = 0,
  TL_E_ARG,        /* bad argument: wrong value, type or option */
  TL_E_NOMEM,      /* out of memory */
  TL_E_DTYPE,      /* unknown or unsupported dtype */
  TL_E_SHAPE,      /* shapes that do not line up, negative dimension */
  TL_E_IO,         /* file or socket error */
  TL_E_PARSE,      /* malformed text: JSON, log line, target string, step */
  TL_E_TIMEOUT,    /* a child or a peer ran past its time limit */
  TL_E_CHILD,      /* a child process crashed or exited non-zero */
  TL_E_SCHED,      /* an illegal schedule step */
  TL_E_BUILD,      /* a compiler or driver refused generated code */
  TL_E_RUNTIME,    /* a kernel or device failed at run time */
  TL_E_UNSUPPORTED,/* a feature or attribute not implemented */
  TL_E_INTERNAL    /* a broken invariant: a bug in tunelua */
};

tl_ctx *tl_ctx_new(void);
void tl_ctx_free(tl_ctx *ctx);
const char *tl_errmsg(const tl_ctx *ctx);      /* "" when no error */
int tl_errcode(const tl_ctx *ctx);
void tl_clearerr(tl_ctx *ctx);
const char *tl_version(void);
int tl_num_cores(void);
double tl_now(void);                            /* monotonic seconds */

/* ---- base: thread pool ------------------------------------------------ */

typedef struct tl_pool tl_pool;

tl_pool *tl_pool_new(int nthreads);             /* <= 0: one per core */
void tl_pool_free(tl_pool *pool);
int tl_pool_size(const tl_pool *pool);
/* Run fn(i, arg) for i in [0, n) on the pool; returns when all are done. */
void tl_pool_for(tl_pool *pool, int64_t n, void (*fn)(int64_t i, void *arg), void *arg);
/* The process-wide pool used by generated parallel loops. */
tl_pool *tl_pool_global(void);
void tl_set_num_threads(int n);                 /* resizes the global pool */
/* Scratch memory of the calling thread for generated kernels' intermediate buffers
** (core/base/workspace.c): 64-byte aligned, NULL when out of memory. tl_workspace_pop frees
** the calling thread's latest live block (blocks are freed in reverse order of allocation,
** by the thread that allocated them). tl_workspace_held: the bytes the calling thread's
** arena keeps. */
void *tl_workspace_alloc(size_t bytes);
void tl_workspace_pop(void);
size_t tl_workspace_held(void);
/* For a process that runs nothing but kernels (a measurement child): (re)start
** the global pool with its workers bound to CPUs 2..n of the affinity set, and
** bind the calling thread to the first. Nothing when binding is off
** (TUNELUA_BIND_THREADS=0) or the pool is larger than the set. Elsewhere the
** pool binds nothing unless TUNELUA_BIND_THREADS=1. */
void tl_pool_bind_caller(void);
/* Restrict the calling thread (and so the threads and processes it makes later) to
** the CPUs of a list such as "2,3" or "0-3,8". Returns 0, or -1 with err naming the
** list and what was expected (or why the system refused it). Measurement children
** apply TUNELUA_MEASURE_CPUS this way before timing. */
int tl_pin_cpus(const char *list, char *err, size_t errlen);
/* Check n CPU groups (each a CPU list as tl_pin_cpus takes it, no CPU in two of
** them), as measurement on several groups at once uses them. Returns 0, or -1 with
** err naming the group (1-based) and what was expected. */
int tl_cpu_groups_check(const char *const *groups, int n, char *err, size_t errlen);

/* ---- base: child processes -------------------------------------------- */

typedef struct tl_proc_result tl_proc_result;

enum {
  TL_PROC_OK = 0,      /* exited with status 0 */
  TL_PROC_EXIT,        /* exited with a non-zero status */
  TL_PROC_SIGNAL,      /* killed by a signal (crash) */
  TL_PROC_TIMEOUT,     /* ran past its wall-clock limit; group killed */
  TL_PROC_SPAWN        /* could not be started */
};

/* Run argv[0] with argv in its own process group; capture stdout and stderr
** (each truncated to max_output bytes, 0 = 1 MiB); kill the whole group after
** timeout_s (<= 0: none). */
int tl_proc_exec(tl_ctx *ctx, const char *const *argv, double timeout_s,
                 size_t max_output, tl_proc_result **out);
int tl_proc_status(const tl_proc_result *r);    /* TL_PROC_* */
int tl_proc_code(const tl_proc_result *r);      /* exit status or signal */
double tl_proc_seconds(const tl_proc_result *r);
const char *tl_proc_stdout(const tl_proc_result *r, size_t *len);
const char *tl_proc_stderr(const tl_proc_result *r, size_t *len);
void tl_proc_result_free(tl_proc_result *r);

/* ---- base: files and directories --------------------------------------- */

/* Every failure is TL_E_IO with a message naming the file, the error and its
** errno name ("cannot write 'x.log': No space left on device (ENOSPC)"). */
typedef struct tl_file tl_file;

/* Open path for appending (created 0644). A file whose last byte is not a
** newline (a torn last line) gets one first, so the next record starts a line. */
int tl_file_append(tl_ctx *ctx, const char *path, tl_file **out);
/* A new version of path, written to a temporary file beside it; tl_file_close
** makes it path (fsync, rename, fsync of the directory); until then the old
** file is untouched. */
int tl_file_replace(tl_ctx *ctx, const char *path, tl_file **out);
int tl_file_write(tl_ctx *ctx, tl_file *f, const char *data, size_t len);
int tl_file_sync(tl_ctx *ctx, tl_file *f);      /* fsync (and the new file's directory) */
/* Sync, close and (a replacement) commit. Frees f whatever the result. */
int tl_file_close(tl_ctx *ctx, tl_file *f);
/* Close without committing: a replacement's temporary file is removed. */
void tl_file_free(tl_file *f);
/* mkdir -p, no shell; the path must end up a directory. */
int tl_mkdirs(tl_ctx *ctx, const char *path);
/* rm -rf, no shell, never following a symbolic link; a missing path is fine. */
int tl_path_remove(tl_ctx *ctx, const char *path);
/* Make a private directory <base>/<prefix>-<pid>-XXXXXX (mode 0700; base is
** created if missing) and write its name to out (cap bytes). The first call of
** a process removes the directories <base>/<prefix>-<pid>-* that dead
** processes of the same user left (never a link, never another user's). */
int tl_tmpdir_make(tl_ctx *ctx, const char *base, const char *prefix, char *out, size_t cap);

/* ---- runtime: devices and arrays (DLPack DLTensor) -------------------- */

typedef struct tl_array tl_array;

enum {                 /* device types: the DLPack DLDeviceType values */
  TL_DEV_CPU = 1,
  TL_DEV_OPENCL = 4,
  TL_DEV_EXT_DEV = 12  /* VTA */
};

enum {                 /* dtypes tunelua knows */
  TL_FLOAT32 = 0,
  TL_FLOAT16,
  TL_INT8,
  TL_UINT8,
  TL_INT32,
  TL_INT64,
  TL_FLOAT64,
  TL_INT16,
  TL_BOOL,
  TL_NDTYPES
};

int tl_dtype_parse(tl_ctx *ctx, const char *name, int *dtype);
const char *tl_dtype_name(int dtype);
int tl_dtype_bytes(int dtype);

int tl_array_empty(tl_ctx *ctx, int ndim, const int64_t *shape, int dtype,
                   int dev_type, int dev_id, tl_array **out);
void tl_array_free(tl_array *a);
int tl_array_ndim(const tl_array *a);
const int64_t *tl_array_shape(const tl_array *a);
int tl_array_dtype(const tl_array *a);
int tl_array_device(const tl_array *a, int *dev_id);
int64_t tl_array_numel(const tl_array *a);
size_t tl_array_nbytes(const tl_array *a);
void *tl_array_data(const tl_array *a);         /* host pointer, or NULL */
void *tl_array_dltensor(tl_array *a);           /* the DLTensor inside */
int tl_array_copyto(tl_ctx *ctx, const tl_array *src, tl_array *dst);
/* Fill with seeded random values: dist 0 = uniform [lo, hi), 1 = normal(lo=mean, hi=std).
** One seed gives the same values everywhere. Integer dtypes get integers:
** uniform in [ceil(lo), ceil(hi)), which must fit the dtype, or rounded
** normals (saturated). Host arrays only. */
int tl_array_random(tl_ctx *ctx, tl_array *a, int dist, double lo, double hi, uint64_t seed);
/* Element i (flat, row-major) as double, and store. Host arrays only; an
** index out of range reads NaN and stores nothing. Stores round to nearest
** even for float16 and truncate toward zero, saturating, for integers. */
double tl_array_get(const tl_array *a, int64_t i);
void tl_array_set(tl_array *a, int64_t i, double v);
/* Compare: writes the worst flat index and its error measure; 0 if all close.
** Element i is close when |a-b| <= atol + rtol*|b|; two NaNs are close, as are
** two infinities of one sign. The worst element is the one whose |a-b| most
** exceeds its tolerance (NaN or inf mismatches first); worst_err is its |a-b|.
** Returns 0 if all close, -1 if not (no error recorded), or a TL_E_* code
** (shape mismatch, device array). The dtypes may differ. */
int tl_array_allclose(tl_ctx *ctx, const tl_array *a, const tl_array *b,
                      double rtol, double atol, int64_t *worst, double *worst_err);
/* The same test, returning a status (0 = compared) and counting in *nbad the
** elements that are not close. Any out-parameter may be NULL. */
int tl_array_compare(tl_ctx *ctx, const tl_array *a, const tl_array *b,
                     double rtol, double atol, int64_t *nbad, int64_t *worst,
                     double *worst_err);
/* A new array with another shape (same number of elements) sharing a's
** storage; either may be freed first. */
int tl_array_reshape(tl_ctx *ctx, const tl_array *a, int ndim, const int64_t *shape,
                     tl_array **out);

/* ---- te: tensor expressions (compute DAGs) ----------------------------
** A tl_dag holds placeholders and compute ops in topological order, and the
** expressions of their bodies. Expressions are uint32_t refs into the dag
** (0 = none); tensors and ops are int ids (dag order, from 0). Builders
** check types and return a status with a message in ctx; queries with a bad
** id return -1 / 0 / NULL. Strings returned by tl_dag_*_text live in the
** dag until its next *_text call. */

typedef struct tl_dag tl_dag;

enum {                 /* expression ops: the IR's TL_IR_* codes */
  TL_EXPR_INT = 0, TL_EXPR_FLOAT, TL_EXPR_VAR,
  TL_EXPR_ADD, TL_EXPR_SUB, TL_EXPR_MUL, TL_EXPR_DIV,
  TL_EXPR_FLOORDIV, TL_EXPR_FLOORMOD, TL_EXPR_TRUNCDIV, TL_EXPR_TRUNCMOD,
  TL_EXPR_MIN, TL_EXPR_MAX, TL_EXPR_SHL, TL_EXPR_SHR,
  TL_EXPR_BITAND, TL_EXPR_BITOR, TL_EXPR_BITXOR,
  TL_EXPR_EQ, TL_EXPR_NE, TL_EXPR_LT, TL_EXPR_LE, TL_EXPR_GT, TL_EXPR_GE,
  TL_EXPR_AND, TL_EXPR_OR, TL_EXPR_NOT,
  TL_EXPR_SELECT, TL_EXPR_IF_THEN_ELSE, TL_EXPR_CAST, TL_EXPR_LOAD, TL_EXPR_CALL
};

enum {                 /* reducers; a custom reducer handle is >= TL_REDUCE_CUSTOM */
  TL_REDUCE_NONE = 0, TL_REDUCE_SUM, TL_REDUCE_MAX, TL_REDUCE_MIN, TL_REDUCE_PROD,
  TL_REDUCE_CUSTOM
};

enum { TL_DAG_PLACEHOLDER = 0, TL_DAG_COMPUTE };   /* op kinds */

tl_dag *tl_dag_new(void);
void tl_dag_free(tl_dag *dag);

/* Building. dtype: TL_FLOAT32...; shape extents >= 1. */
int tl_dag_placeholder(tl_ctx *ctx, tl_dag *dag, const char *name, int ndim,
                       const int64_t *shape, int dtype, int *tensor);
/* A fresh variable (axis vars: TL_INT32). */
int tl_dag_var(tl_ctx *ctx, tl_dag *dag, const char *name, int dtype, uint32_t *out);
/* A reduce axis over [0, extent): its int32 var. */
int tl_dag_reduce_axis(tl_ctx *ctx, tl_dag *dag, const char *name, int64_t extent,
                       uint32_t *out);
int tl_dag_const_int(tl_ctx *ctx, tl_dag *dag, int dtype, int64_t v, uint32_t *out);
int tl_dag_const_float(tl_ctx *ctx, tl_dag *dag, int dtype, double v, uint32_t *out);
/* op: TL_EXPR_ADD..TL_EXPR_OR. Operands of one dtype (an immediate adapts
** to the other side); DIV on floats only, FLOORDIV..TRUNCMOD and bit ops on
** integers only, AND/OR on bools; comparisons give bool. */
int tl_dag_binary(tl_ctx *ctx, tl_dag *dag, int op, uint32_t a, uint32_t b, uint32_t *out);
int tl_dag_not(tl_ctx *ctx, tl_dag *dag, uint32_t a, uint32_t *out);
/* op: TL_EXPR_SELECT (both sides evaluated) or TL_EXPR_IF_THEN_ELSE. */
int tl_dag_select(tl_ctx *ctx, tl_dag *dag, int op, uint32_t cond, uint32_t a, uint32_t b,
                  uint32_t *out);
int tl_dag_cast(tl_ctx *ctx, tl_dag *dag, int dtype, uint32_t a, uint32_t *out);
/* Intrinsic by name: exp log sqrt rsqrt tanh sigmoid pow fabs floor ceil
** round erf; float arguments of one dtype, result of that dtype. */
int tl_dag_call(tl_ctx *ctx, tl_dag *dag, const char *name, int nargs, const uint32_t *args,
                uint32_t *out);
/* Element of a tensor: one integer index per dimension. */
int tl_dag_load(tl_ctx *ctx, tl_dag *dag, int tensor, int nidx, const uint32_t *idx,
                uint32_t *out);
/* A custom reducer: combiner over the vars lhs and rhs (one dtype),
** identity a constant of that dtype. */
int tl_dag_comm_reducer(tl_ctx *ctx, tl_dag *dag, const char *name, uint32_t lhs,
                        uint32_t rhs, uint32_t combiner, uint32_t identity, int *reducer);
/* A compute op: axis holds ndim fresh int32 vars (tl_dag_var), bodies nout
** expressions over them. With reducer != TL_REDUCE_NONE: nout = 1, bodies[0]
** is the source, reduce_vars the reduction's axes, cond a bool where-
** condition or 0. Writes nout tensor ids. */
int tl_dag_compute(tl_ctx *ctx, tl_dag *dag, const char *name, const char *tag, int ndim,
                   const int64_t *shape, const uint32_t *axis, int nout,
                   const uint32_t *bodies, int reducer, int nreduce,
                   const uint32_t *reduce_vars, uint32_t cond, int *out_tensors);
/* Operator attributes (a JSON object text; NULL clears); op -1 only checks
** the text. */
int tl_dag_set_attrs(tl_ctx *ctx, tl_dag *dag, int op, const char *json);

/* The ops reachable from the output tensors, copied into a fresh dag in
** post-order from the outputs (inputs in first-use order: a placeholder
** comes right before its first reader, as TVM prints). tensor_map (src
** tensor count entries, may be NULL) gets the new id of each src tensor, or
** -1. The new dag's outputs are these, and its op names are unique (a clash
** gets a "_1", "_2"... suffix). */
int tl_dag_extract(tl_ctx *ctx, const tl_dag *src, const int *outputs, int nout,
                   tl_dag **out, int *tensor_map);

/* Queries. */
int tl_dag_num_ops(const tl_dag *dag);
int tl_dag_num_tensors(const tl_dag *dag);
int tl_dag_num_outputs(const tl_dag *dag);
int tl_dag_output(const tl_dag *dag, int i);
int tl_dag_tensor_op(const tl_dag *dag, int tensor);
int tl_dag_tensor_index(const tl_dag *dag, int tensor);       /* output index in its op */
int tl_dag_tensor_ndim(const tl_dag *dag, int tensor);
const int64_t *tl_dag_tensor_shape(const tl_dag *dag, int tensor);
int tl_dag_tensor_dtype(const tl_dag *dag, int tensor);
const char *tl_dag_tensor_name(const tl_dag *dag, int tensor); /* its op's name */
int tl_dag_op_kind(const tl_dag *dag, int op);                /* TL_DAG_* */
const char *tl_dag_op_name(const tl_dag *dag, int op);
const char *tl_dag_op_tag(const tl_dag *dag, int op);
int tl_dag_op_ndim(const tl_dag *dag, int op);
uint32_t tl_dag_op_axis(const tl_dag *dag, int op, int i);    /* var */
int64_t tl_dag_op_axis_extent(const tl_dag *dag, int op, int i);
int tl_dag_op_nreduce(const tl_dag *dag, int op);
uint32_t tl_dag_op_reduce_axis(const tl_dag *dag, int op, int i);
int64_t tl_dag_op_reduce_extent(const tl_dag *dag, int op, int i);
int tl_dag_op_reducer(const tl_dag *dag, int op);
int tl_dag_op_nout(const tl_dag *dag, int op);
int tl_dag_op_output(const tl_dag *dag, int op, int i);
int tl_dag_op_ninputs(const tl_dag *dag, int op);
int tl_dag_op_input(const tl_dag *dag, int op, int i);        /* tensor id */
int tl_dag_expr_dtype(const tl_dag *dag, uint32_t e);         /* TL_* dtype or -1 */
int tl_dag_expr_is_const(const tl_dag *dag, uint32_t e, double *value);
const char *tl_dag_var_name(const tl_dag *dag, uint32_t var);
/* Text: an expression, the dag (one op per line), the workload key. */
const char *tl_dag_expr_text(tl_dag *dag, uint32_t e);
const char *tl_dag_text(tl_dag *dag);
const char *tl_dag_key_text(tl_dag *dag);
/* FLOPs: AutoTVM's compute_flop rules (tl_dag_flop) or the auto-scheduler's
** FlopEstimator (tl_dag_flop_ansor); -1 when a body holds an uncounted node. */
double tl_dag_flop(const tl_dag *dag);
double tl_dag_flop_ansor(const tl_dag *dag);

/* ---- te: schedules and lowering -----------------------------------------
** A schedule is the auto-scheduler's State: a copy of a compute DAG, one
** stage per op (placeholders included, in DAG order) and the list of
** transform steps that made it (§2.4 of the formats spec). tl_sched_step
** and tl_sched_apply_json validate, apply and record steps; an illegal step returns
** TL_E_SCHED with a message naming the stage and the iterator and leaves
** the schedule unchanged. Stage and iterator arguments are positions in the
** current state: cache_read inserts its stage right after the read stage,
** cache_write and rfactor right before the written one, and later stage ids
** shift by one. An iterator also has a stable "node" id (never reused in its
** stage) that survives later steps; tl_sched_node_iter maps it back to its
** current position (-1 once it was split or fused away).
** Strings returned by tl_sched_json/print/step_json live in the schedule
** until its next such call; queries with bad ids return -1 or NULL. */

typedef struct tl_sched tl_sched;
typedef struct tl_lowered tl_lowered;
typedef struct tl_module tl_module;   /* also declared with the codegen section */
/* How C becomes a shared object: compiler, flags, cross prefix (a target's,
** tl_target_toolchain; NULL everywhere means the defaults). */
typedef struct tl_toolchain tl_toolchain;

enum {                 /* iterator annotations: the codes of the AN step */
  TL_ANN_NONE = 0, TL_ANN_UNROLL, TL_ANN_VECTORIZE, TL_ANN_PARALLEL, TL_ANN_VTHREAD,
  TL_ANN_BLOCK_X, TL_ANN_THREAD_X, TL_ANN_BLOCK_Y, TL_ANN_THREAD_Y, TL_ANN_BLOCK_Z,
  TL_ANN_THREAD_Z, TL_ANN_TENSORIZE
};

enum { TL_CA_ROOT = 0, TL_CA_INLINED, TL_CA_ITER };   /* where a stage is computed */

/* A schedule for the ops that compute outputs (tensor ids of dag; NULL or
** nout 0: the dag's outputs). The dag is copied; it may be freed after. */
int tl_sched_new(tl_ctx *ctx, const tl_dag *dag, const int *outputs, int nout, tl_sched **out);
void tl_sched_free(tl_sched *s);
/* An independent copy (the steps replayed on a fresh copy of the DAG). */
int tl_sched_copy(tl_ctx *ctx, const tl_sched *s, tl_sched **out);
/* A schedule of the same DAG with no steps. */
int tl_sched_fresh(tl_ctx *ctx, const tl_sched *s, tl_sched **out);
/* The schedule's current DAG (rewritten by cache_read/cache_write/rfactor). */
tl_dag *tl_sched_dag(tl_sched *s);

/* Stages. */
int tl_sched_num_stages(const tl_sched *s);
int tl_sched_stage_find(const tl_sched *s, const char *op_name);   /* -1 if none */
const char *tl_sched_stage_name(const tl_sched *s, int stage);
int tl_sched_stage_op_kind(const tl_sched *s, int stage);          /* TL_DAG_* */
/* TL_CA_*; for TL_CA_ITER writes the target stage and iterator position. */
int tl_sched_stage_compute_at(const tl_sched *s, int stage, int *at_stage, int *at_iter);
int tl_sched_stage_scope(const tl_sched *s, int stage);            /* 0 global, 1 local, 2 shared */
int tl_sched_stage_tensor(const tl_sched *s, int stage, int out_index); /* tensor id in tl_sched_dag */

/* Iterators of a stage, outer to inner. kind: 0 spatial, 1 reduce, 2 mixed. */
int tl_sched_num_iters(const tl_sched *s, int stage);
const char *tl_sched_iter_name(const tl_sched *s, int stage, int iter);
int64_t tl_sched_iter_extent(const tl_sched *s, int stage, int iter);   /* 0 = unknown */
int tl_sched_iter_kind(const tl_sched *s, int stage, int iter);
int tl_sched_iter_annotation(const tl_sched *s, int stage, int iter);   /* TL_ANN_* */
int tl_sched_iter_node(const tl_sched *s, int stage, int iter);
int tl_sched_node_iter(const tl_sched *s, int stage, int node);
const char *tl_sched_node_name(const tl_sched *s, int stage, int node);
/* Node of the op's axis i (spatial axes first, then reduce axes) = i. */

/* Steps. The step kinds are a table (core/te/steps.h), readable here:
** kind k in 0 .. tl_step_count()-1 has the record prefix tl_step_name(k)
** ("SP"), the primitive's name tl_step_verb(k) ("split") and one field
** after the prefix per letter of tl_step_field_types(k) ("iieIb"): i an int,
** b 0/1, e the extent the step records (filled in, not given), I an int
** array, s a string; tl_step_field_name(k, f) names field f ("lengths").
** Out-of-range arguments give NULL (-1 for tl_step_field_count).
**
** tl_sched_step validates, applies and records one step of kind k: args
** are its i and b fields in record order (nargs of them), ints/nints its I
** field and str its s field (NULL/0 when the row has none). On success,
** new_stage (may be NULL) receives the id of the stage the step inserted,
** or -1:
** cache_read's stage goes right after the read stage, cache_write's and
** rfactor's right before the written one. Field meanings: split's
** inner_to_outer 1 = lengths are factors, innermost last (the outermost
** extent implied), 0 = lengths[0] is the outermost (nparts); reorder's
** after_ids a permutation of all iterator positions; fuse's fused_ids
** consecutive increasing positions; pragma "auto_unroll_max_step$16",
** "debug_skip_region" or any "key" / "key$value"; scopes "global", "local"
** or "shared"; rfactor puts the factored axis at factor_iter_id of the new
** stage "<op>.rf". */
int tl_step_count(void);
const char *tl_step_name(int kind);
const char *tl_step_verb(int kind);
const char *tl_step_field_types(int kind);
int tl_step_field_count(int kind);
const char *tl_step_field_name(int kind, int field);
int tl_sched_step(tl_ctx *ctx, tl_sched *s, int kind, const int64_t *args, int nargs,
                  const int64_t *ints, int nints, const char *str, int *new_stage);

/* The step list. apply_json takes a step, a list of steps or a state
** [[], [steps]] in the §2.4 encoding and applies all or nothing. */
int tl_sched_num_steps(const tl_sched *s);
const char *tl_sched_json(tl_sched *s);
const char *tl_sched_step_json(tl_sched *s, int i);
int tl_sched_apply_json(tl_ctx *ctx, tl_sched *s, const char *json);
/* Steps and the stage/iterator table, readable. */
const char *tl_sched_print(tl_sched *s);
uint64_t tl_sched_hash(const tl_sched *s);

/* Lower the schedule to a loop-IR function of the given argument tensors
** (tensor ids of tl_sched_dag, e.g. tl_sched_stage_tensor), every
** placeholder among them. name: the C entry point. */
int tl_lower(tl_ctx *ctx, tl_sched *s, const int *args, int nargs, const char *name,
             tl_lowered **out);
void tl_lowered_free(tl_lowered *f);
/* The lowered function as text (lives in f). */
const char *tl_lowered_text(tl_lowered *f);
/* Seconds spent in tl_lower for f. */
double tl_lowered_seconds(const tl_lowered *f);
/* Layout rewriting of a constant argument (core/te/layout.c): when every load
** of argument `arg` of f indexes it as offset + sum of coef * (pieces of loop
** variables), the argument becomes a buffer of one dimension per piece, in
** the order its loops nest, so that the loops read it contiguously; *out then
** says how to fill it from the old one (tl_layout_map_apply), else *out is
** NULL and f is unchanged (the analysis does not apply, or the layout would
** not change). */
typedef struct tl_layout_map tl_layout_map;
int tl_lowered_rewrite_layout(tl_ctx *ctx, tl_lowered *f, int arg, tl_layout_map **out);
void tl_layout_map_free(tl_layout_map *m);
int tl_layout_map_ndim(const tl_layout_map *m);
int64_t tl_layout_map_extent(const tl_layout_map *m, int j);
int64_t tl_layout_map_coef(const tl_layout_map *m, int j);
int64_t tl_layout_map_offset(const tl_layout_map *m);
/* dst (the new shape) from src (the old one): dst[a_0..] = src[offset + sum coef_j a_j]. */
int tl_layout_map_apply(tl_ctx *ctx, const tl_layout_map *m, const tl_array *src, tl_array *dst);
/* Generate C for f (the C backend) and compile it into a module whose
** kernel is named like f, with toolchain tc (a target's; NULL: the defaults,
** "-O3 -march=native"); cflags, when not NULL, replaces tc's flags. */
int tl_lowered_build(tl_ctx *ctx, tl_lowered *f, const tl_toolchain *tc, const char *cflags,
                     tl_module **out);

/* ---- topi: operators -------------------------------------------------
** The operator library: TVM's topi operators as compute declarations over a
** dag (core/topi). tl_topi_op adds the operator's compute ops (a "pad"
** stage, the main computation, ...) and writes its output tensor ids.
** attrs_json is a JSON object (NULL or "" for none), e.g. for "conv2d"
** {"strides":[1,1],"padding":[1,1,1,1],"dilation":[1,1],"groups":1,
**  "layout":"NCHW","out_dtype":"float32"}; docs in core/topi/topi.h and the
** operator files. Each op it adds carries a tag ("conv2d_nchw", "elemwise",
** "broadcast", "injective", ...) and attrs (tl_dag_set_attrs) holding the
** operator's attributes plus "pattern". Invalid attributes are refused
** with a message naming the operator, the attribute and the shapes. */

enum {                 /* fusion patterns: TVM's OpPatternKind values */
  TL_PAT_ELEMWISE = 0, TL_PAT_BROADCAST = 1, TL_PAT_INJECTIVE = 2, TL_PAT_COMM_REDUCE = 3,
  TL_PAT_OUT_ELEMWISE_FUSABLE = 4, TL_PAT_TUPLE = 7, TL_PAT_OPAQUE = 8
};

int tl_topi_op(tl_ctx *ctx, tl_dag *dag, const char *op_name, const int *inputs, int ninputs,
               const char *attrs_json, int *outputs, int max_outputs, int *noutputs);
/* The i-th operator name (0-based), or NULL past the end. */
const char *tl_topi_list(int i);
/* An operator's fusion pattern (TL_PAT_*), or -1 for an unknown name. */
int tl_topi_pattern(const char *op_name);
/* "elemwise", "broadcast", "injective", "comm_reduce", "out_elemwise_fusable",
** "tuple", "opaque" ("?" otherwise). */
const char *tl_topi_pattern_name(int pattern);
/* Default schedule steps for every stage of s (a schedule over a DAG of one
** or more operators, e.g. a fused conv2d + bias_add + relu group): target_kind
** is the target's default-schedule class (tl_target_schedules): "cpu" inlines injective producers, computes a reduction
** at its same-shape injective consumer, fuses and parallelizes the outer
** spatial loops and vectorizes the innermost one (core/topi/schedule.c);
** "opencl" binds fused output loops to work-groups of 64..256 threads
** (blockIdx.x/threadIdx.x) with reductions computed inside their consumer's
** thread loop (core/topi/schedule_gpu.c). The result always lowers. */
int tl_topi_default_schedule(tl_ctx *ctx, tl_sched *s, const char *sched_class);
/* The OpenCL default schedule alone (what "opencl" above runs). */
int tl_topi_default_schedule_gpu(tl_ctx *ctx, tl_sched *s);
/* The OpenCL default schedule with the channel-last tiles shaped for a kind of
** device: TL_GPU_SHAPES_CPU (what tl_topi_default_schedule_gpu does: wide
** channel vectors per work-item, for CPU devices such as pocl) or
** TL_GPU_SHAPES_GPU (one channel per work-item, adjacent work-items on adjacent
** channels, a register tile of columns sized so the grid keeps 128 work-items
** per compute unit; a convolution with a window or stride above 1: a tile of 2-4
** channels by those columns, the work-items of a work-group on the pixels of
** one row of weights; compute_units 0: unknown, counted as 64). */
enum { TL_GPU_SHAPES_CPU = 0, TL_GPU_SHAPES_GPU = 1 };
int tl_topi_default_schedule_gpu_for(tl_ctx *ctx, tl_sched *s, int shapes, int64_t compute_units);
/* The weight of conv2d_NCHWc_winograd (core/topi/winograd_nchwc.c): a float32
** 3x3 kernel src [K/src_block, C, 3, 3, src_block] (src_block 1: OIHW)
** transformed for tile size m (2, 4, 6) into dst [m+2, m+2, K/out_block, C,
** out_block]; computed once when a network is built. */
int tl_topi_winograd_nchwc_weight(tl_ctx *ctx, int m, int64_t K, int64_t C, int64_t src_block,
                                  int64_t out_block, const float *src, float *dst);
/* The weight of conv2d_winograd_nhwc (core/topi/winograd_nhwc.c): a float32 3x3
** kernel src HWIO [3, 3, CI, CO] transformed for tile size m (2, 4, 6) into dst
** [m+2, m+2, CI, CO]; computed once when a network is built. */
int tl_topi_winograd_nhwc_weight(tl_ctx *ctx, int m, int64_t CI, int64_t CO, const float *src, float *dst);

/* ---- graph: ONNX ------------------------------------------------------ */
/* ONNX models (ModelProto) and ONNX test-data files (serialized TensorProto,
** SequenceProto, OptionalProto), read with protobuf-c (docs/onnx.md). The
** graph, node, tensor and type handles point into the model or value they
** came from and live as long as it; they are never freed on their own.
** Index arguments are 0-based; an index out of range reads as 0, NULL or "".
** Element types are ONNX's TensorProto.DataType codes (TL_ONNX_FLOAT ...),
** distinct from tunelua dtypes: tl_onnx_elem_type_dtype maps between them. */

typedef struct tl_onnx_model tl_onnx_model;
typedef struct tl_onnx_graph tl_onnx_graph;
typedef struct tl_onnx_node tl_onnx_node;
typedef struct tl_onnx_tensor tl_onnx_tensor;
typedef struct tl_onnx_type tl_onnx_type;
typedef struct tl_onnx_value tl_onnx_value;

enum {                 /* element types: TensorProto.DataType */
  TL_ONNX_UNDEFINED = 0,
  TL_ONNX_FLOAT = 1,
  TL_ONNX_UINT8 = 2,
  TL_ONNX_INT8 = 3,
  TL_ONNX_UINT16 = 4,
  TL_ONNX_INT16 = 5,
  TL_ONNX_INT32 = 6,
  TL_ONNX_INT64 = 7,
  TL_ONNX_STRING = 8,
  TL_ONNX_BOOL = 9,
  TL_ONNX_FLOAT16 = 10,
  TL_ONNX_DOUBLE = 11,
  TL_ONNX_UINT32 = 12,
  TL_ONNX_UINT64 = 13,
  TL_ONNX_COMPLEX64 = 14,
  TL_ONNX_COMPLEX128 = 15,
  TL_ONNX_BFLOAT16 = 16
};

enum {                 /* attribute types: AttributeProto.AttributeType */
  TL_ONNX_ATTR_UNDEFINED = 0,
  TL_ONNX_ATTR_FLOAT = 1,
  TL_ONNX_ATTR_INT = 2,
  TL_ONNX_ATTR_STRING = 3,
  TL_ONNX_ATTR_TENSOR = 4,
  TL_ONNX_ATTR_GRAPH = 5,
  TL_ONNX_ATTR_FLOATS = 6,
  TL_ONNX_ATTR_INTS = 7,
  TL_ONNX_ATTR_STRINGS = 8,
  TL_ONNX_ATTR_TENSORS = 9,
  TL_ONNX_ATTR_GRAPHS = 10,
  TL_ONNX_ATTR_SPARSE_TENSOR = 11,
  TL_ONNX_ATTR_SPARSE_TENSORS = 12,
  TL_ONNX_ATTR_TYPE_PROTO = 13,
  TL_ONNX_ATTR_TYPE_PROTOS = 14
};

enum {                 /* kinds of value: the TypeProto cases */
  TL_ONNX_KIND_NONE = 0,
  TL_ONNX_KIND_TENSOR = 1,
  TL_ONNX_KIND_SEQUENCE = 4,
  TL_ONNX_KIND_MAP = 5,
  TL_ONNX_KIND_SPARSE_TENSOR = 8,
  TL_ONNX_KIND_OPTIONAL = 9
};

enum {                 /* the value lists of a graph */
  TL_ONNX_GRAPH_INPUTS = 0,
  TL_ONNX_GRAPH_OUTPUTS = 1,
  TL_ONNX_GRAPH_VALUE_INFO = 2
};

/* "float32", "uint16", "bfloat16", "string", ... ("?" for unknown codes). */
const char *tl_onnx_elem_type_name(int elem_type);
/* The tunelua dtype of an element type; TL_E_DTYPE when tunelua has none. */
int tl_onnx_elem_type_dtype(tl_ctx *ctx, int elem_type, int *dtype);
/* "INT", "FLOATS", "TENSOR", ... ("?" for unknown codes). */
const char *tl_onnx_attr_type_name(int attr_type);
/* "tensor", "sequence", "map", "sparse_tensor", "optional" or "none". */
const char *tl_onnx_kind_name(int kind);

/* The node-test directory of the ONNX test vectors (libonnx-testdata):
** $TUNELUA_ONNX_TESTDATA if set, else the first known install path that
** exists; NULL when none does. */
const char *tl_onnx_testdata_dir(void);
/* The names in dir ("." and ".." left out), sorted, each followed by a NUL,
** into buf (cap bytes; buf may be NULL when cap is 0). *need receives the
** bytes the whole list takes; when it exceeds cap nothing is written, call
** again with a larger buffer. */
int tl_onnx_list_dir(tl_ctx *ctx, const char *dir, char *buf, size_t cap, size_t *need);

/* Models. */
int tl_onnx_model_load(tl_ctx *ctx, const char *path, tl_onnx_model **out);
/* A model from len bytes in memory; name stands for the file in messages
** (NULL: "<bytes>"), dir resolves external data (NULL: "."). */
int tl_onnx_model_load_bytes(tl_ctx *ctx, const void *data, size_t len, const char *name,
                             const char *dir, tl_onnx_model **out);
void tl_onnx_model_free(tl_onnx_model *m);
int64_t tl_onnx_model_ir_version(const tl_onnx_model *m);
const char *tl_onnx_model_producer(const tl_onnx_model *m);
/* The directory of the model file: external tensor data is relative to it. */
const char *tl_onnx_model_dir(const tl_onnx_model *m);
int tl_onnx_model_num_opsets(const tl_onnx_model *m);
const char *tl_onnx_model_opset_domain(const tl_onnx_model *m, int i);  /* "" = ai.onnx */
int64_t tl_onnx_model_opset_version(const tl_onnx_model *m, int i);
/* The opset version imported for domain ("" and "ai.onnx" are one), or -1. */
int64_t tl_onnx_model_opset(const tl_onnx_model *m, const char *domain);
const tl_onnx_graph *tl_onnx_model_graph(const tl_onnx_model *m);

/* Graphs: the model's, or a GRAPH attribute's (If, Loop, Scan bodies). */
const char *tl_onnx_graph_name(const tl_onnx_graph *g);
int tl_onnx_graph_num_nodes(const tl_onnx_graph *g);
const tl_onnx_node *tl_onnx_graph_node(const tl_onnx_graph *g, int i);  /* in file order */
/* which: TL_ONNX_GRAPH_INPUTS, _OUTPUTS or _VALUE_INFO. */
int tl_onnx_graph_num_values(const tl_onnx_graph *g, int which);
const char *tl_onnx_graph_value_name(const tl_onnx_graph *g, int which, int i);
const tl_onnx_type *tl_onnx_graph_value_type(const tl_onnx_graph *g, int which, int i);
int tl_onnx_graph_num_initializers(const tl_onnx_graph *g);
const tl_onnx_tensor *tl_onnx_graph_initializer(const tl_onnx_graph *g, int i);

/* Nodes. An omitted optional input or output reads as "". */
const char *tl_onnx_node_op_type(const tl_onnx_node *n);
const char *tl_onnx_node_name(const tl_onnx_node *n);
const char *tl_onnx_node_domain(const tl_onnx_node *n);                 /* "" = ai.onnx */
int tl_onnx_node_num_inputs(const tl_onnx_node *n);
const char *tl_onnx_node_input(const tl_onnx_node *n, int i);
int tl_onnx_node_num_outputs(const tl_onnx_node *n);
const char *tl_onnx_node_output(const tl_onnx_node *n, int i);

/* Attributes by index k. The type is inferred from the field set when an
** old model leaves it out. A getter of another type reads as 0/NULL. */
int tl_onnx_node_num_attrs(const tl_onnx_node *n);
int tl_onnx_node_find_attr(const tl_onnx_node *n, const char *name);   /* k or -1 */
const char *tl_onnx_attr_name(const tl_onnx_node *n, int k);
int tl_onnx_attr_type(const tl_onnx_node *n, int k);                   /* TL_ONNX_ATTR_* */
int64_t tl_onnx_attr_int(const tl_onnx_node *n, int k);
double tl_onnx_attr_float(const tl_onnx_node *n, int k);
/* Strings are bytes: *len (may be NULL) is the length; always NUL-terminated. */
const char *tl_onnx_attr_string(const tl_onnx_node *n, int k, size_t *len);
const tl_onnx_tensor *tl_onnx_attr_tensor(const tl_onnx_node *n, int k);
const tl_onnx_graph *tl_onnx_attr_graph(const tl_onnx_node *n, int k);
const tl_onnx_type *tl_onnx_attr_type_proto(const tl_onnx_node *n, int k);
/* Lists: the element count of an INTS, FLOATS, STRINGS, TENSORS, GRAPHS or
** TYPE_PROTOS attribute (0 for other types), and its elements. */
int tl_onnx_attr_count(const tl_onnx_node *n, int k);
const int64_t *tl_onnx_attr_ints(const tl_onnx_node *n, int k);
const float *tl_onnx_attr_floats(const tl_onnx_node *n, int k);
const char *tl_onnx_attr_strings(const tl_onnx_node *n, int k, int j, size_t *len);
const tl_onnx_tensor *tl_onnx_attr_tensors(const tl_onnx_node *n, int k, int j);
const tl_onnx_graph *tl_onnx_attr_graphs(const tl_onnx_node *n, int k, int j);
const tl_onnx_type *tl_onnx_attr_type_protos(const tl_onnx_node *n, int k, int j);

/* Typed attributes by name: the default when absent, TL_E_PARSE (naming the
** node and both types) when present with another type. A list that is
** absent gives *out = NULL and *count = -1. */
int tl_onnx_node_get_int(tl_ctx *ctx, const tl_onnx_node *n, const char *name,
                         int64_t dflt, int64_t *out);
int tl_onnx_node_get_float(tl_ctx *ctx, const tl_onnx_node *n, const char *name,
                           double dflt, double *out);
int tl_onnx_node_get_string(tl_ctx *ctx, const tl_onnx_node *n, const char *name,
                            const char *dflt, const char **out);
int tl_onnx_node_get_ints(tl_ctx *ctx, const tl_onnx_node *n, const char *name,
                          const int64_t **out, int *count);

/* Types (TypeProto). */
int tl_onnx_type_kind(const tl_onnx_type *t);                          /* TL_ONNX_KIND_* */
/* Tensor and sparse tensor: the element type; map: the key type; else 0. */
int tl_onnx_type_elem_type(const tl_onnx_type *t);
/* Sequence and optional: the element type; map: the value type; else NULL. */
const tl_onnx_type *tl_onnx_type_elem(const tl_onnx_type *t);
int tl_onnx_type_ndim(const tl_onnx_type *t);                          /* -1: no shape */
int64_t tl_onnx_type_dim(const tl_onnx_type *t, int d);                /* -1: unknown */
const char *tl_onnx_type_dim_param(const tl_onnx_type *t, int d);      /* "" if none */

/* Tensors (TensorProto) as stored; tl_onnx_tensor_to_array converts to a
** host array: float32, float16, float64, (u)int8, int16, int32, int64 and
** bool, from raw_data (little-endian) or the typed fields, 0-d and empty
** tensors included. base_dir resolves external data (NULL: refuse it). */
const char *tl_onnx_tensor_name(const tl_onnx_tensor *t);
int tl_onnx_tensor_elem_type(const tl_onnx_tensor *t);
int tl_onnx_tensor_ndim(const tl_onnx_tensor *t);
const int64_t *tl_onnx_tensor_dims(const tl_onnx_tensor *t);
int tl_onnx_tensor_to_array(tl_ctx *ctx, const tl_onnx_tensor *t, const char *base_dir,
                            tl_array **out);
/* Read a TensorProto file (a test's input_K.pb) into a host array. When
** name_out is not NULL it receives the tensor's name, malloc'd ("" if
** none): the caller frees it with free(). */
int tl_onnx_tensor_load(tl_ctx *ctx, const char *path, tl_array **out, char **name_out);

/* Test-data values: a TensorProto, SequenceProto or OptionalProto file.
** kind (TL_ONNX_KIND_TENSOR, _SEQUENCE or _OPTIONAL) says which message the
** file holds: the file does not, take it from the model's input type. */
int tl_onnx_value_load(tl_ctx *ctx, const char *path, int kind, tl_onnx_value **out);
void tl_onnx_value_free(tl_onnx_value *v);
int tl_onnx_value_kind(const tl_onnx_value *v);
const char *tl_onnx_value_name(const tl_onnx_value *v);
const tl_onnx_tensor *tl_onnx_value_tensor(const tl_onnx_value *v);    /* kind tensor */
/* Sequence: the element count; optional: 0 (empty) or 1; tensor: 0. */
int tl_onnx_value_count(const tl_onnx_value *v);
const tl_onnx_value *tl_onnx_value_elem(const tl_onnx_value *v, int i);

/* ---- codegen and modules: compiled kernels ----------------------------- */

typedef struct tl_module tl_module;

/* Compile C source (the C backend's output, or any C with the kernel ABI
** int32_t f(void **args, int32_t nargs), args[k] a DLTensor *) into a shared
** object with the system C compiler ($TUNELUA_CC or cc) and load it.
** cflags NULL means "-O3 -march=native". Objects are cached by a hash of
** (compiler, flags, source) in $TUNELUA_CACHE_DIR, else
** $XDG_CACHE_HOME/tunelua/kernels, else ~/.cache/tunelua/kernels. A compiler
** failure is TL_E_BUILD with the compiler's diagnostics in the message;
** running past timeout_s (<= 0: no limit) is TL_E_TIMEOUT. */
int tl_module_from_c(tl_ctx *ctx, const char *source, const char *cflags,
                     double timeout_s, tl_module **out);
double tl_module_compile_seconds(const tl_module *m);   /* 0 on a cache hit */
int tl_module_cache_hit(const tl_module *m);
const char *tl_module_source(const tl_module *m);
const char *tl_module_path(const tl_module *m);         /* the shared object */
/* Call kernel fname on host arrays. A non-zero kernel status becomes an
** error (its TL_E_* code, else TL_E_RUNTIME) with the kernel's message, e.g.
** "f: argument 1 (B): expected float32 (16, 32), got float32 (16, 31)". */
int tl_module_call(tl_ctx *ctx, tl_module *m, const char *fname, tl_array **args,
                   int nargs);
/* TVM's time evaluator: one warm-up call, then repeat measurements of number
** calls each; with min_repeat_ms > 0 number grows until a measurement lasts
** that long; cache_flush writes a 32 MiB buffer before each measurement.
** secs_out[repeat] receives the mean seconds per call of each measurement. */
int tl_module_time(tl_ctx *ctx, tl_module *m, const char *fname, tl_array **args,
                   int nargs, int number, int repeat, double min_repeat_ms,
                   int cache_flush, double *secs_out);
void tl_module_free(tl_module *m);

/* cdef:end */

#ifdef __cplusplus
}
#endif

/* The parts of the public API, one per subsystem. */
#include "tunelua_ansor.h"
#include "tunelua_autotvm.h"
#include "tunelua_graph.h"
#include "tunelua_opencl.h"
#include "tunelua_rpc.h"
#include "tunelua_target.h"
#include "tunelua_tune.h"
#include "tunelua_vta.h"

#endif
