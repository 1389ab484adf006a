/*
** partition.c -- loop partitioning (core/te/partition.h).
**
** A kernel that reads a padded input through guards (a padding stage
** inlined into its consumer: if_then_else(in bounds, data[...], 0)) pays the
** guard on every load, or needs a padded copy of the input. Splitting the
** loop over output positions into border and interior ranges leaves the
** guards on the border iterations only: in the interior the simplifier
** proves them from the loop ranges and removes them, so the interior is the
** unguarded vectorized loop over the unpadded input.
**
** Only loops the schedule marks (pragma "loop_partition") are touched, so
** other kernels lower as before.
*/
#include "partition.h"

#include <string.h>

#define PART_KEY "pragma_loop_partition"
#define PART_EACH_KEY "pragma_loop_partition_each"
#define EACH_MAX 8                /* border values split one by one, at most, per side */

typedef struct part_st {
  tl_ir *ir;
  TL_VEC(tl_range) outer;         /* ranges of the loops around the current statement */
} part_st;

typedef struct atoms_st {
  const tl_ir *ir;
  tl_ref var;
  TL_VEC(tl_ref) atoms;           /* guard conjuncts reading var */
  tl_rangemap *inner;             /* ranges of the loops inside (NULL: not collected) */
} atoms_st;

static void add_atoms(atoms_st *a, tl_ref c) {
  const tl_ir *ir = a->ir;
  if (tl_ir_op(ir, c) == TL_IR_AND) {
    add_atoms(a, tl_ir_kid(ir, c, 0));
    add_atoms(a, tl_ir_kid(ir, c, 1));
    return;
  }
  if (!tl_ir_uses_var(ir, c, a->var)) return;
  for (int i = 0; i < a->atoms.n; i++)
    if (a->atoms.v[i] == c) return;
  TL_VEC_PUSH(a->atoms, c);
}

static int atoms_fn(const tl_ir *ir, tl_ref node, void *ud) {
  atoms_st *a = ud;
  switch (tl_ir_op(ir, node)) {
  case TL_IR_IF: case TL_IR_IF_THEN_ELSE: case TL_IR_SELECT:
    add_atoms(a, tl_ir_kid(ir, node, 0));
    break;
  case TL_IR_FOR:
    if (a->inner) tl_rangemap_set(a->inner, tl_ir_kid(ir, node, 0), tl_ir_kid(ir, node, 1), tl_ir_kid(ir, node, 2));
    break;
  default:
    break;
  }
  return 1;
}

static tl_ref part_stmt(part_st *P, tl_ref s);
static tl_ref unswitch(tl_ir *ir, tl_ref b, tl_rangemap *known, int depth);

/* x is the float zero (a scalar or a broadcast). */
static int is_fzero(const tl_ir *ir, tl_ref x) {
  double d;
  if (tl_ir_op(ir, x) == TL_IR_BROADCAST) x = tl_ir_kid(ir, x, 0);
  return tl_ir_is_float(ir, x, &d) && d == 0.0;
}

/* e is if_then_else(c, x, 0) with c proven false under known. */
static int zero_guarded(tl_ir *ir, tl_ref e, const tl_rangemap *known) {
  return tl_ir_op(ir, e) == TL_IR_IF_THEN_ELSE && is_fzero(ir, tl_ir_kid(ir, e, 2)) &&
         tl_ir_prove(ir, tl_ir_kid(ir, e, 0), known) == 0;
}

/* An accumulation that adds the padding: buf[i] = buf[i] + if_then_else(c, x, 0) * y
** (either order of the operands) with c proven false in this piece of the loop: the
** border taps of a conv that reads its input through guards. Dropped (a no-op; the
** padded copy's 0 * y added zero for every finite weight y). */
static tl_ref drop_zero_fn(tl_ir *ir, tl_ref node, void *ud) {
  const tl_rangemap *known = ud;
  if (tl_ir_op(ir, node) != TL_IR_STORE) return node;
  int n = tl_ir_nkids(ir, node);
  tl_ref v = tl_ir_kid(ir, node, 0);
  if (tl_ir_op(ir, v) != TL_IR_ADD) return node;
  for (int side = 0; side < 2; side++) {
    tl_ref acc = tl_ir_kid(ir, v, side), prod = tl_ir_kid(ir, v, 1 - side);
    if (tl_ir_op(ir, acc) != TL_IR_LOAD || tl_ir_node(ir, acc)->imm.u != tl_ir_node(ir, node)->imm.u ||
        tl_ir_nkids(ir, acc) != n - 1 || tl_ir_op(ir, prod) != TL_IR_MUL)
      continue;
    int same = 1;
    for (int i = 1; i < n && same; i++) same = tl_ir_kid(ir, acc, i - 1) == tl_ir_kid(ir, node, i);
    if (!same) continue;
    if (zero_guarded(ir, tl_ir_kid(ir, prod, 0), known) || zero_guarded(ir, tl_ir_kid(ir, prod, 1), known))
      return tl_nop(ir);
  }
  return node;
}

/* The loop f (var in [m0, m0 + ext)) split around its guard-free run; each: the values
** before and after it one piece each (up to EACH_MAX a side), so the loops inside find
** their guards decided on each border row or tap. */
static tl_ref partition_for(part_st *P, tl_ref f, int each) {
  tl_ir *ir = P->ir;
  tl_ref var = tl_ir_kid(ir, f, 0), body = tl_ir_kid(ir, f, 3);
  int64_t m0, ext;
  if (!tl_ir_is_int(ir, tl_ir_kid(ir, f, 1), &m0) || !tl_ir_is_int(ir, tl_ir_kid(ir, f, 2), &ext) || ext < 2 ||
      ext > 4096)
    return f;
  int kind = tl_for_kind(ir, f), tag = tl_for_tag(ir, f);
  if (kind != TL_FOR_SERIAL && kind != TL_FOR_UNROLLED) return f;
  tl_rangemap known = {0};
  atoms_st a = {ir, var, {0}, &known};
  tl_ir_visit(ir, body, atoms_fn, &a);
  tl_ref result = f;
  for (int i = 0; i < P->outer.n; i++)
    tl_rangemap_set(&known, P->outer.v[i].var, P->outer.v[i].min, P->outer.v[i].extent);
  if (a.atoms.n) {
    /* an atom that reads var only through an index the loop ranges (var's own among them)
    ** reduce away (floormod(p, nW) of p = (row * nH + th) * nW + tw, for the row loop th;
    ** floordiv(row * nW + tw, nW), the row, for the tile loop tw of one row) does not
    ** decide the cut: kept, it would fail on every value */
    int na = 0;
    tl_rangemap_set(&known, var, tl_int(ir, m0), tl_int(ir, ext));
    for (int i = 0; i < a.atoms.n; i++)
      if (tl_ir_uses_var(ir, tl_ir_simplify(ir, a.atoms.v[i], &known), var)) a.atoms.v[na++] = a.atoms.v[i];
    a.atoms.n = na;
    /* the longest run of values at which every atom is proven */
    int64_t best_lo = 0, best_n = 0, run_lo = 0, run_n = 0;
    for (int64_t v = m0; v < m0 + ext; v++) {
      tl_rangemap_set(&known, var, tl_int(ir, v), tl_int(ir, 1));
      int ok = 1;
      for (int i = 0; i < a.atoms.n && ok; i++) ok = tl_ir_prove(ir, a.atoms.v[i], &known) == 1;
      if (ok) {
        if (!run_n) run_lo = v;
        run_n++;
        if (run_n > best_n) best_lo = run_lo, best_n = run_n;
      } else {
        run_n = 0;
      }
    }
    if (best_n > 0 && best_n < ext) {
      int64_t cut[2 * EACH_MAX + 4];
      int nc = 0;
      cut[nc++] = m0;
      if (each && best_lo - m0 <= EACH_MAX)
        for (int64_t v = m0 + 1; v < best_lo; v++) cut[nc++] = v;
      cut[nc++] = best_lo, cut[nc++] = best_lo + best_n;
      if (each && m0 + ext - best_lo - best_n <= EACH_MAX)
        for (int64_t v = best_lo + best_n + 1; v < m0 + ext; v++) cut[nc++] = v;
      cut[nc++] = m0 + ext;
      tl_ref parts[2 * EACH_MAX + 3];
      int np = 0;
      const char *name = tl_ir_var(ir, var)->name;
      for (int k = 0; k + 1 < nc; k++) {
        if (cut[k + 1] <= cut[k]) continue;
        tl_ref nv = tl_var_new(ir, name, tl_ir_type(ir, var));
        tl_ref b = tl_ir_substitute(ir, body, &var, &nv, 1);
        tl_rangemap_set(&known, nv, tl_int(ir, cut[k]), tl_int(ir, cut[k + 1] - cut[k]));
        b = tl_ir_mutate(ir, b, drop_zero_fn, &known);
        if (each) b = unswitch(ir, b, &known, 2);
        parts[np++] = tl_for(ir, nv, tl_int(ir, cut[k]), tl_int(ir, cut[k + 1] - cut[k]), kind, tag, b);
      }
      result = tl_seq(ir, parts, np);
    }
  } else if (each) {
    /* no guard reads var (a reduction over channels inside the taps of a padded conv): the
    ** guards that neither it nor the loops inside change are tested once, around it */
    result = unswitch(ir, f, &known, 2);
  }
  TL_VEC_FREE(a.atoms);
  tl_rangemap_free(&known);
  return result;
}

/* Unswitching a piece on a guard no loop inside it changes (the first row of a chunk of
** rows in a parallel loop: the chunk decides whether it is the image's border). */
typedef struct inv_st {
  const tl_ir *ir;
  TL_VEC(tl_ref) vars;            /* variables of the loops inside */
  TL_VEC(tl_ref) atoms;           /* guard conjuncts */
} inv_st;

static void inv_atoms(inv_st *a, tl_ref c) {
  if (tl_ir_op(a->ir, c) == TL_IR_AND) {
    inv_atoms(a, tl_ir_kid(a->ir, c, 0));
    inv_atoms(a, tl_ir_kid(a->ir, c, 1));
    return;
  }
  for (int i = 0; i < a->atoms.n; i++)
    if (a->atoms.v[i] == c) return;
  TL_VEC_PUSH(a->atoms, c);
}

static int inv_fn(const tl_ir *ir, tl_ref node, void *ud) {
  inv_st *a = ud;
  if (tl_ir_op(ir, node) == TL_IR_FOR) TL_VEC_PUSH(a->vars, tl_ir_kid(ir, node, 0));
  if (tl_ir_op(ir, node) == TL_IR_IF_THEN_ELSE) inv_atoms(a, tl_ir_kid(ir, node, 0));
  return 1;
}

typedef struct repl_st { tl_ref from, to; } repl_st;

static tl_ref repl_fn(tl_ir *ir, tl_ref node, void *ud) {
  const repl_st *r = ud;
  (void)ir;
  return node == r->from ? r->to : node;
}

static tl_ref unswitch(tl_ir *ir, tl_ref b, tl_rangemap *known, int depth) {
  inv_st a = {ir, {0}, {0}};
  tl_ir_visit(ir, b, inv_fn, &a);
  tl_ref pick = 0, test = 0;
  for (int i = 0; i < a.atoms.n && !pick; i++) {
    tl_ref c = a.atoms.v[i];
    int inner = 0;
    /* tested in its simplified form: an index the ranges reduce away reads no inner loop */
    tl_ref cs = tl_ir_simplify(ir, c, known);
    for (int j = 0; j < a.vars.n && !inner; j++) inner = tl_ir_uses_var(ir, cs, a.vars.v[j]);
    if (!inner && tl_ir_prove(ir, c, known) < 0) pick = c, test = cs;
  }
  TL_VEC_FREE(a.vars);
  TL_VEC_FREE(a.atoms);
  if (!pick) return b;
  repl_st rt = {pick, tl_bool(ir, 1)}, rf = {pick, tl_bool(ir, 0)};
  tl_ref bt = tl_ir_mutate(ir, b, repl_fn, &rt), bf = tl_ir_mutate(ir, b, repl_fn, &rf);
  bf = tl_ir_mutate(ir, bf, drop_zero_fn, known);
  if (depth > 1) bt = unswitch(ir, bt, known, depth - 1), bf = unswitch(ir, bf, known, depth - 1);
  return tl_if(ir, test, bt, bf);
}

static tl_ref part_kids(part_st *P, tl_ref s, int first) {
  tl_ir *ir = P->ir;
  int n = tl_ir_nkids(ir, s), changed = 0;
  tl_ref kids[64];
  if (n > 64) return s;
  for (int i = 0; i < n; i++) {
    tl_ref k = tl_ir_kid(ir, s, i);
    kids[i] = i >= first && k && tl_ir_is_stmt(ir, k) ? part_stmt(P, k) : k;
    changed |= kids[i] != k;
  }
  if (!changed) return s;
  const tl_node *nd = tl_ir_node(ir, s);
  return tl_ir_make(ir, nd->op, nd->type, nd->imm.u, kids, n);
}

static tl_ref part_stmt(part_st *P, tl_ref s) {
  tl_ir *ir = P->ir;
  switch (tl_ir_op(ir, s)) {
  case TL_IR_FOR: {
    tl_range r = {tl_ir_kid(ir, s, 0), tl_ir_kid(ir, s, 1), tl_ir_kid(ir, s, 2)};
    TL_VEC_PUSH(P->outer, r);
    tl_ref out = part_kids(P, s, 3);
    P->outer.n--;
    return out;
  }
  case TL_IR_ATTR: {
    const char *key = tl_ir_str(ir, (uint32_t)tl_ir_node(ir, s)->imm.u);
    tl_ref body = tl_ir_kid(ir, s, 1);
    int each = strcmp(key, PART_EACH_KEY) == 0;
    if (!each && strcmp(key, PART_KEY) != 0) return part_kids(P, s, 1);
    /* outer loops first: inside the interior piece the marked loops find their
    ** guards proven everywhere and stay whole */
    if (tl_ir_op(ir, body) == TL_IR_FOR) body = partition_for(P, body, each);
    return part_stmt(P, body);
  }
  case TL_IR_SEQ: return part_kids(P, s, 0);
  case TL_IR_IF: return part_kids(P, s, 1);
  case TL_IR_LET_STMT: return part_kids(P, s, 2);
  case TL_IR_ALLOC: return part_kids(P, s, 0);
  default: return s;
  }
}

tl_ref tl_partition_loops(tl_ir *ir, tl_ref root) {
  part_st P = {ir, {0}};
  tl_ref out = part_stmt(&P, root);
  TL_VEC_FREE(P.outer);
  return out;
}

static int marked_fn(const tl_ir *ir, tl_ref node, void *ud) {
  int *found = ud;
  if (*found) return 0;
  if (tl_ir_op(ir, node) == TL_IR_ATTR) {
    const char *key = tl_ir_str(ir, (uint32_t)tl_ir_node(ir, node)->imm.u);
    if (strcmp(key, PART_KEY) == 0 || strcmp(key, PART_EACH_KEY) == 0) *found = 1;
  }
  return !*found;
}

int tl_partition_marked(const tl_ir *ir, tl_ref root) {
  int found = 0;
  tl_ir_visit(ir, root, marked_fn, &found);
  return found;
}

int tl_partition_zero_guard(const tl_ir *ir, tl_ref e) {
  const tl_node *n = tl_ir_node(ir, e);
  if (n->op == TL_IR_IF_THEN_ELSE && is_fzero(ir, tl_ir_kid(ir, e, 2))) return 1;
  for (int i = 0; i < n->nkids; i++) {
    tl_ref k = tl_ir_kid(ir, e, i);
    if (k && tl_partition_zero_guard(ir, k)) return 1;
  }
  return 0;
}
