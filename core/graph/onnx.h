/*
** onnx.h -- internal view of the ONNX reader (core/graph/onnx.c).
**
** The public handles of core/tunelua.h are the protobuf-c structs generated
** from onnx.proto (build/generated/onnx/onnx.pb-c.h): a tl_onnx_graph * is an
** Onnx__GraphProto *, a tl_onnx_node * an Onnx__NodeProto *, and so on. The
** casts below are the only place that knows it. The model importer (later)
** walks the protobuf structs directly through these helpers.
**
** Every message is unpacked with tl_onnx_allocator, which gives each block
** one extra trailing NUL byte: protobuf-c copies bytes fields (attribute
** strings, string_data) with their exact length, so this makes them readable
** as C strings without a copy.
*/
#ifndef TL_GRAPH_ONNX_H
#define TL_GRAPH_ONNX_H

#include <protobuf-c/protobuf-c.h>

#include "../base/base.h"
#include "onnx-data.pb-c.h"
#include "onnx.pb-c.h"

struct tl_onnx_model {
  Onnx__ModelProto *pb;        /* never NULL; graph may be NULL only in files
                                  that tl_onnx_model_load rejects */
  char *path;                  /* the file it came from */
  char *dir;                   /* its directory ("." for a bare name) */
};

/* A loaded test-data value. The root owns the unpacked message (msg); the
** elements of a sequence or optional are built at load time and point into
** it. */
struct tl_onnx_value {
  int kind;                    /* TL_ONNX_KIND_TENSOR, _SEQUENCE, _OPTIONAL */
  const char *name;            /* never NULL */
  const Onnx__TensorProto *tensor;  /* kind tensor */
  int n;                       /* elements (sequence) or 0/1 (optional) */
  struct tl_onnx_value *elems;
  ProtobufCMessage *msg;       /* root only: the unpacked message */
};

extern ProtobufCAllocator tl_onnx_allocator;

static inline const Onnx__GraphProto *tl_onnx_graph_pb(const tl_onnx_graph *g) {
  return (const Onnx__GraphProto *)(const void *)g;
}
static inline const Onnx__NodeProto *tl_onnx_node_pb(const tl_onnx_node *n) {
  return (const Onnx__NodeProto *)(const void *)n;
}
static inline const Onnx__TensorProto *tl_onnx_tensor_pb(const tl_onnx_tensor *t) {
  return (const Onnx__TensorProto *)(const void *)t;
}
static inline const Onnx__TypeProto *tl_onnx_type_pb(const tl_onnx_type *t) {
  return (const Onnx__TypeProto *)(const void *)t;
}

/* Unpack len bytes as a message of descriptor d. On failure the error names
** what (a path, for messages) and, as far as the wire format tells, where and
** how the bytes are malformed: "truncated: field 7 (graph) at byte 57 needs
** 1234 bytes, 200 left". */
int tl_onnx_unpack(tl_ctx *ctx, const ProtobufCMessageDescriptor *d, const void *data,
                   size_t len, const char *what, ProtobufCMessage **out);

/* Describe a dims list as "[2, 3]" ("[]" for a scalar) into buf; returns buf. */
char *tl_onnx_dims_str(char *buf, size_t n, int ndim, const int64_t *dims);

#endif
