/*
** test_vta.c -- VTA (targets/vta): the configuration and its derived
** parameters and errors, the instruction layouts against the bit positions
** of TVM's headers, encode/decode round trips, the disassembler, the
** simulator against a plain sequential reference on random programs (two
** configurations), its named errors (SRAM overflow, DRAM range, token
** deadlock, bad opcode), and the cycle model on a hand-computed program.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "../../targets/vta/vta.h"
#include "tl_test.h"
#include "vta_cases.h"

static const char *default_json =
    "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,"
    "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,\"LOG_BLOCK\":4,\"LOG_UOP_BUFF_SIZE\":15,"
    "\"LOG_INP_BUFF_SIZE\":15,\"LOG_WGT_BUFF_SIZE\":18,\"LOG_ACC_BUFF_SIZE\":17%s}";

static tl_vta_config cfg_with(const char *extra) {
  char text[1024];
  snprintf(text, sizeof text, default_json, extra);
  tl_vta_config c;
  tl_ctx *ctx = tl_ctx_new();
  int rc = tl_vta_config_parse(ctx, text, "test", &c);
  CHECK_MSG(rc == 0, "config: %s", tl_errmsg(ctx));
  tl_ctx_free(ctx);
  return c;
}

static void config_err(const char *text, const char *want) {
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config c;
  CHECK_EQ_INT(tl_vta_config_parse(ctx, text, "cfg.json", &c), TL_E_PARSE);
  CHECK_STREQ(tl_errmsg(ctx), want);
  tl_ctx_free(ctx);
}

TL_TEST(vta_config_default) {
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config *c = NULL;
  CHECK_MSG(tl_vta_config_load(ctx, TL_SOURCE_DIR "/targets/vta/vta_config.json", &c) == 0, "%s",
            tl_errmsg(ctx));
  CHECK_STREQ(c->target, "sim");
  CHECK_EQ_INT(c->batch, 1);
  CHECK_EQ_INT(c->block_in, 16);
  CHECK_EQ_INT(c->block_out, 16);
  CHECK_EQ_INT(c->inp_elem_bytes, 16);
  CHECK_EQ_INT(c->wgt_elem_bytes, 256);
  CHECK_EQ_INT(c->acc_elem_bytes, 64);
  CHECK_EQ_INT(c->out_elem_bytes, 16);
  CHECK_EQ_INT(c->log_out_buff_size, 15);
  CHECK_EQ_INT(c->uop_depth, 8192);
  CHECK_EQ_INT(c->inp_depth, 2048);
  CHECK_EQ_INT(c->wgt_depth, 1024);
  CHECK_EQ_INT(c->acc_depth, 2048);
  CHECK_STREQ(c->bitstream, "1x16_i8w8a32_15_15_18_17");
  CHECK_STREQ(c->model, "sim_1x16_i8w8a32_15_15_18_17");
  CHECK_NEAR(c->clock_mhz, 100, 0);
  /* the bit positions of TVM's default headers (docs/vta.md) */
  const tl_vta_layout *L = &c->lay;
  CHECK_EQ_INT(L->mem_type.pos, 7);
  CHECK_EQ_INT(L->sram_base.pos, 10);
  CHECK_EQ_INT(L->dram_base.pos, 26);
  CHECK_EQ_INT(L->y_size.pos, 64);
  CHECK_EQ_INT(L->x_size.pos, 80);
  CHECK_EQ_INT(L->x_stride.pos, 96);
  CHECK_EQ_INT(L->y_pad0.pos, 112);
  CHECK_EQ_INT(L->x_pad1.pos, 124);
  CHECK_EQ_INT(L->reset.pos, 7);
  CHECK_EQ_INT(L->uop_bgn.pos, 8);
  CHECK_EQ_INT(L->uop_bgn.width, 13);
  CHECK_EQ_INT(L->uop_end.pos, 21);
  CHECK_EQ_INT(L->uop_end.width, 14);
  CHECK_EQ_INT(L->iter_out.pos, 35);
  CHECK_EQ_INT(L->iter_in.pos, 49);
  CHECK_EQ_INT(L->dst_out.pos, 64);
  CHECK_EQ_INT(L->dst_in.pos, 75);
  CHECK_EQ_INT(L->src_out.pos, 86);
  CHECK_EQ_INT(L->src_in.pos, 97);
  CHECK_EQ_INT(L->wgt_out.pos, 108);
  CHECK_EQ_INT(L->wgt_in.pos, 118);
  CHECK_EQ_INT(L->wgt_in.width, 10);
  CHECK_EQ_INT(L->alu_src_out.pos, 86);
  CHECK_EQ_INT(L->alu_opcode.pos, 108);
  CHECK_EQ_INT(L->use_imm.pos, 111);
  CHECK_EQ_INT(L->imm.pos, 112);
  CHECK_EQ_INT(L->uop_src.pos, 11);
  CHECK_EQ_INT(L->uop_wgt.pos, 22);
  CHECK_EQ_INT(L->uop_wgt.width, 10);
  char *js = NULL;
  CHECK(tl_vta_config_json(ctx, c, &js) == 0);
  CHECK(strstr(js, "\"BLOCK_OUT\":16") != NULL);
  CHECK(strstr(js, "\"MODEL\":\"sim_1x16_i8w8a32_15_15_18_17\"") != NULL);
  tl_vta_free(js);
  tl_vta_config_free(c);
  tl_ctx_free(ctx);
}

TL_TEST(vta_config_errors) {
  char text[1024];
  config_err("{\"TARGET\":", "cfg.json: malformed JSON at line 1: unexpected token near end of file");
  config_err("[1]", "cfg.json: expected a JSON object of configuration keys");
  config_err("{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\"}", "cfg.json: missing key LOG_INP_WIDTH");
  snprintf(text, sizeof text, default_json, ",\"LOG_BLOCKS\":4");
  config_err(text, "cfg.json: unknown key LOG_BLOCKS");
  snprintf(text, sizeof text, default_json, ",\"GEMM_II\":\"one\"");
  config_err(text, "cfg.json: GEMM_II: expected an integer in [1, 64]");
  snprintf(text, sizeof text, default_json, ",\"CLOCK_MHZ\":-5");
  config_err(text, "cfg.json: CLOCK_MHZ: expected a positive number of MHz");
  config_err("{\"TARGET\":\"fpga\",\"HW_VER\":\"0.0.2\"}",
             "cfg.json: TARGET: expected one of sim, tsim, pynq, ultra96, zcu104, de10nano, "
             "intelfocl, got \"fpga\"");
  config_err("{\"TARGET\":3,\"HW_VER\":\"0.0.2\"}", "cfg.json: TARGET: expected a string");
  /* a width the simulator does not implement */
  strcpy(text, "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":2,\"LOG_WGT_WIDTH\":3,"
               "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,\"LOG_BLOCK\":4,\"LOG_UOP_BUFF_SIZE\":15,"
               "\"LOG_INP_BUFF_SIZE\":15,\"LOG_WGT_BUFF_SIZE\":18,\"LOG_ACC_BUFF_SIZE\":17}");
  config_err(text, "cfg.json: LOG_INP_WIDTH: expected 3 (the only width implemented)");
  /* inconsistent: a weight buffer too deep for the 32-bit micro-op */
  strcpy(text, "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,"
               "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,\"LOG_BLOCK\":4,\"LOG_UOP_BUFF_SIZE\":15,"
               "\"LOG_INP_BUFF_SIZE\":15,\"LOG_WGT_BUFF_SIZE\":20,\"LOG_ACC_BUFF_SIZE\":17}");
  config_err(text, "cfg.json: LOG_ACC_BUFF_SIZE, LOG_INP_BUFF_SIZE, LOG_WGT_BUFF_SIZE: a micro-op needs 11+11+12 = 34 bits with these "
                   "buffer depths, more than 32");
  /* inconsistent: a buffer smaller than one element */
  strcpy(text, "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,\"LOG_WGT_WIDTH\":3,"
               "\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":0,\"LOG_BLOCK\":6,\"LOG_UOP_BUFF_SIZE\":15,"
               "\"LOG_INP_BUFF_SIZE\":15,\"LOG_WGT_BUFF_SIZE\":11,\"LOG_ACC_BUFF_SIZE\":17}");
  config_err(text, "cfg.json: LOG_WGT_BUFF_SIZE: the buffer is smaller than one element of this "
                   "configuration (BATCH 1, BLOCK 64)");
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config *c = NULL;
  CHECK_EQ_INT(tl_vta_config_load(ctx, "/nonexistent/vta_config.json", &c), TL_E_IO);
  CHECK(c == NULL);
  tl_ctx_free(ctx);
}

/* ---- ISA ----------------------------------------------------------------------------- */

static uint32_t rnd(uint64_t *st) {
  *st = *st * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*st >> 33);
}
static uint32_t rbits(uint64_t *st, int w) { return w >= 32 ? rnd(st) : rnd(st) & ((1u << w) - 1); }

static tl_vta_insn random_insn(const tl_vta_config *c, uint64_t *st) {
  const tl_vta_layout *L = &c->lay;
  tl_vta_insn in = {0};
  static const int ops[] = {TL_VTA_LOAD, TL_VTA_STORE, TL_VTA_GEMM, TL_VTA_FINISH, TL_VTA_ALU};
  in.opcode = ops[rnd(st) % 5];
  in.pop_prev = rnd(st) & 1;
  in.pop_next = rnd(st) & 1;
  in.push_prev = rnd(st) & 1;
  in.push_next = rnd(st) & 1;
  if (in.opcode == TL_VTA_LOAD || in.opcode == TL_VTA_STORE) {
    static const int lm[] = {0, 1, 2, 3, 5};
    in.mem_type = in.opcode == TL_VTA_STORE ? TL_VTA_MEM_OUT : lm[rnd(st) % 5];
    in.sram_base = rbits(st, L->sram_base.width);
    in.dram_base = rbits(st, L->dram_base.width);
    in.y_size = rbits(st, 16);
    in.x_size = rbits(st, 16);
    in.x_stride = rbits(st, 16);
    in.y_pad0 = rbits(st, 4);
    in.y_pad1 = rbits(st, 4);
    in.x_pad0 = rbits(st, 4);
    in.x_pad1 = rbits(st, 4);
  } else if (in.opcode == TL_VTA_GEMM || in.opcode == TL_VTA_ALU) {
    in.reset = rnd(st) & 1;
    in.uop_bgn = rbits(st, L->uop_bgn.width);
    in.uop_end = rbits(st, L->uop_end.width);
    in.iter_out = rbits(st, 14);
    in.iter_in = rbits(st, 14);
    in.dst_out = rbits(st, L->dst_out.width);
    in.dst_in = rbits(st, L->dst_in.width);
    if (in.opcode == TL_VTA_GEMM) {
      in.src_out = rbits(st, L->src_out.width);
      in.src_in = rbits(st, L->src_in.width);
      in.wgt_out = rbits(st, L->wgt_out.width);
      in.wgt_in = rbits(st, L->wgt_in.width);
    } else {
      in.src_out = rbits(st, L->alu_src_out.width);
      in.src_in = rbits(st, L->alu_src_in.width);
      in.alu_op = (int)(rnd(st) % 5);
      in.use_imm = rnd(st) & 1;
      in.imm = (int16_t)rbits(st, 16);
    }
  }
  return in;
}

TL_TEST(vta_isa_roundtrip) {
  tl_ctx *ctx = tl_ctx_new();
  const char *extras[] = {"", ",\"LOG_BATCH\":1,\"LOG_BLOCK\":3,\"LOG_ACC_BUFF_SIZE\":15"};
  for (int e = 0; e < 2; e++) {
    char text[1024];
    /* the second config overrides keys: rebuild the text without duplicates */
    if (e == 0) snprintf(text, sizeof text, default_json, "");
    else
      strcpy(text, "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,"
                   "\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":1,\"LOG_BLOCK\":3,"
                   "\"LOG_UOP_BUFF_SIZE\":14,\"LOG_INP_BUFF_SIZE\":14,\"LOG_WGT_BUFF_SIZE\":16,"
                   "\"LOG_ACC_BUFF_SIZE\":15}");
    (void)extras;
    tl_vta_config c;
    CHECK_MSG(tl_vta_config_parse(ctx, text, "t", &c) == 0, "%s", tl_errmsg(ctx));
    uint64_t st = 12345 + e;
    for (int i = 0; i < 5000; i++) {
      tl_vta_insn in = random_insn(&c, &st), back;
      uint8_t bytes[16], again[16];
      CHECK_MSG(tl_vta_insn_encode(ctx, &c, &in, bytes) == 0, "encode: %s", tl_errmsg(ctx));
      CHECK_MSG(tl_vta_insn_decode(ctx, &c, bytes, &back) == 0, "decode: %s", tl_errmsg(ctx));
      CHECK_MSG(memcmp(&in, &back, sizeof in) == 0, "round trip of a random %s differs",
                tl_vta_opcode_name(in.opcode));
      CHECK(tl_vta_insn_encode(ctx, &c, &back, again) == 0);
      CHECK(memcmp(bytes, again, 16) == 0);
      tl_vta_uop u = {rbits(&st, c.lay.uop_dst.width), rbits(&st, c.lay.uop_src.width),
                      rbits(&st, c.lay.uop_wgt.width)}, ub;
      uint32_t w;
      CHECK(tl_vta_uop_encode(ctx, &c, &u, &w) == 0);
      tl_vta_uop_decode(&c, w, &ub);
      CHECK(u.dst == ub.dst && u.src == ub.src && u.wgt == ub.wgt);
    }
  }
  tl_ctx_free(ctx);
}

TL_TEST(vta_isa_bits_and_errors) {
  tl_vta_config c = cfg_with("");
  tl_ctx *ctx = tl_ctx_new();
  /* a LOAD INP: opcode 0, push_next bit 6, memory type 2 at bits [9:7], x_size at [95:80] */
  tl_vta_insn in = {.opcode = TL_VTA_LOAD, .push_next = 1, .mem_type = TL_VTA_MEM_INP,
                    .sram_base = 5, .dram_base = 0x100, .y_size = 3, .x_size = 0x1234,
                    .x_stride = 7, .x_pad1 = 0xf};
  uint8_t b[16];
  CHECK(tl_vta_insn_encode(ctx, &c, &in, b) == 0);
  uint64_t w0 = 0, w1 = 0;
  for (int i = 0; i < 8; i++) w0 |= (uint64_t)b[i] << (8 * i), w1 |= (uint64_t)b[8 + i] << (8 * i);
  CHECK_EQ_INT(w0 & 7, 0);
  CHECK_EQ_INT((w0 >> 6) & 1, 1);
  CHECK_EQ_INT((w0 >> 7) & 7, 2);
  CHECK_EQ_INT((w0 >> 10) & 0xffff, 5);
  CHECK_EQ_INT((w0 >> 26) & 0xffffffff, 0x100);
  CHECK_EQ_INT(w1 & 0xffff, 3);
  CHECK_EQ_INT((w1 >> 16) & 0xffff, 0x1234);
  CHECK_EQ_INT((w1 >> 60) & 0xf, 0xf);
  /* an ALU's signed immediate at [127:112] */
  tl_vta_insn alu = {.opcode = TL_VTA_ALU, .alu_op = TL_VTA_ALU_SHR, .use_imm = 1, .imm = -3,
                     .uop_end = 1, .iter_out = 1, .iter_in = 1};
  CHECK(tl_vta_insn_encode(ctx, &c, &alu, b) == 0);
  CHECK_EQ_INT(b[14] | b[15] << 8, 0xfffd);
  CHECK_EQ_INT((b[13] >> 4) & 7, TL_VTA_ALU_SHR);
  /* encode: a field too wide */
  tl_vta_insn big = {.opcode = TL_VTA_GEMM, .iter_out = 1 << 14};
  CHECK_EQ_INT(tl_vta_insn_encode(ctx, &c, &big, b), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "vta insn: iter_out 16384 does not fit its 14 bits");
  /* decode: bad opcodes, memory types and ALU opcodes */
  for (int op = 5; op < 8; op++) {
    memset(b, 0, 16);
    b[0] = (uint8_t)op;
    CHECK_EQ_INT(tl_vta_insn_decode(ctx, &c, b, &in), TL_E_PARSE);
    char want[128];
    snprintf(want, sizeof want,
             "bad opcode %d (expected LOAD 0, STORE 1, GEMM 2, FINISH 3 or ALU 4)", op);
    CHECK_STREQ(tl_errmsg(ctx), want);
  }
  memset(b, 0, 16);
  b[0] = TL_VTA_STORE;
  b[1] = 1;                         /* memory type 2 (INP) at bits [9:7] */
  CHECK_EQ_INT(tl_vta_insn_decode(ctx, &c, b, &in), TL_E_PARSE);
  CHECK_STREQ(tl_errmsg(ctx), "STORE with bad memory type 2 (expected OUT 4)");
  memset(b, 0, 16);
  b[0] = TL_VTA_ALU;
  b[13] = 7 << 4;                   /* alu opcode 7 */
  CHECK_EQ_INT(tl_vta_insn_decode(ctx, &c, b, &in), TL_E_PARSE);
  CHECK_STREQ(tl_errmsg(ctx), "ALU with bad ALU opcode 7 (expected MIN 0, MAX 1, ADD 2, SHR 3 or MUL 4)");
  tl_ctx_free(ctx);
}

TL_TEST(vta_disasm) {
  tl_vta_config c = cfg_with("");
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_insn prog[] = {
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_INP, .pop_next = 1, .push_next = 1,
       .sram_base = 0, .dram_base = 0x40, .y_size = 4, .x_size = 8, .x_stride = 16, .y_pad0 = 1,
       .y_pad1 = 1, .x_pad0 = 1, .x_pad1 = 1},
      {.opcode = TL_VTA_GEMM, .pop_prev = 1, .uop_bgn = 0, .uop_end = 16, .iter_out = 4,
       .iter_in = 2, .dst_out = 8, .dst_in = 1, .src_out = 16, .src_in = 1},
      {.opcode = TL_VTA_ALU, .alu_op = TL_VTA_ALU_SHR, .use_imm = 1, .imm = 8, .uop_bgn = 16,
       .uop_end = 17, .iter_out = 1, .iter_in = 64, .dst_in = 1, .src_in = 1, .push_next = 1},
      {.opcode = TL_VTA_STORE, .mem_type = TL_VTA_MEM_OUT, .pop_prev = 1, .push_prev = 1,
       .dram_base = 0x10, .y_size = 1, .x_size = 64, .x_stride = 64},
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_UOP, .pop_next = 1},
      {.opcode = TL_VTA_FINISH},
  };
  int n = (int)TL_ARRAY_SIZE(prog);
  uint8_t bytes[16 * 6];
  for (int i = 0; i < n; i++) CHECK(tl_vta_insn_encode(ctx, &c, &prog[i], bytes + 16 * i) == 0);
  char *out = NULL;
  CHECK_MSG(tl_vta_disasm_bytes(ctx, &c, bytes, sizeof bytes, &out) == 0, "%s", tl_errmsg(ctx));
  CHECK_STREQ(out,
              "    0  LOAD   INP  sram 0 <- dram 0x40+[4 x 8, stride 16] pad y(1,1) x(1,1)  | pop g2l push l2g\n"
              "    1  GEMM   uop [0,16) x [4 x 2] dst(8,1) src(16,1) wgt(0,0)  | pop l2g\n"
              "    2  ALU    SHR imm 8 uop [16,17) x [1 x 64] dst(0,1) src(0,1)  | push g2s\n"
              "    3  STORE  OUT  sram 0 -> dram 0x10+[1 x 64, stride 64]  | pop g2s push s2g\n"
              "    4  LOAD   UOP  nop  | pop s2g\n"
              "    5  FINISH\n");
  tl_vta_free(out);
  bytes[16 * 2] = 7;   /* instruction 2: opcode 7 */
  CHECK_EQ_INT(tl_vta_disasm_bytes(ctx, &c, bytes, sizeof bytes, &out), TL_E_PARSE);
  CHECK_STREQ(tl_errmsg(ctx), "vta disasm: instruction 2: bad opcode 7 (expected LOAD 0, STORE 1, "
                              "GEMM 2, FINISH 3 or ALU 4)");
  CHECK_EQ_INT(tl_vta_disasm_bytes(ctx, &c, bytes, 17, &out), TL_E_PARSE);
  tl_ctx_free(ctx);
}

/* ---- simulator against a sequential reference -------------------------------------------- */

/* The reference: a plain interpreter of the instruction list in program
** order over flat arrays, written from the ISA's definition (docs/vta.md). */
typedef struct ref {
  const tl_vta_config *c;
  uint8_t *dram;        /* the simulator's DRAM contents, copied; offset = phys - 4096 */
  size_t dram_bytes;
  int8_t *inp, *wgt;
  int32_t *acc;
  uint32_t *uop;
  uint64_t gemm_counter, alu_counter;
} ref;

static int32_t ref_shift(int32_t x, int32_t y) {
  int64_t v = x;
  if (y >= 0) return (int32_t)(v >> (y > 31 ? 31 : y));
  if (y <= -32) return 0;
  return (int32_t)(uint32_t)((uint64_t)(uint32_t)x << -y);
}

static void ref_run(ref *r, const tl_vta_insn *prog, int n) {
  const tl_vta_config *c = r->c;
  int B = c->batch, BI = c->block_in, BO = c->block_out;
  for (int p = 0; p < n; p++) {
    const tl_vta_insn *in = &prog[p];
    if (in->opcode == TL_VTA_LOAD && in->x_size) {
      int eb = tl_vta_elem_bytes(c, in->mem_type);
      int xt = (int)(in->x_pad0 + in->x_size + in->x_pad1);
      int rows = (int)(in->y_pad0 + in->y_size + in->y_pad1);
      for (int y = 0; y < rows; y++)
        for (int x = 0; x < xt; x++) {
          int idx = (int)in->sram_base + y * xt + x;
          int inside = y >= (int)in->y_pad0 && y < (int)(in->y_pad0 + in->y_size) &&
                       x >= (int)in->x_pad0 && x < (int)(in->x_pad0 + in->x_size);
          uint64_t e = in->dram_base + (uint64_t)(y - (int)in->y_pad0) * in->x_stride +
                       (uint64_t)(x - (int)in->x_pad0);
          const uint8_t *src = inside ? r->dram + e * eb - 4096 : NULL;
          for (int k = 0; k < eb; k++) {
            int v = src ? src[k] : 0;
            switch (in->mem_type) {
            case TL_VTA_MEM_UOP: ((uint8_t *)&r->uop[idx])[k] = (uint8_t)v; break;
            case TL_VTA_MEM_INP: r->inp[idx * eb + k] = (int8_t)v; break;
            case TL_VTA_MEM_WGT: r->wgt[idx * eb + k] = (int8_t)v; break;
            case TL_VTA_MEM_ACC: ((uint8_t *)&r->acc[idx * B * BO])[k] = (uint8_t)v; break;
            case TL_VTA_MEM_ACC8: r->acc[idx * B * BO + k] = (int8_t)v; break;
            }
          }
        }
    } else if (in->opcode == TL_VTA_STORE && in->x_size) {
      for (uint32_t y = 0; y < in->y_size; y++)
        for (uint32_t x = 0; x < in->x_size; x++)
          for (int l = 0; l < B * BO; l++) {
            uint64_t e = in->dram_base + (uint64_t)y * in->x_stride + x;
            r->dram[e * c->out_elem_bytes - 4096 + l] =
                (uint8_t)(r->acc[(in->sram_base + y * in->x_size + x) * B * BO + l] & 0xff);
          }
    } else if (in->opcode == TL_VTA_GEMM || in->opcode == TL_VTA_ALU) {
      for (uint32_t i = 0; i < in->iter_out; i++)
        for (uint32_t j = 0; j < in->iter_in; j++)
          for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
            /* the default micro-op fields: dst, src, wgt from the low bits up */
            uint32_t w = r->uop[u];
            int dw = c->log_acc_depth, sw = TL_MAX(c->log_acc_depth, c->log_inp_depth);
            uint32_t d = (w & ((1u << dw) - 1)) + i * in->dst_out + j * in->dst_in;
            uint32_t s = ((w >> dw) & ((1u << sw) - 1)) + i * in->src_out + j * in->src_in;
            uint32_t g = (w >> (dw + sw)) + i * in->wgt_out + j * in->wgt_in;
            for (int b = 0; b < B; b++)
              for (int o = 0; o < BO; o++) {
                int32_t *dst = &r->acc[d * B * BO + b * BO + o];
                if (in->reset) { *dst = 0; continue; }
                if (in->opcode == TL_VTA_GEMM) {
                  int64_t sum = 0;
                  for (int k = 0; k < BI; k++)
                    sum += r->inp[s * B * BI + b * BI + k] * r->wgt[g * BO * BI + o * BI + k];
                  *dst = (int32_t)(uint32_t)((int64_t)*dst + sum);
                } else {
                  int64_t a = *dst, v = in->use_imm ? in->imm : r->acc[s * B * BO + b * BO + o];
                  switch (in->alu_op) {
                  case TL_VTA_ALU_MIN: *dst = (int32_t)(a < v ? a : v); break;
                  case TL_VTA_ALU_MAX: *dst = (int32_t)(a > v ? a : v); break;
                  case TL_VTA_ALU_ADD: *dst = (int32_t)(uint32_t)(uint64_t)(a + v); break;
                  case TL_VTA_ALU_SHR: *dst = ref_shift((int32_t)a, (int32_t)v); break;
                  case TL_VTA_ALU_MUL: *dst = (int32_t)(uint32_t)(uint64_t)(a * v); break;
                  }
                }
              }
          }
      uint64_t it = (uint64_t)in->iter_out * in->iter_in * (in->uop_end - in->uop_bgn);
      if (in->opcode == TL_VTA_ALU) r->alu_counter += it;
      else if (!in->reset) r->gemm_counter += it;
    }
  }
}

/* A program builder that serialises by tokens: an instruction waits for the
** one before it when they run on different modules (load and store talk
** through a compute NOP), so any correct execution equals program order. */
typedef struct prog { tl_vta_insn v[512]; int n; int last_q; } prog;

static void emit(prog *p, tl_vta_insn in) {
  int q = tl_vta_insn_queue(&in);
  if (p->n > 0 && p->last_q != q) {
    if ((p->last_q == TL_VTA_Q_LOAD && q == TL_VTA_Q_STORE) ||
        (p->last_q == TL_VTA_Q_STORE && q == TL_VTA_Q_LOAD))
      emit(p, (tl_vta_insn){.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_UOP});
    tl_vta_insn *prev = &p->v[p->n - 1];
    if (p->last_q < q) prev->push_next = 1, in.pop_prev = 1;
    else prev->push_prev = 1, in.pop_next = 1;
  }
  p->v[p->n++] = in;
  p->last_q = q;
}

static void random_program(const tl_vta_config *c, uint64_t *st, prog *p, uint32_t inp_e,
                           uint32_t wgt_e, uint32_t acc_e, uint32_t acc8_e, uint32_t uop_e,
                           uint32_t out_e, int nuops) {
  p->n = 0;
  int phases = 1 + (int)(rnd(st) % 4);
  for (int ph = 0; ph < phases; ph++) {
    int nl = 1 + (int)(rnd(st) % 3);
    for (int i = 0; i < nl; i++) {
      int inp = rnd(st) & 1;
      tl_vta_insn in = {.opcode = TL_VTA_LOAD, .mem_type = inp ? TL_VTA_MEM_INP : TL_VTA_MEM_WGT,
                        .y_size = 1 + rnd(st) % 4, .x_size = rnd(st) % 8,
                        .x_stride = 8 + rnd(st) % 4, .y_pad0 = rnd(st) % 2,
                        .y_pad1 = rnd(st) % 2, .x_pad0 = rnd(st) % 3, .x_pad1 = rnd(st) % 3,
                        .sram_base = rnd(st) % 24};
      in.dram_base = (inp ? inp_e : wgt_e) + rnd(st) % 16;
      emit(p, in);
    }
    emit(p, (tl_vta_insn){.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_UOP, .y_size = 1,
                          .x_size = (uint32_t)nuops, .x_stride = (uint32_t)nuops,
                          .dram_base = uop_e});
    if (rnd(st) & 1) {
      int a8 = rnd(st) & 1;
      emit(p, (tl_vta_insn){.opcode = TL_VTA_LOAD, .mem_type = a8 ? TL_VTA_MEM_ACC8 : TL_VTA_MEM_ACC,
                            .y_size = 1 + rnd(st) % 3, .x_size = 1 + rnd(st) % 6, .x_stride = 8,
                            .x_pad0 = rnd(st) % 2, .y_pad1 = rnd(st) % 2,
                            .sram_base = rnd(st) % 32, .dram_base = (a8 ? acc8_e : acc_e) + rnd(st) % 8});
    }
    int nc = 1 + (int)(rnd(st) % 4);
    for (int i = 0; i < nc; i++) {
      tl_vta_insn in = {.opcode = (rnd(st) & 1) ? TL_VTA_GEMM : TL_VTA_ALU};
      in.uop_bgn = rnd(st) % (uint32_t)nuops;
      in.uop_end = in.uop_bgn + rnd(st) % ((uint32_t)nuops - in.uop_bgn + 1);
      in.iter_out = rnd(st) % 4;
      in.iter_in = rnd(st) % 4;
      in.dst_out = rnd(st) % 8;
      in.dst_in = rnd(st) % 4;
      in.src_out = rnd(st) % 8;
      in.src_in = rnd(st) % 4;
      in.reset = rnd(st) % 8 == 0;
      if (in.opcode == TL_VTA_GEMM) {
        in.wgt_out = rnd(st) % 8;
        in.wgt_in = rnd(st) % 4;
      } else {
        in.alu_op = (int)(rnd(st) % 5);
        in.use_imm = rnd(st) & 1;
        in.imm = in.alu_op == TL_VTA_ALU_SHR ? (int32_t)(rnd(st) % 81) - 40
                                             : (int16_t)rnd(st);
      }
      emit(p, in);
    }
    emit(p, (tl_vta_insn){.opcode = TL_VTA_STORE, .mem_type = TL_VTA_MEM_OUT,
                          .y_size = 1 + rnd(st) % 3, .x_size = 1 + rnd(st) % 8, .x_stride = 8,
                          .sram_base = rnd(st) % 40, .dram_base = out_e + (uint32_t)(rnd(st) % 16)});
  }
  emit(p, (tl_vta_insn){.opcode = TL_VTA_FINISH});
}

static void fill(tl_vta_sim *s, uint32_t phys, size_t n, uint64_t *st) {
  uint8_t *p = tl_vta_sim_host_ptr(s, phys, n);
  CHECK(p != NULL);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd(st);
}

static void sim_vs_reference(const char *extra, uint64_t seed, int nprogs) {
  char text[1024];
  if (extra) strcpy(text, extra);
  else snprintf(text, sizeof text, default_json, "");
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config c;
  CHECK_MSG(tl_vta_config_parse(ctx, text, "t", &c) == 0, "%s", tl_errmsg(ctx));
  tl_vta_sim *s = NULL;
  CHECK(tl_vta_sim_new(ctx, &c, 1 << 22, &s) == 0);
  uint64_t st = seed;
  /* DRAM buffers of random bytes; element indices of each */
  const int nuops = 24;
  uint32_t inp, wgt, acc, acc8, uop, out, ins;
  size_t big = 16 * 4096;
  CHECK(tl_vta_sim_alloc(ctx, s, big, &inp) == 0);
  CHECK(tl_vta_sim_alloc(ctx, s, big, &wgt) == 0);
  CHECK(tl_vta_sim_alloc(ctx, s, big, &acc) == 0);
  CHECK(tl_vta_sim_alloc(ctx, s, big, &acc8) == 0);
  CHECK(tl_vta_sim_alloc(ctx, s, 4096, &uop) == 0);
  CHECK(tl_vta_sim_alloc(ctx, s, big, &out) == 0);
  CHECK(tl_vta_sim_alloc(ctx, s, 512 * 16, &ins) == 0);
  int lanes = c.batch * c.block_out;
  ref r = {.c = &c, .dram_bytes = (size_t)1 << 22};
  r.inp = calloc((size_t)c.inp_depth, (size_t)c.inp_elem_bytes);
  r.wgt = calloc((size_t)c.wgt_depth, (size_t)c.wgt_elem_bytes);
  r.acc = calloc((size_t)c.acc_depth * lanes, 4);
  r.uop = calloc((size_t)c.uop_depth, 4);
  for (int t = 0; t < nprogs; t++) {
    fill(s, inp, big, &st);
    fill(s, wgt, big, &st);
    fill(s, acc, big, &st);
    fill(s, acc8, big, &st);
    fill(s, out, big, &st);
    /* micro-ops with small indices, so the loop factors stay in range */
    uint32_t *u = tl_vta_sim_host_ptr(s, uop, 4096);
    for (int i = 0; i < nuops; i++) {
      tl_vta_uop op = {rnd(&st) % 32, rnd(&st) % 32, rnd(&st) % 32};
      CHECK(tl_vta_uop_encode(ctx, &c, &op, &u[i]) == 0);
    }
    prog p;
    random_program(&c, &st, &p, inp / c.inp_elem_bytes, wgt / c.wgt_elem_bytes,
                   acc / c.acc_elem_bytes, acc8 / (c.batch * c.block_out), uop / 4,
                   out / c.out_elem_bytes, nuops);
    uint8_t *ib = tl_vta_sim_host_ptr(s, ins, (size_t)p.n * 16);
    for (int i = 0; i < p.n; i++)
      CHECK_MSG(tl_vta_insn_encode(ctx, &c, &p.v[i], ib + 16 * i) == 0, "%s", tl_errmsg(ctx));
    /* the reference starts from the same DRAM and SRAMs */
    r.dram = malloc(r.dram_bytes);
    memcpy(r.dram, tl_vta_sim_host_ptr(s, 4096, r.dram_bytes - 4096), r.dram_bytes - 4096);
    memcpy(r.acc, tl_vta_sim_acc(s), (size_t)c.acc_depth * lanes * 4);
    tl_vta_sim_clear_stats(s);
    r.gemm_counter = r.alu_counter = 0;
    CHECK_MSG(tl_vta_sim_run(ctx, s, ins, p.n) == 0, "program %d: %s", t, tl_errmsg(ctx));
    /* the SRAMs a previous program left are the reference's too: load them by running */
    ref_run(&r, p.v, p.n);
    CHECK_MSG(memcmp(r.dram, tl_vta_sim_host_ptr(s, 4096, r.dram_bytes - 4096),
                     r.dram_bytes - 4096) == 0,
              "program %d: DRAM differs from the reference", t);
    CHECK_MSG(memcmp(r.acc, tl_vta_sim_acc(s), (size_t)c.acc_depth * lanes * 4) == 0,
              "program %d: accumulators differ from the reference", t);
    const tl_vta_stats *stt = tl_vta_sim_stats(s);
    CHECK_EQ_INT(stt->gemm_counter, r.gemm_counter);
    CHECK_EQ_INT(stt->alu_counter, r.alu_counter);
    CHECK(stt->cycles > 0);
    free(r.dram);
  }
  free(r.inp);
  free(r.wgt);
  free(r.acc);
  free(r.uop);
  tl_vta_sim_free(s);
  tl_ctx_free(ctx);
}

TL_TEST(vta_sim_random_vs_reference) {
  sim_vs_reference(NULL, 7, 150);
  /* batch 2, block 8: lanes of several rows */
  sim_vs_reference("{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,"
                   "\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":1,\"LOG_BLOCK\":3,"
                   "\"LOG_UOP_BUFF_SIZE\":14,\"LOG_INP_BUFF_SIZE\":14,\"LOG_WGT_BUFF_SIZE\":16,"
                   "\"LOG_ACC_BUFF_SIZE\":15}",
                   99, 100);
}

/* ---- errors -------------------------------------------------------------------------- */

static int run_prog(tl_ctx *ctx, tl_vta_sim *s, const tl_vta_config *c, const tl_vta_insn *v,
                    int n) {
  uint32_t ins;
  CHECK(tl_vta_sim_alloc(ctx, s, (size_t)n * 16, &ins) == 0);
  uint8_t *b = tl_vta_sim_host_ptr(s, ins, (size_t)n * 16);
  for (int i = 0; i < n; i++) CHECK(tl_vta_insn_encode(ctx, c, &v[i], b + 16 * i) == 0);
  int rc = tl_vta_sim_run(ctx, s, ins, n);
  tl_vta_sim_release(ctx, s, ins);
  return rc;
}

TL_TEST(vta_sim_errors) {
  tl_vta_config c = cfg_with("");
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_sim *s = NULL;
  CHECK(tl_vta_sim_new(ctx, &c, 1 << 20, &s) == 0);
  uint32_t buf;
  CHECK(tl_vta_sim_alloc(ctx, s, 65536, &buf) == 0);
  /* input SRAM overflow */
  tl_vta_insn over[] = {
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_INP, .sram_base = 2040, .y_size = 1,
       .x_size = 16, .x_stride = 16, .dram_base = buf / 16},
      {.opcode = TL_VTA_FINISH}};
  CHECK_EQ_INT(run_prog(ctx, s, &c, over, 2), TL_E_RUNTIME);
  CHECK_STREQ(tl_errmsg(ctx), "vta sim: instruction 0 (LOAD   INP  sram 2040 <- dram 0x100+[1 x 16, "
                              "stride 16]): input buffer overflow: elements [2040, 2056) of 2048");
  /* a GEMM reaching past the accumulator through its loop factors */
  uint32_t *u = tl_vta_sim_host_ptr(s, buf, 4);
  tl_vta_uop op = {2000, 0, 0};
  CHECK(tl_vta_uop_encode(ctx, &c, &op, u) == 0);
  tl_vta_insn gemm[] = {
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_UOP, .y_size = 1, .x_size = 1,
       .x_stride = 1, .dram_base = buf / 4},
      {.opcode = TL_VTA_GEMM, .uop_bgn = 0, .uop_end = 1, .iter_out = 2, .iter_in = 1,
       .dst_out = 100},
      {.opcode = TL_VTA_FINISH}};
  CHECK_EQ_INT(run_prog(ctx, s, &c, gemm, 3), TL_E_RUNTIME);
  CHECK(strstr(tl_errmsg(ctx), "accumulator buffer overflow: index 2100 of 2048 (micro-op 0, "
                               "iteration 1,0)") != NULL);
  /* DRAM out of range */
  tl_vta_insn far[] = {
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_WGT, .y_size = 1, .x_size = 1,
       .x_stride = 1, .dram_base = 100000},
      {.opcode = TL_VTA_FINISH}};
  CHECK_EQ_INT(run_prog(ctx, s, &c, far, 2), TL_E_RUNTIME);
  CHECK(strstr(tl_errmsg(ctx), "DRAM read out of range: row 0, elements [100000, +1) of 256 bytes"));
  /* token deadlock: compute waits for a load that never pushes; store waits too */
  tl_vta_insn dead[] = {
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_INP, .y_size = 1, .x_size = 1,
       .x_stride = 1, .dram_base = buf / 16},
      {.opcode = TL_VTA_GEMM, .pop_prev = 1, .uop_end = 1, .iter_out = 1, .iter_in = 1},
      {.opcode = TL_VTA_STORE, .mem_type = TL_VTA_MEM_OUT, .pop_prev = 1},
      {.opcode = TL_VTA_FINISH}};
  CHECK_EQ_INT(run_prog(ctx, s, &c, dead, 4), TL_E_RUNTIME);
  CHECK_STREQ(tl_errmsg(ctx), "vta sim: token deadlock: load done; compute waits at instruction 1 "
                              "(GEMM) for a token on l2g; store waits at instruction 2 (STORE OUT) "
                              "for a token on g2s");
  /* no FINISH */
  CHECK_EQ_INT(run_prog(ctx, s, &c, dead, 1), TL_E_RUNTIME);
  CHECK_STREQ(tl_errmsg(ctx), "vta sim: the stream of 1 instructions has no FINISH");
  /* a flag the module has no queue for */
  tl_vta_insn badflag[] = {{.opcode = TL_VTA_STORE, .mem_type = TL_VTA_MEM_OUT, .push_next = 1},
                           {.opcode = TL_VTA_FINISH}};
  CHECK_EQ_INT(run_prog(ctx, s, &c, badflag, 2), TL_E_PARSE);
  CHECK_STREQ(tl_errmsg(ctx), "vta sim: instruction 0: push_next on the store module, which has no "
                              "such token queue");
  /* a bad opcode in the stream */
  uint32_t ins;
  CHECK(tl_vta_sim_alloc(ctx, s, 32, &ins) == 0);
  uint8_t *b = tl_vta_sim_host_ptr(s, ins, 32);
  memset(b, 0, 32);
  b[0] = TL_VTA_FINISH;
  b[16] = 6;
  CHECK_EQ_INT(tl_vta_sim_run(ctx, s, ins, 2), TL_E_PARSE);
  CHECK_STREQ(tl_errmsg(ctx), "vta sim: instruction 1: bad opcode 6 (expected LOAD 0, STORE 1, "
                              "GEMM 2, FINISH 3 or ALU 4)");
  /* a stream that asks for too much work */
  tl_vta_sim_set_work_limit(s, 1000);
  tl_vta_insn huge[] = {{.opcode = TL_VTA_GEMM, .uop_end = 100, .iter_out = 100, .iter_in = 100},
                        {.opcode = TL_VTA_FINISH}};
  CHECK_EQ_INT(run_prog(ctx, s, &c, huge, 2), TL_E_RUNTIME);
  CHECK_STREQ(tl_errmsg(ctx), "vta sim: the stream asks for 1000000 micro-op iterations, more than "
                              "the limit of 1000 per run");
  CHECK_EQ_INT(tl_vta_sim_run(ctx, s, 0, 1), TL_E_ARG);
  tl_vta_sim_free(s);
  tl_ctx_free(ctx);
}

/* ---- the cycle model on a hand-computed program ------------------------------------------- */

TL_TEST(vta_sim_cycles_hand_computed) {
  tl_vta_config c = cfg_with(",\"DRAM_LATENCY_CYCLES\":10,\"DRAM_BYTES_PER_CYCLE\":8,"
                             "\"GEMM_PIPELINE\":4,\"ALU_PIPELINE\":4,\"ALU_II\":2,\"GEMM_II\":1");
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_sim *s = NULL;
  CHECK(tl_vta_sim_new(ctx, &c, 1 << 20, &s) == 0);
  uint32_t buf;
  CHECK(tl_vta_sim_alloc(ctx, s, 65536, &buf) == 0);
  uint32_t *u = tl_vta_sim_host_ptr(s, buf, 32);
  for (int i = 0; i < 8; i++) {
    tl_vta_uop op = {(uint32_t)i, (uint32_t)i, 0};
    CHECK(tl_vta_uop_encode(ctx, &c, &op, &u[i]) == 0);
  }
  tl_vta_insn prog[] = {
      /* load:    0..18  (latency 10, then 64 B / 8 = 8 cycles on the DRAM port) */
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_INP, .y_size = 1, .x_size = 4,
       .x_stride = 4, .dram_base = buf / 16 + 16},
      /* load:   18..92  (latency to 28, 512 B = 64 cycles; port free since 22) */
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_WGT, .y_size = 1, .x_size = 2,
       .x_stride = 2, .dram_base = buf / 256 + 1, .push_next = 1},
      /* compute: 0..22  (latency to 10, waits for the port until 18, 32 B = 4 cycles) */
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_UOP, .y_size = 1, .x_size = 8,
       .x_stride = 8, .dram_base = buf / 4},
      /* compute: 92..112 (waits for the l2g token of 92; 4 + 16 iterations) */
      {.opcode = TL_VTA_GEMM, .pop_prev = 1, .uop_bgn = 0, .uop_end = 8, .iter_out = 2,
       .iter_in = 1},
      /* compute: 112..132 (4 + 8 iterations x 2) */
      {.opcode = TL_VTA_ALU, .alu_op = TL_VTA_ALU_SHR, .use_imm = 1, .imm = 3, .uop_bgn = 0,
       .uop_end = 8, .iter_out = 1, .iter_in = 1, .push_next = 1},
      /* store:  132..158 (latency to 142, 128 B = 16 cycles) */
      {.opcode = TL_VTA_STORE, .mem_type = TL_VTA_MEM_OUT, .pop_prev = 1, .push_prev = 1,
       .y_size = 1, .x_size = 8, .x_stride = 8, .dram_base = buf / 16 + 64},
      /* compute: 158..159 */
      {.opcode = TL_VTA_FINISH, .pop_next = 1},
  };
  CHECK_MSG(run_prog(ctx, s, &c, prog, 7) == 0, "%s", tl_errmsg(ctx));
  const tl_vta_stats *st = tl_vta_sim_stats(s);
  CHECK_EQ_INT(st->cycles, 159);
  CHECK_EQ_INT(st->busy[TL_VTA_Q_LOAD], 18 + 74);
  CHECK_EQ_INT(st->busy[TL_VTA_Q_COMPUTE], 22 + 20 + 20 + 1);
  CHECK_EQ_INT(st->busy[TL_VTA_Q_STORE], 26);
  CHECK_EQ_INT(st->gemm_cycles, 20);
  CHECK_EQ_INT(st->alu_cycles, 20);
  CHECK_EQ_INT(st->gemm_counter, 16);
  CHECK_EQ_INT(st->alu_counter, 8);
  CHECK_EQ_INT(st->inp_load_nbytes, 64);
  CHECK_EQ_INT(st->wgt_load_nbytes, 512);
  CHECK_EQ_INT(st->uop_load_nbytes, 32);
  CHECK_EQ_INT(st->out_store_nbytes, 128);
  char *js = NULL;
  CHECK(tl_vta_sim_stats_json(ctx, s, &js) == 0);
  CHECK(strstr(js, "\"cycles\":159,\"seconds\":1.59e-06,") != NULL);
  tl_vta_free(js);
  /* padding costs one cycle per zero element: 1 row of 4 + 2 x 2 per data row */
  tl_vta_sim_clear_stats(s);
  tl_vta_insn pad[] = {
      {.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_INP, .y_size = 2, .x_size = 2,
       .x_stride = 2, .y_pad0 = 1, .x_pad0 = 1, .x_pad1 = 1, .dram_base = buf / 16},
      {.opcode = TL_VTA_FINISH}};
  CHECK_MSG(run_prog(ctx, s, &c, pad, 2) == 0, "%s", tl_errmsg(ctx));
  /* 10 latency + 2 rows x ceil(32/8) + (1 x 4 + 2 x 2) zeros = 10 + 8 + 8 */
  CHECK_EQ_INT(st->busy[TL_VTA_Q_LOAD], 26);
  CHECK_EQ_INT(st->cycles, 26);
  CHECK_EQ_INT(st->inp_load_nbytes, 64);
  tl_vta_sim_free(s);
  tl_ctx_free(ctx);
}

/* ---- runtime: tokens, micro-op cache, sync ------------------------------------------------ */

#include "../../targets/vta/conv2d.h"

static char *disasm_of(tl_ctx *ctx, tl_vta_cmd *q, const tl_vta_config *c) {
  tl_buf b = {0}, t = {0};
  CHECK(tl_vta_cmd_encode(q, &b) == 0);
  CHECK(tl_vta_disasm(ctx, c, (const uint8_t *)b.s, (int)(b.n / 16), &t) == 0);
  tl_buf_free(&b);
  return tl_buf_take(&t);
}

TL_TEST(vta_runtime_tokens_and_uop_cache) {
  tl_vta_config c = cfg_with("");
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_sim *sim = NULL;
  CHECK(tl_vta_sim_new(ctx, &c, 1 << 22, &sim) == 0);
  uint32_t inp, wgt, out;
  CHECK(tl_vta_sim_alloc(ctx, sim, 4096, &inp) == 0);
  CHECK(tl_vta_sim_alloc(ctx, sim, 4096, &wgt) == 0);
  CHECK(tl_vta_sim_alloc(ctx, sim, 4096, &out) == 0);
  /* one input vector of 1..16, an identity weight matrix times 2 */
  int8_t *x = tl_vta_sim_host_ptr(sim, inp, 16), *wm = tl_vta_sim_host_ptr(sim, wgt, 256);
  for (int k = 0; k < 16; k++) x[k] = (int8_t)(k + 1), wm[k * 16 + k] = 2;
  tl_vta_cmd *q = NULL;
  CHECK(tl_vta_cmd_new(ctx, sim, &q) == 0);
  tl_vta_kernel *reset = tl_vta_kernel_new(q, 0, 1, 0, 0, 0);
  tl_vta_kernel_uop(q, reset, 0, 0, 0);
  tl_vta_kernel *gemm = tl_vta_kernel_new(q, 0, 0, 0, 0, 0);
  tl_vta_kernel_uop(q, gemm, 0, 0, 0);
  tl_vta_kernel *add = tl_vta_kernel_new(q, 1, 0, TL_VTA_ALU_ADD, 1, 100);
  tl_vta_kernel_loop(q, add, 1, 1, 1, 0);
  tl_vta_kernel_uop(q, add, 0, 0, 0);
  tl_vta_load_2d(q, inp, 0, 1, 1, 1, 0, 0, 0, 0, 0, TL_VTA_MEM_INP);
  tl_vta_load_2d(q, wgt, 0, 1, 1, 1, 0, 0, 0, 0, 0, TL_VTA_MEM_WGT);
  tl_vta_dep_push(q, 1, 2);
  tl_vta_push_kernel(q, reset);
  tl_vta_dep_pop(q, 1, 2);
  tl_vta_push_kernel(q, gemm);
  tl_vta_push_kernel(q, gemm);    /* resident: no second LOAD UOP */
  tl_vta_push_kernel(q, add);
  tl_vta_dep_push(q, 2, 3);
  tl_vta_dep_pop(q, 2, 3);
  tl_vta_store_2d(q, 0, out, 0, 1, 1, 1);
  char *text = disasm_of(ctx, q, &c);
  CHECK_STREQ(text,
              "    0  LOAD   INP  sram 0 <- dram 0x100+[1 x 1, stride 1]\n"
              "    1  LOAD   WGT  sram 0 <- dram 0x20+[1 x 1, stride 1]  | push l2g\n"
              "    2  LOAD   UOP  sram 0 <- dram 0x1000+[1 x 1, stride 1]\n"
              "    3  GEMM   reset uop [0,1) x [1 x 1] dst(0,0) src(0,0) wgt(0,0)\n"
              "    4  LOAD   UOP  sram 1 <- dram 0x1400+[1 x 1, stride 1]  | pop l2g\n"
              "    5  GEMM   uop [1,2) x [1 x 1] dst(0,0) src(0,0) wgt(0,0)\n"
              "    6  GEMM   uop [1,2) x [1 x 1] dst(0,0) src(0,0) wgt(0,0)\n"
              "    7  LOAD   UOP  sram 2 <- dram 0x1800+[1 x 1, stride 1]\n"
              "    8  ALU    ADD imm 100 uop [2,3) x [1 x 1] dst(0,1) src(0,1)  | push g2s\n"
              "    9  STORE  OUT  sram 0 -> dram 0x300+[1 x 1, stride 1]  | pop g2s\n");
  free(text);
  CHECK_MSG(tl_vta_cmd_sync(q) == 0, "%s", tl_errmsg(ctx));
  /* out = 2 * 2x + 100 = 4 (k + 1) + 100, truncated to int8 */
  int8_t *o = tl_vta_sim_host_ptr(sim, out, 16);
  for (int k = 0; k < 16; k++) CHECK_EQ_INT(o[k], (int8_t)(uint8_t)(4 * (k + 1) + 100));
  /* after a run every kernel is loaded again; a full ring wraps and evicts */
  tl_vta_push_kernel(q, gemm);
  tl_vta_kernel *big = tl_vta_kernel_new(q, 0, 1, 0, 0, 0);
  for (int i = 0; i < c.uop_depth; i++) tl_vta_kernel_uop(q, big, 0, 0, 0);
  tl_vta_push_kernel(q, big);      /* 8192 uops do not fit after gemm: wraps to 0, evicts it */
  tl_vta_push_kernel(q, gemm);     /* loaded again: wraps to 0 again */
  const tl_vta_insn *v = tl_vta_cmd_insns(q);
  CHECK_EQ_INT(tl_vta_cmd_count(q), 6);
  CHECK(v[0].opcode == TL_VTA_LOAD && v[0].mem_type == TL_VTA_MEM_UOP && v[0].sram_base == 0);
  CHECK(v[2].opcode == TL_VTA_LOAD && v[2].sram_base == 0 && v[2].x_size == 8192);
  CHECK(v[4].opcode == TL_VTA_LOAD && v[4].sram_base == 0 && v[4].x_size == 1);
  CHECK_EQ_INT(v[5].uop_bgn, 0);
  CHECK_EQ_INT(v[5].uop_end, 1);
  /* a token from load to store is refused; errors are sticky */
  tl_vta_dep_push(q, 1, 3);
  CHECK_EQ_INT(tl_vta_cmd_status(q), TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "vta runtime: dep_push(1, 3): the stages must be neighbours among "
                              "load 1, compute 2, store 3");
  CHECK_EQ_INT(tl_vta_cmd_sync(q), TL_E_ARG);
  tl_vta_cmd_free(q);
  tl_vta_sim_free(sim);
  tl_ctx_free(ctx);
}

/* ---- conv2d_packed: random configs against the CPU reference ------------------------------ */

TL_TEST(vta_conv2d_random_configs) {
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_config d = cfg_with(""), b2;
  CHECK(tl_vta_config_parse(ctx, vta_b2_json, "b2", &b2) == 0);
  uint64_t st = 2024;
  int checked = 0, invalid = 0, tries = 0;
  while (checked < 200 && tries < 2000) {
    int which = (int)(rnd(&st) % VTA_CONV_CASES);
    tl_vta_task *t = NULL;
    CHECK_MSG(tl_vta_task_new(ctx, which < VTA_CONV_DEFAULT_CASES ? &d : &b2, vta_conv_cases[which], &t) == 0, "%s", tl_errmsg(ctx));
    int64_t idx = (int64_t)(rnd(&st) % (uint32_t)tl_vta_task_space_len(t));
    tries++;
    if (tl_vta_task_check(ctx, t, idx)) {
      CHECK_EQ_INT(tl_errcode(ctx), TL_E_SCHED);
      invalid++;
    } else {
      char *stats = NULL;
      int rc = tl_vta_task_run(ctx, t, idx, (uint64_t)tries, 1, &stats);
      char *ent = NULL;
      tl_vta_task_entity_json(ctx, t, idx, &ent);
      CHECK_MSG(rc == 0, "workload %d, config %lld %s: %s", which, (long long)idx, ent,
                tl_errmsg(ctx));
      CHECK(strstr(stats, "\"cycles\":") != NULL);
      int64_t back = -1;
      CHECK(tl_vta_task_index_of_entity(ctx, t, ent, &back) == 0);
      CHECK_EQ_INT(back, idx);
      tl_vta_free(ent);
      tl_vta_free(stats);
      checked++;
    }
    tl_clearerr(ctx);
    tl_vta_task_free(t);
  }
  CHECK_EQ_INT(checked, 200);
  tl_ctx_free(ctx);
}

TL_TEST(vta_conv2d_reference_and_errors) {
  /* the CPU reference against a hand computation of one output, and bad workloads */
  tl_vta_config c = cfg_with("");
  tl_ctx *ctx = tl_ctx_new();
  tl_vta_conv2d w;
  CHECK(tl_vta_conv2d_parse(ctx, &c,
                            "[[\"TENSOR\",[1,1,4,4,1,16],\"int8\"],[\"TENSOR\",[1,1,3,3,16,16],"
                            "\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
                            &w) == 0);
  CHECK_EQ_INT(w.OH, 4);
  CHECK_NEAR(w.flop, 2.0 * 16 * 16 * 9 * 16, 0);
  int8_t data[256], kern[2304], ref[256];
  uint64_t st = 5;
  for (int i = 0; i < 256; i++) data[i] = (int8_t)rnd(&st);
  for (int i = 0; i < 2304; i++) kern[i] = (int8_t)rnd(&st);
  tl_vta_conv2d_reference(&c, &w, data, kern, ref);
  /* a hand computation of one output: (0, 0, 1, 1) lane 3 */
  int32_t sum = 0;
  for (int di = 0; di < 3; di++)
    for (int dj = 0; dj < 3; dj++)
      for (int k = 0; k < 16; k++)
        sum += data[(di * 4 + dj) * 16 + k] * kern[(di * 3 + dj) * 256 + 3 * 16 + k];
  sum >>= 8;
  CHECK_EQ_INT(ref[(1 * 4 + 1) * 16 + 3], sum > 127 ? 127 : sum < 0 ? 0 : sum);
  /* bad workloads */
  CHECK_EQ_INT(tl_vta_conv2d_parse(ctx, &c,
                                   "[[\"TENSOR\",[1,1,4,4,1,8],\"int8\"],[\"TENSOR\",[1,1,3,3,16,16],"
                                   "\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
                                   &w),
               TL_E_ARG);
  CHECK_STREQ(tl_errmsg(ctx), "conv2d_packed.vta: data (.., 1, 8) and kernel (.., 16, 16) blocks "
                              "do not match the configuration's BATCH 1, BLOCK 16");
  CHECK_EQ_INT(tl_vta_conv2d_parse(ctx, &c, "[1,2]", &w), TL_E_PARSE);
  tl_ctx_free(ctx);
}
