/*
** schedule.c -- the schedule state and its transform steps.
**
** tl_sched_apply is the one door: it checks a step against the current
** state (stage and iterator ids in range, lengths positive, permutations,
** consecutive fuses, producer/consumer relations, annotations legal for the
** iterator kind), applies it and appends it to the history. It dispatches
** on the step table of steps.h to the kind's step_<verb> function. The
** public entry tl_sched_step (and the C shorthands over it) builds a tl_step
** from the fields of its row and goes through it, so the history is
** complete and replaying it on a fresh copy of the DAG rebuilds the state
** (tl_sched_copy does exactly that).
**
** Steps that add stages rewrite the owned DAG: cache_read inserts an
** identity copy "A.shared" right after A and re-points the chosen readers
** at it; cache_write moves C's computation into "C.local" (inserted right
** before C) and leaves C an identity copy of it; rfactor splits a reduction
** into a partial reduction "C.rf" (inserted before C) and a final one. The
** DAG's op order and the stage order stay equal at all times.
**
** JSON, printing and hashing live in schedule_json.c; lowering in lower.c.
*/
#include "schedule.h"

#include <stdio.h>

const char *const tl_ann_name[12] = {"none",        "unroll",      "vectorize",  "parallel",
                                     "vthread",     "blockIdx.x",  "threadIdx.x", "blockIdx.y",
                                     "threadIdx.y", "blockIdx.z",  "threadIdx.z", "tensorize"};

int tl_step_kind(const char *name) {
  for (int i = 0; i < TL_STEP__MAX; i++)
    if (strcmp(name, tl_step_table[i].name) == 0) return i;
  return -1;
}

/* ---- small helpers ----------------------------------------------------------- */

static tl_te_op *stage_op(const tl_sched *s, int st) { return &s->dag->ops.v[s->stages.v[st].op]; }
static const char *stage_name(const tl_sched *s, int st) { return stage_op(s, st)->name; }
static tl_iter *leaf(tl_stage *st, int pos) { return &st->nodes.v[st->leaves.v[pos]]; }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* "i, j, k": the stage's iterators, for messages. */
static const char *iter_list(const tl_sched *s, int st, char *buf, size_t cap) {
  const tl_stage *sg = &s->stages.v[st];
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < sg->leaves.n && n + 1 < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", sg->nodes.v[sg->leaves.v[i]].name);
  if (n >= cap && cap > 4) strcpy(buf + cap - 4, "...");
  return buf;
}

static const char *stage_list(const tl_sched *s, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < s->stages.n && n + 1 < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", stage_name(s, i));
  if (n >= cap && cap > 4) strcpy(buf + cap - 4, "...");
  return buf;
}

static int check_stage(tl_ctx *ctx, const tl_sched *s, const char *verb, int st) {
  char b[512];
  if (st < 0 || st >= s->stages.n)
    return tl_err(ctx, TL_E_SCHED, "%s: no stage %d (the schedule has %d: %s)", verb, st,
                  s->stages.n, stage_list(s, b, sizeof b));
  return 0;
}

/* A compute stage whose loops exist (not a placeholder, not inlined). */
static int check_loop_stage(tl_ctx *ctx, const tl_sched *s, const char *verb, int st) {
  if (check_stage(ctx, s, verb, st)) return TL_E_SCHED;
  if (stage_op(s, st)->kind == TL_OP_PLACEHOLDER)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is a placeholder", verb, stage_name(s, st));
  if (s->stages.v[st].compute_at == TL_CA_INLINED)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is inlined", verb, stage_name(s, st));
  return 0;
}

static int check_iter(tl_ctx *ctx, const tl_sched *s, const char *verb, int st, int it) {
  const tl_stage *sg = &s->stages.v[st];
  char b[512];
  if (it < 0 || it >= sg->leaves.n)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' has no iterator %d (it has %d: %s)", verb,
                  stage_name(s, st), it, sg->leaves.n, iter_list(s, st, b, sizeof b));
  return 0;
}

int tl_sched_leaf_pos(const tl_sched *s, int stage, int node) {
  const tl_stage *sg = &s->stages.v[stage];
  for (int i = 0; i < sg->leaves.n; i++)
    if (sg->leaves.v[i] == node) return i;
  return -1;
}

int tl_sched_attached_at(const tl_sched *s, int st, int node) {
  for (int i = 0; i < s->stages.n; i++) {
    const tl_stage *o = &s->stages.v[i];
    if (o->compute_at == TL_CA_ITER && o->at_stage == st && (node < 0 || o->at_node == node))
      return i;
  }
  return -1;
}

static void move_attachments(tl_sched *s, int st, int from, int to) {
  for (int i = 0; i < s->stages.n; i++) {
    tl_stage *o = &s->stages.v[i];
    if (o->compute_at == TL_CA_ITER && o->at_stage == st && o->at_node == from) o->at_node = to;
  }
}

static void move_pragmas(tl_stage *sg, int from, int to) {
  for (int i = 0; i < sg->pragmas.n; i++)
    if (sg->pragmas.v[i].node == from) sg->pragmas.v[i].node = to;
}

static int add_node(tl_sched *s, tl_stage *sg, const char *name, int64_t extent, int kind, int rel) {
  tl_iter it;
  it.name = tl_arena_strdup(&s->arena, name);
  it.extent = extent;
  it.kind = kind;
  it.ann = TL_ANN_NONE;
  it.rel = rel;
  TL_VEC_PUSH(sg->nodes, it);
  return sg->nodes.n - 1;
}

static void stage_init(tl_sched *s, tl_stage *sg, int op_index) {
  memset(sg, 0, sizeof *sg);
  sg->op = op_index;
  sg->compute_at = TL_CA_ROOT;
  sg->at_stage = sg->at_node = -1;
  sg->scope = TL_SCOPE_GLOBAL;
  const tl_te_op *op = &s->dag->ops.v[op_index];
  if (op->kind == TL_OP_PLACEHOLDER) return;
  for (int i = 0; i < op->ndim; i++) {
    int n = add_node(s, sg, tl_ir_var(s->dag->ir, op->axis[i].var)->name, op->axis[i].extent,
                     TL_ITER_SPATIAL, -1);
    TL_VEC_PUSH(sg->leaves, n);
  }
  for (int i = 0; i < op->nreduce; i++) {
    int n = add_node(s, sg, tl_ir_var(s->dag->ir, op->reduce_axis[i].var)->name,
                     op->reduce_axis[i].extent, TL_ITER_REDUCE, -1);
    TL_VEC_PUSH(sg->leaves, n);
  }
}

static void stage_release(tl_stage *sg) {
  TL_VEC_FREE(sg->nodes);
  TL_VEC_FREE(sg->rels);
  TL_VEC_FREE(sg->leaves);
  TL_VEC_FREE(sg->pragmas);
  TL_VEC_FREE(sg->aligns);
}

/* 1 if the stage still has the op's axes in order, unannotated. */
static int stage_untouched(const tl_stage *sg) {
  if (sg->rels.n || sg->pragmas.n || sg->aligns.n) return 0;
  for (int i = 0; i < sg->leaves.n; i++)
    if (sg->leaves.v[i] != i || sg->nodes.v[i].ann != TL_ANN_NONE) return 0;
  return 1;
}

static int sched_from_base(tl_ctx *ctx, const tl_dag *base, tl_sched **out);

/* ---- creation ------------------------------------------------------------------ */

static tl_sched *sched_alloc(void) {
  tl_sched *s = tl_calloc(1, sizeof *s);
  tl_arena_init(&s->arena);
  return s;
}

/* Stages for every op of s->dag; outputs flagged. */
static void init_stages(tl_sched *s) {
  int *outs = tl_malloc(sizeof(int) * (size_t)(s->dag->tensors.n + 1));
  int nout = tl_dag_output_list(s->dag, outs);
  for (int i = 0; i < s->dag->ops.n; i++) {
    tl_stage sg;
    stage_init(s, &sg, i);
    for (int k = 0; k < nout; k++)
      if (s->dag->tensors.v[outs[k]].op == i) sg.is_output = 1;
    TL_VEC_PUSH(s->stages, sg);
  }
  free(outs);
}

TL_EXPORT int tl_sched_new(tl_ctx *ctx, const tl_dag *dag, const int *outputs, int nout,
                           tl_sched **out) {
  *out = NULL;
  int *outs = NULL;
  if (!outputs || nout <= 0) {
    outs = tl_malloc(sizeof(int) * (size_t)(dag->tensors.n + 1));
    nout = tl_dag_output_list(dag, outs);
    outputs = outs;
  }
  for (int i = 0; i < nout; i++)
    if (outputs[i] < 0 || outputs[i] >= dag->tensors.n) {
      free(outs);
      return tl_err(ctx, TL_E_ARG, "create_schedule: no tensor %d in the dag (it has %d)",
                    outputs[i], dag->tensors.n);
    }
  tl_dag *base = NULL;
  int rc = tl_dag_extract(ctx, dag, outputs, nout, &base, NULL);
  free(outs);
  if (rc) return rc;
  rc = sched_from_base(ctx, base, out);
  tl_dag_free(base);
  return rc;
}

TL_EXPORT void tl_sched_free(tl_sched *s) {
  if (!s) return;
  for (int i = 0; i < s->stages.n; i++) stage_release(&s->stages.v[i]);
  TL_VEC_FREE(s->stages);
  TL_VEC_FREE(s->steps);
  tl_dag_free(s->dag);
  tl_dag_free(s->base);
  tl_arena_free(&s->arena);
  tl_buf_free(&s->text);
  free(s);
}

/* ---- DAG rewriting for the stage-adding steps ------------------------------------- */

/* Insert op at index at (stage index too); later ops shift by one. */
static void dag_insert_op(tl_dag *dag, int at, const tl_te_op *op) {
  TL_VEC_RESERVE(dag->ops, dag->ops.n + 1);
  memmove(dag->ops.v + at + 1, dag->ops.v + at, sizeof(tl_te_op) * (size_t)(dag->ops.n - at));
  dag->ops.v[at] = *op;
  dag->ops.n++;
  for (int t = 0; t < dag->tensors.n; t++)
    if (dag->tensors.v[t].op >= at) dag->tensors.v[t].op++;
  for (int r = 0; r < dag->raxes.n; r++)
    if (dag->raxes.v[r].owner >= at) dag->raxes.v[r].owner++;
}

/* A new tensor (output 0 of op) with its own buffer named like the op. */
static int dag_new_tensor(tl_dag *dag, int op, const tl_buffer *like, const char *name, int scope) {
  tl_tensor t;
  t.op = op;
  t.out_index = 0;
  t.buf = tl_buffer_new(dag->ir, name, like->dtype, like->ndim, like->shape, scope);
  TL_VEC_PUSH(dag->tensors, t);
  return dag->tensors.n - 1;
}

static void stage_insert(tl_sched *s, int at, int op_index) {
  tl_stage sg;
  TL_VEC_RESERVE(s->stages, s->stages.n + 1);
  memmove(s->stages.v + at + 1, s->stages.v + at, sizeof(tl_stage) * (size_t)(s->stages.n - at));
  s->stages.n++;
  for (int i = 0; i < s->stages.n; i++) {
    if (i == at) continue;
    tl_stage *o = &s->stages.v[i];
    if (o->compute_at == TL_CA_ITER && o->at_stage >= at) o->at_stage++;
    o->op = i;
  }
  stage_init(s, &sg, op_index);
  s->stages.v[at] = sg;
}

/* Fresh iterators for stage st (its op was rewritten); the attachment,
** scope and output flag stay. */
static void stage_reset(tl_sched *s, int st) {
  tl_stage *old = &s->stages.v[st], fresh;
  stage_init(s, &fresh, st);
  fresh.compute_at = old->compute_at;
  fresh.at_stage = old->at_stage;
  fresh.at_node = old->at_node;
  fresh.scope = old->scope;
  fresh.is_output = old->is_output;
  stage_release(old);
  *old = fresh;
}

/* An op name not used in the dag: base, else base_1, base_2, ... */
static const char *unique_name(tl_dag *dag, const char *base, char *buf, size_t cap) {
  snprintf(buf, cap, "%s", base);
  for (int k = 1;; k++) {
    int clash = 0;
    for (int i = 0; i < dag->ops.n && !clash; i++) clash = strcmp(dag->ops.v[i].name, buf) == 0;
    if (!clash) return buf;
    snprintf(buf, cap, "%s_%d", base, k);
  }
}

typedef struct {
  int from, to;
} rebuf_st;

static tl_ref rebuf_fn(tl_ir *ir, tl_ref node, void *ud) {
  rebuf_st *r = ud;
  if (tl_ir_op(ir, node) != TL_IR_LOAD || (int)tl_ir_node(ir, node)->imm.u != r->from) return node;
  /* copy the indices out of ir->kids: building the new node may grow it */
  int n = tl_ir_nkids(ir, node);
  tl_ref stack[16] = {0};
  tl_ref *idx = n <= 16 ? stack : tl_malloc(sizeof(tl_ref) * (size_t)n);
  if (n) memcpy(idx, tl_ir_kids(ir, node), sizeof(tl_ref) * (size_t)n);
  tl_ref out = tl_load(ir, r->to, idx, n);
  if (idx != stack) free(idx);
  return out;
}

/* Point op's loads of tensor `from` at tensor `to`. */
static void op_repoint(tl_dag *dag, tl_te_op *op, int from, int to) {
  rebuf_st r = {dag->tensors.v[from].buf, dag->tensors.v[to].buf};
  for (int i = 0; i < op->nout; i++) op->body[i] = tl_ir_mutate(dag->ir, op->body[i], rebuf_fn, &r);
  if (op->red_cond) op->red_cond = tl_ir_mutate(dag->ir, op->red_cond, rebuf_fn, &r);
  int *in = tl_arena_alloc(&dag->arena, sizeof(int) * (size_t)(op->ninputs + 1));
  int n = 0;
  for (int i = 0; i < op->ninputs; i++) {
    int t = op->inputs[i] == from ? to : op->inputs[i];
    int dup = 0;
    for (int j = 0; j < n; j++) dup |= in[j] == t;
    if (!dup) in[n++] = t;
  }
  op->inputs = in;
  op->ninputs = n;
}

static int op_reads(const tl_te_op *op, int tensor) {
  for (int i = 0; i < op->ninputs; i++)
    if (op->inputs[i] == tensor) return 1;
  return 0;
}

static int parse_scope(const char *name) {
  for (int i = 0; i < 3; i++)
    if (strcmp(name, tl_ir_scopename[i]) == 0) return i;
  return -1;
}

/* ---- the steps ---------------------------------------------------------------------- */

static const char *ann_verb(int ann) {
  switch (ann) {
  case TL_ANN_UNROLL: return "unroll";
  case TL_ANN_VECTORIZE: return "vectorize";
  case TL_ANN_PARALLEL: return "parallel";
  case TL_ANN_TENSORIZE: return "tensorize";
  case TL_ANN_NONE: return "annotate";
  default: return "bind";
  }
}

/* Split leaf `it` of stage st by lengths (see §2.4 for inner_to_outer). */
static int do_split(tl_ctx *ctx, tl_sched *s, const char *verb, int st, int it, int n,
                    const int64_t *lengths, int inner_to_outer) {
  if (check_loop_stage(ctx, s, verb, st) || check_iter(ctx, s, verb, st, it)) return TL_E_SCHED;
  tl_stage *sg = &s->stages.v[st];
  const char *pname = leaf(sg, it)->name;
  if (n < 1)
    return tl_err(ctx, TL_E_SCHED, "%s: no lengths given for iterator '%s' of stage '%s'", verb,
                  pname, stage_name(s, st));
  if (n > 16)
    return tl_err(ctx, TL_E_SCHED, "%s: %d lengths for iterator '%s' of stage '%s' (at most 16)",
                  verb, n, pname, stage_name(s, st));
  int64_t prod = 1;
  for (int i = 0; i < n; i++) {
    if (lengths[i] <= 0 || lengths[i] > INT32_MAX)
      return tl_err(ctx, TL_E_SCHED,
                    "%s: lengths of iterator '%s' of stage '%s' must be positive, got %lld", verb,
                    pname, stage_name(s, st), (long long)lengths[i]);
    prod *= lengths[i];
    if (prod > INT32_MAX)
      return tl_err(ctx, TL_E_SCHED, "%s: lengths of iterator '%s' of stage '%s' are too large",
                    verb, pname, stage_name(s, st));
  }
  int p = sg->leaves.v[it];
  tl_iter parent = sg->nodes.v[p];
  int64_t rest = parent.extent > 0 ? ceil_div(parent.extent, prod) : 0;

  tl_rel rel;
  memset(&rel, 0, sizeof rel);
  rel.kind = TL_REL_SPLIT;
  rel.nin = 1;
  rel.nout = n + 1;
  rel.in = tl_arena_alloc(&s->arena, sizeof(int));
  rel.out = tl_arena_alloc(&s->arena, sizeof(int) * (size_t)(n + 1));
  rel.in[0] = p;
  rel.nlengths = n;
  rel.lengths = tl_arena_alloc(&s->arena, sizeof(int64_t) * (size_t)n);
  memcpy(rel.lengths, lengths, sizeof(int64_t) * (size_t)n);
  rel.inner_to_outer = inner_to_outer != 0;
  int relid = sg->rels.n;
  for (int c = 0; c <= n; c++) {
    char name[256];
    if (n == 1) snprintf(name, sizeof name, "%s.%s", parent.name, c == 0 ? "outer" : "inner");
    else snprintf(name, sizeof name, "%s.%d", parent.name, c);
    int64_t ext;
    if (inner_to_outer) ext = c == 0 ? rest : lengths[c - 1];
    else ext = c == n ? rest : lengths[c];
    rel.out[c] = add_node(s, sg, name, ext, parent.kind, relid);
  }
  TL_VEC_PUSH(sg->rels, rel);
  /* leaves: replace p by the children */
  int old = sg->leaves.n;
  TL_VEC_RESERVE(sg->leaves, old + n);
  memmove(sg->leaves.v + it + n + 1, sg->leaves.v + it + 1, sizeof(int) * (size_t)(old - it - 1));
  for (int c = 0; c <= n; c++) sg->leaves.v[it + c] = rel.out[c];
  sg->leaves.n = old + n;
  move_attachments(s, st, p, rel.out[n]);
  move_pragmas(sg, p, rel.out[0]);
  return 0;
}

static int step_split(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  return do_split(ctx, s, "split", t->stage_id, t->iter_id, t->nints, t->ints, t->inner_to_outer);
}

static const tl_step *src_split(tl_ctx *ctx, const tl_sched *s, const char *verb, int id) {
  if (id < 0 || id >= s->steps.n) {
    tl_err(ctx, TL_E_SCHED, "%s: no step %d to follow (the schedule has %d steps)", verb, id,
           s->steps.n);
    return NULL;
  }
  const tl_step *src = &s->steps.v[id];
  if (src->kind != TL_STEP_SP) {
    tl_err(ctx, TL_E_SCHED, "%s: step %d is %s, not a split", verb, id, tl_step_name(src->kind));
    return NULL;
  }
  return src;
}

static int step_follow_split(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "follow_split";
  const tl_step *src = src_split(ctx, s, verb, t->src_step_id);
  if (!src) return TL_E_SCHED;
  if (t->n_split < 1 || t->n_split > src->nints + 1)
    return tl_err(ctx, TL_E_SCHED, "%s: n_split %d out of range [1, %d] for step %d", verb,
                  t->n_split, src->nints + 1, t->src_step_id);
  int64_t lengths[17];
  int j = 0;
  for (; j < t->n_split - 1; j++) lengths[j] = src->ints[j];
  int64_t last = 1;
  for (int k = j; k < src->nints; k++) last *= src->ints[k];
  lengths[j] = last;
  return do_split(ctx, s, verb, t->stage_id, t->iter_id, t->n_split, lengths, 1);
}

static int step_follow_fused_split(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "follow_fused_split";
  if (t->nints < 1)
    return tl_err(ctx, TL_E_SCHED, "%s: no source steps given", verb);
  int64_t len = 1;
  for (int i = 0; i < t->nints; i++) {
    if (t->ints[i] < 0 || t->ints[i] > INT32_MAX)
      return tl_err(ctx, TL_E_SCHED, "%s: no step %lld to follow", verb, (long long)t->ints[i]);
    const tl_step *src = src_split(ctx, s, verb, (int)t->ints[i]);
    if (!src) return TL_E_SCHED;
    if (t->level < 0 || t->level >= src->nints)
      return tl_err(ctx, TL_E_SCHED, "%s: level %d out of range for step %lld (%d lengths)", verb,
                    t->level, (long long)t->ints[i], src->nints);
    len *= src->ints[t->level];
  }
  return do_split(ctx, s, verb, t->stage_id, t->iter_id, 1, &len, t->inner_to_outer);
}

static int step_reorder(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "reorder";
  int st = t->stage_id;
  if (check_loop_stage(ctx, s, verb, st)) return TL_E_SCHED;
  tl_stage *sg = &s->stages.v[st];
  int n = sg->leaves.n, ok = t->nints == n;
  char seen[512] = {0};
  if (n > 512) ok = 0;
  for (int i = 0; ok && i < n; i++) {
    int64_t v = t->ints[i];
    if (v < 0 || v >= n || seen[v]) ok = 0;
    else seen[v] = 1;
  }
  if (!ok) {
    tl_buf b = {0};
    char lst[512];
    for (int i = 0; i < t->nints; i++) tl_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)t->ints[i]);
    tl_err(ctx, TL_E_SCHED, "%s: [%s] is not a permutation of the %d iterators of stage '%s' (%s)",
           verb, b.s ? b.s : "", n, stage_name(s, st), iter_list(s, st, lst, sizeof lst));
    tl_buf_free(&b);
    return TL_E_SCHED;
  }
  int *nl = tl_malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++) nl[i] = sg->leaves.v[t->ints[i]];
  memcpy(sg->leaves.v, nl, sizeof(int) * (size_t)n);
  free(nl);
  return 0;
}

static int step_fuse(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "fuse";
  int st = t->stage_id;
  if (check_loop_stage(ctx, s, verb, st)) return TL_E_SCHED;
  tl_stage *sg = &s->stages.v[st];
  if (t->nints < 1) return tl_err(ctx, TL_E_SCHED, "%s: no iterators given for stage '%s'", verb, stage_name(s, st));
  for (int i = 0; i < t->nints; i++) {
    int it = t->ints[i] < INT32_MIN || t->ints[i] > INT32_MAX ? -1 : (int)t->ints[i];
    if (check_iter(ctx, s, verb, st, it)) return TL_E_SCHED;
    if (i > 0 && t->ints[i] != t->ints[i - 1] + 1)
      return tl_err(ctx, TL_E_SCHED,
                    "%s: iterators %lld and %lld of stage '%s' are not consecutive ('%s', '%s')",
                    verb, (long long)t->ints[i - 1], (long long)t->ints[i], stage_name(s, st),
                    leaf(sg, (int)t->ints[i - 1])->name, leaf(sg, (int)t->ints[i])->name);
  }
  for (int i = 0; i + 1 < t->nints; i++) {
    int a = tl_sched_attached_at(s, st, sg->leaves.v[t->ints[i]]);
    if (a >= 0)
      return tl_err(ctx, TL_E_SCHED,
                    "%s: stage '%s' is computed at iterator '%s' of stage '%s', which is not the "
                    "innermost of the fused iterators",
                    verb, stage_name(s, a), leaf(sg, (int)t->ints[i])->name, stage_name(s, st));
  }
  if (t->nints == 1) return 0;
  int first = (int)t->ints[0], n = t->nints;
  tl_buf name = {0};
  int64_t ext = 1;
  int kind = leaf(sg, first)->kind;
  for (int i = 0; i < n; i++) {
    const tl_iter *it = leaf(sg, first + i);
    tl_buf_printf(&name, "%s.", it->name);
    ext = (ext > 0 && it->extent > 0) ? ext * it->extent : 0;
    if (ext > INT32_MAX) {
      tl_buf_free(&name);
      return tl_err(ctx, TL_E_SCHED, "%s: the fused extent of stage '%s' is too large", verb,
                    stage_name(s, st));
    }
    if (it->kind != kind) kind = TL_ITER_MIXED;
  }
  tl_buf_puts(&name, "fused");
  tl_rel rel;
  memset(&rel, 0, sizeof rel);
  rel.kind = TL_REL_FUSE;
  rel.nin = n;
  rel.nout = 1;
  rel.in = tl_arena_alloc(&s->arena, sizeof(int) * (size_t)n);
  rel.out = tl_arena_alloc(&s->arena, sizeof(int));
  for (int i = 0; i < n; i++) rel.in[i] = sg->leaves.v[first + i];
  int f = add_node(s, sg, name.s, ext, kind, sg->rels.n);
  tl_buf_free(&name);
  rel.out[0] = f;
  TL_VEC_PUSH(sg->rels, rel);
  move_attachments(s, st, rel.in[n - 1], f);
  for (int i = 0; i < n; i++) move_pragmas(sg, rel.in[i], f);
  sg->leaves.v[first] = f;
  memmove(sg->leaves.v + first + 1, sg->leaves.v + first + n,
          sizeof(int) * (size_t)(sg->leaves.n - first - n));
  sg->leaves.n -= n - 1;
  return 0;
}

static int step_annotate(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  int ann = t->annotation;
  const char *verb = ann >= 0 && ann < 12 ? ann_verb(ann) : "annotate";
  int st = t->stage_id;
  if (check_loop_stage(ctx, s, verb, st) || check_iter(ctx, s, verb, st, t->iter_id)) return TL_E_SCHED;
  tl_stage *sg = &s->stages.v[st];
  tl_iter *it = leaf(sg, t->iter_id);
  if (ann < 0 || ann >= 12)
    return tl_err(ctx, TL_E_SCHED, "%s: unknown annotation %d for iterator '%s' of stage '%s'",
                  verb, ann, it->name, stage_name(s, st));
  /* a reduction iterator bound to threadIdx.x: a cross-thread reduction (lower.c) */
  int xred = it->kind == TL_ITER_REDUCE && ann == TL_ANN_THREAD_X;
  if (it->kind != TL_ITER_SPATIAL && ann != TL_ANN_NONE && ann != TL_ANN_UNROLL &&
      ann != TL_ANN_TENSORIZE && !xred) {
    const char *what = it->kind == TL_ITER_MIXED ? "mixed" : "reduction";
    if (ann == TL_ANN_PARALLEL)
      return tl_err(ctx, TL_E_SCHED, "parallel: cannot parallelize %s iterator '%s' of stage '%s'",
                    what, it->name, stage_name(s, st));
    if (ann == TL_ANN_VECTORIZE)
      return tl_err(ctx, TL_E_SCHED, "vectorize: cannot vectorize %s iterator '%s' of stage '%s'",
                    what, it->name, stage_name(s, st));
    return tl_err(ctx, TL_E_SCHED, "bind: cannot bind %s iterator '%s' of stage '%s' to %s", what,
                  it->name, stage_name(s, st), tl_ann_name[ann]);
  }
  if (ann != TL_ANN_NONE && it->ann != TL_ANN_NONE && it->ann != ann)
    return tl_err(ctx, TL_E_SCHED, "%s: iterator '%s' of stage '%s' is already annotated %s", verb,
                  it->name, stage_name(s, st), tl_ann_name[it->ann]);
  if (ann >= TL_ANN_VTHREAD && ann <= TL_ANN_THREAD_Z)
    for (int i = 0; i < sg->leaves.n; i++)
      if (i != t->iter_id && leaf(sg, i)->ann == ann)
        return tl_err(ctx, TL_E_SCHED, "bind: stage '%s' already binds iterator '%s' to %s",
                      stage_name(s, st), leaf(sg, i)->name, tl_ann_name[ann]);
  it->ann = ann;
  return 0;
}

static int step_pragma(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "pragma";
  int st = t->stage_id;
  if (check_loop_stage(ctx, s, verb, st) || check_iter(ctx, s, verb, st, t->iter_id)) return TL_E_SCHED;
  tl_stage *sg = &s->stages.v[st];
  const char *p = t->str ? t->str : "";
  if (!*p || *p == '$')
    return tl_err(ctx, TL_E_SCHED, "%s: empty pragma for iterator '%s' of stage '%s'", verb,
                  leaf(sg, t->iter_id)->name, stage_name(s, st));
  const char *dollar = strchr(p, '$');
  if (strncmp(p, "auto_unroll_max_step", 20) == 0) {
    char *end = NULL;
    long v = dollar ? strtol(dollar + 1, &end, 10) : -1;
    if (!dollar || dollar != p + 20 || end == dollar + 1 || *end || v < 0)
      return tl_err(ctx, TL_E_SCHED,
                    "%s: expected \"auto_unroll_max_step$<N>\" for iterator '%s' of stage '%s', "
                    "got \"%s\"",
                    verb, leaf(sg, t->iter_id)->name, stage_name(s, st), p);
  }
  tl_pragma pr;
  pr.node = sg->leaves.v[t->iter_id];
  pr.text = tl_arena_strdup(&s->arena, p);
  TL_VEC_PUSH(sg->pragmas, pr);
  return 0;
}

static int step_storage_align(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "storage_align";
  int st = t->stage_id;
  if (check_loop_stage(ctx, s, verb, st) || check_iter(ctx, s, verb, st, t->iter_id)) return TL_E_SCHED;
  tl_stage *sg = &s->stages.v[st];
  const char *iname = leaf(sg, t->iter_id)->name;
  if (t->factor <= 0)
    return tl_err(ctx, TL_E_SCHED, "%s: factor %d for iterator '%s' of stage '%s' must be positive",
                  verb, t->factor, iname, stage_name(s, st));
  if (t->offset < 0 || t->offset >= t->factor)
    return tl_err(ctx, TL_E_SCHED, "%s: offset %d for iterator '%s' of stage '%s' is not in [0, %d)",
                  verb, t->offset, iname, stage_name(s, st), t->factor);
  /* walk up splits to the op axis */
  int node = sg->leaves.v[t->iter_id];
  while (sg->nodes.v[node].rel >= 0) {
    const tl_rel *r = &sg->rels.v[sg->nodes.v[node].rel];
    if (r->kind != TL_REL_SPLIT)
      return tl_err(ctx, TL_E_SCHED, "%s: iterator '%s' of stage '%s' is fused, not an axis", verb,
                    iname, stage_name(s, st));
    node = r->in[0];
  }
  if (sg->nodes.v[node].kind != TL_ITER_SPATIAL)
    return tl_err(ctx, TL_E_SCHED, "%s: iterator '%s' of stage '%s' is a reduction", verb, iname,
                  stage_name(s, st));
  for (int i = 0; i < sg->aligns.n; i++)
    if (sg->aligns.v[i].axis == node) {
      sg->aligns.v[i].factor = t->factor;
      sg->aligns.v[i].offset = t->offset;
      return 0;
    }
  tl_align a = {node, t->factor, t->offset};
  TL_VEC_PUSH(sg->aligns, a);
  return 0;
}

/* 1 if stage `to` reads a tensor of `from`, directly or through other stages (a stage
** computed at a consumer's consumer: the lowering bounds its region from the accesses of
** its readers inside the attach loop, and rejects a reader outside it). */
static int reaches(const tl_sched *s, int from, int to) {
  int *cons = tl_malloc(sizeof(int) * (size_t)(s->dag->ops.n + 1));
  int *work = tl_malloc(sizeof(int) * (size_t)(s->dag->ops.n + 1));
  char *seen = tl_calloc((size_t)s->dag->ops.n + 1, 1);
  int nw = 0, found = 0;
  work[nw++] = from;
  while (nw && !found) {
    int x = work[--nw];
    int nc = tl_dag_consumers(s->dag, x, cons);
    for (int i = 0; i < nc; i++) {
      int c = cons[i];
      if (c == to) found = 1;
      else if (!seen[c]) {
        seen[c] = 1;
        work[nw++] = c;
      }
    }
  }
  free(cons);
  free(work);
  free(seen);
  return found;
}

static int step_compute_at(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "compute_at";
  int st = t->stage_id, ts = t->target_stage_id;
  if (check_stage(ctx, s, verb, st) || check_stage(ctx, s, verb, ts)) return TL_E_SCHED;
  if (stage_op(s, st)->kind == TL_OP_PLACEHOLDER)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is a placeholder", verb, stage_name(s, st));
  if (st == ts)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' cannot be computed at itself", verb, stage_name(s, st));
  if (check_loop_stage(ctx, s, verb, ts) || check_iter(ctx, s, verb, ts, t->target_iter_id))
    return TL_E_SCHED;
  if (!reaches(s, st, ts))
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is not a producer of '%s'", verb,
                  stage_name(s, st), stage_name(s, ts));
  tl_stage *sg = &s->stages.v[st];
  sg->compute_at = TL_CA_ITER;
  sg->at_stage = ts;
  sg->at_node = s->stages.v[ts].leaves.v[t->target_iter_id];
  return 0;
}

static int step_compute_inline(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "compute_inline";
  int st = t->stage_id;
  if (check_stage(ctx, s, verb, st)) return TL_E_SCHED;
  const tl_te_op *op = stage_op(s, st);
  tl_stage *sg = &s->stages.v[st];
  if (op->kind == TL_OP_PLACEHOLDER)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is a placeholder", verb, op->name);
  if (op->nreduce > 0)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is a reduction", verb, op->name);
  if (sg->is_output)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is an output", verb, op->name);
  if (op->nout != 1)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' has %d outputs", verb, op->name, op->nout);
  int a = tl_sched_attached_at(s, st, -1);
  if (a >= 0)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is computed at stage '%s'", verb,
                  stage_name(s, a), op->name);
  sg->compute_at = TL_CA_INLINED;
  sg->at_stage = sg->at_node = -1;
  return 0;
}

static int step_compute_root(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "compute_root";
  int st = t->stage_id;
  if (check_stage(ctx, s, verb, st)) return TL_E_SCHED;
  if (stage_op(s, st)->kind == TL_OP_PLACEHOLDER)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is a placeholder", verb, stage_name(s, st));
  tl_stage *sg = &s->stages.v[st];
  sg->compute_at = TL_CA_ROOT;
  sg->at_stage = sg->at_node = -1;
  return 0;
}

static int step_cache_read(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "cache_read";
  int st = t->stage_id;
  if (check_stage(ctx, s, verb, st)) return TL_E_SCHED;
  tl_dag *dag = s->dag;
  const tl_te_op *op = stage_op(s, st);
  int scope = parse_scope(t->str ? t->str : "");
  if (scope < 0)
    return tl_err(ctx, TL_E_SCHED, "%s: unknown scope '%s' for stage '%s' (expected global, local or shared)",
                  verb, t->str ? t->str : "", op->name);
  if (op->nout != 1)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' has %d outputs", verb, op->name, op->nout);
  if (s->stages.v[st].compute_at == TL_CA_INLINED)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is inlined", verb, op->name);
  if (t->nints < 1)
    return tl_err(ctx, TL_E_SCHED, "%s: no readers given for stage '%s'", verb, op->name);
  int tensor = op->out_tensors[0];
  for (int i = 0; i < t->nints; i++) {
    int64_t r = t->ints[i];
    if (r < 0 || r >= s->stages.n) return check_stage(ctx, s, verb, r < 0 || r > INT32_MAX ? -1 : (int)r);
    for (int j = 0; j < i; j++)
      if (t->ints[j] == r)
        return tl_err(ctx, TL_E_SCHED, "%s: reader '%s' given twice", verb, stage_name(s, (int)r));
    if (!op_reads(stage_op(s, (int)r), tensor))
      return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' does not read '%s'", verb,
                    stage_name(s, (int)r), op->name);
  }
  /* the cache op: R(ax...) = T(ax...) */
  char nb[256], full[300];
  snprintf(full, sizeof full, "%s.%s", op->name, tl_ir_scopename[scope]);
  const char *name = unique_name(dag, full, nb, sizeof nb);
  tl_te_op r;
  memset(&r, 0, sizeof r);
  r.kind = TL_OP_COMPUTE;
  r.name = tl_arena_strdup(&dag->arena, name);
  r.tag = tl_arena_strdup(&dag->arena, "");
  r.ndim = op->ndim;
  r.shape = tl_arena_alloc(&dag->arena, sizeof(int64_t) * (size_t)(op->ndim + 1));
  memcpy(r.shape, op->shape, sizeof(int64_t) * (size_t)op->ndim);
  r.dtype = op->dtype;
  r.axis = tl_arena_alloc(&dag->arena, sizeof(tl_axis) * (size_t)(op->ndim + 1));
  tl_ref vars[64];
  if (op->ndim > 64) return tl_err(ctx, TL_E_SCHED, "%s: too many dimensions", verb);
  for (int i = 0; i < op->ndim; i++) {
    char an[32];
    snprintf(an, sizeof an, "ax%d", i);
    vars[i] = tl_te_axis_var(dag, an);
    r.axis[i].var = vars[i];
    r.axis[i].extent = op->shape[i];
    r.axis[i].kind = TL_ITER_SPATIAL;
  }
  r.nout = 1;
  r.body = tl_arena_alloc(&dag->arena, sizeof(tl_ref));
  r.body[0] = tl_te_load(dag, tensor, vars, op->ndim);
  r.out_tensors = tl_arena_alloc(&dag->arena, sizeof(int));
  r.reducer = TL_RED_NONE;
  r.ninputs = 1;
  r.inputs = tl_arena_alloc(&dag->arena, sizeof(int));
  r.inputs[0] = tensor;
  const tl_buffer *like = tl_dag_tensor_buf(dag, tensor);
  int at = st + 1;
  dag_insert_op(dag, at, &r);
  int nt = dag_new_tensor(dag, at, like, name, scope);
  dag->ops.v[at].out_tensors[0] = nt;
  for (int i = 0; i < t->nints; i++) {
    int rd = (int)t->ints[i] + ((int)t->ints[i] >= at);
    op_repoint(dag, &dag->ops.v[rd], tensor, nt);
  }
  stage_insert(s, at, at);
  s->stages.v[at].scope = scope;
  return 0;
}

static int step_cache_write(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "cache_write";
  int st = t->stage_id;
  if (check_loop_stage(ctx, s, verb, st)) return TL_E_SCHED;
  tl_dag *dag = s->dag;
  tl_te_op *op = stage_op(s, st);
  int scope = parse_scope(t->str ? t->str : "");
  if (scope < 0)
    return tl_err(ctx, TL_E_SCHED, "%s: unknown scope '%s' for stage '%s' (expected global, local or shared)",
                  verb, t->str ? t->str : "", op->name);
  if (op->nout != 1)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' has %d outputs", verb, op->name, op->nout);
  if (!stage_untouched(&s->stages.v[st]))
    return tl_err(ctx, TL_E_SCHED,
                  "%s: stage '%s' has already been transformed (cache_write must come first)",
                  verb, op->name);
  int a = tl_sched_attached_at(s, st, -1);
  if (a >= 0)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is computed at stage '%s'", verb,
                  stage_name(s, a), op->name);
  if (op->ndim > 64) return tl_err(ctx, TL_E_SCHED, "%s: too many dimensions", verb);
  char nb[256], full[300];
  snprintf(full, sizeof full, "%s.%s", op->name, tl_ir_scopename[scope]);
  const char *name = unique_name(dag, full, nb, sizeof nb);
  /* the cache op takes C's computation over fresh "<axis>.c" vars */
  tl_te_op l = *op;
  l.name = tl_arena_strdup(&dag->arena, name);
  l.axis = tl_arena_alloc(&dag->arena, sizeof(tl_axis) * (size_t)(op->ndim + 1));
  l.body = tl_arena_alloc(&dag->arena, sizeof(tl_ref));
  l.out_tensors = tl_arena_alloc(&dag->arena, sizeof(int));
  l.inputs = tl_arena_alloc(&dag->arena, sizeof(int) * (size_t)(op->ninputs + 1));
  memcpy(l.inputs, op->inputs, sizeof(int) * (size_t)op->ninputs);
  tl_ref from[64], to[64];
  for (int i = 0; i < op->ndim; i++) {
    char an[256];
    snprintf(an, sizeof an, "%s.c", tl_ir_var(dag->ir, op->axis[i].var)->name);
    from[i] = op->axis[i].var;
    to[i] = tl_te_axis_var(dag, an);
    l.axis[i] = op->axis[i];
    l.axis[i].var = to[i];
  }
  l.body[0] = tl_ir_substitute(dag->ir, op->body[0], from, to, op->ndim);
  if (op->red_cond) l.red_cond = tl_ir_substitute(dag->ir, op->red_cond, from, to, op->ndim);
  int tensor = op->out_tensors[0];
  const tl_buffer *like = tl_dag_tensor_buf(dag, tensor);
  int at = st;
  dag_insert_op(dag, at, &l);
  int nt = dag_new_tensor(dag, at, like, name, scope);
  dag->ops.v[at].out_tensors[0] = nt;
  for (int r = 0; r < dag->raxes.n; r++)
    if (dag->raxes.v[r].owner == at + 1) dag->raxes.v[r].owner = at;
  /* C becomes C(i..) = C.local(i..) */
  tl_te_op *c = &dag->ops.v[at + 1];
  c->nreduce = 0;
  c->reduce_axis = NULL;
  c->reducer = TL_RED_NONE;
  c->red_cond = 0;
  c->comb_lhs = c->comb_rhs = c->combiner = c->identity = 0;
  c->red_name = NULL;
  c->body = tl_arena_alloc(&dag->arena, sizeof(tl_ref));
  c->body[0] = tl_te_load(dag, nt, from, c->ndim);
  c->inputs = tl_arena_alloc(&dag->arena, sizeof(int));
  c->inputs[0] = nt;
  c->ninputs = 1;
  /* stages: insert the cache stage, rebuild C's (keeping its attachment) */
  stage_insert(s, at, at);
  s->stages.v[at].scope = scope;
  stage_reset(s, at + 1);
  return 0;
}

/* rfactor: stage st reduces over its op's reduce axes; leaf `it` (of
** reduction kind: a reduce axis or a split part of one) is factored out.
** The new op C.rf has C's spatial axes plus a spatial axis "<it>.v" at
** position factor_iter, and reduces over the stage's other reduction
** leaves (fresh reduce vars of the leaves' extents, in leaf order); every
** reduce axis of C is rebuilt from those through the stage's splits, with
** a guard when a split does not divide. C then reduces C.rf over a fresh
** reduce axis "<it>.v". Both stages start with fresh iterators (C keeps
** its attachment), as after a cache_write. */
static int step_rfactor(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const char *verb = "rfactor";
  int st = t->stage_id;
  if (check_loop_stage(ctx, s, verb, st) || check_iter(ctx, s, verb, st, t->iter_id)) return TL_E_SCHED;
  tl_dag *dag = s->dag;
  tl_ir *ir = dag->ir;
  tl_stage *sg = &s->stages.v[st];
  const tl_te_op *op = stage_op(s, st);
  const tl_iter *fit = leaf(sg, t->iter_id);
  if (op->reducer == TL_RED_NONE)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is not a reduction", verb, op->name);
  if (fit->kind != TL_ITER_REDUCE)
    return tl_err(ctx, TL_E_SCHED, "%s: iterator '%s' of stage '%s' is not a reduction iterator",
                  verb, fit->name, op->name);
  if (t->factor_iter_id < 0 || t->factor_iter_id > op->ndim)
    return tl_err(ctx, TL_E_SCHED, "%s: factor axis position %d of stage '%s' is not in [0, %d]",
                  verb, t->factor_iter_id, op->name, op->ndim);
  if (op->ndim >= 63 || op->nreduce > 64 || sg->leaves.n > 64)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' has too many axes", verb, op->name);
  int a = tl_sched_attached_at(s, st, -1);
  if (a >= 0)
    return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' is computed at stage '%s'", verb,
                  stage_name(s, a), op->name);
  for (int i = 0; i < sg->rels.n; i++)
    if (sg->rels.v[i].kind == TL_REL_FUSE && sg->nodes.v[sg->rels.v[i].out[0]].kind != TL_ITER_SPATIAL)
      return tl_err(ctx, TL_E_SCHED, "%s: stage '%s' has fused reduction iterators", verb, op->name);
  int64_t fext = fit->extent;
  char nb[256], full[300], vname[256];
  snprintf(full, sizeof full, "%s.rf", op->name);
  const char *name = unique_name(dag, full, nb, sizeof nb);
  snprintf(vname, sizeof vname, "%s.v", fit->name);

  /* values of the stage's nodes in the rf op's variables */
  int nd = op->ndim + 1, fpos = t->factor_iter_id;
  tl_ref *val = tl_calloc((size_t)sg->nodes.n, sizeof(tl_ref));
  tl_axis *axis = tl_arena_alloc(&dag->arena, sizeof(tl_axis) * (size_t)nd);
  int64_t *shape = tl_arena_alloc(&dag->arena, sizeof(int64_t) * (size_t)nd);
  tl_axis *raxis = tl_arena_alloc(&dag->arena, sizeof(tl_axis) * (size_t)(sg->leaves.n + 1));
  tl_ref sub_from[128], sub_to[128];
  int nsub = 0, nred = 0;
  for (int i = 0, k = 0; i < nd; i++) {
    if (i == fpos) {
      axis[i].var = tl_te_axis_var(dag, vname);
      axis[i].extent = fext;
      val[sg->leaves.v[t->iter_id]] = axis[i].var;
    } else {
      axis[i].var = tl_te_axis_var(dag, tl_ir_var(ir, op->axis[k].var)->name);
      axis[i].extent = op->axis[k].extent;
      sub_from[nsub] = op->axis[k].var;
      sub_to[nsub++] = axis[i].var;
      k++;
    }
    axis[i].kind = TL_ITER_SPATIAL;
    shape[i] = axis[i].extent;
  }
  for (int i = 0; i < sg->leaves.n; i++) {
    const tl_iter *it = leaf(sg, i);
    if (it->kind != TL_ITER_REDUCE || i == t->iter_id) continue;
    raxis[nred].var = tl_te_reduce_axis(dag, it->name, it->extent);
    raxis[nred].extent = it->extent;
    raxis[nred].kind = TL_ITER_REDUCE;
    val[sg->leaves.v[i]] = raxis[nred++].var;
  }
  /* push values up the splits of reduction nodes, newest relation first */
  tl_ref guard = 0;
  for (int r = sg->rels.n - 1; r >= 0; r--) {
    const tl_rel *rel = &sg->rels.v[r];
    if (rel->kind != TL_REL_SPLIT || sg->nodes.v[rel->in[0]].kind != TL_ITER_REDUCE) continue;
    tl_ref acc = 0;
    int64_t prod = 1;
    for (int c = 0; c < rel->nout && (c == 0 || acc); c++) {
      int64_t e = sg->nodes.v[rel->out[c]].extent;
      acc = c == 0 ? val[rel->out[c]] : tl_add(ir, tl_mul(ir, acc, tl_int(ir, e)), val[rel->out[c]]);
      prod *= e;
      if (!val[rel->out[c]]) acc = 0;
    }
    if (!acc) continue;
    val[rel->in[0]] = acc;
    int64_t pext = sg->nodes.v[rel->in[0]].extent;
    if (prod != pext) {
      tl_ref g = tl_lt(ir, acc, tl_int(ir, pext));
      guard = guard ? tl_and(ir, guard, g) : g;
    }
  }
  for (int i = 0; i < op->nreduce; i++) {
    sub_from[nsub] = op->reduce_axis[i].var;
    sub_to[nsub++] = val[op->ndim + i];
  }
  free(val);
  for (int i = op->ndim; i < nsub; i++)
    if (!sub_to[i]) {
      return tl_err(ctx, TL_E_SCHED, "%s: reduce axis '%s' of stage '%s' has no value", verb,
                    tl_ir_var(ir, sub_from[i])->name, op->name);
    }

  tl_te_op rf = *op;
  rf.name = tl_arena_strdup(&dag->arena, name);
  rf.ndim = nd;
  rf.shape = shape;
  rf.axis = axis;
  rf.body = tl_arena_alloc(&dag->arena, sizeof(tl_ref));
  rf.body[0] = tl_ir_substitute(ir, op->body[0], sub_from, sub_to, nsub);
  rf.out_tensors = tl_arena_alloc(&dag->arena, sizeof(int));
  rf.inputs = tl_arena_alloc(&dag->arena, sizeof(int) * (size_t)(op->ninputs + 1));
  memcpy(rf.inputs, op->inputs, sizeof(int) * (size_t)op->ninputs);
  tl_ref cond = op->red_cond ? tl_ir_substitute(ir, op->red_cond, sub_from, sub_to, nsub) : 0;
  if (guard) cond = cond ? tl_and(ir, guard, cond) : guard;
  if (nred > 0) {
    rf.nreduce = nred;
    rf.reduce_axis = raxis;
    rf.red_cond = cond;
  } else {
    /* nothing left to reduce: a map, the identity where the guard fails */
    if (cond) rf.body[0] = tl_select(ir, cond, rf.body[0], tl_te_op_identity(dag, op));
    rf.nreduce = 0;
    rf.reduce_axis = NULL;
    rf.reducer = TL_RED_NONE;
    rf.red_cond = 0;
    rf.comb_lhs = rf.comb_rhs = rf.combiner = rf.identity = 0;
    rf.red_name = NULL;
  }

  int at = st, tensor = op->out_tensors[0];
  const tl_buffer *cb = tl_dag_tensor_buf(dag, tensor);
  tl_type dtype = cb->dtype;
  dag_insert_op(dag, at, &rf);
  tl_ref shp[64];
  for (int i = 0; i < nd; i++) shp[i] = tl_int(ir, shape[i]);
  tl_tensor tt = {at, 0, tl_buffer_new(ir, name, dtype, nd, shp, TL_SCOPE_GLOBAL)};
  TL_VEC_PUSH(dag->tensors, tt);
  int nt = dag->tensors.n - 1;
  dag->ops.v[at].out_tensors[0] = nt;
  for (int i = 0; i < nred; i++)
    for (int r = 0; r < dag->raxes.n; r++)
      if (dag->raxes.v[r].var == raxis[i].var) dag->raxes.v[r].owner = at;

  /* C(i..) = reduce over <it>.v of C.rf(.., <it>.v, ..) */
  tl_te_op *c = &dag->ops.v[at + 1];
  tl_ref kv = tl_te_reduce_axis(dag, vname, fext);
  tl_ref idx[64];
  for (int i = 0, k = 0; i < nd; i++) idx[i] = i == fpos ? kv : c->axis[k++].var;
  c->nreduce = 1;
  c->reduce_axis = tl_arena_alloc(&dag->arena, sizeof(tl_axis));
  c->reduce_axis[0].var = kv;
  c->reduce_axis[0].extent = fext;
  c->reduce_axis[0].kind = TL_ITER_REDUCE;
  c->body = tl_arena_alloc(&dag->arena, sizeof(tl_ref));
  c->body[0] = tl_te_load(dag, nt, idx, nd);
  c->red_cond = 0;
  c->inputs = tl_arena_alloc(&dag->arena, sizeof(int));
  c->inputs[0] = nt;
  c->ninputs = 1;
  for (int r = 0; r < dag->raxes.n; r++)
    if (dag->raxes.v[r].var == kv) dag->raxes.v[r].owner = at + 1;

  stage_insert(s, at, at);
  stage_reset(s, at + 1);
  return 0;
}

/* ---- recording ----------------------------------------------------------------------- */

static void step_store(tl_sched *s, const tl_step *t) {
  tl_step c = *t;
  if (t->nints > 0) {
    c.ints = tl_arena_alloc(&s->arena, sizeof(int64_t) * (size_t)t->nints);
    memcpy(c.ints, t->ints, sizeof(int64_t) * (size_t)t->nints);
  } else {
    c.ints = NULL;
    c.nints = 0;
  }
  c.str = t->str ? tl_arena_strdup(&s->arena, t->str) : NULL;
  TL_VEC_PUSH(s->steps, c);
}

/* ---- the step table ---------------------------------------------------------------------
** The rows of steps.h become tl_step_table: names, field descriptors and the
** apply function step_<verb> above. */

#define FIELD_DESC(t, n, m) {TL_FT_##t, #n, offsetof(tl_step, m), sizeof(((tl_step *)0)->m)},
#define FIELDS_ROW(P, verb, inserts, fields) static const tl_step_field fields_##P[] = {fields};
TL_STEPDEF(FIELDS_ROW, FIELD_DESC)
#undef FIELDS_ROW

#define FIELD_TYPE(t, n, m) #t
#define DESC_ROW(P, verb, inserts, fields)                                                  \
  {#P, #verb, TL_STEP_INSERTS_##inserts, fields, (int)TL_ARRAY_SIZE(fields_##P), fields_##P, \
   step_##verb},
const tl_step_desc tl_step_table[TL_STEP__MAX] = {TL_STEPDEF(DESC_ROW, FIELD_TYPE)};
#undef DESC_ROW
#undef FIELD_TYPE
#undef FIELD_DESC

TL_EXPORT int tl_step_count(void) { return TL_STEP__MAX; }

static const tl_step_desc *desc_of(int kind) {
  return kind >= 0 && kind < TL_STEP__MAX ? &tl_step_table[kind] : NULL;
}

TL_EXPORT const char *tl_step_name(int kind) {
  const tl_step_desc *d = desc_of(kind);
  return d ? d->name : NULL;
}

TL_EXPORT const char *tl_step_verb(int kind) {
  const tl_step_desc *d = desc_of(kind);
  return d ? d->verb : NULL;
}

TL_EXPORT const char *tl_step_field_types(int kind) {
  const tl_step_desc *d = desc_of(kind);
  return d ? d->types : NULL;
}

TL_EXPORT int tl_step_field_count(int kind) {
  const tl_step_desc *d = desc_of(kind);
  return d ? d->nfields : -1;
}

TL_EXPORT const char *tl_step_field_name(int kind, int field) {
  const tl_step_desc *d = desc_of(kind);
  return d && field >= 0 && field < d->nfields ? d->fields[field].name : NULL;
}

/* ---- apply ---------------------------------------------------------------------------- */

int tl_sched_apply(tl_ctx *ctx, tl_sched *s, const tl_step *t) {
  const tl_step_desc *d = desc_of(t->kind);
  if (!d) return tl_err(ctx, TL_E_SCHED, "schedule: unknown step kind %d", t->kind);
  int rc = d->apply(ctx, s, t);
  if (rc) return rc;
  step_store(s, t);
  return 0;
}

TL_EXPORT int tl_sched_step(tl_ctx *ctx, tl_sched *s, int kind, const int64_t *args, int nargs,
                            const int64_t *ints, int nints, const char *str, int *new_stage) {
  const tl_step_desc *d = desc_of(kind);
  if (!d) return tl_err(ctx, TL_E_ARG, "step: unknown step kind %d (0 to %d)", kind, TL_STEP__MAX - 1);
  int want = 0, want_ints = 0, want_str = 0, extent = -1;
  for (int f = 0; f < d->nfields; f++) {
    char ty = d->fields[f].type;
    if (ty == 'i' || ty == 'b') want++;
    else if (ty == 'I') want_ints = 1;
    else if (ty == 's') want_str = 1;
    else if (ty == 'e') extent = f;
  }
  if (nargs != want || (want > 0 && !args))
    return tl_err(ctx, TL_E_ARG, "%s: expected %d integer fields, got %d", d->verb, want, nargs);
  if (nints < 0 || (nints > 0 && (!want_ints || !ints)))
    return tl_err(ctx, TL_E_ARG, "%s: %d list entries given, the step takes %s", d->verb, nints,
                  want_ints ? "a list" : "none");
  if (str && !want_str) return tl_err(ctx, TL_E_ARG, "%s: the step takes no string", d->verb);
  tl_step t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  for (int f = 0, a = 0; f < d->nfields; f++) {
    const tl_step_field *fd = &d->fields[f];
    if (fd->type != 'i' && fd->type != 'b') continue;
    int64_t v = args[a++];
    if (fd->type == 'b') v = v != 0;
    if (v < INT32_MIN || v > INT32_MAX)
      return tl_err(ctx, TL_E_ARG, "%s: %s = %lld is out of range", d->verb, fd->name, (long long)v);
    tl_step_set(&t, fd, v);
  }
  t.nints = nints;
  t.ints = (int64_t *)ints;
  t.str = str;
  if (extent >= 0 && t.stage_id >= 0 && t.stage_id < s->stages.n && t.iter_id >= 0 &&
      t.iter_id < s->stages.v[t.stage_id].leaves.n)
    tl_step_set(&t, &d->fields[extent], leaf(&s->stages.v[t.stage_id], t.iter_id)->extent);
  int rc = tl_sched_apply(ctx, s, &t);
  if (!rc && new_stage) {
    *new_stage = d->inserts == TL_STEP_INSERTS_AFTER    ? t.stage_id + 1
                 : d->inserts == TL_STEP_INSERTS_BEFORE ? t.stage_id
                                                        : -1;
  }
  return rc;
}

/* ---- C shorthands (schedule.h) --------------------------------------------------------------- */

/* ints as the int64 list of a step */
static int list_step(tl_ctx *ctx, tl_sched *s, int kind, const int64_t *args, int nargs, int n,
                     const int *v) {
  int64_t stack[64] = {0};
  int64_t *ids = n <= 64 ? stack : tl_malloc(sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; i++) ids[i] = v[i];
  int rc = tl_sched_step(ctx, s, kind, args, nargs, ids, n < 0 ? 0 : n, NULL, NULL);
  if (ids != stack) free(ids);
  return rc;
}

int tl_sched_split(tl_ctx *ctx, tl_sched *s, int stage, int iter, int nlengths,
                   const int64_t *lengths, int inner_to_outer) {
  int64_t a[3] = {stage, iter, inner_to_outer};
  return tl_sched_step(ctx, s, TL_STEP_SP, a, 3, lengths, nlengths < 0 ? 0 : nlengths, NULL, NULL);
}

int tl_sched_reorder(tl_ctx *ctx, tl_sched *s, int stage, int n, const int *order) {
  int64_t a[1] = {stage};
  return list_step(ctx, s, TL_STEP_RE, a, 1, n, order);
}

int tl_sched_fuse(tl_ctx *ctx, tl_sched *s, int stage, int n, const int *iters) {
  int64_t a[1] = {stage};
  return list_step(ctx, s, TL_STEP_FU, a, 1, n, iters);
}

int tl_sched_annotate(tl_ctx *ctx, tl_sched *s, int stage, int iter, int ann) {
  int64_t a[3] = {stage, iter, ann};
  return tl_sched_step(ctx, s, TL_STEP_AN, a, 3, NULL, 0, NULL, NULL);
}

int tl_sched_compute_at(tl_ctx *ctx, tl_sched *s, int stage, int target_stage, int target_iter) {
  int64_t a[3] = {stage, target_stage, target_iter};
  return tl_sched_step(ctx, s, TL_STEP_CA, a, 3, NULL, 0, NULL, NULL);
}

int tl_sched_compute_inline(tl_ctx *ctx, tl_sched *s, int stage) {
  int64_t a[1] = {stage};
  return tl_sched_step(ctx, s, TL_STEP_CI, a, 1, NULL, 0, NULL, NULL);
}

int tl_sched_cache_write(tl_ctx *ctx, tl_sched *s, int stage, const char *scope, int *new_stage) {
  int64_t a[1] = {stage};
  return tl_sched_step(ctx, s, TL_STEP_CHW, a, 1, NULL, 0, scope, new_stage);
}

int tl_sched_rfactor(tl_ctx *ctx, tl_sched *s, int stage, int iter, int factor_iter,
                     int *new_stage) {
  int64_t a[3] = {stage, iter, factor_iter};
  return tl_sched_step(ctx, s, TL_STEP_RF, a, 3, NULL, 0, NULL, new_stage);
}

/* ---- copy and queries ------------------------------------------------------------------------ */

static int sched_from_base(tl_ctx *ctx, const tl_dag *base, tl_sched **out) {
  *out = NULL;
  tl_sched *s = sched_alloc();
  int *outs = tl_malloc(sizeof(int) * (size_t)(base->tensors.n + 1));
  int nout = tl_dag_output_list(base, outs);
  int rc = tl_dag_extract(ctx, base, outs, nout, &s->base, NULL);
  if (!rc) rc = tl_dag_extract(ctx, base, outs, nout, &s->dag, NULL);
  free(outs);
  if (rc) {
    tl_sched_free(s);
    return rc;
  }
  init_stages(s);
  *out = s;
  return 0;
}

TL_EXPORT int tl_sched_copy(tl_ctx *ctx, const tl_sched *src, tl_sched **out) {
  tl_sched *s;
  int rc = sched_from_base(ctx, src->base, &s);
  for (int i = 0; !rc && i < src->steps.n; i++) rc = tl_sched_apply(ctx, s, &src->steps.v[i]);
  if (rc) {
    tl_err_prefix(ctx, "schedule copy: step %d: ", s ? s->steps.n : 0);
    tl_sched_free(s);
    *out = NULL;
    return TL_E_INTERNAL;
  }
  *out = s;
  return 0;
}

TL_EXPORT int tl_sched_fresh(tl_ctx *ctx, const tl_sched *src, tl_sched **out) {
  return sched_from_base(ctx, src->base, out);
}

TL_EXPORT tl_dag *tl_sched_dag(tl_sched *s) { return s->dag; }
TL_EXPORT int tl_sched_num_stages(const tl_sched *s) { return s->stages.n; }

TL_EXPORT int tl_sched_stage_find(const tl_sched *s, const char *name) {
  for (int i = 0; i < s->stages.n; i++)
    if (strcmp(stage_name(s, i), name) == 0) return i;
  return -1;
}

TL_EXPORT const char *tl_sched_stage_name(const tl_sched *s, int stage) {
  return stage >= 0 && stage < s->stages.n ? stage_name(s, stage) : NULL;
}

TL_EXPORT int tl_sched_stage_op_kind(const tl_sched *s, int stage) {
  return stage >= 0 && stage < s->stages.n ? stage_op(s, stage)->kind : -1;
}

TL_EXPORT int tl_sched_stage_compute_at(const tl_sched *s, int stage, int *at_stage, int *at_iter) {
  if (stage < 0 || stage >= s->stages.n) return -1;
  const tl_stage *sg = &s->stages.v[stage];
  if (at_stage) *at_stage = sg->compute_at == TL_CA_ITER ? sg->at_stage : -1;
  if (at_iter) *at_iter = sg->compute_at == TL_CA_ITER ? tl_sched_leaf_pos(s, sg->at_stage, sg->at_node) : -1;
  return sg->compute_at;
}

TL_EXPORT int tl_sched_stage_scope(const tl_sched *s, int stage) {
  return stage >= 0 && stage < s->stages.n ? s->stages.v[stage].scope : -1;
}

TL_EXPORT int tl_sched_stage_tensor(const tl_sched *s, int stage, int out_index) {
  if (stage < 0 || stage >= s->stages.n) return -1;
  const tl_te_op *op = stage_op(s, stage);
  return out_index >= 0 && out_index < op->nout ? op->out_tensors[out_index] : -1;
}

TL_EXPORT int tl_sched_num_iters(const tl_sched *s, int stage) {
  return stage >= 0 && stage < s->stages.n ? s->stages.v[stage].leaves.n : -1;
}

static const tl_iter *iter_at(const tl_sched *s, int stage, int iter) {
  if (stage < 0 || stage >= s->stages.n) return NULL;
  const tl_stage *sg = &s->stages.v[stage];
  if (iter < 0 || iter >= sg->leaves.n) return NULL;
  return &sg->nodes.v[sg->leaves.v[iter]];
}

TL_EXPORT const char *tl_sched_iter_name(const tl_sched *s, int stage, int iter) {
  const tl_iter *it = iter_at(s, stage, iter);
  return it ? it->name : NULL;
}

TL_EXPORT int64_t tl_sched_iter_extent(const tl_sched *s, int stage, int iter) {
  const tl_iter *it = iter_at(s, stage, iter);
  return it ? it->extent : -1;
}

TL_EXPORT int tl_sched_iter_kind(const tl_sched *s, int stage, int iter) {
  const tl_iter *it = iter_at(s, stage, iter);
  return it ? it->kind : -1;
}

TL_EXPORT int tl_sched_iter_annotation(const tl_sched *s, int stage, int iter) {
  const tl_iter *it = iter_at(s, stage, iter);
  return it ? it->ann : -1;
}

TL_EXPORT int tl_sched_iter_node(const tl_sched *s, int stage, int iter) {
  return iter_at(s, stage, iter) ? s->stages.v[stage].leaves.v[iter] : -1;
}

TL_EXPORT int tl_sched_node_iter(const tl_sched *s, int stage, int node) {
  if (stage < 0 || stage >= s->stages.n) return -1;
  return tl_sched_leaf_pos(s, stage, node);
}

TL_EXPORT const char *tl_sched_node_name(const tl_sched *s, int stage, int node) {
  if (stage < 0 || stage >= s->stages.n) return NULL;
  const tl_stage *sg = &s->stages.v[stage];
  return node >= 0 && node < sg->nodes.n ? sg->nodes.v[node].name : NULL;
}

TL_EXPORT int tl_sched_num_steps(const tl_sched *s) { return s->steps.n; }
