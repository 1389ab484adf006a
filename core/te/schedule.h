/*
** schedule.h -- schedules as replayable step lists (the auto-scheduler's
** "State"), and their lowering to the loop IR.
**
** A schedule owns a copy of a compute DAG and one stage per op of it
** (placeholders included, stage i <-> dag op i at all times). Each stage
** keeps an ordered list of iterators and an iterator graph recording how
** they derive from the op's axes:
**
**   nodes: [axis 0 .. axis ndim-1][reduce 0 .. reduce nr-1][split/fuse results ...]
**   rels:  split  node p -> children c0 (outer) .. cn (inner)
**          fuse   nodes c0 (outer) .. cn (inner), consecutive -> node f
**   leaves: the current iterators, outer to inner (node ids)
**
** A node id is an iterator's stable identity: nodes are never removed, so a
** Lua axis object (stage name, node id) stays valid across steps; its
** current position is found in `leaves` at step time.
**
** The schedule IS its step list: every change goes through tl_sched_apply,
** which validates one tl_step (the fields of the §2.4 record), applies it
** and appends it. Replaying the list on a fresh copy of the DAG rebuilds
** the same state. Cache read/write (and rfactor) rewrite the owned DAG and
** insert a stage: the new stage goes right after (cache_read) or right
** before (cache_write, rfactor) the original, and every later stage id
** shifts by one, exactly as in the auto-scheduler.
**
** Lowering (lower.c) turns a schedule into a tl_lowered function of the
** codegen (core/codegen/codegen.h).
*/
#ifndef TL_SCHEDULE_H
#define TL_SCHEDULE_H

#include "te.h"

#include "steps.h"

/* TL_STEP_* (step kinds) come from the step table in steps.h; TL_ANN_*
** (annotations) and TL_CA_* (attachment kinds) are public enums in
** core/tunelua.h. */

/* One transform step: the fields of its §2.4 record; unused fields are 0.
** Which member holds which record field is the row of the kind in steps.h
** (int arrays in ints/nints, strings in str). In a schedule's list, ints
** and str are owned by the schedule. */
typedef struct tl_step {
  int kind;                       /* TL_STEP_* */
  int stage_id;
  int iter_id;
  int64_t extent;                 /* SP: extent when recorded, 0 = unknown */
  int inner_to_outer;             /* SP; FFSP: factor_or_nparts */
  int nints;
  int64_t *ints;                  /* the row's I field */
  int annotation;                 /* AN: TL_ANN_* */
  int src_step_id, n_split;       /* FSP */
  int level;                      /* FFSP */
  int factor, offset;             /* SA */
  int factor_iter_id;             /* RF */
  int target_stage_id, target_iter_id; /* CA */
  const char *str;                /* PR pragma text, CHR/CHW scope name */
} tl_step;

/* A node of a stage's iterator graph. A leaf is a current iterator. */
typedef struct tl_iter {
  const char *name;               /* sched arena */
  int64_t extent;                 /* 0 = unknown */
  int kind;                       /* TL_ITER_* */
  int ann;                        /* TL_ANN_* (leaves only) */
  int rel;                        /* relation that made it; -1 for an op axis */
} tl_iter;

enum { TL_REL_SPLIT = 0, TL_REL_FUSE };

/* split: in = {parent}, out = children outer..inner, lengths as stepped.
** fuse:  in = fused nodes outer..inner, out = {fused}. */
typedef struct tl_rel {
  int kind;                       /* TL_REL_* */
  int nin, nout;
  int *in, *out;                  /* node ids (sched arena) */
  int nlengths;
  int64_t *lengths;               /* split: lengths of the step (sched arena) */
  int inner_to_outer;             /* split: 1 = factors, 0 = nparts */
} tl_rel;

typedef struct tl_pragma {
  int node;                       /* iterator */
  const char *text;               /* "auto_unroll_max_step$16", "key$value", "key" */
} tl_pragma;

typedef struct tl_align {
  int axis;                       /* op axis (dimension) */
  int factor, offset;             /* stride of that dimension = k*factor + offset */
} tl_align;

/* Invariants: op == index of the stage; nodes[0 .. ndim+nreduce) are the op's
** axes in order; every leaf is a node that no relation consumes; a node is
** consumed by at most one relation; compute_at == TL_CA_ITER implies at_stage
** is a later stage (a consumer) and at_node one of its nodes (a leaf when the
** step was applied; moved to the innermost child on split, the fused node on
** fuse). Placeholders have no iterators and stay TL_CA_ROOT. */
typedef struct tl_stage {
  int op;                         /* op index in sched->dag */
  int compute_at;                 /* TL_CA_ROOT / TL_CA_INLINED / TL_CA_ITER */
  int at_stage, at_node;          /* TL_CA_ITER: target stage, its iterator node */
  int scope;                      /* TL_SCOPE_* of the stage's buffer */
  int is_output;                  /* an output of the dag */
  TL_VEC(tl_iter) nodes;
  TL_VEC(tl_rel) rels;
  TL_VEC(int) leaves;             /* current iterators, outer to inner */
  TL_VEC(tl_pragma) pragmas;
  TL_VEC(tl_align) aligns;
} tl_stage;

struct tl_sched {
  tl_dag *base;                   /* owned; the DAG before any step (for replay) */
  tl_dag *dag;                    /* owned; rewritten by CHR/CHW/RF */
  TL_VEC(tl_stage) stages;        /* stage i computes dag op i */
  TL_VEC(tl_step) steps;          /* the history; replay = the state */
  tl_arena arena;                 /* names, relation arrays, step payloads */
  tl_buf text;                    /* returned by tl_sched_print / tl_sched_json */
};

/* Validate step against the current state, apply it and append a copy.
** Illegal steps leave the schedule unchanged and return TL_E_SCHED with a
** message naming the stage and the iterator. */
int tl_sched_apply(tl_ctx *ctx, tl_sched *s, const tl_step *step);

/* The stage computed at (stage st, iterator node), or -1; node -1: at any node of st. */
int tl_sched_attached_at(const tl_sched *s, int st, int node);

/* Current position of iterator node in stage's leaves, or -1. */
int tl_sched_leaf_pos(const tl_sched *s, int stage, int node);

/* The step as its §2.4 JSON array, appended to out. */
void tl_step_to_json(const tl_step *st, tl_buf *out);
/* Parse one step (a jansson json_t array). On error: TL_E_PARSE, message
** naming the field. ints and str are malloc'd into *out (free with
** tl_step_release). */
int tl_step_from_json(tl_ctx *ctx, const void *json, tl_step *out);
void tl_step_release(tl_step *st);

/* The kind of a record prefix ("SP"), -1 if unknown; tl_step_name (public)
** goes the other way. */
int tl_step_kind(const char *name);

/* C shorthands over tl_sched_step (core/tunelua.h) for the kinds that templates use (the
** fields of their rows as arguments; new_stage may be NULL).
** split: inner_to_outer 1 = lengths are factors, innermost last (the
** outermost extent is implied); 0 = lengths[0] is the outermost (nparts)
** and the innermost extent is implied. reorder: order is a permutation of
** all iterator positions (the new order). fuse: iters are consecutive
** increasing positions. cache_write: scope "global", "local" or "shared".
** rfactor: factor reduction iterator iter out into a new axis at position
** factor_iter of the new stage "<op>.rf". */
int tl_sched_split(tl_ctx *ctx, tl_sched *s, int stage, int iter, int nlengths,
                   const int64_t *lengths, int inner_to_outer);
int tl_sched_reorder(tl_ctx *ctx, tl_sched *s, int stage, int n, const int *order);
int tl_sched_fuse(tl_ctx *ctx, tl_sched *s, int stage, int n, const int *iters);
int tl_sched_annotate(tl_ctx *ctx, tl_sched *s, int stage, int iter, int ann);
int tl_sched_compute_at(tl_ctx *ctx, tl_sched *s, int stage, int target_stage, int target_iter);
int tl_sched_compute_inline(tl_ctx *ctx, tl_sched *s, int stage);
int tl_sched_cache_write(tl_ctx *ctx, tl_sched *s, int stage, const char *scope, int *new_stage);
int tl_sched_rfactor(tl_ctx *ctx, tl_sched *s, int stage, int iter, int factor_iter,
                     int *new_stage);

extern const char *const tl_ann_name[12];   /* "none", "unroll", ... "tensorize" */

#endif
