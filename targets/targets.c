/*
** targets.c -- the one list of device families, target strings parsed into
** tl_target objects, and the template registry (every family's templates,
** found by name).
**
** Grammar: words separated by blanks; the first is the kind, each other is
** "-name=value", "-name" (a flag) or the same with "--". A family takes a
** kind and, when it names one, a -device; a family naming the target's
** device wins over one taking any device.
*/
#include "target.h"

#include <ctype.h>
#include <stdio.h>

/* ---- the list ------------------------------------------------------------------------ */

/* One line per family, in matching order (the first family that takes a
** target string's kind and -device wins): each row X(name) is the
** tl_family_<name> that targets/<name>/target.c defines. */
#define TL_FAMILIES(X) \
  X(x86)      /* llvm, c */ \
  X(arm_cpu)  /* llvm -device=arm_cpu */ \
  X(mali)     /* opencl -device=mali */ \
  X(opencl)   /* opencl */ \
  X(vta)      /* ext_dev -device=vta */

#define X(name) extern const tl_family tl_family_##name;
TL_FAMILIES(X)
#undef X
#define X(name) &tl_family_##name,
static const tl_family *const families[] = {TL_FAMILIES(X)};
#undef X

/* The target of an empty string (tasks, builds). */
static const char *const default_target = "llvm";

/* Options every family takes. */
static const char *const common_options[] = {"device", "model", "mcpu", "mtriple", "mattr", "keys",
                                             NULL};

/* Default keys and device types (DLPack's) of kinds no family takes (TVM's),
** for targets read from logs. */
typedef struct foreign_kind { const char *kind, *keys[2]; int device_type; } foreign_kind;
static const foreign_kind foreign_kinds[] = {
    {"cuda", {"cuda", "gpu"}, kDLCUDA},       {"nvptx", {"cuda", "gpu"}, kDLCUDA},
    {"rocm", {"rocm", "gpu"}, kDLROCM},       {"vulkan", {"vulkan", "gpu"}, kDLVulkan},
    {"metal", {"metal", "gpu"}, kDLMetal},
};

static const foreign_kind *foreign_kind_of(const char *kind) {
  for (size_t i = 0; i < TL_ARRAY_SIZE(foreign_kinds); i++)
    if (strcmp(foreign_kinds[i].kind, kind) == 0) return &foreign_kinds[i];
  return NULL;
}

/* ---- parsing ------------------------------------------------------------------------- */

static int in_list(const char *const *list, const char *s) {
  for (int i = 0; list && list[i]; i++)
    if (strcmp(list[i], s) == 0) return 1;
  return 0;
}

const char *tl_target_option(const tl_target *t, const char *name) {
  const char *v = NULL;
  for (int i = 0; i < t->nopts; i++)   /* the last one given wins */
    if (strcmp(t->opt_names[i], name) == 0) v = t->opt_values[i];
  return v;
}

static int has_option(const tl_target *t, const char *name) {
  for (int i = 0; i < t->nopts; i++)
    if (strcmp(t->opt_names[i], name) == 0) return 1;
  return 0;
}

static const tl_family *family_of(const char *kind, const char *device) {
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < TL_ARRAY_SIZE(families); i++) {
      const tl_family *f = families[i];
      if (!in_list(f->kinds, kind)) continue;
      if (pass == 0 ? (f->device && device && strcmp(f->device, device) == 0) : !f->device) return f;
    }
  return NULL;
}

static int any_family_takes(const char *kind) {
  for (size_t i = 0; i < TL_ARRAY_SIZE(families); i++)
    if (in_list(families[i]->kinds, kind)) return 1;
  return 0;
}

/* "unknown target 'k' (expected "c", "llvm" or "opencl", with options)": the
** kinds of the list, sorted, each once. */
static int unknown_kind(tl_ctx *ctx, const char *kind) {
  const char *kinds[32];
  int n = 0;
  for (size_t i = 0; i < TL_ARRAY_SIZE(families); i++)
    for (int k = 0; families[i]->kinds[k]; k++) {
      int seen = 0;
      for (int j = 0; j < n; j++) seen |= strcmp(kinds[j], families[i]->kinds[k]) == 0;
      if (!seen && n < 32) kinds[n++] = families[i]->kinds[k];
    }
  for (int i = 1; i < n; i++)   /* insertion sort */
    for (int j = i; j > 0 && strcmp(kinds[j - 1], kinds[j]) > 0; j--) {
      const char *x = kinds[j];
      kinds[j] = kinds[j - 1], kinds[j - 1] = x;
    }
  tl_buf b = {0};
  for (int i = 0; i < n; i++)
    tl_buf_printf(&b, "%s\"%s\"", i == 0 ? "" : i == n - 1 ? " or " : ", ", kinds[i]);
  int rc = tl_err(ctx, TL_E_ARG, "unknown target '%s' (expected %s, with options)", kind, b.s ? b.s : "");
  tl_buf_free(&b);
  return rc;
}

static int unknown_option(tl_ctx *ctx, const tl_target *t, const char *name) {
  tl_buf b = {0};
  for (int i = 0; common_options[i]; i++) tl_buf_printf(&b, "%s-%s", i ? ", " : "", common_options[i]);
  for (int i = 0; t->family->options && t->family->options[i]; i++)
    tl_buf_printf(&b, ", -%s", t->family->options[i]);
  int rc = tl_err(ctx, TL_E_ARG, "unknown target option '-%s' in target '%s' (%s targets take %s)",
                  name, t->str, t->family->name, b.s);
  tl_buf_free(&b);
  return rc;
}

static void add_key(tl_target *t, const char *k, size_t n) {
  if (n == 0) return;
  for (int i = 0; i < t->nkeys; i++)
    if (strlen(t->keys[i]) == n && strncmp(t->keys[i], k, n) == 0) return;
  t->keys = realloc(t->keys, (size_t)(t->nkeys + 1) * sizeof *t->keys);
  t->keys[t->nkeys] = tl_calloc(1, n + 1);
  memcpy(t->keys[t->nkeys++], k, n);
}

static void add_option(tl_target *t, const char *name, size_t nlen, const char *value) {
  t->opt_names = realloc(t->opt_names, (size_t)(t->nopts + 1) * sizeof *t->opt_names);
  t->opt_values = realloc(t->opt_values, (size_t)(t->nopts + 1) * sizeof *t->opt_values);
  char *nm = tl_calloc(1, nlen + 1);
  memcpy(nm, name, nlen);
  if (strcmp(nm, "target") == 0) {   /* the old name of -mtriple */
    free(nm);
    nm = tl_strdup("mtriple");
  }
  t->opt_names[t->nopts] = nm;
  t->opt_values[t->nopts++] = value ? tl_strdup(value) : NULL;
}

static int is_name_char(int c) { return isalnum(c) || c == '_' || c == '-'; }

static int parse(tl_ctx *ctx, const char *str, int strict, tl_target **out) {
  *out = NULL;
  if (!str) str = "";
  tl_target *t = tl_calloc(1, sizeof *t);
  t->str = tl_strdup(str);
  int rc = TL_OK;
  char *words = tl_strdup(str), *save = NULL;
  for (char *w = strtok_r(words, " \t\n\r", &save); w; w = strtok_r(NULL, " \t\n\r", &save)) {
    if (!t->kind) {
      t->kind = tl_strdup(w);
      if (strict && !any_family_takes(w)) {
        rc = unknown_kind(ctx, w);
        goto done;
      }
      continue;
    }
    const char *p = w;
    if (*p == '-') p++;
    if (*p == '-') p++;
    const char *name = p;
    while (is_name_char((unsigned char)*p)) p++;
    size_t nlen = (size_t)(p - name);
    if (w[0] != '-' || nlen == 0 || (*p && *p != '=')) {
      if (!strict) continue;   /* a record's word we cannot read: skipped */
      rc = tl_err(ctx, TL_E_ARG, "target option '%s' should look like -key=value", w);
      goto done;
    }
    add_option(t, name, nlen, *p == '=' ? p + 1 : NULL);
  }
  if (!t->kind) t->kind = tl_strdup("");
  const char *device = tl_target_option(t, "device");
  t->family = family_of(t->kind, device);
  if (strict && !t->family) {
    rc = unknown_kind(ctx, t->kind);
    goto done;
  }
  for (int i = 0; strict && i < t->nopts; i++)
    if (!in_list(common_options, t->opt_names[i]) && !in_list(t->family->options, t->opt_names[i])) {
      rc = unknown_option(ctx, t, t->opt_names[i]);
      goto done;
    }
  const char *keys = tl_target_option(t, "keys");
  for (const char *k = keys; k && *k;) {
    size_t n = strcspn(k, ",");
    add_key(t, k, n);
    k += n + (k[n] == ',');
  }
  if (device) add_key(t, device, strlen(device));
  if (!has_option(t, "keys")) {
    const foreign_kind *fk = t->family ? NULL : foreign_kind_of(t->kind);
    const char *const *dk = t->family ? t->family->keys : fk ? fk->keys : NULL;
    for (int i = 0; dk && i < 2 && dk[i]; i++) add_key(t, dk[i], strlen(dk[i]));
  }
  if (t->family && t->family->hw) t->family->hw(t, &t->hw);
  if (strict && t->family->check && (rc = t->family->check(ctx, t))) goto done;
done:
  free(words);
  if (rc) {
    tl_target_free(t);
    return rc;
  }
  *out = t;
  return TL_OK;
}

TL_EXPORT int tl_target_parse(tl_ctx *ctx, const char *str, tl_target **out) {
  return parse(ctx, str, 1, out);
}
TL_EXPORT int tl_target_parse_record(tl_ctx *ctx, const char *str, tl_target **out) {
  return parse(ctx, str, 0, out);
}

TL_EXPORT void tl_target_free(tl_target *t) {
  if (!t) return;
  for (int i = 0; i < t->nopts; i++) free(t->opt_names[i]), free(t->opt_values[i]);
  for (int i = 0; i < t->nkeys; i++) free(t->keys[i]);
  free(t->opt_names), free(t->opt_values), free(t->keys);
  free(t->str), free(t->kind);
  free(t);
}

/* ---- accessors ----------------------------------------------------------------------- */

TL_EXPORT const char *tl_target_str(const tl_target *t) { return t->str; }
TL_EXPORT const char *tl_target_kind(const tl_target *t) { return t->kind; }
TL_EXPORT const char *tl_target_family(const tl_target *t) { return t->family ? t->family->name : ""; }
TL_EXPORT const char *tl_target_device(const tl_target *t) { return tl_target_option(t, "device"); }
TL_EXPORT const char *tl_target_model(const tl_target *t) { return tl_target_option(t, "model"); }
TL_EXPORT int tl_target_num_keys(const tl_target *t) { return t->nkeys; }
TL_EXPORT const char *tl_target_key(const tl_target *t, int i) {
  return i >= 0 && i < t->nkeys ? t->keys[i] : NULL;
}
TL_EXPORT int tl_target_num_options(const tl_target *t) { return t->nopts; }
TL_EXPORT const char *tl_target_option_name(const tl_target *t, int i) {
  return i >= 0 && i < t->nopts ? t->opt_names[i] : NULL;
}
TL_EXPORT const char *tl_target_option_value(const tl_target *t, int i) {
  return i >= 0 && i < t->nopts ? t->opt_values[i] : NULL;
}
TL_EXPORT int tl_target_lanes(const tl_target *t) { return t->hw.lanes; }
TL_EXPORT int tl_target_fixed_hw_params(const tl_target *t, int64_t *v) {
  return t && t->family && t->family->fixed_hw_params ? t->family->fixed_hw_params(t, v) : 0;
}
TL_EXPORT int tl_target_check_host(tl_ctx *ctx, const tl_target *t) {
  return t->family && t->family->host_check ? t->family->host_check(ctx, t) : TL_OK;
}
TL_EXPORT int tl_target_registers(const tl_target *t) { return t->hw.registers; }
TL_EXPORT const char *tl_target_schedules(const tl_target *t) {
  return t->family ? t->family->schedules : NULL;
}
TL_EXPORT const char *tl_target_backend(const tl_target *t) {
  return t->family ? t->family->backend->name : NULL;
}
TL_EXPORT int tl_target_device_type(const tl_target *t) {
  if (t->family) return t->family->backend->device_type;
  const foreign_kind *fk = foreign_kind_of(t->kind);
  return fk ? fk->device_type : 0;
}
TL_EXPORT const tl_toolchain *tl_target_toolchain(const tl_target *t) {
  if (!t->family || !t->family->backend->uses_toolchain) return NULL;
  const tl_toolchain *tc = t->family->toolchain_of ? t->family->toolchain_of(t) : NULL;
  return tc ? tc : &t->family->toolchain;
}
TL_EXPORT const char *tl_target_cc(const tl_target *t) {
  const tl_toolchain *tc = tl_target_toolchain(t);
  return tc ? tc->cc : NULL;
}
TL_EXPORT const char *tl_target_cflags(const tl_target *t) {
  return tl_toolchain_cflags(tl_target_toolchain(t));
}
TL_EXPORT const char *tl_target_cross_prefix(const tl_target *t) {
  const tl_toolchain *tc = tl_target_toolchain(t);
  return tc && tc->cross_prefix ? tc->cross_prefix : "";
}
TL_EXPORT const char *tl_target_tophub_package(const tl_target *t) {
  return t->family ? t->family->tophub_package : NULL;
}
TL_EXPORT const char *tl_target_tophub_version(const tl_target *t) {
  return t->family ? t->family->tophub_version : NULL;
}
TL_EXPORT int tl_target_fallback_untuned(const tl_target *t) {
  return t->family ? t->family->fallback_untuned : 0;
}
TL_EXPORT int tl_target_num_impls(const tl_target *t) { return t->family ? t->family->nimpls : 0; }
TL_EXPORT int tl_target_impl(const tl_target *t, int i, const char **op, const char **template_name,
                             const char **args, const char **when) {
  if (!t->family || i < 0 || i >= t->family->nimpls) return -1;
  const tl_target_impl_row *r = &t->family->impls[i];
  *op = r->op, *template_name = r->tmpl, *args = r->args, *when = r->when;
  return 0;
}
TL_EXPORT int tl_target_tophub_list(int i, const char **package, const char **version) {
  if (i < 0 || (size_t)i >= TL_ARRAY_SIZE(families)) return -1;
  *package = families[i]->tophub_package, *version = families[i]->tophub_version;
  return 0;
}

/* ---- the template registry ----------------------------------------------------------- */

/* The i-th template of all families, in list order (NULL past the end). */
static const tl_atvm_template *template_at(int i) {
  for (size_t f = 0; i >= 0 && f < TL_ARRAY_SIZE(families); f++)
    for (int k = 0; families[f]->templates && families[f]->templates[k]; k++)
      if (i-- == 0) return families[f]->templates[k];
  return NULL;
}

static const tl_atvm_template *template_find(const char *name) {
  const tl_atvm_template *tm;
  for (int i = 0; name && (tm = template_at(i)); i++)
    if (strcmp(tm->name, name) == 0) return tm;
  return NULL;
}

TL_EXPORT const char *tl_atvm_template_list(int i) {
  const tl_atvm_template *tm = template_at(i);
  return tm ? tm->name : NULL;
}
TL_EXPORT int tl_atvm_template_exists(const char *name) { return template_find(name) != NULL; }
TL_EXPORT int tl_atvm_template_flags(const char *name) {
  const tl_atvm_template *tm = template_find(name);
  if (!tm) return 0;
  return tm->flags | (tm->deployed_input ? TL_TMPL_PREPACKED_WEIGHT : 0);
}

/* The message lists the known templates of the name's suffix (".x86"), or
** all of them when none shares it. */
static int unknown_template(tl_ctx *ctx, const char *name) {
  tl_buf b = {0};
  const char *dot = name ? strrchr(name, '.') : NULL;
  const tl_atvm_template *tm;
  int n = 0;
  for (int pass = 0; pass < 2 && n == 0; pass++)
    for (int i = 0; (tm = template_at(i)); i++) {
      const char *td = strrchr(tm->name, '.');
      if (pass == 0 && !(dot && td && strcmp(dot, td) == 0)) continue;
      tl_buf_printf(&b, "%s%s", n++ ? ", " : "", tm->name);
    }
  int rc = tl_err(ctx, TL_E_ARG, "autotvm: unknown template '%s' (known%s%s: %s)",
                  name ? name : "NULL", dot && strstr(b.s, dot) ? " " : "",
                  dot && strstr(b.s, dot) ? dot : "", b.s);
  tl_buf_free(&b);
  return rc;
}

/* Input i of the template's args as the graph executor deploys it: a shape
** (ndim 0: passed as it is) and the transform of a constant value into it. */
static int deployed(tl_ctx *ctx, const char *name, const char *args_json, int i,
                    const tl_atvm_template **tm, tl_atvm_args *a, int *ndim, int64_t *shape) {
  *ndim = 0;
  *tm = template_find(name);
  if (!*tm) return unknown_template(ctx, name);
  if (tl_atvm_parse_args(ctx, args_json, a)) return tl_errcode(ctx);
  if (i < 0 || i >= a->ntensors) {
    tl_atvm_args_free(a);
    return tl_err(ctx, TL_E_ARG, "%s: input %d out of range (the args have %d tensors)", name, i,
                  a->ntensors);
  }
  if (!(*tm)->deployed_input || !(*tm)->deployed_input(a, i, ndim, shape)) *ndim = 0;
  return TL_OK;
}

TL_EXPORT int tl_atvm_template_deployed_shape(tl_ctx *ctx, const char *name, const char *args_json,
                                              int i, int *ndim, int64_t *shape) {
  const tl_atvm_template *tm;
  tl_atvm_args a;
  int rc = deployed(ctx, name, args_json, i, &tm, &a, ndim, shape);
  if (!rc) tl_atvm_args_free(&a);
  return rc;
}

TL_EXPORT int tl_atvm_template_deploy_input(tl_ctx *ctx, const char *name, const char *args_json,
                                            int i, const void *src, void *dst) {
  const tl_atvm_template *tm;
  tl_atvm_args a;
  int ndim;
  int64_t shape[8];
  int rc = deployed(ctx, name, args_json, i, &tm, &a, &ndim, shape);
  if (rc) return rc;
  if (ndim == 0 || !tm->deploy)
    rc = tl_err(ctx, TL_E_ARG, "%s: input %d is deployed as it is (no transform)", name, i);
  else
    tm->deploy(&a, i, src, dst);
  tl_atvm_args_free(&a);
  return rc;
}

TL_EXPORT int tl_atvm_task_create(tl_ctx *ctx, const char *template_name, const char *args_json,
                                  const char *target, tl_atvm_task **out) {
  *out = NULL;
  const tl_atvm_template *tm = template_find(template_name);
  if (!tm) return unknown_template(ctx, template_name);
  tl_target *t;
  int rc = tl_target_parse_record(ctx, target && *target ? target : default_target, &t);
  if (rc) return tl_err_prefix(ctx, "autotvm.task.create(%s): ", template_name);
  rc = tl_atvm_task_new(ctx, tm, args_json, &t->hw, out);
  tl_target_free(t);
  return rc;
}

TL_EXPORT int tl_atvm_template_compute(tl_ctx *ctx, const char *template_name,
                                       const char *args_json, tl_dag *dag, const int *in, int nin,
                                       int *out, int max_out, int *nout) {
  *nout = 0;
  const tl_atvm_template *tm = template_find(template_name);
  if (!tm) return unknown_template(ctx, template_name);
  return tl_atvm_template_compute_with(ctx, tm, args_json, dag, in, nin, out, max_out, nout);
}
