/*
** darray.h -- the device side's raw-array helpers (device/darray.c): dtype names, seeded random
** fill and the comparison with a reference, shared by tunelua-rpc's C and OpenCL measurements.
*/
#ifndef TL_DEVICE_DARRAY_H
#define TL_DEVICE_DARRAY_H

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

/* "float32", "int8", "bool", ...: 0, or -1 for an unknown name (NULL included). */
int dev_dtype_parse(const char *s, DLDataType *d);
/* Bytes per element (bool: 1). */
size_t dev_dtype_bytes(DLDataType d);
/* Seeded values over bytes of p: floats uniform in [0, 1), bool {0, 1}, integers [0, 10). */
void dev_random_fill(void *p, size_t bytes, DLDataType d, uint64_t seed);
/* 0 when a equals want (float32/float64 within |a - w| <= rtol |w| + atol, others exactly);
** else 1 with the first differing element's index and values. */
int dev_compare(const void *a, const void *want, size_t bytes, DLDataType d, double rtol,
                double atol, size_t *at, double *got, double *expected);

#endif
