/*
** isa.c -- VTA's instructions: encoding and decoding of the 128-bit LOAD,
** STORE, GEMM, ALU and FINISH formats and the 32-bit micro-op with the bit
** layout of the configuration (config.c), fetch's routing to the load,
** compute and store modules, and the disassembler.
**
** Disassembly, one line per instruction (index, opcode, operands, then the
** dependence tokens named by their queue: l2g load->compute, g2l
** compute->load, g2s compute->store, s2g store->compute):
**
**     0  LOAD   INP  sram 0 <- dram 0x40+[4 x 8, stride 16] pad y(1,1) x(1,1)  | pop g2l push l2g
**     1  GEMM   uop [0,16) x [4 x 2] dst(8,1) src(16,1) wgt(0,0)  | pop l2g
**     2  ALU    SHR imm 8 uop [16,17) x [1 x 64] dst(0,1) src(0,1)  | push g2s
**     3  STORE  OUT  sram 0 -> dram 0x10+[1 x 64, stride 64]  | pop g2s push s2g
**
** (dram: the base in elements of the memory type; [y x x, stride]: the 2-D
** pattern; uop [begin,end) x [outer x inner]: the micro-op range and the two
** loop extents; dst/src/wgt(outer,inner): the loop factors.)
*/
#include "vta.h"

#include <stdio.h>

static const char *const opcode_names[] = {"LOAD", "STORE", "GEMM", "FINISH", "ALU"};
static const char *const mem_names[] = {"UOP", "WGT", "INP", "ACC", "OUT", "ACC8"};
static const char *const alu_names[] = {"MIN", "MAX", "ADD", "SHR", "MUL"};

const char *tl_vta_opcode_name(int op) { return op >= 0 && op < 5 ? opcode_names[op] : "?"; }
const char *tl_vta_mem_name(int m) { return m >= 0 && m < 6 ? mem_names[m] : "?"; }
const char *tl_vta_alu_name(int a) { return a >= 0 && a < 5 ? alu_names[a] : "?"; }

/* ---- bit fields ---------------------------------------------------------------- */

static void put(uint64_t w[2], tl_vta_field f, uint64_t v) {
  uint64_t mask = f.width == 64 ? ~0ull : ((1ull << f.width) - 1);
  w[f.pos / 64] |= (v & mask) << (f.pos % 64);
}

static uint64_t get(const uint64_t w[2], tl_vta_field f) {
  uint64_t mask = f.width == 64 ? ~0ull : ((1ull << f.width) - 1);
  return (w[f.pos / 64] >> (f.pos % 64)) & mask;
}

static int fits(tl_ctx *ctx, const char *what, tl_vta_field f, uint64_t v) {
  if (f.width < 64 && v >> f.width)
    return tl_err(ctx, TL_E_ARG, "vta insn: %s %llu does not fit its %d bits", what,
                  (unsigned long long)v, f.width);
  return TL_OK;
}

int tl_vta_insn_queue(const tl_vta_insn *in) {
  if (in->opcode == TL_VTA_STORE) return TL_VTA_Q_STORE;
  if (in->opcode == TL_VTA_LOAD &&
      (in->mem_type == TL_VTA_MEM_INP || in->mem_type == TL_VTA_MEM_WGT))
    return TL_VTA_Q_LOAD;
  return TL_VTA_Q_COMPUTE;
}

/* A (field, value, name) triple per encoded field. */
#define F(fld, val) {#fld, L->fld, (uint64_t)(val)}
typedef struct fv { const char *name; tl_vta_field f; uint64_t v; } fv;

int tl_vta_insn_encode(tl_ctx *ctx, const tl_vta_config *c, const tl_vta_insn *in,
                       uint8_t out[16]) {
  const tl_vta_layout *L = &c->lay;
  if (in->opcode < 0 || in->opcode > TL_VTA_ALU)
    return tl_err(ctx, TL_E_ARG, "vta insn: bad opcode %d (expected 0..4)", in->opcode);
  fv f[32];
  int n = 0;
  f[n++] = (fv)F(opcode, in->opcode);
  f[n++] = (fv)F(pop_prev, in->pop_prev);
  f[n++] = (fv)F(pop_next, in->pop_next);
  f[n++] = (fv)F(push_prev, in->push_prev);
  f[n++] = (fv)F(push_next, in->push_next);
  switch (in->opcode) {
  case TL_VTA_LOAD:
  case TL_VTA_STORE:
    f[n++] = (fv)F(mem_type, in->mem_type);
    f[n++] = (fv)F(sram_base, in->sram_base);
    f[n++] = (fv)F(dram_base, in->dram_base);
    f[n++] = (fv)F(y_size, in->y_size);
    f[n++] = (fv)F(x_size, in->x_size);
    f[n++] = (fv)F(x_stride, in->x_stride);
    f[n++] = (fv)F(y_pad0, in->y_pad0);
    f[n++] = (fv)F(y_pad1, in->y_pad1);
    f[n++] = (fv)F(x_pad0, in->x_pad0);
    f[n++] = (fv)F(x_pad1, in->x_pad1);
    break;
  case TL_VTA_GEMM:
  case TL_VTA_ALU:
    f[n++] = (fv)F(reset, in->reset);
    f[n++] = (fv)F(uop_bgn, in->uop_bgn);
    f[n++] = (fv)F(uop_end, in->uop_end);
    f[n++] = (fv)F(iter_out, in->iter_out);
    f[n++] = (fv)F(iter_in, in->iter_in);
    f[n++] = (fv)F(dst_out, in->dst_out);
    f[n++] = (fv)F(dst_in, in->dst_in);
    if (in->opcode == TL_VTA_GEMM) {
      f[n++] = (fv)F(src_out, in->src_out);
      f[n++] = (fv)F(src_in, in->src_in);
      f[n++] = (fv)F(wgt_out, in->wgt_out);
      f[n++] = (fv)F(wgt_in, in->wgt_in);
    } else {
      f[n++] = (fv){"src_out", L->alu_src_out, in->src_out};
      f[n++] = (fv){"src_in", L->alu_src_in, in->src_in};
      f[n++] = (fv)F(alu_opcode, in->alu_op);
      f[n++] = (fv)F(use_imm, in->use_imm);
      if (in->imm < -32768 || in->imm > 32767)
        return tl_err(ctx, TL_E_ARG, "vta insn: imm %d does not fit 16 signed bits",
                      (int)in->imm);
      f[n++] = (fv){"imm", L->imm, (uint64_t)(uint16_t)(int16_t)in->imm};
    }
    break;
  default: break;
  }
  uint64_t w[2] = {0, 0};
  for (int i = 0; i < n; i++) {
    int rc = fits(ctx, f[i].name, f[i].f, f[i].v);
    if (rc) return rc;
    put(w, f[i].f, f[i].v);
  }
  for (int i = 0; i < 8; i++) {
    out[i] = (uint8_t)(w[0] >> (8 * i));
    out[8 + i] = (uint8_t)(w[1] >> (8 * i));
  }
  return TL_OK;
}
#undef F

int tl_vta_insn_decode(tl_ctx *ctx, const tl_vta_config *c, const uint8_t in[16],
                       tl_vta_insn *o) {
  const tl_vta_layout *L = &c->lay;
  uint64_t w[2] = {0, 0};
  for (int i = 0; i < 8; i++) {
    w[0] |= (uint64_t)in[i] << (8 * i);
    w[1] |= (uint64_t)in[8 + i] << (8 * i);
  }
  memset(o, 0, sizeof *o);
  o->opcode = (int)get(w, L->opcode);
  o->pop_prev = (int)get(w, L->pop_prev);
  o->pop_next = (int)get(w, L->pop_next);
  o->push_prev = (int)get(w, L->push_prev);
  o->push_next = (int)get(w, L->push_next);
  switch (o->opcode) {
  case TL_VTA_LOAD:
  case TL_VTA_STORE:
    o->mem_type = (int)get(w, L->mem_type);
    o->sram_base = (uint32_t)get(w, L->sram_base);
    o->dram_base = (uint32_t)get(w, L->dram_base);
    o->y_size = (uint32_t)get(w, L->y_size);
    o->x_size = (uint32_t)get(w, L->x_size);
    o->x_stride = (uint32_t)get(w, L->x_stride);
    o->y_pad0 = (uint32_t)get(w, L->y_pad0);
    o->y_pad1 = (uint32_t)get(w, L->y_pad1);
    o->x_pad0 = (uint32_t)get(w, L->x_pad0);
    o->x_pad1 = (uint32_t)get(w, L->x_pad1);
    if (o->opcode == TL_VTA_LOAD && (o->mem_type == TL_VTA_MEM_OUT || o->mem_type > 5))
      return tl_err(ctx, TL_E_PARSE,
                    "LOAD with bad memory type %d (expected UOP 0, WGT 1, INP 2, "
                    "ACC 3 or ACC8 5)",
                    o->mem_type);
    if (o->opcode == TL_VTA_STORE && o->mem_type != TL_VTA_MEM_OUT)
      return tl_err(ctx, TL_E_PARSE, "STORE with bad memory type %d (expected OUT 4)",
                    o->mem_type);
    break;
  case TL_VTA_GEMM:
  case TL_VTA_ALU:
    o->reset = (int)get(w, L->reset);
    o->uop_bgn = (uint32_t)get(w, L->uop_bgn);
    o->uop_end = (uint32_t)get(w, L->uop_end);
    o->iter_out = (uint32_t)get(w, L->iter_out);
    o->iter_in = (uint32_t)get(w, L->iter_in);
    o->dst_out = (uint32_t)get(w, L->dst_out);
    o->dst_in = (uint32_t)get(w, L->dst_in);
    if (o->opcode == TL_VTA_GEMM) {
      o->src_out = (uint32_t)get(w, L->src_out);
      o->src_in = (uint32_t)get(w, L->src_in);
      o->wgt_out = (uint32_t)get(w, L->wgt_out);
      o->wgt_in = (uint32_t)get(w, L->wgt_in);
    } else {
      o->src_out = (uint32_t)get(w, L->alu_src_out);
      o->src_in = (uint32_t)get(w, L->alu_src_in);
      o->alu_op = (int)get(w, L->alu_opcode);
      o->use_imm = (int)get(w, L->use_imm);
      o->imm = (int16_t)(uint16_t)get(w, L->imm);
      if (o->alu_op > TL_VTA_ALU_MUL)
        return tl_err(ctx, TL_E_PARSE,
                      "ALU with bad ALU opcode %d (expected MIN 0, MAX 1, ADD 2, "
                      "SHR 3 or MUL 4)",
                      o->alu_op);
    }
    break;
  case TL_VTA_FINISH: break;
  default:
    return tl_err(ctx, TL_E_PARSE,
                  "bad opcode %d (expected LOAD 0, STORE 1, GEMM 2, FINISH 3 or ALU 4)",
                  o->opcode);
  }
  return TL_OK;
}

int tl_vta_uop_encode(tl_ctx *ctx, const tl_vta_config *c, const tl_vta_uop *u, uint32_t *out) {
  const tl_vta_layout *L = &c->lay;
  int rc;
  if ((rc = fits(ctx, "uop dst", L->uop_dst, u->dst)) ||
      (rc = fits(ctx, "uop src", L->uop_src, u->src)) ||
      (rc = fits(ctx, "uop wgt", L->uop_wgt, u->wgt)))
    return rc;
  *out = (u->dst << L->uop_dst.pos) | (u->src << L->uop_src.pos) |
         (L->uop_wgt.width ? u->wgt << L->uop_wgt.pos : 0);
  return TL_OK;
}

void tl_vta_uop_decode(const tl_vta_config *c, uint32_t w, tl_vta_uop *u) {
  const tl_vta_layout *L = &c->lay;
#define UF(f) (L->f.width ? (w >> L->f.pos) & (uint32_t)((1ull << L->f.width) - 1) : 0)
  u->dst = UF(uop_dst);
  u->src = UF(uop_src);
  u->wgt = UF(uop_wgt);
#undef UF
}

/* ---- disassembler ------------------------------------------------------------------ */

/* The token queue of a flag for the module that runs the instruction. */
static void print_deps(tl_buf *b, const tl_vta_insn *in) {
  static const char *const names[3][4] = {
      /* pop_prev, pop_next, push_prev, push_next */
      {"pop ?prev", "pop g2l", "push ?prev", "push l2g"},
      {"pop l2g", "pop s2g", "push g2l", "push g2s"},
      {"pop g2s", "pop ?next", "push s2g", "push ?next"},
  };
  int q = tl_vta_insn_queue(in);
  int flags[4] = {in->pop_prev, in->pop_next, in->push_prev, in->push_next};
  int any = 0;
  for (int i = 0; i < 4; i++)
    if (flags[i]) {
      tl_buf_printf(b, "%s%s", any ? " " : "  | ", names[q][i]);
      any = 1;
    }
}

void tl_vta_insn_print(tl_buf *b, const tl_vta_insn *in) {
  if (in->opcode == TL_VTA_FINISH) tl_buf_puts(b, "FINISH");
  else tl_buf_printf(b, "%-6s ", tl_vta_opcode_name(in->opcode));
  switch (in->opcode) {
  case TL_VTA_LOAD:
  case TL_VTA_STORE: {
    int load = in->opcode == TL_VTA_LOAD;
    if (in->x_size == 0) {
      tl_buf_printf(b, "%-4s nop", tl_vta_mem_name(in->mem_type));
      break;
    }
    tl_buf_printf(b, "%-4s sram %u %s dram 0x%x+[%u x %u, stride %u]", tl_vta_mem_name(in->mem_type),
                  in->sram_base, load ? "<-" : "->", in->dram_base, in->y_size, in->x_size,
                  in->x_stride);
    if (in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1)
      tl_buf_printf(b, " pad y(%u,%u) x(%u,%u)", in->y_pad0, in->y_pad1, in->x_pad0,
                    in->x_pad1);
    break;
  }
  case TL_VTA_GEMM:
  case TL_VTA_ALU:
    if (in->opcode == TL_VTA_ALU) {
      tl_buf_printf(b, "%s ", tl_vta_alu_name(in->alu_op));
      if (in->use_imm) tl_buf_printf(b, "imm %d ", (int)in->imm);
    }
    if (in->reset) tl_buf_puts(b, "reset ");
    tl_buf_printf(b, "uop [%u,%u) x [%u x %u] dst(%u,%u) src(%u,%u)", in->uop_bgn, in->uop_end,
                  in->iter_out, in->iter_in, in->dst_out, in->dst_in, in->src_out, in->src_in);
    if (in->opcode == TL_VTA_GEMM) tl_buf_printf(b, " wgt(%u,%u)", in->wgt_out, in->wgt_in);
    break;
  default: break;
  }
  print_deps(b, in);
}

int tl_vta_disasm(tl_ctx *ctx, const tl_vta_config *c, const uint8_t *insns, int n,
                  tl_buf *out) {
  for (int i = 0; i < n; i++) {
    tl_vta_insn in;
    int rc = tl_vta_insn_decode(ctx, c, insns + 16 * (size_t)i, &in);
    if (rc) return tl_err_prefix(ctx, "vta disasm: instruction %d: ", i);
    tl_buf_printf(out, "%5d  ", i);
    tl_vta_insn_print(out, &in);
    tl_buf_puts(out, "\n");
  }
  return TL_OK;
}

TL_EXPORT int tl_vta_disasm_bytes(tl_ctx *ctx, const tl_vta_config *c, const void *insns,
                                  size_t nbytes, char **out) {
  *out = NULL;
  if (nbytes % 16)
    return tl_err(ctx, TL_E_PARSE,
                  "vta disasm: %zu bytes is not a whole number of 16-byte instructions", nbytes);
  tl_buf b = {0};
  int rc = tl_vta_disasm(ctx, c, insns, (int)(nbytes / 16), &b);
  if (rc) {
    tl_buf_free(&b);
    return rc;
  }
  *out = tl_buf_take(&b);
  return TL_OK;
}
