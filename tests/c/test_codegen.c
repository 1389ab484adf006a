/*
** Unit tests for the C code generator, the vectorizer and kernel modules.
**
** Each test builds loop IR by hand with the ir.h constructors (the shape
** lowering will hand over: one flattened index per access, argument buffers
** with buffer->arg set), generates C, compiles it with the system compiler,
** runs it on real arrays and compares with a reference computed here. The
** kernel cache lives in a private temporary directory, removed at exit
** (kept, and named on stderr, when TL_TEST_KEEP_KERNELS is set).
** Disassembly (objdump) proves that vectorized loops became SIMD code.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "tl_test.h"

/* ---- fixtures ------------------------------------------------------------------ */

static char cache_root[256];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void remove_cache(void) {
  if (cache_root[0]) nftw(cache_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A private kernel cache for this process. */
static void use_tmp_cache(void) {
  if (cache_root[0]) return;
  const char *tmp = getenv("TMPDIR");
  snprintf(cache_root, sizeof cache_root, "%s/tl_codegen_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(cache_root)) {
    cache_root[0] = 0;
    return;
  }
  setenv("TUNELUA_CACHE_DIR", cache_root, 1);
  if (getenv("TL_TEST_KEEP_KERNELS")) fprintf(stderr, "  (kernels kept in %s)\n", cache_root);
  else atexit(remove_cache);
}

static int arg_buf(tl_ir *ir, const char *name, tl_type t, int ndim, const int64_t *shape, int k) {
  tl_ref s[8];
  for (int d = 0; d < ndim; d++) s[d] = tl_int(ir, shape[d]);
  int b = tl_buffer_new(ir, name, t, ndim, s, TL_SCOPE_GLOBAL);
  tl_ir_buffer(ir, b)->arg = k;
  return b;
}

static tl_array *array1(tl_ctx *ctx, int64_t n, int dtype) {
  tl_array *a = NULL;
  CHECK_EQ_INT(tl_array_empty(ctx, 1, &n, dtype, TL_DEV_CPU, 0, &a), TL_OK);
  return a;
}

/* A float32 array of the shape, uniform in [-1, 1) from seed (seed 0: left zeroed). */
static tl_array *f32(tl_ctx *ctx, int ndim, const int64_t *shape, int seed) {
  tl_array *a = NULL;
  CHECK_EQ_INT(tl_array_empty(ctx, ndim, shape, TL_FLOAT32, TL_DEV_CPU, 0, &a), TL_OK);
  if (seed) CHECK_EQ_INT(tl_array_random(ctx, a, 0, -1, 1, (uint64_t)seed), TL_OK);
  return a;
}

static tl_module *build(tl_ctx *ctx, tl_lowered *f, const char *cflags, char **src_out) {
  use_tmp_cache();
  tl_buf src = {0};
  int rc = tl_codegen_c(ctx, f, &src);
  CHECK_MSG(rc == TL_OK, "codegen failed: %s", tl_errmsg(ctx));
  tl_module *m = NULL;
  rc = tl_module_from_c(ctx, src.s, cflags, 120, &m);
  CHECK_MSG(rc == TL_OK, "compile failed: %s\n%s", tl_errmsg(ctx), src.s);
  if (src_out) *src_out = tl_buf_take(&src);
  else tl_buf_free(&src);
  return m;
}

static void call_ok(tl_ctx *ctx, tl_module *m, const char *fn, tl_array **args, int n) {
  int rc = tl_module_call(ctx, m, fn, args, n);
  CHECK_MSG(rc == TL_OK, "call %s failed: %s", fn, tl_errmsg(ctx));
}

/* objdump -d of the module; NULL when objdump is not available. */
static char *disassemble(tl_ctx *ctx, tl_module *m) {
  const char *argv[] = {"objdump", "-d", "--no-show-raw-insn", tl_module_path(m), NULL};
  tl_proc_result *r = NULL;
  if (tl_proc_exec(ctx, argv, 60, 8 << 20, &r) != TL_OK) return NULL;
  char *out = NULL;
  if (tl_proc_status(r) == TL_PROC_OK) {
    size_t n;
    const char *s = tl_proc_stdout(r, &n);
    out = tl_strndup(s ? s : "", s ? n : 0);
  }
  tl_proc_result_free(r);
  return out;
}

/* C = A + B over 512 floats: parallel outer loop, vectorized inner loop. */
static tl_lowered *vadd_ir(tl_ir *ir, int *bufs) {
  static tl_lowered f;
  int64_t n = 512;
  bufs[0] = arg_buf(ir, "A", TL_T_F32, 1, &n, 0);
  bufs[1] = arg_buf(ir, "B", TL_T_F32, 1, &n, 1);
  bufs[2] = arg_buf(ir, "C", TL_T_F32, 1, &n, 2);
  tl_ref io = tl_var_new(ir, "io", TL_T_INDEX), ii = tl_var_new(ir, "ii", TL_T_INDEX);
  tl_ref idx = tl_add(ir, tl_mul(ir, io, tl_int(ir, 8)), ii);
  tl_ref val = tl_add(ir, tl_load(ir, bufs[0], &idx, 1), tl_load(ir, bufs[1], &idx, 1));
  tl_ref st = tl_store(ir, bufs[2], val, &idx, 1);
  tl_ref inner = tl_for(ir, ii, tl_int(ir, 0), tl_int(ir, 8), TL_FOR_VECTORIZED, 0, st);
  tl_ref outer = tl_for(ir, io, tl_int(ir, 0), tl_int(ir, 64), TL_FOR_PARALLEL, 0, inner);
  f.ir = ir;
  f.body = outer;
  f.name = "vadd";
  f.nargs = 3;
  f.arg_bufs = bufs;
  return &f;
}

/* ---- tests ------------------------------------------------------------------------ */

TL_TEST(codegen_vadd_parallel_vectorized) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int bufs[3];
  tl_lowered *f = vadd_ir(ir, bufs);

  /* deterministic: two generations give the same bytes */
  tl_buf s1 = {0}, s2 = {0};
  CHECK_EQ_INT(tl_codegen_c(ctx, f, &s1), TL_OK);
  CHECK_EQ_INT(tl_codegen_c(ctx, f, &s2), TL_OK);
  CHECK_STREQ(s1.s, s2.s);
  CHECK(strstr(s1.s, "float32x8") != NULL);
  CHECK(strstr(s1.s, "tlc_vload_float32x8") != NULL);
  CHECK(strstr(s1.s, "tl_pool_for(") != NULL);
  /* the kernel's weak reference to the pool resolves in this process */
  CHECK(dlsym(RTLD_DEFAULT, "tl_pool_for") != NULL);
  CHECK(strstr(s1.s, "int32_t vadd(void **args, int32_t nargs)") != NULL);
  tl_buf_free(&s1);
  tl_buf_free(&s2);

  /* auto-vectorization off: SIMD in the object code comes from our vectors */
  tl_module *m = build(ctx, f, "-O2 -march=native -fno-tree-vectorize -fno-tree-slp-vectorize", NULL);
  tl_array *a = array1(ctx, 512, TL_FLOAT32), *b = array1(ctx, 512, TL_FLOAT32),
           *c = array1(ctx, 512, TL_FLOAT32);
  for (int i = 0; i < 512; i++) {
    tl_array_set(a, i, i * 0.5);
    tl_array_set(b, i, 1000 - i);
  }
  tl_array *args[3] = {a, b, c};
  call_ok(ctx, m, "vadd", args, 3);
  const float *pc = tl_array_data(c);
  for (int i = 0; i < 512; i++) CHECK_NEAR(pc[i], i * 0.5 + 1000 - i, 1e-4);

  char *dis = disassemble(ctx, m);
  if (dis) {
    CHECK_MSG(strstr(dis, "addps") != NULL, "no packed float add in the vectorized kernel");
    CHECK(strstr(dis, "mm") != NULL);
    free(dis);
  } else {
    fprintf(stderr, "  (objdump unavailable: SIMD check skipped)\n");
  }
  tl_array_free(a);
  tl_array_free(b);
  tl_array_free(c);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

TL_TEST(codegen_wrong_arguments) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int bufs[3];
  tl_module *m = build(ctx, vadd_ir(ir, bufs), "-O1", NULL);
  tl_array *a = array1(ctx, 512, TL_FLOAT32), *b = array1(ctx, 511, TL_FLOAT32),
           *c = array1(ctx, 512, TL_FLOAT32), *d = array1(ctx, 512, TL_INT32);
  tl_array *args[3] = {a, b, c};
  CHECK_EQ_INT(tl_module_call(ctx, m, "vadd", args, 3), TL_E_SHAPE);
  CHECK_MSG(strstr(tl_errmsg(ctx), "argument 1 (B)") && strstr(tl_errmsg(ctx), "(512,)") &&
            strstr(tl_errmsg(ctx), "(511,)"), "message: %s", tl_errmsg(ctx));
  tl_clearerr(ctx);
  args[1] = d;
  CHECK_EQ_INT(tl_module_call(ctx, m, "vadd", args, 3), TL_E_DTYPE);
  CHECK_MSG(strstr(tl_errmsg(ctx), "expected float32 (512,), got int32 (512,)"), "message: %s",
            tl_errmsg(ctx));
  tl_clearerr(ctx);
  args[1] = a;
  CHECK_EQ_INT(tl_module_call(ctx, m, "vadd", args, 2), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "expected 3 arguments, got 2") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_module_call(ctx, m, "nosuch", args, 3), TL_E_ARG);
  tl_clearerr(ctx);
  tl_array *a2 = NULL;
  int64_t shp[2] = {2, 256};
  CHECK_EQ_INT(tl_array_reshape(ctx, a, 2, shp, &a2), TL_OK);
  args[0] = a2;
  CHECK_EQ_INT(tl_module_call(ctx, m, "vadd", args, 3), TL_E_SHAPE);
  CHECK(strstr(tl_errmsg(ctx), "argument 0 (A): expected float32 (512,), got float32 (2, 256)"));
  tl_array_free(a2);
  tl_array_free(a);
  tl_array_free(b);
  tl_array_free(c);
  tl_array_free(d);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* y[j] += x[k] * W[k, j] for k in an UNROLLED loop around a vectorized j loop: with K = 512
** and N = 100 the whole unroll would be 512 copies of a 100-wide vector loop (GCC took 42 s on
** such a dense kernel), so the pragma asks for a partial unroll (128, the largest divisor of
** 512 within the budget); a small unroll (K = 4) stays whole. Both compute the same. */
static void unroll_case(int K, const char *want) {
  enum { N = 100 };
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t sx[1] = {K}, sw[2] = {K, N}, sy[1] = {N};
  int X = arg_buf(ir, "x", TL_T_F32, 1, sx, 0), W = arg_buf(ir, "W", TL_T_F32, 2, sw, 1),
      Y = arg_buf(ir, "y", TL_T_F32, 1, sy, 2);
  tl_ref k = tl_var_new(ir, "k", TL_T_INDEX), j = tl_var_new(ir, "j", TL_T_INDEX),
         j0 = tl_var_new(ir, "j", TL_T_INDEX);
  tl_ref zero = tl_int(ir, 0), n = tl_int(ir, N);
  tl_ref init = tl_for(ir, j0, zero, n, TL_FOR_VECTORIZED, 0,
                       tl_store(ir, Y, tl_imm_float(ir, TL_T_F32, 0), &j0, 1));
  tl_ref iw = tl_add(ir, tl_mul(ir, k, n), j);
  tl_ref upd = tl_add(ir, tl_load(ir, Y, &j, 1), tl_mul(ir, tl_load(ir, X, &k, 1),
                                                        tl_load(ir, W, &iw, 1)));
  tl_ref kloop = tl_for(ir, k, zero, tl_int(ir, K), TL_FOR_UNROLLED, 0,
                        tl_for(ir, j, zero, n, TL_FOR_VECTORIZED, 0, tl_store(ir, Y, upd, &j, 1)));
  tl_ref seq[2] = {init, kloop};
  int bufs[3] = {X, W, Y};
  tl_lowered f = {ir, tl_seq(ir, seq, 2), "gemv", 3, bufs};
  char *src = NULL;
  tl_module *m = build(ctx, &f, "-O2 -march=native", &src);
  CHECK_MSG(strstr(src, want) != NULL, "expected '%s' in:\n%s", want, src);
  tl_array *x = f32(ctx, 1, sx, 3), *w = f32(ctx, 2, sw, 4), *y = f32(ctx, 1, sy, 0);
  tl_array *args[3] = {x, w, y};
  call_ok(ctx, m, "gemv", args, 3);
  const float *px = tl_array_data(x), *pw = tl_array_data(w), *py = tl_array_data(y);
  for (int q = 0; q < N; q++) {
    double ref = 0;
    for (int t = 0; t < K; t++) ref += (double)px[t] * pw[t * N + q];
    CHECK_NEAR(py[q], ref, 1e-3);
  }
  tl_array_free(x);
  tl_array_free(w);
  tl_array_free(y);
  free(src);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

TL_TEST(codegen_unroll_budget) {
  unroll_case(512, "#pragma GCC unroll 128\n");
  unroll_case(4, "#pragma GCC unroll 4\n");
}

/* C[M,N] = A[M,K] B[K,N] with a local accumulator acc[8], the k loop
** unrolled through pragma_auto_unroll_max_step. */
TL_TEST(codegen_matmul_local_accumulator) {
  enum { M = 16, N = 32, K = 24 };
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
  int A = arg_buf(ir, "A", TL_T_F32, 2, sa, 0), B = arg_buf(ir, "B", TL_T_F32, 2, sb, 1),
      C = arg_buf(ir, "C", TL_T_F32, 2, sc, 2);
  tl_ref eight = tl_int(ir, 8);
  int acc = tl_buffer_new(ir, "acc", TL_T_F32, 1, &eight, TL_SCOPE_LOCAL);
  tl_ref i = tl_var_new(ir, "i", TL_T_INDEX), jo = tl_var_new(ir, "jo", TL_T_INDEX);
  tl_ref k = tl_var_new(ir, "k", TL_T_INDEX);
  tl_ref j1 = tl_var_new(ir, "jj", TL_T_INDEX), j2 = tl_var_new(ir, "jj", TL_T_INDEX),
         j3 = tl_var_new(ir, "jj", TL_T_INDEX);
  tl_ref zero = tl_int(ir, 0);
  tl_ref init = tl_for(ir, j1, zero, eight, TL_FOR_VECTORIZED, 0,
                       tl_store(ir, acc, tl_imm_float(ir, TL_T_F32, 0), &j1, 1));
  tl_ref ia = tl_add(ir, tl_mul(ir, i, tl_int(ir, K)), k);
  tl_ref ib = tl_add(ir, tl_add(ir, tl_mul(ir, k, tl_int(ir, N)), tl_mul(ir, jo, eight)), j2);
  tl_ref upd = tl_add(ir, tl_load(ir, acc, &j2, 1),
                      tl_mul(ir, tl_load(ir, A, &ia, 1), tl_load(ir, B, &ib, 1)));
  tl_ref kloop = tl_for(ir, k, zero, tl_int(ir, K), TL_FOR_SERIAL, 0,
                        tl_for(ir, j2, zero, eight, TL_FOR_VECTORIZED, 0,
                               tl_store(ir, acc, upd, &j2, 1)));
  tl_ref ic = tl_add(ir, tl_add(ir, tl_mul(ir, i, tl_int(ir, N)), tl_mul(ir, jo, eight)), j3);
  tl_ref out = tl_for(ir, j3, zero, eight, TL_FOR_VECTORIZED, 0,
                      tl_store(ir, C, tl_load(ir, acc, &j3, 1), &ic, 1));
  tl_ref seq[3] = {init, tl_attr(ir, "pragma_auto_unroll_max_step", tl_int(ir, 64), kloop), out};
  tl_ref body = tl_for(ir, i, zero, tl_int(ir, M), TL_FOR_PARALLEL, 0,
                       tl_for(ir, jo, zero, tl_int(ir, N / 8), TL_FOR_SERIAL, 0,
                              tl_alloc(ir, acc, tl_seq(ir, seq, 3))));
  int bufs[3] = {A, B, C};
  tl_lowered f = {ir, body, "matmul", 3, bufs};
  char *src = NULL;
  tl_module *m = build(ctx, &f, "-O2 -march=native", &src);
  CHECK(strstr(src, "float acc[8] __attribute__((aligned(64)));") != NULL);
  CHECK(strstr(src, "#pragma GCC unroll 24") != NULL);
  CHECK(strstr(src, "tlc_vstore_float32x8(") != NULL);

  tl_array *a = f32(ctx, 2, sa, 1), *b = f32(ctx, 2, sb, 2), *c = f32(ctx, 2, sc, 0);
  tl_array *args[3] = {a, b, c};
  call_ok(ctx, m, "matmul", args, 3);
  const float *pa = tl_array_data(a), *pb = tl_array_data(b), *pc = tl_array_data(c);
  for (int r = 0; r < M; r++)
    for (int q = 0; q < N; q++) {
      double ref = 0;
      for (int t = 0; t < K; t++) ref += (double)pa[r * K + t] * pb[t * N + q];
      CHECK_NEAR(pc[r * N + q], ref, 1e-4);
    }
  char *dis = disassemble(ctx, m);
  if (dis) {
    CHECK_MSG(strstr(dis, "fmadd") || strstr(dis, "mulps"), "no packed multiply in matmul");
    free(dis);
  }

  /* time it: TVM time-evaluator contract (the loop's rules are test_time.c's; here
  ** only that a real module yields 3 finite per-call times: a loaded machine may
  ** slow a call by orders of magnitude, so no bound on speed) */
  double secs[3];
  CHECK_EQ_INT(tl_module_time(ctx, m, "matmul", args, 3, 1, 3, 2.0, 1, secs), TL_OK);
  for (int r = 0; r < 3; r++) CHECK(secs[r] > 0 && secs[r] < 60);
  CHECK_EQ_INT(tl_module_time(ctx, m, "matmul", args, 2, 1, 1, 0, 0, secs), TL_E_ARG);
  tl_clearerr(ctx);
  free(src);
  tl_array_free(a);
  tl_array_free(b);
  tl_array_free(c);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

static int64_t ref_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static int64_t ref_floormod(int64_t a, int64_t b) { return a - ref_floordiv(a, b) * b; }

/* floordiv/floormod/truncdiv/truncmod with negative operands, vectorized
** (rows 0..8) and scalar (rows 9..17). */
TL_TEST(codegen_floordiv_negative) {
  enum { N = 64, R = 9 };
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t n = N, no = 2 * R * N;
  int X = arg_buf(ir, "X", TL_T_I32, 1, &n, 0), Y = arg_buf(ir, "Y", TL_T_I32, 1, &n, 1);
  int O = arg_buf(ir, "O", TL_T_I32, 1, &no, 2);
  tl_ref stmts[2];
  for (int pass = 0; pass < 2; pass++) {
    tl_ref io = tl_var_new(ir, "io", TL_T_INDEX), ii = tl_var_new(ir, "ii", TL_T_INDEX);
    tl_ref i = tl_add(ir, tl_mul(ir, io, tl_int(ir, 8)), ii);
    tl_ref x = tl_load(ir, X, &i, 1), y = tl_load(ir, Y, &i, 1);
    tl_ref e[R] = {
      tl_floordiv(ir, x, tl_int(ir, 3)), tl_floormod(ir, x, tl_int(ir, 3)),
      tl_floordiv(ir, x, tl_int(ir, -4)), tl_floormod(ir, x, tl_int(ir, -4)),
      tl_floordiv(ir, x, tl_int(ir, 8)), tl_floormod(ir, x, tl_int(ir, 8)),
      tl_binary(ir, TL_IR_TRUNCDIV, x, tl_int(ir, 3)), tl_binary(ir, TL_IR_TRUNCMOD, x, tl_int(ir, 3)),
      tl_add(ir, tl_mul(ir, tl_floordiv(ir, x, y), tl_int(ir, 1000)), tl_floormod(ir, x, y))};
    tl_ref st[R];
    for (int r = 0; r < R; r++) {
      tl_ref oi = tl_add(ir, i, tl_int(ir, (pass * R + r) * N));
      st[r] = tl_store(ir, O, e[r], &oi, 1);
    }
    tl_ref inner = tl_for(ir, ii, tl_int(ir, 0), tl_int(ir, 8),
                          pass == 0 ? TL_FOR_VECTORIZED : TL_FOR_SERIAL, 0, tl_seq(ir, st, R));
    stmts[pass] = tl_for(ir, io, tl_int(ir, 0), tl_int(ir, N / 8), TL_FOR_SERIAL, 0, inner);
  }
  int bufs[3] = {X, Y, O};
  tl_lowered f = {ir, tl_seq(ir, stmts, 2), "divmod", 3, bufs};
  char *src = NULL;
  tl_module *m = build(ctx, &f, "-O2", &src);
  CHECK(strstr(src, "tlc_floordiv_int32x8") != NULL);
  CHECK(strstr(src, "tlc_floordiv_int32(") != NULL);
  tl_array *ax = array1(ctx, N, TL_INT32), *ay = array1(ctx, N, TL_INT32),
           *ao = array1(ctx, 2 * R * N, TL_INT32);
  int32_t *px = tl_array_data(ax), *py = tl_array_data(ay);
  for (int i = 0; i < N; i++) {
    px[i] = i - 32;
    int d = (i % 7) - 3;
    py[i] = d == 0 ? 5 : d;
  }
  tl_array *args[3] = {ax, ay, ao};
  call_ok(ctx, m, "divmod", args, 3);
  const int32_t *po = tl_array_data(ao);
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < N; i++) {
      int64_t x = px[i], y = py[i];
      int64_t want[R] = {ref_floordiv(x, 3), ref_floormod(x, 3), ref_floordiv(x, -4),
                         ref_floormod(x, -4), ref_floordiv(x, 8), ref_floormod(x, 8), x / 3, x % 3,
                         ref_floordiv(x, y) * 1000 + ref_floormod(x, y)};
      for (int r = 0; r < R; r++)
        CHECK_MSG(po[(pass * R + r) * N + i] == want[r], "pass %d row %d x=%lld y=%lld: %d != %lld",
                  pass, r, (long long)x, (long long)y, po[(pass * R + r) * N + i],
                  (long long)want[r]);
    }
  free(src);
  tl_array_free(ax);
  tl_array_free(ay);
  tl_array_free(ao);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* Strided load (stride 2), indirect gather and scatter, vectorized. */
TL_TEST(codegen_gather_scatter) {
  enum { N = 32 };
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t n = N, n2 = 2 * N;
  int A = arg_buf(ir, "A", TL_T_F32, 1, &n2, 0), I = arg_buf(ir, "I", TL_T_I32, 1, &n, 1);
  int S = arg_buf(ir, "S", TL_T_F32, 1, &n, 2), G = arg_buf(ir, "G", TL_T_F32, 1, &n, 3);
  int T = arg_buf(ir, "T", TL_T_F32, 1, &n, 4);
  tl_ref io = tl_var_new(ir, "io", TL_T_INDEX), ii = tl_var_new(ir, "ii", TL_T_INDEX);
  tl_ref i = tl_add(ir, tl_mul(ir, io, tl_int(ir, 8)), ii);
  tl_ref i2 = tl_mul(ir, i, tl_int(ir, 2));
  tl_ref perm = tl_load(ir, I, &i, 1);
  tl_ref tv = tl_var_new(ir, "t", TL_T_F32);
  tl_ref st[3] = {
    tl_let_stmt(ir, tv, tl_load(ir, A, &i2, 1), tl_store(ir, S, tv, &i, 1)), /* S[i] = A[2i] */
    tl_store(ir, G, tl_load(ir, A, &perm, 1), &i, 1),                  /* G[i] = A[I[i]] */
    tl_store(ir, T, tl_cast(ir, TL_T_F32, i), &perm, 1)};              /* T[I[i]] = i */
  tl_ref body = tl_for(ir, io, tl_int(ir, 0), tl_int(ir, N / 8), TL_FOR_SERIAL, 0,
                       tl_for(ir, ii, tl_int(ir, 0), tl_int(ir, 8), TL_FOR_VECTORIZED, 0,
                              tl_seq(ir, st, 3)));
  int bufs[5] = {A, I, S, G, T};
  tl_lowered f = {ir, body, "gather", 5, bufs};
  char *src = NULL;
  tl_module *m = build(ctx, &f, "-O2", &src);
  CHECK(strstr(src, "float32x8 t = tlc_vloads_float32x8(") != NULL);
  CHECK(strstr(src, "tlc_gather32_float32x8(") != NULL);
  CHECK(strstr(src, "tlc_scatter32_float32x8(") != NULL);
  tl_array *a = array1(ctx, 2 * N, TL_FLOAT32), *ix = array1(ctx, N, TL_INT32);
  tl_array *s = array1(ctx, N, TL_FLOAT32), *g = array1(ctx, N, TL_FLOAT32),
           *t = array1(ctx, N, TL_FLOAT32);
  for (int k = 0; k < 2 * N; k++) tl_array_set(a, k, k * 1.5);
  for (int k = 0; k < N; k++) tl_array_set(ix, k, (k * 7 + 3) % N);   /* a permutation */
  tl_array *args[5] = {a, ix, s, g, t};
  call_ok(ctx, m, "gather", args, 5);
  for (int k = 0; k < N; k++) {
    int p = (k * 7 + 3) % N;
    CHECK_NEAR(tl_array_get(s, k), 2 * k * 1.5, 0);
    CHECK_NEAR(tl_array_get(g, k), p * 1.5, 0);
    CHECK_NEAR(tl_array_get(t, p), k, 0);
  }
  free(src);
  tl_array_free(a);
  tl_array_free(ix);
  tl_array_free(s);
  tl_array_free(g);
  tl_array_free(t);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* A guarded tail (IF on the vectorized variable: scalar fallback loop), a
** padding if_then_else (lane-by-lane vector form) and a symbolic extent n
** with a heap temporary of n elements. */
TL_TEST(codegen_guards_and_symbolic_shapes) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  tl_ref n = tl_var_new(ir, "n", TL_T_INDEX);
  int A = tl_buffer_new(ir, "A", TL_T_F32, 1, &n, TL_SCOPE_GLOBAL);
  int C = tl_buffer_new(ir, "C", TL_T_F32, 1, &n, TL_SCOPE_GLOBAL);
  tl_ref np4 = tl_add(ir, n, tl_int(ir, 4));
  int P = tl_buffer_new(ir, "P", TL_T_F32, 1, &np4, TL_SCOPE_GLOBAL);
  tl_ir_buffer(ir, A)->arg = 0;
  tl_ir_buffer(ir, C)->arg = 1;
  tl_ir_buffer(ir, P)->arg = 2;
  int T = tl_buffer_new(ir, "T", TL_T_F32, 1, &n, TL_SCOPE_GLOBAL);   /* heap temporary */
  tl_ref zero = tl_int(ir, 0), eight = tl_int(ir, 8);
  tl_ref nblk = tl_floordiv(ir, tl_add(ir, n, tl_int(ir, 7)), eight);
  /* T[i] = A[i] * 2 for i < n, in blocks of 8 with a guard */
  tl_ref io = tl_var_new(ir, "io", TL_T_INDEX), ii = tl_var_new(ir, "ii", TL_T_INDEX);
  tl_ref i = tl_add(ir, tl_mul(ir, io, eight), ii);
  tl_ref s1 = tl_for(ir, io, zero, nblk, TL_FOR_SERIAL, 0,
                     tl_for(ir, ii, zero, eight, TL_FOR_VECTORIZED, 0,
                            tl_if(ir, tl_lt(ir, i, n),
                                  tl_store(ir, T, tl_mul(ir, tl_load(ir, A, &i, 1),
                                                         tl_imm_float(ir, TL_T_F32, 2)), &i, 1),
                                  0)));
  /* C[j] = T[j] + 1 (parallel, symbolic extent) */
  tl_ref j = tl_var_new(ir, "j", TL_T_INDEX);
  tl_ref s2 = tl_for(ir, j, zero, n, TL_FOR_PARALLEL, 0,
                     tl_store(ir, C, tl_add(ir, tl_load(ir, T, &j, 1),
                                            tl_imm_float(ir, TL_T_F32, 1)), &j, 1));
  /* P[p] = 2 <= p < n + 2 ? (let t = A[p - 2] in t * 2) : -1 over p < n + 4, by 4 lanes */
  tl_ref po = tl_var_new(ir, "po", TL_T_INDEX), pi = tl_var_new(ir, "pi", TL_T_INDEX);
  tl_ref p = tl_add(ir, tl_mul(ir, po, tl_int(ir, 4)), pi);
  tl_ref pm2 = tl_sub(ir, p, tl_int(ir, 2));
  tl_ref cond = tl_and(ir, tl_binary(ir, TL_IR_GE, p, tl_int(ir, 2)),
                       tl_lt(ir, p, tl_add(ir, n, tl_int(ir, 2))));
  tl_ref tv = tl_var_new(ir, "t", TL_T_F32);
  tl_ref lv = tl_let(ir, tv, tl_load(ir, A, &pm2, 1), tl_mul(ir, tv, tl_imm_float(ir, TL_T_F32, 2)));
  tl_ref pv = tl_if_then_else(ir, cond, lv, tl_imm_float(ir, TL_T_F32, -1));
  tl_ref s3 = tl_for(ir, po, zero, tl_add(ir, tl_floordiv(ir, n, tl_int(ir, 4)), tl_int(ir, 1)),
                     TL_FOR_SERIAL, 0,
                     tl_for(ir, pi, zero, tl_int(ir, 4), TL_FOR_VECTORIZED, 0,
                            tl_store(ir, P, pv, &p, 1)));
  tl_ref seq[3] = {s1, s2, s3};
  int bufs[3] = {A, C, P};
  tl_lowered f = {ir, tl_alloc(ir, T, tl_seq(ir, seq, 3)), "guards", 3, bufs};
  char *src = NULL;
  tl_module *m = build(ctx, &f, "-O2", &src);
  CHECK(strstr(src, "#pragma GCC ivdep") != NULL);          /* the guarded fallback loop */
  CHECK(strstr(src, "tlc_heap_T") != NULL);
  CHECK(strstr(src, "((float32x4){") != NULL);              /* lane-by-lane if_then_else */

  for (int pass = 0; pass < 2; pass++) {
    int64_t len = pass ? 36 : 4;                             /* P's loop needs 4 | n */
    tl_array *a = array1(ctx, len, TL_FLOAT32), *c = array1(ctx, len, TL_FLOAT32),
             *pp = array1(ctx, len + 4, TL_FLOAT32);
    for (int k = 0; k < len; k++) tl_array_set(a, k, k + 0.25);
    tl_array *args[3] = {a, c, pp};
    call_ok(ctx, m, "guards", args, 3);
    for (int k = 0; k < len; k++) CHECK_NEAR(tl_array_get(c, k), 2 * (k + 0.25) + 1, 1e-6);
    for (int k = 0; k < len + 4; k++)
      CHECK_NEAR(tl_array_get(pp, k), k >= 2 && k < len + 2 ? 2 * (k - 2 + 0.25) : -1, 0);
    /* a derived extent that does not match: P must have n + 4 elements */
    tl_array *bad = array1(ctx, len + 3, TL_FLOAT32);
    args[2] = bad;
    CHECK_EQ_INT(tl_module_call(ctx, m, "guards", args, 3), TL_E_SHAPE);
    CHECK_MSG(strstr(tl_errmsg(ctx), "argument 2 (P)") != NULL, "%s", tl_errmsg(ctx));
    tl_clearerr(ctx);
    /* a second binding of n that disagrees */
    tl_array *c2 = array1(ctx, len + 1, TL_FLOAT32);
    args[1] = c2;
    args[2] = pp;
    CHECK_EQ_INT(tl_module_call(ctx, m, "guards", args, 3), TL_E_SHAPE);
    CHECK_MSG(strstr(tl_errmsg(ctx), "argument 1 (C): expected float32 (n,)") != NULL, "%s",
              tl_errmsg(ctx));
    tl_clearerr(ctx);
    tl_array_free(c2);
    tl_array_free(bad);
    tl_array_free(a);
    tl_array_free(c);
    tl_array_free(pp);
  }
  free(src);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* Float intrinsics, min/max/select, casts, bool masks and float16. */
TL_TEST(codegen_intrinsics_and_types) {
  enum { N = 16, R = 10 };
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t n = N, nr = N * R;
  int A = arg_buf(ir, "A", TL_T_F32, 1, &n, 0), Mk = arg_buf(ir, "mask", TL_T_BOOL, 1, &n, 1);
  int O = arg_buf(ir, "O", TL_T_F32, 1, &nr, 2);
  int D = arg_buf(ir, "D", tl_type_make(TL_TC_FLOAT, 64, 1), 1, &n, 3);
  int H = arg_buf(ir, "H", TL_T_F16, 1, &n, 4);
  int Ci = arg_buf(ir, "Ci", TL_T_I32, 1, &n, 5);
  tl_ref io = tl_var_new(ir, "io", TL_T_INDEX), ii = tl_var_new(ir, "ii", TL_T_INDEX);
  tl_ref i = tl_add(ir, tl_mul(ir, io, tl_int(ir, 8)), ii);
  tl_ref a = tl_load(ir, A, &i, 1);
  tl_ref absa = tl_call(ir, TL_INTRIN_FABS, TL_T_F32, &a, 1);
  tl_ref pw[2] = {absa, tl_imm_float(ir, TL_T_F32, 1.5)};
  tl_ref zero_f = tl_imm_float(ir, TL_T_F32, 0);
  tl_ref e[R] = {
    tl_call(ir, TL_INTRIN_EXP, TL_T_F32, &a, 1),
    tl_call(ir, TL_INTRIN_SIGMOID, TL_T_F32, &a, 1),
    tl_call(ir, TL_INTRIN_SQRT, TL_T_F32, &absa, 1),
    tl_call(ir, TL_INTRIN_TANH, TL_T_F32, &a, 1),
    tl_max(ir, a, zero_f),
    tl_min(ir, a, tl_imm_float(ir, TL_T_F32, 0.5)),
    tl_select(ir, tl_binary(ir, TL_IR_GT, a, zero_f), a, tl_mul(ir, a, tl_imm_float(ir, TL_T_F32, 0.25))),
    tl_cast(ir, TL_T_F32, tl_cast(ir, TL_T_I32, tl_mul(ir, a, tl_imm_float(ir, TL_T_F32, 10)))),
    tl_call(ir, TL_INTRIN_POW, TL_T_F32, pw, 2),
    tl_select(ir, tl_load(ir, Mk, &i, 1), a, tl_imm_float(ir, TL_T_F32, 7))};
  tl_ref st[R + 3];
  for (int r = 0; r < R; r++) {
    tl_ref oi = tl_add(ir, tl_mul(ir, i, tl_int(ir, R)), tl_int(ir, r));   /* stride R: scatter */
    st[r] = tl_store(ir, O, e[r], &oi, 1);
  }
  tl_ref ad = tl_cast(ir, tl_type_make(TL_TC_FLOAT, 64, 1), a);
  tl_ref l1 = tl_add(ir, tl_call(ir, TL_INTRIN_FABS, tl_type_make(TL_TC_FLOAT, 64, 1), &ad, 1),
                     tl_imm_float(ir, tl_type_make(TL_TC_FLOAT, 64, 1), 1));
  st[R] = tl_store(ir, D, tl_call(ir, TL_INTRIN_LOG, tl_type_make(TL_TC_FLOAT, 64, 1), &l1, 1), &i, 1);
  tl_ref hv = tl_load(ir, H, &i, 1);
  st[R + 1] = tl_store(ir, H, tl_mul(ir, hv, tl_imm_float(ir, TL_T_F16, 2)), &i, 1);
  tl_ref ci = tl_cast(ir, TL_T_I32, tl_binary(ir, TL_IR_LT, a, zero_f));
  st[R + 2] = tl_store(ir, Ci, tl_max(ir, ci, tl_int(ir, 0)), &i, 1);
  tl_ref body = tl_for(ir, io, tl_int(ir, 0), tl_int(ir, N / 8), TL_FOR_SERIAL, 0,
                       tl_for(ir, ii, tl_int(ir, 0), tl_int(ir, 8), TL_FOR_VECTORIZED, 0,
                              tl_seq(ir, st, R + 3)));
  int bufs[6] = {A, Mk, O, D, H, Ci};
  tl_lowered f = {ir, body, "intrin", 6, bufs};
  char *src = NULL;
  tl_module *m = build(ctx, &f, "-O2", &src);
  CHECK(strstr(src, "tlc_exp_float32x8") != NULL);
  CHECK(strstr(src, "float16x8") != NULL);
  tl_array *aa = array1(ctx, N, TL_FLOAT32), *am = array1(ctx, N, TL_BOOL),
           *ao = array1(ctx, N * R, TL_FLOAT32), *adb = array1(ctx, N, TL_FLOAT64),
           *ah = array1(ctx, N, TL_FLOAT16), *ac = array1(ctx, N, TL_INT32);
  for (int k = 0; k < N; k++) {
    tl_array_set(aa, k, (k - 7.5) / 4.0);
    tl_array_set(am, k, k % 3 == 0);
    tl_array_set(ah, k, k * 0.5);
  }
  tl_array *args[6] = {aa, am, ao, adb, ah, ac};
  call_ok(ctx, m, "intrin", args, 6);
  for (int k = 0; k < N; k++) {
    double x = (float)((k - 7.5) / 4.0);
    double want[R] = {exp(x), 1 / (1 + exp(-x)), sqrt(fabs(x)), tanh(x), x > 0 ? x : 0,
                      x < 0.5 ? x : 0.5, x > 0 ? x : x * 0.25, (double)(int)(float)(x * 10),
                      pow(fabs(x), 1.5), k % 3 == 0 ? x : 7};
    for (int r = 0; r < R; r++)
      CHECK_MSG(fabs(tl_array_get(ao, k * R + r) - want[r]) <= 1e-5 * (1 + fabs(want[r])),
                "k %d row %d: %.9g vs %.9g", k, r, tl_array_get(ao, k * R + r), want[r]);
    CHECK_NEAR(tl_array_get(adb, k), log(fabs(x) + 1), 1e-12);
    CHECK_NEAR(tl_array_get(ah, k), k * 1.0, 0);
    CHECK_EQ_INT((int)tl_array_get(ac, k), x < 0);
  }
  free(src);
  tl_array_free(aa);
  tl_array_free(am);
  tl_array_free(ao);
  tl_array_free(adb);
  tl_array_free(ah);
  tl_array_free(ac);
  tl_module_free(m);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

TL_TEST(codegen_rejects_thread_loops) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int64_t n = 64;
  int A = arg_buf(ir, "A", TL_T_F32, 1, &n, 0);
  tl_ref tx = tl_var_new(ir, "tx", TL_T_INDEX);
  tl_ref body = tl_for(ir, tx, tl_int(ir, 0), tl_int(ir, 64), TL_FOR_THREAD, TL_TAG_THREAD_X,
                       tl_store(ir, A, tl_imm_float(ir, TL_T_F32, 1), &tx, 1));
  int bufs[1] = {A};
  tl_lowered f = {ir, body, "threads", 1, bufs};
  tl_buf src = {0};
  CHECK_EQ_INT(tl_codegen_c(ctx, &f, &src), TL_E_UNSUPPORTED);
  CHECK_MSG(strstr(tl_errmsg(ctx), "threadIdx.x") != NULL, "%s", tl_errmsg(ctx));
  tl_clearerr(ctx);
  /* an unbound variable and a bad kernel name */
  tl_ref v = tl_var_new(ir, "free_v", TL_T_INDEX);
  f.body = tl_store(ir, A, tl_imm_float(ir, TL_T_F32, 1), &v, 1);
  CHECK_EQ_INT(tl_codegen_c(ctx, &f, &src), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "free_v") != NULL);
  tl_clearerr(ctx);
  f.name = "not an identifier";
  CHECK_EQ_INT(tl_codegen_c(ctx, &f, &src), TL_E_ARG);
  tl_clearerr(ctx);
  tl_buf_free(&src);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

TL_TEST(codegen_module_errors_and_cache) {
  use_tmp_cache();
  tl_ctx *ctx = tl_ctx_new();
  tl_module *m = NULL;
  /* a flag the compiler refuses: its stderr is in the message */
  CHECK_EQ_INT(tl_module_from_c(ctx, "int f(void) { return 0; }\n", "-O2 -fno-such-flag-xyz", 60, &m),
               TL_E_BUILD);
  CHECK_MSG(strstr(tl_errmsg(ctx), "no-such-flag-xyz") != NULL, "%s", tl_errmsg(ctx));
  CHECK(m == NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_module_from_c(ctx, "int f(void) { return undeclared_thing; }\n", "-O1", 60, &m),
               TL_E_BUILD);
  CHECK_MSG(strstr(tl_errmsg(ctx), "undeclared_thing") != NULL, "%s", tl_errmsg(ctx));
  tl_clearerr(ctx);

  /* a source not built before: compiled once, then a cache hit */
  char src[256];
  snprintf(src, sizeof src, "/* %d %.9f */\nint f(void) { return 42; }\n", (int)getpid(), tl_now());
  CHECK_EQ_INT(tl_module_from_c(ctx, src, "-O1", 60, &m), TL_OK);
  CHECK_EQ_INT(tl_module_cache_hit(m), 0);
  CHECK(tl_module_compile_seconds(m) > 0);
  CHECK_STREQ(tl_module_source(m), src);
  CHECK(access(tl_module_path(m), R_OK) == 0);
  tl_module *m2 = NULL;
  CHECK_EQ_INT(tl_module_from_c(ctx, src, "-O1", 60, &m2), TL_OK);
  CHECK_EQ_INT(tl_module_cache_hit(m2), 1);
  CHECK(tl_module_compile_seconds(m2) == 0);
  CHECK_STREQ(tl_module_path(m), tl_module_path(m2));
  /* other flags: another object */
  tl_module *m3 = NULL;
  CHECK_EQ_INT(tl_module_from_c(ctx, src, "-O2", 60, &m3), TL_OK);
  CHECK_EQ_INT(tl_module_cache_hit(m3), 0);
  CHECK(strcmp(tl_module_path(m), tl_module_path(m3)) != 0);
  tl_module_free(m);
  tl_module_free(m2);
  tl_module_free(m3);
  tl_ctx_free(ctx);
}
