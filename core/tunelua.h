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
/* Fork and run fn(arg, out_fd) in the child; what the child writes to out_fd
** becomes the result's output. Same timeout and group-kill rules. */
int tl_proc_call(tl_ctx *ctx, int (*fn)(void *arg, int out_fd), void *arg,
                 double timeout_s, size_t max_output, tl_proc_result **out);
int tl_proc_status(const tl_proc_result *r);    /* TL_PROC_* */
int tl_proc_code(const tl_proc_result *r);      /* exit status or signal */
double tl_proc_seconds(const tl_proc_result *r);
const char *tl_proc_stdout(const tl_proc_result *r, size_t *len);
const char *tl_proc_stderr(const tl_proc_result *r, size_t *len);
void tl_proc_result_free(tl_proc_result *r);

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
/* Fill with seeded random values: dist 0 = uniform [lo, hi), 1 = normal(lo=mean, hi=std). */
int tl_array_random(tl_ctx *ctx, tl_array *a, int dist, double lo, double hi, uint64_t seed);
/* Element i (flat, row-major) as double, and store. Host arrays only. */
double tl_array_get(const tl_array *a, int64_t i);
void tl_array_set(tl_array *a, int64_t i, double v);
/* Compare: writes the worst flat index and its error measure; 0 if all close. */
int tl_array_allclose(tl_ctx *ctx, const tl_array *a, const tl_array *b,
                      double rtol, double atol, int64_t *worst, double *worst_err);

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
