/*
** Unit tests for core/base/workspace.c: blocks are 64-byte aligned, disjoint and writable;
** a pop frees the latest block; the arena grows to the high-water mark once its thread's
** stack is empty, after which the same calls get the same addresses and no heap block; each
** thread has its own arena; requests too large to keep, or impossible, are handled.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tl_test.h"

void *tl_workspace_alloc(size_t bytes);
void tl_workspace_pop(void);
size_t tl_workspace_held(void);

static const size_t sizes[] = {100, 1000, 5000, 64, 0, 70000};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

/* One kernel call's worth: allocate every size (writing a pattern), check the patterns,
** pop them all. Returns 0 on success, the failing step otherwise; the addresses in got. */
static int one_round(void **got, unsigned char tag) {
  for (int i = 0; i < NSIZES; i++) {
    got[i] = tl_workspace_alloc(sizes[i]);
    if (!got[i]) return 1;
    if ((uintptr_t)got[i] % 64) return 2;
    memset(got[i], tag + i, sizes[i] ? sizes[i] : 1);
  }
  for (int i = 0; i < NSIZES; i++) {
    const unsigned char *p = got[i];
    size_t n = sizes[i] ? sizes[i] : 1;
    for (size_t k = 0; k < n; k++)
      if (p[k] != (unsigned char)(tag + i)) return 3;
  }
  for (int i = 0; i < NSIZES; i++) tl_workspace_pop();
  return 0;
}

TL_TEST(workspace_blocks_reused) {
  void *a[NSIZES], *b[NSIZES], *c[NSIZES];
  CHECK_EQ_INT(one_round(a, 1), 0);     /* the first may take heap blocks: the arena is small */
  size_t held1 = tl_workspace_held();
  CHECK_EQ_INT(one_round(b, 2), 0);     /* the arena grew to the high-water mark when empty */
  size_t held2 = tl_workspace_held();
  CHECK_EQ_INT(one_round(c, 3), 0);
  size_t need = 0;
  for (int i = 0; i < NSIZES; i++) need += sizes[i] ? (sizes[i] + 63) / 64 * 64 : 64;
  CHECK(held1 > 0);
  CHECK_MSG(held2 >= need, "held %zu bytes, the round needs %zu", held2, need);
  CHECK(tl_workspace_held() == held2);  /* steady: no further growth */
  for (int i = 0; i < NSIZES; i++) {
    CHECK_MSG(b[i] == c[i], "block %d moved between calls: %p then %p", i, b[i], c[i]);
    for (int j = 0; j < i; j++)           /* stacked in order, disjoint */
      CHECK((char *)b[j] < (char *)b[i]);
  }
}

TL_TEST(workspace_pop_frees_latest) {
  void *x = tl_workspace_alloc(256);
  void *y = tl_workspace_alloc(256);
  CHECK(x && y && x != y);
  tl_workspace_pop();                   /* y */
  void *z = tl_workspace_alloc(256);
  CHECK(z == y);                        /* y's bytes again; x still live below it */
  memset(z, 7, 256);
  tl_workspace_pop();
  tl_workspace_pop();
  tl_workspace_pop();                   /* nothing live: ignored */
  void *w = tl_workspace_alloc(256);
  CHECK(w == x);
  tl_workspace_pop();
}

TL_TEST(workspace_large_and_impossible) {
  size_t before = tl_workspace_held();
  size_t big = ((size_t)64 << 20) + 1;  /* above what an arena keeps */
  unsigned char *p = tl_workspace_alloc(big);
  CHECK(p != NULL && (uintptr_t)p % 64 == 0);
  p[0] = 1;
  p[big - 1] = 2;
  tl_workspace_pop();
  CHECK(tl_workspace_held() == before);
  CHECK(tl_workspace_alloc(SIZE_MAX) == NULL);
  CHECK(tl_workspace_alloc(SIZE_MAX - 10) == NULL);
}

typedef struct {
  void *addr[NSIZES];
  int rc;
  size_t held_before;
  pthread_barrier_t *both_done;   /* the arenas live until both threads have their addresses */
} thread_run;

static void *thread_rounds(void *arg) {
  thread_run *r = arg;
  r->held_before = tl_workspace_held();
  for (int k = 0; k < 50 && !r->rc; k++) r->rc = one_round(r->addr, (unsigned char)(10 * k));
  pthread_barrier_wait(r->both_done);
  return NULL;
}

TL_TEST(workspace_per_thread) {
  void *mine[NSIZES];
  CHECK_EQ_INT(one_round(mine, 5), 0);
  thread_run r[2];
  memset(r, 0, sizeof r);
  pthread_barrier_t done;
  CHECK(pthread_barrier_init(&done, NULL, 2) == 0);
  r[0].both_done = r[1].both_done = &done;
  pthread_t t[2];
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, thread_rounds, &r[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&done);
  for (int i = 0; i < 2; i++) {
    CHECK_EQ_INT(r[i].rc, 0);            /* no thread saw another's pattern */
    CHECK(r[i].held_before == 0);        /* a new thread starts with an empty arena */
  }
  for (int i = 0; i < NSIZES; i++) {
    CHECK(r[0].addr[i] != r[1].addr[i]);
    CHECK(r[0].addr[i] != mine[i]);
  }
}
