/*
** conv2d.c -- conv2d_packed.vta: the packed int8 convolution of TVM's VTA
** templates (conv -> right_shift 8 -> clip(0, 127) -> cast int8), its config
** space (TVM's knobs and index order), the CPU reference, and a direct
** generator of a config's instruction stream, built through the runtime's
** command queue straight from the knobs. Production streams come from the
** loop IR (lower.c); the direct generator stays as the tests' cross-check
** (tests/c/test_vta_lower.c runs both on the same configs).
**
** Layouts (docs/vta.md): data (N/b, CI/16, H, W, b, 16), kernel (CO/16,
** CI/16, KH, KW, 16, 16) with the 16x16 block output-channel major, output
** (N/b, CO/16, OH, OW, b, 16); one DRAM element is one SRAM element.
**
** The direct stream follows the template's schedule. The output is tiled
** by tile_h, tile_w and tile_co ([outer, inner] each); a tile (i1 rows, j1 columns, co1
** channel blocks) is the accumulator's unit. For each tile:
**
**   compute  GEMM reset of the tile
**   for each of the tile_ci outer chunks (ci1 input-channel blocks):
**     load     LOAD INP per block (the tile's input window, padding done by
**              the DMA), LOAD WGT (co1 rows of ci1*KH*KW matrices)
**     compute  GEMM: loops (co1, ci1), micro-ops (kh, kw, i, j)
**   compute  ALU SHR 8, MIN 127, MAX 0 over the tile
**   store    STORE per channel block (i1 rows of j1 vectors)
**
** Virtual threads (oc_nthread, h_nthread: TVM splits the outer co / h loop
** by the thread count and binds the inner part to a virtual thread) give
** each thread its own part of every SRAM; each statement above is emitted
** once per thread before the next statement, and the tokens are placed per
** thread by the hazards (load -> compute RAW on l2g, compute -> load WAR on
** g2l, compute -> store RAW on g2s, store -> compute WAR on s2g), so one
** thread's loads overlap the other's GEMMs. tile_b is defined, never
** applied, as in TVM.
*/
#include "conv2d.h"

#include <jansson.h>
#include <stdio.h>

/* ---- workload --------------------------------------------------------------------------- */

static int arg_ints(tl_ctx *ctx, json_t *v, int n, int64_t *out, const char *what) {
  if (json_is_integer(v)) {
    for (int i = 0; i < n; i++) out[i] = json_integer_value(v);
    return TL_OK;
  }
  if (json_is_array(v) && (int)json_array_size(v) == n) {
    for (int i = 0; i < n; i++) {
      if (!json_is_integer(json_array_get(v, (size_t)i))) break;
      out[i] = json_integer_value(json_array_get(v, (size_t)i));
      if (i == n - 1) return TL_OK;
    }
  }
  if (n == 4 && json_is_array(v) && json_array_size(v) == 2) {
    int64_t p[2];
    if (arg_ints(ctx, v, 2, p, what) == TL_OK) {
      out[0] = out[2] = p[0], out[1] = out[3] = p[1];
      return TL_OK;
    }
  }
  return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: %s must be an int or a list of %d ints", what, n);
}

static int tensor_shape(tl_ctx *ctx, json_t *t, int64_t *shape, const char *what) {
  json_t *sh = json_array_get(t, 1);
  if (!json_is_array(t) || json_array_size(t) != 3 ||
      strcmp(json_string_value(json_array_get(t, 0)) ? json_string_value(json_array_get(t, 0)) : "", "TENSOR") ||
      !json_is_array(sh) || json_array_size(sh) != 6)
    return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: %s must be [\"TENSOR\", <6-D shape>, \"int8\"]",
                  what);
  for (int i = 0; i < 6; i++) {
    json_t *d = json_array_get(sh, (size_t)i);
    if (!json_is_integer(d) || json_integer_value(d) < 1)
      return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: %s has a non-positive dimension", what);
    shape[i] = json_integer_value(d);
  }
  const char *dt = json_string_value(json_array_get(t, 2));
  if (!dt || strcmp(dt, "int8"))
    return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: %s must be int8, got %s", what, dt ? dt : "?");
  return TL_OK;
}

int tl_vta_conv2d_parse(tl_ctx *ctx, const tl_vta_config *c, const char *args_json,
                        tl_vta_conv2d *w) {
  memset(w, 0, sizeof *w);
  json_error_t err;
  json_t *a = json_loads(args_json ? args_json : "", 0, &err);
  int rc = TL_OK;
  if (!a || !json_is_array(a) || json_array_size(a) < 5) {
    rc = tl_err(ctx, TL_E_PARSE,
                "conv2d_packed.vta: args must be [data, kernel, strides, padding, dilation, "
                "layout, out_dtype]");
    goto done;
  }
  int64_t ds[6], ks[6], st[2], pad[4], dil[2];
  if ((rc = tensor_shape(ctx, json_array_get(a, 0), ds, "data")) ||
      (rc = tensor_shape(ctx, json_array_get(a, 1), ks, "kernel")) ||
      (rc = arg_ints(ctx, json_array_get(a, 2), 2, st, "strides")) ||
      (rc = arg_ints(ctx, json_array_get(a, 3), 4, pad, "padding")) ||
      (rc = arg_ints(ctx, json_array_get(a, 4), 2, dil, "dilation")))
    goto done;
  if (c && (ds[4] != c->batch || ds[5] != c->block_in || ks[4] != c->block_out ||
            ks[5] != c->block_in)) {
    rc = tl_err(ctx, TL_E_ARG,
                "conv2d_packed.vta: data (.., %lld, %lld) and kernel (.., %lld, %lld) blocks do "
                "not match the configuration's BATCH %d, BLOCK %d",
                (long long)ds[4], (long long)ds[5], (long long)ks[4], (long long)ks[5], c->batch,
                c->block_in);
    goto done;
  }
  if (ks[1] != ds[1] || ks[5] != ds[5] || ks[4] != ks[5]) {
    rc = tl_err(ctx, TL_E_SHAPE,
                "conv2d_packed.vta: kernel (.., %lld, .., .., %lld, %lld) does not match data "
                "(.., %lld, .., .., .., %lld) and square blocks",
                (long long)ks[1], (long long)ks[4], (long long)ks[5], (long long)ds[1],
                (long long)ds[5]);
    goto done;
  }
  if (dil[0] != 1 || dil[1] != 1) {
    rc = tl_err(ctx, TL_E_UNSUPPORTED, "conv2d_packed.vta: dilation must be (1, 1)");
    goto done;
  }
  if (st[0] < 1 || st[1] < 1 || pad[0] < 0 || pad[1] < 0 || pad[0] != pad[2] || pad[1] != pad[3] ||
      pad[0] > 15 || pad[1] > 15 || pad[0] >= ks[2] || pad[1] >= ks[3]) {
    rc = tl_err(ctx, TL_E_ARG,
                "conv2d_packed.vta: strides must be positive and padding symmetric, in [0, 15] "
                "and smaller than the kernel");
    goto done;
  }
  w->No = ds[0], w->CIo = ds[1], w->H = ds[2], w->W = ds[3];
  w->COo = ks[0], w->KH = ks[2], w->KW = ks[3];
  w->sh = st[0], w->sw = st[1], w->ph = pad[0], w->pw = pad[1];
  w->OH = (w->H + 2 * w->ph - w->KH) / w->sh + 1;
  w->OW = (w->W + 2 * w->pw - w->KW) / w->sw + 1;
  if (w->H + 2 * w->ph < w->KH || w->W + 2 * w->pw < w->KW) {
    rc = tl_err(ctx, TL_E_SHAPE, "conv2d_packed.vta: the kernel is larger than the padded input");
    goto done;
  }
  w->b = ds[4], w->B = ds[5];
  w->flop = 2.0 * w->No * w->b * w->COo * w->B * w->OH * w->OW * w->KH * w->KW * w->CIo * w->B;
done:
  json_decref(a);
  return rc;
}

/* ---- config space ---------------------------------------------------------------------- */

int tl_vta_conv2d_define(tl_ctx *ctx, const tl_vta_conv2d *w, tl_atvm_space *sp) {
  struct { const char *name; int64_t len; } sp_knobs[] = {
      {"tile_b", w->No}, {"tile_h", w->OH}, {"tile_w", w->OW}, {"tile_ci", w->CIo},
      {"tile_co", w->COo}};
  for (size_t i = 0; i < TL_ARRAY_SIZE(sp_knobs); i++)
    if (tl_atvm_space_define_split(ctx, sp, sp_knobs[i].name, sp_knobs[i].len, "factors", 2, 0, 0,
                                   NULL, 0) < 0)
      return tl_errcode(ctx);
  if (tl_atvm_space_define_knob(ctx, sp, "oc_nthread", "[1, 2]") < 0 ||
      tl_atvm_space_define_knob(ctx, sp, "h_nthread", "[1, 2]") < 0)
    return tl_errcode(ctx);
  return TL_OK;
}

int tl_vta_conv2d_space(tl_ctx *ctx, const tl_vta_conv2d *w, tl_atvm_space **out) {
  tl_atvm_space *sp = tl_atvm_space_new();
  int rc = tl_vta_conv2d_define(ctx, w, sp);
  if (rc) {
    tl_atvm_space_free(sp);
    return rc;
  }
  *out = sp;
  return TL_OK;
}

int tl_vta_conv2d_knobs_of(tl_ctx *ctx, const tl_vta_conv2d *w, tl_atvm_space *sp, int64_t index,
                           tl_vta_knobs *k) {
  const int64_t lens[5] = {w->No, w->OH, w->OW, w->CIo, w->COo};
  int64_t total = tl_atvm_space_total(sp);
  if (index < 0 || index >= total)
    return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: config index must be in [0, %lld), got %lld",
                  (long long)total, (long long)index);
  int64_t *dst[5] = {k->tile_b, k->tile_h, k->tile_w, k->tile_ci, k->tile_co};
  int64_t p = index;
  for (int i = 0; i < 7; i++) {
    int64_t dim = tl_atvm_space_dim(sp, i), j = p % dim;
    p /= dim;
    if (i < 5) {   /* the space keeps the outer factor as -1: it is length / inner */
      tl_atvm_space_entity_ints(sp, i, j, dst[i], 2);
      dst[i][0] = lens[i] / dst[i][1];
    } else {
      const char *v = tl_atvm_space_other_json(sp, i, j);
      int n = atoi(v);
      if (i == 5) k->oc_nthread = n; else k->h_nthread = n;
    }
  }
  return TL_OK;
}

/* ---- the instruction stream -------------------------------------------------------------- */

typedef struct thread_state {
  tl_vta_kernel *reset, *gemm, *alu[3];
  uint32_t inp, wgt, acc;        /* SRAM bases */
  int owe_g2l, owe_s2g;          /* tokens pushed for this thread, not yet popped */
} thread_state;

/* The SRAM each thread uses; an error when a config does not fit. */
static int footprint(tl_ctx *ctx, const tl_vta_config *c, const tl_vta_conv2d *w,
                     const tl_vta_knobs *k, int64_t *A, int64_t *I, int64_t *Wt, int64_t *U) {
  int64_t T = (int64_t)k->oc_nthread * k->h_nthread;
  int64_t i1 = k->tile_h[1], j1 = k->tile_w[1], c1 = k->tile_ci[1], o1 = k->tile_co[1];
  int64_t R = (i1 - 1) * w->sh + w->KH, C = (j1 - 1) * w->sw + w->KW;
  *A = o1 * i1 * j1, *I = c1 * R * C, *Wt = o1 * c1 * w->KH * w->KW, *U = w->KH * w->KW * i1 * j1;
  if (k->tile_h[0] * i1 != w->OH || k->tile_w[0] * j1 != w->OW || k->tile_ci[0] * c1 != w->CIo ||
      k->tile_co[0] * o1 != w->COo || (k->oc_nthread != 1 && k->oc_nthread != 2) ||
      (k->h_nthread != 1 && k->h_nthread != 2))
    return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: the knobs do not tile the workload");
  if (*A * T > c->acc_depth)
    return tl_err(ctx, TL_E_SCHED,
                  "conv2d_packed.vta: the tile needs %lld accumulator elements x %lld threads, "
                  "more than the %d of the accumulator buffer",
                  (long long)*A, (long long)T, c->acc_depth);
  if (*I * T > c->inp_depth)
    return tl_err(ctx, TL_E_SCHED,
                  "conv2d_packed.vta: the tile needs %lld input elements x %lld threads, more "
                  "than the %d of the input buffer",
                  (long long)*I, (long long)T, c->inp_depth);
  if (*Wt * T > c->wgt_depth)
    return tl_err(ctx, TL_E_SCHED,
                  "conv2d_packed.vta: the tile needs %lld weight elements x %lld threads, more "
                  "than the %d of the weight buffer",
                  (long long)*Wt, (long long)T, c->wgt_depth);
  if (*U > c->uop_depth)
    return tl_err(ctx, TL_E_SCHED,
                  "conv2d_packed.vta: the GEMM kernel needs %lld micro-ops, more than the %d of "
                  "the micro-op buffer",
                  (long long)*U, c->uop_depth);
  return TL_OK;
}

int tl_vta_conv2d_check(tl_ctx *ctx, const tl_vta_config *c, const tl_vta_conv2d *w,
                        const tl_vta_knobs *k) {
  int64_t A, I, Wt, U;
  return footprint(ctx, c, w, k, &A, &I, &Wt, &U);
}

int tl_vta_conv2d_emit(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c,
                       const tl_vta_conv2d *w, const tl_vta_knobs *k, uint32_t data,
                       uint32_t kernel, uint32_t out) {
  int64_t A, I, Wt, U;
  int rc = footprint(ctx, c, w, k, &A, &I, &Wt, &U);
  if (rc) return rc;
  int on = k->oc_nthread, hn = k->h_nthread, T = on * hn;
  int64_t i0 = k->tile_h[0], i1 = k->tile_h[1], j0 = k->tile_w[0], j1 = k->tile_w[1];
  int64_t c0 = k->tile_ci[0], c1 = k->tile_ci[1], o0 = k->tile_co[0], o1 = k->tile_co[1];
  int64_t R = (i1 - 1) * w->sh + w->KH, C = (j1 - 1) * w->sw + w->KW, KK = w->KH * w->KW;
  thread_state th[4];
  for (int t = 0; t < T; t++) {
    thread_state *s = &th[t];
    memset(s, 0, sizeof *s);
    s->acc = (uint32_t)(t * A), s->inp = (uint32_t)(t * I), s->wgt = (uint32_t)(t * Wt);
    s->reset = tl_vta_kernel_new(q, 0, 1, 0, 0, 0);
    tl_vta_kernel_loop(q, s->reset, (uint32_t)A, 1, 0, 0);
    tl_vta_kernel_uop(q, s->reset, s->acc, 0, 0);
    s->gemm = tl_vta_kernel_new(q, 0, 0, 0, 0, 0);
    tl_vta_kernel_loop(q, s->gemm, (uint32_t)o1, o1 > 1 ? (uint32_t)(i1 * j1) : 0, 0,
                       o1 > 1 ? (uint32_t)(c1 * KK) : 0);
    tl_vta_kernel_loop(q, s->gemm, (uint32_t)c1, 0, c1 > 1 ? (uint32_t)(R * C) : 0,
                       c1 > 1 ? (uint32_t)KK : 0);
    for (int64_t di = 0; di < w->KH; di++)
      for (int64_t dj = 0; dj < w->KW; dj++)
        for (int64_t i = 0; i < i1; i++)
          for (int64_t j = 0; j < j1; j++)
            tl_vta_kernel_uop(q, s->gemm, s->acc + (uint32_t)(i * j1 + j),
                              s->inp + (uint32_t)((i * w->sh + di) * C + j * w->sw + dj),
                              s->wgt + (uint32_t)(di * w->KW + dj));
    static const int ops[3] = {TL_VTA_ALU_SHR, TL_VTA_ALU_MIN, TL_VTA_ALU_MAX};
    static const int imms[3] = {8, 127, 0};
    for (int a = 0; a < 3; a++) {
      s->alu[a] = tl_vta_kernel_new(q, 1, 0, ops[a], 1, imms[a]);
      tl_vta_kernel_loop(q, s->alu[a], (uint32_t)A, 1, 1, 0);
      tl_vta_kernel_uop(q, s->alu[a], s->acc, s->acc, 0);
    }
  }
  int64_t i0o = (i0 + hn - 1) / hn, o0o = (o0 + on - 1) / on;
  /* Thread t runs co0 = oo * on + t % on, i0 = io * hn + t / on; past the
  ** end of an axis (a split that does not divide), it runs nothing but
  ** still pops the tokens it is owed where it would have: every statement
  ** pops for the owing threads in thread order, as the statement before
  ** pushed for them, so each FIFO hands every thread its own token. */
#define THREADS(...)                                                     \
  for (int t = 0; t < T; t++) {                                          \
    int64_t ti0 = io * hn + t / on, tco0 = oo * on + t % on;             \
    int run = ti0 < i0 && tco0 < o0;                                     \
    thread_state *s = &th[t];                                            \
    (void)ti0, (void)tco0, (void)run;                                    \
    __VA_ARGS__                                                          \
  }
  for (int64_t bo = 0; bo < w->No; bo++)
    for (int64_t io = 0; io < i0o; io++)
      for (int64_t oo = 0; oo < o0o; oo++)
        for (int64_t jo = 0; jo < j0; jo++) {
          THREADS({
            if (s->owe_s2g) tl_vta_dep_pop(q, 3, 2), s->owe_s2g--;
            if (run) tl_vta_push_kernel(q, s->reset);
          })
          for (int64_t kc = 0; kc < c0; kc++) {
            THREADS({
              if (s->owe_g2l) tl_vta_dep_pop(q, 2, 1), s->owe_g2l--;
              if (!run) continue;
              int64_t r0 = ti0 * i1 * w->sh - w->ph, cc0 = jo * j1 * w->sw - w->pw;
              int64_t yp0 = r0 < 0 ? -r0 : 0, yp1 = r0 + R > w->H ? r0 + R - w->H : 0;
              int64_t xp0 = cc0 < 0 ? -cc0 : 0, xp1 = cc0 + C > w->W ? cc0 + C - w->W : 0;
              for (int64_t ci = 0; ci < c1; ci++) {
                int64_t cb = kc * c1 + ci;
                uint32_t sram = s->inp + (uint32_t)(ci * R * C);
                int64_t e = ((bo * w->CIo + cb) * w->H + (r0 + yp0)) * w->W + (cc0 + xp0);
                tl_vta_load_2d(q, data, (uint32_t)e, (uint32_t)(C - xp0 - xp1),
                               (uint32_t)(R - yp0 - yp1), (uint32_t)w->W, (uint32_t)xp0,
                               (uint32_t)yp0, (uint32_t)xp1, (uint32_t)yp1, sram,
                               TL_VTA_MEM_INP);
              }
              int64_t we = (tco0 * o1 * w->CIo + kc * c1) * KK;
              tl_vta_load_2d(q, kernel, (uint32_t)we, (uint32_t)(c1 * KK), (uint32_t)o1,
                             (uint32_t)(w->CIo * KK), 0, 0, 0, 0, s->wgt, TL_VTA_MEM_WGT);
              tl_vta_dep_push(q, 1, 2);
            })
            THREADS({
              if (!run) continue;
              tl_vta_dep_pop(q, 1, 2);
              tl_vta_push_kernel(q, s->gemm);
              tl_vta_dep_push(q, 2, 1);
              s->owe_g2l++;
            })
          }
          THREADS({
            if (!run) continue;
            for (int a = 0; a < 3; a++) tl_vta_push_kernel(q, s->alu[a]);
            tl_vta_dep_push(q, 2, 3);
          })
          THREADS({
            if (!run) continue;
            tl_vta_dep_pop(q, 2, 3);
            for (int64_t co = 0; co < o1; co++) {
              int64_t e = ((bo * w->COo + tco0 * o1 + co) * w->OH + ti0 * i1) * w->OW + jo * j1;
              tl_vta_store_2d(q, s->acc + (uint32_t)(co * i1 * j1), out, (uint32_t)e,
                              (uint32_t)j1, (uint32_t)i1, (uint32_t)w->OW);
            }
            tl_vta_dep_push(q, 3, 2);
            s->owe_s2g++;
          })
        }
#undef THREADS
  /* drain the tokens no later statement popped (the hardware would keep them) */
  for (int t = 0; t < T; t++) {
    for (; th[t].owe_g2l; th[t].owe_g2l--) tl_vta_dep_pop(q, 2, 1);
    for (; th[t].owe_s2g; th[t].owe_s2g--) tl_vta_dep_pop(q, 3, 2);
  }
  return tl_vta_cmd_status(q);
}

/* ---- the CPU reference -------------------------------------------------------------------- */

static int32_t dot(const int8_t *a, const int8_t *b, int n) {
  int32_t t = 0;
  for (int q = 0; q < n; q++) t += (int32_t)a[q] * (int32_t)b[q];
  return t;
}

void tl_vta_conv2d_reference(const tl_vta_config *c, const tl_vta_conv2d *w, const int8_t *data,
                             const int8_t *kernel, int8_t *out) {
  int B = c->batch, BI = c->block_in, BO = c->block_out;
  uint32_t *sum = tl_malloc((size_t)B * BO * sizeof *sum);   /* int32, wrapping as VTA's */
  for (int64_t n = 0; n < w->No; n++)
    for (int64_t co = 0; co < w->COo; co++)
      for (int64_t i = 0; i < w->OH; i++)
        for (int64_t j = 0; j < w->OW; j++) {
          memset(sum, 0, (size_t)B * BO * sizeof *sum);
          for (int64_t ko = 0; ko < w->CIo; ko++)
            for (int64_t di = 0; di < w->KH; di++)
              for (int64_t dj = 0; dj < w->KW; dj++) {
                int64_t y = i * w->sh + di - w->ph, x = j * w->sw + dj - w->pw;
                if (y < 0 || y >= w->H || x < 0 || x >= w->W) continue;   /* zero padding */
                const int8_t *d = data + (((n * w->CIo + ko) * w->H + y) * w->W + x) * B * BI;
                const int8_t *k = kernel + (((co * w->CIo + ko) * w->KH + di) * w->KW + dj) * BO * BI;
                for (int b = 0; b < B; b++)
                  for (int o = 0; o < BO; o++)
                    sum[b * BO + o] += (uint32_t)(BI == 16 ? dot(d + b * 16, k + o * 16, 16)
                                                           : dot(d + b * BI, k + o * BI, BI));
              }
          int8_t *dst = out + (((n * w->COo + co) * w->OH + i) * w->OW + j) * B * BO;
          for (int l = 0; l < B * BO; l++) {
            int32_t v = (int32_t)sum[l] >> 8;   /* right_shift 8, clip(0, 127), cast int8 */
            dst[l] = (int8_t)(v > 127 ? 127 : v < 0 ? 0 : v);
          }
        }
  free(sum);
}

int64_t tl_vta_conv2d_bytes(const tl_vta_config *c, const tl_vta_conv2d *w, int which) {
  switch (which) {
  case 0: return w->No * w->CIo * w->H * w->W * (int64_t)c->inp_elem_bytes;
  case 1: return w->COo * w->CIo * w->KH * w->KW * (int64_t)c->wgt_elem_bytes;
  default: return w->No * w->COo * w->OH * w->OW * (int64_t)c->out_elem_bytes;
  }
}
