/*
** target.h -- a device family: the data and functions the engine asks of a
** target (targets/targets.c parses strings into tl_target objects and holds
** the one list of families; each family is a folder targets/<name>/ with a
** target.c defining its tl_family).
**
**   target string  --tl_target_parse-->  tl_target { family -> tl_family,
**                                                    kind, options, keys, hw }
**
** Adding a family: its folder (target.c, templates) and one line in the list
** in targets/targets.c. A family builds through its backend (tl_backend_c:
** the system C compiler with the family's toolchain, e.g. a cross prefix
** "aarch64-linux-gnu-"; tl_backend_opencl: OpenCL C on an OpenCL device),
** which also says where its kernels run and how they are timed.
*/
#ifndef TL_TARGET_H
#define TL_TARGET_H

#include "../core/autotvm/autotvm.h"
#include "../core/build/build.h"
#include "../core/tunelua.h"

/* One row of a family's strategy: a graph op variant implemented by a
** template (see tl_target_impl in core/tunelua_target.h for the fields). */
typedef struct tl_target_impl_row {
  const char *op;              /* "conv2d", "depthwise_conv2d", "dense" */
  const char *tmpl;            /* template name */
  const char *args;            /* args form: "conv_layout", "conv", "dense" */
  const char *when;            /* NULL: always; "3x3s1" */
} tl_target_impl_row;

typedef struct tl_family {
  const char *name;                       /* "x86", "mali", ... */
  const char *const *kinds;               /* the kinds it takes, NULL-terminated */
  const char *device;                     /* the -device it claims; NULL: any other */
  const char *const *options;             /* options beyond the common ones, NULL-terminated */
  const char *const *keys;                /* default keys (after -device), NULL-terminated */
  const char *schedules;                  /* default-schedule class: "cpu", "opencl" */
  const tl_backend *backend;              /* code generator, build, device (core/build) */
  tl_toolchain toolchain;                 /* a C backend's compiler, flags, cross prefix;
                                             NULL fields: the defaults (build.h) */
  const char *tophub_package, *tophub_version;
  const tl_atvm_template *const *templates; /* NULL-terminated */
  const tl_target_impl_row *impls;        /* the strategy, in the order tasks are listed */
  int nimpls;
  int fallback_untuned;                   /* see tl_target_fallback_untuned */
  /* Hardware facts from the parsed options (NULL: none known). */
  void (*hw)(const tl_target *t, tl_target_hw *hw);
  /* TL_OK when kernels built for t run on this host, else an error naming
  ** what the host lacks (NULL: no check; see tl_target_check_host). */
  int (*host_check)(tl_ctx *ctx, const tl_target *t);
  /* The toolchain of target t when it depends on the options (e.g. a cross
  ** compiler per -mtriple): static data (NULL hook or result: .toolchain). */
  const tl_toolchain *(*toolchain_of)(const tl_target *t);
  /* A strict parse's check of the option values (NULL: none): TL_OK, or an
  ** error naming the option and what the family takes. */
  int (*check)(tl_ctx *ctx, const tl_target *t);
  /* The auto-scheduler's hardware params of a GPU known without asking a
  ** device (TVM's tables), in tl_target_fixed_hw_params' order: 1 and v
  ** filled, or 0 (NULL: none). */
  int (*fixed_hw_params)(const tl_target *t, int64_t *v);
} tl_family;

/* A parsed target. opt_values[i] is NULL for a flag. */
struct tl_target {
  char *str, *kind;
  const tl_family *family;         /* NULL: a record's kind no family takes */
  int nopts, nkeys;
  char **opt_names, **opt_values;
  char **keys;
  tl_target_hw hw;
};

/* The value of option name (NULL if absent or a flag). */
const char *tl_target_option(const tl_target *t, const char *name);

/* The families are listed once, in TL_FAMILIES (targets/targets.c). */

#endif
