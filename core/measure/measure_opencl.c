/*
** measure_opencl.c -- measuring OpenCL kernels (docs/measure_opencl.md), one path for the
** local runner and the RPC session. The module comes either as a lowered function (the
** local runner: the child inherits it through fork) or as OpenCL C + manifest (uploaded to
** a device's server). One forked child per trial:
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
** "crashed while running". OpenCL drivers are not fork-safe: while the calling process has
** not initialized OpenCL, the device query and the compiles ahead run in forked children as
** well. Once it has (it built or ran an OpenCL function itself), a forked child would inherit
** the initialized driver, so every child is a freshly exec'd tunelua-measure-opencl instead:
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
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  int compile_only;           /* a compile ahead: build the module, answer nothing */
  int dev, number, repeat;
  double min_repeat_ms, build_s, run_s, rtol, atol;
} ocl_job;

static void phase(int fd, char c) { tl_measure_put(fd, &c, 1); }

static int build_error_no(int rc) {
  return rc == TL_E_RUNTIME ? TL_MEASURE_INSTANTIATION_ERROR : TL_MEASURE_COMPILE_DEVICE;
}

static int build_module(tl_ctx *ctx, tl_lowered *f, const char *src, const char *man, int dev,
                        tl_ocl_module **m) {
  return f ? tl_opencl_build(ctx, f, dev, m) : tl_ocl_module_from_source(ctx, src, man, dev, m);
}

/* Host arrays of m's arguments (its manifest), random (seed 1000 + i), and their device copies. */
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

/* " ('A')": argument i's name when the module is a lowered function (else ""). */
static const char *arg_label(const ocl_job *j, int i, char *buf, size_t cap) {
  buf[0] = 0;
  if (j->f && i < j->f->nargs) {
    const tl_buffer *b = tl_ir_buffer(j->f->ir, j->f->arg_bufs[i]);
    if (b->name) snprintf(buf, cap, " ('%s')", b->name);
  }
  return buf;
}

/* The reference's outputs on the same inputs, as host arrays like host[0..n): from the
** reference module rm, or from the bytes at j->ref_path. 0, or the error answered. */
static int reference_outputs(tl_ctx *ctx, int fd, const ocl_job *j, tl_ocl_module *rm,
                             tl_array **host, int n, tl_array **want) {
  static const char *other = "the reference has other arguments than the config";
  if (rm) {
    tl_array *rh[TL_MEASURE_MAX_ARGS] = {0}, *rd[TL_MEASURE_MAX_ARGS] = {0};
    int rn = 0;
    if (module_args(ctx, rm, j->dev, rh, rd, &rn) || rn != n) {
      char *e = tl_sprintf("check_correctness: %s", other);
      tl_measure_child_reply(fd, TL_MEASURE_WRONG_ANSWER, 0, NULL, e);
      return -1;
    }
    if (tl_ocl_module_call(ctx, rm, rd, rn)) {
      char *e = tl_sprintf("check_correctness: the reference failed: %s", tl_errmsg(ctx));
      tl_measure_child_reply(fd, TL_MEASURE_WRONG_ANSWER, 0, NULL, e);
      return -1;
    }
    for (int i = 0; i < n; i++) {
      const DLTensor *t = tl_array_dltensor(host[i]);
      if (tl_array_empty(ctx, t->ndim, t->shape, tl_array_dtype(host[i]), TL_DEV_CPU, 0, &want[i]) ||
          tl_array_copyto(ctx, rd[i], want[i])) {
        tl_measure_child_reply(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
        return -1;
      }
    }
    return 0;
  }
  char *data = NULL;
  size_t len = 0, off = 0;
  if (tl_read_file(ctx, j->ref_path, &data, &len)) {
    tl_measure_child_reply(fd, TL_MEASURE_UNKNOWN_ERROR, 0, NULL, tl_errmsg(ctx));
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const DLTensor *t = tl_array_dltensor(host[i]);
    size_t nb = tl_array_nbytes(host[i]);
    if (off + nb > len) break;
    if (tl_array_empty(ctx, t->ndim, t->shape, tl_array_dtype(host[i]), TL_DEV_CPU, 0, &want[i])) {
      tl_measure_child_reply(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
      return -1;
    }
    memcpy(tl_array_data(want[i]), data + off, nb);
    off += nb;
  }
  if (off != len || (n && !want[n - 1])) {
    tl_measure_child_reply(fd, TL_MEASURE_WRONG_ANSWER, 0, NULL, other);
    return -1;
  }
  return 0;
}

static int ocl_child(void *arg, int fd) {
  const ocl_job *j = arg;
  tl_measure_child_signals();
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
    tl_measure_child_reply(fd, build_error_no(rc), 0, NULL, tl_errmsg(ctx));
    return 0;
  }
  if (j->rsrc && tl_ocl_module_from_source(ctx, j->rsrc, j->rman, j->dev, &rm)) {
    char *e = tl_sprintf("check_correctness: the reference does not build: %s", tl_errmsg(ctx));
    tl_measure_child_reply(fd, TL_MEASURE_WRONG_ANSWER, 0, NULL, e);
    return 0;
  }
  double cs = tl_ocl_module_compile_seconds(m);
  phase(fd, 'c');
  tl_measure_put(fd, &cs, sizeof cs);
  /* run: the first launch with the build limit on top */
  tl_alarm_in(0);
  phase(fd, 'r');
  tl_alarm_in(j->build_s + j->run_s);
  if (module_args(ctx, m, j->dev, host, devs, &n) || tl_ocl_module_call(ctx, m, devs, n)) {
    tl_measure_child_reply(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
    return 0;
  }
  tl_alarm_in(j->run_s);
  if (j->out_path || rm || j->ref_path) {
    if (tl_ocl_module_call(ctx, m, devs, n)) {
      tl_measure_child_reply(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
      return 0;
    }
    for (int i = 0; i < n; i++)
      if (tl_array_copyto(ctx, devs[i], host[i])) {
        tl_measure_child_reply(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
        return 0;
      }
  }
  if (j->out_path) {
    tl_buf b = {0};
    for (int i = 0; i < n; i++)
      tl_buf_putn(&b, tl_array_data(host[i]), tl_array_nbytes(host[i]));
    if (tl_write_file_atomic(ctx, j->out_path, b.s ? b.s : "", b.n)) {
      tl_measure_child_reply(fd, TL_MEASURE_UNKNOWN_ERROR, 0, NULL, tl_errmsg(ctx));
      return 0;
    }
    tl_measure_child_reply(fd, TL_MEASURE_NO_ERROR, 0, NULL, NULL);
    return 0;
  }
  if (rm || j->ref_path) {
    if (reference_outputs(ctx, fd, j, rm, host, n, want)) return 0;
    for (int i = 0; i < n; i++) {
      int64_t worst = -1;
      double werr = 0;
      int c = tl_array_allclose(ctx, host[i], want[i], j->rtol, j->atol, &worst, &werr);
      if (c > 0) {
        char *e = tl_sprintf("comparing argument %d with the reference: %s", i + 1, tl_errmsg(ctx));
        tl_measure_child_reply(fd, TL_MEASURE_UNKNOWN_ERROR, 0, NULL, e);
        return 0;
      }
      if (c != 0) {
        char *e = tl_sprintf("wrong answer: argument %d%s differs from the reference at flat "
                             "index %lld (|diff| = %g: got %.9g, expected %.9g)", i + 1,
                             arg_label(j, i, label, sizeof label), (long long)worst, werr,
                             tl_array_get(host[i], worst), tl_array_get(want[i], worst));
        tl_measure_child_reply(fd, TL_MEASURE_WRONG_ANSWER, 0, NULL, e);
        return 0;
      }
    }
  }
  if (tl_ocl_module_time(ctx, m, devs, n, j->number, j->repeat, j->min_repeat_ms, 0, costs)) {
    tl_measure_child_reply(fd, TL_MEASURE_RUNTIME_DEVICE, 0, NULL, tl_errmsg(ctx));
    return 0;
  }
  tl_measure_child_reply(fd, TL_MEASURE_NO_ERROR, j->repeat, costs, NULL);
  return 0;   /* the process ends here */
}

/* Run job j in a child and turn how it ended into *error_no and *msg (malloc'd or NULL);
** secs (or NULL): the child's wall seconds and the driver's compile seconds. */
static int exec_job(tl_ctx *ctx, const ocl_job *j, double limit_s, int *gen_rc,
                    tl_proc_result **res);
static long long jint(json_t *o, const char *key, long long dflt);

/* How the child that ran job j ended (res), as *error_no and *msg; secs as ocl_measure's. */
static void outcome(const ocl_job *j, tl_proc_result *res, double *costs, int *ncosts,
                    int *error_no, char **msg, double *secs) {
  const char *fname = j->fname ? j->fname : "kernel";
  size_t olen = 0, elen = 0;
  const char *o = tl_proc_stdout(res, &olen);
  const char *e = tl_proc_stderr(res, &elen);
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
    secs[0] = tl_proc_seconds(res);
    secs[1] = compile_s;
  }
  int st = tl_proc_status(res);
  int sig = st == TL_PROC_SIGNAL ? tl_proc_code(res) : 0;
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
                      "code %d)%s%.*s", fname, st, tl_proc_code(res), el ? ": " : "", el, e);
  }
}

static int ocl_measure(tl_ctx *ctx, const ocl_job *j, double *costs, int *ncosts, int *error_no,
                       char **msg, double *secs) {
  *ncosts = 0;
  *msg = NULL;
  *error_no = TL_MEASURE_UNKNOWN_ERROR;
  tl_proc_result *res = NULL;
  double limit = 2 * j->build_s + j->run_s + 1;
  int rc, gen = TL_OK;
  if (tl_opencl_touched()) {
    /* a forked child would inherit this process's driver: a fresh program measures */
    rc = exec_job(ctx, j, limit, &gen, &res);
    if (!rc && gen) {   /* the code generator refused f: what the child's build would say */
      *error_no = build_error_no(gen);
      *msg = tl_strdup(tl_errmsg(ctx));
      tl_clearerr(ctx);
      if (secs) secs[0] = secs[1] = 0;
      return TL_OK;
    }
  } else {
    rc = tl_proc_call(ctx, ocl_child, (void *)j, limit, 1 << 16, &res);
  }
  if (rc) return rc;
  outcome(j, res, costs, ncosts, error_no, msg, secs);
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

/* ---- a freshly exec'd child (after this process initialized OpenCL) --------------------- */

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
  return tl_err(ctx, TL_E_RUNTIME, "measure: this process has initialized OpenCL, so OpenCL "
                "trials run in a fresh tunelua-measure-opencl process, and that program is "
                "neither in '%s' nor in '%s'", dir[0] ? dir : "(the library's directory)",
                TL_LIBEXECDIR_INSTALLED);
}

static void jset_str(json_t *o, const char *k, const char *v) {
  if (v) json_object_set_new(o, k, json_string(v));
}

/* The job file of j (its module as OpenCL C + manifest): path, or an error. With f, src and
** man are generated here; a refusal of the code generator is returned as *gen_rc. */
static int write_job(tl_ctx *ctx, const ocl_job *j, int unlink_after_read, char *path, size_t cap,
                     int *gen_rc) {
  static unsigned counter;
  char *src = NULL, *man = NULL;
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
  char *text = json_object_size(o) ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!text || !strstr(text, "\"source\"") || !strstr(text, "\"manifest\""))
    return free(text), tl_err(ctx, TL_E_ARG, "measure: the OpenCL job cannot be written as JSON "
                              "(a string that is not UTF-8?)");
  const char *base = getenv("TUNELUA_MEASURE_DIR");
  if (!base || !*base) base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(path, cap, "%s/tunelua-ocljob-%d-%u.json", base, (int)getpid(),
           __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
  int rc = tl_write_file_atomic(ctx, path, text, strlen(text));
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

TL_EXPORT int tl_measure_opencl_exec_main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: tunelua-measure-opencl JOB.json\n(libtunelua starts it to measure an "
                    "OpenCL kernel once the calling process has initialized OpenCL; see "
                    "docs/measure_opencl.md)\n");
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
  const char *src = json_string_value(json_object_get(o, "source"));
  const char *man = json_string_value(json_object_get(o, "manifest"));
  if (!json_is_object(o) || !src || !man) {
    fprintf(stderr, "tunelua-measure-opencl: %s: %s\n", argv[1],
            o ? "expected an object with \"source\" and \"manifest\" strings" : jerr.text);
    return 3;
  }
  ocl_job j = {
      .src = src, .man = man, .fname = json_string_value(json_object_get(o, "fname")),
      .rsrc = json_string_value(json_object_get(o, "ref_source")),
      .rman = json_string_value(json_object_get(o, "ref_manifest")),
      .ref_path = json_string_value(json_object_get(o, "ref_path")),
      .out_path = json_string_value(json_object_get(o, "out_path")),
      .compile_only = json_is_true(json_object_get(o, "compile_only")),
      .dev = (int)jint(o, "dev", 0), .number = (int)jint(o, "number", 1),
      .repeat = (int)jint(o, "repeat", 1),
      .min_repeat_ms = json_number_value(json_object_get(o, "min_repeat_ms")),
      .build_s = json_number_value(json_object_get(o, "build_s")),
      .run_s = json_number_value(json_object_get(o, "run_s")),
      .rtol = json_number_value(json_object_get(o, "rtol")),
      .atol = json_number_value(json_object_get(o, "atol"))};
  if (check_times(ctx, argv[1], j.repeat, j.dev, &j.build_s, &j.run_s) ||
      (!!j.rsrc != !!j.rman && tl_err(ctx, TL_E_ARG, "%s: a reference source needs its manifest",
                                     argv[1]))) {
    fprintf(stderr, "tunelua-measure-opencl: %s\n", tl_errmsg(ctx));
    return 3;
  }
  if (j.compile_only) {
    tl_measure_child_signals();
    tl_alarm_in(j.build_s);
    tl_ocl_module *m = NULL;
    if (tl_ocl_module_from_source(ctx, src, man, j.dev, &m) == TL_OK) tl_ocl_module_free(m);
    return 0;
  }
  return ocl_child(&j, out);
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

TL_EXPORT int tl_measure_opencl_compile_ahead(tl_ctx *ctx, tl_lowered *f, int dev,
                                              double timeout_s, int max_running) {
  if (!f) return tl_err(ctx, TL_E_ARG, "tl_measure_opencl_compile_ahead: f is NULL");
  if (max_running < 1) max_running = 1;
  if (max_running > 256) max_running = 256;
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

TL_EXPORT void tl_measure_opencl_wait_ahead(void) {
  pthread_mutex_lock(&ahead_mu);
  reap_until(0);
  pthread_mutex_unlock(&ahead_mu);
}
