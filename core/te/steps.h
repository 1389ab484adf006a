/*
** steps.h -- the transform-step kinds of a schedule, as one table.
**
** Each row of TL_STEPDEF is one step kind:
**
**   X(PREFIX, verb, inserts, fields)
**
**   PREFIX   the record prefix of the auto-scheduler's step encoding
**            (formats spec §2.4): "SP" in ["SP", 2, 0, 1024, [2, 1, 4], 1].
**            It names the kind TL_STEP_<PREFIX>.
**   verb     the primitive's name ("split"). The kind's apply function is
**            the static `step_<verb>` of schedule.c; error messages start
**            with the verb; the Lua layer names its raw method s:step_<verb>.
**   inserts  where the step inserts a stage: NONE, BEFORE (the new stage
**            takes stage_id and the old one moves up by one) or AFTER (the
**            new stage is stage_id + 1). tl_sched_step reports it.
**   fields   the record's fields after the prefix, in record order, each
**            F(type, name, member): name is the field's name in the spec
**            (used in parse errors and by Lua), member the tl_step member
**            holding it. Types:
**              i  an int
**              b  0/1 (written as an int, read as an int or a bool)
**              e  an int64 extent that the step records rather than takes:
**                 tl_sched_step fills it with the extent of iterator
**                 (stage_id, iter_id) at the time of the step
**              I  an int array, held in ints/nints (at most one per row)
**              s  a string, held in str (at most one per row)
**
** The order of the rows is the order of TL_STEP_* (public: tl_step_name(k)
** for k < tl_step_count()); keep existing rows where they are and append.
**
** Everything else is generated from the table: the TL_STEP_* enum, the
** names, the field descriptors (tl_step_desc), the apply dispatch, the JSON
** writer and reader (schedule_json.c), the exported generic entry point
** tl_sched_step and the Lua methods (lua/tunelua/schedule.lua). Adding a
** primitive is therefore one row here and one `step_<verb>` function in
** schedule.c (plus, if it needs a field no row has yet, a tl_step member).
*/
#ifndef TL_STEPS_H
#define TL_STEPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TL_STEPDEF(X, F)                                                                           \
  X(AN, annotate, NONE,                                                                            \
    F(i, stage_id, stage_id) F(i, iter_id, iter_id) F(i, annotation, annotation))                  \
  X(FU, fuse, NONE,                                                                                \
    F(i, stage_id, stage_id) F(I, fused_ids, ints))                                                \
  X(PR, pragma, NONE,                                                                              \
    F(i, stage_id, stage_id) F(i, iter_id, iter_id) F(s, pragma_type, str))                        \
  X(RE, reorder, NONE,                                                                             \
    F(i, stage_id, stage_id) F(I, after_ids, ints))                                                \
  X(SP, split, NONE,                                                                               \
    F(i, stage_id, stage_id) F(i, iter_id, iter_id) F(e, extent, extent)                           \
    F(I, lengths, ints) F(b, inner_to_outer, inner_to_outer))                                      \
  X(FSP, follow_split, NONE,                                                                       \
    F(i, stage_id, stage_id) F(i, iter_id, iter_id) F(i, src_step_id, src_step_id)                 \
    F(i, n_split, n_split))                                                                        \
  X(FFSP, follow_fused_split, NONE,                                                                \
    F(i, stage_id, stage_id) F(i, iter_id, iter_id) F(I, src_step_ids, ints)                       \
    F(i, level, level) F(b, factor_or_nparts, inner_to_outer))                                     \
  X(SA, storage_align, NONE,                                                                       \
    F(i, stage_id, stage_id) F(i, iter_id, iter_id) F(i, factor, factor)                           \
    F(i, offset, offset))                                                                          \
  X(CA, compute_at, NONE,                                                                          \
    F(i, stage_id, stage_id) F(i, target_stage_id, target_stage_id)                                \
    F(i, target_iter_id, target_iter_id))                                                          \
  X(CI, compute_inline, NONE,                                                                      \
    F(i, stage_id, stage_id))                                                                      \
  X(CR, compute_root, NONE,                                                                        \
    F(i, stage_id, stage_id))                                                                      \
  X(CHR, cache_read, AFTER,                                                                        \
    F(i, stage_id, stage_id) F(s, scope_name, str) F(I, reader_stage_ids, ints))                   \
  X(CHW, cache_write, BEFORE,                                                                      \
    F(i, stage_id, stage_id) F(s, scope_name, str))                                                \
  X(RF, rfactor, BEFORE,                                                                           \
    F(i, stage_id, stage_id) F(i, iter_id, iter_id) F(i, factor_iter_id, factor_iter_id))

/* A row's fields expanded to nothing (for generators that need the row only). */
#define TL_STEP_NO_FIELD(type, name, member)

#define TL_STEP_ENUM_ROW(P, verb, inserts, fields) TL_STEP_##P,
enum { TL_STEPDEF(TL_STEP_ENUM_ROW, TL_STEP_NO_FIELD) TL_STEP__MAX };
#undef TL_STEP_ENUM_ROW

/* Where a step inserts a stage (the `inserts` column). */
enum { TL_STEP_INSERTS_NONE = 0, TL_STEP_INSERTS_BEFORE, TL_STEP_INSERTS_AFTER };

/* Field types: the letters above (TL_FT_i == 'i', for the generators). */
enum { TL_FT_i = 'i', TL_FT_b = 'b', TL_FT_e = 'e', TL_FT_I = 'I', TL_FT_s = 's' };

/* One field of a step record: its type letter, its name and, for the scalar
** types i/b/e, where it lives in a tl_step (an int or an int64_t member). */
typedef struct tl_step_field {
  char type;
  const char *name;
  size_t offset, size;
} tl_step_field;

/* A scalar field of step t (a tl_step *), read and written whatever the
** member's width. */
static inline int64_t tl_step_get(const void *t, const tl_step_field *f) {
  if (f->size == sizeof(int64_t)) {
    int64_t v;
    memcpy(&v, (const char *)t + f->offset, sizeof v);
    return v;
  }
  int v;
  memcpy(&v, (const char *)t + f->offset, sizeof v);
  return v;
}

static inline void tl_step_set(void *t, const tl_step_field *f, int64_t v) {
  if (f->size == sizeof(int64_t)) {
    memcpy((char *)t + f->offset, &v, sizeof v);
  } else {
    int iv = (int)v;
    memcpy((char *)t + f->offset, &iv, sizeof iv);
  }
}

struct tl_step;
struct tl_sched;
struct tl_ctx;

/* One row of the table. */
typedef struct tl_step_desc {
  const char *name;              /* "SP" */
  const char *verb;              /* "split" */
  int inserts;                   /* TL_STEP_INSERTS_* */
  const char *types;             /* one letter per field: "iieIb" */
  int nfields;
  const tl_step_field *fields;
  int (*apply)(struct tl_ctx *ctx, struct tl_sched *s, const struct tl_step *t);
} tl_step_desc;

/* The table, indexed by TL_STEP_* (schedule.c). */
extern const tl_step_desc tl_step_table[TL_STEP__MAX];

#endif
