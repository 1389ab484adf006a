/*
** darray.c -- raw-array helpers of the device side (darray.h). Plain C, no dependencies.
*/
#include "darray.h"

#include <math.h>
#include <string.h>

int dev_dtype_parse(const char *s, DLDataType *d) {
  static const struct { const char *name; uint8_t code, bits; } types[] = {
      {"float32", kDLFloat, 32}, {"float64", kDLFloat, 64}, {"float16", kDLFloat, 16},
      {"int8", kDLInt, 8},       {"int16", kDLInt, 16},     {"int32", kDLInt, 32},
      {"int64", kDLInt, 64},     {"uint8", kDLUInt, 8},     {"bool", kDLUInt, 1}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (s && strcmp(s, types[i].name) == 0) {
      d->code = types[i].code, d->bits = types[i].bits, d->lanes = 1;
      return 0;
    }
  return -1;
}

size_t dev_dtype_bytes(DLDataType d) { return d.bits == 1 ? 1 : d.bits / 8; }

void dev_random_fill(void *data, size_t bytes, DLDataType dt, uint64_t seed) {
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  size_t n = bytes / dev_dtype_bytes(dt);
  unsigned char *p = data;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    double u = (double)(x >> 11) / 9007199254740992.0;
    switch (dt.code * 100 + dt.bits) {
    case kDLFloat * 100 + 32: ((float *)p)[i] = (float)u; break;
    case kDLFloat * 100 + 64: ((double *)p)[i] = u; break;
    case kDLInt * 100 + 32: ((int32_t *)p)[i] = (int32_t)(u * 10); break;
    case kDLInt * 100 + 64: ((int64_t *)p)[i] = (int64_t)(u * 10); break;
    case kDLInt * 100 + 8: ((int8_t *)p)[i] = (int8_t)(u * 10); break;
    case kDLUInt * 100 + 1: p[i] = u < 0.5; break;
    default: p[i * dev_dtype_bytes(dt)] = (unsigned char)(u * 10); break;
    }
  }
}

int dev_compare(const void *a, const void *want, size_t bytes, DLDataType d, double rtol,
                double atol, size_t *at, double *got, double *expected) {
  if (d.code == kDLFloat && (d.bits == 32 || d.bits == 64)) {
    size_t n = bytes / (d.bits / 8);
    for (size_t k = 0; k < n; k++) {
      double p = d.bits == 32 ? ((const float *)a)[k] : ((const double *)a)[k];
      double q = d.bits == 32 ? ((const float *)want)[k] : ((const double *)want)[k];
      if (!(fabs(p - q) <= rtol * fabs(q) + atol)) {
        *at = k, *got = p, *expected = q;
        return 1;
      }
    }
    return 0;
  }
  size_t es = dev_dtype_bytes(d);
  for (size_t k = 0; k < bytes; k++)
    if (((const unsigned char *)a)[k] != ((const unsigned char *)want)[k]) {
      *at = k / es, *got = ((const unsigned char *)a)[k], *expected = ((const unsigned char *)want)[k];
      return 1;
    }
  return 0;
}
