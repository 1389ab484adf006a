/*
** c.c -- the C code generator: a lowered function printed as one
** self-contained C11 translation unit (GNU dialect: vector extensions,
** statement expressions, the cleanup attribute, _Float16).
**
** Layout of the generated file, in this order:
**   prelude      includes, a DLTensor-compatible struct (tlc_tensor, same
**                layout as DLPack's DLTensor), the error buffer and the
**                argument-check helpers; the weak declarations of
**                tl_pool_global/tl_pool_for when there are parallel loops
**   helpers      vector typedefs (float32x8 ...) and small static inline
**                functions (broadcast, ramp, select, vector load/store,
**                gather/scatter, floordiv, min/max, per-lane intrinsics),
**                each emitted once, on demand, in a fixed sorted order
**   outlined     one closure struct and one static function per parallel
**                loop (tlc_par0, tlc_par1, ...)
**   entry        int32_t NAME(void **args, int32_t nargs) and
**                const char *NAME_error(void)
**
** The entry checks nargs and, for each argument, NULL, device (CPU), dtype,
** ndim, constant extents and compactness, binds symbolic extents (a shape
** entry that is a variable defines it) and checks derived ones; a mismatch
** returns the tunelua error code (TL_E_ARG/DTYPE/SHAPE) and leaves a
** message naming the argument and the expected dtype and shape, read back
** through NAME_error. Nothing is dereferenced before the checks pass.
**
** Expressions are printed by cfamily.c (tl_cf_expr) from this file's table
** (c_lang, at the end): every operation is fully parenthesized. Index math uses the
** IR's types (int32 for TL_T_INDEX). floordiv/floormod become shifts and
** masks for power-of-two divisors, plain / and % when the dividend is
** provably non-negative (simple sign analysis over loop variables with
** non-negative minimums and shape variables), and otherwise helpers that
** round toward minus infinity. Boolean vectors are int32 lane masks (-1/0)
** whatever the compared type. A vector if_then_else whose branches may
** fault is printed lane by lane, each lane evaluating only its taken branch.
**
** Vectors are no wider than a machine register: vectorized loops whose
** vectors would be wider are printed as copies on fewer lanes (32 bytes, and
** 64 under `#if defined(__AVX512F__)` when the split differs), and a float
** broadcast beside a vector is printed as its scalar, which GCC broadcasts in a
** register (a vector type wider than the machine's is built on the stack).
**
** Statements: SERIAL loops are plain for loops; UNROLLED ones get
** `#pragma GCC unroll N` (partial when the copies would exceed UNROLL_BUDGET
** vector statements, see unroll_factor); VECTORIZED loops left by the vectorizer are scalar
** loops with `#pragma GCC ivdep` (only when every store is affine in the
** loop variable with a non-zero constant coefficient and each stored buffer
** is accessed through one index) and `#pragma GCC unroll`; inside an attr
** "pragma_auto_unroll_max_step" = N, serial loops whose unrolled body
** would hold at most N statements are unrolled as well; a loop under an attr
** "pragma_peel_reread" runs all but its last iteration, which follows with the arguments it
** reads in vectors re-read at each use (print_peel_reread). A PARALLEL loop is
** outlined into a static function of the iteration number and a closure
** struct holding every variable and buffer pointer the body uses, run by
** tl_pool_for on the global pool (serially when the process does not export
** the pool); parallel loops nested in a parallel body run serially. A parallel loop whose
** iterations read disjoint blocks of 64 KiB or more of one buffer prefetches the next
** iteration's block from its innermost serial loop that reads it (pf_plan), where the
** compiler builds for AVX-512 (PREFETCH_CONDITION). ALLOC
** gives a 64-byte aligned stack array for small constant local buffers and
** aligned heap memory (freed at scope exit through the cleanup attribute)
** otherwise. Thread-bound loops and barriers are rejected: they are for the
** OpenCL backend.
**
** Output is deterministic: names are assigned in traversal order, helpers
** are sorted, nothing depends on addresses or hash order.
*/
#include "cfamily.h"

#include <math.h>
#include <stdio.h>

#define SMALL_GLOBAL_MAX (16 * 1024)  /* bytes: global-scope buffers up to this go on the stack */
#define STACK_ALLOC_MAX (32 * 1024)   /* bytes: larger local buffers go to the heap */

/* Vectors are printed no wider than a machine register: NATIVE_BYTES (AVX2),
** or NATIVE_BYTES_WIDE where the compiler builds for AVX-512 (WIDE_CONDITION
** in the generated file). A function whose loops split differently at the two
** widths holds both versions under #if; GCC builds a vector type wider than
** its registers through stack temporaries. */
#define NATIVE_BYTES 32
#define NATIVE_BYTES_WIDE 64
#define WIDE_CONDITION "defined(__AVX512F__)"
/* The next block's prefetch is compiled in only where there are 32 vector registers
** (AVX-512): on AVX2's 16, GCC kept one accumulator of a 7-wide register tile on the stack
** around the prefetch's branch (a load-FMA-store chain per step of the reduction: resnet's
** 512x7x7 and 256x14x14 stride-2 convs 2.5-2.9x slower). */
#define PREFETCH_CONDITION "defined(__AVX512F__)"

/* Helper kinds, in emission order: a helper only uses kinds before it (or
** the same kind on the scalar type, which sorts first). */
enum {
  H_TYPEDEF = 0, H_BCAST, H_RAMP, H_SEL, H_MIN, H_MAX, H_ABS, H_FLOORDIV, H_FLOORMOD,
  H_VLOAD, H_VLOADS, H_GATHER32, H_GATHER64, H_VSTORE, H_VSTORES, H_SCATTER32, H_SCATTER64,
  H_INTRIN   /* + TL_INTRIN_* */
};

typedef struct cg {
  tl_cf b;                        /* first: names, scopes, output (cfamily.h) */
  TL_VEC(uint64_t) helpers;       /* kind << 32 | packed type */
  int in_par;                     /* inside an outlined parallel body */
  int npar;
  tl_buf funcs;                   /* closure structs and outlined functions */
  int64_t unroll_max;             /* from pragma_auto_unroll_max_step; 0 = none */
  tl_ref pf_body;                 /* the loop body that prefetches the next block (0: none) */
  int64_t pf_lines;               /* cache lines it prefetches per iteration */
  const char *reread;             /* per buffer: its contiguous vector loads re-read at each use
                                  ** (the last iteration of a "peel_reread" loop), or NULL */
} cg;

/* P, PF, cg_err, line, var_bind, ...: the shorthands of cfamily.h */

/* ---- types ----------------------------------------------------------------- */

static const char *ctype_or_null(tl_type t) {
  if (tl_type_is_bool(t)) return "_Bool";
  switch (t.code) {
  case TL_TC_FLOAT:
    return t.bits == 16 ? "_Float16" : t.bits == 32 ? "float" : t.bits == 64 ? "double" : NULL;
  case TL_TC_INT:
    return t.bits == 8 ? "int8_t" : t.bits == 16 ? "int16_t" : t.bits == 32 ? "int32_t"
         : t.bits == 64 ? "int64_t" : NULL;
  case TL_TC_UINT:
    return t.bits == 8 ? "uint8_t" : t.bits == 16 ? "uint16_t" : t.bits == 32 ? "uint32_t"
         : t.bits == 64 ? "uint64_t" : NULL;
  case TL_TC_HANDLE:
    return "void *";
  default:
    return NULL;
  }
}

/* C type of a scalar value of type t (lanes ignored). */
static const char *ctype(cg *c, tl_type t) {
  const char *s = ctype_or_null(t);
  if (!s) {
    char b[32];
    cg_err(c, TL_E_UNSUPPORTED, "type %s has no C equivalent", tl_type_str(t, b));
    return "int";
  }
  return s;
}

/* Element type in memory: bool is a byte. */
static tl_type storage_type(tl_type t) {
  return tl_type_is_bool(t) ? tl_type_make(TL_TC_UINT, 8, t.lanes) : t;
}

/* Vector values of bool type are int32 lane masks. */
static tl_type vec_norm(tl_type t) {
  return tl_type_is_bool(t) ? tl_type_make(TL_TC_INT, 32, t.lanes) : t;
}

static uint64_t type_pack(tl_type t) {
  return ((uint64_t)t.code << 24) | ((uint64_t)t.bits << 16) | t.lanes;
}

static tl_type type_unpack(uint64_t k) {
  return tl_type_make((int)((k >> 24) & 0xff), (int)((k >> 16) & 0xff), (int)(k & 0xffff));
}

static void need(cg *c, int kind, tl_type t);

/* Name of a vector type ("float32x8"); registers its typedef. */
static const char *vtn(cg *c, tl_type t, char *buf) {
  t = vec_norm(t);
  if (t.lanes < 2 || (t.lanes & (t.lanes - 1)) || !ctype_or_null(t) || t.code == TL_TC_HANDLE) {
    char b[32];
    cg_err(c, TL_E_UNSUPPORTED, "vector type %s is not supported (lanes must be a power of two)",
           tl_type_str(t, b));
    strcpy(buf, "int");
    return buf;
  }
  need(c, H_TYPEDEF, t);
  return tl_type_str(t, buf);
}

/* Declared C type of a value of type t, scalar or vector. */
static const char *decl_type(cg *c, tl_type t, char *buf) {
  if (t.lanes > 1) return vtn(c, t, buf);
  strcpy(buf, ctype(c, t));
  return buf;
}

/* Helper-name suffix: "float32", "int32x8" (bool vectors as int32 masks). */
static const char *hname(tl_type t, char *buf) { return tl_type_str(vec_norm(t), buf); }

/* ---- helpers ------------------------------------------------------------------ */

static void need(cg *c, int kind, tl_type t) {
  if (t.lanes > 1) t = vec_norm(t);
  uint64_t key = ((uint64_t)kind << 32) | type_pack(t);
  for (int i = 0; i < c->helpers.n; i++)
    if (c->helpers.v[i] == key) return;
  TL_VEC_PUSH(c->helpers, key);
  int L = t.lanes;
  if (L > 1 && kind != H_TYPEDEF) need(c, H_TYPEDEF, t);
  switch (kind) {
  case H_RAMP:
    need(c, H_BCAST, t);
    break;
  case H_SEL:
    need(c, H_TYPEDEF, tl_type_make(TL_TC_INT, t.bits, L));
    need(c, H_TYPEDEF, tl_type_make(TL_TC_INT, 32, L));
    break;
  case H_MIN:
  case H_MAX:
    if (L > 1) {
      need(c, H_SEL, t);
      need(c, H_TYPEDEF, tl_type_make(TL_TC_INT, 32, L));
    }
    break;
  case H_FLOORDIV:
  case H_FLOORMOD:
    if (L > 1 && tl_type_is_float(t)) need(c, kind, tl_type_scalar(t));
    break;
  case H_GATHER32:
  case H_SCATTER32:
    need(c, H_TYPEDEF, tl_type_make(TL_TC_INT, 32, L));
    break;
  case H_GATHER64:
  case H_SCATTER64:
    need(c, H_TYPEDEF, tl_type_make(TL_TC_INT, 64, L));
    break;
  default:
    if (kind == H_INTRIN + TL_INTRIN_FABS && t.code == TL_TC_INT)
      need(c, H_ABS, tl_type_scalar(t));
    break;
  }
}

/* Scalar form of intrinsic k on element type t: a template where %0 and %1
** stand for the arguments. NULL if unsupported. *widen: arguments are cast
** to float and the result back (float16). */
static const char *intrin_template(int k, tl_type t, int *widen) {
  static const char *const f32[TL_INTRIN__MAX] = {
    "expf(%0)", "logf(%0)", "sqrtf(%0)", "(1.0f / sqrtf(%0))", "tanhf(%0)",
    "(1.0f / (1.0f + expf(-(%0))))", "powf(%0, %1)", "fabsf(%0)", "floorf(%0)", "ceilf(%0)",
    "nearbyintf(%0)", "erff(%0)"};
  static const char *const f64[TL_INTRIN__MAX] = {
    "exp(%0)", "log(%0)", "sqrt(%0)", "(1.0 / sqrt(%0))", "tanh(%0)",
    "(1.0 / (1.0 + exp(-(%0))))", "pow(%0, %1)", "fabs(%0)", "floor(%0)", "ceil(%0)",
    "nearbyint(%0)", "erf(%0)"};
  *widen = 0;
  if (k < 0 || k >= TL_INTRIN__MAX) return NULL;
  if (t.code == TL_TC_FLOAT) {
    if (t.bits == 64) return f64[k];
    if (t.bits == 16) *widen = 1;
    return f32[k];
  }
  if (tl_type_is_int(t) && !tl_type_is_bool(t)) {
    if (k == TL_INTRIN_FABS) return t.code == TL_TC_INT ? "tlc_abs_%T(%0)" : "(%0)";
    if (k == TL_INTRIN_FLOOR || k == TL_INTRIN_CEIL || k == TL_INTRIN_ROUND) return "(%0)";
  }
  return NULL;
}

/* Print a template; arguments are strings (a[i]) in helpers. */
static void put_template_str(tl_buf *o, const char *tmpl, int widen, tl_type et, const char *a0,
                             const char *a1) {
  char tn[32];
  if (widen) tl_buf_puts(o, "((_Float16)");
  for (const char *p = tmpl; *p; p++) {
    if (p[0] == '%' && (p[1] == '0' || p[1] == '1')) {
      const char *a = p[1] == '0' ? a0 : a1;
      if (widen) tl_buf_printf(o, "(float)(%s)", a);
      else tl_buf_puts(o, a);
      p++;
    } else if (p[0] == '%' && p[1] == 'T') {
      tl_buf_puts(o, tl_type_str(et, tn));
      p++;
    } else {
      tl_buf_putn(o, p, 1);
    }
  }
  if (widen) tl_buf_puts(o, ")");
}

static void emit_helper(tl_buf *o, uint64_t key) {
  int kind = (int)(key >> 32);
  tl_type t = type_unpack(key & 0xffffffffu);
  tl_type et = tl_type_scalar(t);
  int L = t.lanes;
  char vt[32], tn[32], it[32], mt[32];
  const char *ec = ctype_or_null(et);
  tl_type_str(t, vt);
  tl_type_str(t, tn);
  tl_type_str(tl_type_make(TL_TC_INT, t.bits, L), it);      /* same-width int vector */
  tl_type_str(tl_type_make(TL_TC_INT, 32, L), mt);          /* mask vector */
  switch (kind) {
  case H_TYPEDEF:
    tl_buf_printf(o, "typedef %s %s __attribute__((vector_size(%d)));\n", ec, vt,
                  L * (t.bits / 8));
    /* An element-aligned copy of the vector type: plain dereferences keep
    ** vectors in registers where memcpy made GCC spill through the stack. */
    tl_buf_printf(o, "typedef %s tlc_u_%s __attribute__((aligned(sizeof(%s))));\n", vt, vt, ec);
    return;
  case H_BCAST:
    /* vector + scalar makes GCC emit one register broadcast; a braced list of
    ** L copies was built through the stack (and stalled store forwarding). */
    if (!(t.code == TL_TC_FLOAT && t.bits == 16)) {
      /* floats: x - (+0) is x for every x (-0 included), so GCC drops the
      ** subtraction and folds the broadcast into its user (x + 0 is not an
      ** identity for -0 and cost an add per broadcast) */
      tl_buf_printf(o, "static inline %s tlc_bcast_%s(%s x) { %s z = {0}; return %s; }\n", vt,
                    vt, ec, vt, t.code == TL_TC_FLOAT ? "x - z" : "z + x");
      return;
    }
    tl_buf_printf(o, "static inline %s tlc_bcast_%s(%s x) { return (%s){", vt, vt, ec, vt);
    for (int i = 0; i < L; i++) tl_buf_puts(o, i ? ", x" : "x");
    tl_buf_puts(o, "}; }\n");
    return;
  case H_RAMP:
    tl_buf_printf(o, "static inline %s tlc_ramp_%s(%s b, %s s) {\n  return tlc_bcast_%s(b) + "
                  "tlc_bcast_%s(s) * (%s){", vt, vt, ec, ec, vt, vt, vt);
    for (int i = 0; i < L; i++) tl_buf_printf(o, i ? ", %d" : "%d", i);
    tl_buf_puts(o, "};\n}\n");
    return;
  case H_SEL:
    tl_buf_printf(o, "static inline %s tlc_sel_%s(%s m, %s a, %s b) {\n", vt, vt, mt, vt, vt);
    if (t.bits == 32) tl_buf_printf(o, "  %s k = m;\n", it);
    else tl_buf_printf(o, "  %s k = __builtin_convertvector(m, %s);\n", it, it);
    tl_buf_printf(o, "  return (%s)(((%s)a & k) | ((%s)b & ~k));\n}\n", vt, it, it);
    return;
  case H_MIN:
  case H_MAX: {
    const char *nm = kind == H_MIN ? "min" : "max", *op = kind == H_MIN ? "<" : ">";
    if (L == 1) {
      tl_buf_printf(o, "static inline %s tlc_%s_%s(%s a, %s b) { return a %s b ? a : b; }\n", ec,
                    nm, tn, ec, ec, op);
    } else if (t.bits == 32) {
      tl_buf_printf(o, "static inline %s tlc_%s_%s(%s a, %s b) { return tlc_sel_%s((%s)(a %s b), "
                    "a, b); }\n", vt, nm, vt, vt, vt, vt, mt, op);
    } else {
      tl_buf_printf(o, "static inline %s tlc_%s_%s(%s a, %s b) {\n  return tlc_sel_%s("
                    "__builtin_convertvector(a %s b, %s), a, b);\n}\n", vt, nm, vt, vt, vt, vt, op,
                    mt);
    }
    return;
  }
  case H_ABS:
    tl_buf_printf(o, "static inline %s tlc_abs_%s(%s x) { return x < 0 ? (%s)-x : x; }\n", ec, tn,
                  ec, ec);
    return;
  case H_FLOORDIV:
  case H_FLOORMOD: {
    const char *nm = kind == H_FLOORDIV ? "floordiv" : "floormod";
    if (L > 1 && tl_type_is_float(t)) {
      char sn[32];
      tl_type_str(et, sn);
      tl_buf_printf(o, "static inline %s tlc_%s_%s(%s a, %s b) {\n  %s r;\n  for (int i = 0; i < "
                    "%d; i++) r[i] = tlc_%s_%s(a[i], b[i]);\n  return r;\n}\n", vt, nm, vt, vt, vt,
                    vt, L, nm, sn);
    } else if (tl_type_is_float(t)) {
      const char *fl = t.bits == 64 ? "floor" : "floorf";
      const char *cast = t.bits == 16 ? "(_Float16)" : "";
      const char *wid = t.bits == 16 ? "(float)" : "";
      if (kind == H_FLOORDIV)
        tl_buf_printf(o, "static inline %s tlc_floordiv_%s(%s a, %s b) { return %s%s(%s(a / b)); "
                      "}\n", ec, tn, ec, ec, cast, fl, wid);
      else
        tl_buf_printf(o, "static inline %s tlc_floormod_%s(%s a, %s b) { return a - %s%s(%s(a / "
                      "b)) * b; }\n", ec, tn, ec, ec, cast, fl, wid);
    } else if (L > 1) {
      tl_buf_printf(o, "static inline %s tlc_%s_%s(%s a, %s b) {\n  %s q = a / b, r = a %% b;\n"
                    "  %s adj = (%s)((r != 0) & ((r < 0) != (b < 0)));\n", vt, nm, vt, vt, vt, vt,
                    vt, vt);
      if (kind == H_FLOORDIV) tl_buf_puts(o, "  (void)r;\n  return q + adj;\n}\n");
      else tl_buf_puts(o, "  (void)q;\n  return r + (adj & b);\n}\n");
    } else {
      tl_buf_printf(o, "static inline %s tlc_%s_%s(%s a, %s b) {\n  %s q = (%s)(a / b), r = (%s)(a "
                    "%% b);\n  int adj = r != 0 && ((r < 0) != (b < 0));\n", ec, nm, tn, ec, ec, ec,
                    ec, ec);
      if (kind == H_FLOORDIV) tl_buf_printf(o, "  (void)r;\n  return (%s)(q - adj);\n}\n", ec);
      else tl_buf_printf(o, "  (void)q;\n  return (%s)(adj ? r + b : r);\n}\n", ec);
    }
    return;
  }
  case H_VLOAD:
    tl_buf_printf(o, "static inline %s tlc_vload_%s(const %s *p) { return *(const tlc_u_%s *)p; }\n",
                  vt, vt, ec, vt);
    return;
  case H_VLOADS:
    tl_buf_printf(o, "static inline %s tlc_vloads_%s(const %s *p, int64_t s) {\n  %s r;\n  for (int "
                  "i = 0; i < %d; i++) r[i] = p[i * s];\n  return r;\n}\n", vt, vt, ec, vt, L);
    return;
  case H_GATHER32:
  case H_GATHER64:
    tl_buf_printf(o, "static inline %s tlc_gather%d_%s(const %s *p, int%dx%d ix) {\n  %s r;\n  for "
                  "(int i = 0; i < %d; i++) r[i] = p[ix[i]];\n  return r;\n}\n", vt,
                  kind == H_GATHER32 ? 32 : 64, vt, ec, kind == H_GATHER32 ? 32 : 64, L, vt, L);
    return;
  case H_VSTORE:
    tl_buf_printf(o, "static inline void tlc_vstore_%s(%s *p, %s v) { *(tlc_u_%s *)p = v; }\n",
                  vt, ec, vt, vt);
    return;
  case H_VSTORES:
    tl_buf_printf(o, "static inline void tlc_vstores_%s(%s *p, int64_t s, %s v) {\n  for (int i = "
                  "0; i < %d; i++) p[i * s] = v[i];\n}\n", vt, ec, vt, L);
    return;
  case H_SCATTER32:
  case H_SCATTER64:
    tl_buf_printf(o, "static inline void tlc_scatter%d_%s(%s *p, int%dx%d ix, %s v) {\n  for (int i "
                  "= 0; i < %d; i++) p[ix[i]] = v[i];\n}\n", kind == H_SCATTER32 ? 32 : 64, vt, ec,
                  kind == H_SCATTER32 ? 32 : 64, L, vt, L);
    return;
  default: {
    int k = kind - H_INTRIN, widen;
    const char *tmpl = intrin_template(k, et, &widen);
    int two = tl_ir_intrinnargs[k] == 2;
    tl_buf_printf(o, "static inline %s tlc_%s_%s(%s a", vt, tl_ir_intrinname[k], vt, vt);
    if (two) tl_buf_printf(o, ", %s b", vt);
    tl_buf_printf(o, ") {\n  %s r;\n  for (int i = 0; i < %d; i++) r[i] = ", vt, L);
    put_template_str(o, tmpl ? tmpl : "0", widen, et, "a[i]", "b[i]");
    tl_buf_puts(o, ";\n  return r;\n}\n");
    return;
  }
  }
}

static int key_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* ---- names ---------------------------------------------------------------------- */

static const char *const reserved_words[] = {
  "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
  "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict",
  "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union",
  "unsigned", "void", "volatile", "while", "asm", "typeof", "args", "nargs", "main", "errno",
  "exp", "expf", "log", "logf", "sqrt", "sqrtf", "tanh", "tanhf", "pow", "powf", "fabs", "fabsf",
  "floor", "floorf", "ceil", "ceilf", "nearbyint", "nearbyintf", "erf", "erff", "memcpy", "free",
  "malloc", "aligned_alloc", "snprintf", "vsnprintf", "NAN", "INFINITY", "tl_pool_for",
  "tl_pool_global", "tl_workspace_alloc", "tl_workspace_pop", "bool", "true", "false", "NULL",
  "EOF", "BUFSIZ", "SIZE_MAX", "INT8_MIN",
  "INT8_MAX", "INT16_MIN", "INT16_MAX", "INT32_MIN", "INT32_MAX", "INT64_MIN", "INT64_MAX",
  "UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX", "HUGE_VAL", "HUGE_VALF", "stdin",
  "stdout", "stderr", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t",
  "uint32_t", "uint64_t", "size_t", "va_list", "FILE", "float_t", "double_t", "ptrdiff_t"};

/* ---- expressions: C's own forms (the rest is tl_cf_expr) ------------------------- */

static void put_call_helper(cg *c, const char *name, tl_type t, tl_ref a, tl_ref b, int lane) {
  char hn[32];
  PF(c, "tlc_%s_%s(", name, hname(t, hn));
  pe(c, a, lane);
  if (b) {
    P(c, ", ");
    pe(c, b, lane);
  }
  P(c, ")");
}

/* min, max and the floordiv/floormod left by tl_cf_expr: helpers. */
static void h_binop(tl_cf *b0, int op, tl_type t, tl_ref a, tl_ref b, int lane, int vec) {
  cg *c = (cg *)b0;
  tl_type ht = vec ? t : tl_type_scalar(t);   /* type the helper works on */
  int kind = op == TL_IR_FLOORDIV ? H_FLOORDIV : op == TL_IR_FLOORMOD ? H_FLOORMOD
           : op == TL_IR_MIN ? H_MIN : H_MAX;
  need(c, kind, ht);
  put_call_helper(c, op == TL_IR_FLOORDIV ? "floordiv" : op == TL_IR_FLOORMOD ? "floormod"
                     : op == TL_IR_MIN ? "min" : "max", ht, a, b, lane);
}

/* Vector comparisons give int32 lane masks. */
static void h_vec_cmp(tl_cf *b0, tl_ref e) {
  cg *c = (cg *)b0;
  const tl_ir *ir = c->b.ir;
  tl_ref a = tl_ir_kid(ir, e, 0), b = tl_ir_kid(ir, e, 1);
  const char *sym = tl_cf_cmp_sym(tl_ir_op(ir, e));
  tl_type ot = vec_norm(tl_ir_type(ir, a));
  char mt[32];
  vtn(c, tl_type_make(TL_TC_INT, 32, tl_ir_type(ir, e).lanes), mt);
  if (ot.bits == 32) PF(c, "((%s)(", mt);
  else P(c, "__builtin_convertvector((");
  pe(c, a, -1);
  PF(c, " %s ", sym);
  pe(c, b, -1);
  if (ot.bits == 32) P(c, "))");
  else PF(c, "), %s)", mt);
}

static void h_vec_select(tl_cf *b0, tl_ref e) {
  cg *c = (cg *)b0;
  const tl_ir *ir = c->b.ir;
  tl_type t = tl_ir_type(ir, e);
  char vt[32];
  vtn(c, t, vt);
  need(c, H_SEL, t);
  PF(c, "tlc_sel_%s(", vt);
  pe(c, tl_ir_kid(ir, e, 0), -1);
  P(c, ", ");
  pe(c, tl_ir_kid(ir, e, 1), -1);
  P(c, ", ");
  pe(c, tl_ir_kid(ir, e, 2), -1);
  P(c, ")");
}

static void h_vec_cast(tl_cf *b0, tl_ref e) {
  cg *c = (cg *)b0;
  const tl_ir *ir = c->b.ir;
  tl_type t = tl_ir_type(ir, e);
  tl_ref a = tl_ir_kid(ir, e, 0);
  tl_type st = tl_ir_type(ir, a);
  char dt[32], sv[32], mt[32];
  int sb = tl_type_is_bool(st), db = tl_type_is_bool(t);
  if (sb && db) {
    pe(c, a, -1);
  } else if (db) {
    vtn(c, st, sv);
    vtn(c, tl_type_make(TL_TC_INT, 32, t.lanes), mt);
    if (st.bits == 32) PF(c, "((%s)((", mt);
    else P(c, "__builtin_convertvector(((");
    pe(c, a, -1);
    PF(c, ") != (%s){0})", sv);
    if (st.bits == 32) P(c, ")");
    else PF(c, ", %s)", mt);
  } else if (sb) {
    PF(c, "__builtin_convertvector(-(");
    pe(c, a, -1);
    PF(c, "), %s)", vtn(c, t, dt));
  } else {
    P(c, "__builtin_convertvector(");
    pe(c, a, -1);
    PF(c, ", %s)", vtn(c, t, dt));
  }
}

static void h_vec_ramp(tl_cf *b0, tl_ref e) {
  cg *c = (cg *)b0;
  tl_type t = tl_ir_type(c->b.ir, e);
  char vt[32];
  need(c, H_RAMP, t);
  PF(c, "tlc_ramp_%s(", vtn(c, t, vt));
  pe(c, tl_ir_kid(c->b.ir, e, 0), -1);
  P(c, ", ");
  pe(c, tl_ir_kid(c->b.ir, e, 1), -1);
  P(c, ")");
}

static void h_vec_bcast(tl_cf *b0, tl_ref e) {
  cg *c = (cg *)b0;
  tl_type t = tl_ir_type(c->b.ir, e);
  char vt[32];
  need(c, H_BCAST, t);
  PF(c, "tlc_bcast_%s(", vtn(c, t, vt));
  if (tl_type_is_bool(t)) P(c, "-(int32_t)");
  pe(c, tl_ir_kid(c->b.ir, e, 0), -1);
  P(c, ")");
}

/* Pointer to element base of buffer bn: "(bn + (base))". */
static void put_addr(cg *c, const char *bn, tl_ref base) {
  PF(c, "(%s + ", bn);
  pe(c, base, -1);
  P(c, ")");
}

/* The call of a vector load (store: 1) helper of storage type st (named sv)
** on buffer bn at vector index ix, up to its last argument: contiguous
** (vload/vstore: the address), strided (vloads/vstores: the address and
** stride) or any other (gather/scatter: bn and the index as int32 or int64). */
static void put_vaccess(cg *c, int store, tl_type st, const char *sv, const char *bn, tl_ref ix, int reread) {
  const tl_ir *ir = c->b.ir;
  tl_type it = tl_ir_type(ir, ix);
  int64_t k = 0;
  if (tl_ir_op(ir, ix) == TL_IR_RAMP && tl_ir_is_int(ir, tl_ir_kid(ir, ix, 1), &k) && k == 1) {
    need(c, store ? H_VSTORE : H_VLOAD, st);
    PF(c, "tlc_%s_%s(", store ? "vstore" : "vload", sv);
    if (reread) {
      /* the address through a copy an empty asm marks changed: read here, not kept from
      ** an earlier load of it (print_peel_reread) */
      P(c, "({ __typeof__(");
      put_addr(c, bn, tl_ir_kid(ir, ix, 0));
      P(c, ") tlc_q = ");
      put_addr(c, bn, tl_ir_kid(ir, ix, 0));
      P(c, "; __asm__ __volatile__(\"\" : \"+r\"(tlc_q)); tlc_q; })");
    } else {
      put_addr(c, bn, tl_ir_kid(ir, ix, 0));
    }
  } else if (tl_ir_op(ir, ix) == TL_IR_RAMP) {
    need(c, store ? H_VSTORES : H_VLOADS, st);
    PF(c, "tlc_%s_%s(", store ? "vstores" : "vloads", sv);
    put_addr(c, bn, tl_ir_kid(ir, ix, 0));
    P(c, ", (int64_t)(");
    pe(c, tl_ir_kid(ir, ix, 1), -1);
    P(c, ")");
  } else {
    int w = it.bits == 64 ? 64 : 32;
    need(c, store ? (w == 64 ? H_SCATTER64 : H_SCATTER32) : (w == 64 ? H_GATHER64 : H_GATHER32), st);
    PF(c, "tlc_%s%d_%s(%s, ", store ? "scatter" : "gather", w, sv, bn);
    if (it.bits != w || it.code != TL_TC_INT) {
      char iv[32];
      P(c, "__builtin_convertvector(");
      pe(c, ix, -1);
      PF(c, ", %s)", vtn(c, tl_type_make(TL_TC_INT, w, it.lanes), iv));
    } else {
      pe(c, ix, -1);
    }
  }
}

/* A vector load: contiguous, strided or gathered (bool vectors via bytes). */
static void h_vec_load(tl_cf *b0, tl_ref e, const char *bn, tl_ref ix) {
  cg *c = (cg *)b0;
  const tl_ir *ir = c->b.ir;
  tl_type t = tl_ir_type(ir, e);
  if (tl_ir_type(ir, ix).lanes != t.lanes) {
    cg_err(c, TL_E_ARG, "vector load from '%s': index lanes differ from value lanes", bn);
    return;
  }
  tl_type st = storage_type(t);
  char sv[32], mt[32];
  vtn(c, st, sv);
  int isbool = tl_type_is_bool(t);
  if (isbool) P(c, "__builtin_convertvector(");
  int b = (int)tl_ir_node(ir, e)->imm.u;
  put_vaccess(c, 0, st, sv, bn, ix, c->reread && b >= 0 && b < c->b.nbufs && c->reread[b]);
  P(c, ")");
  if (isbool) PF(c, " != (%s){0}, %s)", sv, vtn(c, tl_type_make(TL_TC_INT, 32, t.lanes), mt));
}

/* Intrinsics: the scalar template, or on whole vectors a per-lane helper. */
static void h_call(tl_cf *b0, tl_ref e, int lane, int vec) {
  cg *c = (cg *)b0;
  const tl_ir *ir = c->b.ir;
  const tl_node *n = tl_ir_node(ir, e);
  int k = (int)n->imm.u, widen;
  tl_type t = n->type;
  char tn[32];
  const char *tmpl = intrin_template(k, tl_type_scalar(t), &widen);
  if (!tmpl || k < 0 || k >= TL_INTRIN__MAX || n->nkids != tl_ir_intrinnargs[k]) {
    cg_err(c, TL_E_UNSUPPORTED, "intrinsic %s on %s is not supported",
           k >= 0 && k < TL_INTRIN__MAX ? tl_ir_intrinname[k] : "?", tl_type_str(t, tn));
    return;
  }
  tl_ref a0 = tl_ir_kid(ir, e, 0), a1 = n->nkids > 1 ? tl_ir_kid(ir, e, 1) : 0;
  if (vec) {
    need(c, H_INTRIN + k, t);
    PF(c, "tlc_%s_%s(", tl_ir_intrinname[k], vtn(c, t, tn));
    pe(c, a0, -1);
    if (a1) {
      P(c, ", ");
      pe(c, a1, -1);
    }
    P(c, ")");
    return;
  }
  tl_type et = tl_type_scalar(t);
  if (k == TL_INTRIN_FABS && et.code == TL_TC_INT) need(c, H_ABS, et);
  if (widen) P(c, "((_Float16)");
  for (const char *p = tmpl; *p; p++) {
    if (p[0] == '%' && (p[1] == '0' || p[1] == '1')) {
      if (widen) P(c, "(float)(");
      pe(c, p[1] == '0' ? a0 : a1, lane);
      if (widen) P(c, ")");
      p++;
    } else if (p[0] == '%' && p[1] == 'T') {
      P(c, tl_type_str(et, tn));
      p++;
    } else {
      tl_buf_putn(c->b.o, p, 1);
    }
  }
  if (widen) P(c, ")");
}

/* A let expression: a GNU statement expression binding the variable. */
static void h_let(tl_cf *b0, tl_ref e, int lane) {
  cg *c = (cg *)b0;
  const tl_ir *ir = c->b.ir;
  tl_ref var = tl_ir_kid(ir, e, 0), val = tl_ir_kid(ir, e, 1), body = tl_ir_kid(ir, e, 2);
  char dt[32];
  tl_type vt = tl_ir_type(ir, val);
  decl_type(c, vt, dt);
  int nn = nonneg(c, val);
  tl_buf v = {0};
  tl_buf *saved = c->b.o;
  c->b.o = &v;
  if (lane >= 0 && vt.lanes > 1) pe(c, val, lane);   /* only this lane: others may fault */
  else pe(c, val, -1);
  c->b.o = saved;
  const char *vn = var_bind(c, var, nn);
  if (lane >= 0 && vt.lanes > 1) PF(c, "({ %s %s = {0}; %s[%d] = %s; ", dt, vn, vn, lane, v.s ? v.s : "0");
  else PF(c, "({ %s %s = %s; ", dt, vn, v.s ? v.s : "0");
  tl_buf_free(&v);
  pe(c, body, lane);
  P(c, "; })");
  var_unbind(c, var);
}

/* ---- analyses for loops --------------------------------------------------------- */

/* Coefficient of v in e when e is affine in v with a constant coefficient. */
/* Whether index e is k * q + (terms without v). q is v itself, or with div (the prefetch's
** block number, see "the next block's prefetch") also floordiv(v, R) for a constant R, the R
** kept in *div (0: none seen yet; 1: v) and the same throughout, a vector's ramp and broadcast
** looked through. */
static int linear_in(const tl_ir *ir, tl_ref e, tl_ref v, int64_t *k, int64_t *div) {
  int op = tl_ir_op(ir, e);
  int64_t r, ka, kb;
  if (e == v || (div && op == TL_IR_FLOORDIV && tl_ir_kid(ir, e, 0) == v &&
                 tl_ir_is_int(ir, tl_ir_kid(ir, e, 1), &r) && r > 0)) {
    if (div) {
      r = e == v ? 1 : r;
      if (*div && *div != r) return 0;
      *div = r;
    }
    *k = 1;
    return 1;
  }
  if (!tl_ir_uses_var(ir, e, v)) {
    *k = 0;
    return 1;
  }
  if (div && op == TL_IR_RAMP && !tl_ir_uses_var(ir, tl_ir_kid(ir, e, 1), v))
    return linear_in(ir, tl_ir_kid(ir, e, 0), v, k, div);
  if (div && op == TL_IR_BROADCAST) return linear_in(ir, tl_ir_kid(ir, e, 0), v, k, div);
  if (op == TL_IR_ADD || op == TL_IR_SUB) {
    if (!linear_in(ir, tl_ir_kid(ir, e, 0), v, &ka, div) || !linear_in(ir, tl_ir_kid(ir, e, 1), v, &kb, div))
      return 0;
    *k = op == TL_IR_ADD ? ka + kb : ka - kb;
    return 1;
  }
  if (op == TL_IR_MUL) {
    tl_ref a = tl_ir_kid(ir, e, 0), b = tl_ir_kid(ir, e, 1);
    if (tl_ir_is_int(ir, b, &r) && linear_in(ir, a, v, &ka, div)) return *k = ka * r, 1;
    if (tl_ir_is_int(ir, a, &r) && linear_in(ir, b, v, &kb, div)) return *k = kb * r, 1;
  }
  return 0;
}

static int affine_coef(const tl_ir *ir, tl_ref e, tl_ref v, int64_t *k) {
  return linear_in(ir, e, v, k, NULL);
}

typedef struct {
  TL_VEC(int) buf;
  TL_VEC(tl_ref) idx;
  TL_VEC(uint8_t) store;
  int bad;                        /* allocation or multi-index access inside */
} access_st;

static int access_fn(const tl_ir *ir, tl_ref r, void *ud) {
  access_st *a = ud;
  int op = tl_ir_op(ir, r);
  if (op == TL_IR_ALLOC) a->bad = 1;
  if (op == TL_IR_LOAD || op == TL_IR_STORE) {
    int want = op == TL_IR_LOAD ? 1 : 2;
    if (tl_ir_nkids(ir, r) != want) {
      a->bad = 1;
      return 1;
    }
    TL_VEC_PUSH(a->buf, (int)tl_ir_node(ir, r)->imm.u);
    TL_VEC_PUSH(a->idx, tl_ir_kid(ir, r, want - 1));
    TL_VEC_PUSH(a->store, (uint8_t)(op == TL_IR_STORE));
  }
  return 1;
}

/* Iterations of the loop provably independent: see the file comment. */
static int ivdep_ok(cg *c, tl_ref loop) {
  const tl_ir *ir = c->b.ir;
  tl_ref v = tl_ir_kid(ir, loop, 0);
  access_st a;
  memset(&a, 0, sizeof a);
  tl_ir_visit(ir, tl_ir_kid(ir, loop, 3), access_fn, &a);
  int ok = !a.bad;
  for (int i = 0; ok && i < a.buf.n; i++) {
    if (!a.store.v[i]) continue;
    int64_t k;
    if (!affine_coef(ir, a.idx.v[i], v, &k) || k == 0) ok = 0;
    for (int j = 0; ok && j < a.buf.n; j++)
      if (a.buf.v[j] == a.buf.v[i] && a.idx.v[j] != a.idx.v[i]) ok = 0;
  }
  TL_VEC_FREE(a.buf);
  TL_VEC_FREE(a.idx);
  TL_VEC_FREE(a.store);
  return ok;
}

#define STEPS_INF INT64_C(1000000000)

/* ---- free variables and buffers of a parallel body ------------------------------ */

typedef struct {
  cg *c;
  uint8_t *used, *bound;          /* by var id */
  uint8_t *ubuf, *abuf;           /* by buffer id */
} free_st;

static int free_fn(const tl_ir *ir, tl_ref r, void *ud) {
  free_st *f = ud;
  const tl_node *n = tl_ir_node(ir, r);
  switch (n->op) {
  case TL_IR_VAR:
    f->used[n->imm.u] = 1;
    break;
  case TL_IR_FOR:
  case TL_IR_LET:
  case TL_IR_LET_STMT:
    f->bound[tl_ir_node(ir, tl_ir_kid(ir, r, 0))->imm.u] = 1;
    break;
  case TL_IR_LOAD:
  case TL_IR_STORE:
    if (n->imm.u < (uint64_t)f->c->b.nbufs) f->ubuf[n->imm.u] = 1;
    break;
  case TL_IR_ALLOC:
    if (n->imm.u < (uint64_t)f->c->b.nbufs) {
      const tl_buffer *b = tl_ir_buffer(ir, (int)n->imm.u);
      f->abuf[n->imm.u] = 1;
      for (int d = 0; d < b->ndim; d++) tl_ir_visit(ir, b->shape[d], free_fn, ud);
    }
    break;
  }
  return 1;
}

/* ---- statements ------------------------------------------------------------------- */

static void ps(cg *c, tl_ref s);

/* The statement that leaves after a failure (allocation). */
static void put_fail(cg *c, int code, const char *what) {
  if (c->in_par)
    line(c, "{ tlc_error(%d, \"%s: %s\"); __atomic_store_n(tlc_cl->tlc_failed, %d, "
         "__ATOMIC_RELAXED); return; }", code, c->b.f->name, what, code);
  else
    line(c, "return tlc_error(%d, \"%s: %s\");", code, c->b.f->name, what);
}

/* ---- the next block's prefetch ------------------------------------------------------
** A parallel loop whose iterations read a buffer in blocks prefetches the next block while
** it computes (docs/performance.md, "Where a step's time goes between its neighbours"). The
** buffer qualifies when every load of it is affine in the block number (the loop variable,
** or its floor division by R when the loop fuses R rows into each block: linear_in) with one
** coefficient S, S elements make PF_MIN_BLOCK bytes or more, the buffer is exactly the
** blocks in order, and some load of it is invariant in a loop inside the iteration, so the
** block is read more than once (a conv's weights, once per tile of positions: pf_reuse).
** Each iteration fetches its R-th of the next block from the innermost serial loop that reads
** the buffer, one cache line per iteration of that loop (more where it runs fewer times than
** the share has lines), so the block arrives spread over the computation instead of all at
** once when the next block starts. Nothing is fetched after the last block. */
#define PF_MIN_BLOCK (64 * 1024)
#define PF_MAX_LINES 8             /* prefetches per host iteration at most */

typedef struct {
  tl_ref var;
  int64_t *coef;                  /* per buffer: the block's coefficient (0: none yet) */
  int64_t *div;                   /* per buffer: iterations per block (0: none yet) */
  uint8_t *bad;                   /* per buffer: stored, or read otherwise */
} pf_scan;

static int pf_scan_fn(const tl_ir *ir, tl_ref r, void *ud) {
  pf_scan *p = ud;
  int op = tl_ir_op(ir, r);
  if (op != TL_IR_LOAD && op != TL_IR_STORE && op != TL_IR_ALLOC) return 1;
  int b = (int)tl_ir_node(ir, r)->imm.u;
  if (b < 0 || b >= ir->bufs.n) return 1;
  int64_t k, div = p->div[b];
  if (op != TL_IR_LOAD || tl_ir_nkids(ir, r) != 1 ||
      !linear_in(ir, tl_ir_kid(ir, r, 0), p->var, &k, &div) || k <= 0 || (p->coef[b] && p->coef[b] != k))
    p->bad[b] = 1;
  else
    p->coef[b] = k, p->div[b] = div;
  return 1;
}

typedef struct {
  int buf;
  tl_ref best;                    /* the host loop */
  int64_t best_trips;
} pf_host;

static int reads_buf_fn(const tl_ir *ir, tl_ref r, void *ud) {
  int *b = ud;
  if (tl_ir_op(ir, r) == TL_IR_LOAD && (int)tl_ir_node(ir, r)->imm.u == b[0]) b[1] = 1;
  return !b[1];
}

/* Walks statement s under `trips` iterations of enclosing serial loops for the innermost
** serial loop reading h->buf with the most iterations in all (h->best). Returns 2 when s holds
** such a loop, else 1 when s reads h->buf, else 0. */
static int pf_find(const tl_ir *ir, tl_ref s, int64_t trips, pf_host *h) {
  if (!s) return 0;
  int op = tl_ir_op(ir, s);
  if (op == TL_IR_FOR) {
    int64_t ext;
    int serial = tl_for_kind(ir, s) == TL_FOR_SERIAL && tl_ir_is_int(ir, tl_ir_kid(ir, s, 2), &ext) &&
                 ext > 0;
    int64_t t = serial ? trips * ext : trips;
    int inner = pf_find(ir, tl_ir_kid(ir, s, 3), t, h);
    if (serial && inner == 1) {
      if (t > h->best_trips) h->best = s, h->best_trips = t;
      return 2;
    }
    return inner;
  }
  int found = 0, nk = tl_ir_nkids(ir, s);
  for (int i = 0; i < nk; i++) {
    tl_ref k = tl_ir_kid(ir, s, i);
    if (!k) continue;
    if (tl_ir_opflags[tl_ir_op(ir, k)] & TL_IRF_S) {
      int f = pf_find(ir, k, trips, h);
      if (f > found) found = f;
    } else if (!found) {
      int st[2] = {h->buf, 0};
      tl_ir_visit(ir, k, reads_buf_fn, st);
      found = st[1];
    }
  }
  return found;
}

/* Whether some load of buf under statement s is invariant in a loop around it inside the
** parallel body (vars: the loops' variables, n of them): the block is read more than once per
** iteration (a conv's weights, once per tile of positions), where a block read once in order
** (an elementwise op's input) is the hardware prefetcher's case. */
typedef struct {
  int buf, hit;
  const tl_ref *vars;
  int n;
} pf_reuse_st;

static int pf_reuse_fn(const tl_ir *ir, tl_ref r, void *ud) {
  pf_reuse_st *u = ud;
  if (tl_ir_op(ir, r) != TL_IR_LOAD || (int)tl_ir_node(ir, r)->imm.u != u->buf) return !u->hit;
  for (int i = 0; i < u->n; i++)
    if (!tl_ir_uses_var(ir, r, u->vars[i])) u->hit = 1;
  return !u->hit;
}

static int pf_reuse(const tl_ir *ir, tl_ref s, int buf, tl_ref *vars, int n) {
  if (!s) return 0;
  int op = tl_ir_op(ir, s);
  if (op == TL_IR_FOR) {
    int64_t ext;
    int m = n;
    if (n < 64 && !(tl_ir_is_int(ir, tl_ir_kid(ir, s, 2), &ext) && ext <= 1)) vars[m++] = tl_ir_kid(ir, s, 0);
    return pf_reuse(ir, tl_ir_kid(ir, s, 3), buf, vars, m);
  }
  int nk = tl_ir_nkids(ir, s);
  for (int i = 0; i < nk; i++) {
    tl_ref k = tl_ir_kid(ir, s, i);
    if (!k) continue;
    if (tl_ir_opflags[tl_ir_op(ir, k)] & TL_IRF_S) {
      if (pf_reuse(ir, k, buf, vars, n)) return 1;
    } else {
      pf_reuse_st u = {buf, 0, vars, n};
      tl_ir_visit(ir, k, pf_reuse_fn, &u);
      if (u.hit) return 1;
    }
  }
  return 0;
}

/* Elements of buffer b (0: not a constant shape). */
static int64_t buf_elems(const tl_ir *ir, int b) {
  const tl_buffer *bf = tl_ir_buffer(ir, b);
  int64_t n = 1, e;
  for (int d = 0; d < bf->ndim; d++) {
    if (!tl_ir_is_int(ir, bf->shape[d], &e) || e < 0) return 0;
    n *= e;
  }
  return n;
}

/* Whether the host loop accumulates through a buffer larger than a register tile
** (PF_MAX_TILE elements): a store whose value reads the same buffer, as an auto-scheduled
** kernel's cache-write tile does, where a template keeps its accumulators in a register tile.
** There the prefetch's statement in the loop cost GCC the promotion of the accumulators to
** registers: a 1x1 conv 7x7x1024 -> 1024 with its weight in loop order went from 0.24 ms to
** 0.52-0.92 ms with the prefetch (docs/auto_scheduler.md, "Layout rewriting"). Plain stores
** to large buffers (a Winograd transform's output) do not count. */
#define PF_MAX_TILE 1024

static int pf_accumulates_fn(const tl_ir *ir, tl_ref r, void *ud) {
  int *large = ud;
  if (tl_ir_op(ir, r) == TL_IR_STORE) {
    int b[2] = {(int)tl_ir_node(ir, r)->imm.u, 0};   /* the buffer; whether the value reads it */
    int64_t n = buf_elems(ir, b[0]);
    if (n == 0 || n > PF_MAX_TILE) {
      tl_ir_visit(ir, tl_ir_kid(ir, r, 0), reads_buf_fn, b);
      if (b[1]) *large = 1;
    }
  }
  return !*large;
}

/* For parallel loop `loop`: the buffer to prefetch (-1: none), its block's bytes, the
** iterations per block (div), the host loop's body and the lines it prefetches per iteration. */
static int pf_plan(cg *c, tl_ref loop, int64_t *block, int64_t *div, tl_ref *body, int64_t *lines) {
  const tl_ir *ir = c->b.ir;
  int64_t iters;
  if (!tl_ir_is_int(ir, tl_ir_kid(ir, loop, 2), &iters) || iters < 2) return -1;
  int nb = ir->bufs.n;
  if (nb <= 0) return -1;
  pf_scan p = {tl_ir_kid(ir, loop, 0), tl_calloc((size_t)nb, sizeof(int64_t)),
               tl_calloc((size_t)nb, sizeof(int64_t)), tl_calloc((size_t)nb, 1)};
  tl_ir_visit(ir, tl_ir_kid(ir, loop, 3), pf_scan_fn, &p);
  int buf = -1;
  int64_t best = 0;
  for (int b = 0; b < nb; b++) {
    if (p.bad[b] || !p.coef[b] || !p.div[b] || b >= c->b.nbufs || !c->b.bname[b]) continue;
    int64_t bytes = p.coef[b] * (int64_t)((tl_ir_buffer(ir, b)->dtype.bits + 7) / 8);
    tl_ref vars[64];
    /* the buffer is the blocks one after another (S elements each, R iterations each) */
    if (bytes >= PF_MIN_BLOCK && bytes > best && iters % p.div[b] == 0 && iters / p.div[b] >= 2 &&
        buf_elems(ir, b) == iters / p.div[b] * p.coef[b] && pf_reuse(ir, tl_ir_kid(ir, loop, 3), b, vars, 0))
      best = bytes, buf = b;
  }
  if (buf >= 0) {
    pf_host h = {buf, 0, 0};
    pf_find(ir, tl_ir_kid(ir, loop, 3), 1, &h);
    int large = 0;
    if (h.best) tl_ir_visit(ir, tl_ir_kid(ir, h.best, 3), pf_accumulates_fn, &large);
    if (!h.best || large) {
      buf = -1;
    } else {
      /* each of the block's R iterations fetches its R-th of the next block */
      int64_t slice = (best / p.div[buf] + 63) / 64 * 64;
      int64_t nl = slice / 64, per = (nl + h.best_trips - 1) / h.best_trips;
      *block = best;
      *div = p.div[buf];
      *body = tl_ir_kid(ir, h.best, 3);
      *lines = per < 1 ? 1 : per > PF_MAX_LINES ? PF_MAX_LINES : per;
    }
  }
  free(p.coef);
  free(p.div);
  free(p.bad);
  return buf;
}

static void print_parallel(cg *c, tl_ref loop) {
  tl_ir *ir = c->b.ir;
  tl_ref var = tl_ir_kid(ir, loop, 0), min = tl_ir_kid(ir, loop, 1), ext = tl_ir_kid(ir, loop, 2);
  tl_ref body = tl_ir_kid(ir, loop, 3);
  int id = c->npar++;
  char dt[32];
  free_st f = {c, tl_calloc((size_t)c->b.nvars, 1), tl_calloc((size_t)c->b.nvars, 1),
               tl_calloc((size_t)c->b.nbufs + 1, 1), tl_calloc((size_t)c->b.nbufs + 1, 1)};
  tl_ir_visit(ir, body, free_fn, &f);
  f.used[var_id(c, var)] = 0;
  tl_type vt = tl_cf_loop_type(&c->b, tl_ir_type(ir, var));
  const char *vtype = ctype(c, vt);

  /* the call site */
  line(c, "{");
  c->b.ind++;
  indent(c);
  PF(c, "tlc_par%d_t tlc_c = {", id);
  pe(c, min, -1);
  P(c, ", &tlc_failed");
  for (int i = 0; i < c->b.nvars; i++)
    if (f.used[i] && !f.bound[i]) PF(c, ", %s", var_use_id(c, i));
  for (int b = 0; b < c->b.nbufs; b++)
    if (f.ubuf[b] && !f.abuf[b]) PF(c, ", %s", buf_use(c, b));
  P(c, "};\n");
  indent(c);
  PF(c, "tlc_parallel((int64_t)(");
  pe(c, ext, -1);
  PF(c, "), tlc_par%d, &tlc_c);\n", id);
  line(c, "if (tlc_failed) return tlc_failed;");
  c->b.ind--;
  line(c, "}");

  /* the closure and the outlined function */
  tl_buf fn = {0};
  tl_buf *saved = c->b.o;
  int saved_ind = c->b.ind;
  c->b.o = &fn;
  c->b.ind = 0;
  PF(c, "typedef struct {\n  %s tlc_min;\n  int32_t *tlc_failed;\n", vtype);
  for (int i = 0; i < c->b.nvars; i++)
    if (f.used[i] && !f.bound[i] && c->b.vname[i])
      PF(c, "  %s %s;\n", decl_type(c, ir->vars.v[i].type, dt), c->b.vname[i]);
  for (int b = 0; b < c->b.nbufs; b++)
    if (f.ubuf[b] && !f.abuf[b] && c->b.bname[b])
      PF(c, "  %s *%s;\n", ctype(c, storage_type(tl_ir_buffer(ir, b)->dtype)), c->b.bname[b]);
  PF(c, "} tlc_par%d_t;\n\n", id);
  PF(c, "static void tlc_par%d(int64_t tlc_it, void *tlc_arg) {\n", id);
  PF(c, "  tlc_par%d_t *tlc_cl = (tlc_par%d_t *)tlc_arg;\n", id, id);
  for (int i = 0; i < c->b.nvars; i++)
    if (f.used[i] && !f.bound[i] && c->b.vname[i])
      PF(c, "  %s %s = tlc_cl->%s;\n", decl_type(c, ir->vars.v[i].type, dt), c->b.vname[i],
         c->b.vname[i]);
  for (int b = 0; b < c->b.nbufs; b++)
    if (f.ubuf[b] && !f.abuf[b] && c->b.bname[b])
      PF(c, "  %s *restrict %s = tlc_cl->%s;\n",
         ctype(c, storage_type(tl_ir_buffer(ir, b)->dtype)), c->b.bname[b], c->b.bname[b]);
  const char *vn = var_bind(c, var, nonneg(c, min));
  PF(c, "  %s %s = (%s)(tlc_cl->tlc_min + tlc_it);\n", vtype, vn, vtype);
  int64_t pf_block = 0, pf_div = 0, pf_lines = 0, kmin, kext;
  tl_ref pf_body = 0;
  int pf_buf = tl_ir_is_int(ir, min, &kmin) && tl_ir_is_int(ir, ext, &kext)
                   ? pf_plan(c, loop, &pf_block, &pf_div, &pf_body, &pf_lines) : -1;
  tl_ref saved_body = c->pf_body;
  int64_t saved_lines = c->pf_lines;
  c->pf_body = 0;
  if (pf_buf >= 0) {
    /* this iteration's share of the next block: an address only (prefetches do not fault),
    ** none after the last block */
    int64_t slice = (pf_block / pf_div + 63) / 64 * 64;
    P(c, "#if " PREFETCH_CONDITION "\n");
    PF(c, "  int64_t tlc_pf_r = ((int64_t)%s - %lld) %% %lld, tlc_pf_b = ((int64_t)%s - %lld) / %lld;\n",
       vn, (long long)kmin, (long long)pf_div, vn, (long long)kmin, (long long)pf_div);
    PF(c, "  const char *tlc_pf_next = tlc_pf_b + 1 < %lld ? (const char *)((uintptr_t)%s + "
       "(uintptr_t)((tlc_pf_b + 1) * %lld + tlc_pf_r * %lld)) : NULL;\n", (long long)(kext / pf_div),
       c->b.bname[pf_buf], (long long)pf_block, (long long)slice);
    PF(c, "  int64_t tlc_pf = 0, tlc_pf_end = %lld - tlc_pf_r * %lld < %lld ? %lld - tlc_pf_r * %lld : %lld;\n",
       (long long)pf_block, (long long)slice, (long long)slice, (long long)pf_block, (long long)slice,
       (long long)slice);
    P(c, "#endif\n");
    c->pf_body = pf_body;
    c->pf_lines = pf_lines;
  }
  c->in_par = 1;
  print_body_block(c, body);
  c->in_par = 0;
  c->pf_body = saved_body;
  c->pf_lines = saved_lines;
  var_unbind(c, var);
  P(c, "}\n\n");
  c->b.o = saved;
  c->b.ind = saved_ind;
  tl_buf_putn(&c->funcs, fn.s ? fn.s : "", fn.n);
  tl_buf_free(&fn);
  free(f.used);
  free(f.bound);
  free(f.ubuf);
  free(f.abuf);
}

/* Lanes of the strided and gathered vector loads in e (each lane is a scalar load). */
static int64_t gather_lanes(const tl_ir *ir, tl_ref e) {
  if (!e) return 0;
  int64_t n = 0, k = 0;
  if (tl_ir_op(ir, e) == TL_IR_LOAD && tl_ir_type(ir, e).lanes > 1) {
    tl_ref ix = tl_ir_kid(ir, e, 0);
    if (!(tl_ir_op(ir, ix) == TL_IR_RAMP && tl_ir_is_int(ir, tl_ir_kid(ir, ix, 1), &k) && k == 1))
      n += tl_ir_type(ir, e).lanes;
  }
  for (int i = 0; i < tl_ir_nkids(ir, e); i++) n += gather_lanes(ir, tl_ir_kid(ir, e, i));
  return n;
}

/* Statements in s, two ways.
** STEPS_ALL: once every constant loop in it is unrolled (STEPS_INF when a loop's extent
** is not constant); for pragma_auto_unroll_max_step.
** STEPS_EMITTED: roughly the machine code of one copy of s as GCC will emit it: loops under
** an unroll pragma (UNROLLED, and VECTORIZED up to 64) are replicated, a wider VECTORIZED
** loop counts one per 16 lanes, any other loop's body once; a store counts one plus the lanes
** of its strided or gathered loads (a vector expression is one statement). */
enum { STEPS_ALL, STEPS_EMITTED };

static int64_t steps_of(const tl_ir *ir, tl_ref s, int how) {
  if (!s) return 0;
  int64_t ext, n = 0;
  switch (tl_ir_op(ir, s)) {
  case TL_IR_FOR: {
    n = steps_of(ir, tl_ir_kid(ir, s, 3), how);
    int cext = tl_ir_is_int(ir, tl_ir_kid(ir, s, 2), &ext);
    int64_t copies;
    if (how == STEPS_ALL) {
      if (!cext) return STEPS_INF;
      if (ext <= 0) return 0;
      copies = ext;
    } else {
      if (!cext || ext <= 1) return n + 1;
      /* a VECTORIZED loop still in the IR is one the vectorizer did not turn into vector
      ** expressions: up to 64 it is printed with `#pragma GCC unroll ext` (counted as ext
      ** scalar copies: its accesses are often strided), beyond that GCC vectorizes it
      ** (`ivdep`; one statement per 16 lanes) */
      int kind = tl_for_kind(ir, s);
      copies = kind == TL_FOR_UNROLLED ? ext
             : kind == TL_FOR_VECTORIZED ? (ext <= 64 ? ext : (ext + 15) / 16) : 1;
    }
    if (n >= STEPS_INF / copies) return STEPS_INF;
    return n * copies + (how == STEPS_EMITTED);
  }
  case TL_IR_SEQ:
    for (int i = 0; i < tl_ir_nkids(ir, s); i++) {
      n += steps_of(ir, tl_ir_kid(ir, s, i), how);
      if (n >= STEPS_INF) return STEPS_INF;
    }
    return n;
  case TL_IR_IF:
    return steps_of(ir, tl_ir_kid(ir, s, 1), how) + steps_of(ir, tl_ir_kid(ir, s, 2), how);
  case TL_IR_LET_STMT:
    return steps_of(ir, tl_ir_kid(ir, s, 2), how);
  case TL_IR_ATTR:
    return steps_of(ir, tl_ir_kid(ir, s, 1), how);
  case TL_IR_ALLOC:
    return steps_of(ir, tl_ir_kid(ir, s, 0), how);
  case TL_IR_NOP:
    return 0;
  case TL_IR_STORE:
    return 1 + (how == STEPS_EMITTED ? gather_lanes(ir, tl_ir_kid(ir, s, 0)) : 0);
  default:
    return 1;
  }
}

/* An UNROLLED loop is replicated at most this many statements' worth: a dense_pack
** config unrolling k by 512 around a 100-wide vector loop took GCC 42 s to compile (TVM's
** default build timeout is 10 s). Beyond it the pragma asks for a partial unroll by the
** largest divisor of the extent that fits, or none; smaller bodies are unrolled whole. */
#define UNROLL_BUDGET 1024

static int64_t unroll_factor(const tl_ir *ir, tl_ref body, int64_t ext) {
  int64_t size = steps_of(ir, body, STEPS_EMITTED);
  if (size < 1) size = 1;
  if (size <= UNROLL_BUDGET / ext) return ext;
  for (int64_t f = UNROLL_BUDGET / size; f > 1; f--)
    if (ext % f == 0) return f;
  return 1;
}

static void print_for(cg *c, tl_ref loop) {
  tl_ir *ir = c->b.ir;
  int kind = tl_for_kind(ir, loop), tag = tl_for_tag(ir, loop);
  tl_ref var = tl_ir_kid(ir, loop, 0), ext = tl_ir_kid(ir, loop, 2);
  tl_ref body = tl_ir_kid(ir, loop, 3);
  const char *vname0 = tl_ir_var(ir, var)->name;
  if (kind == TL_FOR_THREAD || kind == TL_FOR_VTHREAD || tag != TL_TAG_NONE) {
    cg_err(c, TL_E_UNSUPPORTED, "loop '%s' is bound to %s: thread and vthread loops need the "
           "OpenCL backend, not C", vname0,
           tag > 0 && tag < 8 ? tl_ir_tagname[tag] : kind == TL_FOR_VTHREAD ? "vthread" : "a thread");
    return;
  }
  if (kind == TL_FOR_PARALLEL && !c->in_par) {
    print_parallel(c, loop);
    return;
  }
  if (!tl_cf_loop_var_ok(&c->b, loop)) return;
  int64_t kext;
  int cext = tl_ir_is_int(ir, ext, &kext);
  if (kind == TL_FOR_UNROLLED && cext && kext > 1 && kext <= 65534) {
    int64_t f = unroll_factor(ir, body, kext);
    if (f > 1) line(c, "#pragma GCC unroll %lld", (long long)f);
  }
  if (kind == TL_FOR_VECTORIZED) {
    if (ivdep_ok(c, loop)) line(c, "#pragma GCC ivdep");
    if (cext && kext > 1 && kext <= 64) line(c, "#pragma GCC unroll %lld", (long long)kext);
  }
  if ((kind == TL_FOR_SERIAL || kind == TL_FOR_PARALLEL) && c->unroll_max > 0 && cext && kext > 1 &&
      kext <= 65534) {
    int64_t steps = steps_of(ir, body, STEPS_ALL);
    if (steps < 1) steps = 1;
    if (steps <= c->unroll_max / kext) line(c, "#pragma GCC unroll %lld", (long long)kext);
  }
  tl_cf_for(&c->b, loop);
}

/* ---- a loop's last iteration apart, its vector operands read at each use -------------
** pragma "peel_reread" on a loop of constant bounds: the loop runs all but its last
** iteration, and the last follows it in a block where each contiguous vector load of a
** kernel argument takes its address through a copy that an empty asm statement marks
** changed. The compiler cannot keep those vectors from the iterations before (or from an
** earlier copy of the block, once unrolled around it) in registers: it reads each at its use,
** as an FMA's memory operand (base-only addressing, so the load stays fused with the FMA). The 1x1 conv's paired tiles on 32 registers
** (targets/x86/templates.c) hold 28 accumulators, a broadcast and three of their four
** kernel vectors; with the fourth hoisted too, GCC kept an accumulator on the stack instead
** (a load and a store per input channel). A marked loop that reads no argument in vectors
** (the tile's init) prints as any other. */
typedef struct { int nbufs, any; char *vec; } reread_scan;

static int reread_fn(const tl_ir *ir, tl_ref r, void *ud) {
  reread_scan *s = ud;
  const tl_node *n = tl_ir_node(ir, r);
  if (n->op == TL_IR_LOAD && n->type.lanes > 1 && n->imm.u < (uint64_t)s->nbufs &&
      tl_ir_buffer(ir, (int)n->imm.u)->arg >= 0)
    s->vec[n->imm.u] = 1, s->any = 1;
  return 1;
}

static void print_peel_reread(cg *c, tl_ref loop) {
  tl_ir *ir = c->b.ir;
  tl_ref var = tl_ir_kid(ir, loop, 0), body = tl_ir_kid(ir, loop, 3);
  int kind = tl_for_kind(ir, loop);
  int64_t kmin, kext;
  if (!tl_ir_is_int(ir, tl_ir_kid(ir, loop, 1), &kmin) || !tl_ir_is_int(ir, tl_ir_kid(ir, loop, 2), &kext) ||
      kext < 2 || (kind != TL_FOR_SERIAL && kind != TL_FOR_UNROLLED) || tl_for_tag(ir, loop) != TL_TAG_NONE) {
    print_for(c, loop);
    return;
  }
  reread_scan sc = {c->b.nbufs, 0, tl_calloc((size_t)(c->b.nbufs > 0 ? c->b.nbufs : 1), 1)};
  tl_ir_visit(ir, body, reread_fn, &sc);
  if (!sc.any) {                          /* nothing to re-read (the tile's init loop): as it is */
    free(sc.vec);
    print_for(c, loop);
    return;
  }
  if (!tl_cf_loop_var_ok(&c->b, loop)) {
    free(sc.vec);
    return;
  }
  if (kind == TL_FOR_UNROLLED && kext > 2) {
    int64_t f = unroll_factor(ir, body, kext - 1);
    if (f > 1) line(c, "#pragma GCC unroll %lld", (long long)f);
  }
  tl_cf_for_upto(&c->b, loop, kext - 1);
  line(c, "{");
  c->b.ind++;
  char ty[32];
  tl_type vt = tl_cf_loop_type(&c->b, tl_ir_type(ir, var));
  decl_type(c, vt, ty);
  indent(c);
  PF(c, "const %s %s = ", ty, var_bind(c, var, kmin >= 0));
  put_int(c, vt, kmin + kext - 1);
  P(c, ";\n");
  const char *saved = c->reread;
  c->reread = sc.vec;
  ps(c, body);
  c->reread = saved;
  free(sc.vec);
  var_unbind(c, var);
  c->b.ind--;
  line(c, "}");
}

static void print_store(cg *c, tl_ref s) {
  tl_cf_store st0;
  if (!tl_cf_store_begin(&c->b, s, &st0)) return;
  const char *bn = st0.bn;
  tl_ref val = st0.val, ix = st0.ix;
  tl_type vt = st0.vt, bt = st0.bt;
  indent(c);
  tl_type st = storage_type(tl_type_lanes(bt, vt.lanes));
  char sv[32];
  vtn(c, st, sv);
  put_vaccess(c, 1, st, sv, bn, ix, 0);
  P(c, ", ");
  if (tl_type_is_bool(bt)) {
    P(c, "__builtin_convertvector(-(");
    pe(c, val, -1);
    PF(c, "), %s)", sv);
  } else {
    pe(c, val, -1);
  }
  P(c, ");\n");
}

static void print_alloc(cg *c, tl_ref s) {
  tl_ir *ir = c->b.ir;
  int b = (int)tl_ir_node(ir, s)->imm.u;
  if (b < 0 || b >= c->b.nbufs) {
    cg_err(c, TL_E_ARG, "allocation of buffer id %d, which does not exist", b);
    return;
  }
  const tl_buffer *buf = tl_ir_buffer(ir, b);
  if (c->b.bscope[b]) {
    cg_err(c, TL_E_ARG, "buffer '%s' is allocated while already in scope (an argument or an "
           "enclosing allocation)", buf->name);
    return;
  }
  tl_type st = storage_type(buf->dtype);
  const char *et = ctype(c, st);
  int64_t n = 1;
  int cst = 1;
  for (int d = 0; d < buf->ndim; d++) {
    int64_t k;
    if (tl_ir_is_int(ir, buf->shape[d], &k)) {
      if (k < 0) k = 0;
      n = (n > 0 && k > INT64_MAX / n) ? INT64_MAX : n * k;
    } else {
      cst = 0;
    }
  }
  line(c, "{");
  c->b.ind++;
  /* sizes are evaluated before the buffer's name is in scope */
  int64_t bytes = cst && n < INT64_MAX / 8 ? n * (st.bits / 8 ? st.bits / 8 : 1) : INT64_MAX;
  buf_bind(c, b);
  const char *bn = c->b.bname[b];
  /* small constant buffers live on the stack whatever their scope (e.g. a
  ** global-scope stage computed at an inner loop): no allocation per
  ** iteration, and the compiler may keep them in registers */
  if (cst && bytes <= (buf->scope != TL_SCOPE_GLOBAL ? STACK_ALLOC_MAX : SMALL_GLOBAL_MAX)) {
    line(c, "%s %s[%lld] __attribute__((aligned(64)));", et, bn, (long long)(n > 0 ? n : 1));
  } else {
    indent(c);
    PF(c, "%s *tlc_heap_%s __attribute__((cleanup(tlc_free))) = (%s *)tlc_alloc(", et, bn, et);
    if (cst) {
      PF(c, "(size_t)%lld", (long long)n);
    } else {
      for (int d = 0; d < buf->ndim; d++) {
        if (d) P(c, " * ");
        P(c, "(size_t)(");
        pe(c, buf->shape[d], -1);
        P(c, ")");
      }
      if (buf->ndim == 0) P(c, "(size_t)1");
    }
    PF(c, ", sizeof(%s));\n", et);
    char what[160];
    snprintf(what, sizeof what, "out of memory allocating buffer %s", bn);
    indent(c);
    PF(c, "if (!tlc_heap_%s) ", bn);
    int saved = c->b.ind;
    c->b.ind = 0;
    put_fail(c, TL_E_NOMEM, what);
    c->b.ind = saved;
    line(c, "%s *restrict %s = tlc_heap_%s;", et, bn, bn);
  }
  ps(c, tl_ir_kid(ir, s, 0));
  c->b.bscope[b]--;
  c->b.ind--;
  line(c, "}");
}

static void ps(cg *c, tl_ref s) {
  if (c->b.err || !s) return;
  tl_ir *ir = c->b.ir;
  int op = tl_ir_op(ir, s);
  if (c->pf_body && s == c->pf_body) {
    P(c, "#if " PREFETCH_CONDITION "\n");
    line(c, "if (tlc_pf_next && tlc_pf < tlc_pf_end) {");
    for (int64_t q = 0; q < c->pf_lines; q++)
      line(c, "  __builtin_prefetch(tlc_pf_next + tlc_pf + %lld, 0, 3);", (long long)(q * 64));
    line(c, "  tlc_pf += %lld;", (long long)(c->pf_lines * 64));
    line(c, "}");
    P(c, "#endif\n");
  }
  switch (op) {
  case TL_IR_FOR:
    print_for(c, s);
    return;
  case TL_IR_STORE:
    print_store(c, s);
    return;
  case TL_IR_ALLOC:
    print_alloc(c, s);
    return;
  case TL_IR_ATTR: {
    const char *key = tl_ir_str(ir, (uint32_t)tl_ir_node(ir, s)->imm.u);
    int64_t v;
    if (strcmp(key, "pragma_auto_unroll_max_step") == 0 &&
        tl_ir_is_int(ir, tl_ir_kid(ir, s, 0), &v)) {
      int64_t saved = c->unroll_max;
      c->unroll_max = v;
      ps(c, tl_ir_kid(ir, s, 1));
      c->unroll_max = saved;
      return;
    }
    if (strcmp(key, "pragma_peel_reread") == 0 && tl_ir_op(ir, tl_ir_kid(ir, s, 1)) == TL_IR_FOR) {
      print_peel_reread(c, tl_ir_kid(ir, s, 1));
      return;
    }
    ps(c, tl_ir_kid(ir, s, 1));   /* other attributes (pragma_unroll_explicit): hints only */
    return;
  }
  case TL_IR_BARRIER:
    cg_err(c, TL_E_UNSUPPORTED, "barrier: thread synchronization needs the OpenCL backend, not C");
    return;
  default:
    tl_cf_stmt(&c->b, s);   /* SEQ, LET_STMT, IF, EVAL, NOP, errors */
    return;
  }
}

/* ---- the entry point -------------------------------------------------------------- */

static const char prelude_fmt[] =
  "/* %s: generated by tunelua's C backend. Entry point:\n"
  "**   int32_t %s(void **args, int32_t nargs);   args[k]: DLTensor *\n"
  "**   const char *%s_error(void);               message of the last failure */\n"
  "#include <math.h>\n"
  "#include <stdarg.h>\n"
  "#include <stdint.h>\n"
  "#include <stdio.h>\n"
  "#include <stdlib.h>\n"
  "#include <string.h>\n"
  "\n"
  "/* Same layout as DLPack's DLTensor (data, device, ndim, dtype, shape,\n"
  "** strides, byte_offset). */\n"
  "typedef struct { int32_t device_type; int32_t device_id; } tlc_device;\n"
  "typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } tlc_dtype;\n"
  "typedef struct {\n"
  "  void *data;\n"
  "  tlc_device device;\n"
  "  int32_t ndim;\n"
  "  tlc_dtype dtype;\n"
  "  int64_t *shape;\n"
  "  int64_t *strides;\n"
  "  uint64_t byte_offset;\n"
  "} tlc_tensor;\n"
  "\n"
  "static char tlc_errbuf[512];\n"
  "\n"
  "__attribute__((format(printf, 2, 3), unused))\n"
  "static int32_t tlc_error(int32_t code, const char *fmt, ...) {\n"
  "  va_list ap;\n"
  "  va_start(ap, fmt);\n"
  "  vsnprintf(tlc_errbuf, sizeof tlc_errbuf, fmt, ap);\n"
  "  va_end(ap);\n"
  "  return code;\n"
  "}\n"
  "\n"
  "__attribute__((unused))\n"
  "static int32_t tlc_arg_error(int32_t code, const char *fn, int k, const char *name,\n"
  "                             const char *expect, const tlc_tensor *t) {\n"
  "  char got[320];\n"
  "  size_t n = 0;\n"
  "  int c = t->dtype.code, bits = t->dtype.bits;\n"
  "  if (c == 1 && bits == 1) n += (size_t)snprintf(got, sizeof got, \"bool\");\n"
  "  else n += (size_t)snprintf(got, sizeof got, \"%%s%%d\", c == 0 ? \"int\" : c == 1 ? \"uint\" :\n"
  "                             c == 2 ? \"float\" : \"type\", bits);\n"
  "  if (t->dtype.lanes != 1) n += (size_t)snprintf(got + n, sizeof got - n, \"x%%d\", (int)t->dtype.lanes);\n"
  "  n += (size_t)snprintf(got + n, sizeof got - n, \" (\");\n"
  "  for (int d = 0; d < t->ndim && d < 16 && n < sizeof got - 32; d++)\n"
  "    n += (size_t)snprintf(got + n, sizeof got - n, d ? \", %%lld\" : \"%%lld\", (long long)t->shape[d]);\n"
  "  snprintf(got + n, sizeof got - n, t->ndim == 1 ? \",)\" : \")\");\n"
  "  return tlc_error(code, \"%%s: argument %%d (%%s): expected %%s, got %%s\", fn, k, name, expect, got);\n"
  "}\n"
  "\n"
  "__attribute__((unused))\n"
  "static int32_t tlc_check_arg(const char *fn, int k, const char *name, const char *expect,\n"
  "                             const tlc_tensor *t, int code, int bits, int ndim,\n"
  "                             const int64_t *shape) {\n"
  "  if (!t) return tlc_error(%d, \"%%s: argument %%d (%%s) is NULL\", fn, k, name);\n"
  "  if (t->device.device_type != 1)\n"
  "    return tlc_error(%d, \"%%s: argument %%d (%%s) is on device type %%d, expected the CPU (1)\",\n"
  "                     fn, k, name, (int)t->device.device_type);\n"
  "  if (t->dtype.code != code || t->dtype.bits != bits || t->dtype.lanes != 1)\n"
  "    return tlc_arg_error(%d, fn, k, name, expect, t);\n"
  "  if (t->ndim != ndim) return tlc_arg_error(%d, fn, k, name, expect, t);\n"
  "  int64_t numel = 1;\n"
  "  for (int d = 0; d < ndim; d++) {\n"
  "    if (t->shape[d] < 0 || (shape[d] >= 0 && t->shape[d] != shape[d]))\n"
  "      return tlc_arg_error(%d, fn, k, name, expect, t);\n"
  "    numel *= t->shape[d];\n"
  "  }\n"
  "  if (t->strides) {\n"
  "    int64_t s = 1;\n"
  "    for (int d = ndim - 1; d >= 0; d--) {\n"
  "      if (t->shape[d] != 1 && t->strides[d] != s)\n"
  "        return tlc_error(%d, \"%%s: argument %%d (%%s) is not compact (row-major strides expected)\",\n"
  "                         fn, k, name);\n"
  "      s *= t->shape[d];\n"
  "    }\n"
  "  }\n"
  "  if (!t->data && numel > 0) return tlc_error(%d, \"%%s: argument %%d (%%s) has no data\", fn, k, name);\n"
  "  return 0;\n"
  "}\n"
  "\n"
  "/* Intermediate buffers: the calling thread's workspace in libtunelua when the process has\n"
  "** it (core/base/workspace.c; freed in reverse order, by scope), else the heap. */\n"
  "extern void *tl_workspace_alloc(size_t bytes)\n"
  "    __attribute__((weak, malloc, alloc_size(1), assume_aligned(64)));\n"
  "extern void tl_workspace_pop(void) __attribute__((weak));\n"
  "\n"
  "__attribute__((unused)) static void tlc_free(void *p) {\n"
  "  if (tl_workspace_alloc && tl_workspace_pop) tl_workspace_pop();\n"
  "  else free(*(void **)p);\n"
  "}\n"
  "\n"
  "__attribute__((unused, malloc))\n"
  "static void *tlc_alloc(size_t n, size_t size) {\n"
  "  if (size && n > SIZE_MAX / size - 64) return NULL;\n"
  "  size_t bytes = (n * size + 63) & ~(size_t)63;\n"
  "  if (tl_workspace_alloc && tl_workspace_pop) return tl_workspace_alloc(bytes ? bytes : 64);\n"
  "  return aligned_alloc(64, bytes ? bytes : 64);\n"
  "}\n"
  "\n";

static const char parallel_prelude[] =
  "/* From libtunelua when the process has it; else parallel loops run serially. */\n"
  "extern void *tl_pool_global(void) __attribute__((weak));\n"
  "extern void tl_pool_for(void *pool, int64_t n, void (*fn)(int64_t, void *), void *arg)\n"
  "    __attribute__((weak));\n"
  "\n"
  "static void tlc_parallel(int64_t n, void (*fn)(int64_t, void *), void *arg) {\n"
  "  if (n <= 0) return;\n"
  "  if (n > 1 && tl_pool_for && tl_pool_global) {\n"
  "    tl_pool_for(tl_pool_global(), n, fn, arg);\n"
  "  } else {\n"
  "    for (int64_t i = 0; i < n; i++) fn(i, arg);\n"
  "  }\n"
  "}\n"
  "\n";

static int valid_ident(const char *s) {
  if (!s || !*s || strlen(s) > 200) return 0;
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' ||
          (*p >= '0' && *p <= '9')))
      return 0;
  return 1;
}

static int has_parallel_fn(const tl_ir *ir, tl_ref r, void *ud) {
  if (tl_ir_op(ir, r) == TL_IR_FOR && tl_for_kind(ir, r) == TL_FOR_PARALLEL) *(int *)ud = 1;
  return !*(int *)ud && tl_ir_is_stmt(ir, r);
}

/* Argument checks and bindings, into c->b.o. */
static void print_args(cg *c) {
  tl_ir *ir = c->b.ir;
  const tl_lowered *f = c->b.f;
  const char *fn = f->name;
  line(c, "if (nargs != %d) return tlc_error(%d, \"%s: expected %d arguments, got %%d\", "
       "(int)nargs);", f->nargs, TL_E_ARG, fn, f->nargs);
  if (f->nargs > 0) line(c, "if (!args) return tlc_error(%d, \"%s: args is NULL\");", TL_E_ARG, fn);
  typedef struct {
    int k, d;
    tl_ref e;
  } deferred;
  TL_VEC(deferred) later = {0};
  for (int k = 0; k < f->nargs && !c->b.err; k++) {
    int b = f->arg_bufs[k];
    if (b < 0 || b >= c->b.nbufs) {
      cg_err(c, TL_E_ARG, "argument %d: buffer id %d does not exist", k, b);
      break;
    }
    if (c->b.bscope[b]) {
      cg_err(c, TL_E_ARG, "buffer '%s' is passed as two arguments", tl_ir_buffer(ir, b)->name);
      break;
    }
    const tl_buffer *buf = tl_ir_buffer(ir, b);
    tl_type dt = buf->dtype;
    if (dt.lanes != 1 || !ctype_or_null(dt) || dt.code == TL_TC_HANDLE) {
      char tb[32];
      cg_err(c, TL_E_DTYPE, "argument %d (%s): dtype %s cannot be a kernel argument", k,
             buf->name, tl_type_str(dt, tb));
      break;
    }
    buf_bind(c, b);
    const char *bn = c->b.bname[b];
    tl_buf expect = {0};
    char tb[32];
    tl_buf_printf(&expect, "%s ", tl_type_str(dt, tb));
    /* use the IR names in the message; fresh_name above only reserves */
    tl_buf_puts(&expect, "(");
    for (int d = 0; d < buf->ndim; d++) {
      int64_t kk;
      if (d) tl_buf_puts(&expect, ", ");
      if (tl_ir_is_int(ir, buf->shape[d], &kk)) {
        tl_buf_printf(&expect, "%lld", (long long)kk);
      } else {
        /* the IR's own rendering, made safe for a string literal */
        char *txt = tl_ir_print(ir, buf->shape[d]);
        for (const char *p = txt; *p && p - txt < 80; p++)
          tl_buf_putn(&expect, (*p == '"' || *p == '\\' || (unsigned char)*p < 32) ? "_" : p, 1);
        free(txt);
      }
    }
    tl_buf_puts(&expect, buf->ndim == 1 ? ",)" : ")");
    line(c, "const tlc_tensor *tlc_t%d = (const tlc_tensor *)args[%d];", k, k);
    indent(c);
    PF(c, "static const int64_t tlc_shape%d[%d] = {", k, buf->ndim > 0 ? buf->ndim : 1);
    for (int d = 0; d < buf->ndim; d++) {
      int64_t kk;
      PF(c, d ? ", %lld" : "%lld",
         tl_ir_is_int(ir, buf->shape[d], &kk) ? (long long)(kk < 0 ? 0 : kk) : -1LL);
    }
    if (buf->ndim == 0) P(c, "0");
    P(c, "};\n");
    line(c, "static const char tlc_expect%d[] = \"%s\";", k, expect.s);
    line(c, "{ int32_t tlc_rc = tlc_check_arg(\"%s\", %d, \"%s\", tlc_expect%d, tlc_t%d, %d, %d, "
         "%d, tlc_shape%d); if (tlc_rc) return tlc_rc; }", fn, k, bn, k, k, dt.code, dt.bits, buf->ndim, k);
    for (int d = 0; d < buf->ndim; d++) {
      tl_ref e = buf->shape[d];
      if (tl_ir_op(ir, e) == TL_IR_INT) continue;
      if (tl_ir_op(ir, e) == TL_IR_VAR && !c->b.vbound[var_id(c, e)]) {
        tl_type vt = tl_ir_type(ir, e);
        if (!tl_type_is_int(vt) || vt.lanes != 1) {
          cg_err(c, TL_E_ARG, "shape variable '%s' of argument %d is not an integer",
                 tl_ir_var(ir, e)->name, k);
          break;
        }
        if (vt.bits < 64)
          line(c, "if (tlc_t%d->shape[%d] > (int64_t)%s) return tlc_arg_error(%d, \"%s\", %d, "
               "\"%s\", tlc_expect%d, tlc_t%d);", k, d, vt.bits == 32 ? "INT32_MAX" : vt.bits == 16 ?
               "INT16_MAX" : "INT8_MAX", TL_E_SHAPE, fn, k, bn, k, k);
        const char *vn = var_bind(c, e, 1);
        line(c, "%s %s = (%s)tlc_t%d->shape[%d];", ctype(c, vt), vn, ctype(c, vt), k, d);
        continue;
      }
      deferred dd = {k, d, e};
      TL_VEC_PUSH(later, dd);
    }
    tl_buf_free(&expect);
  }
  for (int i = 0; i < later.n && !c->b.err; i++) {
    deferred *dd = &later.v[i];
    indent(c);
    PF(c, "if (tlc_t%d->shape[%d] != (int64_t)(", dd->k, dd->d);
    pe(c, dd->e, -1);
    PF(c, ")) return tlc_arg_error(%d, \"%s\", %d, \"%s\", tlc_expect%d, tlc_t%d);\n",
       TL_E_SHAPE, fn, dd->k, c->b.bname[f->arg_bufs[dd->k]], dd->k, dd->k);
  }
  TL_VEC_FREE(later);
  for (int k = 0; k < f->nargs && !c->b.err; k++) {
    int b = f->arg_bufs[k];
    const char *et = ctype(c, storage_type(tl_ir_buffer(ir, b)->dtype));
    line(c, "%s *restrict %s = (%s *)((char *)tlc_t%d->data + tlc_t%d->byte_offset);", et,
         c->b.bname[b], et, k, k);
  }
}

/* ---- what C says differently (cfamily.h) ------------------------------------------ */

static int h_reserved_prefix(const char *b) {
  return strncmp(b, "tlc_", 4) == 0;
}
static void h_ps(tl_cf *b, tl_ref s) { ps((cg *)b, s); }
static const char *h_decl_type(tl_cf *b, tl_type t, char *buf) { return decl_type((cg *)b, t, buf); }

static const tl_cf_lang c_lang = {
  .who = "codegen_c",
  .unbound_hint = "not a loop variable, let or argument shape variable in scope",
  .reserved = reserved_words,
  .nreserved = (int)TL_ARRAY_SIZE(reserved_words),
  .reserved_prefix = h_reserved_prefix,
  .decl_type = h_decl_type,
  .wide_loop_var = 1,
  .bool_lit = {"0", "1"},
  .int64_fmt = "INT64_C(%lld)",
  .int64_min = "(-INT64_C(9223372036854775807) - 1)",
  .uint64_fmt = "UINT64_C(%llu)",
  .half_name = "_Float16",
  .paren_f64 = 0,
  .lane_fmt = "%s[%d]",
  .vec_open = "{",
  .vec_close = "}",
  .bool_lane = "-(int32_t)",   /* bool vectors are -1/0 masks */
  .scalar_operand = 1,         /* GCC: vector OP scalar widens the scalar */
  .bool_load_ne0 = 0,
  .bool_store_cast = "(uint8_t)(",
  .vec_whole = NULL,
  .vec_ramp = h_vec_ramp,
  .vec_bcast = h_vec_bcast,
  .vec_load = h_vec_load,
  .vec_cast = h_vec_cast,
  .vec_select = h_vec_select,
  .vec_cmp = h_vec_cmp,
  .binop = h_binop,
  .call = h_call,
  .let = h_let,
  .ps = h_ps,
};

int tl_codegen_c(tl_ctx *ctx, const tl_lowered *f, tl_buf *out) {
  return tl_codegen_c_width(ctx, f, 0, out);
}

int tl_codegen_c_width(tl_ctx *ctx, const tl_lowered *f, int max_bytes, tl_buf *out) {
  if (!f || !f->ir || !out) return tl_err(ctx, TL_E_ARG, "codegen_c: NULL function or output");
  if (!valid_ident(f->name) || strncmp(f->name, "tlc_", 4) == 0)
    return tl_err(ctx, TL_E_ARG, "codegen_c: kernel name '%s' is not a C identifier (or uses the "
                  "reserved prefix tlc_)", f->name ? f->name : "(null)");
  if (f->nargs < 0 || (f->nargs > 0 && !f->arg_bufs))
    return tl_err(ctx, TL_E_ARG, "codegen_c: %s: bad argument list", f->name);
  if (!f->body || f->body >= (tl_ref)f->ir->nodes.n || !tl_ir_is_stmt(f->ir, f->body))
    return tl_err(ctx, TL_E_ARG, "codegen_c: %s: the body is not a statement", f->name);

  tl_ir *ir = f->ir;
  int nsplit = 0;
  tl_ref body = tl_codegen_vectorize_to(ir, f->body, max_bytes > 0 ? max_bytes : NATIVE_BYTES, &nsplit);
  tl_ref wide = nsplit && max_bytes <= 0 ? tl_codegen_vectorize_to(ir, f->body, NATIVE_BYTES_WIDE, NULL)
                                         : TL_NOREF;

  cg c;
  memset(&c, 0, sizeof c);
  tl_cf_init(&c.b, &c_lang, ctx, f);
  TL_VEC_PUSH(c.b.names, tl_sprintf("%s_error", f->name));

  int par = 0;
  tl_ir_visit(ir, body, has_parallel_fn, &par);

  tl_buf mainb = {0};
  c.b.o = &mainb;
  c.b.ind = 1;
  print_args(&c);
  if (par) line(&c, "int32_t tlc_failed = 0;");
  if (wide) {
    /* vectors split for the machine the compiler builds for */
    line(&c, "#if " WIDE_CONDITION);
    tl_buf_puts(&c.funcs, "#if " WIDE_CONDITION "\n");
    ps(&c, wide);
    line(&c, "#else");
    tl_buf_puts(&c.funcs, "#else\n");
    ps(&c, body);
    line(&c, "#endif");
    tl_buf_puts(&c.funcs, "#endif\n");
  } else {
    ps(&c, body);
  }

  int rc = c.b.err;
  if (!rc) {
    tl_buf_printf(out, prelude_fmt, f->name, f->name, f->name, TL_E_ARG, TL_E_ARG, TL_E_DTYPE,
                  TL_E_SHAPE, TL_E_SHAPE, TL_E_ARG, TL_E_ARG);
    if (par) tl_buf_puts(out, parallel_prelude);
    if (c.helpers.n > 0) qsort(c.helpers.v, (size_t)c.helpers.n, sizeof(uint64_t), key_cmp);
    int ntypedef = 0;
    for (int i = 0; i < c.helpers.n; i++) {
      if ((c.helpers.v[i] >> 32) != H_TYPEDEF && ntypedef && i > 0 &&
          (c.helpers.v[i - 1] >> 32) == H_TYPEDEF)
        tl_buf_puts(out, "\n");
      if ((c.helpers.v[i] >> 32) == H_TYPEDEF) ntypedef++;
      emit_helper(out, c.helpers.v[i]);
    }
    if (c.helpers.n) tl_buf_puts(out, "\n");
    if (c.funcs.n) tl_buf_putn(out, c.funcs.s, c.funcs.n);
    tl_buf_printf(out, "__attribute__((visibility(\"default\")))\nint32_t %s(void **args, int32_t "
                  "nargs) {\n", f->name);
    if (mainb.n) tl_buf_putn(out, mainb.s, mainb.n);
    tl_buf_printf(out, "  return 0;\n}\n\n__attribute__((visibility(\"default\")))\nconst char "
                  "*%s_error(void) { return tlc_errbuf; }\n", f->name);
  }
  tl_buf_free(&mainb);
  tl_buf_free(&c.funcs);
  TL_VEC_FREE(c.helpers);
  tl_cf_free(&c.b);
  return rc;
}
