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

/* cdef:end */

#ifdef __cplusplus
}
#endif

#endif
