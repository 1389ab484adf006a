/*
** runtime.h -- internal view of the runtime: arrays and device APIs.
**
** A tl_array is a DLPack DLTensor plus what tunelua needs around it: the
** tunelua dtype, the shape storage the DLTensor points into, and a counted
** reference to the storage, so that views (tl_array_reshape, tl_array_wrap)
** and their base can be freed in any order. Storage is compact row-major
** (t.strides is NULL) and host storage is 64-byte aligned and starts zeroed.
**
** Devices plug in through a tl_device_api table registered per DLPack device
** type: the CPU API is built in, OpenCL and VTA (kDLExtDev) register theirs
** when they are brought up. Device memory is addressed as (pointer, byte
** offset) pairs and never through pointer arithmetic, since an OpenCL
** "pointer" is a cl_mem handle.
*/
#ifndef TL_RUNTIME_H
#define TL_RUNTIME_H

#include <dlpack/dlpack.h>

#include "../base/base.h"

#define TL_ARRAY_ALIGN 64      /* bytes: alignment of host array storage */
#define TL_ARRAY_MAX_NDIM 32   /* rank limit, keeps message buffers bounded */
#define TL_DEV_MAX 32          /* device types are DLPack values below this */

/* ---- storage and arrays -------------------------------------------------- */

typedef struct tl_device_api tl_device_api;

/* Storage shared by an array and its views; freed with the last reference. */
typedef struct tl_storage {
  void *data;                  /* host pointer or device handle */
  size_t nbytes;
  DLDevice dev;
  const tl_device_api *api;    /* the API that allocated data (NULL: wrapped) */
  int refs;                    /* atomic; see ndarray.c */
  int owns;                    /* free data through the device API at the end */
  void (*release)(void *arg);  /* wrapped storage: called at the end, or NULL */
  void *release_arg;
} tl_storage;

struct tl_array {
  DLTensor t;                  /* t.shape -> shape; t.strides NULL (compact) */
  int dtype;                   /* TL_FLOAT32 .. TL_BOOL */
  int64_t numel;
  tl_storage *st;              /* never NULL */
  int64_t shape[];             /* t.ndim entries (one slot for rank 0) */
};

/* Wrap memory tunelua does not own as an array: data stays the caller's, and
** release(release_arg), when given, runs once the array and every view of it
** are freed. byte_offset is where the elements start within data. */
int tl_array_wrap(tl_ctx *ctx, void *data, uint64_t byte_offset, int ndim,
                  const int64_t *shape, int dtype, DLDevice dev,
                  void (*release)(void *arg), void *release_arg, tl_array **out);

/* True when the array's elements can be read through tl_array_data. */
static inline int tl_array_on_host(const tl_array *a) {
  return a->t.device.device_type == kDLCPU;
}

/* "(2, 3)", "(5,)" or "()" into buf (always NUL-terminated); returns buf. */
char *tl_shape_str(char *buf, size_t n, int ndim, const int64_t *shape);

/* ---- dtypes ------------------------------------------------------------------ */

/* TL_* dtype -> DLDataType (lanes 1). bool is {kDLUInt, 1, 1}, stored in a
** byte, as in TVM. Returns TL_E_DTYPE for a code outside the enum. */
int tl_dtype_to_dl(int dtype, DLDataType *out);
/* DLDataType -> TL_* dtype; TL_E_DTYPE (with a message naming code, bits and
** lanes) for vector types and types tunelua does not know. ctx may be NULL. */
int tl_dtype_from_dl(tl_ctx *ctx, DLDataType t, int *dtype);
int tl_dtype_is_float(int dtype);              /* float16, float32, float64 */

/* IEEE binary16 <-> wider floats. The narrowing conversions round to nearest,
** ties to even, with overflow to infinity, gradual underflow to subnormals and
** NaN kept quiet (sign and top payload bits preserved). */
uint16_t tl_half_from_double(double d);
uint16_t tl_half_from_float(float f);
double tl_half_to_double(uint16_t h);
float tl_half_to_float(uint16_t h);

/* ---- devices ------------------------------------------------------------------ */

struct tl_device_api {
  const char *name;            /* "cpu", "opencl", "ext_dev" */
  int dev_type;                /* DLPack device type, < TL_DEV_MAX */
  /* Allocate nbytes (> 0) aligned to align on device dev_id. */
  int (*alloc)(tl_ctx *ctx, int dev_id, size_t nbytes, size_t align, void **out);
  void (*free)(int dev_id, void *p);
  /* Blocking copy of nbytes between host and this device, or within this
  ** device. One side may be kDLCPU (then its pointer is a host pointer). */
  int (*copy)(tl_ctx *ctx, const void *src, size_t src_offset, DLDevice src_dev,
              void *dst, size_t dst_offset, DLDevice dst_dev, size_t nbytes);
  /* Wait for the device's queued work. */
  int (*sync)(tl_ctx *ctx, int dev_id);
};

/* Register (or replace) the API of api->dev_type; TL_E_ARG for an incomplete
** table or for kDLCPU (built in). The table must outlive every array
** allocated through it. Thread-safe. */
int tl_device_register(const tl_device_api *api);
/* The API of a device type, or NULL if none is registered. Never NULL for
** kDLCPU. */
const tl_device_api *tl_device_get(int dev_type);
/* "cpu", "opencl", "ext_dev", ... or "unknown" for types without a name. */
const char *tl_device_type_name(int dev_type);

/* ---- modules: loading what the build layer made (core/build) ------------------ */

/* Load the shared object at path (dlopen) as a module; source (may be NULL) is
** kept for tl_module_source, compile_s and cache_hit are what the build did.
** ctx may be NULL (a probe of the kernel cache). */
int tl_module_load(tl_ctx *ctx, const char *path, const char *source, double compile_s,
                   int cache_hit, tl_module **out);
/* Keep the heap of a process that only times C kernels (a measurement child): a kernel
** allocates its intermediate buffers on every call (tlc_alloc: from the thread's workspace,
** core/base/workspace.c, up to 64 MiB a buffer; from malloc above that and in kernels built
** without libtunelua), and glibc would otherwise map buffers above 128 KiB fresh and unmap
** them on free, so each call page-faults all of them in again (a Winograd conv of 56x56x64,
** before the workspace: 3.2 -> 1.1 ms of CPU per call). Buffers up to 32 MiB come from the
** heap and up to 256 MiB of freed memory stays mapped for the next call. Once per process;
** no-op off glibc. Not for a process that deploys a network: there the freed
** build-time and parameter memory would stay resident (resnet-18 ready at 170 MiB instead of
** 90, scripts/bench/memory_cpu.lua), and glibc's own adaptive thresholds apply. */
void tl_kernel_heap_keep(void);
/* The address of symbol name in m, or NULL. */
void *tl_module_sym(const tl_module *m, const char *name);

/* An OpenCL program as the host launches it: its source and, per __kernel,
** the arguments and launch configuration (what core/codegen/opencl.c emits and
** what a module manifest carries). Slots name what a kernel argument is: slot
** k < nargs is function argument k, slot nargs + t is global temporary t
** (allocated by the host, temp_bytes[t] bytes). */
typedef struct tl_ocl_kinfo {
  char *name;                     /* kernel function name */
  int nslots;
  int *slots;                     /* its __global pointer arguments, in order */
  int64_t grid[3], block[3];      /* work-groups and work-items per group */
  int64_t local_bytes;            /* static __local memory */
} tl_ocl_kinfo;

typedef struct tl_ocl_code {
  char *source;                   /* OpenCL C */
  int nkernels;
  tl_ocl_kinfo *kernels;
  int nargs;
  int *arg_dtype;                 /* TL_FLOAT32.. per argument */
  int *arg_ndim;
  int64_t **arg_shape;
  int ntemps;
  int64_t *temp_bytes;
  int fp16, fp64;                 /* needs cl_khr_fp16 / cl_khr_fp64 */
} tl_ocl_code;
void tl_ocl_code_free(tl_ocl_code *c);

/* Build code for OpenCL device dev into a module (core/runtime/opencl.c): the
** device's extension and work-group checks, the program (cached per process),
** its kernels and temporaries. Takes code (cleared, also on failure); name is
** the function's name (copied). */
int tl_ocl_module_load(tl_ctx *ctx, int dev, tl_ocl_code *code, const char *name,
                       tl_ocl_module **out);
/* Whether this process has called into the OpenCL driver (enumerated its devices). A driver
** initialized in a process is not usable in that process's forked children
** (docs/measure_opencl.md). */
int tl_opencl_touched(void);
/* The manifest JSON of code (malloc'd; see opencl.c). */
char *tl_ocl_manifest_text(const tl_ocl_code *code, const char *name);
/* The program of source on device dev, built by the driver once per process
** (*prog: a cl_program the caller releases; *hit: found in the cache). */
int tl_opencl_program(tl_ctx *ctx, int dev, const char *source, const char *options, void **prog,
                      int *hit);

/* ---- timing ------------------------------------------------------------------ */

/* The time evaluator (core/runtime/time.c), one loop for every device: a
** warm-up, then `repeat` measurements of `number` runs, number growing until
** one measurement lasts min_repeat_ms (if > 0): to the estimate that reaches
** it, at least by the golden ratio. The work is given as callbacks:
**   run(arg, i, n)   run (or enqueue) the work once: call i of a measurement
**                    of n calls; n = 0 during the warm-up. Nonzero stops.
**   sync(arg, rc, t0, secs)   (NULL: synchronous work) wait for the device;
**                    *secs = the measurement's time (wall time since t0, or
**                    the device's own clock). Called after every batch of
**                    runs, also a failed one (rc: its status); returns the
**                    status to go on with.
** The warm-up repeats run until warmup_s has passed (at least once), then
** syncs. With cache_flush a 32 MiB buffer is written before each measurement
** (outside the timed region). Seconds per run go to secs_out[0..repeat).
** Returns 0 or the first nonzero status of run/sync. */
/* The CPU warm-up: runs until this much time has passed (time.c says why). */
#define TL_TIME_WARMUP_S 10e-3

typedef struct tl_time_work {
  int (*run)(void *arg, int i, int n);
  int (*sync)(void *arg, int rc, double t0, double *secs);
  void *arg;
  double warmup_s;
  int cache_flush;
  void (*evict)(void *arg);       /* with cache_flush: evicts the work's own data too (or NULL) */
} tl_time_work;

int tl_time_eval(const tl_time_work *w, int number, int repeat, double min_repeat_ms,
                 double *secs_out);

/* The time evaluator on a raw CPU kernel (int32_t fn(void **dl, int32_t nargs)):
** a warm-up of at least 10 ms, then tl_time_eval's measurements, the caches
** flushed before each with cache_flush (and every argument but the first
** evicted from all cores' caches). Seconds per call go to
** secs_out[0..repeat); -1 with *kcode set when the kernel returns a nonzero
** code. Used by tl_module_time, the measurement child and the RPC server. */
int tl_kernel_time(void *fn, void **dl, int nargs, int number, int repeat, double min_repeat_ms,
                   int cache_flush, double *secs_out, int32_t *kcode);

#endif
