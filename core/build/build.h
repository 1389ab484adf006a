/*
** build.h -- the build layer: a lowered function (core/ir) becomes source
** through a code generator (core/codegen) and a module through the runtime's
** loaders (core/runtime). It owns the one C compiler driver, described by a
** toolchain given as data, and the one on-disk kernel cache. A target family
** (targets/target.h) names its backend (tl_backend below) and, for C, its
** toolchain; the engine asks those rather than comparing target names.
**
**   tl_lowered --codegen--> C source   --tl_cc_shared--> .so --tl_module_load-->  tl_module
**              --codegen--> tl_ocl_code ----------------------tl_ocl_module_load--> tl_ocl_module
*/
#ifndef TL_BUILD_H
#define TL_BUILD_H

#include "../codegen/codegen.h"
#include "../runtime/runtime.h"

/* How C becomes a shared object. Every field may be NULL (or the whole
** struct): cc defaults to $TUNELUA_CC, else the compiler libtunelua was built
** with, else cc; cflags to "-O3 -march=native". cross_prefix is put before
** cc ("aarch64-linux-gnu-" + "gcc"; with cc NULL: before "gcc"). package
** names where the compiler comes from (a Debian package) in the error when it
** cannot be run; vector_bytes caps the vectors the C code generator prints
** (16: 128-bit NEON; 0: the default, 32 bytes and 64 under AVX-512). */
typedef struct tl_toolchain {
  const char *cc;
  const char *cflags;
  const char *cross_prefix;
  const char *package;
  int vector_bytes;
} tl_toolchain;

#define TL_CC_OUTPUT_MAX 4000          /* compiler output kept in a message */

/* The compiler command of tc (malloc'd). */
char *tl_toolchain_cc(const tl_toolchain *tc);
/* The flags of tc (never NULL). */
const char *tl_toolchain_cflags(const tl_toolchain *tc);
/* tc (NULL: the defaults) with its flags replaced by cflags when cflags is
** not NULL: flags a caller gives explicitly win over the target's. */
tl_toolchain tl_toolchain_with_flags(const tl_toolchain *tc, const char *cflags);

/* A backend: a code generator, how its modules are built and where they run
** and are timed. A family points at one of these; a new code generator (and
** its device API) is a new row here, a new family of an existing backend only
** its folder in targets/.
**
**   c       tl_codegen_c -> tl_cc_shared (the family's toolchain) -> tl_module,
**           run on the host, timed by tl_module_time / tl_measure_run
**   opencl  tl_codegen_opencl -> tl_ocl_module on an OpenCL device, timed by
**           tl_ocl_module_time / tl_measure_run_opencl                         */
typedef struct tl_backend {
  const char *name;            /* "c", "opencl": the code generator */
  int device_type;             /* TL_DEV_*: where its modules run and are timed */
  int uses_toolchain;          /* 1: C through the compiler driver with a tl_toolchain */
} tl_backend;

extern const tl_backend tl_backend_c, tl_backend_opencl;

/* The one compiler driver: `CC -std=gnu11 -shared -fPIC CFLAGS -o OUT SRCS -lm`
** run through tl_proc_exec (own process group, wall-clock limit timeout_s,
** captured output). TL_OK, or TL_E_BUILD / TL_E_TIMEOUT with the compiler's
** output (cut at TL_CC_OUTPUT_MAX bytes) in ctx's message. */
int tl_cc_shared(tl_ctx *ctx, const tl_toolchain *tc, const char *const *srcs, int nsrcs,
                 const char *out_path, double timeout_s);
/* Write source to OUT.c next to out_path and compile it into out_path; the
** .c is then moved to keep_source (if not NULL and the build succeeded) or
** removed. On failure nothing is left at out_path. */
int tl_cc_source(tl_ctx *ctx, const tl_toolchain *tc, const char *source, const char *out_path,
                 double timeout_s, const char *keep_source);

/* The kernel cache directory (malloc'd, created): the first usable of
** $TUNELUA_CACHE_DIR (which must work when set), $XDG_CACHE_HOME/tunelua/kernels,
** $HOME/.cache/tunelua/kernels and $TMPDIR/tunelua-UID/kernels. */
int tl_build_cache_dir(tl_ctx *ctx, char **out);

/* C source into a module through toolchain tc (NULL: the defaults), cached
** in the kernel cache under (compiler, flags, source). */
int tl_build_c_source(tl_ctx *ctx, const tl_toolchain *tc, const char *source, double timeout_s,
                      tl_module **out);
/* Generate C for f and compile it into a module with toolchain tc (NULL: the
** defaults). */
int tl_build_c(tl_ctx *ctx, const tl_lowered *f, const tl_toolchain *tc, tl_module **out);
/* Generate C for f with tc's vector width (tl_codegen_c_width; tc NULL: the default). */
int tl_build_c_codegen(tl_ctx *ctx, const tl_lowered *f, const tl_toolchain *tc, tl_buf *out);

/* The OpenCL code of fs[0..n) joined into one program: codes[i] is fs[i]'s
** launch description (its own source left in it), *source the joined program
** (one header, then every function's kernels; malloc'd). On failure codes are
** freed. */
int tl_build_opencl_joined(tl_ctx *ctx, tl_lowered *const *fs, int n, tl_ocl_code *codes,
                           char **source);

#endif
