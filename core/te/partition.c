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

/* The loop f (var in [m0, m0 + ext)) split around its guard-free run. */
static tl_ref partition_for(part_st *P, tl_ref f) {
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
  if (a.atoms.n) {
    for (int i = 0; i < P->outer.n; i++)
      tl_rangemap_set(&known, P->outer.v[i].var, P->outer.v[i].min, P->outer.v[i].extent);
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
      int64_t cut[4] = {m0, best_lo, best_lo + best_n, m0 + ext};
      tl_ref parts[3];
      int np = 0;
      const char *name = tl_ir_var(ir, var)->name;
      for (int k = 0; k < 3; k++) {
        if (cut[k + 1] <= cut[k]) continue;
        tl_ref nv = tl_var_new(ir, name, tl_ir_type(ir, var));
        tl_ref b = tl_ir_substitute(ir, body, &var, &nv, 1);
        parts[np++] = tl_for(ir, nv, tl_int(ir, cut[k]), tl_int(ir, cut[k + 1] - cut[k]), kind, tag, b);
      }
      result = tl_seq(ir, parts, np);
    }
  }
  TL_VEC_FREE(a.atoms);
  tl_rangemap_free(&known);
  return result;
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
    if (strcmp(key, PART_KEY) != 0) return part_kids(P, s, 1);
    /* outer loops first: inside the interior piece the marked loops find their
    ** guards proven everywhere and stay whole */
    if (tl_ir_op(ir, body) == TL_IR_FOR) body = partition_for(P, body);
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
