/*
** opencl.c -- the OpenCL runtime over the ICD loader (ocl-icd): devices,
** contexts and queues, buffers (the tl_device_api of kTL_DEV_OPENCL),
** program builds with a cache, modules of generated kernels, launches with
** work-group checks, and timing by profiling events.
**
** Devices: every device of every platform, enumerated once. Logical device
** 0 is the default one: the index (in platform order) that
** $TUNELUA_OPENCL_DEVICE gives, else the first GPU, else the first device;
** the others follow in platform order. Each device gets one context and one
** in-order queue with profiling, made on first use under the global lock.
**
** Buffers: a device array's data pointer is its cl_mem; copies are blocking
** reads/writes/copies on the device's queue; new buffers are zero-filled.
**
** Programs: built once per (source, options, device) and kept for the life
** of the process (a tuning run builds each candidate once); a failed build
** is TL_E_BUILD with the build log.
**
** Modules (tl_ocl_module): a program's kernels (tl_ocl_code, runtime.h: what
** the build layer made with the code generator, or what a manifest says)
** built into one program by the driver, their cl_kernel objects, global
** temporaries and launch configurations. Before anything is launched every
** kernel's work-group is checked against the device (max work-group size,
** max work-item sizes, local memory) and the compiled kernel
** (CL_KERNEL_WORK_GROUP_SIZE, CL_KERNEL_LOCAL_MEM_SIZE); a violation is
** TL_E_RUNTIME naming the limit. A module is used by one thread at a time
** (kernel arguments are per cl_kernel).
*/
#define _GNU_SOURCE
#include <CL/cl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime.h"

#define OCL_LOG_MAX 6000        /* build-log bytes kept in a message */

typedef struct ocl_dev {
  cl_platform_id plat;
  cl_device_id id;
  cl_context ctx;               /* lazily created */
  cl_command_queue q;
  char name[256], vendor[256], pname[256], version[256];
  char *ext;
  cl_device_type type;
  size_t max_wg;
  size_t max_items[3];
  cl_ulong local_mem, global_mem;
  cl_uint cus, clock;
  int fp16, fp64;
} ocl_dev;

static struct {
  pthread_mutex_t mu;
  pthread_once_t once;
  int n;
  ocl_dev *d;
} G = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_ONCE_INIT, 0, NULL};

static const char *cl_errname(cl_int e) {
  switch (e) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
    E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_BUILD_PROGRAM_FAILURE) E(CL_INVALID_VALUE)
    E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_MEM_OBJECT)
    E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE) E(CL_INVALID_KERNEL_NAME)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE)
    E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET) E(CL_INVALID_EVENT)
    E(CL_INVALID_OPERATION) E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_GLOBAL_WORK_SIZE)
    E(CL_INVALID_BUILD_OPTIONS) E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) E(CL_INVALID_PLATFORM)
#undef E
  default: return "CL_ERROR";
  }
}

#define CLERR(ctx, code, e, ...) ocl_err(ctx, code, e, __VA_ARGS__)
static int ocl_err(tl_ctx *ctx, int code, cl_int e, const char *fmt, ...) TL_PRINTF(4, 5);
static int ocl_err(tl_ctx *ctx, int code, cl_int e, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tl_err(ctx, code, "opencl: %s: %s (%d)", msg, cl_errname(e), (int)e);
}

/* ---- devices -------------------------------------------------------------------- */

static void dev_query(ocl_dev *d) {
  clGetDeviceInfo(d->id, CL_DEVICE_NAME, sizeof d->name - 1, d->name, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_VENDOR, sizeof d->vendor - 1, d->vendor, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_VERSION, sizeof d->version - 1, d->version, NULL);
  clGetPlatformInfo(d->plat, CL_PLATFORM_NAME, sizeof d->pname - 1, d->pname, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_TYPE, sizeof d->type, &d->type, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof d->max_wg, &d->max_wg, NULL);
  size_t items[8] = {0};
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL);
  for (int i = 0; i < 3; i++) d->max_items[i] = items[i] ? items[i] : 1;
  clGetDeviceInfo(d->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof d->local_mem, &d->local_mem, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof d->global_mem, &d->global_mem, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof d->cus, &d->cus, NULL);
  clGetDeviceInfo(d->id, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof d->clock, &d->clock, NULL);
  size_t n = 0;
  clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, 0, NULL, &n);
  d->ext = tl_calloc(n + 1, 1);
  if (n) clGetDeviceInfo(d->id, CL_DEVICE_EXTENSIONS, n, d->ext, NULL);
  d->fp16 = strstr(d->ext, "cl_khr_fp16") != NULL;
  d->fp64 = strstr(d->ext, "cl_khr_fp64") != NULL;
}

/* Set (never cleared) once this process has called into the OpenCL driver. */
static int touched;

TL_EXPORT int tl_opencl_touched(void) { return __atomic_load_n(&touched, __ATOMIC_ACQUIRE); }

static void enumerate(void) {
  __atomic_store_n(&touched, 1, __ATOMIC_RELEASE);
  cl_uint np = 0;
  if (clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0) return;
  cl_platform_id *ps = tl_calloc(np, sizeof *ps);
  clGetPlatformIDs(np, ps, NULL);
  TL_VEC(ocl_dev) raw = {0};
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
    cl_device_id *ds = tl_calloc(nd, sizeof *ds);
    clGetDeviceIDs(ps[p], CL_DEVICE_TYPE_ALL, nd, ds, NULL);
    for (cl_uint i = 0; i < nd; i++) {
      ocl_dev d;
      memset(&d, 0, sizeof d);
      d.plat = ps[p];
      d.id = ds[i];
      dev_query(&d);
      TL_VEC_PUSH(raw, d);
    }
    free(ds);
  }
  free(ps);
  if (raw.n == 0) return;
  int def = -1;
  const char *env = getenv("TUNELUA_OPENCL_DEVICE");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (!*end && v >= 0 && v < raw.n) def = (int)v;
  }
  for (int i = 0; i < raw.n && def < 0; i++)
    if (raw.v[i].type & CL_DEVICE_TYPE_GPU) def = i;
  if (def < 0) def = 0;
  G.d = tl_calloc((size_t)raw.n, sizeof(ocl_dev));
  G.d[0] = raw.v[def];
  for (int i = 0, k = 1; i < raw.n; i++)
    if (i != def) G.d[k++] = raw.v[i];
  G.n = raw.n;
  TL_VEC_FREE(raw);
}

static void ensure_enumerated(void) { pthread_once(&G.once, enumerate); }

TL_EXPORT int tl_opencl_device_count(void) {
  ensure_enumerated();
  return G.n;
}

static int get_dev(tl_ctx *ctx, int dev, ocl_dev **out) {
  ensure_enumerated();
  if (G.n == 0)
    return tl_err(ctx, TL_E_UNSUPPORTED, "opencl: no OpenCL device found (is an ICD such as pocl "
                  "installed and registered under /etc/OpenCL/vendors?)");
  if (dev < 0 || dev >= G.n)
    return tl_err(ctx, TL_E_ARG, "opencl: no device %d (there %s %d: 0..%d)", dev,
                  G.n == 1 ? "is" : "are", G.n, G.n - 1);
  ocl_dev *d = &G.d[dev];
  pthread_mutex_lock(&G.mu);
  int rc = TL_OK;
  if (!d->ctx) {
    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->plat, 0};
    cl_context c = clCreateContext(props, 1, &d->id, NULL, NULL, &e);
    if (!c) {
      rc = CLERR(ctx, TL_E_RUNTIME, e, "cannot create a context on '%s'", d->name);
    } else {
      cl_command_queue q = clCreateCommandQueue(c, d->id, CL_QUEUE_PROFILING_ENABLE, &e);
      if (!q) {
        clReleaseContext(c);
        rc = CLERR(ctx, TL_E_RUNTIME, e, "cannot create a queue on '%s'", d->name);
      } else {
        d->q = q;
        __atomic_store_n(&d->ctx, c, __ATOMIC_RELEASE);
      }
    }
  }
  pthread_mutex_unlock(&G.mu);
  if (rc) return rc;
  *out = d;
  return TL_OK;
}

static int64_t warp_size(const ocl_dev *d) {
  if (d->type & CL_DEVICE_TYPE_GPU) {
    if (strstr(d->vendor, "NVIDIA")) return 32;
    if (strstr(d->vendor, "AMD") || strstr(d->vendor, "Advanced Micro")) return 64;
    if (strstr(d->vendor, "ARM")) return 4;
    if (strstr(d->vendor, "Intel")) return 16;
    return 32;
  }
  return 1;
}

static _Thread_local tl_buf info_buf;

static void json_str(tl_buf *b, const char *key, const char *v) {
  tl_buf_printf(b, "\"%s\": \"", key);
  for (const char *p = v; *p; p++) {
    if (*p == '"' || *p == '\\') tl_buf_printf(b, "\\%c", *p);
    else if ((unsigned char)*p < 32) tl_buf_puts(b, " ");
    else tl_buf_putn(b, p, 1);
  }
  tl_buf_puts(b, "\", ");
}

/* The properties of device dev as enumerated (no context made). */
static int dev_props(tl_ctx *ctx, int dev, const ocl_dev **out) {
  ensure_enumerated();
  if (dev < 0 || dev >= G.n)
    return tl_err(ctx, TL_E_ARG, "opencl: no device %d (%d device%s found)", dev, G.n,
                  G.n == 1 ? "" : "s");
  *out = &G.d[dev];
  return TL_OK;
}

TL_EXPORT int tl_opencl_device_info(tl_ctx *ctx, int dev, const char **json) {
  const ocl_dev *d;
  int rc = dev_props(ctx, dev, &d);
  if (rc) return rc;
  tl_buf *b = &info_buf;
  tl_buf_free(b);
  tl_buf_printf(b, "{\"id\": %d, ", dev);
  json_str(b, "name", d->name);
  json_str(b, "vendor", d->vendor);
  json_str(b, "platform", d->pname);
  json_str(b, "version", d->version);
  json_str(b, "type", d->type & CL_DEVICE_TYPE_GPU ? "gpu" : d->type & CL_DEVICE_TYPE_CPU ? "cpu"
           : d->type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator" : "other");
  tl_buf_printf(b, "\"max_work_group_size\": %zu, \"max_work_item_sizes\": [%zu, %zu, %zu], "
                "\"local_mem_bytes\": %llu, \"global_mem_bytes\": %llu, \"compute_units\": %u, "
                "\"max_clock_mhz\": %u, \"subgroup_size\": %lld, \"fp16\": %s, \"fp64\": %s, ",
                d->max_wg, d->max_items[0], d->max_items[1], d->max_items[2],
                (unsigned long long)d->local_mem, (unsigned long long)d->global_mem, d->cus,
                d->clock, (long long)warp_size(d), d->fp16 ? "true" : "false",
                d->fp64 ? "true" : "false");
  json_str(b, "extensions", d->ext ? d->ext : "");
  b->n -= 2;
  b->s[b->n] = 0;
  tl_buf_puts(b, "}");
  *json = b->s;
  return TL_OK;
}

TL_EXPORT int tl_opencl_hw_params(tl_ctx *ctx, int dev, int64_t *max_wg, int64_t *local_mem,
                                  int64_t *compute_units, int64_t *warp) {
  const ocl_dev *d;
  int rc = dev_props(ctx, dev, &d);
  if (rc) return rc;
  if (max_wg) *max_wg = (int64_t)d->max_wg;
  if (local_mem) *local_mem = (int64_t)d->local_mem;
  if (compute_units) *compute_units = d->cus;
  if (warp) *warp = warp_size(d);
  return TL_OK;
}

/* ---- the device API ------------------------------------------------------------------ */

static int ocl_alloc(tl_ctx *ctx, int dev_id, size_t nbytes, size_t align, void **out) {
  ocl_dev *d;
  int rc = get_dev(ctx, dev_id, &d);
  if (rc) return rc;
  cl_int e;
  cl_mem m = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE, nbytes ? nbytes : 1, NULL, &e);
  if (!m) return CLERR(ctx, TL_E_NOMEM, e, "cannot allocate %zu bytes on '%s'", nbytes, d->name);
  cl_uchar zero = 0;
  e = clEnqueueFillBuffer(d->q, m, &zero, 1, 0, nbytes ? nbytes : 1, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clFinish(d->q);
  if (e != CL_SUCCESS) {
    clReleaseMemObject(m);
    return CLERR(ctx, TL_E_RUNTIME, e, "cannot clear a new buffer on '%s'", d->name);
  }
  *out = m;
  return TL_OK;
}

static void ocl_free(int dev_id, void *p) {
  if (p) clReleaseMemObject((cl_mem)p);
}

static int ocl_copy(tl_ctx *ctx, const void *src, size_t so, DLDevice sd, void *dst, size_t dof,
                    DLDevice dd, size_t nbytes) {
  int dev_id = sd.device_type == kDLOpenCL ? sd.device_id : dd.device_id;
  ocl_dev *d;
  int rc = get_dev(ctx, dev_id, &d);
  if (rc) return rc;
  cl_int e;
  if (sd.device_type == kDLCPU)
    e = clEnqueueWriteBuffer(d->q, (cl_mem)dst, CL_TRUE, dof, nbytes, (const char *)src + so, 0,
                             NULL, NULL);
  else if (dd.device_type == kDLCPU)
    e = clEnqueueReadBuffer(d->q, (cl_mem)src, CL_TRUE, so, nbytes, (char *)dst + dof, 0, NULL,
                            NULL);
  else if (sd.device_id == dd.device_id) {
    e = clEnqueueCopyBuffer(d->q, (cl_mem)src, (cl_mem)dst, so, dof, nbytes, 0, NULL, NULL);
    if (e == CL_SUCCESS) e = clFinish(d->q);
  } else {
    return tl_err(ctx, TL_E_UNSUPPORTED, "opencl: copy between two OpenCL devices goes through "
                  "the host");
  }
  if (e != CL_SUCCESS) return CLERR(ctx, TL_E_RUNTIME, e, "copy of %zu bytes on '%s'", nbytes, d->name);
  return TL_OK;
}

static int ocl_sync(tl_ctx *ctx, int dev_id) {
  ocl_dev *d;
  int rc = get_dev(ctx, dev_id, &d);
  if (rc) return rc;
  cl_int e = clFinish(d->q);
  return e == CL_SUCCESS ? TL_OK : CLERR(ctx, TL_E_RUNTIME, e, "clFinish on '%s'", d->name);
}

static const tl_device_api ocl_api = {
  .name = "opencl",
  .dev_type = kDLOpenCL,
  .alloc = ocl_alloc,
  .free = ocl_free,
  .copy = ocl_copy,
  .sync = ocl_sync,
};

__attribute__((constructor)) static void ocl_register(void) { tl_device_register(&ocl_api); }

/* ---- programs -------------------------------------------------------------------------- */

typedef struct prog_entry {
  uint64_t h[2];
  int dev;
  cl_program prog;
  struct prog_entry *next;
} prog_entry;

static prog_entry *prog_cache;   /* guarded by G.mu */

static void prog_key(const char *src, const char *opts, int dev, uint64_t h[2]) {
  for (int i = 0; i < 2; i++) {
    uint64_t x = tl_hash_bytes(src, strlen(src), 0x6f636c00ull + (uint64_t)i);
    x = tl_hash_mix(x, tl_hash_bytes(opts, strlen(opts), 0x6f707473ull + (uint64_t)i));
    h[i] = tl_hash_mix(x, (uint64_t)dev);
  }
}

/* $TUNELUA_OPENCL_DUMP=DIR: each new program's source (k<hash>.cl) and the
** driver's binary (k<hash>.bin: PTX for NVIDIA) go to DIR, for inspection. */
static void dump_program(cl_program prog, const ocl_dev *d, const char *src, const uint64_t h[2]) {
  const char *dir = getenv("TUNELUA_OPENCL_DUMP");
  if (!dir || !*dir || tl_mkdirs(NULL, dir) != TL_OK) return;
  char *path = tl_sprintf("%s/k%016llx%016llx.cl", dir, (unsigned long long)h[0], (unsigned long long)h[1]);
  FILE *f = fopen(path, "wb");
  if (f) {
    fputs(src, f);
    fclose(f);
  }
  free(path);
  size_t sz = 0;
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof sz, &sz, NULL) != CL_SUCCESS || !sz) return;
  unsigned char *bin = tl_malloc(sz);
  unsigned char *bins[1] = {bin};
  if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS) {
    path = tl_sprintf("%s/k%016llx%016llx.bin", dir, (unsigned long long)h[0], (unsigned long long)h[1]);
    f = fopen(path, "wb");
    if (f) {
      fwrite(bin, 1, sz, f);
      fclose(f);
    }
    free(path);
  }
  free(bin);
  (void)d;
}

/* Build (or find) the program; the returned program is retained for the caller. */
static int get_program(tl_ctx *ctx, ocl_dev *d, int dev, const char *src, const char *opts,
                       cl_program *out, int *hit) {
  uint64_t h[2];
  if (!opts) opts = "";
  prog_key(src, opts, dev, h);
  pthread_mutex_lock(&G.mu);
  for (prog_entry *p = prog_cache; p; p = p->next)
    if (p->h[0] == h[0] && p->h[1] == h[1] && p->dev == dev) {
      clRetainProgram(p->prog);
      *out = p->prog;
      pthread_mutex_unlock(&G.mu);
      if (hit) *hit = 1;
      return TL_OK;
    }
  pthread_mutex_unlock(&G.mu);
  if (hit) *hit = 0;
  cl_int e;
  size_t len = strlen(src);
  cl_program prog = clCreateProgramWithSource(d->ctx, 1, &src, &len, &e);
  if (!prog) return CLERR(ctx, TL_E_BUILD, e, "cannot create a program on '%s'", d->name);
  e = clBuildProgram(prog, 1, &d->id, opts, NULL, NULL);
  if (e != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
    char *log = tl_calloc(n + 1, 1);
    if (n) clGetProgramBuildInfo(prog, d->id, CL_PROGRAM_BUILD_LOG, n, log, NULL);
    size_t ln = strlen(log);
    while (ln && (log[ln - 1] == '\n' || log[ln - 1] == ' ')) log[--ln] = 0;
    if (ln > OCL_LOG_MAX) strcpy(log + OCL_LOG_MAX, "\n...");
    int rc = tl_err(ctx, TL_E_BUILD, "opencl: build failed on '%s' (%s):\n%s", d->name,
                    cl_errname(e), log);
    free(log);
    clReleaseProgram(prog);
    return rc;
  }
  dump_program(prog, d, src, h);
  prog_entry *pe = tl_calloc(1, sizeof *pe);
  pe->h[0] = h[0];
  pe->h[1] = h[1];
  pe->dev = dev;
  pe->prog = prog;
  clRetainProgram(prog);
  pthread_mutex_lock(&G.mu);
  pe->next = prog_cache;
  prog_cache = pe;
  pthread_mutex_unlock(&G.mu);
  *out = prog;
  return TL_OK;
}

TL_EXPORT int tl_opencl_build_program(tl_ctx *ctx, int dev, const char *source, const char *options) {
  if (!source) return tl_err(ctx, TL_E_ARG, "opencl: source is NULL");
  ocl_dev *d;
  int rc = get_dev(ctx, dev, &d);
  if (rc) return rc;
  cl_program p;
  rc = get_program(ctx, d, dev, source, options, &p, NULL);
  if (!rc) clReleaseProgram(p);
  return rc;
}

/* ---- modules ------------------------------------------------------------------------------ */

static int check_wg(tl_ctx *ctx, const ocl_dev *d, const tl_ocl_kinfo *ki, size_t kwg,
                    cl_ulong klocal);

struct tl_ocl_module {
  tl_ocl_code code;
  int dev;
  cl_program prog;
  cl_kernel *k;
  size_t *kwg;                   /* CL_KERNEL_WORK_GROUP_SIZE */
  cl_ulong *klocal;              /* CL_KERNEL_LOCAL_MEM_SIZE */
  cl_mem *temps;
  double compile_s;
  char *name;                    /* the lowered function's name */
};

TL_EXPORT void tl_ocl_module_free(tl_ocl_module *m) {
  if (!m) return;
  for (int i = 0; m->k && i < m->code.nkernels; i++)
    if (m->k[i]) clReleaseKernel(m->k[i]);
  for (int i = 0; m->temps && i < m->code.ntemps; i++)
    if (m->temps[i]) clReleaseMemObject(m->temps[i]);
  if (m->prog) clReleaseProgram(m->prog);
  free(m->k);
  free(m->kwg);
  free(m->klocal);
  free(m->temps);
  free(m->name);
  tl_ocl_code_free(&m->code);
  free(m);
}

void tl_ocl_code_free(tl_ocl_code *code) {
  if (!code) return;
  free(code->source);
  for (int i = 0; i < code->nkernels; i++) {
    free(code->kernels[i].name);
    free(code->kernels[i].slots);
  }
  free(code->kernels);
  for (int i = 0; i < code->nargs; i++) free(code->arg_shape[i]);
  free(code->arg_shape);
  free(code->arg_dtype);
  free(code->arg_ndim);
  free(code->temp_bytes);
  memset(code, 0, sizeof *code);
}

int tl_opencl_program(tl_ctx *ctx, int dev, const char *source, const char *options, void **prog,
                      int *hit) {
  ocl_dev *d;
  int rc = get_dev(ctx, dev, &d);
  if (rc) return rc;
  cl_program p;
  rc = get_program(ctx, d, dev, source, options, &p, hit);
  if (!rc) *prog = p;
  return rc;
}

/* The device part of a module whose code (m->code, m->name) is filled in:
** extension and work-group checks, the program, its kernels and temporaries.
** Frees m on failure. */
static int module_finish(tl_ctx *ctx, ocl_dev *d, tl_ocl_module *m, tl_ocl_module **out) {
  int rc = TL_OK;
  int dev = m->dev;
  if (m->code.fp16 && !d->fp16) {
    rc = tl_err(ctx, TL_E_UNSUPPORTED, "opencl: '%s' uses float16 but device '%s' lacks "
                "cl_khr_fp16", m->name, d->name);
    goto fail;
  }
  if (m->code.fp64 && !d->fp64) {
    rc = tl_err(ctx, TL_E_UNSUPPORTED, "opencl: '%s' uses float64 but device '%s' lacks "
                "cl_khr_fp64", m->name, d->name);
    goto fail;
  }
  for (int i = 0; i < m->code.nkernels; i++)
    if ((rc = check_wg(ctx, d, &m->code.kernels[i], 0, 0)) != TL_OK) goto fail;
  double t0 = tl_now();
  int hit = 0;
  rc = get_program(ctx, d, dev, m->code.source, "", &m->prog, &hit);
  if (rc) goto fail;
  m->compile_s = hit ? 0 : tl_now() - t0;
  int nk = m->code.nkernels;
  m->k = tl_calloc((size_t)nk + 1, sizeof(cl_kernel));
  m->kwg = tl_calloc((size_t)nk + 1, sizeof(size_t));
  m->klocal = tl_calloc((size_t)nk + 1, sizeof(cl_ulong));
  for (int i = 0; i < nk; i++) {
    cl_int e;
    m->k[i] = clCreateKernel(m->prog, m->code.kernels[i].name, &e);
    if (!m->k[i]) {
      rc = CLERR(ctx, TL_E_BUILD, e, "kernel '%s'", m->code.kernels[i].name);
      goto fail;
    }
    clGetKernelWorkGroupInfo(m->k[i], d->id, CL_KERNEL_WORK_GROUP_SIZE, sizeof(size_t), &m->kwg[i], NULL);
    clGetKernelWorkGroupInfo(m->k[i], d->id, CL_KERNEL_LOCAL_MEM_SIZE, sizeof(cl_ulong), &m->klocal[i], NULL);
  }
  m->temps = tl_calloc((size_t)m->code.ntemps + 1, sizeof(cl_mem));
  for (int t = 0; t < m->code.ntemps; t++) {
    void *p;
    rc = ocl_alloc(ctx, dev, (size_t)m->code.temp_bytes[t], 64, &p);
    if (rc) goto fail;
    m->temps[t] = p;
  }
  *out = m;
  return TL_OK;
fail:
  tl_ocl_module_free(m);
  return rc;
}

int tl_ocl_module_load(tl_ctx *ctx, int dev, tl_ocl_code *code, const char *name,
                       tl_ocl_module **out) {
  *out = NULL;
  ocl_dev *d;
  int rc = get_dev(ctx, dev, &d);
  if (rc) {
    tl_ocl_code_free(code);
    return rc;
  }
  tl_ocl_module *m = tl_calloc(1, sizeof *m);
  m->dev = dev;
  m->code = *code;
  memset(code, 0, sizeof *code);
  m->name = tl_strdup(name);
  return module_finish(ctx, d, m, out);
}

/* ---- modules that travel: OpenCL C + a manifest ------------------------------------------
** The manifest (JSON) says how the host launches the program's kernels:
**   {"format": "tunelua-opencl-module", "version": 1, "name": "f",
**    "args": [{"dtype": "float32", "shape": [1, 4, 8, 8]}, ...],
**    "temps": [bytes, ...],
**    "kernels": [{"name": "f_kernel0", "grid": [x, y, z], "block": [x, y, z],
**                 "local_bytes": n, "slots": [0, 1, ...]}, ...],
**    "fp16": false, "fp64": false}
** slots: the kernel's __global arguments in order; slot k < nargs is argument k, nargs + t is
** temporary t. Parsing is strict: unknown keys, wrong types and values out of bounds are
** TL_E_PARSE naming the field. */

#define MAN_MAX_TEXT ((size_t)1 << 20)
#define MAN_MAX_SOURCE ((size_t)16 << 20)
#define MAN_MAX_KERNELS 64
#define MAN_MAX_ARGS 64
#define MAN_MAX_TEMPS 64
#define MAN_MAX_SLOTS 192
#define MAN_MAX_NDIM 8
#define MAN_MAX_NAME 128
#define MAN_MAX_ARG_BYTES ((double)((uint64_t)4 << 30))
#define MAN_MAX_BLOCK 1048576
#define MAN_MAX_GRID 2147483647LL

static int man_err(tl_ctx *ctx, const char *fmt, ...) TL_PRINTF(2, 3);
static int man_err(tl_ctx *ctx, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return tl_err(ctx, TL_E_PARSE, "opencl manifest: %s", msg);
}

/* Only the keys in allowed (NULL-terminated) may appear in o. */
static int man_keys(tl_ctx *ctx, json_t *o, const char *where, const char *const *allowed) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    int ok = 0;
    for (int i = 0; allowed[i] && !ok; i++) ok = !strcmp(k, allowed[i]);
    if (!ok) return man_err(ctx, "%s: unknown key '%.64s'", where, k);
  }
  (void)v;
  return TL_OK;
}

static int man_int(tl_ctx *ctx, json_t *v, const char *where, long long lo, long long hi,
                   int64_t *out) {
  if (!json_is_integer(v)) return man_err(ctx, "%s: expected an integer in [%lld, %lld]", where, lo, hi);
  json_int_t x = json_integer_value(v);
  if (x < lo || x > hi)
    return man_err(ctx, "%s: %lld is out of bounds [%lld, %lld]", where, (long long)x, lo, hi);
  *out = (int64_t)x;
  return TL_OK;
}

static int man_array(tl_ctx *ctx, json_t *v, const char *where, size_t lo, size_t hi) {
  if (!json_is_array(v)) return man_err(ctx, "%s: expected a list", where);
  size_t n = json_array_size(v);
  if (n < lo || n > hi) {
    if (lo == hi) return man_err(ctx, "%s: %zu entries, expected exactly %zu", where, n, lo);
    return man_err(ctx, "%s: %zu entries, expected %zu to %zu", where, n, lo, hi);
  }
  return TL_OK;
}

/* Parse and check a manifest for source into code (device-free); name: malloc'd. */
static int manifest_parse(tl_ctx *ctx, const char *source, const char *text, tl_ocl_code *code,
                          char **name_out) {
  memset(code, 0, sizeof *code);
  *name_out = NULL;
  if (!source || !text) return man_err(ctx, "the source or the manifest is missing");
  size_t sl = strlen(source);
  if (sl == 0 || sl > MAN_MAX_SOURCE)
    return man_err(ctx, "the OpenCL source has %zu bytes (expected 1 to %zu)", sl, MAN_MAX_SOURCE);
  size_t tl = strlen(text);
  if (tl == 0 || tl > MAN_MAX_TEXT)
    return man_err(ctx, "the manifest has %zu bytes (expected 1 to %zu)", tl, MAN_MAX_TEXT);
  json_error_t je;
  json_t *root = json_loadb(text, tl, JSON_REJECT_DUPLICATES, &je);
  if (!root) return man_err(ctx, "not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
  int rc = TL_OK;
  char where[160];
  static const char *const top_keys[] = {"format", "version", "name", "args", "temps", "kernels",
                                         "fp16", "fp64", NULL};
  static const char *const arg_keys[] = {"dtype", "shape", NULL};
  static const char *const k_keys[] = {"name", "grid", "block", "local_bytes", "slots", NULL};
  if (!json_is_object(root)) {
    rc = man_err(ctx, "expected a JSON object");
    goto done;
  }
  if ((rc = man_keys(ctx, root, "manifest", top_keys))) goto done;
  const char *fmt = json_string_value(json_object_get(root, "format"));
  if (!fmt || strcmp(fmt, "tunelua-opencl-module") != 0) {
    rc = man_err(ctx, "format: expected \"tunelua-opencl-module\"");
    goto done;
  }
  int64_t ver = 0;
  if ((rc = man_int(ctx, json_object_get(root, "version"), "version", 1, 1, &ver))) goto done;
  const char *nm = json_string_value(json_object_get(root, "name"));
  if (!tl_c_ident(nm, MAN_MAX_NAME)) {
    rc = man_err(ctx, "name: expected an identifier of at most %d characters", MAN_MAX_NAME);
    goto done;
  }
  for (int f = 0; f < 2; f++) {
    const char *key = f ? "fp64" : "fp16";
    json_t *v = json_object_get(root, key);
    if (v && !json_is_boolean(v)) {
      rc = man_err(ctx, "%s: expected true or false", key);
      goto done;
    }
    if (f) code->fp64 = json_is_true(v);
    else code->fp16 = json_is_true(v);
  }
  /* what the source itself enables counts too */
  if (strstr(source, "cl_khr_fp16")) code->fp16 = 1;
  if (strstr(source, "cl_khr_fp64")) code->fp64 = 1;
  json_t *args = json_object_get(root, "args");
  if ((rc = man_array(ctx, args, "args", 1, MAN_MAX_ARGS))) goto done;
  int na = (int)json_array_size(args);
  code->arg_dtype = tl_calloc((size_t)na, sizeof(int));
  code->arg_ndim = tl_calloc((size_t)na, sizeof(int));
  code->arg_shape = tl_calloc((size_t)na, sizeof(int64_t *));
  code->nargs = na;
  for (int i = 0; i < na; i++) {
    json_t *a = json_array_get(args, i);
    snprintf(where, sizeof where, "args[%d]", i);
    if (!json_is_object(a)) {
      rc = man_err(ctx, "%s: expected an object {\"dtype\", \"shape\"}", where);
      goto done;
    }
    if ((rc = man_keys(ctx, a, where, arg_keys))) goto done;
    const char *dt = json_string_value(json_object_get(a, "dtype"));
    if (!dt || tl_dtype_parse(ctx, dt, &code->arg_dtype[i]) != TL_OK) {
      tl_clearerr(ctx);
      rc = man_err(ctx, "%s.dtype: expected a dtype name such as \"float32\"", where);
      goto done;
    }
    json_t *sh = json_object_get(a, "shape");
    snprintf(where, sizeof where, "args[%d].shape", i);
    if ((rc = man_array(ctx, sh, where, 0, MAN_MAX_NDIM))) goto done;
    int nd = (int)json_array_size(sh);
    code->arg_ndim[i] = nd;
    code->arg_shape[i] = tl_calloc((size_t)nd + 1, sizeof(int64_t));
    double bytes = tl_dtype_bytes(code->arg_dtype[i]);
    for (int d = 0; d < nd; d++) {
      snprintf(where, sizeof where, "args[%d].shape[%d]", i, d);
      if ((rc = man_int(ctx, json_array_get(sh, d), where, 0, 1LL << 40, &code->arg_shape[i][d])))
        goto done;
      bytes *= (double)code->arg_shape[i][d];
    }
    if (bytes > MAN_MAX_ARG_BYTES) {
      rc = man_err(ctx, "args[%d]: %.0f bytes (at most %.0f)", i, bytes, MAN_MAX_ARG_BYTES);
      goto done;
    }
  }
  json_t *temps = json_object_get(root, "temps");
  if (temps) {
    if ((rc = man_array(ctx, temps, "temps", 0, MAN_MAX_TEMPS))) goto done;
    code->ntemps = (int)json_array_size(temps);
    code->temp_bytes = tl_calloc((size_t)code->ntemps + 1, sizeof(int64_t));
    for (int t = 0; t < code->ntemps; t++) {
      snprintf(where, sizeof where, "temps[%d]", t);
      if ((rc = man_int(ctx, json_array_get(temps, t), where, 0, (long long)MAN_MAX_ARG_BYTES,
                        &code->temp_bytes[t])))
        goto done;
    }
  }
  json_t *ks = json_object_get(root, "kernels");
  if ((rc = man_array(ctx, ks, "kernels", 1, MAN_MAX_KERNELS))) goto done;
  int nk = (int)json_array_size(ks);
  code->kernels = tl_calloc((size_t)nk, sizeof(tl_ocl_kinfo));
  code->nkernels = nk;
  for (int k = 0; k < nk; k++) {
    json_t *ko = json_array_get(ks, k);
    tl_ocl_kinfo *ki = &code->kernels[k];
    snprintf(where, sizeof where, "kernels[%d]", k);
    if (!json_is_object(ko)) {
      rc = man_err(ctx, "%s: expected an object", where);
      goto done;
    }
    if ((rc = man_keys(ctx, ko, where, k_keys))) goto done;
    const char *kn = json_string_value(json_object_get(ko, "name"));
    if (!tl_c_ident(kn, MAN_MAX_NAME)) {
      rc = man_err(ctx, "%s.name: expected an identifier of at most %d characters", where, MAN_MAX_NAME);
      goto done;
    }
    for (int j = 0; j < k; j++)
      if (!strcmp(code->kernels[j].name, kn)) {
        rc = man_err(ctx, "%s.name: kernel '%s' is listed twice", where, kn);
        goto done;
      }
    /* the source must define it: "void NAME(" */
    char pat[MAN_MAX_NAME + 8];
    snprintf(pat, sizeof pat, "void %s(", kn);
    if (!strstr(source, pat)) {
      rc = man_err(ctx, "%s.name: the source defines no kernel '%s'", where, kn);
      goto done;
    }
    ki->name = tl_strdup(kn);
    for (int g = 0; g < 2; g++) {
      const char *key = g ? "block" : "grid";
      json_t *v = json_object_get(ko, key);
      char w2[200];
      snprintf(w2, sizeof w2, "%s.%s", where, key);
      if ((rc = man_array(ctx, v, w2, 3, 3))) goto done;
      for (int d = 0; d < 3; d++) {
        char w3[220];
        snprintf(w3, sizeof w3, "%s[%d]", w2, d);
        int64_t *dst = g ? &ki->block[d] : &ki->grid[d];
        if ((rc = man_int(ctx, json_array_get(v, d), w3, 1, g ? MAN_MAX_BLOCK : MAN_MAX_GRID, dst)))
          goto done;
      }
    }
    if ((double)ki->grid[0] * (double)ki->grid[1] * (double)ki->grid[2] *
        (double)ki->block[0] * (double)ki->block[1] * (double)ki->block[2] > 1e15) {
      rc = man_err(ctx, "%s: the launch has more than 1e15 work-items", where);
      goto done;
    }
    json_t *lb = json_object_get(ko, "local_bytes");
    if (lb) {
      snprintf(where, sizeof where, "kernels[%d].local_bytes", k);
      if ((rc = man_int(ctx, lb, where, 0, 1LL << 31, &ki->local_bytes))) goto done;
    }
    json_t *sl2 = json_object_get(ko, "slots");
    snprintf(where, sizeof where, "kernels[%d].slots", k);
    if ((rc = man_array(ctx, sl2, where, 0, MAN_MAX_SLOTS))) goto done;
    ki->nslots = (int)json_array_size(sl2);
    ki->slots = tl_calloc((size_t)ki->nslots + 1, sizeof(int));
    for (int s = 0; s < ki->nslots; s++) {
      int64_t v = 0;
      snprintf(where, sizeof where, "kernels[%d].slots[%d]", k, s);
      if ((rc = man_int(ctx, json_array_get(sl2, s), where, 0, na + code->ntemps - 1, &v))) goto done;
      ki->slots[s] = (int)v;
    }
  }
  code->source = tl_strdup(source);
  *name_out = tl_strdup(nm);
done:
  json_decref(root);
  if (rc) tl_ocl_code_free(code);
  return rc;
}

char *tl_ocl_manifest_text(const tl_ocl_code *c, const char *name) {
  tl_buf b = {0};
  tl_buf_printf(&b, "{\"format\": \"tunelua-opencl-module\", \"version\": 1, \"name\": \"%s\", "
                "\"args\": [", name);
  for (int i = 0; i < c->nargs; i++) {
    tl_buf_printf(&b, "%s{\"dtype\": \"%s\", \"shape\": [", i ? ", " : "", tl_dtype_name(c->arg_dtype[i]));
    for (int d = 0; d < c->arg_ndim[i]; d++)
      tl_buf_printf(&b, "%s%lld", d ? ", " : "", (long long)c->arg_shape[i][d]);
    tl_buf_puts(&b, "]}");
  }
  tl_buf_puts(&b, "], \"temps\": [");
  for (int t = 0; t < c->ntemps; t++) tl_buf_printf(&b, "%s%lld", t ? ", " : "", (long long)c->temp_bytes[t]);
  tl_buf_puts(&b, "], \"kernels\": [");
  for (int k = 0; k < c->nkernels; k++) {
    const tl_ocl_kinfo *ki = &c->kernels[k];
    tl_buf_printf(&b, "%s{\"name\": \"%s\", \"grid\": [%lld, %lld, %lld], \"block\": [%lld, %lld, "
                  "%lld], \"local_bytes\": %lld, \"slots\": [", k ? ", " : "", ki->name,
                  (long long)ki->grid[0], (long long)ki->grid[1], (long long)ki->grid[2],
                  (long long)ki->block[0], (long long)ki->block[1], (long long)ki->block[2],
                  (long long)ki->local_bytes);
    for (int s = 0; s < ki->nslots; s++) tl_buf_printf(&b, "%s%d", s ? ", " : "", ki->slots[s]);
    tl_buf_puts(&b, "]}");
  }
  tl_buf_printf(&b, "], \"fp16\": %s, \"fp64\": %s}", c->fp16 ? "true" : "false",
                c->fp64 ? "true" : "false");
  return b.s;
}

TL_EXPORT void tl_opencl_str_free(char *s) { free(s); }

TL_EXPORT int tl_ocl_module_manifest(tl_ctx *ctx, const tl_ocl_module *m, char **json) {
  if (!json) return tl_err(ctx, TL_E_ARG, "opencl: json is NULL");
  *json = NULL;
  if (!m) return tl_err(ctx, TL_E_ARG, "opencl: module is NULL");
  *json = tl_ocl_manifest_text(&m->code, m->name ? m->name : "default_function");
  return TL_OK;
}

TL_EXPORT int tl_ocl_manifest_check(tl_ctx *ctx, const char *source, const char *manifest) {
  tl_ocl_code code;
  char *name = NULL;
  int rc = manifest_parse(ctx, source, manifest, &code, &name);
  if (!rc) tl_ocl_code_free(&code);
  free(name);
  return rc;
}

TL_EXPORT int tl_ocl_module_from_source(tl_ctx *ctx, const char *source, const char *manifest,
                                        int dev, tl_ocl_module **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "opencl: out is NULL");
  *out = NULL;
  tl_ocl_module *m = tl_calloc(1, sizeof *m);
  m->dev = dev;
  int rc = manifest_parse(ctx, source, manifest, &m->code, &m->name);
  if (rc) {
    free(m);
    return rc;
  }
  ocl_dev *d;
  rc = get_dev(ctx, dev, &d);
  if (rc) {
    tl_ocl_module_free(m);
    return rc;
  }
  return module_finish(ctx, d, m, out);
}

TL_EXPORT const char *tl_ocl_module_source(const tl_ocl_module *m) { return m ? m->code.source : ""; }
TL_EXPORT int tl_ocl_module_device(const tl_ocl_module *m) { return m ? m->dev : -1; }
TL_EXPORT int tl_ocl_module_num_kernels(const tl_ocl_module *m) { return m ? m->code.nkernels : 0; }
TL_EXPORT double tl_ocl_module_compile_seconds(const tl_ocl_module *m) { return m ? m->compile_s : 0; }

TL_EXPORT const char *tl_ocl_module_kernel(const tl_ocl_module *m, int k, int64_t *grid,
                                           int64_t *block) {
  if (!m || k < 0 || k >= m->code.nkernels) return NULL;
  for (int i = 0; i < 3; i++) {
    if (grid) grid[i] = m->code.kernels[k].grid[i];
    if (block) block[i] = m->code.kernels[k].block[i];
  }
  return m->code.kernels[k].name;
}

/* The work-group of kernel ki against the device and (kwg, klocal > 0) the
** compiled kernel. */
static int check_wg(tl_ctx *ctx, const ocl_dev *d, const tl_ocl_kinfo *ki, size_t kwg, cl_ulong klocal) {
    int64_t wg = ki->block[0] * ki->block[1] * ki->block[2];
    for (int dd = 0; dd < 3; dd++)
      if ((uint64_t)ki->block[dd] > d->max_items[dd])
        return tl_err(ctx, TL_E_RUNTIME, "opencl: kernel '%s': invalid work-group size: %lld "
                      "work-items in dimension %d exceed the device's limit %zu (%s)", ki->name,
                      (long long)ki->block[dd], dd, d->max_items[dd], d->name);
    if ((uint64_t)wg > d->max_wg)
      return tl_err(ctx, TL_E_RUNTIME, "opencl: kernel '%s': invalid work-group size %lld "
                    "(%lldx%lldx%lld) exceeds the device's max work-group size %zu (%s)", ki->name,
                    (long long)wg, (long long)ki->block[0], (long long)ki->block[1],
                    (long long)ki->block[2], d->max_wg, d->name);
    if (kwg && (uint64_t)wg > kwg)
      return tl_err(ctx, TL_E_RUNTIME, "opencl: kernel '%s': invalid work-group size %lld exceeds "
                    "the compiled kernel's CL_KERNEL_WORK_GROUP_SIZE %zu (%s)", ki->name,
                    (long long)wg, kwg, d->name);
    cl_ulong lm = klocal > (cl_ulong)ki->local_bytes ? klocal : (cl_ulong)ki->local_bytes;
    if (lm > d->local_mem)
      return tl_err(ctx, TL_E_RUNTIME, "opencl: kernel '%s' uses %llu bytes of local memory, more "
                    "than the device's %llu (%s)", ki->name, (unsigned long long)lm,
                    (unsigned long long)d->local_mem, d->name);
    return TL_OK;
}

/* Arguments and work-group checks; sets the kernel arguments. */
static int prepare(tl_ctx *ctx, tl_ocl_module *m, ocl_dev *d, tl_array **args, int nargs) {
  const tl_ocl_code *c = &m->code;
  if (nargs != c->nargs)
    return tl_err(ctx, TL_E_ARG, "opencl: %s takes %d arrays, got %d",
                  c->nkernels ? c->kernels[0].name : "kernel", c->nargs, nargs);
  for (int k = 0; k < nargs; k++) {
    const tl_array *a = args[k];
    char s1[256], s2[256];
    if (!a) return tl_err(ctx, TL_E_ARG, "opencl: argument %d is NULL", k);
    if (a->t.device.device_type != kDLOpenCL || a->t.device.device_id != m->dev)
      return tl_err(ctx, TL_E_ARG, "opencl: argument %d is on %s:%d, expected opencl:%d (copy it "
                    "with nd.array(x, 'opencl:%d') or a:copyto('opencl:%d'))", k,
                    tl_device_type_name(a->t.device.device_type), a->t.device.device_id, m->dev,
                    m->dev, m->dev);
    int same = a->dtype == c->arg_dtype[k] && a->t.ndim == c->arg_ndim[k];
    for (int i = 0; same && i < a->t.ndim; i++) same = a->shape[i] == c->arg_shape[k][i];
    if (!same)
      return tl_err(ctx, TL_E_SHAPE, "opencl: argument %d: expected %s %s, got %s %s", k,
                    tl_dtype_name(c->arg_dtype[k]),
                    tl_shape_str(s1, sizeof s1, c->arg_ndim[k], c->arg_shape[k]),
                    tl_dtype_name(a->dtype), tl_shape_str(s2, sizeof s2, a->t.ndim, a->shape));
    if (a->t.byte_offset != 0)
      return tl_err(ctx, TL_E_UNSUPPORTED, "opencl: argument %d is a view with a byte offset", k);
  }
  for (int i = 0; i < c->nkernels; i++) {
    const tl_ocl_kinfo *ki = &c->kernels[i];
    int rc = check_wg(ctx, d, ki, m->kwg[i], m->klocal[i]);
    if (rc) return rc;
    for (int s = 0; s < ki->nslots; s++) {
      int slot = ki->slots[s];
      cl_mem mem = slot < c->nargs ? (cl_mem)args[slot]->t.data : m->temps[slot - c->nargs];
      cl_int e = clSetKernelArg(m->k[i], (cl_uint)s, sizeof(cl_mem), &mem);
      if (e != CL_SUCCESS) return CLERR(ctx, TL_E_RUNTIME, e, "kernel '%s' argument %d", ki->name, s);
    }
  }
  return TL_OK;
}

/* Enqueue every kernel once; events of the first and last kernel if wanted. */
static int launch(tl_ctx *ctx, tl_ocl_module *m, ocl_dev *d, cl_event *first, cl_event *last) {
  const tl_ocl_code *c = &m->code;
  for (int i = 0; i < c->nkernels; i++) {
    const tl_ocl_kinfo *ki = &c->kernels[i];
    size_t gs[3], ls[3];
    for (int dd = 0; dd < 3; dd++) {
      ls[dd] = (size_t)ki->block[dd];
      gs[dd] = (size_t)(ki->grid[dd] * ki->block[dd]);
    }
    cl_event ev = NULL;
    int want = (first && i == 0) || (last && i == c->nkernels - 1);
    cl_int e = clEnqueueNDRangeKernel(d->q, m->k[i], 3, NULL, gs, ls, 0, NULL, want ? &ev : NULL);
    if (e != CL_SUCCESS)
      return CLERR(ctx, TL_E_RUNTIME, e, "launch of kernel '%s' (grid %lldx%lldx%lld, block "
                   "%lldx%lldx%lld)", ki->name, (long long)ki->grid[0], (long long)ki->grid[1],
                   (long long)ki->grid[2], (long long)ki->block[0], (long long)ki->block[1],
                   (long long)ki->block[2]);
    if (want) {
      if (first && i == 0) {
        *first = ev;
        if (last && i == c->nkernels - 1) {
          clRetainEvent(ev);
          *last = ev;
        }
      } else {
        *last = ev;
      }
    }
  }
  return TL_OK;
}

TL_EXPORT int tl_ocl_module_call(tl_ctx *ctx, tl_ocl_module *m, tl_array **args, int nargs) {
  if (!m) return tl_err(ctx, TL_E_ARG, "opencl: module is NULL");
  ocl_dev *d = NULL;
  int rc = get_dev(ctx, m->dev, &d);
  if (rc) return rc;
  rc = prepare(ctx, m, d, args, nargs);
  if (!rc) rc = launch(ctx, m, d, NULL, NULL);
  cl_int e = clFinish(d->q);
  if (!rc && e != CL_SUCCESS) rc = CLERR(ctx, TL_E_RUNTIME, e, "waiting for the kernels on '%s'", d->name);
  return rc;
}

/* The time evaluator's callbacks for a module: launches enqueued, the
** queue waited for; the time is the device's (profiling events from the
** first kernel's start to the last kernel's end) unless wallclock. */
typedef struct {
  tl_ctx *ctx;
  tl_ocl_module *m;
  ocl_dev *d;
  int wallclock;
  int warm;                      /* the batch is the warm-up */
  cl_event ev0, ev1;
} ocl_work;

static int ocl_time_run(void *arg, int i, int n) {
  ocl_work *w = arg;
  w->warm = n == 0;
  int timed = !w->warm && !w->wallclock;
  return launch(w->ctx, w->m, w->d, timed && i == 0 ? &w->ev0 : NULL,
                timed && i == n - 1 ? &w->ev1 : NULL);
}

static int ocl_time_sync(void *arg, int rc, double t0, double *secs) {
  ocl_work *w = arg;
  cl_int e = clFinish(w->d->q);
  double wall = tl_now() - t0;
  if (!rc && e != CL_SUCCESS)
    rc = CLERR(w->ctx, TL_E_RUNTIME, e, "%s on '%s'", w->warm ? "warm-up" : "timing", w->d->name);
  if (!rc && !w->warm && !w->wallclock && w->ev0 && w->ev1) {
    cl_ulong start = 0, end = 0;
    e = clGetEventProfilingInfo(w->ev0, CL_PROFILING_COMMAND_START, sizeof start, &start, NULL);
    if (e == CL_SUCCESS)
      e = clGetEventProfilingInfo(w->ev1, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
    if (e != CL_SUCCESS) rc = CLERR(w->ctx, TL_E_RUNTIME, e, "profiling events on '%s'", w->d->name);
    *secs = end > start ? (double)(end - start) * 1e-9 : 0;
  } else {
    *secs = wall;
  }
  if (w->ev0) clReleaseEvent(w->ev0);
  if (w->ev1) clReleaseEvent(w->ev1);
  w->ev0 = w->ev1 = NULL;
  return rc;
}

TL_EXPORT int tl_ocl_module_time(tl_ctx *ctx, tl_ocl_module *m, tl_array **args, int nargs,
                                 int number, int repeat, double min_repeat_ms, int wallclock,
                                 double *secs_out) {
  if (!m) return tl_err(ctx, TL_E_ARG, "opencl: module is NULL");
  if (repeat < 1) return tl_err(ctx, TL_E_ARG, "time_evaluator: repeat must be >= 1, got %d", repeat);
  if (!secs_out) return tl_err(ctx, TL_E_ARG, "time_evaluator: secs_out is NULL");
  ocl_dev *d = NULL;
  int rc = get_dev(ctx, m->dev, &d);
  if (rc) return rc;
  rc = prepare(ctx, m, d, args, nargs);
  if (rc) {
    clFinish(d->q);
    return rc;
  }
  ocl_work w = {ctx, m, d, wallclock, 0, NULL, NULL};
  tl_time_work tw = {ocl_time_run, ocl_time_sync, &w, 0, 0};      /* warm-up: one launch */
  return tl_time_eval(&tw, number, repeat, min_repeat_ms, secs_out);
}
