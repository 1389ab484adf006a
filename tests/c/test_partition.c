/* Unit tests for core/te/partition.c: a loop marked "loop_partition" whose
** body reads a padded input through guards splits into border and interior
** ranges, the simplifier drops the guards of the interior only; unmarked
** loops, guards that cannot be proven and loops of one value stay whole;
** "loop_partition_each" splits each border value off, drops the accumulations that
** read only padding and unswitches a guard no inner loop changes. */
#include <string.h>

#include "te/partition.h"
#include "tl_test.h"

typedef struct {
  int ite, fors;
} counts;

static int count_fn(const tl_ir *ir, tl_ref n, void *ud) {
  counts *c = ud;
  if (tl_ir_op(ir, n) == TL_IR_IF_THEN_ELSE) c->ite++;
  if (tl_ir_op(ir, n) == TL_IR_FOR) c->fors++;
  return 1;
}

static counts count(const tl_ir *ir, tl_ref r) {
  counts c = {0, 0};
  tl_ir_visit(ir, r, count_fn, &c);
  return c;
}

/* out[i] = sum_j (0 <= i + j - 1 < W ? in[i + j - 1] : 0), i in [0, W), j in [0, 3),
** the i loop marked when mark; with bound (a variable, or 0) the guard also holds i < bound. */
static tl_ref conv1d(tl_ir *ir, int64_t W, int mark, tl_ref bound) {
  tl_ref sh = tl_int(ir, W);
  int in = tl_buffer_new(ir, "in", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  int out = tl_buffer_new(ir, "out", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  tl_ref i = tl_var_new(ir, "i", TL_T_INDEX), j = tl_var_new(ir, "j", TL_T_INDEX);
  tl_ref x = tl_sub(ir, tl_add(ir, i, j), tl_int(ir, 1));
  tl_ref g = tl_and(ir, tl_binary(ir, TL_IR_GE, x, tl_int(ir, 0)), tl_lt(ir, x, tl_int(ir, W)));
  if (bound) g = tl_and(ir, g, tl_lt(ir, i, bound));
  tl_ref v = tl_if_then_else(ir, g, tl_load(ir, in, &x, 1), tl_imm_float(ir, TL_T_F32, 0.0));
  tl_ref acc = tl_add(ir, tl_load(ir, out, &i, 1), v);
  tl_ref inner = tl_for(ir, j, tl_int(ir, 0), tl_int(ir, 3), TL_FOR_UNROLLED, TL_TAG_NONE, tl_store(ir, out, acc, &i, 1));
  tl_ref loop = tl_for(ir, i, tl_int(ir, 0), tl_int(ir, W), TL_FOR_SERIAL, TL_TAG_NONE, inner);
  return mark ? tl_attr(ir, "pragma_loop_partition", tl_int(ir, 1), loop) : loop;
}

TL_TEST(partition_border_interior) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  tl_ref root = conv1d(ir, 10, 1, 0);
  tl_ref p = tl_partition_loops(ir, root);
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, p, NULL, 0), 0);
  /* i in [0, 1), [1, 9), [9, 10) */
  CHECK_EQ_INT(tl_ir_op(ir, p), TL_IR_SEQ);
  CHECK_EQ_INT(tl_ir_nkids(ir, p), 3);
  static const int64_t mins[3] = {0, 1, 9}, exts[3] = {1, 8, 1};
  for (int k = 0; k < 3 && tl_ir_nkids(ir, p) == 3; k++) {
    tl_ref f = tl_ir_kid(ir, p, k);
    int64_t m = -1, e = -1;
    CHECK_EQ_INT(tl_ir_op(ir, f), TL_IR_FOR);
    CHECK(tl_ir_is_int(ir, tl_ir_kid(ir, f, 1), &m) && m == mins[k]);
    CHECK(tl_ir_is_int(ir, tl_ir_kid(ir, f, 2), &e) && e == exts[k]);
  }
  /* after simplification: the interior loop has no guard, the borders keep theirs */
  tl_ref s = tl_ir_simplify(ir, p, NULL);
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, s, NULL, 0), 0);
  tl_ref interior = 0;
  if (tl_ir_op(ir, s) == TL_IR_SEQ)
    for (int k = 0; k < tl_ir_nkids(ir, s); k++) {
      tl_ref f = tl_ir_kid(ir, s, k);
      int64_t e;
      if (tl_ir_op(ir, f) == TL_IR_FOR && tl_ir_is_int(ir, tl_ir_kid(ir, f, 2), &e) && e == 8) interior = f;
    }
  CHECK(interior != 0);
  if (interior) CHECK_EQ_INT(count(ir, interior).ite, 0);
  CHECK(count(ir, s).ite > 0);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

TL_TEST(partition_leaves_whole) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  /* unmarked: untouched */
  tl_ref a = conv1d(ir, 10, 0, 0);
  CHECK(tl_partition_loops(ir, a) == a);
  /* a guard comparing i with a variable of unknown range: nothing is proven, one loop
  ** (the mark gone) */
  tl_ref n = tl_var_new(ir, "n", TL_T_INDEX);
  tl_ref b = conv1d(ir, 10, 1, n);
  tl_ref b2 = tl_partition_loops(ir, b);
  CHECK_EQ_INT(tl_ir_op(ir, b2), TL_IR_FOR);
  CHECK(b2 == tl_ir_kid(ir, b, 1));
  /* the guard holds at every value (no padding to read): one loop */
  tl_ref sh = tl_int(ir, 4);
  int buf = tl_buffer_new(ir, "o", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  tl_ref k = tl_var_new(ir, "k", TL_T_INDEX);
  tl_ref v = tl_if_then_else(ir, tl_lt(ir, k, tl_int(ir, 4)), tl_imm_float(ir, TL_T_F32, 1.0),
                             tl_imm_float(ir, TL_T_F32, 0.0));
  tl_ref c = tl_attr(ir, "pragma_loop_partition", tl_int(ir, 1),
                     tl_for(ir, k, tl_int(ir, 0), tl_int(ir, 4), TL_FOR_SERIAL, TL_TAG_NONE, tl_store(ir, buf, v, &k, 1)));
  tl_ref c2 = tl_partition_loops(ir, c);
  CHECK_EQ_INT(tl_ir_op(ir, c2), TL_IR_FOR);
  CHECK_EQ_INT(count(ir, c2).fors, 1);
  /* one value: nothing to split */
  tl_ref d = conv1d(ir, 1, 1, 0);
  CHECK_EQ_INT(tl_ir_op(ir, tl_partition_loops(ir, d)), TL_IR_FOR);
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, b2, &n, 1), 0);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* out[i] += (0 <= x < W ? in[x] : 0) * w[j], x = p*R + r + j - P, p in [0, np) (an unmarked
** outer loop: a parallel chunk), r in [0, R) and j in [0, K) marked "loop_partition_each". */
static tl_ref conv1d_each(tl_ir *ir, int64_t np, int64_t R, int64_t K, int64_t P, int *store_buf) {
  int64_t W = np * R;
  tl_ref sh = tl_int(ir, W), shk = tl_int(ir, K);
  int in = tl_buffer_new(ir, "in", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  int out = tl_buffer_new(ir, "out", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  int w = tl_buffer_new(ir, "w", TL_T_F32, 1, &shk, TL_SCOPE_GLOBAL);
  tl_ref p = tl_var_new(ir, "p", TL_T_INDEX), r = tl_var_new(ir, "r", TL_T_INDEX), j = tl_var_new(ir, "j", TL_T_INDEX);
  tl_ref i = tl_add(ir, tl_mul(ir, p, tl_int(ir, R)), r);
  tl_ref x = tl_sub(ir, tl_add(ir, i, j), tl_int(ir, P));
  tl_ref g = tl_and(ir, tl_binary(ir, TL_IR_GE, x, tl_int(ir, 0)), tl_lt(ir, x, tl_int(ir, W)));
  tl_ref v = tl_if_then_else(ir, g, tl_load(ir, in, &x, 1), tl_imm_float(ir, TL_T_F32, 0.0));
  tl_ref acc = tl_add(ir, tl_load(ir, out, &i, 1), tl_mul(ir, v, tl_load(ir, w, &j, 1)));
  tl_ref jl = tl_attr(ir, "pragma_loop_partition_each", tl_int(ir, 1),
                      tl_for(ir, j, tl_int(ir, 0), tl_int(ir, K), TL_FOR_SERIAL, TL_TAG_NONE, tl_store(ir, out, acc, &i, 1)));
  tl_ref rl = tl_attr(ir, "pragma_loop_partition_each", tl_int(ir, 1),
                      tl_for(ir, r, tl_int(ir, 0), tl_int(ir, R), TL_FOR_SERIAL, TL_TAG_NONE, jl));
  *store_buf = out;
  return tl_for(ir, p, tl_int(ir, 0), tl_int(ir, np), TL_FOR_SERIAL, TL_TAG_NONE, rl);
}

typedef struct {
  int stores, ifs, ite;
  int64_t taps;                   /* stores times the extents of the loops around them */
} each_counts;

static void count_each(const tl_ir *ir, tl_ref s, int64_t mult, each_counts *c) {
  switch (tl_ir_op(ir, s)) {
  case TL_IR_FOR: {
    int64_t e = 1;
    tl_ir_is_int(ir, tl_ir_kid(ir, s, 2), &e);
    count_each(ir, tl_ir_kid(ir, s, 3), mult * e, c);
    break;
  }
  case TL_IR_STORE:
    c->stores++, c->taps += mult;
    break;
  case TL_IR_IF:
    c->ifs++;
    /* fall through */
  default:
    for (int k = 0; k < tl_ir_nkids(ir, s); k++)
      if (tl_ir_kid(ir, s, k) && tl_ir_is_stmt(ir, tl_ir_kid(ir, s, k))) count_each(ir, tl_ir_kid(ir, s, k), mult, c);
  }
}

/* loop_partition_each: every border value its own piece, the accumulations that read only
** padding dropped, every guard decided (none left in a load) */
TL_TEST(partition_each_drops_padding) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int out;
  /* one chunk of 10, a 5-tap kernel, padding 2: 10 * 5 taps less 2 + 1 at each end = 44 */
  tl_ref root = conv1d_each(ir, 1, 10, 5, 2, &out);
  tl_ref s = tl_ir_simplify(ir, tl_partition_loops(ir, root), NULL);
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, s, NULL, 0), 0);
  each_counts c = {0};
  count_each(ir, s, 1, &c);
  CHECK_EQ_INT(count(ir, s).ite, 0);
  CHECK_EQ_INT(c.ifs, 0);
  CHECK_EQ_INT((int)c.taps, 44);
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* a guard no loop inside a piece changes (the first and last row of a chunk: whether the
** chunk is at the edge) is unswitched: an IF around the piece, the padding taps gone from
** the other side */
TL_TEST(partition_each_unswitches) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  int out;
  /* 4 chunks of 5 rows, a 3-tap kernel, padding 1 */
  tl_ref root = conv1d_each(ir, 4, 5, 3, 1, &out);
  tl_ref s = tl_ir_simplify(ir, tl_partition_loops(ir, root), NULL);
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, s, NULL, 0), 0);
  each_counts c = {0};
  count_each(ir, s, 1, &c);
  CHECK_EQ_INT(count(ir, s).ite, 0);
  CHECK_EQ_INT(c.ifs, 2);     /* r = 0, j = 0: p >= 1; r = 4, j = 2: p < 3 */
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}

/* A guard conjunct that reads the marked loop's variable only through an index the loop
** ranges reduce away (the column floormod(p, 8) of p = th * 8 + tw) does not decide the cut:
** out[p] = (floordiv(p, 8) >= 1 && floormod(p, 8) >= 1 ? in[p - 9] : 0), th in [0, 4)
** marked, tw in [0, 8) inside, splits th into [0, 1) and [1, 4). */
TL_TEST(partition_reduced_atoms) {
  tl_ctx *ctx = tl_ctx_new();
  tl_ir *ir = tl_ir_new();
  tl_ref sh = tl_int(ir, 32);
  int in = tl_buffer_new(ir, "in", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  int out = tl_buffer_new(ir, "out", TL_T_F32, 1, &sh, TL_SCOPE_GLOBAL);
  tl_ref th = tl_var_new(ir, "th", TL_T_INDEX), tw = tl_var_new(ir, "tw", TL_T_INDEX);
  tl_ref p = tl_add(ir, tl_mul(ir, th, tl_int(ir, 8)), tw);
  tl_ref g = tl_and(ir, tl_binary(ir, TL_IR_GE, tl_floordiv(ir, p, tl_int(ir, 8)), tl_int(ir, 1)),
                    tl_binary(ir, TL_IR_GE, tl_floormod(ir, p, tl_int(ir, 8)), tl_int(ir, 1)));
  tl_ref x = tl_sub(ir, p, tl_int(ir, 9));
  tl_ref v = tl_if_then_else(ir, g, tl_load(ir, in, &x, 1), tl_imm_float(ir, TL_T_F32, 0.0));
  tl_ref inner = tl_for(ir, tw, tl_int(ir, 0), tl_int(ir, 8), TL_FOR_SERIAL, TL_TAG_NONE, tl_store(ir, out, v, &p, 1));
  tl_ref loop = tl_for(ir, th, tl_int(ir, 0), tl_int(ir, 4), TL_FOR_SERIAL, TL_TAG_NONE, inner);
  tl_ref r = tl_partition_loops(ir, tl_attr(ir, "pragma_loop_partition", tl_int(ir, 1), loop));
  CHECK_EQ_INT(tl_ir_verify(ctx, ir, r, NULL, 0), 0);
  CHECK_EQ_INT(tl_ir_op(ir, r), TL_IR_SEQ);
  CHECK_EQ_INT(tl_ir_nkids(ir, r), 2);
  if (tl_ir_op(ir, r) == TL_IR_SEQ && tl_ir_nkids(ir, r) == 2) {
    int64_t m = -1, e = -1;
    tl_ref f = tl_ir_kid(ir, r, 1);
    CHECK(tl_ir_is_int(ir, tl_ir_kid(ir, f, 1), &m) && m == 1);
    CHECK(tl_ir_is_int(ir, tl_ir_kid(ir, f, 2), &e) && e == 3);
  }
  tl_ir_free(ir);
  tl_ctx_free(ctx);
}
