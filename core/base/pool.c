/*
** pool.c -- the thread pool behind every parallel loop of libtunelua.
**
** Generated CPU kernels lower their `parallel` loops to
**   tl_pool_for(tl_pool_global(), extent, body, closure);
** so this is on the hot path of every measurement: a tuned kernel may make
** thousands of such calls per second, each worth a few microseconds of work.
** The design therefore avoids anything per call that costs a system call when
** the machine is busy with a stream of loops:
**
**   - The workers are created once, with the pool, and live until it is freed.
**   - A call publishes a job (fn, arg, n), opens it and bumps a
**     generation counter. Idle workers spin on that counter for a short while
**     (spin_s) before parking in a futex, so back-to-back loops never enter
**     the kernel; the futex is only woken when some worker actually parked.
**   - The calling thread takes part in the work. Each thread has a slot (the
**     caller 0, worker i slot i + 1) and the loop's indices are cut into one
**     contiguous share per slot, in slot order, so consecutive loops give a
**     thread the same part of their index spaces: a depthwise conv whose
**     channel chunks follow the 1x1 conv that wrote them reads what its own
**     core wrote. A thread claims from its own share, each claim half of
**     what is left there (at least one index), then steals from the other
**     shares the same way, so the threads still finish together when one is
**     late or slower. One counter for all threads (guided claims of
**     1/(2 * nthreads) of what was left) balanced as well, but gave each
**     thread a different part of each loop: on the Xeon, mobilenet's
**     depthwise steps took twice their time alone.
**   - A worker must join the open job before it touches it. When the caller
**     finds nothing left to claim it closes the job and waits only for the
**     workers that joined (they hold claimed chunks). A worker that wakes
**     late, or was descheduled on a loaded machine, finds the job closed and
**     goes back to waiting: it never delays the caller, which in the worst
**     case simply runs the whole loop itself.
**
** One job runs on a pool at a time. A call that finds the pool busy (another
** thread owns it, or the call is nested inside a loop body on a worker) runs
** its loop serially in the calling thread: it never waits for the pool, so
** nesting cannot deadlock and inner loops do not oversubscribe the machine.
**
** fork(): only the forking thread survives in a child, so a pool's workers do
** not exist there. A pthread_atfork handler bumps a process-wide fork
** generation and drops the global pool in the child; tl_pool_global() then
** builds a fresh one on first use, and any older pool (stamped with the old
** generation) runs its loops serially and is freed without joining.
**
** The global pool is sized by tl_set_num_threads(n), else by the environment
** variable TUNELUA_NUM_THREADS, else one thread per core.
**
** Binding. A measurement child calls tl_pool_bind_caller: its global pool's
** workers are bound to CPUs 2..n of the process's affinity set and the
** calling thread to the first, so a timing does not depend on where the
** scheduler put a thread the child has just made (TVM's runtime binds its
** threads the same way). On a shared machine a bound thread cannot move away
** from a CPU another tenant is using: TUNELUA_BIND_THREADS=0 turns binding
** off. Elsewhere nothing is bound unless TUNELUA_BIND_THREADS=1, which binds
** the global pool's workers (never the application's thread: processes it
** forks, compilers among them, inherit its mask). No binding when the pool is
** larger than the set.
**
** A pointer returned by tl_pool_global() stays valid for the life of the
** process: a pool replaced by tl_set_num_threads is stopped (its threads
** joined) but its struct is kept and runs later loops serially, so a racing
** caller never touches freed memory.
*/
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__) && !defined(TL_POOL_NO_FUTEX)
#include <linux/futex.h>
#include <sys/syscall.h>
#define TL_POOL_FUTEX 1
#else
#define TL_POOL_FUTEX 0
#endif

#define POOL_MAX_THREADS 1024    /* a sanity bound on requested sizes */
#define POOL_SPIN_S 300e-6       /* idle spin before parking, cores not oversubscribed */
#define CACHELINE 64
#define STATE_OPEN 0x80000000u   /* in tl_pool.state; the low bits count joined workers */

/* A thread's share of the job: indices [next, end), claimed from the front. */
typedef struct {
  alignas(CACHELINE) atomic_int_fast64_t next;
  int64_t end;
} pool_slot;

/* What a worker thread is started with. */
typedef struct {
  tl_pool *pool;
  int slot;
} pool_worker;

struct tl_pool {
  /* Fixed from creation on. */
  int nthreads;                /* workers + the calling thread; >= 1 */
  int nworkers;                /* threads[0..nworkers) were started */
  pthread_t *threads;
  pool_worker *workers;        /* per started thread: its slot */
  pool_slot *slots;            /* per thread (0: the caller); a job's shares */
  unsigned fork_gen;           /* g_fork_gen when created; differs in a forked child */
  int global;                  /* held by the global slot: tl_pool_free ignores it */
  tl_pool *retired_next;       /* list of replaced global pools, under g_mu */
  double spin_s;               /* how long a waiter spins before parking */

  /* The job. Written only by the thread that owns `busy`, while `state` is
  ** 0 (closed, nobody joined); read only by workers that have joined. */
  void (*fn)(int64_t i, void *arg);
  void *arg;

  /* 0: free; 1: a tl_pool_for owns the workers (or the pool was retired,
  ** in which case it stays 1 forever and every loop runs serially). */
  alignas(CACHELINE) atomic_int busy;

  /* Bumped once per job and once to stop; idle workers wait for it to move.
  ** It only says "look at state"; a worker may skip generations. */
  alignas(CACHELINE) atomic_uint gen;
  atomic_int nparked;          /* workers parked (or about to park) on gen */
  atomic_int stop;             /* set before the final bump of gen */

  /* STATE_OPEN while workers may join the job, plus the number of workers
  ** joined (running chunks). Workers join only while it is open; the owner
  ** closes it and waits for 0 before the job may be reused. */
  alignas(CACHELINE) atomic_uint state;
  atomic_int caller_parked;    /* the owner is parked (or about to) on state */

  pthread_mutex_t mu;          /* parking without futexes: guards nothing but the wait */
  pthread_cond_t cv;
};

/* Set for the lifetime of a worker thread and, in the thread that owns a
** pool, for the duration of its share of the loop: loops started from there
** run serially. */
static _Thread_local int tls_inside;

/* ---- global state --------------------------------------------------------- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards creation of g_pool, g_requested */
static _Atomic(tl_pool *) g_pool;     /* NULL until first use, and in a fresh fork child */
static int g_requested;               /* last tl_set_num_threads(n > 0), 0 = default */
static tl_pool *g_retired;            /* replaced global pools: kept, never freed */
static atomic_uint g_fork_gen;        /* bumped in every fork child */

static void atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void atfork_child(void) {
  atomic_fetch_add(&g_fork_gen, 1);
  /* The old global pool has no workers here. Its memory is kept (a cached
  ** pointer still works, serially: see fork_gen); a new one is made lazily. */
  tl_pool *old = atomic_load(&g_pool);
  if (old) {
    old->retired_next = g_retired;
    g_retired = old;
  }
  atomic_store(&g_pool, NULL);
  pthread_mutex_init(&g_mu, NULL);
}
static void pool_once(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

/* ---- waiting: spin, then park ---------------------------------------------- */

static inline void cpu_relax(void) {
#if defined(__amd64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Block while *w == expect (may return spuriously). */
static void park(tl_pool *p, atomic_uint *w, unsigned expect) {
#if TL_POOL_FUTEX
  (void)p;
  syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
#else
  pthread_mutex_lock(&p->mu);
  while (atomic_load(w) == expect) pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
#endif
}

/* Wake everyone parked on w; the caller has already changed *w. */
static void unpark(tl_pool *p, atomic_uint *w) {
#if TL_POOL_FUTEX
  (void)p;
  syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
  (void)w;
  pthread_mutex_lock(&p->mu);
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
#endif
}

/* Spin up to p->spin_s seconds for the condition; return whether it came
** true (0: the caller should park). */
static int spin_until_gen_moves(tl_pool *p, unsigned seen) {
  if (p->spin_s <= 0) return atomic_load_explicit(&p->gen, memory_order_acquire) != seen;
  double deadline = 0;
  for (unsigned k = 1;; k++) {
    if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen) return 1;
    cpu_relax();
    if ((k & 255) == 0) {        /* read the clock rarely: it is not free */
      double t = tl_now();
      if (deadline == 0) deadline = t + p->spin_s;
      else if (t >= deadline) return 0;
    }
  }
}

static int spin_until_left(tl_pool *p) {
  if (p->spin_s <= 0) return atomic_load_explicit(&p->state, memory_order_acquire) == 0;
  double deadline = 0;
  for (unsigned k = 1;; k++) {
    if (atomic_load_explicit(&p->state, memory_order_acquire) == 0) return 1;
    cpu_relax();
    if ((k & 255) == 0) {
      double t = tl_now();
      if (deadline == 0) deadline = t + p->spin_s;
      else if (t >= deadline) return 0;
    }
  }
}

/* ---- the work ----------------------------------------------------------------- */

static void run_serial(int64_t n, void (*fn)(int64_t, void *), void *arg) {
  for (int64_t i = 0; i < n; i++) fn(i, arg);
}

/* Claim from slot v until its share is gone: each claim half of what is left
** there, at least one index; `next` never passes `end`. */
static void drain(tl_pool *p, pool_slot *v) {
  void (*fn)(int64_t, void *) = p->fn;
  void *arg = p->arg;
  int64_t end = v->end;
  int64_t b = atomic_load_explicit(&v->next, memory_order_relaxed), c;
  for (;;) {
    do {
      if (b >= end) return;
      c = (end - b) / 2;
      if (c < 1) c = 1;
    } while (!atomic_compare_exchange_weak_explicit(&v->next, &b, b + c, memory_order_relaxed,
                                                    memory_order_relaxed));
    for (int64_t i = b; i < b + c; i++) fn(i, arg);
    b = atomic_load_explicit(&v->next, memory_order_relaxed);
  }
}

/* The thread of slot `self`: its own share first, then what is left of the others'. */
static void run_chunks(tl_pool *p, int self) {
  int t = p->nthreads;
  for (int k = 0; k < t; k++) drain(p, &p->slots[(self + k) % t]);
}

static void *worker_main(void *arg) {
  tl_pool *p = ((pool_worker *)arg)->pool;
  int self = ((pool_worker *)arg)->slot;
  unsigned seen = 0;           /* gen starts at 0: no job can be missed */
  tls_inside = 1;
  for (;;) {
    /* Wait for the generation to move: spin, then park. The seq_cst
    ** increment of nparked before re-reading gen pairs with the owner's
    ** seq_cst bump of gen before reading nparked: one of the two sees the
    ** other, so a bump is never slept through. */
    if (!spin_until_gen_moves(p, seen)) {
      for (;;) {
        atomic_fetch_add(&p->nparked, 1);
        if (atomic_load(&p->gen) == seen) park(p, &p->gen, seen);
        atomic_fetch_sub(&p->nparked, 1);
        if (atomic_load_explicit(&p->gen, memory_order_acquire) != seen) break;
      }
    }
    seen = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (atomic_load(&p->stop)) return NULL;
    /* Join the job if it is still open. Joining the current job twice (after
    ** a stale look at gen) is harmless: claims are atomic. */
    unsigned st = atomic_load_explicit(&p->state, memory_order_relaxed);
    while (st & STATE_OPEN) {
      if (!atomic_compare_exchange_weak_explicit(&p->state, &st, st + 1, memory_order_acquire,
                                                 memory_order_relaxed))
        continue;
      run_chunks(p, self);
      /* The last access to the job: after this the owner may reuse it. */
      if (atomic_fetch_sub(&p->state, 1) == 1 && atomic_load(&p->caller_parked))
        unpark(p, &p->state);
      break;
    }
  }
}

static int try_acquire(tl_pool *p) {
  int expect = 0;
  if (atomic_load_explicit(&p->busy, memory_order_relaxed) != 0) return 0;
  return atomic_compare_exchange_strong_explicit(&p->busy, &expect, 1, memory_order_acquire,
                                                 memory_order_relaxed);
}

static void release(tl_pool *p) { atomic_store_explicit(&p->busy, 0, memory_order_release); }

TL_EXPORT void tl_pool_for(tl_pool *pool, int64_t n, void (*fn)(int64_t i, void *arg),
                           void *arg) {
  if (n <= 0 || !fn) return;
  if (!pool || pool->nworkers == 0 || n == 1 || tls_inside ||
      pool->fork_gen != atomic_load_explicit(&g_fork_gen, memory_order_relaxed) ||
      n > INT64_MAX / 2 || !try_acquire(pool)) {
    run_serial(n, fn, arg);
    return;
  }
  tl_pool *p = pool;
  p->fn = fn;
  p->arg = arg;
  /* Shares in slot order, sizes differing by at most one index. */
  int64_t t = p->nthreads, q = n / t, r = n % t;
  for (int64_t k = 0, b = 0; k < t; k++) {
    int64_t e = b + q + (k < r);
    atomic_store_explicit(&p->slots[k].next, b, memory_order_relaxed);
    p->slots[k].end = e;
    b = e;
  }
  atomic_store_explicit(&p->state, STATE_OPEN, memory_order_release); /* publishes the job */
  atomic_fetch_add(&p->gen, 1);  /* seq_cst: pairs with nparked */
  if (atomic_load(&p->nparked) > 0) unpark(p, &p->gen);

  tls_inside = 1;
  run_chunks(p, 0);
  tls_inside = 0;

  /* Nothing is left to claim: close the job, then wait for the workers
  ** that joined to finish their chunks. */
  if (atomic_fetch_and(&p->state, ~STATE_OPEN) != STATE_OPEN && !spin_until_left(p)) {
    for (;;) {
      atomic_store(&p->caller_parked, 1);
      unsigned left = atomic_load(&p->state);
      if (left == 0) break;
      park(p, &p->state, left);
    }
    atomic_store(&p->caller_parked, 0);
  }
  release(p);
}

/* ---- creation and teardown ------------------------------------------------ */

/* TUNELUA_BIND_THREADS: -1 unset (bind in measurement children), 0 never, 1 also the
** global pool's workers of every process. */
static int bind_env(void) {
  const char *e = getenv("TUNELUA_BIND_THREADS");
  if (!e || !*e) return -1;
  return e[0] == '0' ? 0 : 1;
}
static int g_bind_requested;          /* set by tl_pool_bind_caller */

/* Bind worker i of a pool of nthreads to the (i+1)-th CPU of the calling
** thread's affinity set; nothing when the set is smaller than the pool. */
static void bind_worker(pthread_t th, int i, int nthreads, const cpu_set_t *set) {
  if (CPU_COUNT(set) < nthreads) return;
  int seen = -1;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set) || ++seen != i + 1) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    pthread_setaffinity_np(th, sizeof one, &one);   /* best effort */
    return;
  }
}

static tl_pool *pool_create(int nthreads, int global) {
  pthread_once(&g_once, pool_once);
  if (nthreads <= 0) nthreads = tl_num_cores();
  if (nthreads > POOL_MAX_THREADS) nthreads = POOL_MAX_THREADS;

  size_t size = (sizeof(tl_pool) + CACHELINE - 1) / CACHELINE * CACHELINE;
  tl_pool *p = aligned_alloc(CACHELINE, size);
  if (!p) {
    fprintf(stderr, "tunelua: out of memory allocating a thread pool\n");
    abort();
  }
  memset(p, 0, size);
  p->global = global;
  p->fork_gen = atomic_load(&g_fork_gen);
  /* Spinning only pays when every thread has a core of its own. */
  p->spin_s = nthreads <= tl_num_cores() ? POOL_SPIN_S : 0;
  atomic_init(&p->busy, 0);
  atomic_init(&p->gen, 0);
  atomic_init(&p->nparked, 0);
  atomic_init(&p->stop, 0);
  atomic_init(&p->state, 0);
  atomic_init(&p->caller_parked, 0);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->threads = tl_calloc((size_t)(nthreads > 1 ? nthreads - 1 : 1), sizeof(pthread_t));
  p->workers = tl_calloc((size_t)(nthreads > 1 ? nthreads - 1 : 1), sizeof(pool_worker));
  p->slots = aligned_alloc(CACHELINE, (size_t)nthreads * sizeof(pool_slot));
  if (!p->slots) {
    fprintf(stderr, "tunelua: out of memory allocating a thread pool\n");
    abort();
  }
  for (int i = 0; i < nthreads; i++) {
    atomic_init(&p->slots[i].next, 0);
    p->slots[i].end = 0;
  }

  /* Workers block every asynchronous signal: handlers (the REPL's Ctrl-C,
  ** the host's SIGCHLD) keep running on the application's threads. */
  cpu_set_t set;
  CPU_ZERO(&set);
  int be = bind_env();
  int bind = global && (be == 1 || (be == -1 && g_bind_requested)) &&
             pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  for (int i = 0; i < nthreads - 1; i++) {
    p->workers[p->nworkers] = (pool_worker){ p, p->nworkers + 1 };
    if (pthread_create(&p->threads[p->nworkers], NULL, worker_main, &p->workers[p->nworkers]) != 0)
      break;
    if (bind) bind_worker(p->threads[p->nworkers], i, nthreads, &set);
#ifdef __GLIBC__
    char name[16];
    snprintf(name, sizeof name, "tl-pool-%d", (i + 1) % 10000);   /* at most POOL_MAX_THREADS */
    pthread_setname_np(p->threads[p->nworkers], name);
#endif
    p->nworkers++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  /* If the system refused threads, the pool is as large as it got. */
  p->nthreads = p->nworkers + 1;
  return p;
}

/* Stop and join the workers. Waits for a loop in flight to finish, and
** leaves `busy` held so that later loops on the pool run serially. */
static void pool_stop(tl_pool *p) {
  if (p->fork_gen != atomic_load(&g_fork_gen)) return; /* no workers in this process */
  while (!try_acquire(p)) sched_yield();
  if (p->nworkers == 0) return;
  atomic_store(&p->stop, 1);
  atomic_fetch_add(&p->gen, 1);
  unpark(p, &p->gen);
  for (int i = 0; i < p->nworkers; i++) pthread_join(p->threads[i], NULL);
}

TL_EXPORT tl_pool *tl_pool_new(int nthreads) { return pool_create(nthreads, 0); }

TL_EXPORT void tl_pool_bind_caller(void) {
  if (bind_env() == 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return;
  g_bind_requested = 1;
  /* a pool made before the request keeps its unbound workers: make a new one */
  tl_pool *p = atomic_load(&g_pool);
  if (p && p->fork_gen == atomic_load(&g_fork_gen)) tl_set_num_threads(p->nthreads);
  p = tl_pool_global();               /* binds its workers while the set is whole */
  if (CPU_COUNT(&set) < p->nthreads) return;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      return;
    }
}

/* Parse a CPU list ("2,3", "0-3,8", whitespace ignored) into set. Returns 0, or
** -1 with err naming the list and what was expected. */
static int parse_cpu_list(const char *list, cpu_set_t *set, char *err, size_t errlen) {
  CPU_ZERO(set);
  const char *p = list;
  int any = 0;
  while (*p) {
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) break;
    char *end;
    errno = 0;
    long a = strtol(p, &end, 10), b;
    if (end == p || errno || a < 0 || a >= CPU_SETSIZE) goto bad;
    p = end;
    b = a;
    if (*p == '-') {
      p++;
      b = strtol(p, &end, 10);
      if (end == p || errno || b < a || b >= CPU_SETSIZE) goto bad;
      p = end;
    }
    for (long c = a; c <= b; c++) CPU_SET((int)c, set);
    any = 1;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == ',') p++;
    else if (*p) goto bad;
  }
  if (any) return 0;
bad:
  snprintf(err, errlen, "CPU list '%s': expected CPU numbers and ranges separated by commas "
           "(e.g. 2,3 or 0-3)", list);
  return -1;
}

TL_EXPORT int tl_pin_cpus(const char *list, char *err, size_t errlen) {
  cpu_set_t set;
  if (!list) {
    snprintf(err, errlen, "CPU list: none given");
    return -1;
  }
  if (parse_cpu_list(list, &set, err, errlen)) return -1;
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    snprintf(err, errlen, "CPU list '%s': cannot run on these CPUs (%s)", list, strerror(errno));
    return -1;
  }
  return 0;
}

TL_EXPORT int tl_cpu_groups_check(const char *const *groups, int n, char *err, size_t errlen) {
  if (n < 1 || !groups) {
    snprintf(err, errlen, "CPU groups: none given (expected at least one CPU list)");
    return -1;
  }
  cpu_set_t *sets = calloc((size_t)n, sizeof *sets);
  if (!sets) {
    snprintf(err, errlen, "CPU groups: out of memory");
    return -1;
  }
  int rc = 0;
  for (int g = 0; g < n && !rc; g++) {
    char perr[256];
    if (!groups[g] || parse_cpu_list(groups[g], &sets[g], perr, sizeof perr)) {
      snprintf(err, errlen, "group %d: %s", g + 1,
               groups[g] ? perr : "none given (expected a CPU list such as 2,3)");
      rc = -1;
      break;
    }
    for (int h = 0; h < g && !rc; h++) {
      cpu_set_t both;
      CPU_AND(&both, &sets[g], &sets[h]);
      if (CPU_COUNT(&both) == 0) continue;
      int c = 0;
      while (!CPU_ISSET(c, &both)) c++;
      snprintf(err, errlen, "groups %d ('%s') and %d ('%s') share CPU %d: expected disjoint "
               "groups", h + 1, groups[h], g + 1, groups[g], c);
      rc = -1;
    }
  }
  free(sets);
  return rc;
}

TL_EXPORT void tl_pool_free(tl_pool *pool) {
  if (!pool || pool->global) return; /* the global pool is never freed by a client */
  pool_stop(pool);
  /* In a fork child the copies may look held by threads that do not exist
  ** here (glibc's cond_destroy would wait for them): leave them be. */
  if (pool->fork_gen == atomic_load(&g_fork_gen)) {
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
  }
  free(pool->threads);
  free(pool->workers);
  free(pool->slots);
  free(pool);
}

TL_EXPORT int tl_pool_size(const tl_pool *pool) { return pool ? pool->nthreads : 1; }

/* TUNELUA_NUM_THREADS when it is a positive integer, else 0. */
static int env_threads(void) {
  const char *s = getenv("TUNELUA_NUM_THREADS");
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  while (*end == ' ' || *end == '\t' || *end == '\n') end++;
  if (errno || *end || v <= 0) return 0;
  return v > POOL_MAX_THREADS ? POOL_MAX_THREADS : (int)v;
}

/* Size of a new global pool; called with g_mu held. */
static int global_size(void) {
  if (g_requested > 0) return g_requested;
  int n = env_threads();
  return n > 0 ? n : tl_num_cores();
}

/* A process that only runs kernels (a measurement child) sizes its global pool from
** TUNELUA_NUM_THREADS when that is set, not from the count its parent requested. */
void tl_pool_use_env_threads(void) {
  int n = env_threads();
  if (n <= 0) return;
  pthread_once(&g_once, pool_once);
  pthread_mutex_lock(&g_mu);
  int same = g_requested == 0 || g_requested == n;
  pthread_mutex_unlock(&g_mu);
  if (!same) tl_set_num_threads(n);
}

TL_EXPORT tl_pool *tl_pool_global(void) {
  tl_pool *p = atomic_load_explicit(&g_pool, memory_order_acquire);
  if (p) return p;
  pthread_once(&g_once, pool_once);
  pthread_mutex_lock(&g_mu);
  p = atomic_load_explicit(&g_pool, memory_order_relaxed);
  if (!p) {
    p = pool_create(global_size(), 1);
    atomic_store_explicit(&g_pool, p, memory_order_release);
  }
  pthread_mutex_unlock(&g_mu);
  return p;
}

TL_EXPORT void tl_set_num_threads(int n) {
  pthread_once(&g_once, pool_once);
  pthread_mutex_lock(&g_mu);
  g_requested = n > 0 ? (n > POOL_MAX_THREADS ? POOL_MAX_THREADS : n) : 0;
  tl_pool *old = atomic_load_explicit(&g_pool, memory_order_relaxed);
  tl_pool *p = pool_create(global_size(), 1);
  atomic_store_explicit(&g_pool, p, memory_order_release);
  if (old) {
    old->retired_next = g_retired;
    g_retired = old;
  }
  pthread_mutex_unlock(&g_mu);
  /* Retire the old pool: its struct stays (see the top of the file). From
  ** inside a loop body the old pool may be the one running us; waiting for
  ** it would deadlock, so there it is left running, idle. */
  if (old && !tls_inside) {
    pool_stop(old);
    free(old->threads);
    old->threads = NULL;
  }
}
