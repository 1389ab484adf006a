/*
** space.c -- AutoTVM config spaces (specs/algorithms.md A1): knobs defined
** in order (split, reorder, annotate, other), the mixed-radix index <->
** config mapping, entity JSON, fallback configs.
*/
#include "autotvm.h"

#include <math.h>
#include <stdio.h>

const char *const tl_an_names[TL_AN_NCODES] = {
    "none",        "vec",         "unroll",      "blockIdx.x", "blockIdx.y", "blockIdx.z",
    "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread",    "fuse"};

TL_EXPORT tl_atvm_space *tl_atvm_space_new(void) { return tl_calloc(1, sizeof(tl_atvm_space)); }

TL_EXPORT void tl_atvm_space_free(tl_atvm_space *sp) {
  if (!sp) return;
  for (int k = 0; k < sp->knobs.n; k++) {
    tl_knob *kb = &sp->knobs.v[k];
    free(kb->name);
    free(kb->ints);
    if (kb->other)
      for (int64_t j = 0; j < kb->dim; j++) free(kb->other[j]);
    free(kb->other);
    free(kb->other_num);
  }
  TL_VEC_FREE(sp->knobs);
  free(sp->text);
  free(sp);
}

TL_EXPORT int tl_atvm_space_nknobs(const tl_atvm_space *sp) { return sp ? sp->knobs.n : 0; }
static const tl_knob *knob(const tl_atvm_space *sp, int k) {
  return (sp && k >= 0 && k < sp->knobs.n) ? &sp->knobs.v[k] : NULL;
}
TL_EXPORT int64_t tl_atvm_space_dim(const tl_atvm_space *sp, int k) {
  const tl_knob *kb = knob(sp, k);
  return kb ? kb->dim : -1;
}
TL_EXPORT const char *tl_atvm_space_name(const tl_atvm_space *sp, int k) {
  const tl_knob *kb = knob(sp, k);
  return kb ? kb->name : NULL;
}
TL_EXPORT int tl_atvm_space_kind(const tl_atvm_space *sp, int k) {
  const tl_knob *kb = knob(sp, k);
  return kb ? kb->kind : -1;
}
TL_EXPORT int tl_atvm_space_find(const tl_atvm_space *sp, const char *name) {
  for (int k = 0; sp && k < sp->knobs.n; k++)
    if (strcmp(sp->knobs.v[k].name, name) == 0) return k;
  return -1;
}
TL_EXPORT int64_t tl_atvm_space_total(const tl_atvm_space *sp) {
  int64_t p = 1;
  for (int k = 0; sp && k < sp->knobs.n; k++) p *= sp->knobs.v[k].dim;
  return p;
}
TL_EXPORT int64_t tl_atvm_space_fallback_digit(const tl_atvm_space *sp, int k) {
  const tl_knob *kb = knob(sp, k);
  return kb ? kb->fallback : -1;
}

TL_EXPORT int tl_atvm_space_entity_ints(const tl_atvm_space *sp, int k, int64_t j, int64_t *out,
                                        int cap) {
  const tl_knob *kb = knob(sp, k);
  if (!kb || !kb->ints || j < 0 || j >= kb->dim) return -1;
  int n = TL_MIN(cap, kb->width);
  memcpy(out, kb->ints + j * kb->width, (size_t)n * sizeof(int64_t));
  return kb->width;
}

TL_EXPORT const char *tl_atvm_space_other_json(tl_atvm_space *sp, int k, int64_t j) {
  const tl_knob *kb = knob(sp, k);
  if (!kb || j < 0 || j >= kb->dim) return NULL;
  tl_buf b = {0};
  tl_knob_entity_json(kb, j, &b);
  free(sp->text);
  sp->text = tl_buf_take(&b);
  return sp->text;
}

void tl_knob_entity_json(const tl_knob *kb, int64_t j, tl_buf *out) {
  if (kb->kind == TL_KNOB_OTHER) {
    tl_buf_puts(out, kb->other[j]);
    return;
  }
  const int64_t *e = kb->ints + j * kb->width;
  tl_buf_puts(out, "[");
  for (int i = 0; i < kb->width; i++) {
    if (i) tl_buf_puts(out, ", ");
    if (kb->kind == TL_KNOB_ANNOTATE && !kb->locate_cache)
      tl_buf_printf(out, "\"%s\"", tl_an_names[e[i]]);
    else
      tl_buf_printf(out, "%lld", (long long)e[i]);
  }
  tl_buf_puts(out, "]");
}

/* ---- knob construction ---------------------------------------------------- */

static int check_name(tl_ctx *ctx, tl_atvm_space *sp, const char *name) {
  if (!name || !*name) return tl_err(ctx, TL_E_ARG, "config space: a knob needs a name");
  if (tl_atvm_space_find(sp, name) >= 0)
    return tl_err(ctx, TL_E_ARG, "config space: knob '%s' is already defined", name);
  return TL_OK;
}

typedef TL_VEC(int64_t) i64vec;

static int add_knob(tl_atvm_space *sp, const char *name, int kind, int width, i64vec *ents) {
  tl_knob kb = {0};
  kb.name = tl_strdup(name);
  kb.kind = kind;
  kb.width = width;
  kb.dim = width ? ents->n / width : 0;
  kb.ints = ents->v;
  ents->v = NULL;
  ents->n = ents->cap = 0;
  TL_VEC_PUSH(sp->knobs, kb);
  return sp->knobs.n - 1;
}


/* Divisors of L ascending (get_factors). */
static void factors_of(int64_t L, i64vec *out) {
  i64vec hi = {0};
  for (int64_t i = 1; i * i <= L; i++) {
    if (L % i) continue;
    TL_VEC_PUSH(*out, i);
    if (i != L / i) TL_VEC_PUSH(hi, L / i);
  }
  for (int i = hi.n - 1; i >= 0; i--) TL_VEC_PUSH(*out, hi.v[i]);
  TL_VEC_FREE(hi);
}

typedef struct split_gen {
  const int64_t *F;
  int nF;
  int64_t L;
  int n;                       /* num_outputs */
  int no_tail;
  int64_t stack[16];
  i64vec *out;
} split_gen;

static void split_dfs(split_gen *g, int pos, int64_t prod) {
  if (pos == g->n - 1) {
    if (prod > g->L) return;
    if (g->L % prod == 0 || (!g->no_tail && prod < g->L)) {
      TL_VEC_PUSH(*g->out, -1);
      for (int i = g->n - 2; i >= 0; i--) TL_VEC_PUSH(*g->out, g->stack[i]);
    }
    return;
  }
  for (int i = 0; i < g->nF; i++) {
    if (prod * g->F[i] > g->L) continue;   /* pruned leaves would be rejected anyway */
    g->stack[pos] = g->F[i];
    split_dfs(g, pos + 1, prod * g->F[i]);
  }
}

/* CPython's set of small positive ints (hash(n) == n): open addressing with
** 9 linear probes then perturbation, resized when 3/5 full. Only the
** iteration order matters here: TVM's 'verbose' factor list is
** list(set(a) | set(b)). */
typedef struct pyset {
  int64_t *t;                  /* 0 = empty slot */
  uint64_t mask;
  int64_t fill, used;
} pyset;

static int pyset_probe(int64_t *t, uint64_t mask, int64_t key, int insert_only) {
  uint64_t perturb = (uint64_t)key, i = (uint64_t)key & mask;
  for (;;) {
    uint64_t probes = (i + 9 <= mask) ? 9 : 0, j = i;
    do {
      if (t[j] == 0) {
        t[j] = key;
        return 1;              /* inserted */
      }
      if (!insert_only && t[j] == key) return 0;
      j++;
    } while (probes--);
    perturb >>= 5;
    i = (i * 5 + 1 + perturb) & mask;
  }
}

static void pyset_resize(pyset *s, int64_t minused) {
  uint64_t n = 8;
  while ((int64_t)n <= minused) n <<= 1;
  int64_t *nt = tl_calloc(n, sizeof(int64_t));
  for (uint64_t j = 0; s->t && j <= s->mask; j++)
    if (s->t[j]) pyset_probe(nt, n - 1, s->t[j], 1);
  free(s->t);
  s->t = nt;
  s->mask = n - 1;
  s->fill = s->used;
}

static void pyset_add(pyset *s, int64_t key) {
  if (!pyset_probe(s->t, s->mask, key, 0)) return;
  s->fill++, s->used++;
  if ((uint64_t)s->fill * 5 >= s->mask * 3)
    pyset_resize(s, s->used > 50000 ? s->used * 2 : s->used * 4);
}

static void pyset_init(pyset *s) {
  s->t = tl_calloc(8, sizeof(int64_t));
  s->mask = 7;
  s->fill = s->used = 0;
}

/* set_merge of other into s */
static void pyset_merge(pyset *s, const pyset *o) {
  if (o->used == 0) return;
  if ((uint64_t)(s->fill + o->used) * 5 >= s->mask * 3) pyset_resize(s, (s->used + o->used) * 2);
  if (s->fill == 0 && s->mask == o->mask) {
    memcpy(s->t, o->t, (o->mask + 1) * sizeof(int64_t));
    s->fill = s->used = o->used;
    return;
  }
  if (s->fill == 0) {
    for (uint64_t j = 0; j <= o->mask; j++)
      if (o->t[j]) pyset_probe(s->t, s->mask, o->t[j], 1);
    s->fill = s->used = o->used;
    return;
  }
  for (uint64_t j = 0; j <= o->mask; j++)
    if (o->t[j]) pyset_add(s, o->t[j]);
}

static void pyset_union_order(const int64_t *a, int na, const int64_t *b, int nb, i64vec *out) {
  pyset sa, sb, r;
  pyset_init(&sa), pyset_init(&sb), pyset_init(&r);
  for (int i = 0; i < na; i++) pyset_add(&sa, a[i]);
  for (int i = 0; i < nb; i++) pyset_add(&sb, b[i]);
  pyset_merge(&r, &sa);
  pyset_merge(&r, &sb);
  for (uint64_t j = 0; j <= r.mask; j++)
    if (r.t[j]) TL_VEC_PUSH(*out, r.t[j]);
  free(sa.t), free(sb.t), free(r.t);
}

TL_EXPORT int tl_atvm_space_define_split(tl_ctx *ctx, tl_atvm_space *sp, const char *name,
                                         int64_t length, const char *policy, int num_outputs,
                                         int64_t max_factor, int no_tail, const int64_t *cands,
                                         int ncands) {
  if (check_name(ctx, sp, name)) return -1;
  if (!policy) policy = "factors";
  if (num_outputs < 1 || num_outputs > 16) {
    tl_err(ctx, TL_E_ARG, "define_split '%s': num_outputs must be in 1..16, got %d", name,
           num_outputs);
    return -1;
  }
  if (length < 1) {
    tl_err(ctx, TL_E_ARG, "define_split '%s': axis length must be positive, got %lld", name,
           (long long)length);
    return -1;
  }
  i64vec ents = {0};
  if (strcmp(policy, "candidate") == 0) {
    if (!cands || ncands < 1) {
      tl_err(ctx, TL_E_ARG, "define_split '%s': policy 'candidate' needs a candidate list", name);
      return -1;
    }
    for (int c = 0; c < ncands; c++) {
      TL_VEC_PUSH(ents, -1);
      for (int i = 1; i < num_outputs; i++) TL_VEC_PUSH(ents, cands[c * num_outputs + i]);
    }
  } else {
    i64vec F = {0};
    if (strcmp(policy, "factors") == 0) {
      factors_of(length, &F);
    } else if (strcmp(policy, "power2") == 0) {
      for (int64_t v = 1; v <= length; v *= 2) TL_VEC_PUSH(F, v);
    } else if (strcmp(policy, "verbose") == 0) {
      /* list(set(divisors) | set(powers of two)) in CPython's order */
      i64vec d = {0}, p2 = {0};
      factors_of(length, &d);
      for (int64_t v = 1; v <= length; v *= 2) TL_VEC_PUSH(p2, v);
      pyset_union_order(d.v, d.n, p2.v, p2.n, &F);
      TL_VEC_FREE(d);
      TL_VEC_FREE(p2);
    } else {
      tl_err(ctx, TL_E_ARG,
             "define_split '%s': unknown policy '%s' (expected factors, power2, verbose or candidate)",
             name, policy);
      return -1;
    }
    if (max_factor > 0) {
      int m = 0;
      for (int i = 0; i < F.n; i++)
        if (F.v[i] <= max_factor) F.v[m++] = F.v[i];
      F.n = m;
    }
    split_gen g = {F.v, F.n, length, num_outputs,
                   no_tail < 0 ? strcmp(policy, "factors") == 0 : no_tail, {0}, &ents};
    if (num_outputs == 1) {
      TL_VEC_PUSH(ents, -1);
    } else {
      split_dfs(&g, 0, 1);
    }
    TL_VEC_FREE(F);
  }
  if (ents.n == 0) {
    tl_err(ctx, TL_E_ARG, "define_split '%s': no candidate for length %lld", name,
           (long long)length);
    return -1;
  }
  int k = add_knob(sp, name, TL_KNOB_SPLIT, num_outputs, &ents);
  sp->knobs.v[k].length = length;
  return k;
}

/* Remove split entities rejected by a filter: keep[j]. */
void tl_atvm_knob_filter(tl_atvm_space *sp, int k, const unsigned char *keep) {
  tl_knob *kb = &sp->knobs.v[k];
  int64_t m = 0;
  for (int64_t j = 0; j < kb->dim; j++) {
    if (!keep[j]) continue;
    if (m != j) memmove(kb->ints + m * kb->width, kb->ints + j * kb->width,
                        (size_t)kb->width * sizeof(int64_t));
    m++;
  }
  kb->dim = m;
}

TL_EXPORT int tl_atvm_space_knob_keep(tl_ctx *ctx, tl_atvm_space *sp, int k,
                                      const uint8_t *keep, int64_t n) {
  if (!knob(sp, k) || !sp->knobs.v[k].ints)
    return tl_err(ctx, TL_E_ARG, "filter: knob %d is not a split, reorder or annotate knob", k);
  tl_knob *kb = &sp->knobs.v[k];
  if (n != kb->dim)
    return tl_err(ctx, TL_E_ARG, "filter '%s': %lld flags for %lld entities", kb->name,
                  (long long)n, (long long)kb->dim);
  int64_t left = 0;
  for (int64_t j = 0; j < n; j++) left += keep[j] != 0;
  if (left == 0) return tl_err(ctx, TL_E_ARG, "filter '%s' rejects every candidate", kb->name);
  tl_atvm_knob_filter(sp, k, keep);
  kb->fallback = 0;
  return TL_OK;
}

static void permutations(int *a, int lo, int n, int *used, int *cur, int depth, i64vec *out,
                         const int *prefix, int np, int total) {
  /* lexicographic permutations of a[0..n) placed after prefix */
  if (depth == n) {
    for (int i = 0; i < np; i++) TL_VEC_PUSH(*out, prefix[i]);
    for (int i = 0; i < n; i++) TL_VEC_PUSH(*out, cur[i]);
    for (int i = np + n; i < total; i++) TL_VEC_PUSH(*out, i);
    return;
  }
  for (int i = 0; i < n; i++) {
    if (used[i]) continue;
    used[i] = 1;
    cur[depth] = a[i] + lo;
    permutations(a, lo, n, used, cur, depth + 1, out, prefix, np, total);
    used[i] = 0;
  }
}

/* Merge of a spatial chain [0, ns) and a reduce chain [ns, ns + nr): at each
** step take from the chain with the most items left (the first on a tie),
** as TVM's _merge_chain does, so there is one merge. */
static void interleave(int ns, int nr, i64vec *out) {
  int si = 0, ri = 0;
  while (si < ns || ri < nr) {
    if (ns - si >= nr - ri) TL_VEC_PUSH(*out, si++);
    else TL_VEC_PUSH(*out, ns + ri++);
  }
}

TL_EXPORT int tl_atvm_space_define_reorder(tl_ctx *ctx, tl_atvm_space *sp, const char *name,
                                           int n, const char *policy, int begin, int end,
                                           const int64_t *cands, int ncands) {
  if (check_name(ctx, sp, name)) return -1;
  if (n < 1 || n > 12) {
    tl_err(ctx, TL_E_ARG, "define_reorder '%s': number of axes must be in 1..12, got %d", name, n);
    return -1;
  }
  if (!policy) policy = "all";
  i64vec ents = {0};
  int a[12], used[12] = {0}, cur[24], prefix[12];
  for (int i = 0; i < n; i++) a[i] = i, prefix[i] = i;
  if (strcmp(policy, "identity") == 0) {
    for (int i = 0; i < n; i++) TL_VEC_PUSH(ents, i);
  } else if (strcmp(policy, "all") == 0) {
    if (n > 9) {
      tl_err(ctx, TL_E_ARG, "define_reorder '%s': 'all' over %d axes is too large", name, n);
      return -1;
    }
    permutations(a, 0, n, used, cur, 0, &ents, prefix, 0, n);
  } else if (strcmp(policy, "interval_all") == 0) {
    if (begin < 0 || end > n || begin >= end || end - begin > 9) {
      tl_err(ctx, TL_E_ARG, "define_reorder '%s': bad interval [%d, %d) of %d axes", name, begin,
             end, n);
      return -1;
    }
    permutations(a, begin, end - begin, used, cur, 0, &ents, prefix, begin, n);
  } else if (strcmp(policy, "candidate") == 0) {
    if (!cands || ncands < 1) {
      tl_err(ctx, TL_E_ARG, "define_reorder '%s': policy 'candidate' needs a candidate list", name);
      return -1;
    }
    for (int i = 0; i < ncands * n; i++) TL_VEC_PUSH(ents, cands[i]);
  } else if (strcmp(policy, "interleave") == 0) {
    if (begin < 0 || begin > n) {
      tl_err(ctx, TL_E_ARG, "define_reorder '%s': %d spatial axes of %d", name, begin, n);
      return -1;
    }
    interleave(begin, n - begin, &ents);
  } else {
    tl_err(ctx, TL_E_ARG,
           "define_reorder '%s': unknown policy '%s' (expected identity, all, interval_all, "
           "candidate or interleave)", name, policy);
    return -1;
  }
  return add_knob(sp, name, TL_KNOB_REORDER, n, &ents);
}

static void ann_dfs(const int *opts, int nopt, int n, int depth, int *cur, int nvec, i64vec *out) {
  if (depth == n) {
    for (int i = 0; i < n; i++) TL_VEC_PUSH(*out, cur[i]);
    return;
  }
  for (int i = 0; i < nopt; i++) {
    int v = opts[i] == TL_AN_VEC;
    if (nvec + v > 1) continue;
    cur[depth] = opts[i];
    ann_dfs(opts, nopt, n, depth + 1, cur, nvec + v, out);
  }
}

static void combinations(int n, int k, int start, int depth, int *cur, i64vec *out) {
  if (depth == k) {
    for (int i = 0; i < k; i++) TL_VEC_PUSH(*out, cur[i]);
    return;
  }
  for (int i = start; i < n; i++) {
    cur[depth] = i;
    combinations(n, k, i + 1, depth + 1, cur, out);
  }
}

TL_EXPORT int tl_atvm_space_define_annotate(tl_ctx *ctx, tl_atvm_space *sp, const char *name,
                                            int n, const char *policy, int num_anchor) {
  if (check_name(ctx, sp, name)) return -1;
  if (n < 1 || n > 12) {
    tl_err(ctx, TL_E_ARG, "define_annotate '%s': number of axes must be in 1..12, got %d", name, n);
    return -1;
  }
  if (!policy) policy = "none";
  i64vec ents = {0};
  int cur[16];
  if (strcmp(policy, "locate_cache") == 0) {
    if (num_anchor < 1 || num_anchor > n) {
      tl_err(ctx, TL_E_ARG, "define_annotate '%s': num_anchor %d out of 1..%d", name, num_anchor, n);
      return -1;
    }
    combinations(n, num_anchor, 0, 0, cur, &ents);
    int k = add_knob(sp, name, TL_KNOB_ANNOTATE, num_anchor, &ents);
    sp->knobs.v[k].locate_cache = 1;
    return k;
  }
  /* policy.replace("try", "none").split("_") */
  int opts[8], nopt = 0;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", policy);
  char *p = buf;
  while (p && *p) {
    char *us = strchr(p, '_');
    if (us) *us = 0;
    const char *w = strcmp(p, "try") == 0 ? "none" : p;
    int code = -1;
    if (strcmp(w, "none") == 0) code = TL_AN_NONE;
    else if (strcmp(w, "vec") == 0) code = TL_AN_VEC;
    else if (strcmp(w, "unroll") == 0) code = TL_AN_UNROLL;
    if (code < 0 || nopt >= 8) {
      tl_err(ctx, TL_E_ARG,
             "define_annotate '%s': unknown policy '%s' (expected try_unroll, try_vec, "
             "try_unroll_vec, unroll, vec, none or locate_cache)", name, policy);
      return -1;
    }
    opts[nopt++] = code;
    p = us ? us + 1 : NULL;
  }
  ann_dfs(opts, nopt, n, 0, cur, 0, &ents);
  return add_knob(sp, name, TL_KNOB_ANNOTATE, n, &ents);
}

TL_EXPORT int tl_atvm_space_define_knob(tl_ctx *ctx, tl_atvm_space *sp, const char *name,
                                        const char *candidates_json) {
  if (check_name(ctx, sp, name)) return -1;
  json_error_t err;
  json_t *j = json_loads(candidates_json ? candidates_json : "", JSON_DECODE_ANY, &err);
  if (!j || !json_is_array(j) || json_array_size(j) == 0) {
    tl_err(ctx, TL_E_ARG, "define_knob '%s': candidates must be a non-empty JSON array, got %s",
           name, candidates_json ? candidates_json : "NULL");
    json_decref(j);
    return -1;
  }
  size_t n = json_array_size(j);
  tl_knob kb = {0};
  kb.name = tl_strdup(name);
  kb.kind = TL_KNOB_OTHER;
  kb.dim = (int64_t)n;
  kb.other = tl_calloc(n, sizeof(char *));
  kb.other_num = tl_calloc(n, sizeof(double));
  for (size_t i = 0; i < n; i++) {
    json_t *v = json_array_get(j, i);
    if (json_is_array(v) || json_is_object(v)) {
      tl_err(ctx, TL_E_ARG, "define_knob '%s': candidate %zu is not a scalar", name, i);
      for (size_t q = 0; q < i; q++) free(kb.other[q]);
      free(kb.other), free(kb.other_num), free(kb.name);
      json_decref(j);
      return -1;
    }
    kb.other[i] = json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    kb.other_num[i] = json_is_number(v) ? json_number_value(v)
                      : json_is_true(v) ? 1 : json_is_false(v) ? 0 : (double)i;
  }
  json_decref(j);
  TL_VEC_PUSH(sp->knobs, kb);
  return sp->knobs.n - 1;
}

/* ---- fallback ----------------------------------------------------------------- */

int64_t tl_atvm_largest_divisor(int64_t n, int64_t cap) {
  if (cap < 1) return 1;
  for (int64_t f = TL_MIN(cap, n); f >= 1; f--)
    if (n % f == 0) return f;
  return 1;
}

static int64_t find_split(const tl_knob *kb, const int64_t *sizes, int n) {
  for (int64_t j = 0; j < kb->dim; j++) {
    const int64_t *e = kb->ints + j * kb->width;
    int same = 1;
    for (int i = 1; i < n && same; i++) same = e[i] == sizes[i];
    if (same) return j;
  }
  return -1;
}

TL_EXPORT int tl_atvm_space_fallback_split(tl_ctx *ctx, tl_atvm_space *sp, int k,
                                           const int64_t *constraints, int n) {
  if (!knob(sp, k) || sp->knobs.v[k].kind != TL_KNOB_SPLIT)
    return tl_err(ctx, TL_E_ARG, "fallback_split: knob %d is not a split knob", k);
  tl_knob *kb = &sp->knobs.v[k];
  if (n != kb->width)
    return tl_err(ctx, TL_E_ARG, "fallback_split '%s': %d constraints for %d outputs", kb->name,
                  n, kb->width);
  int64_t sizes[16], rest = kb->length;
  sizes[0] = -1;
  for (int i = n - 1; i >= 1; i--) {
    int64_t cap = constraints[i] < 0 ? rest : constraints[i];
    sizes[i] = tl_atvm_largest_divisor(rest, cap);
    rest /= sizes[i];
  }
  int64_t j = find_split(kb, sizes, n);
  if (j < 0)
    return tl_err(ctx, TL_E_ARG, "fallback_split '%s': the sizes are not in the knob's space",
                  kb->name);
  kb->fallback = j;
  return TL_OK;
}

/* ---- apply mode --------------------------------------------------------------- */

const int64_t *tl_cfg_ints(tl_atvm_cfg *cfg, const char *name, int *width) {
  int k = tl_atvm_space_find(cfg->space, name);
  if (k < 0 || !cfg->space->knobs.v[k].ints) {
    tl_err(cfg->ctx, TL_E_INTERNAL, "template: no knob '%s'", name);
    return NULL;
  }
  tl_knob *kb = &cfg->space->knobs.v[k];
  if (width) *width = kb->width;
  return kb->ints + cfg->digits[k] * kb->width;
}

double tl_cfg_other(tl_atvm_cfg *cfg, const char *name) {
  int k = tl_atvm_space_find(cfg->space, name);
  if (k < 0 || cfg->space->knobs.v[k].kind != TL_KNOB_OTHER) return 0;
  return cfg->space->knobs.v[k].other_num[cfg->digits[k]];
}

int tl_cfg_fallback_split(tl_atvm_cfg *cfg, const char *name, const int64_t *sizes, int n) {
  int k = tl_atvm_space_find(cfg->space, name);
  if (k < 0) return tl_err(cfg->ctx, TL_E_INTERNAL, "template: no knob '%s'", name);
  tl_knob *kb = &cfg->space->knobs.v[k];
  int64_t j = find_split(kb, sizes, n);
  if (j >= 0) {
    kb->fallback = j;
    return TL_OK;
  }
  int64_t c[16];
  c[0] = -1;
  for (int i = 1; i < n; i++) c[i] = sizes[i];
  return tl_atvm_space_fallback_split(cfg->ctx, cfg->space, k, c, n);
}

void tl_cfg_fallback_other(tl_atvm_cfg *cfg, const char *name, double value) {
  int k = tl_atvm_space_find(cfg->space, name);
  if (k < 0) return;
  tl_knob *kb = &cfg->space->knobs.v[k];
  for (int64_t j = 0; j < kb->dim; j++)
    if (kb->other_num[j] == value) {
      kb->fallback = j;
      return;
    }
}
