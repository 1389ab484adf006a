/* Unit tests for core/graph/onnx.c: real ONNX node tests of libonnx-testdata
** (model, attributes, shapes and values, checked against the operator's
** definition computed here), tensors built field by field with the
** generated protobuf-c structs (typed fields, float16, ints, bool, 0-d,
** empty, external data) and malformed files (truncated, wrong wire type,
** bad sizes) with the errors they must produce. Tests that need the test
** data say so and pass when it is not installed. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "graph/onnx.h"
#include "runtime/runtime.h"
#include "tl_test.h"

/* ---- helpers ---------------------------------------------------------------------- */

static const char *node_dir(void) {
  const char *d = tl_onnx_testdata_dir();
  if (!d || access(d, R_OK) != 0) {
    printf("  (skipped: no ONNX test data; install libonnx-testdata)\n");
    return NULL;
  }
  return d;
}

static char *test_path(const char *test, const char *file) {
  return tl_sprintf("%s/%s/%s", tl_onnx_testdata_dir(), test, file);
}

static tl_onnx_model *load_model(tl_ctx *ctx, const char *test) {
  char *p = test_path(test, "model.onnx");
  tl_onnx_model *m = NULL;
  int rc = tl_onnx_model_load(ctx, p, &m);
  CHECK_MSG(rc == 0, "loading %s: %s", p, tl_errmsg(ctx));
  free(p);
  return m;
}

static tl_array *load_data(tl_ctx *ctx, const char *test, const char *file) {
  char *p = test_path(test, file);
  tl_array *a = NULL;
  char *name = NULL;
  int rc = tl_onnx_tensor_load(ctx, p, &a, &name);
  CHECK_MSG(rc == 0, "loading %s: %s", p, tl_errmsg(ctx));
  CHECK(name != NULL);
  free(name);
  free(p);
  return a;
}

static void check_shape(const tl_array *a, int ndim, const int64_t *shape) {
  CHECK_EQ_INT(tl_array_ndim(a), ndim);
  for (int i = 0; i < ndim; i++) CHECK_EQ_INT(tl_array_shape(a)[i], shape[i]);
}

/* A temporary file holding len bytes; the caller unlinks and frees it. */
static char *temp_file(const void *data, size_t len) {
  char *path = tl_strdup("/tmp/tl_onnx_XXXXXX");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  CHECK(write(fd, data, len) == (ssize_t)len);
  close(fd);
  return path;
}

/* Pack a TensorProto into a temporary file. */
static char *tensor_file(const Onnx__TensorProto *t) {
  size_t len = onnx__tensor_proto__get_packed_size(t);
  uint8_t *buf = malloc(len + 1);
  onnx__tensor_proto__pack(t, buf);
  char *path = temp_file(buf, len);
  free(buf);
  return path;
}

/* Load path as a tensor expecting failure with code and a message holding
** each of the NULL-terminated fragments. */
static void expect_tensor_error(tl_ctx *ctx, const char *path, int code, ...) {
  tl_array *a = (tl_array *)1;
  int rc = tl_onnx_tensor_load(ctx, path, &a, NULL);
  CHECK_MSG(rc == code, "expected error %d, got %d: %s", code, rc, tl_errmsg(ctx));
  CHECK(a == NULL);
  va_list ap;
  va_start(ap, code);
  const char *frag;
  while ((frag = va_arg(ap, const char *)) != NULL)
    CHECK_MSG(strstr(tl_errmsg(ctx), frag), "message '%s' lacks '%s'", tl_errmsg(ctx), frag);
  va_end(ap);
  tl_clearerr(ctx);
}

/* ---- real node tests ---------------------------------------------------------------- */

TL_TEST(onnx_relu) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_onnx_model *m = load_model(ctx, "test_relu");
  const tl_onnx_graph *g = tl_onnx_model_graph(m);
  CHECK(tl_onnx_model_ir_version(m) >= 3);
  CHECK(tl_onnx_model_opset(m, "") >= 6);
  CHECK_EQ_INT(tl_onnx_model_opset(m, "ai.onnx"), tl_onnx_model_opset(m, ""));
  CHECK_EQ_INT(tl_onnx_model_opset(m, "no.such.domain"), -1);
  CHECK_EQ_INT(tl_onnx_graph_num_nodes(g), 1);
  const tl_onnx_node *n = tl_onnx_graph_node(g, 0);
  CHECK_STREQ(tl_onnx_node_op_type(n), "Relu");
  CHECK_STREQ(tl_onnx_node_domain(n), "");
  CHECK_EQ_INT(tl_onnx_node_num_inputs(n), 1);
  CHECK_STREQ(tl_onnx_node_input(n, 0), "x");
  CHECK_STREQ(tl_onnx_node_output(n, 0), "y");
  CHECK_STREQ(tl_onnx_node_input(n, 5), "");
  CHECK(tl_onnx_graph_node(g, 1) == NULL);
  /* graph input x: float32 [3, 4, 5] */
  CHECK_EQ_INT(tl_onnx_graph_num_values(g, TL_ONNX_GRAPH_INPUTS), 1);
  CHECK_STREQ(tl_onnx_graph_value_name(g, TL_ONNX_GRAPH_INPUTS, 0), "x");
  const tl_onnx_type *ty = tl_onnx_graph_value_type(g, TL_ONNX_GRAPH_INPUTS, 0);
  CHECK_EQ_INT(tl_onnx_type_kind(ty), TL_ONNX_KIND_TENSOR);
  CHECK_EQ_INT(tl_onnx_type_elem_type(ty), TL_ONNX_FLOAT);
  CHECK_EQ_INT(tl_onnx_type_ndim(ty), 3);
  CHECK_EQ_INT(tl_onnx_type_dim(ty, 2), 5);
  CHECK_STREQ(tl_onnx_type_dim_param(ty, 2), "");
  CHECK(tl_onnx_type_elem(ty) == NULL);
  tl_onnx_model_free(m);

  tl_array *x = load_data(ctx, "test_relu", "test_data_set_0/input_0.pb");
  tl_array *y = load_data(ctx, "test_relu", "test_data_set_0/output_0.pb");
  check_shape(x, 3, (int64_t[]){3, 4, 5});
  CHECK_EQ_INT(tl_array_dtype(y), TL_FLOAT32);
  int neg = 0;
  const float *xv = tl_array_data(x), *yv = tl_array_data(y);
  for (int64_t i = 0; i < tl_array_numel(x); i++) {
    CHECK(yv[i] == (xv[i] > 0 ? xv[i] : 0.0f));
    neg += xv[i] < 0;
  }
  CHECK(neg > 0);
  tl_array_free(x);
  tl_array_free(y);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_conv_attributes) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_onnx_model *m = load_model(ctx, "test_conv_with_strides_padding");
  const tl_onnx_node *n = tl_onnx_graph_node(tl_onnx_model_graph(m), 0);
  CHECK_STREQ(tl_onnx_node_op_type(n), "Conv");
  CHECK_EQ_INT(tl_onnx_node_num_attrs(n), 3);
  int k = tl_onnx_node_find_attr(n, "strides");
  CHECK(k >= 0);
  CHECK_STREQ(tl_onnx_attr_name(n, k), "strides");
  CHECK_EQ_INT(tl_onnx_attr_type(n, k), TL_ONNX_ATTR_INTS);
  CHECK_EQ_INT(tl_onnx_attr_count(n, k), 2);
  CHECK(tl_onnx_attr_floats(n, k) == NULL); /* another type reads as NULL */
  CHECK_EQ_INT(tl_onnx_node_find_attr(n, "dilations"), -1);

  const int64_t *v;
  int count;
  CHECK_EQ_INT(tl_onnx_node_get_ints(ctx, n, "pads", &v, &count), 0);
  CHECK_EQ_INT(count, 4);
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(v[i], 1);
  CHECK_EQ_INT(tl_onnx_node_get_ints(ctx, n, "kernel_shape", &v, &count), 0);
  CHECK(count == 2 && v[0] == 3 && v[1] == 3);
  CHECK_EQ_INT(tl_onnx_node_get_ints(ctx, n, "dilations", &v, &count), 0);
  CHECK(v == NULL && count == -1);
  int64_t group;
  CHECK_EQ_INT(tl_onnx_node_get_int(ctx, n, "group", 1, &group), 0);
  CHECK_EQ_INT(group, 1);
  const char *s;
  CHECK_EQ_INT(tl_onnx_node_get_string(ctx, n, "auto_pad", "NOTSET", &s), 0);
  CHECK_STREQ(s, "NOTSET");
  double f;
  CHECK_EQ_INT(tl_onnx_node_get_float(ctx, n, "strides", 0.0, &f), TL_E_PARSE);
  CHECK_STREQ(tl_errmsg(ctx), "Conv node: attribute 'strides' is INTS, expected FLOAT");
  tl_clearerr(ctx);
  tl_onnx_model_free(m);

  /* x = arange(35) as [1, 1, 7, 5]; W = ones [1, 1, 3, 3]; y [1, 1, 4, 3] */
  tl_array *x = load_data(ctx, "test_conv_with_strides_padding", "test_data_set_0/input_0.pb");
  tl_array *w = load_data(ctx, "test_conv_with_strides_padding", "test_data_set_0/input_1.pb");
  tl_array *y = load_data(ctx, "test_conv_with_strides_padding", "test_data_set_0/output_0.pb");
  check_shape(x, 4, (int64_t[]){1, 1, 7, 5});
  check_shape(w, 4, (int64_t[]){1, 1, 3, 3});
  check_shape(y, 4, (int64_t[]){1, 1, 4, 3});
  for (int i = 0; i < 35; i++) CHECK_EQ_INT(tl_array_get(x, i), i);
  for (int oh = 0; oh < 4; oh++)
    for (int ow = 0; ow < 3; ow++) {
      double acc = 0;
      for (int kh = 0; kh < 3; kh++)
        for (int kw = 0; kw < 3; kw++) {
          int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
          if (ih >= 0 && ih < 7 && iw >= 0 && iw < 5)
            acc += tl_array_get(x, ih * 5 + iw) * tl_array_get(w, kh * 3 + kw);
        }
      CHECK_NEAR(tl_array_get(y, oh * 3 + ow), acc, 1e-4);
    }
  CHECK_NEAR(tl_array_get(y, 0), 12, 0);
  CHECK_NEAR(tl_array_get(y, 4), 108, 0);
  tl_array_free(x);
  tl_array_free(w);
  tl_array_free(y);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_maxpool_2d_default) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_onnx_model *m = load_model(ctx, "test_maxpool_2d_default");
  const tl_onnx_node *n = tl_onnx_graph_node(tl_onnx_model_graph(m), 0);
  CHECK_STREQ(tl_onnx_node_op_type(n), "MaxPool");
  const int64_t *ks;
  int count;
  CHECK_EQ_INT(tl_onnx_node_get_ints(ctx, n, "kernel_shape", &ks, &count), 0);
  CHECK(count == 2 && ks[0] == 2 && ks[1] == 2);
  const tl_onnx_type *ty = tl_onnx_graph_value_type(tl_onnx_model_graph(m), TL_ONNX_GRAPH_OUTPUTS, 0);
  CHECK_EQ_INT(tl_onnx_type_ndim(ty), 4);
  CHECK_EQ_INT(tl_onnx_type_dim(ty, 3), 31);
  tl_onnx_model_free(m);

  tl_array *x = load_data(ctx, "test_maxpool_2d_default", "test_data_set_0/input_0.pb");
  tl_array *y = load_data(ctx, "test_maxpool_2d_default", "test_data_set_0/output_0.pb");
  check_shape(x, 4, (int64_t[]){1, 3, 32, 32});
  check_shape(y, 4, (int64_t[]){1, 3, 31, 31});
  const float *xv = tl_array_data(x), *yv = tl_array_data(y);
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < 31; i++)
      for (int j = 0; j < 31; j++) {
        const float *p = xv + c * 1024 + i * 32 + j;
        float mx = fmaxf(fmaxf(p[0], p[1]), fmaxf(p[32], p[33]));
        CHECK(yv[c * 961 + i * 31 + j] == mx);
      }
  tl_array_free(x);
  tl_array_free(y);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_gemm_all_attributes) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_onnx_model *m = load_model(ctx, "test_gemm_all_attributes");
  const tl_onnx_node *n = tl_onnx_graph_node(tl_onnx_model_graph(m), 0);
  CHECK_STREQ(tl_onnx_node_op_type(n), "Gemm");
  double alpha, beta;
  int64_t ta, tb;
  CHECK_EQ_INT(tl_onnx_node_get_float(ctx, n, "alpha", 1.0, &alpha), 0);
  CHECK_EQ_INT(tl_onnx_node_get_float(ctx, n, "beta", 1.0, &beta), 0);
  CHECK_EQ_INT(tl_onnx_node_get_int(ctx, n, "transA", 0, &ta), 0);
  CHECK_EQ_INT(tl_onnx_node_get_int(ctx, n, "transB", 0, &tb), 0);
  CHECK(alpha == 0.25f && beta == 0.35f && ta == 1 && tb == 1);
  tl_onnx_model_free(m);

  /* Y = alpha * A' * B' + beta * C: A [4, 3] -> [3, 4], B [5, 4] -> [4, 5], C [1, 5] */
  tl_array *a = load_data(ctx, "test_gemm_all_attributes", "test_data_set_0/input_0.pb");
  tl_array *b = load_data(ctx, "test_gemm_all_attributes", "test_data_set_0/input_1.pb");
  tl_array *c = load_data(ctx, "test_gemm_all_attributes", "test_data_set_0/input_2.pb");
  tl_array *y = load_data(ctx, "test_gemm_all_attributes", "test_data_set_0/output_0.pb");
  check_shape(a, 2, (int64_t[]){4, 3});
  check_shape(y, 2, (int64_t[]){3, 5});
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 5; j++) {
      double acc = 0;
      for (int k = 0; k < 4; k++) acc += tl_array_get(a, k * 3 + i) * tl_array_get(b, j * 4 + k);
      CHECK_NEAR(tl_array_get(y, i * 5 + j), alpha * acc + beta * tl_array_get(c, j), 1e-5);
    }
  tl_array_free(a);
  tl_array_free(b);
  tl_array_free(c);
  tl_array_free(y);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_int_bool_float16_data) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  /* uint8 add wraps around */
  tl_array *a = load_data(ctx, "test_add_uint8", "test_data_set_0/input_0.pb");
  tl_array *b = load_data(ctx, "test_add_uint8", "test_data_set_0/input_1.pb");
  tl_array *s = load_data(ctx, "test_add_uint8", "test_data_set_0/output_0.pb");
  CHECK_EQ_INT(tl_array_dtype(s), TL_UINT8);
  const uint8_t *av = tl_array_data(a), *bv = tl_array_data(b), *sv = tl_array_data(s);
  for (int64_t i = 0; i < tl_array_numel(s); i++) CHECK_EQ_INT(sv[i], (uint8_t)(av[i] + bv[i]));
  tl_array_free(a);
  tl_array_free(b);
  tl_array_free(s);

  /* int32 equality -> bool */
  a = load_data(ctx, "test_equal", "test_data_set_0/input_0.pb");
  b = load_data(ctx, "test_equal", "test_data_set_0/input_1.pb");
  s = load_data(ctx, "test_equal", "test_data_set_0/output_0.pb");
  CHECK_EQ_INT(tl_array_dtype(a), TL_INT32);
  CHECK_EQ_INT(tl_array_dtype(s), TL_BOOL);
  const int32_t *ai = tl_array_data(a), *bi = tl_array_data(b);
  for (int64_t i = 0; i < tl_array_numel(s); i++)
    CHECK_EQ_INT(((const uint8_t *)tl_array_data(s))[i], ai[i] == bi[i]);
  tl_array_free(a);
  tl_array_free(b);
  tl_array_free(s);

  /* float32 -> float16: the output is the input rounded to nearest even */
  a = load_data(ctx, "test_cast_FLOAT_to_FLOAT16", "test_data_set_0/input_0.pb");
  s = load_data(ctx, "test_cast_FLOAT_to_FLOAT16", "test_data_set_0/output_0.pb");
  CHECK_EQ_INT(tl_array_dtype(s), TL_FLOAT16);
  check_shape(s, 2, (int64_t[]){3, 4});
  const float *af = tl_array_data(a);
  const uint16_t *h = tl_array_data(s);
  for (int64_t i = 0; i < 12; i++) {
    if (isnan(af[i]))
      CHECK(isnan(tl_half_to_float(h[i])));
    else
      CHECK_EQ_INT(h[i], tl_half_from_float(af[i]));
  }
  tl_array_free(a);
  tl_array_free(s);

  /* int64 scalars (0-d) and an empty float tensor */
  a = load_data(ctx, "test_if_seq", "test_data_set_0/input_0.pb");
  CHECK_EQ_INT(tl_array_ndim(a), 0);
  CHECK_EQ_INT(tl_array_numel(a), 1);
  CHECK_EQ_INT(tl_array_dtype(a), TL_BOOL);
  tl_array_free(a);
  a = load_data(ctx, "test_split_zero_size_splits", "test_data_set_0/input_0.pb");
  check_shape(a, 1, (int64_t[]){0});
  CHECK_EQ_INT(tl_array_numel(a), 0);
  tl_array_free(a);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_omitted_input_and_unsupported_type) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_onnx_model *m = load_model(ctx, "test_clip_default_max");
  const tl_onnx_node *n = tl_onnx_graph_node(tl_onnx_model_graph(m), 0);
  CHECK_EQ_INT(tl_onnx_node_num_inputs(n), 3);
  CHECK_STREQ(tl_onnx_node_input(n, 1), "");  /* min omitted */
  tl_onnx_model_free(m);

  char *p = test_path("test_max_uint32", "test_data_set_0/input_0.pb");
  expect_tensor_error(ctx, p, TL_E_DTYPE, p, "ONNX element type uint32 (12) has no tunelua dtype",
                      NULL);
  free(p);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_sequence_and_optional_values) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_onnx_model *m = load_model(ctx, "test_sequence_insert_at_back");
  const tl_onnx_type *ty = tl_onnx_graph_value_type(tl_onnx_model_graph(m), TL_ONNX_GRAPH_INPUTS, 0);
  CHECK_EQ_INT(tl_onnx_type_kind(ty), TL_ONNX_KIND_SEQUENCE);
  CHECK_EQ_INT(tl_onnx_type_kind(tl_onnx_type_elem(ty)), TL_ONNX_KIND_TENSOR);
  tl_onnx_model_free(m);

  char *p = test_path("test_sequence_insert_at_back", "test_data_set_0/input_0.pb");
  tl_onnx_value *v;
  CHECK_EQ_INT(tl_onnx_value_load(ctx, p, TL_ONNX_KIND_SEQUENCE, &v), 0);
  CHECK_EQ_INT(tl_onnx_value_kind(v), TL_ONNX_KIND_SEQUENCE);
  CHECK_EQ_INT(tl_onnx_value_count(v), 3);
  const tl_onnx_value *e = tl_onnx_value_elem(v, 2);
  CHECK_EQ_INT(tl_onnx_value_kind(e), TL_ONNX_KIND_TENSOR);
  tl_array *a;
  CHECK_EQ_INT(tl_onnx_tensor_to_array(ctx, tl_onnx_value_tensor(e), NULL, &a), 0);
  CHECK_EQ_INT(tl_array_dtype(a), TL_INT64);
  tl_array_free(a);
  CHECK(tl_onnx_value_elem(v, 3) == NULL);
  tl_onnx_value_free(v);
  free(p);

  p = test_path("test_optional_has_element_empty", "test_data_set_0/input_0.pb");
  CHECK_EQ_INT(tl_onnx_value_load(ctx, p, TL_ONNX_KIND_OPTIONAL, &v), 0);
  CHECK_EQ_INT(tl_onnx_value_kind(v), TL_ONNX_KIND_OPTIONAL);
  CHECK_EQ_INT(tl_onnx_value_count(v), 0);
  tl_onnx_value_free(v);
  free(p);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_list_dir) {
  const char *dir = node_dir();
  if (!dir) return;
  tl_ctx *ctx = tl_ctx_new();
  size_t need = 0;
  CHECK_EQ_INT(tl_onnx_list_dir(ctx, dir, NULL, 0, &need), 0);
  CHECK(need > 1000);
  char *buf = malloc(need);
  CHECK_EQ_INT(tl_onnx_list_dir(ctx, dir, buf, need, &need), 0);
  int n = 0, relu = 0;
  const char *prev = "";
  for (size_t at = 0; at < need; at += strlen(buf + at) + 1, n++) {
    CHECK(strcmp(prev, buf + at) < 0);
    relu |= !strcmp(buf + at, "test_relu");
    prev = buf + at;
  }
  CHECK(n > 500 && relu);
  free(buf);
  CHECK_EQ_INT(tl_onnx_list_dir(ctx, "/nonexistent/dir", NULL, 0, &need), TL_E_IO);
  CHECK(strstr(tl_errmsg(ctx), "cannot open directory '/nonexistent/dir'"));
  tl_ctx_free(ctx);
}

/* ---- tensors built field by field ----------------------------------------------------- */

TL_TEST(onnx_tensor_typed_fields) {
  tl_ctx *ctx = tl_ctx_new();
  tl_array *a;
  char *name;
  int64_t dims23[] = {2, 3};

  /* float_data, with a name */
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  float fv[] = {1.5f, -2, 3, 4, 5, 6.25f};
  t.has_data_type = 1, t.data_type = TL_ONNX_FLOAT;
  t.n_dims = 2, t.dims = dims23;
  t.n_float_data = 6, t.float_data = fv;
  t.name = "w";
  char *p = tensor_file(&t);
  CHECK_EQ_INT(tl_onnx_tensor_load(ctx, p, &a, &name), 0);
  CHECK_STREQ(name, "w");
  check_shape(a, 2, dims23);
  CHECK(tl_array_get(a, 0) == 1.5 && tl_array_get(a, 5) == 6.25);
  free(name);
  tl_array_free(a);
  unlink(p);
  free(p);

  /* int32_data carries float16 bit patterns, int8, uint8, int16 and bool */
  struct { int et, dtype; int32_t v[3]; double want[3]; } cases[] = {
      {TL_ONNX_FLOAT16, TL_FLOAT16, {0x3c00, 0xc000, 0x3555}, {1.0, -2.0, 0.333251953125}},
      {TL_ONNX_INT8, TL_INT8, {-128, 127, -1}, {-128, 127, -1}},
      {TL_ONNX_UINT8, TL_UINT8, {0, 255, 7}, {0, 255, 7}},
      {TL_ONNX_INT16, TL_INT16, {-32768, 32767, 5}, {-32768, 32767, 5}},
      {TL_ONNX_BOOL, TL_BOOL, {0, 1, 1}, {0, 1, 1}},
      {TL_ONNX_INT32, TL_INT32, {INT32_MIN, INT32_MAX, 0}, {INT32_MIN, INT32_MAX, 0}},
  };
  int64_t dim3 = 3;
  for (size_t c = 0; c < TL_ARRAY_SIZE(cases); c++) {
    Onnx__TensorProto u = ONNX__TENSOR_PROTO__INIT;
    u.has_data_type = 1, u.data_type = cases[c].et;
    u.n_dims = 1, u.dims = &dim3;
    u.n_int32_data = 3, u.int32_data = cases[c].v;
    p = tensor_file(&u);
    CHECK_MSG(tl_onnx_tensor_load(ctx, p, &a, NULL) == 0, "%s: %s",
              tl_onnx_elem_type_name(cases[c].et), tl_errmsg(ctx));
    CHECK_EQ_INT(tl_array_dtype(a), cases[c].dtype);
    for (int i = 0; i < 3; i++) CHECK_NEAR(tl_array_get(a, i), cases[c].want[i], 0);
    tl_array_free(a);
    unlink(p);
    free(p);
  }

  /* int64_data and double_data; 0-d tensors */
  Onnx__TensorProto s = ONNX__TENSOR_PROTO__INIT;
  int64_t iv = -(INT64_C(1) << 40);
  s.has_data_type = 1, s.data_type = TL_ONNX_INT64;
  s.n_int64_data = 1, s.int64_data = &iv;
  p = tensor_file(&s);
  CHECK_EQ_INT(tl_onnx_tensor_load(ctx, p, &a, NULL), 0);
  CHECK_EQ_INT(tl_array_ndim(a), 0);
  CHECK_EQ_INT(((int64_t *)tl_array_data(a))[0], iv);
  tl_array_free(a);
  unlink(p);
  free(p);
  double dv = 0.1;
  s.data_type = TL_ONNX_DOUBLE;
  s.n_int64_data = 0, s.int64_data = NULL;
  s.n_double_data = 1, s.double_data = &dv;
  p = tensor_file(&s);
  CHECK_EQ_INT(tl_onnx_tensor_load(ctx, p, &a, NULL), 0);
  CHECK(tl_array_get(a, 0) == 0.1);
  tl_array_free(a);
  unlink(p);
  free(p);

  /* raw_data: int16 little-endian, bools other than 0/1 read as 1 */
  uint8_t raw[] = {0x01, 0x02, 0xff, 0xff, 0x00, 0x80};
  Onnx__TensorProto r = ONNX__TENSOR_PROTO__INIT;
  r.has_data_type = 1, r.data_type = TL_ONNX_INT16;
  r.n_dims = 1, r.dims = &dim3;
  r.has_raw_data = 1, r.raw_data.len = 6, r.raw_data.data = raw;
  p = tensor_file(&r);
  CHECK_EQ_INT(tl_onnx_tensor_load(ctx, p, &a, NULL), 0);
  CHECK(tl_array_get(a, 0) == 0x0201 && tl_array_get(a, 1) == -1 && tl_array_get(a, 2) == -32768);
  tl_array_free(a);
  unlink(p);
  free(p);
  r.data_type = TL_ONNX_BOOL, r.raw_data.len = 3, raw[0] = 2, raw[1] = 0, raw[2] = 1;
  p = tensor_file(&r);
  CHECK_EQ_INT(tl_onnx_tensor_load(ctx, p, &a, NULL), 0);
  CHECK(tl_array_get(a, 0) == 1 && tl_array_get(a, 1) == 0 && tl_array_get(a, 2) == 1);
  tl_array_free(a);
  unlink(p);
  free(p);

  /* empty: a dimension of 0, no data at all */
  int64_t dims0[] = {2, 0, 3};
  Onnx__TensorProto z = ONNX__TENSOR_PROTO__INIT;
  z.has_data_type = 1, z.data_type = TL_ONNX_FLOAT;
  z.n_dims = 3, z.dims = dims0;
  p = tensor_file(&z);
  CHECK_EQ_INT(tl_onnx_tensor_load(ctx, p, &a, NULL), 0);
  check_shape(a, 3, dims0);
  CHECK_EQ_INT(tl_array_numel(a), 0);
  tl_array_free(a);
  unlink(p);
  free(p);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_tensor_external_data) {
  tl_ctx *ctx = tl_ctx_new();
  char dir[] = "/tmp/tl_onnx_ext_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char *bin = tl_sprintf("%s/w.bin", dir), *pb = tl_sprintf("%s/w.pb", dir);
  float vals[5] = {0, 1.5f, 2.5f, 3.5f, 4.5f};  /* the tensor starts at byte 4 */
  FILE *f = fopen(bin, "wb");
  CHECK(f && fwrite(vals, sizeof vals, 1, f) == 1);
  fclose(f);

  Onnx__StringStringEntryProto e[3] = {ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                       ONNX__STRING_STRING_ENTRY_PROTO__INIT,
                                       ONNX__STRING_STRING_ENTRY_PROTO__INIT};
  e[0].key = "location", e[0].value = "w.bin";
  e[1].key = "offset", e[1].value = "4";
  e[2].key = "length", e[2].value = "16";
  Onnx__StringStringEntryProto *ep[3] = {&e[0], &e[1], &e[2]};
  int64_t dims[] = {2, 2};
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  t.has_data_type = 1, t.data_type = TL_ONNX_FLOAT;
  t.n_dims = 2, t.dims = dims;
  t.has_data_location = 1, t.data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  t.n_external_data = 3, t.external_data = ep;
  size_t len = onnx__tensor_proto__get_packed_size(&t);
  uint8_t *buf = malloc(len);
  onnx__tensor_proto__pack(&t, buf);
  CHECK_EQ_INT(tl_write_file_atomic(ctx, pb, buf, len), 0);
  free(buf);

  tl_array *a;
  CHECK_MSG(tl_onnx_tensor_load(ctx, pb, &a, NULL) == 0, "%s", tl_errmsg(ctx));
  for (int i = 0; i < 4; i++) CHECK(tl_array_get(a, i) == vals[i + 1]);
  tl_array_free(a);

  /* a location outside the directory is refused; a short file is reported */
  e[0].value = "../w.bin";
  buf = malloc(len + 8);
  len = onnx__tensor_proto__get_packed_size(&t);
  onnx__tensor_proto__pack(&t, buf);
  CHECK_EQ_INT(tl_write_file_atomic(ctx, pb, buf, len), 0);
  expect_tensor_error(ctx, pb, TL_E_PARSE, "location '../w.bin' leaves the model's directory", NULL);
  e[0].value = "w.bin", e[1].value = "8";
  len = onnx__tensor_proto__get_packed_size(&t);
  onnx__tensor_proto__pack(&t, buf);
  CHECK_EQ_INT(tl_write_file_atomic(ctx, pb, buf, len), 0);
  expect_tensor_error(ctx, pb, TL_E_PARSE, "ends early: expected 16 bytes at offset 8, got 12", NULL);
  free(buf);
  unlink(bin);
  unlink(pb);
  rmdir(dir);
  free(bin);
  free(pb);
  tl_ctx_free(ctx);
}

/* ---- malformed files ------------------------------------------------------------------ */

TL_TEST(onnx_tensor_bad_sizes_and_types) {
  tl_ctx *ctx = tl_ctx_new();
  int64_t dims23[] = {2, 3};
  uint8_t raw[24] = {0};
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  t.has_data_type = 1, t.data_type = TL_ONNX_FLOAT;
  t.n_dims = 2, t.dims = dims23;
  t.has_raw_data = 1, t.raw_data.len = 20, t.raw_data.data = raw;
  char *p = tensor_file(&t);
  expect_tensor_error(ctx, p, TL_E_PARSE, p,
                      "raw_data size mismatch: expected 24 bytes for float32 [2, 3], got 20", NULL);
  unlink(p);
  free(p);

  t.data_type = 42, t.raw_data.len = 24;
  p = tensor_file(&t);
  expect_tensor_error(ctx, p, TL_E_DTYPE, p, "unknown data type code 42", NULL);
  unlink(p);
  free(p);

  /* typed field with the wrong count, or no data at all */
  float fv[5] = {0};
  t.data_type = TL_ONNX_FLOAT, t.has_raw_data = 0;
  t.n_float_data = 5, t.float_data = fv;
  p = tensor_file(&t);
  expect_tensor_error(ctx, p, TL_E_PARSE, "float_data holds 5 values, expected 6 for float32 [2, 3]",
                      NULL);
  unlink(p);
  free(p);
  t.n_float_data = 0, t.float_data = NULL;
  p = tensor_file(&t);
  expect_tensor_error(ctx, p, TL_E_PARSE, "no data for float32 [2, 3]", NULL);
  unlink(p);
  free(p);

  /* int32_data out of range for int8; a negative dimension */
  int32_t iv[6] = {1, 2, 300, 4, 5, 6};
  t.data_type = TL_ONNX_INT8, t.n_int32_data = 6, t.int32_data = iv;
  p = tensor_file(&t);
  expect_tensor_error(ctx, p, TL_E_PARSE, "int32_data[2] = 300 is out of range for int8", NULL);
  unlink(p);
  free(p);
  dims23[1] = -3;
  p = tensor_file(&t);
  expect_tensor_error(ctx, p, TL_E_SHAPE, "dimension 1 of int8 [2, -3] is negative", NULL);
  unlink(p);
  free(p);

  /* an empty file is a TensorProto with nothing set */
  p = temp_file("", 0);
  expect_tensor_error(ctx, p, TL_E_PARSE, "no data_type", NULL);
  unlink(p);
  free(p);
  expect_tensor_error(ctx, "/nonexistent/x.pb", TL_E_IO, "cannot open '/nonexistent/x.pb'", NULL);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_malformed_wire) {
  tl_ctx *ctx = tl_ctx_new();
  /* raw_data (field 9) declares 24 bytes, the file ends after 20 */
  int64_t dims23[] = {2, 3};
  uint8_t raw[24] = {0};
  Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
  t.has_data_type = 1, t.data_type = TL_ONNX_FLOAT;
  t.n_dims = 2, t.dims = dims23;
  t.has_raw_data = 1, t.raw_data.len = 24, t.raw_data.data = raw;
  size_t len = onnx__tensor_proto__get_packed_size(&t);
  uint8_t *buf = malloc(len);
  onnx__tensor_proto__pack(&t, buf);
  char *p = temp_file(buf, len - 4);
  free(buf);
  char want[128];
  snprintf(want, sizeof want, "declares 24 bytes, only 20 left");
  expect_tensor_error(ctx, p, TL_E_PARSE, p, "malformed TensorProto: truncated: raw_data (field 9)",
                      want, NULL);
  unlink(p);
  free(p);

  /* dims (field 1, int64) written as fixed32 */
  uint8_t wrong[] = {(1 << 3) | 5, 1, 2, 3, 4};
  p = temp_file(wrong, sizeof wrong);
  expect_tensor_error(ctx, p, TL_E_PARSE,
                      "corrupt: dims (field 1) at byte 0 has wire type fixed32, expected varint", NULL);
  unlink(p);
  free(p);

  /* a field key cut in the middle of its varint */
  uint8_t cut[] = {0x08, 0x02, 0x80};
  p = temp_file(cut, sizeof cut);
  expect_tensor_error(ctx, p, TL_E_PARSE, "truncated: field key at byte 2 runs past the end", NULL);
  unlink(p);
  free(p);
  tl_ctx_free(ctx);
}

TL_TEST(onnx_malformed_model) {
  if (!node_dir()) return;
  tl_ctx *ctx = tl_ctx_new();
  char *src = test_path("test_conv_with_strides_padding", "model.onnx");
  char *data;
  size_t len;
  CHECK_EQ_INT(tl_read_file(ctx, src, &data, &len), 0);
  free(src);
  /* every cut of the model is refused with an error naming the file, never
  ** a crash, unless it falls after the graph (opset_import comes last) */
  int truncated = 0, loaded = 0;
  for (size_t cut = 1; cut < len; cut += 7) {
    char *p = temp_file(data, cut);
    tl_onnx_model *m = (tl_onnx_model *)1;
    int rc = tl_onnx_model_load(ctx, p, &m);
    if (rc == 0) {
      CHECK(cut > len - 16);
      tl_onnx_model_free(m);
      loaded++;
    } else {
      CHECK_MSG(rc == TL_E_PARSE, "cut at %zu: rc %d: %s", cut, rc, tl_errmsg(ctx));
      CHECK(m == NULL);
      CHECK(strstr(tl_errmsg(ctx), p) == tl_errmsg(ctx));
      truncated += strstr(tl_errmsg(ctx), "malformed ModelProto: truncated: ") != NULL;
    }
    tl_clearerr(ctx);
    unlink(p);
    free(p);
  }
  CHECK(truncated > (int)(len / 7) / 2);
  /* a cut inside the graph names the path to the cut field */
  char *p = temp_file(data, len - 10);
  tl_onnx_model *m;
  CHECK_EQ_INT(tl_onnx_model_load(ctx, p, &m), TL_E_PARSE);
  CHECK_MSG(strstr(tl_errmsg(ctx), "truncated: graph"), "%s", tl_errmsg(ctx));
  tl_clearerr(ctx);
  unlink(p);
  free(p);
  /* an empty file is not a model */
  p = temp_file("", 0);
  CHECK_EQ_INT(tl_onnx_model_load(ctx, p, &m), TL_E_PARSE);
  CHECK(strstr(tl_errmsg(ctx), "not an ONNX model: the ModelProto has no graph"));
  tl_clearerr(ctx);
  unlink(p);
  free(p);
  free(data);
  tl_ctx_free(ctx);
}
