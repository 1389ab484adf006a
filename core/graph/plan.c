/*
** plan.c -- the graph executor's memory plan: offsets of intermediate
** buffers in one arena, sharing bytes between buffers whose lifetimes do not
** overlap.
**
** Greedy by size: buffers are placed largest first (ties: earlier first use,
** then index, so the plan is deterministic); each goes to the lowest offset
** at which it does not intersect any already placed buffer whose lifetime
** overlaps its own. Lifetimes are inclusive step ranges, so a step's output
** never shares bytes with that step's inputs.
*/
#include "../base/base.h"
#include "../tunelua.h"

typedef struct {
  int64_t size, off;
  int first, last, idx;
} pbuf;

static int by_size(const void *a, const void *b) {
  const pbuf *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int by_off(const void *a, const void *b) {
  const pbuf *x = *(const pbuf *const *)a, *y = *(const pbuf *const *)b;
  if (x->off != y->off) return x->off < y->off ? -1 : 1;
  return 0;
}

/* The n buffers of a plan, checked (align a power of two, sizes >= 0, first <= last), sizes
** rounded up to align (at least align with min_one: every storage slot is a real buffer);
** who names the caller in errors. *out is malloc'd. */
static int load_bufs(tl_ctx *ctx, const char *who, int n, const int64_t *sizes, const int *first,
                     const int *last, int64_t align, int min_one, pbuf **out) {
  *out = NULL;
  if (align < 1 || (align & (align - 1)))
    return tl_err(ctx, TL_E_ARG, "%s: align must be a power of two, got %lld", who,
                  (long long)align);
  pbuf *b = tl_malloc(sizeof *b * (size_t)n);
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0 || first[i] > last[i]) {
      free(b);
      return tl_err(ctx, TL_E_ARG, "%s: buffer %d: size %lld, lifetime [%d, %d] is invalid", who,
                    i, (long long)sizes[i], first[i], last[i]);
    }
    b[i].size = (sizes[i] + align - 1) & ~(align - 1);
    if (min_one && b[i].size == 0) b[i].size = align;
    b[i].first = first[i];
    b[i].last = last[i];
    b[i].idx = i;
    b[i].off = -1;
  }
  *out = b;
  return TL_OK;
}

TL_EXPORT int tl_graph_plan(tl_ctx *ctx, int n, const int64_t *sizes, const int *first,
                            const int *last, int64_t align, int64_t *offsets, int64_t *total) {
  if (!total) return tl_err(ctx, TL_E_ARG, "tl_graph_plan: total is NULL");
  *total = 0;
  if (n < 0) return tl_err(ctx, TL_E_ARG, "tl_graph_plan: negative buffer count %d", n);
  if (n == 0) return TL_OK;
  if (!sizes || !first || !last || !offsets)
    return tl_err(ctx, TL_E_ARG, "tl_graph_plan: NULL array argument");
  pbuf *b;
  int rc = load_bufs(ctx, "tl_graph_plan", n, sizes, first, last, align, 0, &b);
  if (rc) return rc;
  qsort(b, (size_t)n, sizeof *b, by_size);
  pbuf **live = tl_malloc(sizeof *live * (size_t)n);
  int64_t top = 0;
  for (int i = 0; i < n; i++) {
    int nl = 0;
    for (int j = 0; j < i; j++)
      if (b[j].first <= b[i].last && b[i].first <= b[j].last) live[nl++] = &b[j];
    qsort(live, (size_t)nl, sizeof *live, by_off);
    int64_t off = 0;
    for (int j = 0; j < nl; j++) {
      if (live[j]->off >= off + b[i].size) break;   /* fits in the gap before it */
      int64_t end = live[j]->off + live[j]->size;
      if (end > off) off = end;
    }
    b[i].off = off;
    if (off + b[i].size > top) top = off + b[i].size;
  }
  for (int i = 0; i < n; i++) offsets[b[i].idx] = b[i].off;
  *total = top;
  free(live);
  free(b);
  return TL_OK;
}

/* ---- storage slots --------------------------------------------------------
** For devices whose buffers cannot be sub-allocated at byte offsets (OpenCL
** arguments are whole cl_mem objects): every buffer is assigned a storage
** slot, one device buffer each. Buffers are visited in order of first use
** (ties: index); a slot is free for buffer i when every buffer it held so far
** ended before i's first step. Among the free slots the smallest one that
** is large enough is taken, else the largest free one (which grows), else a
** new slot. Slot sizes are the largest (aligned) size they hold. */
static int by_first(const void *a, const void *b) {
  const pbuf *x = a, *y = b;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

TL_EXPORT int tl_graph_plan_storage(tl_ctx *ctx, int n, const int64_t *sizes, const int *first,
                                    const int *last, int64_t align, int *storage,
                                    int64_t *storage_bytes, int *nstorage) {
  if (!nstorage) return tl_err(ctx, TL_E_ARG, "tl_graph_plan_storage: nstorage is NULL");
  *nstorage = 0;
  if (n < 0) return tl_err(ctx, TL_E_ARG, "tl_graph_plan_storage: negative buffer count %d", n);
  if (n == 0) return TL_OK;
  if (!sizes || !first || !last || !storage || !storage_bytes)
    return tl_err(ctx, TL_E_ARG, "tl_graph_plan_storage: NULL array argument");
  pbuf *b;
  int rc = load_bufs(ctx, "tl_graph_plan_storage", n, sizes, first, last, align, 1, &b);
  if (rc) return rc;
  qsort(b, (size_t)n, sizeof *b, by_first);
  int *busy = tl_malloc(sizeof(int) * (size_t)n);   /* last step of each slot's holders */
  int ns = 0;
  for (int i = 0; i < n; i++) {
    int best = -1, big = -1;
    for (int s = 0; s < ns; s++) {
      if (busy[s] >= b[i].first) continue;
      if (storage_bytes[s] >= b[i].size) {
        if (best < 0 || storage_bytes[s] < storage_bytes[best]) best = s;
      } else if (big < 0 || storage_bytes[s] > storage_bytes[big]) {
        big = s;
      }
    }
    if (best < 0) best = big;
    if (best < 0) {
      best = ns++;
      storage_bytes[best] = 0;
      busy[best] = -1;
    }
    if (storage_bytes[best] < b[i].size) storage_bytes[best] = b[i].size;
    if (busy[best] < b[i].last) busy[best] = b[i].last;
    storage[b[i].idx] = best;
  }
  *nstorage = ns;
  free(busy);
  free(b);
  return TL_OK;
}
