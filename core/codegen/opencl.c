/*
** opencl.c -- the OpenCL C code generator: a lowered function printed as
** one OpenCL C 1.2 program of one or more __kernel functions, plus the
** description of how the host launches them (tl_ocl_code, runtime.h).
**
** Launch regions. Global temporaries (ALLOCs of global scope around the
** whole body, from root stages that are not arguments) become host-allocated
** buffers; the statements of the body under them (the root stages in order)
** are the launch regions, one __kernel each, run in order on an in-order
** queue (the kernel boundary is the global synchronization between stages).
**
** Thread binding. In a kernel, a FOR bound to blockIdx.x/y/z becomes
** `int v = get_group_id(d)` and one bound to threadIdx.x/y/z becomes
** `int v = get_local_id(d)`; the launch size of each tag is the largest
** extent bound to it in the region, and a loop with a smaller extent gets
** the guard `if (v < extent)` (a cooperative fetch bound to threadIdx.x with
** fewer iterations than the consumer's threads). grid = block extents,
** block = thread extents, global size = grid * block. Virtual threads
** (vthread) are unrolled serial loops. Parallel loops run serially inside a
** work-item.
**
** Memory. ALLOCs of "shared" scope become __local arrays declared at the
** top of the kernel (OpenCL wants them at kernel scope), BARRIER nodes
** (lowering puts them around shared-memory fills inside thread loops)
** become barrier(CLK_LOCAL_MEM_FENCE) (two in a row print as one); other
** ALLOCs inside a kernel are private arrays, accessed element by element so
** that unrolled loops keep them in registers. Argument and temporary
** buffers are __global restrict pointers.
**
** Vectors. tl_codegen_vectorize runs first (loops of 2, 4, 8 or 16 lanes;
** longer vectorized loops are unrolled instead); vector values are OpenCL
** vector types (float4, half8, int16): stride-1 loads and stores become
** vloadN/vstoreN, arithmetic and math built-ins act on whole vectors, and
** anything else (gathers, vector conditions, boolean vectors) is printed
** lane by lane as (floatN)(l0, l1, ...).
**
** A barrier under a condition on threadIdx (a guard of a non-divisible
** split, or a thread loop shorter than the launch) is refused: not every
** work-item would reach it.
**
** Unrolled loops get `#pragma unroll`, and so do serial loops inside an attr
** "pragma_auto_unroll_max_step" = N whose unrolled body holds at most N statements
** (the auto-scheduler's unroll pragma), and loops whose var indexes a private array (at
** most PRIVATE_UNROLL statements unrolled, PRIVATE_UNROLL_AUTO inside that pragma: its
** indices become constants, so the array stays in registers). Expressions are printed by cfamily.c
** (tl_cf_expr) from this file's table (ocl_lang); they are fully parenthesized,
** floordiv/floormod use shifts and masks for power-of-two divisors, plain
** / and % for provably non-negative operands, and helper functions
** otherwise. LET expressions are substituted. float16 enables cl_khr_fp16
** and float64 cl_khr_fp64 (the runtime checks that the device has them).
*/
#include "cfamily.h"

#include <math.h>
#include <stdio.h>

typedef struct ocg {
  tl_cf b;                        /* first: names, scopes, output (cfamily.h) */
  int *slot_of_buf;               /* buffer id -> slot, or -1 */
  /* the kernel being printed */
  int64_t launch[8];              /* per tag: launch extent (0 = unused) */
  tl_buf ldecl;                   /* __local declarations */
  int64_t local_bytes;
  uint8_t *tvar;                  /* var id -> bound to threadIdx */
  int after_barrier;              /* the last statement printed was a barrier */
  int divergent;                  /* inside a thread-dependent condition */
  int64_t unroll_max;             /* from pragma_auto_unroll_max_step; 0 = none */
  int auto_unroll;                /* inside a pragma_auto_unroll_max_step attribute */
} ocg;

/* P, PF, cg_err, line, var_bind, ...: the shorthands of cfamily.h */

/* ---- types ---------------------------------------------------------------------- */

static const char *scalar_name(tl_type t) {
  if (tl_type_is_bool(t)) return "bool";
  switch (t.code) {
  case TL_TC_FLOAT: return t.bits == 16 ? "half" : t.bits == 32 ? "float" : t.bits == 64 ? "double" : NULL;
  case TL_TC_INT: return t.bits == 8 ? "char" : t.bits == 16 ? "short" : t.bits == 32 ? "int" : t.bits == 64 ? "long" : NULL;
  case TL_TC_UINT: return t.bits == 8 ? "uchar" : t.bits == 16 ? "ushort" : t.bits == 32 ? "uint" : t.bits == 64 ? "ulong" : NULL;
  default: return NULL;
  }
}

static tl_type storage_type(tl_type t) {
  return tl_type_is_bool(t) ? tl_type_make(TL_TC_UINT, 8, t.lanes) : t;
}

static int lanes_ok(int l) { return l == 2 || l == 3 || l == 4 || l == 8 || l == 16; }

/* "float", "float4"; bool vectors have no OpenCL type (NULL). */
static const char *tname(ocg *c, tl_type t, char *buf) {
  const char *s = scalar_name(tl_type_scalar(t));
  if (t.code == TL_TC_FLOAT && t.bits == 16) c->b.fp16 = 1;
  if (t.code == TL_TC_FLOAT && t.bits == 64) c->b.fp64 = 1;
  if (!s || (t.lanes > 1 && (tl_type_is_bool(t) || !lanes_ok(t.lanes)))) {
    char b[32];
    cg_err(c, TL_E_UNSUPPORTED, "type %s has no OpenCL C equivalent", tl_type_str(t, b));
    strcpy(buf, "int");
    return buf;
  }
  if (t.lanes == 1) strcpy(buf, s);
  else snprintf(buf, 24, "%s%d", s, t.lanes);
  return buf;
}

/* ---- names -------------------------------------------------------------------------- */

static const char *const reserved_words[] = {
  "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
  "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict",
  "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
  "unsigned", "void", "volatile", "while", "bool", "true", "false", "half", "uchar", "ushort",
  "uint", "ulong", "kernel", "global", "local", "constant", "private", "read_only", "write_only",
  "image2d_t", "sampler_t", "event_t", "size_t", "ptrdiff_t", "intptr_t", "uintptr_t",
  "exp", "log", "sqrt", "rsqrt", "tanh", "pow", "fabs", "floor", "ceil", "rint", "round", "erf",
  "min", "max", "fmin", "fmax", "abs", "clamp", "mix", "step", "sign", "select", "dot", "cross",
  "length", "distance", "normalize", "barrier", "mem_fence", "get_local_id", "get_group_id",
  "get_global_id", "get_local_size", "get_num_groups", "get_global_size", "vload2", "vload4",
  "vload8", "vload16", "vstore2", "vstore4", "vstore8", "vstore16", "NAN", "INFINITY", "MAXFLOAT",
  "convert_int", "as_int", "as_float", "sin", "cos", "tan", "exp2", "log2", "mad", "fma", "hypot",
  "main", "NULL", "signbit", "isnan", "isinf", "any", "all", "shuffle", "prefetch", "printf",
  "tl_floordiv_i32", "tl_floormod_i32", "tl_floordiv_i64", "tl_floormod_i64"};

/* ---- expressions: OpenCL's own forms (the rest is tl_cf_expr) -------------------- */

/* A private (per work-item) array: accessed element by element, which keeps
** it in registers once loops are unrolled (vloadN on a private pointer can
** push it to local memory on some drivers). */
static int is_private(ocg *c, int b) {
  return b >= 0 && b < c->b.nbufs && c->slot_of_buf[b] < 0 &&
         tl_ir_buffer(c->b.ir, b)->scope != TL_SCOPE_SHARED;
}

/* Vector nodes printed as whole vectors (else lane by lane). */
static int h_vec_whole(tl_cf *b0, tl_ref e) {
  ocg *c = (ocg *)b0;
  const tl_ir *ir = c->b.ir;
  const tl_node *n = tl_ir_node(ir, e);
  if (tl_type_is_bool(n->type)) return 0;
  for (int i = 0; i < n->nkids; i++)
    if (n->op != TL_IR_LOAD && tl_type_is_bool(tl_ir_type(ir, tl_ir_kid(ir, e, i)))) return 0;
  switch (n->op) {
  case TL_IR_VAR:
  case TL_IR_RAMP:
  case TL_IR_BROADCAST:
  case TL_IR_ADD:
  case TL_IR_SUB:
  case TL_IR_MUL:
  case TL_IR_DIV:
  case TL_IR_MIN:
  case TL_IR_MAX:
  case TL_IR_BITAND:
  case TL_IR_BITOR:
  case TL_IR_BITXOR:
  case TL_IR_SHL:
  case TL_IR_SHR:
    return 1;
  case TL_IR_CAST:
    return !tl_type_is_bool(tl_ir_type(ir, tl_ir_kid(ir, e, 0)));
  case TL_IR_CALL:
    return tl_type_is_float(n->type);
  case TL_IR_LOAD: {
    int64_t k;
    tl_ref ix = tl_ir_kid(ir, e, 0);
    return n->nkids == 1 && !is_private(c, (int)n->imm.u) && tl_ir_op(ir, ix) == TL_IR_RAMP &&
           tl_ir_is_int(ir, tl_ir_kid(ir, ix, 1), &k) && k == 1;
  }
  default:
    return 0;
  }
}

/* min/max built-ins; floordiv/floormod through floor() on floats and the
** prelude's tl_floordiv_i32/i64 on signed integers. */
static void h_binop(tl_cf *b0, int op, tl_type t, tl_ref a, tl_ref b, int lane, int vec) {
  ocg *c = (ocg *)b0;
  tl_type et = tl_type_scalar(t);
  int div = op == TL_IR_FLOORDIV;
  (void)vec;
  if (op == TL_IR_MIN || op == TL_IR_MAX) {
    P(c, op == TL_IR_MIN ? "min(" : "max(");
    pe(c, a, lane);
    P(c, ", ");
    pe(c, b, lane);
    P(c, ")");
  } else if (tl_type_is_float(et) && div) {
    P(c, "floor((");
    pe(c, a, lane);
    P(c, ") / (");
    pe(c, b, lane);
    P(c, "))");
  } else if (tl_type_is_float(et)) {
    P(c, "((");
    pe(c, a, lane);
    P(c, ") - floor((");
    pe(c, a, lane);
    P(c, ") / (");
    pe(c, b, lane);
    P(c, ")) * (");
    pe(c, b, lane);
    P(c, "))");
  } else {
    PF(c, "tl_%s_%s(", div ? "floordiv" : "floormod", et.bits == 64 ? "i64" : "i32");
    if (et.bits < 32) P(c, "(int)");
    pe(c, a, lane);
    P(c, ", ");
    if (et.bits < 32) P(c, "(int)");
    pe(c, b, lane);
    P(c, ")");
  }
}

/* Intrinsics: the built-ins, on scalars or whole float vectors. */
static void h_call(tl_cf *b0, tl_ref e, int lane, int vec) {
  ocg *c = (ocg *)b0;
  const tl_ir *ir = c->b.ir;
  const tl_node *n = tl_ir_node(ir, e);
  int k = (int)n->imm.u;
  tl_type t = tl_type_scalar(n->type);
  if (k < 0 || k >= TL_INTRIN__MAX || n->nkids != tl_ir_intrinnargs[k]) {
    cg_err(c, TL_E_UNSUPPORTED, "malformed intrinsic call");
    return;
  }
  tl_ref a0 = tl_ir_kid(ir, e, 0), a1 = n->nkids > 1 ? tl_ir_kid(ir, e, 1) : 0;
  if (!tl_type_is_float(t)) {
    if (k == TL_INTRIN_FABS && t.code == TL_TC_INT) {
      char tb[32];
      PF(c, "((%s)abs(", tname(c, t, tb));
      pe(c, a0, lane);
      P(c, "))");
      return;
    }
    if (k == TL_INTRIN_FABS || k == TL_INTRIN_FLOOR || k == TL_INTRIN_CEIL || k == TL_INTRIN_ROUND) {
      P(c, "(");
      pe(c, a0, lane);
      P(c, ")");
      return;
    }
    char tb[32];
    cg_err(c, TL_E_UNSUPPORTED, "intrinsic %s on %s is not supported", tl_ir_intrinname[k],
           tl_type_str(t, tb));
    return;
  }
  static const char *const fn[TL_INTRIN__MAX] = {
    "exp", "log", "sqrt", "rsqrt", "tanh", NULL, "pow", "fabs", "floor", "ceil", "rint", "erf"};
  if (k == TL_INTRIN_SIGMOID) {
    char tb[32];
    tl_type vt = vec ? n->type : t;
    PF(c, "((%s)1.0f / ((%s)1.0f + exp(-(", tname(c, vt, tb), tb);
    pe(c, a0, lane);
    P(c, "))))");
    return;
  }
  PF(c, "%s(", fn[k]);
  pe(c, a0, lane);
  if (a1) {
    P(c, ", ");
    pe(c, a1, lane);
  }
  P(c, ")");
}

static void h_vec_cast(tl_cf *b0, tl_ref e) {
  ocg *c = (ocg *)b0;
  char tb[32];
  PF(c, "convert_%s(", tname(c, tl_ir_type(c->b.ir, e), tb));
  pe(c, tl_ir_kid(c->b.ir, e, 0), -1);
  P(c, ")");
}

/* A stride-1 ramp (h_vec_whole checked). */
static void h_vec_load(tl_cf *b0, tl_ref e, const char *bn, tl_ref ix) {
  ocg *c = (ocg *)b0;
  PF(c, "vload%d(0, %s + ", tl_ir_type(c->b.ir, e).lanes, bn);
  pe(c, tl_ir_kid(c->b.ir, ix, 0), -1);
  P(c, ")");
}

static void h_vec_ramp(tl_cf *b0, tl_ref e) {
  ocg *c = (ocg *)b0;
  tl_type t = tl_ir_type(c->b.ir, e);
  char tb[32];
  PF(c, "((%s)(", tname(c, t, tb));
  pe(c, tl_ir_kid(c->b.ir, e, 0), -1);
  PF(c, ") + (%s)(", tb);
  for (int i = 0; i < t.lanes; i++) PF(c, i ? ", %d" : "%d", i);
  P(c, ") * (");
  pe(c, tl_ir_kid(c->b.ir, e, 1), -1);
  P(c, "))");
}

static void h_vec_bcast(tl_cf *b0, tl_ref e) {
  ocg *c = (ocg *)b0;
  char tb[32];
  PF(c, "((%s)(", tname(c, tl_ir_type(c->b.ir, e), tb));
  pe(c, tl_ir_kid(c->b.ir, e, 0), -1);
  P(c, "))");
}

/* ---- statements -------------------------------------------------------------------------- */

static void ps(ocg *c, tl_ref s);

#define STEPS_INF ((int64_t)1 << 40)

/* Statements in s once every serial loop in it is unrolled (a thread-bound loop is one copy
** of its body; a loop without a constant extent or a barrier: STEPS_INF), for
** pragma_auto_unroll_max_step. */
static int64_t steps_unrolled(const tl_ir *ir, tl_ref s) {
  if (!s) return 0;
  int64_t ext, n = 0;
  switch (tl_ir_op(ir, s)) {
  case TL_IR_FOR:
    n = steps_unrolled(ir, tl_ir_kid(ir, s, 3));
    if (tl_for_kind(ir, s) == TL_FOR_THREAD) return n;
    if (!tl_ir_is_int(ir, tl_ir_kid(ir, s, 2), &ext)) return STEPS_INF;
    if (ext <= 0) return 0;
    return n >= STEPS_INF / ext ? STEPS_INF : n * ext;
  case TL_IR_SEQ:
    for (int i = 0; i < tl_ir_nkids(ir, s) && n < STEPS_INF; i++) n += steps_unrolled(ir, tl_ir_kid(ir, s, i));
    return n;
  case TL_IR_IF:
    return steps_unrolled(ir, tl_ir_kid(ir, s, 1)) + steps_unrolled(ir, tl_ir_kid(ir, s, 2));
  case TL_IR_LET_STMT:
    return steps_unrolled(ir, tl_ir_kid(ir, s, 2));
  case TL_IR_ATTR:
    return steps_unrolled(ir, tl_ir_kid(ir, s, 1));
  case TL_IR_ALLOC:
    return steps_unrolled(ir, tl_ir_kid(ir, s, 0));
  case TL_IR_NOP:
    return 0;
  case TL_IR_BARRIER:
    return STEPS_INF;
  default:
    return 1;
  }
}

/* Private arrays stay in registers only where every index is a constant: a loop whose var
** indexes one (a register tile's loops, its init and write-back) is unrolled when it unrolls
** into at most PRIVATE_UNROLL statements, or PRIVATE_UNROLL_AUTO inside a
** pragma_auto_unroll_max_step attribute (the auto-scheduler's GPU kernels, whose register
** tiles are sized for registers; pocl miscomputes some fully unrolled 16x16 tiles of
** hand-written schedules whose accumulators live across barriers). */
#define PRIVATE_UNROLL 64
#define PRIVATE_UNROLL_AUTO 4096

static int is_private(ocg *c, int b);

typedef struct { ocg *c; uint64_t var; int found; } private_use_st;

static int var_use_fn(const tl_ir *ir, tl_ref r, void *ud) {
  private_use_st *t = ud;
  const tl_node *n = tl_ir_node(ir, r);
  if (n->op == TL_IR_VAR && n->imm.u == t->var) t->found = 1;
  return !t->found;
}

static int private_use_fn(const tl_ir *ir, tl_ref r, void *ud) {
  private_use_st *t = ud;
  const tl_node *n = tl_ir_node(ir, r);
  if ((n->op == TL_IR_LOAD || n->op == TL_IR_STORE) && is_private(t->c, (int)n->imm.u))
    tl_ir_visit(ir, tl_ir_kid(ir, r, n->op == TL_IR_LOAD ? 0 : 1), var_use_fn, ud);
  return !t->found;
}

static void print_for(ocg *c, tl_ref loop) {
  tl_ir *ir = c->b.ir;
  int kind = tl_for_kind(ir, loop), tag = tl_for_tag(ir, loop);
  tl_ref var = tl_ir_kid(ir, loop, 0), min = tl_ir_kid(ir, loop, 1), ext = tl_ir_kid(ir, loop, 2);
  tl_ref body = tl_ir_kid(ir, loop, 3);
  const char *vname0 = tl_ir_var(ir, var)->name;
  int64_t kmin = 0, kext = 0;
  int cmin = tl_ir_is_int(ir, min, &kmin), cext = tl_ir_is_int(ir, ext, &kext);
  if (kind == TL_FOR_THREAD) {
    if (tag < TL_TAG_BLOCK_X || tag > TL_TAG_THREAD_Z || !cext || !cmin || kmin != 0) {
      cg_err(c, TL_E_UNSUPPORTED, "thread loop '%s' needs a tag and a constant range from 0", vname0);
      return;
    }
    int isblock = tag <= TL_TAG_BLOCK_Z;
    int dim = isblock ? tag - TL_TAG_BLOCK_X : tag - TL_TAG_THREAD_X;
    line(c, "{");
    c->b.ind++;
    const char *vn = var_bind(c, var, 1);
    line(c, "int %s = (int)%s(%d);", vn, isblock ? "get_group_id" : "get_local_id", dim);
    if (!isblock) c->tvar[var_id(c, var)] = 1;
    if (kext < c->launch[tag]) {
      line(c, "if (%s < %lld) {", vn, (long long)kext);
      c->divergent += !isblock;
      print_body_block(c, body);
      c->divergent -= !isblock;
      line(c, "}");
    } else {
      ps(c, body);
    }
    var_unbind(c, var);
    c->b.ind--;
    line(c, "}");
    return;
  }
  if (!tl_cf_loop_var_ok(&c->b, loop)) return;
  if ((kind == TL_FOR_UNROLLED || kind == TL_FOR_VTHREAD || kind == TL_FOR_VECTORIZED) && cext &&
      kext > 1)
    line(c, "#pragma unroll");
  else if (kind == TL_FOR_SERIAL && cext && kext > 1) {
    int64_t steps = steps_unrolled(ir, loop);
    private_use_st pu = {c, tl_ir_node(ir, var)->imm.u, 0};
    if (steps <= (c->auto_unroll ? PRIVATE_UNROLL_AUTO : PRIVATE_UNROLL))
      tl_ir_visit(ir, body, private_use_fn, &pu);
    if ((c->unroll_max > 0 && steps <= c->unroll_max) || pu.found)
      line(c, "#pragma unroll");   /* under pragma_auto_unroll_max_step, or a register tile */
  }
  tl_cf_for(&c->b, loop);
}

static void print_store(ocg *c, tl_ref s) {
  tl_cf_store st0;
  if (!tl_cf_store_begin(&c->b, s, &st0)) return;
  const tl_ir *ir = c->b.ir;
  const char *bn = st0.bn;
  int b = st0.b;
  tl_ref val = st0.val, ix = st0.ix;
  tl_type vt = st0.vt;
  int isbool = tl_type_is_bool(st0.bt);
  int64_t k = 0;
  if (!isbool && !is_private(c, b) && tl_ir_op(ir, ix) == TL_IR_RAMP &&
      tl_ir_is_int(ir, tl_ir_kid(ir, ix, 1), &k) && k == 1 && lanes_ok(vt.lanes)) {
    indent(c);
    PF(c, "vstore%d(", vt.lanes);
    pe(c, val, -1);
    PF(c, ", 0, %s + ", bn);
    pe(c, tl_ir_kid(ir, ix, 0), -1);
    P(c, ");\n");
    return;
  }
  /* scatter, or a private array: lane by lane (the value once, in a vector) */
  if (h_vec_whole(&c->b, val) && tl_ir_op(ir, val) != TL_IR_BROADCAST) {
    char tb[24];
    line(c, "{");
    c->b.ind++;
    indent(c);
    PF(c, "%s tl_v = ", tname(c, vt, tb));
    pe(c, val, -1);
    P(c, ";\n");
    for (int i = 0; i < vt.lanes; i++) {
      indent(c);
      PF(c, "%s[", bn);
      pe(c, ix, i);
      PF(c, "] = tl_v.s%x;\n", i);
    }
    c->b.ind--;
    line(c, "}");
    return;
  }
  for (int i = 0; i < vt.lanes; i++) {
    indent(c);
    PF(c, "%s[", bn);
    pe(c, ix, i);
    P(c, "] = ");
    if (isbool) P(c, "(uchar)(");
    pe(c, val, i);
    P(c, isbool ? ");\n" : ";\n");
  }
}

static void print_alloc(ocg *c, tl_ref s) {
  tl_ir *ir = c->b.ir;
  int b = (int)tl_ir_node(ir, s)->imm.u;
  if (b < 0 || b >= c->b.nbufs) {
    cg_err(c, TL_E_ARG, "allocation of buffer id %d, which does not exist", b);
    return;
  }
  const tl_buffer *buf = tl_ir_buffer(ir, b);
  if (c->b.bscope[b]) {
    cg_err(c, TL_E_ARG, "buffer '%s' is allocated while already in scope", buf->name);
    return;
  }
  int64_t n = 1;
  for (int d = 0; d < buf->ndim; d++) {
    int64_t k;
    if (!tl_ir_is_int(ir, buf->shape[d], &k)) {
      cg_err(c, TL_E_UNSUPPORTED, "buffer '%s' has no constant size", buf->name);
      return;
    }
    n *= k < 1 ? 1 : k;
  }
  tl_type st = storage_type(buf->dtype);
  char tb[24];
  const char *et = tname(c, st, tb);
  buf_bind(c, b);
  const char *bn = c->b.bname[b];
  if (buf->scope == TL_SCOPE_SHARED) {
    tl_buf_printf(&c->ldecl, "  __local %s %s[%lld];\n", et, bn, (long long)n);
    c->local_bytes += n * (st.bits / 8 ? st.bits / 8 : 1);
    ps(c, tl_ir_kid(ir, s, 0));
  } else {
    line(c, "{");
    c->b.ind++;
    line(c, "%s %s[%lld];", et, bn, (long long)n);
    ps(c, tl_ir_kid(ir, s, 0));
    c->b.ind--;
    line(c, "}");
  }
  c->b.bscope[b]--;
}

typedef struct {
  ocg *c;
  int found;
} thread_use_st;

static int thread_use_fn(const tl_ir *ir, tl_ref r, void *ud) {
  thread_use_st *t = ud;
  const tl_node *n = tl_ir_node(ir, r);
  if (n->op == TL_IR_VAR && t->c->tvar[n->imm.u] && t->c->b.vbound[n->imm.u]) t->found = 1;
  return !t->found;
}

static void ps_inner(ocg *c, tl_ref s);

/* A statement; after_barrier tracks barriers that follow each other in the
** text (a second one is dropped): control flow in between resets it. */
static void ps(ocg *c, tl_ref s) {
  if (c->b.err || !s) return;
  int op = tl_ir_op(c->b.ir, s);
  int transparent = op == TL_IR_SEQ || op == TL_IR_BARRIER || op == TL_IR_NOP ||
                    op == TL_IR_ATTR || op == TL_IR_ALLOC;
  if (!transparent) c->after_barrier = 0;
  ps_inner(c, s);
  if (!transparent) c->after_barrier = 0;
}

static void ps_inner(ocg *c, tl_ref s) {
  tl_ir *ir = c->b.ir;
  int op = tl_ir_op(ir, s);
  switch (op) {
  case TL_IR_FOR:
    print_for(c, s);
    return;
  case TL_IR_IF: {
    thread_use_st tu = {c, 0};
    tl_ir_visit(ir, tl_ir_kid(ir, s, 0), thread_use_fn, &tu);
    c->divergent += tu.found;
    tl_cf_stmt(&c->b, s);
    c->divergent -= tu.found;
    return;
  }
  case TL_IR_STORE:
    print_store(c, s);
    return;
  case TL_IR_ALLOC:
    print_alloc(c, s);
    return;
  case TL_IR_ATTR: {
    const char *key = tl_ir_str(ir, (uint32_t)tl_ir_node(ir, s)->imm.u);
    int64_t v;
    if (strcmp(key, "pragma_auto_unroll_max_step") == 0 && tl_ir_is_int(ir, tl_ir_kid(ir, s, 0), &v)) {
      int64_t saved = c->unroll_max;
      c->unroll_max = v;
      c->auto_unroll++;
      ps(c, tl_ir_kid(ir, s, 1));
      c->auto_unroll--;
      c->unroll_max = saved;
      return;
    }
    ps(c, tl_ir_kid(ir, s, 1));
    return;
  }
  case TL_IR_BARRIER:
    if (c->divergent) {
      cg_err(c, TL_E_UNSUPPORTED, "barrier inside a condition on threadIdx (not every work-item "
             "would reach it); make the thread loops around the shared-memory fill divide evenly");
      return;
    }
    if (!c->after_barrier) line(c, "barrier(CLK_LOCAL_MEM_FENCE);");   /* two in a row: one */
    c->after_barrier = 1;
    return;
  default:
    tl_cf_stmt(&c->b, s);   /* SEQ, LET_STMT, IF, EVAL, NOP, errors */
    return;
  }
}

/* ---- regions ---------------------------------------------------------------------------------- */

typedef struct {
  ocg *c;
  uint8_t *used;                  /* per buffer id */
} scan_st;

static int scan_fn(const tl_ir *ir, tl_ref r, void *ud) {
  scan_st *s = ud;
  ocg *c = s->c;
  const tl_node *n = tl_ir_node(ir, r);
  if (n->op == TL_IR_LOAD || n->op == TL_IR_STORE) {
    if (n->imm.u < (uint64_t)c->b.nbufs) s->used[n->imm.u] = 1;
  } else if (n->op == TL_IR_FOR && tl_for_kind(ir, r) == TL_FOR_THREAD) {
    int tag = tl_for_tag(ir, r);
    int64_t e;
    if (tag > 0 && tag < 8 && tl_ir_is_int(ir, tl_ir_kid(ir, r, 2), &e) && e > c->launch[tag])
      c->launch[tag] = e;
  }
  return 1;
}

/* Vectorized loops OpenCL has no vector type for are unrolled instead. */
static tl_ref fix_vec_fn(tl_ir *ir, tl_ref node, void *ud) {
  if (tl_ir_op(ir, node) != TL_IR_FOR || tl_for_kind(ir, node) != TL_FOR_VECTORIZED) return node;
  int64_t e;
  if (tl_ir_is_int(ir, tl_ir_kid(ir, node, 2), &e) && (e == 2 || e == 4 || e == 8 || e == 16))
    return node;
  return tl_for(ir, tl_ir_kid(ir, node, 0), tl_ir_kid(ir, node, 1), tl_ir_kid(ir, node, 2),
                TL_FOR_UNROLLED, TL_TAG_NONE, tl_ir_kid(ir, node, 3));
}

static int valid_ident(const char *s) {
  if (!s || !*s || strlen(s) > 200) return 0;
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || (*p >= '0' && *p <= '9')))
      return 0;
  return 1;
}

static const char prelude[] =
  "int tl_floordiv_i32(int a, int b) {\n"
  "  int q = a / b, r = a % b;\n"
  "  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;\n"
  "}\n"
  "int tl_floormod_i32(int a, int b) {\n"
  "  int r = a % b;\n"
  "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
  "}\n"
  "long tl_floordiv_i64(long a, long b) {\n"
  "  long q = a / b, r = a % b;\n"
  "  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;\n"
  "}\n"
  "long tl_floormod_i64(long a, long b) {\n"
  "  long r = a % b;\n"
  "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n"
  "}\n\n";

/* ---- what OpenCL C says differently (cfamily.h) ---------------------------------- */

static int h_reserved_prefix(const char *b) {
  return strncmp(b, "tl_", 3) == 0 || strncmp(b, "get_", 4) == 0 ||
         strncmp(b, "convert_", 8) == 0 || strncmp(b, "as_", 3) == 0;
}
static void h_ps(tl_cf *b, tl_ref s) { ps((ocg *)b, s); }
static const char *h_decl_type(tl_cf *b, tl_type t, char *buf) { return tname((ocg *)b, t, buf); }

static const tl_cf_lang ocl_lang = {
  .who = "codegen_opencl",
  .unbound_hint = "symbolic shapes are not supported by the OpenCL backend",
  .reserved = reserved_words,
  .nreserved = (int)TL_ARRAY_SIZE(reserved_words),
  .reserved_prefix = h_reserved_prefix,
  .decl_type = h_decl_type,
  .bool_lit = {"false", "true"},
  .int64_fmt = "(%lldL)",
  .int64_min = "(-9223372036854775807L - 1L)",
  .uint64_fmt = "%lluUL",
  .half_name = "half",
  .paren_f64 = 1,
  .lane_fmt = "%s.s%x",
  .vec_open = "(",
  .vec_close = ")",
  .bool_lane = "",             /* no bool vectors (tname refuses them) */
  .bool_load_ne0 = 1,
  .bool_store_cast = "(uchar)(",
  .vec_whole = h_vec_whole,    /* the rest lane by lane */
  .vec_ramp = h_vec_ramp,
  .vec_bcast = h_vec_bcast,
  .vec_load = h_vec_load,
  .vec_cast = h_vec_cast,
  .vec_select = NULL,
  .vec_cmp = NULL,
  .binop = h_binop,
  .call = h_call,
  .let = NULL,                 /* substituted */
  .ps = h_ps,
};

int tl_codegen_opencl(tl_ctx *ctx, const tl_lowered *f, tl_ocl_code *out) {
  memset(out, 0, sizeof *out);
  if (!f || !f->ir) return tl_err(ctx, TL_E_ARG, "codegen_opencl: NULL function");
  if (!valid_ident(f->name) || strncmp(f->name, "tl_", 3) == 0)
    return tl_err(ctx, TL_E_ARG, "codegen_opencl: kernel name '%s' is not an identifier (or uses "
                  "the reserved prefix tl_)", f->name ? f->name : "(null)");
  if (f->nargs < 0 || (f->nargs > 0 && !f->arg_bufs))
    return tl_err(ctx, TL_E_ARG, "codegen_opencl: %s: bad argument list", f->name);
  if (!f->body || f->body >= (tl_ref)f->ir->nodes.n || !tl_ir_is_stmt(f->ir, f->body))
    return tl_err(ctx, TL_E_ARG, "codegen_opencl: %s: the body is not a statement", f->name);
  tl_ir *ir = f->ir;
  tl_ref body = tl_ir_mutate(ir, f->body, fix_vec_fn, NULL);
  body = tl_codegen_vectorize(ir, body);

  ocg c;
  memset(&c, 0, sizeof c);
  tl_cf_init(&c.b, &ocl_lang, ctx, f);
  c.tvar = tl_calloc((size_t)c.b.nvars + 1, 1);
  c.slot_of_buf = tl_malloc(sizeof(int) * ((size_t)c.b.nbufs + 1));
  for (int b = 0; b < c.b.nbufs; b++) c.slot_of_buf[b] = -1;

  /* arguments */
  out->nargs = f->nargs;
  out->arg_dtype = tl_calloc((size_t)f->nargs + 1, sizeof(int));
  out->arg_ndim = tl_calloc((size_t)f->nargs + 1, sizeof(int));
  out->arg_shape = tl_calloc((size_t)f->nargs + 1, sizeof(int64_t *));
  for (int k = 0; k < f->nargs && !c.b.err; k++) {
    int b = f->arg_bufs[k];
    if (b < 0 || b >= c.b.nbufs) {
      cg_err(&c, TL_E_ARG, "argument %d: buffer id %d does not exist", k, b);
      break;
    }
    if (c.slot_of_buf[b] >= 0) {
      cg_err(&c, TL_E_ARG, "buffer '%s' is passed as two arguments", tl_ir_buffer(ir, b)->name);
      break;
    }
    const tl_buffer *buf = tl_ir_buffer(ir, b);
    c.slot_of_buf[b] = k;
    out->arg_dtype[k] = tl_type_to_dtype(buf->dtype);
    if (out->arg_dtype[k] < 0) {
      char tb[32];
      cg_err(&c, TL_E_DTYPE, "argument %d (%s): dtype %s cannot be a kernel argument", k, buf->name,
             tl_type_str(buf->dtype, tb));
      break;
    }
    out->arg_ndim[k] = buf->ndim;
    out->arg_shape[k] = tl_calloc((size_t)buf->ndim + 1, sizeof(int64_t));
    for (int d = 0; d < buf->ndim; d++)
      if (!tl_ir_is_int(ir, buf->shape[d], &out->arg_shape[k][d])) {
        cg_err(&c, TL_E_UNSUPPORTED, "argument %d (%s) has a symbolic shape", k, buf->name);
        break;
      }
    buf_bind(&c, b);
  }
  /* global temporaries */
  TL_VEC(int64_t) temps = {0};
  while (!c.b.err && tl_ir_op(ir, body) == TL_IR_ALLOC) {
    int b = (int)tl_ir_node(ir, body)->imm.u;
    const tl_buffer *buf = tl_ir_buffer(ir, b);
    if (buf->scope != TL_SCOPE_GLOBAL) break;
    int64_t n = 1;
    for (int d = 0; d < buf->ndim; d++) {
      int64_t k;
      if (!tl_ir_is_int(ir, buf->shape[d], &k)) {
        cg_err(&c, TL_E_UNSUPPORTED, "buffer '%s' has no constant size", buf->name);
        break;
      }
      n *= k < 1 ? 1 : k;
    }
    tl_type st = storage_type(buf->dtype);
    int64_t bytes = n * (st.bits / 8 ? st.bits / 8 : 1);
    c.slot_of_buf[b] = f->nargs + temps.n;
    TL_VEC_PUSH(temps, bytes);
    buf_bind(&c, b);
    body = tl_ir_kid(ir, body, 0);
  }
  /* regions */
  TL_VEC(tl_ref) regions = {0};
  if (tl_ir_op(ir, body) == TL_IR_SEQ)
    for (int i = 0; i < tl_ir_nkids(ir, body); i++) TL_VEC_PUSH(regions, tl_ir_kid(ir, body, i));
  else if (tl_ir_op(ir, body) != TL_IR_NOP)
    TL_VEC_PUSH(regions, body);

  tl_buf kernels = {0};
  TL_VEC(tl_ocl_kinfo) kinfo = {0};
  uint8_t *used = tl_calloc((size_t)c.b.nbufs + 1, 1);
  for (int r = 0; r < regions.n && !c.b.err; r++) {
    memset(c.launch, 0, sizeof c.launch);
    memset(used, 0, (size_t)c.b.nbufs + 1);
    scan_st ss = {&c, used};
    tl_ir_visit(ir, regions.v[r], scan_fn, &ss);
    tl_ocl_kinfo ki;
    memset(&ki, 0, sizeof ki);
    ki.name = tl_sprintf("%s_kernel%d", f->name, r);
    TL_VEC_PUSH(c.b.names, tl_strdup(ki.name));
    for (int d = 0; d < 3; d++) {
      ki.grid[d] = c.launch[TL_TAG_BLOCK_X + d] ? c.launch[TL_TAG_BLOCK_X + d] : 1;
      ki.block[d] = c.launch[TL_TAG_THREAD_X + d] ? c.launch[TL_TAG_THREAD_X + d] : 1;
    }
    TL_VEC(int) slots = {0};
    for (int s = 0; s < f->nargs + temps.n; s++)
      for (int b = 0; b < c.b.nbufs; b++)
        if (used[b] && c.slot_of_buf[b] == s) TL_VEC_PUSH(slots, s);
    ki.slots = slots.v;
    ki.nslots = slots.n;
    tl_buf kb = {0};
    tl_buf_free(&c.ldecl);
    c.local_bytes = 0;
    c.b.o = &kb;
    c.b.ind = 1;
    ps(&c, regions.v[r]);
    ki.local_bytes = c.local_bytes;
    tl_buf_printf(&kernels, "__kernel __attribute__((reqd_work_group_size(%lld, %lld, %lld)))\nvoid %s(",
                  (long long)ki.block[0], (long long)ki.block[1], (long long)ki.block[2], ki.name);
    for (int s = 0; s < ki.nslots; s++) {
      int b = -1;
      for (int bb = 0; bb < c.b.nbufs && b < 0; bb++)
        if (used[bb] && c.slot_of_buf[bb] == ki.slots[s]) b = bb;
      char tb[24];
      const char *et = tname(&c, storage_type(tl_ir_buffer(ir, b)->dtype), tb);
      tl_buf_printf(&kernels, "%s__global %s *restrict %s", s ? ", " : "", et, c.b.bname[b]);
    }
    tl_buf_puts(&kernels, ") {\n");
    if (c.ldecl.n) tl_buf_putn(&kernels, c.ldecl.s, c.ldecl.n);
    if (kb.n) tl_buf_putn(&kernels, kb.s, kb.n);
    tl_buf_puts(&kernels, "}\n\n");
    tl_buf_free(&kb);
    TL_VEC_PUSH(kinfo, ki);
  }
  free(used);
  tl_buf_free(&c.ldecl);
  int rc = c.b.err;
  if (!rc) {
    tl_buf src = {0};
    tl_buf_printf(&src, "/* %s: generated by tunelua's OpenCL backend: %d kernel%s */\n", f->name,
                  kinfo.n, kinfo.n == 1 ? "" : "s");
    if (c.b.fp16) tl_buf_puts(&src, "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n");
    if (c.b.fp64) tl_buf_puts(&src, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n");
    tl_buf_puts(&src, prelude);
    if (kernels.n) tl_buf_putn(&src, kernels.s, kernels.n);
    out->source = tl_buf_take(&src);
    out->nkernels = kinfo.n;
    out->kernels = kinfo.v;
    out->ntemps = temps.n;
    out->temp_bytes = temps.v;
    out->fp16 = c.b.fp16;
    out->fp64 = c.b.fp64;
  } else {
    for (int i = 0; i < kinfo.n; i++) {
      free(kinfo.v[i].name);
      free(kinfo.v[i].slots);
    }
    TL_VEC_FREE(kinfo);
    TL_VEC_FREE(temps);
    out->kernels = NULL;
    out->nkernels = 0;
    tl_ocl_code_free(out);
  }
  tl_buf_free(&kernels);
  TL_VEC_FREE(regions);
  tl_cf_free(&c.b);
  free(c.tvar);
  free(c.slot_of_buf);
  return rc;
}
