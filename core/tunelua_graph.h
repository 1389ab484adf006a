/*
** tunelua_graph.h -- part of the public API (included by core/tunelua.h):
** graph executor: memory plan and run loop (core/graph).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_GRAPH_H
#define TUNELUA_GRAPH_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* ---- memory plan --------------------------------------------------------
** Offsets in one arena for n buffers with lifetimes [first[i], last[i]]
** (step indices, inclusive): two buffers share bytes only when their
** lifetimes do not overlap. Sizes are rounded up to align (a power of two,
** >= 1). Greedy by size, largest first, each at the lowest offset that fits
** among the already placed buffers it overlaps with. Writes offsets[n] and
** the arena size *total (0 when n is 0). */
int tl_graph_plan(tl_ctx *ctx, int n, const int64_t *sizes, const int *first, const int *last,
                  int64_t align, int64_t *offsets, int64_t *total);

/* Storage slots for devices whose arguments cannot start at a byte offset
** (OpenCL): storage[i] in [0, *nstorage) for each buffer, two buffers share a
** slot only when their lifetimes do not overlap; storage_bytes (capacity n)
** gets each slot's size (the largest aligned size it holds). Buffers in order
** of first use, each in the smallest free slot that fits, else the largest
** free one (grown), else a new one. */
int tl_graph_plan_storage(tl_ctx *ctx, int n, const int64_t *sizes, const int *first,
                          const int *last, int64_t align, int *storage, int64_t *storage_bytes,
                          int *nstorage);

/* ---- executor -----------------------------------------------------------
** A graph executor: an arena of planned intermediate buffers, a table of
** slots (arrays: views into the arena, or external arrays such as params
** and inputs, referenced by the executor), a table of kernels (function
** pointers resolved from compiled modules, which must outlive the executor)
** and a list of steps (kernel, slot arguments) that tl_graph_exec_run calls
** in order, in C. */
typedef struct tl_graph_exec tl_graph_exec;

int tl_graph_exec_new(tl_ctx *ctx, int64_t arena_bytes, tl_graph_exec **out);
void tl_graph_exec_free(tl_graph_exec *e);
/* A slot viewing the arena at byte offset (64-byte aligned storage). */
int tl_graph_exec_slot_view(tl_ctx *ctx, tl_graph_exec *e, int64_t offset, int ndim,
                            const int64_t *shape, int dtype, int *slot);
/* A slot holding a reference to a (the executor keeps it alive). */
int tl_graph_exec_slot_array(tl_ctx *ctx, tl_graph_exec *e, tl_array *a, int *slot);
/* A new array sharing the slot's storage (caller frees; keeps the arena alive). */
int tl_graph_exec_slot_ref(tl_ctx *ctx, tl_graph_exec *e, int slot, tl_array **out);
/* Copy src into the slot (same shape and dtype). */
int tl_graph_exec_set(tl_ctx *ctx, tl_graph_exec *e, int slot, const tl_array *src);
/* Resolve kernel fname of module m. */
int tl_graph_exec_add_kernel(tl_ctx *ctx, tl_graph_exec *e, tl_module *m, const char *fname,
                             int *kernel);
int tl_graph_exec_add_step(tl_ctx *ctx, tl_graph_exec *e, int kernel, const int *slots,
                           int nslots);
/* Run every step in order; a failing kernel stops the run with its message
** (naming the step and the kernel). */
int tl_graph_exec_run(tl_ctx *ctx, tl_graph_exec *e);
/* Time whole runs as the time evaluator does: one warm-up run, then repeat
** measurements of number runs each (number grows until one lasts at least
** min_repeat_ms when > 0); secs_out[repeat] = mean seconds per run. */
int tl_graph_exec_time(tl_ctx *ctx, tl_graph_exec *e, int number, int repeat,
                       double min_repeat_ms, double *secs_out);
/* Per-step time: mean seconds of each step over number runs into
** secs_out[num_steps] (profiling). */
int tl_graph_exec_profile(tl_ctx *ctx, tl_graph_exec *e, int number, double *secs_out);

/* ---- batched kernel builds -----------------------------------------------
** The lowered functions fs[0..n) generated as C and compiled by nparts
** compiler runs (in parallel threads), each a shared object holding several
** kernels (one source file per kernel); cached on disk by the sources' hash
** (toolchain tc, a target's, NULL: the defaults; cflags, when not NULL,
** replaces tc's flags; timeout_s <= 0: none). */
typedef struct tl_graph_lib tl_graph_lib;
int tl_graph_lib_build(tl_ctx *ctx, tl_lowered *const *fs, int n, int nparts,
                       const tl_toolchain *tc, const char *cflags, double timeout_s,
                       tl_graph_lib **out);
void tl_graph_lib_free(tl_graph_lib *l);
double tl_graph_lib_compile_seconds(const tl_graph_lib *l);   /* 0 when all cached */
/* The parts' shared objects (for export): their count, part i's path (NULL
** when out of range), and the part holding kernel fname (-1: none). */
int tl_graph_lib_num_parts(const tl_graph_lib *l);
const char *tl_graph_lib_part_path(const tl_graph_lib *l, int i);
int tl_graph_lib_part_of(const tl_graph_lib *l, const char *fname);
/* The lowered functions fs[0..n) generated as C for toolchain tc (its vector
** width) and compiled by one compiler run into the shared object out_path,
** which is not loaded: a library for another machine (export_library for a
** cross target). Not cached. */
int tl_graph_lib_compile(tl_ctx *ctx, tl_lowered *const *fs, int n, const tl_toolchain *tc,
                         const char *cflags, double timeout_s, const char *out_path);
/* Resolve kernel fname of l (l must outlive e). */
int tl_graph_exec_add_kernel_lib(tl_ctx *ctx, tl_graph_exec *e, tl_graph_lib *l,
                                 const char *fname, int *kernel);

/* ---- artifacts: a compiled network that travels (core/graph/artifact.c) ----
** Load dir/graph (the JSON description tunelua.graph.executor's export writes:
** libs, kernels, slots, steps, inputs, outputs) with dir/params (the constant
** arrays' bytes; NULL or "" when the graph has none) into an executor of its
** own. Names are plain file names; the description is checked whole (indices,
** sizes; max_bytes bounds the arena, storages and arrays together, <= 0: 1 TiB)
** before memory is allocated or a library opened. An OpenCL graph runs on
** OpenCL device dev (ignored for a C graph): its arrays live there and each
** kernel is a module built from its source and manifest. Inputs and outputs
** are slots of the executor (tl_graph_exec_set, tl_graph_exec_slot_ref). */
typedef struct tl_graph_artifact tl_graph_artifact;
int tl_graph_artifact_load(tl_ctx *ctx, const char *dir, const char *graph, const char *params,
                           int64_t max_bytes, int dev, tl_graph_artifact **out);
void tl_graph_artifact_free(tl_graph_artifact *a);
tl_graph_exec *tl_graph_artifact_exec(tl_graph_artifact *a);
int tl_graph_artifact_device(const tl_graph_artifact *a);   /* TL_DEV_CPU or TL_DEV_OPENCL */
int tl_graph_artifact_num_inputs(const tl_graph_artifact *a);
int tl_graph_artifact_num_outputs(const tl_graph_artifact *a);
int tl_graph_artifact_num_steps(const tl_graph_artifact *a);
const char *tl_graph_artifact_input_name(const tl_graph_artifact *a, int i);
int tl_graph_artifact_input_slot(const tl_graph_artifact *a, int i);
int tl_graph_artifact_output_slot(const tl_graph_artifact *a, int i);
/* The same with kernels of a host kind (an accelerator's kernels driven from
** the host, e.g. VTA's groups: tl_vta_graph_kind). The description then has a
** section named as the kind (its state: "vta": {...}) and kernels of that kind
** ({"vta": {...}}); kind NULL refuses such a description. The state lives as
** long as the artifact (tl_graph_artifact_host_state). */
typedef struct tl_graph_host_kind tl_graph_host_kind;
int tl_graph_artifact_load_kind(tl_ctx *ctx, const char *dir, const char *graph,
                                const char *params, int64_t max_bytes, int dev,
                                const tl_graph_host_kind *kind, tl_graph_artifact **out);
void *tl_graph_artifact_host_state(const tl_graph_artifact *a);

/* ---- OpenCL -----------------------------------------------------------
** A slot viewing storage (a device array, e.g. 1-D uint8 on opencl:k) from
** byte 0 with its own shape and dtype (must fit; keeps storage alive).
** (struct tl_ocl_module is tunelua_opencl.h's tl_ocl_module.) */
struct tl_ocl_module;
int tl_graph_exec_slot_storage(tl_ctx *ctx, tl_graph_exec *e, tl_array *storage, int ndim,
                               const int64_t *shape, int dtype, int *slot);
/* A kernel that is an OpenCL module (m must outlive e); its steps launch
** every kernel of m on the slots' device arrays and wait (tl_ocl_module_call). */
int tl_graph_exec_add_kernel_ocl(tl_ctx *ctx, tl_graph_exec *e, struct tl_ocl_module *m,
                                 const char *name, int *kernel);
/* Build fs[0..n) for OpenCL device dev into out[n] (tl_opencl_build each; the
** first alone, the others on nthreads > 1 pool threads). On failure every
** out[i] is NULL. */
int tl_graph_ocl_build(tl_ctx *ctx, tl_lowered *const *fs, int n, int dev, int nthreads,
                       struct tl_ocl_module **out);

/* One program for all groups: fs[0..n)'s OpenCL C joined and built once for
** device dev (a queue of its own in the device's context; every kernel's
** work-group checked against the device and the compiled kernel). Steps of
** its groups enqueue without waiting; a run ends with one clFinish. */
typedef struct tl_graph_ocl_lib tl_graph_ocl_lib;
int tl_graph_ocl_lib_build(tl_ctx *ctx, tl_lowered *const *fs, int n, int dev,
                           tl_graph_ocl_lib **out);
void tl_graph_ocl_lib_free(tl_graph_ocl_lib *l);
/* Group g of l as a kernel of e (l must outlive e; one library per executor);
** its steps' arguments are checked (device, dtype, shape) when added. */
int tl_graph_exec_add_kernel_ocl_lib(tl_ctx *ctx, tl_graph_exec *e, tl_graph_ocl_lib *l,
                                     int group, int *kernel);

/* cdef:end */

/* A kernel that is a host function over the step's arrays (an accelerator's
** kernel driven from the host: the function copies its inputs to the device,
** runs it and copies the result back). ud must outlive e; a failure returns
** an error code with the message in ctx, reported naming the step. */
typedef int (*tl_graph_host_fn)(void *ud, tl_ctx *ctx, tl_array *const *args, int nargs);
int tl_graph_exec_add_kernel_host(tl_ctx *ctx, tl_graph_exec *e, const char *name,
                                  tl_graph_host_fn fn, void *ud, int *kernel);

/* A host kind of artifact kernels (tl_graph_artifact_load_kind): open makes
** the state from the section's JSON text (bytes: the memory it will hold, counted
** against max_bytes); add adds kernel `index` from its object's JSON text as a
** host kernel of e and says how many arguments its steps take; close frees the
** state after the executor. Errors name the field; the loader prefixes where. */
struct tl_graph_host_kind {
  const char *name;
  int (*open)(tl_ctx *ctx, const char *section_json, int64_t max_bytes, void **state);
  int (*add)(tl_ctx *ctx, void *state, const char *kernel_json, tl_graph_exec *e, int *kernel,
             int *nargs);
  void (*close)(void *state);
};

#ifdef __cplusplus
}
#endif
#endif
