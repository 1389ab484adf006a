/*
** runtime.c -- VTA's runtime over vta-sim: the command queue that generated
** code drives. It appends LOAD/STORE instructions for 2-D DMA patterns,
** places dependence tokens between the load (1), compute (2) and store (3)
** stages, keeps micro-op kernels and their cache in the micro-op SRAM, and
** synchronises: the stream is closed (the last load and store waited for,
** FINISH), written to DRAM and run on the simulator.
**
** Tokens follow TVM's runtime (docs/vta.md, "Runtime"): dep_pop(from, to)
** leaves a pending pop on stage `to` that the next instruction of `to`
** absorbs (a second pending pop of the same kind is first committed as a
** NOP); dep_push(from, to) commits `from`'s pending pops, then sets the push
** flag on the stream's last instruction if it belongs to `from` and lacks
** the flag, else appends a NOP of `from` carrying it.
**
** Micro-op kernels live in DRAM from their creation; the first use after a
** synchronisation loads one into a range of the micro-op SRAM, allocated as
** a ring (wrapping to 0 and evicting the kernels it overlaps), and later
** uses in the same run find it resident.
**
** Errors are sticky: the first one is kept in ctx and every later call
** returns it, so generated code checks once, at tl_vta_cmd_sync.
*/
#include "runtime.h"

#include <stdio.h>

struct tl_vta_kernel {
  int mode;                       /* 0 GEMM, 1 ALU */
  int reset, alu_op, use_imm;
  int32_t imm;
  int nloops;                     /* 0..2 */
  uint32_t ext[2], fdst[2], fsrc[2], fwgt[2];
  TL_VEC(uint32_t) uops;          /* encoded */
  uint32_t dram;                  /* physical address of the uops (0: not written) */
  int begin, end;                 /* resident range in the micro-op SRAM */
  int gen;                        /* the run it is resident in (-1: none) */
};

struct tl_vta_cmd {
  tl_ctx *ctx;
  tl_vta_sim *sim;
  const tl_vta_config *c;
  TL_VEC(tl_vta_insn) insns;
  int pending[4];                 /* stage 1..3: bit 0 pop_prev, bit 1 pop_next */
  int err;                        /* sticky status */
  TL_VEC(tl_vta_kernel *) kernels;
  int uop_ptr, gen;
  uint32_t insn_buf;              /* DRAM staging of the instructions */
  int closed;                     /* instructions of the last closed stream there */
  size_t insn_cap;
};

static int fail(tl_vta_cmd *q, int code, const char *fmt, ...) TL_PRINTF(3, 4);
static int fail(tl_vta_cmd *q, int code, const char *fmt, ...) {
  if (q->err) return q->err;
  va_list ap;
  va_start(ap, fmt);
  q->err = tl_verr(q->ctx, code, fmt, ap);
  va_end(ap);
  return q->err;
}

int tl_vta_cmd_new(tl_ctx *ctx, tl_vta_sim *sim, tl_vta_cmd **out) {
  tl_vta_cmd *q = tl_calloc(1, sizeof *q);
  q->ctx = ctx;
  q->sim = sim;
  q->c = tl_vta_sim_config(sim);
  *out = q;
  return TL_OK;
}

void tl_vta_cmd_free(tl_vta_cmd *q) {
  if (!q) return;
  for (int i = 0; i < q->kernels.n; i++) {
    tl_vta_kernel *k = q->kernels.v[i];
    if (k->dram) tl_vta_sim_release(NULL, q->sim, k->dram);
    TL_VEC_FREE(k->uops);
    free(k);
  }
  TL_VEC_FREE(q->kernels);
  if (q->insn_buf) tl_vta_sim_release(NULL, q->sim, q->insn_buf);
  TL_VEC_FREE(q->insns);
  free(q);
}

int tl_vta_cmd_status(const tl_vta_cmd *q) { return q->err; }
int tl_vta_cmd_count(const tl_vta_cmd *q) { return q->insns.n; }
const tl_vta_insn *tl_vta_cmd_insns(const tl_vta_cmd *q) { return q->insns.v; }

/* ---- instructions and tokens ------------------------------------------------------ */

static int stage_of(const tl_vta_insn *in) { return tl_vta_insn_queue(in) + 1; }

static void append(tl_vta_cmd *q, tl_vta_insn in) {
  int st = stage_of(&in);
  if (q->pending[st] & 1) in.pop_prev = 1;
  if (q->pending[st] & 2) in.pop_next = 1;
  q->pending[st] = 0;
  TL_VEC_PUSH(q->insns, in);
}

static tl_vta_insn nop_of(int stage) {
  tl_vta_insn in = {0};
  in.opcode = stage == 3 ? TL_VTA_STORE : TL_VTA_LOAD;
  in.mem_type = stage == 1 ? TL_VTA_MEM_INP : stage == 2 ? TL_VTA_MEM_UOP : TL_VTA_MEM_OUT;
  return in;
}

static int check_pair(tl_vta_cmd *q, const char *what, int from, int to) {
  if (from < 1 || from > 3 || to < 1 || to > 3 || from == to || from + to == 4)
    return fail(q, TL_E_ARG,
                "vta runtime: %s(%d, %d): the stages must be neighbours among load 1, compute 2, "
                "store 3",
                what, from, to);
  return TL_OK;
}

void tl_vta_dep_pop(tl_vta_cmd *q, int from, int to) {
  if (q->err || check_pair(q, "dep_pop", from, to)) return;
  int flag = from < to ? 1 : 2;
  if (q->pending[to] & flag) append(q, nop_of(to));
  q->pending[to] |= flag;
}

void tl_vta_dep_push(tl_vta_cmd *q, int from, int to) {
  if (q->err || check_pair(q, "dep_push", from, to)) return;
  if (q->pending[from]) append(q, nop_of(from));
  tl_vta_insn *last = q->insns.n ? &q->insns.v[q->insns.n - 1] : NULL;
  if (last && stage_of(last) == from) {
    int *flag = from < to ? &last->push_next : &last->push_prev;
    if (!*flag) {
      *flag = 1;
      return;
    }
  }
  tl_vta_insn n = nop_of(from);
  if (from < to) n.push_next = 1; else n.push_prev = 1;
  append(q, n);
}

void tl_vta_load_2d(tl_vta_cmd *q, uint32_t phys, uint32_t elem_offset, uint32_t x_size,
                    uint32_t y_size, uint32_t x_stride, uint32_t x_pad0, uint32_t y_pad0,
                    uint32_t x_pad1, uint32_t y_pad1, uint32_t sram, int mem_type) {
  if (q->err) return;
  int eb = tl_vta_elem_bytes(q->c, mem_type);
  if (mem_type == TL_VTA_MEM_OUT || eb == 0 || phys % (uint32_t)eb) {
    fail(q, TL_E_ARG, "vta runtime: load_2d: buffer 0x%x is not aligned to the %d-byte "
         "elements of memory type %s", phys, eb, tl_vta_mem_name(mem_type));
    return;
  }
  if (x_pad0 > 15 || x_pad1 > 15 || y_pad0 > 15 || y_pad1 > 15) {
    fail(q, TL_E_ARG, "vta runtime: load_2d: padding (%u,%u,%u,%u) exceeds the 4-bit fields",
         x_pad0, y_pad0, x_pad1, y_pad1);
    return;
  }
  tl_vta_insn in = {.opcode = TL_VTA_LOAD, .mem_type = mem_type, .sram_base = sram,
                    .dram_base = phys / (uint32_t)eb + elem_offset, .x_size = x_size,
                    .y_size = y_size, .x_stride = x_stride, .x_pad0 = x_pad0, .x_pad1 = x_pad1,
                    .y_pad0 = y_pad0, .y_pad1 = y_pad1};
  append(q, in);
}

void tl_vta_store_2d(tl_vta_cmd *q, uint32_t sram, uint32_t phys, uint32_t elem_offset,
                     uint32_t x_size, uint32_t y_size, uint32_t x_stride) {
  if (q->err) return;
  uint32_t eb = (uint32_t)q->c->out_elem_bytes;
  if (phys % eb) {
    fail(q, TL_E_ARG, "vta runtime: store_2d: buffer 0x%x is not aligned to %u-byte elements",
         phys, eb);
    return;
  }
  tl_vta_insn in = {.opcode = TL_VTA_STORE, .mem_type = TL_VTA_MEM_OUT, .sram_base = sram,
                    .dram_base = phys / eb + elem_offset, .x_size = x_size, .y_size = y_size,
                    .x_stride = x_stride};
  append(q, in);
}

/* ---- micro-op kernels ---------------------------------------------------------------- */

tl_vta_kernel *tl_vta_kernel_new(tl_vta_cmd *q, int mode, int reset, int alu_op, int use_imm,
                                 int32_t imm) {
  tl_vta_kernel *k = tl_calloc(1, sizeof *k);
  k->mode = mode;
  k->reset = reset;
  k->alu_op = alu_op;
  k->use_imm = use_imm;
  k->imm = imm;
  k->gen = -1;
  TL_VEC_PUSH(q->kernels, k);
  return k;
}

void tl_vta_kernel_loop(tl_vta_cmd *q, tl_vta_kernel *k, uint32_t extent, uint32_t dst,
                        uint32_t src, uint32_t wgt) {
  if (q->err) return;
  if (k->nloops == 2 || k->uops.n) {
    fail(q, TL_E_ARG, "vta runtime: a micro-op kernel takes at most 2 loops, before its uops");
    return;
  }
  int i = k->nloops++;
  k->ext[i] = extent, k->fdst[i] = dst, k->fsrc[i] = src, k->fwgt[i] = wgt;
}

void tl_vta_kernel_uop(tl_vta_cmd *q, tl_vta_kernel *k, uint32_t dst, uint32_t src,
                       uint32_t wgt) {
  if (q->err) return;
  tl_vta_uop u = {dst, src, wgt};
  uint32_t w;
  if (tl_vta_uop_encode(q->ctx, q->c, &u, &w)) {
    q->err = tl_err_prefix(q->ctx, "vta runtime: ");
    return;
  }
  TL_VEC_PUSH(k->uops, w);
}

int tl_vta_kernel_size(const tl_vta_kernel *k) { return k->uops.n; }

void tl_vta_push_kernel(tl_vta_cmd *q, tl_vta_kernel *k) {
  if (q->err) return;
  int n = k->uops.n, depth = q->c->uop_depth;
  if (n == 0 || n > depth) {
    fail(q, TL_E_ARG, "vta runtime: a micro-op kernel of %d uops (expected 1..%d)", n, depth);
    return;
  }
  if (!k->dram) {
    if (tl_vta_sim_alloc(q->ctx, q->sim, (size_t)n * 4, &k->dram)) {
      q->err = tl_err_prefix(q->ctx, "vta runtime: ");
      return;
    }
    memcpy(tl_vta_sim_host_ptr(q->sim, k->dram, (size_t)n * 4), k->uops.v, (size_t)n * 4);
  }
  if (k->gen != q->gen) {   /* not resident: allocate in the ring, evict overlaps */
    if (q->uop_ptr + n > depth) q->uop_ptr = 0;
    int b = q->uop_ptr, e = b + n;
    for (int i = 0; i < q->kernels.n; i++) {
      tl_vta_kernel *o = q->kernels.v[i];
      if (o->gen == q->gen && o->begin < e && b < o->end) o->gen = -1;
    }
    k->begin = b, k->end = e, k->gen = q->gen;
    q->uop_ptr = e;
    append(q, (tl_vta_insn){.opcode = TL_VTA_LOAD, .mem_type = TL_VTA_MEM_UOP,
                            .sram_base = (uint32_t)b, .dram_base = k->dram / 4, .y_size = 1,
                            .x_size = (uint32_t)n, .x_stride = (uint32_t)n});
  }
  tl_vta_insn in = {.opcode = k->mode ? TL_VTA_ALU : TL_VTA_GEMM, .reset = k->reset,
                    .uop_bgn = (uint32_t)k->begin, .uop_end = (uint32_t)k->end,
                    .iter_out = 1, .iter_in = 1, .alu_op = k->alu_op, .use_imm = k->use_imm,
                    .imm = k->imm};
  int outer = 0, inner = 1;
  if (k->mode == 1 && k->nloops == 1) inner = 0, outer = -1;   /* ALU: one loop is the inner */
  if (outer >= 0 && k->nloops > outer) {
    in.iter_out = k->ext[outer], in.dst_out = k->fdst[outer], in.src_out = k->fsrc[outer];
    in.wgt_out = k->mode ? 0 : k->fwgt[outer];
  }
  if (k->nloops > inner) {
    in.iter_in = k->ext[inner], in.dst_in = k->fdst[inner], in.src_in = k->fsrc[inner];
    in.wgt_in = k->mode ? 0 : k->fwgt[inner];
  }
  append(q, in);
}

/* ---- synchronisation ------------------------------------------------------------------ */

int tl_vta_cmd_close(tl_vta_cmd *q) {
  if (q->err) return q->err;
  /* a compute NOP that waits for the last store and the last load, then FINISH */
  tl_vta_dep_push(q, 3, 2);
  tl_vta_dep_push(q, 1, 2);
  tl_vta_dep_pop(q, 3, 2);
  tl_vta_dep_pop(q, 1, 2);
  append(q, nop_of(2));
  append(q, (tl_vta_insn){.opcode = TL_VTA_FINISH});
  size_t need = (size_t)q->insns.n * 16;
  if (need > q->insn_cap) {
    if (q->insn_buf) tl_vta_sim_release(NULL, q->sim, q->insn_buf);
    q->insn_buf = 0;
    size_t cap = need * 2;
    if (tl_vta_sim_alloc(q->ctx, q->sim, cap, &q->insn_buf)) {
      q->insn_cap = 0;
      return q->err = tl_err_prefix(q->ctx, "vta runtime: ");
    }
    q->insn_cap = cap;
  }
  uint8_t *dst = tl_vta_sim_host_ptr(q->sim, q->insn_buf, need);
  for (int i = 0; i < q->insns.n; i++)
    if (tl_vta_insn_encode(q->ctx, q->c, &q->insns.v[i], dst + 16 * (size_t)i))
      return q->err = tl_err_prefix(q->ctx, "vta runtime: instruction %d: ", i);
  q->closed = q->insns.n;
  q->insns.n = 0;
  memset(q->pending, 0, sizeof q->pending);
  q->gen++;   /* every kernel reloads in the next run */
  q->uop_ptr = 0;
  return TL_OK;
}

int tl_vta_cmd_rerun(tl_vta_cmd *q) {
  if (q->err) return q->err;
  if (!q->closed) return tl_err(q->ctx, TL_E_ARG, "vta runtime: %s", "no closed stream to run");
  int rc = tl_vta_sim_run(q->ctx, q->sim, q->insn_buf, q->closed);
  if (rc) q->err = rc;
  return rc;
}

int tl_vta_cmd_sync(tl_vta_cmd *q) {
  int rc = tl_vta_cmd_close(q);
  return rc ? rc : tl_vta_cmd_rerun(q);
}

/* The encoded stream so far (for the disassembler and golden tests). */
int tl_vta_cmd_encode(tl_vta_cmd *q, tl_buf *out) {
  for (int i = 0; i < q->insns.n; i++) {
    uint8_t b[16];
    if (tl_vta_insn_encode(q->ctx, q->c, &q->insns.v[i], b)) return tl_errcode(q->ctx);
    tl_buf_putn(out, (const char *)b, 16);
  }
  return TL_OK;
}
