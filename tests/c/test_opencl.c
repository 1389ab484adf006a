/*
** Unit tests for the OpenCL backend (core/codegen/opencl.c) and runtime
** (core/runtime/opencl.c). Loop IR is built by hand (as lowering hands it
** over), turned into OpenCL C, built and run on the OpenCL device (pocl in
** CI), and compared with a reference computed here: an elementwise kernel
** with block/thread binding and float4 vectors, a block-wide reversal
** through __local memory and a barrier, a shared-memory tiled matmul, an
** unrolled per-thread reduction; the work-group check, the build log of a
** failed build, device arrays and the time evaluator. Without an OpenCL
** device the tests print a skip line and pass.
*/
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "tl_test.h"

static int have_device(const char *test) {
  if (tl_opencl_device_count() > 0) return 1;
  fprintf(stderr, "  SKIP %s: no OpenCL device\n", test);
  return 0;
}

static int arg_buf(tl_ir *ir, const char *name, tl_type t, int ndim, const int64_t *shape, int k) {
  tl_ref s[8];
  for (int d = 0; d < ndim; d++) s[d] = tl_int(ir, shape[d]);
  int b = tl_buffer_new(ir, name, t, ndim, s, TL_SCOPE_GLOBAL);
  tl_ir_buffer(ir, b)->arg = k;
  return b;
}

static tl_array *host1(tl_ctx *ctx, int64_t n, double (*fn)(int64_t)) {
  tl_array *a = NULL;
  CHECK_EQ_INT(tl_array_empty(ctx, 1, &n, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_OK);
  if (fn)
    for (int64_t i = 0; i < n; i++) tl_array_set(a, i, fn(i));
  return a;
}

static tl_array *to_dev(tl_ctx *ctx, tl_array *h) {
  tl_array *d = NULL;
  CHECK_EQ_INT(tl_array_empty(ctx, tl_array_ndim(h), tl_array_shape(h), tl_array_dtype(h),
                              TL_DEV_OPENCL, 0, &d), TL_OK);
  CHECK_MSG(tl_array_copyto(ctx, h, d) == TL_OK, "%s", tl_errmsg(ctx));
  return d;
}

static void to_host(tl_ctx *ctx, tl_array *d, tl_array *h) {
  CHECK_MSG(tl_array_copyto(ctx, d, h) == TL_OK, "%s", tl_errmsg(ctx));
}

static tl_ocl_module *build_ok(tl_ctx *ctx, tl_lowered *f) {
  tl_ocl_module *m = NULL;
  int rc = tl_opencl_build(ctx, f, 0, &m);
  const char *src = NULL;
  if (rc) tl_opencl_source(ctx, f, &src);
  CHECK_MSG(rc == TL_OK, "build failed: %s\n%s", tl_errmsg(ctx), src ? src : "");
  return m;
}

static double fa(int64_t i) { return (double)(i % 97) * 0.25 - 7; }
static double fb(int64_t i) { return (double)((i * 7) % 31) - 15; }

/* C[i] = A[i] * B[i] + 1 over n = 64 blocks x 16 threads x 4 lanes */
TL_TEST(opencl_elementwise_float4) {
  if (!have_device("opencl_elementwise_float4")) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t n = 4096;
  int bufs[3] = {arg_buf(ir, "A", TL_T_F32, 1, &n, 0), arg_buf(ir, "B", TL_T_F32, 1, &n, 1),
                 arg_buf(ir, "C", TL_T_F32, 1, &n, 2)};
  tl_ref bx = tl_var_new(ir, "bx", TL_T_INDEX), tx = tl_var_new(ir, "tx", TL_T_INDEX),
         v = tl_var_new(ir, "v", TL_T_INDEX);
  tl_ref idx = tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, bx, tl_int(ir, 16)), tx), tl_int(ir, 4)), v);
  tl_ref val = tl_add(ir, tl_mul(ir, tl_load(ir, bufs[0], &idx, 1), tl_load(ir, bufs[1], &idx, 1)),
                      tl_imm_float(ir, TL_T_F32, 1));
  tl_ref body = tl_store(ir, bufs[2], val, &idx, 1);
  body = tl_for(ir, v, tl_int(ir, 0), tl_int(ir, 4), TL_FOR_VECTORIZED, 0, body);
  body = tl_for(ir, tx, tl_int(ir, 0), tl_int(ir, 16), TL_FOR_THREAD, TL_TAG_THREAD_X, body);
  body = tl_for(ir, bx, tl_int(ir, 0), tl_int(ir, 64), TL_FOR_THREAD, TL_TAG_BLOCK_X, body);
  tl_lowered f = {ir, body, "ew", 3, bufs};
  tl_ocl_module *m = build_ok(ctx, &f);
  const char *src = tl_ocl_module_source(m);
  CHECK(strstr(src, "vload4(") && strstr(src, "vstore4(") && strstr(src, "get_local_id(0)"));
  int64_t g[3], b[3];
  CHECK_STREQ(tl_ocl_module_kernel(m, 0, g, b), "ew_kernel0");
  CHECK(g[0] == 64 && b[0] == 16 && g[1] == 1 && b[2] == 1);
  tl_array *ha = host1(ctx, n, fa), *hb = host1(ctx, n, fb), *hc = host1(ctx, n, NULL);
  tl_array *da = to_dev(ctx, ha), *db = to_dev(ctx, hb), *dc = to_dev(ctx, hc);
  tl_array *args[3] = {da, db, dc};
  CHECK_MSG(tl_ocl_module_call(ctx, m, args, 3) == TL_OK, "%s", tl_errmsg(ctx));
  to_host(ctx, dc, hc);
  for (int64_t i = 0; i < n; i++) CHECK_NEAR(tl_array_get(hc, i), fa(i) * fb(i) + 1, 1e-4);
  /* host arrays are refused with a reason */
  tl_array *bad[3] = {ha, db, dc};
  CHECK_EQ_INT(tl_ocl_module_call(ctx, m, bad, 3), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "expected opencl:0") != NULL);
  /* time evaluator: events and wall clock */
  double secs[2];
  CHECK_EQ_INT(tl_ocl_module_time(ctx, m, args, 3, 2, 2, 0, 0, secs), TL_OK);
  CHECK(secs[0] > 0 && secs[1] > 0);
  CHECK_EQ_INT(tl_ocl_module_time(ctx, m, args, 3, 1, 1, 1.0, 1, secs), TL_OK);
  CHECK(secs[0] > 0);
  tl_array_free(ha), tl_array_free(hb), tl_array_free(hc);
  tl_array_free(da), tl_array_free(db), tl_array_free(dc);
  tl_ocl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* B[bx*64 + t] = A[bx*64 + 63 - t] through __local memory and a barrier */
TL_TEST(opencl_shared_barrier) {
  if (!have_device("opencl_shared_barrier")) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t n = 64 * 10, T = 64;
  int bufs[2] = {arg_buf(ir, "A", TL_T_F32, 1, &n, 0), arg_buf(ir, "B", TL_T_F32, 1, &n, 1)};
  tl_ref tsz = tl_int(ir, T);
  int S = tl_buffer_new(ir, "S", TL_T_F32, 1, &tsz, TL_SCOPE_SHARED);
  tl_ref bx = tl_var_new(ir, "bx", TL_T_INDEX), tx = tl_var_new(ir, "tx", TL_T_INDEX),
         tx2 = tl_var_new(ir, "tx", TL_T_INDEX);
  tl_ref gi = tl_add(ir, tl_mul(ir, bx, tsz), tx);
  tl_ref fill = tl_store(ir, S, tl_load(ir, bufs[0], &gi, 1), &tx, 1);
  tl_ref ri = tl_sub(ir, tl_int(ir, T - 1), tx2);
  tl_ref go = tl_add(ir, tl_mul(ir, bx, tsz), tx2);
  tl_ref use = tl_store(ir, bufs[1], tl_load(ir, S, &ri, 1), &go, 1);
  tl_ref parts[3] = {tl_for(ir, tx, tl_int(ir, 0), tsz, TL_FOR_THREAD, TL_TAG_THREAD_X, fill),
                     tl_barrier(ir, TL_SCOPE_SHARED),
                     tl_for(ir, tx2, tl_int(ir, 0), tsz, TL_FOR_THREAD, TL_TAG_THREAD_X, use)};
  tl_ref body = tl_alloc(ir, S, tl_seq(ir, parts, 3));
  body = tl_for(ir, bx, tl_int(ir, 0), tl_int(ir, 10), TL_FOR_THREAD, TL_TAG_BLOCK_X, body);
  tl_lowered f = {ir, body, "rev", 2, bufs};
  tl_ocl_module *m = build_ok(ctx, &f);
  const char *src = tl_ocl_module_source(m);
  CHECK(strstr(src, "__local float S[64];") && strstr(src, "barrier(CLK_LOCAL_MEM_FENCE);"));
  tl_array *ha = host1(ctx, n, fa), *hb = host1(ctx, n, NULL);
  tl_array *da = to_dev(ctx, ha), *db = to_dev(ctx, hb);
  tl_array *args[2] = {da, db};
  CHECK_MSG(tl_ocl_module_call(ctx, m, args, 2) == TL_OK, "%s", tl_errmsg(ctx));
  to_host(ctx, db, hb);
  for (int64_t i = 0; i < n; i++) CHECK_NEAR(tl_array_get(hb, i), fa((i / T) * T + T - 1 - i % T), 0);
  tl_array_free(ha), tl_array_free(hb), tl_array_free(da), tl_array_free(db);
  tl_ocl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* C = A x B (M x K, K x N), 16 x 16 tiles in __local memory, one output per thread */
TL_TEST(opencl_matmul_shared_tiles) {
  if (!have_device("opencl_matmul_shared_tiles")) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  const int64_t M = 64, N = 48, K = 80, T = 16;
  int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  int bufs[3] = {arg_buf(ir, "A", TL_T_F32, 2, sa, 0), arg_buf(ir, "B", TL_T_F32, 2, sb, 1),
                 arg_buf(ir, "C", TL_T_F32, 2, sc, 2)};
  tl_ref tt = tl_int(ir, T * T), one = tl_int(ir, 1), t = tl_int(ir, T);
  int As = tl_buffer_new(ir, "As", TL_T_F32, 1, &tt, TL_SCOPE_SHARED);
  int Bs = tl_buffer_new(ir, "Bs", TL_T_F32, 1, &tt, TL_SCOPE_SHARED);
  int acc = tl_buffer_new(ir, "acc", TL_T_F32, 1, &one, TL_SCOPE_LOCAL);
  tl_ref by = tl_var_new(ir, "by", TL_T_INDEX), bx = tl_var_new(ir, "bx", TL_T_INDEX);
  tl_ref ty = tl_var_new(ir, "ty", TL_T_INDEX), tx = tl_var_new(ir, "tx", TL_T_INDEX);
  tl_ref ko = tl_var_new(ir, "ko", TL_T_INDEX), ki = tl_var_new(ir, "ki", TL_T_INDEX);
  tl_ref zero = tl_int(ir, 0);
  tl_ref row = tl_add(ir, tl_mul(ir, by, t), ty), col = tl_add(ir, tl_mul(ir, bx, t), tx);
  tl_ref lidx = tl_add(ir, tl_mul(ir, ty, t), tx);
  tl_ref ai = tl_add(ir, tl_mul(ir, row, tl_int(ir, K)), tl_add(ir, tl_mul(ir, ko, t), tx));
  tl_ref bi = tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, ko, t), ty), tl_int(ir, N)), col);
  tl_ref a_s = tl_add(ir, tl_mul(ir, ty, t), ki), b_s = tl_add(ir, tl_mul(ir, ki, t), tx);
  tl_ref upd = tl_store(ir, acc, tl_add(ir, tl_load(ir, acc, &zero, 1),
                                        tl_mul(ir, tl_load(ir, As, &a_s, 1), tl_load(ir, Bs, &b_s, 1))),
                        &zero, 1);
  tl_ref kloop[5] = {tl_barrier(ir, TL_SCOPE_SHARED),
                     tl_store(ir, As, tl_load(ir, bufs[0], &ai, 1), &lidx, 1),
                     tl_store(ir, Bs, tl_load(ir, bufs[1], &bi, 1), &lidx, 1),
                     tl_barrier(ir, TL_SCOPE_SHARED),
                     tl_for(ir, ki, zero, t, TL_FOR_UNROLLED, 0, upd)};
  tl_ref ci = tl_add(ir, tl_mul(ir, row, tl_int(ir, N)), col);
  tl_ref inner[3] = {tl_store(ir, acc, tl_imm_float(ir, TL_T_F32, 0), &zero, 1),
                     tl_for(ir, ko, zero, tl_int(ir, K / T), TL_FOR_SERIAL, 0, tl_seq(ir, kloop, 5)),
                     tl_store(ir, bufs[2], tl_load(ir, acc, &zero, 1), &ci, 1)};
  tl_ref body = tl_alloc(ir, acc, tl_seq(ir, inner, 3));
  body = tl_for(ir, tx, zero, t, TL_FOR_THREAD, TL_TAG_THREAD_X, body);
  body = tl_for(ir, ty, zero, t, TL_FOR_THREAD, TL_TAG_THREAD_Y, body);
  body = tl_alloc(ir, As, tl_alloc(ir, Bs, body));
  body = tl_for(ir, bx, zero, tl_int(ir, N / T), TL_FOR_THREAD, TL_TAG_BLOCK_X, body);
  body = tl_for(ir, by, zero, tl_int(ir, M / T), TL_FOR_THREAD, TL_TAG_BLOCK_Y, body);
  tl_lowered f = {ir, body, "mm", 3, bufs};
  tl_ocl_module *m = build_ok(ctx, &f);
  CHECK(strstr(tl_ocl_module_source(m), "#pragma unroll") != NULL);
  int64_t g[3], b[3];
  tl_ocl_module_kernel(m, 0, g, b);
  CHECK(g[0] == N / T && g[1] == M / T && b[0] == T && b[1] == T);
  tl_array *ha = NULL, *hb = NULL, *hc = NULL;
  CHECK_EQ_INT(tl_array_empty(ctx, 2, sa, TL_FLOAT32, TL_DEV_CPU, 0, &ha), TL_OK);
  CHECK_EQ_INT(tl_array_empty(ctx, 2, sb, TL_FLOAT32, TL_DEV_CPU, 0, &hb), TL_OK);
  CHECK_EQ_INT(tl_array_empty(ctx, 2, sc, TL_FLOAT32, TL_DEV_CPU, 0, &hc), TL_OK);
  for (int64_t i = 0; i < M * K; i++) tl_array_set(ha, i, fa(i) / 8);
  for (int64_t i = 0; i < K * N; i++) tl_array_set(hb, i, fb(i) / 8);
  tl_array *da = to_dev(ctx, ha), *db = to_dev(ctx, hb), *dc = to_dev(ctx, hc);
  tl_array *args[3] = {da, db, dc};
  CHECK_MSG(tl_ocl_module_call(ctx, m, args, 3) == TL_OK, "%s", tl_errmsg(ctx));
  to_host(ctx, dc, hc);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double ref = 0;
      for (int64_t k = 0; k < K; k++) ref += tl_array_get(ha, i * K + k) * tl_array_get(hb, k * N + j);
      CHECK_NEAR(tl_array_get(hc, i * N + j), ref, 1e-3);
    }
  tl_array_free(ha), tl_array_free(hb), tl_array_free(hc);
  tl_array_free(da), tl_array_free(db), tl_array_free(dc);
  tl_ocl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* S[r] = sum_k A[r, k], one row per thread, the k loop unrolled by 4 */
TL_TEST(opencl_reduction_unrolled) {
  if (!have_device("opencl_reduction_unrolled")) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  const int64_t R = 96, L = 40;
  int64_t sa[2] = {R, L};
  int bufs[2] = {arg_buf(ir, "A", TL_T_F32, 2, sa, 0), arg_buf(ir, "S", TL_T_F32, 1, &R, 1)};
  tl_ref bx = tl_var_new(ir, "bx", TL_T_INDEX), tx = tl_var_new(ir, "tx", TL_T_INDEX);
  tl_ref ko = tl_var_new(ir, "ko", TL_T_INDEX), ki = tl_var_new(ir, "ki", TL_T_INDEX);
  tl_ref r = tl_add(ir, tl_mul(ir, bx, tl_int(ir, 32)), tx);
  tl_ref ai = tl_add(ir, tl_mul(ir, r, tl_int(ir, L)), tl_add(ir, tl_mul(ir, ko, tl_int(ir, 4)), ki));
  tl_ref upd = tl_store(ir, bufs[1], tl_add(ir, tl_load(ir, bufs[1], &r, 1), tl_load(ir, bufs[0], &ai, 1)), &r, 1);
  tl_ref red = tl_for(ir, ko, tl_int(ir, 0), tl_int(ir, L / 4), TL_FOR_SERIAL, 0,
                      tl_for(ir, ki, tl_int(ir, 0), tl_int(ir, 4), TL_FOR_UNROLLED, 0, upd));
  tl_ref parts[2] = {tl_store(ir, bufs[1], tl_imm_float(ir, TL_T_F32, 0), &r, 1), red};
  tl_ref body = tl_seq(ir, parts, 2);
  body = tl_for(ir, tx, tl_int(ir, 0), tl_int(ir, 32), TL_FOR_THREAD, TL_TAG_THREAD_X, body);
  body = tl_for(ir, bx, tl_int(ir, 0), tl_int(ir, R / 32), TL_FOR_THREAD, TL_TAG_BLOCK_X, body);
  tl_lowered f = {ir, body, "rowsum", 2, bufs};
  tl_ocl_module *m = build_ok(ctx, &f);
  CHECK(strstr(tl_ocl_module_source(m), "#pragma unroll") != NULL);
  tl_array *ha = NULL;
  CHECK_EQ_INT(tl_array_empty(ctx, 2, sa, TL_FLOAT32, TL_DEV_CPU, 0, &ha), TL_OK);
  for (int64_t i = 0; i < R * L; i++) tl_array_set(ha, i, fa(i * 3));
  tl_array *hs = host1(ctx, R, NULL), *da = to_dev(ctx, ha), *ds = to_dev(ctx, hs);
  tl_array *args[2] = {da, ds};
  CHECK_MSG(tl_ocl_module_call(ctx, m, args, 2) == TL_OK, "%s", tl_errmsg(ctx));
  to_host(ctx, ds, hs);
  for (int64_t i = 0; i < R; i++) {
    double ref = 0;
    for (int64_t k = 0; k < L; k++) ref += tl_array_get(ha, i * L + k);
    CHECK_NEAR(tl_array_get(hs, i), ref, 1e-3);
  }
  tl_array_free(ha), tl_array_free(hs), tl_array_free(da), tl_array_free(ds);
  tl_ocl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* More work-items per group than the device allows: an error, nothing launched */
TL_TEST(opencl_invalid_work_group) {
  if (!have_device("opencl_invalid_work_group")) return;
  tl_ctx *ctx = tl_ctx_new();
  int64_t maxwg = 0;
  CHECK_EQ_INT(tl_opencl_hw_params(ctx, 0, &maxwg, NULL, NULL, NULL), TL_OK);
  CHECK(maxwg >= 1);
  tl_ir *ir = tl_ir_new();
  int64_t n = maxwg * 4;
  int bufs[1] = {arg_buf(ir, "A", TL_T_F32, 1, &n, 0)};
  tl_ref tx = tl_var_new(ir, "tx", TL_T_INDEX), ty = tl_var_new(ir, "ty", TL_T_INDEX);
  tl_ref idx = tl_add(ir, tl_mul(ir, ty, tl_int(ir, maxwg)), tx);
  tl_ref body = tl_store(ir, bufs[0], tl_imm_float(ir, TL_T_F32, 1), &idx, 1);
  body = tl_for(ir, tx, tl_int(ir, 0), tl_int(ir, maxwg), TL_FOR_THREAD, TL_TAG_THREAD_X, body);
  body = tl_for(ir, ty, tl_int(ir, 0), tl_int(ir, 4), TL_FOR_THREAD, TL_TAG_THREAD_Y, body);
  tl_lowered f = {ir, body, "big", 1, bufs};
  tl_ocl_module *m = NULL;
  CHECK_EQ_INT(tl_opencl_build(ctx, &f, 0, &m), TL_E_RUNTIME);
  CHECK(m == NULL);
  CHECK_MSG(strstr(tl_errmsg(ctx), "invalid work-group size") != NULL, "%s", tl_errmsg(ctx));
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

TL_TEST(opencl_build_log) {
  if (!have_device("opencl_build_log")) return;
  tl_ctx *ctx = tl_ctx_new();
  CHECK_EQ_INT(tl_opencl_build_program(ctx, 0, "__kernel void k(__global float *a) { a[0] = nope_xyz; }", ""),
               TL_E_BUILD);
  CHECK_MSG(strstr(tl_errmsg(ctx), "build failed") && strstr(tl_errmsg(ctx), "nope_xyz"), "%s",
            tl_errmsg(ctx));
  CHECK_EQ_INT(tl_opencl_build_program(ctx, 0, "__kernel void k(__global float *a) { a[0] = 1.0f; }", ""),
               TL_OK);
  /* bad device numbers */
  CHECK_EQ_INT(tl_opencl_build_program(ctx, 99, "", ""), TL_E_ARG);
  const char *json = NULL;
  CHECK_EQ_INT(tl_opencl_device_info(ctx, 0, &json), TL_OK);
  CHECK(strstr(json, "\"max_work_group_size\"") != NULL);
  tl_ctx_free(ctx);
}

/* Device arrays: round trip through the device and a device-to-device copy. */
TL_TEST(opencl_arrays) {
  if (!have_device("opencl_arrays")) return;
  tl_ctx *ctx = tl_ctx_new();
  tl_array *h = host1(ctx, 1000, fa), *h2 = host1(ctx, 1000, NULL);
  tl_array *d = to_dev(ctx, h), *d2 = NULL;
  CHECK_EQ_INT(tl_array_empty(ctx, 1, tl_array_shape(h), TL_FLOAT32, TL_DEV_OPENCL, 0, &d2), TL_OK);
  CHECK_EQ_INT(tl_array_copyto(ctx, d, d2), TL_OK);
  to_host(ctx, d2, h2);
  for (int i = 0; i < 1000; i++) CHECK_NEAR(tl_array_get(h2, i), fa(i), 0);
  int dev = -1;
  CHECK_EQ_INT(tl_array_device(d2, &dev), TL_DEV_OPENCL);
  CHECK_EQ_INT(dev, 0);
  tl_array_free(h), tl_array_free(h2), tl_array_free(d), tl_array_free(d2);
  tl_ctx_free(ctx);
}

/* A barrier that only some work-items reach is refused at code generation. */
TL_TEST(opencl_divergent_barrier_refused) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t n = 64;
  int bufs[1] = {arg_buf(ir, "A", TL_T_F32, 1, &n, 0)};
  tl_ref tx = tl_var_new(ir, "tx", TL_T_INDEX);
  tl_ref parts[2] = {tl_barrier(ir, TL_SCOPE_SHARED), tl_store(ir, bufs[0], tl_imm_float(ir, TL_T_F32, 1), &tx, 1)};
  tl_ref body = tl_if(ir, tl_lt(ir, tx, tl_int(ir, 5)), tl_seq(ir, parts, 2), 0);
  body = tl_for(ir, tx, tl_int(ir, 0), tl_int(ir, 64), TL_FOR_THREAD, TL_TAG_THREAD_X, body);
  tl_lowered f = {ir, body, "div", 1, bufs};
  const char *src = NULL;
  CHECK_EQ_INT(tl_opencl_source(ctx, &f, &src), TL_E_UNSUPPORTED);
  CHECK_MSG(strstr(tl_errmsg(ctx), "barrier inside a condition on threadIdx") != NULL, "%s", tl_errmsg(ctx));
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}
