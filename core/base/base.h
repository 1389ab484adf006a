/*
** base.h -- internal helpers shared by every area of libtunelua.
**
** Not public: clients see only core/tunelua.h. Here live the context struct
** (sticky error), the arena allocator, growable arrays, hashing, checked
** allocation and the internal assertion macro.
*/
#ifndef TL_BASE_H
#define TL_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tunelua.h"

#define TL_EXPORT __attribute__((visibility("default")))
#define TL_UNUSED(x) ((void)(x))
#define TL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TL_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Internal invariants: compiled out in release builds (NDEBUG). A broken one
** is a bug in tunelua, never a user error. */
#ifdef NDEBUG
#define tl_assert(c) ((void)0)
#else
#define tl_assert(c) ((c) ? (void)0 : tl_assert_fail(#c, __FILE__, __LINE__))
#endif
void tl_assert_fail(const char *what, const char *file, int line) __attribute__((noreturn));

/* ---- context: the sticky error --------------------------------------- */

#define TL_ERRMSG_MAX 1024

struct tl_ctx {
  int code;                    /* TL_OK or the first TL_E_* since clearerr */
  char msg[TL_ERRMSG_MAX];     /* message for code, NUL-terminated */
};

/* Record an error and return its code, so callers can `return tl_err(...)`.
** A later error overwrites an earlier one (the innermost cause is kept by
** callers that prefix with tl_err_prefix). ctx may be NULL. */
int tl_err(tl_ctx *ctx, int code, const char *fmt, ...) TL_PRINTF(3, 4);
int tl_verr(tl_ctx *ctx, int code, const char *fmt, va_list ap);
/* Prepend context to the current message: "conv2d: " + msg. */
int tl_err_prefix(tl_ctx *ctx, const char *fmt, ...) TL_PRINTF(2, 3);

/* ---- checked allocation ---------------------------------------------- */

void *tl_malloc(size_t n);           /* aborts on out-of-memory */
void *tl_calloc(size_t n, size_t sz);
void *tl_realloc(void *p, size_t n);
char *tl_strdup(const char *s);
char *tl_strndup(const char *s, size_t n);
char *tl_sprintf(const char *fmt, ...) TL_PRINTF(1, 2); /* malloc'd */

/* ---- arena: bump allocation, freed in one call ------------------------ */

typedef struct tl_arena_chunk tl_arena_chunk;
typedef struct tl_arena {
  tl_arena_chunk *head;        /* newest chunk first */
  size_t used;                 /* bytes used in head */
  size_t total;                /* bytes handed out overall */
} tl_arena;

void tl_arena_init(tl_arena *a);
void *tl_arena_alloc(tl_arena *a, size_t n);       /* 16-byte aligned, zeroed */
char *tl_arena_strdup(tl_arena *a, const char *s);
void tl_arena_free(tl_arena *a);                   /* frees all; reusable */

/* ---- growable arrays ---------------------------------------------------
** struct { T *v; int n, cap; } used through TL_VEC_PUSH. */
#define TL_VEC(T) struct { T *v; int n, cap; }
#define TL_VEC_RESERVE(vec, want)                                           \
  do {                                                                      \
    if ((want) > (vec).cap) {                                               \
      int nc_ = (vec).cap ? (vec).cap * 2 : 8;                              \
      while (nc_ < (want)) nc_ *= 2;                                        \
      (vec).v = tl_realloc((vec).v, (size_t)nc_ * sizeof(*(vec).v));        \
      (vec).cap = nc_;                                                      \
    }                                                                       \
  } while (0)
#define TL_VEC_PUSH(vec, x)                                                 \
  do {                                                                      \
    TL_VEC_RESERVE(vec, (vec).n + 1);                                       \
    (vec).v[(vec).n++] = (x);                                               \
  } while (0)
#define TL_VEC_FREE(vec) (free((vec).v), (vec).v = NULL, (vec).n = (vec).cap = 0)

/* ---- string buffer ------------------------------------------------------ */

typedef struct tl_buf {
  char *s;                     /* NUL-terminated when non-NULL */
  size_t n, cap;
} tl_buf;

void tl_buf_puts(tl_buf *b, const char *s);
void tl_buf_putn(tl_buf *b, const char *s, size_t n);
void tl_buf_printf(tl_buf *b, const char *fmt, ...) TL_PRINTF(2, 3);
void tl_buf_vprintf(tl_buf *b, const char *fmt, va_list ap);
void tl_buf_free(tl_buf *b);
char *tl_buf_take(tl_buf *b);        /* hands over the string ("" if empty) */

/* ---- hashing ------------------------------------------------------------- */

uint64_t tl_hash_bytes(const void *p, size_t n, uint64_t seed);
static inline uint64_t tl_hash_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

/* ---- small helpers shared with the device programs (device/) ------------- */

/* 1 when s is a C identifier ([A-Za-z_][A-Za-z0-9_]*) of 1 to max characters. */
int tl_c_ident(const char *s, size_t max);
/* SIGALRM after s seconds of wall time (ITIMER_REAL, which ends a measurement
** child); s <= 0 cancels. */
void tl_alarm_in(double s);

/* ---- files (file.c; tl_file_*, tl_mkdirs, tl_path_remove are public) ------- */

/* Read a whole file (malloc'd, NUL-terminated). */
int tl_read_file(tl_ctx *ctx, const char *path, char **out, size_t *len);
/* Write atomically: temp file beside it, fsync, rename, fsync of the directory. */
int tl_write_file_atomic(tl_ctx *ctx, const char *path, const void *data, size_t len);

/* ---- child processes (proc.c; tl_proc_exec and the results are public) ---- */

/* tl_proc_exec with NAME=VALUE entries (NULL-terminated) replacing or adding to this process's
** environment in the program's; NULL: the environment as it is. */
int tl_proc_exec_env(tl_ctx *ctx, const char *const *argv, const char *const *env_set, double timeout_s,
                     size_t max_output, tl_proc_result **out);

/* Fork and run fn(arg, out_fd) in the child; what the child writes to out_fd
** becomes the result's output. The timeout and group-kill rules of tl_proc_exec.
** C only: fn runs in the forked child and must be C (never a callback into Lua). */
int tl_proc_call(tl_ctx *ctx, int (*fn)(void *arg, int out_fd), void *arg,
                 double timeout_s, size_t max_output, tl_proc_result **out);

/* In a process that only runs kernels: the global pool takes TUNELUA_NUM_THREADS threads
** when that is set, whatever count the parent process requested (pool.c). */
void tl_pool_use_env_threads(void);

/* tl_proc_call in two halves, to keep several children running from one
** thread: tl_proc_start forks (fn runs as above), tl_proc_wait supervises the
** child to its end under the timeout, counted from the wait, and frees c.
** Every started child must be waited for.
**
** Why one thread: a child forked while another thread of ours is inside
** malloc inherits that allocator's lock held; glibc's malloc resets its locks
** at fork, but sanitizer allocators do not, and such a child hangs on its
** first allocation. Children that run code (not exec) are therefore forked by
** the one thread that drives the batch, while no worker thread of ours runs. */
typedef struct tl_proc_child tl_proc_child;
int tl_proc_start(tl_ctx *ctx, int (*fn)(void *arg, int out_fd), void *arg, tl_proc_child **out);
int tl_proc_wait(tl_ctx *ctx, tl_proc_child *c, double timeout_s, size_t max_output,
                 tl_proc_result **out);
/* Supervise several started children at once from the thread that forked them:
** returns when one of cs[0..n-1] (NULL entries skipped) has ended or reached
** deadlines[i] (a tl_now() time; <= 0 or deadlines NULL: none), with *ready its
** index, or after max_wait_s with *ready -1 (also when all are NULL). Meanwhile
** it drains their pipes (each kept up to max_output bytes, as tl_proc_wait keeps
** them), so none blocks on a full pipe. The ready child is then finished with
** tl_proc_wait (a tiny timeout_s for one past its deadline kills it). */
int tl_proc_wait_any(tl_ctx *ctx, tl_proc_child *const *cs, int n, const double *deadlines,
                     size_t max_output, double max_wait_s, int *ready);

#endif
