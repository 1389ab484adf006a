/*
** cfamily.h -- what the C and OpenCL C printers (c.c, opencl.c) share.
**
** Both backends print the same loop IR as a C-family language; they differ in
** type names, literals, vector loads/stores, intrinsics and thread indices.
** A printer's state struct starts with a tl_cf (the common part: output,
** indentation, first error, variable and buffer names) whose hooks say what
** differs; the functions here do the identical parts (naming, scoping, error
** reporting, the serial for-loop header, the scalar store) for both.
*/
#ifndef TL_CODEGEN_CFAMILY_H
#define TL_CODEGEN_CFAMILY_H

#include "codegen.h"

typedef struct tl_cf tl_cf;

typedef struct tl_cf_hooks {
  const char *who;                /* error prefix: "codegen_c", "codegen_opencl" */
  const char *unbound_hint;       /* why a variable may be unbound (message tail) */
  const char *bool_store_cast;    /* cast of a value stored into a bool buffer */
  const char *const *reserved;    /* identifiers generated code must not take */
  int nreserved;
  int (*reserved_prefix)(const char *base);   /* 1: base needs a v_ prefix */
  void (*pe)(tl_cf *c, tl_ref e, int lane);   /* print an expression (lane -1: whole) */
  void (*put_int)(tl_cf *c, tl_type t, int64_t v);
  void (*ps)(tl_cf *c, tl_ref s);             /* print a statement */
  const char *(*decl_type)(tl_cf *c, tl_type t, char *buf);   /* buf: 32 bytes */
} tl_cf_hooks;

struct tl_cf {
  const tl_cf_hooks *h;
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
};

/* Set up c for f (names: the reserved words and f->name); tl_cf_free frees. */
void tl_cf_init(tl_cf *c, const tl_cf_hooks *h, tl_ctx *ctx, const tl_lowered *f);
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

/* `for (ty v = min, ...; v < ...; ++v) {` at the current indentation: constant
** bounds inline, others evaluated once into v and v_end. Binds var. */
void tl_cf_for_header(tl_cf *c, tl_ref loop, const char *ty);

/* A floating-point literal of type t: NAN/INFINITY with a cast, %.9g or
** %.17g digits (with a ".0" where they would read as an integer), an f
** suffix for float32, float16 cast to half_name; float64 literals are
** parenthesized when negative, or always with paren_f64. */
void tl_cf_put_float(tl_cf *c, tl_type t, double v, const char *half_name, int paren_f64);

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
** line(c, fmt, ...) and the name and scope helpers above. */
#ifndef TL_CF_NO_SHORTHANDS
#define P(c, s) tl_buf_puts((c)->b.o, s)
#define PF(c, ...) tl_buf_printf((c)->b.o, __VA_ARGS__)
#define cg_err(c, ...) tl_cf_err(&(c)->b, __VA_ARGS__)
#define indent(c) tl_cf_indent(&(c)->b)
#define line(c, ...) tl_cf_line(&(c)->b, __VA_ARGS__)
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
