/*
** config.c -- VTA's hardware configuration: TVM's vta_config.json keys, the
** cycle model's optional keys, the parameters derived from them (element
** sizes, SRAM depths, the bitstream and model strings) and the bit layout of
** every instruction format, which follows the SRAM depths. A configuration
** that cannot be built (a field wider than its instruction word, a micro-op
** wider than 32 bits, a width the simulator does not implement) is refused
** naming the key. The default configuration is targets/vta/vta_config.json.
*/
#include "vta.h"

#include <jansson.h>
#include <stdio.h>

/* The integer keys: name, offset in tl_vta_config, range, default (-1: required). */
typedef struct int_key { const char *name; size_t off; int lo, hi, dflt; } int_key;
#define K(name, field, lo, hi, dflt) {name, offsetof(tl_vta_config, field), lo, hi, dflt}
static const int_key int_keys[] = {
    /* tunelua's simulator implements int8 inputs and weights and int32 accumulators */
    K("LOG_INP_WIDTH", log_inp_width, 3, 3, -1),
    K("LOG_WGT_WIDTH", log_wgt_width, 3, 3, -1),
    K("LOG_ACC_WIDTH", log_acc_width, 5, 5, -1),
    K("LOG_BATCH", log_batch, 0, 4, -1),
    K("LOG_BLOCK", log_block, 1, 6, -1),
    K("LOG_UOP_BUFF_SIZE", log_uop_buff_size, 2, 24, -1),
    K("LOG_INP_BUFF_SIZE", log_inp_buff_size, 4, 24, -1),
    K("LOG_WGT_BUFF_SIZE", log_wgt_buff_size, 4, 24, -1),
    K("LOG_ACC_BUFF_SIZE", log_acc_buff_size, 4, 24, -1),
    K("DRAM_BYTES_PER_CYCLE", dram_bytes_per_cycle, 1, 4096, 8),
    K("DRAM_LATENCY_CYCLES", dram_latency, 0, 100000, 32),
    K("GEMM_II", gemm_ii, 1, 64, 1),
    K("ALU_II", alu_ii, 1, 64, 2),
    K("GEMM_PIPELINE", gemm_depth, 0, 1000, 4),
    K("ALU_PIPELINE", alu_depth, 0, 1000, 4),
};
#undef K

static const char *const targets[] = {"sim", "tsim", "pynq", "ultra96", "zcu104", "de10nano",
                                      "intelfocl", NULL};

/* ---- instruction layouts --------------------------------------------------- */

/* Lay fields out in order from bit *pos, moving a field that would straddle a
** 64-bit word to the next word; the end must stay within limit bits. */
static void place(int *pos, tl_vta_field *f, int width) {
  if (*pos % 64 + width > 64) *pos = (*pos / 64 + 1) * 64;
  f->pos = *pos;
  f->width = width;
  *pos += width;
}

static int layout(tl_ctx *ctx, const char *name, tl_vta_config *c) {
  tl_vta_layout *L = &c->lay;
  /* micro-op: dst (acc), src (inp for GEMM, acc for ALU), wgt */
  int p = 0;
  place(&p, &L->uop_dst, c->log_acc_depth);
  place(&p, &L->uop_src, TL_MAX(c->log_acc_depth, c->log_inp_depth));
  place(&p, &L->uop_wgt, c->log_wgt_depth);
  if (p > 32)
    return tl_err(ctx, TL_E_PARSE,
                  "%s: LOG_ACC_BUFF_SIZE, LOG_INP_BUFF_SIZE, LOG_WGT_BUFF_SIZE: a micro-op needs %d+%d+%d = %d bits with these buffer "
                  "depths, more than 32",
                  name, L->uop_dst.width, L->uop_src.width, L->uop_wgt.width, p);
  p = 0;
  place(&p, &L->opcode, 3);
  place(&p, &L->pop_prev, 1);
  place(&p, &L->pop_next, 1);
  place(&p, &L->push_prev, 1);
  place(&p, &L->push_next, 1);
  int hdr = p;
  /* LOAD / STORE: fixed widths (TVM's VTA_MEMOP_* widths) */
  place(&p, &L->mem_type, 3);
  place(&p, &L->sram_base, 16);
  place(&p, &L->dram_base, 32);
  place(&p, &L->y_size, 16);
  place(&p, &L->x_size, 16);
  place(&p, &L->x_stride, 16);
  place(&p, &L->y_pad0, 4);
  place(&p, &L->y_pad1, 4);
  place(&p, &L->x_pad0, 4);
  place(&p, &L->x_pad1, 4);
  tl_assert(p <= 128);
  /* GEMM: widths from the SRAM depths; loop extents are 14 bits */
  p = hdr;
  place(&p, &L->reset, 1);
  place(&p, &L->uop_bgn, c->log_uop_depth);
  place(&p, &L->uop_end, c->log_uop_depth + 1);
  place(&p, &L->iter_out, 14);
  place(&p, &L->iter_in, 14);
  place(&p, &L->dst_out, c->log_acc_depth);
  place(&p, &L->dst_in, c->log_acc_depth);
  int after_dst = p;
  place(&p, &L->src_out, c->log_inp_depth);
  place(&p, &L->src_in, c->log_inp_depth);
  place(&p, &L->wgt_out, c->log_wgt_depth);
  place(&p, &L->wgt_in, c->log_wgt_depth);
  if (p > 128)
    return tl_err(ctx, TL_E_PARSE,
                  "%s: LOG_INP_BUFF_SIZE, LOG_WGT_BUFF_SIZE, LOG_ACC_BUFF_SIZE: the GEMM instruction needs %d bits with these buffer "
                  "depths, more than 128",
                  name, p);
  p = after_dst;
  place(&p, &L->alu_src_out, c->log_acc_depth);
  place(&p, &L->alu_src_in, c->log_acc_depth);
  place(&p, &L->alu_opcode, 3);
  place(&p, &L->use_imm, 1);
  place(&p, &L->imm, 16);
  if (p > 128)
    return tl_err(ctx, TL_E_PARSE,
                  "%s: LOG_ACC_BUFF_SIZE: the ALU instruction needs %d bits with an accumulator "
                  "depth of %d, more than 128",
                  name, p, c->acc_depth);
  return TL_OK;
}

/* ---- derived parameters ------------------------------------------------------ */

static int derive(tl_ctx *ctx, const char *name, tl_vta_config *c) {
  c->log_out_width = c->log_inp_width;
  c->log_out_buff_size = c->log_acc_buff_size + c->log_out_width - c->log_acc_width;
  c->inp_width = 1 << c->log_inp_width;
  c->wgt_width = 1 << c->log_wgt_width;
  c->acc_width = 1 << c->log_acc_width;
  c->out_width = 1 << c->log_out_width;
  c->batch = 1 << c->log_batch;
  c->block_in = c->block_out = 1 << c->log_block;
  c->inp_elem_bytes = c->batch * c->block_in * c->inp_width / 8;
  c->wgt_elem_bytes = c->block_out * c->block_in * c->wgt_width / 8;
  c->acc_elem_bytes = c->batch * c->block_out * c->acc_width / 8;
  c->out_elem_bytes = c->batch * c->block_out * c->out_width / 8;
  c->log_uop_depth = c->log_uop_buff_size - 5 + 3;
  c->log_inp_depth = c->log_inp_buff_size - c->log_batch - c->log_block - c->log_inp_width + 3;
  c->log_wgt_depth = c->log_wgt_buff_size - 2 * c->log_block - c->log_wgt_width + 3;
  c->log_acc_depth = c->log_acc_buff_size - c->log_batch - c->log_block - c->log_acc_width + 3;
  struct { const char *key; int v; } depths[] = {
      {"LOG_UOP_BUFF_SIZE", c->log_uop_depth}, {"LOG_INP_BUFF_SIZE", c->log_inp_depth},
      {"LOG_WGT_BUFF_SIZE", c->log_wgt_depth}, {"LOG_ACC_BUFF_SIZE", c->log_acc_depth}};
  for (size_t i = 0; i < TL_ARRAY_SIZE(depths); i++) {
    if (depths[i].v < 0)
      return tl_err(ctx, TL_E_PARSE,
                    "%s: %s: the buffer is smaller than one element of this configuration "
                    "(BATCH %d, BLOCK %d)",
                    name, depths[i].key, c->batch, c->block_in);
    if (depths[i].v > 16)
      return tl_err(ctx, TL_E_PARSE,
                    "%s: %s: %d elements, more than the 16-bit SRAM addresses of LOAD and "
                    "STORE reach",
                    name, depths[i].key, 1 << depths[i].v);
  }
  if (c->wgt_elem_bytes > 4096)
    return tl_err(ctx, TL_E_PARSE, "%s: LOG_BLOCK: a weight element of %d bytes exceeds the "
                  "4096-byte page", name, c->wgt_elem_bytes);
  c->uop_depth = 1 << c->log_uop_depth;
  c->inp_depth = 1 << c->log_inp_depth;
  c->wgt_depth = 1 << c->log_wgt_depth;
  c->acc_depth = c->out_depth = 1 << c->log_acc_depth;
  snprintf(c->bitstream, sizeof c->bitstream, "%dx%d_i%dw%da%d_%d_%d_%d_%d", c->batch,
           c->block_in, c->inp_width, c->wgt_width, c->acc_width, c->log_uop_buff_size,
           c->log_inp_buff_size, c->log_wgt_buff_size, c->log_acc_buff_size);
  snprintf(c->model, sizeof c->model, "%s_%s", c->target, c->bitstream);
  return layout(ctx, name, c);
}

int tl_vta_elem_bytes(const tl_vta_config *c, int mem_type) {
  switch (mem_type) {
  case TL_VTA_MEM_UOP: return 4;
  case TL_VTA_MEM_WGT: return c->wgt_elem_bytes;
  case TL_VTA_MEM_INP: return c->inp_elem_bytes;
  case TL_VTA_MEM_ACC: return c->acc_elem_bytes;
  case TL_VTA_MEM_OUT: return c->out_elem_bytes;
  case TL_VTA_MEM_ACC8: return c->batch * c->block_out;
  }
  return 0;
}

/* ---- parsing ----------------------------------------------------------------- */

static int get_string(tl_ctx *ctx, const char *name, json_t *root, const char *key, char *dst,
                      size_t cap) {
  json_t *v = json_object_get(root, key);
  if (!v) return tl_err(ctx, TL_E_PARSE, "%s: missing key %s", name, key);
  if (!json_is_string(v))
    return tl_err(ctx, TL_E_PARSE, "%s: %s: expected a string", name, key);
  if (strlen(json_string_value(v)) >= cap)
    return tl_err(ctx, TL_E_PARSE, "%s: %s: longer than %d characters", name, key,
                  (int)cap - 1);
  strcpy(dst, json_string_value(v));
  return TL_OK;
}

int tl_vta_config_parse(tl_ctx *ctx, const char *text, const char *name, tl_vta_config *c) {
  memset(c, 0, sizeof *c);
  json_error_t jerr;
  json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return tl_err(ctx, TL_E_PARSE, "%s: malformed JSON at line %d: %s", name, jerr.line,
                  jerr.text);
  int rc = TL_OK;
  if (!json_is_object(root)) {
    rc = tl_err(ctx, TL_E_PARSE, "%s: expected a JSON object of configuration keys", name);
    goto done;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    int known = strcmp(key, "TARGET") == 0 || strcmp(key, "HW_VER") == 0 ||
                strcmp(key, "CLOCK_MHZ") == 0;
    for (size_t i = 0; i < TL_ARRAY_SIZE(int_keys) && !known; i++)
      known = strcmp(int_keys[i].name, key) == 0;
    if (!known) {
      rc = tl_err(ctx, TL_E_PARSE, "%s: unknown key %s", name, key);
      goto done;
    }
  }
  if ((rc = get_string(ctx, name, root, "TARGET", c->target, sizeof c->target))) goto done;
  if ((rc = get_string(ctx, name, root, "HW_VER", c->hw_ver, sizeof c->hw_ver))) goto done;
  int ok = 0;
  for (int i = 0; targets[i]; i++) ok |= strcmp(targets[i], c->target) == 0;
  if (!ok) {
    rc = tl_err(ctx, TL_E_PARSE,
                "%s: TARGET: expected one of sim, tsim, pynq, ultra96, zcu104, de10nano, "
                "intelfocl, got \"%s\"",
                name, c->target);
    goto done;
  }
  for (size_t i = 0; i < TL_ARRAY_SIZE(int_keys); i++) {
    const int_key *k = &int_keys[i];
    int *dst = (int *)((char *)c + k->off);
    v = json_object_get(root, k->name);
    if (!v) {
      if (k->dflt < 0) {
        rc = tl_err(ctx, TL_E_PARSE, "%s: missing key %s", name, k->name);
        goto done;
      }
      *dst = k->dflt;
      continue;
    }
    if (!json_is_integer(v) || json_integer_value(v) < k->lo || json_integer_value(v) > k->hi) {
      if (k->lo == k->hi)
        rc = tl_err(ctx, TL_E_PARSE, "%s: %s: expected %d (the only width implemented)", name,
                    k->name, k->lo);
      else
        rc = tl_err(ctx, TL_E_PARSE, "%s: %s: expected an integer in [%d, %d]", name, k->name,
                    k->lo, k->hi);
      goto done;
    }
    *dst = (int)json_integer_value(v);
  }
  c->clock_mhz = 100;
  if ((v = json_object_get(root, "CLOCK_MHZ"))) {
    if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 1e5) {
      rc = tl_err(ctx, TL_E_PARSE, "%s: CLOCK_MHZ: expected a positive number of MHz", name);
      goto done;
    }
    c->clock_mhz = json_number_value(v);
  }
  rc = derive(ctx, name, c);
done:
  json_decref(root);
  return rc;
}

/* ---- public ------------------------------------------------------------------- */

TL_EXPORT int tl_vta_config_from_string(tl_ctx *ctx, const char *text, const char *name,
                                        tl_vta_config **out) {
  *out = NULL;
  tl_vta_config *c = tl_malloc(sizeof *c);
  int rc = tl_vta_config_parse(ctx, text, name ? name : "vta config", c);
  if (rc) {
    free(c);
    return rc;
  }
  *out = c;
  return TL_OK;
}

TL_EXPORT int tl_vta_config_load(tl_ctx *ctx, const char *path, tl_vta_config **out) {
  *out = NULL;
  char *text;
  size_t n;
  int rc = tl_read_file(ctx, path, &text, &n);
  if (rc) return rc;
  rc = tl_vta_config_from_string(ctx, text, path, out);
  free(text);
  return rc;
}

TL_EXPORT void tl_vta_config_free(tl_vta_config *c) { free(c); }
TL_EXPORT void tl_vta_free(void *p) { free(p); }

TL_EXPORT int tl_vta_config_json(tl_ctx *ctx, const tl_vta_config *c, char **out) {
  json_t *o = json_object();
  json_object_set_new(o, "TARGET", json_string(c->target));
  json_object_set_new(o, "HW_VER", json_string(c->hw_ver));
  for (size_t i = 0; i < TL_ARRAY_SIZE(int_keys); i++)
    json_object_set_new(o, int_keys[i].name,
                        json_integer(*(const int *)((const char *)c + int_keys[i].off)));
  json_object_set_new(o, "CLOCK_MHZ", json_real(c->clock_mhz));
  struct { const char *k; int v; } d[] = {
      {"LOG_OUT_WIDTH", c->log_out_width}, {"LOG_OUT_BUFF_SIZE", c->log_out_buff_size},
      {"LOG_BLOCK_IN", c->log_block}, {"LOG_BLOCK_OUT", c->log_block},
      {"INP_WIDTH", c->inp_width}, {"WGT_WIDTH", c->wgt_width}, {"ACC_WIDTH", c->acc_width},
      {"OUT_WIDTH", c->out_width}, {"BATCH", c->batch}, {"BLOCK_IN", c->block_in},
      {"BLOCK_OUT", c->block_out}, {"INP_ELEM_BITS", c->inp_elem_bytes * 8},
      {"WGT_ELEM_BITS", c->wgt_elem_bytes * 8}, {"ACC_ELEM_BITS", c->acc_elem_bytes * 8},
      {"OUT_ELEM_BITS", c->out_elem_bytes * 8}, {"INP_ELEM_BYTES", c->inp_elem_bytes},
      {"WGT_ELEM_BYTES", c->wgt_elem_bytes}, {"ACC_ELEM_BYTES", c->acc_elem_bytes},
      {"OUT_ELEM_BYTES", c->out_elem_bytes}, {"LOG_UOP_BUFF_DEPTH", c->log_uop_depth},
      {"LOG_INP_BUFF_DEPTH", c->log_inp_depth}, {"LOG_WGT_BUFF_DEPTH", c->log_wgt_depth},
      {"LOG_ACC_BUFF_DEPTH", c->log_acc_depth}, {"UOP_BUFF_DEPTH", c->uop_depth},
      {"INP_BUFF_DEPTH", c->inp_depth}, {"WGT_BUFF_DEPTH", c->wgt_depth},
      {"ACC_BUFF_DEPTH", c->acc_depth}, {"OUT_BUFF_DEPTH", c->out_depth},
  };
  for (size_t i = 0; i < TL_ARRAY_SIZE(d); i++)
    json_object_set_new(o, d[i].k, json_integer(d[i].v));
  json_object_set_new(o, "BITSTREAM", json_string(c->bitstream));
  json_object_set_new(o, "MODEL", json_string(c->model));
  char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  if (!s) return tl_err(ctx, TL_E_NOMEM, "vta config: cannot encode JSON");
  *out = tl_strdup(s);
  free(s);
  return TL_OK;
}
