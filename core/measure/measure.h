/* measure.h -- internal helpers of core/measure shared with rpc/. */
#ifndef TL_MEASURE_H
#define TL_MEASURE_H

#include "../base/base.h"

enum {                           /* MeasureErrorNo (formats §1.5) */
  TL_MEASURE_NO_ERROR = 0,
  TL_MEASURE_INSTANTIATION_ERROR = 1,
  TL_MEASURE_COMPILE_HOST = 2,
  TL_MEASURE_COMPILE_DEVICE = 3,
  TL_MEASURE_RUNTIME_DEVICE = 4,
  TL_MEASURE_WRONG_ANSWER = 5,
  TL_MEASURE_BUILD_TIMEOUT = 6,
  TL_MEASURE_RUN_TIMEOUT = 7,
  TL_MEASURE_UNKNOWN_ERROR = 8
};

#define TL_MEASURE_MAX_ARGS 64
#define TL_MEASURE_MAX_REPEAT 1024

/* In a measurement child: crash signals back to their defaults (no inherited or sanitizer
** handler), and death with the process that measures. */
void tl_measure_child_signals(void);
/* All n bytes of p to fd (retried on EINTR; given up on a closed or failing pipe). */
void tl_measure_put(int fd, const void *p, size_t n);
/* A measurement child's answer on fd: int32 error_no, int32 ncosts, double costs[ncosts],
** then the message text (msg may be NULL). */
void tl_measure_child_reply(int fd, int error_no, int ncosts, const double *costs, const char *msg);
/* Read such an answer (at most repeat costs): 1 and the outputs filled (*msg malloc'd or
** NULL), or 0 when o holds none. */
int tl_measure_read_reply(const char *o, size_t olen, int repeat, double *costs, int *ncosts,
                          int *error_no, char **msg);
/* The outcome of a child that ended by itself (TL_PROC_OK): its answer when it wrote one, else
** error_no TL_MEASURE_RUNTIME_DEVICE and msg "<who> ended without a result[: its stderr]". */
void tl_measure_ok_reply(const tl_proc_result *res, int repeat, const char *who, double *costs,
                         int *ncosts, int *error_no, char **msg);

#endif
