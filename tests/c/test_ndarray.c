/*
** Unit tests for core/runtime: dtypes and their DLPack mapping, float16
** rounding, array creation and its errors, views, copies (host and a fake
** registered device), seeded random fills and allclose.
*/
#include <float.h>
#include <math.h>
#include <string.h>

#include "runtime/runtime.h"
#include "tl_test.h"

static tl_array *make(tl_ctx *ctx, int ndim, const int64_t *shape, int dtype) {
  tl_array *a = NULL;
  int rc = tl_array_empty(ctx, ndim, shape, dtype, TL_DEV_CPU, 0, &a);
  CHECK_MSG(rc == TL_OK, "tl_array_empty: %s", tl_errmsg(ctx));
  return a;
}

TL_TEST(ndarray_dtype_parse_name) {
  tl_ctx *ctx = tl_ctx_new();
  const char *names[] = {"float32", "float16", "int8", "uint8", "int32",
                         "int64", "float64", "int16", "bool"};
  const int bytes[] = {4, 2, 1, 1, 4, 8, 8, 2, 1};
  CHECK_EQ_INT(TL_ARRAY_SIZE(names), TL_NDTYPES);
  for (int i = 0; i < TL_NDTYPES; i++) {
    int d = -1;
    CHECK_EQ_INT(tl_dtype_parse(ctx, names[i], &d), TL_OK);
    CHECK_EQ_INT(d, i);
    CHECK_STREQ(tl_dtype_name(i), names[i]);
    CHECK_EQ_INT(tl_dtype_bytes(i), bytes[i]);
    DLDataType t;
    CHECK_EQ_INT(tl_dtype_to_dl(i, &t), TL_OK);
    CHECK_EQ_INT(t.lanes, 1);
    int back = -1;
    CHECK_EQ_INT(tl_dtype_from_dl(ctx, t, &back), TL_OK);
    CHECK_EQ_INT(back, i);
  }
  int d;
  CHECK_EQ_INT(tl_dtype_parse(ctx, "float33", &d), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "unknown dtype 'float33' (expected one of float32, float16, int8, "
                              "uint8, int32, int64, float64, int16, bool)");
  CHECK_EQ_INT(tl_dtype_parse(ctx, NULL, &d), TL_E_ARG);
  CHECK_STREQ(tl_dtype_name(TL_NDTYPES), "invalid");
  CHECK_EQ_INT(tl_dtype_bytes(-1), 0);
  DLDataType v = {kDLFloat, 32, 4};
  CHECK_EQ_INT(tl_dtype_from_dl(ctx, v, &d), TL_E_DTYPE);
  CHECK(strstr(tl_errmsg(ctx), "code 2, bits 32, lanes 4") != NULL);
  DLDataType f32;
  tl_dtype_to_dl(TL_FLOAT32, &f32);
  CHECK(f32.code == kDLFloat && f32.bits == 32);
  tl_dtype_to_dl(TL_BOOL, &f32);
  CHECK(f32.code == kDLUInt && f32.bits == 1);
  CHECK_EQ_INT(tl_dtype_to_dl(99, &f32), TL_E_DTYPE);
  tl_ctx_free(ctx);
}

static uint16_t h(double d) { return tl_half_from_double(d); }

TL_TEST(ndarray_half_conversion) {
  /* every finite half round-trips exactly, through double and float */
  for (uint32_t b = 0; b < 0x10000; b++) {
    uint16_t x = (uint16_t)b;
    int exp = (x >> 10) & 0x1f;
    double d = tl_half_to_double(x);
    if (exp == 31 && (x & 0x3ff)) {
      CHECK(isnan(d));
      CHECK((h(d) & 0x7e00) == 0x7e00);            /* quiet NaN */
      CHECK((h(d) & 0x8000) == (x & 0x8000));      /* sign kept */
      continue;
    }
    CHECK_MSG(h(d) == x, "half 0x%04x -> %.17g -> 0x%04x", x, d, h(d));
    CHECK(tl_half_from_float(tl_half_to_float(x)) == x);
  }
  CHECK_EQ_INT(h(1.0), 0x3c00);
  CHECK_EQ_INT(h(-2.0), 0xc000);
  CHECK_EQ_INT(h(65504.0), 0x7bff);
  CHECK_EQ_INT(h(65519.99), 0x7bff);                /* below the midpoint */
  CHECK_EQ_INT(h(65520.0), 0x7c00);                 /* tie rounds to even: inf */
  CHECK_EQ_INT(h(1e10), 0x7c00);
  CHECK_EQ_INT(h(-INFINITY), 0xfc00);
  CHECK_EQ_INT(h(0.0), 0x0000);
  CHECK_EQ_INT(h(-0.0), 0x8000);
  /* ties to even among normals: 1 + 2^-11 is between 1 and 1 + 2^-10 */
  CHECK_EQ_INT(h(1.0 + ldexp(1, -11)), 0x3c00);
  CHECK_EQ_INT(h(1.0 + 3 * ldexp(1, -11)), 0x3c02);
  CHECK_EQ_INT(h(1.0 + ldexp(1, -11) + ldexp(1, -40)), 0x3c01);  /* just above the tie */
  /* subnormals: smallest 2^-24, largest 1023 * 2^-24 */
  CHECK_EQ_INT(h(ldexp(1, -24)), 0x0001);
  CHECK_EQ_INT(h(1023 * ldexp(1, -24)), 0x03ff);
  CHECK_EQ_INT(h(ldexp(1, -25)), 0x0000);           /* tie with 0: even */
  CHECK_EQ_INT(h(ldexp(1, -25) * 1.0000001), 0x0001);
  CHECK_EQ_INT(h(3 * ldexp(1, -25)), 0x0002);       /* 1.5 units: tie to even 2 */
  CHECK_EQ_INT(h(ldexp(1, -26)), 0x0000);
  CHECK_EQ_INT(h(-ldexp(1, -24)), 0x8001);
  CHECK_EQ_INT(h(1023.5 * ldexp(1, -24)), 0x0400);  /* rounds up into the normals */
  CHECK_EQ_INT(h(DBL_MIN / 4), 0x0000);             /* double subnormal */
  CHECK_NEAR(tl_half_to_double(0x0001), ldexp(1, -24), 0);
  CHECK_NEAR(tl_half_to_double(0x3555), 0.333251953125, 0);
  CHECK(isinf(tl_half_to_double(0x7c00)) && tl_half_to_double(0x7c00) > 0);
  /* no double rounding: a value just above a half tie must round up even
     though it rounds to the tie as a float */
  double tricky = 1.0 + ldexp(1, -11) + ldexp(1, -30);
  CHECK_EQ_INT(h(tricky), 0x3c01);
}

TL_TEST(ndarray_empty_alignment_and_zero) {
  tl_ctx *ctx = tl_ctx_new();
  for (int dt = 0; dt < TL_NDTYPES; dt++) {
    for (int64_t n = 0; n < 70; n += 7) {
      int64_t shape[2] = {n, 3};
      tl_array *a = make(ctx, 2, shape, dt);
      CHECK_EQ_INT(tl_array_ndim(a), 2);
      CHECK_EQ_INT(tl_array_shape(a)[0], n);
      CHECK_EQ_INT(tl_array_shape(a)[1], 3);
      CHECK_EQ_INT(tl_array_dtype(a), dt);
      CHECK_EQ_INT(tl_array_numel(a), n * 3);
      CHECK_EQ_INT(tl_array_nbytes(a), n * 3 * tl_dtype_bytes(dt));
      CHECK(((uintptr_t)tl_array_data(a) & 63) == 0);
      for (int64_t i = 0; i < n * 3; i++) CHECK(tl_array_get(a, i) == 0);
      int id = -1;
      CHECK_EQ_INT(tl_array_device(a, &id), TL_DEV_CPU);
      CHECK_EQ_INT(id, 0);
      DLTensor *t = tl_array_dltensor(a);
      CHECK(t->data == tl_array_data(a));
      CHECK_EQ_INT(t->ndim, 2);
      CHECK(t->shape[0] == n && t->strides == NULL && t->byte_offset == 0);
      CHECK_EQ_INT(t->device.device_type, kDLCPU);
      tl_array_free(a);
    }
  }
  tl_array *s = make(ctx, 0, NULL, TL_FLOAT64);    /* rank 0: one element */
  CHECK_EQ_INT(tl_array_numel(s), 1);
  tl_array_set(s, 0, 2.5);
  CHECK(tl_array_get(s, 0) == 2.5);
  CHECK(isnan(tl_array_get(s, 1)));                 /* out of range reads NaN */
  tl_array_set(s, -1, 1);                           /* and ignores stores */
  tl_array_free(s);
  tl_array_free(NULL);
  tl_ctx_free(ctx);
}

TL_TEST(ndarray_empty_errors) {
  tl_ctx *ctx = tl_ctx_new();
  tl_array *a = (tl_array *)1;
  int64_t neg[2] = {2, -1};
  CHECK_EQ_INT(tl_array_empty(ctx, 2, neg, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "invalid shape (2, -1): dimension 2 is negative");
  CHECK(a == NULL);
  int64_t neg1[1] = {-3};
  CHECK_EQ_INT(tl_array_empty(ctx, 1, neg1, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "invalid shape (-3,): dimension 1 is negative");
  int64_t big[3] = {1ll << 40, 1ll << 40, 4};
  CHECK_EQ_INT(tl_array_empty(ctx, 3, big, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_E_SHAPE);
  CHECK(strstr(tl_errmsg(ctx), "too many elements") != NULL);
  int64_t ok[1] = {4};
  CHECK_EQ_INT(tl_array_empty(ctx, 1, ok, 42, TL_DEV_CPU, 0, &a), TL_E_DTYPE);
  CHECK_EQ_INT(tl_array_empty(ctx, -1, ok, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_E_SHAPE);
  CHECK_EQ_INT(tl_array_empty(ctx, 33, ok, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_E_SHAPE);
  CHECK_EQ_INT(tl_array_empty(ctx, 1, ok, TL_FLOAT32, TL_DEV_CPU, -1, &a), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "invalid device id -1 for cpu (expected >= 0)");
  CHECK_EQ_INT(tl_array_empty(ctx, 1, ok, TL_FLOAT32, 30, 0, &a), TL_E_UNSUPPORTED);
  CHECK(strstr(tl_errmsg(ctx), "no runtime is registered") != NULL);
  /* a zero dimension makes the product safe whatever the others are */
  int64_t zero[3] = {0, 1ll << 62, 1ll << 62};
  CHECK_EQ_INT(tl_array_empty(ctx, 3, zero, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_OK);
  CHECK_EQ_INT(tl_array_numel(a), 0);
  tl_array_free(a);
  tl_ctx_free(ctx);
}

TL_TEST(ndarray_get_set_conversions) {
  tl_ctx *ctx = tl_ctx_new();
  int64_t n = 1;
  tl_array *a;
  a = make(ctx, 1, &n, TL_INT8);
  tl_array_set(a, 0, 300); CHECK(tl_array_get(a, 0) == 127);
  tl_array_set(a, 0, -300); CHECK(tl_array_get(a, 0) == -128);
  tl_array_set(a, 0, -7.9); CHECK(tl_array_get(a, 0) == -7);     /* truncation */
  tl_array_set(a, 0, NAN); CHECK(tl_array_get(a, 0) == 0);
  tl_array_free(a);
  a = make(ctx, 1, &n, TL_UINT8);
  tl_array_set(a, 0, -1); CHECK(tl_array_get(a, 0) == 0);
  tl_array_set(a, 0, 255.9); CHECK(tl_array_get(a, 0) == 255);
  tl_array_free(a);
  a = make(ctx, 1, &n, TL_INT64);
  tl_array_set(a, 0, 1e30); CHECK(((int64_t *)tl_array_data(a))[0] == INT64_MAX);
  tl_array_set(a, 0, -1e30); CHECK(((int64_t *)tl_array_data(a))[0] == INT64_MIN);
  tl_array_set(a, 0, 9007199254740992.0);
  CHECK(((int64_t *)tl_array_data(a))[0] == 9007199254740992ll);
  tl_array_free(a);
  a = make(ctx, 1, &n, TL_BOOL);
  tl_array_set(a, 0, 0.5); CHECK(tl_array_get(a, 0) == 1);
  tl_array_set(a, 0, 0); CHECK(tl_array_get(a, 0) == 0);
  tl_array_free(a);
  a = make(ctx, 1, &n, TL_FLOAT16);
  tl_array_set(a, 0, 0.1);
  CHECK(((uint16_t *)tl_array_data(a))[0] == 0x2e66);
  CHECK_NEAR(tl_array_get(a, 0), 0.0999755859375, 0);
  tl_array_free(a);
  a = make(ctx, 1, &n, TL_FLOAT32);
  tl_array_set(a, 0, 0.1);
  CHECK(tl_array_get(a, 0) == (double)0.1f);
  tl_array_free(a);
  tl_ctx_free(ctx);
}

TL_TEST(ndarray_copy_and_reshape) {
  tl_ctx *ctx = tl_ctx_new();
  int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s6[1] = {6};
  tl_array *a = make(ctx, 2, s23, TL_FLOAT32), *b = make(ctx, 2, s23, TL_FLOAT32);
  for (int i = 0; i < 6; i++) tl_array_set(a, i, i * 1.5);
  CHECK_EQ_INT(tl_array_copyto(ctx, a, b), TL_OK);
  for (int i = 0; i < 6; i++) CHECK(tl_array_get(b, i) == i * 1.5);
  tl_array *c = make(ctx, 2, s32, TL_FLOAT32);
  CHECK_EQ_INT(tl_array_copyto(ctx, a, c), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "copyto: shape mismatch: source (2, 3) vs destination (3, 2)");
  tl_array *d = make(ctx, 2, s23, TL_FLOAT16);
  CHECK_EQ_INT(tl_array_copyto(ctx, a, d), TL_E_DTYPE);
  CHECK_STREQ(tl_errmsg(ctx), "copyto: dtype mismatch: source float32 vs destination float16");

  tl_array *v;
  CHECK_EQ_INT(tl_array_reshape(ctx, a, 1, s6, &v), TL_OK);
  CHECK_EQ_INT(tl_array_ndim(v), 1);
  CHECK(tl_array_data(v) == tl_array_data(a));
  tl_array_free(a);                                  /* the view keeps the storage */
  for (int i = 0; i < 6; i++) CHECK(tl_array_get(v, i) == i * 1.5);
  int64_t s4[1] = {4};
  tl_array *w = NULL;
  CHECK_EQ_INT(tl_array_reshape(ctx, v, 1, s4, &w), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "cannot reshape (6,) (6 elements) into (4,) (4 elements)");
  tl_array_free(v);
  tl_array_free(b);
  tl_array_free(c);
  tl_array_free(d);
  tl_ctx_free(ctx);
}

/* ---- a fake device: host memory behind the device API ----------------------- */

static int fake_allocs, fake_copies;

static int fake_alloc(tl_ctx *ctx, int dev_id, size_t nbytes, size_t align, void **out) {
  fake_allocs++;
  *out = calloc(1, nbytes);
  return *out ? TL_OK : tl_err(ctx, TL_E_NOMEM, "fake: out of memory");
}
static void fake_free(int dev_id, void *p) {
  fake_allocs--;
  free(p);
}
static int fake_copy(tl_ctx *ctx, const void *src, size_t so, DLDevice sd, void *dst, size_t dof,
                     DLDevice dd, size_t n) {
  fake_copies++;
  CHECK(sd.device_type == kDLVulkan || dd.device_type == kDLVulkan);
  memcpy((char *)dst + dof, (const char *)src + so, n);
  return TL_OK;
}
static const tl_device_api fake_api = {"fake", kDLVulkan, fake_alloc, fake_free, fake_copy, NULL};

TL_TEST(ndarray_device_api) {
  tl_ctx *ctx = tl_ctx_new();
  CHECK(tl_device_get(kDLCPU) != NULL);
  CHECK_STREQ(tl_device_get(kDLCPU)->name, "cpu");
  CHECK(tl_device_register(tl_device_get(kDLCPU)) == TL_E_ARG);  /* built in */
  CHECK(tl_device_register(NULL) == TL_E_ARG);
  CHECK_EQ_INT(tl_device_register(&fake_api), TL_OK);
  CHECK(tl_device_get(kDLVulkan) == &fake_api);
  CHECK_STREQ(tl_device_type_name(kDLOpenCL), "opencl");
  int64_t s[2] = {4, 5};
  tl_array *h = make(ctx, 2, s, TL_INT32), *back = make(ctx, 2, s, TL_INT32), *dev;
  for (int i = 0; i < 20; i++) tl_array_set(h, i, i - 10);
  CHECK_EQ_INT(tl_array_empty(ctx, 2, s, TL_INT32, kDLVulkan, 1, &dev), TL_OK);
  int id;
  CHECK_EQ_INT(tl_array_device(dev, &id), kDLVulkan);
  CHECK_EQ_INT(id, 1);
  CHECK(tl_array_data(dev) == NULL);                 /* not a host array */
  CHECK(isnan(tl_array_get(dev, 0)));
  CHECK_EQ_INT(tl_array_random(ctx, dev, 0, 0, 1, 1), TL_E_UNSUPPORTED);
  CHECK_EQ_INT(tl_array_allclose(ctx, dev, h, 0, 0, NULL, NULL), TL_E_UNSUPPORTED);
  CHECK_EQ_INT(tl_array_copyto(ctx, h, dev), TL_OK);
  CHECK_EQ_INT(tl_array_copyto(ctx, dev, back), TL_OK);
  CHECK_EQ_INT(fake_copies, 2);
  for (int i = 0; i < 20; i++) CHECK(tl_array_get(back, i) == i - 10);
  tl_array *dev2;
  CHECK_EQ_INT(tl_array_empty(ctx, 2, s, TL_INT32, kDLVulkan, 0, &dev2), TL_OK);
  CHECK_EQ_INT(tl_array_copyto(ctx, dev, dev2), TL_OK);   /* within the device */
  CHECK_EQ_INT(fake_allocs, 2);
  tl_array_free(dev);
  tl_array_free(dev2);
  CHECK_EQ_INT(fake_allocs, 0);
  tl_array_free(h);
  tl_array_free(back);
  tl_ctx_free(ctx);
}

/* ---- wrap ------------------------------------------------------------------------ */

static int released;
static void on_release(void *arg) { released += *(int *)arg; }

TL_TEST(ndarray_wrap) {
  tl_ctx *ctx = tl_ctx_new();
  float buf[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  int64_t s[2] = {2, 3};
  int one = 1;
  DLDevice cpu = {kDLCPU, 0};
  tl_array *a, *v;
  CHECK_EQ_INT(tl_array_wrap(ctx, buf, 2 * sizeof(float), 2, s, TL_FLOAT32, cpu, on_release,
                             &one, &a), TL_OK);
  CHECK(tl_array_get(a, 0) == 2 && tl_array_get(a, 5) == 7);
  CHECK(tl_array_data(a) == buf + 2);
  int64_t s6[1] = {6};
  CHECK_EQ_INT(tl_array_reshape(ctx, a, 1, s6, &v), TL_OK);
  tl_array_free(a);
  CHECK_EQ_INT(released, 0);
  CHECK(tl_array_get(v, 1) == 3);
  tl_array_free(v);
  CHECK_EQ_INT(released, 1);
  tl_ctx_free(ctx);
}

/* ---- random -------------------------------------------------------------------------- */

TL_TEST(ndarray_random) {
  tl_ctx *ctx = tl_ctx_new();
  int64_t n = 10000;
  for (int dt = 0; dt < TL_NDTYPES; dt++) {
    tl_array *a = make(ctx, 1, &n, dt), *b = make(ctx, 1, &n, dt), *c = make(ctx, 1, &n, dt);
    int is_float = tl_dtype_is_float(dt);
    double lo = is_float ? -2 : 0, hi = is_float ? 3 : (dt == TL_BOOL ? 2 : 7);
    CHECK_EQ_INT(tl_array_random(ctx, a, 0, lo, hi, 42), TL_OK);
    CHECK_EQ_INT(tl_array_random(ctx, b, 0, lo, hi, 42), TL_OK);
    CHECK_EQ_INT(tl_array_random(ctx, c, 0, lo, hi, 43), TL_OK);
    CHECK(memcmp(tl_array_data(a), tl_array_data(b), tl_array_nbytes(a)) == 0);
    CHECK(memcmp(tl_array_data(a), tl_array_data(c), tl_array_nbytes(a)) != 0);
    double mn = INFINITY, mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) {
      double x = tl_array_get(a, i);
      CHECK_MSG(x >= lo && x < hi, "%s: %g outside [%g, %g)", tl_dtype_name(dt), x, lo, hi);
      if (!is_float) CHECK(x == floor(x));
      mn = fmin(mn, x);
      mx = fmax(mx, x);
      sum += x;
    }
    if (is_float) {
      CHECK(mn < lo + 0.01 && mx > hi - 0.01);
      CHECK_NEAR(sum / n, 0.5, 0.05);
    } else {
      CHECK(mn == lo && mx == hi - 1);                /* every value is hit */
      CHECK_NEAR(sum / n, (lo + hi - 1) / 2, 0.1);
    }
    tl_array_free(a);
    tl_array_free(b);
    tl_array_free(c);
  }
  /* normal: mean and std, in float64 */
  n = 200000;
  tl_array *g = make(ctx, 1, &n, TL_FLOAT64);
  CHECK_EQ_INT(tl_array_random(ctx, g, 1, 5, 2, 7), TL_OK);
  double s = 0, ss = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = tl_array_get(g, i);
    s += x;
    ss += x * x;
  }
  double mean = s / n, var = ss / n - mean * mean;
  CHECK_NEAR(mean, 5, 0.02);
  CHECK_NEAR(sqrt(var), 2, 0.02);
  /* errors */
  CHECK_EQ_INT(tl_array_random(ctx, g, 0, 1, 1, 0), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "random: uniform range [1, 1) is empty");
  CHECK_EQ_INT(tl_array_random(ctx, g, 1, 0, -1, 0), TL_E_ARG);
  CHECK_EQ_INT(tl_array_random(ctx, g, 2, 0, 1, 0), TL_E_ARG);
  CHECK_EQ_INT(tl_array_random(ctx, g, 0, 0, INFINITY, 0), TL_E_ARG);
  tl_array_free(g);
  int64_t m = 16;
  tl_array *i8 = make(ctx, 1, &m, TL_INT8);
  CHECK_EQ_INT(tl_array_random(ctx, i8, 0, -1000, 1000, 0), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "random: range [-1000, 1000) exceeds the range of int8 [-128, 127]");
  CHECK_EQ_INT(tl_array_random(ctx, i8, 0, 0.2, 0.9, 0), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "random: no integer lies in [0.2, 0.9)");
  CHECK_EQ_INT(tl_array_random(ctx, i8, 0, -128, 128, 0), TL_OK);   /* the full range */
  tl_array_free(i8);
  tl_array *i64 = make(ctx, 1, &m, TL_INT64);
  CHECK_EQ_INT(tl_array_random(ctx, i64, 0, -9223372036854775808.0, 9223372036854775808.0, 3),
               TL_OK);
  int64_t *p = tl_array_data(i64);
  int distinct = 0;
  for (int i = 1; i < 16; i++) distinct += p[i] != p[0];
  CHECK(distinct > 0);
  tl_array_free(i64);
  tl_array *f16 = make(ctx, 1, &m, TL_FLOAT16);
  CHECK_EQ_INT(tl_array_random(ctx, f16, 0, 1.0001, 1.0002, 0), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "random: no float16 value lies in [1.0001, 1.0002)");
  CHECK_EQ_INT(tl_array_random(ctx, f16, 0, 0, 1e6, 0), TL_E_ARG);
  tl_array_free(f16);
  tl_ctx_free(ctx);
}

/* ---- allclose -------------------------------------------------------------------- */

TL_TEST(ndarray_allclose) {
  tl_ctx *ctx = tl_ctx_new();
  int64_t s[2] = {2, 5};
  tl_array *a = make(ctx, 2, s, TL_FLOAT32), *b = make(ctx, 2, s, TL_FLOAT64);
  for (int i = 0; i < 10; i++) {
    tl_array_set(a, i, i);
    tl_array_set(b, i, i);
  }
  int64_t worst = -2, nbad = -2;
  double err = -1;
  CHECK_EQ_INT(tl_array_allclose(ctx, a, b, 0, 0, &worst, &err), 0);
  CHECK(err == 0);
  tl_array_set(b, 3, 3.001);                        /* within rtol 1e-3 */
  tl_array_set(b, 7, 7.5);                          /* the worst */
  tl_array_set(b, 8, 8.2);
  CHECK_EQ_INT(tl_array_allclose(ctx, a, b, 1e-3, 0, &worst, &err), -1);
  CHECK_EQ_INT(worst, 7);
  CHECK_NEAR(err, 0.5, 1e-12);
  CHECK_EQ_INT(tl_array_compare(ctx, a, b, 1e-3, 0, &nbad, &worst, &err), TL_OK);
  CHECK_EQ_INT(nbad, 2);
  CHECK_EQ_INT(tl_array_compare(ctx, a, b, 0, 0.6, &nbad, NULL, NULL), TL_OK);
  CHECK_EQ_INT(nbad, 0);
  /* NaN and inf */
  tl_array_set(b, 3, 3);
  tl_array_set(b, 7, 7);
  tl_array_set(b, 8, 8);
  tl_array_set(a, 0, NAN);
  tl_array_set(b, 0, NAN);
  tl_array_set(a, 1, INFINITY);
  tl_array_set(b, 1, INFINITY);
  CHECK_EQ_INT(tl_array_allclose(ctx, a, b, 0, 0, &worst, &err), 0);   /* both NaN: close */
  tl_array_set(b, 1, -INFINITY);
  CHECK_EQ_INT(tl_array_allclose(ctx, a, b, 1, 1, &worst, &err), -1);
  CHECK_EQ_INT(worst, 1);
  tl_array_set(b, 1, INFINITY);
  tl_array_set(a, 9, NAN);
  CHECK_EQ_INT(tl_array_allclose(ctx, a, b, 1, 1, &worst, &err), -1);
  CHECK_EQ_INT(worst, 9);
  CHECK(isnan(err));
  /* NaN mismatches outrank finite ones */
  tl_array_set(b, 2, 1e6);
  CHECK_EQ_INT(tl_array_compare(ctx, a, b, 0, 0, &nbad, &worst, &err), TL_OK);
  CHECK_EQ_INT(nbad, 2);
  CHECK_EQ_INT(worst, 9);
  /* shape mismatch */
  int64_t s2[2] = {5, 2};
  tl_array *c = make(ctx, 2, s2, TL_FLOAT32);
  CHECK_EQ_INT(tl_array_allclose(ctx, a, c, 0, 0, &worst, &err), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "allclose: shape mismatch: (2, 5) vs (5, 2)");
  CHECK_EQ_INT(tl_array_allclose(ctx, a, b, -1, 0, &worst, &err), TL_E_ARG);
  tl_array_free(a);
  tl_array_free(b);
  tl_array_free(c);
  tl_ctx_free(ctx);
}
