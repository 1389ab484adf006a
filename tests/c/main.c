/*
** main.c -- the unit-test runner: every TL_TEST in tests/c, by name.
** Prints one line per test and a closing "N passed, N failed" line.
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tl_test.h"

typedef struct {
  const char *name;
  void (*fn)(void);
} test_case;

static test_case *cases;
static int ncases, capcases;
static jmp_buf on_fail;
static char fail_msg[4096];

void tl_test_register(const char *name, void (*fn)(void)) {
  if (ncases == capcases) {
    capcases = capcases ? capcases * 2 : 64;
    cases = realloc(cases, (size_t)capcases * sizeof *cases);
  }
  cases[ncases].name = name;
  cases[ncases].fn = fn;
  ncases++;
}

int tl_test_cpu_has(const char *flag) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  static char line[16384];
  int has = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) != 0) continue;
    char *save = NULL, *colon = strchr(line, ':');
    for (char *w = colon ? strtok_r(colon + 1, " \n", &save) : NULL; w; w = strtok_r(NULL, " \n", &save))
      has |= strcmp(w, flag) == 0;
    break;
  }
  fclose(f);
  return has;
}

void tl_test_fail(const char *file, int line, const char *fmt, ...) {
  int n = snprintf(fail_msg, sizeof fail_msg, "%s:%d: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fail_msg + n, sizeof fail_msg - (size_t)n, fmt, ap);
  va_end(ap);
  longjmp(on_fail, 1);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const test_case *)a)->name, ((const test_case *)b)->name);
}

static int selected(const char *name, int argc, char **argv) {
  if (argc < 2) return 1;
  for (int i = 1; i < argc; i++)
    if (strncmp(name, argv[i], strlen(argv[i])) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  qsort(cases, (size_t)ncases, sizeof *cases, by_name);
  int passed = 0, failed = 0;
  for (int i = 0; i < ncases; i++) {
    if (!selected(cases[i].name, argc, argv)) continue;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (setjmp(on_fail) == 0) {
      cases[i].fn();
      clock_gettime(CLOCK_MONOTONIC, &t1);
      double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
      printf("ok   %-40s %8.1f ms\n", cases[i].name, ms);
      passed++;
    } else {
      printf("FAIL %s\n     %s\n", cases[i].name, fail_msg);
      failed++;
    }
    fflush(stdout);
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
