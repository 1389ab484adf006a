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

#endif
