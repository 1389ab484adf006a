/*
** vta.h -- VTA, the deep-learning accelerator (int8 GEMM core, tensor ALU,
** load and store modules joined by dependence-token queues): its hardware
** configuration (config.c), its instruction set (isa.c) and a simulator with
** a cycle model (sim.c). docs/vta.md describes all three; the public part is
** core/tunelua_vta.h.
**
**   vta_config.json --tl_vta_config_parse--> tl_vta_config (keys + derived)
**   tl_vta_insn <--encode/decode--> 16-byte instructions, 4-byte micro-ops
**   instruction stream + DRAM --tl_vta_sim_run--> SRAMs, DRAM, tl_vta_stats
*/
#ifndef TL_VTA_H
#define TL_VTA_H

#include "../../core/base/base.h"
#include "../../core/tunelua.h"

/* ---- configuration ------------------------------------------------------ */

/* A field of an instruction word: bit position in the 128-bit instruction
** (or the 32-bit micro-op) and width. Fields never straddle a 64-bit word. */
typedef struct tl_vta_field { int pos, width; } tl_vta_field;

/* The layout of every instruction format and of the micro-op, computed from
** the configuration (widths follow the config; positions pack each format in
** order, moving a field that would straddle bit 64 to bit 64). */
typedef struct tl_vta_layout {
  /* common header */
  tl_vta_field opcode, pop_prev, pop_next, push_prev, push_next;
  /* LOAD/STORE */
  tl_vta_field mem_type, sram_base, dram_base, y_size, x_size, x_stride, y_pad0, y_pad1,
      x_pad0, x_pad1;
  /* GEMM (ALU shares reset .. dst_in) */
  tl_vta_field reset, uop_bgn, uop_end, iter_out, iter_in, dst_out, dst_in, src_out, src_in,
      wgt_out, wgt_in;
  /* ALU after dst_in */
  tl_vta_field alu_src_out, alu_src_in, alu_opcode, use_imm, imm;
  /* micro-op (32 bits) */
  tl_vta_field uop_dst, uop_src, uop_wgt;
} tl_vta_layout;

struct tl_vta_config {
  /* the keys of vta_config.json */
  char target[32], hw_ver[32];
  int log_inp_width, log_wgt_width, log_acc_width, log_batch, log_block;
  int log_uop_buff_size, log_inp_buff_size, log_wgt_buff_size, log_acc_buff_size;
  /* the cycle model's keys (optional; docs/vta.md) */
  double clock_mhz;           /* CLOCK_MHZ, default 100 */
  int dram_bytes_per_cycle;   /* DRAM_BYTES_PER_CYCLE, default 8 (64-bit AXI) */
  int dram_latency;           /* DRAM_LATENCY_CYCLES, default 32 */
  int gemm_ii, alu_ii;        /* GEMM_II 1, ALU_II 2: cycles per micro-op iteration */
  int gemm_depth, alu_depth;  /* GEMM_PIPELINE 4, ALU_PIPELINE 4: fill cycles per instruction */
  /* derived */
  int log_out_width, log_out_buff_size;
  int inp_width, wgt_width, acc_width, out_width;   /* bits */
  int batch, block_in, block_out;
  int inp_elem_bytes, wgt_elem_bytes, acc_elem_bytes, out_elem_bytes;
  int log_uop_depth, log_inp_depth, log_wgt_depth, log_acc_depth;
  int uop_depth, inp_depth, wgt_depth, acc_depth, out_depth;   /* elements */
  char bitstream[64], model[128];
  tl_vta_layout lay;
};

/* Parse a vta_config.json text; `name` names it in errors. A missing,
** mistyped, out-of-range or inconsistent key is TL_E_PARSE naming the key. */
int tl_vta_config_parse(tl_ctx *ctx, const char *text, const char *name, tl_vta_config *out);
/* The element size in bytes of a memory type in DRAM (UOP 4, INP 16, ...). */
int tl_vta_elem_bytes(const tl_vta_config *c, int mem_type);

/* ---- ISA -------------------------------------------------------------------- */

enum { TL_VTA_LOAD = 0, TL_VTA_STORE = 1, TL_VTA_GEMM = 2, TL_VTA_FINISH = 3, TL_VTA_ALU = 4 };
enum { TL_VTA_MEM_UOP = 0, TL_VTA_MEM_WGT = 1, TL_VTA_MEM_INP = 2, TL_VTA_MEM_ACC = 3,
       TL_VTA_MEM_OUT = 4, TL_VTA_MEM_ACC8 = 5 };
enum { TL_VTA_ALU_MIN = 0, TL_VTA_ALU_MAX = 1, TL_VTA_ALU_ADD = 2, TL_VTA_ALU_SHR = 3,
       TL_VTA_ALU_MUL = 4 };
/* The modules that execute instructions, in pipeline order. */
enum { TL_VTA_Q_LOAD = 0, TL_VTA_Q_COMPUTE = 1, TL_VTA_Q_STORE = 2 };

/* One instruction, decoded. Fields a format lacks stay 0. */
typedef struct tl_vta_insn {
  int opcode, pop_prev, pop_next, push_prev, push_next;
  /* LOAD / STORE */
  int mem_type;
  uint32_t sram_base, dram_base, y_size, x_size, x_stride, y_pad0, y_pad1, x_pad0, x_pad1;
  /* GEMM / ALU */
  int reset;
  uint32_t uop_bgn, uop_end, iter_out, iter_in, dst_out, dst_in, src_out, src_in, wgt_out,
      wgt_in;
  int alu_op, use_imm;
  int32_t imm;                /* 16-bit signed */
} tl_vta_insn;

typedef struct tl_vta_uop { uint32_t dst, src, wgt; } tl_vta_uop;

/* Encode into 16 bytes (little-endian); a field that does not fit its width
** is TL_E_ARG naming the field and the value. */
int tl_vta_insn_encode(tl_ctx *ctx, const tl_vta_config *c, const tl_vta_insn *in, uint8_t out[16]);
/* Decode 16 bytes; a bad opcode, memory type or ALU opcode is TL_E_PARSE. */
int tl_vta_insn_decode(tl_ctx *ctx, const tl_vta_config *c, const uint8_t in[16], tl_vta_insn *out);
int tl_vta_uop_encode(tl_ctx *ctx, const tl_vta_config *c, const tl_vta_uop *u, uint32_t *out);
void tl_vta_uop_decode(const tl_vta_config *c, uint32_t w, tl_vta_uop *u);
/* The module that runs an instruction (fetch's routing). */
int tl_vta_insn_queue(const tl_vta_insn *in);
/* One line, no newline, for the disassembler. */
void tl_vta_insn_print(tl_buf *b, const tl_vta_insn *in);
/* A whole stream, one numbered line each; a bad instruction is an error
** naming its index. */
int tl_vta_disasm(tl_ctx *ctx, const tl_vta_config *c, const uint8_t *insns, int n, tl_buf *out);
const char *tl_vta_opcode_name(int opcode);
const char *tl_vta_mem_name(int mem_type);
const char *tl_vta_alu_name(int alu_op);

/* ---- simulator -------------------------------------------------------------- */

/* Counters accumulated over runs until tl_vta_sim_clear_stats. The byte and
** gemm/alu counters are those of TVM's simulator profiler (padding is not
** counted; GEMM with reset_reg is not counted in gemm_counter). */
typedef struct tl_vta_stats {
  uint64_t cycles;                         /* FINISH's completion, summed over runs */
  uint64_t busy[3];                        /* load, compute, store: cycles executing */
  uint64_t gemm_cycles, alu_cycles;        /* compute cycles spent in GEMM / ALU */
  uint64_t inp_load_nbytes, wgt_load_nbytes, acc_load_nbytes, uop_load_nbytes,
      out_store_nbytes;
  uint64_t gemm_counter, alu_counter;      /* micro-op iterations */
  uint64_t insn_count, runs;
} tl_vta_stats;

/* The counters of s; the largest number of micro-op iterations one run may
** ask for (default 2^30: a stream asking for more is refused, so a corrupt
** loop extent cannot keep the simulator busy for hours); the accumulator
** SRAM (acc_depth x BATCH x BLOCK_OUT lanes), for tests. */
const tl_vta_stats *tl_vta_sim_stats(const tl_vta_sim *s);
void tl_vta_sim_set_work_limit(tl_vta_sim *s, uint64_t iters);
int32_t *tl_vta_sim_acc(tl_vta_sim *s);

#endif
