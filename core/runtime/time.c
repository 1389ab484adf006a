/*
** time.c -- the time evaluator: TVM's contract (`number` runs per
** measurement, `repeat` measurements, `min_repeat_ms` grows number) in one
** loop for every device. The device's part comes as callbacks (tl_time_work,
** runtime.h): the CPU kernel runs synchronously, an OpenCL module enqueues
** and is waited for, the graph executor runs all its steps.
**
** Growth: after a measurement shorter than min_repeat_ms, number jumps to the
** estimate that reaches it (min_repeat_ms / time per run + 1), at least by
** the golden ratio, capped at 1e9. With cache_flush a 32 MiB buffer is
** written before each measurement, outside the timed region, and a raw CPU
** kernel's arguments after the first are evicted from every core's caches
** (tl_kernel_time): the memset clears only the calling core's private caches,
** and on two threads the other core's L2 kept up to 2 MiB of a conv's weights.
** The first argument (the layer's input, which the previous layer has just
** written) stays where it is, as TVM's cache flush leaves it.
*/
#include "runtime.h"

#define CACHE_FLUSH_BYTES (32u << 20)
#define MAX_NUMBER 1000000000

static void flush_caches(unsigned char *buf, int round) {
  memset(buf, round & 0xff, CACHE_FLUSH_BYTES);
  __asm__ volatile("" : : "r"(buf) : "memory");   /* keep the stores */
}

/* One batch of n runs started at t0; its time in *secs. */
static int batch(const tl_time_work *w, int n, double t0, double *secs) {
  int rc = 0;
  for (int i = 0; i < (n ? n : 1) && !rc; i++) rc = w->run(w->arg, i, n);
  if (w->sync) return w->sync(w->arg, rc, t0, secs);
  *secs = tl_now() - t0;
  return rc;
}

int tl_time_eval(const tl_time_work *w, int number, int repeat, double min_repeat_ms,
                 double *secs_out) {
  if (number < 1) number = 1;
  int rc;
  double w0 = tl_now(), secs = 0;
  do                                               /* warm-up */
    rc = w->run(w->arg, 0, 0);
  while (!rc && tl_now() - w0 < w->warmup_s);
  if (w->sync) rc = w->sync(w->arg, rc, w0, &secs);
  if (rc) return rc;
  unsigned char *flush = w->cache_flush ? tl_malloc(CACHE_FLUSH_BYTES) : NULL;
  for (int r = 0; r < repeat && !rc; r++) {
    for (;;) {
      if (flush) flush_caches(flush, r);
      if (flush && w->evict) w->evict(w->arg);
      if ((rc = batch(w, number, tl_now(), &secs))) break;
      double dur_ms = secs * 1e3;
      if (min_repeat_ms <= 0 || dur_ms >= min_repeat_ms || number >= MAX_NUMBER) break;
      double next = number * 1.618;
      if (dur_ms > 0) {
        double want = min_repeat_ms / (dur_ms / number) + 1;
        if (want > next) next = want;
      }
      if (next < number + 1) next = number + 1;
      number = next > 1e9 ? MAX_NUMBER : (int)next;
    }
    if (!rc) secs_out[r] = secs / number;
  }
  free(flush);
  return rc;
}

/* ---- raw CPU kernels ------------------------------------------------------------ */

/* The warm-up (TL_TIME_WARMUP_S) runs the kernel until 10 ms have passed (at least once).
** A process that has just started (a measurement child is forked per run)
** creates its thread pool on the first parallel loop, and a sub-millisecond
** kernel is over before the new workers are even scheduled (on a VM waking an
** idle vCPU alone can take that long): after a single warm-up call the first
** repeats ran on the calling thread alone, and one config measured 34 or 80
** GFLOPS from run to run. After a few milliseconds of back-to-back calls the
** workers are awake and spinning, as they are in a network's stream of
** kernels. The graph executor's runs warm up the same way. */

typedef int32_t (*kernel_fn)(void **args, int32_t nargs);

typedef struct {
  kernel_fn fn;
  void **dl;
  int nargs;
} kernel_work;

static int run_kernel(void *arg, int i, int n) {
  (void)i, (void)n;
  kernel_work *k = arg;
  return k->fn(k->dl, k->nargs);
}

/* Writes back and invalidates the lines of [p, p + n) in every core's caches. */
static void evict_range(const unsigned char *p, size_t n) {
  const unsigned char *a = (const unsigned char *)((uintptr_t)p & ~(uintptr_t)63);
  for (; a < p + n; a += 64) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("clflush %0" : "+m"(*(volatile unsigned char *)a));
#elif defined(__aarch64__)
    __asm__ volatile("dc civac, %0" : : "r"(a) : "memory");
#else
    (void)a;
#endif
  }
#if defined(__x86_64__) || defined(__i386__)
  __asm__ volatile("mfence" : : : "memory");
#elif defined(__aarch64__)
  __asm__ volatile("dsb ish" : : : "memory");
#endif
}

/* The kernel's arguments after the first, out of every cache (see the header). */
static void evict_args(void *arg) {
  kernel_work *k = arg;
  for (int i = 1; i < k->nargs; i++) {
    const DLTensor *t = k->dl[i];
    if (!t || !t->data) continue;
    size_t n = (size_t)(t->dtype.bits * t->dtype.lanes + 7) / 8;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d] > 0 ? (size_t)t->shape[d] : 0;
    evict_range((const unsigned char *)t->data + t->byte_offset, n);
  }
}

int tl_kernel_time(void *fnp, void **dl, int nargs, int number, int repeat,
                   double min_repeat_ms, int cache_flush, double *secs_out, int32_t *kcode) {
  kernel_work k = {NULL, dl, nargs};
  *(void **)&k.fn = fnp;
  tl_time_work w = {run_kernel, NULL, &k, TL_TIME_WARMUP_S, cache_flush, evict_args};
  int32_t kr = tl_time_eval(&w, number, repeat, min_repeat_ms, secs_out);
  if (!kr) return 0;
  *kcode = kr;
  return -1;
}
