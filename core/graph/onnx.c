/*
** onnx.c -- the ONNX reader: models, their graphs, and ONNX test-data files.
**
** Files are read whole and unpacked by protobuf-c into the structs generated
** from onnx.proto and core/graph/onnx-data.proto at build time; the public
** handles (tl_onnx_graph, tl_onnx_node, ...) are those structs, read through
** the casts of onnx.h, so a loaded model is one protobuf-c message freed in
** one call. Nothing here changes the messages after unpacking.
**
** When protobuf-c refuses the bytes it says nothing about why, so
** tl_onnx_unpack walks the wire format against the message descriptors to
** name the first field that is truncated or of the wrong wire type, with its
** path ("graph.node[3].attribute[0]") and byte offset.
**
** Tensors become host tl_arrays: float32, float16, float64, int8, uint8,
** int16, int32, int64 and bool, from raw_data (little-endian on disk) or the
** typed repeated fields (float_data; int32_data, which also carries float16
** bit patterns, int8, uint8, int16 and bool; int64_data; double_data), or
** from external data next to the model. Other ONNX element types (uint16 and
** up, bfloat16, string, complex) have no tunelua dtype and are refused with
** TL_E_DTYPE; their type and shape stay readable through the handles.
*/
#include "onnx.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

/* ---- allocation ---------------------------------------------------------------------- */

/* One trailing NUL after every block: see onnx.h. */
static void *onnx_alloc(void *ud, size_t n) {
  TL_UNUSED(ud);
  char *p = malloc(n + 1);
  if (p) p[n] = 0;
  return p;
}

static void onnx_free(void *ud, void *p) {
  TL_UNUSED(ud);
  free(p);
}

ProtobufCAllocator tl_onnx_allocator = {onnx_alloc, onnx_free, NULL};

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* ---- names ----------------------------------------------------------------------------- */

static const char *const elem_type_names[] = {
    "undefined", "float32", "uint8",  "int8",   "uint16",    "int16",      "int32",   "int64", "string",
    "bool",      "float16", "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16"};

TL_EXPORT const char *tl_onnx_elem_type_name(int t) {
  return t >= 0 && t < (int)TL_ARRAY_SIZE(elem_type_names) ? elem_type_names[t] : "?";
}

static int elem_type_to_dtype(int t) {
  switch (t) {
    case TL_ONNX_FLOAT: return TL_FLOAT32;
    case TL_ONNX_UINT8: return TL_UINT8;
    case TL_ONNX_INT8: return TL_INT8;
    case TL_ONNX_INT16: return TL_INT16;
    case TL_ONNX_INT32: return TL_INT32;
    case TL_ONNX_INT64: return TL_INT64;
    case TL_ONNX_BOOL: return TL_BOOL;
    case TL_ONNX_FLOAT16: return TL_FLOAT16;
    case TL_ONNX_DOUBLE: return TL_FLOAT64;
    default: return -1;
  }
}

TL_EXPORT int tl_onnx_elem_type_dtype(tl_ctx *ctx, int elem_type, int *dtype) {
  int d = elem_type_to_dtype(elem_type);
  if (d < 0) {
    if (elem_type <= 0 || elem_type >= (int)TL_ARRAY_SIZE(elem_type_names))
      return tl_err(ctx, TL_E_DTYPE, "unknown ONNX data type code %d", elem_type);
    return tl_err(ctx, TL_E_DTYPE, "ONNX element type %s (%d) has no tunelua dtype",
                  elem_type_names[elem_type], elem_type);
  }
  *dtype = d;
  return TL_OK;
}

static const char *const attr_type_names[] = {
    "UNDEFINED", "FLOAT",   "INT",    "STRING",        "TENSOR",         "GRAPH",      "FLOATS",
    "INTS",      "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO",
    "TYPE_PROTOS"};

TL_EXPORT const char *tl_onnx_attr_type_name(int t) {
  return t >= 0 && t < (int)TL_ARRAY_SIZE(attr_type_names) ? attr_type_names[t] : "?";
}

TL_EXPORT const char *tl_onnx_kind_name(int kind) {
  switch (kind) {
    case TL_ONNX_KIND_TENSOR: return "tensor";
    case TL_ONNX_KIND_SEQUENCE: return "sequence";
    case TL_ONNX_KIND_MAP: return "map";
    case TL_ONNX_KIND_SPARSE_TENSOR: return "sparse_tensor";
    case TL_ONNX_KIND_OPTIONAL: return "optional";
    default: return "none";
  }
}

char *tl_onnx_dims_str(char *buf, size_t n, int ndim, const int64_t *dims) {
  size_t at = 0;
  if (n == 0) return buf;
  buf[0] = 0;
  at += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, i ? ", " : "", dims[i]);
  if (at < n) snprintf(buf + at, n - at, "]");
  return buf;
}

/* ---- the wire-format diagnosis --------------------------------------------------------- */

#define WIRE_MAX_DEPTH 64

/* 0: ok; -1: runs past the end; -2: longer than 10 bytes. */
static int read_varint(const uint8_t *p, size_t left, uint64_t *v, size_t *used) {
  uint64_t x = 0;
  for (size_t i = 0; i < 10; i++) {
    if (i >= left) return -1;
    x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) {
      *v = x;
      *used = i + 1;
      return 0;
    }
  }
  return -2;
}

static const char *wire_type_name(int wt) {
  static const char *const names[] = {"varint",    "fixed64",   "length-delimited", "start-group",
                                      "end-group", "fixed32"};
  return wt >= 0 && wt < 6 ? names[wt] : "invalid";
}

/* The wire type a field is written with; *packed: repeated scalars may also
** come length-delimited. */
static int field_wire_type(const ProtobufCFieldDescriptor *f, int *packed) {
  int wt;
  switch (f->type) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: wt = 5; break;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: wt = 1; break;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: wt = 2; break;
    default: wt = 0; break;  /* the varint types, bool, enum */
  }
  *packed = f->label == PROTOBUF_C_LABEL_REPEATED && wt != 2;
  return wt;
}

typedef struct {
  const uint8_t *data;         /* the whole buffer: offsets are reported from its start */
  char *msg;                   /* the problem, when found */
  size_t cap;
} wire_walk;

/* Walk the fields of one message in data[start, end); path names it ("" at
** the top). Returns 1 with w->msg set at the first problem, else 0. */
static int wire_check(wire_walk *w, const ProtobufCMessageDescriptor *d, size_t start, size_t end,
                      const char *path, int depth) {
  if (depth > WIRE_MAX_DEPTH) return 0;
  unsigned *counts = d ? tl_calloc(d->n_fields + 1, sizeof *counts) : NULL;
  size_t i = start;
  int bad = 0;
  char label[512];
  while (i < end && !bad) {
    size_t at = i;
    uint64_t key, v = 0;
    size_t used = 0;
    int r = read_varint(w->data + i, end - i, &key, &used);
    if (r) {
      snprintf(w->msg, w->cap, "%s: field key at byte %zu %s", r == -1 ? "truncated" : "corrupt",
               at, r == -1 ? "runs past the end" : "is longer than 10 bytes");
      bad = 1;
      break;
    }
    i += used;
    uint64_t num = key >> 3;
    int wt = (int)(key & 7);
    const ProtobufCFieldDescriptor *f =
        d && num > 0 && num <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)num)
                                          : NULL;
    if (f)
      snprintf(label, sizeof label, "%s%s%s (field %u)", path, *path ? "." : "", f->name, f->id);
    else
      snprintf(label, sizeof label, "%s%sfield %" PRIu64, path, *path ? " " : "", num);
    if (num == 0 || num > 0x1fffffff) {
      snprintf(w->msg, w->cap, "corrupt: invalid field number %" PRIu64 " at byte %zu", num, at);
      bad = 1;
      break;
    }
    if (wt != 0 && wt != 1 && wt != 2 && wt != 5) {
      snprintf(w->msg, w->cap, "corrupt: %s at byte %zu has wire type %d (%s), not supported", label,
               at, wt, wire_type_name(wt));
      bad = 1;
      break;
    }
    if (f) {
      int packed, want = field_wire_type(f, &packed);
      if (wt != want && !(packed && wt == 2)) {
        snprintf(w->msg, w->cap, "corrupt: %s at byte %zu has wire type %s, expected %s", label, at,
                 wire_type_name(wt), wire_type_name(want));
        bad = 1;
        break;
      }
    }
    size_t left = end - i;
    switch (wt) {
      case 0:
        r = read_varint(w->data + i, left, &v, &used);
        if (r) {
          snprintf(w->msg, w->cap, "%s: %s at byte %zu: the varint %s", r == -1 ? "truncated" : "corrupt",
                   label, at, r == -1 ? "runs past the end" : "is longer than 10 bytes");
          bad = 1;
        }
        i += used;
        break;
      case 1:
      case 5: {
        size_t need = wt == 1 ? 8 : 4;
        if (left < need) {
          snprintf(w->msg, w->cap, "truncated: %s at byte %zu needs %zu bytes, %zu left", label, at,
                   need, left);
          bad = 1;
        }
        i += need;
        break;
      }
      case 2:
        r = read_varint(w->data + i, left, &v, &used);
        if (r) {
          snprintf(w->msg, w->cap, "%s: %s at byte %zu: the length %s", r == -1 ? "truncated" : "corrupt",
                   label, at, r == -1 ? "runs past the end" : "is longer than 10 bytes");
          bad = 1;
          break;
        }
        i += used;
        left = end - i;
        if (v > left) {
          snprintf(w->msg, w->cap, "truncated: %s at byte %zu declares %" PRIu64 " bytes, only %zu left",
                   label, at, v, left);
          bad = 1;
          break;
        }
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
          char sub[512];
          unsigned k = (unsigned)(f - d->fields);
          if (f->label == PROTOBUF_C_LABEL_REPEATED)
            snprintf(sub, sizeof sub, "%s%s%s[%u]", path, *path ? "." : "", f->name, counts[k]);
          else
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", f->name);
          counts[k]++;
          bad = wire_check(w, f->descriptor, i, i + (size_t)v, sub, depth + 1);
        }
        i += (size_t)v;
        break;
    }
  }
  free(counts);
  return bad;
}

int tl_onnx_unpack(tl_ctx *ctx, const ProtobufCMessageDescriptor *d, const void *data, size_t len,
                   const char *what, ProtobufCMessage **out) {
  *out = protobuf_c_message_unpack(d, &tl_onnx_allocator, len, data);
  if (*out) return TL_OK;
  char msg[768];
  wire_walk w = {data, msg, sizeof msg};
  if (!wire_check(&w, d, 0, len, "", 0))
    snprintf(msg, sizeof msg, "corrupt protobuf data that protobuf-c refuses (%zu bytes)", len);
  return tl_err(ctx, TL_E_PARSE, "%s: malformed %s: %s", what, d->short_name, msg);
}

/* Read a whole file and unpack it. */
static int load_message(tl_ctx *ctx, const char *path, const ProtobufCMessageDescriptor *d,
                        ProtobufCMessage **out) {
  char *buf;
  size_t len;
  *out = NULL;
  if (!path) return tl_err(ctx, TL_E_ARG, "ONNX: path is NULL");
  int rc = tl_read_file(ctx, path, &buf, &len);
  if (rc) return rc;
  rc = tl_onnx_unpack(ctx, d, buf, len, path, out);
  free(buf);
  return rc;
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return tl_strdup(".");
  if (slash == path) return tl_strdup("/");
  return tl_strndup(path, (size_t)(slash - path));
}

/* ---- test-data discovery --------------------------------------------------------------- */

static const char *const testdata_dirs[] = {
    "/usr/share/libonnx-testdata/data/node",  /* Debian's libonnx-testdata */
    "/usr/local/share/libonnx-testdata/data/node",
};

TL_EXPORT const char *tl_onnx_testdata_dir(void) {
  const char *env = getenv("TUNELUA_ONNX_TESTDATA");
  if (env && *env) return env;
  for (size_t i = 0; i < TL_ARRAY_SIZE(testdata_dirs); i++) {
    struct stat st;
    if (stat(testdata_dirs[i], &st) == 0 && S_ISDIR(st.st_mode)) return testdata_dirs[i];
  }
  return NULL;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

TL_EXPORT int tl_onnx_list_dir(tl_ctx *ctx, const char *dir, char *buf, size_t cap, size_t *need) {
  if (!dir || !need) return tl_err(ctx, TL_E_ARG, "tl_onnx_list_dir: dir or need is NULL");
  DIR *dp = opendir(dir);
  if (!dp) return tl_err(ctx, TL_E_IO, "cannot open directory '%s': %s", dir, strerror(errno));
  TL_VEC(char *) names = {0};
  struct dirent *e;
  size_t total = 0;
  while ((e = readdir(dp)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    TL_VEC_PUSH(names, tl_strdup(e->d_name));
    total += strlen(e->d_name) + 1;
  }
  closedir(dp);
  if (names.n > 1) qsort(names.v, (size_t)names.n, sizeof *names.v, cmp_str);
  *need = total;
  if (buf && total <= cap) {
    size_t at = 0;
    for (int i = 0; i < names.n; i++) {
      size_t l = strlen(names.v[i]) + 1;
      memcpy(buf + at, names.v[i], l);
      at += l;
    }
  }
  for (int i = 0; i < names.n; i++) free(names.v[i]);
  TL_VEC_FREE(names);
  return TL_OK;
}

/* ---- models ---------------------------------------------------------------------------- */

/* A model from an unpacked message; takes msg (freed on failure). */
static int model_from_msg(tl_ctx *ctx, ProtobufCMessage *msg, const char *path, const char *dir,
                          tl_onnx_model **out) {
  Onnx__ModelProto *pb = (Onnx__ModelProto *)msg;
  if (!pb->graph) {
    protobuf_c_message_free_unpacked(msg, &tl_onnx_allocator);
    return tl_err(ctx, TL_E_PARSE, "%s: not an ONNX model: the ModelProto has no graph", path);
  }
  tl_onnx_model *m = tl_calloc(1, sizeof *m);
  m->pb = pb;
  m->path = tl_strdup(path);
  m->dir = dir ? tl_strdup(dir) : dir_of(path);
  *out = m;
  return TL_OK;
}

TL_EXPORT int tl_onnx_model_load(tl_ctx *ctx, const char *path, tl_onnx_model **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_onnx_model_load: out is NULL");
  *out = NULL;
  ProtobufCMessage *msg;
  int rc = load_message(ctx, path, &onnx__model_proto__descriptor, &msg);
  if (rc) return rc;
  return model_from_msg(ctx, msg, path, NULL, out);
}

TL_EXPORT int tl_onnx_model_load_bytes(tl_ctx *ctx, const void *data, size_t len, const char *name,
                                       const char *dir, tl_onnx_model **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_onnx_model_load_bytes: out is NULL");
  *out = NULL;
  if (!data && len) return tl_err(ctx, TL_E_ARG, "tl_onnx_model_load_bytes: data is NULL");
  if (!name) name = "<bytes>";
  ProtobufCMessage *msg;
  int rc = tl_onnx_unpack(ctx, &onnx__model_proto__descriptor, data ? data : "", len, name, &msg);
  if (rc) return rc;
  return model_from_msg(ctx, msg, name, dir ? dir : ".", out);
}

TL_EXPORT void tl_onnx_model_free(tl_onnx_model *m) {
  if (!m) return;
  protobuf_c_message_free_unpacked(&m->pb->base, &tl_onnx_allocator);
  free(m->path);
  free(m->dir);
  free(m);
}

TL_EXPORT int64_t tl_onnx_model_ir_version(const tl_onnx_model *m) {
  return m->pb->has_ir_version ? m->pb->ir_version : 0;
}
TL_EXPORT const char *tl_onnx_model_producer(const tl_onnx_model *m) {
  return str_or_empty(m->pb->producer_name);
}
TL_EXPORT const char *tl_onnx_model_dir(const tl_onnx_model *m) { return m->dir; }
TL_EXPORT int tl_onnx_model_num_opsets(const tl_onnx_model *m) { return (int)m->pb->n_opset_import; }

TL_EXPORT const char *tl_onnx_model_opset_domain(const tl_onnx_model *m, int i) {
  if (i < 0 || (size_t)i >= m->pb->n_opset_import) return "";
  return str_or_empty(m->pb->opset_import[i]->domain);
}

TL_EXPORT int64_t tl_onnx_model_opset_version(const tl_onnx_model *m, int i) {
  if (i < 0 || (size_t)i >= m->pb->n_opset_import) return 0;
  return m->pb->opset_import[i]->has_version ? m->pb->opset_import[i]->version : 0;
}

static int is_default_domain(const char *d) { return !d || !*d || !strcmp(d, "ai.onnx"); }

TL_EXPORT int64_t tl_onnx_model_opset(const tl_onnx_model *m, const char *domain) {
  for (size_t i = 0; i < m->pb->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->pb->opset_import[i];
    const char *d = o->domain;
    int same = is_default_domain(domain) ? is_default_domain(d) : d && !strcmp(d, domain);
    if (same) return o->has_version ? o->version : 0;
  }
  return -1;
}

TL_EXPORT const tl_onnx_graph *tl_onnx_model_graph(const tl_onnx_model *m) {
  return (const tl_onnx_graph *)(const void *)m->pb->graph;
}

/* ---- graphs ------------------------------------------------------------------------------ */

TL_EXPORT const char *tl_onnx_graph_name(const tl_onnx_graph *g) {
  return str_or_empty(tl_onnx_graph_pb(g)->name);
}
TL_EXPORT int tl_onnx_graph_num_nodes(const tl_onnx_graph *g) { return (int)tl_onnx_graph_pb(g)->n_node; }

TL_EXPORT const tl_onnx_node *tl_onnx_graph_node(const tl_onnx_graph *g, int i) {
  const Onnx__GraphProto *pb = tl_onnx_graph_pb(g);
  if (i < 0 || (size_t)i >= pb->n_node) return NULL;
  return (const tl_onnx_node *)(const void *)pb->node[i];
}

static Onnx__ValueInfoProto **graph_values(const Onnx__GraphProto *pb, int which, size_t *n) {
  switch (which) {
    case TL_ONNX_GRAPH_INPUTS: *n = pb->n_input; return pb->input;
    case TL_ONNX_GRAPH_OUTPUTS: *n = pb->n_output; return pb->output;
    case TL_ONNX_GRAPH_VALUE_INFO: *n = pb->n_value_info; return pb->value_info;
    default: *n = 0; return NULL;
  }
}

TL_EXPORT int tl_onnx_graph_num_values(const tl_onnx_graph *g, int which) {
  size_t n;
  graph_values(tl_onnx_graph_pb(g), which, &n);
  return (int)n;
}

static const Onnx__ValueInfoProto *graph_value(const tl_onnx_graph *g, int which, int i) {
  size_t n;
  Onnx__ValueInfoProto **v = graph_values(tl_onnx_graph_pb(g), which, &n);
  return i >= 0 && (size_t)i < n ? v[i] : NULL;
}

TL_EXPORT const char *tl_onnx_graph_value_name(const tl_onnx_graph *g, int which, int i) {
  const Onnx__ValueInfoProto *v = graph_value(g, which, i);
  return v ? str_or_empty(v->name) : "";
}

TL_EXPORT const tl_onnx_type *tl_onnx_graph_value_type(const tl_onnx_graph *g, int which, int i) {
  const Onnx__ValueInfoProto *v = graph_value(g, which, i);
  return v ? (const tl_onnx_type *)(const void *)v->type : NULL;
}

TL_EXPORT int tl_onnx_graph_num_initializers(const tl_onnx_graph *g) {
  return (int)tl_onnx_graph_pb(g)->n_initializer;
}

TL_EXPORT const tl_onnx_tensor *tl_onnx_graph_initializer(const tl_onnx_graph *g, int i) {
  const Onnx__GraphProto *pb = tl_onnx_graph_pb(g);
  if (i < 0 || (size_t)i >= pb->n_initializer) return NULL;
  return (const tl_onnx_tensor *)(const void *)pb->initializer[i];
}

/* ---- nodes ------------------------------------------------------------------------------- */

TL_EXPORT const char *tl_onnx_node_op_type(const tl_onnx_node *n) {
  return str_or_empty(tl_onnx_node_pb(n)->op_type);
}
TL_EXPORT const char *tl_onnx_node_name(const tl_onnx_node *n) { return str_or_empty(tl_onnx_node_pb(n)->name); }
TL_EXPORT const char *tl_onnx_node_domain(const tl_onnx_node *n) {
  return str_or_empty(tl_onnx_node_pb(n)->domain);
}
TL_EXPORT int tl_onnx_node_num_inputs(const tl_onnx_node *n) { return (int)tl_onnx_node_pb(n)->n_input; }
TL_EXPORT int tl_onnx_node_num_outputs(const tl_onnx_node *n) { return (int)tl_onnx_node_pb(n)->n_output; }

TL_EXPORT const char *tl_onnx_node_input(const tl_onnx_node *n, int i) {
  const Onnx__NodeProto *pb = tl_onnx_node_pb(n);
  return i >= 0 && (size_t)i < pb->n_input ? str_or_empty(pb->input[i]) : "";
}

TL_EXPORT const char *tl_onnx_node_output(const tl_onnx_node *n, int i) {
  const Onnx__NodeProto *pb = tl_onnx_node_pb(n);
  return i >= 0 && (size_t)i < pb->n_output ? str_or_empty(pb->output[i]) : "";
}

/* ---- attributes -------------------------------------------------------------------------- */

static const Onnx__AttributeProto *node_attr(const tl_onnx_node *n, int k) {
  const Onnx__NodeProto *pb = tl_onnx_node_pb(n);
  return k >= 0 && (size_t)k < pb->n_attribute ? pb->attribute[k] : NULL;
}

/* The declared type, or (IR version < 3 left it out) the one whose field is set. */
static int attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return (int)a->type;
  if (a->has_f) return TL_ONNX_ATTR_FLOAT;
  if (a->has_i) return TL_ONNX_ATTR_INT;
  if (a->has_s) return TL_ONNX_ATTR_STRING;
  if (a->t) return TL_ONNX_ATTR_TENSOR;
  if (a->g) return TL_ONNX_ATTR_GRAPH;
  if (a->sparse_tensor) return TL_ONNX_ATTR_SPARSE_TENSOR;
  if (a->tp) return TL_ONNX_ATTR_TYPE_PROTO;
  if (a->n_floats) return TL_ONNX_ATTR_FLOATS;
  if (a->n_ints) return TL_ONNX_ATTR_INTS;
  if (a->n_strings) return TL_ONNX_ATTR_STRINGS;
  if (a->n_tensors) return TL_ONNX_ATTR_TENSORS;
  if (a->n_graphs) return TL_ONNX_ATTR_GRAPHS;
  if (a->n_sparse_tensors) return TL_ONNX_ATTR_SPARSE_TENSORS;
  if (a->n_type_protos) return TL_ONNX_ATTR_TYPE_PROTOS;
  return TL_ONNX_ATTR_UNDEFINED;
}

TL_EXPORT int tl_onnx_node_num_attrs(const tl_onnx_node *n) { return (int)tl_onnx_node_pb(n)->n_attribute; }

TL_EXPORT int tl_onnx_node_find_attr(const tl_onnx_node *n, const char *name) {
  const Onnx__NodeProto *pb = tl_onnx_node_pb(n);
  if (!name) return -1;
  for (size_t k = 0; k < pb->n_attribute; k++)
    if (pb->attribute[k]->name && !strcmp(pb->attribute[k]->name, name)) return (int)k;
  return -1;
}

TL_EXPORT const char *tl_onnx_attr_name(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = node_attr(n, k);
  return a ? str_or_empty(a->name) : "";
}

TL_EXPORT int tl_onnx_attr_type(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = node_attr(n, k);
  return a ? attr_type(a) : TL_ONNX_ATTR_UNDEFINED;
}

/* The attribute k if it has type t, else NULL. */
static const Onnx__AttributeProto *attr_of(const tl_onnx_node *n, int k, int t) {
  const Onnx__AttributeProto *a = node_attr(n, k);
  return a && attr_type(a) == t ? a : NULL;
}

static const char *bytes_str(const ProtobufCBinaryData *b, size_t *len) {
  if (len) *len = b->len;
  return b->data ? (const char *)b->data : "";  /* NUL-terminated: tl_onnx_allocator */
}

TL_EXPORT int64_t tl_onnx_attr_int(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_INT);
  return a ? a->i : 0;
}

TL_EXPORT double tl_onnx_attr_float(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_FLOAT);
  return a ? a->f : 0.0;
}

TL_EXPORT const char *tl_onnx_attr_string(const tl_onnx_node *n, int k, size_t *len) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_STRING);
  if (!a) {
    if (len) *len = 0;
    return NULL;
  }
  return bytes_str(&a->s, len);
}

TL_EXPORT const tl_onnx_tensor *tl_onnx_attr_tensor(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_TENSOR);
  return a ? (const tl_onnx_tensor *)(const void *)a->t : NULL;
}

TL_EXPORT const tl_onnx_graph *tl_onnx_attr_graph(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_GRAPH);
  return a ? (const tl_onnx_graph *)(const void *)a->g : NULL;
}

TL_EXPORT const tl_onnx_type *tl_onnx_attr_type_proto(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_TYPE_PROTO);
  return a ? (const tl_onnx_type *)(const void *)a->tp : NULL;
}

TL_EXPORT int tl_onnx_attr_count(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = node_attr(n, k);
  if (!a) return 0;
  switch (attr_type(a)) {
    case TL_ONNX_ATTR_FLOATS: return (int)a->n_floats;
    case TL_ONNX_ATTR_INTS: return (int)a->n_ints;
    case TL_ONNX_ATTR_STRINGS: return (int)a->n_strings;
    case TL_ONNX_ATTR_TENSORS: return (int)a->n_tensors;
    case TL_ONNX_ATTR_GRAPHS: return (int)a->n_graphs;
    case TL_ONNX_ATTR_SPARSE_TENSORS: return (int)a->n_sparse_tensors;
    case TL_ONNX_ATTR_TYPE_PROTOS: return (int)a->n_type_protos;
    default: return 0;
  }
}

TL_EXPORT const int64_t *tl_onnx_attr_ints(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_INTS);
  return a ? a->ints : NULL;
}

TL_EXPORT const float *tl_onnx_attr_floats(const tl_onnx_node *n, int k) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_FLOATS);
  return a ? a->floats : NULL;
}

TL_EXPORT const char *tl_onnx_attr_strings(const tl_onnx_node *n, int k, int j, size_t *len) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_STRINGS);
  if (!a || j < 0 || (size_t)j >= a->n_strings) {
    if (len) *len = 0;
    return NULL;
  }
  return bytes_str(&a->strings[j], len);
}

TL_EXPORT const tl_onnx_tensor *tl_onnx_attr_tensors(const tl_onnx_node *n, int k, int j) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_TENSORS);
  if (!a || j < 0 || (size_t)j >= a->n_tensors) return NULL;
  return (const tl_onnx_tensor *)(const void *)a->tensors[j];
}

TL_EXPORT const tl_onnx_graph *tl_onnx_attr_graphs(const tl_onnx_node *n, int k, int j) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_GRAPHS);
  if (!a || j < 0 || (size_t)j >= a->n_graphs) return NULL;
  return (const tl_onnx_graph *)(const void *)a->graphs[j];
}

TL_EXPORT const tl_onnx_type *tl_onnx_attr_type_protos(const tl_onnx_node *n, int k, int j) {
  const Onnx__AttributeProto *a = attr_of(n, k, TL_ONNX_ATTR_TYPE_PROTOS);
  if (!a || j < 0 || (size_t)j >= a->n_type_protos) return NULL;
  return (const tl_onnx_type *)(const void *)a->type_protos[j];
}

/* Find attribute name for a typed getter: *k = -1 when absent; an error
** when present with another type. */
static int attr_lookup(tl_ctx *ctx, const tl_onnx_node *n, const char *name, int want, int *k) {
  *k = -1;
  if (!n || !name) return tl_err(ctx, TL_E_ARG, "ONNX attribute getter: node or name is NULL");
  int i = tl_onnx_node_find_attr(n, name);
  if (i < 0) return TL_OK;
  int t = tl_onnx_attr_type(n, i);
  if (t != want) {
    const char *nm = tl_onnx_node_name(n);
    return tl_err(ctx, TL_E_PARSE, "%s node%s%s%s: attribute '%s' is %s, expected %s",
                  tl_onnx_node_op_type(n), *nm ? " '" : "", nm, *nm ? "'" : "", name,
                  tl_onnx_attr_type_name(t), tl_onnx_attr_type_name(want));
  }
  *k = i;
  return TL_OK;
}

TL_EXPORT int tl_onnx_node_get_int(tl_ctx *ctx, const tl_onnx_node *n, const char *name, int64_t dflt,
                                   int64_t *out) {
  int k, rc = attr_lookup(ctx, n, name, TL_ONNX_ATTR_INT, &k);
  if (rc) return rc;
  *out = k < 0 ? dflt : tl_onnx_attr_int(n, k);
  return TL_OK;
}

TL_EXPORT int tl_onnx_node_get_float(tl_ctx *ctx, const tl_onnx_node *n, const char *name, double dflt,
                                     double *out) {
  int k, rc = attr_lookup(ctx, n, name, TL_ONNX_ATTR_FLOAT, &k);
  if (rc) return rc;
  *out = k < 0 ? dflt : tl_onnx_attr_float(n, k);
  return TL_OK;
}

TL_EXPORT int tl_onnx_node_get_string(tl_ctx *ctx, const tl_onnx_node *n, const char *name,
                                      const char *dflt, const char **out) {
  int k, rc = attr_lookup(ctx, n, name, TL_ONNX_ATTR_STRING, &k);
  if (rc) return rc;
  *out = k < 0 ? dflt : tl_onnx_attr_string(n, k, NULL);
  return TL_OK;
}

TL_EXPORT int tl_onnx_node_get_ints(tl_ctx *ctx, const tl_onnx_node *n, const char *name,
                                    const int64_t **out, int *count) {
  int k, rc = attr_lookup(ctx, n, name, TL_ONNX_ATTR_INTS, &k);
  if (rc) return rc;
  *out = k < 0 ? NULL : tl_onnx_attr_ints(n, k);
  *count = k < 0 ? -1 : tl_onnx_attr_count(n, k);
  return TL_OK;
}

/* ---- types ------------------------------------------------------------------------------- */

TL_EXPORT int tl_onnx_type_kind(const tl_onnx_type *t) {
  return t ? (int)tl_onnx_type_pb(t)->value_case : TL_ONNX_KIND_NONE;
}

TL_EXPORT int tl_onnx_type_elem_type(const tl_onnx_type *t) {
  if (!t) return 0;
  const Onnx__TypeProto *pb = tl_onnx_type_pb(t);
  switch (pb->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
      return pb->tensor_type && pb->tensor_type->has_elem_type ? pb->tensor_type->elem_type : 0;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
      return pb->sparse_tensor_type && pb->sparse_tensor_type->has_elem_type
                 ? pb->sparse_tensor_type->elem_type
                 : 0;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
      return pb->map_type && pb->map_type->has_key_type ? pb->map_type->key_type : 0;
    default: return 0;
  }
}

TL_EXPORT const tl_onnx_type *tl_onnx_type_elem(const tl_onnx_type *t) {
  if (!t) return NULL;
  const Onnx__TypeProto *pb = tl_onnx_type_pb(t), *e = NULL;
  switch (pb->value_case) {
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: e = pb->sequence_type ? pb->sequence_type->elem_type : NULL; break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: e = pb->optional_type ? pb->optional_type->elem_type : NULL; break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: e = pb->map_type ? pb->map_type->value_type : NULL; break;
    default: break;
  }
  return (const tl_onnx_type *)(const void *)e;
}

static const Onnx__TensorShapeProto *type_shape(const tl_onnx_type *t) {
  if (!t) return NULL;
  const Onnx__TypeProto *pb = tl_onnx_type_pb(t);
  if (pb->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && pb->tensor_type)
    return pb->tensor_type->shape;
  if (pb->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE && pb->sparse_tensor_type)
    return pb->sparse_tensor_type->shape;
  return NULL;
}

TL_EXPORT int tl_onnx_type_ndim(const tl_onnx_type *t) {
  const Onnx__TensorShapeProto *s = type_shape(t);
  return s ? (int)s->n_dim : -1;
}

static const Onnx__TensorShapeProto__Dimension *type_dim(const tl_onnx_type *t, int d) {
  const Onnx__TensorShapeProto *s = type_shape(t);
  return s && d >= 0 && (size_t)d < s->n_dim ? s->dim[d] : NULL;
}

TL_EXPORT int64_t tl_onnx_type_dim(const tl_onnx_type *t, int d) {
  const Onnx__TensorShapeProto__Dimension *dim = type_dim(t, d);
  return dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ? dim->dim_value
                                                                                       : -1;
}

TL_EXPORT const char *tl_onnx_type_dim_param(const tl_onnx_type *t, int d) {
  const Onnx__TensorShapeProto__Dimension *dim = type_dim(t, d);
  return dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
             ? str_or_empty(dim->dim_param)
             : "";
}

/* ---- tensors ----------------------------------------------------------------------------- */

TL_EXPORT const char *tl_onnx_tensor_name(const tl_onnx_tensor *t) {
  return str_or_empty(tl_onnx_tensor_pb(t)->name);
}
TL_EXPORT int tl_onnx_tensor_elem_type(const tl_onnx_tensor *t) {
  const Onnx__TensorProto *pb = tl_onnx_tensor_pb(t);
  return pb->has_data_type ? pb->data_type : 0;
}
TL_EXPORT int tl_onnx_tensor_ndim(const tl_onnx_tensor *t) { return (int)tl_onnx_tensor_pb(t)->n_dims; }
TL_EXPORT const int64_t *tl_onnx_tensor_dims(const tl_onnx_tensor *t) { return tl_onnx_tensor_pb(t)->dims; }

/* Little-endian storage to host order, in place (nothing to do on a
** little-endian host). */
static void from_le(uint8_t *p, int64_t n, int esize) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  for (int64_t i = 0; i < n; i++, p += esize)
    for (int b = 0; b < esize / 2; b++) {
      uint8_t t = p[b];
      p[b] = p[esize - 1 - b];
      p[esize - 1 - b] = t;
    }
#else
  TL_UNUSED(p), TL_UNUSED(n), TL_UNUSED(esize);
#endif
}

/* Bools are one byte, 0 or 1: other non-zero bytes become 1. */
static void bool_to_01(uint8_t *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

/* Read external data (data_location EXTERNAL) into dst: nbytes from the file
** named by "location" (relative to base_dir) at "offset". */
static int read_external(tl_ctx *ctx, const Onnx__TensorProto *pb, const char *base_dir,
                         const char *what, void *dst, size_t nbytes) {
  const char *location = NULL;
  int64_t offset = 0, length = -1;
  for (size_t i = 0; i < pb->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = pb->external_data[i];
    const char *key = str_or_empty(e->key), *val = str_or_empty(e->value);
    char *end;
    if (!strcmp(key, "location")) {
      location = val;
    } else if (!strcmp(key, "offset") || !strcmp(key, "length")) {
      errno = 0;
      long long v = strtoll(val, &end, 10);
      if (errno || end == val || *end || v < 0)
        return tl_err(ctx, TL_E_PARSE, "%s: external data %s '%s' is not a byte count", what, key, val);
      if (key[0] == 'o')
        offset = v;
      else
        length = v;
    }
  }
  if (!location || !*location)
    return tl_err(ctx, TL_E_PARSE, "%s: external data without a location", what);
  if (location[0] == '/' || !strcmp(location, "..") || !strncmp(location, "../", 3) ||
      strstr(location, "/../") || (strlen(location) >= 3 && !strcmp(location + strlen(location) - 3, "/..")))
    return tl_err(ctx, TL_E_PARSE, "%s: external data location '%s' leaves the model's directory",
                  what, location);
  if (!base_dir)
    return tl_err(ctx, TL_E_UNSUPPORTED, "%s: external data ('%s') needs the model's directory", what,
                  location);
  if (length >= 0 && (uint64_t)length != nbytes)
    return tl_err(ctx, TL_E_PARSE, "%s: external data length %lld, expected %zu bytes", what,
                  (long long)length, nbytes);
  char *path = tl_sprintf("%s/%s", base_dir, location);
  FILE *f = fopen(path, "rb");
  int rc = TL_OK;
  if (!f) {
    rc = tl_err(ctx, TL_E_IO, "%s: cannot open external data '%s': %s", what, path, strerror(errno));
  } else {
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0) {
      rc = tl_err(ctx, TL_E_IO, "%s: cannot seek to byte %lld of '%s'", what, (long long)offset, path);
    } else {
      size_t got = nbytes ? fread(dst, 1, nbytes, f) : 0;
      if (got != nbytes)
        rc = tl_err(ctx, TL_E_PARSE, "%s: external data '%s' ends early: expected %zu bytes at offset %lld, got %zu",
                    what, path, nbytes, (long long)offset, got);
    }
    fclose(f);
  }
  free(path);
  return rc;
}

/* int32_data element i of a narrow type: range-checked. */
static int narrow_check(tl_ctx *ctx, const char *what, int et, size_t i, int32_t v) {
  int32_t lo, hi;
  switch (et) {
    case TL_ONNX_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
    case TL_ONNX_UINT8: lo = 0, hi = UINT8_MAX; break;
    case TL_ONNX_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
    case TL_ONNX_FLOAT16: lo = 0, hi = UINT16_MAX; break;  /* the bit pattern */
    default: return TL_OK;
  }
  if (v < lo || v > hi)
    return tl_err(ctx, TL_E_PARSE, "%s: int32_data[%zu] = %" PRId32 " is out of range for %s", what, i,
                  v, elem_type_names[et]);
  return TL_OK;
}

/* Fill a (numel elements of dtype) from the typed repeated field of pb. */
static int fill_typed(tl_ctx *ctx, const Onnx__TensorProto *pb, int et, const char *what,
                      const char *shape, tl_array *a) {
  int64_t numel = tl_array_numel(a);
  void *data = tl_array_data(a);
  const char *field;
  size_t count;
  switch (et) {
    case TL_ONNX_FLOAT: field = "float_data", count = pb->n_float_data; break;
    case TL_ONNX_DOUBLE: field = "double_data", count = pb->n_double_data; break;
    case TL_ONNX_INT64: field = "int64_data", count = pb->n_int64_data; break;
    default: field = "int32_data", count = pb->n_int32_data; break;
  }
  if ((int64_t)count != numel) {
    if (count == 0)
      return tl_err(ctx, TL_E_PARSE, "%s: no data for %s %s: expected %" PRId64 " values in raw_data or %s",
                    what, elem_type_names[et], shape, numel, field);
    return tl_err(ctx, TL_E_PARSE, "%s: %s holds %zu values, expected %" PRId64 " for %s %s", what, field,
                  count, numel, elem_type_names[et], shape);
  }
  if (count == 0) return TL_OK;  /* an empty tensor */
  switch (et) {
    case TL_ONNX_FLOAT: memcpy(data, pb->float_data, count * sizeof(float)); return TL_OK;
    case TL_ONNX_DOUBLE: memcpy(data, pb->double_data, count * sizeof(double)); return TL_OK;
    case TL_ONNX_INT64: memcpy(data, pb->int64_data, count * sizeof(int64_t)); return TL_OK;
    case TL_ONNX_INT32: memcpy(data, pb->int32_data, count * sizeof(int32_t)); return TL_OK;
    default: break;
  }
  for (size_t i = 0; i < count; i++) {
    int32_t v = pb->int32_data[i];
    int rc = narrow_check(ctx, what, et, i, v);
    if (rc) return rc;
    switch (et) {
      case TL_ONNX_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
      case TL_ONNX_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
      case TL_ONNX_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
      case TL_ONNX_FLOAT16: ((uint16_t *)data)[i] = (uint16_t)v; break;
      case TL_ONNX_BOOL: ((uint8_t *)data)[i] = v != 0; break;
      default: return tl_err(ctx, TL_E_INTERNAL, "%s: fill_typed: element type %d", what, et);
    }
  }
  return TL_OK;
}

TL_EXPORT int tl_onnx_tensor_to_array(tl_ctx *ctx, const tl_onnx_tensor *t, const char *base_dir,
                                      tl_array **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_onnx_tensor_to_array: out is NULL");
  *out = NULL;
  if (!t) return tl_err(ctx, TL_E_ARG, "tl_onnx_tensor_to_array: tensor is NULL");
  const Onnx__TensorProto *pb = tl_onnx_tensor_pb(t);
  char what[300], shape[256];
  if (pb->name && *pb->name)
    snprintf(what, sizeof what, "tensor '%s'", pb->name);
  else
    snprintf(what, sizeof what, "tensor");
  int et = pb->has_data_type ? pb->data_type : 0;
  if (et == TL_ONNX_UNDEFINED)
    return tl_err(ctx, TL_E_PARSE, "%s: no data_type (an empty file, or not a TensorProto?)", what);
  if (et < 0 || et >= (int)TL_ARRAY_SIZE(elem_type_names))
    return tl_err(ctx, TL_E_DTYPE, "%s: unknown data type code %d", what, et);
  int dtype = elem_type_to_dtype(et);
  if (dtype < 0)
    return tl_err(ctx, TL_E_DTYPE, "%s: ONNX element type %s (%d) has no tunelua dtype", what,
                  elem_type_names[et], et);
  if (pb->segment) return tl_err(ctx, TL_E_UNSUPPORTED, "%s: segmented tensors are not supported", what);
  if (pb->n_dims > INT_MAX) return tl_err(ctx, TL_E_SHAPE, "%s: too many dimensions", what);
  int ndim = (int)pb->n_dims;
  tl_onnx_dims_str(shape, sizeof shape, ndim, pb->dims);
  for (int i = 0; i < ndim; i++)
    if (pb->dims[i] < 0)
      return tl_err(ctx, TL_E_SHAPE, "%s: dimension %d of %s %s is negative", what, i,
                    elem_type_names[et], shape);
  tl_array *a;
  int rc = tl_array_empty(ctx, ndim, pb->dims, dtype, TL_DEV_CPU, 0, &a);
  if (rc) return tl_err_prefix(ctx, "%s: ", what);
  int64_t numel = tl_array_numel(a);
  size_t esize = (size_t)tl_dtype_bytes(dtype), nbytes = (size_t)numel * esize;
  uint8_t *data = tl_array_data(a);
  if (pb->has_data_location && pb->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    rc = read_external(ctx, pb, base_dir, what, data, nbytes);
    if (!rc) {
      from_le(data, numel, (int)esize);
      if (dtype == TL_BOOL) bool_to_01(data, numel);
    }
  } else if (pb->has_raw_data) {
    if (pb->raw_data.len != nbytes) {
      rc = tl_err(ctx, TL_E_PARSE, "%s: raw_data size mismatch: expected %zu bytes for %s %s, got %zu", what,
                  nbytes, elem_type_names[et], shape, pb->raw_data.len);
    } else if (nbytes) {
      memcpy(data, pb->raw_data.data, nbytes);
      from_le(data, numel, (int)esize);
      if (dtype == TL_BOOL) bool_to_01(data, numel);
    }
  } else {
    rc = fill_typed(ctx, pb, et, what, shape, a);
  }
  if (rc) {
    tl_array_free(a);
    return rc;
  }
  *out = a;
  return TL_OK;
}

TL_EXPORT int tl_onnx_tensor_load(tl_ctx *ctx, const char *path, tl_array **out, char **name_out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_onnx_tensor_load: out is NULL");
  *out = NULL;
  if (name_out) *name_out = NULL;
  ProtobufCMessage *msg;
  int rc = load_message(ctx, path, &onnx__tensor_proto__descriptor, &msg);
  if (rc) return rc;
  char *dir = dir_of(path);
  const tl_onnx_tensor *t = (const tl_onnx_tensor *)(const void *)msg;
  rc = tl_onnx_tensor_to_array(ctx, t, dir, out);
  if (rc)
    tl_err_prefix(ctx, "%s: ", path);
  else if (name_out)
    *name_out = tl_strdup(tl_onnx_tensor_name(t));
  free(dir);
  protobuf_c_message_free_unpacked(msg, &tl_onnx_allocator);
  return rc;
}

/* ---- test-data values -------------------------------------------------------------------- */

static int build_sequence(tl_ctx *ctx, const Onnx__SequenceProto *s, tl_onnx_value *v, int depth);
static int build_optional(tl_ctx *ctx, const Onnx__OptionalProto *o, tl_onnx_value *v, int depth);

static void value_clear(tl_onnx_value *v) {
  for (int i = 0; i < v->n; i++) value_clear(&v->elems[i]);
  free(v->elems);
  v->elems = NULL;
  v->n = 0;
}

static void value_tensor(tl_onnx_value *v, const Onnx__TensorProto *t) {
  v->kind = TL_ONNX_KIND_TENSOR;
  v->name = str_or_empty(t->name);
  v->tensor = t;
}

static int build_sequence(tl_ctx *ctx, const Onnx__SequenceProto *s, tl_onnx_value *v, int depth) {
  v->kind = TL_ONNX_KIND_SEQUENCE;
  v->name = str_or_empty(s->name);
  if (depth > WIRE_MAX_DEPTH) return tl_err(ctx, TL_E_PARSE, "sequence nested too deeply");
  if (s->n_sparse_tensor_values || s->n_map_values)
    return tl_err(ctx, TL_E_UNSUPPORTED, "sequence '%s': sequences of %s are not supported", v->name,
                  s->n_map_values ? "maps" : "sparse tensors");
  int kinds = (s->n_tensor_values > 0) + (s->n_sequence_values > 0) + (s->n_optional_values > 0);
  if (kinds > 1)
    return tl_err(ctx, TL_E_PARSE, "sequence '%s' mixes tensors, sequences and optionals", v->name);
  size_t n = s->n_tensor_values + s->n_sequence_values + s->n_optional_values;
  if (n > INT_MAX) return tl_err(ctx, TL_E_PARSE, "sequence '%s' is too long", v->name);
  v->n = (int)n;
  v->elems = n ? tl_calloc(n, sizeof *v->elems) : NULL;
  for (size_t i = 0; i < s->n_tensor_values; i++) value_tensor(&v->elems[i], s->tensor_values[i]);
  for (size_t i = 0; i < s->n_sequence_values; i++) {
    int rc = build_sequence(ctx, s->sequence_values[i], &v->elems[i], depth + 1);
    if (rc) return rc;
  }
  for (size_t i = 0; i < s->n_optional_values; i++) {
    int rc = build_optional(ctx, s->optional_values[i], &v->elems[i], depth + 1);
    if (rc) return rc;
  }
  return TL_OK;
}

static int build_optional(tl_ctx *ctx, const Onnx__OptionalProto *o, tl_onnx_value *v, int depth) {
  v->kind = TL_ONNX_KIND_OPTIONAL;
  v->name = str_or_empty(o->name);
  if (depth > WIRE_MAX_DEPTH) return tl_err(ctx, TL_E_PARSE, "optional nested too deeply");
  if (o->sparse_tensor_value || o->map_value)
    return tl_err(ctx, TL_E_UNSUPPORTED, "optional '%s': optional %s are not supported", v->name,
                  o->map_value ? "maps" : "sparse tensors");
  int set = (o->tensor_value != NULL) + (o->sequence_value != NULL) + (o->optional_value != NULL);
  if (set > 1) return tl_err(ctx, TL_E_PARSE, "optional '%s' holds more than one value", v->name);
  if (!set) return TL_OK;
  v->n = 1;
  v->elems = tl_calloc(1, sizeof *v->elems);
  if (o->tensor_value) {
    value_tensor(&v->elems[0], o->tensor_value);
    return TL_OK;
  }
  if (o->sequence_value) return build_sequence(ctx, o->sequence_value, &v->elems[0], depth + 1);
  return build_optional(ctx, o->optional_value, &v->elems[0], depth + 1);
}

TL_EXPORT int tl_onnx_value_load(tl_ctx *ctx, const char *path, int kind, tl_onnx_value **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_onnx_value_load: out is NULL");
  *out = NULL;
  const ProtobufCMessageDescriptor *d;
  switch (kind) {
    case TL_ONNX_KIND_TENSOR: d = &onnx__tensor_proto__descriptor; break;
    case TL_ONNX_KIND_SEQUENCE: d = &onnx__sequence_proto__descriptor; break;
    case TL_ONNX_KIND_OPTIONAL: d = &onnx__optional_proto__descriptor; break;
    case TL_ONNX_KIND_MAP:
    case TL_ONNX_KIND_SPARSE_TENSOR:
      return tl_err(ctx, TL_E_UNSUPPORTED, "%s: %s values are not supported", path ? path : "(null)",
                    tl_onnx_kind_name(kind));
    default: return tl_err(ctx, TL_E_ARG, "tl_onnx_value_load: invalid kind %d", kind);
  }
  ProtobufCMessage *msg;
  int rc = load_message(ctx, path, d, &msg);
  if (rc) return rc;
  tl_onnx_value *v = tl_calloc(1, sizeof *v);
  v->msg = msg;
  if (kind == TL_ONNX_KIND_TENSOR)
    value_tensor(v, (const Onnx__TensorProto *)msg);
  else if (kind == TL_ONNX_KIND_SEQUENCE)
    rc = build_sequence(ctx, (const Onnx__SequenceProto *)msg, v, 0);
  else
    rc = build_optional(ctx, (const Onnx__OptionalProto *)msg, v, 0);
  if (rc) {
    tl_err_prefix(ctx, "%s: ", path);
    tl_onnx_value_free(v);
    return rc;
  }
  *out = v;
  return TL_OK;
}

TL_EXPORT void tl_onnx_value_free(tl_onnx_value *v) {
  if (!v) return;
  value_clear(v);
  if (v->msg) protobuf_c_message_free_unpacked(v->msg, &tl_onnx_allocator);
  free(v);
}

TL_EXPORT int tl_onnx_value_kind(const tl_onnx_value *v) { return v->kind; }
TL_EXPORT const char *tl_onnx_value_name(const tl_onnx_value *v) { return v->name ? v->name : ""; }
TL_EXPORT const tl_onnx_tensor *tl_onnx_value_tensor(const tl_onnx_value *v) {
  return (const tl_onnx_tensor *)(const void *)v->tensor;
}
TL_EXPORT int tl_onnx_value_count(const tl_onnx_value *v) { return v->n; }
TL_EXPORT const tl_onnx_value *tl_onnx_value_elem(const tl_onnx_value *v, int i) {
  return i >= 0 && i < v->n ? &v->elems[i] : NULL;
}
