/*
** tunelua_opencl.h -- part of the public API (included by core/tunelua.h):
** OpenCL: code generation and runtime (core/codegen/opencl.c, core/runtime/opencl.c).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
**
** Devices are numbered 0..n-1 over every platform: device 0 is the default
** device (the one $TUNELUA_OPENCL_DEVICE names by its index in platform
** order, else the first GPU, else the first device), the others follow in
** platform order. Arrays on OpenCL device k are tl_array_empty(...,
** TL_DEV_OPENCL, k, ...); the device API is registered when libtunelua loads.
*/
#ifndef TUNELUA_OPENCL_H
#define TUNELUA_OPENCL_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

typedef struct tl_ocl_module tl_ocl_module;

/* Number of OpenCL devices (0 when there is no platform or no ICD loader
** finds one; never an error). */
int tl_opencl_device_count(void);
/* One device's properties as a JSON object text (lives until the next call
** in this thread): name, vendor, platform, version, type ("gpu", "cpu",
** ...), max_work_group_size, max_work_item_sizes, local_mem_bytes,
** global_mem_bytes, compute_units, max_clock_mhz, subgroup_size (warp/wavefront
** size estimate), fp16, fp64, extensions. TL_E_ARG for a bad index. */
int tl_opencl_device_info(tl_ctx *ctx, int dev, const char **json);
/* Hardware params of a device (for the tuners): max work-group size, local
** memory bytes, compute units, subgroup (warp) size. */
int tl_opencl_hw_params(tl_ctx *ctx, int dev, int64_t *max_wg, int64_t *local_mem,
                        int64_t *compute_units, int64_t *warp_size);

/* Build OpenCL C source for device dev (cached by source, options and
** device for the life of the process). A failed build is TL_E_BUILD with
** the build log in the message. Used by the tests and for checks. */
int tl_opencl_build_program(tl_ctx *ctx, int dev, const char *source, const char *options);

/* Generate OpenCL C for a lowered function and build it for device dev:
** one kernel per launch region (see core/codegen/opencl.c). */
int tl_opencl_build(tl_ctx *ctx, tl_lowered *f, int dev, tl_ocl_module **out);
/* Only the OpenCL C of f (no device needed); *src lives in f's owner buf
** until the next call of this function in this thread. */
int tl_opencl_source(tl_ctx *ctx, tl_lowered *f, const char **src);
void tl_ocl_module_free(tl_ocl_module *m);
const char *tl_ocl_module_source(const tl_ocl_module *m);
int tl_ocl_module_device(const tl_ocl_module *m);
int tl_ocl_module_num_kernels(const tl_ocl_module *m);
/* Launch configuration of kernel k: grid (work-groups) and block (work-items
** per group) sizes per dimension, and the kernel's name. */
const char *tl_ocl_module_kernel(const tl_ocl_module *m, int k, int64_t *grid, int64_t *block);
double tl_ocl_module_compile_seconds(const tl_ocl_module *m);
/* Run every kernel in order on the arrays (on the module's OpenCL device,
** dtype and shape as lowered) and wait. A work-group size the device or the
** compiled kernel cannot run is TL_E_RUNTIME naming the limit; nothing is
** launched then. */
int tl_ocl_module_call(tl_ctx *ctx, tl_ocl_module *m, tl_array **args, int nargs);
/* The time evaluator (tl_module_time's contract): one warm-up call, then
** repeat measurements of number calls each (number grows until one lasts
** min_repeat_ms). Seconds per call from profiling events (first start to
** last end), or from the host clock around the calls and a final wait when
** wallclock is 1. */
int tl_ocl_module_time(tl_ctx *ctx, tl_ocl_module *m, tl_array **args, int nargs, int number,
                       int repeat, double min_repeat_ms, int wallclock, double *secs_out);

/* ---- modules that travel (docs/opencl.md "Modules that travel") ----
** A module is its OpenCL C plus a manifest (JSON): the function name, the
** arguments (dtype, shape), global temporaries (bytes), and per kernel its
** name, grid, block, __local bytes and argument slots. Built on one machine,
** it is recreated on another from these two texts. */
/* The manifest of a module (malloc'd, tl_opencl_str_free). */
int tl_ocl_module_manifest(tl_ctx *ctx, const tl_ocl_module *m, char **json);
/* OpenCL C and manifest of a lowered function without any device
** (malloc'd, tl_opencl_str_free). */
int tl_opencl_source_manifest(tl_ctx *ctx, tl_lowered *f, char **source, char **manifest);
void tl_opencl_str_free(char *s);
/* Check a manifest against its source without a device: strict JSON (no
** unknown keys), bounded sizes, kernels the source defines, slots in range.
** A violation is TL_E_PARSE naming the field. */
int tl_ocl_manifest_check(tl_ctx *ctx, const char *source, const char *manifest);
/* Recreate a module on device dev from source + manifest (checked as
** tl_ocl_manifest_check, then built as tl_opencl_build: a work-group the
** device cannot run is TL_E_RUNTIME naming the limit, a driver refusal
** TL_E_BUILD with the log). */
int tl_ocl_module_from_source(tl_ctx *ctx, const char *source, const char *manifest, int dev,
                              tl_ocl_module **out);

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
