/*
** server.c -- the RPC server (docs/rpc.md): it registers with the tracker, waits
** for one client at a time and serves its session in a child process.
**
** Handshake (as TVM's, formats §4.1): the client sends int32 RPC_MAGIC, int32
** key length, "client:<match_key>[ -timeout=S]"; the server answers
** RPC_CODE_SUCCESS, int32 length, "server:<key>" or RPC_CODE_MISMATCH. With an
** auth key (docs/rpc.md "Security") the client opens with RPC_MAGIC_AUTH, int32
** length and the key instead; a missing, wrong or unexpected key is answered
** with an RPC_AUTH_* code. Handshakes are read as their bytes come, several at
** once, so a silent peer never holds up the next client. -timeout=S may only
** shorten the server's --timeout.
** Then session frames both ways (net.c), strictly request/response.
** Requests carry "op"; replies carry "ok" (and "error" when false).
** A frame over its bound or a header that is not a JSON object gets an error
** reply and closes the session; the server goes on with the next session.
** Modules are C shared objects or (version 3) OpenCL C with a manifest
** (tunelua_opencl.h), built on the server's OpenCL device in the session
** child; the server process itself never initializes OpenCL.
**
** Uploads go into a private work directory (mkdtemp, mode 0700), written as
** fresh files (O_EXCL | O_NOFOLLOW); at start-up, work directories of servers
** that are gone are removed only when they are real directories we own.
**
** The server registers with the tracker (UPDATE_INFO, then PUT of a fresh
** match key per session), serves one session at a time, each in a child
** process (tl_proc_call: a time limit and group kill; the child dies with
** the server), and reconnects to the tracker with back-off when it is gone.
** The client side of the session is client.c.
*/
#define _GNU_SOURCE
#include "rpc.h"
#include "../core/runtime/runtime.h"

#include <dirent.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* ---- the session (server side, in the child) ------------------------------------------------- */

#define SESS_MAX_ARRAYS 256
#define SESS_MAX_MODULES 64
#define SESS_MAX_GRAPHS 8
#define SESS_GRAPH_MAX_BYTES ((int64_t)1 << 30)   /* a graph's arena and arrays together */

typedef struct {
  int fd;
  const char *key;           /* "server:<key>" */
  const char *workdir;
  tl_ctx *ctx;
  tl_array *arrs[SESS_MAX_ARRAYS];
  struct { char *name; void *h; tl_ocl_module *ocl; } mods[SESS_MAX_MODULES];
  int nmods;
  int ocl_inited;            /* OpenCL was initialized in this process (load/call/time) */
  tl_graph_artifact *graphs[SESS_MAX_GRAPHS];
  int ngraphs;
  int log_fd;                /* the server's stderr when verbose, else -1 */
} session;

static void slog(session *s, const char *fmt, ...) {
  if (s->log_fd < 0) return;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  dprintf(s->log_fd, "rpc server: %s\n", buf);
}

static int valid_name(const char *s) {
  if (!s || !*s || strlen(s) > 200 || s[0] == '.') return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '_' || *p == '-'))
      return 0;
  return 1;
}

static int reply(session *s, json_t *j, const void *blob, uint64_t n) {
  char *t = json_dumps(j, JSON_COMPACT);
  json_decref(j);
  int rc = rpc_frame_send(s->ctx, s->fd, t ? t : "{\"ok\":false}", blob, n, tl_now() + 60);
  free(t);
  return rc;
}

static int reply_err(session *s, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return reply(s, json_pack("{s:b, s:s}", "ok", 0, "error", buf), NULL, 0);
}

static json_t *costs_json(const double *costs, int n) {
  json_t *c = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(c, json_real(costs[i]));
  return c;
}

/* The reply to "time": seconds per call, one per repeat. */
static int reply_costs(session *s, const double *costs, int n) {
  return reply(s, json_pack("{s:b, s:o}", "ok", 1, "costs", costs_json(costs, n)), NULL, 0);
}

/* The reply to "measure": rc and the results of tl_measure_run(_opencl); msg is consumed. */
static int reply_measured(session *s, int rc, const double *costs, int nc, int eno, char *msg) {
  if (rc) return reply_err(s, "measure: %s", tl_errmsg(s->ctx));
  json_t *j = json_pack("{s:b, s:i, s:o}", "ok", 1, "error_no", eno, "costs", costs_json(costs, nc));
  if (msg) json_object_set_new(j, "error", json_string(msg));
  free(msg);
  return reply(s, j, NULL, 0);
}

static void *module_of(session *s, const char *name) {
  for (int i = 0; i < s->nmods; i++)
    if (!strcmp(s->mods[i].name, name)) return s->mods[i].h ? s->mods[i].h : (void *)s->mods[i].ocl;
  return NULL;
}

static tl_array *array_arg(session *s, json_t *v) {
  if (!json_is_integer(v)) return NULL;
  json_int_t id = json_integer_value(v);
  if (id < 0 || id >= SESS_MAX_ARRAYS) return NULL;
  return s->arrs[id];
}

static tl_ocl_module *ocl_module_of(session *s, const char *name) {
  for (int i = 0; i < s->nmods; i++)
    if (!strcmp(s->mods[i].name, name)) return s->mods[i].ocl;
  return NULL;
}

/* A file of the work directory as text (at most 16 MiB, no NUL bytes); NULL with a message. */
static char *work_text(session *s, const char *name, char *err, size_t errn) {
  if (!valid_name(name)) {
    snprintf(err, errn, "bad file name");
    return NULL;
  }
  char *p = tl_sprintf("%s/%s", s->workdir, name);
  char *t = NULL;
  size_t len = 0;
  int rc = tl_read_file(s->ctx, p, &t, &len);
  free(p);
  if (rc) {
    snprintf(err, errn, "cannot read '%s' (upload it first): %s", name, tl_errmsg(s->ctx));
    return NULL;
  }
  if (len > ((size_t)16 << 20) || strlen(t) != len) {
    free(t);
    snprintf(err, errn, "'%s' is not a text file of at most 16 MiB", name);
    return NULL;
  }
  return t;
}

/* load kind "opencl": name = the uploaded OpenCL C, manifest = its uploaded manifest. The
** manifest is checked before OpenCL is touched; then the module is built on the device. */
static int load_opencl(session *s, json_t *req, const char *name) {
  const char *man = json_string_value(json_object_get(req, "manifest"));
  json_t *dv = json_object_get(req, "device");
  if (dv && (!json_is_integer(dv) || json_integer_value(dv) < 0 || json_integer_value(dv) > 255))
    return reply_err(s, "load: 'device' must be an OpenCL device number");
  int dev = dv ? (int)json_integer_value(dv) : 0;
  if (!man) return reply_err(s, "load: kind 'opencl' needs 'manifest' (an uploaded file name)");
  char err[600];
  char *src = work_text(s, name, err, sizeof err);
  if (!src) return reply_err(s, "load: source: %s", err);
  char *mt = work_text(s, man, err, sizeof err);
  if (!mt) {
    free(src);
    return reply_err(s, "load: manifest: %s", err);
  }
  int rc = tl_ocl_manifest_check(s->ctx, src, mt);
  tl_ocl_module *m = NULL;
  if (!rc) {
    s->ocl_inited = 1;
    rc = tl_ocl_module_from_source(s->ctx, src, mt, dev, &m);
  }
  free(src);
  free(mt);
  if (rc) return reply_err(s, "load: %s", tl_errmsg(s->ctx));
  s->mods[s->nmods].name = tl_strdup(name);
  s->mods[s->nmods].h = NULL;
  s->mods[s->nmods++].ocl = m;
  return reply(s, json_pack("{s:b, s:s, s:i}", "ok", 1, "kind", "opencl", "kernels",
                            tl_ocl_module_num_kernels(m)), NULL, 0);
}

/* call / time of an OpenCL module on host arrays: copied to the module's device, run, copied
** back (call); time follows the time-evaluator contract on the device's profiling events. */
static int run_opencl(session *s, const char *op, tl_ocl_module *m, json_t *req, json_t *args) {
  int na = (int)json_array_size(args);
  tl_array *host[64], *dev[64] = {0};
  int rc = TL_OK, made = 0;
  int repeat = 1;
  if (!strcmp(op, "time")) {
    repeat = (int)json_integer_value(json_object_get(req, "repeat"));
    if (repeat < 1 || repeat > 1024) return reply_err(s, "time: repeat must be in [1, 1024]");
  }
  for (int i = 0; i < na; i++) {
    host[i] = array_arg(s, json_array_get(args, i));
    if (!host[i]) return reply_err(s, "%s: argument %d is not an array id", op, i);
  }
  s->ocl_inited = 1;
  for (int i = 0; i < na && !rc; i++) {
    const DLTensor *t = tl_array_dltensor(host[i]);
    rc = tl_array_empty(s->ctx, t->ndim, t->shape, tl_array_dtype(host[i]), TL_DEV_OPENCL,
                        tl_ocl_module_device(m), &dev[i]);
    if (!rc) {
      made++;
      rc = tl_array_copyto(s->ctx, host[i], dev[i]);
    }
  }
  double costs[1024];
  if (!rc) {
    if (!strcmp(op, "call")) {
      rc = tl_ocl_module_call(s->ctx, m, dev, na);
      for (int i = 0; i < na && !rc; i++) rc = tl_array_copyto(s->ctx, dev[i], host[i]);
    } else {
      int number = (int)json_integer_value(json_object_get(req, "number"));
      double mrm = json_number_value(json_object_get(req, "min_repeat_ms"));
      rc = tl_ocl_module_time(s->ctx, m, dev, na, number, repeat, mrm, 0, costs);
    }
  }
  for (int i = 0; i < made; i++) tl_array_free(dev[i]);
  if (rc) return reply_err(s, "%s: %s", op, tl_errmsg(s->ctx));
  if (!strcmp(op, "call")) return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0);
  return reply_costs(s, costs, repeat);
}

/* measure kind "opencl": the whole trial in a child of the session (tl_measure_run_opencl). */
static int measure_opencl(session *s, json_t *req, const char *mod) {
  const char *man = json_string_value(json_object_get(req, "manifest"));
  const char *rmod = json_string_value(json_object_get(req, "ref_module"));
  const char *rman = json_string_value(json_object_get(req, "ref_manifest"));
  json_t *dv = json_object_get(req, "device");
  if (!valid_name(man)) return reply_err(s, "measure: kind 'opencl' needs 'manifest' (an uploaded file name)");
  if (rmod && (!valid_name(rmod) || !valid_name(rman)))
    return reply_err(s, "measure: bad 'ref_module' or 'ref_manifest'");
  if (dv && (!json_is_integer(dv) || json_integer_value(dv) < 0 || json_integer_value(dv) > 255))
    return reply_err(s, "measure: 'device' must be an OpenCL device number");
  if (s->ocl_inited)
    return reply_err(s, "measure: OpenCL was already initialized in this session (load/call/time "
                     "of an OpenCL module) and cannot be used in a forked child; measure in a "
                     "fresh session");
  int number = (int)json_integer_value(json_object_get(req, "number"));
  int repeat = (int)json_integer_value(json_object_get(req, "repeat"));
  double mrm = json_number_value(json_object_get(req, "min_repeat_ms"));
  double to = json_number_value(json_object_get(req, "timeout"));
  double bto = json_number_value(json_object_get(req, "build_timeout"));
  double rtol = json_number_value(json_object_get(req, "rtol"));
  if (repeat < 1 || repeat > 1024) return reply_err(s, "measure: repeat must be in [1, 1024]");
  if (to > 3600 || bto > 3600) return reply_err(s, "measure: timeouts are at most 3600 s");
  char *p = tl_sprintf("%s/%s", s->workdir, mod);
  char *mp = tl_sprintf("%s/%s", s->workdir, man);
  char *rp = rmod ? tl_sprintf("%s/%s", s->workdir, rmod) : NULL;
  char *rmp = rmod ? tl_sprintf("%s/%s", s->workdir, rman) : NULL;
  double costs[1024];
  int nc = 0, eno = 0;
  char *msg = NULL;
  int rc = tl_measure_run_opencl(s->ctx, p, mp, dv ? (int)json_integer_value(dv) : 0, number,
                                 repeat, mrm, bto > 0 ? bto : 10, to > 0 ? to : 10, rp, rmp, rtol,
                                 costs, &nc, &eno, &msg);
  free(p);
  free(mp);
  free(rp);
  free(rmp);
  return reply_measured(s, rc, costs, nc, eno, msg);
}

/* measure kind "vta": a conv2d_packed.vta config run on this server's VTA simulator in a
** child of the session (tl_vta_measure); the request carries the hardware configuration, the
** task's args and the config index, nothing is uploaded. */
static int measure_vta(session *s, json_t *req) {
  const char *cfg = json_string_value(json_object_get(req, "config"));
  const char *args = json_string_value(json_object_get(req, "args"));
  json_t *ix = json_object_get(req, "index");
  int repeat = (int)json_integer_value(json_object_get(req, "repeat"));
  double to = json_number_value(json_object_get(req, "timeout"));
  if (!cfg || !args || !json_is_integer(ix) || json_integer_value(ix) < 0)
    return reply_err(s, "measure: kind 'vta' needs 'config', 'args' and 'index'");
  if (repeat < 1 || repeat > 1024) return reply_err(s, "measure: repeat must be in [1, 1024]");
  if (to > 3600) return reply_err(s, "measure: timeouts are at most 3600 s");
  double costs[1024];
  int nc = 0, eno = 0;
  char *msg = NULL;
  int rc = tl_vta_measure(s->ctx, cfg, args, json_integer_value(ix), repeat, to > 0 ? to : 10,
                          costs, &nc, &eno, &msg);
  return reply_measured(s, rc, costs, nc, eno, msg);
}

/* Remove the entries of the directory name in dirfd (AT_FDCWD: a path) without following a
** link: the directory itself must be a real directory owned by us (lstat, then opened with
** O_NOFOLLOW and checked again); a link inside is removed, never its target; subdirectories
** are left alone. Returns 0 when the directory was ours and emptied. */
static int empty_own_dir(int dirfd, const char *name) {
  struct stat st, st2;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
      st.st_uid != getuid())
    return -1;
  int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, &st2) != 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino ||
      st2.st_uid != getuid()) {
    close(fd);
    return -1;
  }
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat es;
    if (fstatat(fd, e->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(es.st_mode))
      unlinkat(fd, e->d_name, 0);
  }
  closedir(d);
  return 0;
}

static void remove_all(const char *dir) { empty_own_dir(AT_FDCWD, dir); }

/* Work directories of servers that were killed (tunelua-rpc-<pid>[.XXXXXX], that pid gone),
** in tdir: only real directories we own are emptied and removed. */
static void clean_stale(const char *tdir) {
  int tfd = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (tfd < 0) return;
  DIR *td = fdopendir(tfd);
  if (!td) {
    close(tfd);
    return;
  }
  struct dirent *e;
  while ((e = readdir(td))) {
    int pid = 0, used = 0;
    if (sscanf(e->d_name, "tunelua-rpc-%d%n", &pid, &used) != 1 || pid <= 0) continue;
    if (e->d_name[used] && e->d_name[used] != '.') continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (empty_own_dir(tfd, e->d_name) == 0) unlinkat(tfd, e->d_name, AT_REMOVEDIR);
  }
  closedir(td);
}

/* ---- graphs: a compiled network (core/graph/artifact.c) run by the executor ---------------- */

static json_t *array_desc(tl_array *a) {
  json_t *sh = json_array();
  for (int d = 0; d < tl_array_ndim(a); d++) json_array_append_new(sh, json_integer(tl_array_shape(a)[d]));
  return json_pack("{s:o, s:s}", "shape", sh, "dtype", tl_dtype_name(tl_array_dtype(a)));
}

/* An input (out = 0) or output (out = 1) of graph a as an array sharing its slot. */
static tl_array *graph_io(session *s, tl_graph_artifact *a, int out, int i) {
  int slot = out ? tl_graph_artifact_output_slot(a, i) : tl_graph_artifact_input_slot(a, i);
  tl_array *r = NULL;
  tl_graph_exec_slot_ref(s->ctx, tl_graph_artifact_exec(a), slot, &r);
  return r;
}

/* t itself when it is a host array, else a host array of its shape (with t's bytes when
** copy); NULL on failure (the message in the context). */
static tl_array *host_copy(session *s, tl_array *t, int copy) {
  if (!t) return NULL;
  if (tl_array_data(t)) return t;
  tl_array *h = NULL;
  if (tl_array_empty(s->ctx, tl_array_ndim(t), tl_array_shape(t), tl_array_dtype(t), TL_DEV_CPU, 0, &h))
    return NULL;
  if (copy && tl_array_copyto(s->ctx, t, h)) {
    tl_array_free(h);
    return NULL;
  }
  return h;
}

/* The model of the VTA configuration this server simulates (--vta-config), or "": any. */
static char server_vta_model[128];

TL_EXPORT int tl_rpc_server_set_vta_config(tl_ctx *ctx, const char *path) {
  tl_vta_config *c = NULL;
  int rc = tl_vta_config_load(ctx, path, &c);
  if (rc) return rc;
  char *j = NULL;
  rc = tl_vta_config_json(ctx, c, &j);
  tl_vta_config_free(c);
  if (rc) return rc;
  json_t *o = json_loads(j, 0, NULL);
  const char *m = json_string_value(json_object_get(o, "MODEL"));
  if (m) snprintf(server_vta_model, sizeof server_vta_model, "%s", m);
  else rc = tl_err(ctx, TL_E_INTERNAL, "rpc server: the VTA configuration '%s' has no model", path);
  json_decref(o);
  tl_vta_free(j);
  return rc;
}

/* graph_load {name, params[, device]}: the graph of uploaded files; graph_run {graph} with the inputs'
** bytes in order (or none: the inputs stay), replying the outputs' bytes; graph_time {graph,
** number, repeat, min_repeat_ms}: seconds per run (tl_graph_exec_time). */
static int serve_graph(session *s, const char *op, json_t *req, const void *blob, uint64_t n) {
  if (!strcmp(op, "graph_load")) {
    const char *name = json_string_value(json_object_get(req, "name"));
    const char *params = json_string_value(json_object_get(req, "params"));
    if (!valid_name(name) || (params && *params && !valid_name(params)))
      return reply_err(s, "graph_load: 'name' and 'params' must be uploaded file names");
    if (s->ngraphs >= SESS_MAX_GRAPHS)
      return reply_err(s, "graph_load: at most %d graphs per session", SESS_MAX_GRAPHS);
    json_t *dv = json_object_get(req, "device");
    if (dv && (!json_is_integer(dv) || json_integer_value(dv) < 0 || json_integer_value(dv) > 255))
      return reply_err(s, "graph_load: 'device' must be an OpenCL device number");
    tl_graph_artifact *a = NULL;
    /* an OpenCL graph brings OpenCL up in this process (no forked OpenCL measure after it) */
    s->ocl_inited = 1;
    /* a network with VTA groups gets a simulator of its own (targets/vta/artifact.c) */
    if (tl_graph_artifact_load_kind(s->ctx, s->workdir, name, params, SESS_GRAPH_MAX_BYTES,
                                    dv ? (int)json_integer_value(dv) : 0, tl_vta_graph_kind(), &a))
      return reply_err(s, "graph_load: %s", tl_errmsg(s->ctx));
    const char *vm = tl_vta_graph_model(tl_graph_artifact_host_state(a));
    if (vm && server_vta_model[0] && strcmp(vm, server_vta_model)) {
      int rc = reply_err(s, "graph_load: the network's VTA groups were built for %s, this server "
                         "simulates %s (--vta-config)", vm, server_vta_model);
      tl_graph_artifact_free(a);
      return rc;
    }
    int id = s->ngraphs++;
    s->graphs[id] = a;
    json_t *ins = json_array(), *outs = json_array();
    for (int i = 0; i < tl_graph_artifact_num_inputs(a); i++) {
      tl_array *t = graph_io(s, a, 0, i);
      json_t *d = array_desc(t);
      json_object_set_new(d, "name", json_string(tl_graph_artifact_input_name(a, i)));
      json_array_append_new(ins, d);
      tl_array_free(t);
    }
    for (int i = 0; i < tl_graph_artifact_num_outputs(a); i++) {
      tl_array *t = graph_io(s, a, 1, i);
      json_array_append_new(outs, array_desc(t));
      tl_array_free(t);
    }
    int nvta = tl_vta_graph_cycles(tl_graph_artifact_host_state(a), 0, NULL, 0);
    slog(s, "graph_load '%s': graph %d, %d steps, %d inputs, %d outputs, %s%s", name, id,
         tl_graph_artifact_num_steps(a), tl_graph_artifact_num_inputs(a),
         tl_graph_artifact_num_outputs(a),
         tl_device_type_name(tl_graph_artifact_device(a)), nvta ? " with VTA groups on vta-sim" : "");
    json_t *r = json_pack("{s:b, s:i, s:i, s:o, s:o}", "ok", 1, "graph", id, "steps",
                          tl_graph_artifact_num_steps(a), "inputs", ins, "outputs", outs);
    if (nvta) json_object_set_new(r, "vta_groups", json_integer(nvta));
    return reply(s, r, NULL, 0);
  }
  json_t *gv = json_object_get(req, "graph");
  if (!json_is_integer(gv) || json_integer_value(gv) < 0 || json_integer_value(gv) >= s->ngraphs)
    return reply_err(s, "%s: 'graph' is not the id of a loaded graph", op);
  int id = (int)json_integer_value(gv);
  tl_graph_artifact *a = s->graphs[id];
  tl_graph_exec *e = tl_graph_artifact_exec(a);
  if (!strcmp(op, "graph_run")) {
    int nin = tl_graph_artifact_num_inputs(a), nout = tl_graph_artifact_num_outputs(a);
    if (n > 0) {
      uint64_t want = 0;
      for (int i = 0; i < nin; i++) {
        tl_array *t = graph_io(s, a, 0, i);
        want += tl_array_nbytes(t);
        tl_array_free(t);
      }
      if (n != want)
        return reply_err(s, "graph_run: %llu bytes of inputs, the graph's inputs have %llu",
                         (unsigned long long)n, (unsigned long long)want);
      const unsigned char *p = blob;
      int rc = TL_OK;
      for (int i = 0; i < nin && !rc; i++) {
        tl_array *t = graph_io(s, a, 0, i);
        tl_array *h = host_copy(s, t, 0);
        if (!h) rc = TL_E_NOMEM;
        if (!rc) {
          memcpy(tl_array_data(h), p, tl_array_nbytes(h));
          p += tl_array_nbytes(h);
          if (h != t) rc = tl_array_copyto(s->ctx, h, t);
        }
        if (h != t) tl_array_free(h);
        tl_array_free(t);
      }
      if (rc) return reply_err(s, "graph_run: setting the inputs: %s", tl_errmsg(s->ctx));
    }
    double t0 = tl_now();
    if (tl_graph_exec_run(s->ctx, e)) return reply_err(s, "graph_run: %s", tl_errmsg(s->ctx));
    double dt = tl_now() - t0;
    tl_buf b = {0};
    for (int i = 0; i < nout; i++) {
      tl_array *t = graph_io(s, a, 1, i);
      tl_array *h = host_copy(s, t, 1);
      if (!h) {
        tl_array_free(t);
        free(b.s);
        return reply_err(s, "graph_run: reading output %d: %s", i, tl_errmsg(s->ctx));
      }
      tl_buf_putn(&b, tl_array_data(h), tl_array_nbytes(h));
      if (h != t) tl_array_free(h);
      tl_array_free(t);
    }
    /* a VTA network: each group's simulated cycles of this run, in kernel order */
    void *vs = tl_graph_artifact_host_state(a);
    int nvta = tl_vta_graph_cycles(vs, 0, NULL, 0);
    json_t *r = json_pack("{s:b, s:f}", "ok", 1, "seconds", dt);
    uint64_t vsum = 0;
    if (nvta > 0) {
      uint64_t *cyc = tl_calloc((size_t)nvta, sizeof *cyc);
      tl_vta_graph_cycles(vs, 0, cyc, nvta);
      json_t *cl = json_array();
      for (int i = 0; i < nvta; i++) {
        json_array_append_new(cl, json_integer((json_int_t)cyc[i]));
        vsum += cyc[i];
      }
      free(cyc);
      json_object_set_new(r, "vta_cycles", cl);
    }
    slog(s, "graph_run graph %d: %d steps in %.3f ms%s", id, tl_graph_artifact_num_steps(a),
         dt * 1e3, n > 0 ? " (inputs set)" : "");
    if (nvta > 0) slog(s, "graph_run graph %d: %d VTA groups, %llu simulated cycles", id, nvta,
                       (unsigned long long)vsum);
    int rc = reply(s, r, b.s, b.n);
    free(b.s);
    return rc;
  }
  if (!strcmp(op, "graph_time")) {
    json_t *nv = json_object_get(req, "number"), *rv = json_object_get(req, "repeat");
    json_t *mv = json_object_get(req, "min_repeat_ms");
    int number = nv ? (int)json_integer_value(nv) : 1, repeat = rv ? (int)json_integer_value(rv) : 1;
    double mrm = mv ? json_number_value(mv) : 0;
    if (number < 1 || number > 1000000 || repeat < 1 || repeat > 1024 || !(mrm >= 0 && mrm <= 60000))
      return reply_err(s, "graph_time: number must be in [1, 1000000], repeat in [1, 1024], "
                       "min_repeat_ms in [0, 60000]");
    double costs[1024];
    if (tl_graph_exec_time(s->ctx, e, number, repeat, mrm, costs))
      return reply_err(s, "graph_time: %s", tl_errmsg(s->ctx));
    double sum = 0;
    for (int i = 0; i < repeat; i++) sum += costs[i];
    slog(s, "graph_time graph %d: %d x %d runs, mean %.3f ms", id, repeat, number,
         sum / repeat * 1e3);
    return reply_costs(s, costs, repeat);
  }
  return reply_err(s, "unknown op '%s'", op);
}

/* Handle one request; returns 1 to end the session. */
static int serve_one(session *s, json_t *req, void *blob, uint64_t n) {
  const char *op = json_string_value(json_object_get(req, "op"));
  const char *name = json_string_value(json_object_get(req, "name"));
  if (!op) return reply_err(s, "request has no 'op'") ? 1 : 0;
  if (!strcmp(op, "hello")) {
    return reply(s, json_pack("{s:b, s:i, s:s, s:s}", "ok", 1, "version", RPC_SESSION_VERSION,
                              "key", s->key, "workdir", s->workdir), NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "shutdown")) {
    reply(s, json_pack("{s:b}", "ok", 1), NULL, 0);
    return 1;
  }
  if (!strcmp(op, "upload")) {
    json_int_t size = json_integer_value(json_object_get(req, "size"));
    if (!valid_name(name)) return reply_err(s, "upload: bad file name") ? 1 : 0;
    if (size < 0 || (uint64_t)size > RPC_SESSION_MAX_BLOB)
      return reply_err(s, "upload: bad size %lld", (long long)size) ? 1 : 0;
    unsigned char *raw = malloc((size_t)size + 1);
    uLongf rl = (uLongf)size;
    int zr = raw ? uncompress(raw, &rl, blob, (uLong)n) : Z_MEM_ERROR;
    if (zr != Z_OK || rl != (uLongf)size) {
      free(raw);
      return reply_err(s, "upload: payload is not zlib data of %lld bytes (zlib %d)",
                       (long long)size, zr) ? 1 : 0;
    }
    /* a fresh file of ours: an existing name (a link included) is replaced, never followed */
    char *p = tl_sprintf("%s/%s", s->workdir, name);
    unlink(p);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int bad = fd < 0, err = errno;
    for (size_t off = 0; !bad && off < rl;) {
      ssize_t w = write(fd, raw + off, rl - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        bad = 1;
        err = w < 0 ? errno : ENOSPC;
      } else {
        off += (size_t)w;
      }
    }
    if (fd >= 0 && close(fd) != 0 && !bad) {
      bad = 1;
      err = errno;
    }
    free(raw);
    free(p);
    if (bad) return reply_err(s, "upload: cannot write '%s': %s", name, strerror(err)) ? 1 : 0;
    return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "remove")) {
    if (name && !*name) {
      remove_all(s->workdir);
    } else {
      if (!valid_name(name)) return reply_err(s, "remove: bad file name") ? 1 : 0;
      char *p = tl_sprintf("%s/%s", s->workdir, name);
      unlink(p);
      free(p);
    }
    return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "load")) {
    const char *kind = json_string_value(json_object_get(req, "kind"));
    if (!valid_name(name)) return reply_err(s, "load: bad file name") ? 1 : 0;
    if (kind && strcmp(kind, "so") && strcmp(kind, "opencl"))
      return reply_err(s, "load: unknown kind '%.64s' (expected \"so\" or \"opencl\")", kind) ? 1 : 0;
    if (module_of(s, name)) return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
    if (s->nmods >= SESS_MAX_MODULES) return reply_err(s, "load: too many modules") ? 1 : 0;
    if (kind && !strcmp(kind, "opencl")) return load_opencl(s, req, name) ? 1 : 0;
    char *p = tl_sprintf("%s/%s", s->workdir, name);
    void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    free(p);
    if (!h) {
      const char *e = dlerror();
      return reply_err(s, "load: %s", e ? e : "cannot load") ? 1 : 0;
    }
    s->mods[s->nmods].name = tl_strdup(name);
    s->mods[s->nmods++].h = h;
    return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "alloc")) {
    json_t *shape = json_object_get(req, "shape");
    const char *dt = json_string_value(json_object_get(req, "dtype"));
    int dtype = TL_FLOAT32;
    if (dt && tl_dtype_parse(s->ctx, dt, &dtype)) return reply_err(s, "alloc: %s", tl_errmsg(s->ctx)) ? 1 : 0;
    if (!json_is_array(shape) || json_array_size(shape) > 16) return reply_err(s, "alloc: bad shape") ? 1 : 0;
    int64_t sh[16];
    double numel = 1;
    int nd = (int)json_array_size(shape);
    for (int d = 0; d < nd; d++) {
      sh[d] = json_integer_value(json_array_get(shape, d));
      if (sh[d] < 0) return reply_err(s, "alloc: negative extent") ? 1 : 0;
      numel *= (double)sh[d];
    }
    if (numel * tl_dtype_bytes(dtype) > (double)RPC_SESSION_MAX_BLOB)
      return reply_err(s, "alloc: array too large") ? 1 : 0;
    int id = -1;
    for (int i = 0; i < SESS_MAX_ARRAYS; i++)
      if (!s->arrs[i]) {
        id = i;
        break;
      }
    if (id < 0) return reply_err(s, "alloc: too many arrays") ? 1 : 0;
    if (tl_array_empty(s->ctx, nd, sh, dtype, TL_DEV_CPU, 0, &s->arrs[id]))
      return reply_err(s, "alloc: %s", tl_errmsg(s->ctx)) ? 1 : 0;
    return reply(s, json_pack("{s:b, s:i}", "ok", 1, "id", id), NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "free") || !strcmp(op, "copy_to") || !strcmp(op, "copy_from") ||
      !strcmp(op, "random")) {
    json_t *idv = json_object_get(req, "id");
    tl_array *a = array_arg(s, idv);
    if (!a) return reply_err(s, "%s: no array %s", op, json_is_integer(idv) ? "with that id" : "id") ? 1 : 0;
    if (!strcmp(op, "free")) {
      tl_array_free(a);
      s->arrs[json_integer_value(idv)] = NULL;
      return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
    }
    if (!strcmp(op, "random")) {
      json_int_t seed = json_integer_value(json_object_get(req, "seed"));
      double hi = tl_dtype_is_float(tl_array_dtype(a)) ? 1.0 : 10.0;
      tl_array_random(s->ctx, a, 0, 0.0, hi, (uint64_t)seed);
      return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
    }
    if (!strcmp(op, "copy_to")) {
      if (n != tl_array_nbytes(a))
        return reply_err(s, "copy_to: %llu bytes for an array of %zu", (unsigned long long)n,
                         tl_array_nbytes(a)) ? 1 : 0;
      memcpy(tl_array_data(a), blob, (size_t)n);
      return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
    }
    return reply(s, json_pack("{s:b}", "ok", 1), tl_array_data(a), tl_array_nbytes(a)) ? 1 : 0;
  }
  if (!strcmp(op, "call") || !strcmp(op, "time")) {
    const char *mod = json_string_value(json_object_get(req, "module"));
    const char *fn = json_string_value(json_object_get(req, "func"));
    json_t *args = json_object_get(req, "args");
    void *h = mod ? module_of(s, mod) : NULL;
    if (!h) return reply_err(s, "%s: module '%s' is not loaded", op, mod ? mod : "?") ? 1 : 0;
    tl_ocl_module *om = ocl_module_of(s, mod);
    if (om) {
      if (!json_is_array(args) || json_array_size(args) > 64) return reply_err(s, "%s: bad args", op) ? 1 : 0;
      return run_opencl(s, op, om, req, args) ? 1 : 0;
    }
    void *f = fn ? dlsym(h, fn) : NULL;
    if (!f) return reply_err(s, "%s: module '%s' has no function '%s'", op, mod, fn ? fn : "?") ? 1 : 0;
    if (!json_is_array(args) || json_array_size(args) > 64) return reply_err(s, "%s: bad args", op) ? 1 : 0;
    void *dl[64];
    int na = (int)json_array_size(args);
    for (int i = 0; i < na; i++) {
      tl_array *a = array_arg(s, json_array_get(args, i));
      if (!a) return reply_err(s, "%s: argument %d is not an array id", op, i) ? 1 : 0;
      dl[i] = tl_array_dltensor(a);
    }
    int32_t (*k)(void **, int32_t);
    *(void **)&k = f;
    if (!strcmp(op, "call")) {
      int32_t kr = k(dl, na);
      if (kr) return reply_err(s, "call: kernel '%s' failed with code %d", fn, (int)kr) ? 1 : 0;
      return reply(s, json_pack("{s:b}", "ok", 1), NULL, 0) ? 1 : 0;
    }
    int number = (int)json_integer_value(json_object_get(req, "number"));
    int repeat = (int)json_integer_value(json_object_get(req, "repeat"));
    double mrm = json_number_value(json_object_get(req, "min_repeat_ms"));
    int flush = json_is_true(json_object_get(req, "cache_flush"));
    if (repeat < 1 || repeat > 1024) return reply_err(s, "time: repeat must be in [1, 1024]") ? 1 : 0;
    double costs[1024];
    int32_t kc = 0;
    if (tl_kernel_time(f, dl, na, number, repeat, mrm, flush, costs, &kc))
      return reply_err(s, "time: kernel '%s' failed with code %d", fn, (int)kc) ? 1 : 0;
    return reply_costs(s, costs, repeat) ? 1 : 0;
  }
  if (!strncmp(op, "graph_", 6)) return serve_graph(s, op, req, blob, n) ? 1 : 0;
  if (!strcmp(op, "measure")) {
    const char *mod = json_string_value(json_object_get(req, "module"));
    const char *fn = json_string_value(json_object_get(req, "func"));
    const char *sig = json_string_value(json_object_get(req, "sig"));
    const char *kind = json_string_value(json_object_get(req, "kind"));
    if (kind && !strcmp(kind, "opencl")) {
      if (!valid_name(mod)) return reply_err(s, "measure: needs 'module'") ? 1 : 0;
      return measure_opencl(s, req, mod) ? 1 : 0;
    }
    if (kind && !strcmp(kind, "vta")) return measure_vta(s, req) ? 1 : 0;
    if (kind && strcmp(kind, "so"))
      return reply_err(s, "measure: unknown kind '%.64s' (expected \"so\", \"opencl\" or \"vta\")", kind) ? 1 : 0;
    if (!valid_name(mod) || !sig) return reply_err(s, "measure: needs 'module' and 'sig'") ? 1 : 0;
    int number = (int)json_integer_value(json_object_get(req, "number"));
    int repeat = (int)json_integer_value(json_object_get(req, "repeat"));
    double mrm = json_number_value(json_object_get(req, "min_repeat_ms"));
    int flush = json_is_true(json_object_get(req, "cache_flush"));
    double to = json_number_value(json_object_get(req, "timeout"));
    if (repeat < 1 || repeat > 1024) return reply_err(s, "measure: repeat must be in [1, 1024]") ? 1 : 0;
    /* version 2: check_correctness against a reference kernel uploaded in this session */
    const char *rmod = json_string_value(json_object_get(req, "ref_module"));
    const char *rfn = json_string_value(json_object_get(req, "ref_func"));
    double rtol = json_number_value(json_object_get(req, "rtol"));
    if (rmod && !valid_name(rmod)) return reply_err(s, "measure: bad 'ref_module'") ? 1 : 0;
    char *p = tl_sprintf("%s/%s", s->workdir, mod);
    char *rp = rmod ? tl_sprintf("%s/%s", s->workdir, rmod) : NULL;
    double costs[1024];
    int nc = 0, eno = 0;
    char *msg = NULL;
    int rc = tl_measure_run(s->ctx, p, fn, sig, number, repeat, mrm, flush, to > 0 ? to : 10,
                            rp, rp ? rfn : NULL, rtol, costs, &nc, &eno, &msg);
    free(p);
    free(rp);
    return reply_measured(s, rc, costs, nc, eno, msg) ? 1 : 0;
  }
  return reply_err(s, "unknown op '%s'", op) ? 1 : 0;
}

typedef struct {
  int fd;
  const char *key;
  const char *workdir;
  double idle_s;
  int log_fd;
} session_arg;

static int session_main(void *argp, int out_fd) {
  session_arg *a = argp;     /* tl_proc_call's child: it dies with the server */
  session s = {0};
  s.fd = a->fd;
  s.key = a->key;
  s.workdir = a->workdir;
  s.ctx = tl_ctx_new();
  s.log_fd = a->log_fd;
  for (;;) {
    void *blob = NULL;
    uint64_t n = 0;
    tl_clearerr(s.ctx);
    json_t *req = NULL;
    int rc = rpc_request_recv(s.ctx, s.fd, &req, &blob, &n, tl_now() + a->idle_s);
    if (rc) {
      if (rc == TL_E_PARSE) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s; closing the session", tl_errmsg(s.ctx));
        reply_err(&s, "%s", msg);
        fprintf(stderr, "session: %s\n", msg);
        return 2;
      }
      return 0;   /* peer gone or idle */
    }
    int end = serve_one(&s, req, blob, n);
    json_decref(req);
    free(blob);
    if (end) break;
  }
  return 0;
}

/* ---- the server -------------------------------------------------------------------------- */

static volatile sig_atomic_t server_stop;
static void on_term(int sig) { server_stop = 1; (void)sig; }

/* Handshakes in progress: read as their bytes come, never blocking the server (a peer that
** connects and says nothing holds a slot until RPC_HANDSHAKE_S, and the oldest makes room
** when all are taken). */
#define SERVER_MAX_HELLO 16

typedef struct {
  int fd;
  double deadline;
  size_t n;
  unsigned char buf[RPC_HELLO_MAX];
} hello_conn;

static void hello_drop(hello_conn *hs, int *nhs, int i) {
  close(hs[i].fd);
  hs[i] = hs[--*nhs];
}

/* Answer a complete handshake: 0 = a session starts on fd, 1 = refused (code sent). */
static int hello_answer(tl_ctx *ctx, int fd, const rpc_hello *h, const char *match_key,
                        const char *skey, const char *auth) {
  int keyed = auth && *auth;
  int32_t code = 0;
  char want[RPC_MAX_KEY + 16];
  snprintf(want, sizeof want, "client:%s", match_key);
  if (keyed && !h->keyed) code = RPC_AUTH_REQUIRED;
  else if (!keyed && h->keyed) code = RPC_AUTH_NONE;
  else if (keyed && !rpc_auth_equal(h->auth, h->auth_n, auth, strlen(auth))) code = RPC_AUTH_REFUSED;
  else if (strcmp(h->key, want) != 0) code = RPC_CODE_MISMATCH;
  double dl = tl_now() + 2;
  if (code) {
    rpc_send_i32(ctx, fd, code, dl);
    return 1;
  }
  if (rpc_send_i32(ctx, fd, RPC_CODE_SUCCESS, dl) || rpc_send_str(ctx, fd, skey, dl))
    return 1;
  return 0;
}

/* Read what handshake i has; 1 when it is complete (h filled), -1 when it must close. */
static int hello_read(hello_conn *c, rpc_hello *h) {
  for (;;) {
    size_t need = 0;
    long u = rpc_hello_parse(c->buf, c->n, h, &need);
    if (u < 0) return -1;
    if (u > 0) return 1;
    if (need > sizeof c->buf) return -1;
    ssize_t r = recv(c->fd, c->buf + c->n, need - c->n, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    if (r <= 0) return -1;
    c->n += (size_t)r;
  }
}

/* rpc_tracker_call_json with a 5 s limit: did the tracker answer 0 (success)? */
static int tracker_ok(tl_ctx *ctx, int fd, json_t *msg) {
  json_t *r = NULL;
  int ok = !rpc_tracker_call_json(ctx, fd, msg, 5, &r) && json_integer_value(r) == 0;
  json_decref(r);
  return ok;
}

TL_EXPORT int tl_rpc_server_run(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                                const char *key, const char *host, int port, int port_end,
                                const char *custom_addr, double session_timeout,
                                const char *auth_key, int verbose) {
  if (!key || !*key || strlen(key) > 200) return tl_err(ctx, TL_E_ARG, "rpc server: bad key");
  if (auth_key && strlen(auth_key) > RPC_MAX_AUTH)
    return tl_err(ctx, TL_E_ARG, "rpc server: the auth key is over %d bytes", RPC_MAX_AUTH);
  if (tracker_host && (tracker_port < 1 || tracker_port > 65535))
    return tl_err(ctx, TL_E_ARG, "rpc server: tracker port %d out of range (expected 1..65535)",
                  tracker_port);
  int lfd, bound;
  int rc = rpc_listen(ctx, host, port, port_end, &lfd, &bound);
  if (rc) return rc;
  fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);
  server_stop = 0;
  struct sigaction sa = {0};
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  const char *tmp = getenv("TMPDIR");
  const char *tdir = tmp && *tmp ? tmp : "/tmp";
  clean_stale(tdir);
  /* the work directory: fresh, private (mkdtemp: mode 0700), never an existing name */
  char *workdir = tl_sprintf("%s/tunelua-rpc-%d.XXXXXX", tdir, (int)getpid());
  if (!mkdtemp(workdir)) {
    rc = tl_err(ctx, TL_E_IO, "rpc server: cannot create a work directory in '%s': %s", tdir,
                strerror(errno));
    free(workdir);
    close(lfd);
    return rc;
  }
  printf("bind to %s:%d\n", host && *host ? host : "127.0.0.1", bound);
  fflush(stdout);
  char skey[300];
  snprintf(skey, sizeof skey, "server:%s", key);
  int tfd = -1;
  double backoff = 0.5;
  unsigned long counter = 0;
  uint64_t salt = tl_hash_bytes(&lfd, sizeof lfd, (uint64_t)(tl_now() * 1e9) ^ (uint64_t)getpid());
  char match_key[300];
  hello_conn *hs = tl_calloc(SERVER_MAX_HELLO, sizeof *hs);
  int nhs = 0;
  while (!server_stop) {
    /* 1. the tracker connection (with back-off while it is down) */
    if (tracker_host && tfd < 0) {
      tl_clearerr(ctx);
      if (rpc_tracker_open(ctx, tracker_host, tracker_port, 5, auth_key, &tfd)) {
        if (verbose || backoff >= 8)
          fprintf(stderr, "rpc server: %s; retrying in %.1f s\n", tl_errmsg(ctx), backoff);
        rpc_sleep(backoff);
        backoff = backoff * 2 > 30 ? 30 : backoff * 2;
        continue;
      }
      json_t *info = json_pack("{s:s, s:[s?, i]}", "key", skey, "addr", custom_addr, bound);
      if (!tracker_ok(ctx, tfd, json_pack("[i, o]", TC_UPDATE_INFO, info))) {
        close(tfd);
        tfd = -1;
        continue;
      }
      backoff = 0.5;
    }
    /* 2. a fresh match key, PUT */
    if (tracker_host) {
      snprintf(match_key, sizeof match_key, "%s:%llu.%lu", key,
               (unsigned long long)(salt % 1000000007ull), ++counter);
      json_t *put = json_pack("[i, s, [i, s], s?]", TC_PUT, key, bound, match_key, custom_addr);
      if (!tracker_ok(ctx, tfd, put)) {
        close(tfd);
        tfd = -1;
        continue;
      }
    } else {
      snprintf(match_key, sizeof match_key, "%s", key);
    }
    /* 3. wait for the client; check the tracker every 2 s; handshakes as their bytes come */
    int misses = 0, cfd = -1, lost = 0;
    double topt = 0, next_check = tl_now() + 2;
    while (!server_stop && cfd < 0) {
      struct pollfd pf[2 + SERVER_MAX_HELLO];
      pf[0] = (struct pollfd){lfd, POLLIN, 0};
      pf[1] = (struct pollfd){tfd, POLLIN, 0};   /* a negative fd is ignored by poll */
      double now = tl_now(), wake = next_check;
      for (int i = 0; i < nhs; i++) {
        pf[2 + i] = (struct pollfd){hs[i].fd, POLLIN, 0};
        if (hs[i].deadline < wake) wake = hs[i].deadline;
      }
      int ms = wake > now ? (int)((wake - now) * 1000) + 1 : 0;
      int pr = poll(pf, (nfds_t)(2 + nhs), ms);
      if (pr < 0) continue;
      if (tfd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {   /* tracker gone */
        lost = 1;
        break;
      }
      now = tl_now();
      for (int i = nhs - 1; i >= 0 && cfd < 0; i--) {
        int st = 0;
        rpc_hello h;
        if (pf[2 + i].revents) st = hello_read(&hs[i], &h);
        if (st == 0 && now > hs[i].deadline) st = -1;
        if (st == 0) continue;
        if (st > 0) {
          tl_clearerr(ctx);
          int fd = hs[i].fd;
          fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
          if (hello_answer(ctx, fd, &h, match_key, skey, auth_key) == 0) {
            cfd = fd;
            topt = h.timeout_s;
            hs[i] = hs[--nhs];
            break;
          }
          if (verbose) fprintf(stderr, "rpc server: handshake refused\n");
        }
        hello_drop(hs, &nhs, i);   /* not our client (wrong key, junk, too slow) */
      }
      if (cfd >= 0) break;
      if (pf[0].revents & POLLIN) {
        for (int k = 0; k < SERVER_MAX_HELLO; k++) {
          int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (fd < 0) break;
          rpc_keepalive(fd);
          if (nhs == SERVER_MAX_HELLO) {   /* the oldest makes room */
            int old = 0;
            for (int i = 1; i < nhs; i++)
              if (hs[i].deadline < hs[old].deadline) old = i;
            hello_drop(hs, &nhs, old);
          }
          hs[nhs].fd = fd;
          hs[nhs].n = 0;
          hs[nhs++].deadline = now + RPC_HANDSHAKE_S;
        }
      }
      if (tfd >= 0 && now >= next_check) {
        next_check = now + 2;
        json_t *r = NULL;
        if (rpc_tracker_call(ctx, tfd, "[7]", 5, &r)) {
          lost = 1;
          break;
        }
        int found = 0;
        for (size_t i = 0; i < json_array_size(r); i++)
          if (!strcmp(json_string_value(json_array_get(r, i)) ? json_string_value(json_array_get(r, i)) : "", match_key))
            found = 1;
        json_decref(r);
        if (found) {
          misses = 0;
        } else if (++misses >= 4) {   /* handed out, but no client came: a new key */
          break;
        }
      }
    }
    if (lost) {
      close(tfd);
      tfd = -1;
      continue;
    }
    if (cfd < 0) continue;
    /* 4. the session, in a child. The server's --timeout bounds it: a client's -timeout may
    ** only shorten it. */
    session_arg a = {cfd, skey, workdir, 600, verbose ? dup(2) : -1};
    double limit = session_timeout > 0 ? session_timeout : 0;
    if (topt > 0 && (limit <= 0 || topt < limit)) limit = topt;
    tl_proc_result *res = NULL;
    if (verbose) fprintf(stderr, "rpc server: session start (%s)\n", match_key);
    if (tl_proc_call(ctx, session_main, &a, limit, 64 * 1024, &res) == TL_OK) {
      size_t el = 0;
      const char *e = tl_proc_stderr(res, &el);
      if (tl_proc_status(res) == TL_PROC_TIMEOUT)
        fprintf(stderr, "rpc server: session timed out after %.1f s\n", limit);
      else if (tl_proc_status(res) != TL_PROC_OK)
        fprintf(stderr, "rpc server: session ended (status %d, code %d): %.*s\n",
                tl_proc_status(res), tl_proc_code(res), (int)(el > 500 ? 500 : el), e ? e : "");
    }
    tl_proc_result_free(res);
    if (a.log_fd >= 0) close(a.log_fd);
    close(cfd);
    remove_all(workdir);
    if (verbose) fprintf(stderr, "rpc server: session end\n");
  }
  while (nhs) hello_drop(hs, &nhs, nhs - 1);
  free(hs);
  if (tfd >= 0) close(tfd);
  close(lfd);
  tl_path_remove(NULL, workdir);
  free(workdir);
  return TL_OK;
}
