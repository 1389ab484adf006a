/*
** pool.h -- helpers of pool.c shared with the N-d pooling of nnnd.c.
*/
#ifndef TL_TOPI_POOL_H
#define TL_TOPI_POOL_H

#include "topi.h"

/* attribute pool_type ("max" | "avg"; defaults from the op name): *is_max = 1 or 0 */
int tl_topi_pool_kind(tl_topi_call *c, int *is_max);
/* count of r in [0, K) with lo <= start + r*d < hi */
tl_ref tl_topi_window_count(tl_ir *ir, tl_ref start, int64_t K, int64_t d, int64_t lo, int64_t hi);
/* the pad value of a pooling: the max-reduction's identity of dt (is_max), else 0 */
double tl_topi_pool_pad_value(tl_dag *dag, tl_type dt, int is_max);

#endif
