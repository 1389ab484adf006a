/*
** rpc_server.c -- tunelua-rpc: the device side of the device farm in plain C
** (libc, libdl; no LuaJIT, no libtunelua, no JSON or zlib library), built
** for the host and cross compiled for aarch64 (build/aarch64/tunelua-rpc).
** It speaks what `tunelua rpc server` speaks (docs/rpc.md): it registers with
** a tracker under a key (TVM's wire protocol: UPDATE_INFO, PUT of a fresh
** match key per session, GET_PENDING_MATCHKEYS), reconnects with back-off
** when the tracker link drops, answers TVM's session handshake (with an auth
** key when given) and serves one session at a time in a child process:
**
**   hello upload remove load alloc free random copy_to copy_from call time
**   measure shutdown         (C shared objects; OpenCL modules: measure only; no graphs)
**
** Uploads are zlib streams (device/inflate.c) written into a private work
** directory. Kernels are timed by the time evaluator of core/runtime/time.c
** (tl_kernel_time: warm-up, number grown to min_repeat_ms, repeat); a
** "measure" runs in a further child with a time limit, so a crash or a hang
** is an error code in the reply (4, 7) and the session lives on. An OpenCL module (OpenCL C
** + manifest) is measured in such a child by device/ocl.c, which loads the device's OpenCL
** driver there (dynamically linked builds) or says that this build has none (static builds).
**
**   tunelua-rpc --tracker HOST:PORT --key KEY [--host H] [--port P] [--custom-addr A]
**               [--timeout S] [--auth-key-file F] [-v]
*/
#define _GNU_SOURCE
#include "../core/runtime/runtime.h"
#include "darray.h"
#include "djson.h"
#include "inflate.h"
#include "ocl.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <stdarg.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The constants of rpc/rpc.h and docs/rpc.md (the wire is the contract). */
#define TRACKER_MAGIC 0x2F271
#define TRACKER_MAGIC_AUTH 0x2F2A1
#define SESS_MAGIC 0xFF271
#define SESS_MAGIC_AUTH 0xFF2A1
#define CODE_SUCCESS (SESS_MAGIC + 0)
#define CODE_MISMATCH (SESS_MAGIC + 2)
#define AUTH_REQUIRED 0x2F2A2
#define AUTH_REFUSED 0x2F2A3
#define AUTH_NONE 0x2F2A4
#define SESSION_VERSION 4
#define MAX_HEADER ((size_t)64 << 10)
#define MAX_BLOB ((uint64_t)512 << 20)
#define MAX_TRACKER_FRAME ((size_t)1 << 20)
#define MAX_KEY 4096
#define MAX_AUTH 1024
enum { TC_PUT = 3, TC_UPDATE_INFO = 5, TC_GET_PENDING_MATCHKEYS = 7 };
enum { E_NONE = 0, E_RUNTIME_DEVICE = 4, E_WRONG_ANSWER = 5, E_BUILD_TIMEOUT = 6, E_RUN_TIMEOUT = 7,
       E_UNKNOWN = 8 };

static int verbose;

static void logf_(const char *fmt, ...) {
  if (!verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tunelua-rpc: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ---- bytes on sockets ------------------------------------------------------------------- */

static int wait_fd(int fd, short ev, double deadline) {
  for (;;) {
    double left = deadline > 0 ? deadline - tl_now() : 1e9;
    if (left <= 0) return -1;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, left > 1e6 ? -1 : (int)(left * 1000) + 1);
    if (r > 0) return 0;
    if (r < 0 && errno != EINTR) return -1;
  }
}

static int send_all(int fd, const void *p, size_t n, double dl) {
  const char *c = p;
  while (n) {
    if (wait_fd(fd, POLLOUT, dl)) return -1;
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return -1;
    c += w, n -= (size_t)w;
  }
  return 0;
}

static int recv_all(int fd, void *p, size_t n, double dl) {
  char *c = p;
  while (n) {
    if (wait_fd(fd, POLLIN, dl)) return -1;
    ssize_t r = recv(fd, c, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return -1;
    c += r, n -= (size_t)r;
  }
  return 0;
}

static void le32(unsigned char *b, uint32_t v) {
  b[0] = (unsigned char)v, b[1] = (unsigned char)(v >> 8), b[2] = (unsigned char)(v >> 16),
  b[3] = (unsigned char)(v >> 24);
}
static uint32_t rd32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int send_i32(int fd, int32_t v, double dl) {
  unsigned char b[4];
  le32(b, (uint32_t)v);
  return send_all(fd, b, 4, dl);
}

static int recv_i32(int fd, int32_t *v, double dl) {
  unsigned char b[4];
  if (recv_all(fd, b, 4, dl)) return -1;
  *v = (int32_t)rd32(b);
  return 0;
}

static int send_str(int fd, const char *s, double dl) {
  size_t n = strlen(s);
  return send_i32(fd, (int32_t)n, dl) || send_all(fd, s, n, dl);
}

/* A length-prefixed string of at most max bytes (malloc'd, NUL-terminated). */
static char *recv_str(int fd, size_t max, double dl) {
  int32_t n;
  if (recv_i32(fd, &n, dl) || n < 0 || (size_t)n > max) return NULL;
  char *s = malloc((size_t)n + 1);
  if (!s || recv_all(fd, s, (size_t)n, dl)) {
    free(s);
    return NULL;
  }
  s[n] = 0;
  return s;
}

static int tcp_connect(const char *host, int port, double timeout_s) {
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  if (getaddrinfo(host, ps, &hints, &ai) || !ai) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(ai);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (r < 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  int err = 0;
  socklen_t el = sizeof err;
  if (wait_fd(fd, POLLOUT, tl_now() + timeout_s) ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  return fd;
}

/* ---- the tracker ------------------------------------------------------------------------ */

static int tracker_open(const char *host, int port, const char *auth, char *why, size_t wn) {
  int fd = tcp_connect(host, port, 5);
  if (fd < 0) {
    snprintf(why, wn, "cannot connect to the tracker %s:%d: %s", host, port, strerror(errno));
    return -1;
  }
  double dl = tl_now() + 10;
  int32_t m = 0;
  int keyed = auth && *auth;
  if (send_i32(fd, keyed ? TRACKER_MAGIC_AUTH : TRACKER_MAGIC, dl) ||
      (keyed && send_str(fd, auth, dl)) || recv_i32(fd, &m, dl) || m != TRACKER_MAGIC) {
    snprintf(why, wn, "tracker %s:%d refused the handshake (magic %d%s)", host, port, (int)m,
             m == AUTH_REQUIRED ? ": it requires an auth key" : m == AUTH_REFUSED ? ": wrong auth key"
             : m == AUTH_NONE ? ": it has no auth key" : "");
    close(fd);
    return -1;
  }
  return fd;
}

/* Send a tracker frame and read its reply (parsed into doc): 0 or -1. */
static int tracker_call(int fd, const char *msg, dj_doc *doc) {
  double dl = tl_now() + 5;
  size_t n = strlen(msg);
  unsigned char b[4];
  le32(b, (uint32_t)n);
  if (send_all(fd, b, 4, dl) || send_all(fd, msg, n, dl)) return -1;
  int32_t rn;
  if (recv_i32(fd, &rn, dl) || rn < 0 || (size_t)rn > MAX_TRACKER_FRAME) return -1;
  char *r = malloc((size_t)rn + 1);
  if (!r || recv_all(fd, r, (size_t)rn, dl)) {
    free(r);
    return -1;
  }
  int rc = dj_parse(r, (size_t)rn, doc, NULL, 0);
  free(r);
  return rc;
}

static int tracker_ok(int fd, const char *msg) {
  dj_doc d;
  if (tracker_call(fd, msg, &d)) return 0;
  int ok = d.root->type == DJ_NUM && d.root->num == 0;
  dj_free(&d);
  return ok;
}

/* ---- the session ----------------------------------------------------------------------- */

#define MAX_ARRAYS 256
#define MAX_MODULES 64
#define MAX_ARGS 64

typedef struct {
  void *data;
  DLTensor t;
  int64_t shape[16];
  size_t bytes;
} sarray;

typedef struct {
  int fd;
  const char *skey, *workdir;
  sarray *arrs[MAX_ARRAYS];
  struct { char *name; void *h; } mods[MAX_MODULES];
  int nmods;
} session;

static int reply(session *s, const char *hdr, const void *blob, uint64_t n) {
  double dl = tl_now() + 60;
  unsigned char b[8];
  size_t hn = strlen(hdr);
  le32(b, (uint32_t)hn);
  if (send_all(s->fd, b, 4, dl) || send_all(s->fd, hdr, hn, dl)) return -1;
  le32(b, (uint32_t)n);
  le32(b + 4, (uint32_t)(n >> 32));
  if (send_all(s->fd, b, 8, dl)) return -1;
  return n ? send_all(s->fd, blob, (size_t)n, dl) : 0;
}

static int reply_ok(session *s) { return reply(s, "{\"ok\":true}", NULL, 0); }

static int reply_err(session *s, const char *fmt, ...) {
  char msg[2048], hdr[4200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t n = 0;
  n += (size_t)snprintf(hdr, sizeof hdr, "{\"ok\":false,\"error\":");
  dj_put_str(hdr, sizeof hdr, &n, msg);
  if (n + 2 < sizeof hdr) hdr[n++] = '}', hdr[n] = 0;
  return reply(s, hdr, NULL, 0);
}

static int valid_name(const char *s) {
  if (!s || !*s || strlen(s) > 200 || s[0] == '.') return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '_' || *p == '-'))
      return 0;
  return 1;
}

static sarray *array_new(const dj_node *shape, const char *dtype, char *why, size_t wn) {
  int nd = dj_len(shape);
  DLDataType dt;
  if (nd < 0 || nd > 16 || !shape || shape->type != DJ_ARR) {
    snprintf(why, wn, "'shape' must be a list of at most 16 extents");
    return NULL;
  }
  if (dev_dtype_parse(dtype ? dtype : "float32", &dt)) {
    snprintf(why, wn, "unknown dtype '%.64s'", dtype);
    return NULL;
  }
  sarray *a = calloc(1, sizeof *a);
  double numel = 1;
  for (int i = 0; i < nd; i++) {
    const dj_node *e = dj_at(shape, i);
    if (!e || e->type != DJ_NUM || e->num < 0 || e->num != floor(e->num)) {
      snprintf(why, wn, "extent %d is not a non-negative integer", i);
      free(a);
      return NULL;
    }
    a->shape[i] = (int64_t)e->num;
    numel *= e->num;
  }
  size_t esz = dt.bits == 1 ? 1 : dt.bits / 8;
  if (numel * (double)esz > (double)MAX_BLOB) {
    snprintf(why, wn, "the array is too large");
    free(a);
    return NULL;
  }
  a->bytes = (size_t)numel * esz;
  a->data = aligned_alloc(64, (a->bytes + 63) / 64 * 64 + 64);
  if (!a->data) {
    snprintf(why, wn, "out of memory");
    free(a);
    return NULL;
  }
  memset(a->data, 0, a->bytes);
  a->t.data = a->data;
  a->t.device.device_type = kDLCPU;
  a->t.ndim = nd;
  a->t.dtype = dt;
  a->t.shape = a->shape;
  return a;
}

static void array_free(sarray *a) {
  if (!a) return;
  free(a->data);
  free(a);
}

/* Seeded values (darray.c: floats in [0, 1), bool {0, 1}, small integers). */
static void array_random(sarray *a, uint64_t seed) {
  dev_random_fill(a->data, a->bytes, a->t.dtype, seed);
}

static char *work_path(session *s, const char *name) {
  size_t n = strlen(s->workdir) + strlen(name) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", s->workdir, name);
  return p;
}

static void *module_of(session *s, const char *name) {
  for (int i = 0; i < s->nmods; i++)
    if (!strcmp(s->mods[i].name, name)) return s->mods[i].h;
  return NULL;
}

/* Array ids of "args" into DLTensor pointers; -1 with a message. */
static int args_of(session *s, const dj_node *req, void **dl, int *na, char *why, size_t wn) {
  const dj_node *args = dj_get(req, "args");
  int n = dj_len(args);
  if (n < 0 || n > MAX_ARGS || args->type != DJ_ARR) {
    snprintf(why, wn, "'args' must be a list of array ids");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    const dj_node *e = dj_at(args, i);
    int id = e && e->type == DJ_NUM ? (int)e->num : -1;
    if (id < 0 || id >= MAX_ARRAYS || !s->arrs[id]) {
      snprintf(why, wn, "argument %d is not an allocated array", i);
      return -1;
    }
    dl[i] = &s->arrs[id]->t;
  }
  *na = n;
  return 0;
}

typedef int32_t (*kernel_fn)(void **, int32_t);

/* ---- measure: signature arrays, a child with a time limit -------------------------------- */

typedef struct {
  int nargs;
  sarray *a[MAX_ARGS];
  void *dl[MAX_ARGS];
} argset;

static void argset_free(argset *g) {
  for (int i = 0; i < g->nargs; i++) array_free(g->a[i]);
  g->nargs = 0;
}

static int argset_make(const char *sig, argset *g, char *why, size_t wn) {
  g->nargs = 0;
  dj_doc d;
  char err[200];
  if (dj_parse(sig, strlen(sig), &d, err, sizeof err)) {
    snprintf(why, wn, "measure: bad signature JSON: %s", err);
    return -1;
  }
  const dj_node *args = dj_get(d.root, "args");
  int n = dj_len(args);
  int rc = 0;
  if (n < 0 || n > MAX_ARGS) {
    snprintf(why, wn, "measure: the signature needs an 'args' list (at most %d)", MAX_ARGS);
    rc = -1;
  }
  for (int i = 0; i < n && !rc; i++) {
    const dj_node *a = dj_at(args, i);
    sarray *x = array_new(dj_get(a, "shape"), dj_str(a, "dtype"), why, wn);
    if (!x) {
      rc = -1;
      break;
    }
    array_random(x, 1234 + (uint64_t)i);
    g->a[g->nargs] = x;
    g->dl[g->nargs++] = &x->t;
  }
  dj_free(&d);
  if (rc) argset_free(g);
  return rc;
}

static void *open_kernel(const char *path, const char *fname, kernel_fn *fn, char *why, size_t wn) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, wn, "cannot load '%s': %s", path, e ? e : "unknown error");
    return NULL;
  }
  void *p = dlsym(h, fname);
  if (!p) {
    snprintf(why, wn, "module '%s' has no function '%s'", path, fname);
    dlclose(h);
    return NULL;
  }
  *(void **)fn = p;
  return h;
}

static void kernel_msg(void *h, const char *fname, int32_t code, char *why, size_t wn) {
  char en[300];
  snprintf(en, sizeof en, "%s_error", fname);
  const char *(*ef)(void);
  *(void **)&ef = dlsym(h, en);
  const char *m = ef ? ef() : NULL;
  if (m && *m) snprintf(why, wn, "kernel '%s' failed: %s", fname, m);
  else snprintf(why, wn, "kernel '%s' failed with code %d", fname, (int)code);
}

typedef struct {
  const char *path, *fname, *sig, *ref_path, *ref_fname;
  int number, repeat, cache_flush;
  double min_repeat_ms, rtol;
} measure_req;

/* Compare every argument of two runs (floats within rtol, others exactly). */
static int same_outputs(const argset *x, const argset *y, double rtol, char *why, size_t wn) {
  for (int i = 0; i < x->nargs; i++) {
    size_t at = 0;
    double got = 0, want = 0;
    if (dev_compare(x->a[i]->data, y->a[i]->data, x->a[i]->bytes, x->a[i]->t.dtype, rtol, 1e-5,
                    &at, &got, &want)) {
      snprintf(why, wn, "wrong answer: argument %d element %zu is %g, the reference %g", i, at, got,
               want);
      return 0;
    }
  }
  return 1;
}

/* The measurement child: writes int32 error_no, int32 ncosts, the costs, the message. */
static void measure_child(const measure_req *m, int out) __attribute__((noreturn));
static void measure_child(const measure_req *m, int out) {
  char why[1024] = "";
  double costs[1024];
  int32_t head[2] = {E_NONE, 0};
  argset g = {0}, r = {0};
  kernel_fn fn, rf;
  void *h = NULL, *rh = NULL;
  if (argset_make(m->sig, &g, why, sizeof why) ||
      !(h = open_kernel(m->path, m->fname, &fn, why, sizeof why))) {
    head[0] = E_RUNTIME_DEVICE;
  } else if (m->ref_path) {
    if (argset_make(m->sig, &r, why, sizeof why) ||
        !(rh = open_kernel(m->ref_path, m->ref_fname ? m->ref_fname : m->fname, &rf, why, sizeof why))) {
      head[0] = E_RUNTIME_DEVICE;
    } else {
      int32_t c1 = fn(g.dl, g.nargs), c2 = rf(r.dl, r.nargs);
      if (c1) kernel_msg(h, m->fname, c1, why, sizeof why), head[0] = E_RUNTIME_DEVICE;
      else if (c2) kernel_msg(rh, m->ref_fname ? m->ref_fname : m->fname, c2, why, sizeof why), head[0] = E_RUNTIME_DEVICE;
      else if (!same_outputs(&g, &r, m->rtol > 0 ? m->rtol : 1e-4, why, sizeof why)) head[0] = E_WRONG_ANSWER;
    }
  }
  if (!head[0]) {
    int32_t kc = 0;
    if (tl_kernel_time(*(void **)&fn, g.dl, g.nargs, m->number, m->repeat, m->min_repeat_ms,
                       m->cache_flush, costs, &kc)) {
      kernel_msg(h, m->fname, kc, why, sizeof why);
      head[0] = E_RUNTIME_DEVICE;
    } else {
      head[1] = m->repeat;
    }
  }
  size_t ml = strlen(why);
  if (write(out, head, sizeof head) < 0 ||
      (head[1] && write(out, costs, sizeof(double) * (size_t)head[1]) < 0) ||
      (ml && write(out, why, ml) < 0))
    _exit(3);
  _exit(0);
}

/* A measurement child: fn(arg, fd) writes its answer to fd and ends. Its output (at most cap - 1
** bytes) goes to buf; *timed_out when it ran past limit_s (then it is killed with its group). */
static int run_child(void (*fn)(const void *, int), const void *arg, double limit_s, char *buf,
                     size_t cap, size_t *got, int *timed_out, int *st) {
  int pfd[2];
  *got = 0, *timed_out = 0, *st = 0;
  if (pipe(pfd)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(pfd[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    setpgid(0, 0);
    fn(arg, pfd[1]);
    _exit(0);
  }
  close(pfd[1]);
  double dl = tl_now() + limit_s;
  for (;;) {
    if (wait_fd(pfd[0], POLLIN, dl)) {
      *timed_out = 1;
      break;
    }
    ssize_t r = read(pfd[0], buf + *got, cap - 1 - *got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    *got += (size_t)r;
    if (*got >= cap - 1) break;
  }
  close(pfd[0]);
  if (*timed_out && pid > 0) kill(-pid, SIGKILL), kill(pid, SIGKILL);
  if (pid > 0) waitpid(pid, st, 0);
  return pid < 0 ? -1 : 0;
}

/* The reply to "measure" from a child's answer (int32 error_no, int32 ncosts, costs, message). */
static int reply_measured(session *s, const char *mod, int32_t eno, const char *ans, size_t n,
                          const char *msg0) {
  char hdr[20000], msg[8192];
  size_t k = 0;
  int32_t nc = 0;
  double costs[1024];
  snprintf(msg, sizeof msg, "%s", msg0 ? msg0 : "");
  if (!msg0) {
    int32_t head[2];
    memcpy(head, ans, 8);
    eno = head[0], nc = head[1];
    if (nc < 0 || nc > 1024 || 8 + (size_t)nc * 8 > n) nc = 0;
    memcpy(costs, ans + 8, (size_t)nc * 8);
    size_t ml = n - 8 - (size_t)nc * 8;
    if (ml >= sizeof msg) ml = sizeof msg - 1;
    memcpy(msg, ans + 8 + (size_t)nc * 8, ml);
    msg[ml] = 0;
  }
  k += (size_t)snprintf(hdr + k, sizeof hdr - k, "{\"ok\":true,\"error_no\":%d,\"costs\":[", (int)eno);
  for (int i = 0; i < nc; i++) k += (size_t)snprintf(hdr + k, sizeof hdr - k, "%s%.9g", i ? "," : "", costs[i]);
  k += (size_t)snprintf(hdr + k, sizeof hdr - k, "]");
  if (*msg) {
    k += (size_t)snprintf(hdr + k, sizeof hdr - k, ",\"error\":");
    dj_put_str(hdr, sizeof hdr, &k, msg);
  }
  snprintf(hdr + k, sizeof hdr - k, "}");
  logf_("measure %s: error_no %d, %d costs%s%s", mod, (int)eno, (int)nc, *msg ? ": " : "", msg);
  return reply(s, hdr, NULL, 0);
}

static void c_child(const void *arg, int fd) { measure_child(arg, fd); }
static void ocl_child(const void *arg, int fd) { dev_ocl_child(arg, fd); }

/* measure kind "opencl": the module is OpenCL C + manifest (uploaded); the whole trial runs in
** a child that loads the driver (device/ocl.c), with the engine's limits: the child bounds the
** compile (build_timeout), the first launch (both) and the rest (timeout) itself; this side
** kills it after twice the build limit plus the run limit plus 1 s. */
static int do_measure_opencl(session *s, const dj_node *req, const char *mod) {
  const char *man = dj_str(req, "manifest"), *rmod = dj_str(req, "ref_module");
  const char *rman = dj_str(req, "ref_manifest");
  if (!valid_name(man)) return reply_err(s, "measure: kind 'opencl' needs 'manifest' (an uploaded file name)");
  if (rmod && (!valid_name(rmod) || !valid_name(rman)))
    return reply_err(s, "measure: bad 'ref_module' or 'ref_manifest'");
  double dv = dj_num(req, "device", 0);
  if (dv < 0 || dv > 255 || dv != floor(dv)) return reply_err(s, "measure: 'device' must be an OpenCL device number");
  dev_ocl_job j = {0};
  j.dev = (int)dv;
  j.number = (int)dj_num(req, "number", 1);
  j.repeat = (int)dj_num(req, "repeat", 1);
  j.min_repeat_ms = dj_num(req, "min_repeat_ms", 0);
  j.run_s = dj_num(req, "timeout", 10);
  j.build_s = dj_num(req, "build_timeout", 10);
  j.rtol = dj_num(req, "rtol", 1e-4);
  if (j.repeat < 1 || j.repeat > 1024) return reply_err(s, "measure: repeat must be in [1, 1024]");
  if (j.run_s > 3600 || j.build_s > 3600) return reply_err(s, "measure: timeouts are at most 3600 s");
  if (!(j.run_s > 0)) j.run_s = 10;
  if (!(j.build_s > 0)) j.build_s = 10;
  char *p = work_path(s, mod), *mp = work_path(s, man);
  char *rp = rmod ? work_path(s, rmod) : NULL, *rmp = rmod ? work_path(s, rman) : NULL;
  j.src_path = p, j.man_path = mp, j.ref_src_path = rp, j.ref_man_path = rmp;
  char buf[16384];
  size_t got = 0;
  int timed_out = 0, st = 0;
  int rc = run_child(ocl_child, &j, 2 * j.build_s + j.run_s + 1, buf, sizeof buf, &got, &timed_out, &st);
  free(p), free(mp), free(rp), free(rmp);
  if (rc) return reply_err(s, "measure: cannot start a measurement child: %s", strerror(errno));
  /* the phase bytes: 'b' compiling, 'c' + the compile seconds, 'r' running */
  size_t o = 0;
  char ph = 0;
  while (o < got && (buf[o] == 'b' || buf[o] == 'r' || (buf[o] == 'c' && got - o > sizeof(double)))) {
    if (buf[o] == 'c') o += sizeof(double);
    else ph = buf[o];
    o++;
  }
  int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  char msg[1200];
  if (!timed_out && !sig && got - o >= 8) return reply_measured(s, mod, 0, buf + o, got - o, NULL);
  if (timed_out || sig == SIGALRM) {
    if (ph == 'r') snprintf(msg, sizeof msg, "kernel '%s' timed out after %g s", mod, j.run_s);
    else snprintf(msg, sizeof msg, "kernel '%s': compiling for the device timed out after %g s", mod, j.build_s);
    return reply_measured(s, mod, ph == 'r' ? E_RUN_TIMEOUT : E_BUILD_TIMEOUT, NULL, 0, msg);
  }
  if (sig)
    snprintf(msg, sizeof msg, "kernel '%s' crashed while %s: signal %d (%s)", mod,
             ph == 'r' ? "running" : "compiling", sig, strsignal(sig));
  else
    snprintf(msg, sizeof msg, "kernel '%s': the measurement child ended without a result (status %d)", mod, st);
  return reply_measured(s, mod, E_RUNTIME_DEVICE, NULL, 0, msg);
}

static int do_measure(session *s, const dj_node *req) {
  const char *mod = dj_str(req, "module"), *sig = dj_str(req, "sig"), *kind = dj_str(req, "kind");
  if (kind && !strcmp(kind, "opencl")) {
    if (!valid_name(mod)) return reply_err(s, "measure: needs 'module' (an uploaded OpenCL C file)");
    return do_measure_opencl(s, req, mod);
  }
  if (kind && strcmp(kind, "so"))
    return reply_err(s, "measure: kind '%.64s' is not served by tunelua-rpc (C shared objects "
                     "\"so\" and OpenCL modules \"opencl\")", kind);
  if (!valid_name(mod) || !sig) return reply_err(s, "measure: needs 'module' and 'sig'");
  measure_req m = {0};
  m.fname = dj_str(req, "func");
  char *fname_sig = NULL;
  if (!m.fname) {   /* the signature's name */
    dj_doc d;
    if (!dj_parse(sig, strlen(sig), &d, NULL, 0)) {
      const char *nm = dj_str(d.root, "name");
      fname_sig = nm ? strdup(nm) : NULL;
      dj_free(&d);
    }
    m.fname = fname_sig;
  }
  if (!m.fname) return reply_err(s, "measure: needs 'func' or a named signature");
  m.sig = sig;
  m.number = (int)dj_num(req, "number", 1);
  m.repeat = (int)dj_num(req, "repeat", 1);
  m.min_repeat_ms = dj_num(req, "min_repeat_ms", 0);
  m.cache_flush = dj_bool(req, "cache_flush", 0);
  m.rtol = dj_num(req, "rtol", 1e-4);
  double to = dj_num(req, "timeout", 10);
  if (m.repeat < 1 || m.repeat > 1024) {
    free(fname_sig);
    return reply_err(s, "measure: repeat must be in [1, 1024]");
  }
  const char *rmod = dj_str(req, "ref_module");
  if (rmod && !valid_name(rmod)) {
    free(fname_sig);
    return reply_err(s, "measure: bad 'ref_module'");
  }
  char *path = work_path(s, mod), *rpath = rmod ? work_path(s, rmod) : NULL;
  m.path = path, m.ref_path = rpath, m.ref_fname = dj_str(req, "ref_func");
  char buf[16384];
  size_t got = 0;
  int timed_out = 0, st = 0;
  int rc = run_child(c_child, &m, to > 0 ? to : 10, buf, sizeof buf, &got, &timed_out, &st);
  free(path), free(rpath), free(fname_sig);
  char msg[2048];
  if (timed_out) {
    snprintf(msg, sizeof msg, "run timed out after %.1f s", to);
    return reply_measured(s, mod, E_RUN_TIMEOUT, NULL, 0, msg);
  }
  if (rc || got < 8 || WIFSIGNALED(st)) {
    if (!rc && WIFSIGNALED(st))
      snprintf(msg, sizeof msg, "the kernel crashed: signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
      snprintf(msg, sizeof msg, "the measurement child failed (status %d)", st);
    return reply_measured(s, mod, E_RUNTIME_DEVICE, NULL, 0, msg);
  }
  return reply_measured(s, mod, 0, buf, got, NULL);
}

/* One request; 1 ends the session. */
static int serve_one(session *s, const dj_node *req, const unsigned char *blob, uint64_t n) {
  const char *op = dj_str(req, "op");
  char why[1024];
  if (!op) return reply_err(s, "the request has no 'op'") ? 1 : 0;
  if (!strcmp(op, "hello")) {
    char hdr[1200];
    size_t k = (size_t)snprintf(hdr, sizeof hdr, "{\"ok\":true,\"version\":%d,\"key\":", SESSION_VERSION);
    dj_put_str(hdr, sizeof hdr, &k, s->skey);
    k += (size_t)snprintf(hdr + k, sizeof hdr - k, ",\"workdir\":");
    dj_put_str(hdr, sizeof hdr, &k, s->workdir);
    snprintf(hdr + k, sizeof hdr - k, ",\"server\":\"tunelua-rpc\",\"opencl\":\"%s\"}", dev_ocl_support());
    return reply(s, hdr, NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "shutdown")) {
    reply_ok(s);
    return 1;
  }
  if (!strcmp(op, "upload")) {
    const char *name = dj_str(req, "name");
    double size = dj_num(req, "size", -1);
    if (!valid_name(name)) return reply_err(s, "upload: bad name") ? 1 : 0;
    if (size < 0 || size > (double)MAX_BLOB) return reply_err(s, "upload: bad size") ? 1 : 0;
    unsigned char *raw = malloc((size_t)size + 1);
    size_t got = 0;
    if (!raw || tl_inflate_zlib(blob, (size_t)n, raw, (size_t)size, &got) || got != (size_t)size) {
      free(raw);
      return reply_err(s, "upload: '%s': the payload is not a zlib stream of %.0f bytes", name, size) ? 1 : 0;
    }
    char *p = work_path(s, name);
    unlink(p);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int bad = fd < 0 || write(fd, raw, got) != (ssize_t)got;
    if (fd >= 0 && close(fd)) bad = 1;
    free(raw);
    if (bad) {
      unlink(p);
      free(p);
      return reply_err(s, "upload: cannot write '%s': %s", name, strerror(errno)) ? 1 : 0;
    }
    free(p);
    logf_("upload %s (%zu bytes)", name, got);
    return reply_ok(s) ? 1 : 0;
  }
  if (!strcmp(op, "remove")) {
    const char *name = dj_str(req, "name");
    if (!name || (*name && !valid_name(name))) return reply_err(s, "remove: bad name") ? 1 : 0;
    if (*name) {
      char *p = work_path(s, name);
      unlink(p);
      free(p);
    }
    return reply_ok(s) ? 1 : 0;
  }
  if (!strcmp(op, "load")) {
    const char *name = dj_str(req, "name"), *kind = dj_str(req, "kind");
    if (kind && !strcmp(kind, "opencl"))
      return reply_err(s, "load: kind 'opencl': tunelua-rpc runs OpenCL modules only through "
                       "'measure' (the driver is loaded in each measurement child: OpenCL drivers "
                       "are not fork-safe)") ? 1 : 0;
    if (kind && strcmp(kind, "so"))
      return reply_err(s, "load: kind '%.64s' is not served by tunelua-rpc (C shared objects only)", kind) ? 1 : 0;
    if (!valid_name(name)) return reply_err(s, "load: bad name") ? 1 : 0;
    if (module_of(s, name)) return reply_ok(s) ? 1 : 0;
    if (s->nmods >= MAX_MODULES) return reply_err(s, "load: too many modules") ? 1 : 0;
    char *p = work_path(s, name);
    void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    free(p);
    if (!h) return reply_err(s, "load: %s", dlerror()) ? 1 : 0;
    s->mods[s->nmods].name = strdup(name);
    s->mods[s->nmods++].h = h;
    return reply_ok(s) ? 1 : 0;
  }
  if (!strcmp(op, "alloc")) {
    int id = 0;
    while (id < MAX_ARRAYS && s->arrs[id]) id++;
    if (id == MAX_ARRAYS) return reply_err(s, "alloc: at most %d arrays", MAX_ARRAYS) ? 1 : 0;
    sarray *a = array_new(dj_get(req, "shape"), dj_str(req, "dtype"), why, sizeof why);
    if (!a) return reply_err(s, "alloc: %s", why) ? 1 : 0;
    s->arrs[id] = a;
    char hdr[64];
    snprintf(hdr, sizeof hdr, "{\"ok\":true,\"id\":%d}", id);
    return reply(s, hdr, NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "free") || !strcmp(op, "random") || !strcmp(op, "copy_to") || !strcmp(op, "copy_from")) {
    int id = (int)dj_num(req, "id", -1);
    if (id < 0 || id >= MAX_ARRAYS || !s->arrs[id]) return reply_err(s, "%s: 'id' is not an allocated array", op) ? 1 : 0;
    sarray *a = s->arrs[id];
    if (!strcmp(op, "free")) {
      array_free(a);
      s->arrs[id] = NULL;
    } else if (!strcmp(op, "random")) {
      array_random(a, (uint64_t)dj_num(req, "seed", 0));
    } else if (!strcmp(op, "copy_to")) {
      if (n != a->bytes) return reply_err(s, "copy_to: %llu bytes for an array of %zu", (unsigned long long)n, a->bytes) ? 1 : 0;
      memcpy(a->data, blob, a->bytes);
    } else {
      return reply(s, "{\"ok\":true}", a->data, a->bytes) ? 1 : 0;
    }
    return reply_ok(s) ? 1 : 0;
  }
  if (!strcmp(op, "call") || !strcmp(op, "time")) {
    const char *mod = dj_str(req, "module"), *fname = dj_str(req, "func");
    void *h = mod ? module_of(s, mod) : NULL;
    if (!h) return reply_err(s, "%s: module '%.200s' is not loaded", op, mod ? mod : "") ? 1 : 0;
    kernel_fn fn;
    *(void **)&fn = fname ? dlsym(h, fname) : NULL;
    if (!fn) return reply_err(s, "%s: module '%s' has no function '%.200s'", op, mod, fname ? fname : "") ? 1 : 0;
    void *dl[MAX_ARGS];
    int na;
    if (args_of(s, req, dl, &na, why, sizeof why)) return reply_err(s, "%s: %s", op, why) ? 1 : 0;
    if (!strcmp(op, "call")) {
      int32_t kr = fn(dl, na);
      if (kr) {
        kernel_msg(h, fname, kr, why, sizeof why);
        return reply_err(s, "call: %s", why) ? 1 : 0;
      }
      return reply_ok(s) ? 1 : 0;
    }
    int number = (int)dj_num(req, "number", 1), repeat = (int)dj_num(req, "repeat", 1);
    if (repeat < 1 || repeat > 1024) return reply_err(s, "time: repeat must be in [1, 1024]") ? 1 : 0;
    double costs[1024];
    int32_t kc = 0;
    if (tl_kernel_time(*(void **)&fn, dl, na, number, repeat, dj_num(req, "min_repeat_ms", 0),
                       dj_bool(req, "cache_flush", 0), costs, &kc)) {
      kernel_msg(h, fname, kc, why, sizeof why);
      return reply_err(s, "time: %s", why) ? 1 : 0;
    }
    char hdr[20000];
    size_t k = (size_t)snprintf(hdr, sizeof hdr, "{\"ok\":true,\"costs\":[");
    for (int i = 0; i < repeat; i++) k += (size_t)snprintf(hdr + k, sizeof hdr - k, "%s%.9g", i ? "," : "", costs[i]);
    snprintf(hdr + k, sizeof hdr - k, "]}");
    return reply(s, hdr, NULL, 0) ? 1 : 0;
  }
  if (!strcmp(op, "measure")) return do_measure(s, req) ? 1 : 0;
  if (!strncmp(op, "graph_", 6))
    return reply_err(s, "%s: networks are not served by tunelua-rpc yet", op) ? 1 : 0;
  return reply_err(s, "unknown op '%.64s'", op) ? 1 : 0;
}

/* Frames until the client leaves: the exit status of the session child. */
static int session_main(session *s) {
  for (;;) {
    unsigned char b[8];
    double dl = tl_now() + 600;
    if (recv_all(s->fd, b, 4, dl)) return 0;
    uint32_t hn = rd32(b);
    if (hn < 1 || hn > MAX_HEADER) {
      reply_err(s, "malformed frame: header length %u out of [1, %zu]; closing the session", hn, MAX_HEADER);
      return 2;
    }
    char *hdr = malloc(hn + 1);
    if (!hdr || recv_all(s->fd, hdr, hn, dl) || recv_all(s->fd, b, 8, dl)) {
      free(hdr);
      return 0;
    }
    hdr[hn] = 0;
    uint64_t n = rd32(b) | (uint64_t)rd32(b + 4) << 32;
    if (n > MAX_BLOB) {
      free(hdr);
      reply_err(s, "malformed frame: payload of %llu bytes (at most %llu); closing the session",
                (unsigned long long)n, (unsigned long long)MAX_BLOB);
      return 2;
    }
    unsigned char *blob = n ? malloc((size_t)n) : NULL;
    if ((n && !blob) || (n && recv_all(s->fd, blob, (size_t)n, dl))) {
      free(hdr), free(blob);
      return 0;
    }
    dj_doc d;
    char err[256];
    if (dj_parse(hdr, hn, &d, err, sizeof err) || d.root->type != DJ_OBJ) {
      if (d.root) dj_free(&d);
      free(hdr), free(blob);
      reply_err(s, "malformed frame: the header is not a JSON object (%s); closing the session", err);
      return 2;
    }
    int end = serve_one(s, d.root, blob, n);
    dj_free(&d);
    free(hdr), free(blob);
    if (end) return 0;
  }
}

/* ---- the server loop --------------------------------------------------------------------- */

static volatile sig_atomic_t stop;
static void on_term(int sig) { stop = 1, (void)sig; }

typedef struct {
  const char *thost, *key, *host, *custom_addr, *auth;
  int tport, port;
  double timeout_s;
} options;

/* The handshake of a new connection: 0 = a session starts, -1 = refused or junk. */
static int handshake(int fd, const char *match_key, const char *skey, const char *auth, double *topt) {
  double dl = tl_now() + 10;
  int32_t m;
  if (recv_i32(fd, &m, dl) || (m != SESS_MAGIC && m != SESS_MAGIC_AUTH)) return -1;
  char *given = NULL;
  if (m == SESS_MAGIC_AUTH && !(given = recv_str(fd, MAX_AUTH, dl))) return -1;
  char *key = recv_str(fd, MAX_KEY, dl);
  if (!key) {
    free(given);
    return -1;
  }
  *topt = 0;
  char *sp = strchr(key, ' ');
  if (sp) {
    *sp = 0;
    const char *t = strstr(sp + 1, "-timeout=");
    if (t) {
      double v = strtod(t + 9, NULL);
      if (v > 0 && v < 1e9) *topt = v;
    }
  }
  int keyed = auth && *auth;
  int32_t code = 0;
  char want[MAX_KEY + 16];
  snprintf(want, sizeof want, "client:%s", match_key);
  if (keyed && !given) code = AUTH_REQUIRED;
  else if (!keyed && given) code = AUTH_NONE;
  else if (keyed) {
    size_t gn = strlen(given), wn = strlen(auth);
    unsigned diff = gn != wn;
    for (size_t i = 0; i < gn; i++) diff |= (unsigned char)given[i] ^ (unsigned char)auth[i < wn ? i : 0];
    if (diff) code = AUTH_REFUSED;
  }
  if (!code && strcmp(key, want) != 0) code = CODE_MISMATCH;
  free(given);
  free(key);
  dl = tl_now() + 2;
  if (code) {
    send_i32(fd, code, dl);
    return -1;
  }
  return send_i32(fd, CODE_SUCCESS, dl) || send_str(fd, skey, dl) ? -1 : 0;
}

static void remove_files(const char *dir) {
  char cmdless[4096];
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(cmdless, sizeof cmdless, "%s/%s", dir, e->d_name);
    unlink(cmdless);
  }
  closedir(d);
}

/* At start-up: the work directories of tunelua-rpc servers that are gone (tunelua-rpc-<pid>.X,
** that pid not running), when they are real directories of ours, emptied of their plain files
** and removed; links are never followed. */
static void clean_stale(const char *tdir) {
  DIR *d = opendir(tdir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    int pid = 0, n = 0;
    if (sscanf(e->d_name, "tunelua-rpc-%d.%n", &pid, &n) != 1 || n == 0 || pid <= 0) continue;
    if (pid == (int)getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", tdir, e->d_name);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    DIR *w = opendir(path);
    struct dirent *f;
    while (w && (f = readdir(w))) {
      char fp[4096 + 512];
      snprintf(fp, sizeof fp, "%s/%s", path, f->d_name);
      if (lstat(fp, &st) == 0 && !S_ISDIR(st.st_mode)) unlink(fp);
    }
    if (w) closedir(w);
    rmdir(path);
  }
  closedir(d);
}

/* Serve one session on cfd in a child (it dies with the server); waits for it. */
static void run_session(int cfd, const char *skey, const char *workdir, double limit) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    session s = {0};
    s.fd = cfd, s.skey = skey, s.workdir = workdir;
    _exit(session_main(&s));
  }
  if (pid < 0) return;
  double end = limit > 0 ? tl_now() + limit : 0;
  int st = 0;
  for (;;) {
    pid_t r = waitpid(pid, &st, end > 0 ? WNOHANG : 0);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (end > 0 && tl_now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fprintf(stderr, "tunelua-rpc: session timed out after %.1f s\n", limit);
      break;
    }
    if (end > 0) usleep(20000);
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 2) fprintf(stderr, "tunelua-rpc: session closed on a malformed frame\n");
}

static int serve(const options *o) {
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  const char *h = o->host ? o->host : "127.0.0.1";
  if (inet_pton(AF_INET, h, &sa.sin_addr) != 1) {
    fprintf(stderr, "tunelua-rpc: --host '%s' is not an IPv4 address\n", h);
    return 1;
  }
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sa.sin_port = htons((uint16_t)o->port);
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) || listen(lfd, 16)) {
    fprintf(stderr, "tunelua-rpc: cannot bind %s:%d: %s\n", h, o->port, strerror(errno));
    return 1;
  }
  socklen_t sl = sizeof sa;
  getsockname(lfd, (struct sockaddr *)&sa, &sl);
  int bound = ntohs(sa.sin_port);
  const char *tmp = getenv("TMPDIR");
  clean_stale(tmp && *tmp ? tmp : "/tmp");
  char workdir[4096];
  snprintf(workdir, sizeof workdir, "%s/tunelua-rpc-%d.XXXXXX", tmp && *tmp ? tmp : "/tmp", (int)getpid());
  if (!mkdtemp(workdir)) {
    fprintf(stderr, "tunelua-rpc: cannot create a work directory: %s\n", strerror(errno));
    return 1;
  }
  printf("bind to %s:%d\n", h, bound);
  fflush(stdout);
  char skey[300], match_key[400], why[512], msg[1024];
  snprintf(skey, sizeof skey, "server:%s", o->key);
  int tfd = -1;
  double backoff = 0.5;
  unsigned long counter = 0;
  unsigned long salt = (unsigned long)(tl_now() * 1e6) ^ ((unsigned long)getpid() << 16);
  while (!stop) {
    if (o->thost && tfd < 0) {
      tfd = tracker_open(o->thost, o->tport, o->auth, why, sizeof why);
      if (tfd < 0) {
        if (verbose || backoff >= 8) fprintf(stderr, "tunelua-rpc: %s; retrying in %.1f s\n", why, backoff);
        usleep((useconds_t)(backoff * 1e6));
        backoff = backoff * 2 > 30 ? 30 : backoff * 2;
        continue;
      }
      size_t k = (size_t)snprintf(msg, sizeof msg, "[%d, {\"key\": ", TC_UPDATE_INFO);
      dj_put_str(msg, sizeof msg, &k, skey);
      k += (size_t)snprintf(msg + k, sizeof msg - k, ", \"addr\": [");
      if (o->custom_addr) dj_put_str(msg, sizeof msg, &k, o->custom_addr);
      else k += (size_t)snprintf(msg + k, sizeof msg - k, "null");
      snprintf(msg + k, sizeof msg - k, ", %d]}]", bound);
      if (!tracker_ok(tfd, msg)) {
        close(tfd);
        tfd = -1;
        continue;
      }
      logf_("registered with the tracker %s:%d as '%s'", o->thost, o->tport, skey);
      backoff = 0.5;
    }
    if (o->thost) {
      snprintf(match_key, sizeof match_key, "%s:%lu.%lu", o->key, salt % 1000000007ul, ++counter);
      size_t k = (size_t)snprintf(msg, sizeof msg, "[%d, ", TC_PUT);
      dj_put_str(msg, sizeof msg, &k, o->key);
      k += (size_t)snprintf(msg + k, sizeof msg - k, ", [%d, ", bound);
      dj_put_str(msg, sizeof msg, &k, match_key);
      k += (size_t)snprintf(msg + k, sizeof msg - k, "], ");
      if (o->custom_addr) dj_put_str(msg, sizeof msg, &k, o->custom_addr);
      else k += (size_t)snprintf(msg + k, sizeof msg - k, "null");
      snprintf(msg + k, sizeof msg - k, "]");
      if (!tracker_ok(tfd, msg)) {
        close(tfd);
        tfd = -1;
        continue;
      }
    } else {
      snprintf(match_key, sizeof match_key, "%s", o->key);
    }
    int cfd = -1, lost = 0, misses = 0;
    double topt = 0, next_check = tl_now() + 2;
    while (!stop && cfd < 0) {
      struct pollfd pf[2] = {{lfd, POLLIN, 0}, {tfd, POLLIN, 0}};
      double left = next_check - tl_now();
      int pr = poll(pf, 2, left > 0 ? (int)(left * 1000) + 1 : 0);
      if (pr < 0 && errno != EINTR) break;
      if (tfd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        lost = 1;
        break;
      }
      if (pf[0].revents & POLLIN) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
          setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
          if (handshake(fd, match_key, skey, o->auth, &topt) == 0) cfd = fd;
          else close(fd), logf_("handshake refused");
        }
      }
      if (cfd < 0 && tfd >= 0 && tl_now() >= next_check) {
        next_check = tl_now() + 2;
        dj_doc d;
        char req[16];
        snprintf(req, sizeof req, "[%d]", TC_GET_PENDING_MATCHKEYS);
        if (tracker_call(tfd, req, &d)) {
          lost = 1;
          break;
        }
        int found = 0;
        for (int i = 0; i < dj_len(d.root); i++) {
          const dj_node *e = dj_at(d.root, i);
          if (e && e->type == DJ_STR && !strcmp(e->str, match_key)) found = 1;
        }
        dj_free(&d);
        if (found) misses = 0;
        else if (++misses >= 4) break;
      }
    }
    if (lost) {
      logf_("the tracker link dropped; reconnecting");
      close(tfd);
      tfd = -1;
      continue;
    }
    if (cfd < 0) continue;
    double limit = o->timeout_s;
    if (topt > 0 && (limit <= 0 || topt < limit)) limit = topt;
    logf_("session start (%s)", match_key);
    run_session(cfd, skey, workdir, limit);
    close(cfd);
    remove_files(workdir);
    logf_("session end");
  }
  if (tfd >= 0) close(tfd);
  close(lfd);
  remove_files(workdir);
  rmdir(workdir);
  return 0;
}

static int usage(const char *why) {
  if (why) fprintf(stderr, "tunelua-rpc: %s\n", why);
  fprintf(stderr, "usage: tunelua-rpc --tracker HOST:PORT --key KEY [--host H] [--port P] "
                  "[--custom-addr A] [--timeout S] [--auth-key-file F] [-v]\n"
                  "       tunelua-rpc --key KEY --port P   (standalone: no tracker)\n");
  return 2;
}

int main(int argc, char **argv) {
  options o = {0};
  static char thost[256], auth[MAX_AUTH + 2];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-v")) { verbose = 1; continue; }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(NULL);
    if (!v) return usage("an option is missing its value");
    i++;
    if (!strcmp(a, "--tracker")) {
      const char *c = strrchr(v, ':');
      char *end;
      long p = c ? strtol(c + 1, &end, 10) : 0;
      if (!c || c == v || *end || p < 1 || p > 65535 || (size_t)(c - v) >= sizeof thost)
        return usage("--tracker expects HOST:PORT with a port in 1..65535");
      memcpy(thost, v, (size_t)(c - v));
      o.thost = thost, o.tport = (int)p;
    } else if (!strcmp(a, "--key")) {
      if (!*v || strlen(v) > 200 || strchr(v, ' ')) return usage("--key must be 1..200 bytes, no blanks");
      o.key = v;
    } else if (!strcmp(a, "--host")) {
      o.host = v;
    } else if (!strcmp(a, "--port")) {
      char *end;
      long p = strtol(v, &end, 10);
      if (*end || p < 0 || p > 65535) return usage("--port expects 0..65535");
      o.port = (int)p;
    } else if (!strcmp(a, "--custom-addr")) {
      o.custom_addr = v;
    } else if (!strcmp(a, "--timeout")) {
      o.timeout_s = atof(v);
    } else if (!strcmp(a, "--auth-key-file")) {
      FILE *f = fopen(v, "r");
      if (!f || !fgets(auth, sizeof auth, f)) {
        if (f) fclose(f);
        fprintf(stderr, "tunelua-rpc: cannot read the auth key file '%s'\n", v);
        return 2;
      }
      fclose(f);
      auth[strcspn(auth, "\r\n")] = 0;
      o.auth = auth;
    } else {
      return usage("unknown option");
    }
  }
  if (!o.key) return usage("--key is required");
  if (!o.auth) {
    const char *e = getenv("TUNELUA_RPC_AUTH_KEY");
    if (e && *e) o.auth = e;
  }
  signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {0};
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  return serve(&o);
}
