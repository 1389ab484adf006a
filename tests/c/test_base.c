/* Unit tests for core/base: context errors, arenas, buffers, hashing, files. */
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "tl_test.h"

TL_TEST(base_ctx_error) {
  tl_ctx *ctx = tl_ctx_new();
  CHECK_EQ_INT(tl_errcode(ctx), TL_OK);
  CHECK_STREQ(tl_errmsg(ctx), "");
  CHECK_EQ_INT(tl_err(ctx, TL_E_SHAPE, "bad shape %d", 3), TL_E_SHAPE);
  CHECK_STREQ(tl_errmsg(ctx), "bad shape 3");
  tl_err_prefix(ctx, "conv2d: ");
  CHECK_STREQ(tl_errmsg(ctx), "conv2d: bad shape 3");
  tl_clearerr(ctx);
  CHECK_EQ_INT(tl_errcode(ctx), TL_OK);
  tl_ctx_free(ctx);
}

TL_TEST(base_arena) {
  tl_arena a;
  tl_arena_init(&a);
  char *prev = NULL;
  for (int i = 0; i < 10000; i++) {
    char *p = tl_arena_alloc(&a, (size_t)(i % 97) + 1);
    CHECK(((uintptr_t)p & 15) == 0);
    CHECK(p[0] == 0);
    memset(p, 0xab, (size_t)(i % 97) + 1);
    CHECK(p != prev);
    prev = p;
  }
  char *big = tl_arena_alloc(&a, 1 << 20);
  big[(1 << 20) - 1] = 1;
  CHECK_STREQ(tl_arena_strdup(&a, "hello"), "hello");
  tl_arena_free(&a);
  CHECK(a.head == NULL);
}

TL_TEST(base_buf_and_vec) {
  tl_buf b = {0};
  for (int i = 0; i < 1000; i++) tl_buf_printf(&b, "%d,", i);
  CHECK(b.n > 3000);
  CHECK(strncmp(b.s, "0,1,2,", 6) == 0);
  char *s = tl_buf_take(&b);
  CHECK(b.s == NULL);
  free(s);
  TL_VEC(int) v = {0};
  for (int i = 0; i < 100; i++) TL_VEC_PUSH(v, i * i);
  CHECK_EQ_INT(v.n, 100);
  CHECK_EQ_INT(v.v[99], 9801);
  TL_VEC_FREE(v);
}

TL_TEST(base_hash) {
  CHECK(tl_hash_bytes("abc", 3, 0) == tl_hash_bytes("abc", 3, 0));
  CHECK(tl_hash_bytes("abc", 3, 0) != tl_hash_bytes("abd", 3, 0));
  CHECK(tl_hash_bytes("abc", 3, 0) != tl_hash_bytes("abc", 3, 1));
}

TL_TEST(base_files) {
  tl_ctx *ctx = tl_ctx_new();
  char dir[] = "/tmp/tl_test_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char *sub = tl_sprintf("%s/a/b/c", dir);
  CHECK_EQ_INT(tl_mkdirs(ctx, sub), TL_OK);
  char *path = tl_sprintf("%s/f.txt", sub);
  CHECK_EQ_INT(tl_write_file_atomic(ctx, path, "data\n", 5), TL_OK);
  char *got;
  size_t n;
  CHECK_EQ_INT(tl_read_file(ctx, path, &got, &n), TL_OK);
  CHECK_EQ_INT(n, 5);
  CHECK_STREQ(got, "data\n");
  free(got);
  CHECK_EQ_INT(tl_read_file(ctx, "/nonexistent/x", &got, &n), TL_E_IO);
  CHECK(strstr(tl_errmsg(ctx), "/nonexistent/x") != NULL);
  unlink(path);
  free(path);
  /* the directories made above, innermost first, so nothing stays in /tmp */
  for (int up = 0; up < 3; up++) {
    CHECK(rmdir(sub) == 0);
    *strrchr(sub, '/') = '\0';
  }
  CHECK(rmdir(dir) == 0);
  free(sub);
  tl_ctx_free(ctx);
}
