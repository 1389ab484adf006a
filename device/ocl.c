/*
** ocl.c -- OpenCL measurements on the device server (ocl.h). Plain C over the OpenCL API,
** which is not linked: a dynamically linked tunelua-rpc opens the device's driver library
** (libOpenCL.so.1, the ICD loader; on Android the vendor's libOpenCL.so) with dlopen in the
** measurement child, so one binary serves devices with and without a driver and the server
** process never initializes OpenCL (drivers are not fork-safe). A static build (-DTL_DEVICE_STATIC)
** cannot dlopen a glibc-linked driver and answers every OpenCL trial with that reason.
**
** The trial follows the contract of core/measure/measure_opencl.c (docs/measure_opencl.md):
** the manifest checked (the same keys and bounds as the engine's reader), the module's
** work-groups checked against the device (INSTANTIATION_ERROR), built by the driver
** (COMPILE_DEVICE with the build log), its arguments filled with seeded random values
** (floats in [0, 1), bool {0, 1}, integers [0, 10)) and launched once (RUNTIME_DEVICE); with a
** reference module, both run on the same inputs and every argument is compared (rtol, atol
** 1e-5: WRONG_ANSWER); then timed by the time evaluator (core/runtime/time.c) on profiling
** events. SIGALRM bounds the compile (build_s), the first launch (build_s + run_s) and the rest
** (run_s); the phase bytes tell the parent which one ran out.
*/
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include "ocl.h"

#include "../core/runtime/runtime.h"
#include "darray.h"
#include "djson.h"

#include <CL/cl.h>
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

enum { E_OK = 0, E_INST = 1, E_COMPILE_DEVICE = 3, E_RUNTIME = 4, E_WRONG = 5, E_UNKNOWN = 8 };

#define MAX_SOURCE ((size_t)16 << 20)
#define MAX_TEXT ((size_t)1 << 20)
#define MAX_KERNELS 64
#define MAX_ARGS 64
#define MAX_TEMPS 64
#define MAX_SLOTS 192
#define MAX_NDIM 8
#define MAX_NAME 128
#define MAX_ARG_BYTES ((double)((uint64_t)4 << 30))
#define MAX_BLOCK 1048576
#define MAX_GRID 2147483647.0
#define LOG_MAX 6000

const char *dev_ocl_support(void) {
#ifdef TL_DEVICE_STATIC
  return "none";
#else
  return "dlopen";
#endif
}

/* ---- the child's answer --------------------------------------------------------------------- */

static int out_fd;

static void put(const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(out_fd, c, n);
    if (w <= 0) _exit(3);
    c += w, n -= (size_t)w;
  }
}

static void phase(char c) { put(&c, 1); }

__attribute__((noreturn, format(printf, 2, 3))) static void answer(int eno, const char *fmt, ...) {
  char msg[8192] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
  }
  int32_t head[2] = {eno, 0};
  put(head, sizeof head);
  put(msg, strlen(msg));
  _exit(0);
}

/* ---- the manifest (the engine's format: core/runtime/opencl.c, docs/measure_opencl.md) ------ */

typedef struct {
  char name[MAX_NAME + 1];
  double grid[3], block[3], local_bytes;
  int nslots, slots[MAX_SLOTS];
} kinfo;

typedef struct {
  char *src;
  char name[MAX_NAME + 1];
  int nargs, ntemps, nk, fp16, fp64;
  DLDataType dtype[MAX_ARGS];
  int ndim[MAX_ARGS];
  int64_t shape[MAX_ARGS][MAX_NDIM];
  size_t bytes[MAX_ARGS];
  double temp_bytes[MAX_TEMPS];
  kinfo k[MAX_KERNELS];
} module;

static int keys_ok(const dj_node *o, const char *const *allowed, char *why, size_t wn, const char *where) {
  for (const dj_node *c = o->child; c; c = c->next) {
    int ok = 0;
    for (int i = 0; allowed[i] && !ok; i++) ok = c->key && !strcmp(c->key, allowed[i]);
    if (!ok) {
      snprintf(why, wn, "%s: unknown key '%.64s'", where, c->key ? c->key : "");
      return 0;
    }
  }
  return 1;
}

static int int_ok(const dj_node *v, double lo, double hi, double *out, char *why, size_t wn,
                  const char *where) {
  if (!v || v->type != DJ_NUM || v->num != floor(v->num)) {
    snprintf(why, wn, "%s: expected an integer in [%.0f, %.0f]", where, lo, hi);
    return 0;
  }
  if (v->num < lo || v->num > hi) {
    snprintf(why, wn, "%s: %.0f is out of bounds [%.0f, %.0f]", where, v->num, lo, hi);
    return 0;
  }
  *out = v->num;
  return 1;
}

static int list_ok(const dj_node *v, int lo, int hi, char *why, size_t wn, const char *where) {
  int n = v && v->type == DJ_ARR ? dj_len(v) : -1;
  if (n < 0) snprintf(why, wn, "%s: expected a list", where);
  else if (n < lo || n > hi) snprintf(why, wn, "%s: %d entries, expected %d to %d", where, n, lo, hi);
  return n >= lo && n <= hi;
}

/* Parse and check a manifest for src into m; 0, or -1 with the reason. */
static int parse_manifest(char *src, const char *text, module *m, char *why, size_t wn) {
  static const char *const top[] = {"format", "version", "name", "args", "temps", "kernels",
                                    "fp16", "fp64", NULL};
  static const char *const ak[] = {"dtype", "shape", NULL};
  static const char *const kk[] = {"name", "grid", "block", "local_bytes", "slots", NULL};
  memset(m, 0, sizeof *m);
  m->src = src;
  size_t sl = strlen(src), tl = strlen(text);
  if (!sl || sl > MAX_SOURCE) {
    snprintf(why, wn, "the OpenCL source has %zu bytes (expected 1 to %zu)", sl, MAX_SOURCE);
    return -1;
  }
  if (!tl || tl > MAX_TEXT) {
    snprintf(why, wn, "the manifest has %zu bytes (expected 1 to %zu)", tl, MAX_TEXT);
    return -1;
  }
  dj_doc d;
  char err[200], where[200];
  if (dj_parse(text, tl, &d, err, sizeof err)) {
    snprintf(why, wn, "not JSON: %s", err);
    return -1;
  }
  int ok = 0;
  const dj_node *r = d.root, *v;
  double x;
  if (!r || r->type != DJ_OBJ) {
    snprintf(why, wn, "expected a JSON object");
    goto done;
  }
  if (!keys_ok(r, top, why, wn, "manifest")) goto done;
  const char *fmt = dj_str(r, "format");
  if (!fmt || strcmp(fmt, "tunelua-opencl-module")) {
    snprintf(why, wn, "format: expected \"tunelua-opencl-module\"");
    goto done;
  }
  if (!int_ok(dj_get(r, "version"), 1, 1, &x, why, wn, "version")) goto done;
  if (!tl_c_ident(dj_str(r, "name"), MAX_NAME)) {
    snprintf(why, wn, "name: expected an identifier of at most %d characters", MAX_NAME);
    goto done;
  }
  snprintf(m->name, sizeof m->name, "%s", dj_str(r, "name"));
  for (int f = 0; f < 2; f++) {
    v = dj_get(r, f ? "fp64" : "fp16");
    if (v && v->type != DJ_TRUE && v->type != DJ_FALSE) {
      snprintf(why, wn, "%s: expected true or false", f ? "fp64" : "fp16");
      goto done;
    }
    *(f ? &m->fp64 : &m->fp16) = v && v->type == DJ_TRUE;
  }
  if (strstr(src, "cl_khr_fp16")) m->fp16 = 1;
  if (strstr(src, "cl_khr_fp64")) m->fp64 = 1;
  const dj_node *args = dj_get(r, "args");
  if (!list_ok(args, 1, MAX_ARGS, why, wn, "args")) goto done;
  m->nargs = dj_len(args);
  for (int i = 0; i < m->nargs; i++) {
    const dj_node *a = dj_at(args, i);
    snprintf(where, sizeof where, "args[%d]", i);
    if (!a || a->type != DJ_OBJ) {
      snprintf(why, wn, "%s: expected an object {\"dtype\", \"shape\"}", where);
      goto done;
    }
    if (!keys_ok(a, ak, why, wn, where)) goto done;
    if (dev_dtype_parse(dj_str(a, "dtype"), &m->dtype[i])) {
      snprintf(why, wn, "%s.dtype: expected a dtype name such as \"float32\"", where);
      goto done;
    }
    const dj_node *sh = dj_get(a, "shape");
    snprintf(where, sizeof where, "args[%d].shape", i);
    if (!list_ok(sh, 0, MAX_NDIM, why, wn, where)) goto done;
    m->ndim[i] = dj_len(sh);
    double bytes = dev_dtype_bytes(m->dtype[i]);
    for (int k = 0; k < m->ndim[i]; k++) {
      snprintf(where, sizeof where, "args[%d].shape[%d]", i, k);
      if (!int_ok(dj_at(sh, k), 0, 1099511627776.0, &x, why, wn, where)) goto done;
      m->shape[i][k] = (int64_t)x;
      bytes *= x;
    }
    if (bytes > MAX_ARG_BYTES) {
      snprintf(why, wn, "args[%d]: %.0f bytes (at most %.0f)", i, bytes, MAX_ARG_BYTES);
      goto done;
    }
    m->bytes[i] = (size_t)bytes;
  }
  const dj_node *temps = dj_get(r, "temps");
  if (temps) {
    if (!list_ok(temps, 0, MAX_TEMPS, why, wn, "temps")) goto done;
    m->ntemps = dj_len(temps);
    for (int t = 0; t < m->ntemps; t++) {
      snprintf(where, sizeof where, "temps[%d]", t);
      if (!int_ok(dj_at(temps, t), 0, MAX_ARG_BYTES, &m->temp_bytes[t], why, wn, where)) goto done;
    }
  }
  const dj_node *ks = dj_get(r, "kernels");
  if (!list_ok(ks, 1, MAX_KERNELS, why, wn, "kernels")) goto done;
  m->nk = dj_len(ks);
  for (int k = 0; k < m->nk; k++) {
    const dj_node *ko = dj_at(ks, k);
    kinfo *ki = &m->k[k];
    snprintf(where, sizeof where, "kernels[%d]", k);
    if (!ko || ko->type != DJ_OBJ) {
      snprintf(why, wn, "%s: expected an object", where);
      goto done;
    }
    if (!keys_ok(ko, kk, why, wn, where)) goto done;
    const char *kn = dj_str(ko, "name");
    if (!tl_c_ident(kn, MAX_NAME)) {
      snprintf(why, wn, "%s.name: expected an identifier of at most %d characters", where, MAX_NAME);
      goto done;
    }
    for (int j = 0; j < k; j++)
      if (!strcmp(m->k[j].name, kn)) {
        snprintf(why, wn, "%s.name: kernel '%s' is listed twice", where, kn);
        goto done;
      }
    char pat[MAX_NAME + 8];
    snprintf(pat, sizeof pat, "void %s(", kn);
    if (!strstr(src, pat)) {
      snprintf(why, wn, "%s.name: the source defines no kernel '%s'", where, kn);
      goto done;
    }
    snprintf(ki->name, sizeof ki->name, "%s", kn);
    for (int g = 0; g < 2; g++) {
      const char *key = g ? "block" : "grid";
      char w2[240];
      snprintf(w2, sizeof w2, "%s.%s", where, key);
      v = dj_get(ko, key);
      if (!list_ok(v, 3, 3, why, wn, w2)) goto done;
      for (int e = 0; e < 3; e++) {
        char w3[260];
        snprintf(w3, sizeof w3, "%s[%d]", w2, e);
        if (!int_ok(dj_at(v, e), 1, g ? MAX_BLOCK : MAX_GRID, g ? &ki->block[e] : &ki->grid[e],
                    why, wn, w3))
          goto done;
      }
    }
    if (ki->grid[0] * ki->grid[1] * ki->grid[2] * ki->block[0] * ki->block[1] * ki->block[2] > 1e15) {
      snprintf(why, wn, "%s: the launch has more than 1e15 work-items", where);
      goto done;
    }
    v = dj_get(ko, "local_bytes");
    snprintf(where, sizeof where, "kernels[%d].local_bytes", k);
    if (v && !int_ok(v, 0, 2147483648.0, &ki->local_bytes, why, wn, where)) goto done;
    const dj_node *sl2 = dj_get(ko, "slots");
    snprintf(where, sizeof where, "kernels[%d].slots", k);
    if (!list_ok(sl2, 0, MAX_SLOTS, why, wn, where)) goto done;
    ki->nslots = dj_len(sl2);
    for (int s = 0; s < ki->nslots; s++) {
      snprintf(where, sizeof where, "kernels[%d].slots[%d]", k, s);
      if (!int_ok(dj_at(sl2, s), 0, m->nargs + m->ntemps - 1, &x, why, wn, where)) goto done;
      ki->slots[s] = (int)x;
    }
  }
  ok = 1;
done:
  dj_free(&d);
  return ok ? 0 : -1;
}

/* ---- the driver, loaded at run time ---------------------------------------------------------- */

#define CL_FUNCS(X)                                                                              \
  X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext) \
  X(clCreateCommandQueue) X(clCreateBuffer) X(clEnqueueWriteBuffer) X(clEnqueueReadBuffer)        \
  X(clCreateProgramWithSource) X(clBuildProgram) X(clGetProgramBuildInfo) X(clCreateKernel)        \
  X(clGetKernelWorkGroupInfo) X(clSetKernelArg) X(clEnqueueNDRangeKernel) X(clFinish)              \
  X(clGetEventProfilingInfo) X(clReleaseEvent)

static struct {
#define X(f) __typeof__(f) *f;
  CL_FUNCS(X)
#undef X
} cl;

static const char *cl_errname(cl_int e) {
  switch (e) {
#define E(x) case x: return #x;
    E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_BUILD_PROGRAM_FAILURE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT)
    E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PLATFORM)
    E(CL_INVALID_OPERATION) E(CL_INVALID_BUFFER_SIZE) case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
#undef E
  default: return "CL_ERROR";
  }
}

/* Open the driver; 0, or -1 with the reason (which names what was tried). */
static int load_driver(char *why, size_t wn) {
#ifdef TL_DEVICE_STATIC
  snprintf(why, wn, "this tunelua-rpc is linked statically and cannot load an OpenCL driver: run "
           "tunelua-rpc-cl (the dynamically linked build, build/aarch64/tunelua-rpc-cl) on a device "
           "with an OpenCL driver");
  return -1;
#else
  static const char *const libs[] = {"libOpenCL.so.1", "libOpenCL.so", "/vendor/lib64/libOpenCL.so",
                                     "/system/vendor/lib64/libOpenCL.so", "/system/lib64/libOpenCL.so",
                                     "/vendor/lib/libOpenCL.so", NULL};
  const char *env = getenv("TUNELUA_OPENCL_LIB");
  void *h = NULL;
  const char *lib = NULL;
  char first[300] = "";
  if (env && *env) {
    h = dlopen(lib = env, RTLD_NOW | RTLD_LOCAL);
    if (!h) snprintf(first, sizeof first, "%s", dlerror());
  } else {
    for (int i = 0; libs[i] && !h; i++) {
      h = dlopen(lib = libs[i], RTLD_NOW | RTLD_LOCAL);
      if (!h && !i) snprintf(first, sizeof first, "%s", dlerror());
    }
  }
  if (!h) {
    if (env && *env)
      snprintf(why, wn, "no OpenCL driver on this device: cannot load %s ($TUNELUA_OPENCL_LIB): %s",
               env, first);
    else
      snprintf(why, wn, "no OpenCL driver on this device: cannot load libOpenCL.so.1 (%s; also "
               "tried libOpenCL.so and the Android vendor paths; $TUNELUA_OPENCL_LIB names another)",
               first);
    return -1;
  }
#define X(f)                                                                                  \
  if (!(*(void **)&cl.f = dlsym(h, #f))) {                                                     \
    snprintf(why, wn, "the OpenCL library '%s' has no %s", lib, #f);                           \
    return -1;                                                                                 \
  }
  CL_FUNCS(X)
#undef X
  return 0;
#endif
}

typedef struct {
  cl_device_id id;
  cl_platform_id plat;
  char name[256];
  cl_device_type type;
  size_t max_wg, max_items[3];
  cl_ulong local_mem;
  int fp16, fp64;
} device;

/* Logical device dev, numbered as the engine does: 0 is $TUNELUA_OPENCL_DEVICE's index, else the
** first GPU, else the first device; the others follow in platform order. */
static int find_device(int dev, device *out, char *why, size_t wn) {
  cl_uint np = 0;
  cl_int e = cl.clGetPlatformIDs(0, NULL, &np);
  if (e != CL_SUCCESS || !np) {
    snprintf(why, wn, "no OpenCL device on this device: the driver lists no platform (%s; is an "
             "ICD registered under /etc/OpenCL/vendors?)", e ? cl_errname(e) : "0 platforms");
    return -1;
  }
  cl_platform_id ps[16];
  if (np > 16) np = 16;
  cl.clGetPlatformIDs(np, ps, NULL);
  device all[64];
  int n = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    cl_device_id ds[64];
    if (cl.clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 64, ds, &nd) != CL_SUCCESS) continue;
    for (cl_uint i = 0; i < nd && i < 64 && n < 64; i++) {
      device *d = &all[n++];
      memset(d, 0, sizeof *d);
      d->id = ds[i], d->plat = ps[p];
      cl.clGetDeviceInfo(d->id, CL_DEVICE_NAME, sizeof d->name - 1, d->name, NULL);
      cl.clGetDeviceInfo(d->id, CL_DEVICE_TYPE, sizeof d->type, &d->type, NULL);
      cl.clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof d->max_wg, &d->max_wg, NULL);
      size_t items[8] = {0};
      cl.clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL);
      for (int k = 0; k < 3; k++) d->max_items[k] = items[k] ? items[k] : 1;
      cl.clGetDeviceInfo(d->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof d->local_mem, &d->local_mem, NULL);
      size_t en = 0;
      cl.clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, 0, NULL, &en);
      char *ext = calloc(en + 1, 1);
      if (ext && en) cl.clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, en, ext, NULL);
      d->fp16 = ext && strstr(ext, "cl_khr_fp16") != NULL;
      d->fp64 = ext && strstr(ext, "cl_khr_fp64") != NULL;
      free(ext);
    }
  }
  if (!n) {
    snprintf(why, wn, "no OpenCL device on this device (%u platform%s, no device)", np, np == 1 ? "" : "s");
    return -1;
  }
  int def = -1;
  const char *env = getenv("TUNELUA_OPENCL_DEVICE");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (!*end && v >= 0 && v < n) def = (int)v;
  }
  for (int i = 0; i < n && def < 0; i++)
    if (all[i].type & CL_DEVICE_TYPE_GPU) def = i;
  if (def < 0) def = 0;
  if (dev < 0 || dev >= n) {
    snprintf(why, wn, "no OpenCL device %d (there %s %d: 0..%d)", dev, n == 1 ? "is" : "are", n, n - 1);
    return -1;
  }
  int pick = def;
  if (dev > 0) {   /* the dev-th of the others, in platform order */
    for (int i = 0, k = 0; i < n; i++)
      if (i != def && ++k == dev) pick = i;
  }
  *out = all[pick];
  return 0;
}

/* A launch the device cannot run (the engine's check_wg): 0, or -1 with the limit named. */
static int check_wg(const device *d, const kinfo *ki, size_t kwg, cl_ulong klocal, char *why, size_t wn) {
  double wg = ki->block[0] * ki->block[1] * ki->block[2];
  for (int k = 0; k < 3; k++)
    if (ki->block[k] > (double)d->max_items[k]) {
      snprintf(why, wn, "kernel '%s': invalid work-group size: %.0f work-items in dimension %d "
               "exceed the device's limit %zu (%s)", ki->name, ki->block[k], k, d->max_items[k], d->name);
      return -1;
    }
  if (wg > (double)d->max_wg) {
    snprintf(why, wn, "kernel '%s': invalid work-group size %.0f (%.0fx%.0fx%.0f) exceeds the "
             "device's max work-group size %zu (%s)", ki->name, wg, ki->block[0], ki->block[1],
             ki->block[2], d->max_wg, d->name);
    return -1;
  }
  if (kwg && wg > (double)kwg) {
    snprintf(why, wn, "kernel '%s': invalid work-group size %.0f exceeds the compiled kernel's "
             "CL_KERNEL_WORK_GROUP_SIZE %zu (%s)", ki->name, wg, kwg, d->name);
    return -1;
  }
  double lm = (double)klocal > ki->local_bytes ? (double)klocal : ki->local_bytes;
  if (lm > (double)d->local_mem) {
    snprintf(why, wn, "kernel '%s' uses %.0f bytes of local memory, more than the device's %llu (%s)",
             ki->name, lm, (unsigned long long)d->local_mem, d->name);
    return -1;
  }
  return 0;
}

typedef struct {
  module m;
  cl_kernel k[MAX_KERNELS];
  cl_mem args[MAX_ARGS], temps[MAX_TEMPS];
  void *host[MAX_ARGS];
} loaded;

typedef struct {
  const device *d;
  cl_context ctx;
  cl_command_queue q;
} clenv;

static int read_text(const char *path, const char *what, char **out, char *why, size_t wn) {
  FILE *f = path ? fopen(path, "rb") : NULL;
  *out = NULL;
  if (!f) {
    snprintf(why, wn, "cannot read the %s '%s' (upload it first)", what, path ? path : "");
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap + 1);
  size_t r;
  while (b && (r = fread(b + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap && n <= MAX_SOURCE) b = realloc(b, (cap *= 2) + 1);
  }
  fclose(f);
  if (!b) _exit(3);
  b[n] = 0;
  if (strlen(b) != n || n > MAX_SOURCE) {
    free(b);
    snprintf(why, wn, "the %s is not a text file of at most 16 MiB", what);
    return -1;
  }
  *out = b;
  return 0;
}

/* Read, check and build one module; its arguments allocated and filled (seed 1000 + i). The
** answer is sent (and the child ends) on any failure. */
static void load_module(const clenv *env, const char *sp, const char *mp, const char *what, loaded *L,
                        double *compile_s) {
  char why[LOG_MAX + 600];
  char *src = NULL, *man = NULL;
  int ref = what != NULL;
  if (read_text(sp, "OpenCL source", &src, why, sizeof why) ||
      read_text(mp, "manifest", &man, why, sizeof why))
    answer(ref ? E_WRONG : E_COMPILE_DEVICE, "%s%s", ref ? "check_correctness: the reference: " : "", why);
  if (parse_manifest(src, man, &L->m, why, sizeof why))
    answer(ref ? E_WRONG : E_INST, "%sopencl manifest: %s", ref ? "check_correctness: the reference: " : "", why);
  free(man);
  const device *d = env->d;
  module *m = &L->m;
  if ((m->fp16 && !d->fp16) || (m->fp64 && !d->fp64))
    answer(E_COMPILE_DEVICE, "'%s' uses float%d but device '%s' lacks cl_khr_fp%d", m->name,
           m->fp16 && !d->fp16 ? 16 : 64, d->name, m->fp16 && !d->fp16 ? 16 : 64);
  for (int i = 0; i < m->nk; i++)
    if (check_wg(d, &m->k[i], 0, 0, why, sizeof why)) answer(E_INST, "%s", why);
  double t0 = tl_now();
  cl_int e;
  size_t len = strlen(src);
  const char *s = src;
  cl_program prog = cl.clCreateProgramWithSource(env->ctx, 1, &s, &len, &e);
  if (!prog) answer(E_COMPILE_DEVICE, "cannot create a program on '%s': %s", d->name, cl_errname(e));
  e = cl.clBuildProgram(prog, 1, &d->id, "", NULL, NULL);
  if (e != CL_SUCCESS) {
    char log[LOG_MAX + 1] = "";
    size_t n = 0;
    cl.clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, &n);
    answer(ref ? E_WRONG : E_COMPILE_DEVICE, "%sbuild failed on '%s' (%s):\n%s",
           ref ? "check_correctness: the reference does not build: " : "", d->name, cl_errname(e), log);
  }
  if (compile_s) *compile_s = tl_now() - t0;
  for (int i = 0; i < m->nk; i++) {
    L->k[i] = cl.clCreateKernel(prog, m->k[i].name, &e);
    if (!L->k[i]) answer(E_COMPILE_DEVICE, "kernel '%s': %s", m->k[i].name, cl_errname(e));
    size_t kwg = 0;
    cl_ulong kl = 0;
    cl.clGetKernelWorkGroupInfo(L->k[i], d->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL);
    cl.clGetKernelWorkGroupInfo(L->k[i], d->id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof kl, &kl, NULL);
    if (check_wg(d, &m->k[i], kwg, kl, why, sizeof why)) answer(E_INST, "%s", why);
  }
  for (int t = 0; t < m->ntemps; t++) {
    size_t nb = m->temp_bytes[t] > 0 ? (size_t)m->temp_bytes[t] : 4;
    L->temps[t] = cl.clCreateBuffer(env->ctx, CL_MEM_READ_WRITE, nb, NULL, &e);
    if (!L->temps[t]) answer(E_RUNTIME, "a temporary of %zu bytes on '%s': %s", nb, d->name, cl_errname(e));
  }
}

/* The arguments of module L: host copies random (seed 1000 + i), device buffers written. */
static void make_args(const clenv *env, loaded *L) {
  module *m = &L->m;
  for (int i = 0; i < m->nargs; i++) {
    size_t nb = m->bytes[i] ? m->bytes[i] : 1;
    cl_int e;
    L->host[i] = calloc(1, nb);
    if (!L->host[i]) answer(E_RUNTIME, "out of host memory for argument %d (%zu bytes)", i + 1, nb);
    dev_random_fill(L->host[i], m->bytes[i], m->dtype[i], 1000 + (uint64_t)i);
    L->args[i] = cl.clCreateBuffer(env->ctx, CL_MEM_READ_WRITE, nb, NULL, &e);
    if (!L->args[i]) answer(E_RUNTIME, "argument %d: %zu bytes on '%s': %s", i + 1, nb, env->d->name, cl_errname(e));
    e = cl.clEnqueueWriteBuffer(env->q, L->args[i], CL_TRUE, 0, nb, L->host[i], 0, NULL, NULL);
    if (e != CL_SUCCESS) answer(E_RUNTIME, "writing argument %d: %s", i + 1, cl_errname(e));
  }
  for (int k = 0; k < m->nk; k++)
    for (int s = 0; s < m->k[k].nslots; s++) {
      int slot = m->k[k].slots[s];
      cl_mem mem = slot < m->nargs ? L->args[slot] : L->temps[slot - m->nargs];
      cl_int e = cl.clSetKernelArg(L->k[k], (cl_uint)s, sizeof mem, &mem);
      if (e != CL_SUCCESS) answer(E_RUNTIME, "kernel '%s' argument %d: %s", m->k[k].name, s, cl_errname(e));
    }
}

/* Enqueue every kernel once (events of the first and the last when asked). */
static cl_int launch(const clenv *env, loaded *L, cl_event *first, cl_event *last, char *why, size_t wn) {
  module *m = &L->m;
  for (int i = 0; i < m->nk; i++) {
    const kinfo *ki = &m->k[i];
    size_t gs[3], ls[3];
    for (int k = 0; k < 3; k++) ls[k] = (size_t)ki->block[k], gs[k] = (size_t)(ki->grid[k] * ki->block[k]);
    int want_first = first && i == 0, want_last = last && i == m->nk - 1;
    cl_event ev = NULL;
    cl_int e = cl.clEnqueueNDRangeKernel(env->q, L->k[i], 3, NULL, gs, ls, 0, NULL,
                                         want_first || want_last ? &ev : NULL);
    if (e != CL_SUCCESS) {
      snprintf(why, wn, "launch of kernel '%s' (grid %.0fx%.0fx%.0f, block %.0fx%.0fx%.0f): %s",
               ki->name, ki->grid[0], ki->grid[1], ki->grid[2], ki->block[0], ki->block[1],
               ki->block[2], cl_errname(e));
      return e;
    }
    if (want_first) *first = ev;
    if (want_last) *last = ev;
  }
  return CL_SUCCESS;
}

static void call_once(const clenv *env, loaded *L, const char *what) {
  char why[600];
  cl_int e = launch(env, L, NULL, NULL, why, sizeof why);
  if (e == CL_SUCCESS && (e = cl.clFinish(env->q)) != CL_SUCCESS)
    snprintf(why, sizeof why, "waiting for the kernels: %s", cl_errname(e));
  if (e != CL_SUCCESS) answer(what ? E_WRONG : E_RUNTIME, "%s%s", what ? what : "", why);
}

static void read_back(const clenv *env, loaded *L) {
  for (int i = 0; i < L->m.nargs; i++) {
    cl_int e = cl.clEnqueueReadBuffer(env->q, L->args[i], CL_TRUE, 0, L->m.bytes[i] ? L->m.bytes[i] : 1,
                                      L->host[i], 0, NULL, NULL);
    if (e != CL_SUCCESS) answer(E_RUNTIME, "reading argument %d back: %s", i + 1, cl_errname(e));
  }
}

/* The time evaluator's callbacks: launches enqueued, the queue waited for, the device's time
** from the first kernel's start to the last kernel's end (profiling events). */
typedef struct {
  const clenv *env;
  loaded *L;
  int warm;
  cl_event ev0, ev1;
  char why[600];
} twork;

static int t_run(void *arg, int i, int n) {
  twork *w = arg;
  w->warm = n == 0;
  return launch(w->env, w->L, !w->warm && i == 0 ? &w->ev0 : NULL,
                !w->warm && i == n - 1 ? &w->ev1 : NULL, w->why, sizeof w->why) != CL_SUCCESS;
}

static int t_sync(void *arg, int rc, double t0, double *secs) {
  twork *w = arg;
  cl_int e = cl.clFinish(w->env->q);
  double wall = tl_now() - t0;
  if (!rc && e != CL_SUCCESS) {
    snprintf(w->why, sizeof w->why, "%s: %s", w->warm ? "warm-up" : "timing", cl_errname(e));
    rc = 1;
  }
  *secs = wall;
  if (!rc && !w->warm && w->ev0 && w->ev1) {
    cl_ulong start = 0, end = 0;
    e = cl.clGetEventProfilingInfo(w->ev0, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
    if (e == CL_SUCCESS)
      e = cl.clGetEventProfilingInfo(w->ev1, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
    if (e != CL_SUCCESS) {
      snprintf(w->why, sizeof w->why, "profiling events: %s", cl_errname(e));
      rc = 1;
    }
    *secs = end > start ? (double)(end - start) * 1e-9 : 0;
  }
  if (w->ev0) cl.clReleaseEvent(w->ev0);
  if (w->ev1 && w->ev1 != w->ev0) cl.clReleaseEvent(w->ev1);
  w->ev0 = w->ev1 = NULL;
  return rc;
}

void dev_ocl_child(const dev_ocl_job *j, int fd) {
  out_fd = fd;
  char why[1024];
  static loaded L, R;
  phase('b');
  tl_alarm_in(j->build_s);
  if (load_driver(why, sizeof why)) answer(E_COMPILE_DEVICE, "%s", why);
  device d;
  if (find_device(j->dev, &d, why, sizeof why)) answer(E_COMPILE_DEVICE, "%s", why);
  clenv env = {&d, NULL, NULL};
  cl_int e;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d.plat, 0};
  env.ctx = cl.clCreateContext(props, 1, &d.id, NULL, NULL, &e);
  if (!env.ctx) answer(E_RUNTIME, "cannot create a context on '%s': %s", d.name, cl_errname(e));
  env.q = cl.clCreateCommandQueue(env.ctx, d.id, CL_QUEUE_PROFILING_ENABLE, &e);
  if (!env.q) answer(E_RUNTIME, "cannot create a queue on '%s': %s", d.name, cl_errname(e));
  double cs = 0;
  load_module(&env, j->src_path, j->man_path, NULL, &L, &cs);
  int ref = j->ref_src_path != NULL;
  if (ref) load_module(&env, j->ref_src_path, j->ref_man_path, "reference", &R, NULL);
  phase('c');
  put(&cs, sizeof cs);
  tl_alarm_in(0);
  phase('r');
  tl_alarm_in(j->build_s + j->run_s);   /* some drivers generate code at the first launch */
  make_args(&env, &L);
  call_once(&env, &L, NULL);
  tl_alarm_in(j->run_s);
  if (ref) {
    module *a = &L.m, *b = &R.m;
    int same = a->nargs == b->nargs;
    for (int i = 0; same && i < a->nargs; i++)
      same = a->bytes[i] == b->bytes[i] && a->dtype[i].code == b->dtype[i].code &&
             a->dtype[i].bits == b->dtype[i].bits;
    if (!same) answer(E_WRONG, "check_correctness: the reference has other arguments than the config");
    call_once(&env, &L, NULL);   /* the second run on the outputs of the first, as the engine's */
    read_back(&env, &L);
    make_args(&env, &R);
    call_once(&env, &R, "check_correctness: the reference failed: ");
    read_back(&env, &R);
    for (int i = 0; i < a->nargs; i++) {
      size_t at = 0;
      double got = 0, want = 0;
      if (dev_compare(L.host[i], R.host[i], a->bytes[i], a->dtype[i], j->rtol > 0 ? j->rtol : 1e-4,
                      1e-5, &at, &got, &want))
        answer(E_WRONG, "wrong answer: argument %d differs from the reference at flat index %zu "
               "(got %.9g, expected %.9g)", i + 1, at, got, want);
    }
  }
  twork w = {&env, &L, 0, NULL, NULL, ""};
  tl_time_work tw = {t_run, t_sync, &w, 0, 0};
  double costs[1024];
  int repeat = j->repeat < 1 ? 1 : j->repeat > 1024 ? 1024 : j->repeat;
  if (tl_time_eval(&tw, j->number, repeat, j->min_repeat_ms, costs))
    answer(E_RUNTIME, "%s", w.why[0] ? w.why : "timing failed");
  int32_t head[2] = {E_OK, repeat};
  put(head, sizeof head);
  put(costs, sizeof(double) * (size_t)repeat);
  _exit(0);
}
