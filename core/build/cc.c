/*
** cc.c -- the C compiler driver and the kernel cache directory, shared by
** modules (module.c), measurement builds (core/measure) and the graph
** executor's batched libraries (core/graph).
**
** A toolchain (build.h) is data: compiler, flags, cross prefix, each with a
** default, so a target can bring its own. The driver runs
** `CC -std=gnu11 -shared -fPIC -pipe CFLAGS -o OUT SRC... -lm` through tl_proc_exec;
** flags split at blanks, '...' and "..." group.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "build.h"

#ifndef TL_C_COMPILER
#define TL_C_COMPILER "cc"
#endif

#define CC_CAPTURE_MAX (256 * 1024)    /* compiler output read */

char *tl_toolchain_cc(const tl_toolchain *tc) {
  const char *cc = tc ? tc->cc : NULL;
  const char *pre = tc && tc->cross_prefix ? tc->cross_prefix : "";
  if (!cc || !*cc) {
    if (*pre) return tl_sprintf("%sgcc", pre);
    const char *env = getenv("TUNELUA_CC");
    cc = env && *env ? env : TL_C_COMPILER;
  }
  return tl_sprintf("%s%s", pre, cc);
}

const char *tl_toolchain_cflags(const tl_toolchain *tc) {
  return tc && tc->cflags ? tc->cflags : "-O3 -march=native";
}

tl_toolchain tl_toolchain_with_flags(const tl_toolchain *tc, const char *cflags) {
  tl_toolchain r = tc ? *tc : (tl_toolchain){NULL, NULL, NULL, NULL, 0};
  if (cflags) r.cflags = cflags;
  return r;
}

const tl_backend tl_backend_c = {"c", TL_DEV_CPU, 1};
const tl_backend tl_backend_opencl = {"opencl", TL_DEV_OPENCL, 0};

/* Split flags at blanks; '...' and "..." group. Returns the count. */
static int split_flags(const char *s, char ***out) {
  TL_VEC(char *) v = {0};
  tl_buf cur = {0};
  int in = 0;
  char q = 0;
  for (const char *p = s;; p++) {
    char ch = *p;
    if (ch == 0 || (!q && (ch == ' ' || ch == '\t' || ch == '\n'))) {
      if (in) {
        TL_VEC_PUSH(v, tl_buf_take(&cur));
        in = 0;
      }
      if (ch == 0) break;
      continue;
    }
    in = 1;
    if (q && ch == q) q = 0;
    else if (!q && (ch == '\'' || ch == '"')) q = ch;
    else tl_buf_putn(&cur, p, 1);
  }
  tl_buf_free(&cur);
  *out = v.v;
  return v.n;
}

/* First part of the compiler's diagnostics, cut at a line end. */
static char *trim_output(const char *s, size_t n) {
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ')) n--;
  if (n <= TL_CC_OUTPUT_MAX) return tl_strndup(s, n);
  size_t cut = TL_CC_OUTPUT_MAX;
  while (cut > TL_CC_OUTPUT_MAX / 2 && s[cut] != '\n') cut--;
  if (s[cut] != '\n') cut = TL_CC_OUTPUT_MAX;
  char *head = tl_strndup(s, cut);
  char *r = tl_sprintf("%s\n... (%zu more bytes)", head, n - cut);
  free(head);
  return r;
}

int tl_cc_shared(tl_ctx *ctx, const tl_toolchain *tc, const char *const *srcs, int nsrcs,
                 const char *out_path, double timeout_s) {
  char *cc = tl_toolchain_cc(tc);
  const char *flags = tl_toolchain_cflags(tc);
  char **fl = NULL;
  int nfl = split_flags(flags, &fl);
  const char **argv = tl_calloc((size_t)(nfl + nsrcs) + 10, sizeof(char *));
  int a = 0;
  argv[a++] = cc;
  argv[a++] = "-std=gnu11";
  argv[a++] = "-shared";
  argv[a++] = "-fPIC";
  argv[a++] = "-pipe";   /* assembly through pipes: fewer temporary files */
  for (int i = 0; i < nfl; i++) argv[a++] = fl[i];
  argv[a++] = "-o";
  argv[a++] = out_path;
  for (int i = 0; i < nsrcs; i++) argv[a++] = srcs[i];
  argv[a++] = "-lm";
  argv[a] = NULL;
  /* The compiler's temporary files go beside the output, not to /tmp: a compiler killed at its
  ** timeout cannot remove them, and the output's directory is the caller's to clean. */
  char *outdir = tl_strdup(out_path);
  char *slash = strrchr(outdir, '/');
  if (slash) *slash = '\0';
  char *tmpenv = tl_sprintf("TMPDIR=%s", slash ? (*outdir ? outdir : "/") : ".");
  const char *env_set[2] = {tmpenv, NULL};
  tl_proc_result *res = NULL;
  int rc = tl_proc_exec_env(ctx, argv, env_set, timeout_s, CC_CAPTURE_MAX, &res);
  free(tmpenv);
  free(outdir);
  if (rc == TL_OK) {
    size_t elen = 0, olen = 0;
    const char *err = tl_proc_stderr(res, &elen);
    const char *outp = tl_proc_stdout(res, &olen);
    if (!elen && olen) {
      err = outp;
      elen = olen;
    }
    char *msg = trim_output(err ? err : "", err ? elen : 0);
    switch (tl_proc_status(res)) {
    case TL_PROC_OK:
      break;
    case TL_PROC_TIMEOUT:
      rc = tl_err(ctx, TL_E_TIMEOUT, "C compiler '%s' timed out after %.1f s", cc, timeout_s);
      break;
    case TL_PROC_SPAWN:
      if (tc && tc->package)
        rc = tl_err(ctx, TL_E_BUILD, "cannot run the C compiler '%s' (install %s; scripts/bootstrap "
                    "does): %s", cc, tc->package, msg);
      else
        rc = tl_err(ctx, TL_E_BUILD, "cannot run the C compiler '%s' (set TUNELUA_CC): %s", cc, msg);
      break;
    case TL_PROC_SIGNAL:
      rc = tl_err(ctx, TL_E_BUILD, "C compiler '%s' killed by signal %d:\n%s", cc,
                  tl_proc_code(res), msg);
      break;
    default:
      rc = tl_err(ctx, TL_E_BUILD, "C compiler '%s %s' failed (exit %d):\n%s", cc, flags,
                  tl_proc_code(res), msg);
      break;
    }
    free(msg);
  }
  tl_proc_result_free(res);
  for (int i = 0; i < nfl; i++) free(fl[i]);
  free(fl);
  free(argv);
  free(cc);
  return rc;
}

static int write_file(tl_ctx *ctx, const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return tl_err(ctx, TL_E_IO, "cannot create '%s': %s", path, strerror(errno));
  size_t w = fwrite(data, 1, n, f);
  int bad = w != n;
  if (fclose(f) != 0) bad = 1;
  if (bad) {
    unlink(path);
    return tl_err(ctx, TL_E_IO, "cannot write '%s': %s", path, strerror(errno));
  }
  return TL_OK;
}

int tl_cc_source(tl_ctx *ctx, const tl_toolchain *tc, const char *source, const char *out_path,
                 double timeout_s, const char *keep_source) {
  char *src_path = tl_sprintf("%s.c", out_path);
  int rc = write_file(ctx, src_path, source, strlen(source));
  if (!rc) {
    const char *srcs[1] = {src_path};
    rc = tl_cc_shared(ctx, tc, srcs, 1, out_path, timeout_s);
    if (rc || !keep_source || rename(src_path, keep_source) != 0) unlink(src_path);
  }
  free(src_path);
  if (rc) unlink(out_path);
  return rc;
}

int tl_build_cache_dir(tl_ctx *ctx, char **out) {
  const char *env = getenv("TUNELUA_CACHE_DIR");
  char *cands[4] = {0};
  int n = 0;
  if (env && *env) cands[n++] = tl_strdup(env);
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) cands[n++] = tl_sprintf("%s/tunelua/kernels", xdg);
  if (home && *home) cands[n++] = tl_sprintf("%s/.cache/tunelua/kernels", home);
  const char *tmp = getenv("TMPDIR");
  cands[n++] = tl_sprintf("%s/tunelua-%d/kernels", tmp && *tmp ? tmp : "/tmp", (int)getuid());
  int rc = TL_E_IO, chosen = -1;
  for (int i = 0; i < n && chosen < 0; i++) {
    if (tl_mkdirs(NULL, cands[i]) == TL_OK && access(cands[i], W_OK) == 0) chosen = i;
    else if (i == 0 && env && *env)
      break;                           /* an explicit directory must work */
  }
  if (chosen >= 0) {
    *out = cands[chosen];
    cands[chosen] = NULL;
    rc = TL_OK;
  } else {
    rc = tl_err(ctx, TL_E_IO, "cannot create a kernel cache directory (tried '%s'%s): %s", cands[0],
                n > 1 ? " and others" : "", strerror(errno));
  }
  for (int i = 0; i < n; i++) free(cands[i]);
  return rc;
}
