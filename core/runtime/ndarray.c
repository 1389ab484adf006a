/*
** ndarray.c -- dtypes, N-d arrays (DLPack DLTensors) and their element-wise
** helpers: creation, views, copies, seeded random fill, element access and
** the allclose comparison.
**
** An array is one allocation: the tl_array struct with its shape stored
** inline after it, pointing at a reference-counted tl_storage. Host storage
** comes from the CPU device API, 64-byte aligned, rounded up to a multiple of
** 64 bytes (so vectorized kernels may read whole cache lines) and zeroed.
** Element access goes through double: exact for every dtype except int64
** beyond 2^53. Stores into integer dtypes truncate toward zero and saturate
** at the dtype's range (NaN stores 0), stores into float16 round to nearest
** even. Random fills use xoshiro256** seeded through splitmix64, so one seed
** gives the same values on every machine; normals come from Box-Muller.
*/
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "runtime.h"

/* ---- dtypes ---------------------------------------------------------------------- */

static const char *const dtype_names[TL_NDTYPES] = {
  [TL_FLOAT32] = "float32", [TL_FLOAT16] = "float16", [TL_INT8] = "int8",
  [TL_UINT8] = "uint8",     [TL_INT32] = "int32",     [TL_INT64] = "int64",
  [TL_FLOAT64] = "float64", [TL_INT16] = "int16",     [TL_BOOL] = "bool",
};

static const int dtype_sizes[TL_NDTYPES] = {
  [TL_FLOAT32] = 4, [TL_FLOAT16] = 2, [TL_INT8] = 1,  [TL_UINT8] = 1, [TL_INT32] = 4,
  [TL_INT64] = 8,   [TL_FLOAT64] = 8, [TL_INT16] = 2, [TL_BOOL] = 1,
};

static const DLDataType dtype_dl[TL_NDTYPES] = {
  [TL_FLOAT32] = {kDLFloat, 32, 1}, [TL_FLOAT16] = {kDLFloat, 16, 1},
  [TL_INT8] = {kDLInt, 8, 1},       [TL_UINT8] = {kDLUInt, 8, 1},
  [TL_INT32] = {kDLInt, 32, 1},     [TL_INT64] = {kDLInt, 64, 1},
  [TL_FLOAT64] = {kDLFloat, 64, 1}, [TL_INT16] = {kDLInt, 16, 1},
  [TL_BOOL] = {kDLUInt, 1, 1},
};

/* Integer ranges as doubles, for range checks and saturating stores. int64's
** upper bound is 2^63, one past INT64_MAX, which a double cannot hold. */
static const double int_min[TL_NDTYPES] = {
  [TL_INT8] = -128.0, [TL_UINT8] = 0.0, [TL_INT32] = -2147483648.0,
  [TL_INT64] = -9223372036854775808.0, [TL_INT16] = -32768.0, [TL_BOOL] = 0.0,
};
static const double int_max[TL_NDTYPES] = {
  [TL_INT8] = 127.0, [TL_UINT8] = 255.0, [TL_INT32] = 2147483647.0,
  [TL_INT64] = 9223372036854775808.0, [TL_INT16] = 32767.0, [TL_BOOL] = 1.0,
};

static int valid_dtype(int dtype) { return dtype >= 0 && dtype < TL_NDTYPES; }

TL_EXPORT int tl_dtype_parse(tl_ctx *ctx, const char *name, int *dtype) {
  if (!name) return tl_err(ctx, TL_E_ARG, "dtype name is NULL");
  if (!dtype) return tl_err(ctx, TL_E_ARG, "tl_dtype_parse: dtype is NULL");
  for (int i = 0; i < TL_NDTYPES; i++) {
    if (strcmp(name, dtype_names[i]) == 0) {
      *dtype = i;
      return TL_OK;
    }
  }
  char list[256] = "";
  size_t n = 0;
  for (int i = 0; i < TL_NDTYPES; i++)
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", dtype_names[i]);
  return tl_err(ctx, TL_E_DTYPE, "unknown dtype '%.200s' (expected one of %s)", name, list);
}

TL_EXPORT const char *tl_dtype_name(int dtype) {
  return valid_dtype(dtype) ? dtype_names[dtype] : "invalid";
}

TL_EXPORT int tl_dtype_bytes(int dtype) { return valid_dtype(dtype) ? dtype_sizes[dtype] : 0; }

int tl_dtype_is_float(int dtype) {
  return dtype == TL_FLOAT32 || dtype == TL_FLOAT16 || dtype == TL_FLOAT64;
}

int tl_dtype_to_dl(int dtype, DLDataType *out) {
  if (!valid_dtype(dtype)) return TL_E_DTYPE;
  *out = dtype_dl[dtype];
  return TL_OK;
}

int tl_dtype_from_dl(tl_ctx *ctx, DLDataType t, int *dtype) {
  if (t.lanes == 1) {
    for (int i = 0; i < TL_NDTYPES; i++) {
      if (dtype_dl[i].code == t.code && dtype_dl[i].bits == t.bits) {
        *dtype = i;
        return TL_OK;
      }
    }
#if DLPACK_VERSION >= 80
    if (t.code == kDLBool && t.bits == 8) {
      *dtype = TL_BOOL;
      return TL_OK;
    }
#endif
  }
  return tl_err(ctx, TL_E_DTYPE,
                "unsupported DLPack dtype (code %d, bits %d, lanes %d): tunelua arrays hold "
                "scalar %s",
                t.code, t.bits, t.lanes, "float16/32/64, int8/16/32/64, uint8 or bool");
}

/* ---- float16 ------------------------------------------------------------------------ */

uint16_t tl_half_from_double(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  uint16_t sign = (uint16_t)((b >> 48) & 0x8000);
  int exp = (int)((b >> 52) & 0x7ff);
  uint64_t man = b & ((1ull << 52) - 1);
  if (exp == 0x7ff) {                        /* inf, or NaN made quiet */
    if (!man) return sign | 0x7c00;
    return sign | 0x7e00 | (uint16_t)((man >> 42) & 0x1ff);
  }
  int e = exp - 1023 + 15;                   /* the binary16 biased exponent */
  if (e >= 31) return sign | 0x7c00;         /* >= 2^16: overflow */
  uint64_t h, rest, halfway;
  if (e >= 1) {                              /* normal: keep 10 of 52 bits */
    h = ((uint64_t)e << 10) | (man >> 42);
    rest = man & ((1ull << 42) - 1);
    halfway = 1ull << 41;
  } else {                                   /* subnormal: units of 2^-24 */
    if (e < -10) return sign;                /* below 2^-25: rounds to zero */
    uint64_t m = man | (1ull << 52);
    int shift = 43 - e;                      /* 43..53 */
    h = m >> shift;
    rest = m & ((1ull << shift) - 1);
    halfway = 1ull << (shift - 1);
  }
  if (rest > halfway || (rest == halfway && (h & 1))) h++;  /* carries into the exponent */
  return sign | (uint16_t)h;
}

uint16_t tl_half_from_float(float f) { return tl_half_from_double((double)f); }

double tl_half_to_double(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0)
    v = ldexp((double)man, -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = ldexp((double)(man | 0x400), exp - 25);
  return sign ? -v : v;
}

float tl_half_to_float(uint16_t h) { return (float)tl_half_to_double(h); }

/* ---- element load and store ---------------------------------------------------------- */

static int64_t sat_int(int dtype, double v) {
  if (v != v) return 0;
  if (v <= int_min[dtype]) return (int64_t)int_min[dtype];
  if (v >= int_max[dtype]) return dtype == TL_INT64 ? INT64_MAX : (int64_t)int_max[dtype];
  return (int64_t)v;                          /* truncates toward zero */
}

static double load(int dtype, const void *base, int64_t i) {
  switch (dtype) {
  case TL_FLOAT32: return ((const float *)base)[i];
  case TL_FLOAT16: return tl_half_to_double(((const uint16_t *)base)[i]);
  case TL_INT8: return ((const int8_t *)base)[i];
  case TL_UINT8: return ((const uint8_t *)base)[i];
  case TL_INT32: return ((const int32_t *)base)[i];
  case TL_INT64: return (double)((const int64_t *)base)[i];
  case TL_FLOAT64: return ((const double *)base)[i];
  case TL_INT16: return ((const int16_t *)base)[i];
  case TL_BOOL: return ((const uint8_t *)base)[i] != 0;
  default: return NAN;
  }
}

static void store(int dtype, void *base, int64_t i, double v) {
  switch (dtype) {
  case TL_FLOAT32: ((float *)base)[i] = (float)v; break;
  case TL_FLOAT16: ((uint16_t *)base)[i] = tl_half_from_double(v); break;
  case TL_INT8: ((int8_t *)base)[i] = (int8_t)sat_int(dtype, v); break;
  case TL_UINT8: ((uint8_t *)base)[i] = (uint8_t)sat_int(dtype, v); break;
  case TL_INT32: ((int32_t *)base)[i] = (int32_t)sat_int(dtype, v); break;
  case TL_INT64: ((int64_t *)base)[i] = sat_int(dtype, v); break;
  case TL_FLOAT64: ((double *)base)[i] = v; break;
  case TL_INT16: ((int16_t *)base)[i] = (int16_t)sat_int(dtype, v); break;
  case TL_BOOL: ((uint8_t *)base)[i] = v != 0; break;
  default: break;
  }
}

static void *host_base(const tl_array *a) { return (char *)a->t.data + a->t.byte_offset; }

/* ---- shapes and layout ------------------------------------------------------------------ */

char *tl_shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = 0;
  if (!n) return buf;
  buf[0] = 0;
  k += (size_t)snprintf(buf + k, n - k, "(");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, ndim == 1 ? ",)" : ")");
  return buf;
}

#define SHAPE_STR_MAX (TL_ARRAY_MAX_NDIM * 22 + 4)

/* Validate ndim, shape and dtype; compute the element and byte counts. */
static int check_layout(tl_ctx *ctx, int ndim, const int64_t *shape, int dtype,
                        int64_t *numel, size_t *nbytes) {
  char s[SHAPE_STR_MAX];
  if (!valid_dtype(dtype))
    return tl_err(ctx, TL_E_DTYPE, "invalid dtype code %d (expected 0..%d)", dtype,
                  TL_NDTYPES - 1);
  if (ndim < 0 || ndim > TL_ARRAY_MAX_NDIM)
    return tl_err(ctx, TL_E_SHAPE, "invalid ndim %d (expected 0..%d)", ndim,
                  TL_ARRAY_MAX_NDIM);
  if (ndim > 0 && !shape) return tl_err(ctx, TL_E_ARG, "shape is NULL for ndim %d", ndim);
  int zero = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return tl_err(ctx, TL_E_SHAPE, "invalid shape %s: dimension %d is negative",
                    tl_shape_str(s, sizeof s, ndim, shape), i + 1);
    if (shape[i] == 0) zero = 1;
  }
  int64_t n = 1;
  int64_t limit = (int64_t)(TL_MIN((uint64_t)INT64_MAX, (uint64_t)PTRDIFF_MAX) /
                            (uint64_t)dtype_sizes[dtype]);
  for (int i = 0; i < ndim && !zero; i++) {
    if (n > limit / shape[i])
      return tl_err(ctx, TL_E_SHAPE, "invalid shape %s: too many elements of %s to address",
                    tl_shape_str(s, sizeof s, ndim, shape), dtype_names[dtype]);
    n *= shape[i];
  }
  *numel = zero ? 0 : n;
  *nbytes = (size_t)*numel * (size_t)dtype_sizes[dtype];
  return TL_OK;
}

static int same_shape(const tl_array *a, const tl_array *b) {
  if (a->t.ndim != b->t.ndim) return 0;
  for (int i = 0; i < a->t.ndim; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

/* ---- storage and array structs ---------------------------------------------------------- */

static void storage_retain(tl_storage *st) { __atomic_add_fetch(&st->refs, 1, __ATOMIC_RELAXED); }

static void storage_release(tl_storage *st) {
  if (__atomic_sub_fetch(&st->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  if (st->owns && st->api) st->api->free(st->dev.device_id, st->data);
  if (st->release) st->release(st->release_arg);
  free(st);
}

/* A new array struct over st (whose reference the array takes over). */
static tl_array *array_new(int ndim, const int64_t *shape, int dtype, int64_t numel,
                           tl_storage *st, void *data, uint64_t byte_offset) {
  tl_array *a = tl_calloc(1, sizeof *a + (size_t)TL_MAX(ndim, 1) * sizeof(int64_t));
  if (ndim > 0) memcpy(a->shape, shape, (size_t)ndim * sizeof(int64_t));
  a->dtype = dtype;
  a->numel = numel;
  a->st = st;
  a->t.data = data;
  a->t.device = st->dev;
  a->t.ndim = ndim;
  a->t.dtype = dtype_dl[dtype];
  a->t.shape = a->shape;
  a->t.strides = NULL;
  a->t.byte_offset = byte_offset;
  return a;
}

static int lookup_device(tl_ctx *ctx, int dev_type, int dev_id, const tl_device_api **api) {
  *api = tl_device_get(dev_type);
  if (!*api)
    return tl_err(ctx, TL_E_UNSUPPORTED,
                  "no runtime is registered for device %s (DLPack device type %d)",
                  tl_device_type_name(dev_type), dev_type);
  if (dev_id < 0)
    return tl_err(ctx, TL_E_ARG, "invalid device id %d for %s (expected >= 0)", dev_id,
                  (*api)->name);
  return TL_OK;
}

TL_EXPORT int tl_array_empty(tl_ctx *ctx, int ndim, const int64_t *shape, int dtype,
                             int dev_type, int dev_id, tl_array **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_array_empty: out is NULL");
  *out = NULL;
  int64_t numel;
  size_t nbytes;
  const tl_device_api *api;
  int rc = check_layout(ctx, ndim, shape, dtype, &numel, &nbytes);
  if (!rc) rc = lookup_device(ctx, dev_type, dev_id, &api);
  if (rc) return rc;
  size_t alloc = (TL_MAX(nbytes, 1) + TL_ARRAY_ALIGN - 1) & ~(size_t)(TL_ARRAY_ALIGN - 1);
  void *data = NULL;
  rc = api->alloc(ctx, dev_id, alloc, TL_ARRAY_ALIGN, &data);
  if (rc) {
    char s[SHAPE_STR_MAX];
    return tl_err_prefix(ctx, "cannot allocate a %s array of shape %s on %s:%d: ",
                         dtype_names[dtype], tl_shape_str(s, sizeof s, ndim, shape), api->name,
                         dev_id);
  }
  if (dev_type == kDLCPU) memset(data, 0, alloc);
  tl_storage *st = tl_calloc(1, sizeof *st);
  st->data = data;
  st->nbytes = alloc;
  st->dev.device_type = (DLDeviceType)dev_type;
  st->dev.device_id = dev_id;
  st->api = api;
  st->refs = 1;
  st->owns = 1;
  *out = array_new(ndim, shape, dtype, numel, st, data, 0);
  return TL_OK;
}

int tl_array_wrap(tl_ctx *ctx, void *data, uint64_t byte_offset, int ndim,
                  const int64_t *shape, int dtype, DLDevice dev,
                  void (*release)(void *arg), void *release_arg, tl_array **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_array_wrap: out is NULL");
  *out = NULL;
  int64_t numel;
  size_t nbytes;
  int rc = check_layout(ctx, ndim, shape, dtype, &numel, &nbytes);
  if (rc) return rc;
  if (!data && nbytes)
    return tl_err(ctx, TL_E_ARG, "tl_array_wrap: data is NULL for %zu bytes", nbytes);
  if (dev.device_id < 0)
    return tl_err(ctx, TL_E_ARG, "invalid device id %d for %s (expected >= 0)",
                  dev.device_id, tl_device_type_name(dev.device_type));
  tl_storage *st = tl_calloc(1, sizeof *st);
  st->data = data;
  st->nbytes = (size_t)byte_offset + nbytes;
  st->dev = dev;
  st->api = NULL;
  st->refs = 1;
  st->owns = 0;
  st->release = release;
  st->release_arg = release_arg;
  *out = array_new(ndim, shape, dtype, numel, st, data, byte_offset);
  return TL_OK;
}

TL_EXPORT int tl_array_reshape(tl_ctx *ctx, const tl_array *a, int ndim, const int64_t *shape,
                               tl_array **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_array_reshape: out is NULL");
  *out = NULL;
  if (!a) return tl_err(ctx, TL_E_ARG, "reshape: array is NULL");
  int64_t numel;
  size_t nbytes;
  int rc = check_layout(ctx, ndim, shape, a->dtype, &numel, &nbytes);
  if (rc) return rc;
  if (numel != a->numel) {
    char s1[SHAPE_STR_MAX], s2[SHAPE_STR_MAX];
    return tl_err(ctx, TL_E_SHAPE, "cannot reshape %s (%lld elements) into %s (%lld elements)",
                  tl_shape_str(s1, sizeof s1, a->t.ndim, a->shape), (long long)a->numel,
                  tl_shape_str(s2, sizeof s2, ndim, shape), (long long)numel);
  }
  storage_retain(a->st);
  *out = array_new(ndim, shape, a->dtype, numel, a->st, a->t.data, a->t.byte_offset);
  return TL_OK;
}

TL_EXPORT void tl_array_free(tl_array *a) {
  if (!a) return;
  storage_release(a->st);
  free(a);
}

/* ---- accessors ------------------------------------------------------------------------------ */

TL_EXPORT int tl_array_ndim(const tl_array *a) { return a->t.ndim; }
TL_EXPORT const int64_t *tl_array_shape(const tl_array *a) { return a->shape; }
TL_EXPORT int tl_array_dtype(const tl_array *a) { return a->dtype; }
TL_EXPORT int64_t tl_array_numel(const tl_array *a) { return a->numel; }
TL_EXPORT size_t tl_array_nbytes(const tl_array *a) {
  return (size_t)a->numel * (size_t)dtype_sizes[a->dtype];
}
TL_EXPORT void *tl_array_dltensor(tl_array *a) { return &a->t; }

TL_EXPORT int tl_array_device(const tl_array *a, int *dev_id) {
  if (dev_id) *dev_id = a->t.device.device_id;
  return (int)a->t.device.device_type;
}

TL_EXPORT void *tl_array_data(const tl_array *a) {
  return tl_array_on_host(a) ? host_base(a) : NULL;
}

/* Out-of-range indices and device arrays read NaN and ignore stores: callers
** (the Lua layer) check bounds and report them. */
TL_EXPORT double tl_array_get(const tl_array *a, int64_t i) {
  if (!a || i < 0 || i >= a->numel || !tl_array_on_host(a)) return NAN;
  return load(a->dtype, host_base(a), i);
}

TL_EXPORT void tl_array_set(tl_array *a, int64_t i, double v) {
  if (!a || i < 0 || i >= a->numel || !tl_array_on_host(a)) return;
  store(a->dtype, host_base(a), i, v);
}

/* ---- copy ------------------------------------------------------------------------------------ */

static int device_copy(tl_ctx *ctx, const tl_device_api *api, const tl_array *src,
                       tl_array *dst, size_t n) {
  if (!api)
    return tl_err(ctx, TL_E_UNSUPPORTED, "no runtime is registered for device %s",
                  tl_device_type_name(src->t.device.device_type == kDLCPU
                                          ? dst->t.device.device_type
                                          : src->t.device.device_type));
  return api->copy(ctx, src->t.data, (size_t)src->t.byte_offset, src->t.device, dst->t.data,
                   (size_t)dst->t.byte_offset, dst->t.device, n);
}

TL_EXPORT int tl_array_copyto(tl_ctx *ctx, const tl_array *src, tl_array *dst) {
  char s1[SHAPE_STR_MAX], s2[SHAPE_STR_MAX];
  if (!src || !dst) return tl_err(ctx, TL_E_ARG, "copyto: %s array is NULL", src ? "destination" : "source");
  if (!same_shape(src, dst))
    return tl_err(ctx, TL_E_SHAPE, "copyto: shape mismatch: source %s vs destination %s",
                  tl_shape_str(s1, sizeof s1, src->t.ndim, src->shape),
                  tl_shape_str(s2, sizeof s2, dst->t.ndim, dst->shape));
  if (src->dtype != dst->dtype)
    return tl_err(ctx, TL_E_DTYPE, "copyto: dtype mismatch: source %s vs destination %s",
                  dtype_names[src->dtype], dtype_names[dst->dtype]);
  size_t n = tl_array_nbytes(src);
  if (n == 0) return TL_OK;
  int st = src->t.device.device_type, dt = dst->t.device.device_type;
  int rc;
  if (st == kDLCPU && dt == kDLCPU) {
    memmove(host_base(dst), host_base(src), n);
    return TL_OK;
  } else if (st == kDLCPU) {
    rc = device_copy(ctx, tl_device_get(dt), src, dst, n);
  } else if (dt == kDLCPU || st == dt) {
    rc = device_copy(ctx, tl_device_get(st), src, dst, n);
  } else {                                    /* two device types: through the host */
    tl_array *tmp;
    rc = tl_array_empty(ctx, src->t.ndim, src->shape, src->dtype, kDLCPU, 0, &tmp);
    if (!rc) rc = tl_array_copyto(ctx, src, tmp);
    if (!rc) rc = tl_array_copyto(ctx, tmp, dst);
    tl_array_free(tmp);
    return rc;
  }
  if (rc)
    tl_err_prefix(ctx, "copyto %s:%d -> %s:%d: ", tl_device_type_name(st),
                  src->t.device.device_id, tl_device_type_name(dt), dst->t.device.device_id);
  return rc;
}

/* ---- random ------------------------------------------------------------------------------------ */

typedef struct {
  uint64_t s[4];
  int have_spare;
  double spare;
} rng;

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void rng_seed(rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
  r->have_spare = 0;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r) {        /* xoshiro256** */
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

static double rng_unit(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }  /* [0, 1) */

/* Uniform in [0, n) without modulo bias; n == 0 means the full 2^64 range. */
static uint64_t rng_below(rng *r, uint64_t n) {
  if (n == 0) return rng_next(r);
  uint64_t reject_below = (0 - n) % n;    /* 2^64 mod n */
  for (;;) {
    uint64_t x = rng_next(r);
    if (x >= reject_below) return x % n;
  }
}

static double rng_normal(rng *r) {        /* Box-Muller, both values used */
  if (r->have_spare) {
    r->have_spare = 0;
    return r->spare;
  }
  double u1 = 1.0 - rng_unit(r), u2 = rng_unit(r);   /* u1 in (0, 1] */
  double rad = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
  r->spare = rad * sin(th);
  r->have_spare = 1;
  return rad * cos(th);
}

static double float_max(int dtype) {
  return dtype == TL_FLOAT16 ? 65504.0 : dtype == TL_FLOAT32 ? FLT_MAX : DBL_MAX;
}

static int random_uniform_float(tl_ctx *ctx, tl_array *a, double lo, double hi, rng *r) {
  void *base = host_base(a);
  double fmax = float_max(a->dtype);
  if (lo < -fmax || hi > fmax)
    return tl_err(ctx, TL_E_ARG, "random: range [%g, %g) exceeds the range of %s", lo, hi,
                  dtype_names[a->dtype]);
  double span = hi - lo;
  for (int64_t i = 0; i < a->numel; i++) {
    /* Rounding to the dtype may land on hi: draw again. */
    for (int tries = 0;; tries++) {
      double u = rng_unit(r);
      double x = isfinite(span) ? lo + span * u : lo * (1.0 - u) + hi * u;
      store(a->dtype, base, i, x);
      double y = load(a->dtype, base, i);
      if (y >= lo && y < hi) break;
      if (tries == 100)
        return tl_err(ctx, TL_E_ARG, "random: no %s value lies in [%g, %g)",
                      dtype_names[a->dtype], lo, hi);
    }
  }
  return TL_OK;
}

static int random_uniform_int(tl_ctx *ctx, tl_array *a, double lo, double hi, rng *r) {
  double first = ceil(lo), end = ceil(hi);      /* integers in [first, end) */
  if (first >= end)
    return tl_err(ctx, TL_E_ARG, "random: no integer lies in [%g, %g)", lo, hi);
  double dmin = int_min[a->dtype], dmax = int_max[a->dtype];
  if (first < dmin || end - 1 > dmax || (a->dtype == TL_INT64 && end > dmax))
    return tl_err(ctx, TL_E_ARG, "random: range [%g, %g) exceeds the range of %s [%.0f, %.0f]",
                  lo, hi, dtype_names[a->dtype], dmin,
                  a->dtype == TL_INT64 ? 9223372036854775807.0 : dmax);
  int64_t first_i = (int64_t)first;
  int64_t last_i = end >= 9223372036854775808.0 ? INT64_MAX : (int64_t)end - 1;
  uint64_t n = (uint64_t)last_i - (uint64_t)first_i + 1;  /* 0: all 2^64 values */
  void *base = host_base(a);
  for (int64_t i = 0; i < a->numel; i++) {
    int64_t v = (int64_t)((uint64_t)first_i + rng_below(r, n));
    if (a->dtype == TL_INT64)
      ((int64_t *)base)[i] = v;              /* exact, even beyond 2^53 */
    else
      store(a->dtype, base, i, (double)v);
  }
  return TL_OK;
}

TL_EXPORT int tl_array_random(tl_ctx *ctx, tl_array *a, int dist, double lo, double hi,
                              uint64_t seed) {
  if (!a) return tl_err(ctx, TL_E_ARG, "random: array is NULL");
  if (!tl_array_on_host(a))
    return tl_err(ctx, TL_E_UNSUPPORTED,
                  "random: the array is on %s:%d; fill a cpu array and copy it there",
                  tl_device_type_name(a->t.device.device_type), a->t.device.device_id);
  rng r;
  rng_seed(&r, seed);
  if (dist == 0) {
    if (!isfinite(lo) || !isfinite(hi))
      return tl_err(ctx, TL_E_ARG, "random: uniform bounds [%g, %g) must be finite", lo, hi);
    if (!(lo < hi))
      return tl_err(ctx, TL_E_ARG, "random: uniform range [%g, %g) is empty", lo, hi);
    return tl_dtype_is_float(a->dtype) ? random_uniform_float(ctx, a, lo, hi, &r)
                                       : random_uniform_int(ctx, a, lo, hi, &r);
  }
  if (dist == 1) {
    double mean = lo, std = hi;
    if (!isfinite(mean) || !isfinite(std) || std < 0)
      return tl_err(ctx, TL_E_ARG,
                    "random: normal mean %g and std %g must be finite, std >= 0", mean, std);
    void *base = host_base(a);
    int is_float = tl_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < a->numel; i++) {
      double x = mean + std * rng_normal(&r);
      store(a->dtype, base, i, is_float ? x : round(x));
    }
    return TL_OK;
  }
  return tl_err(ctx, TL_E_ARG, "random: unknown distribution %d (expected 0 = uniform, 1 = normal)",
                dist);
}

/* ---- comparison ----------------------------------------------------------------------------------- */

TL_EXPORT int tl_array_compare(tl_ctx *ctx, const tl_array *a, const tl_array *b, double rtol,
                               double atol, int64_t *nbad, int64_t *worst, double *worst_err) {
  char s1[SHAPE_STR_MAX], s2[SHAPE_STR_MAX];
  if (!a || !b) return tl_err(ctx, TL_E_ARG, "allclose: array is NULL");
  if (!same_shape(a, b))
    return tl_err(ctx, TL_E_SHAPE, "allclose: shape mismatch: %s vs %s",
                  tl_shape_str(s1, sizeof s1, a->t.ndim, a->shape),
                  tl_shape_str(s2, sizeof s2, b->t.ndim, b->shape));
  if (!tl_array_on_host(a) || !tl_array_on_host(b))
    return tl_err(ctx, TL_E_UNSUPPORTED,
                  "allclose: arrays must be on the cpu; copy device arrays there first");
  if (!(rtol >= 0) || !(atol >= 0))
    return tl_err(ctx, TL_E_ARG, "allclose: rtol (%g) and atol (%g) must be >= 0", rtol, atol);
  const void *pa = host_base(a), *pb = host_base(b);
  int64_t bad = 0, wi = a->numel ? 0 : -1;
  double wexcess = -INFINITY, werr = 0;
  for (int64_t i = 0; i < a->numel; i++) {
    double x = load(a->dtype, pa, i), y = load(b->dtype, pb, i);
    double err, excess;
    int close;
    if (isnan(x) || isnan(y)) {
      close = isnan(x) && isnan(y);
      err = close ? 0 : NAN;
      excess = close ? -INFINITY : INFINITY;
    } else if (isinf(x) || isinf(y)) {
      close = x == y;
      err = close ? 0 : fabs(x - y);
      excess = close ? -INFINITY : INFINITY;
    } else {
      err = fabs(x - y);
      double tol = atol + rtol * fabs(y);
      close = err <= tol;
      excess = err - tol;
    }
    if (!close) bad++;
    if (excess > wexcess) {
      wexcess = excess;
      wi = i;
      werr = err;
    }
  }
  if (nbad) *nbad = bad;
  if (worst) *worst = wi;
  if (worst_err) *worst_err = werr;
  return TL_OK;
}

TL_EXPORT int tl_array_allclose(tl_ctx *ctx, const tl_array *a, const tl_array *b, double rtol,
                                double atol, int64_t *worst, double *worst_err) {
  int64_t bad;
  int rc = tl_array_compare(ctx, a, b, rtol, atol, &bad, worst, worst_err);
  if (rc) return rc;
  return bad ? -1 : 0;
}
