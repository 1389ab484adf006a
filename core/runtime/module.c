/*
** module.c -- loadable kernel modules: shared objects the build layer
** (core/build/module.c) compiled from generated C, dlopen'ed, called and timed.
**
** Kernels follow the C backend's ABI (codegen/c.c): int32_t f(void **args,
** int32_t nargs) with DLTensor pointers, returning 0 or a TL_E_* code whose
** message f_error() returns. tl_module_time is the time evaluator
** (tl_kernel_time, time.c) on one of the module's kernels.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

#if defined(__GLIBC__)
#include <malloc.h>
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

static void heap_keep_once(void) {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void tl_kernel_heap_keep(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, heap_keep_once);
}

int tl_module_load(tl_ctx *ctx, const char *path, const char *source, double compile_s,
                   int cache_hit, tl_module **out) {
  *out = NULL;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    return tl_err(ctx, TL_E_BUILD, "cannot load the compiled kernel '%s': %s", path,
                  e ? e : "unknown error");
  }
  tl_module *m = tl_calloc(1, sizeof *m);
  m->source = tl_strdup(source ? source : "");
  m->path = tl_strdup(path);
  m->handle = h;
  m->compile_s = compile_s;
  m->cache_hit = cache_hit;
  *out = m;
  return TL_OK;
}

void *tl_module_sym(const tl_module *m, const char *name) {
  return m && m->handle ? dlsym(m->handle, name) : NULL;
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
