/*
** tunelua_target.h -- part of the public API (included by core/tunelua.h):
** targets. A target string names a device family and its options, TVM's
** grammar: a kind, then options "-name=value" (or "-name", a flag):
**
**   "<kind> -mcpu=<cpu>"    "<kind>"    "<kind> -device=<device> -model=<model>"
**
** Parsing picks the family (targets/targets.c holds the one list; each
** family lives in its folder targets/<family>/) and computes once what the
** rest of the engine asks: keys, hardware facts (vector lanes, registers),
** the default-schedule class, the code generator, the device type, the
** TopHub package, the strategy (which templates implement which graph op).
** The engine (core/) declares these prototypes and never names a family; the
** definitions are in targets/targets.c. The region between the cdef markers
** is LuaJIT-FFI clean.
*/
#ifndef TUNELUA_TARGET_H
#define TUNELUA_TARGET_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

typedef struct tl_target tl_target;

/* Parse a target string. Unknown kinds, malformed words and options the
** family does not take are errors that name them and the string. */
int tl_target_parse(tl_ctx *ctx, const char *str, tl_target **out);
/* Parse a target string as a log record names it (records come from other
** tools): any kind (family "" when no family takes it) and any option. */
int tl_target_parse_record(tl_ctx *ctx, const char *str, tl_target **out);
void tl_target_free(tl_target *t);

const char *tl_target_str(const tl_target *t);
const char *tl_target_kind(const tl_target *t);          /* the first word */
const char *tl_target_family(const tl_target *t);        /* the family's name, or "" */
const char *tl_target_device(const tl_target *t);        /* -device, or NULL */
const char *tl_target_model(const tl_target *t);         /* -model, or NULL */
/* Keys, most specific first: -keys (comma-separated), then -device, then
** (with no -keys) the kind's default keys; without repeats. */
int tl_target_num_keys(const tl_target *t);
const char *tl_target_key(const tl_target *t, int i);
/* Options in string order; the value is NULL for a flag. -target= (an old
** name) reads as mtriple. */
int tl_target_num_options(const tl_target *t);
const char *tl_target_option_name(const tl_target *t, int i);
const char *tl_target_option_value(const tl_target *t, int i);
int tl_target_lanes(const tl_target *t);                 /* float32 vector lanes (0: unknown) */
/* The auto-scheduler's hardware params of a GPU the family knows without
** asking the device (num_cores, vector_unit_bytes, cache_line_bytes,
** max_shared_memory_per_block, max_local_memory_per_block,
** max_threads_per_block, max_vthread_extent, warp_size): 1 and v[0..8)
** filled, or 0 (none: the device's info decides). */
int tl_target_fixed_hw_params(const tl_target *t, int64_t *v);
int tl_target_registers(const tl_target *t);             /* vector registers (0: unknown) */
/* TL_OK when kernels built for t can run on this host: a CPU target naming
** (-mcpu, -mattr) an extension this CPU lacks is TL_E_UNSUPPORTED naming the
** extension and the CPU. For builds and measurements here; parsing, logs and
** builds for another machine (RPC) take any target. */
int tl_target_check_host(tl_ctx *ctx, const tl_target *t);
/* The default-schedule class tl_topi_default_schedule takes ("cpu",
** "opencl"), the backend (code generator and build: "c", "opencl"); NULL
** without a family. */
const char *tl_target_schedules(const tl_target *t);
const char *tl_target_backend(const tl_target *t);
/* Where the target's kernels run and are timed: TL_DEV_* (TL_DEV_CPU: host C
** kernels), the DLPack type of a log's GPU kind no family takes ("cuda"), or 0. */
int tl_target_device_type(const tl_target *t);
/* The toolchain a C backend builds with (static: lives past t; pass it to
** tl_lowered_build, tl_graph_lib_build, tl_measure_build_*); NULL for other
** backends and without a family (the builds then use the defaults). Its
** compiler (NULL: the default, $TUNELUA_CC or the one libtunelua was built
** with), its flags (never NULL: "-O3 -march=native" by default) and its cross
** prefix ("" when none). */
const tl_toolchain *tl_target_toolchain(const tl_target *t);
const char *tl_target_cc(const tl_target *t);
const char *tl_target_cflags(const tl_target *t);
const char *tl_target_cross_prefix(const tl_target *t);
const char *tl_target_tophub_package(const tl_target *t); /* NULL: none */
const char *tl_target_tophub_version(const tl_target *t);
/* 1 when a graph anchor without any record takes its first template's
** fallback config (rather than the default schedule). */
int tl_target_fallback_untuned(const tl_target *t);
/* The strategy, row i: graph op variant ("conv2d", "depthwise_conv2d",
** "dense"), template name, args form ("conv_layout": data, kernel, strides,
** padding, dilation, layouts, out_dtype; "conv": without the layouts;
** "dense": data, weight, null, out_dtype) and condition (NULL: always;
** "3x3s1": a 3x3 kernel with stride 1 and dilation 1). 0, or -1 past the end. */
int tl_target_num_impls(const tl_target *t);
int tl_target_impl(const tl_target *t, int i, const char **op, const char **template_name,
                   const char **args, const char **when);
/* The TopHub packages of the families, i-th (package and version): 0, or -1
** past the end. */
int tl_target_tophub_list(int i, const char **package, const char **version);

/* cdef:end */

#ifdef __cplusplus
}
#endif

#endif
