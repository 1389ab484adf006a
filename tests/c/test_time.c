/* The time evaluator (core/runtime/time.c): warm-up, growth of number, sync and errors. */
#include <string.h>

#include "runtime/runtime.h"
#include "tl_test.h"

typedef struct {
  int warm, runs, syncs, fail_at;
  double per_run;                  /* seconds a run pretends to take (sync reports it) */
  int last_n;
} fake;

static int fake_run(void *arg, int i, int n) {
  fake *f = arg;
  (void)i;
  if (n == 0) f->warm++;
  else f->runs++;
  f->last_n = n;
  return f->fail_at && f->runs == f->fail_at ? 7 : 0;
}

static int fake_sync(void *arg, int rc, double t0, double *secs) {
  fake *f = arg;
  (void)t0;
  f->syncs++;
  *secs = (f->last_n ? f->last_n : 1) * f->per_run;
  return rc;
}

TL_TEST(time_eval_grows_number) {
  fake f = {0};
  f.per_run = 1e-4;                /* 0.1 ms per run: 10 ms need about 100 runs */
  tl_time_work w = {fake_run, fake_sync, &f, 0, 0};
  double secs[3];
  CHECK_EQ_INT(tl_time_eval(&w, 1, 3, 10.0, secs), 0);
  CHECK_EQ_INT(f.warm, 1);         /* warmup_s 0: one run, then a sync */
  CHECK(f.last_n >= 100);
  for (int r = 0; r < 3; r++) CHECK_NEAR(secs[r], 1e-4, 1e-9);
  /* without min_repeat_ms: exactly number runs per repeat */
  fake g = {0};
  g.per_run = 1e-4;
  tl_time_work w2 = {fake_run, fake_sync, &g, 0, 0};
  CHECK_EQ_INT(tl_time_eval(&w2, 4, 2, 0, secs), 0);
  CHECK_EQ_INT(g.runs, 8);
  CHECK_EQ_INT(g.syncs, 3);
}

TL_TEST(time_eval_stops_on_error) {
  fake f = {0};
  f.per_run = 1e-3;
  f.fail_at = 3;
  tl_time_work w = {fake_run, fake_sync, &f, 0, 0};
  double secs[2];
  CHECK_EQ_INT(tl_time_eval(&w, 2, 2, 0, secs), 7);
  CHECK_EQ_INT(f.runs, 3);
}

static int busy_run(void *arg, int i, int n) {
  (void)i, (void)n;
  ++*(int *)arg;
  return 0;
}

TL_TEST(time_eval_warmup_lasts) {
  int calls = 0;
  tl_time_work w = {busy_run, NULL, &calls, 2e-3, 1};
  double secs[1];
  double t0 = tl_now();
  CHECK_EQ_INT(tl_time_eval(&w, 1, 1, 0, secs), 0);
  CHECK(tl_now() - t0 >= 2e-3);    /* the warm-up ran for warmup_s */
  CHECK(calls > 2);
  CHECK(secs[0] >= 0);
}
