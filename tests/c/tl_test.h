/*
** tl_test.h -- the C unit-test runner's registration and checks.
**
**   TL_TEST(arena_basic) { CHECK(x == 1); CHECK_EQ_INT(a, b); }
**
** Each test registers itself into the runner's named table at load time, so
** a new tests/c/test_<area>.c needs no other edit. `tl_tests NAME...` runs the
** tests whose names start with one of the prefixes; no argument runs all.
*/
#ifndef TL_TEST_H
#define TL_TEST_H

#include <math.h>
#include <stdio.h>

void tl_test_register(const char *name, void (*fn)(void));
void tl_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
/* Whether this CPU's /proc/cpuinfo flags list flag ("avx512f"): the host's
** facts read apart from the engine's probe. */
int tl_test_cpu_has(const char *flag);

#define TL_TEST(name)                                                        \
  static void test_##name(void);                                             \
  __attribute__((constructor)) static void register_##name(void) {           \
    tl_test_register(#name, test_##name);                                    \
  }                                                                          \
  static void test_##name(void)

#define CHECK(c)                                                             \
  do {                                                                       \
    if (!(c)) tl_test_fail(__FILE__, __LINE__, "CHECK(%s)", #c);             \
  } while (0)
#define CHECK_MSG(c, ...)                                                    \
  do {                                                                       \
    if (!(c)) tl_test_fail(__FILE__, __LINE__, __VA_ARGS__);                 \
  } while (0)
#define CHECK_EQ_INT(a, b)                                                   \
  do {                                                                       \
    long long a_ = (long long)(a), b_ = (long long)(b);                      \
    if (a_ != b_)                                                            \
      tl_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, b_); \
  } while (0)
#define CHECK_STREQ(a, b)                                                    \
  do {                                                                       \
    const char *a_ = (a), *b_ = (b);                                         \
    if (!a_ || !b_ || strcmp(a_, b_) != 0)                                   \
      tl_test_fail(__FILE__, __LINE__, "%s == %s:\n  got:      %s\n  expected: %s", \
                   #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");         \
  } while (0)
#define CHECK_NEAR(a, b, tol)                                                \
  do {                                                                       \
    double a_ = (a), b_ = (b);                                               \
    if (!(fabs(a_ - b_) <= (tol)))                                           \
      tl_test_fail(__FILE__, __LINE__, "%s ~ %s: %.9g vs %.9g", #a, #b, a_, b_); \
  } while (0)

#endif
