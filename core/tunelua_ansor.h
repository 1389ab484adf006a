/*
** tunelua_ansor.h -- part of the public API (included by core/tunelua.h):
** the auto-scheduler's static analysis of a compute DAG (core/ansor/).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_ANSOR_H
#define TUNELUA_ANSOR_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* ---- ansor: static analysis of a compute DAG (core/ansor) ----------------
** Per op (placeholders included, dag order): injective, strictly inlinable,
** needs multi-level tiling, has data reuse, is an output; its producers and
** consumers; the element-wise match relation the sketch rules fuse
** consumers by (definitions in core/ansor/ansor.h). The analysis reads the
** dag, which must outlive it. Predicates return 1 or 0, and -1 for a bad op
** id; list queries return -1 for a bad op or index. */

typedef struct tl_ansor_analysis tl_ansor_analysis;

int tl_ansor_analyze(tl_ctx *ctx, const tl_dag *dag, tl_ansor_analysis **out);
void tl_ansor_analysis_free(tl_ansor_analysis *a);
int tl_ansor_num_ops(const tl_ansor_analysis *a);
int tl_ansor_is_injective(const tl_ansor_analysis *a, int op);
int tl_ansor_is_strictly_inlinable(const tl_ansor_analysis *a, int op);
int tl_ansor_needs_multi_level_tiling(const tl_ansor_analysis *a, int op);
int tl_ansor_has_reuse(const tl_ansor_analysis *a, int op);
int tl_ansor_is_output(const tl_ansor_analysis *a, int op);
int tl_ansor_has_reduce(const tl_ansor_analysis *a, int op);
int tl_ansor_num_consumers(const tl_ansor_analysis *a, int op);
int tl_ansor_consumer(const tl_ansor_analysis *a, int op, int i);
int tl_ansor_num_producers(const tl_ansor_analysis *a, int op);
int tl_ansor_producer(const tl_ansor_analysis *a, int op, int i);
/* Whether op element-wise matches target (op itself: 1). */
int tl_ansor_elementwise_match(const tl_ansor_analysis *a, int op, int target);
/* Whether op has exactly one consumer, looking through the ops marked in
** inlined (one byte per op, may be NULL), that it element-wise matches and
** that does not reduce when op does: the consumer multi-level tiling fuses.
** Writes that consumer to *consumer (-1 when the answer is 0). */
int tl_ansor_elementwise_consumer(const tl_ansor_analysis *a, int op, const uint8_t *inlined,
                                  int *consumer);

/* ---- ansor: hardware params (core/ansor/hwparams.c) ----------------------
** Eight int64 fields, by name: num_cores, vector_unit_bytes,
** cache_line_bytes, max_shared_memory_per_block, max_local_memory_per_block,
** max_threads_per_block, max_vthread_extent, warp_size. tl_ansor_hw_new
** gives a target's defaults: a CPU target's from this process's affinity
** mask and the target's float32 lanes (the host's, or -mcpu's); an OpenCL
** target's from device_info (tl_opencl_device_info's JSON, of a local
** device or an RPC server's; NULL: none), else its family's fixed table
** (tl_target_fixed_hw_params); an OpenCL target with neither is an error.
** tl_ansor_hw_new_values takes all eight values in that order. Set and get
** name the field; an unknown field or a value out of range (num_cores: -1
** or >= 1; vector and cache-line bytes >= 1; the others >= 0; all at most
** INT32_MAX) is TL_E_ARG naming it. */

typedef struct tl_ansor_hw tl_ansor_hw;
struct tl_target;                   /* tunelua_target.h's tl_target */

int tl_ansor_hw_new(tl_ctx *ctx, const struct tl_target *t, const char *device_info, tl_ansor_hw **out);
int tl_ansor_hw_new_values(tl_ctx *ctx, const int64_t *values, tl_ansor_hw **out);
void tl_ansor_hw_free(tl_ansor_hw *hw);
int tl_ansor_hw_num_fields(void);
const char *tl_ansor_hw_field_name(int i);     /* NULL past the end */
int tl_ansor_hw_get(tl_ctx *ctx, const tl_ansor_hw *hw, const char *field, int64_t *value);
int tl_ansor_hw_set(tl_ctx *ctx, tl_ansor_hw *hw, const char *field, int64_t value);

/* cdef:end */

#ifdef __cplusplus
}
#endif

#endif
