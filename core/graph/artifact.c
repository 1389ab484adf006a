/*
** artifact.c -- a compiled network that travels: the graph executor's kernels,
** slots and steps loaded from files, so that a network built on one machine
** runs on another (the RPC server's graph ops, docs/rpc.md) with the same run
** loop (executor.c) and the same time evaluator.
**
** An artifact is a directory holding
**   - the kernels: shared objects (C backend ABI, as tl_graph_lib_build makes
**     them), or for an OpenCL network each kernel's OpenCL C and manifest
**     (tunelua_opencl.h, "modules that travel"),
**   - the graph description (JSON, written by tunelua.graph.executor's export):
**
**       {"format": "tunelua-graph", "version": 1, "arena": BYTES,
**        "device": "cpu" | "opencl",                    (default "cpu")
**        "libs": ["lib0.so", ...],                      file names in the directory
**        "kernels": [{"lib": 0, "name": "tlg_0"}, ...], (opencl: {"source", "manifest"})
**        "storages": [BYTES, ...],                      (opencl: device buffers)
**        "slots": [{"view": OFFSET, "shape": [...], "dtype": "float32"},   arena view (cpu)
**                  {"storage": I, "shape": [...], "dtype": ...},           storage view (opencl)
**                  {"param": OFFSET, "shape": [...], "dtype": ...},        filled from params
**                  {"shape": [...], "dtype": ...}, ...],                   input / output array
**        "steps": [{"kernel": K, "args": [slot, ...]}, ...],
**        "inputs": [{"name": "data", "slot": S}, ...], "outputs": [S, ...],
**        "params_bytes": BYTES}
**
**     Loaded with a host kind (tl_graph_artifact_load_kind; VTA: targets/vta/artifact.c)
**     the description may also have the kind's section and kernels of that kind:
**
**       "vta": {...},                                   the kind's state (a simulator)
**       "kernels": [..., {"vta": {...}}, ...]           a host kernel of the kind
**
**   - the params: one binary file, the constant arrays' bytes at their offsets.
**
** On OpenCL every array lives on the device given to the loader: storages,
** params (copied there), inputs and outputs; each kernel is a module built from
** its source (tl_ocl_module_from_source), launched by the run loop's OpenCL
** steps, which wait after each step.
**
** Everything is checked before memory is allocated or a library is opened:
** names are plain file names, counts and sizes are bounded (max_bytes bounds the
** arena and all arrays together), slot and kernel indices are in range, param
** ranges lie inside the params file. Kernels are native code: the loader checks
** the description, not what the kernels do with their arguments.
*/
#define _GNU_SOURCE
#include "../runtime/runtime.h"
#include "../tunelua.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define ART_MAX_LIBS 64
#define ART_MAX_KERNELS 4096
#define ART_MAX_SLOTS 65536
#define ART_MAX_STEPS 65536
#define ART_MAX_ARGS 256
#define ART_MAX_IO 64

struct tl_graph_artifact {
  tl_graph_exec *e;
  tl_module *libs[ART_MAX_LIBS];
  int nlibs;
  int device;                      /* TL_DEV_CPU or TL_DEV_OPENCL */
  tl_ocl_module **ocl;             /* OpenCL: one module per kernel */
  int nocl;
  int nin, nout, nsteps, nkernels;
  char *in_name[ART_MAX_IO];
  int in_slot[ART_MAX_IO];
  int out_slot[ART_MAX_IO];
  const tl_graph_host_kind *kind;  /* host kernels, or NULL */
  void *hstate;                    /* the kind's state */
};

static int plain_name(const char *s) {
  if (!s || !*s || strlen(s) > 200 || s[0] == '.') return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '_' || *p == '-'))
      return 0;
  return 1;
}

/* An integer field in [lo, hi], else an error naming where and what. */
static int get_int(tl_ctx *ctx, json_t *v, const char *where, int64_t lo, int64_t hi, int64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return tl_err(ctx, TL_E_PARSE, "graph artifact: %s: expected an integer in [%lld, %lld]", where,
                  (long long)lo, (long long)hi);
  *out = json_integer_value(v);
  return TL_OK;
}

static int get_array(tl_ctx *ctx, json_t *root, const char *key, size_t max, json_t **out) {
  json_t *v = json_object_get(root, key);
  if (!json_is_array(v) || json_array_size(v) > max)
    return tl_err(ctx, TL_E_PARSE, "graph artifact: '%s': expected a list of at most %zu entries",
                  key, max);
  *out = v;
  return TL_OK;
}

typedef struct {
  int kind;                        /* 0 view, 1 param, 2 array, 3 storage view */
  int64_t offset;
  int ndim;
  int64_t shape[TL_ARRAY_MAX_NDIM];
  int dtype;
  int64_t nbytes;
} slot_desc;

static int parse_slot(tl_ctx *ctx, json_t *s, int i, slot_desc *d) {
  char where[96];
  snprintf(where, sizeof where, "slots[%d]", i);
  if (!json_is_object(s)) return tl_err(ctx, TL_E_PARSE, "graph artifact: %s: expected an object", where);
  const char *dt = json_string_value(json_object_get(s, "dtype"));
  if (!dt || tl_dtype_parse(ctx, dt, &d->dtype))
    return tl_err(ctx, TL_E_PARSE, "graph artifact: %s.dtype: expected a dtype name", where);
  json_t *sh = json_object_get(s, "shape");
  if (!json_is_array(sh) || json_array_size(sh) > TL_ARRAY_MAX_NDIM)
    return tl_err(ctx, TL_E_PARSE, "graph artifact: %s.shape: expected a list of at most %d extents",
                  where, TL_ARRAY_MAX_NDIM);
  d->ndim = (int)json_array_size(sh);
  double n = tl_dtype_bytes(d->dtype);
  for (int k = 0; k < d->ndim; k++) {
    snprintf(where, sizeof where, "slots[%d].shape[%d]", i, k);
    int rc = get_int(ctx, json_array_get(sh, (size_t)k), where, 0, INT64_C(1) << 40, &d->shape[k]);
    if (rc) return rc;
    n *= (double)d->shape[k];
  }
  if (n > (double)(INT64_C(1) << 40))
    return tl_err(ctx, TL_E_PARSE, "graph artifact: slots[%d]: array too large", i);
  d->nbytes = (int64_t)n;
  json_t *view = json_object_get(s, "view"), *param = json_object_get(s, "param");
  json_t *sto = json_object_get(s, "storage");
  d->kind = view ? 0 : param ? 1 : sto ? 3 : 2;
  if (!!view + !!param + !!sto > 1)
    return tl_err(ctx, TL_E_PARSE, "graph artifact: slots[%d]: more than one of 'view', 'param' "
                  "and 'storage'", i);
  if (view || param || sto) {
    snprintf(where, sizeof where, "slots[%d].%s", i, view ? "view" : param ? "param" : "storage");
    return get_int(ctx, view ? view : param ? param : sto, where, 0, INT64_C(1) << 40, &d->offset);
  }
  return TL_OK;
}

TL_EXPORT void tl_graph_artifact_free(tl_graph_artifact *a) {
  if (!a) return;
  tl_graph_exec_free(a->e);
  if (a->kind && a->hstate) a->kind->close(a->hstate);
  for (int i = 0; i < a->nlibs; i++) tl_module_free(a->libs[i]);
  for (int i = 0; i < a->nocl; i++) tl_ocl_module_free(a->ocl[i]);
  free(a->ocl);
  for (int i = 0; i < a->nin; i++) free(a->in_name[i]);
  free(a);
}

/* A text file of the directory (at most 16 MiB, no NUL bytes); NULL with the error in ctx. */
static char *read_text(tl_ctx *ctx, const char *dir, const char *name, const char *what) {
  char *path = tl_sprintf("%s/%s", dir, name), *t = NULL;
  size_t len = 0;
  int rc = tl_read_file(ctx, path, &t, &len);
  free(path);
  if (rc) return NULL;
  if (len > ((size_t)16 << 20) || strlen(t) != len) {
    free(t);
    tl_err(ctx, TL_E_PARSE, "graph artifact: %s '%s' is not a text file of at most 16 MiB", what, name);
    return NULL;
  }
  return t;
}

/* An array of the artifact's device: host bytes (NULL: zeros) copied there. */
static int device_array(tl_ctx *ctx, const slot_desc *d, int device, int dev, const void *bytes,
                        tl_array **out) {
  tl_array *h = NULL;
  int rc = tl_array_empty(ctx, d->ndim, d->shape, d->dtype, TL_DEV_CPU, 0, &h);
  if (rc) return rc;
  if (bytes) memcpy(tl_array_data(h), bytes, (size_t)d->nbytes);
  else memset(tl_array_data(h), 0, (size_t)d->nbytes);
  if (device == TL_DEV_CPU) {
    *out = h;
    return TL_OK;
  }
  rc = tl_array_empty(ctx, d->ndim, d->shape, d->dtype, device, dev, out);
  if (!rc) rc = tl_array_copyto(ctx, h, *out);
  tl_array_free(h);
  if (rc) {
    tl_array_free(*out);
    *out = NULL;
  }
  return rc;
}

/* A kernel of the host kind: {"<kind>": {...}} (NULL when not one). */
static json_t *host_kernel(const tl_graph_host_kind *kind, json_t *k) {
  return kind ? json_object_get(k, kind->name) : NULL;
}

TL_EXPORT int tl_graph_artifact_load(tl_ctx *ctx, const char *dir, const char *graph,
                                     const char *params, int64_t max_bytes, int dev,
                                     tl_graph_artifact **out) {
  return tl_graph_artifact_load_kind(ctx, dir, graph, params, max_bytes, dev, NULL, out);
}

TL_EXPORT void *tl_graph_artifact_host_state(const tl_graph_artifact *a) {
  return a ? a->hstate : NULL;
}

TL_EXPORT int tl_graph_artifact_load_kind(tl_ctx *ctx, const char *dir, const char *graph,
                                          const char *params, int64_t max_bytes, int dev,
                                          const tl_graph_host_kind *kind, tl_graph_artifact **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_graph_artifact_load: out is NULL");
  *out = NULL;
  if (!dir || !plain_name(graph) || (params && *params && !plain_name(params)))
    return tl_err(ctx, TL_E_ARG, "graph artifact: the graph and params must be plain file names "
                  "([A-Za-z0-9._-], no leading dot) in a directory");
  if (max_bytes <= 0) max_bytes = INT64_C(1) << 40;
  char *path = tl_sprintf("%s/%s", dir, graph);
  char *text = NULL, *pbytes = NULL;
  size_t tlen = 0, plen = 0;
  int rc = tl_read_file(ctx, path, &text, &tlen);
  free(path);
  if (rc) return rc;
  json_error_t je;
  json_t *root = json_loadb(text, tlen, 0, &je);
  free(text);
  if (!json_is_object(root)) {
    json_decref(root);
    return tl_err(ctx, TL_E_PARSE, "graph artifact '%s': not a JSON object (line %d: %s)", graph,
                  je.line, je.text);
  }
  tl_graph_artifact *a = tl_calloc(1, sizeof *a);
  json_t *hsec = kind ? json_object_get(root, kind->name) : NULL;
  int *hargs = NULL;
  slot_desc *sd = NULL;
  tl_array **storages = NULL;
  int nsto = 0;
  json_t *libs, *kernels, *slots, *steps, *inputs, *outputs, *sto = NULL;
  const char *devname = json_string_value(json_object_get(root, "device"));
  const char *fmt = json_string_value(json_object_get(root, "format"));
  int64_t version = 0, arena = 0, pb = 0;
  if (!fmt || strcmp(fmt, "tunelua-graph")) {
    rc = tl_err(ctx, TL_E_PARSE, "graph artifact '%s': 'format' is not \"tunelua-graph\"", graph);
    goto done;
  }
  a->device = TL_DEV_CPU;
  if (json_object_get(root, "device") && (!devname || (strcmp(devname, "cpu") && strcmp(devname, "opencl")))) {
    rc = tl_err(ctx, TL_E_PARSE, "graph artifact '%s': 'device' must be \"cpu\" or \"opencl\"", graph);
    goto done;
  }
  if (devname && !strcmp(devname, "opencl")) a->device = TL_DEV_OPENCL;
  int ocl = a->device == TL_DEV_OPENCL;
  if (hsec && (!json_is_object(hsec) || ocl)) {
    rc = tl_err(ctx, TL_E_PARSE, "graph artifact: '%s': expected an object in a cpu graph", kind->name);
    goto done;
  }
  if (ocl && (rc = get_array(ctx, root, "storages", ART_MAX_SLOTS, &sto))) goto done;
  nsto = sto ? (int)json_array_size(sto) : 0;
  if ((rc = get_int(ctx, json_object_get(root, "version"), "version", 1, 1, &version)) ||
      (rc = get_int(ctx, json_object_get(root, "arena"), "arena", 0, max_bytes, &arena)) ||
      (rc = get_int(ctx, json_object_get(root, "params_bytes"), "params_bytes", 0, max_bytes, &pb)) ||
      (rc = get_array(ctx, root, "libs", ART_MAX_LIBS, &libs)) ||
      (rc = get_array(ctx, root, "kernels", ART_MAX_KERNELS, &kernels)) ||
      (rc = get_array(ctx, root, "slots", ART_MAX_SLOTS, &slots)) ||
      (rc = get_array(ctx, root, "steps", ART_MAX_STEPS, &steps)) ||
      (rc = get_array(ctx, root, "inputs", ART_MAX_IO, &inputs)) ||
      (rc = get_array(ctx, root, "outputs", ART_MAX_IO, &outputs)))
    goto done;
  /* 1. the description, checked whole */
  int nslots = (int)json_array_size(slots);
  sd = tl_calloc((size_t)nslots + 1, sizeof *sd);
  int64_t total = arena;
  int64_t *sto_bytes = tl_calloc((size_t)nsto + 1, sizeof(int64_t));
  for (int i = 0; i < nsto && !rc; i++) {
    char where[64];
    snprintf(where, sizeof where, "storages[%d]", i);
    rc = get_int(ctx, json_array_get(sto, (size_t)i), where, 1, max_bytes, &sto_bytes[i]);
    total += sto_bytes[i];
    if (!rc && total > max_bytes)
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: the storages need more than %lld bytes",
                  (long long)max_bytes);
  }
  for (int i = 0; i < nslots && !rc; i++) {
    rc = parse_slot(ctx, json_array_get(slots, (size_t)i), i, &sd[i]);
    if (rc) break;
    if ((sd[i].kind == 0 && ocl) || (sd[i].kind == 3 && !ocl))
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: slots[%d]: a %s slot in a %s graph", i,
                  ocl ? "view" : "storage", ocl ? "opencl" : "cpu");
    else if (sd[i].kind == 3 && (sd[i].offset >= nsto || sd[i].nbytes > sto_bytes[sd[i].offset]))
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: slots[%d]: %lld bytes do not fit storage %lld "
                  "(%d storages)", i, (long long)sd[i].nbytes, (long long)sd[i].offset, nsto);
    else if (sd[i].kind == 0 && (sd[i].offset + sd[i].nbytes > arena || sd[i].offset % 64))
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: slots[%d]: %lld bytes at offset %lld do not "
                  "fit the arena of %lld bytes (64-byte aligned)", i, (long long)sd[i].nbytes,
                  (long long)sd[i].offset, (long long)arena);
    else if (sd[i].kind == 1 && sd[i].offset + sd[i].nbytes > pb)
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: slots[%d]: param bytes [%lld, %lld) outside "
                  "the params of %lld bytes", i, (long long)sd[i].offset,
                  (long long)(sd[i].offset + sd[i].nbytes), (long long)pb);
    if (sd[i].kind == 1 || sd[i].kind == 2) total += sd[i].nbytes;
    if (!rc && total > max_bytes)
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: the arena and arrays need more than %lld bytes",
                  (long long)max_bytes);
  }
  for (size_t i = 0; i < json_array_size(libs) && !rc; i++)
    if (!plain_name(json_string_value(json_array_get(libs, i))))
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: libs[%zu]: expected a plain file name", i);
  for (size_t i = 0; i < json_array_size(kernels) && !rc; i++) {
    json_t *k = json_array_get(kernels, i);
    int64_t li;
    char where[64];
    snprintf(where, sizeof where, "kernels[%zu].lib", i);
    if (ocl) {
      if (!plain_name(json_string_value(json_object_get(k, "source"))) ||
          !plain_name(json_string_value(json_object_get(k, "manifest"))))
        rc = tl_err(ctx, TL_E_PARSE, "graph artifact: kernels[%zu]: 'source' and 'manifest' must "
                    "be plain file names", i);
      continue;
    }
    json_t *hk = host_kernel(kind, k);
    if (hk) {
      if (!json_is_object(hk))
        rc = tl_err(ctx, TL_E_PARSE, "graph artifact: kernels[%zu].%s: expected an object", i,
                    kind->name);
      else if (!hsec)
        rc = tl_err(ctx, TL_E_PARSE, "graph artifact: kernels[%zu].%s: the description has no "
                    "'%s' section", i, kind->name, kind->name);
      continue;
    }
    rc = get_int(ctx, json_object_get(k, "lib"), where, 0, (int64_t)json_array_size(libs) - 1, &li);
    if (!rc && !json_string_value(json_object_get(k, "name")))
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: kernels[%zu].name: expected a string", i);
  }
  for (size_t i = 0; i < json_array_size(steps) && !rc; i++) {
    json_t *st = json_array_get(steps, i), *args = json_object_get(st, "args");
    int64_t v;
    char where[64];
    snprintf(where, sizeof where, "steps[%zu].kernel", i);
    rc = get_int(ctx, json_object_get(st, "kernel"), where, 0, (int64_t)json_array_size(kernels) - 1, &v);
    if (!rc && (!json_is_array(args) || json_array_size(args) > ART_MAX_ARGS))
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: steps[%zu].args: expected a list of at most "
                  "%d slots", i, ART_MAX_ARGS);
    for (size_t j = 0; !rc && j < json_array_size(args); j++) {
      snprintf(where, sizeof where, "steps[%zu].args[%zu]", i, j);
      rc = get_int(ctx, json_array_get(args, j), where, 0, nslots - 1, &v);
    }
  }
  for (size_t i = 0; i < json_array_size(inputs) && !rc; i++) {
    json_t *in = json_array_get(inputs, i);
    int64_t v;
    char where[64];
    snprintf(where, sizeof where, "inputs[%zu].slot", i);
    if (!json_string_value(json_object_get(in, "name")))
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: inputs[%zu].name: expected a string", i);
    if (!rc) rc = get_int(ctx, json_object_get(in, "slot"), where, 0, nslots - 1, &v);
    if (!rc && sd[v].kind != 2)
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: %s: slot %lld is not an array of its own", where,
                  (long long)v);
    if (!rc) {
      a->in_name[a->nin] = tl_strdup(json_string_value(json_object_get(in, "name")));
      a->in_slot[a->nin++] = (int)v;
    }
  }
  for (size_t i = 0; i < json_array_size(outputs) && !rc; i++) {
    int64_t v;
    char where[64];
    snprintf(where, sizeof where, "outputs[%zu]", i);
    rc = get_int(ctx, json_array_get(outputs, i), where, 0, nslots - 1, &v);
    if (!rc) a->out_slot[a->nout++] = (int)v;
  }
  free(sto_bytes);
  if (rc) goto done;
  hargs = tl_calloc(json_array_size(kernels) + 1, sizeof(int));   /* host kernels' arity + 1 */
  /* 2. the params file */
  if (pb > 0) {
    if (!params || !*params) {
      rc = tl_err(ctx, TL_E_ARG, "graph artifact '%s' has %lld bytes of params, but no params file "
                  "was given", graph, (long long)pb);
      goto done;
    }
    path = tl_sprintf("%s/%s", dir, params);
    rc = tl_read_file(ctx, path, &pbytes, &plen);
    free(path);
    if (rc) goto done;
    if ((int64_t)plen != pb) {
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: the params file '%s' has %zu bytes, the graph "
                  "expects %lld", params, plen, (long long)pb);
      goto done;
    }
  }
  /* 3. the executor: the host kind's state, storages, slots in order, kernels, steps */
  if (hsec) {
    char *st = json_dumps(hsec, JSON_COMPACT);
    rc = kind->open(ctx, st, max_bytes - total, &a->hstate);
    free(st);
    if (rc) {
      tl_err_prefix(ctx, "graph artifact: '%s': ", kind->name);
      goto done;
    }
    a->kind = kind;
  }
  if ((rc = tl_graph_exec_new(ctx, ocl ? 0 : arena, &a->e))) goto done;
  storages = tl_calloc((size_t)nsto + 1, sizeof(tl_array *));
  for (int i = 0; i < nsto && !rc; i++) {
    int64_t nb = json_integer_value(json_array_get(sto, (size_t)i));
    rc = tl_array_empty(ctx, 1, &nb, TL_UINT8, TL_DEV_OPENCL, dev, &storages[i]);
  }
  for (int i = 0; i < nslots && !rc; i++) {
    slot_desc *d = &sd[i];
    int got = -1;
    if (d->kind == 0) {
      rc = tl_graph_exec_slot_view(ctx, a->e, d->offset, d->ndim, d->shape, d->dtype, &got);
    } else if (d->kind == 3) {
      rc = tl_graph_exec_slot_storage(ctx, a->e, storages[d->offset], d->ndim, d->shape, d->dtype,
                                      &got);
    } else {
      tl_array *arr = NULL;
      rc = device_array(ctx, d, a->device, dev, d->kind == 1 ? pbytes + d->offset : NULL, &arr);
      if (!rc) rc = tl_graph_exec_slot_array(ctx, a->e, arr, &got);
      tl_array_free(arr);
    }
    if (!rc && got != i) rc = tl_err(ctx, TL_E_INTERNAL, "graph artifact: slot %d became %d", i, got);
  }
  if (ocl) a->ocl = tl_calloc(json_array_size(kernels) + 1, sizeof(tl_ocl_module *));
  for (size_t i = 0; ocl && i < json_array_size(kernels) && !rc; i++) {
    json_t *k = json_array_get(kernels, i);
    const char *sn = json_string_value(json_object_get(k, "source"));
    char *src = read_text(ctx, dir, sn, "OpenCL source");
    char *man = src ? read_text(ctx, dir, json_string_value(json_object_get(k, "manifest")), "manifest") : NULL;
    if (!src || !man) rc = TL_E_PARSE;
    if (!rc) rc = tl_ocl_module_from_source(ctx, src, man, dev, &a->ocl[a->nocl]);
    if (rc) tl_err_prefix(ctx, "graph artifact: kernels[%zu]: ", i);
    free(src);
    free(man);
    if (!rc) rc = tl_graph_exec_add_kernel_ocl(ctx, a->e, a->ocl[a->nocl++], sn, NULL);
  }
  for (size_t i = 0; i < json_array_size(libs) && !rc; i++) {
    path = tl_sprintf("%s/%s", dir, json_string_value(json_array_get(libs, i)));
    rc = tl_module_load(ctx, path, NULL, 0, 0, &a->libs[a->nlibs]);
    free(path);
    if (!rc) a->nlibs++;
  }
  for (size_t i = 0; !ocl && i < json_array_size(kernels) && !rc; i++) {
    json_t *k = json_array_get(kernels, i), *hk = host_kernel(kind, k);
    int got = -1, na = 0;
    if (hk) {
      char *kt = json_dumps(hk, JSON_COMPACT);
      rc = kind->add(ctx, a->hstate, kt, a->e, &got, &na);
      free(kt);
      if (rc) tl_err_prefix(ctx, "graph artifact: kernels[%zu].%s: ", i, kind->name);
      hargs[i] = na + 1;
    } else {
      rc = tl_graph_exec_add_kernel(ctx, a->e, a->libs[json_integer_value(json_object_get(k, "lib"))],
                                    json_string_value(json_object_get(k, "name")), &got);
    }
    if (!rc && got != (int)i)
      rc = tl_err(ctx, TL_E_INTERNAL, "graph artifact: kernel %zu became %d", i, got);
  }
  a->nkernels = (int)json_array_size(kernels);
  for (size_t i = 0; i < json_array_size(steps) && !rc; i++) {
    json_t *st = json_array_get(steps, i), *args = json_object_get(st, "args");
    int ids[ART_MAX_ARGS];
    int na = (int)json_array_size(args);
    for (int j = 0; j < na; j++) ids[j] = (int)json_integer_value(json_array_get(args, (size_t)j));
    int64_t ki = json_integer_value(json_object_get(st, "kernel"));
    if (hargs[ki] && hargs[ki] - 1 != na) {
      rc = tl_err(ctx, TL_E_PARSE, "graph artifact: steps[%zu].args: %d slots, kernel %lld (%s) "
                  "takes %d", i, na, (long long)ki, kind->name, hargs[ki] - 1);
      break;
    }
    rc = tl_graph_exec_add_step(ctx, a->e, (int)json_integer_value(json_object_get(st, "kernel")),
                                ids, na);
  }
  a->nsteps = (int)json_array_size(steps);
done:
  free(hargs);
  for (int i = 0; storages && i < nsto; i++) tl_array_free(storages[i]);   /* slots keep them */
  free(storages);
  free(sd);
  free(pbytes);
  json_decref(root);
  if (rc) {
    tl_graph_artifact_free(a);
    return rc;
  }
  *out = a;
  return TL_OK;
}

TL_EXPORT tl_graph_exec *tl_graph_artifact_exec(tl_graph_artifact *a) { return a ? a->e : NULL; }
TL_EXPORT int tl_graph_artifact_device(const tl_graph_artifact *a) { return a ? a->device : TL_DEV_CPU; }
TL_EXPORT int tl_graph_artifact_num_inputs(const tl_graph_artifact *a) { return a ? a->nin : 0; }
TL_EXPORT int tl_graph_artifact_num_outputs(const tl_graph_artifact *a) { return a ? a->nout : 0; }
TL_EXPORT int tl_graph_artifact_num_steps(const tl_graph_artifact *a) { return a ? a->nsteps : 0; }
TL_EXPORT const char *tl_graph_artifact_input_name(const tl_graph_artifact *a, int i) {
  return a && i >= 0 && i < a->nin ? a->in_name[i] : NULL;
}
TL_EXPORT int tl_graph_artifact_input_slot(const tl_graph_artifact *a, int i) {
  return a && i >= 0 && i < a->nin ? a->in_slot[i] : -1;
}
TL_EXPORT int tl_graph_artifact_output_slot(const tl_graph_artifact *a, int i) {
  return a && i >= 0 && i < a->nout ? a->out_slot[i] : -1;
}

