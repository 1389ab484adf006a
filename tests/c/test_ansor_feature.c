/* Unit tests for the auto-scheduler's per-store features (core/ansor/
** feature.c) and its pack-sum cost model (core/tuner/ansor_model.c):
** rows of hand-built lowered functions against hand-computed values
** (op counts, annotation features, binding lengths, buffer bytes, lines,
** strides and reuse, allocation, the intensity curve), invariants on a
** tiled conv2d (one row per store, finite values, one-hot groups, the
** batch form equal to single calls; extraction time printed), the model
** learning a known function of the features (rank correlation on held-out
** states), warm-up, save/load, and the errors. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ansor/feature.h"
#include "conv_dag.h"
#include "te/schedule.h"
#include "tl_test.h"
#include "tuner/tuner.h"

static double L(double x) { return log2(1 + x); }

static int slot(const char *name) {
  for (int i = 0; i < TL_ANSOR_NFEAT; i++)
    if (strcmp(tl_ansor_feature_name(i), name) == 0) return i;
  tl_test_fail(__FILE__, __LINE__, "no feature named %s", name);
}

#define FEQ(row, name, want) CHECK_NEAR((row)[slot(name)], (want), 1e-4)

static int buf1(tl_ir *ir, const char *name, int64_t n, int scope, int arg) {
  tl_ref s = tl_int(ir, n);
  int b = tl_buffer_new(ir, name, TL_T_F32, 1, &s, scope);
  tl_ir_buffer(ir, b)->arg = arg;
  return b;
}

static tl_ref ld(tl_ir *ir, int b, tl_ref i) { return tl_load(ir, b, &i, 1); }
static tl_ref st(tl_ir *ir, int b, tl_ref i, tl_ref v) { return tl_store(ir, b, v, &i, 1); }

/* for i in 16: vectorized for j in 4: C[i*4+j] = A[i*4+j] * B[i*4+j] + 1 */
TL_TEST(ansor_feature_vector_add) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int A = buf1(ir, "A", 64, TL_SCOPE_GLOBAL, 0), B = buf1(ir, "B", 64, TL_SCOPE_GLOBAL, 1),
      Cb = buf1(ir, "C", 64, TL_SCOPE_GLOBAL, 2);
  tl_ref i = tl_var_new(ir, "i", TL_T_INDEX), j = tl_var_new(ir, "j", TL_T_INDEX);
  tl_ref idx = tl_add(ir, tl_mul(ir, i, tl_int(ir, 4)), j);
  tl_ref v = tl_add(ir, tl_mul(ir, ld(ir, A, idx), ld(ir, B, idx)), tl_imm_float(ir, TL_T_F32, 1));
  tl_ref body = st(ir, Cb, idx, v);
  body = tl_for(ir, j, tl_int(ir, 0), tl_int(ir, 4), TL_FOR_VECTORIZED, 0, body);
  body = tl_for(ir, i, tl_int(ir, 0), tl_int(ir, 16), TL_FOR_SERIAL, 0, body);
  int args[3] = {A, B, Cb};
  tl_lowered f = {ir, body, "vadd", 3, args};
  float *r = NULL;
  int n = tl_ansor_features(ctx, &f, NULL, &r);
  CHECK_MSG(n == 1, "%d rows: %s", n, tl_errmsg(ctx));
  FEQ(r, "float_mul", L(64));
  FEQ(r, "float_addsub", L(64));
  FEQ(r, "float_divmod", 0);
  FEQ(r, "int_addsub", 0);                  /* index arithmetic is not counted */
  FEQ(r, "vec_num", 1);
  FEQ(r, "vec_prod", L(4));
  FEQ(r, "vec_len", L(4));
  FEQ(r, "vec_pos.inner_spatial", 1);
  FEQ(r, "vec_pos.none", 0);
  FEQ(r, "unroll_num", 0);
  FEQ(r, "unroll_pos.none", 1);
  FEQ(r, "parallel_pos.none", 1);
  FEQ(r, "is_gpu", 0);
  FEQ(r, "threadIdx_x_len", 1);             /* log2(1 + 1): unbound */
  FEQ(r, "outer_prod", L(64));
  FEQ(r, "num_loops", L(2));
  FEQ(r, "auto_unroll_max_step", 0);
  /* buffers tie on lines and bytes: A, B, C by buffer id */
  FEQ(r, "B0.acc_type.read", 1);
  FEQ(r, "B2.acc_type.write", 1);
  FEQ(r, "B2.acc_type.read", 0);
  for (int b = 0; b < 3; b++) {
    char nm[64];
    snprintf(nm, sizeof nm, "B%d.bytes", b);
    FEQ(r, nm, L(256));                     /* 64 stores x 4 bytes */
    snprintf(nm, sizeof nm, "B%d.unique_bytes", b);
    FEQ(r, nm, L(256));
    snprintf(nm, sizeof nm, "B%d.lines", b);
    FEQ(r, nm, L(4));                       /* 64 x min(1, 1 x 4 / 64) */
    snprintf(nm, sizeof nm, "B%d.unique_lines", b);
    FEQ(r, nm, L(4));                       /* 256 bytes / 64 */
    snprintf(nm, sizeof nm, "B%d.stride", b);
    FEQ(r, nm, L(1));
    snprintf(nm, sizeof nm, "B%d.reuse_type.no_reuse", b);
    FEQ(r, nm, 1);
  }
  FEQ(r, "B3.bytes", 0);                    /* padding */
  /* 2 flops per element over 12 bytes at every level */
  for (int k = 0; k < 10; k++) {
    char nm[64];
    snprintf(nm, sizeof nm, "arith_intensity_curve_%d", k);
    FEQ(r, nm, L(2.0 / 12.0));
  }
  free(r);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* pragma auto_unroll_max_step 16, parallel for io in 4:
**   allocate Cl[4] (local)
**     unrolled for ii in 4: Cl[ii] = 0
**     for k in 8: unrolled for ii in 4: Cl[ii] = Cl[ii] + A[(io*4 + ii)*8 + k]
**     for ii in 4: C[io*4 + ii] = Cl[ii] */
TL_TEST(ansor_feature_reduction) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  tl_ref sa[2] = {tl_int(ir, 16), tl_int(ir, 8)};
  int A = tl_buffer_new(ir, "A", TL_T_F32, 2, sa, TL_SCOPE_GLOBAL);
  tl_ir_buffer(ir, A)->arg = 0;
  int Cb = buf1(ir, "C", 16, TL_SCOPE_GLOBAL, 1);
  int Cl = buf1(ir, "Cl", 4, TL_SCOPE_LOCAL, -1);
  tl_ref io = tl_var_new(ir, "io", TL_T_INDEX), k = tl_var_new(ir, "k", TL_T_INDEX);
  tl_ref i1 = tl_var_new(ir, "ii", TL_T_INDEX), i2 = tl_var_new(ir, "ii", TL_T_INDEX),
         i3 = tl_var_new(ir, "ii", TL_T_INDEX);
  tl_ref zero = tl_int(ir, 0), four = tl_int(ir, 4);
  tl_ref init = tl_for(ir, i1, zero, four, TL_FOR_UNROLLED, 0,
                       st(ir, Cl, i1, tl_imm_float(ir, TL_T_F32, 0)));
  tl_ref aidx = tl_add(ir, tl_mul(ir, tl_add(ir, tl_mul(ir, io, four), i2), tl_int(ir, 8)), k);
  tl_ref upd = st(ir, Cl, i2, tl_add(ir, ld(ir, Cl, i2), ld(ir, A, aidx)));
  upd = tl_for(ir, i2, zero, four, TL_FOR_UNROLLED, 0, upd);
  upd = tl_for(ir, k, zero, tl_int(ir, 8), TL_FOR_SERIAL, 0, upd);
  tl_ref out = tl_for(ir, i3, zero, four, TL_FOR_SERIAL, 0,
                      st(ir, Cb, tl_add(ir, tl_mul(ir, io, four), i3), ld(ir, Cl, i3)));
  tl_ref seq[3] = {init, upd, out};
  tl_ref body = tl_alloc(ir, Cl, tl_seq(ir, seq, 3));
  body = tl_for(ir, io, zero, four, TL_FOR_PARALLEL, 0, body);
  body = tl_attr(ir, "pragma_auto_unroll_max_step", tl_int(ir, 16), body);
  int args[2] = {A, Cb};
  tl_lowered f = {ir, body, "red", 2, args};
  float *r = NULL;
  tl_ansor_hw hw;
  memset(&hw, 0, sizeof hw);
  hw.v[2] = 64;
  int n = tl_ansor_features(ctx, &f, &hw, &r);
  CHECK_MSG(n == 3, "%d rows: %s", n, tl_errmsg(ctx));
  const float *r0 = r, *r1 = r + TL_ANSOR_NFEAT, *r2 = r + 2 * TL_ANSOR_NFEAT;
  /* the init */
  FEQ(r0, "float_addsub", 0);
  FEQ(r0, "unroll_num", 1);
  FEQ(r0, "unroll_prod", L(4));
  FEQ(r0, "unroll_len", L(4));
  FEQ(r0, "unroll_pos.inner_spatial", 1);
  FEQ(r0, "parallel_num", 1);
  FEQ(r0, "parallel_len", L(4));
  FEQ(r0, "parallel_pos.outer_reduce", 1);  /* io does not index Cl */
  FEQ(r0, "alloc_size", L(16));
  FEQ(r0, "alloc_outer_prod", L(4));
  FEQ(r0, "alloc_prod", L(16));
  FEQ(r0, "alloc_inner_prod", L(4));
  FEQ(r0, "auto_unroll_max_step", L(16));
  FEQ(r0, "outer_prod", L(16));
  FEQ(r0, "B0.acc_type.write", 1);
  FEQ(r0, "B0.reuse_type.loop_multiple_read", 1);
  FEQ(r0, "B0.reuse_ct", L(4));
  FEQ(r0, "B0.reuse_dis_iter", L(4));
  FEQ(r0, "B0.reuse_dis_bytes", L(16));
  /* the update: A (64 lines) before Cl (8 lines) */
  FEQ(r1, "float_addsub", L(128));
  FEQ(r1, "outer_prod", L(128));
  FEQ(r1, "num_loops", L(3));
  FEQ(r1, "B0.acc_type.read", 1);
  FEQ(r1, "B0.bytes", L(512));
  FEQ(r1, "B0.unique_bytes", L(512));
  FEQ(r1, "B0.stride", L(8));
  FEQ(r1, "B0.lines", L(64));               /* 128 x min(1, 8 x 4 / 64) */
  FEQ(r1, "B0.unique_lines", L(8));         /* 512 bytes in whole rows: / 64 */
  FEQ(r1, "B0.reuse_type.no_reuse", 1);
  FEQ(r1, "B1.acc_type.read_write", 1);
  FEQ(r1, "B1.lines", L(8));                /* 128 x 4 / 64 */
  FEQ(r1, "B1.unique_bytes", L(16));
  FEQ(r1, "B1.reuse_type.loop_multiple_read", 1);
  FEQ(r1, "B1.reuse_ct", L(8));             /* k does not index Cl */
  FEQ(r1, "B1.reuse_dis_iter", L(4));
  FEQ(r1, "B1.reuse_dis_bytes", L(32));     /* Cl 16 + A 16 bytes per ii sweep */
  FEQ(r1, "B1.bytes_d_reuse_ct", L(512.0 / 8));
  FEQ(r1, "alloc_size", L(16));
  FEQ(r1, "alloc_inner_prod", L(32));
  /* one flop over 8 bytes at ii; 8 flops / (16 + 128 bytes) at k;
  ** 32 / (16 + 512) at io */
  FEQ(r1, "arith_intensity_curve_9", L(128.0 / (16 + 512)));
  /* the copy out */
  FEQ(r2, "unroll_num", 0);
  FEQ(r2, "B0.acc_type.write", 1);          /* C: 16 lines x ... sorted first by bytes */
  FEQ(r2, "alloc_size", 0);                 /* C is an argument */
  free(r);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* blockIdx.x 8, vthread 2, threadIdx.x 32: C[bx*64 + v*32 + tx] = exp(A[...]) */
TL_TEST(ansor_feature_gpu_binding) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int A = buf1(ir, "A", 512, TL_SCOPE_GLOBAL, 0), Cb = buf1(ir, "C", 512, TL_SCOPE_GLOBAL, 1);
  tl_ref bx = tl_var_new(ir, "bx", TL_T_INDEX), vt = tl_var_new(ir, "vt", TL_T_INDEX),
         tx = tl_var_new(ir, "tx", TL_T_INDEX);
  tl_ref idx = tl_add(ir, tl_add(ir, tl_mul(ir, bx, tl_int(ir, 64)), tl_mul(ir, vt, tl_int(ir, 32))), tx);
  tl_ref a = ld(ir, A, idx);
  tl_ref body = st(ir, Cb, idx, tl_call(ir, TL_INTRIN_EXP, TL_T_F32, &a, 1));
  body = tl_for(ir, tx, tl_int(ir, 0), tl_int(ir, 32), TL_FOR_THREAD, TL_TAG_THREAD_X, body);
  body = tl_for(ir, vt, tl_int(ir, 0), tl_int(ir, 2), TL_FOR_VTHREAD, TL_TAG_VTHREAD, body);
  body = tl_for(ir, bx, tl_int(ir, 0), tl_int(ir, 8), TL_FOR_THREAD, TL_TAG_BLOCK_X, body);
  int args[2] = {A, Cb};
  tl_lowered f = {ir, body, "g", 2, args};
  float *r = NULL;
  CHECK_EQ_INT(tl_ansor_features(ctx, &f, NULL, &r), 1);
  FEQ(r, "is_gpu", 1);
  FEQ(r, "blockIdx_x_len", L(8));
  FEQ(r, "blockIdx_y_len", L(1));
  FEQ(r, "threadIdx_x_len", L(32));
  FEQ(r, "vthread_len", L(2));
  FEQ(r, "float_math_func", L(512));
  FEQ(r, "outer_prod", L(512));
  FEQ(r, "B0.unique_bytes", L(2048));
  free(r);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* ---- a tiled conv2d: invariants and time ------------------------------------------ */

static int count_stores(const tl_ir *ir, tl_ref s) {
  if (!s) return 0;
  int op = tl_ir_op(ir, s), n = 0;
  if (op == TL_IR_STORE) return 1;
  if (!tl_ir_is_stmt(ir, s)) return 0;
  for (int i = 0; i < tl_ir_nkids(ir, s); i++) n += count_stores(ir, tl_ir_kid(ir, s, i));
  return n;
}

static tl_lowered *conv_lowered(tl_ctx *ctx, tl_dag **dag_out, tl_sched **s_out, const char *steps) {
  tl_dag *dag = tl_dag_new();
  int x, w;
  int o = tl_test_conv2d(dag, ctx, 1, 64, 56, 56, 64, 3, 1, 1, &x, &w);
  tl_sched *s;
  CHECK_EQ_INT(tl_sched_new(ctx, dag, &o, 1, &s), 0);
  CHECK_MSG(tl_sched_apply_json(ctx, s, steps) == 0, "%s", tl_errmsg(ctx));
  int args[3] = {tl_test_tensor(s, "X"), tl_test_tensor(s, "W"), tl_test_tensor(s, "conv")};
  tl_lowered *f = NULL;
  CHECK_MSG(tl_lower(ctx, s, args, 3, "conv2d", &f) == 0, "%s", tl_errmsg(ctx));
  *dag_out = dag;
  *s_out = s;
  return f;
}

TL_TEST(ansor_feature_conv2d) {
  tl_ctx *ctx = tl_ctx_new();
  tl_dag *dag;
  tl_sched *s;
  tl_lowered *f = conv_lowered(ctx, &dag, &s, TL_TEST_CONV_SKETCH);
  float *r = NULL;
  int n = tl_ansor_features(ctx, f, NULL, &r);
  CHECK_MSG(n >= 0, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(n, count_stores(f->ir, f->body));
  CHECK(n >= 4);                          /* pad, init, update, copy out */
  int onehot[][2] = {{slot("vec_pos.none"), 8}, {slot("unroll_pos.none"), 8},
                     {slot("parallel_pos.none"), 8}};
  int any_vec = 0, any_par = 0, any_unroll = 0;
  for (int i = 0; i < n; i++) {
    const float *row = r + (size_t)i * TL_ANSOR_NFEAT;
    for (int k = 0; k < TL_ANSOR_NFEAT; k++)
      CHECK_MSG(isfinite(row[k]) && row[k] > -1e-6, "row %d %s = %g", i,
                tl_ansor_feature_name(k), row[k]);
    for (size_t g = 0; g < TL_ARRAY_SIZE(onehot); g++) {
      double sum = 0;
      for (int k = 0; k < onehot[g][1]; k++) sum += row[onehot[g][0] + k];
      CHECK_NEAR(sum, 1, 1e-6);
    }
    for (int b = 0; b < 5; b++) {
      double sum = 0;
      for (int k = 0; k < 3; k++) sum += row[57 + 18 * b + k];
      CHECK(sum == 0 || sum == 1);
    }
    any_vec |= row[slot("vec_num")] > 0;
    any_par |= row[slot("parallel_num")] > 0;
    any_unroll |= row[slot("auto_unroll_max_step")] > 0;
  }
  CHECK(any_vec && any_par && any_unroll);
  /* time per state (printed) */
  int reps = 50;
  double t0 = tl_now();
  for (int i = 0; i < reps; i++) {
    float *q = NULL;
    CHECK_EQ_INT(tl_ansor_features(ctx, f, NULL, &q), n);
    CHECK(memcmp(q, r, sizeof(float) * (size_t)n * TL_ANSOR_NFEAT) == 0);
    free(q);
  }
  printf("     conv2d 1x64x56x56 k3 sketch: %d rows, features %.3f ms per state\n", n,
         (tl_now() - t0) / reps * 1e3);
  /* the batch form: the same rows, none for a NULL function */
  tl_lowered *fs[3] = {f, NULL, f};
  int off[4];
  float *br = NULL;
  int tot = tl_ansor_features_batch(ctx, fs, 3, NULL, 2, &br, off);
  CHECK_EQ_INT(tot, 2 * n);
  CHECK(off[0] == 0 && off[1] == n && off[2] == n && off[3] == 2 * n);
  CHECK(memcmp(br, r, sizeof(float) * (size_t)n * TL_ANSOR_NFEAT) == 0);
  CHECK(memcmp(br + (size_t)n * TL_ANSOR_NFEAT, r, sizeof(float) * (size_t)n * TL_ANSOR_NFEAT) == 0);
  free(br);
  free(r);
  tl_lowered_free(f);
  tl_sched_free(s);
  tl_dag_free(dag);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_feature_errors) {
  tl_ctx *ctx = tl_ctx_new();
  float *r = (float *)1;
  CHECK_EQ_INT(tl_ansor_features(ctx, NULL, NULL, &r), -1);
  CHECK(strstr(tl_errmsg(ctx), "lowered function is NULL") != NULL);
  CHECK(r == NULL);
  tl_clearerr(ctx);
  tl_ir *ir = tl_ir_new();
  tl_lowered f = {ir, TL_NOREF, "empty", 0, NULL};
  CHECK_EQ_INT(tl_ansor_features(ctx, &f, NULL, NULL), -1);
  CHECK(strstr(tl_errmsg(ctx), "rows") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_ansor_features(ctx, &f, NULL, &r), 0);   /* nothing stored: no rows */
  CHECK(r == NULL);
  /* an expression as the body */
  f.body = tl_int(ir, 3);
  CHECK_EQ_INT(tl_ansor_features(ctx, &f, NULL, &r), -1);
  CHECK(strstr(tl_errmsg(ctx), "not a statement") != NULL);
  tl_clearerr(ctx);
  /* a store to a buffer that does not exist */
  tl_ref i0 = tl_int(ir, 0);
  f.body = tl_store(ir, 7, tl_imm_float(ir, TL_T_F32, 1), &i0, 1);
  CHECK_EQ_INT(tl_ansor_features(ctx, &f, NULL, &r), -1);
  CHECK_MSG(strstr(tl_errmsg(ctx), "'empty': features: an access to buffer 7 (of 0)") != NULL, "%s",
            tl_errmsg(ctx));
  tl_clearerr(ctx);
  /* a store without its flattened index; a load of an unknown buffer */
  int b = buf1(ir, "B", 4, TL_SCOPE_GLOBAL, 0);
  f.body = tl_store(ir, b, tl_imm_float(ir, TL_T_F32, 1), NULL, 0);
  CHECK_EQ_INT(tl_ansor_features(ctx, &f, NULL, &r), -1);
  CHECK_MSG(strstr(tl_errmsg(ctx), "a store without one flattened index") != NULL, "%s",
            tl_errmsg(ctx));
  tl_clearerr(ctx);
  f.body = tl_store(ir, b, tl_ir_make(ir, TL_IR_LOAD, TL_T_F32, 5, &i0, 1), &i0, 1);
  CHECK_EQ_INT(tl_ansor_features(ctx, &f, NULL, &r), -1);
  CHECK_MSG(strstr(tl_errmsg(ctx), "an access to buffer 5 (of 1)") != NULL, "%s", tl_errmsg(ctx));
  tl_clearerr(ctx);
  int off[2];
  CHECK_EQ_INT(tl_ansor_features_batch(ctx, NULL, 2, NULL, 1, &r, off), -1);
  CHECK(strstr(tl_errmsg(ctx), "functions") != NULL);
  tl_clearerr(ctx);
  CHECK(tl_ansor_feature_name(-1) == NULL && tl_ansor_feature_name(TL_ANSOR_NFEAT) == NULL);
  CHECK_STREQ(tl_ansor_feature_name(0), "float_mad");
  CHECK_STREQ(tl_ansor_feature_name(163), "auto_unroll_max_step");
  CHECK_EQ_INT(tl_ansor_num_features(), TL_ANSOR_NFEAT);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* ---- the cost model ---------------------------------------------------------------------------- */

typedef struct synth {
  int n;
  float *rows;
  int *off;
  double *tp;
} synth;

/* A state's throughput is the sum over its rows of a nonlinear function of
** a few features: what pack-sum can represent. */
static double row_value(const float *r) {
  return 2.0 * r[3] + (r[20] > 0.5 ? 3.0 : 0.0) + r[60] * r[61] / 4.0 + (r[161] > 2 ? 1 : 0);
}

static synth make_states(uint64_t *rng, int n) {
  synth s;
  s.n = n;
  s.off = tl_malloc(sizeof(int) * (size_t)(n + 1));
  s.tp = tl_malloc(sizeof(double) * (size_t)n);
  int total = 0;
  int *cnt = tl_malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++) total += cnt[i] = 1 + (int)(tl_rng_next(rng) % 4);
  s.rows = tl_calloc((size_t)total * TL_ANSOR_NFEAT, sizeof(float));
  s.off[0] = 0;
  for (int i = 0; i < n; i++) {
    s.off[i + 1] = s.off[i] + cnt[i];
    double v = 0;
    for (int k = s.off[i]; k < s.off[i + 1]; k++) {
      float *r = s.rows + (size_t)k * TL_ANSOR_NFEAT;
      for (int j = 0; j < TL_ANSOR_NFEAT; j++)
        r[j] = (j % 7 == 0) ? (float)(tl_rng_next(rng) % 2) : (float)(tl_rng_uniform(rng) * 4);
      v += row_value(r);
    }
    s.tp[i] = v * 1e9;
  }
  free(cnt);
  return s;
}

static void free_states(synth *s) {
  free(s->rows);
  free(s->off);
  free(s->tp);
}

static void ranks(const double *v, int n, double *out) {
  for (int i = 0; i < n; i++) {
    int less = 0, eq = 0;
    for (int j = 0; j < n; j++) less += v[j] < v[i], eq += v[j] == v[i];
    out[i] = less + (eq - 1) / 2.0;
  }
}

static double spearman(const double *a, const double *b, int n) {
  double *ra = tl_malloc(sizeof(double) * (size_t)n), *rb = tl_malloc(sizeof(double) * (size_t)n);
  ranks(a, n, ra);
  ranks(b, n, rb);
  double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
  for (int i = 0; i < n; i++) ma += ra[i] / n, mb += rb[i] / n;
  for (int i = 0; i < n; i++) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  free(ra);
  free(rb);
  return sab / sqrt(saa * sbb);
}

TL_TEST(ansor_model_learns) {
  tl_ctx *ctx = tl_ctx_new();
  uint64_t rng = 12345;
  synth train = make_states(&rng, 320), test = make_states(&rng, 200);
  tl_ansor_model *m = tl_ansor_model_new(ctx, 1, 7);
  CHECK(m != NULL);
  double *sc = tl_malloc(sizeof(double) * 200);
  /* warm-up: 64 states are not enough, predictions stay random */
  CHECK_MSG(tl_ansor_model_update(ctx, m, 64, train.rows, train.off, train.tp) == 0, "%s",
            tl_errmsg(ctx));
  CHECK_EQ_INT(tl_ansor_model_trained(m), 0);
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m, test.n, test.rows, test.off, sc), 0);
  for (int i = 0; i < test.n; i++) CHECK(sc[i] >= 0 && sc[i] < 1);
  /* the rest, in two rounds (offsets relative to their own rows) */
  for (int part = 0; part < 2; part++) {
    int s0 = part ? 192 : 64, s1 = part ? 320 : 192;
    int *off = tl_malloc(sizeof(int) * (size_t)(s1 - s0 + 1));
    for (int i = s0; i <= s1; i++) off[i - s0] = train.off[i] - train.off[s0];
    CHECK_MSG(tl_ansor_model_update(ctx, m, s1 - s0, train.rows + (size_t)train.off[s0] * TL_ANSOR_NFEAT,
                                    off, train.tp + s0) == 0, "%s", tl_errmsg(ctx));
    free(off);
  }
  CHECK_EQ_INT(tl_ansor_model_num_samples(m), 320);
  CHECK_EQ_INT(tl_ansor_model_trained(m), 1);
  CHECK(tl_ansor_model_rounds(m) > 0);
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m, test.n, test.rows, test.off, sc), 0);
  double rho = spearman(sc, test.tp, test.n);
  printf("     pack-sum model: %d rounds, held-out Spearman %.3f\n", tl_ansor_model_rounds(m), rho);
  CHECK_MSG(rho > 0.8, "rank correlation %.3f", rho);
  /* the random model does not learn */
  tl_ansor_model *rm = tl_ansor_model_new(ctx, 0, 7);
  double *rs = tl_malloc(sizeof(double) * 200);
  CHECK_EQ_INT(tl_ansor_model_update(ctx, rm, train.n, train.rows, train.off, train.tp), 0);
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, rm, test.n, test.rows, test.off, rs), 0);
  CHECK(fabs(spearman(rs, test.tp, test.n)) < 0.3);
  tl_ansor_model_free(rm);
  /* save and load: the same scores */
  char dir[] = "/tmp/tl_ansor_model_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/model.ubj", dir);
  CHECK_MSG(tl_ansor_model_save(ctx, m, path) == 0, "%s", tl_errmsg(ctx));
  tl_ansor_model *m2 = tl_ansor_model_new(ctx, 1, 1);
  CHECK_MSG(tl_ansor_model_load(ctx, m2, path) == 0, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(tl_ansor_model_trained(m2), 1);
  double *sc2 = tl_malloc(sizeof(double) * 200);
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m2, test.n, test.rows, test.off, sc2), 0);
  for (int i = 0; i < test.n; i++) CHECK_NEAR(sc2[i], sc[i], 1e-5);
  /* a file that is not a model */
  FILE *fp = fopen(path, "w");
  fputs("not a model", fp);
  fclose(fp);
  CHECK_EQ_INT(tl_ansor_model_load(ctx, m2, path), TL_E_PARSE);
  CHECK(strstr(tl_errmsg(ctx), "model.ubj") != NULL);
  tl_clearerr(ctx);
  remove(path);
  rmdir(dir);
  free(sc2);
  tl_ansor_model_free(m2);
  free(rs);
  free(sc);
  free_states(&train);
  free_states(&test);
  tl_ansor_model_free(m);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_model_errors) {
  tl_ctx *ctx = tl_ctx_new();
  CHECK(tl_ansor_model_new(ctx, 2, 0) == NULL);
  CHECK(strstr(tl_errmsg(ctx), "kind 2") != NULL);
  tl_clearerr(ctx);
  tl_ansor_model *m = tl_ansor_model_new(ctx, 1, 3);
  float rows[3 * TL_ANSOR_NFEAT];
  memset(rows, 0, sizeof rows);
  rows[5] = 1;
  rows[TL_ANSOR_NFEAT + 5] = 1;
  rows[2 * TL_ANSOR_NFEAT + 5] = 2;
  int off[3] = {0, 2, 3};
  double tp[2] = {1e9, 2e9}, sc[2];
  CHECK_EQ_INT(tl_ansor_model_update(ctx, NULL, 2, rows, off, tp), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "NULL model") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_ansor_model_update(ctx, m, -1, rows, off, tp), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "negative") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_ansor_model_update(ctx, m, 2, rows, NULL, tp), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "row_off is NULL") != NULL);
  tl_clearerr(ctx);
  int bad0[3] = {1, 2, 3};
  CHECK_EQ_INT(tl_ansor_model_update(ctx, m, 2, rows, bad0, tp), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "row_off[0] is 1") != NULL);
  tl_clearerr(ctx);
  int dec[3] = {0, 3, 2};
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m, 2, rows, dec, sc), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "row_off[2] = 2 is below row_off[1] = 3") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m, 2, NULL, off, sc), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "rows is NULL") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m, 2, rows, off, NULL), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "scores is NULL") != NULL);
  tl_clearerr(ctx);
  double nan_tp[2] = {NAN, 1};
  CHECK_EQ_INT(tl_ansor_model_update(ctx, m, 2, rows, off, nan_tp), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "throughput[0]") != NULL);
  tl_clearerr(ctx);
  rows[7] = INFINITY;
  CHECK_EQ_INT(tl_ansor_model_update(ctx, m, 2, rows, off, tp), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "feature 7") != NULL);
  tl_clearerr(ctx);
  rows[7] = 0;
  CHECK_EQ_INT(tl_ansor_model_set(ctx, m, "depth", 3), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "unknown parameter 'depth'") != NULL);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_ansor_model_set(ctx, m, "nthread", 0.5), TL_E_ARG);
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_ansor_model_save(ctx, m, "/nonexistent/m"), TL_E_ARG);
  CHECK(strstr(tl_errmsg(ctx), "not trained") != NULL);
  tl_clearerr(ctx);
  /* empty input is fine; a state without rows or with zero rows is -inf */
  CHECK_EQ_INT(tl_ansor_model_update(ctx, m, 0, NULL, NULL, NULL), 0);
  int off2[3] = {0, 0, 1};
  double s2[2];
  float zero[TL_ANSOR_NFEAT] = {0};
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m, 2, zero, off2, s2), 0);
  CHECK(isinf(s2[0]) && s2[0] < 0 && isinf(s2[1]) && s2[1] < 0);
  CHECK_EQ_INT(tl_ansor_model_predict(ctx, m, 2, rows, off, s2), 0);
  CHECK(isfinite(s2[0]) && isfinite(s2[1]));
  /* a trained model with warm-up 0 learns from two states */
  CHECK_EQ_INT(tl_ansor_model_set(ctx, m, "num_warmup_sample", 0), 0);
  CHECK_MSG(tl_ansor_model_update(ctx, m, 2, rows, off, tp) == 0, "%s", tl_errmsg(ctx));
  CHECK_EQ_INT(tl_ansor_model_trained(m), 1);
  tl_ansor_model_free(m);
  tl_ctx_free(ctx);
}

/* ---- property: configs of AutoTVM templates, GPU and CPU ---------------------------------- */

static void template_rows(const char *name, const char *args, const char *target, int gpu) {
  tl_ctx *ctx = tl_ctx_new();
  tl_atvm_task *t;
  CHECK_MSG(tl_atvm_task_create(ctx, name, args, target, &t) == 0, "%s", tl_errmsg(ctx));
  int64_t len = tl_atvm_space_len(t);
  uint64_t rng = 99;
  int lowered = 0;
  for (int k = 0; k < 40; k++) {
    int64_t idx = (int64_t)(tl_rng_next(&rng) % (uint64_t)len);
    tl_lowered *lf = NULL;
    if (tl_atvm_lower(ctx, t, idx, "f", &lf) != 0) {   /* an invalid config: not our concern */
      tl_clearerr(ctx);
      continue;
    }
    lowered++;
    float *r = NULL;
    int n = tl_ansor_features(ctx, lf, NULL, &r);
    CHECK_MSG(n == count_stores(lf->ir, lf->body), "%s config %lld: %d rows: %s", name,
              (long long)idx, n, tl_errmsg(ctx));
    for (int i = 0; i < n; i++) {
      const float *row = r + (size_t)i * TL_ANSOR_NFEAT;
      for (int j = 0; j < TL_ANSOR_NFEAT; j++)
        CHECK_MSG(isfinite(row[j]) && row[j] >= 0, "%s config %lld row %d %s = %g", name,
                  (long long)idx, i, tl_ansor_feature_name(j), row[j]);
      CHECK_EQ_INT((int)row[slot("is_gpu")], gpu);
      CHECK(row[slot("B0.bytes")] > 0);   /* every store touches its buffer */
    }
    free(r);
    tl_lowered_free(lf);
  }
  CHECK(lowered >= 10);
  tl_atvm_task_free(t);
  tl_ctx_free(ctx);
}

TL_TEST(ansor_feature_templates) {
  const char *conv =
      "[[\"TENSOR\", [1, 64, 28, 28], \"float32\"], [\"TENSOR\", [64, 64, 3, 3], \"float32\"], "
      "[1, 1], [1, 1, 1, 1], [1, 1], \"float32\"]";
  template_rows("conv2d_nchw_spatial_pack.mali", conv, "opencl -device=mali", 1);
  template_rows("conv2d_nchw_winograd.mali", conv, "opencl -device=mali", 1);
  template_rows("conv2d_NCHWc.x86",
                "[[\"TENSOR\", [1, 64, 28, 28], \"float32\"], [\"TENSOR\", [64, 64, 3, 3], \"float32\"], "
                "[1, 1], [1, 1, 1, 1], [1, 1], \"NCHW\", \"NCHW\", \"float32\"]", "llvm", 0);
}
