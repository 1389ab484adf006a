/*
** conv_dag.h -- the padded NCHW conv2d the C tests schedule and lower
** (test_lower.c, test_ansor_feature.c), the scheduling of a topi op the
** auto-scheduler tests share, and the Ansor-like CPU sketch both
** apply to its 64-channel 56x56 form.
*/
#ifndef TL_TEST_CONV_DAG_H
#define TL_TEST_CONV_DAG_H

#include "te/schedule.h"
#include "topi/topi.h"

/* Placeholders X (N, CI, H, W) and W (CO, CI, K, K) (their tensor ids into
** *tx, *tw); pad(n, c, h, w) = X[n, c, h - pad, w - pad] inside, 0 outside;
** conv(n, f, y, x) = sum_{rc, ry, rx} pad(n, rc, y*s + ry, x*s + rx) * W(f, rc, ry, rx)
** (y + ry at stride 1). Returns conv's tensor id. */
int tl_test_conv2d(tl_dag *dag, tl_ctx *ctx, int64_t N, int64_t CI, int64_t H, int64_t W,
                   int64_t CO, int64_t K, int64_t pad, int64_t stride, int *tx, int *tw);

/* The op whose outputs topi gave as out[0..no) in dag, followed by a relu when relu is
** set, scheduled (dag freed); args gets the placeholders and the output of the
** schedule's dag (*nargs of them). */
tl_sched *tl_test_sched_topi(tl_ctx *ctx, tl_dag *dag, int *out, int no, int relu, int *args, int *nargs);

/* The tensor id of op name in the schedule's (extracted) dag. */
int tl_test_tensor(tl_sched *s, const char *name);

/* Stages X pad W conv -> X pad W conv.local conv: cache_write, multi-level
** tiles, pad computed per tile (for tl_test_conv2d(1, 64, 56, 56, 64, 3, 1, 1)). */
#define TL_TEST_CONV_SKETCH                                                                   \
  "[[\"CHW\", 3, \"local\"],"                                                                 \
  " [\"SP\", 4, 1, 64, [8, 4], 1], [\"SP\", 4, 4, 56, [7, 2], 1], [\"SP\", 4, 7, 56, [8], 1]," \
  " [\"RE\", 4, [0, 1, 4, 7, 2, 5, 8, 3, 6]],"                                                \
  " [\"FU\", 4, [0, 1, 2, 3]], [\"AN\", 4, 0, 3],"                                            \
  " [\"CA\", 3, 4, 0],"                                                                       \
  " [\"SP\", 3, 4, 64, [16], 1], [\"RE\", 3, [4, 5, 6, 7, 0, 1, 2, 3]],"                      \
  " [\"CA\", 1, 3, 0], [\"AN\", 3, 7, 2], [\"PR\", 3, 0, \"auto_unroll_max_step$16\"]]"

#endif
