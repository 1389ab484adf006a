/* The build layer's toolchain description and compiler driver (core/build/cc.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build/build.h"
#include "tl_test.h"

TL_TEST(build_toolchain_defaults) {
  tl_toolchain cross = {"gcc", "-O2", "aarch64-linux-gnu-"};
  char *cc = tl_toolchain_cc(&cross);
  CHECK_STREQ(cc, "aarch64-linux-gnu-gcc");
  free(cc);
  tl_toolchain pre = {NULL, NULL, "aarch64-linux-gnu-"};
  cc = tl_toolchain_cc(&pre);
  CHECK_STREQ(cc, "aarch64-linux-gnu-gcc");
  free(cc);
  CHECK_STREQ(tl_toolchain_cflags(NULL), "-O3 -march=native");
  CHECK_STREQ(tl_toolchain_cflags(&cross), "-O2");
}

TL_TEST(build_driver_reports_the_compiler) {
  tl_ctx *ctx = tl_ctx_new();
  char dir[] = "/tmp/tl_build_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char so[256];
  snprintf(so, sizeof so, "%s/t.so", dir);
  tl_toolchain tc = {NULL, "-O1", NULL};
  CHECK_EQ_INT(tl_cc_source(ctx, &tc, "int f(void) { return 1; }\n", so, 60, NULL), TL_OK);
  CHECK(access(so, R_OK) == 0);
  unlink(so);
  CHECK_EQ_INT(tl_cc_source(ctx, &tc, "int f(void) { return nope_xyz; }\n", so, 60, NULL),
               TL_E_BUILD);
  CHECK_MSG(strstr(tl_errmsg(ctx), "nope_xyz") != NULL, "%s", tl_errmsg(ctx));
  CHECK(access(so, F_OK) != 0);    /* nothing left behind */
  rmdir(dir);
  tl_ctx_free(ctx);
}
