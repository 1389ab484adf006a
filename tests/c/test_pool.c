/*
** Unit tests for core/base/pool.c: every index of a tl_pool_for runs exactly
** once for all sizes and pool sizes, nested and concurrent calls run (serially)
** without deadlock, small calls are cheap, the global pool follows
** tl_set_num_threads and TUNELUA_NUM_THREADS, and a forked child can use it.
**
** Code run in a forked child (through tl_proc_call) must not use CHECK: a
** failed check longjmps into the runner, which the child would then continue.
** It reports through its exit status instead.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "tl_test.h"

/* ---- helpers ------------------------------------------------------------------ */

typedef struct {
  atomic_int *hits;            /* hits[i]: how many times index i ran */
  atomic_llong sum;            /* sum of the indices */
} cover;

static void cover_body(int64_t i, void *arg) {
  cover *c = arg;
  atomic_fetch_add_explicit(&c->hits[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->sum, (long long)i, memory_order_relaxed);
}

/* 1 if tl_pool_for(pool, n) ran every index once and the sum is right. */
static int run_cover(tl_pool *pool, int64_t n) {
  cover c;
  c.hits = calloc((size_t)(n > 0 ? n : 1), sizeof(atomic_int));
  atomic_init(&c.sum, 0);
  tl_pool_for(pool, n, cover_body, &c);
  int ok = atomic_load(&c.sum) == (long long)(n * (n - 1) / 2);
  for (int64_t i = 0; i < n && ok; i++) ok = atomic_load(&c.hits[i]) == 1;
  free(c.hits);
  return ok;
}

static void empty_body(int64_t i, void *arg) { (void)i, (void)arg; }

/* ---- sizes and coverage -------------------------------------------------------- */

TL_TEST(pool_sizes) {
  int cores = tl_num_cores();
  CHECK(cores >= 1);
  int want[] = {1, 2, 3, 5, 0, -4};
  for (size_t k = 0; k < TL_ARRAY_SIZE(want); k++) {
    tl_pool *p = tl_pool_new(want[k]);
    CHECK(p != NULL);
    CHECK_EQ_INT(tl_pool_size(p), want[k] > 0 ? want[k] : cores);
    tl_pool_free(p);
  }
  tl_pool_free(NULL);
  CHECK_EQ_INT(tl_pool_size(NULL), 1);
}

TL_TEST(pool_for_covers_every_index) {
  static const int64_t sizes[] = {0,  1,  2,  3,   4,   5,    7,    8,    9,     15,
                                  16, 17, 31, 33,  64,  100,  255,  1000, 4097, 100003};
  int threads[] = {1, 2, 3, 4, 8, 0};
  for (size_t t = 0; t < TL_ARRAY_SIZE(threads); t++) {
    tl_pool *p = tl_pool_new(threads[t]);
    for (size_t k = 0; k < TL_ARRAY_SIZE(sizes); k++)
      for (int rep = 0; rep < 3; rep++)
        CHECK_MSG(run_cover(p, sizes[k]), "pool of %d, n = %lld", tl_pool_size(p),
                  (long long)sizes[k]);
    tl_pool_for(p, -5, cover_body, NULL); /* n <= 0: nothing runs */
    tl_pool_free(p);
  }
  CHECK(run_cover(NULL, 37));          /* no pool: serial */
  CHECK(run_cover(tl_pool_global(), 12345));
}

/* Floating-point reduction with per-index slots: results must be exact. */
typedef struct {
  const double *x;
  double *partial;
  int64_t n, block;
} dot_job;

static void dot_body(int64_t b, void *arg) {
  dot_job *j = arg;
  int64_t lo = b * j->block, hi = TL_MIN(lo + j->block, j->n);
  double s = 0;
  for (int64_t i = lo; i < hi; i++) s += j->x[i] * j->x[i];
  j->partial[b] = s;
}

TL_TEST(pool_parallel_sum) {
  int64_t n = 1 << 20, block = 4096, nb = (n + block - 1) / block;
  double *x = malloc((size_t)n * sizeof *x), *partial = calloc((size_t)nb, sizeof *partial);
  for (int64_t i = 0; i < n; i++) x[i] = (double)(i % 17) - 8;
  double expect = 0;
  for (int64_t b = 0; b < nb; b++) {
    double s = 0;
    for (int64_t i = b * block; i < TL_MIN((b + 1) * block, n); i++) s += x[i] * x[i];
    expect += s;
  }
  tl_pool *p = tl_pool_new(0);
  dot_job j = {x, partial, n, block};
  for (int rep = 0; rep < 20; rep++) {
    memset(partial, 0, (size_t)nb * sizeof *partial);
    tl_pool_for(p, nb, dot_body, &j);
    double got = 0;
    for (int64_t b = 0; b < nb; b++) got += partial[b];
    CHECK(got == expect);
  }
  tl_pool_free(p);
  free(x);
  free(partial);
}

/* With real work to share, the workers do take part. */
typedef struct {
  pthread_t who[64];
} spread;

static void spread_body(int64_t i, void *arg) {
  spread *s = arg;
  s->who[i] = pthread_self();
  double t = tl_now();
  while (tl_now() - t < 20e-6) {
  }
}

TL_TEST(pool_uses_workers) {
  tl_pool *p = tl_pool_new(2);
  int multi = 0;
  for (int rep = 0; rep < 200 && !multi; rep++) {
    spread s;
    memset(&s, 0, sizeof s);
    tl_pool_for(p, 64, spread_body, &s);
    for (int i = 1; i < 64; i++)
      if (!pthread_equal(s.who[i], s.who[0])) multi = 1;
  }
  CHECK_MSG(multi, "a pool of 2 never ran an index on its worker");
  tl_pool_free(p);
}

/* Each thread starts on its own share, in slot order: the caller at index 0, a pool of 3's
** workers at n/3 and 2n/3 (here 33 and 66 of 99), so consecutive loops give a thread the same
** part of their index spaces. The shares' first indices wait until both workers have started,
** which keeps a thread from stealing another's share before its owner starts. */
typedef struct {
  pthread_t caller;
  atomic_int started;            /* workers that ran their first index */
  atomic_llong first[2];         /* each worker's first index, -1 before */
  atomic_int nworker;
  int gen;                       /* unique per loop: a thread registers once per loop */
  atomic_int timed_out;
} shares;

static _Thread_local int tls_gen;

static void shares_body(int64_t i, void *arg) {
  shares *s = arg;
  if (!pthread_equal(pthread_self(), s->caller) && tls_gen != s->gen) {
    tls_gen = s->gen;
    int k = atomic_fetch_add(&s->nworker, 1);
    if (k < 2) atomic_store(&s->first[k], i);
    atomic_fetch_add(&s->started, 1);
  }
  /* the first index of each thread waits for both workers: none steals a share before its
  ** owner has started */
  if (i == 0 || i == 33 || i == 66) {
    double t = tl_now();
    while (atomic_load(&s->started) < 2)
      if (tl_now() - t > 10.0) {
        atomic_store(&s->timed_out, 1);
        break;
      }
  }
}

TL_TEST(pool_shares_in_slot_order) {
  tl_pool *p = tl_pool_new(3);
  if (tl_pool_size(p) < 3) {
    tl_pool_free(p);
    return;
  }
  for (int rep = 0; rep < 5; rep++) {
    shares s;
    memset(&s, 0, sizeof s);
    s.caller = pthread_self();
    atomic_store(&s.first[0], -1);
    atomic_store(&s.first[1], -1);
    s.gen = rep + 1;
    tl_pool_for(p, 99, shares_body, &s);
    int timed_out = atomic_load(&s.timed_out);
    CHECK_MSG(!timed_out, "the workers of a pool of 3 did not start within 10 s");
    if (timed_out) break;
    long long a = atomic_load(&s.first[0]), b = atomic_load(&s.first[1]);
    CHECK_MSG((a == 33 && b == 66) || (a == 66 && b == 33),
              "the workers started at %lld and %lld, expected 33 and 66", a, b);
  }
  tl_pool_free(p);
}

/* ---- nesting and concurrency ---------------------------------------------------- */

typedef struct {
  tl_pool *inner_pool;
  atomic_int *hits;            /* [outer * 100 + inner] */
} nest;

typedef struct {
  nest *n;
  int64_t outer;
} nest_inner;

static void nest_inner_body(int64_t i, void *arg) {
  nest_inner *in = arg;
  atomic_fetch_add(&in->n->hits[in->outer * 100 + i], 1);
}

static void nest_outer_body(int64_t o, void *arg) {
  nest *n = arg;
  nest_inner in = {n, o};
  tl_pool_for(n->inner_pool, 100, nest_inner_body, &in);
}

TL_TEST(pool_nested) {
  tl_pool *p = tl_pool_new(0), *q = tl_pool_new(3);
  tl_pool *inner[] = {p, q, tl_pool_global()};
  for (size_t k = 0; k < TL_ARRAY_SIZE(inner); k++) {
    atomic_int hits[16 * 100];
    for (int i = 0; i < 1600; i++) atomic_init(&hits[i], 0);
    nest n = {inner[k], hits};
    for (int rep = 0; rep < 20; rep++) tl_pool_for(p, 16, nest_outer_body, &n);
    for (int i = 0; i < 1600; i++) CHECK_EQ_INT(atomic_load(&hits[i]), 20);
  }
  tl_pool_free(q);
  tl_pool_free(p);
}

typedef struct {
  tl_pool *pool;
  int ok;
} caller_arg;

static void *caller_thread(void *arg) {
  caller_arg *c = arg;
  c->ok = 1;
  for (int rep = 0; rep < 300; rep++)
    if (!run_cover(c->pool, 1 + (rep * 37) % 2000)) c->ok = 0;
  return NULL;
}

/* A pool busy in one thread runs another thread's loop serially. */
TL_TEST(pool_concurrent_callers) {
  tl_pool *p = tl_pool_new(0);
  pthread_t th[4];
  caller_arg ca[4];
  for (int i = 0; i < 4; i++) {
    ca[i].pool = p;
    CHECK(pthread_create(&th[i], NULL, caller_thread, &ca[i]) == 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) CHECK(ca[i].ok);
  tl_pool_free(p);
}

/* ---- overhead -------------------------------------------------------------------- */

static double ns_per_call(tl_pool *p, int64_t n, int calls) {
  for (int i = 0; i < 100; i++) tl_pool_for(p, n, empty_body, NULL); /* warm */
  double t0 = tl_now();
  for (int i = 0; i < calls; i++) tl_pool_for(p, n, empty_body, NULL);
  return (tl_now() - t0) / calls * 1e9;
}

TL_TEST(pool_many_small_calls) {
  tl_pool *p = tl_pool_new(0);
  int nt = tl_pool_size(p);
  double t0 = tl_now();
  long long total = 0;
  for (int i = 0; i < 10000; i++) {
    cover c;
    atomic_int hits[64];
    for (int k = 0; k < 64; k++) atomic_init(&hits[k], 0);
    c.hits = hits;
    atomic_init(&c.sum, 0);
    tl_pool_for(p, 1 + i % 64, cover_body, &c);
    total += atomic_load(&c.sum);
  }
  double secs = tl_now() - t0;
  long long expect = 0;
  for (int i = 0; i < 10000; i++) expect += (long long)(i % 64) * (i % 64 + 1) / 2;
  CHECK_EQ_INT(total, expect);
  CHECK_MSG(secs < 2.0, "10000 small loops took %.3f s", secs);
  double ns = ns_per_call(p, nt, 20000);
  printf("     empty tl_pool_for, %d threads, n = %d: %.0f ns/call\n", nt, nt, ns);
  tl_pool_free(p);
}

/* ---- the global pool --------------------------------------------------------------- */

static int default_global_size(void) {
  const char *s = getenv("TUNELUA_NUM_THREADS");
  int v = s ? atoi(s) : 0;
  return v > 0 ? v : tl_num_cores();
}

TL_TEST(pool_global) {
  tl_pool *g = tl_pool_global();
  CHECK(g != NULL);
  CHECK(tl_pool_global() == g);
  tl_pool_free(g);                     /* ignored: clients cannot free it */
  CHECK(run_cover(g, 1000));

  tl_set_num_threads(3);
  tl_pool *g3 = tl_pool_global();
  CHECK_EQ_INT(tl_pool_size(g3), 3);
  CHECK(run_cover(g3, 5000));
  CHECK(run_cover(g, 777));            /* the replaced pool still works, serially */

  tl_set_num_threads(1);
  CHECK_EQ_INT(tl_pool_size(tl_pool_global()), 1);
  CHECK(run_cover(tl_pool_global(), 100));

  tl_set_num_threads(0);
  CHECK_EQ_INT(tl_pool_size(tl_pool_global()), default_global_size());
  CHECK(run_cover(tl_pool_global(), 4321));
}

typedef struct {
  atomic_int stop;
} busy_arg;

static void *busy_global(void *arg) {
  busy_arg *b = arg;
  while (!atomic_load(&b->stop)) run_cover(tl_pool_global(), 500);
  return NULL;
}

/* In the child of a fork the global pool is rebuilt (sized from the
** environment), and a pool from before the fork runs serially. */
static int fork_child_fn(void *arg, int out_fd) {
  tl_pool *old = arg;
  setenv("TUNELUA_NUM_THREADS", "3", 1);
  tl_pool *g = tl_pool_global();
  if (!run_cover(g, 10000)) return 10;
  if (!run_cover(old, 1000)) return 11;
  tl_pool_free(old);
  tl_pool *fresh = tl_pool_new(2);
  if (!run_cover(fresh, 1000)) return 12;
  tl_pool_free(fresh);
  char msg[32];
  int len = snprintf(msg, sizeof msg, "%d", tl_pool_size(g));
  if (write(out_fd, msg, (size_t)len) != len) return 13;
  return 0;
}

TL_TEST(pool_fork_child) {
  tl_set_num_threads(0);
  tl_pool *user = tl_pool_new(2);
  CHECK(run_cover(user, 1000));
  busy_arg b;
  atomic_init(&b.stop, 0);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, busy_global, &b) == 0);
  tl_ctx *ctx = tl_ctx_new();
  /* Checks only after the busy thread is joined: a failed CHECK leaves. */
  int rc = TL_OK, status = TL_PROC_OK, code = 0, size_ok = 1;
  char err[256] = "";
  for (int rep = 0; rep < 10 && rc == TL_OK && status == TL_PROC_OK && size_ok; rep++) {
    tl_proc_result *r = NULL;
    rc = tl_proc_call(ctx, fork_child_fn, user, 5.0, 0, &r);
    if (rc != TL_OK) break;
    status = tl_proc_status(r);
    code = tl_proc_code(r);
    snprintf(err, sizeof err, "%s", tl_proc_stderr(r, NULL));
    size_ok = strcmp(tl_proc_stdout(r, NULL), "3") == 0;
    tl_proc_result_free(r);
  }
  atomic_store(&b.stop, 1);
  pthread_join(th, NULL);
  CHECK_MSG(rc == TL_OK, "tl_proc_call: %s", tl_errmsg(ctx));
  CHECK_MSG(status == TL_PROC_OK, "child: status %d code %d stderr %s", status, code, err);
  CHECK_MSG(size_ok, "the child's global pool did not follow TUNELUA_NUM_THREADS");
  CHECK(run_cover(user, 1000));        /* the parent's pools are untouched */
  CHECK(run_cover(tl_pool_global(), 1000));
  tl_pool_free(user);
  tl_ctx_free(ctx);
}

/* tl_pool_bind_caller in a child: the caller ends up on one CPU and the
** worker runs its share of a loop on another one (with two CPUs or more). */
typedef struct {
  _Atomic int cpu_of[64];
} cpu_arg;
static void record_cpu(int64_t i, void *arg) {
  cpu_arg *a = arg;
  volatile double x = 0;
  for (int k = 0; k < 20000; k++) x += k;   /* long enough for both threads to join */
  atomic_store(&a->cpu_of[i], sched_getcpu());
}
static int bind_child_fn(void *arg, int out_fd) {
  (void)arg;
  char msg[128] = "ok";
  cpu_set_t before;
  CPU_ZERO(&before);
  if (pthread_getaffinity_np(pthread_self(), sizeof before, &before) != 0) return 20;
  tl_set_num_threads(2);
  tl_pool_bind_caller();
  cpu_set_t after;
  CPU_ZERO(&after);
  if (pthread_getaffinity_np(pthread_self(), sizeof after, &after) != 0) return 21;
  if (CPU_COUNT(&before) < 2) {
    if (CPU_COUNT(&after) != CPU_COUNT(&before)) snprintf(msg, sizeof msg, "bound with one CPU");
  } else if (CPU_COUNT(&after) != 1) {
    snprintf(msg, sizeof msg, "caller still on %d CPUs", CPU_COUNT(&after));
  } else {
    int mine = sched_getcpu(), other = 0;
    for (int rep = 0; rep < 50 && !other; rep++) {
      cpu_arg a;
      for (int i = 0; i < 64; i++) atomic_init(&a.cpu_of[i], -1);
      tl_pool_for(tl_pool_global(), 64, record_cpu, &a);
      for (int i = 0; i < 64; i++) {
        int c = atomic_load(&a.cpu_of[i]);
        if (c != mine && !CPU_ISSET(c, &before)) {
          snprintf(msg, sizeof msg, "a worker ran on CPU %d, outside the affinity set", c);
          other = 1;
        } else if (c != mine) {
          other = 1;
        }
      }
    }
    if (!other) snprintf(msg, sizeof msg, "no index ran off the caller's CPU %d", mine);
  }
  int len = (int)strlen(msg);
  if (write(out_fd, msg, (size_t)len) != len) return 22;
  return 0;
}

TL_TEST(pool_bind_caller) {
  cpu_set_t set0;
  CPU_ZERO(&set0);
  CHECK(pthread_getaffinity_np(pthread_self(), sizeof set0, &set0) == 0);
  tl_ctx *ctx = tl_ctx_new();
  tl_proc_result *r = NULL;
  int rc = tl_proc_call(ctx, bind_child_fn, NULL, 10.0, 0, &r);
  CHECK_MSG(rc == TL_OK, "tl_proc_call: %s", tl_errmsg(ctx));
  CHECK_MSG(tl_proc_status(r) == TL_PROC_OK, "child: status %d code %d", tl_proc_status(r),
            tl_proc_code(r));
  CHECK_MSG(strcmp(tl_proc_stdout(r, NULL), "ok") == 0, "%s", tl_proc_stdout(r, NULL));
  tl_proc_result_free(r);
  tl_ctx_free(ctx);
  /* the parent's thread keeps its mask */
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK(pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0);
  CHECK(CPU_EQUAL(&set, &set0));
}
