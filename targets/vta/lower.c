/*
** lower.c -- VTA code generation from the loop IR: conv2d_packed's VTA
** schedule in te primitives, lowered by core/te, then the VTA passes over
** the lowered function, which drive the runtime's command queue.
**
** The schedule (tl_vta_conv2d_ir_schedule) marks what goes to the
** accelerator: cache_read stages of the data and the kernel attached at the
** outer input-channel loop with pragma "dma_copy", the conv's (bi, ci, ki)
** block with pragma "gemm" (our tensorize: the block is VTA's GEMM
** intrinsic), the element-wise stages with pragma "alu", the output's store
** loop with pragma "dma_copy", and virtual threads as VTHREAD loops.
**
** The passes (tl_vta_lower_emit) run in three phases:
**
**   plan     every ALLOC'd buffer gets an SRAM: the GEMM's operands give
**            the roles (the operand whose index uses the output-lane loop
**            is the weight, the other the input, the destination the
**            accumulator); an ALU stage writes in place of the buffer it
**            reads (TVM's storage rewrite); each virtual thread gets its
**            own copy of every buffer
**   host     the host loops of the function are executed (this walk is the
**            host code: it calls the runtime as TVM's generated host code
**            does); at each marked region, once per active virtual thread
**            (consecutive regions of one module as one group per thread),
**            an action is recorded: a DMA copy folded
**            into 2-D LOADs or STOREs (the innermost loops one vector, then
**            x and y folded while contiguous, outer loops one instruction
**            each, the pad condition of the copy turned into the DMA's zero
**            padding on the two folded dims), a GEMM micro-op kernel (the
**            loops around the gemm blocks: contiguous loops flattened, the
**            two outermost folded into the kernel's loops, the rest
**            enumerated as micro-ops; a block storing 0 is the reset), or an
**            ALU kernel (opcode and immediate from the store's expression)
**   sync     dependence tokens from the hazards of each thread: a group of
**            actions on one module that touches an SRAM buffer another
**            module touched before (read after write, write after read or
**            write) pops a token pushed right after the latest such action,
**            unless an earlier token already orders them; a token FIFO shared
**            by the threads hands tokens out in push order, so an action whose
**            token is queued behind another thread's pops that one too
**
** then the actions are emitted in order through runtime.c.
*/
#include "conv2d.h"
#include "../../core/te/schedule.h"

#include <stdio.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

/* ---- the schedule --------------------------------------------------------------------- */

extern const tl_atvm_template tl_vta_conv2d_packed;

static int pos(tl_sched *s, int st, int node) { return tl_sched_node_iter(s, st, node); }

static int pragma(tl_ctx *ctx, tl_sched *s, int st, int node, const char *text) {
  int64_t a[2] = {st, pos(s, st, node)};
  return tl_sched_step(ctx, s, TL_STEP_PR, a, 2, NULL, 0, text, NULL);
}

static int cache_read(tl_ctx *ctx, tl_sched *s, int st, int reader, int *out) {
  int64_t a[1] = {st}, r[1] = {reader};
  return tl_sched_step(ctx, s, TL_STEP_CHR, a, 1, r, 1, "local", out);
}

/* The n-th placeholder stage (0-based), -1 if none. */
static int nth_placeholder(tl_sched *s, int n) {
  for (int i = 0; i < tl_sched_num_stages(s); i++)
    if (tl_sched_stage_op_kind(s, i) == TL_DAG_PLACEHOLDER && n-- == 0) return i;
  return -1;
}

/* The first stage reading stage st, -1 if none. */
static int first_consumer(tl_sched *s, int st) {
  int c[256];
  tl_dag *dag = tl_sched_dag(s);
  if (tl_dag_consumers(dag, st, NULL) > 256) return -1;
  return tl_dag_consumers(dag, st, c) > 0 ? c[0] : -1;
}

/* A stage inserted at p moves every tracked index at p or later up by one. */
static void bump(int *idx, int n, int p) {
  for (int i = 0; i < n; i++)
    if (idx[i] >= p) idx[i]++;
}

int tl_vta_conv2d_ir_schedule(tl_ctx *ctx, const tl_vta_knobs *k, tl_sched *s) {
  int C = tl_atvm_stage_by_tag(s, "conv2d_dense");
  if (C < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_packed.vta: no conv2d_dense stage");
  /* the conv's producers: data (padded or not) and kernel, the first two placeholders */
  int pad = -1, data = nth_placeholder(s, 0), kern = nth_placeholder(s, 1);
  for (int i = 0; i < C; i++)
    if (tl_sched_stage_op_kind(s, i) != TL_DAG_PLACEHOLDER) pad = i;
  if (data < 0 || kern < 0 || kern > C)
    return tl_err(ctx, TL_E_SCHED, "conv2d_packed.vta: the conv has no data and kernel inputs");
  int in = pad >= 0 ? pad : data;
  /* tracked: pad, kernel, conv, the input cache, the kernel cache, then the caches of the
  ** ending's tensor operands (bias, residual) */
  enum { T_PAD, T_KERN, T_C, T_INL, T_KL, T_EXTRA };
  int tr[T_EXTRA + 2] = {pad, kern, C, -1, -1, -1, -1}, ntr = T_EXTRA, p;
  TRY(cache_read(ctx, s, in, tr[T_C], &p));
  bump(tr, ntr, p);
  tr[T_INL] = p;
  TRY(cache_read(ctx, s, tr[T_KERN], tr[T_C], &p));
  bump(tr, T_KL, p);
  tr[T_KL] = p;
  /* a bias or a residual (placeholders after data and kernel) is read by one stage of the
  ** ending: copied into the accumulator there */
  for (int n = 2; n < 4; n++) {
    int ph = nth_placeholder(s, n);
    if (ph < 0) break;
    int rd = first_consumer(s, ph);
    if (rd < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_packed.vta: input %d is read by no stage of the ending", n);
    TRY(cache_read(ctx, s, ph, rd, &p));
    bump(tr, ntr, p);
    tr[ntr++] = p;
  }
  pad = tr[T_PAD], C = tr[T_C];
  int inl = tr[T_INL], kl = tr[T_KL];
  if (pad >= 0) TRY(tl_sched_compute_inline(ctx, s, pad));
  int O = tl_sched_num_stages(s) - 1;
  int t[3], co0, co1, i0, i1, j0, j1, tx = -1, ty = -1;
  TRY(tl_atvm_split_node(ctx, s, O, 1, 1, &k->tile_co[1], t)); co0 = t[0], co1 = t[1];
  TRY(tl_atvm_split_node(ctx, s, O, 2, 1, &k->tile_h[1], t)); i0 = t[0], i1 = t[1];
  TRY(tl_atvm_split_node(ctx, s, O, 3, 1, &k->tile_w[1], t)); j0 = t[0], j1 = t[1];
  if (k->oc_nthread > 1) {
    int64_t f = k->oc_nthread;
    TRY(tl_atvm_split_node(ctx, s, O, co0, 1, &f, t)); co0 = t[0], tx = t[1];
  }
  if (k->h_nthread > 1) {
    int64_t f = k->h_nthread;
    TRY(tl_atvm_split_node(ctx, s, O, i0, 1, &f, t)); i0 = t[0], ty = t[1];
  }
  int order[12], n = 0;
  if (ty >= 0) order[n++] = ty;
  if (tx >= 0) order[n++] = tx;
  order[n++] = 0, order[n++] = i0, order[n++] = co0, order[n++] = j0, order[n++] = co1;
  order[n++] = i1, order[n++] = j1, order[n++] = 4, order[n++] = 5;
  TRY(tl_atvm_reorder_nodes(ctx, s, O, order, n));
  /* one virtual thread axis: both splits fused (h outer, co inner) when both are threaded */
  int vt = tx >= 0 ? tx : ty;
  if (tx >= 0 && ty >= 0) {
    int two[2] = {ty, tx};
    TRY(tl_atvm_fuse_nodes(ctx, s, O, two, 2, &vt));
  }
  if (vt >= 0) TRY(tl_sched_annotate(ctx, s, O, pos(s, O, vt), TL_ANN_VTHREAD));
  /* the conv and the element-wise stages per output tile, in the accumulator: each is
  ** computed at the outermost loop (bo, extent 1) of its consumer, the last at j0. The chain
  ** is C .. O without the caches; the residual's shift is consumed by the stage after it,
  ** and the stage before it by that one too. */
  int chain[64], nc = 0, shift = tl_atvm_stage_by_tag(s, "vta_residual_shift");
  if (O - C >= 64) return tl_err(ctx, TL_E_SCHED, "conv2d_packed.vta: %d stages after the conv, at most 63", O - C);
  for (int st = C; st <= O; st++) {
    int cache = tl_sched_stage_op_kind(s, st) == TL_DAG_PLACEHOLDER;
    for (int q = T_INL; q < ntr; q++) cache |= tr[q] == st;
    if (!cache) chain[nc++] = st;
  }
  for (int i = nc - 2; i >= 0; i--) {
    int tg = i + 1;
    if (chain[tg] == shift && chain[i] != shift) tg++;
    int st = chain[i], to = chain[tg];
    TRY(tl_sched_compute_at(ctx, s, st, to, to == O ? pos(s, O, j0) : 0));
    if (st != C) TRY(pragma(ctx, s, st, 1, "alu"));
  }
  for (int q = T_EXTRA; q < ntr; q++) {
    int rd = first_consumer(s, tr[q]);
    if (rd < 0) return tl_err(ctx, TL_E_SCHED, "conv2d_packed.vta: %s", "a cache stage with no reader");
    TRY(tl_sched_compute_at(ctx, s, tr[q], rd, 0));
    TRY(pragma(ctx, s, tr[q], 0, "dma_copy"));
  }
  TRY(pragma(ctx, s, O, co1, "dma_copy"));
  /* conv: bo, ko0, co, ko1, di, dj, i, j | bi, ci, ki (the GEMM block) */
  TRY(tl_atvm_split_node(ctx, s, C, 6, 1, &k->tile_ci[1], t));
  int ko0 = t[0], ko1 = t[1];
  int corder[11] = {0, ko0, 1, ko1, 7, 8, 2, 3, 4, 5, 9};
  TRY(tl_atvm_reorder_nodes(ctx, s, C, corder, 11));
  TRY(pragma(ctx, s, C, 4, "gemm"));
  TRY(tl_sched_compute_at(ctx, s, inl, C, pos(s, C, ko0)));
  TRY(tl_sched_compute_at(ctx, s, kl, C, pos(s, C, ko0)));
  TRY(pragma(ctx, s, inl, 0, "dma_copy"));
  TRY(pragma(ctx, s, kl, 0, "dma_copy"));
  return TL_OK;
}

/* ---- the passes ------------------------------------------------------------------------ */

enum { R_NONE = 0, R_INP, R_WGT, R_ACC };
enum { A_LOAD = 0, A_STORE, A_KERNEL };
enum { MAXT = 4, MAXLOOP = 16 };

typedef struct sbuf {            /* per IR buffer */
  int role;                      /* R_* */
  int alias;                     /* buffer whose SRAM it shares, or -1 */
  int64_t elems;                 /* SRAM elements (vectors) */
  int64_t base;                  /* per-thread offset in its SRAM */
} sbuf;

typedef struct dma {             /* one LOAD or STORE */
  uint32_t phys, dram, sram, x, y, stride, xp0, yp0, xp1, yp1;
  int mem;
} dma;

typedef struct action {
  int kind, thread, module;      /* module: TL_VTA_STAGE_* */
  int ndma, dma0;                /* A_LOAD / A_STORE: dmas [dma0, dma0 + ndma) */
  tl_vta_kernel *kernel;         /* A_KERNEL */
  int rd[3], nrd, wr;            /* SRAM buffer keys (buffer * MAXT + thread), wr -1 if none */
  int allpad;                    /* a LOAD that is all padding (it must be dead) */
  const char *what;              /* the SRAM buffer of a DMA */
  int popn[4];                   /* sync: tokens popped from each module before it */
  int pushes[4], npush;          /* sync: the actions its tokens are for, pushed after it */
} action;

typedef struct kcache {          /* kernels by content */
  int32_t *key;
  int nkey;
  tl_vta_kernel *k;
} kcache;

/* A GEMM or ALU region's action for one thread and one assignment of the variables it
** reads from outside (none, usually: SRAM indices are region-relative). */
struct memo {
  tl_ref site;
  int thread, nfree;
  int64_t val[8];
  int has;                       /* 0: the region made no action (guarded off) */
  action a;
};

typedef struct lw {
  tl_ctx *ctx;
  tl_vta_cmd *q;
  const tl_vta_config *c;
  tl_ir *ir;
  const uint32_t *arg_phys;      /* per argument position */
  sbuf *b;                       /* per IR buffer */
  int64_t sram_per_thread[4];    /* per role */
  int64_t *env;                  /* per var id */
  int nthr;                      /* virtual threads (1 without) */
  tl_ref tvar[2];
  int64_t text[2];
  int ntv;
  TL_VEC(action) acts;
  TL_VEC(dma) dmas;
  TL_VEC(kcache) kern;
  TL_VEC(struct memo) memo;
  TL_VEC(struct dplan *) dplans;  /* dma_copy regions analysed */      /* kernel regions already built, by their free variables */
  int acc2[8], nacc2;             /* buffers read as an ALU's second tensor operand */
  int rc;
} lw;

static int fail(lw *L, int code, const char *fmt, const char *detail) {
  if (!L->rc) L->rc = tl_err(L->ctx, code, fmt, detail);
  return L->rc;
}

/* ---- integer evaluation of index expressions under the host's variable values */

static int64_t fdiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b && (a < 0) != (b < 0)) ? q - 1 : q; }

static int64_t ev(lw *L, tl_ref e) {
  tl_ir *ir = L->ir;
  const tl_node *n = tl_ir_node(ir, e);
  int op = n->op;
  if (op == TL_IR_INT) return n->imm.i;
  if (op == TL_IR_VAR) return L->env[n->imm.u];
  if (op == TL_IR_CAST) return ev(L, tl_ir_kid(ir, e, 0));
  if (op == TL_IR_NOT) return !ev(L, tl_ir_kid(ir, e, 0));
  if (op == TL_IR_SELECT || op == TL_IR_IF_THEN_ELSE)
    return ev(L, tl_ir_kid(ir, e, 0)) ? ev(L, tl_ir_kid(ir, e, 1)) : ev(L, tl_ir_kid(ir, e, 2));
  if (tl_ir_nkids(ir, e) != 2 || !(tl_ir_opflags[op] & TL_IRF_E)) {
    char *t = tl_ir_print_short(ir, e, 200);
    fail(L, TL_E_UNSUPPORTED, "vta lower: cannot evaluate %s on the host", t);
    free(t);
    return 0;
  }
  int64_t a = ev(L, tl_ir_kid(ir, e, 0)), b = ev(L, tl_ir_kid(ir, e, 1));
  switch (op) {
  case TL_IR_ADD: return a + b;
  case TL_IR_SUB: return a - b;
  case TL_IR_MUL: return a * b;
  case TL_IR_FLOORDIV: return b ? fdiv(a, b) : 0;
  case TL_IR_FLOORMOD: return b ? a - fdiv(a, b) * b : 0;
  case TL_IR_TRUNCDIV: return b ? a / b : 0;
  case TL_IR_TRUNCMOD: return b ? a % b : 0;
  case TL_IR_MIN: return a < b ? a : b;
  case TL_IR_MAX: return a > b ? a : b;
  case TL_IR_EQ: return a == b;
  case TL_IR_NE: return a != b;
  case TL_IR_LT: return a < b;
  case TL_IR_LE: return a <= b;
  case TL_IR_GT: return a > b;
  case TL_IR_GE: return a >= b;
  case TL_IR_AND: return a && b;
  case TL_IR_OR: return a || b;
  default: {
    char *t = tl_ir_print_short(ir, e, 200);
    fail(L, TL_E_UNSUPPORTED, "vta lower: cannot evaluate %s on the host", t);
    free(t);
    return 0;
  }
  }
}

static void set_thread(lw *L, int t) {
  for (int i = L->ntv - 1; i >= 0; i--) {
    L->env[tl_ir_node(L->ir, L->tvar[i])->imm.u] = t % L->text[i];
    t /= (int)L->text[i];
  }
}

/* ---- loop nests of a marked region ------------------------------------------------- */

typedef struct nest {
  int n;
  tl_ref var[MAXLOOP];
  int64_t ext[MAXLOOP];
  tl_ref leaf;                   /* the statement under the perfect chain of loops */
  int ncond;
  tl_ref cond[8];                /* guards (if without else) met in the chain */
} nest;

static int chain(lw *L, tl_ref s, nest *N) {
  N->n = N->ncond = 0;
  for (;;) {
    int op = tl_ir_op(L->ir, s);
    if (op == TL_IR_ATTR && N->n == 0) { s = tl_ir_kid(L->ir, s, 1); continue; }
    if (op == TL_IR_IF && !tl_ir_kid(L->ir, s, 2) && N->ncond < 8) {
      N->cond[N->ncond++] = tl_ir_kid(L->ir, s, 0);
      s = tl_ir_kid(L->ir, s, 1);
      continue;
    }
    if (op != TL_IR_FOR) break;
    int64_t mn, ex;
    if (!tl_ir_is_int(L->ir, tl_ir_kid(L->ir, s, 1), &mn) || mn != 0 ||
        !tl_ir_is_int(L->ir, tl_ir_kid(L->ir, s, 2), &ex) || N->n == MAXLOOP)
      return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a loop of a VTA region must start at 0 with a constant extent");
    N->var[N->n] = tl_ir_kid(L->ir, s, 0), N->ext[N->n++] = ex;
    s = tl_ir_kid(L->ir, s, 3);
  }
  N->leaf = s;
  return TL_OK;
}

static void zero_vars(lw *L, const nest *N) {
  for (int i = 0; i < N->n; i++) L->env[tl_ir_node(L->ir, N->var[i])->imm.u] = 0;
}
static void set_var(lw *L, tl_ref v, int64_t x) { L->env[tl_ir_node(L->ir, v)->imm.u] = x; }

/* The guards of a nest for the current thread: 1 all hold everywhere in the nest, 0 none
** holds anywhere (the thread skips the region: a split of a virtual thread axis that does
** not divide), else an error (a partial guard is not a VTA instruction). */
static int guards_q(lw *L, const nest *N, int quiet) {
  if (!N->ncond) return 1;
  int used[MAXLOOP], nu = 0;
  int64_t total = 1;
  for (int i = 0; i < N->n; i++) {
    int u = 0;
    for (int k = 0; k < N->ncond; k++) u |= tl_ir_uses_var(L->ir, N->cond[k], N->var[i]);
    if (u) used[nu++] = i, total *= N->ext[i];
  }
  if (total > 65536) {
    fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a guard of a VTA region spans too many iterations");
    return -1;
  }
  zero_vars(L, N);
  int any = 0, all = 1;
  for (int64_t p = 0; p < total; p++) {
    int64_t r = p;
    for (int j = nu - 1; j >= 0; j--) set_var(L, N->var[used[j]], r % N->ext[used[j]]), r /= N->ext[used[j]];
    int ok = 1;
    for (int k = 0; k < N->ncond && ok; k++) ok = ev(L, N->cond[k]) != 0;
    any |= ok, all &= ok;
  }
  zero_vars(L, N);
  if (all) return 1;
  if (!any) return 0;
  if (!quiet) fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a guard holds in part of a VTA region only");
  return -1;
}
static int guards(lw *L, const nest *N) { return guards_q(L, N, 0); }

/* coefficient of loop i in e (others at 0), checked linear at the last iteration */
static int coef(lw *L, const nest *N, int i, tl_ref e, int64_t *out) {
  zero_vars(L, N);
  int64_t e0 = ev(L, e);
  set_var(L, N->var[i], 1);
  int64_t e1 = ev(L, e);
  set_var(L, N->var[i], N->ext[i] - 1);
  int64_t el = ev(L, e);
  set_var(L, N->var[i], 0);
  *out = e1 - e0;
  if (el - e0 != (e1 - e0) * (N->ext[i] - 1))
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "an index is not linear in a loop of a VTA region");
  return L->rc;
}

static int64_t sram_addr(lw *L, int buf, int t) {
  while (L->b[buf].alias >= 0) buf = L->b[buf].alias;
  return (int64_t)t * L->sram_per_thread[L->b[buf].role] + L->b[buf].base;
}
static int key_of(lw *L, int buf, int t) {
  while (L->b[buf].alias >= 0) buf = L->b[buf].alias;
  return buf * MAXT + t;
}
static int vec_of(const tl_vta_config *c, int role) {
  return role == R_INP ? c->batch * c->block_in : role == R_WGT ? c->block_out * c->block_in
                                                                : c->batch * c->block_out;
}

static action *new_action(lw *L, int kind, int t, int module) {
  action a;
  memset(&a, 0, sizeof a);
  a.kind = kind, a.thread = t, a.module = module, a.wr = -1, a.dma0 = L->dmas.n;
  TL_VEC_PUSH(L->acts, a);
  return &L->acts.v[L->acts.n - 1];
}

/* ---- DMA: a copy between an argument (DRAM) and an SRAM buffer ------------------- */

static tl_ref strip_cast(const tl_ir *ir, tl_ref e) {
  while (tl_ir_op(ir, e) == TL_IR_CAST) e = tl_ir_kid(ir, e, 0);
  return e;
}

/* The static analysis of a dma_copy region (per region and guard state). */
typedef struct dplan {
  tl_ref site;
  int g;
  nest N;
  int load, dram, sram, role;
  int64_t vec;
  tl_ref ds, ss;
  int xi, yi, host;
  int64_t xe, ye, ystride;
  int nterm;
  tl_ref terms[40];
  int tdim[40], tpad[40];
} dplan;

static int dma_plan(lw *L, const nest *Nin, dplan *P) {
  tl_ir *ir = L->ir;
  nest N = *Nin;
  tl_ref st = N.leaf;
  if (tl_ir_op(ir, st) != TL_IR_STORE)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a dma_copy region must be a loop nest around one store");
  int dbuf = (int)tl_ir_node(ir, st)->imm.u;
  tl_ref val = strip_cast(ir, tl_ir_kid(ir, st, 0)), didx = tl_ir_kid(ir, st, 1), cond = 0;
  if (tl_ir_op(ir, val) == TL_IR_IF_THEN_ELSE || tl_ir_op(ir, val) == TL_IR_SELECT) {
    int64_t z;
    if (!tl_ir_is_int(ir, strip_cast(ir, tl_ir_kid(ir, val, 2)), &z) || z != 0)
      return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a padded copy must pad with zero");
    cond = tl_ir_kid(ir, val, 0);
    val = strip_cast(ir, tl_ir_kid(ir, val, 1));
  }
  if (tl_ir_op(ir, val) != TL_IR_LOAD)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a dma_copy region must copy a buffer");
  int sbuf_ = (int)tl_ir_node(ir, val)->imm.u;
  tl_ref sidx = tl_ir_kid(ir, val, 0);
  int load = tl_ir_buffer(ir, dbuf)->arg < 0;
  int dram = load ? sbuf_ : dbuf, sram = load ? dbuf : sbuf_;
  int root = sram;
  while (L->b[root].alias >= 0) root = L->b[root].alias;
  int role = L->b[root].role;
  if (tl_ir_buffer(ir, dram)->arg < 0 || role == R_NONE || (!load && role != R_ACC))
    return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: one side must be an argument, the other an SRAM buffer (stores only from the accumulator)",
                tl_ir_buffer(ir, sbuf_)->name);
  int64_t vec = vec_of(L->c, role);
  tl_ref ds = load ? sidx : didx, ss = load ? didx : sidx;   /* DRAM and SRAM side indices */
  /* the innermost loops make one vector, row-major on both sides */
  int lane = N.n;
  int64_t prod = 1;
  while (lane > 0 && prod < vec) {
    int64_t cd, cs;
    lane--;
    TRY(coef(L, &N, lane, ds, &cd));
    TRY(coef(L, &N, lane, ss, &cs));
    if (cd != prod || cs != prod)
      return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: the innermost loops are not one contiguous vector",
                  tl_ir_buffer(ir, sram)->name);
    prod *= N.ext[lane];
  }
  if (prod != vec)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: the innermost loops do not make one vector",
                tl_ir_buffer(ir, sram)->name);
  /* outer loops in vectors; x, y folded while contiguous */
  int64_t cd[MAXLOOP], cs[MAXLOOP];
  for (int i = 0; i < lane; i++) {
    TRY(coef(L, &N, i, ds, &cd[i]));
    TRY(coef(L, &N, i, ss, &cs[i]));
    if (cd[i] % vec || cs[i] % vec)
      return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: an outer loop does not step whole vectors",
                  tl_ir_buffer(ir, sram)->name);
    cd[i] /= vec, cs[i] /= vec;
  }
  /* x: loops [xo, xi] contiguous on both sides; y: loops [yo, yi] with a compact SRAM side;
  ** a dim whose loop was dropped (extent 1) is absent (-1) */
  int xi = -1, xo = -1, yi = -1, yo = -1, k = lane - 1, hascond = cond || N.ncond;
  int64_t xe = 1, ye = 1, ystride = 1;
  if (k >= 0 && cs[k] == 1 && cd[k] == 1) {
    xi = xo = k, xe = N.ext[k];
    while (xo > 0 && cs[xo - 1] == xe && cd[xo - 1] == xe && !hascond) xe *= N.ext[--xo];
    k = xo - 1;
  }
  if (k >= 0 && cs[k] == xe) {
    yi = yo = k, ye = N.ext[k], ystride = cd[k];
    while (yo > 0 && cs[yo - 1] == ye * xe && cd[yo - 1] == ye * cd[yi] && !hascond) ye *= N.ext[--yo];
    k = yo - 1;
  }
  if (yi < 0) ystride = xe;
  int host = k + 1;   /* loops [0, host) give one DMA each */
  /* The pad condition's terms (zero padding) and the guards of the nest (rows and columns
  ** not copied) each use x, y or neither of the copy's loops. */
  tl_ref terms[40];
  int nterm = 0, tdim[40], tpad[40];
  for (int src = 0; src <= N.ncond; src++) {
    tl_ref stack[40];
    int sp = 0;
    if (src < N.ncond) stack[sp++] = N.cond[src];
    else if (cond) stack[sp++] = cond;
    while (sp) {
      tl_ref e = stack[--sp];
      if (tl_ir_op(ir, e) == TL_IR_AND && sp < 38) {
        stack[sp++] = tl_ir_kid(ir, e, 0), stack[sp++] = tl_ir_kid(ir, e, 1);
        continue;
      }
      if (nterm == 40) return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a copy's condition is too long");
      int ux = xi >= 0 && tl_ir_uses_var(ir, e, N.var[xi]);
      int uy = yi >= 0 && tl_ir_uses_var(ir, e, N.var[yi]);
      for (int i = 0; i < N.n; i++)
        if (tl_ir_uses_var(ir, e, N.var[i]) && !(i == xi && xo == xi) && !(i == yi && yo == yi) &&
            !(i < host && src < N.ncond))
          return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: a condition on a dim the DMA cannot pad or cut",
                      tl_ir_buffer(ir, sram)->name);
      if (ux && uy)
        return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: a condition mixes x and y",
                    tl_ir_buffer(ir, sram)->name);
      if (!load && src == N.ncond)
        return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: a store cannot pad", tl_ir_buffer(ir, sram)->name);
      terms[nterm] = e, tpad[nterm] = src == N.ncond, tdim[nterm++] = ux ? 1 : uy ? 2 : 0;
    }
  }
  P->N = N, P->load = load, P->dram = dram, P->sram = sram, P->role = role, P->vec = vec;
  P->ds = ds, P->ss = ss, P->xi = xi, P->yi = yi, P->host = host;
  P->xe = xe, P->ye = ye, P->ystride = ystride, P->nterm = nterm;
  memcpy(P->terms, terms, sizeof terms), memcpy(P->tdim, tdim, sizeof tdim);
  memcpy(P->tpad, tpad, sizeof tpad);
  return TL_OK;
}

static int dma_run(lw *L, dplan *P, int t) {
  tl_ir *ir = L->ir;
  nest N = P->N;
  int load = P->load, dram = P->dram, sram = P->sram, role = P->role, xi = P->xi, yi = P->yi;
  int host = P->host, nterm = P->nterm;
  const int *tdim = P->tdim, *tpad = P->tpad;
  const tl_ref *terms = P->terms;
  tl_ref ds = P->ds, ss = P->ss;
  int64_t vec = P->vec, xe = P->xe, ye = P->ye, ystride = P->ystride;
  int64_t hcount = 1;
  for (int i = 0; i < host; i++) hcount *= N.ext[i];
  {
    action *a = NULL;
    int key = key_of(L, sram, t);
    for (int64_t h = 0; h < hcount; h++) {
      zero_vars(L, &N);
      int64_t r = h;
      for (int i = host - 1; i >= 0; i--) set_var(L, N.var[i], r % N.ext[i]), r /= N.ext[i];
      /* per dim (x, y): the guarded range g and the unpadded range p */
      int64_t g[2][2] = {{0, xe}, {0, ye}}, pr[2][2] = {{0, xe}, {0, ye}};
      int skip = 0, empty = 0;
      for (int m = 0; m < nterm && !skip; m++) {
        if (tdim[m] == 0) {
          if (!ev(L, terms[m])) tpad[m] ? (empty = 1) : (skip = 1);
          continue;
        }
        int d = tdim[m] - 1, i = d == 0 ? xi : yi;
        int64_t lo = -1, hi = -1;
        for (int64_t v = 0; v < N.ext[i]; v++) {
          set_var(L, N.var[i], v);
          int ok = ev(L, terms[m]) != 0;
          if (ok && lo < 0) lo = v;
          if (ok && hi >= 0)
            return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: the valid range of a dim is not contiguous",
                        tl_ir_buffer(ir, sram)->name);
          if (!ok && lo >= 0 && hi < 0) hi = v;
        }
        set_var(L, N.var[i], 0);
        if (lo < 0) { tpad[m] ? (empty = 1) : (skip = 1); continue; }
        if (hi < 0) hi = N.ext[i];
        int64_t (*rg)[2] = tpad[m] ? pr : g;
        rg[d][0] = TL_MAX(rg[d][0], lo), rg[d][1] = TL_MIN(rg[d][1], hi);
      }
      if (skip || g[0][0] >= g[0][1] || g[1][0] >= g[1][1]) continue;
      int64_t dx0 = TL_MAX(g[0][0], pr[0][0]), dx1 = TL_MIN(g[0][1], pr[0][1]);
      int64_t dy0 = TL_MAX(g[1][0], pr[1][0]), dy1 = TL_MIN(g[1][1], pr[1][1]);
      int allpad = empty || dx0 >= dx1 || dy0 >= dy1;   /* an error unless nothing reads it */
      if (allpad) dx0 = dx1 = g[0][0], dy0 = dy1 = g[1][0];
      if (xi >= 0) set_var(L, N.var[xi], g[0][0]);
      if (yi >= 0) set_var(L, N.var[yi], g[1][0]);
      int64_t s0 = ev(L, ss);
      if (xi >= 0) set_var(L, N.var[xi], dx0);
      if (yi >= 0) set_var(L, N.var[yi], dy0);
      int64_t d0 = ev(L, ds);
      if (s0 % vec || d0 % vec || d0 < 0)
        return fail(L, TL_E_UNSUPPORTED, "vta lower: copy of %s: an offset is not a whole vector",
                    tl_ir_buffer(ir, sram)->name);
      dma D;
      D.phys = L->arg_phys[tl_ir_buffer(ir, dram)->arg];
      D.dram = (uint32_t)(d0 / vec);
      D.sram = (uint32_t)(sram_addr(L, sram, t) + s0 / vec);
      D.x = (uint32_t)(dx1 - dx0), D.y = (uint32_t)(dy1 - dy0);
      D.stride = (uint32_t)ystride;
      D.xp0 = (uint32_t)(dx0 - g[0][0]), D.xp1 = (uint32_t)(g[0][1] - dx1);
      D.yp0 = (uint32_t)(dy0 - g[1][0]), D.yp1 = (uint32_t)(g[1][1] - dy1);
      D.mem = !load ? TL_VTA_MEM_OUT : role == R_INP ? TL_VTA_MEM_INP : role == R_WGT ? TL_VTA_MEM_WGT
            : tl_ir_buffer(ir, dram)->dtype.bits == 8 ? TL_VTA_MEM_ACC8 : TL_VTA_MEM_ACC;
      if (!a) {
        a = new_action(L, load ? A_LOAD : A_STORE, t,
                       load ? (role == R_ACC ? TL_VTA_STAGE_COMPUTE : TL_VTA_STAGE_LOAD)
                            : TL_VTA_STAGE_STORE);
        if (load) a->wr = key; else a->rd[a->nrd++] = key;
        a->what = tl_ir_buffer(ir, sram)->name;
      }
      a->allpad |= allpad;
      TL_VEC_PUSH(L->dmas, D);
      a = &L->acts.v[L->acts.n - 1];
      a->ndma++;
    }
    if (L->rc) return L->rc;
  }
  return L->rc;
}

/* Per thread: guards that hold everywhere are dropped (the copy folds freely), a copy no
** guard lets through is skipped, and a partial guard cuts the DMA's rows or columns. */
static int dma_site(lw *L, tl_ref site, const int *active) {
  for (int t = 0; t < L->nthr && !L->rc; t++) {
    if (!active[t]) continue;
    set_thread(L, t);
    nest N;
    TRY(chain(L, site, &N));
    int g = guards_q(L, &N, 1);
    if (L->rc || g == 0) continue;
    if (g == 1) N.ncond = 0;
    int hit = -1;
    for (int i = 0; i < L->dplans.n && hit < 0; i++)
      if (L->dplans.v[i]->site == site && L->dplans.v[i]->g == g) hit = i;
    if (hit < 0) {
      dplan *P = tl_calloc(1, sizeof *P);
      P->site = site, P->g = g;
      TL_VEC_PUSH(L->dplans, P);
      TRY(dma_plan(L, &N, P));
      hit = L->dplans.n - 1;
    }
    TRY(dma_run(L, L->dplans.v[hit], t));
  }
  return L->rc;
}

/* ---- micro-op kernels ------------------------------------------------------------------ */

static tl_vta_kernel *kernel_for(lw *L, const int32_t *key, int nkey, int mode, int reset, int op,
                                 int use_imm, int32_t imm, int nloop, const int64_t (*loop)[4],
                                 const uint32_t (*uops)[3], int nuop) {
  for (int i = 0; i < L->kern.n; i++)
    if (L->kern.v[i].nkey == nkey && !memcmp(L->kern.v[i].key, key, sizeof *key * (size_t)nkey))
      return L->kern.v[i].k;
  tl_vta_kernel *k = tl_vta_kernel_new(L->q, mode, reset, op, use_imm, imm);
  for (int i = 0; i < nloop; i++)
    tl_vta_kernel_loop(L->q, k, (uint32_t)loop[i][0], (uint32_t)loop[i][1], (uint32_t)loop[i][2],
                       (uint32_t)loop[i][3]);
  for (int i = 0; i < nuop; i++) tl_vta_kernel_uop(L->q, k, uops[i][0], uops[i][1], uops[i][2]);
  kcache kc = {tl_malloc(sizeof *key * (size_t)nkey), nkey, k};
  memcpy(kc.key, key, sizeof *key * (size_t)nkey);
  TL_VEC_PUSH(L->kern, kc);
  return k;
}

/* The gemm block under a "gemm" attr: its loops and the store. */
typedef struct gblock {
  int reset;
  int acc, inp, wgt;             /* buffers (inp, wgt: -1 for a reset) */
  tl_ref iacc, iinp, iwgt;
  nest in;                       /* the block's own loops */
} gblock;

static int gemm_block(lw *L, tl_ref attr, gblock *g) {
  tl_ir *ir = L->ir;
  TRY(chain(L, tl_ir_kid(ir, attr, 1), &g->in));
  tl_ref st = g->in.leaf;
  if (tl_ir_op(ir, st) != TL_IR_STORE)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a gemm block must be loops around one store");
  g->acc = (int)tl_ir_node(ir, st)->imm.u, g->iacc = tl_ir_kid(ir, st, 1);
  tl_ref v = tl_ir_kid(ir, st, 0);
  int64_t z;
  if (tl_ir_is_int(ir, v, &z) && z == 0) {
    g->reset = 1, g->inp = g->wgt = -1;
    return TL_OK;
  }
  g->reset = 0;
  tl_ref mul = 0;
  if (tl_ir_op(ir, v) == TL_IR_ADD)
    for (int i = 0; i < 2; i++) {
      tl_ref a = tl_ir_kid(ir, v, i), b = tl_ir_kid(ir, v, 1 - i);
      if (tl_ir_op(ir, a) == TL_IR_LOAD && (int)tl_ir_node(ir, a)->imm.u == g->acc &&
          tl_ir_kid(ir, a, 0) == g->iacc && tl_ir_op(ir, b) == TL_IR_MUL)
        mul = b;
    }
  if (!mul)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a gemm block must be acc += x * w or acc = 0");
  tl_ref x = strip_cast(ir, tl_ir_kid(ir, mul, 0)), w = strip_cast(ir, tl_ir_kid(ir, mul, 1));
  if (tl_ir_op(ir, x) != TL_IR_LOAD || tl_ir_op(ir, w) != TL_IR_LOAD || g->in.n < 2)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a gemm block must multiply two loads over (ci, ki)");
  /* the weight is the operand indexed by the output lane (the block's ci loop) */
  tl_ref ci = g->in.var[g->in.n - 2];
  if (tl_ir_uses_var(ir, tl_ir_kid(ir, x, 0), ci)) { tl_ref t = x; x = w; w = t; }
  g->inp = (int)tl_ir_node(ir, x)->imm.u, g->iinp = tl_ir_kid(ir, x, 0);
  g->wgt = (int)tl_ir_node(ir, w)->imm.u, g->iwgt = tl_ir_kid(ir, w, 0);
  return TL_OK;
}

/* Merge adjacent loops contiguous in every index (outer coefficient = inner extent x
** inner coefficient); loops of extent 1 are dropped. */
static int flatten(int n, int64_t (*lp)[4]) {
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (lp[i][0] == 1) continue;
    memmove(lp[m], lp[i], sizeof lp[0]);
    m++;
  }
  for (int i = m - 2; i >= 0; i--) {
    int ok = 1;
    for (int j = 1; j < 4; j++) ok &= lp[i][j] == lp[i + 1][0] * lp[i + 1][j];
    if (!ok) continue;
    lp[i][0] *= lp[i + 1][0];
    for (int j = 1; j < 4; j++) lp[i][j] = lp[i + 1][j];
    memmove(lp[i + 1], lp[i + 2], sizeof lp[0] * (size_t)(m - i - 2));
    m--;
  }
  return m;
}

/* A GEMM kernel: site is the outermost loop whose nest holds only gemm blocks (or the
** gemm attr itself). */
static int gemm_site(lw *L, tl_ref site, const int *active) {
  tl_ir *ir = L->ir;
  nest O;
  if (tl_ir_op(ir, site) == TL_IR_ATTR) O.n = O.ncond = 0, O.leaf = site;
  else TRY(chain(L, site, &O));
  if (tl_ir_op(ir, O.leaf) != TL_IR_ATTR)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a GEMM kernel must be a perfect loop nest around one gemm block");
  gblock g;
  TRY(gemm_block(L, O.leaf, &g));
  int va = vec_of(L->c, R_ACC), vi = vec_of(L->c, R_INP), vw = vec_of(L->c, R_WGT);
  int64_t (*lp)[4] = tl_malloc(sizeof *lp * (MAXLOOP + 1));
  nest all = O;   /* the kernel's loops and the block's, for the guards */
  for (int i = 0; i < g.in.n && all.n < MAXLOOP; i++) all.var[all.n] = g.in.var[i], all.ext[all.n++] = g.in.ext[i];
  for (int i = 0; i < g.in.ncond && all.ncond < 8; i++) all.cond[all.ncond++] = g.in.cond[i];
  for (int t = 0; t < L->nthr; t++) {
    if (!active[t]) continue;
    set_thread(L, t);
    int gd = guards(L, &all);
    if (gd < 0) break;
    if (!gd) continue;
    zero_vars(L, &g.in);
    /* loop coefficients in elements of each SRAM */
    int n = 0;
    for (int i = 0; i < O.n; i++) {
      int64_t c0, c1 = 0, c2 = 0;
      TRY(coef(L, &O, i, g.iacc, &c0));
      if (!g.reset) { TRY(coef(L, &O, i, g.iinp, &c1)); TRY(coef(L, &O, i, g.iwgt, &c2)); }
      if (c0 % va || c1 % vi || c2 % vw) {
        free(lp);
        return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a GEMM loop does not step whole vectors");
      }
      lp[n][0] = O.ext[i], lp[n][1] = c0 / va, lp[n][2] = c1 / vi, lp[n][3] = c2 / vw;
      n++;
    }
    n = flatten(n, lp);
    int nf = TL_MIN(n, 2);   /* folded into the kernel's loops */
    int64_t nuop = 1;
    for (int i = nf; i < n; i++) nuop *= lp[i][0];
    if (nuop > L->c->uop_depth) {
      free(lp);
      return fail(L, TL_E_SCHED, "vta lower: %s", "a GEMM kernel needs more micro-ops than the micro-op buffer holds");
    }
    uint32_t (*u)[3] = tl_malloc(sizeof *u * (size_t)nuop);
    zero_vars(L, &O);
    int64_t a0 = ev(L, g.iacc) / va, s0 = g.reset ? 0 : ev(L, g.iinp) / vi,
            w0 = g.reset ? 0 : ev(L, g.iwgt) / vw;
    int64_t ba = sram_addr(L, g.acc, t), bi = g.reset ? 0 : sram_addr(L, g.inp, t),
            bw = g.reset ? 0 : sram_addr(L, g.wgt, t);
    for (int64_t q = 0; q < nuop; q++) {
      int64_t r = q, d = a0, s = s0, w = w0;
      for (int i = n - 1; i >= nf; i--) {
        int64_t x = r % lp[i][0];
        r /= lp[i][0];
        d += x * lp[i][1], s += x * lp[i][2], w += x * lp[i][3];
      }
      u[q][0] = (uint32_t)(ba + d), u[q][1] = (uint32_t)(bi + s), u[q][2] = (uint32_t)(bw + w);
    }
    int nkey = (int)(4 + nf * 4 + nuop * 3);
    int32_t *key = tl_malloc(sizeof *key * (size_t)nkey);
    key[0] = 0, key[1] = g.reset, key[2] = nf, key[3] = (int32_t)nuop;
    for (int i = 0; i < nf; i++)
      for (int j = 0; j < 4; j++) key[4 + i * 4 + j] = (int32_t)lp[i][j];
    memcpy(key + 4 + nf * 4, u, sizeof *u * (size_t)nuop);
    action *a = new_action(L, A_KERNEL, t, TL_VTA_STAGE_COMPUTE);
    a->kernel = kernel_for(L, key, nkey, 0, g.reset, 0, 0, 0, nf, (const int64_t(*)[4])lp,
                           (const uint32_t(*)[3])u, (int)nuop);
    a->wr = key_of(L, g.acc, t);
    if (!g.reset) a->rd[a->nrd++] = key_of(L, g.inp, t), a->rd[a->nrd++] = key_of(L, g.wgt, t);
    free(key);
    free(u);
    if (L->rc) break;
  }
  free(lp);
  return L->rc;
}

/* The operand an ALU stage's value updates in place: the first load among its operands
** (a load under a cast only when no operand is a plain load); 0 if none. */
static tl_ref inplace_operand(const tl_ir *ir, tl_ref v) {
  if (tl_ir_op(ir, strip_cast(ir, v)) == TL_IR_LOAD) return strip_cast(ir, v);
  int n = tl_ir_op(ir, v) == TL_IR_LOAD ? 0 : tl_ir_nkids(ir, v);
  for (int i = 0; i < n; i++)
    if (tl_ir_op(ir, tl_ir_kid(ir, v, i)) == TL_IR_LOAD) return tl_ir_kid(ir, v, i);
  for (int i = 0; i < n; i++)
    if (tl_ir_op(ir, strip_cast(ir, tl_ir_kid(ir, v, i))) == TL_IR_LOAD)
      return strip_cast(ir, tl_ir_kid(ir, v, i));
  return 0;
}

/* An ALU kernel over the region, in place: dst[i] = op(src[i], imm), or with a tensor
** operand dst[i] = op(src[i], other[j]) (the ALU's second accumulator operand; j may
** broadcast, as a per-channel bias does). */
static int alu_site(lw *L, tl_ref site, const int *active) {
  tl_ir *ir = L->ir;
  nest N;
  TRY(chain(L, site, &N));
  tl_ref st = N.leaf;
  if (tl_ir_op(ir, st) != TL_IR_STORE)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "an alu region must be a loop nest around one store");
  int dst = (int)tl_ir_node(ir, st)->imm.u;
  tl_ref v = tl_ir_kid(ir, st, 0), di = tl_ir_kid(ir, st, 1), ld = 0, ld2 = 0;
  int op = TL_VTA_ALU_SHR, use_imm = 1;
  int64_t imm = 0;
  int vop = tl_ir_op(ir, v);
  if (tl_ir_op(ir, strip_cast(ir, v)) == TL_IR_LOAD) ld = strip_cast(ir, v);
  else if (vop == TL_IR_SUB && tl_ir_op(ir, tl_ir_kid(ir, v, 0)) == TL_IR_LOAD &&
           tl_ir_is_int(ir, tl_ir_kid(ir, v, 1), &imm)) {
    ld = tl_ir_kid(ir, v, 0), op = TL_VTA_ALU_ADD, imm = -imm;   /* x - c: ADD -c */
  } else if (vop == TL_IR_SHR || vop == TL_IR_SHL || vop == TL_IR_MIN || vop == TL_IR_MAX ||
             vop == TL_IR_ADD || vop == TL_IR_MUL) {
    tl_ref in = inplace_operand(ir, v);
    for (int i = 0; i < 2; i++) {
      tl_ref a = strip_cast(ir, tl_ir_kid(ir, v, i)), b = tl_ir_kid(ir, v, 1 - i);
      if (a != in || !(i == 0 || (tl_ir_opflags[vop] & TL_IRF_C))) continue;
      if (tl_ir_is_int(ir, b, &imm)) ld = a;
      else if (vop != TL_IR_SHR && vop != TL_IR_SHL &&
               tl_ir_op(ir, strip_cast(ir, b)) == TL_IR_LOAD)
        ld = a, ld2 = strip_cast(ir, b), use_imm = 0;
    }
    op = vop == TL_IR_MIN ? TL_VTA_ALU_MIN : vop == TL_IR_MAX ? TL_VTA_ALU_MAX
       : vop == TL_IR_ADD ? TL_VTA_ALU_ADD : vop == TL_IR_MUL ? TL_VTA_ALU_MUL : TL_VTA_ALU_SHR;
    if (vop == TL_IR_SHL) imm = -imm;
  }
  if (!ld || imm < -32768 || imm > 32767)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "an alu stage must be op(acc, 16-bit immediate) with op add, mul, min, max or a shift, or op(acc, acc) with op add, mul, min or max");
  if (ld2) {
    int r = (int)tl_ir_node(ir, ld2)->imm.u;
    while (L->b[r].alias >= 0) r = L->b[r].alias;
    if (L->b[r].role != R_ACC)
      return fail(L, TL_E_UNSUPPORTED, "vta lower: alu operand %s is not in the accumulator",
                  tl_ir_buffer(ir, (int)tl_ir_node(ir, ld2)->imm.u)->name);
  }
  /* the ALU's src operand: the immediate's source is the in-place one (src = dst); with a
  ** tensor operand, dst is read and updated in place and src is the other tensor */
  int src = (int)tl_ir_node(ir, ld2 ? ld2 : ld)->imm.u;
  tl_ref si = tl_ir_kid(ir, ld2 ? ld2 : ld, 0);
  if (ld2) {
    int a = (int)tl_ir_node(ir, ld)->imm.u, b = dst;
    while (L->b[a].alias >= 0) a = L->b[a].alias;
    while (L->b[b].alias >= 0) b = L->b[b].alias;
    if (a != b || tl_ir_kid(ir, ld, 0) != di) {
      /* the in-place operand must be dst itself, element for element */
      int64_t x, y;
      int same = a == b;
      for (int i = 0; i < N.n && same; i++) {
        TRY(coef(L, &N, i, di, &x));
        TRY(coef(L, &N, i, tl_ir_kid(ir, ld, 0), &y));
        same = x == y;
      }
      if (same) { zero_vars(L, &N); same = ev(L, di) == ev(L, tl_ir_kid(ir, ld, 0)); }
      if (!same)
        return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "an alu stage with two tensor operands must update one of them in place");
    }
  }
  int64_t vec = vec_of(L->c, R_ACC), prod = 1;
  int lane = N.n;
  while (lane > 0 && prod < vec) {
    int64_t a, b;
    lane--;
    TRY(coef(L, &N, lane, di, &a));
    TRY(coef(L, &N, lane, si, &b));
    if (a != prod || b != prod) break;
    prod *= N.ext[lane];
  }
  if (prod != vec)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "the innermost loops of an alu stage must be one accumulator vector");
  int64_t lp[MAXLOOP][4];
  for (int i = 0; i < lane; i++) {
    int64_t a, b;
    TRY(coef(L, &N, i, di, &a));
    TRY(coef(L, &N, i, si, &b));
    if (a % vec || b % vec)
      return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "an alu loop does not step whole vectors");
    lp[i][0] = N.ext[i], lp[i][1] = a / vec, lp[i][2] = b / vec, lp[i][3] = 0;
  }
  int n = flatten(lane, lp);
  if (n > 2)
    return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "an alu stage needs more than two loops");
  for (int t = 0; t < L->nthr; t++) {
    if (!active[t]) continue;
    set_thread(L, t);
    int gd = guards(L, &N);
    if (gd < 0) break;
    if (!gd) continue;
    zero_vars(L, &N);
    uint32_t u[1][3] = {{(uint32_t)(sram_addr(L, dst, t) + ev(L, di) / vec),
                         (uint32_t)(sram_addr(L, src, t) + ev(L, si) / vec), 0}};
    int32_t key[16] = {1, op, use_imm ? (int32_t)imm : INT32_MIN, n, (int32_t)u[0][0], (int32_t)u[0][1]};
    for (int i = 0; i < n; i++)
      for (int j = 0; j < 3; j++) key[6 + i * 3 + j] = (int32_t)lp[i][j];
    action *a = new_action(L, A_KERNEL, t, TL_VTA_STAGE_COMPUTE);
    a->kernel = kernel_for(L, key, 6 + n * 3, 1, 0, op, use_imm, (int32_t)imm, n,
                           (const int64_t(*)[4])lp, (const uint32_t(*)[3])u, 1);
    a->rd[a->nrd++] = key_of(L, src, t);
    if (ld2) a->rd[a->nrd++] = key_of(L, dst, t);
    a->wr = key_of(L, dst, t);
  }
  return L->rc;
}

/* ---- the host walk ------------------------------------------------------------------- */

static const char *attr_key(lw *L, tl_ref a) {
  return tl_ir_str(L->ir, (uint32_t)tl_ir_node(L->ir, a)->imm.u);
}

static int gemm_nest(lw *L, tl_ref s) {
  while (tl_ir_op(L->ir, s) == TL_IR_FOR || (tl_ir_op(L->ir, s) == TL_IR_IF && !tl_ir_kid(L->ir, s, 2)))
    s = tl_ir_kid(L->ir, s, tl_ir_op(L->ir, s) == TL_IR_FOR ? 3 : 1);
  return tl_ir_op(L->ir, s) == TL_IR_ATTR && !strcmp(attr_key(L, s), "pragma_gemm");
}

static void linearize(tl_ir *ir, tl_ref s, void *out_) {
  TL_VEC(tl_ref) *out = out_;
  int op = tl_ir_op(ir, s);
  if (op == TL_IR_ALLOC) linearize(ir, tl_ir_kid(ir, s, 0), out);
  else if (op == TL_IR_SEQ)
    for (int i = 0; i < tl_ir_nkids(ir, s); i++) linearize(ir, tl_ir_kid(ir, s, i), out);
  else TL_VEC_PUSH(*out, s);
}

/* The module a VTA region runs on (TL_VTA_STAGE_*), 0 for other statements. */
static int site_module(lw *L, tl_ref s) {
  tl_ir *ir = L->ir;
  if (tl_ir_op(ir, s) == TL_IR_FOR) return gemm_nest(L, s) ? TL_VTA_STAGE_COMPUTE : 0;
  if (tl_ir_op(ir, s) != TL_IR_ATTR) return 0;
  const char *k = attr_key(L, s);
  if (!strcmp(k, "pragma_alu") || !strcmp(k, "pragma_gemm")) return TL_VTA_STAGE_COMPUTE;
  if (strcmp(k, "pragma_dma_copy")) return 0;
  tl_ref b = tl_ir_kid(ir, s, 1);
  while (tl_ir_op(ir, b) == TL_IR_FOR || (tl_ir_op(ir, b) == TL_IR_IF && !tl_ir_kid(ir, b, 2)))
    b = tl_ir_kid(ir, b, tl_ir_op(ir, b) == TL_IR_FOR ? 3 : 1);
  if (tl_ir_op(ir, b) != TL_IR_STORE) return 0;
  int dst = (int)tl_ir_node(ir, b)->imm.u;
  if (tl_ir_buffer(ir, dst)->arg >= 0) return TL_VTA_STAGE_STORE;
  int r = dst;
  while (L->b[r].alias >= 0) r = L->b[r].alias;
  return L->b[r].role == R_ACC ? TL_VTA_STAGE_COMPUTE : TL_VTA_STAGE_LOAD;
}

typedef struct varsets {
  TL_VEC(tl_ref) all, bound;
} varsets;

static int collect_vars(const tl_ir *ir, tl_ref r, void *ud) {
  varsets *v = ud;
  if (tl_ir_op(ir, r) == TL_IR_VAR) TL_VEC_PUSH(v->all, r);
  if (tl_ir_op(ir, r) == TL_IR_FOR) TL_VEC_PUSH(v->bound, tl_ir_kid(ir, r, 0));
  return 1;
}

/* Run a kernel region (GEMM or ALU) per active thread, reusing the action built for the
** same thread and the same values of the region's free variables. */
static int kernel_site(lw *L, tl_ref site, const int *active,
                       int (*fn)(lw *, tl_ref, const int *)) {
  tl_ref fv[8];
  int nf = 0;
  varsets vs = {{0}, {0}};
  tl_ir_visit(L->ir, site, collect_vars, &vs);
  for (int i = 0; i < vs.all.n; i++) {
    int b = 0;
    for (int j = 0; j < vs.bound.n && !b; j++) b = vs.bound.v[j] == vs.all.v[i];
    for (int j = 0; j < nf && !b; j++) b = fv[j] == vs.all.v[i];
    if (b) continue;
    if (nf == 8) { nf = -1; break; }
    fv[nf++] = vs.all.v[i];
  }
  TL_VEC_FREE(vs.all);
  TL_VEC_FREE(vs.bound);
  if (nf < 0) return fn(L, site, active);
  for (int t = 0; t < L->nthr && !L->rc; t++) {
    if (!active[t]) continue;
    set_thread(L, t);
    int64_t val[8];
    for (int i = 0; i < nf; i++) val[i] = L->env[tl_ir_node(L->ir, fv[i])->imm.u];
    int hit = -1;
    for (int m = 0; m < L->memo.n && hit < 0; m++) {
      const struct memo *e = &L->memo.v[m];
      if (e->site == site && e->thread == t && e->nfree == nf &&
          !memcmp(e->val, val, sizeof(int64_t) * (size_t)nf))
        hit = m;
    }
    if (hit >= 0) {
      if (L->memo.v[hit].has) TL_VEC_PUSH(L->acts, L->memo.v[hit].a);
      continue;
    }
    int one[MAXT] = {0};
    one[t] = 1;
    int before = L->acts.n;
    TRY(fn(L, site, one));
    struct memo e;
    memset(&e, 0, sizeof e);
    e.site = site, e.thread = t, e.nfree = nf, e.has = L->acts.n == before + 1;
    memcpy(e.val, val, sizeof(int64_t) * (size_t)nf);
    if (L->acts.n > before + 1) continue;   /* not one action: not memoized */
    if (e.has) e.a = L->acts.v[before];
    TL_VEC_PUSH(L->memo, e);
  }
  return L->rc;
}

static int walk(lw *L, tl_ref s, const int *active) {
  tl_ir *ir = L->ir;
  if (L->rc) return L->rc;
  int any = 0;
  for (int t = 0; t < L->nthr; t++) any |= active[t];
  if (!any) return TL_OK;
  switch (tl_ir_op(ir, s)) {
  case TL_IR_SEQ:
  case TL_IR_ALLOC: {
    /* The statements in order (allocations only name SRAM). With virtual threads,
    ** consecutive regions on one module run as one group per thread (TVM lifts them into
    ** one coprocessor scope before it injects the threads). */
    TL_VEC(tl_ref) items = {0};
    linearize(ir, s, &items);
    for (int i = 0; i < items.n && !L->rc;) {
      int m = site_module(L, items.v[i]), j = i + 1;
      if (!m || L->nthr == 1) {
        walk(L, items.v[i], active);
        i++;
        continue;
      }
      while (j < items.n && site_module(L, items.v[j]) == m) j++;
      for (int t = 0; t < L->nthr && !L->rc; t++) {
        if (!active[t]) continue;
        int one[MAXT] = {0};
        one[t] = 1;
        for (int k = i; k < j && !L->rc; k++) walk(L, items.v[k], one);
      }
      i = j;
    }
    TL_VEC_FREE(items);
    return L->rc;
  }
  case TL_IR_NOP: return TL_OK;
  case TL_IR_ATTR: {
    const char *k = attr_key(L, s);
    if (!strcmp(k, "pragma_dma_copy")) return dma_site(L, s, active);
    if (!strcmp(k, "pragma_alu")) return kernel_site(L, s, active, alu_site);
    if (!strcmp(k, "pragma_gemm")) return kernel_site(L, s, active, gemm_site);
    return walk(L, tl_ir_kid(ir, s, 1), active);
  }
  case TL_IR_FOR: {
    if (tl_for_kind(ir, s) == TL_FOR_VTHREAD) return walk(L, tl_ir_kid(ir, s, 3), active);
    if (gemm_nest(L, s)) return kernel_site(L, s, active, gemm_site);
    int64_t mn, ex;
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, s, 1), &mn) || !tl_ir_is_int(ir, tl_ir_kid(ir, s, 2), &ex))
      return fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "host loops must have constant bounds");
    uint32_t v = (uint32_t)tl_ir_node(ir, tl_ir_kid(ir, s, 0))->imm.u;
    for (int64_t i = mn; i < mn + ex; i++) {
      L->env[v] = i;
      TRY(walk(L, tl_ir_kid(ir, s, 3), active));
    }
    return TL_OK;
  }
  case TL_IR_IF: {
    int th[MAXT], el[MAXT];
    for (int t = 0; t < L->nthr; t++) {
      set_thread(L, t);
      int c = active[t] ? (int)ev(L, tl_ir_kid(ir, s, 0)) != 0 : 0;
      th[t] = active[t] && c, el[t] = active[t] && !c;
    }
    TRY(walk(L, tl_ir_kid(ir, s, 1), th));
    return tl_ir_kid(ir, s, 2) ? walk(L, tl_ir_kid(ir, s, 2), el) : TL_OK;
  }
  default: {
    char *t = tl_ir_print_short(ir, s, 200);
    fail(L, TL_E_UNSUPPORTED, "vta lower: statement not offloaded to VTA: %s", t);
    free(t);
    return L->rc;
  }
  }
}

/* ---- planning: SRAM roles, addresses, virtual threads -------------------------------- */

static int plan_visit(const tl_ir *ir, tl_ref r, void *ud) {
  lw *L = ud;
  int op = tl_ir_op(ir, r);
  if (op == TL_IR_FOR && tl_for_kind(ir, r) == TL_FOR_VTHREAD) {
    int64_t ex = 1;
    tl_ir_is_int(ir, tl_ir_kid(ir, r, 2), &ex);
    if (L->ntv == 2 || L->nthr * ex > MAXT) {
      fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "at most 4 virtual threads");
      return 0;
    }
    L->tvar[L->ntv] = tl_ir_kid(ir, r, 0), L->text[L->ntv++] = ex;
    L->nthr *= (int)ex;
  }
  if (op == TL_IR_ATTR && !strcmp(attr_key(L, r), "pragma_gemm")) {
    gblock g;
    if (gemm_block(L, r, &g)) return 0;
    L->b[g.acc].role = R_ACC;
    if (!g.reset) L->b[g.inp].role = R_INP, L->b[g.wgt].role = R_WGT;
  }
  if (op == TL_IR_ATTR && !strcmp(attr_key(L, r), "pragma_alu")) {
    tl_ref s = tl_ir_kid(ir, r, 1);
    while (tl_ir_op(ir, s) == TL_IR_FOR || (tl_ir_op(ir, s) == TL_IR_IF && !tl_ir_kid(ir, s, 2)))
      s = tl_ir_kid(ir, s, tl_ir_op(ir, s) == TL_IR_FOR ? 3 : 1);
    if (tl_ir_op(ir, s) == TL_IR_STORE) {
      int dst = (int)tl_ir_node(ir, s)->imm.u, src = -1;
      tl_ref v = tl_ir_kid(ir, s, 0), in = inplace_operand(ir, v);
      if (in) src = (int)tl_ir_node(ir, in)->imm.u;
      if (src >= 0 && src != dst && tl_ir_buffer(ir, dst)->arg < 0) L->b[dst].alias = src;   /* in place */
      /* a second tensor operand is in the accumulator too */
      for (int i = 0; in && tl_ir_op(ir, v) != TL_IR_LOAD && i < tl_ir_nkids(ir, v); i++) {
        tl_ref o = strip_cast(ir, tl_ir_kid(ir, v, i));
        if (o != in && tl_ir_op(ir, o) == TL_IR_LOAD && L->nacc2 < 8)
          L->acc2[L->nacc2++] = (int)tl_ir_node(ir, o)->imm.u;
      }
    }
  }
  return 1;
}

static int alloc_visit(const tl_ir *ir, tl_ref r, void *ud) {
  lw *L = ud;
  if (tl_ir_op(ir, r) != TL_IR_ALLOC) return 1;
  int id = (int)tl_ir_node(ir, r)->imm.u;
  sbuf *b = &L->b[id];
  const tl_buffer *B = tl_ir_buffer(ir, id);
  if (b->alias >= 0) return 1;
  if (b->role == R_NONE) {
    fail(L, TL_E_UNSUPPORTED, "vta lower: buffer %s is neither a GEMM operand nor an ALU stage (no SRAM for it)", B->name);
    return 0;
  }
  int64_t n = 1, e;
  for (int d = 0; d < B->ndim; d++) {
    if (!tl_ir_is_int(ir, B->shape[d], &e)) {
      fail(L, TL_E_UNSUPPORTED, "vta lower: buffer %s has a symbolic shape", B->name);
      return 0;
    }
    n *= e;
  }
  int vec = vec_of(L->c, b->role);
  b->elems = (n + vec - 1) / vec;
  b->base = L->sram_per_thread[b->role];
  L->sram_per_thread[b->role] += b->elems;
  return 1;
}

/* A load whose data no later action of its thread reads before it is overwritten is
** dropped: a virtual thread past the end of its split still meets the copies its loops do
** not guard (the weights of a thread whose outputs are all guarded off). */
static void drop_dead_loads(lw *L) {
  int n = L->acts.n, m = 0;
  action *A = L->acts.v;
  for (int i = 0; i < n; i++) {
    int keep = 1;
    if (A[i].kind == A_LOAD && A[i].wr >= 0) {
      keep = 0;
      for (int j = i + 1; j < n && !keep; j++) {
        if (A[j].thread != A[i].thread) continue;
        int rd = 0;
        for (int r = 0; r < A[j].nrd; r++) rd |= A[j].rd[r] == A[i].wr;
        if (rd) keep = 1;
        else if (A[j].wr == A[i].wr) break;
      }
    }
    if (keep) A[m++] = A[i];
  }
  L->acts.n = m;
}

/* ---- sync: tokens from the hazards of each thread -------------------------------------- */

static int plan_tokens(lw *L, int nbuf) {
  int n = L->acts.n, nk = nbuf * MAXT;
  action *A = L->acts.v;
  int *first = tl_malloc(sizeof(int) * (size_t)(n + 1)), *last = tl_malloc(sizeof(int) * (size_t)(n + 1));
  int64_t *known = tl_malloc(sizeof(int64_t) * (size_t)(n + 1) * 4);
  int *lastw = tl_malloc(sizeof(int) * (size_t)nk * 4), *lastr = tl_malloc(sizeof(int) * (size_t)nk * 4);
  for (int i = 0; i < nk * 4; i++) lastw[i] = lastr[i] = -1;
  int prev[MAXT], phead[MAXT][4];
  for (int t = 0; t < MAXT; t++) {
    prev[t] = -1;
    for (int m = 0; m < 4; m++) phead[t][m] = -1;
  }
  /* groups: consecutive actions of one thread on one module */
  for (int i = 0; i < n; i++) {
    int p = prev[A[i].thread];
    first[i] = p >= 0 && A[p].module == A[i].module ? first[p] : i;
    prev[A[i].thread] = i;
    last[first[i]] = i;
  }
  int rc = TL_OK;
  for (int h = 0; h < n && !rc; h++) {
    int t = A[h].thread, B = A[h].module;
    if (first[h] == h) {
      int64_t *kn = &known[(size_t)h * 4];
      for (int m = 0; m < 4; m++) kn[m] = -1;
      if (phead[t][B] >= 0) memcpy(kn, &known[(size_t)phead[t][B] * 4], sizeof(int64_t) * 4);
      phead[t][B] = h;
      for (int Am = 1; Am <= 3; Am++) {
        if (Am == B) continue;
        int src = -1;
        for (int x = h; x <= last[h]; x++) {
          if (A[x].thread != t) continue;
          for (int j = -1; j < A[x].nrd; j++) {
            int key = j < 0 ? A[x].wr : A[x].rd[j];
            if (key < 0) continue;
            src = TL_MAX(src, lastw[Am * nk + key]);
            if (j < 0) src = TL_MAX(src, lastr[Am * nk + key]);
          }
        }
        if (src < 0 || src <= kn[Am]) continue;
        if ((Am == TL_VTA_STAGE_LOAD && B == TL_VTA_STAGE_STORE) ||
            (Am == TL_VTA_STAGE_STORE && B == TL_VTA_STAGE_LOAD)) {
          rc = fail(L, TL_E_UNSUPPORTED, "vta lower: %s", "a hazard between the load and store modules (no token queue between them)");
          break;
        }
        int gl = src;   /* pushed right after the last conflicting action */
        A[gl].pushes[A[gl].npush++] = h;
        const int64_t *ks = &known[(size_t)first[src] * 4];
        for (int m = 0; m < 4; m++) if (ks[m] > kn[m]) kn[m] = ks[m];
        kn[Am] = gl;
      }
      kn[B] = h;
    }
    if (A[h].wr >= 0) lastw[B * nk + A[h].wr] = h;
    for (int j = 0; j < A[h].nrd; j++) lastr[B * nk + A[h].rd[j]] = h;
  }
  /* Each token FIFO hands tokens out in push order. When a thread's token is still queued
  ** behind the one another action pops (a virtual thread that skipped statements), that
  ** action pops it too: it waits for an action that is already done in the serial order,
  ** and the token's own target, later on the same module, is ordered by that pop. */
  int *fifo = tl_malloc(sizeof(int) * (size_t)(n * 4 + 1));
  unsigned char *need = tl_malloc((size_t)n + 1);
  for (int from = 1; from <= 3 && !rc; from++)
    for (int to = 1; to <= 3 && !rc; to++) {
      if (from == to) continue;
      memset(need, 0, (size_t)n + 1);
      for (int i = 0; i < n; i++)
        if (A[i].module == from)
          for (int j = 0; j < A[i].npush; j++)
            if (A[A[i].pushes[j]].module == to) need[A[i].pushes[j]] = 1;
      int head = 0, tail = 0;
      for (int i = 0; i < n; i++) {
        if (A[i].module == to && need[i]) {
          int at = head;
          while (at < tail && fifo[at] != i) at++;
          if (at == tail) {
            rc = fail(L, TL_E_INTERNAL, "vta lower: %s", "a token popped before it is pushed");
            break;
          }
          for (int k = head; k < at; k++) need[fifo[k]] = 0;
          A[i].popn[from] += at - head + 1;
          head = at + 1;
        }
        if (A[i].module == from)
          for (int j = 0; j < A[i].npush; j++) {
            int h = A[i].pushes[j];
            if (A[h].module == to) fifo[tail++] = h;
          }
      }
      if (!rc && head != tail) rc = fail(L, TL_E_INTERNAL, "vta lower: %s", "unmatched dependence tokens");
    }
  free(fifo), free(need);
  free(first), free(last), free(known), free(lastw), free(lastr);
  return rc;
}

/* ---- the entry points ----------------------------------------------------------------- */

int tl_vta_lower_emit(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c, tl_lowered *f,
                      const uint32_t *arg_phys) {
  lw L;
  memset(&L, 0, sizeof L);
  L.ctx = ctx, L.q = q, L.c = c, L.ir = f->ir, L.arg_phys = arg_phys, L.nthr = 1;
  int nbuf = f->ir->bufs.n;
  L.b = tl_calloc((size_t)nbuf, sizeof *L.b);
  for (int i = 0; i < nbuf; i++) L.b[i].alias = -1;
  L.env = tl_calloc((size_t)f->ir->vars.n + 1, sizeof *L.env);
  tl_ir_visit(f->ir, f->body, plan_visit, &L);
  for (int i = 0; i < L.nacc2; i++) {
    int r = L.acc2[i];
    while (L.b[r].alias >= 0) r = L.b[r].alias;
    if (L.b[r].role == R_NONE && tl_ir_buffer(f->ir, r)->arg < 0) L.b[r].role = R_ACC;
  }
  if (!L.rc) tl_ir_visit(f->ir, f->body, alloc_visit, &L);
  static const char *const names[4] = {"", "input", "weight", "accumulator"};
  const int depth[4] = {0, c->inp_depth, c->wgt_depth, c->acc_depth};
  static const int order[3] = {R_ACC, R_INP, R_WGT};   /* as the config check reports */
  for (int o = 0; o < 3 && !L.rc; o++) {
    int r = order[o];
    if (L.sram_per_thread[r] * L.nthr > depth[r])
      L.rc = tl_err(ctx, TL_E_SCHED,
                    "vta lower: the buffers need %lld %s elements x %d threads, more than the %d "
                    "of the %s buffer",
                    (long long)L.sram_per_thread[r], names[r], L.nthr, depth[r], names[r]);
  }
  int active[MAXT] = {1, 1, 1, 1};
  if (!L.rc) walk(&L, f->body, active);
  if (!L.rc) drop_dead_loads(&L);
  for (int i = 0; i < L.acts.n && !L.rc; i++)
    if (L.acts.v[i].allpad)
      fail(&L, TL_E_UNSUPPORTED, "vta lower: copy of %s: a DMA that is all padding", L.acts.v[i].what);
  if (!L.rc) plan_tokens(&L, nbuf);
  for (int i = 0; i < L.acts.n && !L.rc; i++) {
    const action *a = &L.acts.v[i];
    for (int m = 1; m <= 3; m++)
      for (int j = 0; j < a->popn[m]; j++) tl_vta_dep_pop(q, m, a->module);
    if (a->kind == A_KERNEL) tl_vta_push_kernel(q, a->kernel);
    for (int d = a->dma0; d < a->dma0 + a->ndma; d++) {
      const dma *D = &L.dmas.v[d];
      if (a->kind == A_LOAD)
        tl_vta_load_2d(q, D->phys, D->dram, D->x, D->y, D->stride, D->xp0, D->yp0, D->xp1, D->yp1,
                       D->sram, D->mem);
      else
        tl_vta_store_2d(q, D->sram, D->phys, D->dram, D->x, D->y, D->stride);
    }
    for (int j = 0; j < a->npush; j++) tl_vta_dep_push(q, a->module, L.acts.v[a->pushes[j]].module);
  }
  for (int i = 0; i < L.kern.n; i++) free(L.kern.v[i].key);
  TL_VEC_FREE(L.kern);
  TL_VEC_FREE(L.memo);
  for (int i = 0; i < L.dplans.n; i++) free(L.dplans.v[i]);
  TL_VEC_FREE(L.dplans);
  TL_VEC_FREE(L.acts);
  TL_VEC_FREE(L.dmas);
  free(L.b);
  free(L.env);
  return L.rc ? L.rc : tl_vta_cmd_status(q);
}

/* The workload as the template's args. */
static char *args_of(const tl_vta_conv2d *w) {
  return tl_sprintf("[[\"TENSOR\",[%lld,%lld,%lld,%lld,%lld,%lld],\"int8\"],"
                    "[\"TENSOR\",[%lld,%lld,%lld,%lld,%lld,%lld],\"int8\"],[%lld,%lld],"
                    "[%lld,%lld,%lld,%lld],[1,1],\"NCHW%lldn%lldc\",\"int32\"]",
                    (long long)w->No, (long long)w->CIo, (long long)w->H, (long long)w->W,
                    (long long)w->b, (long long)w->B, (long long)w->COo, (long long)w->CIo,
                    (long long)w->KH, (long long)w->KW, (long long)w->B, (long long)w->B,
                    (long long)w->sh, (long long)w->sw, (long long)w->ph, (long long)w->pw,
                    (long long)w->ph, (long long)w->pw, (long long)w->b, (long long)w->B);
}

int tl_vta_conv2d_lower(tl_ctx *ctx, const tl_vta_conv2d *w, const tl_vta_knobs *k,
                        tl_lowered **out) {
  *out = NULL;
  char *args = args_of(w);
  tl_dag *dag = tl_dag_new();
  tl_sched *s = NULL;
  int in[2], o[1], no = 0, rc;
  int64_t ds[6] = {w->No, w->CIo, w->H, w->W, w->b, w->B},
          ks[6] = {w->COo, w->CIo, w->KH, w->KW, w->B, w->B};
  if ((rc = tl_dag_placeholder(ctx, dag, "data", 6, ds, TL_INT8, &in[0])) ||
      (rc = tl_dag_placeholder(ctx, dag, "kernel", 6, ks, TL_INT8, &in[1])) ||
      (rc = tl_atvm_template_compute_with(ctx, &tl_vta_conv2d_packed, args, dag, in, 2, o, 1, &no)) ||
      (rc = tl_sched_new(ctx, dag, o, 1, &s)) || (rc = tl_vta_conv2d_ir_schedule(ctx, k, s)))
    goto done;
  int st = tl_sched_num_stages(s) - 1;
  int targs[3], na = 0;
  for (int i = 0; i < st && na < 2; i++)
    if (tl_sched_stage_op_kind(s, i) == TL_DAG_PLACEHOLDER) targs[na++] = tl_sched_stage_tensor(s, i, 0);
  targs[na++] = tl_sched_stage_tensor(s, st, 0);
  rc = tl_lower(ctx, s, targs, na, "conv2d_packed_vta", out);
done:
  tl_sched_free(s);
  tl_dag_free(dag);
  free(args);
  return rc;
}

int tl_vta_conv2d_emit_ir(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c,
                          const tl_vta_conv2d *w, const tl_vta_knobs *k, uint32_t data,
                          uint32_t kernel, uint32_t out) {
  int rc = tl_vta_conv2d_check(ctx, c, w, k);
  if (rc) return rc;
  tl_lowered *f = NULL;
  if ((rc = tl_vta_conv2d_lower(ctx, w, k, &f))) return rc;
  uint32_t phys[3] = {data, kernel, out};
  rc = tl_vta_lower_emit(q, ctx, c, f, phys);
  tl_lowered_free(f);
  return rc;
}

/* ---- a network's fused group: the conv and its own ending ------------------------------- */

int tl_vta_conv2d_fused_lower(tl_ctx *ctx, const tl_vta_conv2d *w, const tl_vta_epilogue *e,
                              const tl_vta_knobs *k, tl_lowered **out) {
  *out = NULL;
  tl_dag *dag = tl_dag_new();
  tl_sched *s = NULL;
  int in[4], nin = 2, o, rc;
  int64_t ds[6] = {w->No, w->CIo, w->H, w->W, w->b, w->B},
          ks[6] = {w->COo, w->CIo, w->KH, w->KW, w->B, w->B},
          bs[5] = {w->COo, 1, 1, 1, w->B}, rs[6] = {w->No, w->COo, w->OH, w->OW, w->b, w->B};
  if (e->bias && w->b != 1) {
    rc = tl_err(ctx, TL_E_UNSUPPORTED, "conv2d_packed.vta: a bias add needs BATCH 1 (the ALU adds one accumulator vector per channel block; got batch block %lld)", (long long)w->b);
    goto done;
  }
  if ((rc = tl_dag_placeholder(ctx, dag, "data", 6, ds, TL_INT8, &in[0])) ||
      (rc = tl_dag_placeholder(ctx, dag, "kernel", 6, ks, TL_INT8, &in[1])) ||
      (e->bias && (rc = tl_dag_placeholder(ctx, dag, "bias", 5, bs, TL_INT32, &in[nin++]))) ||
      (e->res && (rc = tl_dag_placeholder(ctx, dag, "residual", 6, rs, e->res_bits == 32 ? TL_INT32 : TL_INT8, &in[nin++]))) ||
      (rc = tl_vta_conv2d_fused_compute(ctx, w, e, dag, in, &o)) ||
      (rc = tl_sched_new(ctx, dag, &o, 1, &s)) || (rc = tl_vta_conv2d_ir_schedule(ctx, k, s)))
    goto done;
  int st = tl_sched_num_stages(s) - 1;
  int targs[5], na = 0;
  static const char *const names[4] = {"data", "kernel", "bias", "residual"};
  for (int n = 0; n < 4; n++)
    for (int i = 0; i < st; i++)
      if (tl_sched_stage_op_kind(s, i) == TL_DAG_PLACEHOLDER && !strcmp(tl_sched_stage_name(s, i), names[n]))
        targs[na++] = tl_sched_stage_tensor(s, i, 0);
  if (na != nin) {
    rc = tl_err(ctx, TL_E_INTERNAL, "conv2d_packed.vta: %d of %d inputs found", na, nin);
    goto done;
  }
  targs[na++] = tl_sched_stage_tensor(s, st, 0);
  rc = tl_lower(ctx, s, targs, na, "conv2d_packed_fused_vta", out);
done:
  tl_sched_free(s);
  tl_dag_free(dag);
  return rc;
}

int tl_vta_conv2d_fused_emit(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c,
                             const tl_vta_conv2d *w, const tl_vta_epilogue *e,
                             const tl_vta_knobs *k, const uint32_t *phys) {
  int rc = tl_vta_conv2d_check(ctx, c, w, k);
  if (rc) return rc;
  tl_lowered *f = NULL;
  if ((rc = tl_vta_conv2d_fused_lower(ctx, w, e, k, &f))) return rc;
  rc = tl_vta_lower_emit(q, ctx, c, f, phys);
  tl_lowered_free(f);
  return rc;
}

static int32_t shift(int32_t x, int64_t k) {   /* k > 0 right, k < 0 left; C's int32 ops */
  return k >= 0 ? x >> k : (int32_t)((uint32_t)x << -k);
}

void tl_vta_conv2d_fused_reference(const tl_vta_config *c, const tl_vta_conv2d *w,
                                   const tl_vta_epilogue *e, const int8_t *data,
                                   const int8_t *kernel, const int32_t *bias, const void *res,
                                   int8_t *out) {
  (void)c;
  int64_t b = w->b, B = w->B;
  for (int64_t n = 0; n < w->No; n++)
    for (int64_t co = 0; co < w->COo; co++)
      for (int64_t i = 0; i < w->OH; i++)
        for (int64_t j = 0; j < w->OW; j++)
          for (int64_t bi = 0; bi < b; bi++)
            for (int64_t ci = 0; ci < B; ci++) {
              uint32_t acc = 0;
              for (int64_t ko = 0; ko < w->CIo; ko++)
                for (int64_t di = 0; di < w->KH; di++)
                  for (int64_t dj = 0; dj < w->KW; dj++) {
                    int64_t y = i * w->sh + di - w->ph, x = j * w->sw + dj - w->pw;
                    if (y < 0 || y >= w->H || x < 0 || x >= w->W) continue;
                    for (int64_t ki = 0; ki < B; ki++)
                      acc += (uint32_t)((int32_t)data[((((n * w->CIo + ko) * w->H + y) * w->W + x) * b + bi) * B + ki] *
                                        (int32_t)kernel[((((co * w->CIo + ko) * w->KH + di) * w->KW + dj) * B + ci) * B + ki]);
                  }
              int64_t o = ((((n * w->COo + co) * w->OH + i) * w->OW + j) * b + bi) * B + ci;
              int32_t v = (int32_t)acc;
              for (int q = 0; q < e->n; q++) {
                int64_t m = e->imm[q];
                switch (e->kind[q]) {
                case TL_VTA_EPI_ADD: v = (int32_t)((uint32_t)v + (uint32_t)m); break;
                case TL_VTA_EPI_SHR: v = shift(v, m); break;
                case TL_VTA_EPI_SHL: v = shift(v, -m); break;
                case TL_VTA_EPI_MIN: v = v < m ? v : (int32_t)m; break;
                case TL_VTA_EPI_MAX: v = v > m ? v : (int32_t)m; break;
                case TL_VTA_EPI_BIAS: v = (int32_t)((uint32_t)v + (uint32_t)bias[co * B + ci]); break;
                case TL_VTA_EPI_RES: {
                  int32_t r = e->res_bits == 32 ? ((const int32_t *)res)[o] : ((const int8_t *)res)[o];
                  v = (int32_t)((uint32_t)v + (uint32_t)shift(r, -m));
                  break;
                }
                }
              }
              out[o] = (int8_t)v;
            }
}
