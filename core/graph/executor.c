/*
** executor.c -- the graph executor's run loop: slots (arrays), kernels
** (function pointers of compiled modules) and steps, run in order in C.
**
** Slots are either views into the executor's arena (planned intermediates,
** see plan.c) or references to external arrays (weights, inputs). Every slot
** is an array the executor owns (a view or a tl_array_reshape reference), so
** callers may free theirs. Kernels follow the C backend's ABI
** int32_t f(void **args, int32_t nargs) (args: DLTensor pointers); their
** pointers are resolved once (tl_module_sym, the runtime's loader), and
** the modules must outlive the executor (the Lua side keeps them).
*/
#define _GNU_SOURCE

#include "../runtime/runtime.h"
#include "../tunelua.h"

typedef int32_t (*kernel_fn)(void **args, int32_t nargs);
typedef const char *(*kernel_err_fn)(void);

typedef struct {
  kernel_fn fn;
  kernel_err_fn err;
  tl_graph_host_fn hfn;            /* a host function kernel (fn NULL), e.g. an accelerator's */
  void *hud;
  char *name;
  tl_ocl_module *ocl;              /* an OpenCL module (fn NULL), not owned */
  struct tl_graph_ocl_lib *olib;   /* or a group of a one-program library, not owned */
  int ogroup;
} gkernel;

static int ocl_lib_check_step(tl_ctx *ctx, const struct tl_graph_ocl_lib *l, int g,
                              tl_array *const *args, int nargs);
static int ocl_lib_launch(tl_ctx *ctx, struct tl_graph_ocl_lib *l, int g, tl_array *const *args,
                          int step);
static int ocl_lib_finish(tl_ctx *ctx, struct tl_graph_ocl_lib *l);

typedef struct {
  int kernel;
  int nargs;
  int first;                       /* index into e->argv */
} gstep;

struct tl_graph_exec {
  tl_array *arena;                 /* 1-D uint8, or NULL when empty */
  int64_t arena_bytes;
  TL_VEC(tl_array *) slots;
  TL_VEC(gkernel) kernels;
  TL_VEC(gstep) steps;
  TL_VEC(int) argslot;             /* slot ids of all steps' arguments */
  void **argv;                     /* DLTensor pointers, built lazily */
  tl_array **arrv;                 /* the same slots as arrays (OpenCL kernels) */
  int argv_n;
  struct tl_graph_ocl_lib *olib;   /* the one-program library whose queue a run waits for */
};

TL_EXPORT int tl_graph_exec_new(tl_ctx *ctx, int64_t arena_bytes, tl_graph_exec **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_new: out is NULL");
  *out = NULL;
  if (arena_bytes < 0)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_new: negative arena size %lld",
                  (long long)arena_bytes);
  tl_graph_exec *e = tl_calloc(1, sizeof *e);
  e->arena_bytes = arena_bytes;
  if (arena_bytes > 0) {
    int64_t n = arena_bytes;
    int rc = tl_array_empty(ctx, 1, &n, TL_UINT8, TL_DEV_CPU, 0, &e->arena);
    if (rc) {
      free(e);
      return rc;
    }
  }
  *out = e;
  return TL_OK;
}

TL_EXPORT void tl_graph_exec_free(tl_graph_exec *e) {
  if (!e) return;
  for (int i = 0; i < e->slots.n; i++) tl_array_free(e->slots.v[i]);
  TL_VEC_FREE(e->slots);
  for (int i = 0; i < e->kernels.n; i++) free(e->kernels.v[i].name);
  TL_VEC_FREE(e->kernels);
  TL_VEC_FREE(e->steps);
  TL_VEC_FREE(e->argslot);
  free(e->argv);
  free(e->arrv);
  tl_array_free(e->arena);
  free(e);
}

static void release_ref(void *arg) { tl_array_free(arg); }

static int push_slot(tl_graph_exec *e, tl_array *a, int *slot) {
  TL_VEC_PUSH(e->slots, a);
  if (slot) *slot = e->slots.n - 1;
  free(e->argv);              /* DLTensor pointers are rebuilt on the next run */
  e->argv = NULL;
  return TL_OK;
}

TL_EXPORT int tl_graph_exec_slot_view(tl_ctx *ctx, tl_graph_exec *e, int64_t offset, int ndim,
                                      const int64_t *shape, int dtype, int *slot) {
  if (!e) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_slot_view: executor is NULL");
  int eb = tl_dtype_bytes(dtype);
  if (eb <= 0) return tl_err(ctx, TL_E_DTYPE, "tl_graph_exec_slot_view: bad dtype %d", dtype);
  if (ndim < 0 || ndim > TL_ARRAY_MAX_NDIM || (ndim > 0 && !shape))
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_slot_view: bad shape (ndim %d)", ndim);
  int64_t n = eb;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return tl_err(ctx, TL_E_SHAPE, "tl_graph_exec_slot_view: negative extent");
    n *= shape[i];
  }
  if (offset < 0 || offset % eb || !e->arena || offset + n > e->arena_bytes)
    return tl_err(ctx, TL_E_ARG,
                  "tl_graph_exec_slot_view: %lld bytes at offset %lld do not fit the arena "
                  "of %lld bytes", (long long)n, (long long)offset, (long long)e->arena_bytes);
  /* the view holds its own reference to the arena's storage */
  tl_array *ref = NULL;
  int64_t an = e->arena_bytes;
  int rc = tl_array_reshape(ctx, e->arena, 1, &an, &ref);
  if (rc) return rc;
  DLDevice dev = {kDLCPU, 0};
  tl_array *v = NULL;
  rc = tl_array_wrap(ctx, tl_array_data(e->arena), (uint64_t)offset, ndim, shape, dtype, dev,
                     release_ref, ref, &v);
  if (rc) {
    tl_array_free(ref);
    return rc;
  }
  return push_slot(e, v, slot);
}

TL_EXPORT int tl_graph_exec_slot_array(tl_ctx *ctx, tl_graph_exec *e, tl_array *a, int *slot) {
  if (!e || !a) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_slot_array: NULL argument");
  tl_array *ref = NULL;
  int rc = tl_array_reshape(ctx, a, tl_array_ndim(a), tl_array_shape(a), &ref);
  if (rc) return rc;
  return push_slot(e, ref, slot);
}

static int check_slot(tl_ctx *ctx, const tl_graph_exec *e, int slot, const char *fn) {
  if (!e) return tl_err(ctx, TL_E_ARG, "%s: executor is NULL", fn);
  if (slot < 0 || slot >= e->slots.n)
    return tl_err(ctx, TL_E_ARG, "%s: slot %d out of range (%d slots)", fn, slot, e->slots.n);
  return TL_OK;
}

TL_EXPORT int tl_graph_exec_slot_ref(tl_ctx *ctx, tl_graph_exec *e, int slot, tl_array **out) {
  int rc = check_slot(ctx, e, slot, "tl_graph_exec_slot_ref");
  if (rc) return rc;
  tl_array *a = e->slots.v[slot];
  return tl_array_reshape(ctx, a, tl_array_ndim(a), tl_array_shape(a), out);
}

TL_EXPORT int tl_graph_exec_set(tl_ctx *ctx, tl_graph_exec *e, int slot, const tl_array *src) {
  int rc = check_slot(ctx, e, slot, "tl_graph_exec_set");
  if (rc) return rc;
  return tl_array_copyto(ctx, src, e->slots.v[slot]);
}

TL_EXPORT int tl_graph_exec_add_kernel(tl_ctx *ctx, tl_graph_exec *e, tl_module *m,
                                       const char *fname, int *kernel) {
  if (!e || !m || !fname) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_kernel: NULL argument");
  const char *path = tl_module_path(m);
  gkernel k = {0};
  *(void **)&k.fn = tl_module_sym(m, fname);
  char *ename = tl_sprintf("%s_error", fname);
  *(void **)&k.err = tl_module_sym(m, ename);
  free(ename);
  if (!k.fn) return tl_err(ctx, TL_E_ARG, "module '%s' has no function '%s'", path, fname);
  k.name = tl_strdup(fname);
  TL_VEC_PUSH(e->kernels, k);
  if (kernel) *kernel = e->kernels.n - 1;
  return TL_OK;
}

TL_EXPORT int tl_graph_exec_add_kernel_host(tl_ctx *ctx, tl_graph_exec *e, const char *name,
                                            tl_graph_host_fn fn, void *ud, int *kernel) {
  if (!e || !fn || !name)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_kernel_host: NULL argument");
  gkernel k = {0};
  k.hfn = fn, k.hud = ud, k.name = tl_strdup(name);
  TL_VEC_PUSH(e->kernels, k);
  if (kernel) *kernel = e->kernels.n - 1;
  return TL_OK;
}

TL_EXPORT int tl_graph_exec_add_step(tl_ctx *ctx, tl_graph_exec *e, int kernel, const int *slots,
                                     int nslots) {
  if (!e) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_step: executor is NULL");
  if (kernel < 0 || kernel >= e->kernels.n)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_step: kernel %d out of range", kernel);
  if (nslots < 0 || (nslots > 0 && !slots))
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_step: bad argument list");
  for (int i = 0; i < nslots; i++)
    if (slots[i] < 0 || slots[i] >= e->slots.n)
      return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_step: argument %d: slot %d out of range", i,
                    slots[i]);
  const gkernel *kk = &e->kernels.v[kernel];
  if (kk->olib) {
    tl_array *a[256];
    if (nslots > 256) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_step: too many arguments");
    for (int i = 0; i < nslots; i++) a[i] = e->slots.v[slots[i]];
    int rc = ocl_lib_check_step(ctx, kk->olib, kk->ogroup, a, nslots);
    if (rc) return rc;
  }
  gstep s = {kernel, nslots, e->argslot.n};
  for (int i = 0; i < nslots; i++) TL_VEC_PUSH(e->argslot, slots[i]);
  TL_VEC_PUSH(e->steps, s);
  free(e->argv);
  e->argv = NULL;
  return TL_OK;
}

static void prepare(tl_graph_exec *e) {
  if (e->argv && e->argv_n == e->argslot.n) return;
  free(e->argv);
  free(e->arrv);
  e->argv = tl_malloc(sizeof(void *) * (size_t)(e->argslot.n ? e->argslot.n : 1));
  e->arrv = tl_malloc(sizeof(tl_array *) * (size_t)(e->argslot.n ? e->argslot.n : 1));
  for (int i = 0; i < e->argslot.n; i++) {
    e->arrv[i] = e->slots.v[e->argslot.v[i]];
    e->argv[i] = tl_array_dltensor(e->arrv[i]);
  }
  e->argv_n = e->argslot.n;
}

/* An OpenCL step: launch the module's kernels on the slots' device arrays. */
static int run_ocl(tl_ctx *ctx, tl_graph_exec *e, int i, const gstep *st, const gkernel *k) {
  int rc = tl_ocl_module_call(ctx, k->ocl, e->arrv + st->first, st->nargs);
  if (!rc) return TL_OK;
  char *msg = tl_strdup(tl_errmsg(ctx));
  rc = tl_err(ctx, rc, "graph executor: step %d (kernel %s) failed: %s", i, k->name, msg);
  free(msg);
  return rc;
}

/* A host function step: the function runs on the slots' arrays. */
static int run_host(tl_ctx *ctx, tl_graph_exec *e, int i, const gstep *st, const gkernel *k) {
  int rc = k->hfn(k->hud, ctx, e->arrv + st->first, st->nargs);
  if (!rc) return TL_OK;
  char *msg = tl_strdup(tl_errmsg(ctx));
  rc = tl_err(ctx, rc, "graph executor: step %d (kernel %s) failed: %s", i, k->name, msg);
  free(msg);
  return rc;
}

static int run_steps(tl_ctx *ctx, tl_graph_exec *e) {
  const gstep *st = e->steps.v;
  for (int i = 0, n = e->steps.n; i < n; i++) {
    const gkernel *k = &e->kernels.v[st[i].kernel];
    if (k->hfn) {
      int rc = run_host(ctx, e, i, &st[i], k);
      if (rc) return rc;
      continue;
    }
    if (k->olib) {
      int rc = ocl_lib_launch(ctx, k->olib, k->ogroup, e->arrv + st[i].first, i);
      if (rc) {
        ocl_lib_finish(NULL, k->olib);
        return rc;
      }
      continue;
    }
    if (k->ocl) {
      int rc = run_ocl(ctx, e, i, &st[i], k);
      if (rc) return rc;
      continue;
    }
    int32_t r = k->fn(e->argv + st[i].first, st[i].nargs);
    if (r) {
      const char *msg = k->err ? k->err() : NULL;
      int code = r > TL_OK && r <= TL_E_INTERNAL ? r : TL_E_RUNTIME;
      return tl_err(ctx, code, "graph executor: step %d (kernel %s) failed: %s", i, k->name,
                    msg && *msg ? msg : "no message");
    }
  }
  if (e->olib) return ocl_lib_finish(ctx, e->olib);
  return TL_OK;
}

TL_EXPORT int tl_graph_exec_run(tl_ctx *ctx, tl_graph_exec *e) {
  if (!e) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_run: executor is NULL");
  prepare(e);
  return run_steps(ctx, e);
}

/* The time evaluator's work: one run of every step (waited for). */
typedef struct {
  tl_ctx *ctx;
  tl_graph_exec *e;
} graph_work;

static int run_graph(void *arg, int i, int n) {
  (void)i, (void)n;
  graph_work *w = arg;
  return run_steps(w->ctx, w->e);
}

TL_EXPORT int tl_graph_exec_time(tl_ctx *ctx, tl_graph_exec *e, int number, int repeat,
                                 double min_repeat_ms, double *secs_out) {
  if (!e || !secs_out) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_time: NULL argument");
  if (number < 1 || repeat < 1)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_time: number and repeat must be >= 1, got %d, %d",
                  number, repeat);
  prepare(e);
  graph_work w = {ctx, e};
  tl_time_work tw = {run_graph, NULL, &w, TL_TIME_WARMUP_S, 0};
  return tl_time_eval(&tw, number, repeat, min_repeat_ms, secs_out);
}

TL_EXPORT int tl_graph_exec_profile(tl_ctx *ctx, tl_graph_exec *e, int number, double *secs_out) {
  if (!e || !secs_out || number < 1)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_profile: bad arguments");
  prepare(e);
  int rc = run_steps(ctx, e);
  if (rc) return rc;
  for (int i = 0; i < e->steps.n; i++) secs_out[i] = 0;
  for (int k = 0; k < number; k++)
    for (int i = 0; i < e->steps.n; i++) {
      const gstep *st = &e->steps.v[i];
      const gkernel *kk = &e->kernels.v[st->kernel];
      double t0 = tl_now();
      if (kk->olib) {
        rc = ocl_lib_launch(ctx, kk->olib, kk->ogroup, e->arrv + st->first, i);
        if (!rc) rc = ocl_lib_finish(ctx, kk->olib);
        secs_out[i] += tl_now() - t0;
        if (rc) return rc;
        continue;
      }
      if (kk->hfn) {
        rc = run_host(ctx, e, i, st, kk);
        secs_out[i] += tl_now() - t0;
        if (rc) return rc;
        continue;
      }
      if (kk->ocl) {
        rc = run_ocl(ctx, e, i, st, kk);    /* waits for the step's kernels */
        secs_out[i] += tl_now() - t0;
        if (rc) return rc;
        continue;
      }
      int32_t r = kk->fn(e->argv + st->first, st->nargs);
      secs_out[i] += tl_now() - t0;
      if (r) return tl_err(ctx, TL_E_RUNTIME, "graph executor: step %d failed", i);
    }
  for (int i = 0; i < e->steps.n; i++) secs_out[i] /= number;
  return TL_OK;
}

/* ---- batched kernel builds ------------------------------------------------
** All kernels of a graph compiled by one C compiler run per part (nparts
** parts compiled in parallel threads by the build layer's driver), each part
** a shared object holding several kernels: every kernel is its own source
** file (its static helpers stay file-local), passed together on one command
** line. Objects are cached like tl_module_from_c's, under a hash of
** (compiler, flags, all sources of the part): g<hash>.so in the same cache
** directory. */

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../build/build.h"

struct tl_graph_lib {
  int nparts;
  tl_module **mods;                /* the parts, loaded by the runtime */
  char **paths;
  double compile_s;                /* summed over parts compiled now */
  int cache_hits;                  /* parts found in the cache */
};

static int gwrite(const char *path, const char *data) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t n = strlen(data);
  int ok = fwrite(data, 1, n, f) == n;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

typedef struct {
  char **src;                      /* the part's sources */
  int n;
  const char *flags, *cc, *dir;
  double timeout_s;
  char *so_path;                   /* result */
  tl_module *mod;
  double compile_s;
  int hit;
  int rc;
  char *msg;                       /* the failure's message (malloc'd) */
} gpart;

static void build_part(int64_t i, void *arg) {
  gpart *p = (gpart *)arg + i;
  uint64_t h[2];
  for (int k = 0; k < 2; k++) {
    uint64_t x = 0x6772617068ull + (uint64_t)k;
    for (int j = 0; j < p->n; j++)
      x = tl_hash_mix(x, tl_hash_bytes(p->src[j], strlen(p->src[j]), 0x74756e65ull + (uint64_t)k));
    x = tl_hash_mix(x, tl_hash_bytes(p->flags, strlen(p->flags), 0x666c6167ull + (uint64_t)k));
    x = tl_hash_mix(x, tl_hash_bytes(p->cc, strlen(p->cc), 0x63630000ull + (uint64_t)k));
    h[k] = x;
  }
  p->so_path = tl_sprintf("%s/g%016llx%016llx.so", p->dir, (unsigned long long)h[0],
                          (unsigned long long)h[1]);
  if (access(p->so_path, R_OK) == 0) {
    tl_module_load(NULL, p->so_path, NULL, 0, 1, &p->mod);
    if (p->mod) {
      p->hit = 1;
      return;
    }
  }
  static unsigned counter;
  unsigned seq = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
  char *tmpdir = tl_sprintf("%s/g%016llx.%d.%u.tmp", p->dir, (unsigned long long)h[0],
                            (int)getpid(), seq);
  char *tmp_so = tl_sprintf("%s.so", tmpdir);
  char **files = tl_calloc((size_t)p->n, sizeof(char *));
  tl_ctx *lctx = tl_ctx_new();
  double t0 = tl_now();
  if (mkdir(tmpdir, 0700) != 0) {
    p->msg = tl_sprintf("cannot create '%s': %s", tmpdir, strerror(errno));
    p->rc = TL_E_IO;
    goto done;
  }
  for (int j = 0; j < p->n; j++) {
    files[j] = tl_sprintf("%s/k%d.c", tmpdir, j);
    if (gwrite(files[j], p->src[j]) != 0) {
      p->msg = tl_sprintf("cannot write '%s'", files[j]);
      p->rc = TL_E_IO;
      goto done;
    }
  }
  tl_toolchain tc = {p->cc, p->flags, NULL};
  p->rc = tl_cc_shared(lctx, &tc, (const char *const *)files, p->n, tmp_so, p->timeout_s);
  if (p->rc) {
    p->msg = tl_strdup(tl_errmsg(lctx));
  } else if (rename(tmp_so, p->so_path) != 0) {
    p->msg = tl_sprintf("cannot move the library to '%s': %s", p->so_path, strerror(errno));
    p->rc = TL_E_IO;
  }
  if (!p->rc && (p->rc = tl_module_load(lctx, p->so_path, NULL, 0, 0, &p->mod)))
    p->msg = tl_strdup(tl_errmsg(lctx));
done:
  p->compile_s = tl_now() - t0;
  tl_ctx_free(lctx);
  for (int j = 0; j < p->n; j++) {
    if (files[j]) unlink(files[j]);
    free(files[j]);
  }
  unlink(tmp_so);
  rmdir(tmpdir);
  free(files);
  free(tmp_so);
  free(tmpdir);
}

TL_EXPORT int tl_graph_lib_build(tl_ctx *ctx, tl_lowered *const *fs, int n, int nparts,
                                 const tl_toolchain *tc, const char *cflags, double timeout_s,
                                 tl_graph_lib **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_graph_lib_build: out is NULL");
  *out = NULL;
  if (n < 1 || !fs) return tl_err(ctx, TL_E_ARG, "tl_graph_lib_build: no kernels");
  if (nparts < 1) nparts = 1;
  if (nparts > n) nparts = n;
  char **src = tl_calloc((size_t)n, sizeof(char *));
  int rc = TL_OK;
  for (int i = 0; i < n && !rc; i++) {
    tl_buf b = {0};
    rc = tl_build_c_codegen(ctx, fs[i], tc, &b);
    src[i] = tl_buf_take(&b);
  }
  char *dir = NULL;
  if (!rc) rc = tl_build_cache_dir(ctx, &dir);
  gpart *parts = tl_calloc((size_t)nparts, sizeof(gpart));
  if (!rc) {
    tl_toolchain t = tl_toolchain_with_flags(tc, cflags);
    const char *flags = tl_toolchain_cflags(&t);
    char *cc = tl_toolchain_cc(&t);   /* with the cross prefix */
    /* contiguous slices of about equal kernel counts */
    for (int p = 0; p < nparts; p++) {
      int lo = (int)((int64_t)n * p / nparts), hi = (int)((int64_t)n * (p + 1) / nparts);
      parts[p].src = src + lo;
      parts[p].n = hi - lo;
      parts[p].flags = flags;
      parts[p].cc = cc;
      parts[p].dir = dir;
      parts[p].timeout_s = timeout_s;
    }
    if (nparts == 1) build_part(0, parts);
    else tl_pool_for(tl_pool_global(), nparts, build_part, parts);
    for (int p = 0; p < nparts && !rc; p++)
      if (parts[p].rc) rc = tl_err(ctx, parts[p].rc, "%s", parts[p].msg);
    free(cc);
  }
  tl_graph_lib *l = NULL;
  if (!rc) {
    l = tl_calloc(1, sizeof *l);
    l->nparts = nparts;
    l->mods = tl_calloc((size_t)nparts, sizeof(tl_module *));
    l->paths = tl_calloc((size_t)nparts, sizeof(char *));
    for (int p = 0; p < nparts; p++) {
      l->mods[p] = parts[p].mod;
      l->paths[p] = parts[p].so_path;
      parts[p].mod = NULL;
      parts[p].so_path = NULL;
      l->compile_s += parts[p].hit ? 0 : parts[p].compile_s;
      l->cache_hits += parts[p].hit;
    }
  }
  for (int p = 0; p < nparts; p++) {
    tl_module_free(parts[p].mod);
    free(parts[p].so_path);
    free(parts[p].msg);
  }
  free(parts);
  for (int i = 0; i < n; i++) free(src[i]);
  free(src);
  free(dir);
  if (rc) return rc;
  *out = l;
  return TL_OK;
}

TL_EXPORT int tl_graph_lib_compile(tl_ctx *ctx, tl_lowered *const *fs, int n, const tl_toolchain *tc,
                                   const char *cflags, double timeout_s, const char *out_path) {
  if (n < 1 || !fs || !out_path) return tl_err(ctx, TL_E_ARG, "tl_graph_lib_compile: no kernels or no output");
  char *dir = NULL;
  int rc = tl_build_cache_dir(ctx, &dir);
  if (rc) return rc;
  static unsigned counter;
  unsigned seq = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
  char *tmpdir = tl_sprintf("%s/x%d.%u.tmp", dir, (int)getpid(), seq);
  char **files = tl_calloc((size_t)n, sizeof(char *));
  if (mkdir(tmpdir, 0700) != 0)
    rc = tl_err(ctx, TL_E_IO, "cannot create '%s': %s", tmpdir, strerror(errno));
  for (int i = 0; i < n && !rc; i++) {
    tl_buf b = {0};
    rc = tl_build_c_codegen(ctx, fs[i], tc, &b);
    files[i] = tl_sprintf("%s/k%d.c", tmpdir, i);
    if (!rc && gwrite(files[i], b.s ? b.s : "") != 0)
      rc = tl_err(ctx, TL_E_IO, "cannot write '%s'", files[i]);
    tl_buf_free(&b);
  }
  if (!rc) {
    tl_toolchain t = tl_toolchain_with_flags(tc, cflags);
    rc = tl_cc_shared(ctx, &t, (const char *const *)files, n, out_path, timeout_s);
  }
  for (int i = 0; i < n; i++) {
    if (files[i]) unlink(files[i]);
    free(files[i]);
  }
  rmdir(tmpdir);
  free(files);
  free(tmpdir);
  free(dir);
  return rc;
}

TL_EXPORT void tl_graph_lib_free(tl_graph_lib *l) {
  if (!l) return;
  for (int p = 0; p < l->nparts; p++) {
    tl_module_free(l->mods[p]);
    free(l->paths[p]);
  }
  free(l->mods);
  free(l->paths);
  free(l);
}

TL_EXPORT double tl_graph_lib_compile_seconds(const tl_graph_lib *l) { return l ? l->compile_s : 0; }
TL_EXPORT int tl_graph_lib_num_parts(const tl_graph_lib *l) { return l ? l->nparts : 0; }
TL_EXPORT const char *tl_graph_lib_part_path(const tl_graph_lib *l, int i) {
  return l && i >= 0 && i < l->nparts ? l->paths[i] : NULL;
}
TL_EXPORT int tl_graph_lib_part_of(const tl_graph_lib *l, const char *fname) {
  for (int p = 0; l && fname && p < l->nparts; p++)
    if (tl_module_sym(l->mods[p], fname)) return p;
  return -1;
}

TL_EXPORT int tl_graph_exec_add_kernel_lib(tl_ctx *ctx, tl_graph_exec *e, tl_graph_lib *l,
                                           const char *fname, int *kernel) {
  if (!e || !l || !fname)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_kernel_lib: NULL argument");
  gkernel k = {0};
  for (int p = 0; p < l->nparts && !k.fn; p++) {
    *(void **)&k.fn = tl_module_sym(l->mods[p], fname);
    if (k.fn) {
      char *ename = tl_sprintf("%s_error", fname);
      *(void **)&k.err = tl_module_sym(l->mods[p], ename);
      free(ename);
    }
  }
  if (!k.fn) return tl_err(ctx, TL_E_ARG, "graph library has no function '%s'", fname);
  k.name = tl_strdup(fname);
  TL_VEC_PUSH(e->kernels, k);
  if (kernel) *kernel = e->kernels.n - 1;
  return TL_OK;
}

/* ---- OpenCL steps -----------------------------------------------------------
** On an OpenCL device the planned intermediates live in storage buffers (one
** device array per storage slot of tl_graph_plan_storage, since OpenCL
** arguments cannot start at a byte offset); each intermediate is a slot
** viewing its storage's buffer from byte 0 with its own shape and dtype.
** Kernels are OpenCL modules (tl_opencl_build), launched by
** tl_ocl_module_call on the slots' arrays, in order, from the same loop. */

TL_EXPORT int tl_graph_exec_slot_storage(tl_ctx *ctx, tl_graph_exec *e, tl_array *storage,
                                         int ndim, const int64_t *shape, int dtype, int *slot) {
  if (!e || !storage) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_slot_storage: NULL argument");
  int eb = tl_dtype_bytes(dtype);
  if (eb <= 0) return tl_err(ctx, TL_E_DTYPE, "tl_graph_exec_slot_storage: bad dtype %d", dtype);
  if (ndim < 0 || ndim > TL_ARRAY_MAX_NDIM || (ndim > 0 && !shape))
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_slot_storage: bad shape (ndim %d)", ndim);
  int64_t n = eb;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return tl_err(ctx, TL_E_SHAPE, "tl_graph_exec_slot_storage: negative extent");
    n *= shape[i];
  }
  if ((size_t)n > tl_array_nbytes(storage) || storage->t.byte_offset != 0)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_slot_storage: %lld bytes do not fit the storage "
                  "of %zu bytes", (long long)n, tl_array_nbytes(storage));
  tl_array *ref = NULL;
  int rc = tl_array_reshape(ctx, storage, tl_array_ndim(storage), tl_array_shape(storage), &ref);
  if (rc) return rc;
  tl_array *v = NULL;
  rc = tl_array_wrap(ctx, storage->t.data, 0, ndim, shape, dtype, storage->t.device, release_ref,
                     ref, &v);
  if (rc) {
    tl_array_free(ref);
    return rc;
  }
  return push_slot(e, v, slot);
}

TL_EXPORT int tl_graph_exec_add_kernel_ocl(tl_ctx *ctx, tl_graph_exec *e, tl_ocl_module *m,
                                           const char *name, int *kernel) {
  if (!e || !m) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_kernel_ocl: NULL argument");
  gkernel k = {0};
  k.ocl = m;
  k.name = tl_strdup(name ? name : "opencl");
  TL_VEC_PUSH(e->kernels, k);
  if (kernel) *kernel = e->kernels.n - 1;
  return TL_OK;
}

typedef struct {
  tl_lowered *const *fs;
  int dev;
  tl_ocl_module **out;
  int *rc;
  char **msg;
} obuild;

static void build_ocl_one(int64_t i, void *arg) {
  obuild *b = arg;
  tl_ctx *lctx = tl_ctx_new();
  b->rc[i] = tl_opencl_build(lctx, b->fs[i], b->dev, &b->out[i]);
  if (b->rc[i]) b->msg[i] = tl_strdup(tl_errmsg(lctx));
  tl_ctx_free(lctx);
}

TL_EXPORT int tl_graph_ocl_build(tl_ctx *ctx, tl_lowered *const *fs, int n, int dev, int nthreads,
                                 tl_ocl_module **out) {
  if (n < 0 || (n > 0 && (!fs || !out)))
    return tl_err(ctx, TL_E_ARG, "tl_graph_ocl_build: bad arguments");
  for (int i = 0; i < n; i++) out[i] = NULL;
  if (n == 0) return TL_OK;
  int *rcs = tl_calloc((size_t)n, sizeof(int));
  char **msg = tl_calloc((size_t)n, sizeof(char *));
  int rc = TL_OK;
  if (nthreads <= 1 || n == 1) {
    /* serial: the first failure stops (the device context is created by the first build) */
    for (int i = 0; i < n && !rc; i++) rc = tl_opencl_build(ctx, fs[i], dev, &out[i]);
  } else {
    rc = tl_opencl_build(ctx, fs[0], dev, &out[0]);      /* brings the device up once */
    obuild b = {fs + 1, dev, out + 1, rcs + 1, msg + 1};
    if (!rc) tl_pool_for(tl_pool_global(), n - 1, build_ocl_one, &b);
    for (int i = 1; i < n && !rc; i++)
      if (rcs[i]) rc = tl_err(ctx, rcs[i], "%s", msg[i] ? msg[i] : "OpenCL build failed");
  }
  for (int i = 0; i < n; i++) free(msg[i]);
  free(msg);
  free(rcs);
  if (rc)
    for (int i = 0; i < n; i++) {
      tl_ocl_module_free(out[i]);
      out[i] = NULL;
    }
  return rc;
}

/* ---- one OpenCL program for the whole graph ----------------------------------
** tl_graph_ocl_lib: the OpenCL C of every group (tl_codegen_opencl) joined into
** one program (one pragma/helper prelude, then every group's kernels; the
** kernel names are the groups' unique function names plus _kernelN), built once
** (pocl and NVIDIA compile one program much faster than many: mobilenet's 23
** groups at 32x32 on pocl, cold cache: 1.4 s against 7.5 s). The program lives
** in the device's context (found through a device buffer) with a queue of its
** own; steps set their kernels' arguments and enqueue them without waiting, and
** a run ends with one clFinish. The runtime's copies (set_input, get_output)
** are blocking, so they are ordered with the runs. */
#include <CL/cl.h>

typedef struct {
  cl_kernel k;
  char *name;
  size_t gs[3], ls[3];
  int nslots;
  int *slots;                      /* < nargs: group argument; else nargs + temp */
} okern;

typedef struct {
  int first, nkernels;             /* into l->k */
  int nargs;
  int *arg_dtype, *arg_ndim;
  int64_t **arg_shape;
  int ntemps;
  cl_mem *temps;
  char *name;
} ogroup;

struct tl_graph_ocl_lib {
  int dev;
  cl_context cctx;
  cl_device_id did;
  cl_command_queue q;
  cl_program prog;
  okern *k;
  int nk;
  ogroup *g;
  int ng;
  tl_array *probe;                 /* keeps the device (context) alive */
  double compile_s;
};

static int oerr(tl_ctx *ctx, int code, cl_int e, const char *what) {
  return tl_err(ctx, code, "graph executor (OpenCL): %s failed (OpenCL error %d)", what, (int)e);
}

TL_EXPORT void tl_graph_ocl_lib_free(tl_graph_ocl_lib *l) {
  if (!l) return;
  for (int i = 0; i < l->nk; i++) {
    if (l->k[i].k) clReleaseKernel(l->k[i].k);
    free(l->k[i].name);
    free(l->k[i].slots);
  }
  free(l->k);
  for (int i = 0; i < l->ng; i++) {
    ogroup *g = &l->g[i];
    for (int t = 0; t < g->ntemps; t++)
      if (g->temps && g->temps[t]) clReleaseMemObject(g->temps[t]);
    free(g->temps);
    for (int a = 0; a < g->nargs; a++) free(g->arg_shape[a]);
    free(g->arg_shape);
    free(g->arg_dtype);
    free(g->arg_ndim);
    free(g->name);
  }
  free(l->g);
  if (l->prog) clReleaseProgram(l->prog);
  if (l->q) clReleaseCommandQueue(l->q);
  tl_array_free(l->probe);
  free(l);
}

TL_EXPORT int tl_graph_ocl_lib_build(tl_ctx *ctx, tl_lowered *const *fs, int n, int dev,
                                     tl_graph_ocl_lib **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_graph_ocl_lib_build: out is NULL");
  *out = NULL;
  if (n < 1 || !fs) return tl_err(ctx, TL_E_ARG, "tl_graph_ocl_lib_build: no kernels");
  tl_graph_ocl_lib *l = tl_calloc(1, sizeof *l);
  l->dev = dev;
  int64_t one = 1;
  int rc = tl_array_empty(ctx, 1, &one, TL_UINT8, TL_DEV_OPENCL, dev, &l->probe);
  if (rc) {
    free(l);
    return rc;
  }
  cl_int e = clGetMemObjectInfo((cl_mem)l->probe->t.data, CL_MEM_CONTEXT, sizeof l->cctx, &l->cctx,
                                NULL);
  if (e == CL_SUCCESS)
    e = clGetContextInfo(l->cctx, CL_CONTEXT_DEVICES, sizeof l->did, &l->did, NULL);
  if (e != CL_SUCCESS) {
    rc = oerr(ctx, TL_E_RUNTIME, e, "finding the device's context");
    goto fail;
  }
  l->q = clCreateCommandQueue(l->cctx, l->did, CL_QUEUE_PROFILING_ENABLE, &e);
  if (!l->q) {
    rc = oerr(ctx, TL_E_RUNTIME, e, "creating a queue");
    goto fail;
  }
  size_t max_wg = 0, max_items[3] = {0, 0, 0}, extlen = 0;
  cl_ulong local_mem = 0;
  clGetDeviceInfo(l->did, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL);
  clGetDeviceInfo(l->did, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof max_items, max_items, NULL);
  clGetDeviceInfo(l->did, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem, NULL);
  clGetDeviceInfo(l->did, CL_DEVICE_EXTENSIONS, 0, NULL, &extlen);
  char *ext = tl_calloc(extlen + 1, 1);
  clGetDeviceInfo(l->did, CL_DEVICE_EXTENSIONS, extlen, ext, NULL);
  int has16 = strstr(ext, "cl_khr_fp16") != NULL, has64 = strstr(ext, "cl_khr_fp64") != NULL;
  free(ext);
  /* 1. code for every group; one source (the build layer) */
  l->g = tl_calloc((size_t)n, sizeof(ogroup));
  tl_ocl_code *codes = tl_calloc((size_t)n, sizeof(tl_ocl_code));
  char *src = NULL;
  int fp16 = 0, fp64 = 0, nk = 0;
  rc = tl_build_opencl_joined(ctx, fs, n, codes, &src);
  for (int i = 0; i < n && !rc; i++) {
    fp16 |= codes[i].fp16;
    fp64 |= codes[i].fp64;
    nk += codes[i].nkernels;
  }
  if (!rc && ((fp16 && !has16) || (fp64 && !has64)))
    rc = tl_err(ctx, TL_E_UNSUPPORTED, "graph executor (OpenCL): the kernels use %s but the "
                "device lacks cl_khr_%s", fp16 && !has16 ? "float16" : "float64",
                fp16 && !has16 ? "fp16" : "fp64");
  /* 2. the program (the runtime's loader) */
  if (!rc) {
    double t0 = tl_now();
    void *prog = NULL;
    rc = tl_opencl_program(ctx, dev, src, "", &prog, NULL);
    l->prog = prog;
    l->compile_s = tl_now() - t0;
  }
  free(src);
  /* 3. kernels, checks, temporaries */
  if (!rc) l->k = tl_calloc((size_t)nk + 1, sizeof(okern));
  for (int i = 0; i < n && !rc; i++) {
    tl_ocl_code *c = &codes[i];
    ogroup *g = &l->g[i];
    l->ng = i + 1;
    g->name = tl_strdup(fs[i]->name);
    g->first = l->nk;
    g->nkernels = c->nkernels;
    g->nargs = c->nargs;
    g->arg_dtype = c->arg_dtype;
    g->arg_ndim = c->arg_ndim;
    g->arg_shape = c->arg_shape;
    c->arg_dtype = c->arg_ndim = NULL;
    c->arg_shape = NULL;
    c->nargs = 0;
    g->ntemps = c->ntemps;
    g->temps = tl_calloc((size_t)c->ntemps + 1, sizeof(cl_mem));
    for (int t = 0; t < c->ntemps && !rc; t++) {
      g->temps[t] = clCreateBuffer(l->cctx, CL_MEM_READ_WRITE,
                                   c->temp_bytes[t] > 0 ? (size_t)c->temp_bytes[t] : 1, NULL, &e);
      if (!g->temps[t]) rc = oerr(ctx, TL_E_NOMEM, e, "allocating a global temporary");
    }
    for (int j = 0; j < c->nkernels && !rc; j++) {
      tl_ocl_kinfo *ki = &c->kernels[j];
      okern *k = &l->k[l->nk++];
      k->name = tl_strdup(ki->name);
      k->nslots = ki->nslots;
      k->slots = tl_malloc(sizeof(int) * (size_t)(ki->nslots + 1));
      memcpy(k->slots, ki->slots, sizeof(int) * (size_t)ki->nslots);
      size_t wg = 1;
      for (int d = 0; d < 3; d++) {
        k->ls[d] = (size_t)ki->block[d];
        k->gs[d] = (size_t)(ki->grid[d] * ki->block[d]);
        wg *= k->ls[d];
        if (k->ls[d] > max_items[d])
          rc = tl_err(ctx, TL_E_RUNTIME, "graph executor (OpenCL): kernel '%s': %zu work-items in "
                      "dimension %d exceed the device's limit %zu", ki->name, k->ls[d], d,
                      max_items[d]);
      }
      if (rc) break;
      k->k = clCreateKernel(l->prog, ki->name, &e);
      if (!k->k) {
        rc = oerr(ctx, TL_E_BUILD, e, "creating a kernel");
        break;
      }
      size_t kwg = 0;
      cl_ulong klocal = 0;
      clGetKernelWorkGroupInfo(k->k, l->did, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
      clGetKernelWorkGroupInfo(k->k, l->did, CL_KERNEL_LOCAL_MEM_SIZE, sizeof klocal, &klocal, NULL);
      if (klocal < (cl_ulong)ki->local_bytes) klocal = (cl_ulong)ki->local_bytes;
      if (wg > max_wg || (kwg && wg > kwg))
        rc = tl_err(ctx, TL_E_RUNTIME, "graph executor (OpenCL): kernel '%s': invalid work-group "
                    "size %zu (device limit %zu, compiled kernel limit %zu)", ki->name, wg, max_wg,
                    kwg);
      else if (klocal > local_mem)
        rc = tl_err(ctx, TL_E_RUNTIME, "graph executor (OpenCL): kernel '%s' uses %llu bytes of "
                    "local memory, more than the device's %llu", ki->name,
                    (unsigned long long)klocal, (unsigned long long)local_mem);
    }
  }
  for (int i = 0; i < n; i++) tl_ocl_code_free(&codes[i]);
  free(codes);
  if (rc) goto fail;
  *out = l;
  return TL_OK;
fail:
  tl_graph_ocl_lib_free(l);
  return rc;
}

static int ocl_lib_check_step(tl_ctx *ctx, const tl_graph_ocl_lib *l, int gi,
                              tl_array *const *args, int nargs) {
  const ogroup *g = &l->g[gi];
  if (nargs != g->nargs)
    return tl_err(ctx, TL_E_ARG, "graph executor (OpenCL): %s takes %d arrays, got %d", g->name,
                  g->nargs, nargs);
  for (int k = 0; k < nargs; k++) {
    const tl_array *a = args[k];
    char s1[256], s2[256];
    if (a->t.device.device_type != kDLOpenCL || a->t.device.device_id != l->dev)
      return tl_err(ctx, TL_E_ARG, "graph executor (OpenCL): %s: argument %d is on %s:%d, expected "
                    "opencl:%d", g->name, k, tl_device_type_name(a->t.device.device_type),
                    a->t.device.device_id, l->dev);
    int same = a->dtype == g->arg_dtype[k] && a->t.ndim == g->arg_ndim[k];
    for (int i = 0; same && i < a->t.ndim; i++) same = a->shape[i] == g->arg_shape[k][i];
    if (!same || a->t.byte_offset != 0)
      return tl_err(ctx, TL_E_SHAPE, "graph executor (OpenCL): %s: argument %d: expected %s %s, "
                    "got %s %s%s", g->name, k, tl_dtype_name(g->arg_dtype[k]),
                    tl_shape_str(s1, sizeof s1, g->arg_ndim[k], g->arg_shape[k]),
                    tl_dtype_name(a->dtype), tl_shape_str(s2, sizeof s2, a->t.ndim, a->shape),
                    a->t.byte_offset ? " at a byte offset" : "");
  }
  return TL_OK;
}

static int ocl_lib_launch(tl_ctx *ctx, tl_graph_ocl_lib *l, int gi, tl_array *const *args,
                          int step) {
  const ogroup *g = &l->g[gi];
  for (int j = 0; j < g->nkernels; j++) {
    const okern *k = &l->k[g->first + j];
    for (int s = 0; s < k->nslots; s++) {
      int slot = k->slots[s];
      cl_mem mem = slot < g->nargs ? (cl_mem)args[slot]->t.data : g->temps[slot - g->nargs];
      cl_int e = clSetKernelArg(k->k, (cl_uint)s, sizeof(cl_mem), &mem);
      if (e != CL_SUCCESS)
        return tl_err(ctx, TL_E_RUNTIME, "graph executor: step %d (kernel %s): argument %d: "
                      "OpenCL error %d", step, k->name, s, (int)e);
    }
    cl_int e = clEnqueueNDRangeKernel(l->q, k->k, 3, NULL, k->gs, k->ls, 0, NULL, NULL);
    if (e != CL_SUCCESS)
      return tl_err(ctx, TL_E_RUNTIME, "graph executor: step %d (kernel %s): launch failed "
                    "(OpenCL error %d)", step, k->name, (int)e);
  }
  return TL_OK;
}

static int ocl_lib_finish(tl_ctx *ctx, tl_graph_ocl_lib *l) {
  cl_int e = clFinish(l->q);
  if (e != CL_SUCCESS && ctx)
    return tl_err(ctx, TL_E_RUNTIME, "graph executor: waiting for the OpenCL kernels failed "
                  "(OpenCL error %d)", (int)e);
  return TL_OK;
}

TL_EXPORT int tl_graph_exec_add_kernel_ocl_lib(tl_ctx *ctx, tl_graph_exec *e, tl_graph_ocl_lib *l,
                                               int group, int *kernel) {
  if (!e || !l) return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_kernel_ocl_lib: NULL argument");
  if (group < 0 || group >= l->ng)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_kernel_ocl_lib: group %d out of range (%d)",
                  group, l->ng);
  if (e->olib && e->olib != l)
    return tl_err(ctx, TL_E_ARG, "tl_graph_exec_add_kernel_ocl_lib: one library per executor");
  e->olib = l;
  gkernel k = {0};
  k.olib = l;
  k.ogroup = group;
  k.name = tl_strdup(l->g[group].name);
  TL_VEC_PUSH(e->kernels, k);
  if (kernel) *kernel = e->kernels.n - 1;
  return TL_OK;
}
