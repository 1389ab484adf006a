/*
** measure_opencl.c -- measuring OpenCL kernels (docs/measure_opencl.md), one path for the
** local runner and the RPC session. The module comes either as a lowered function (the
** local runner) or as OpenCL C + manifest (uploaded to a device's server). By default the
** trials run in one persistent worker, an exec'd tunelua-measure-opencl --worker that starts
** the driver once and serves many trials (below, "the persistent worker"); otherwise in one
** child per trial. Either way a trial goes:
**
**   'b'  build the module for the device (SIGALRM after the build limit; a work-group the
**        device cannot run is INSTANTIATION_ERROR, a driver refusal COMPILE_DEVICE), then
**        write 'c' and the driver's compile seconds;
**   'r'  allocate the module's arguments with seeded random values and launch it once. The
**        first launch gets the build limit on top of the run limit: some drivers (pocl)
**        generate a kernel's device code only when it is first enqueued. Then, with a
**        reference (a module built in the same child, or the arguments' bytes that a
**        reference run wrote to a file), run again and compare every argument
**        (WRONG_ANSWER), and time with the device's time evaluator.
**
** The phase bytes come before the child's answer (tl_measure_child_reply), so the parent
** tells a build timeout (6) from a run timeout (7) and "crashed while compiling" from
** "crashed while running"; the worker writes the same bytes, its answers framed. OpenCL
** drivers are not fork-safe: while the calling process has not initialized OpenCL, the device
** query, the compiles ahead with the compile pool off (by default a pool of exec'd workers
** compiles them, below) and, with the worker off, the trials run in forked children. Once
** it has (it built or ran an OpenCL function itself), a forked child would inherit the
** initialized driver, so every such child is a freshly exec'd tunelua-measure-opencl instead:
** the job (OpenCL C + manifest, limits, reference) goes to it as a JSON file, it runs the
** same child code and answers on its stdout with the same bytes (tl_measure_opencl_exec_main).
*/
#define _GNU_SOURCE
#include "../base/base.h"
#include "../ir/ir.h"
#include "../runtime/runtime.h"
#include "measure.h"
#include "../tunelua.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  tl_lowered *f;              /* the module: a lowered function, or */
  const char *src, *man;      /* OpenCL C + manifest */
  const char *fname;          /* the kernel's name, for messages */
  const char *rsrc, *rman;    /* check_correctness: a reference module built in the child, or */
  const char *ref_path;       /* the reference's argument bytes */
  const char *out_path;       /* a reference run: write the arguments' bytes here, no timing */
  const char *const *arg_names; /* without f: the arguments' names (n_arg_names, may be NULL) */
  int n_arg_names;
  int compile_only;           /* a compile ahead: build the module, answer nothing */
  int dev, number, repeat;
  double min_repeat_ms, build_s, run_s, rtol, atol;
} ocl_job;

static void phase(int fd, char c) { tl_measure_put(fd, &c, 1); }

/* Set in the persistent worker: answers are framed ('a', uint32 length, the answer), so that
** one stream carries many. */
static int framed;

/* The trial's answer (tl_measure_child_reply's bytes), framed in the worker. */
static void answer(int fd, int error_no, int ncosts, const double *costs, const char *msg) {
  if (!framed) {
    tl_measure_child_reply(fd, error_no, ncosts, costs, msg);
  } else {
    int32_t h[2] = {error_no, ncosts};
    tl_buf b = {0};
    tl_buf_putn(&b, "a\0\0\0\0", 5);
    tl_buf_putn(&b, (const char *)h, sizeof h);
    if (ncosts) tl_buf_putn(&b, (const char *)costs, sizeof(double) * (size_t)ncosts);
    if (msg) tl_buf_puts(&b, msg);
    uint32_t len = (uint32_t)(b.n - 5);
    memcpy(b.s + 1, &len, sizeof len);
    tl_measure_put(fd, b.s, b.n);
    tl_buf_free(&b);
  }
}

/* An error answer with a malloc'd message, freed. */
static void answer_free(int fd, int error_no, char *msg) {
  answer(fd, error_no, 0, NULL, msg);
  free(msg);
}

static int build_error_no(int rc) {
  return rc == TL_E_RUNTIME ? TL_MEASURE_INSTANTIATION_ERROR : TL_MEASURE_COMPILE_DEVICE;
}

static int build_module(tl_ctx *ctx, tl_lowered *f, const char *src, const char *man, int dev,
                        tl_ocl_module **m) {
  return f ? tl_opencl_build(ctx, f, dev, m) : tl_ocl_module_from_source(ctx, src, man, dev, m);
}

static void free_arrays(tl_array **a, int n) {
  for (int i = 0; i < n; i++) {
    tl_array_free(a[i]);
    a[i] = NULL;
  }
}

/* Host arrays of m's arguments (its manifest), random (seed 1000 + i), and their device copies;
** *n counts the slots to free, also on an error. */
static int module_args(tl_ctx *ctx, tl_ocl_module *m, int dev, tl_array **host, tl_array **devs,
                       int *n) {
  *n = 0;
  char *man = NULL;
  int rc = tl_ocl_module_manifest(ctx, m, &man);
  if (rc) return rc;
  json_t *root = json_loads(man, 0, NULL);
  free(man);
  json_t *args = json_object_get(root, "args");
  size_t na = json_array_size(args);
  if (!na || na > TL_MEASURE_MAX_ARGS) {
    json_decref(root);
    return tl_err(ctx, TL_E_PARSE, "measure: the module has %zu arguments (expected 1 to %d)", na,
                  TL_MEASURE_MAX_ARGS);
  }
  for (size_t i = 0; i < na && !rc; i++) {
    json_t *a = json_array_get(args, i);
    json_t *sh = json_object_get(a, "shape");
    int dtype = TL_FLOAT32;
    rc = tl_dtype_parse(ctx, json_string_value(json_object_get(a, "dtype")), &dtype);
    int64_t shape[16];
    int nd = (int)json_array_size(sh);
    if (nd > 16) nd = 16;
    for (int d = 0; d < nd; d++) shape[d] = json_integer_value(json_array_get(sh, d));
    if (!rc) rc = tl_array_empty(ctx, nd, shape, dtype, TL_DEV_CPU, 0, &host[i]);
    if (rc) break;
    *n = (int)i + 1;
    double hi = tl_dtype_is_float(dtype) ? 1.0 : dtype == TL_BOOL ? 2.0 : 10.0;
    rc = tl_array_random(ctx, host[i], 0, 0.0, hi, 1000 + i);
    if (!rc) rc = tl_array_empty(ctx, nd, shape, dtype, TL_DEV_OPENCL, dev, &devs[i]);
    if (!rc) rc = tl_array_copyto(ctx, host[i], devs[i]);
  }
  json_decref(root);
  return rc;
}

/* " ('A')": argument i's name when known (the lowered function's, or the job's), else "". */
static const char *arg_label(const ocl_job *j, int i, char *buf, size_t cap) {
  buf[0] = 0;
  if (j->f && i < j->f->nargs) {
    const tl_buffer *b = tl_ir_buffer(j->f->ir, j->f->arg_bufs[i]);
    if (b->name) snprintf(buf, cap, " ('%s')", b->name);
  } else if (!j->f && j->arg_names && i < j->n_arg_names && j->arg_names[i] &&
             *j->arg_names[i]) {
    snprintf(buf, cap, " ('%s')", j->arg_names[i]);
  }
  return buf;
}

/* The reference's outputs on the same inputs, as host arrays like host[0..n): from the
** reference module rm, or from the bytes at j->ref_path. 0, or the error answered. want[]
** is the caller's to free (n slots). */
static int reference_outputs(tl_ctx *ctx, int fd, const ocl_job *j, tl_ocl_module *rm,
                             tl_array **host, int n, tl_array **want) {
  static const char *other = "the reference has other arguments than the config";
  if (rm) {
    tl_array *rh[TL_MEASURE_MAX_ARGS] = {0}, *rd[TL_MEASURE_MAX_ARGS] = {0};
    int rn = 0, bad = 0;
    if (module_args(ctx, rm, j->dev, rh, rd, &rn) || rn != n) {
      answer_free(fd, TL_MEASURE_WRONG_ANSWER, tl_sprintf("check_correctness: %s", other));
      bad = 1;
    } else if (tl_ocl_module_call(ctx, rm, rd, rn)) {
      answer_free(fd, TL_MEASURE_WRONG_ANSWER,
             tl_sprintf("check_correctness: the reference failed: %s", tl_errmsg(ctx)));
      bad = 1;
    }
    for (int i = 0; i < n && !bad; i++) {
      const DLTensor *t = tl_array_dltensor(host[i]);
      if (tl_array_empty(ctx, t->ndim, t->shape, tl_array_dtype(host[i]), TL_DEV_CPU, 0, &want[i]) ||
          tl_array_copyto(ctx, rd[i], want[i])) {
        answer(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
        bad = 1;
      }
    }
    free_arrays(rh, rn);
    free_arrays(rd, rn);
    return bad ? -1 : 0;
  }
  char *data = NULL;
  size_t len = 0, off = 0;
  if (tl_read_file(ctx, j->ref_path, &data, &len)) {
    answer(fd, TL_MEASURE_UNKNOWN_ERROR, 0, NULL, tl_errmsg(ctx));
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const DLTensor *t = tl_array_dltensor(host[i]);
    size_t nb = tl_array_nbytes(host[i]);
    if (off + nb > len) break;
    if (tl_array_empty(ctx, t->ndim, t->shape, tl_array_dtype(host[i]), TL_DEV_CPU, 0, &want[i])) {
      free(data);
      answer(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
      return -1;
    }
    memcpy(tl_array_data(want[i]), data + off, nb);
    off += nb;
  }
  free(data);
  if (off != len || (n && !want[n - 1])) {
    answer(fd, TL_MEASURE_WRONG_ANSWER, 0, NULL, other);
    return -1;
  }
  return 0;
}

/* One trial (docs/measure_opencl.md): phases and the answer on fd. Everything it allocates is
** freed before it returns, and its alarm is off: the worker runs many. */
static void run_job(const ocl_job *j, int fd) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ocl_module *m = NULL, *rm = NULL;
  tl_array *host[TL_MEASURE_MAX_ARGS] = {0}, *devs[TL_MEASURE_MAX_ARGS] = {0};
  tl_array *want[TL_MEASURE_MAX_ARGS] = {0};
  double costs[TL_MEASURE_MAX_REPEAT];
  int n = 0, rc;
  char label[160];
  /* build */
  phase(fd, 'b');
  tl_alarm_in(j->build_s);
  rc = build_module(ctx, j->f, j->src, j->man, j->dev, &m);
  if (rc) {
    answer(fd, build_error_no(rc), 0, NULL, tl_errmsg(ctx));
    goto done;
  }
  if (j->rsrc && tl_ocl_module_from_source(ctx, j->rsrc, j->rman, j->dev, &rm)) {
    answer_free(fd, TL_MEASURE_WRONG_ANSWER,
           tl_sprintf("check_correctness: the reference does not build: %s", tl_errmsg(ctx)));
    goto done;
  }
  double cs = tl_ocl_module_compile_seconds(m);
  phase(fd, 'c');
  tl_measure_put(fd, &cs, sizeof cs);
  /* run: the first launch with the build limit on top */
  tl_alarm_in(0);
  phase(fd, 'r');
  tl_alarm_in(j->build_s + j->run_s);
  if (module_args(ctx, m, j->dev, host, devs, &n) || tl_ocl_module_call(ctx, m, devs, n)) {
    answer(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
    goto done;
  }
  tl_alarm_in(j->run_s);
  if (j->out_path || rm || j->ref_path) {
    if (tl_ocl_module_call(ctx, m, devs, n)) {
      answer(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
      goto done;
    }
    for (int i = 0; i < n; i++)
      if (tl_array_copyto(ctx, devs[i], host[i])) {
        answer(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
        goto done;
      }
  }
  if (j->out_path) {
    tl_buf b = {0};
    for (int i = 0; i < n; i++)
      tl_buf_putn(&b, tl_array_data(host[i]), tl_array_nbytes(host[i]));
    rc = tl_write_file_atomic(ctx, j->out_path, b.s ? b.s : "", b.n);
    tl_buf_free(&b);
    if (rc) answer(fd, TL_MEASURE_UNKNOWN_ERROR, 0, NULL, tl_errmsg(ctx));
    else answer(fd, TL_MEASURE_NO_ERROR, 0, NULL, NULL);
    goto done;
  }
  if (rm || j->ref_path) {
    if (reference_outputs(ctx, fd, j, rm, host, n, want)) goto done;
    for (int i = 0; i < n; i++) {
      int64_t worst = -1;
      double werr = 0;
      int c = tl_array_allclose(ctx, host[i], want[i], j->rtol, j->atol, &worst, &werr);
      if (c > 0) {
        answer_free(fd, TL_MEASURE_UNKNOWN_ERROR,
               tl_sprintf("comparing argument %d with the reference: %s", i + 1, tl_errmsg(ctx)));
        goto done;
      }
      if (c != 0) {
        answer_free(fd, TL_MEASURE_WRONG_ANSWER,
               tl_sprintf("wrong answer: argument %d%s differs from the reference at flat "
                          "index %lld (|diff| = %g: got %.9g, expected %.9g)", i + 1,
                          arg_label(j, i, label, sizeof label), (long long)worst, werr,
                          tl_array_get(host[i], worst), tl_array_get(want[i], worst)));
        goto done;
      }
    }
  }
  if (tl_ocl_module_time(ctx, m, devs, n, j->number, j->repeat, j->min_repeat_ms, 0, costs)) {
    answer(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
    goto done;
  }
  answer(fd, TL_MEASURE_NO_ERROR, j->repeat, costs, NULL);
done:
  tl_alarm_in(0);
  free_arrays(want, n);
  free_arrays(devs, n);
  free_arrays(host, n);
  tl_ocl_module_free(rm);
  tl_ocl_module_free(m);
  tl_ctx_free(ctx);
}

static int ocl_child(void *arg, int fd) {
  tl_measure_child_signals();
  run_job(arg, fd);
  return 0;   /* the process ends here */
}

/* Run job j in a freshly exec'd child (exec_job) or in the persistent worker (worker_job);
** a refusal of the code generator is returned as *gen_rc. */
static int exec_job(tl_ctx *ctx, const ocl_job *j, double limit_s, int *gen_rc,
                    tl_proc_result **res);
static int worker_job(tl_ctx *ctx, const ocl_job *j, double limit_s, int *gen_rc,
                      double *costs, int *ncosts, int *error_no, char **msg, double *secs);
static int worker_enabled(void);
static long long jint(json_t *o, const char *key, long long dflt);

/* How a trial's process ended: its status (TL_PROC_*) and code, the bytes it answered
** (phases, then the answer), its stderr, its wall seconds. */
typedef struct {
  int st, code;
  const char *o, *e;
  size_t olen, elen;
  double seconds;
} trial_end;

/* How the trial of job j ended (t), as *error_no and *msg; secs as ocl_measure's. */
static void outcome(const ocl_job *j, const trial_end *t, double *costs, int *ncosts,
                    int *error_no, char **msg, double *secs) {
  const char *fname = j->fname ? j->fname : "kernel";
  size_t olen = t->olen, elen = t->elen;
  const char *o = t->o, *e = t->e;
  char ph = 0;
  double compile_s = 0;
  while (olen && (*o == 'b' || *o == 'r' || (*o == 'c' && olen > sizeof(double)))) {
    if (*o == 'c') {
      memcpy(&compile_s, o + 1, sizeof compile_s);
      o += sizeof(double);
      olen -= sizeof(double);
    } else {
      ph = *o;
    }
    o++;
    olen--;
  }
  if (secs) {
    secs[0] = t->seconds;
    secs[1] = compile_s;
  }
  int st = t->st;
  int sig = st == TL_PROC_SIGNAL ? t->code : 0;
  int el = (int)(elen > 2000 ? 2000 : elen);
  if (!e) e = "";
  if (st == TL_PROC_OK && tl_measure_read_reply(o, olen, j->repeat, costs, ncosts, error_no, msg)) {
  } else if (st == TL_PROC_TIMEOUT || sig == SIGALRM) {
    if (ph == 'r') {
      *error_no = TL_MEASURE_RUN_TIMEOUT;
      *msg = tl_sprintf("kernel '%s' timed out after %g s", fname, j->run_s);
    } else {
      *error_no = TL_MEASURE_BUILD_TIMEOUT;
      *msg = tl_sprintf("kernel '%s': compiling for the device timed out after %g s", fname,
                        j->build_s);
    }
  } else if (st == TL_PROC_SIGNAL) {
    *error_no = TL_MEASURE_RUNTIME_DEVICE;
    *msg = tl_sprintf("kernel '%s' crashed while %s: signal %d (%s)%s%.*s", fname,
                      ph == 'r' ? "running" : "compiling", sig, strsignal(sig), el ? "\n" : "",
                      el, e);
  } else {
    *error_no = TL_MEASURE_RUNTIME_DEVICE;
    *msg = tl_sprintf("kernel '%s': the measurement child ended without a result (status %d, "
                      "code %d)%s%.*s", fname, st, t->code, el ? ": " : "", el, e);
  }
}

static void proc_end(const tl_proc_result *res, trial_end *t) {
  t->st = tl_proc_status(res);
  t->code = tl_proc_code(res);
  t->o = tl_proc_stdout(res, &t->olen);
  t->e = tl_proc_stderr(res, &t->elen);
  t->seconds = tl_proc_seconds(res);
}

static int ocl_measure(tl_ctx *ctx, const ocl_job *j, double *costs, int *ncosts, int *error_no,
                       char **msg, double *secs) {
  *ncosts = 0;
  *msg = NULL;
  *error_no = TL_MEASURE_UNKNOWN_ERROR;
  tl_proc_result *res = NULL;
  double limit = 2 * j->build_s + j->run_s + 1;
  int rc, gen = TL_OK;
  if (worker_enabled()) {
    /* the persistent worker: the driver starts once for many trials */
    rc = worker_job(ctx, j, limit, &gen, costs, ncosts, error_no, msg, secs);
  } else if (tl_opencl_touched()) {
    /* a forked child would inherit this process's driver: a fresh program measures */
    rc = exec_job(ctx, j, limit, &gen, &res);
  } else {
    rc = tl_proc_call(ctx, ocl_child, (void *)j, limit, 1 << 16, &res);
  }
  if (!rc && gen) {   /* the code generator refused f: what the child's build would say */
    *error_no = build_error_no(gen);
    *msg = tl_strdup(tl_errmsg(ctx));
    tl_clearerr(ctx);
    if (secs) secs[0] = secs[1] = 0;
    return TL_OK;
  }
  if (rc || !res) return rc;
  trial_end t;
  proc_end(res, &t);
  outcome(j, &t, costs, ncosts, error_no, msg, secs);
  tl_proc_result_free(res);
  return TL_OK;
}

static int check_times(tl_ctx *ctx, const char *fn, int repeat, int dev, double *build_s,
                       double *run_s) {
  if (repeat < 1 || repeat > TL_MEASURE_MAX_REPEAT)
    return tl_err(ctx, TL_E_ARG, "%s: repeat must be in [1, %d], got %d", fn,
                  TL_MEASURE_MAX_REPEAT, repeat);
  if (dev < 0 || dev > 255) return tl_err(ctx, TL_E_ARG, "%s: bad device %d", fn, dev);
  if (!(*build_s > 0)) *build_s = 10;
  if (!(*run_s > 0)) *run_s = 10;
  return TL_OK;
}

TL_EXPORT int tl_measure_opencl_run(tl_ctx *ctx, tl_lowered *f, const char *fname, int dev,
                                    int number, int repeat, double min_repeat_ms,
                                    double build_timeout_s, double run_timeout_s,
                                    const char *ref_path, double rtol, double *costs, int *ncosts,
                                    int *error_no, char **msg, double *secs) {
  if (!f || !costs || !ncosts || !error_no || !msg)
    return tl_err(ctx, TL_E_ARG, "tl_measure_opencl_run: NULL argument");
  int rc = check_times(ctx, "tl_measure_opencl_run", repeat, dev, &build_timeout_s, &run_timeout_s);
  if (rc) return rc;
  ocl_job j = {.f = f, .fname = fname, .ref_path = ref_path, .dev = dev, .number = number,
               .repeat = repeat, .min_repeat_ms = min_repeat_ms, .build_s = build_timeout_s,
               .run_s = run_timeout_s, .rtol = rtol > 0 ? rtol : 1e-4, .atol = 1e-5};
  return ocl_measure(ctx, &j, costs, ncosts, error_no, msg, secs);
}

TL_EXPORT int tl_measure_opencl_reference(tl_ctx *ctx, tl_lowered *f, const char *fname, int dev,
                                          double build_timeout_s, double run_timeout_s,
                                          const char *out_path, int *error_no, char **msg) {
  if (!f || !out_path || !error_no || !msg)
    return tl_err(ctx, TL_E_ARG, "tl_measure_opencl_reference: NULL argument");
  int rc = check_times(ctx, "tl_measure_opencl_reference", 1, dev, &build_timeout_s, &run_timeout_s);
  if (rc) return rc;
  ocl_job j = {.f = f, .fname = fname, .out_path = out_path, .dev = dev, .number = 1, .repeat = 1,
               .build_s = build_timeout_s, .run_s = run_timeout_s};
  double costs[1];
  int nc = 0;
  return ocl_measure(ctx, &j, costs, &nc, error_no, msg, NULL);
}

static int read_text(tl_ctx *ctx, const char *path, const char *what, char **out) {
  size_t len = 0;
  *out = NULL;
  if (!path) return tl_err(ctx, TL_E_ARG, "measure: no %s", what);
  int rc = tl_read_file(ctx, path, out, &len);
  if (rc) return rc;
  if (strlen(*out) != len) {
    free(*out);
    *out = NULL;
    return tl_err(ctx, TL_E_PARSE, "measure: the %s contains NUL bytes", what);
  }
  return TL_OK;
}

TL_EXPORT int tl_measure_run_opencl(tl_ctx *ctx, const char *source_path, const char *manifest_path,
                                    int dev, int number, int repeat, double min_repeat_ms,
                                    double build_timeout_s, double run_timeout_s,
                                    const char *ref_source_path, const char *ref_manifest_path,
                                    double rtol, double *costs, int *ncosts, int *error_no,
                                    char **msg) {
  if (!costs || !ncosts || !error_no || !msg)
    return tl_err(ctx, TL_E_ARG, "tl_measure_run_opencl: NULL argument");
  *ncosts = 0;
  *msg = NULL;
  *error_no = TL_MEASURE_UNKNOWN_ERROR;
  int rc = check_times(ctx, "tl_measure_run_opencl", repeat, dev, &build_timeout_s, &run_timeout_s);
  if (rc) return rc;
  char *src = NULL, *man = NULL, *rsrc = NULL, *rman = NULL;
  rc = read_text(ctx, source_path, "OpenCL source", &src);
  if (!rc) rc = read_text(ctx, manifest_path, "manifest", &man);
  if (!rc) rc = tl_ocl_manifest_check(ctx, src, man);
  if (!rc && ref_source_path) {
    rc = read_text(ctx, ref_source_path, "reference source", &rsrc);
    if (!rc) rc = read_text(ctx, ref_manifest_path, "reference manifest", &rman);
    if (!rc && (rc = tl_ocl_manifest_check(ctx, rsrc, rman)))
      tl_err_prefix(ctx, "the reference: ");
  }
  if (!rc) {
    char fname[160] = "kernel";   /* the function's name, for messages */
    json_t *root = json_loads(man, 0, NULL);
    const char *nm = json_string_value(json_object_get(root, "name"));
    if (nm) snprintf(fname, sizeof fname, "%s", nm);
    json_decref(root);
    ocl_job j = {.src = src, .man = man, .fname = fname, .rsrc = rsrc, .rman = rman, .dev = dev,
                 .number = number, .repeat = repeat, .min_repeat_ms = min_repeat_ms,
                 .build_s = build_timeout_s, .run_s = run_timeout_s,
                 .rtol = rtol > 0 ? rtol : 1e-4, .atol = 1e-5};
    rc = ocl_measure(ctx, &j, costs, ncosts, error_no, msg, NULL);
  }
  free(src);
  free(man);
  free(rsrc);
  free(rman);
  return rc;
}

/* ---- a freshly exec'd child, or the persistent worker ------------------------------------ */

/* The program tunelua-measure-opencl: next to the library (the build tree, and tl_tests next
** to it), else the installed libexec directory. */
static int exe_path(tl_ctx *ctx, char *out, size_t cap) {
  Dl_info di;
  char dir[PATH_MAX];
  dir[0] = 0;
  if (dladdr((void *)&tl_measure_opencl_run, &di) && di.dli_fname && realpath(di.dli_fname, dir)) {
    char *sl = strrchr(dir, '/');
    if (sl) *sl = 0;
    snprintf(out, cap, "%s/tunelua-measure-opencl", dir);
    if (access(out, X_OK) == 0) return TL_OK;
  }
  snprintf(out, cap, "%s/tunelua-measure-opencl", TL_LIBEXECDIR_INSTALLED);
  if (access(out, X_OK) == 0) return TL_OK;
  return tl_err(ctx, TL_E_RUNTIME, "measure: OpenCL trials run in a tunelua-measure-opencl "
                "process (a persistent worker, or a fresh one per trial once this process has "
                "initialized OpenCL), and that program is neither in '%s' nor in '%s'",
                dir[0] ? dir : "(the library's directory)", TL_LIBEXECDIR_INSTALLED);
}

static void jset_str(json_t *o, const char *k, const char *v) {
  if (v) json_object_set_new(o, k, json_string(v));
}

/* The job of j as JSON text (its module as OpenCL C + manifest; malloc'd), or an error. With
** f, src and man are generated here; a refusal of the code generator is returned as *gen_rc
** (and *text stays NULL). */
static int job_text(tl_ctx *ctx, const ocl_job *j, int unlink_after_read, char **text,
                    int *gen_rc) {
  char *src = NULL, *man = NULL;
  *text = NULL;
  *gen_rc = TL_OK;
  if (j->f && (*gen_rc = tl_opencl_source_manifest(ctx, j->f, &src, &man)) != TL_OK) return TL_OK;
  json_t *o = json_object();
  jset_str(o, "source", j->f ? src : j->src);
  jset_str(o, "manifest", j->f ? man : j->man);
  jset_str(o, "fname", j->fname);
  jset_str(o, "ref_source", j->rsrc);
  jset_str(o, "ref_manifest", j->rman);
  jset_str(o, "ref_path", j->ref_path);
  jset_str(o, "out_path", j->out_path);
  if (j->f) {   /* the arguments' names, for a wrong answer's message */
    json_t *names = json_array();
    for (int i = 0; i < j->f->nargs; i++) {
      const tl_buffer *b = tl_ir_buffer(j->f->ir, j->f->arg_bufs[i]);
      json_array_append_new(names, json_string(b->name ? b->name : ""));
    }
    json_object_set_new(o, "arg_names", names);
  }
  json_object_set_new(o, "compile_only", json_boolean(j->compile_only));
  json_object_set_new(o, "unlink", json_boolean(unlink_after_read));
  json_object_set_new(o, "dev", json_integer(j->dev));
  json_object_set_new(o, "number", json_integer(j->number));
  json_object_set_new(o, "repeat", json_integer(j->repeat));
  json_object_set_new(o, "min_repeat_ms", json_real(j->min_repeat_ms));
  json_object_set_new(o, "build_s", json_real(j->build_s));
  json_object_set_new(o, "run_s", json_real(j->run_s));
  json_object_set_new(o, "rtol", json_real(j->rtol));
  json_object_set_new(o, "atol", json_real(j->atol));
  free(src);
  free(man);
  char *t = json_object_size(o) ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!t || !strstr(t, "\"source\"") || !strstr(t, "\"manifest\""))
    return free(t), tl_err(ctx, TL_E_ARG, "measure: the OpenCL job cannot be written as JSON "
                           "(a string that is not UTF-8?)");
  *text = t;
  return TL_OK;
}

/* The job file of j: path, or an error; *gen_rc as job_text's. */
static int write_job(tl_ctx *ctx, const ocl_job *j, int unlink_after_read, char *path, size_t cap,
                     int *gen_rc) {
  static unsigned counter;
  char *text = NULL;
  int rc = job_text(ctx, j, unlink_after_read, &text, gen_rc);
  if (rc || *gen_rc) return rc;
  const char *base = getenv("TUNELUA_MEASURE_DIR");
  if (!base || !*base) base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(path, cap, "%s/tunelua-ocljob-%d-%u.json", base, (int)getpid(),
           __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
  rc = tl_write_file_atomic(ctx, path, text, strlen(text));
  free(text);
  return rc;
}

static int exec_job(tl_ctx *ctx, const ocl_job *j, double limit_s, int *gen_rc,
                    tl_proc_result **res) {
  char exe[PATH_MAX + 64], path[PATH_MAX];
  int rc = exe_path(ctx, exe, sizeof exe);
  if (!rc) rc = write_job(ctx, j, 0, path, sizeof path, gen_rc);
  if (rc || *gen_rc) return rc;
  const char *argv[] = {exe, path, NULL};
  rc = tl_proc_exec(ctx, argv, limit_s, 1 << 16, res);
  unlink(path);
  return rc;
}

/* A job object (job_text's) as j; its strings live as long as o. names: room for
** TL_MEASURE_MAX_ARGS argument names. An error names `where`. */
static int job_parse(tl_ctx *ctx, json_t *o, const char *where, ocl_job *j, const char **names) {
  const char *src = json_string_value(json_object_get(o, "source"));
  const char *man = json_string_value(json_object_get(o, "manifest"));
  if (!json_is_object(o) || !src || !man)
    return tl_err(ctx, TL_E_PARSE, "%s: expected an object with \"source\" and \"manifest\" "
                  "strings", where);
  json_t *an = json_object_get(o, "arg_names");
  int nn = 0;
  for (size_t i = 0; i < json_array_size(an) && nn < TL_MEASURE_MAX_ARGS; i++)
    names[nn++] = json_string_value(json_array_get(an, i));
  *j = (ocl_job){
      .src = src, .man = man, .fname = json_string_value(json_object_get(o, "fname")),
      .rsrc = json_string_value(json_object_get(o, "ref_source")),
      .rman = json_string_value(json_object_get(o, "ref_manifest")),
      .ref_path = json_string_value(json_object_get(o, "ref_path")),
      .out_path = json_string_value(json_object_get(o, "out_path")),
      .arg_names = names, .n_arg_names = nn,
      .compile_only = json_is_true(json_object_get(o, "compile_only")),
      .dev = (int)jint(o, "dev", 0), .number = (int)jint(o, "number", 1),
      .repeat = (int)jint(o, "repeat", 1),
      .min_repeat_ms = json_number_value(json_object_get(o, "min_repeat_ms")),
      .build_s = json_number_value(json_object_get(o, "build_s")),
      .run_s = json_number_value(json_object_get(o, "run_s")),
      .rtol = json_number_value(json_object_get(o, "rtol")),
      .atol = json_number_value(json_object_get(o, "atol"))};
  int rc = check_times(ctx, where, j->repeat, j->dev, &j->build_s, &j->run_s);
  if (!rc && !!j->rsrc != !!j->rman)
    rc = tl_err(ctx, TL_E_ARG, "%s: a reference source needs its manifest", where);
  return rc;
}

/* All n bytes from fd: n, or fewer at end of file or on an error. */
static size_t read_full(int fd, void *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  return got;
}

#define WORKER_MAX_JOB ((uint32_t)1 << 30)

/* tunelua-measure-opencl --worker: jobs on stdin (uint32 length, then job_text's JSON), each
** answered on stdout with the phase bytes and a framed answer; ends at end of input. A job
** that cannot be read is answered UNKNOWN_ERROR; a kernel that crashes or hangs ends the
** process (its parent reports the trial and starts another worker). */
static int worker_main(void) {
  int out = dup(1);            /* the answers; the driver's chatter on stdout goes to stderr */
  if (out < 0 || dup2(2, 1) < 0) return 3;
  fcntl(out, F_SETFD, FD_CLOEXEC);
  tl_measure_child_signals();
  framed = 1;
  tl_ctx *ctx = tl_ctx_new();
  for (;;) {
    uint32_t len = 0;
    size_t got = read_full(0, &len, sizeof len);
    if (got == 0) return 0;    /* the parent closed our input: done */
    if (got != sizeof len || len > WORKER_MAX_JOB) {
      fprintf(stderr, "tunelua-measure-opencl: a malformed job frame on stdin\n");
      return 3;
    }
    char *text = malloc(len ? len : 1);
    if (!text || read_full(0, text, len) != len) {
      fprintf(stderr, "tunelua-measure-opencl: a job cut short on stdin\n");
      return 3;
    }
    json_error_t jerr;
    json_t *o = json_loadb(text, len, 0, &jerr);
    free(text);
    ocl_job j;
    const char *names[TL_MEASURE_MAX_ARGS];
    tl_clearerr(ctx);
    if (!o) {
      answer_free(out, TL_MEASURE_UNKNOWN_ERROR,
                  tl_sprintf("tunelua-measure-opencl: the job is not JSON: %s", jerr.text));
    } else if (job_parse(ctx, o, "the job", &j, names)) {
      answer(out, TL_MEASURE_UNKNOWN_ERROR, 0, NULL, tl_errmsg(ctx));
    } else if (j.compile_only) {
      tl_alarm_in(j.build_s);
      tl_ocl_module *m = NULL;
      if (tl_ocl_module_from_source(ctx, j.src, j.man, j.dev, &m) == TL_OK) tl_ocl_module_free(m);
      tl_alarm_in(0);
      answer(out, TL_MEASURE_NO_ERROR, 0, NULL, NULL);
    } else {
      run_job(&j, out);
    }
    json_decref(o);
  }
}

TL_EXPORT int tl_measure_opencl_exec_main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--worker")) return worker_main();
  if (argc != 2) {
    fprintf(stderr, "usage: tunelua-measure-opencl JOB.json | --worker\n(libtunelua starts it "
                    "to measure OpenCL kernels; see docs/measure_opencl.md)\n");
    return 2;
  }
  int out = dup(1);            /* the answer; the driver's chatter on stdout goes to stderr */
  if (out < 0 || dup2(2, 1) < 0) return 3;
  tl_ctx *ctx = tl_ctx_new();
  char *text = NULL;
  size_t len = 0;
  if (tl_read_file(ctx, argv[1], &text, &len)) {
    fprintf(stderr, "tunelua-measure-opencl: %s\n", tl_errmsg(ctx));
    return 3;
  }
  json_error_t jerr;
  json_t *o = json_loadb(text, len, 0, &jerr);
  free(text);
  if (json_is_true(json_object_get(o, "unlink"))) unlink(argv[1]);
  ocl_job j;
  const char *names[TL_MEASURE_MAX_ARGS];
  if (!o) {
    fprintf(stderr, "tunelua-measure-opencl: %s: %s\n", argv[1], jerr.text);
    return 3;
  }
  if (job_parse(ctx, o, argv[1], &j, names)) {
    fprintf(stderr, "tunelua-measure-opencl: %s\n", tl_errmsg(ctx));
    return 3;
  }
  if (j.compile_only) {
    tl_measure_child_signals();
    tl_alarm_in(j.build_s);
    tl_ocl_module *m = NULL;
    if (tl_ocl_module_from_source(ctx, j.src, j.man, j.dev, &m) == TL_OK) tl_ocl_module_free(m);
    return 0;
  }
  return ocl_child(&j, out);
}

/* ---- the persistent worker, seen from the measuring process --------------------------------
** One tunelua-measure-opencl --worker (its own process group, SIGKILL when the thread that
** started it ends) serves the trials of this process one at a time: the job goes to its stdin,
** the phase bytes and the framed answer come back on its stdout, its stderr is kept for a
** crash's message. A worker that crashed, passed the limit (its group killed) or ended between
** jobs is reaped, and the next trial starts a fresh one. After a RUNTIME_DEVICE or
** UNKNOWN_ERROR answer the worker is replaced too (a failed launch may leave the driver's
** context unusable), and after WORKER_RECYCLE jobs (the driver's program cache grows). */

#define WORKER_RECYCLE 256

typedef struct {
  pid_t pid;                  /* 0: none */
  int in, out, err;           /* its stdin (jobs), stdout (answers), stderr */
  int jobs;                   /* jobs served */
} ocl_worker;

static pthread_mutex_t worker_mu = PTHREAD_MUTEX_INITIALIZER;
static ocl_worker W = {.in = -1, .out = -1, .err = -1};
static int worker_mode = -1;  /* -1: TUNELUA_OCL_WORKER decides (on unless "0"), 0 off, 1 on */

static int worker_enabled(void) {
  int m = __atomic_load_n(&worker_mode, __ATOMIC_ACQUIRE);
  if (m >= 0) return m;
  const char *e = getenv("TUNELUA_OCL_WORKER");
  return !(e && !strcmp(e, "0"));
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* With worker_mu held: the worker's process group killed (when kill_it; else it has ended),
** the worker reaped, its pipes closed. Its wait status, or -1. */
static int worker_reap(ocl_worker *w, int kill_it) {
  int st = -1;
  if (w->pid <= 0) return -1;
  if (kill_it) kill(-w->pid, SIGKILL);   /* not reaped yet: the group's id is still its own */
  while (waitpid(w->pid, &st, 0) < 0 && errno == EINTR) {}
  close_fd(&w->in);
  close_fd(&w->out);
  close_fd(&w->err);
  w->pid = 0;
  w->jobs = 0;
  return st;
}

/* With worker_mu held: a running worker (a fresh one when there is none or it has ended). */
static int worker_ensure(tl_ctx *ctx, ocl_worker *w) {
  if (w->pid > 0) {
    int st;
    pid_t r = waitpid(w->pid, &st, WNOHANG);
    if (r == 0) return TL_OK;             /* alive */
    if (r == w->pid) kill(-w->pid, SIGKILL);   /* ended between jobs: what it left goes too */
    close_fd(&w->in);
    close_fd(&w->out);
    close_fd(&w->err);
    w->pid = 0;
    w->jobs = 0;
  }
  char exe[PATH_MAX + 64];
  int rc = exe_path(ctx, exe, sizeof exe);
  if (rc) return rc;
  int pi[2] = {-1, -1}, po[2] = {-1, -1}, pe[2] = {-1, -1};
  if (pipe2(pi, O_CLOEXEC) || pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
    int e = errno;
    close_fd(&pi[0]), close_fd(&pi[1]), close_fd(&po[0]), close_fd(&po[1]);
    close_fd(&pe[0]), close_fd(&pe[1]);
    return tl_err(ctx, TL_E_IO, "measure: cannot create the OpenCL worker's pipes: %s",
                  strerror(e));
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {   /* only async-signal-safe calls until the exec */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (dup2(pi[0], 0) < 0 || dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0) _exit(127);
#ifdef SYS_close_range
    syscall(SYS_close_range, 3u, ~0u, 0u);
#endif
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGPIPE, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execl(exe, exe, "--worker", (char *)NULL);
    _exit(127);
  }
  int e = errno;
  close_fd(&pi[0]);
  close_fd(&po[1]);
  close_fd(&pe[1]);
  if (pid < 0) {
    close_fd(&pi[1]), close_fd(&po[0]), close_fd(&pe[0]);
    return tl_err(ctx, TL_E_IO, "measure: cannot start the OpenCL worker: %s", strerror(e));
  }
  setpgid(pid, pid);
  *w = (ocl_worker){.pid = pid, .in = pi[1], .out = po[0], .err = pe[0]};
  return TL_OK;
}

/* All n bytes to fd with SIGPIPE held back in this thread (a worker that ended is EPIPE, not
** the end of this process): 0, or -1. */
static int put_job(int fd, const void *p, size_t n) {
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  sigpending(&pending);
  int was_pending = sigismember(&pending, SIGPIPE);
  const char *s = p;
  int rc = 0;
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      rc = -1;
      break;
    }
    s += w;
    n -= (size_t)w;
  }
  if (rc && !was_pending) {   /* take back the SIGPIPE this write raised */
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* Keep the last bytes of the worker's stderr in b (at most 64 KiB). */
static void keep_err(tl_buf *b, const char *p, size_t n) {
  const size_t cap = 1 << 16;
  if (b->n + n > cap) {
    if (n >= cap) {
      p += n - cap;
      n = cap;
      b->n = 0;
    } else {
      size_t drop = b->n + n - cap;
      memmove(b->s, b->s + drop, b->n - drop);
      b->n -= drop;
    }
  }
  tl_buf_putn(b, p, n);
}

/* How much of the worker's output s[0..n) is one whole trial: the phase bytes and a framed
** answer. 0 while incomplete; -1 for bytes that are not the protocol. *ans: the answer's
** offset and *alen its length. */
static long frame_end(const char *s, size_t n, size_t *ans, size_t *alen) {
  size_t i = 0;
  while (i < n) {
    char c = s[i];
    if (c == 'b' || c == 'r') {
      i++;
    } else if (c == 'c') {
      if (n - i < 1 + sizeof(double)) return 0;
      i += 1 + sizeof(double);
    } else if (c == 'a') {
      uint32_t len;
      if (n - i < 5) return 0;
      memcpy(&len, s + i + 1, sizeof len);
      if (n - i - 5 < len) return 0;
      *ans = i + 5;
      *alen = len;
      return (long)(i + 5 + len);
    } else {
      return -1;
    }
  }
  return 0;
}

/* Discard what the worker wrote on stderr between jobs. */
static void drain_err(int fd) {
  char buf[4096];
  struct pollfd p = {fd, POLLIN, 0};
  while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN)) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r <= 0) break;
  }
}

/* One job's exchange with the running worker w: the frame sent, then its output read into ob
** (stdout) and eb (stderr) until a whole trial (*end > 0, frame_end's), bytes that are not
** the protocol (*end < 0), the end of its stdout (it ended), or limit_s (*timed_out). 0, or -1
** when the frame could not be sent (it had ended). */
static int worker_exchange(ocl_worker *w, const tl_buf *frame, double limit_s, tl_buf *ob,
                           tl_buf *eb, long *end, size_t *ans, size_t *alen, int *timed_out) {
  *end = 0;
  *timed_out = 0;
  drain_err(w->err);
  if (put_job(w->in, frame->s, frame->n)) return -1;
  double t0 = tl_now();
  int err_open = 1;
  for (;;) {
    double left = limit_s - (tl_now() - t0);
    if (left <= 0) {
      *timed_out = 1;
      return 0;
    }
    struct pollfd p[2] = {{w->out, POLLIN, 0}, {err_open ? w->err : -1, POLLIN, 0}};
    int pr = poll(p, 2, (int)(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return 0;
    char buf[65536];
    if (p[1].revents) {
      ssize_t r = read(w->err, buf, sizeof buf);
      if (r > 0) keep_err(eb, buf, (size_t)r);
      else if (r == 0 || errno != EINTR) err_open = 0;
    }
    if (p[0].revents) {
      ssize_t r = read(w->out, buf, sizeof buf);
      if (r > 0) {
        tl_buf_putn(ob, buf, (size_t)r);
        *end = frame_end(ob->s, ob->n, ans, alen);
        if (*end != 0) return 0;
      } else if (r == 0 || errno != EINTR) {
        if (err_open) {   /* what it wrote on stderr before it ended */
          double until = tl_now() + 0.2;
          while (tl_now() < until) {
            struct pollfd q = {w->err, POLLIN, 0};
            if (poll(&q, 1, 50) <= 0) break;
            ssize_t k = read(w->err, buf, sizeof buf);
            if (k <= 0) break;
            keep_err(eb, buf, (size_t)k);
          }
        }
        return 0;
      }
    }
  }
}

/* With worker_mu held, after the worker w closed its stdout without a whole answer: how it
** ended, as t->st and t->code (killed after 2 s if it has not ended by then); w reaped. */
static void worker_ended(ocl_worker *w, trial_end *t) {
  double until = tl_now() + 2;
  int st = 0;
  pid_t r;
  while ((r = waitpid(w->pid, &st, WNOHANG)) == 0 && tl_now() < until) usleep(2000);
  int exited = r == w->pid;
  if (exited) {
    kill(-w->pid, SIGKILL);   /* what it left in its group */
    close_fd(&w->in), close_fd(&w->out), close_fd(&w->err);
    w->pid = 0;
    w->jobs = 0;
  } else {
    worker_reap(w, 1);
  }
  if (!exited) {   /* killed here: it did not end by itself */
    t->st = TL_PROC_EXIT;
    t->code = -1;
  } else if (WIFSIGNALED(st)) {
    t->st = TL_PROC_SIGNAL;
    t->code = WTERMSIG(st);
  } else {
    t->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    t->st = t->code == 0 ? TL_PROC_OK : TL_PROC_EXIT;
  }
}

/* A worker's request: the job text after its length (4 bytes, native order); text is freed. */
static void job_frame(tl_buf *frame, char *text) {
  size_t tlen = strlen(text);
  uint32_t len = (uint32_t)tlen;
  tl_buf_putn(frame, (const char *)&len, sizeof len);
  tl_buf_putn(frame, text, tlen);
  free(text);
}

static int worker_job(tl_ctx *ctx, const ocl_job *j, double limit_s, int *gen_rc,
                      double *costs, int *ncosts, int *error_no, char **msg, double *secs) {
  char *text = NULL;
  int rc = job_text(ctx, j, 0, &text, gen_rc);
  if (rc || *gen_rc) return rc;
  tl_buf frame = {0};
  job_frame(&frame, text);
  tl_buf ob = {0}, eb = {0}, got = {0};
  trial_end t = {.st = TL_PROC_OK};
  size_t ans = 0, alen = 0;
  long end = 0;
  int timed_out = 0;
  pthread_mutex_lock(&worker_mu);
  ocl_worker *w = &W;
  double t0 = tl_now();
  /* A worker that ended between jobs is found dead here, or when the job cannot be sent, or
  ** when it ends before its first phase byte (it never started the job): the job goes once
  ** more, to a fresh worker. */
  for (int attempt = 0; attempt < 2; attempt++) {
    ob.n = eb.n = 0;
    t = (trial_end){.st = TL_PROC_OK};
    rc = worker_ensure(ctx, w);
    if (rc) break;
    t0 = tl_now();
    if (worker_exchange(w, &frame, limit_s, &ob, &eb, &end, &ans, &alen, &timed_out)) {
      worker_reap(w, 1);
      if (attempt == 0) continue;
      rc = tl_err(ctx, TL_E_IO, "measure: a fresh OpenCL worker does not take jobs");
      break;
    }
    if (end != 0 || timed_out) break;
    worker_ended(w, &t);
    if (ob.n > 0 || attempt == 1) break;
  }
  tl_buf_free(&frame);
  if (rc) {
    worker_reap(w, 1);
    pthread_mutex_unlock(&worker_mu);
    tl_buf_free(&ob);
    tl_buf_free(&eb);
    return rc;
  }
  t.seconds = tl_now() - t0;
  int keep = 0;
  if (end > 0) {   /* the phase bytes, then the answer: a one-trial child's output */
    for (size_t i = 0; i < ans - 5;) {
      size_t step = ob.s[i] == 'c' ? 1 + sizeof(double) : 1;
      tl_buf_putn(&got, ob.s + i, step);
      i += step;
    }
    tl_buf_putn(&got, ob.s + ans, alen);
    keep = (size_t)end == ob.n;   /* nothing after the answer */
  } else {
    /* it passed the limit, broke the protocol or ended: the phases it wrote before */
    for (size_t i = 0; i < ob.n;) {
      char c = ob.s[i];
      size_t step = c == 'c' ? 1 + sizeof(double) : 1;
      if ((c != 'b' && c != 'r' && c != 'c') || i + step > ob.n) break;
      tl_buf_putn(&got, ob.s + i, step);
      i += step;
    }
    if (timed_out || end < 0) {
      worker_reap(w, 1);
      t.st = timed_out ? TL_PROC_TIMEOUT : TL_PROC_EXIT;
      t.code = -1;
    }
  }
  t.o = got.s;
  t.olen = got.n;
  t.e = eb.s;
  t.elen = eb.n;
  outcome(j, &t, costs, ncosts, error_no, msg, secs);
  if (w->pid > 0) {
    w->jobs++;
    if (!keep || *error_no == TL_MEASURE_RUNTIME_DEVICE || *error_no == TL_MEASURE_UNKNOWN_ERROR ||
        w->jobs >= WORKER_RECYCLE)
      worker_reap(w, 1);
  }
  pthread_mutex_unlock(&worker_mu);
  tl_buf_free(&ob);
  tl_buf_free(&eb);
  tl_buf_free(&got);
  return TL_OK;
}

TL_EXPORT void tl_measure_opencl_use_worker(int on) {
  __atomic_store_n(&worker_mode, on < 0 ? -1 : !!on, __ATOMIC_RELEASE);
}

TL_EXPORT int tl_measure_opencl_worker_pid(void) {
  pthread_mutex_lock(&worker_mu);
  int pid = (int)W.pid;
  pthread_mutex_unlock(&worker_mu);
  return pid;
}

TL_EXPORT void tl_measure_opencl_worker_stop(void) {
  pthread_mutex_lock(&worker_mu);
  worker_reap(&W, 1);
  pthread_mutex_unlock(&worker_mu);
}

/* ---- before the trials: source, limits, device query, compiles ahead -------------------- */

TL_EXPORT int tl_measure_opencl_source(tl_ctx *ctx, tl_lowered *f, char **source, char **manifest,
                                       int *error_no, char **msg) {
  if (!f || !source || !manifest || !error_no || !msg)
    return tl_err(ctx, TL_E_ARG, "tl_measure_opencl_source: NULL argument");
  *source = *manifest = *msg = NULL;
  *error_no = TL_MEASURE_NO_ERROR;
  if (f->nargs < 1) {
    *error_no = TL_MEASURE_INSTANTIATION_ERROR;
    *msg = tl_strdup("the lowered function has no array arguments");
    return TL_OK;
  }
  for (int i = 0; i < f->nargs; i++) {
    const tl_buffer *b = tl_ir_buffer(f->ir, f->arg_bufs[i]);
    for (int d = 0; d < b->ndim; d++)
      if (tl_ir_op(f->ir, b->shape[d]) != TL_IR_INT) {
        *error_no = TL_MEASURE_INSTANTIATION_ERROR;
        *msg = tl_sprintf("argument '%s' has a symbolic extent in dimension %d (not measurable)",
                          b->name ? b->name : "?", d);
        return TL_OK;
      }
  }
  if (tl_opencl_source_manifest(ctx, f, source, manifest)) {
    *error_no = TL_MEASURE_COMPILE_HOST;
    *msg = tl_sprintf("generating OpenCL C failed: %s", tl_errmsg(ctx));
    tl_clearerr(ctx);
  }
  return TL_OK;
}

static long long jint(json_t *o, const char *key, long long dflt) {
  json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? (long long)json_integer_value(v) : dflt;
}

TL_EXPORT int tl_measure_opencl_fits(tl_ctx *ctx, const char *manifest, const char *device_info) {
  json_t *man = manifest ? json_loads(manifest, 0, NULL) : NULL;
  json_t *info = device_info ? json_loads(device_info, 0, NULL) : NULL;
  int rc = TL_OK;
  if (!json_is_object(man) || !json_is_object(info)) {
    rc = tl_err(ctx, TL_E_PARSE, "tl_measure_opencl_fits: %s is not a JSON object",
                !json_is_object(man) ? "the manifest" : "the device info");
    goto done;
  }
  long long maxwg = jint(info, "max_work_group_size", -1), lmem = jint(info, "local_mem_bytes", -1);
  json_t *sizes = json_object_get(info, "max_work_item_sizes");
  const char *dname = json_string_value(json_object_get(info, "name"));
  if (!dname) dname = "?";
  json_t *ks = json_object_get(man, "kernels");
  for (size_t k = 0; k < json_array_size(ks) && !rc; k++) {
    json_t *ko = json_array_get(ks, k);
    const char *kn = json_string_value(json_object_get(ko, "name"));
    json_t *bl = json_object_get(ko, "block");
    long long b[3];
    for (int d = 0; d < 3; d++) {
      json_t *v = json_array_get(bl, (size_t)d);
      b[d] = json_is_integer(v) ? (long long)json_integer_value(v) : 1;
    }
    if (!kn) kn = "?";
    for (int d = 0; d < 3 && !rc; d++) {
      json_t *lim = json_array_get(sizes, (size_t)d);
      if (json_is_integer(lim) && b[d] > (long long)json_integer_value(lim))
        rc = tl_err(ctx, TL_E_RUNTIME, "kernel '%s': invalid work-group size %lldx%lldx%lld: "
                    "dimension %d (%lld) exceeds the device's max work-item size %lld (%s)", kn,
                    b[0], b[1], b[2], d, b[d], (long long)json_integer_value(lim), dname);
    }
    if (rc) break;
    long long wg = b[0] * b[1] * b[2], lb = jint(ko, "local_bytes", 0);
    if (maxwg >= 0 && wg > maxwg)
      rc = tl_err(ctx, TL_E_RUNTIME, "kernel '%s': invalid work-group size %lldx%lldx%lld = %lld "
                  "work-items exceeds the device's max work-group size %lld (%s)", kn, b[0], b[1],
                  b[2], wg, maxwg, dname);
    else if (lmem >= 0 && lb > lmem)
      rc = tl_err(ctx, TL_E_RUNTIME, "kernel '%s' uses %lld bytes of __local memory, more than "
                  "the device's %lld (%s)", kn, lb, lmem, dname);
  }
done:
  json_decref(man);
  json_decref(info);
  return rc;
}

/* Child: the device's properties on the pipe (exit 0), or why there are none (exit 3). */
static int info_child(void *arg, int fd) {
  int dev = *(const int *)arg;
  tl_measure_child_signals();
  tl_ctx *ctx = tl_ctx_new();
  int n = tl_opencl_device_count();
  const char *js = NULL;
  char *why = NULL;
  if (dev >= n)
    why = tl_sprintf("no OpenCL device %d (%d found)", dev, n);
  else if (tl_opencl_device_info(ctx, dev, &js))
    why = tl_strdup(tl_errmsg(ctx));
  const char *out = why ? why : js;
  tl_measure_put(fd, out, strlen(out));
  return why ? 3 : 0;
}

TL_EXPORT int tl_measure_opencl_device_info(tl_ctx *ctx, int dev, char **json) {
  if (!json) return tl_err(ctx, TL_E_ARG, "tl_measure_opencl_device_info: json is NULL");
  *json = NULL;
  if (dev < 0 || dev > 255) return tl_err(ctx, TL_E_ARG, "tl_measure_opencl_device_info: bad device %d", dev);
  if (tl_opencl_touched()) {   /* initialized here already: asking costs nothing more */
    int n = tl_opencl_device_count();
    const char *js = NULL;
    if (dev >= n) return tl_err(ctx, TL_E_RUNTIME, "no OpenCL device %d (%d found)", dev, n);
    int rc = tl_opencl_device_info(ctx, dev, &js);
    if (!rc) *json = tl_strdup(js);
    return rc;
  }
  tl_proc_result *res = NULL;
  int rc = tl_proc_call(ctx, info_child, &dev, 60, 1 << 20, &res);
  if (rc) return rc;
  size_t olen = 0, elen = 0;
  const char *o = tl_proc_stdout(res, &olen);
  const char *e = tl_proc_stderr(res, &elen);
  int st = tl_proc_status(res);
  if (st == TL_PROC_OK)
    *json = tl_strndup(o ? o : "", olen);
  else if (st == TL_PROC_EXIT && tl_proc_code(res) == 3)
    rc = tl_err(ctx, TL_E_RUNTIME, "%.*s", (int)olen, o ? o : "");
  else
    rc = tl_err(ctx, TL_E_CHILD, "the device query child failed (status %d, code %d): %.*s", st,
                tl_proc_code(res), (int)(elen > 2000 ? 2000 : elen), e ? e : "");
  tl_proc_result_free(res);
  return rc;
}

/* Compiles ahead: background children (own process groups) that only build a module, so that
** the driver's on-disk program cache holds it when the trial's child builds it. */
static pthread_mutex_t ahead_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t ahead_pids[256];
static int ahead_n;

static void reap(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
}

/* With ahead_mu held: wait for the oldest children until at most keep run. */
static void reap_until(int keep) {
  while (ahead_n > keep) {
    reap(ahead_pids[0]);
    memmove(ahead_pids, ahead_pids + 1, sizeof ahead_pids[0] * (size_t)--ahead_n);
  }
}

/* A compile ahead in a background child of its own (the pool off). */
static int ahead_child(tl_ctx *ctx, tl_lowered *f, int dev, double timeout_s, int max_running) {
  char exe[PATH_MAX + 64], path[PATH_MAX];
  int touched = tl_opencl_touched();
  if (touched) {
    /* a fresh program compiles (it removes the job file once read); the run child reports
    ** every error, so a job that cannot be written just compiles nothing ahead */
    ocl_job j = {.f = f, .compile_only = 1, .dev = dev, .number = 1, .repeat = 1,
                 .build_s = timeout_s > 0 ? timeout_s : 10, .run_s = 1};
    int gen = TL_OK;
    if (exe_path(ctx, exe, sizeof exe) || write_job(ctx, &j, 1, path, sizeof path, &gen) || gen) {
      tl_clearerr(ctx);
      return TL_OK;
    }
  }
  pthread_mutex_lock(&ahead_mu);
  reap_until(max_running - 1);
  pid_t pid = fork();
  if (pid == 0 && touched) {   /* only async-signal-safe calls until the exec */
    setpgid(0, 0);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
    }
#ifdef SYS_close_range
    syscall(SYS_close_range, 3u, ~0u, 0u);
#endif
    execl(exe, exe, path, (char *)NULL);
    unlink(path);
    _exit(127);
  }
  if (pid == 0) {
    setpgid(0, 0);
    tl_measure_child_signals();
    int null = open("/dev/null", O_WRONLY);   /* the driver's chatter goes nowhere */
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
    }
    tl_alarm_in(timeout_s > 0 ? timeout_s : 10);
    tl_ctx *c = tl_ctx_new();
    tl_ocl_module *m = NULL;
    if (tl_opencl_build(c, f, dev, &m) == TL_OK) tl_ocl_module_free(m);
    _exit(0);
  }
  int e = errno;
  if (pid > 0) ahead_pids[ahead_n++] = pid;
  pthread_mutex_unlock(&ahead_mu);
  if (pid < 0 && touched) unlink(path);
  if (pid < 0) return tl_err(ctx, TL_E_IO, "compile ahead: fork: %s", strerror(e));
  return TL_OK;
}

/* ---- the compile pool: compiles ahead in persistent workers --------------------------------
** K exec'd tunelua-measure-opencl --worker processes (the timing worker's program and
** protocol, compile-only jobs) compile ahead, each with its driver and context started once,
** instead of a fresh child per compile that starts the driver again. A compile is sent to an
** idle worker (waiting for one when all K are busy); the answer is read when a later call
** polls the pool, and tl_measure_opencl_wait_ahead waits for every one before a trial is
** timed. A worker that crashes, passes its limit (2 x the build limit + 1 s; its own alarm
** ends it at the build limit), answers something that is not the protocol or has served
** WORKER_RECYCLE jobs is reaped and its slot starts a fresh one when next used. A compile's
** errors are not reported here: the trial compiles again and reports them. */

#define AHEAD_MAX 32

typedef struct {
  ocl_worker w;
  int busy;                   /* a compile sent, its answer not read yet */
  double deadline;            /* tl_now() after which the busy worker is killed */
  tl_buf ob;                  /* its answer so far */
} ahead_slot;

static ahead_slot AP[AHEAD_MAX];
static int ap_ready;
static int ahead_workers = -1;   /* -1: TUNELUA_OCL_COMPILE_WORKERS or the default */
static int ap_jobs, ap_lost;     /* compiles sent to the pool, and of them lost (worker ended) */

/* With ahead_mu held: the slots initialized once. */
static void ap_init(void) {
  if (ap_ready) return;
  for (int i = 0; i < AHEAD_MAX; i++) AP[i] = (ahead_slot){.w = {.in = -1, .out = -1, .err = -1}};
  ap_ready = 1;
}

/* How many pool workers compile ahead for a builder with max_running compiles at once
** (0: a child per compile). */
static int pool_size(int max_running) {
  int k = __atomic_load_n(&ahead_workers, __ATOMIC_ACQUIRE);
  if (k < 0) {
    const char *e = getenv("TUNELUA_OCL_COMPILE_WORKERS");
    char *end = NULL;
    long v = e && *e ? strtol(e, &end, 10) : -1;
    if (e && *e && (*end || v < 0)) v = -1;   /* malformed: the default */
    k = v >= 0 ? (int)v : (max_running < 8 ? max_running : 8);
  }
  return k > AHEAD_MAX ? AHEAD_MAX : k;
}

static void slot_drop(ahead_slot *s, int lost) {
  if (s->busy && lost) ap_lost++;
  worker_reap(&s->w, 1);
  s->busy = 0;
  s->ob.n = 0;
}

/* With ahead_mu held: reads what the busy workers wrote, for up to wait_ms (0: what is there
** now); finished compiles free their slots, ended or late workers are reaped. */
static void pool_step(int wait_ms) {
  struct pollfd p[2 * AHEAD_MAX];
  int idx[2 * AHEAD_MAX], np = 0;
  for (int i = 0; i < AHEAD_MAX; i++) {
    ahead_slot *s = &AP[i];
    if (!s->busy) continue;
    p[np] = (struct pollfd){s->w.out, POLLIN, 0};
    idx[np++] = i;
    if (s->w.err >= 0) {
      p[np] = (struct pollfd){s->w.err, POLLIN, 0};
      idx[np++] = -1 - i;
    }
  }
  if (!np) return;
  int pr = poll(p, (nfds_t)np, wait_ms);
  char buf[65536];
  for (int k = 0; k < np && pr > 0; k++) {
    if (!p[k].revents) continue;
    int i = idx[k] >= 0 ? idx[k] : -1 - idx[k];
    ahead_slot *s = &AP[i];
    if (!s->busy) continue;   /* dropped above in this pass */
    if (idx[k] < 0) {         /* the driver's chatter: discarded */
      ssize_t r = read(s->w.err, buf, sizeof buf);
      if (r == 0 || (r < 0 && errno != EINTR)) close_fd(&s->w.err);
      continue;
    }
    ssize_t r = read(s->w.out, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {             /* it ended: crashed, or its alarm */
      slot_drop(s, 1);
      continue;
    }
    tl_buf_putn(&s->ob, buf, (size_t)r);
    size_t ans = 0, alen = 0;
    long end = frame_end(s->ob.s, s->ob.n, &ans, &alen);
    if (end < 0 || (end > 0 && (size_t)end != s->ob.n)) {
      slot_drop(s, 1);        /* not the protocol */
    } else if (end > 0) {
      s->busy = 0;
      s->ob.n = 0;
      if (++s->w.jobs >= WORKER_RECYCLE) slot_drop(s, 0);
    }
  }
  double t = tl_now();
  for (int i = 0; i < AHEAD_MAX; i++)
    if (AP[i].busy && t > AP[i].deadline) slot_drop(&AP[i], 1);
}

/* With ahead_mu held: the milliseconds until the nearest deadline of a busy worker (-1: none). */
static int pool_next_ms(void) {
  double t = tl_now(), next = 0;
  int any = 0;
  for (int i = 0; i < AHEAD_MAX; i++)
    if (AP[i].busy && (!any || AP[i].deadline - t < next)) {
      next = AP[i].deadline - t;
      any = 1;
    }
  if (!any) return -1;
  return next > 0 ? (int)(next * 1000) + 1 : 0;
}

/* With ahead_mu held: wait until every busy worker answered or was dropped. */
static void pool_wait_all(void) {
  int ms;
  while ((ms = pool_next_ms()) >= 0) pool_step(ms);
}

/* A compile ahead of f in the pool (k workers). Errors are dropped: the trial reports them. */
static int ahead_pool(tl_ctx *ctx, tl_lowered *f, int dev, double timeout_s, int k) {
  double build_s = timeout_s > 0 ? timeout_s : 10;
  ocl_job j = {.f = f, .compile_only = 1, .dev = dev, .number = 1, .repeat = 1,
               .build_s = build_s, .run_s = 1};
  char *text = NULL;
  int gen = TL_OK;
  if (job_text(ctx, &j, 0, &text, &gen) || gen) {
    tl_clearerr(ctx);
    return TL_OK;
  }
  tl_buf frame = {0};
  job_frame(&frame, text);
  int rc = TL_OK;
  pthread_mutex_lock(&ahead_mu);
  ap_init();
  ahead_slot *s = NULL;
  for (;;) {
    pool_step(0);
    for (int i = 0; i < k && !s; i++)
      if (!AP[i].busy && AP[i].w.pid > 0) s = &AP[i];   /* a started one first */
    for (int i = 0; i < k && !s; i++)
      if (!AP[i].busy) s = &AP[i];
    if (s) break;
    pool_step(pool_next_ms());
  }
  /* a worker that ended between jobs cannot take it: once more, to a fresh one */
  for (int attempt = 0; attempt < 2; attempt++) {
    rc = worker_ensure(ctx, &s->w);
    if (rc) break;
    drain_err(s->w.err);
    if (!put_job(s->w.in, frame.s, frame.n)) {
      s->busy = 1;
      s->ob.n = 0;
      s->deadline = tl_now() + 2 * build_s + 1;
      ap_jobs++;
      break;
    }
    slot_drop(s, 0);
  }
  pthread_mutex_unlock(&ahead_mu);
  tl_buf_free(&frame);
  return rc;
}

TL_EXPORT int tl_measure_opencl_compile_ahead(tl_ctx *ctx, tl_lowered *f, int dev,
                                              double timeout_s, int max_running) {
  if (!f) return tl_err(ctx, TL_E_ARG, "tl_measure_opencl_compile_ahead: f is NULL");
  if (max_running < 1) max_running = 1;
  if (max_running > 256) max_running = 256;
  int k = pool_size(max_running);
  if (k > 0) return ahead_pool(ctx, f, dev, timeout_s, k);
  return ahead_child(ctx, f, dev, timeout_s, max_running);
}

TL_EXPORT void tl_measure_opencl_compile_workers(int k) {
  __atomic_store_n(&ahead_workers, k < 0 ? -1 : k, __ATOMIC_RELEASE);
}

TL_EXPORT int tl_measure_opencl_ahead_pids(int *pids, int cap) {
  int n = 0;
  pthread_mutex_lock(&ahead_mu);
  ap_init();
  for (int i = 0; i < AHEAD_MAX; i++)
    if (AP[i].w.pid > 0) {
      if (pids && n < cap) pids[n] = (int)AP[i].w.pid;
      n++;
    }
  pthread_mutex_unlock(&ahead_mu);
  return n;
}

TL_EXPORT void tl_measure_opencl_ahead_counts(int *sent, int *lost) {
  pthread_mutex_lock(&ahead_mu);
  if (sent) *sent = ap_jobs;
  if (lost) *lost = ap_lost;
  pthread_mutex_unlock(&ahead_mu);
}

TL_EXPORT void tl_measure_opencl_ahead_stop(void) {
  pthread_mutex_lock(&ahead_mu);
  ap_init();
  reap_until(0);
  for (int i = 0; i < AHEAD_MAX; i++) {
    slot_drop(&AP[i], 0);
    tl_buf_free(&AP[i].ob);
  }
  pthread_mutex_unlock(&ahead_mu);
}

TL_EXPORT void tl_measure_opencl_wait_ahead(void) {
  pthread_mutex_lock(&ahead_mu);
  ap_init();
  reap_until(0);
  pool_wait_all();
  pthread_mutex_unlock(&ahead_mu);
}
