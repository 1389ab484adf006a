/*
** workspace.c -- per-thread scratch memory for the intermediate buffers of generated kernels.
**
** A generated CPU kernel allocates each intermediate buffer too large for its stack (a cache-
** write tile, a padded input, Winograd's transformed tiles) on every call, in the thread that
** runs the loop body, and frees it before the body returns (core/codegen/c.c: tlc_alloc,
** tlc_free). From malloc, a network paid for that in every step: each kernel got fresh
** addresses (cold in the caches and the TLB), and memory glibc had trimmed or unmapped was
** page-faulted in again. mobilenet's 14x14x512 depthwise step, 0.010 ms when timed alone,
** ran 0.020 ms between its neighbours; the whole network 3.27 ms against the 2.47 its
** steps take back to back.
**
** Here each thread keeps one arena and hands out its memory as a stack: an allocation takes
** the next 64-byte aligned bytes, and tl_workspace_pop frees the thread's latest live block
** (the kernels free in reverse order of allocation: every buffer is scoped). So every
** kernel's buffers come from the same few addresses of its thread, warm from the step
** before, and the memory stays mapped. The pop takes no pointer: a pointer handed to an
** unknown function escapes, and the compiler then keeps a kernel's accumulators in memory
** instead of registers (a 1x1 conv of 14x14x512: 0.20 -> 0.67 ms).
**
**   - A request that does not fit while blocks are live comes from malloc, and the arena
**     grows to the high-water mark the next time its thread's stack is empty.
**   - A request above TL_WORKSPACE_MAX comes from malloc and is never kept.
**   - A thread's arena is freed when the thread exits (the pool's workers when the pool is
**     freed or resized); the main thread's lives as long as the process.
**
** tl_workspace_pop must run in the thread that allocated (generated kernels always do).
** Kernels find these functions through weak references, and fall back to aligned_alloc and
** free in a process without them (a kernel loaded by another program).
*/
#define _GNU_SOURCE
#include "base.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define WS_ALIGN 64
#define TL_WORKSPACE_MAX ((size_t)64 << 20)   /* bytes: larger requests are not kept */

typedef struct {
  void *heap;     /* a block from malloc, or NULL: the arena's bytes from off */
  size_t off;
  size_t bytes;
} ws_block;

typedef struct {
  unsigned char *base;
  size_t cap;       /* bytes in the arena */
  size_t top;       /* bytes in use (the stack's height) */
  size_t live;      /* bytes of the live blocks, the arena's and the heap's */
  size_t want;      /* the high-water mark of live when a request did not fit */
  ws_block *blocks; /* the live blocks, oldest first */
  int nblocks, maxblocks;
} ws_arena;

static _Thread_local ws_arena *tls_ws;
static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static int ws_key_ok;

static void ws_release(void *p) {
  ws_arena *w = p;
  for (int i = 0; i < w->nblocks; i++) free(w->blocks[i].heap);
  free(w->blocks);
  free(w->base);
  free(w);
}

static void ws_init(void) { ws_key_ok = pthread_key_create(&ws_key, ws_release) == 0; }

static ws_arena *ws_get(void) {
  if (tls_ws) return tls_ws;
  pthread_once(&ws_once, ws_init);
  ws_arena *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  if (ws_key_ok) pthread_setspecific(ws_key, w);
  tls_ws = w;
  return w;
}

static int push(ws_arena *w, void *heap, size_t off, size_t bytes) {
  if (w->nblocks == w->maxblocks) {
    int n = w->maxblocks ? 2 * w->maxblocks : 8;
    ws_block *v = realloc(w->blocks, (size_t)n * sizeof *v);
    if (!v) return -1;
    w->blocks = v;
    w->maxblocks = n;
  }
  w->blocks[w->nblocks++] = (ws_block){heap, off, bytes};
  w->live += bytes;
  return 0;
}

static void *heap_block(ws_arena *w, size_t bytes) {
  void *p = aligned_alloc(WS_ALIGN, bytes);
  if (p && push(w, p, 0, bytes)) {
    free(p);
    return NULL;
  }
  return p;
}

TL_EXPORT void *tl_workspace_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - WS_ALIGN) return NULL;
  size_t need = bytes ? (bytes + WS_ALIGN - 1) & ~(size_t)(WS_ALIGN - 1) : WS_ALIGN;
  ws_arena *w = ws_get();
  if (!w) return NULL;
  if (need > TL_WORKSPACE_MAX) return heap_block(w, need);
  if (w->top == 0 && (need > w->cap || w->want > w->cap)) {
    /* empty: grow to what this and earlier calls asked for, at least doubling */
    size_t cap = need > w->want ? need : w->want;
    if (cap < 2 * w->cap && 2 * w->cap <= TL_WORKSPACE_MAX) cap = 2 * w->cap;
    unsigned char *b = aligned_alloc(WS_ALIGN, cap);
    if (b) {
      free(w->base);
      w->base = b;
      w->cap = cap;
      w->want = 0;
    }
  }
  if (w->base && w->cap - w->top >= need) {
    if (push(w, NULL, w->top, need)) return NULL;
    void *p = w->base + w->top;
    w->top += need;
    return p;
  }
  if (w->live + need <= TL_WORKSPACE_MAX && w->live + need > w->want) w->want = w->live + need;
  return heap_block(w, need);
}

TL_EXPORT void tl_workspace_pop(void) {
  ws_arena *w = tls_ws;
  if (!w || w->nblocks == 0) return;
  ws_block b = w->blocks[--w->nblocks];
  w->live -= b.bytes;
  if (b.heap) free(b.heap);
  else w->top = b.off;
}

TL_EXPORT size_t tl_workspace_held(void) {
  ws_arena *w = tls_ws;
  return w ? w->cap : 0;
}
