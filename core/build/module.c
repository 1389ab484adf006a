/*
** module.c -- C modules: a lowered function -> C source (codegen/c.c) ->
** shared object (the driver, cc.c) -> tl_module (runtime/module.c).
**
** Objects are cached under a 128-bit hash of (compiler, flags, source) in the
** kernel cache directory (cc.c): k<hash>.so next to k<hash>.c (the source, for
** reading and disassembly). Every build writes to names unique to the
** process and call and renames the finished object into place, so parallel
** builds of one kernel in several processes or threads never see a partial
** file; the last rename wins with identical content. A cached object that
** fails to load is rebuilt.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "build.h"

int tl_build_c_source(tl_ctx *ctx, const tl_toolchain *tcp, const char *source, double timeout_s,
                      tl_module **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_module_from_c: out is NULL");
  *out = NULL;
  if (!source) return tl_err(ctx, TL_E_ARG, "tl_module_from_c: source is NULL");
  tl_toolchain tc = tl_toolchain_with_flags(tcp, NULL);
  const char *flags = tl_toolchain_cflags(&tc);
  char *cc = tl_toolchain_cc(&tc);
  size_t slen = strlen(source);

  uint64_t h[2];
  for (int i = 0; i < 2; i++) {
    uint64_t x = tl_hash_bytes(source, slen, 0x74756e65ull + (uint64_t)i * 0x9e37);
    x = tl_hash_mix(x, tl_hash_bytes(flags, strlen(flags), 0x666c6167ull + (uint64_t)i));
    x = tl_hash_mix(x, tl_hash_bytes(cc, strlen(cc), 0x63630000ull + (uint64_t)i));
    h[i] = x;
  }
  free(cc);
  char *dir = NULL;
  int rc = tl_build_cache_dir(ctx, &dir);
  if (rc) return rc;
  char key[40];
  snprintf(key, sizeof key, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
  char *so_path = tl_sprintf("%s/k%s.so", dir, key);
  char *src_path = tl_sprintf("%s/k%s.c", dir, key);

  tl_module *m = NULL;
  if (access(so_path, R_OK) == 0) tl_module_load(NULL, so_path, source, 0, 1, &m);
  if (!m) {
    static unsigned counter;
    unsigned seq = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    char *tmp_so = tl_sprintf("%s/k%s.%d.%u.tmp.so", dir, key, (int)getpid(), seq);
    double t0 = tl_now();
    rc = tl_cc_source(ctx, &tc, source, tmp_so, timeout_s, src_path);
    if (!rc && rename(tmp_so, so_path) != 0) {
      rc = tl_err(ctx, TL_E_IO, "cannot move the kernel to '%s': %s", so_path, strerror(errno));
      unlink(tmp_so);
    }
    double compile_s = tl_now() - t0;
    free(tmp_so);
    if (!rc) rc = tl_module_load(ctx, so_path, source, compile_s, 0, &m);
  }
  free(so_path);
  free(src_path);
  free(dir);
  if (rc) return rc;
  *out = m;
  return TL_OK;
}

TL_EXPORT int tl_module_from_c(tl_ctx *ctx, const char *source, const char *cflags,
                               double timeout_s, tl_module **out) {
  tl_toolchain tc = {NULL, cflags, NULL};
  return tl_build_c_source(ctx, &tc, source, timeout_s, out);
}

int tl_build_c_codegen(tl_ctx *ctx, const tl_lowered *f, const tl_toolchain *tc, tl_buf *out) {
  return tl_codegen_c_width(ctx, f, tc ? tc->vector_bytes : 0, out);
}

int tl_build_c(tl_ctx *ctx, const tl_lowered *f, const tl_toolchain *tc, tl_module **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_build_c: out is NULL");
  *out = NULL;
  tl_buf src = {0};
  int rc = tl_build_c_codegen(ctx, f, tc, &src);
  if (rc == TL_OK) rc = tl_build_c_source(ctx, tc, src.s, 120.0, out);
  tl_buf_free(&src);
  return rc;
}

TL_EXPORT int tl_lowered_build(tl_ctx *ctx, tl_lowered *f, const tl_toolchain *tc,
                               const char *cflags, tl_module **out) {
  tl_toolchain t = tl_toolchain_with_flags(tc, cflags);
  return tl_build_c(ctx, f, &t, out);
}
