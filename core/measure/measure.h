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

/* TVM's time evaluator on a raw kernel pointer; -1 with *kcode on a kernel failure. */
int tl_measure_time_fn(void *fn, void **dl, int nargs, int number, int repeat,
                       double min_repeat_ms, int cache_flush, double *costs, int32_t *kcode);

#endif
