/*
** partition.h -- loop partitioning of the loops a schedule marks with the
** pragma "loop_partition" or "loop_partition_each" (core/te/partition.c).
*/
#ifndef TL_PARTITION_H
#define TL_PARTITION_H

#include "../ir/ir.h"

/* Each FOR under an ATTR "pragma_loop_partition" in root (lowered IR, after
** flattening) is split into up to three loops over consecutive ranges of its
** variable: a middle one over the longest run of values at which every guard
** of the body that reads the variable (IF conditions, if_then_else and select
** conditions, their conjuncts) is proven true for all values of the loops
** inside and around it, and the values before and after it, where the guards
** stay. The simplifier then drops the proven guards from the middle loop.
** Marked loops are partitioned outermost first; the ATTR goes away; a loop
** with no such run (or where every value qualifies) stays one loop.
** Under "pragma_loop_partition_each" each value before and after the run is a
** piece of its own (up to 8 a side), and in each piece an accumulation
** buf[i] = buf[i] + if_then_else(c, x, 0) * y whose c is proven false is dropped
** (it adds the padding), and a guard conjunct that no loop inside the piece
** changes and that is not proven is unswitched: IF (c) the piece with c true,
** else the piece with c false (up to two such guards). A loop so marked whose
** variable no guard reads is unswitched the same way, as a whole: the channel
** loop of a padded conv inside its taps tests the output row's guard once. */
tl_ref tl_partition_loops(tl_ir *ir, tl_ref root);

/* 1 when root holds a loop marked for partitioning, else 0. */
int tl_partition_marked(const tl_ir *ir, tl_ref root);

/* 1 when expression e holds if_then_else(c, x, 0) (a padding's guarded load,
** whose taps a partitioned border drops), else 0. */
int tl_partition_zero_guard(const tl_ir *ir, tl_ref e);

#endif
