/*
** task.c -- a VTA tuning task (conv2d_packed.vta) as the public API shows it:
** the config space with TVM's index order, entities as TVM's records write
** them, and the measurement of a config: its stream built by conv2d.c and
** run on a fresh vta-sim with random int8 data, the output checked against
** the CPU reference (a wrong answer is an error, never a fast result), and
** the simulated time and counters returned.
*/
#include "conv2d.h"

#include <jansson.h>
#include <stdio.h>

struct tl_vta_task {
  tl_vta_config cfg;
  tl_vta_conv2d wl;
  tl_atvm_space *space;
};

TL_EXPORT int tl_vta_task_new(tl_ctx *ctx, const tl_vta_config *c, const char *args_json,
                              tl_vta_task **out) {
  *out = NULL;
  tl_vta_task *t = tl_calloc(1, sizeof *t);
  t->cfg = *c;
  int rc = tl_vta_conv2d_parse(ctx, c, args_json, &t->wl);
  if (!rc) rc = tl_vta_conv2d_space(ctx, &t->wl, &t->space);
  if (rc) {
    free(t);
    return rc;
  }
  *out = t;
  return TL_OK;
}

TL_EXPORT void tl_vta_task_free(tl_vta_task *t) {
  if (!t) return;
  tl_atvm_space_free(t->space);
  free(t);
}

TL_EXPORT int64_t tl_vta_task_space_len(const tl_vta_task *t) {
  return tl_atvm_space_total(t->space);
}
TL_EXPORT double tl_vta_task_flop(const tl_vta_task *t) { return t->wl.flop; }

TL_EXPORT int tl_vta_task_entity_json(tl_ctx *ctx, tl_vta_task *t, int64_t index, char **out) {
  *out = NULL;
  tl_vta_knobs k;
  int rc = tl_vta_conv2d_knobs_of(ctx, &t->wl, t->space, index, &k);
  if (rc) return rc;
  /* TVM's form: a split's outer size is -1 (the rest of the axis) */
  *out = tl_sprintf("[[\"tile_b\", \"sp\", [-1, %lld]], [\"tile_h\", \"sp\", [-1, %lld]], "
                    "[\"tile_w\", \"sp\", [-1, %lld]], [\"tile_ci\", \"sp\", [-1, %lld]], "
                    "[\"tile_co\", \"sp\", [-1, %lld]], [\"oc_nthread\", \"ot\", %d], "
                    "[\"h_nthread\", \"ot\", %d]]",
                    (long long)k.tile_b[1], (long long)k.tile_h[1], (long long)k.tile_w[1],
                    (long long)k.tile_ci[1], (long long)k.tile_co[1], k.oc_nthread, k.h_nthread);
  return TL_OK;
}

TL_EXPORT int tl_vta_task_index_of_entity(tl_ctx *ctx, tl_vta_task *t, const char *entity_json,
                                          int64_t *index) {
  *index = -1;
  json_error_t err;
  json_t *e = json_loads(entity_json ? entity_json : "", 0, &err);
  int n = tl_atvm_space_nknobs(t->space), rc = TL_OK;
  if (!e || !json_is_array(e) || (int)json_array_size(e) != n) {
    rc = tl_err(ctx, TL_E_PARSE, "conv2d_packed.vta: an entity must list the %d knobs", n);
    goto done;
  }
  int64_t idx = 0, mul = 1;
  for (int k = 0; k < n; k++) {
    json_t *row = json_array_get(e, (size_t)k);
    const char *name = json_string_value(json_array_get(row, 0));
    if (!name || strcmp(name, tl_atvm_space_name(t->space, k))) {
      rc = tl_err(ctx, TL_E_PARSE, "conv2d_packed.vta: entity knob %d must be %s, got %s", k,
                  tl_atvm_space_name(t->space, k), name ? name : "?");
      goto done;
    }
    char *v = json_dumps(json_array_get(row, 2), JSON_ENCODE_ANY | JSON_COMPACT);
    int64_t j = v ? tl_atvm_space_find_entity(t->space, k, v) : -1;
    if (j < 0) {
      rc = tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: %s = %s is not in the space", name,
                  v ? v : "?");
      free(v);
      goto done;
    }
    free(v);
    idx += j * mul;
    mul *= tl_atvm_space_dim(t->space, k);
  }
  *index = idx;
done:
  json_decref(e);
  return rc;
}

TL_EXPORT int tl_vta_task_check(tl_ctx *ctx, tl_vta_task *t, int64_t index) {
  tl_vta_knobs k;
  int rc = tl_vta_conv2d_knobs_of(ctx, &t->wl, t->space, index, &k);
  return rc ? rc : tl_vta_conv2d_check(ctx, &t->cfg, &t->wl, &k);
}

static uint32_t lcg(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}

/* Build and run config index on a fresh simulator; disasm: also return the
** stream's disassembly instead of running it. */
static int run_epi(tl_ctx *ctx, tl_vta_task *t, int64_t index, uint64_t seed, int check,
                   const void *in_data, const void *in_kernel, void *out_data, char **stats,
                   char **disasm, int direct, const tl_vta_epilogue *epi, const void *in_bias,
                   const void *in_res);

static int run(tl_ctx *ctx, tl_vta_task *t, int64_t index, uint64_t seed, int check,
               const void *in_data, const void *in_kernel, void *out_data, char **stats,
               char **disasm, int direct) {
  return run_epi(ctx, t, index, seed, check, in_data, in_kernel, out_data, stats, disasm, direct,
                 NULL, NULL, NULL);
}

static int run_epi(tl_ctx *ctx, tl_vta_task *t, int64_t index, uint64_t seed, int check,
                   const void *in_data, const void *in_kernel, void *out_data, char **stats,
                   char **disasm, int direct, const tl_vta_epilogue *epi, const void *in_bias,
                   const void *in_res) {
  const tl_vta_config *c = &t->cfg;
  const tl_vta_conv2d *w = &t->wl;
  tl_vta_knobs k;
  int rc = tl_vta_conv2d_knobs_of(ctx, &t->wl, t->space, index, &k);
  if (rc) return rc;
  if ((rc = tl_vta_conv2d_check(ctx, c, w, &k))) return rc;
  int64_t nd = tl_vta_conv2d_bytes(c, w, 0), nk = tl_vta_conv2d_bytes(c, w, 1),
          no = tl_vta_conv2d_bytes(c, w, 2);
  int64_t nb = epi && epi->bias ? w->COo * w->B * 4 : 0, nr = epi && epi->res ? no * (epi->res_bits / 8) : 0;
  size_t dram = (size_t)(nd + nk + no + nb + nr) + ((size_t)64 << 20);
  tl_vta_sim *sim = NULL;
  tl_vta_cmd *q = NULL;
  int8_t *ref = NULL;
  if ((rc = tl_vta_sim_new(ctx, c, dram, &sim))) return rc;
  uint32_t pd, pk, po, pb = 0, pr = 0;
  if ((nb && (rc = tl_vta_sim_alloc(ctx, sim, (size_t)nb, &pb))) ||
      (nr && (rc = tl_vta_sim_alloc(ctx, sim, (size_t)nr, &pr))))
    goto done;
  if ((rc = tl_vta_sim_alloc(ctx, sim, (size_t)nd, &pd)) ||
      (rc = tl_vta_sim_alloc(ctx, sim, (size_t)nk, &pk)) ||
      (rc = tl_vta_sim_alloc(ctx, sim, (size_t)no, &po)))
    goto done;
  int8_t *d = tl_vta_sim_host_ptr(sim, pd, (size_t)nd), *kk = tl_vta_sim_host_ptr(sim, pk, (size_t)nk),
         *o = tl_vta_sim_host_ptr(sim, po, (size_t)no);
  uint64_t st = seed * 2654435761u + 1;
  if (in_data) memcpy(d, in_data, (size_t)nd);
  else for (int64_t i = 0; i < nd; i++) d[i] = (int8_t)(lcg(&st) % 256 - 128);
  if (in_kernel) memcpy(kk, in_kernel, (size_t)nk);
  else for (int64_t i = 0; i < nk; i++) kk[i] = (int8_t)(lcg(&st) % 256 - 128);
  int32_t *bias = nb ? tl_vta_sim_host_ptr(sim, pb, (size_t)nb) : NULL;
  int8_t *res = nr ? tl_vta_sim_host_ptr(sim, pr, (size_t)nr) : NULL;
  if (bias && in_bias) memcpy(bias, in_bias, (size_t)nb);
  else for (int64_t i = 0; bias && i < nb / 4; i++) bias[i] = (int32_t)(lcg(&st) % 65536) - 32768;
  if (res && in_res) memcpy(res, in_res, (size_t)nr);
  else if (res && epi->res_bits == 32)
    for (int64_t i = 0; i < nr / 4; i++) ((int32_t *)res)[i] = (int32_t)(lcg(&st) % 262144) - 131072;
  else for (int64_t i = 0; res && i < nr; i++) res[i] = (int8_t)(lcg(&st) % 256 - 128);
  memset(o, 0x5a, (size_t)no);   /* a pattern the kernel must overwrite */
  tl_vta_cmd_new(ctx, sim, &q);
  if (epi) {
    uint32_t phys[5];
    int np = 0;
    phys[np++] = pd, phys[np++] = pk;
    if (nb) phys[np++] = pb;
    if (nr) phys[np++] = pr;
    phys[np++] = po;
    if ((rc = tl_vta_conv2d_fused_emit(q, ctx, c, w, epi, &k, phys))) goto done;
  } else if ((rc = direct ? tl_vta_conv2d_emit(q, ctx, c, w, &k, pd, pk, po)
                          : tl_vta_conv2d_emit_ir(q, ctx, c, w, &k, pd, pk, po)))
    goto done;
  if (disasm) {
    tl_buf b = {0}, txt = {0};
    if ((rc = tl_vta_cmd_encode(q, &b)) == TL_OK &&
        (rc = tl_vta_disasm(ctx, c, (const uint8_t *)b.s, (int)(b.n / 16), &txt)) == TL_OK)
      *disasm = tl_buf_take(&txt);
    tl_buf_free(&b);
    tl_buf_free(&txt);
    goto done;
  }
  if ((rc = tl_vta_cmd_sync(q))) goto done;
  if (check) {
    ref = tl_malloc((size_t)no);
    if (epi) tl_vta_conv2d_fused_reference(c, w, epi, d, kk, bias, res, ref);
    else tl_vta_conv2d_reference(c, w, d, kk, ref);
    for (int64_t i = 0; i < no; i++)
      if (ref[i] != o[i]) {
        rc = tl_err(ctx, TL_E_RUNTIME,
                    "conv2d_packed.vta: config %lld: wrong answer at output byte %lld: %d, "
                    "expected %d",
                    (long long)index, (long long)i, o[i], ref[i]);
        goto done;
      }
  }
  if (out_data) memcpy(out_data, o, (size_t)no);
  const tl_vta_stats *s = tl_vta_sim_stats(sim);
  double secs = (double)s->cycles / (c->clock_mhz * 1e6);
  *stats = tl_sprintf(
      "{\"cycles\":%llu,\"seconds\":%.17g,\"gops\":%.17g,\"gemm_busy\":%.17g,"
      "\"load_busy_cycles\":%llu,\"compute_busy_cycles\":%llu,\"store_busy_cycles\":%llu,"
      "\"gemm_cycles\":%llu,\"alu_cycles\":%llu,\"inp_load_nbytes\":%llu,"
      "\"wgt_load_nbytes\":%llu,\"uop_load_nbytes\":%llu,\"out_store_nbytes\":%llu,"
      "\"gemm_counter\":%llu,\"alu_counter\":%llu,\"insn_count\":%llu,\"macs\":%.17g}",
      (unsigned long long)s->cycles, secs, w->flop / secs / 1e9,
      s->cycles ? (double)s->gemm_cycles / (double)s->cycles : 0.0,
      (unsigned long long)s->busy[0], (unsigned long long)s->busy[1],
      (unsigned long long)s->busy[2], (unsigned long long)s->gemm_cycles,
      (unsigned long long)s->alu_cycles, (unsigned long long)s->inp_load_nbytes,
      (unsigned long long)s->wgt_load_nbytes, (unsigned long long)s->uop_load_nbytes,
      (unsigned long long)s->out_store_nbytes, (unsigned long long)s->gemm_counter,
      (unsigned long long)s->alu_counter, (unsigned long long)s->insn_count, w->flop / 2);
done:
  free(ref);
  tl_vta_cmd_free(q);
  tl_vta_sim_free(sim);
  return rc;
}

TL_EXPORT int tl_vta_task_run(tl_ctx *ctx, tl_vta_task *t, int64_t index, uint64_t seed,
                              int check, char **stats_json) {
  *stats_json = NULL;
  return run(ctx, t, index, seed, check, NULL, NULL, NULL, stats_json, NULL, 0);
}

TL_EXPORT int tl_vta_task_run_data(tl_ctx *ctx, tl_vta_task *t, int64_t index, const void *data,
                                   const void *kernel, void *out, char **stats_json) {
  *stats_json = NULL;
  if (!data || !kernel || !out)
    return tl_err(ctx, TL_E_ARG, "conv2d_packed.vta: run_data needs data, kernel and out");
  return run(ctx, t, index, 0, 1, data, kernel, out, stats_json, NULL, 0);
}

TL_EXPORT int tl_vta_task_run_fused(tl_ctx *ctx, tl_vta_task *t, int64_t index,
                                    const char *epilogue_json, const void *data,
                                    const void *kernel, const void *bias, const void *residual,
                                    void *out, uint64_t seed, int check, char **stats_json) {
  *stats_json = NULL;
  tl_vta_epilogue e;
  int rc = tl_vta_epilogue_parse(ctx, epilogue_json, &e);
  if (rc) return rc;
  return run_epi(ctx, t, index, seed, check, data, kernel, out, stats_json, NULL, 0, &e, bias,
                 residual);
}

TL_EXPORT int64_t tl_vta_task_nbytes(const tl_vta_task *t, int which) {
  return which < 0 || which > 2 ? 0 : tl_vta_conv2d_bytes(&t->cfg, &t->wl, which);
}

TL_EXPORT int tl_vta_task_disasm(tl_ctx *ctx, tl_vta_task *t, int64_t index, char **out) {
  *out = NULL;
  char *unused = NULL;
  int rc = run(ctx, t, index, 0, 0, NULL, NULL, NULL, &unused, out, 0);
  free(unused);
  return rc;
}

int tl_vta_task_run_route(tl_ctx *ctx, tl_vta_task *t, int64_t index, uint64_t seed, int direct,
                          char **stats_json, char **disasm) {
  *stats_json = NULL;
  if (disasm) *disasm = NULL;
  return run(ctx, t, index, seed, 1, NULL, NULL, NULL, stats_json, disasm, direct);
}

const tl_vta_conv2d *tl_vta_task_workload(const tl_vta_task *t) { return &t->wl; }
int tl_vta_task_knobs(tl_ctx *ctx, tl_vta_task *t, int64_t index, tl_vta_knobs *k) {
  return tl_vta_conv2d_knobs_of(ctx, &t->wl, t->space, index, k);
}
int tl_vta_task_config(const tl_vta_task *t, tl_vta_config *out) {
  *out = t->cfg;
  return TL_OK;
}
