/*
** runtime.c -- the device runtime of tl_runtime.h: a .tlpack (lib:export_library)
** loaded and run with libc and libdl only.
**
** The pack is read whole and checked before anything is allocated from it:
** its magic and trailer (the file's own size: a truncated copy is refused), the
** members' bounds, meta.json's machine against the one this runtime was built
** for, then graph.json (djson.c) with every count, index and byte range checked
** (slots inside the arena or the params, kernels and slots of steps in range).
** The shared object is written to a private temporary file, loaded and
** unlinked. Runs call the kernels in order with DLTensor arguments viewing the
** arena, the params and the inputs' and outputs' own buffers; timing uses the
** time evaluator (core/runtime/time.c).
*/
#define _GNU_SOURCE
#include "tl_runtime.h"

#include "../core/runtime/runtime.h"
#include "djson.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__aarch64__)
#define RT_ARCH "aarch64"
#elif defined(__arm__)
#define RT_ARCH "arm"
#elif defined(__x86_64__)
#define RT_ARCH "x86_64"
#else
#define RT_ARCH "unknown"
#endif

#define RT_MAX_SLOTS 65536
#define RT_MAX_STEPS 65536
#define RT_MAX_KERNELS 4096
#define RT_MAX_ARGS 256
#define RT_MAX_IO 64

typedef int32_t (*kernel_fn)(void **, int32_t);

typedef struct {
  DLTensor t;
  int64_t shape[16];
  size_t bytes;
  char dtype[12];
  void *own;                   /* an input's or output's buffer */
} rslot;

typedef struct {
  int kernel, nargs;
  void **args;
} rstep;

struct tl_runtime {
  char err[1024];
  char *target;
  void *lib;
  unsigned char *arena, *params;
  size_t arena_bytes, params_bytes;
  rslot *slots;
  int nslots;
  kernel_fn *kernels;
  const char **knames;
  char *knames_mem;
  int nkernels;
  rstep *steps;
  int nsteps;
  int nin, nout;
  char *in_name[RT_MAX_IO];
  int in_slot[RT_MAX_IO], out_slot[RT_MAX_IO];
};

static int fail(tl_runtime *rt, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->err, sizeof rt->err, fmt, ap);
  va_end(ap);
  return -1;
}

static uint64_t rd64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct { const char *name; const unsigned char *data; size_t size; } member;

/* The pack's members (at most 16); -1 with a message. */
static int read_pack(tl_runtime *rt, const char *path, const unsigned char *buf, size_t n,
                     member *m, int *nm) {
  if (n < 28 || memcmp(buf, "TLPACK01", 8) != 0)
    return fail(rt, "'%s' is not a tunelua pack (no TLPACK01 header; export it with lib:export_library)", path);
  if (memcmp(buf + n - 16, "TLPKEND1", 8) != 0 || rd64(buf + n - 8) != n)
    return fail(rt, "'%s' is truncated or damaged: its trailer does not close the file "
                "(%zu bytes here%s)", path, n,
                memcmp(buf + n - 16, "TLPKEND1", 8) == 0 ? ", another size recorded" : "");
  uint32_t count = rd32(buf + 8);
  if (count > 16) return fail(rt, "'%s': %u members (at most 16)", path, count);
  size_t off = 12, end = n - 16;
  for (uint32_t i = 0; i < count; i++) {
    if (off + 4 > end) return fail(rt, "'%s': member %u lies past the end", path, i);
    uint32_t nl = rd32(buf + off);
    if (nl == 0 || nl > 64 || off + 4 + nl + 8 > end) return fail(rt, "'%s': member %u has a bad name", path, i);
    static char names[16][65];
    memcpy(names[i], buf + off + 4, nl);
    names[i][nl] = 0;
    uint64_t sz = rd64(buf + off + 4 + nl);
    off += 4 + nl + 8;
    if (sz > end - off) return fail(rt, "'%s': member '%s' (%llu bytes) lies past the end", path, names[i], (unsigned long long)sz);
    m[i].name = names[i];
    m[i].data = buf + off;
    m[i].size = (size_t)sz;
    off += (size_t)sz;
  }
  if (off != end) return fail(rt, "'%s': %zu stray bytes after the members", path, end - off);
  *nm = (int)count;
  return 0;
}

static const member *find_member(const member *m, int nm, const char *name) {
  for (int i = 0; i < nm; i++)
    if (!strcmp(m[i].name, name)) return &m[i];
  return NULL;
}

static int dtype_of(const char *s, DLDataType *d) {
  static const struct { const char *name; uint8_t code, bits; } types[] = {
      {"float32", kDLFloat, 32}, {"float64", kDLFloat, 64}, {"float16", kDLFloat, 16},
      {"int8", kDLInt, 8},       {"int16", kDLInt, 16},     {"int32", kDLInt, 32},
      {"int64", kDLInt, 64},     {"uint8", kDLUInt, 8},     {"bool", kDLUInt, 1}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (s && !strcmp(s, types[i].name)) {
      d->code = types[i].code, d->bits = types[i].bits, d->lanes = 1;
      return 0;
    }
  return -1;
}

static int int_of(const dj_node *v, double lo, double hi, int64_t *out) {
  if (!v || v->type != DJ_NUM || v->num < lo || v->num > hi || v->num != (double)(int64_t)v->num) return -1;
  *out = (int64_t)v->num;
  return 0;
}

static int load_graph(tl_runtime *rt, const dj_node *g) {
  const char *fmt = dj_str(g, "format"), *dev = dj_str(g, "device");
  if (!fmt || strcmp(fmt, "tunelua-graph")) return fail(rt, "graph.json: not a tunelua graph");
  if (dev && strcmp(dev, "cpu")) return fail(rt, "graph.json: a '%s' network (this runtime runs CPU networks)", dev);
  int64_t v;
  if (int_of(dj_get(g, "arena"), 0, 1e12, &v)) return fail(rt, "graph.json: bad 'arena'");
  rt->arena_bytes = (size_t)v;
  rt->arena = aligned_alloc(64, (rt->arena_bytes + 63) / 64 * 64 + 64);
  if (!rt->arena) return fail(rt, "out of memory for the arena (%zu bytes)", rt->arena_bytes);
  /* kernels */
  const dj_node *ks = dj_get(g, "kernels");
  int nk = dj_len(ks);
  if (nk < 1 || nk > RT_MAX_KERNELS) return fail(rt, "graph.json: bad 'kernels'");
  rt->kernels = calloc((size_t)nk, sizeof *rt->kernels);
  rt->knames = calloc((size_t)nk, sizeof *rt->knames);
  rt->nkernels = nk;
  for (int i = 0; i < nk; i++) {
    const char *name = dj_str(dj_at(ks, i), "name");
    if (!name) return fail(rt, "graph.json: kernel %d has no name", i);
    void *p = dlsym(rt->lib, name);
    if (!p) return fail(rt, "the pack's library has no kernel '%s'", name);
    *(void **)&rt->kernels[i] = p;
    rt->knames[i] = strdup(name);
  }
  /* slots */
  const dj_node *ss = dj_get(g, "slots");
  int ns = dj_len(ss);
  if (ns < 1 || ns > RT_MAX_SLOTS) return fail(rt, "graph.json: bad 'slots'");
  rt->slots = calloc((size_t)ns, sizeof *rt->slots);
  rt->nslots = ns;
  for (int i = 0; i < ns; i++) {
    const dj_node *s = dj_at(ss, i), *sh = dj_get(s, "shape");
    rslot *r = &rt->slots[i];
    int nd = dj_len(sh);
    const char *dt = dj_str(s, "dtype");
    if (nd < 0 || nd > 16 || dtype_of(dt, &r->t.dtype)) return fail(rt, "graph.json: slot %d: bad shape or dtype", i);
    snprintf(r->dtype, sizeof r->dtype, "%s", dt);
    double numel = 1;
    for (int d = 0; d < nd; d++) {
      if (int_of(dj_at(sh, d), 0, 1e12, &r->shape[d])) return fail(rt, "graph.json: slot %d: bad extent", i);
      numel *= (double)r->shape[d];
    }
    double bytes = numel * (r->t.dtype.bits == 1 ? 1 : r->t.dtype.bits / 8);
    if (bytes > 1e12) return fail(rt, "graph.json: slot %d is too large", i);
    r->bytes = (size_t)bytes;
    r->t.ndim = nd;
    r->t.shape = r->shape;
    r->t.device.device_type = kDLCPU;
    int64_t off;
    if (dj_get(s, "view")) {
      if (int_of(dj_get(s, "view"), 0, 1e12, &off) || (size_t)off + r->bytes > rt->arena_bytes)
        return fail(rt, "graph.json: slot %d lies outside the arena", i);
      r->t.data = rt->arena + off;
    } else if (dj_get(s, "param")) {
      if (int_of(dj_get(s, "param"), 0, 1e12, &off) || (size_t)off + r->bytes > rt->params_bytes)
        return fail(rt, "graph.json: slot %d lies outside the params", i);
      r->t.data = rt->params + off;
    } else {
      r->own = aligned_alloc(64, (r->bytes + 63) / 64 * 64 + 64);
      if (!r->own) return fail(rt, "out of memory for slot %d", i);
      memset(r->own, 0, r->bytes);
      r->t.data = r->own;
    }
  }
  /* steps */
  const dj_node *st = dj_get(g, "steps");
  int nst = dj_len(st);
  if (nst < 0 || nst > RT_MAX_STEPS) return fail(rt, "graph.json: bad 'steps'");
  rt->steps = calloc((size_t)(nst ? nst : 1), sizeof *rt->steps);
  rt->nsteps = nst;
  for (int i = 0; i < nst; i++) {
    const dj_node *s = dj_at(st, i), *args = dj_get(s, "args");
    int64_t k;
    int na = dj_len(args);
    if (int_of(dj_get(s, "kernel"), 0, nk - 1, &k) || na < 0 || na > RT_MAX_ARGS)
      return fail(rt, "graph.json: step %d: bad kernel or args", i);
    rt->steps[i].kernel = (int)k;
    rt->steps[i].nargs = na;
    rt->steps[i].args = calloc((size_t)(na ? na : 1), sizeof(void *));
    for (int a = 0; a < na; a++) {
      int64_t sl;
      if (int_of(dj_at(args, a), 0, ns - 1, &sl)) return fail(rt, "graph.json: step %d: argument %d is not a slot", i, a);
      rt->steps[i].args[a] = &rt->slots[sl].t;
    }
  }
  /* inputs, outputs */
  const dj_node *ins = dj_get(g, "inputs"), *outs = dj_get(g, "outputs");
  int ni = dj_len(ins), no = dj_len(outs);
  if (ni < 0 || ni > RT_MAX_IO || no < 1 || no > RT_MAX_IO) return fail(rt, "graph.json: bad inputs or outputs");
  for (int i = 0; i < ni; i++) {
    const dj_node *x = dj_at(ins, i);
    int64_t sl;
    const char *name = dj_str(x, "name");
    if (!name || int_of(dj_get(x, "slot"), 0, ns - 1, &sl)) return fail(rt, "graph.json: input %d is malformed", i);
    rt->in_name[i] = strdup(name);
    rt->in_slot[i] = (int)sl;
  }
  for (int i = 0; i < no; i++) {
    int64_t sl;
    if (int_of(dj_at(outs, i), 0, ns - 1, &sl)) return fail(rt, "graph.json: output %d is not a slot", i);
    rt->out_slot[i] = (int)sl;
  }
  rt->nin = ni, rt->nout = no;
  return 0;
}

int tl_runtime_load(const char *path, tl_runtime **out, char *err, size_t errn) {
  *out = NULL;
  tl_runtime *rt = calloc(1, sizeof *rt);
  unsigned char *buf = NULL;
  int rc = -1;
  if (!rt) {
    if (err && errn) snprintf(err, errn, "out of memory");
    return -1;
  }
  FILE *f = fopen(path, "rb");
  long n = -1;
  if (!f) {
    fail(rt, "cannot open '%s': %s", path, strerror(errno));
    goto done;
  }
  if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)n + 1)) ||
      fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    fail(rt, "cannot read '%s'", path);
    goto done;
  }
  fclose(f);
  member m[16];
  int nm = 0;
  if (read_pack(rt, path, buf, (size_t)n, m, &nm)) goto done;
  const member *meta = find_member(m, nm, "meta.json"), *graph = find_member(m, nm, "graph.json"),
               *params = find_member(m, nm, "params.bin"), *lib = find_member(m, nm, "lib0.so");
  if (!meta || !graph || !params || !lib) {
    fail(rt, "'%s' lacks %s", path, !meta ? "meta.json" : !graph ? "graph.json" : !params ? "params.bin" : "lib0.so");
    goto done;
  }
  dj_doc md;
  char jerr[200];
  if (dj_parse((const char *)meta->data, meta->size, &md, jerr, sizeof jerr)) {
    fail(rt, "'%s': meta.json: %s", path, jerr);
    goto done;
  }
  const char *arch = dj_str(md.root, "arch"), *target = dj_str(md.root, "target");
  rt->target = strdup(target ? target : "");
  if (!arch || strcmp(arch, RT_ARCH)) {
    fail(rt, "'%s' holds code for %s (target '%s'), but this runtime runs on %s: export the "
         "network for this device's target", path, arch ? arch : "an unknown machine",
         target ? target : "?", RT_ARCH);
    dj_free(&md);
    goto done;
  }
  dj_free(&md);
  /* the library: a private temporary file, loaded, then unlinked */
  const char *tmp = getenv("TMPDIR");
  char so[4096];
  snprintf(so, sizeof so, "%s/tunelua-run-XXXXXX.so", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemps(so, 3);
  if (fd < 0 || write(fd, lib->data, lib->size) != (ssize_t)lib->size || close(fd) != 0) {
    if (fd >= 0) unlink(so);
    fail(rt, "cannot write the kernel library to '%s': %s", so, strerror(errno));
    goto done;
  }
  rt->lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  unlink(so);
  if (!rt->lib) {
    const char *e = dlerror();
    fail(rt, "'%s': its kernel library does not load here: %s", path, e ? e : "?");
    goto done;
  }
  rt->params_bytes = params->size;
  rt->params = aligned_alloc(64, (params->size + 63) / 64 * 64 + 64);
  if (!rt->params) {
    fail(rt, "out of memory for the params");
    goto done;
  }
  memcpy(rt->params, params->data, params->size);
  dj_doc gd;
  if (dj_parse((const char *)graph->data, graph->size, &gd, jerr, sizeof jerr)) {
    fail(rt, "'%s': graph.json: %s", path, jerr);
    goto done;
  }
  rc = load_graph(rt, gd.root);
  dj_free(&gd);
done:
  free(buf);
  if (rc) {
    if (err && errn) snprintf(err, errn, "%s", rt->err);
    tl_runtime_free(rt);
    return -1;
  }
  *out = rt;
  return 0;
}

void tl_runtime_free(tl_runtime *rt) {
  if (!rt) return;
  for (int i = 0; i < rt->nslots; i++) free(rt->slots[i].own);
  for (int i = 0; i < rt->nsteps; i++) free(rt->steps[i].args);
  for (int i = 0; i < rt->nkernels; i++) free((void *)rt->knames[i]);
  for (int i = 0; i < rt->nin; i++) free(rt->in_name[i]);
  free(rt->slots), free(rt->steps), free(rt->kernels), free(rt->knames);
  free(rt->arena), free(rt->params), free(rt->target);
  if (rt->lib) dlclose(rt->lib);
  free(rt);
}

const char *tl_runtime_error(const tl_runtime *rt) { return rt ? rt->err : "no runtime"; }
const char *tl_runtime_target(const tl_runtime *rt) { return rt && rt->target ? rt->target : ""; }
int tl_runtime_num_inputs(const tl_runtime *rt) { return rt ? rt->nin : 0; }
int tl_runtime_num_outputs(const tl_runtime *rt) { return rt ? rt->nout : 0; }
const char *tl_runtime_input_name(const tl_runtime *rt, int i) {
  return rt && i >= 0 && i < rt->nin ? rt->in_name[i] : NULL;
}

static int info(const rslot *s, int *ndim, const int64_t **shape, const char **dtype, size_t *bytes) {
  if (ndim) *ndim = s->t.ndim;
  if (shape) *shape = s->shape;
  if (dtype) *dtype = s->dtype;
  if (bytes) *bytes = s->bytes;
  return 0;
}

int tl_runtime_input_info(const tl_runtime *rt, int i, int *ndim, const int64_t **shape,
                          const char **dtype, size_t *bytes) {
  if (!rt || i < 0 || i >= rt->nin) return -1;
  return info(&rt->slots[rt->in_slot[i]], ndim, shape, dtype, bytes);
}

int tl_runtime_output_info(const tl_runtime *rt, int i, int *ndim, const int64_t **shape,
                           const char **dtype, size_t *bytes) {
  if (!rt || i < 0 || i >= rt->nout) return -1;
  return info(&rt->slots[rt->out_slot[i]], ndim, shape, dtype, bytes);
}

int tl_runtime_set_input(tl_runtime *rt, const char *name, const void *data, size_t bytes) {
  for (int i = 0; i < rt->nin; i++) {
    if (strcmp(rt->in_name[i], name)) continue;
    rslot *s = &rt->slots[rt->in_slot[i]];
    if (bytes != s->bytes)
      return fail(rt, "set_input '%s': %zu bytes given, the input holds %zu", name, bytes, s->bytes);
    memcpy(s->t.data, data, bytes);
    return 0;
  }
  return fail(rt, "set_input: the network has no input '%s'", name);
}

int tl_runtime_get_output(tl_runtime *rt, int i, void *data, size_t bytes) {
  if (i < 0 || i >= rt->nout) return fail(rt, "get_output: no output %d (the network has %d)", i, rt->nout);
  rslot *s = &rt->slots[rt->out_slot[i]];
  if (bytes != s->bytes) return fail(rt, "get_output %d: %zu bytes asked, the output holds %zu", i, bytes, s->bytes);
  memcpy(data, s->t.data, bytes);
  return 0;
}

static int run_steps(tl_runtime *rt) {
  for (int i = 0; i < rt->nsteps; i++) {
    rstep *s = &rt->steps[i];
    int32_t rc = rt->kernels[s->kernel](s->args, s->nargs);
    if (rc) {
      char en[300];
      snprintf(en, sizeof en, "%s_error", rt->knames[s->kernel]);
      const char *(*ef)(void);
      *(void **)&ef = dlsym(rt->lib, en);
      return fail(rt, "run: step %d (%s) failed: %s", i, rt->knames[s->kernel],
                  ef && ef() ? ef() : "no message");
    }
  }
  return 0;
}

int tl_runtime_run(tl_runtime *rt) { return run_steps(rt); }

static int run_work(void *arg, int i, int n) {
  (void)i, (void)n;
  return run_steps(arg);
}

int tl_runtime_time(tl_runtime *rt, int number, int repeat, double min_repeat_ms, double *secs) {
  tl_time_work w = {run_work, NULL, rt, TL_TIME_WARMUP_S, 0};
  if (repeat < 1) return fail(rt, "time: repeat must be >= 1");
  return tl_time_eval(&w, number, repeat, min_repeat_ms, secs) ? -1 : 0;
}
