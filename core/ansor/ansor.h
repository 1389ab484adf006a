/*
** ansor.h -- the auto-scheduler's view of a compute DAG (core/ansor).
**
** The auto-scheduler decides per stage which rule applies (inline it, tile
** it on several levels, fuse its consumer into its tiles) from a static
** analysis of the DAG's accesses, made once per task (analysis.c):
**
**   simple access   every index of a load is an axis var of the reading op,
**                   that var plus or minus a constant, or a constant
**   injective       a compute op whose loads are all simple accesses (no
**                   reduction: a reduce var is not an axis var); every
**                   placeholder is injective
**   strictly        injective, and every load names its axes in the op's
**   inlinable       axis order without repeating one (broadcasts may leave
**                   axes out; transposes do not qualify), and no exp and no
**                   branch (select, if_then_else) in the body; an op that
**                   reads nothing is strictly inlinable
**   data reuse      some producer's loads, taken together, miss an output
**                   axis of extent > 1: each element of that producer is
**                   read for several output elements
**   multi-level     at least two producers miss such an axis, or one does
**   tiling          and the op has a reduction (GEMM, conv); never with the
**                   attribute "simplify_const_tensor_indices"
**   output          the op produces an output tensor of the DAG (outputs
**                   that other ops also read count)
**   elementwise     op E-matches target when following single consumers
**   match           from op reaches target, each step between ops of equal
**                   shape whose loads are simple, complete (every axis of
**                   the reader of extent > 1: a broadcast may read a
**                   dimension of extent 1 at the constant 0), ordered and
**                   not repeated
**
** Producers and consumers are op ids (dag order), ascending. The analysis
** points into its dag, which must outlive it.
*/
#ifndef TL_ANSOR_H
#define TL_ANSOR_H

#include "../te/te.h"

typedef struct tl_ansor_stage {
  uint8_t compute;                /* 0: placeholder */
  uint8_t has_reduce;
  uint8_t injective, strictly_inlinable, needs_mlt, has_reuse, is_output;
  uint8_t has_branch, has_expensive; /* select/if_then_else; exp */
  int nproducers, nconsumers;
  int *producers, *consumers;     /* op ids into tl_ansor_analysis.ids */
} tl_ansor_stage;

struct tl_ansor_analysis {
  const tl_dag *dag;
  int nops;
  tl_ansor_stage *st;             /* nops stages, dag order */
  int *ids;                       /* storage of every producer/consumer list */
};

/* The stage's consumers, looking through the ops marked in inlined (nops
** bytes, may be NULL: none): an inlined consumer is replaced by its own
** consumers, transitively. Writes distinct ids, ascending, to out (nops
** entries); returns the count. */
int tl_ansor_consumers_through(const struct tl_ansor_analysis *a, int op,
                               const uint8_t *inlined, int *out);

/* Hardware params (hwparams.c), TVM's field order: num_cores,
** vector_unit_bytes, cache_line_bytes, max_shared_memory_per_block,
** max_local_memory_per_block, max_threads_per_block, max_vthread_extent,
** warp_size. */
#define TL_ANSOR_HW_NFIELDS 8
struct tl_ansor_hw {
  int64_t v[TL_ANSOR_HW_NFIELDS];
};

#endif
