/*
** batch.c -- RPCRunner's batch (tl_rpc_measure_batch, docs/rpc.md "RPCRunner"):
** n_parallel threads, each holding a device of the key (a session requested
** from the tracker, client.c) and measuring jobs on it with the session's
** "measure" op until the jobs run out. A device that dies mid-job fails that
** job as RUNTIME_DEVICE and the thread requests another; waiting counts
** toward wait_limit only while no thread holds a device.
*/
#define _GNU_SOURCE
#include "rpc.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *thost;
  int tport;
  const char *key;
  int priority;
  int n;
  const char *const *so_paths, *const *fnames, *const *sigs;
  int number, repeat;
  double min_repeat_ms;
  int cache_flush;
  double timeout_s, cooldown_s, wait_limit_s, say_every_s;
  const char *ref_so_path, *ref_fname;
  double rtol;
  double *costs;
  /* OpenCL jobs: so_paths are OpenCL C files, manifests their manifests (NULL: C jobs) */
  const char *const *manifests;
  const char *ref_manifest;
  int device;
  double build_timeout_s;
  /* VTA jobs: the hardware configuration and task args, one config index per job */
  const char *vta_config, *vta_args;
  const int64_t *vta_index;
  int *ncosts, *error_no;
  char **msgs;
  int next;
  int stop;
  int active;                /* threads holding a device */
  double waited;             /* longest wait with no device anywhere */
  double last_say;
  pthread_mutex_t mu;
} rbatch;

static int next_job(rbatch *b) {
  pthread_mutex_lock(&b->mu);
  int i = b->stop || b->next >= b->n ? -1 : b->next++;
  pthread_mutex_unlock(&b->mu);
  return i;
}

static void job_err(rbatch *b, int i, int eno, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  b->error_no[i] = eno;
  b->ncosts[i] = 0;
  free(b->msgs[i]);
  b->msgs[i] = tl_strdup(buf);
}

#define REF_NAME_FMT "ref%d.so"

/* Measure job i on session s; returns non-zero when the device is lost. *ref_up: the
** reference kernel (check_correctness) is already in this session. */
/* The result of a "measure" reply into job i. */
static void job_result(rbatch *b, int i, const char *resp) {
  json_t *r = json_loads(resp, 0, NULL);
  if (!json_is_true(json_object_get(r, "ok"))) {
    const char *e = json_string_value(json_object_get(r, "error"));
    job_err(b, i, TL_MEASURE_RUNTIME_DEVICE, "%s", e ? e : "the device refused the request");
  } else {
    json_t *c = json_object_get(r, "costs");
    int nc = (int)json_array_size(c);
    if (nc > b->repeat) nc = b->repeat;
    for (int k = 0; k < nc; k++) b->costs[(size_t)i * b->repeat + k] = json_number_value(json_array_get(c, k));
    b->ncosts[i] = nc;
    b->error_no[i] = (int)json_integer_value(json_object_get(r, "error_no"));
    const char *e = json_string_value(json_object_get(r, "error"));
    if (e) b->msgs[i] = tl_strdup(e);
  }
  json_decref(r);
}

/* A VTA job: one request, nothing uploaded (the server runs its simulator). */
static int run_vta_job(tl_ctx *ctx, rbatch *b, tl_rpc_sess *s, int i) {
  json_t *h = json_pack("{s:s, s:s, s:s, s:s, s:I, s:i, s:f}", "op", "measure", "kind", "vta",
                        "config", b->vta_config, "args", b->vta_args, "index",
                        (json_int_t)b->vta_index[i], "repeat", b->repeat, "timeout", b->timeout_s);
  char *hs = json_dumps(h, JSON_COMPACT);
  json_decref(h);
  char *resp = NULL;
  int rc = tl_rpc_call(ctx, s, hs, NULL, 0, 60 + b->timeout_s, &resp, NULL, NULL);
  free(hs);
  if (rc) return rc;
  job_result(b, i, resp);
  free(resp);
  return TL_OK;
}

static int run_job(tl_ctx *ctx, rbatch *b, tl_rpc_sess *s, int i, int *ref_up) {
  if (b->vta_config) return run_vta_job(ctx, b, s, i);
  char name[64], rname[64], mname[64], rmname[64];
  int ocl = b->manifests != NULL;
  snprintf(name, sizeof name, "m%d_%d.%s", (int)getpid(), i, ocl ? "cl" : "so");
  snprintf(rname, sizeof rname, ocl ? "ref%d.cl" : REF_NAME_FMT, (int)getpid());
  snprintf(mname, sizeof mname, "m%d_%d.json", (int)getpid(), i);
  snprintf(rmname, sizeof rmname, "ref%d.json", (int)getpid());
  /* an OpenCL trial: the compile, then a first launch that gets the build limit on top */
  double io_to = 60 + b->timeout_s + (ocl ? 2 * b->build_timeout_s : 0);
  int rc;
  if (b->ref_so_path && !*ref_up) {
    rc = tl_rpc_upload(ctx, s, b->ref_so_path, rname, io_to);
    if (!rc && ocl) rc = tl_rpc_upload(ctx, s, b->ref_manifest, rmname, io_to);
    if (rc) return rc;
    *ref_up = 1;
  }
  rc = tl_rpc_upload(ctx, s, b->so_paths[i], name, io_to);
  if (!rc && ocl) rc = tl_rpc_upload(ctx, s, b->manifests[i], mname, io_to);
  if (rc) return rc;
  json_t *h;
  if (ocl) {
    h = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:f, s:f, s:f}", "op", "measure", "kind",
                  "opencl", "module", name, "manifest", mname, "device", b->device, "number",
                  b->number, "repeat", b->repeat, "min_repeat_ms", b->min_repeat_ms, "timeout",
                  b->timeout_s, "build_timeout", b->build_timeout_s);
  } else {
    h = json_pack("{s:s, s:s, s:s?, s:s, s:i, s:i, s:f, s:b, s:f}", "op", "measure",
                  "module", name, "func", b->fnames[i], "sig", b->sigs[i], "number", b->number,
                  "repeat", b->repeat, "min_repeat_ms", b->min_repeat_ms, "cache_flush",
                  b->cache_flush, "timeout", b->timeout_s);
  }
  if (b->ref_so_path) {
    json_object_set_new(h, "ref_module", json_string(rname));
    if (ocl) json_object_set_new(h, "ref_manifest", json_string(rmname));
    else if (b->ref_fname) json_object_set_new(h, "ref_func", json_string(b->ref_fname));
    json_object_set_new(h, "rtol", json_real(b->rtol > 0 ? b->rtol : 1e-4));
  }
  char *hs = json_dumps(h, JSON_COMPACT);
  json_decref(h);
  char *resp = NULL;
  rc = tl_rpc_call(ctx, s, hs, NULL, 0, io_to, &resp, NULL, NULL);
  free(hs);
  if (rc) return rc;
  job_result(b, i, resp);
  free(resp);
  for (int f = 0; f < (ocl ? 2 : 1); f++) {
    char *rm = tl_sprintf("{\"op\":\"remove\",\"name\":\"%s\"}", f ? mname : name);
    char *rr = NULL;
    tl_rpc_call(ctx, s, rm, NULL, 0, 30, &rr, NULL, NULL);
    free(rm);
    free(rr);
  }
  return TL_OK;
}

static int jobs_left(rbatch *b) {
  pthread_mutex_lock(&b->mu);
  int r = !b->stop && b->next < b->n;
  pthread_mutex_unlock(&b->mu);
  return r;
}

/* A device for this thread while jobs remain. Waiting counts toward wait_limit only while no
** thread holds a device (work going on elsewhere is progress). Requests are short (2 s), so a
** thread never holds the batch open once the other threads have finished the jobs. */
static tl_rpc_sess *acquire(tl_ctx *ctx, rbatch *b) {
  tl_rpc_sess *s = NULL;
  double waited = 0;
  while (!s && jobs_left(b)) {
    double left = b->wait_limit_s - waited;
    if (left <= 0) {
      pthread_mutex_lock(&b->mu);
      b->stop = 1;
      pthread_mutex_unlock(&b->mu);
      break;
    }
    double slice = left < 2 ? left : 2;
    if (slice > b->say_every_s) slice = b->say_every_s;
    double t0 = tl_now();
    tl_clearerr(ctx);
    int rc = tl_rpc_request(ctx, b->thost, b->tport, b->key, b->priority, slice, &s);
    double dt = tl_now() - t0;
    if (rc && rc != TL_E_TIMEOUT && dt < 1) {   /* tracker down: do not spin */
      rpc_sleep(1);
      dt = tl_now() - t0;
    }
    if (!rc) break;
    pthread_mutex_lock(&b->mu);
    int busy = b->active > 0;
    if (!busy) {
      waited += dt;
      b->waited = waited > b->waited ? waited : b->waited;
    } else {
      waited = 0;
    }
    if (!busy && (b->last_say == 0 || tl_now() - b->last_say >= b->say_every_s - 0.05)) {
      b->last_say = tl_now();
      /* a timeout says nothing the line does not; another failure (tracker down) is named */
      fprintf(stderr, "rpc: waiting for a free device of key '%s' at %s:%d (%.0f s so far, "
              "limit %.0f s)%s%s\n", b->key, b->thost, b->tport, waited, b->wait_limit_s,
              rc == TL_E_TIMEOUT ? "" : ": ", rc == TL_E_TIMEOUT ? "" : tl_errmsg(ctx));
    }
    pthread_mutex_unlock(&b->mu);
  }
  if (s) {
    pthread_mutex_lock(&b->mu);
    b->active++;
    pthread_mutex_unlock(&b->mu);
  }
  return s;
}

static void release(tl_ctx *ctx, rbatch *b, tl_rpc_sess *s, int polite) {
  if (polite) {
    char *rr = NULL;
    tl_rpc_call(ctx, s, "{\"op\":\"shutdown\"}", NULL, 0, 5, &rr, NULL, NULL);
    free(rr);
  }
  tl_rpc_close(s);
  pthread_mutex_lock(&b->mu);
  b->active--;
  pthread_mutex_unlock(&b->mu);
}

static void *rbatch_worker(void *arg) {
  rbatch *b = arg;
  tl_ctx *ctx = tl_ctx_new();
  tl_rpc_sess *s = NULL;
  int ref_up = 0;
  for (;;) {
    if (!s && !(s = acquire(ctx, b))) break;
    int i = next_job(b);
    if (i < 0) break;
    tl_clearerr(ctx);
    if (run_job(ctx, b, s, i, &ref_up)) {
      ref_up = 0;
      job_err(b, i, TL_MEASURE_RUNTIME_DEVICE, "device lost (%s at %s): %s", tl_rpc_sess_key(s),
              tl_rpc_sess_addr(s), tl_errmsg(ctx));
      release(ctx, b, s, 0);
      s = NULL;
      continue;
    }
    if (b->cooldown_s > 0) rpc_sleep(b->cooldown_s);
  }
  if (s) release(ctx, b, s, 1);
  tl_ctx_free(ctx);
  return NULL;
}

static int rbatch_run(tl_ctx *ctx, rbatch *pb, int n_parallel) {
  rbatch b = *pb;
  int n = b.n;
  signal(SIGPIPE, SIG_IGN);
  if (!(b.say_every_s > 0)) b.say_every_s = 60;
  if (b.say_every_s < 0.1) b.say_every_s = 0.1;
  for (int i = 0; i < n; i++) {
    b.msgs[i] = NULL;
    b.ncosts[i] = 0;
    b.error_no[i] = -1;
  }
  pthread_mutex_init(&b.mu, NULL);
  if (n_parallel < 1) n_parallel = 1;
  if (n_parallel > n) n_parallel = n;
  if (n_parallel > 64) n_parallel = 64;
  pthread_t th[64];
  int started = 0;
  for (int t = 0; t < n_parallel; t++)
    if (pthread_create(&th[started], NULL, rbatch_worker, &b) == 0) started++;
  if (!started && n) rbatch_worker(&b);
  for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
  pthread_mutex_destroy(&b.mu);
  for (int i = 0; i < n; i++)
    if (b.error_no[i] < 0) {
      if (!b.msgs[i]) b.msgs[i] = tl_sprintf("not measured: no device of key '%s' within %.0f s", b.key, b.wait_limit_s);
    }
  if (b.stop)
    return tl_err(ctx, TL_E_TIMEOUT, "no device of key '%s' at %s:%d for %.0f s", b.key,
                  b.thost, b.tport, b.wait_limit_s);
  return TL_OK;
}

/* A batch with the fields both kinds share; the caller sets its jobs' files. */
static rbatch batch_of(const char *thost, int tport, const char *key, int priority, int n,
                       int number, int repeat, double min_repeat_ms, double timeout_s,
                       double cooldown_s, double wait_limit_s, double say_every_s, double rtol,
                       double *costs, int *ncosts, int *error_no, char **msgs) {
  rbatch b;
  memset(&b, 0, sizeof b);
  b.thost = thost;
  b.tport = tport;
  b.key = key;
  b.priority = priority;
  b.n = n;
  b.number = number;
  b.repeat = repeat;
  b.min_repeat_ms = min_repeat_ms;
  b.timeout_s = timeout_s;
  b.cooldown_s = cooldown_s;
  b.wait_limit_s = wait_limit_s;
  b.say_every_s = say_every_s;
  b.rtol = rtol;
  b.costs = costs;
  b.ncosts = ncosts;
  b.error_no = error_no;
  b.msgs = msgs;
  return b;
}

TL_EXPORT int tl_rpc_measure_batch(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                                   const char *key, int priority, int n,
                                   const char *const *so_paths, const char *const *fnames,
                                   const char *const *sigs, int number, int repeat,
                                   double min_repeat_ms, int cache_flush, double timeout_s,
                                   int n_parallel, double cooldown_s, double wait_limit_s,
                                   double say_every_s, const char *ref_so_path,
                                   const char *ref_fname, double rtol,
                                   double *costs, int *ncosts, int *error_no, char **msgs) {
  if (n < 0 || repeat < 1 || !tracker_host || !key || (n > 0 && (!so_paths || !sigs || !costs ||
      !ncosts || !error_no || !msgs)))
    return tl_err(ctx, TL_E_ARG, "tl_rpc_measure_batch: bad arguments");
  rbatch b = batch_of(tracker_host, tracker_port, key, priority, n, number, repeat, min_repeat_ms,
                      timeout_s, cooldown_s, wait_limit_s, say_every_s, rtol, costs, ncosts,
                      error_no, msgs);
  b.so_paths = so_paths;
  b.fnames = fnames;
  b.sigs = sigs;
  b.cache_flush = cache_flush;
  b.ref_so_path = ref_so_path;
  b.ref_fname = ref_fname;
  return rbatch_run(ctx, &b, n_parallel);
}

TL_EXPORT int tl_rpc_measure_batch_opencl(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                                          const char *key, int priority, int n,
                                          const char *const *source_paths,
                                          const char *const *manifest_paths, int device,
                                          int number, int repeat, double min_repeat_ms,
                                          double build_timeout_s, double timeout_s,
                                          int n_parallel, double cooldown_s, double wait_limit_s,
                                          double say_every_s, const char *ref_source_path,
                                          const char *ref_manifest_path, double rtol,
                                          double *costs, int *ncosts, int *error_no, char **msgs) {
  if (n < 0 || repeat < 1 || !tracker_host || !key || device < 0 ||
      (n > 0 && (!source_paths || !manifest_paths || !costs || !ncosts || !error_no || !msgs)) ||
      (ref_source_path && !ref_manifest_path))
    return tl_err(ctx, TL_E_ARG, "tl_rpc_measure_batch_opencl: bad arguments");
  rbatch b = batch_of(tracker_host, tracker_port, key, priority, n, number, repeat, min_repeat_ms,
                      timeout_s, cooldown_s, wait_limit_s, say_every_s, rtol, costs, ncosts,
                      error_no, msgs);
  b.so_paths = source_paths;
  b.manifests = manifest_paths;
  b.device = device;
  b.build_timeout_s = build_timeout_s > 0 ? build_timeout_s : 10;
  b.ref_so_path = ref_source_path;
  b.ref_manifest = ref_manifest_path;
  return rbatch_run(ctx, &b, n_parallel);
}

TL_EXPORT int tl_rpc_measure_batch_vta(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                                       const char *key, int priority, int n,
                                       const char *config_json, const char *args_json,
                                       const int64_t *indices, int repeat, double timeout_s,
                                       int n_parallel, double cooldown_s, double wait_limit_s,
                                       double say_every_s, double *costs, int *ncosts,
                                       int *error_no, char **msgs) {
  if (n < 0 || repeat < 1 || !tracker_host || !key || !config_json || !args_json ||
      (n > 0 && (!indices || !costs || !ncosts || !error_no || !msgs)))
    return tl_err(ctx, TL_E_ARG, "tl_rpc_measure_batch_vta: bad arguments");
  rbatch b = batch_of(tracker_host, tracker_port, key, priority, n, 1, repeat, 0, timeout_s,
                      cooldown_s, wait_limit_s, say_every_s, 0, costs, ncosts, error_no, msgs);
  b.vta_config = config_json;
  b.vta_args = args_json;
  b.vta_index = indices;
  return rbatch_run(ctx, &b, n_parallel);
}
