/*
** autotvm.h -- internals of AutoTVM's config spaces, tasks and templates
** (core/autotvm/space.c, task.c, sched_util.c). The templates themselves and
** the registry that finds them by name live with their device families
** (targets/, targets/targets.c).
**
** A config space is an ordered list of knobs; each knob is a finite list of
** entities. Split, reorder and annotate entities are fixed-width int vectors
** (sizes, permutation, annotation codes); "other" entities are JSON scalars.
** The config of index p takes entity (p / prod(dims[0..j-1])) % dims[j] of
** knob j (the first-defined knob is the least significant digit).
**
** C templates: define(cfg) declares the knobs (define mode) and the fallback
** digits; compute(...) adds the template's ops to a dag; schedule(cfg, s)
** reads the chosen entities by knob name (apply mode) and adds steps.
*/
#ifndef TL_AUTOTVM_H
#define TL_AUTOTVM_H

#include <jansson.h>

#include "../base/base.h"
#include "../te/schedule.h"

/* Annotation codes of "an" entities (formats §1.3 order). */
enum {
  TL_AN_NONE = 0, TL_AN_VEC, TL_AN_UNROLL, TL_AN_BLOCK_X, TL_AN_BLOCK_Y, TL_AN_BLOCK_Z,
  TL_AN_THREAD_X, TL_AN_THREAD_Y, TL_AN_THREAD_Z, TL_AN_VTHREAD, TL_AN_FUSE, TL_AN_NCODES
};
extern const char *const tl_an_names[TL_AN_NCODES];

typedef struct tl_knob {
  char *name;
  int kind;                    /* TL_KNOB_* */
  int width;                   /* ints per entity (sp: num_outputs, re/an: n) */
  int locate_cache;            /* an: values are axis indices */
  int64_t dim;                 /* number of entities */
  int64_t *ints;               /* dim * width (sp/re/an) */
  char **other;                /* dim JSON texts (ot) */
  double *other_num;           /* dim numeric values (ot; strings: the index) */
  int64_t fallback;            /* fallback digit */
  int64_t length;              /* sp: the axis length */
} tl_knob;

struct tl_atvm_space {
  TL_VEC(tl_knob) knobs;
  char *text;                  /* returned by tl_atvm_space_other_json */
};

/* Entity j of knob k, ints (NULL for ot). */
static inline const int64_t *tl_knob_entity(const tl_knob *kb, int64_t j) {
  return kb->ints ? kb->ints + j * kb->width : NULL;
}
/* The entity of knob k as its JSON value, appended to out. */
void tl_knob_entity_json(const tl_knob *kb, int64_t j, tl_buf *out);

/* Keep the entities j with keep[j] (the knob-level filter), in order. */
void tl_atvm_knob_filter(tl_atvm_space *sp, int k, const unsigned char *keep);

/* ---- config objects for C templates -------------------------------------- */

/* Hardware facts of a parsed target that templates read (filled by the
** target's family from its options once, at parse; 0 = not known). */
typedef struct tl_target_hw {
  int lanes;                   /* float32 lanes of a vector register */
  int registers;               /* vector registers */
} tl_target_hw;

typedef struct tl_atvm_cfg {
  tl_ctx *ctx;
  tl_atvm_space *space;
  const int64_t *digits;       /* apply mode: one digit per knob */
  double flop;                 /* cfg.add_flop; 0 = count the dag */
  const tl_target_hw *hw;      /* the target's hardware facts */
} tl_atvm_cfg;

/* Apply mode: the chosen entity of the knob called name (NULL + error if absent). */
const int64_t *tl_cfg_ints(tl_atvm_cfg *cfg, const char *name, int *width);
/* An "ot" knob's value as a number (bools 0/1). */
double tl_cfg_other(tl_atvm_cfg *cfg, const char *name);
/* The largest divisor of n that is <= cap (>= 1). */
int64_t tl_atvm_largest_divisor(int64_t n, int64_t cap);
/* Fallback helper: set split knob name to sizes (size[0] ignored) if it is an
** entity of the knob, else the closest by fallback_split with those caps. */
int tl_cfg_fallback_split(tl_atvm_cfg *cfg, const char *name, const int64_t *sizes, int n);
void tl_cfg_fallback_other(tl_atvm_cfg *cfg, const char *name, double value);

/* ---- templates ------------------------------------------------------------- */

/* The template's inputs parsed from args: tensors (shape, dtype) and the rest. */
typedef struct tl_atvm_args {
  json_t *json;                /* the args array */
  int ntensors;
  int ndim[8];
  int64_t shape[8][8];
  int dtype[8];
} tl_atvm_args;

typedef struct tl_atvm_template {
  const char *name;
  int (*define)(tl_atvm_cfg *cfg, const tl_atvm_args *a);
  /* in[0..ntensors) are the tensor args; outputs are written to out */
  int (*compute)(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                 int *out, int max_out, int *nout);
  /* s holds compute + fused injective consumers; anchor = the op name of
  ** the template's main compute op in s */
  int (*schedule)(tl_atvm_cfg *cfg, const tl_atvm_args *a, tl_sched *s);
  /* Optional. The shape input i has where the template is deployed, when the
  ** graph executor passes it pre-transformed (a constant weight packed once
  ** at build time): returns 1 and fills ndim/shape, else 0. A task's
  ** placeholder takes that shape, so tuning times the kernel that runs, not
  ** a per-call transform the deployment never does. */
  int (*deployed_input)(const tl_atvm_args *a, int i, int *ndim, int64_t *shape);
  /* With deployed_input: writes the deployed form of input i's value src
  ** (the args' shape and dtype) to dst (the deployed shape). The graph
  ** executor and the tests call it (tl_atvm_template_deploy_input), so the
  ** packing rule is written once, next to the compute that reads it. */
  void (*deploy)(const tl_atvm_args *a, int i, const void *src, void *dst);
  int flags;                   /* TL_TMPL_* (core/tunelua_autotvm.h) */
  /* Optional. The shape input i takes in the graph's blocked layout under
  ** config cfg (x86: NCHW[ib]c data and OIHW[ob]o kernel, the blocks from the
  ** config, as AlterOpLayout gives them): returns 1 and fills ndim/shape,
  ** else 0. A task set to measure its blocked form (tl_atvm_task_set_blocked)
  ** instantiates each config on inputs of these shapes, so tuning times the
  ** kernel the network runs rather than its NCHW form with packing. */
  int (*blocked_input)(tl_atvm_cfg *cfg, const tl_atvm_args *a, int i, int *ndim, int64_t *shape);
} tl_atvm_template;

int tl_atvm_parse_args(tl_ctx *ctx, const char *args_json, tl_atvm_args *a);
void tl_atvm_args_free(tl_atvm_args *a);
/* A task of template tm for args on a target (its hardware facts); the
** registry's tl_atvm_task_create finds tm by name. */
int tl_atvm_task_new(tl_ctx *ctx, const tl_atvm_template *tm, const char *args_json,
                     const tl_target_hw *hw, tl_atvm_task **out);
/* tm's compute on dag for args (see tl_atvm_template_compute). */
int tl_atvm_template_compute_with(tl_ctx *ctx, const tl_atvm_template *tm, const char *args_json,
                                  tl_dag *dag, const int *in, int nin, int *out, int max_out,
                                  int *nout);
/* args[i] as n ints: one int repeated, a list of n, or (n = 4) a pair
** (top/bottom, left/right) of paddings; what names the argument in errors. */
int tl_atvm_args_ints(tl_ctx *ctx, const tl_atvm_args *a, int i, int n, int64_t *out,
                      const char *what);

/* Schedule helpers for templates (sched_util.c), addressing iterators by
** their stable node ids: split (out: the n+1 nodes outer..inner), fuse (out:
** the fused node), reorder (the listed nodes take the positions they hold,
** in list order; others stay); two stages with outputs of one shape; dense's
** arguments [data [M, K], weight [N, K], bias or null, out_dtype] and its
** compute (the topi operator). */
int tl_atvm_split_node(tl_ctx *ctx, tl_sched *s, int st, int node, int n, const int64_t *f,
                       int *out);
int tl_atvm_fuse_nodes(tl_ctx *ctx, tl_sched *s, int st, const int *nodes, int n, int *out);
int tl_atvm_reorder_nodes(tl_ctx *ctx, tl_sched *s, int st, const int *nodes, int n);
int tl_atvm_same_shape(tl_sched *s, int a, int b);
int tl_atvm_dense_dims(tl_ctx *ctx, const tl_atvm_args *a, int64_t *M, int64_t *N, int64_t *K);
int tl_atvm_dense_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in, int nin,
                          int *out, int max_out, int *nout);

/* The first compute stage whose tag starts with tag_prefix, or -1. */
int tl_atvm_stage_by_tag(tl_sched *s, const char *tag_prefix);
/* Inline every injective compute stage that is not an output and not the
** anchor, and pad stages; returns the output stage (last). */
int tl_atvm_inline_injective(tl_ctx *ctx, tl_sched *s, int anchor);

/* A 2-D NCHW convolution's arguments as the arm_cpu and mali templates take them: data
** [N, C, H, W], kernel OIHW (depthwise: [C, M, KH, KW], O = C * M), then strides,
** padding, dilation and, last, out_dtype (NULL when not a string); OH/OW the output size. */
typedef struct tl_atvm_conv {
  int64_t N, C, H, W, O, KH, KW, OH, OW, stride[2], pad[4], dil[2];
  const char *out_dtype;
} tl_atvm_conv;
/* ci from a: the argument count, the ranks, the channels (a depthwise kernel's C too) and the
** strides and dilation (positive) checked, OH and OW computed. */
int tl_atvm_conv_of(tl_ctx *ctx, const tl_atvm_args *a, int depthwise, tl_atvm_conv *ci);
/* Its parts, for templates with other argument checks (x86): the ranks checked and the fields
** up to O read (no value checked); then the strides (and dilation with check_dilation)
** checked positive and OH, OW computed. */
int tl_atvm_conv_read(tl_ctx *ctx, const tl_atvm_args *a, int depthwise, tl_atvm_conv *ci);
int tl_atvm_conv_size(tl_ctx *ctx, tl_atvm_conv *ci, int check_dilation);
/* The topi attributes of ci (strides, padding, dilation, out_dtype) with extra (",..." or
** NULL) appended, into buf. */
void tl_atvm_conv_attrs(const tl_atvm_conv *ci, const char *extra, char *buf, size_t cap);
/* a's float32 OIHW kernel (argument 1) src repacked into dst as [O/B, C, KH, KW, B], a block
** of B output channels innermost (B divides O): the blocked conv templates' deployed weight. */
void tl_atvm_pack_kernel_oihw(const tl_atvm_args *a, int64_t B, const void *src, void *dst);
/* The topi conv2d (NCHW) and depthwise_conv2d computes of such arguments. */
int tl_atvm_conv2d_nchw_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in,
                                int nin, int *out, int max_out, int *nout);
int tl_atvm_depthwise_nchw_compute(tl_ctx *ctx, const tl_atvm_args *a, tl_dag *dag, const int *in,
                                   int nin, int *out, int max_out, int *nout);
/* The anchor stage (tag) and the stage holding the tile loops: the last stage when it has
** the anchor's shape (the injective consumers between inlined), else a cache_write of the
** anchor. *O: the tiled stage, *L: the accumulation stage computed inside it, *other: a last
** stage of another shape (-1 if none); tmpl names the template in errors. */
int tl_atvm_anchor_stages(tl_ctx *ctx, tl_sched *s, const char *tag, const char *tmpl, int *O,
                          int *L, int *other);
/* Move node to the innermost position of stage st (family names the templates in errors). */
int tl_atvm_move_innermost(tl_ctx *ctx, tl_sched *s, int st, int node, const char *family);
/* Inline the stage called name when it is a compute stage still at root (else nothing). */
int tl_atvm_inline_named(tl_ctx *ctx, tl_sched *s, const char *name);
/* Set knob name's fallback to the entity equal to ints (annotate/reorder knobs). */
void tl_cfg_fallback_ints(tl_atvm_cfg *cfg, const char *name, const int64_t *ints);
/* The output of a winograd convolution (the stage tagged conv2d_nchw_winograd): the injective
** stages after it inlined, and it too when a consumer of its shape follows. *O: the stage holding
** the output's loops, *other: a last stage of another shape (-1 if none); tmpl names the
** template in errors. */
int tl_atvm_winograd_output(tl_ctx *ctx, tl_sched *s, const char *tmpl, int *O, int *other);

#endif
