/*
** base.c -- context and errors, checked allocation, arenas, string buffers,
** hashing and small file helpers. Everything else in libtunelua builds on it.
*/
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef TL_VERSION_STRING
#define TL_VERSION_STRING "0.0.0"
#endif

/* ---- context -------------------------------------------------------------- */

TL_EXPORT tl_ctx *tl_ctx_new(void) { return tl_calloc(1, sizeof(tl_ctx)); }
TL_EXPORT void tl_ctx_free(tl_ctx *ctx) { free(ctx); }
TL_EXPORT const char *tl_errmsg(const tl_ctx *ctx) { return ctx ? ctx->msg : ""; }
TL_EXPORT int tl_errcode(const tl_ctx *ctx) { return ctx ? ctx->code : TL_OK; }
TL_EXPORT void tl_clearerr(tl_ctx *ctx) {
  if (ctx) { ctx->code = TL_OK; ctx->msg[0] = 0; }
}
TL_EXPORT const char *tl_version(void) { return TL_VERSION_STRING; }

TL_EXPORT int tl_num_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

TL_EXPORT double tl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int tl_verr(tl_ctx *ctx, int code, const char *fmt, va_list ap) {
  if (ctx) {
    ctx->code = code;
    vsnprintf(ctx->msg, sizeof ctx->msg, fmt, ap);
  }
  return code;
}

int tl_err(tl_ctx *ctx, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tl_verr(ctx, code, fmt, ap);
  va_end(ap);
  return code;
}

int tl_err_prefix(tl_ctx *ctx, const char *fmt, ...) {
  char pre[TL_ERRMSG_MAX];
  va_list ap;
  if (!ctx) return TL_E_INTERNAL;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  size_t lp = strlen(pre), lm = strlen(ctx->msg);
  if (lp >= TL_ERRMSG_MAX - 1) lp = TL_ERRMSG_MAX - 1;
  if (lp + lm >= TL_ERRMSG_MAX) lm = TL_ERRMSG_MAX - 1 - lp;  /* keep the prefix whole */
  memmove(ctx->msg + lp, ctx->msg, lm);
  memcpy(ctx->msg, pre, lp);
  ctx->msg[lp + lm] = 0;
  return ctx->code;
}

void tl_assert_fail(const char *what, const char *file, int line) {
  fprintf(stderr, "tunelua: internal error: assertion '%s' failed at %s:%d\n", what, file, line);
  abort();
}

/* ---- allocation -------------------------------------------------------------- */

static void oom(size_t n) {
  fprintf(stderr, "tunelua: out of memory allocating %zu bytes\n", n);
  abort();
}

void *tl_malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom(n);
  return p;
}

void *tl_calloc(size_t n, size_t sz) {
  void *p = calloc(n ? n : 1, sz ? sz : 1);
  if (!p) oom(n * sz);
  return p;
}

void *tl_realloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) oom(n);
  return q;
}

char *tl_strdup(const char *s) { return tl_strndup(s, strlen(s)); }

char *tl_strndup(const char *s, size_t n) {
  char *d = tl_malloc(n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *tl_sprintf(const char *fmt, ...) {
  tl_buf b = {0};
  va_list ap;
  va_start(ap, fmt);
  tl_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  return tl_buf_take(&b);
}

/* ---- arena ---------------------------------------------------------------------
**
**   head -> [chunk: next | size | data .......used|free]
**             -> [older chunk] -> ...
*/
struct tl_arena_chunk {
  tl_arena_chunk *next;
  size_t size;                 /* bytes of data */
  _Alignas(16) unsigned char data[];
};

#define ARENA_CHUNK 65536

void tl_arena_init(tl_arena *a) { memset(a, 0, sizeof *a); }

void *tl_arena_alloc(tl_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (!a->head || a->used + n > a->head->size) {
    size_t sz = n > ARENA_CHUNK / 4 ? n : ARENA_CHUNK;
    tl_arena_chunk *c = tl_malloc(sizeof *c + sz);
    c->size = sz;
    if (a->head && sz == n) {  /* big block: keep filling the current chunk */
      c->next = a->head->next;
      a->head->next = c;
      memset(c->data, 0, n);
      a->total += n;
      return c->data;
    }
    c->next = a->head;
    a->head = c;
    a->used = 0;
  }
  void *p = a->head->data + a->used;
  a->used += n;
  a->total += n;
  memset(p, 0, n);
  return p;
}

char *tl_arena_strdup(tl_arena *a, const char *s) {
  size_t n = strlen(s);
  char *d = tl_arena_alloc(a, n + 1);
  memcpy(d, s, n + 1);
  return d;
}

void tl_arena_free(tl_arena *a) {
  tl_arena_chunk *c = a->head;
  while (c) {
    tl_arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  tl_arena_init(a);
}

/* ---- string buffer ------------------------------------------------------------ */

static void buf_grow(tl_buf *b, size_t extra) {
  if (b->n + extra + 1 > b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 64;
    while (nc < b->n + extra + 1) nc *= 2;
    b->s = tl_realloc(b->s, nc);
    b->cap = nc;
  }
}

void tl_buf_putn(tl_buf *b, const char *s, size_t n) {
  buf_grow(b, n);
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = 0;
}

void tl_buf_puts(tl_buf *b, const char *s) { tl_buf_putn(b, s, strlen(s)); }

void tl_buf_vprintf(tl_buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return;
  buf_grow(b, (size_t)n);
  vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap);
  b->n += (size_t)n;
}

void tl_buf_printf(tl_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tl_buf_vprintf(b, fmt, ap);
  va_end(ap);
}

void tl_buf_free(tl_buf *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

char *tl_buf_take(tl_buf *b) {
  char *s = b->s ? b->s : tl_strdup("");
  memset(b, 0, sizeof *b);
  return s;
}

/* ---- hashing (FNV-1a over 8-byte words, then mixed) ------------------------- */

uint64_t tl_hash_bytes(const void *p, size_t n, uint64_t seed) {
  const unsigned char *s = p;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 0x100000001b3ull;
  }
  return tl_hash_mix(h, n);
}

/* ---- small helpers shared with the device programs --------------------------- */

int tl_c_ident(const char *s, size_t max) {
  if (!s || !*s || strlen(s) > max) return 0;
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return 0;
  return 1;
}

void tl_alarm_in(double s) {
  struct itimerval v;
  memset(&v, 0, sizeof v);
  if (s > 0) {
    v.it_value.tv_sec = (time_t)s;
    v.it_value.tv_usec = (suseconds_t)((s - (double)(time_t)s) * 1e6);
    if (!v.it_value.tv_sec && !v.it_value.tv_usec) v.it_value.tv_usec = 1;
  }
  setitimer(ITIMER_REAL, &v, NULL);
}
