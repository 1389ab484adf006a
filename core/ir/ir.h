/*
** ir.h -- the loop IR: expressions and statements in one hash-consed table.
**
** Every compiler stage after tensor expressions speaks this IR: lowering
** builds it, the simplifier and verifier rewrite and check it, feature
** extraction reads it, and the C and OpenCL code generators print it.
**
** Nodes live in a tl_ir (one per compute DAG or lowering job) and refer to
** each other by 32-bit index (tl_ref). Construction is hash-consed: building
** a node equal to an existing one (same op, type, immediate, operands)
** returns the existing ref, so structural equality is ref equality. Nodes
** are never mutated; passes rebuild what changes (tl_ir_mutate).
**
**   tl_ir.nodes: [0: none][1][2]...       node i = {op, nkids, type, kids, imm}
**   tl_ir.kids:  [..., a, b, c, ...]      operands of node i at kids[node.kids]
**
** Op kinds are declared once in TL_IRDEF below, which yields the enum, the
** names, the operand counts and flags.
*/
#ifndef TL_IR_H
#define TL_IR_H

#include "../base/base.h"

typedef uint32_t tl_ref;          /* node index; 0 = no node */
#define TL_NOREF ((tl_ref)0)

/* ---- types: DLPack-style code/bits/lanes ------------------------------- */

enum { TL_TC_INT = 0, TL_TC_UINT = 1, TL_TC_FLOAT = 2, TL_TC_HANDLE = 3, TL_TC_VOID = 15 };

typedef struct tl_type {
  uint8_t code;                   /* TL_TC_* */
  uint8_t bits;                   /* 1 (bool = uint1), 8, 16, 32, 64 */
  uint16_t lanes;                 /* 1 = scalar; > 1 = vector */
} tl_type;

static inline tl_type tl_type_make(int code, int bits, int lanes) {
  tl_type t = {(uint8_t)code, (uint8_t)bits, (uint16_t)lanes};
  return t;
}
#define TL_T_VOID tl_type_make(TL_TC_VOID, 0, 1)
#define TL_T_BOOL tl_type_make(TL_TC_UINT, 1, 1)
#define TL_T_I32 tl_type_make(TL_TC_INT, 32, 1)
#define TL_T_I64 tl_type_make(TL_TC_INT, 64, 1)
#define TL_T_F32 tl_type_make(TL_TC_FLOAT, 32, 1)
#define TL_T_F16 tl_type_make(TL_TC_FLOAT, 16, 1)
#define TL_T_INDEX TL_T_I32        /* loop variables and index arithmetic */

static inline int tl_type_eq(tl_type a, tl_type b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}
static inline tl_type tl_type_lanes(tl_type t, int lanes) {
  t.lanes = (uint16_t)lanes;
  return t;
}
static inline tl_type tl_type_scalar(tl_type t) { return tl_type_lanes(t, 1); }
static inline int tl_type_is_float(tl_type t) { return t.code == TL_TC_FLOAT; }
static inline int tl_type_is_int(tl_type t) { return t.code == TL_TC_INT || t.code == TL_TC_UINT; }
static inline int tl_type_is_bool(tl_type t) { return t.code == TL_TC_UINT && t.bits == 1; }
/* "float32", "int32x4", "bool", "void"; writes into buf (>= 24 bytes). */
const char *tl_type_str(tl_type t, char *buf);
/* Map between tl_type and the public TL_FLOAT32.. dtype enum. */
tl_type tl_type_from_dtype(int dtype);
int tl_type_to_dtype(tl_type t);   /* -1 if none */

/* ---- op table -------------------------------------------------------------
** _(NAME, nkids, flags): nkids -1 = variadic. Flags: E expression, S
** statement, C commutative, B binary arithmetic, P comparison (bool result).
** Immediate (imm) meaning per op is in the trailing comment.
*/
#define TL_IRF_E 1
#define TL_IRF_S 2
#define TL_IRF_C 4
#define TL_IRF_B 8
#define TL_IRF_P 16

#define TL_IRDEF(_)                                                          \
  /* leaves */                                                               \
  _(INT, 0, TL_IRF_E)          /* imm.i: value */                            \
  _(FLOAT, 0, TL_IRF_E)        /* imm.f: value */                            \
  _(VAR, 0, TL_IRF_E)          /* imm.u: var id (tl_ir_var) */               \
  /* arithmetic: operands and result share one type */                       \
  _(ADD, 2, TL_IRF_E | TL_IRF_B | TL_IRF_C)                                  \
  _(SUB, 2, TL_IRF_E | TL_IRF_B)                                             \
  _(MUL, 2, TL_IRF_E | TL_IRF_B | TL_IRF_C)                                  \
  _(DIV, 2, TL_IRF_E | TL_IRF_B)       /* float division only */             \
  _(FLOORDIV, 2, TL_IRF_E | TL_IRF_B)  /* integers: round toward -inf */     \
  _(FLOORMOD, 2, TL_IRF_E | TL_IRF_B)  /* sign of the divisor */             \
  _(TRUNCDIV, 2, TL_IRF_E | TL_IRF_B)  /* integers: C division */            \
  _(TRUNCMOD, 2, TL_IRF_E | TL_IRF_B)  /* C remainder */                     \
  _(MIN, 2, TL_IRF_E | TL_IRF_B | TL_IRF_C)                                  \
  _(MAX, 2, TL_IRF_E | TL_IRF_B | TL_IRF_C)                                  \
  _(SHL, 2, TL_IRF_E | TL_IRF_B)                                             \
  _(SHR, 2, TL_IRF_E | TL_IRF_B)       /* arithmetic for signed */           \
  _(BITAND, 2, TL_IRF_E | TL_IRF_B | TL_IRF_C)                               \
  _(BITOR, 2, TL_IRF_E | TL_IRF_B | TL_IRF_C)                                \
  _(BITXOR, 2, TL_IRF_E | TL_IRF_B | TL_IRF_C)                               \
  /* comparisons and logic: bool result (lanes of the operands) */           \
  _(EQ, 2, TL_IRF_E | TL_IRF_P | TL_IRF_C)                                   \
  _(NE, 2, TL_IRF_E | TL_IRF_P | TL_IRF_C)                                   \
  _(LT, 2, TL_IRF_E | TL_IRF_P)                                              \
  _(LE, 2, TL_IRF_E | TL_IRF_P)                                              \
  _(GT, 2, TL_IRF_E | TL_IRF_P)                                              \
  _(GE, 2, TL_IRF_E | TL_IRF_P)                                              \
  _(AND, 2, TL_IRF_E | TL_IRF_C)                                             \
  _(OR, 2, TL_IRF_E | TL_IRF_C)                                              \
  _(NOT, 1, TL_IRF_E)                                                        \
  /* others */                                                               \
  _(SELECT, 3, TL_IRF_E)       /* cond, a, b: both evaluated */              \
  _(IF_THEN_ELSE, 3, TL_IRF_E) /* cond, a, b: only the taken one */          \
  _(CAST, 1, TL_IRF_E)         /* to the node's type */                      \
  _(LOAD, -1, TL_IRF_E)        /* imm.u: buffer id; kids: indices */         \
  _(CALL, -1, TL_IRF_E)        /* imm.u: TL_INTRIN_*; kids: args */          \
  _(RAMP, 2, TL_IRF_E)         /* base, stride; lanes from the type */       \
  _(BROADCAST, 1, TL_IRF_E)    /* value; lanes from the type */              \
  _(LET, 3, TL_IRF_E)          /* var, value, body */                        \
  /* statements (type void) */                                               \
  _(FOR, 4, TL_IRF_S)          /* var, min, extent, body; imm.u: kind|tag<<8 */ \
  _(LET_STMT, 3, TL_IRF_S)     /* var, value, body */                        \
  _(IF, 3, TL_IRF_S)           /* cond, then, else (TL_NOREF: none) */       \
  _(STORE, -1, TL_IRF_S)       /* imm.u: buffer id; kids: value, indices */  \
  _(ALLOC, 1, TL_IRF_S)        /* imm.u: buffer id; kids: body */            \
  _(SEQ, -1, TL_IRF_S)         /* statements in order */                     \
  _(ATTR, 2, TL_IRF_S)         /* imm.u: key (string id); value, body */     \
  _(BARRIER, 0, TL_IRF_S)      /* imm.u: TL_SCOPE_* synchronized */          \
  _(EVAL, 1, TL_IRF_S)         /* evaluate an expression for effect */       \
  _(NOP, 0, TL_IRF_S)

enum {
#define TL_IRENUM(name, n, f) TL_IR_##name,
  TL_IRDEF(TL_IRENUM)
#undef TL_IRENUM
  TL_IR__MAX
};

extern const char *const tl_ir_opname[TL_IR__MAX];   /* "ADD" ... */
extern const int8_t tl_ir_opnkids[TL_IR__MAX];
extern const uint8_t tl_ir_opflags[TL_IR__MAX];

/* ---- loop kinds, thread tags, scopes, intrinsics -------------------------- */

enum { TL_FOR_SERIAL = 0, TL_FOR_PARALLEL, TL_FOR_VECTORIZED, TL_FOR_UNROLLED,
       TL_FOR_THREAD, TL_FOR_VTHREAD };
enum { TL_TAG_NONE = 0, TL_TAG_BLOCK_X, TL_TAG_BLOCK_Y, TL_TAG_BLOCK_Z,
       TL_TAG_THREAD_X, TL_TAG_THREAD_Y, TL_TAG_THREAD_Z, TL_TAG_VTHREAD };
extern const char *const tl_ir_tagname[8];   /* "blockIdx.x" ... "vthread" */
int tl_ir_tag_parse(const char *name);       /* -1 if unknown */

enum { TL_SCOPE_GLOBAL = 0, TL_SCOPE_LOCAL, TL_SCOPE_SHARED };
extern const char *const tl_ir_scopename[3]; /* "global", "local", "shared" */

#define TL_INTRINDEF(_)                                                      \
  _(EXP, "exp", 1) _(LOG, "log", 1) _(SQRT, "sqrt", 1) _(RSQRT, "rsqrt", 1)  \
  _(TANH, "tanh", 1) _(SIGMOID, "sigmoid", 1) _(POW, "pow", 2)               \
  _(FABS, "fabs", 1) _(FLOOR, "floor", 1) _(CEIL, "ceil", 1)                 \
  _(ROUND, "round", 1) _(ERF, "erf", 1)

enum {
#define TL_INTRINENUM(name, str, n) TL_INTRIN_##name,
  TL_INTRINDEF(TL_INTRINENUM)
#undef TL_INTRINENUM
  TL_INTRIN__MAX
};
extern const char *const tl_ir_intrinname[TL_INTRIN__MAX];
extern const int8_t tl_ir_intrinnargs[TL_INTRIN__MAX];

/* ---- nodes, vars, buffers -------------------------------------------------- */

typedef struct tl_node {
  uint16_t op;                    /* TL_IR_* */
  uint16_t nkids;                 /* operand count */
  tl_type type;                   /* void for statements */
  uint32_t kids;                  /* offset of operands in tl_ir.kids */
  union {
    int64_t i;
    double f;
    uint64_t u;
  } imm;
} tl_node;

typedef struct tl_var {
  const char *name;               /* arena string; not unique */
  tl_type type;
} tl_var;

/* A buffer: a tensor's storage, an intermediate or a kernel argument.
** shape holds ndim expressions (refs into the same tl_ir). After flattening,
** loads and stores carry one index in elements. */
typedef struct tl_buffer {
  const char *name;               /* arena string */
  tl_type dtype;                  /* element type (scalar) */
  int ndim;
  tl_ref *shape;                  /* ndim extents (arena) */
  int scope;                      /* TL_SCOPE_* */
  int arg;                        /* kernel argument position, or -1 */
} tl_buffer;

typedef struct tl_ir {
  TL_VEC(tl_node) nodes;          /* nodes.v[0] is the "none" slot */
  TL_VEC(tl_ref) kids;            /* operand lists */
  TL_VEC(tl_var) vars;
  TL_VEC(tl_buffer) bufs;
  TL_VEC(const char *) strs;      /* interned strings (arena) */
  uint32_t *htab;                 /* hash-cons table: node refs, 0 = empty */
  uint32_t hcap;                  /* power of two */
  uint32_t hcount;
  tl_arena arena;                 /* names, shapes */
} tl_ir;

tl_ir *tl_ir_new(void);
void tl_ir_free(tl_ir *ir);

static inline const tl_node *tl_ir_node(const tl_ir *ir, tl_ref r) { return &ir->nodes.v[r]; }
static inline int tl_ir_op(const tl_ir *ir, tl_ref r) { return ir->nodes.v[r].op; }
static inline tl_type tl_ir_type(const tl_ir *ir, tl_ref r) { return ir->nodes.v[r].type; }
static inline int tl_ir_nkids(const tl_ir *ir, tl_ref r) { return ir->nodes.v[r].nkids; }
static inline tl_ref tl_ir_kid(const tl_ir *ir, tl_ref r, int i) {
  return ir->kids.v[ir->nodes.v[r].kids + (uint32_t)i];
}
static inline const tl_ref *tl_ir_kids(const tl_ir *ir, tl_ref r) {
  return ir->kids.v + ir->nodes.v[r].kids;
}
static inline int tl_ir_is_stmt(const tl_ir *ir, tl_ref r) {
  return (tl_ir_opflags[ir->nodes.v[r].op] & TL_IRF_S) != 0;
}

/* The one generic constructor: hash-consed, no checks, no folding. */
tl_ref tl_ir_make(tl_ir *ir, int op, tl_type type, uint64_t imm, const tl_ref *kids, int nkids);

uint32_t tl_ir_intern(tl_ir *ir, const char *s);
static inline const char *tl_ir_str(const tl_ir *ir, uint32_t id) { return ir->strs.v[id]; }

/* A fresh variable (never equal to another); its VAR node. */
tl_ref tl_var_new(tl_ir *ir, const char *name, tl_type type);
static inline const tl_var *tl_ir_var(const tl_ir *ir, tl_ref var) {
  return &ir->vars.v[ir->nodes.v[var].imm.u];
}

/* A new buffer; returns its id. shape is copied. */
int tl_buffer_new(tl_ir *ir, const char *name, tl_type dtype, int ndim, const tl_ref *shape,
                  int scope);
static inline tl_buffer *tl_ir_buffer(const tl_ir *ir, int id) { return &ir->bufs.v[id]; }

/* ---- typed constructors ---------------------------------------------------
** These check operand types (tl_assert), broadcast immediates to the other
** operand's type, and fold when every operand is an immediate or the result
** is trivial (x + 0, x * 1, x * 0 for integers, min(x, x)). */

tl_ref tl_imm_int(tl_ir *ir, tl_type t, int64_t v);
tl_ref tl_imm_float(tl_ir *ir, tl_type t, double v);
static inline tl_ref tl_int(tl_ir *ir, int64_t v) { return tl_imm_int(ir, TL_T_INDEX, v); }
static inline tl_ref tl_bool(tl_ir *ir, int v) { return tl_imm_int(ir, TL_T_BOOL, v != 0); }
/* Immediate test: 1 and the value if r is an integer (float) immediate. */
int tl_ir_is_int(const tl_ir *ir, tl_ref r, int64_t *v);
int tl_ir_is_float(const tl_ir *ir, tl_ref r, double *v);

tl_ref tl_binary(tl_ir *ir, int op, tl_ref a, tl_ref b);
static inline tl_ref tl_add(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_ADD, a, b); }
static inline tl_ref tl_sub(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_SUB, a, b); }
static inline tl_ref tl_mul(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_MUL, a, b); }
static inline tl_ref tl_floordiv(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_FLOORDIV, a, b); }
static inline tl_ref tl_floormod(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_FLOORMOD, a, b); }
static inline tl_ref tl_min(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_MIN, a, b); }
static inline tl_ref tl_max(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_MAX, a, b); }
static inline tl_ref tl_lt(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_LT, a, b); }
static inline tl_ref tl_and(tl_ir *ir, tl_ref a, tl_ref b) { return tl_binary(ir, TL_IR_AND, a, b); }
tl_ref tl_not(tl_ir *ir, tl_ref a);
tl_ref tl_select(tl_ir *ir, tl_ref c, tl_ref a, tl_ref b);
tl_ref tl_if_then_else(tl_ir *ir, tl_ref c, tl_ref a, tl_ref b);
tl_ref tl_cast(tl_ir *ir, tl_type t, tl_ref a);
tl_ref tl_call(tl_ir *ir, int intrin, tl_type t, const tl_ref *args, int nargs);
tl_ref tl_load(tl_ir *ir, int buf, const tl_ref *idx, int nidx);   /* type: buffer dtype */
tl_ref tl_load_typed(tl_ir *ir, tl_type t, int buf, const tl_ref *idx, int nidx); /* vector loads */
tl_ref tl_ramp(tl_ir *ir, tl_ref base, tl_ref stride, int lanes);
tl_ref tl_broadcast(tl_ir *ir, tl_ref v, int lanes);
tl_ref tl_let(tl_ir *ir, tl_ref var, tl_ref value, tl_ref body);

tl_ref tl_for(tl_ir *ir, tl_ref var, tl_ref min, tl_ref extent, int kind, int tag, tl_ref body);
static inline int tl_for_kind(const tl_ir *ir, tl_ref f) { return (int)(ir->nodes.v[f].imm.u & 0xff); }
static inline int tl_for_tag(const tl_ir *ir, tl_ref f) { return (int)((ir->nodes.v[f].imm.u >> 8) & 0xff); }
tl_ref tl_let_stmt(tl_ir *ir, tl_ref var, tl_ref value, tl_ref body);
tl_ref tl_if(tl_ir *ir, tl_ref cond, tl_ref then_s, tl_ref else_s);
tl_ref tl_store(tl_ir *ir, int buf, tl_ref value, const tl_ref *idx, int nidx);
tl_ref tl_alloc(tl_ir *ir, int buf, tl_ref body);
tl_ref tl_seq(tl_ir *ir, const tl_ref *stmts, int n);   /* flattens nested SEQ, drops NOP */
tl_ref tl_attr(tl_ir *ir, const char *key, tl_ref value, tl_ref body);
tl_ref tl_barrier(tl_ir *ir, int scope);
tl_ref tl_eval(tl_ir *ir, tl_ref e);
tl_ref tl_nop(tl_ir *ir);

/* ---- traversal and rewriting ----------------------------------------------- */

/* Post-order rebuild. fn is called on each node after its operands were
** rebuilt (node = the rebuilt node); it returns a replacement or the node
** itself. Shared subtrees are visited once (memoized). */
typedef tl_ref (*tl_ir_rewrite_fn)(tl_ir *ir, tl_ref node, void *ud);
tl_ref tl_ir_mutate(tl_ir *ir, tl_ref root, tl_ir_rewrite_fn fn, void *ud);
/* Replace variables: from[i] -> to[i]. */
tl_ref tl_ir_substitute(tl_ir *ir, tl_ref root, const tl_ref *from, const tl_ref *to, int n);
/* Visit every node of root once in pre-order (stop descending if fn returns 0). */
typedef int (*tl_ir_visit_fn)(const tl_ir *ir, tl_ref node, void *ud);
void tl_ir_visit(const tl_ir *ir, tl_ref root, tl_ir_visit_fn fn, void *ud);
/* 1 if var occurs in root. */
int tl_ir_uses_var(const tl_ir *ir, tl_ref root, tl_ref var);

/* ---- printer (core/ir/print.c) --------------------------------------------------
** Readable text, one statement per line, two-space indent; expressions in
** infix with minimal parentheses. Malloc'd. */
char *tl_ir_print(const tl_ir *ir, tl_ref root);
void tl_ir_print_buf(const tl_ir *ir, tl_ref root, tl_buf *out);
/* One line for error messages: statements folded onto one line, cut to at
** most max bytes (ending in "..." when cut). Malloc'd. */
char *tl_ir_print_short(const tl_ir *ir, tl_ref root, size_t max);

/* ---- verifier (core/ir/verify.c) ------------------------------------------------
** Types agree, variables are defined before use (loop vars, lets, or listed
** free vars), buffers exist, statements and expressions sit where they
** belong. 0 or an error naming the offending node (printed). */
int tl_ir_verify(tl_ctx *ctx, const tl_ir *ir, tl_ref root, const tl_ref *free_vars, int nfree);

/* ---- ranges and simplification (core/ir/simplify.c, core/ir/bound.c) ---- */

/* A variable known to lie in [min, min + extent). */
typedef struct tl_range {
  tl_ref var;
  tl_ref min, extent;             /* expressions (often immediates) */
} tl_range;

typedef struct tl_rangemap {
  TL_VEC(tl_range) v;
} tl_rangemap;
void tl_rangemap_set(tl_rangemap *m, tl_ref var, tl_ref min, tl_ref extent);
const tl_range *tl_rangemap_get(const tl_rangemap *m, tl_ref var);
void tl_rangemap_free(tl_rangemap *m);

/* Simplify an expression or statement. Folds constants, puts affine integer
** expressions in a canonical sum-of-products form, applies div/mod rules
** using the ranges (from the map and from enclosing FOR loops inside
** statements), removes guards that the ranges prove, drops loops of extent 1
** and empty statements. ranges may be NULL. */
tl_ref tl_ir_simplify(tl_ir *ir, tl_ref root, const tl_rangemap *ranges);

/* Constant integer bounds of e, given the ranges: 1 if both found. */
int tl_ir_const_bound(tl_ir *ir, tl_ref e, const tl_rangemap *ranges, int64_t *lo, int64_t *hi);
/* The same, each side on its own: *lo = INT64_MIN and/or *hi = INT64_MAX
** where that side is unbounded (e.g. [0, INT64_MAX] for max(x, 0)). */
void tl_ir_const_bound_sides(tl_ir *ir, tl_ref e, const tl_rangemap *ranges, int64_t *lo, int64_t *hi);

/* Symbolic range of e when each var in relax takes every value of its range;
** other variables stay symbolic. Writes min and extent (simplified) and
** returns 1, or 0 if e's range is unknown (then *min and *extent are unset).
** Used by bound inference: the region of a producer that a consumer's loop
** nest touches. */
int tl_ir_eval_range(tl_ir *ir, tl_ref e, const tl_rangemap *relax, const tl_rangemap *known,
                     tl_ref *min, tl_ref *extent);

/* Prove a boolean expression true (1), false (0) or unknown (-1). */
int tl_ir_prove(tl_ir *ir, tl_ref cond, const tl_rangemap *ranges);

/* ---- lowered functions ------------------------------------------------------
** What lowering (core/te/lower.c) produces and the code generators read: one
** function as a statement tree of this IR in which every LOAD and STORE carries
** exactly one flattened element index, argument buffers (scope global,
** buffer->arg = k) stand for the DLTensor passed as argument k, ALLOC nodes
** introduce temporaries, and FOR loops are serial, parallel, vectorized,
** unrolled or bound to threads. */
typedef struct tl_lowered {
  tl_ir *ir;                      /* nodes, vars and buffers (passes add nodes) */
  tl_ref body;                    /* the statement tree */
  const char *name;               /* C identifier of the entry point */
  int nargs;
  int *arg_bufs;                  /* buffer ids, in argument order */
  tl_ref unpartitioned;           /* where loops were marked for partitioning: the body before
                                  ** (core/te/partition.h), which layout rewriting analyses
                                  ** (core/te/layout.c); else TL_NOREF */
} tl_lowered;

#endif
