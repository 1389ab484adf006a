// scripts/bench/x86_1x1_tiles.c -- register tiles of a 1x1 conv on AVX-512, alone
//
// The FMA loop of a 1x1 conv over NCHW32c-like data, written by hand in the C backend's
// style (GCC vector extensions), in tiles of P positions by V vectors of 16 output channels,
// each variant alternated with the others in rounds (median of the rounds' best of 5, GFLOPS)
// on mobilenet's and resnet-50's 1x1 shapes, and checked against the first variant:
//   c PxV   plain C (c7x4: 33 live vectors, GCC keeps an accumulator on the stack)
//   e PxV   the broadcast as the FMA's memory operand ({1to16}, inline asm)
//   m7x4    three kernel vectors in registers, the fourth as the FMA's memory operand (the
//           code pragma "peel_reread" makes GCC emit, core/codegen/c.c)
//   c6x4    6 positions over the flattened rows (a shorter tile at the end)
// Build and run (one thread, then two):
//   gcc -O3 -march=native -o /tmp/x86_1x1_tiles scripts/bench/x86_1x1_tiles.c -lpthread
//   taskset -c 2 /tmp/x86_1x1_tiles 1 9; taskset -c 2,3 /tmp/x86_1x1_tiles 2 15
// docs/performance.md "Paired 1x1 tiles" has the figures.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef float v16 __attribute__((vector_size(64)));
typedef v16 uv16 __attribute__((aligned(4)));
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
typedef struct { const float *in, *w2, *w4, *b; float *out; int IC, HW, OC; } layer;
#define AI __attribute__((always_inline)) static inline
enum { C = 0, EMB = 1, MEM3 = 2 };
AI void tile(const layer *L, int ocb, int p0, const int P, const int V, const int mode) {
  v16 acc[14][4];
  const float *w = (V == 4 ? L->w4 : L->w2) + (size_t)ocb * L->IC * 16 * V;
#pragma GCC unroll 14
  for (int p = 0; p < P; p++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) acc[p][v] = (v16){0};
  for (int ico = 0; ico < L->IC / 32; ico++) {
    const float *x = L->in + ((size_t)ico * L->HW + p0) * 32;
    for (int ici = 0; ici < 32; ici++) {
      const float *wk = w + ((size_t)ico * 32 + ici) * 16 * V;
      if (mode == C) {
#pragma GCC unroll 14
        for (int p = 0; p < P; p++)
#pragma GCC unroll 4
          for (int v = 0; v < V; v++) acc[p][v] += x[p * 32 + ici] * *(const uv16 *)(wk + 16 * v);
      } else if (mode == EMB) {
        v16 k[4];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) k[v] = *(const uv16 *)(wk + 16 * v);
#pragma GCC unroll 14
        for (int p = 0; p < P; p++)
#pragma GCC unroll 4
          for (int v = 0; v < V; v++)
            __asm__("vfmadd231ps %1%{1to16%}, %2, %0" : "+v"(acc[p][v]) : "m"(x[p * 32 + ici]), "v"(k[v]));
      } else {
        v16 k[3];
#pragma GCC unroll 3
        for (int v = 0; v < V - 1; v++) k[v] = *(const uv16 *)(wk + 16 * v);
#pragma GCC unroll 14
        for (int p = 0; p < P; p++) {
          v16 b = x[p * 32 + ici] - (v16){0};
#pragma GCC unroll 3
          for (int v = 0; v < V - 1; v++) acc[p][v] += b * k[v];
          __asm__("vfmadd231ps %1, %2, %0" : "+v"(acc[p][V - 1]) : "m"(*(const uv16 *)(wk + 16 * (V - 1))), "v"(b));
        }
      }
    }
  }
  float *o = L->out + ((size_t)ocb * L->HW + p0) * 16 * V;
  const float *b = L->b + ocb * 16 * V;
#pragma GCC unroll 14
  for (int p = 0; p < P; p++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      v16 r = acc[p][v] + *(const uv16 *)(b + 16 * v);
      r = __builtin_ia32_maxps512_mask(r, (v16){0}, r, -1, 4);
      *(uv16 *)(o + p * 16 * V + 16 * v) = r;
    }
}
// positions [p0, p0 + n) with n < P: one smaller tile
AI void tail(const layer *L, int ocb, int p0, int n, const int V) {
  for (; n > 7; n -= 7, p0 += 7) tile(L, ocb, p0, 7, V, C);
  switch (n) {
  case 7: tile(L, ocb, p0, 7, V, C); break;
  case 1: tile(L, ocb, p0, 1, V, C); break;
  case 2: tile(L, ocb, p0, 2, V, C); break;
  case 3: tile(L, ocb, p0, 3, V, C); break;
  case 4: tile(L, ocb, p0, 4, V, C); break;
  case 5: tile(L, ocb, p0, 5, V, C); break;
  case 6: tile(L, ocb, p0, 6, V, C); break;
  default: break;
  }
}
typedef void (*task_fn)(const layer *, int ocb, int t);
#define DEF(name, P, V, mode) static void name(const layer *L, int ocb, int t) { \
  int p0 = t * P; if (p0 + P <= L->HW) tile(L, ocb, p0, P, V, mode); else tail(L, ocb, p0, L->HW - p0, V); }
DEF(c14x2, 14, 2, C) DEF(e14x2, 14, 2, EMB) DEF(c7x2, 7, 2, C) DEF(c7x4, 7, 4, C) DEF(m7x4, 7, 4, MEM3)
DEF(c6x4, 6, 4, C) DEF(e7x4, 7, 4, EMB)
static struct { const char *name; task_fn f; int P, V; } K[] = {
  {"c14x2", c14x2, 14, 2}, {"e14x2", e14x2, 14, 2}, {"c7x2", c7x2, 7, 2}, {"c7x4", c7x4, 7, 4},
  {"m7x4", m7x4, 7, 4}, {"e7x4", e7x4, 7, 4}, {"c6x4", c6x4, 6, 4}};
#define NK (int)(sizeof K / sizeof K[0])
typedef struct { const layer *L; task_fn f; int ntile, lo, hi; } job;
static void run_job(job *j) { for (int i = j->lo; i < j->hi; i++) j->f(j->L, i / j->ntile, i % j->ntile); }
// a persistent second thread spinning on a generation counter
static volatile int gen, done;
static job jobs[2];
static void *worker(void *a) {
  (void)a;
  int seen = 0;
  for (;;) {
    while (__atomic_load_n(&gen, __ATOMIC_ACQUIRE) == seen) __builtin_ia32_pause();
    seen = gen;
    if (seen < 0) return NULL;
    run_job(&jobs[1]);
    __atomic_store_n(&done, seen, __ATOMIC_RELEASE);
  }
}
static int nthr;
static double run_layer(const layer *L, int k) {
  int V = K[k].V, P = K[k].P, ntile = (L->HW + P - 1) / P, n = (L->OC / (16 * V)) * ntile;
  for (int t = 0; t < nthr; t++) jobs[t] = (job){L, K[k].f, ntile, n * t / nthr, n * (t + 1) / nthr};
  double t0 = now();
  int g = gen + 1;
  if (nthr > 1) __atomic_store_n(&gen, g, __ATOMIC_RELEASE);
  run_job(&jobs[0]);
  if (nthr > 1) while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != g) __builtin_ia32_pause();
  return now() - t0;
}
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
  nthr = argc > 1 ? atoi(argv[1]) : 1;
  int rounds = argc > 2 ? atoi(argv[2]) : 20, reps = 5;
  pthread_t th;
  if (nthr > 1) pthread_create(&th, NULL, worker, NULL);
  printf("%d thread(s); GFLOPS, median over %d rounds of the best of %d\n", nthr, rounds, reps);
  int shapes[][3] = {{512, 512, 196}, {1024, 1024, 49}, {256, 256, 784}, {128, 128, 3136}, {512, 1024, 49}, {256, 512, 196}, {64, 128, 3136}};
  for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++) {
    int IC = shapes[s][0], OC = shapes[s][1], HW = shapes[s][2];
    float *in = aligned_alloc(64, sizeof(float) * IC * HW), *w = malloc(sizeof(float) * IC * OC),
          *w2 = aligned_alloc(64, sizeof(float) * IC * OC), *w4 = aligned_alloc(64, sizeof(float) * IC * OC),
          *b = aligned_alloc(64, sizeof(float) * OC), *out = aligned_alloc(64, sizeof(float) * OC * HW), *ref = malloc(sizeof(float) * OC * HW);
    for (int i = 0; i < IC * HW; i++) in[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < IC * OC; i++) w[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < OC; i++) b[i] = 0.1f;
    for (int o = 0; o < OC; o++) for (int i = 0; i < IC; i++) {
      w2[((size_t)(o / 32) * IC + i) * 32 + o % 32] = w[(size_t)i * OC + o];
      w4[((size_t)(o / 64) * IC + i) * 64 + o % 64] = w[(size_t)i * OC + o];
    }
    layer L = {in, w2, w4, b, out, IC, HW, OC};
    double fl = 2.0 * IC * OC * HW, t[NK][100];
    for (int r = 0; r < rounds; r++)
      for (int kk = 0; kk < NK; kk++) {
        int k = (kk + r) % NK;
        double best = 1e9;
        for (int q = 0; q < reps; q++) { double x = run_layer(&L, k); if (x < best) best = x; }
        t[k][r] = best;
      }
    printf("%4d->%4d @%4d:", IC, OC, HW);
    for (int k = 0; k < NK; k++) {
      run_layer(&L, k);
      int OB = 16 * K[k].V;
      double err = 0;
      for (int o = 0; o < OC; o++) for (int p = 0; p < HW; p++) {
        float v = out[((size_t)(o / OB) * HW + p) * OB + o % OB];
        if (k == 0) ref[(size_t)o * HW + p] = v;
        else { double d = v - ref[(size_t)o * HW + p]; if (d < 0) d = -d; if (d > err) err = d; }
      }
      qsort(t[k], rounds, sizeof(double), cmpd);
      printf(" %s %.0f%s", K[k].name, fl / t[k][rounds / 2] / 1e9, err > 1e-3 ? "(BAD)" : "");
    }
    printf("\n");
    free(in); free(w); free(w2); free(w4); free(b); free(out); free(ref);
  }
  if (nthr > 1) __atomic_store_n(&gen, -1, __ATOMIC_RELEASE);
  return 0;
}
