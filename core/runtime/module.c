/*
** module.c -- loadable kernel modules: C source compiled by the system C
** compiler into a shared object, cached on disk, dlopen'ed, called and timed.
**
** Compilation runs `CC -std=gnu11 -shared -fPIC CFLAGS -o OUT SRC -lm` through
** tl_proc_exec (own process group, wall-clock limit, captured output). CC is
** $TUNELUA_CC, else the compiler libtunelua was built with (TL_C_COMPILER),
** else `cc`. The result is cached under a 128-bit hash of (compiler, flags,
** source) in the first usable of $TUNELUA_CACHE_DIR,
** $XDG_CACHE_HOME/tunelua/kernels, $HOME/.cache/tunelua/kernels and
** $TMPDIR/tunelua-UID/kernels: k<hash>.so next to k<hash>.c (the source, for
** reading and disassembly). Every build writes to names unique to the
** process and call and renames the finished object into place, so parallel
** builds of one kernel in several processes or threads never see a partial
** file; the last rename wins with identical content. A cached object that
** fails to load is rebuilt.
**
** Kernels follow the C backend's ABI (codegen/c.c): int32_t f(void **args,
** int32_t nargs) with DLTensor pointers, returning 0 or a TL_E_* code whose
** message f_error() returns. tl_module_time implements TVM's time-evaluator
** contract (tl_kernel_time): a warm-up of at least 10 ms, then `repeat` measurements of `number` calls
** each, where with min_repeat_ms > 0 number grows (by the golden ratio, or
** to the estimate that reaches min_repeat_ms) until one measurement lasts at
** least min_repeat_ms; with cache_flush a 32 MiB buffer is written before
** each measurement (outside the timed region) to evict the caches.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"
#include "../codegen/codegen.h"

#define MODULE_STDERR_MAX 700          /* compiler output kept in messages */
#define CACHE_FLUSH_BYTES (32u << 20)

#ifndef TL_C_COMPILER
#define TL_C_COMPILER "cc"
#endif

struct tl_module {
  char *source;
  char *path;                          /* the .so */
  void *handle;
  double compile_s;                    /* 0 on a cache hit */
  int cache_hit;
};

typedef int32_t (*kernel_fn)(void **args, int32_t nargs);
typedef const char *(*kernel_err_fn)(void);

const char *tl_kernel_compiler(void) {
  const char *cc = getenv("TUNELUA_CC");
  return cc && *cc ? cc : TL_C_COMPILER;
}

/* The cache directory (malloc'd), created. */
int tl_kernel_cache_dir(tl_ctx *ctx, char **out) {
  const char *env = getenv("TUNELUA_CACHE_DIR");
  char *cands[4] = {0};
  int n = 0;
  if (env && *env) cands[n++] = tl_strdup(env);
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) cands[n++] = tl_sprintf("%s/tunelua/kernels", xdg);
  if (home && *home) cands[n++] = tl_sprintf("%s/.cache/tunelua/kernels", home);
  const char *tmp = getenv("TMPDIR");
  cands[n++] = tl_sprintf("%s/tunelua-%d/kernels", tmp && *tmp ? tmp : "/tmp", (int)getuid());
  int rc = TL_E_IO, chosen = -1;
  for (int i = 0; i < n && chosen < 0; i++) {
    if (tl_mkdirs(NULL, cands[i]) == TL_OK && access(cands[i], W_OK) == 0) chosen = i;
    else if (i == 0 && env && *env)
      break;                           /* an explicit directory must work */
  }
  if (chosen >= 0) {
    *out = cands[chosen];
    cands[chosen] = NULL;
    rc = TL_OK;
  } else {
    rc = tl_err(ctx, TL_E_IO, "cannot create a kernel cache directory (tried '%s'%s): %s", cands[0],
                n > 1 ? " and others" : "", strerror(errno));
  }
  for (int i = 0; i < n; i++) free(cands[i]);
  return rc;
}

/* Split flags at blanks; '...' and "..." group. Returns the count. */
static int split_flags(const char *s, char ***out) {
  TL_VEC(char *) v = {0};
  tl_buf cur = {0};
  int in = 0;
  char q = 0;
  for (const char *p = s;; p++) {
    char ch = *p;
    if (ch == 0 || (!q && (ch == ' ' || ch == '\t' || ch == '\n'))) {
      if (in) {
        TL_VEC_PUSH(v, tl_buf_take(&cur));
        in = 0;
      }
      if (ch == 0) break;
      continue;
    }
    in = 1;
    if (q && ch == q) q = 0;
    else if (!q && (ch == '\'' || ch == '"')) q = ch;
    else tl_buf_putn(&cur, p, 1);
  }
  tl_buf_free(&cur);
  *out = v.v;
  return v.n;
}

/* First part of the compiler's diagnostics, cut at a line end. */
static char *trim_output(const char *s, size_t n) {
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ')) n--;
  if (n <= MODULE_STDERR_MAX) return tl_strndup(s, n);
  size_t cut = MODULE_STDERR_MAX;
  while (cut > MODULE_STDERR_MAX / 2 && s[cut] != '\n') cut--;
  if (s[cut] != '\n') cut = MODULE_STDERR_MAX;
  char *head = tl_strndup(s, cut);
  char *r = tl_sprintf("%s\n... (%zu more bytes)", head, n - cut);
  free(head);
  return r;
}

static int compile(tl_ctx *ctx, const char *cc, const char *flags, const char *src_path,
                   const char *so_path, double timeout_s) {
  char **fl = NULL;
  int nfl = split_flags(flags, &fl);
  const char **argv = tl_calloc((size_t)nfl + 12, sizeof(char *));
  int a = 0;
  argv[a++] = cc;
  argv[a++] = "-std=gnu11";
  argv[a++] = "-shared";
  argv[a++] = "-fPIC";
  for (int i = 0; i < nfl; i++) argv[a++] = fl[i];
  argv[a++] = "-o";
  argv[a++] = so_path;
  argv[a++] = src_path;
  argv[a++] = "-lm";
  argv[a] = NULL;
  tl_proc_result *res = NULL;
  int rc = tl_proc_exec(ctx, argv, timeout_s, 256 * 1024, &res);
  if (rc == TL_OK) {
    size_t elen = 0, olen = 0;
    const char *err = tl_proc_stderr(res, &elen);
    const char *outp = tl_proc_stdout(res, &olen);
    if (!elen && olen) {
      err = outp;
      elen = olen;
    }
    char *msg = trim_output(err ? err : "", err ? elen : 0);
    switch (tl_proc_status(res)) {
    case TL_PROC_OK:
      break;
    case TL_PROC_TIMEOUT:
      rc = tl_err(ctx, TL_E_TIMEOUT, "C compiler '%s' timed out after %.1f s", cc, timeout_s);
      break;
    case TL_PROC_SPAWN:
      rc = tl_err(ctx, TL_E_BUILD, "cannot run the C compiler '%s' (set TUNELUA_CC): %s", cc, msg);
      break;
    case TL_PROC_SIGNAL:
      rc = tl_err(ctx, TL_E_BUILD, "C compiler '%s' killed by signal %d:\n%s", cc,
                  tl_proc_code(res), msg);
      break;
    default:
      rc = tl_err(ctx, TL_E_BUILD, "C compiler '%s %s' failed (exit %d):\n%s", cc, flags,
                  tl_proc_code(res), msg);
      break;
    }
    free(msg);
  }
  tl_proc_result_free(res);
  for (int i = 0; i < nfl; i++) free(fl[i]);
  free(fl);
  free(argv);
  return rc;
}

static int write_file(tl_ctx *ctx, const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return tl_err(ctx, TL_E_IO, "cannot create '%s': %s", path, strerror(errno));
  size_t w = fwrite(data, 1, n, f);
  int bad = w != n;
  if (fclose(f) != 0) bad = 1;
  if (bad) {
    unlink(path);
    return tl_err(ctx, TL_E_IO, "cannot write '%s': %s", path, strerror(errno));
  }
  return TL_OK;
}

TL_EXPORT int tl_module_from_c(tl_ctx *ctx, const char *source, const char *cflags,
                               double timeout_s, tl_module **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_module_from_c: out is NULL");
  *out = NULL;
  if (!source) return tl_err(ctx, TL_E_ARG, "tl_module_from_c: source is NULL");
  const char *flags = cflags ? cflags : "-O3 -march=native";
  const char *cc = tl_kernel_compiler();
  size_t slen = strlen(source);

  uint64_t h[2];
  for (int i = 0; i < 2; i++) {
    uint64_t x = tl_hash_bytes(source, slen, 0x74756e65ull + (uint64_t)i * 0x9e37);
    x = tl_hash_mix(x, tl_hash_bytes(flags, strlen(flags), 0x666c6167ull + (uint64_t)i));
    x = tl_hash_mix(x, tl_hash_bytes(cc, strlen(cc), 0x63630000ull + (uint64_t)i));
    h[i] = x;
  }
  char *dir = NULL;
  int rc = tl_kernel_cache_dir(ctx, &dir);
  if (rc) return rc;
  char key[40];
  snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
  char *so_path = tl_sprintf("%s/k%s.so", dir, key);
  char *src_path = tl_sprintf("%s/k%s.c", dir, key);

  tl_module *m = tl_calloc(1, sizeof *m);
  m->source = tl_strndup(source, slen);
  m->path = so_path;

  if (access(so_path, R_OK) == 0) {
    m->handle = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    if (m->handle) m->cache_hit = 1;
  }
  if (!m->handle) {
    static unsigned counter;
    unsigned seq = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    char *tmp_src = tl_sprintf("%s/k%s.%d.%u.tmp.c", dir, key, (int)getpid(), seq);
    char *tmp_so = tl_sprintf("%s/k%s.%d.%u.tmp.so", dir, key, (int)getpid(), seq);
    double t0 = tl_now();
    rc = write_file(ctx, tmp_src, source, slen);
    if (!rc) rc = compile(ctx, cc, flags, tmp_src, tmp_so, timeout_s);
    if (!rc && rename(tmp_so, so_path) != 0)
      rc = tl_err(ctx, TL_E_IO, "cannot move the kernel to '%s': %s", so_path, strerror(errno));
    if (!rc && rename(tmp_src, src_path) != 0) unlink(tmp_src);
    if (rc) {
      unlink(tmp_src);
      unlink(tmp_so);
    }
    m->compile_s = tl_now() - t0;
    free(tmp_src);
    free(tmp_so);
    if (!rc) {
      m->handle = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
      if (!m->handle) {
        const char *e = dlerror();
        rc = tl_err(ctx, TL_E_BUILD, "cannot load the compiled kernel '%s': %s", so_path,
                    e ? e : "unknown error");
      }
    }
  }
  free(src_path);
  free(dir);
  if (rc) {
    tl_module_free(m);
    return rc;
  }
  *out = m;
  return TL_OK;
}

TL_EXPORT double tl_module_compile_seconds(const tl_module *m) { return m ? m->compile_s : 0; }
TL_EXPORT int tl_module_cache_hit(const tl_module *m) { return m ? m->cache_hit : 0; }
TL_EXPORT const char *tl_module_source(const tl_module *m) { return m ? m->source : ""; }
TL_EXPORT const char *tl_module_path(const tl_module *m) { return m ? m->path : ""; }

TL_EXPORT void tl_module_free(tl_module *m) {
  if (!m) return;
  if (m->handle) dlclose(m->handle);
  free(m->source);
  free(m->path);
  free(m);
}

static int lookup(tl_ctx *ctx, tl_module *m, const char *fname, kernel_fn *fn) {
  if (!m || !m->handle) return tl_err(ctx, TL_E_ARG, "module is NULL or not loaded");
  if (!fname || !*fname) return tl_err(ctx, TL_E_ARG, "function name is empty");
  void *p = dlsym(m->handle, fname);
  if (!p) return tl_err(ctx, TL_E_ARG, "module '%s' has no function '%s'", m->path, fname);
  *(void **)fn = p;
  return TL_OK;
}

/* DLTensor pointers of the arrays; *dl is a malloc'd array when > 16. */
static int pack_args(tl_ctx *ctx, tl_array **args, int nargs, void **stack, void ***dl) {
  if (nargs < 0 || (nargs > 0 && !args))
    return tl_err(ctx, TL_E_ARG, "bad argument list (%d arguments)", nargs);
  void **v = nargs <= 16 ? stack : tl_malloc(sizeof(void *) * (size_t)nargs);
  for (int i = 0; i < nargs; i++) {
    if (!args[i]) {
      if (v != stack) free(v);
      return tl_err(ctx, TL_E_ARG, "argument %d is NULL", i);
    }
    v[i] = tl_array_dltensor(args[i]);
  }
  *dl = v;
  return TL_OK;
}

static int kernel_failed(tl_ctx *ctx, tl_module *m, const char *fname, int32_t code) {
  char *ename = tl_sprintf("%s_error", fname);
  kernel_err_fn ef;
  *(void **)&ef = dlsym(m->handle, ename);
  free(ename);
  const char *msg = ef ? ef() : NULL;
  int rc = code > TL_OK && code <= TL_E_INTERNAL ? code : TL_E_RUNTIME;
  if (msg && *msg) return tl_err(ctx, rc, "%s", msg);
  return tl_err(ctx, rc, "kernel '%s' failed with code %d", fname, (int)code);
}

/* The kernel fname of m and its packed arguments (*dl is stack or malloc'd). */
static int prepare_call(tl_ctx *ctx, tl_module *m, const char *fname, tl_array **args, int nargs,
                        kernel_fn *fn, void **stack, void ***dl) {
  int rc = lookup(ctx, m, fname, fn);
  return rc ? rc : pack_args(ctx, args, nargs, stack, dl);
}

TL_EXPORT int tl_module_call(tl_ctx *ctx, tl_module *m, const char *fname, tl_array **args,
                             int nargs) {
  kernel_fn fn;
  void *stack[16], **dl = NULL;
  int rc = prepare_call(ctx, m, fname, args, nargs, &fn, stack, &dl);
  if (rc) return rc;
  int32_t kr = fn(dl, nargs);
  if (dl != stack) free(dl);
  return kr ? kernel_failed(ctx, m, fname, kr) : TL_OK;
}

static void flush_caches(unsigned char *buf, int round) {
  memset(buf, round & 0xff, CACHE_FLUSH_BYTES);
  __asm__ volatile("" : : "r"(buf) : "memory");   /* keep the stores */
}

/* The warm-up runs the kernel until this much time has passed (at least once).
** A process that has just started (a measurement child is forked per run)
** creates its thread pool on the first parallel loop, and a sub-millisecond
** kernel is over before the new workers are even scheduled (on a VM waking an
** idle vCPU alone can take that long): after a single warm-up call the first
** repeats ran on the calling thread alone, and one config measured 34 or 80
** GFLOPS from run to run. After a few milliseconds of back-to-back calls the
** workers are awake and spinning, as they are in a network's stream of
** kernels. */
#define TIME_WARMUP_S 10e-3

int tl_kernel_time(void *fnp, void **dl, int nargs, int number, int repeat,
                   double min_repeat_ms, int cache_flush, double *secs_out, int32_t *kcode) {
  kernel_fn fn;
  *(void **)&fn = fnp;
  if (number < 1) number = 1;
  int32_t kr;
  double w0 = tl_now();
  do {                                             /* warm-up */
    if ((kr = fn(dl, nargs))) goto failed;
  } while (tl_now() - w0 < TIME_WARMUP_S);
  unsigned char *flush = cache_flush ? tl_malloc(CACHE_FLUSH_BYTES) : NULL;
  for (int r = 0; r < repeat; r++) {
    double secs;
    for (;;) {
      if (flush) flush_caches(flush, r);
      double t0 = tl_now();
      for (int i = 0; i < number; i++)
        if ((kr = fn(dl, nargs))) {
          free(flush);
          goto failed;
        }
      secs = tl_now() - t0;
      double dur_ms = secs * 1e3;
      if (min_repeat_ms <= 0 || dur_ms >= min_repeat_ms || number >= 1000000000) break;
      /* TVM's rule: jump to the estimate that reaches min_repeat_ms, at least x1.618 */
      double next = number * 1.618;
      if (dur_ms > 0) {
        double want = min_repeat_ms / (dur_ms / number) + 1;
        if (want > next) next = want;
      }
      if (next < number + 1) next = number + 1;
      number = next > 1e9 ? 1000000000 : (int)next;
    }
    secs_out[r] = secs / number;
  }
  free(flush);
  return 0;
failed:
  *kcode = kr;
  return -1;
}

TL_EXPORT int tl_module_time(tl_ctx *ctx, tl_module *m, const char *fname, tl_array **args,
                             int nargs, int number, int repeat, double min_repeat_ms,
                             int cache_flush, double *secs_out) {
  if (repeat < 1) return tl_err(ctx, TL_E_ARG, "tl_module_time: repeat must be >= 1, got %d", repeat);
  if (!secs_out) return tl_err(ctx, TL_E_ARG, "tl_module_time: secs_out is NULL");
  kernel_fn fn;
  void *stack[16], **dl = NULL;
  int rc = prepare_call(ctx, m, fname, args, nargs, &fn, stack, &dl);
  if (rc) return rc;
  int32_t kr = 0;
  rc = tl_kernel_time(*(void **)&fn, dl, nargs, number, repeat, min_repeat_ms, cache_flush, secs_out,
                      &kr);
  if (dl != stack) free(dl);
  return rc ? kernel_failed(ctx, m, fname, kr) : TL_OK;
}
