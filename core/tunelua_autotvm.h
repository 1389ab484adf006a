/*
** tunelua_autotvm.h -- part of the public API (included by core/tunelua.h):
** AutoTVM: config spaces, templates, tasks, records (core/autotvm; the
** templates and their registry live with the device families in targets/).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
**
** A task = (template name, args as in the log, target). Creating one runs the
** template in "define" mode: the template declares its knobs (split "sp",
** reorder "re", annotate "an", other "ot") into the task's config space. A
** config index maps to one entity per knob by a mixed-radix number whose
** least significant digit is the first-defined knob (specs/algorithms.md
** A1). Instantiating an index runs the template in "apply" mode: it builds
** the compute DAG and a schedule from the chosen entities.
*/
#ifndef TUNELUA_AUTOTVM_H
#define TUNELUA_AUTOTVM_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

typedef struct tl_atvm_task tl_atvm_task;
typedef struct tl_atvm_space tl_atvm_space;

enum {                 /* knob kinds: the log's entity kinds */
  TL_KNOB_SPLIT = 0,   /* "sp" */
  TL_KNOB_REORDER,     /* "re" */
  TL_KNOB_ANNOTATE,    /* "an" */
  TL_KNOB_OTHER        /* "ot" */
};

/* ---- tasks -------------------------------------------------------------- */

/* args_json: the template's positional args as in the log (formats §1.2),
** e.g. [["TENSOR",[1,3,224,224],"float32"],["TENSOR",[64,3,7,7],"float32"],
** [2,2],[3,3,3,3],[1,1],"NCHW","NCHW","float32"]. target: a target string
** as a log names it (tl_target_parse_record; NULL or "": the default CPU
** target); the template reads the target's hardware facts (vector lanes). */
int tl_atvm_task_create(tl_ctx *ctx, const char *template_name, const char *args_json,
                        const char *target, tl_atvm_task **out);
void tl_atvm_task_free(tl_atvm_task *t);
const char *tl_atvm_task_args_json(const tl_atvm_task *t);
double tl_atvm_task_flop(const tl_atvm_task *t);

/* ---- the task's config space -------------------------------------------- */

int64_t tl_atvm_space_len(const tl_atvm_task *t);            /* number of valid configs */
int64_t tl_atvm_space_range_length(const tl_atvm_task *t);   /* product of knob dims */
int tl_atvm_space_num_knobs(const tl_atvm_task *t);
int64_t tl_atvm_space_knob_dim(const tl_atvm_task *t, int k);
int tl_atvm_space_is_valid(const tl_atvm_task *t, int64_t index);
void tl_atvm_space_point2knob(const tl_atvm_task *t, int64_t index, int64_t *digits);
int64_t tl_atvm_space_knob2point(const tl_atvm_task *t, const int64_t *digits);
/* The index of a log's config "entity" array text ([[name, kind, value], ...]);
** TL_E_PARSE / TL_E_ARG (naming the knob) when it does not fit the space. */
int tl_atvm_space_index_of_entity(tl_ctx *ctx, tl_atvm_task *t, const char *entity_json,
                                  int64_t *index);
/* knob features of a config (TVM's "knob" feature_type): fills out[0..n), returns n (<= cap) */
int tl_atvm_config_knob_features(const tl_atvm_task *t, int64_t index, float *out, int cap);
/* the config as the log's "config" object text {"index":..,"code_hash":null,"entity":[...]}
** (lives in t until next call); index -1 = the fallback config */
const char *tl_atvm_config_json(tl_atvm_task *t, int64_t index);
/* The fallback config's digits (one per knob; FallbackConfig: the template's
** default knobs). */
void tl_atvm_fallback_knobs(const tl_atvm_task *t, int64_t *digits);

/* ---- instantiation -------------------------------------------------------- */

/* on != 0: instantiate (and so measure, lower for features, build) each config
** of t in the blocked layout the graph executor runs it in (its inputs
** NCHW[ib]c / OIHW[ob]o with the config's blocks, the output NCHW[ob]c, no
** packing or unpacking stage), when the template has one; the args of an
** instantiated config then have those shapes. Returns 1 when t's template has
** a blocked form for t's args (and the switch took), else 0. */
int tl_atvm_task_set_blocked(tl_atvm_task *t, int on);

/* instantiate config index (-1 = fallback): a schedule (caller frees) and its argument tensor
** ids (in tl_sched_dag order: inputs then outputs); TL_E_SCHED etc. = instantiation error */
int tl_atvm_instantiate(tl_ctx *ctx, tl_atvm_task *t, int64_t index, tl_sched **sched,
                        int *args, int max_args, int *nargs);
/* instantiate + tl_lower (name = kernel name) */
int tl_atvm_lower(tl_ctx *ctx, tl_atvm_task *t, int64_t index, const char *name,
                  tl_lowered **out);
/* For the graph executor (fusion, as TVM's compile does it): add the template's compute for args
** to an existing dag, reading the tensors in[] (placeholders or computed), writing its output
** tensor ids; the executor then adds the fused injective consumers with tl_topi_op ... */
int tl_atvm_template_compute(tl_ctx *ctx, const char *template_name, const char *args_json,
                             tl_dag *dag, const int *in, int nin, int *out, int max_out,
                             int *nout);
/* ... and schedules the group: s's DAG holds the template's compute plus injective consumers up to
** the outputs; index -1 = the fallback config (FallbackConfig: the template's default knobs). */
int tl_atvm_template_schedule(tl_ctx *ctx, tl_atvm_task *t, int64_t index, tl_sched *s);

/* ---- the template registry ------------------------------------------------ */

enum {                           /* template flags (tl_atvm_template_flags) */
  TL_TMPL_PREPACKED_WEIGHT = 1,  /* deployed with a constant weight packed once at build
                                 ** time (its kernel input takes the packed shape) */
  TL_TMPL_FALLBACK_DEPLOYS = 2   /* with no record, its fallback config is deployed (it
                                 ** beats the default schedule) */
};

/* The i-th registered C template name (targets/targets.c: every family's
** templates, in the list's order), NULL past the end. */
const char *tl_atvm_template_list(int i);
int tl_atvm_template_exists(const char *name);
/* TL_TMPL_* of the template called name (0 for an unknown name). */
int tl_atvm_template_flags(const char *name);

/* Input i (0-based) of the template's args as the graph executor deploys it:
** ndim 0 when it is passed as it is, else the shape of its pre-transformed
** constant value (at most 8 dims), which deploy_input writes from src (the
** args' shape and dtype) into dst (that shape). */
int tl_atvm_template_deployed_shape(tl_ctx *ctx, const char *name, const char *args_json, int i,
                                    int *ndim, int64_t *shape);
int tl_atvm_template_deploy_input(tl_ctx *ctx, const char *name, const char *args_json, int i,
                                  const void *src, void *dst);

/* ---- Lua templates: a space built knob by knob (define mode) --------------
** The Lua cfg object drives these; the C templates use the same code. */
tl_atvm_space *tl_atvm_space_new(void);
void tl_atvm_space_free(tl_atvm_space *sp);
/* policy: "factors", "power2", "verbose", "candidate" (cands: ncands lists
** of num_outputs sizes, flattened); max_factor <= 0: none; no_tail < 0: the
** policy's default. Returns the knob's index, or -1 (message in ctx). */
int tl_atvm_space_define_split(tl_ctx *ctx, tl_atvm_space *sp, const char *name,
                               int64_t length, const char *policy, int num_outputs,
                               int64_t max_factor, int no_tail, const int64_t *cands,
                               int ncands);
/* policy: "identity", "all", "interval_all" (begin, end), "candidate" (cands:
** ncands permutations of n), "interleave" (begin = number of spatial axes,
** the rest reduce). */
int tl_atvm_space_define_reorder(tl_ctx *ctx, tl_atvm_space *sp, const char *name, int n,
                                 const char *policy, int begin, int end,
                                 const int64_t *cands, int ncands);
/* policy: "try_unroll", "try_vec", "try_unroll_vec", "unroll", "vec", "none",
** "locate_cache" (num_anchor). */
int tl_atvm_space_define_annotate(tl_ctx *ctx, tl_atvm_space *sp, const char *name, int n,
                                  const char *policy, int num_anchor);
/* candidates_json: a JSON array of scalars (ints, floats, bools, strings). */
int tl_atvm_space_define_knob(tl_ctx *ctx, tl_atvm_space *sp, const char *name,
                              const char *candidates_json);
/* Knob k's entity j: a split's sizes (n values, size[0] = -1), a reorder's
** permutation, an annotate's codes (0 none 1 vec 2 unroll ... in the order of formats
** §1.3; locate_cache: axis indices); returns the count, or -1. */
int tl_atvm_space_entity_ints(const tl_atvm_space *sp, int k, int64_t j, int64_t *out,
                              int cap);
/* Keep the entities j of knob k with keep[j] != 0 (n = its dim), in order:
** a knob-level filter. TL_E_ARG when none would be left. */
int tl_atvm_space_knob_keep(tl_ctx *ctx, tl_atvm_space *sp, int k, const uint8_t *keep, int64_t n);
/* An "ot" entity's value as JSON text (static storage per space). */
const char *tl_atvm_space_other_json(tl_atvm_space *sp, int k, int64_t j);
int tl_atvm_space_nknobs(const tl_atvm_space *sp);
int64_t tl_atvm_space_dim(const tl_atvm_space *sp, int k);
const char *tl_atvm_space_name(const tl_atvm_space *sp, int k);
int tl_atvm_space_kind(const tl_atvm_space *sp, int k);
int tl_atvm_space_find(const tl_atvm_space *sp, const char *name);   /* knob index or -1 */
int64_t tl_atvm_space_total(const tl_atvm_space *sp);               /* product of dims */
/* Index of the entity of knob k whose JSON value equals value_json (the log's
** third field), or -1. Split sizes compare from position 1 on (size[0] is
** never used); other kinds compare values (1 == 1.0 == true). */
int64_t tl_atvm_space_find_entity(tl_atvm_space *sp, int k, const char *value_json);
/* Fallback (FallbackConfig): the digit of knob k used when no config is
** chosen; fallback_split sets a split knob by constraints (per-level caps, -1
** = none; walking from the innermost level outward, the largest divisor of
** the remaining length <= the cap). */
int tl_atvm_space_fallback_split(tl_ctx *ctx, tl_atvm_space *sp, int k,
                                 const int64_t *constraints, int n);
int64_t tl_atvm_space_fallback_digit(const tl_atvm_space *sp, int k);
/* The task's own space (lives in t). */
tl_atvm_space *tl_atvm_task_space(tl_atvm_task *t);

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
