/*
** measure.c -- the C side of measurement: turn a lowered
** function into C source plus an argument signature, compile many sources in
** parallel into shared objects (each compiler in its own process group, with a
** wall-clock limit), and time a compiled kernel in a forked child so that a
** crash, a hang or a wrong answer becomes a result, never a dead tuner.
**
** The signature is JSON: {"name": "f", "args": [{"name": "A", "shape": [4, 8],
** "dtype": "float32"}, ...]}; the runner allocates host arrays from it, fills
** them with seeded random values and calls the kernel ABI
** int32_t f(void **args, int32_t nargs) (args[k] a DLTensor *).
**
** The child of tl_measure_run writes a small binary record to its pipe:
** int32 error_no, int32 ncosts, double costs[ncosts], then the message text.
*/
#define _GNU_SOURCE
#include "../base/base.h"
#include "../build/build.h"
#include "../ir/ir.h"
#include "../runtime/runtime.h"
#include "measure.h"
#include "../tunelua.h"

#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A crashing kernel must end the child with its signal: no inherited (or
** sanitizer) handler runs, and the child dies with the process that measures. */
void tl_measure_child_signals(void) {
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
}

void tl_measure_put(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

TL_EXPORT void tl_measure_str_free(char *s) { free(s); }

static const char *type_name(tl_type t) {
  if (t.code == TL_TC_FLOAT) return t.bits == 16 ? "float16" : t.bits == 64 ? "float64" : "float32";
  if (t.code == TL_TC_UINT) return t.bits == 1 ? "bool" : "uint8";
  if (t.code == TL_TC_INT) {
    switch (t.bits) {
    case 8: return "int8";
    case 16: return "int16";
    case 64: return "int64";
    default: return "int32";
    }
  }
  return "float32";
}

static int lowered_source(tl_ctx *ctx, tl_lowered *f, const tl_toolchain *tc, char **source,
                          char **sig) {
  if (!f || !source || !sig) return tl_err(ctx, TL_E_ARG, "tl_measure_lowered_source: NULL argument");
  *source = NULL;
  *sig = NULL;
  tl_buf b = {0};
  int rc = tl_build_c_codegen(ctx, f, tc, &b);
  if (rc) {
    tl_buf_free(&b);
    return rc;
  }
  tl_buf s = {0};
  tl_buf_printf(&s, "{\"name\": \"%s\", \"args\": [", f->name);
  for (int i = 0; i < f->nargs; i++) {
    const tl_buffer *buf = tl_ir_buffer(f->ir, f->arg_bufs[i]);
    tl_buf_printf(&s, "%s{\"name\": \"%s\", \"dtype\": \"%s\", \"shape\": [", i ? ", " : "",
                  buf->name ? buf->name : "", type_name(buf->dtype));
    for (int d = 0; d < buf->ndim; d++) {
      tl_ref e = buf->shape[d];
      if (tl_ir_op(f->ir, e) != TL_IR_INT) {
        tl_buf_free(&b);
        tl_buf_free(&s);
        return tl_err(ctx, TL_E_UNSUPPORTED, "%s: argument %d (%s) has a symbolic extent: "
                      "measurement needs constant shapes", f->name, i, buf->name ? buf->name : "?");
      }
      tl_buf_printf(&s, "%s%lld", d ? ", " : "", (long long)tl_ir_node(f->ir, e)->imm.i);
    }
    tl_buf_puts(&s, "]}");
  }
  tl_buf_puts(&s, "]}");
  *source = tl_buf_take(&b);
  *sig = tl_buf_take(&s);
  return TL_OK;
}

TL_EXPORT int tl_measure_lowered_source(tl_ctx *ctx, tl_lowered *f, char **source, char **sig) {
  return lowered_source(ctx, f, NULL, source, sig);
}

TL_EXPORT int tl_measure_lowered_source_for(tl_ctx *ctx, tl_lowered *f, const tl_toolchain *tc,
                                            char **source, char **sig) {
  return lowered_source(ctx, f, tc, source, sig);
}

/* ---- compiling ---------------------------------------------------------------- */

/* Compile source into so_path: TL_OK, TL_E_BUILD (diagnostics in *msg) or TL_E_TIMEOUT. */
static int compile_one(tl_ctx *ctx, const char *source, const tl_toolchain *tc,
                       const char *so_path, double timeout_s, char **msg) {
  int rc = tl_cc_source(ctx, tc, source, so_path, timeout_s, NULL);
  *msg = rc ? tl_strdup(tl_errmsg(ctx)) : NULL;
  return rc;
}

/* n jobs, job(ctx, i, arg) for i in [0, n), over up to n_parallel threads (at most 256; the
** calling thread when none starts), each thread with a tl_ctx of its own. */
typedef void (*batch_job)(tl_ctx *ctx, int i, void *arg);

typedef struct {
  int n, next;
  batch_job job;
  void *arg;
  pthread_mutex_t mu;
} job_queue;

static void *job_worker(void *p) {
  job_queue *q = p;
  tl_ctx *ctx = tl_ctx_new();
  for (;;) {
    pthread_mutex_lock(&q->mu);
    int i = q->next++;
    pthread_mutex_unlock(&q->mu);
    if (i >= q->n) break;
    q->job(ctx, i, q->arg);
  }
  tl_ctx_free(ctx);
  return NULL;
}

static void run_jobs(int n, int n_parallel, batch_job job, void *arg) {
  if (n_parallel < 1) n_parallel = 1;
  if (n_parallel > n) n_parallel = n;
  if (n_parallel > 256) n_parallel = 256;
  job_queue q = {n, 0, job, arg};
  pthread_mutex_init(&q.mu, NULL);
  pthread_t th[256];
  int started = 0;
  for (int t = 0; t < n_parallel; t++)
    if (pthread_create(&th[started], NULL, job_worker, &q) == 0) started++;
  if (!started) job_worker(&q);
  for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
  pthread_mutex_destroy(&q.mu);
}

typedef struct {
  const char *const *sources;
  const char *const *so_paths;
  tl_toolchain tc;                 /* the target's, with the caller's flags */
  double timeout_s;
  int *codes;
  double *secs;
  char **msgs;
} build_batch;

static void build_job(tl_ctx *ctx, int i, void *arg) {
  build_batch *bb = arg;
  if (!bb->sources[i] || !bb->so_paths[i]) {   /* skipped (already failed) */
    bb->codes[i] = TL_E_ARG;
    bb->msgs[i] = NULL;
    bb->secs[i] = 0;
    return;
  }
  double t0 = tl_now();
  tl_clearerr(ctx);
  bb->codes[i] = compile_one(ctx, bb->sources[i], &bb->tc, bb->so_paths[i], bb->timeout_s,
                             &bb->msgs[i]);
  bb->secs[i] = tl_now() - t0;
}

TL_EXPORT int tl_measure_build_batch(tl_ctx *ctx, int n, const char *const *sources,
                                     const char *const *so_paths, const tl_toolchain *tc,
                                     const char *cflags, double timeout_s, int n_parallel, int *codes, double *secs,
                                     char **msgs) {
  if (n < 0 || (n > 0 && (!sources || !so_paths || !codes || !secs || !msgs)))
    return tl_err(ctx, TL_E_ARG, "tl_measure_build_batch: bad arguments");
  if (n == 0) return TL_OK;
  tl_toolchain t = tl_toolchain_with_flags(tc, cflags && *cflags ? cflags : NULL);
  build_batch bb = {sources, so_paths, t, timeout_s, codes, secs, msgs};
  run_jobs(n, n_parallel, build_job, &bb);
  return TL_OK;
}

/* ---- building configs of a C task, each lowered in a child ------------------------------- */

typedef struct {
  tl_atvm_task *task;
  int64_t index;
  const tl_toolchain *tc;          /* its vector width reaches the code generator */
} lower_arg;

/* Child: instantiate + lower + generate C; writes "sig\0source" (exit 0) or the message (exit 3). */
static int lower_child(void *argp, int out_fd) {
  lower_arg *a = argp;
  tl_measure_child_signals();
  tl_ctx *ctx = tl_ctx_new();
  tl_lowered *l = NULL;
  char *src = NULL, *sig = NULL;
  int rc = tl_atvm_lower(ctx, a->task, a->index, "default_function", &l);
  if (!rc) rc = lowered_source(ctx, l, a->tc, &src, &sig);
  tl_buf b = {0};
  if (rc) {
    tl_buf_puts(&b, tl_errmsg(ctx));
  } else {
    tl_buf_puts(&b, sig);
    tl_buf_putn(&b, "", 1);
    tl_buf_puts(&b, src);
  }
  tl_measure_put(out_fd, b.s, b.n);
  return rc ? 3 : 0;
}

typedef struct {
  tl_atvm_task *task;
  const int64_t *indices;
  const char *const *so_paths;
  tl_toolchain tc;                 /* the target's, with the caller's flags */
  double timeout_s;
  int *error_no;
  double *secs;
  char **msgs, **sigs;
  char **srcs;                     /* lowered sources waiting for the compiler */
} task_batch;

/* Read lowering child i's outcome: its source into tb->srcs[i] and its
** signature into tb->sigs[i], or a classified error. */
static void lower_done(task_batch *tb, int i, tl_proc_result *res) {
  size_t olen = 0;
  const char *o = tl_proc_stdout(res, &olen);
  int st = tl_proc_status(res);
  if (st == TL_PROC_OK && o && strlen(o) < olen) {
    size_t sl = strlen(o);
    tb->sigs[i] = tl_strndup(o, sl);
    tb->srcs[i] = tl_strndup(o + sl + 1, olen - sl - 1);
  } else if (st == TL_PROC_EXIT && tl_proc_code(res) == 3) {
    tb->error_no[i] = TL_MEASURE_INSTANTIATION_ERROR;
    tb->msgs[i] = tl_strndup(o ? o : "", o ? olen : 0);
  } else if (st == TL_PROC_TIMEOUT) {
    tb->error_no[i] = TL_MEASURE_BUILD_TIMEOUT;
    tb->msgs[i] = tl_sprintf("build timed out after %.1f s (instantiating config %lld)",
                             tb->timeout_s, (long long)tb->indices[i]);
  } else {
    size_t el = 0;
    const char *e = tl_proc_stderr(res, &el);
    tb->error_no[i] = TL_MEASURE_COMPILE_HOST;
    tb->msgs[i] = st == TL_PROC_SIGNAL
      ? tl_sprintf("instantiating config %lld crashed: signal %d (%s)", (long long)tb->indices[i],
                   tl_proc_code(res), strsignal(tl_proc_code(res)))
      : tl_sprintf("instantiating config %lld failed (status %d): %.*s", (long long)tb->indices[i],
                   tl_proc_code(res), (int)(el > 2000 ? 2000 : el), e ? e : "");
  }
}

/* Phase 1, on the calling thread only (see tl_proc_start): every config is
** lowered in its own child, up to n_parallel of them at a time; the oldest is
** waited for, then the next one starts. */
static void lower_all(tl_ctx *ctx, task_batch *tb, int n, int n_parallel) {
  tl_proc_child **kids = tl_calloc((size_t)n, sizeof *kids);
  lower_arg *args = tl_calloc((size_t)n, sizeof *args);
  int next = 0;
  for (int i = 0; i < n; i++) {
    for (; next < n && next < i + n_parallel; next++) {
      args[next] = (lower_arg){tb->task, tb->indices[next], &tb->tc};
      tb->secs[next] = tl_now();   /* the start, until the end replaces it */
      tl_clearerr(ctx);
      if (tl_proc_start(ctx, lower_child, &args[next], &kids[next]) != TL_OK) {
        tb->error_no[next] = TL_MEASURE_UNKNOWN_ERROR;
        tb->msgs[next] = tl_strdup(tl_errmsg(ctx));
      }
    }
    if (!kids[i]) continue;
    tl_proc_result *res = NULL;
    tl_clearerr(ctx);
    if (tl_proc_wait(ctx, kids[i], tb->timeout_s, (size_t)64 << 20, &res) != TL_OK) {
      tb->error_no[i] = TL_MEASURE_UNKNOWN_ERROR;
      tb->msgs[i] = tl_strdup(tl_errmsg(ctx));
    } else {
      lower_done(tb, i, res);
    }
    tl_proc_result_free(res);
    kids[i] = NULL;
  }
  free(kids);
  free(args);
}

/* Phase 2, on worker threads: compile what lowered, within what is left of
** the config's time limit. */
static void compile_job(tl_ctx *ctx, int i, void *arg) {
  task_batch *tb = arg;
  double t0 = tb->secs[i];
  if (tb->srcs[i]) {
    double left = tb->timeout_s > 0 ? tb->timeout_s - (tl_now() - t0) : 0;
    if (tb->timeout_s > 0 && left < 0.001) left = 0.001;
    tl_clearerr(ctx);
    int rc = compile_one(ctx, tb->srcs[i], &tb->tc, tb->so_paths[i], left, &tb->msgs[i]);
    tb->error_no[i] = rc == TL_OK ? TL_MEASURE_NO_ERROR
                      : rc == TL_E_TIMEOUT ? TL_MEASURE_BUILD_TIMEOUT : TL_MEASURE_COMPILE_HOST;
    free(tb->srcs[i]);
    tb->srcs[i] = NULL;
  }
  tb->secs[i] = tl_now() - t0;
}

TL_EXPORT int tl_measure_build_task_batch(tl_ctx *ctx, tl_atvm_task *task, int n,
                                          const int64_t *indices, const char *const *so_paths,
                                          const tl_toolchain *tc, const char *cflags,
                                          double timeout_s, int n_parallel,
                                          int *error_no, double *secs, char **msgs, char **sigs) {
  if (!task || n < 0 || (n > 0 && (!indices || !so_paths || !error_no || !secs || !msgs || !sigs)))
    return tl_err(ctx, TL_E_ARG, "tl_measure_build_task_batch: bad arguments");
  if (n == 0) return TL_OK;
  if (n_parallel < 1) n_parallel = 1;
  tl_toolchain t = tl_toolchain_with_flags(tc, cflags && *cflags ? cflags : NULL);
  char **srcs = tl_calloc((size_t)n, sizeof *srcs);
  for (int i = 0; i < n; i++) {
    error_no[i] = TL_MEASURE_UNKNOWN_ERROR;
    msgs[i] = sigs[i] = NULL;
  }
  task_batch tb = {task, indices, so_paths, t, timeout_s, error_no, secs, msgs, sigs, srcs};
  tl_ctx *lctx = tl_ctx_new();
  lower_all(lctx, &tb, n, n_parallel);
  tl_ctx_free(lctx);
  run_jobs(n, n_parallel, compile_job, &tb);
  free(srcs);
  return TL_OK;
}

/* ---- running ------------------------------------------------------------------------ */

typedef int32_t (*kernel_fn)(void **args, int32_t nargs);
typedef const char *(*kernel_err_fn)(void);

typedef struct {
  int nargs;
  tl_array *arrs[TL_MEASURE_MAX_ARGS];
} argset;

static void argset_free(argset *s) {
  for (int i = 0; i < s->nargs; i++) tl_array_free(s->arrs[i]);
  s->nargs = 0;
}

/* Arrays of the signature, random-filled (same seed -> same values). */
static int argset_make(tl_ctx *ctx, const char *sig_json, argset *s) {
  s->nargs = 0;
  json_error_t je;
  json_t *root = json_loads(sig_json, 0, &je);
  if (!root || !json_is_object(root)) {
    json_decref(root);
    return tl_err(ctx, TL_E_PARSE, "measure: bad signature JSON: %s", je.text);
  }
  int rc = TL_OK;
  json_t *args = json_object_get(root, "args");
  if (!json_is_array(args) || json_array_size(args) > TL_MEASURE_MAX_ARGS) {
    rc = tl_err(ctx, TL_E_PARSE, "measure: signature needs an 'args' list (at most %d)", TL_MEASURE_MAX_ARGS);
    goto done;
  }
  for (size_t i = 0; i < json_array_size(args); i++) {
    json_t *a = json_array_get(args, i);
    json_t *shape = json_object_get(a, "shape");
    const char *dt = json_string_value(json_object_get(a, "dtype"));
    int dtype = TL_FLOAT32;
    if (dt && (rc = tl_dtype_parse(ctx, dt, &dtype))) goto done;
    if (!json_is_array(shape) || json_array_size(shape) > 16) {
      rc = tl_err(ctx, TL_E_PARSE, "measure: argument %zu has no shape list", i);
      goto done;
    }
    int64_t sh[16];
    int nd = (int)json_array_size(shape);
    double numel = 1;
    for (int d = 0; d < nd; d++) {
      sh[d] = json_integer_value(json_array_get(shape, d));
      if (sh[d] < 0) {
        rc = tl_err(ctx, TL_E_SHAPE, "measure: argument %zu has a negative extent", i);
        goto done;
      }
      numel *= (double)sh[d];
    }
    if (numel > 1e10) {
      rc = tl_err(ctx, TL_E_SHAPE, "measure: argument %zu is too large", i);
      goto done;
    }
    if ((rc = tl_array_empty(ctx, nd, sh, dtype, TL_DEV_CPU, 0, &s->arrs[s->nargs]))) goto done;
    s->nargs++;
    double hi = tl_dtype_is_float(dtype) ? 1.0 : dtype == TL_BOOL ? 2.0 : 10.0;
    if ((rc = tl_array_random(ctx, s->arrs[s->nargs - 1], 0, 0.0, hi, 1234 + i))) goto done;
  }
done:
  json_decref(root);
  if (rc) argset_free(s);
  return rc;
}

static void pack(argset *s, void **dl) {
  for (int i = 0; i < s->nargs; i++) dl[i] = tl_array_dltensor(s->arrs[i]);
}

static char *kernel_msg(void *h, const char *fname, int32_t code) {
  char ename[300];
  snprintf(ename, sizeof ename, "%s_error", fname);
  kernel_err_fn ef;
  *(void **)&ef = dlsym(h, ename);
  const char *m = ef ? ef() : NULL;
  if (m && *m) return tl_sprintf("kernel '%s' failed: %s", fname, m);
  return tl_sprintf("kernel '%s' failed with code %d", fname, (int)code);
}

static int open_kernel(const char *so_path, const char *fname, void **h, kernel_fn *fn, char **msg) {
  tl_kernel_heap_keep();
  *h = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
  if (!*h) {
    const char *e = dlerror();
    *msg = tl_sprintf("cannot load '%s': %s", so_path, e ? e : "unknown error");
    return -1;
  }
  void *p = dlsym(*h, fname);
  if (!p) {
    *msg = tl_sprintf("module '%s' has no function '%s'", so_path, fname);
    return -1;
  }
  *(void **)fn = p;
  return 0;
}

typedef struct {
  const char *so_path, *fname, *sig;
  int number, repeat;
  double min_repeat_ms;
  int cache_flush;
  const char *ref_so, *ref_fname;
  double rtol, atol;
  const char *cpus;            /* the CPU group to time on; NULL: TUNELUA_MEASURE_CPUS */
} run_args;

void tl_measure_child_reply(int fd, int error_no, int ncosts, const double *costs, const char *msg) {
  int32_t h[2] = {error_no, ncosts};
  tl_buf b = {0};
  tl_buf_putn(&b, (const char *)h, sizeof h);
  if (ncosts) tl_buf_putn(&b, (const char *)costs, sizeof(double) * (size_t)ncosts);
  if (msg) tl_buf_puts(&b, msg);
  tl_measure_put(fd, b.s, b.n);
  tl_buf_free(&b);
}

static int run_child(void *arg, int out_fd) {
  run_args *ra = arg;
  tl_measure_child_signals();
  tl_ctx *ctx = tl_ctx_new();
  argset s = {0}, r = {0};
  char *msg = NULL;
  void *h = NULL, *rh = NULL;
  kernel_fn fn, rfn;
  int32_t kcode = 0;
  double costs[TL_MEASURE_MAX_REPEAT];
  /* The kernels' thread count is TUNELUA_NUM_THREADS when set, whatever pool the tuning
  ** process sized for its own search: a tuner may search on every core while its trials are
  ** timed on a group of two. */
  tl_pool_use_env_threads();
  if (ra->cpus) {
    /* a group of its own from the start: the arrays are first touched there, and the
    ** reference run disturbs no other group's timing */
    char perr[256];
    if (tl_pin_cpus(ra->cpus, perr, sizeof perr)) {
      tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL,
                             tl_sprintf("measurement CPU group: %s", perr));
      return 0;
    }
  }
  if (argset_make(ctx, ra->sig, &s)) {
    tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
    return 0;
  }
  if (open_kernel(ra->so_path, ra->fname, &h, &fn, &msg)) {
    tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, msg);
    return 0;
  }
  void *dl[TL_MEASURE_MAX_ARGS];
  pack(&s, dl);
  if (ra->ref_so) {
    if (argset_make(ctx, ra->sig, &r) ||
        open_kernel(ra->ref_so, ra->ref_fname, &rh, &rfn, &msg)) {
      tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL,
                  msg ? msg : tl_errmsg(ctx));
      return 0;
    }
    void *rdl[TL_MEASURE_MAX_ARGS];
    pack(&r, rdl);
    int32_t kr = fn(dl, s.nargs);
    if (kr) {
      tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, kernel_msg(h, ra->fname, kr));
      return 0;
    }
    kr = rfn(rdl, r.nargs);
    if (kr) {
      tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL,
                  kernel_msg(rh, ra->ref_fname, kr));
      return 0;
    }
    for (int i = 0; i < s.nargs; i++) {
      int64_t worst = -1;
      double werr = 0;
      int c = tl_array_allclose(ctx, s.arrs[i], r.arrs[i], ra->rtol, ra->atol, &worst, &werr);
      if (c != 0) {
        char *m = tl_sprintf("wrong answer: argument %d differs from the reference at flat index "
                             "%lld (|a-b| = %g, got %g, expected %g; rtol %g)", i, (long long)worst,
                             werr, tl_array_get(s.arrs[i], worst), tl_array_get(r.arrs[i], worst),
                             ra->rtol);
        tl_measure_child_reply(out_fd, TL_MEASURE_WRONG_ANSWER, 0, NULL, m);
        return 0;
      }
    }
  }
  const char *pin = ra->cpus ? NULL : getenv("TUNELUA_MEASURE_CPUS");
  if (pin && *pin) {
    char perr[256];
    if (tl_pin_cpus(pin, perr, sizeof perr)) {
      tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL,
                             tl_sprintf("TUNELUA_MEASURE_CPUS: %s", perr));
      return 0;
    }
  }
  tl_pool_bind_caller();
  if (tl_kernel_time(*(void **)&fn, dl, s.nargs, ra->number, ra->repeat, ra->min_repeat_ms,
                         ra->cache_flush, costs, &kcode)) {
    tl_measure_child_reply(out_fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, kernel_msg(h, ra->fname, kcode));
    return 0;
  }
  tl_measure_child_reply(out_fd, TL_MEASURE_NO_ERROR, ra->repeat, costs, NULL);
  return 0;   /* the process ends here: no need to free */
}

/* A measurement child's result on stdout: int32 error_no, int32 n (<= repeat), n costs, then
** an optional message. Returns 1 and fills the outputs when o holds one, else 0. */
int tl_measure_read_reply(const char *o, size_t olen, int repeat, double *costs, int *ncosts,
                          int *error_no, char **msg) {
  if (olen < 8) return 0;
  int32_t h[2];
  memcpy(h, o, sizeof h);
  size_t need = 8 + sizeof(double) * (size_t)(h[1] > 0 ? h[1] : 0);
  if (h[1] < 0 || h[1] > repeat || olen < need) return 0;
  *error_no = h[0];
  *ncosts = h[1];
  memcpy(costs, o + 8, sizeof(double) * (size_t)h[1]);
  if (olen > need) *msg = tl_strndup(o + need, olen - need);
  return 1;
}

void tl_measure_ok_reply(const tl_proc_result *res, int repeat, const char *who, double *costs,
                         int *ncosts, int *error_no, char **msg) {
  size_t olen = 0, elen = 0;
  const char *o = tl_proc_stdout(res, &olen);
  const char *e = tl_proc_stderr(res, &elen);
  if (tl_measure_read_reply(o, olen, repeat, costs, ncosts, error_no, msg)) return;
  *error_no = TL_MEASURE_RUNTIME_DEVICE;
  *msg = tl_sprintf("%s ended without a result%s%.*s", who, elen ? ": " : "",
                    (int)(elen > 2000 ? 2000 : elen), e ? e : "");
}

/* What a measurement child's end means: its answer, or the crash, timeout or exit status as
** the trial's error (the same words for one run and a batch). */
static void run_outcome(const tl_proc_result *res, const char *fname, int repeat, double timeout_s,
                        double *costs, int *ncosts, int *error_no, char **msg) {
  size_t elen = 0;
  const char *e = tl_proc_stderr(res, &elen);
  switch (tl_proc_status(res)) {
  case TL_PROC_OK:
    tl_measure_ok_reply(res, repeat, "the measurement child", costs, ncosts, error_no, msg);
    break;
  case TL_PROC_SIGNAL: {
    int sig = tl_proc_code(res);
    *error_no = TL_MEASURE_RUNTIME_DEVICE;
    *msg = tl_sprintf("kernel '%s' crashed: signal %d (%s)%s%.*s", fname, sig, strsignal(sig),
                      elen ? "\n" : "", (int)(elen > 2000 ? 2000 : elen), e ? e : "");
    break;
  }
  case TL_PROC_TIMEOUT:
    *error_no = TL_MEASURE_RUN_TIMEOUT;
    *msg = tl_sprintf("kernel '%s' timed out after %.1f s", fname, timeout_s);
    break;
  default:
    *error_no = TL_MEASURE_RUNTIME_DEVICE;
    *msg = tl_sprintf("the measurement child exited with status %d%s%.*s", tl_proc_code(res),
                      elen ? ": " : "", (int)(elen > 2000 ? 2000 : elen), e ? e : "");
    break;
  }
}

TL_EXPORT int tl_measure_run(tl_ctx *ctx, const char *so_path, const char *fname,
                             const char *sig_json, int number, int repeat, double min_repeat_ms,
                             int cache_flush, double timeout_s, const char *ref_so_path,
                             const char *ref_fname, double rtol, double *costs, int *ncosts,
                             int *error_no, char **msg) {
  if (!so_path || !sig_json || !costs || !ncosts || !error_no || !msg)
    return tl_err(ctx, TL_E_ARG, "tl_measure_run: NULL argument");
  if (repeat < 1 || repeat > TL_MEASURE_MAX_REPEAT)
    return tl_err(ctx, TL_E_ARG, "tl_measure_run: repeat must be in [1, %d], got %d",
                  TL_MEASURE_MAX_REPEAT, repeat);
  *ncosts = 0;
  *msg = NULL;
  *error_no = TL_MEASURE_UNKNOWN_ERROR;
  char name[256];
  if (!fname || !*fname) {
    /* the signature names the kernel */
    json_t *root = json_loads(sig_json, 0, NULL);
    const char *nm = root ? json_string_value(json_object_get(root, "name")) : NULL;
    snprintf(name, sizeof name, "%s", nm ? nm : "default_function");
    json_decref(root);
    fname = name;
  }
  char rname[256];
  if (ref_so_path && (!ref_fname || !*ref_fname)) {
    snprintf(rname, sizeof rname, "%s", fname);
    ref_fname = rname;
  }
  run_args ra = {so_path, fname, sig_json, number, repeat, min_repeat_ms, cache_flush,
                 ref_so_path, ref_fname, rtol > 0 ? rtol : 1e-4, 1e-5};
  tl_proc_result *res = NULL;
  int rc = tl_proc_call(ctx, run_child, &ra, timeout_s, 1 << 16, &res);
  if (rc) return rc;
  run_outcome(res, fname, repeat, timeout_s, costs, ncosts, error_no, msg);
  tl_proc_result_free(res);
  return TL_OK;
}

/* The kernel's name: fname, or the one the signature gives, or "default_function". */
static const char *kernel_name(const char *fname, const char *sig_json, char name[256]) {
  if (fname && *fname) return fname;
  json_t *root = json_loads(sig_json, 0, NULL);
  const char *nm = root ? json_string_value(json_object_get(root, "name")) : NULL;
  snprintf(name, 256, "%s", nm ? nm : "default_function");
  json_decref(root);
  return name;
}

/* A pause of s seconds (none when s <= 0). */
static void pause_for(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Kernels over CPU groups: every measurement child is forked by this thread (see
** tl_proc_start) and pinned to a group no other child holds; tl_proc_wait_any watches
** all of them, so one that hangs holds only its own group, until its own deadline. */
TL_EXPORT int tl_measure_run_batch(tl_ctx *ctx, int n, const char *const *so_paths,
                                   const char *const *fnames, const char *const *sigs,
                                   const char *const *ref_so_paths,
                                   const char *const *ref_fnames, int number, int repeat,
                                   double min_repeat_ms, int cache_flush, double timeout_s,
                                   double rtol, int ngroups, const char *const *cpu_groups,
                                   double cooldown_s, double *costs, int *ncosts, int *error_no,
                                   double *secs, char **msgs) {
  if (n < 0 || (n > 0 && (!so_paths || !sigs || !costs || !ncosts || !error_no || !secs || !msgs)))
    return tl_err(ctx, TL_E_ARG, "tl_measure_run_batch: NULL argument");
  if (repeat < 1 || repeat > TL_MEASURE_MAX_REPEAT)
    return tl_err(ctx, TL_E_ARG, "tl_measure_run_batch: repeat must be in [1, %d], got %d",
                  TL_MEASURE_MAX_REPEAT, repeat);
  char gerr[512];
  if (tl_cpu_groups_check(cpu_groups, ngroups, gerr, sizeof gerr))
    return tl_err(ctx, TL_E_ARG, "tl_measure_run_batch: CPU groups: %s", gerr);
  if (n == 0) return TL_OK;
  typedef struct { char name[256], rname[256]; } names;
  names *nm = tl_calloc((size_t)n, sizeof *nm);
  run_args *ra = tl_calloc((size_t)n, sizeof *ra);
  for (int i = 0; i < n; i++) {
    ncosts[i] = 0;
    msgs[i] = NULL;
    secs[i] = 0;
    error_no[i] = TL_MEASURE_UNKNOWN_ERROR;
    if (!so_paths[i] || !sigs[i]) continue;
    const char *fname = kernel_name(fnames ? fnames[i] : NULL, sigs[i], nm[i].name);
    const char *ref_so = ref_so_paths ? ref_so_paths[i] : NULL;
    const char *ref_fname = ref_fnames ? ref_fnames[i] : NULL;
    if (ref_so && (!ref_fname || !*ref_fname)) {
      snprintf(nm[i].rname, sizeof nm[i].rname, "%s", fname);
      ref_fname = nm[i].rname;
    }
    ra[i] = (run_args){so_paths[i], fname, sigs[i], number, repeat, min_repeat_ms, cache_flush,
                       ref_so, ref_fname, rtol > 0 ? rtol : 1e-4, 1e-5, NULL};
  }
  int G = ngroups;
  tl_proc_child **kids = tl_calloc((size_t)G, sizeof *kids);
  int *item = tl_calloc((size_t)G, sizeof *item);
  double *deadline = tl_calloc((size_t)G, sizeof *deadline);
  double *free_at = tl_calloc((size_t)G, sizeof *free_at);
  int next = 0, running = 0, rc = TL_OK;
  for (;;) {
    double now = tl_now();
    for (int g = 0; g < G; g++) {
      while (!kids[g] && next < n && now >= free_at[g]) {
        int i = next++;
        if (!ra[i].so_path) {
          msgs[i] = tl_sprintf("tl_measure_run_batch: kernel %d has no module or signature", i);
          continue;
        }
        ra[i].cpus = cpu_groups[g];
        tl_clearerr(ctx);
        if (tl_proc_start(ctx, run_child, &ra[i], &kids[g]) != TL_OK) {
          msgs[i] = tl_strdup(tl_errmsg(ctx));
          kids[g] = NULL;
          continue;
        }
        item[g] = i;
        deadline[g] = timeout_s > 0 ? tl_now() + timeout_s : 0;
        running++;
      }
    }
    if (!running && next >= n) break;
    /* an idle group that cools down: wake when it may take the next kernel */
    double wait = 3600;
    if (next < n)
      for (int g = 0; g < G; g++)
        if (!kids[g]) wait = TL_MIN(wait, free_at[g] - now);
    if (!running) {
      pause_for(wait);
      continue;
    }
    int g = -1;
    tl_clearerr(ctx);
    rc = tl_proc_wait_any(ctx, kids, G, deadline, 1 << 16, TL_MAX(wait, 0.0), &g);
    if (rc != TL_OK) break;
    if (g < 0) continue;
    int i = item[g];
    double left = 0;
    if (deadline[g] > 0) left = TL_MAX(deadline[g] - tl_now(), 1e-6);
    tl_proc_result *res = NULL;
    tl_clearerr(ctx);
    if (tl_proc_wait(ctx, kids[g], left, 1 << 16, &res) != TL_OK) {
      msgs[i] = tl_strdup(tl_errmsg(ctx));
    } else {
      run_outcome(res, ra[i].fname, repeat, timeout_s, costs + (size_t)i * (size_t)repeat,
                  &ncosts[i], &error_no[i], &msgs[i]);
      secs[i] = tl_proc_seconds(res);
    }
    tl_proc_result_free(res);
    kids[g] = NULL;
    running--;
    free_at[g] = tl_now() + cooldown_s;
  }
  if (rc != TL_OK) {                /* the machinery failed: end every child still running */
    char why[TL_ERRMSG_MAX];
    snprintf(why, sizeof why, "%s", tl_errmsg(ctx));
    for (int g = 0; g < G; g++) {
      if (!kids[g]) continue;
      tl_proc_result *res = NULL;
      tl_proc_wait(ctx, kids[g], 1e-6, 1 << 16, &res);
      tl_proc_result_free(res);
    }
    rc = tl_err(ctx, rc, "%s", why);
  }
  free(kids);
  free(item);
  free(deadline);
  free(free_at);
  free(ra);
  free(nm);
  return rc;
}
