/*
** arith.h -- 64-bit integer helpers shared by the IR's folding (ir.c), range
** analysis (bound.c) and simplifier (simplify.c): floor division and modulo,
** and saturating arithmetic in which INT64_MIN / INT64_MAX stand for -inf / +inf.
*/
#ifndef TL_IR_ARITH_H
#define TL_IR_ARITH_H

#include <stdint.h>

#define NEG_INF INT64_MIN
#define POS_INF INT64_MAX

/* floor(a / b) and the remainder with the sign of b; b != 0 */
static inline int64_t fdiv64(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}
static inline int64_t fmod64(int64_t a, int64_t b) { return a - fdiv64(a, b) * b; }

static inline int fin(int64_t x) { return x != NEG_INF && x != POS_INF; }

static inline int64_t sadd(int64_t a, int64_t b) {
  if (a == NEG_INF || b == NEG_INF) return NEG_INF;
  if (a == POS_INF || b == POS_INF) return POS_INF;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? POS_INF : NEG_INF;
  return r;
}

static inline int64_t smul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  int neg = (a < 0) != (b < 0);
  if (!fin(a) || !fin(b)) return neg ? NEG_INF : POS_INF;
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || !fin(r)) return neg ? NEG_INF : POS_INF;
  return r;
}

#endif
