/*
** cfamily.h -- what the C and OpenCL C printers (c.c, opencl.c) share.
**
** Both backends print the same loop IR as a C-family language; they differ in
** type names, literals, vector loads/stores, intrinsics and thread indices.
** A printer's state struct starts with a tl_cf (the common part: output,
** indentation, first error, variable and buffer names); its tl_cf_lang table
** holds what differs, as data (literal formats, lane syntax) and as hooks
** (vector forms, helpers, intrinsics). The functions here print everything
** that is the same: every expression (tl_cf_expr, which asks the table only
** for a backend's own forms), naming, scoping, error reporting, the serial
** for-loop, and the statements SEQ, LET_STMT, IF, EVAL and the scalar store.
*/
#ifndef TL_CODEGEN_CFAMILY_H
#define TL_CODEGEN_CFAMILY_H

#include "codegen.h"

typedef struct tl_cf tl_cf;

/* One backend's differences. Hooks on vectors are called only for a vector
** printed whole (lane -1) whose node vec_whole accepts; a NULL vec_select or
** vec_cmp prints those lane by lane. */
typedef struct tl_cf_lang {
  /* names and messages */
  const char *who;                /* error prefix: "codegen_c", "codegen_opencl" */
  const char *unbound_hint;       /* why a variable may be unbound (message tail) */
  const char *const *reserved;    /* identifiers generated code must not take */
  int nreserved;
  int (*reserved_prefix)(const char *base);   /* 1: base needs a v_ prefix */
  /* types: the declared type of a scalar or vector value (buf: 32 bytes) */
  const char *(*decl_type)(tl_cf *c, tl_type t, char *buf);
  /* 1: loop variables of a narrower signed integer type are declared 64-bit
  ** (tl_cf_loop_type). The C backend does, so an index such as
  ** (ic * 6272 + oh * 448) + ow * 32 + c is computed at pointer width: with int32 the
  ** compiler keeps each unrolled position's index in its own register, sign-extended,
  ** instead of one base address with constant offsets */
  int wide_loop_var;
  /* literals */
  const char *bool_lit[2];        /* false, true */
  const char *int64_fmt;          /* an int64 from %lld */
  const char *int64_min;          /* INT64_MIN */
  const char *uint64_fmt;         /* a uint64 from %llu */
  const char *half_name;          /* float16 in casts */
  int paren_f64;                  /* float64 literals always in parentheses */
  /* lanes */
  const char *lane_fmt;           /* lane %d of vector variable %s */
  const char *vec_open, *vec_close;   /* a vector from lanes: ((type)<open>l0, l1<close>) */
  const char *bool_lane;          /* before each lane of a bool vector from lanes */
  int scalar_operand;             /* float32/64 arithmetic takes a broadcast operand as its
                                  ** scalar (cast to the element type) beside a vector */
  /* memory */
  int bool_load_ne0;              /* a scalar load of a bool buffer reads (b[i] != 0) */
  const char *bool_store_cast;    /* cast of a value stored into a bool buffer */
  /* the backend's own expression forms */
  int (*vec_whole)(tl_cf *c, tl_ref e);        /* vector e printed whole (NULL: always) */
  void (*vec_ramp)(tl_cf *c, tl_ref e);
  void (*vec_bcast)(tl_cf *c, tl_ref e);
  void (*vec_load)(tl_cf *c, tl_ref e, const char *bn, tl_ref ix);
  void (*vec_cast)(tl_cf *c, tl_ref e);
  void (*vec_select)(tl_cf *c, tl_ref e);      /* SELECT on a vector condition */
  void (*vec_cmp)(tl_cf *c, tl_ref e);
  /* MIN, MAX, FLOORDIV, FLOORMOD where no C operator does (see tl_cf_expr) */
  void (*binop)(tl_cf *c, int op, tl_type t, tl_ref a, tl_ref b, int lane, int vec);
  void (*call)(tl_cf *c, tl_ref e, int lane, int vec);   /* intrinsics */
  void (*let)(tl_cf *c, tl_ref e, int lane);   /* LET expression (NULL: substituted) */
  /* statements: the backend's dispatch (it hands the shared kinds to tl_cf_stmt) */
  void (*ps)(tl_cf *c, tl_ref s);
} tl_cf_lang;

struct tl_cf {
  const tl_cf_lang *h;
  tl_ctx *ctx;
  tl_ir *ir;
  const tl_lowered *f;
  tl_buf *o;                      /* where statements go now */
  int ind;                        /* indentation level */
  int err;                        /* first error, TL_OK if none */
  char **vname;                   /* var id -> name (NULL until bound) */
  int *vbound;                    /* var id -> binding depth */
  uint8_t *nonneg;                /* var id -> known >= 0 */
  int nvars;
  char **bname;                   /* buffer id -> name */
  int *bscope;                    /* buffer id -> declared in scope */
  int nbufs;
  TL_VEC(char *) names;           /* every identifier taken */
  int fp16, fp64;                 /* a float16 / float64 literal was printed */
};

/* Set up c for f (names: the reserved words and f->name); tl_cf_free frees. */
void tl_cf_init(tl_cf *c, const tl_cf_lang *h, tl_ctx *ctx, const tl_lowered *f);
void tl_cf_free(tl_cf *c);

void tl_cf_err(tl_cf *c, int code, const char *fmt, ...) TL_PRINTF(3, 4);
void tl_cf_indent(tl_cf *c);
void tl_cf_line(tl_cf *c, const char *fmt, ...) TL_PRINTF(2, 3);

int tl_cf_name_taken(const tl_cf *c, const char *s);
const char *tl_cf_fresh_name(tl_cf *c, const char *base);
int tl_cf_var_id(const tl_cf *c, tl_ref v);
const char *tl_cf_var_bind(tl_cf *c, tl_ref v, int nonneg);
void tl_cf_var_unbind(tl_cf *c, tl_ref v);
const char *tl_cf_var_use_id(tl_cf *c, int id);
const char *tl_cf_buf_use(tl_cf *c, int b);
void tl_cf_buf_bind(tl_cf *c, int b);
int64_t tl_cf_const_divisor(tl_cf *c, tl_ref b);
int tl_cf_nonneg(tl_cf *c, tl_ref e);            /* known >= 0 (conservative) */

/* A serial loop: `for (ty v = min, ...; v < ...; ++v) {`, the body one level
** deeper and `}`; constant bounds inline, others evaluated once into v and
** v_end. tl_cf_loop_var_ok reports a loop variable that is not a scalar
** integer (returns 0). tl_cf_for_upto prints a loop of constant bounds over its first
** n iterations only. */
int tl_cf_loop_var_ok(tl_cf *c, tl_ref loop);
void tl_cf_for(tl_cf *c, tl_ref loop);
void tl_cf_for_upto(tl_cf *c, tl_ref loop, int64_t n);
/* The type a loop variable of type t is declared with: 64-bit where the backend widens
** narrower signed ones (tl_cf_lang.wide_loop_var), else t. */
tl_type tl_cf_loop_type(const tl_cf *c, tl_type t);

/* Print expression e; lane >= 0 prints that lane of a vector as a scalar.
** Every operation is fully parenthesized. The shared forms: literals (from
** the table's formats), variables, the scalar lane of a ramp or broadcast,
** scalar loads and casts, ?: (a scalar condition, or one lane), !, &&, ||
** (on whole vectors: ~, &, |, the lane masks), comparisons and the C
** operators (tl_cf_infix); floordiv/floormod of unsigned integers and of
** signed ones by constants (tl_cf_int_floordiv); everything else goes to
** the table's hooks. A vector node that vec_whole refuses, and an
** if_then_else on a vector condition, are printed lane by lane
** (tl_cf_lanes), each lane evaluating only its own operands. */
void tl_cf_expr(tl_cf *c, tl_ref e, int lane);
void tl_cf_lanes(tl_cf *c, tl_ref e);

/* An integer literal of type t (lanes ignored): int32 plain (negative ones
** parenthesized), int64 and uint64 in the table's formats, others cast. */
void tl_cf_put_int(tl_cf *c, tl_type t, int64_t v);

/* A floating-point literal of type t: NAN/INFINITY with a cast, %.9g or
** %.17g digits (with a ".0" where they would read as an integer), an f
** suffix for float32, float16 cast to the table's half_name; float64
** literals are parenthesized when negative, or always with paren_f64.
** Sets c->fp16 / c->fp64. */
void tl_cf_put_float(tl_cf *c, tl_type t, double v);

/* The C operator of comparison op ("==" ... ">="). */
const char *tl_cf_cmp_sym(int op);

/* Binary arithmetic. tl_cf_infix_sym: the C operator of ADD ... BITXOR and of
** TRUNCDIV/TRUNCMOD on integers (on floats: an error), else NULL.
** tl_cf_int_floordiv: FLOORDIV/FLOORMOD on signed integers by a positive
** power-of-two constant printed as shift/mask (returns 1); by another positive
** constant of a non-negative dividend *sym = "/" or "%" (returns 0); else
** *sym stays NULL. tl_cf_infix prints (a sym b), wrapped back to the IR's
** type for scalar integers narrower than int. */
const char *tl_cf_infix_sym(tl_cf *c, int op, tl_type et);
int tl_cf_int_floordiv(tl_cf *c, int op, tl_type et, tl_ref a, tl_ref b, int lane,
                       const char **sym);
void tl_cf_infix(tl_cf *c, const char *sym, tl_type et, tl_ref a, tl_ref b, int lane, int vec);

/* Statements printed alike by both backends: SEQ, LET_STMT, IF, EVAL, NOP;
** anything else is an error (a backend prints its own kinds first).
** tl_cf_block prints a statement one level deeper. */
void tl_cf_stmt(tl_cf *c, tl_ref s);
void tl_cf_block(tl_cf *c, tl_ref body);

/* The common start of a STORE: checks the index, prints a scalar store and
** returns 0 (also on error); for a vector store fills the parts and returns 1
** (lanes of value and index agree). */
typedef struct tl_cf_store {
  int b;                          /* buffer id */
  const char *bn;                 /* its name */
  tl_ref val, ix;
  tl_type vt, it, bt;             /* value, index and buffer element types */
} tl_cf_store;
int tl_cf_store_begin(tl_cf *c, tl_ref s, tl_cf_store *st);

/* Shorthands for a printer whose state struct has `tl_cf b` as its first
** member, named c: P(c, "text"), PF(c, fmt, ...), cg_err(c, code, fmt, ...),
** line(c, fmt, ...), pe(c, e, lane), put_int(c, t, v) and the name and scope helpers above. */
#ifndef TL_CF_NO_SHORTHANDS
#define P(c, s) tl_buf_puts((c)->b.o, s)
#define PF(c, ...) tl_buf_printf((c)->b.o, __VA_ARGS__)
#define cg_err(c, ...) tl_cf_err(&(c)->b, __VA_ARGS__)
#define indent(c) tl_cf_indent(&(c)->b)
#define line(c, ...) tl_cf_line(&(c)->b, __VA_ARGS__)
#define pe(c, e, lane) tl_cf_expr(&(c)->b, e, lane)
#define put_int(c, t, v) tl_cf_put_int(&(c)->b, t, v)
#define fresh_name(c, base) tl_cf_fresh_name(&(c)->b, base)
#define var_id(c, v) tl_cf_var_id(&(c)->b, v)
#define var_bind(c, v, nn) tl_cf_var_bind(&(c)->b, v, nn)
#define var_unbind(c, v) tl_cf_var_unbind(&(c)->b, v)
#define var_use_id(c, id) tl_cf_var_use_id(&(c)->b, id)
#define var_use(c, v) tl_cf_var_use_id(&(c)->b, tl_cf_var_id(&(c)->b, v))
#define buf_use(c, bid) tl_cf_buf_use(&(c)->b, bid)
#define buf_bind(c, bid) tl_cf_buf_bind(&(c)->b, bid)
#define const_divisor(c, e) tl_cf_const_divisor(&(c)->b, e)
#define nonneg(c, e) tl_cf_nonneg(&(c)->b, e)
#define print_body_block(c, body) tl_cf_block(&(c)->b, body)
#endif

#endif
