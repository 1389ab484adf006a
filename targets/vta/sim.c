/*
** sim.c -- vta-sim: VTA executed bit-exactly, with a cycle model.
**
** Functional part. DRAM is one flat array (physical address = offset + 4096,
** so 0 is never valid); the SRAMs are the configuration's input (int8),
** weight (int8), accumulator (int32) and micro-op (uint32) element arrays.
** LOAD, STORE, GEMM, ALU and FINISH follow docs/vta.md; every SRAM and DRAM
** access is checked, and an overrun is an error naming the instruction and
** the buffer ("input buffer overflow"), never a write outside.
**
** Timing part (docs/vta.md, "The cycle model"). Fetch routes the stream into
** the load, compute and store modules' queues. Each module runs its queue in
** order, one instruction at a time; an instruction starts when its module is
** free and the tokens it pops have been pushed (a token carries the time its
** pusher finished). The run is a discrete-event simulation: of the modules
** whose head instruction has its tokens, the one that can start earliest
** goes next, so functional effects happen in the order of the modelled
** hardware and a stream without enough tokens shows its race. When no module
** can go and instructions remain, that is a token deadlock, reported with
** what each module waits for; every instruction runs once, so a run ends.
**
**   DMA (LOAD/STORE):  latency + per row ceil(row bytes / bandwidth) + zero
**                      padding (one element per cycle); the row transfers
**                      hold the one DRAM port, shared by all modules
**   GEMM / ALU:        pipeline fill + iterations * II
**   NOP, FINISH:       1 cycle
*/
#include "vta.h"

#include <stdio.h>

typedef struct dram_block { uint64_t off, size; } dram_block;

struct tl_vta_sim {
  tl_vta_config cfg;
  uint8_t *dram;
  uint64_t dram_bytes;
  TL_VEC(dram_block) blocks;         /* allocated, sorted by offset */
  int8_t *inp, *wgt;
  int32_t *acc;
  uint32_t *uop;
  uint64_t work_limit;               /* micro-op iterations per run */
  tl_vta_stats st;
};

#define PAGE 4096u

/* ---- DRAM -------------------------------------------------------------------- */

TL_EXPORT int tl_vta_sim_new(tl_ctx *ctx, const tl_vta_config *c, size_t dram_bytes,
                             tl_vta_sim **out) {
  *out = NULL;
  if (dram_bytes == 0) dram_bytes = (size_t)256 << 20;
  if (dram_bytes > 0xffffffffull - PAGE)
    return tl_err(ctx, TL_E_ARG, "vta sim: DRAM of %zu bytes exceeds the 32-bit address space",
                  dram_bytes);
  dram_bytes = (dram_bytes + PAGE - 1) / PAGE * PAGE;
  tl_vta_sim *s = tl_calloc(1, sizeof *s);
  s->cfg = *c;
  s->dram = calloc(1, dram_bytes);
  if (!s->dram) {
    free(s);
    return tl_err(ctx, TL_E_NOMEM, "vta sim: cannot reserve %zu bytes of DRAM", dram_bytes);
  }
  s->dram_bytes = dram_bytes;
  s->inp = tl_calloc((size_t)c->inp_depth, (size_t)c->inp_elem_bytes);
  s->wgt = tl_calloc((size_t)c->wgt_depth, (size_t)c->wgt_elem_bytes);
  s->acc = tl_calloc((size_t)c->acc_depth * c->batch * c->block_out, sizeof(int32_t));
  s->uop = tl_calloc((size_t)c->uop_depth, sizeof(uint32_t));
  s->work_limit = 1ull << 30;
  *out = s;
  return TL_OK;
}

TL_EXPORT void tl_vta_sim_free(tl_vta_sim *s) {
  if (!s) return;
  free(s->dram);
  free(s->inp);
  free(s->wgt);
  free(s->acc);
  free(s->uop);
  TL_VEC_FREE(s->blocks);
  free(s);
}

TL_EXPORT int tl_vta_sim_alloc(tl_ctx *ctx, tl_vta_sim *s, size_t nbytes, uint32_t *phys) {
  uint64_t size = ((uint64_t)(nbytes ? nbytes : 1) + PAGE - 1) / PAGE * PAGE;
  uint64_t at = 0;
  int i = 0;
  for (; i < s->blocks.n; i++) {   /* first fit */
    if (s->blocks.v[i].off - at >= size) break;
    at = s->blocks.v[i].off + s->blocks.v[i].size;
  }
  if (at + size > s->dram_bytes)
    return tl_err(ctx, TL_E_NOMEM, "vta sim: no room for %zu bytes in DRAM of %llu bytes", nbytes,
                  (unsigned long long)s->dram_bytes);
  TL_VEC_RESERVE(s->blocks, s->blocks.n + 1);
  memmove(&s->blocks.v[i + 1], &s->blocks.v[i], (size_t)(s->blocks.n - i) * sizeof(dram_block));
  s->blocks.v[i] = (dram_block){at, size};
  s->blocks.n++;
  memset(s->dram + at, 0, size);
  *phys = (uint32_t)(at + PAGE);
  return TL_OK;
}

TL_EXPORT int tl_vta_sim_release(tl_ctx *ctx, tl_vta_sim *s, uint32_t phys) {
  for (int i = 0; i < s->blocks.n; i++)
    if (s->blocks.v[i].off + PAGE == phys) {
      memmove(&s->blocks.v[i], &s->blocks.v[i + 1],
              (size_t)(s->blocks.n - i - 1) * sizeof(dram_block));
      s->blocks.n--;
      return TL_OK;
    }
  return tl_err(ctx, TL_E_ARG, "vta sim: 0x%x is not an allocated DRAM buffer", phys);
}

TL_EXPORT void *tl_vta_sim_host_ptr(tl_vta_sim *s, uint32_t phys, size_t nbytes) {
  if (phys < PAGE || (uint64_t)phys - PAGE + nbytes > s->dram_bytes) return NULL;
  return s->dram + (phys - PAGE);
}

/* The host address of DRAM elements [e, e+n) of elem bytes each, or NULL. */
static uint8_t *dram_elems(tl_vta_sim *s, uint64_t e, uint64_t n, int elem) {
  uint64_t a = e * (uint64_t)elem;
  if (a < PAGE || a - PAGE + n * (uint64_t)elem > s->dram_bytes) return NULL;
  return s->dram + (a - PAGE);
}

const tl_vta_config *tl_vta_sim_config(const tl_vta_sim *s) { return &s->cfg; }
const tl_vta_stats *tl_vta_sim_stats(const tl_vta_sim *s) { return &s->st; }
TL_EXPORT void tl_vta_sim_clear_stats(tl_vta_sim *s) { memset(&s->st, 0, sizeof s->st); }
void tl_vta_sim_set_work_limit(tl_vta_sim *s, uint64_t iters) { s->work_limit = iters; }
int32_t *tl_vta_sim_acc(tl_vta_sim *s) { return s->acc; }

/* ---- functional execution ------------------------------------------------------------ */

static const char *buffer_name(int mem) {
  switch (mem) {
  case TL_VTA_MEM_UOP: return "micro-op buffer";
  case TL_VTA_MEM_WGT: return "weight buffer";
  case TL_VTA_MEM_INP: return "input buffer";
  default: return "accumulator buffer";
  }
}

static int sram_depth(const tl_vta_config *c, int mem) {
  switch (mem) {
  case TL_VTA_MEM_UOP: return c->uop_depth;
  case TL_VTA_MEM_WGT: return c->wgt_depth;
  case TL_VTA_MEM_INP: return c->inp_depth;
  default: return c->acc_depth;
  }
}

static int exec_load(tl_ctx *ctx, tl_vta_sim *s, const tl_vta_insn *in) {
  const tl_vta_config *c = &s->cfg;
  if (in->x_size == 0) return TL_OK;
  int mem = in->mem_type, elem = tl_vta_elem_bytes(c, mem);
  uint64_t xtotal = (uint64_t)in->x_pad0 + in->x_size + in->x_pad1;
  uint64_t rows = (uint64_t)in->y_pad0 + in->y_size + in->y_pad1;
  uint64_t end = in->sram_base + rows * xtotal;
  if (end > (uint64_t)sram_depth(c, mem))
    return tl_err(ctx, TL_E_RUNTIME, "%s overflow: elements [%u, %llu) of %d",
                  buffer_name(mem), in->sram_base, (unsigned long long)end, sram_depth(c, mem));
  for (uint32_t y = 0; y < in->y_size; y++)
    if (!dram_elems(s, (uint64_t)in->dram_base + (uint64_t)y * in->x_stride, in->x_size, elem))
      return tl_err(ctx, TL_E_RUNTIME,
                    "DRAM read out of range: row %u, elements [%llu, +%u) of %d bytes", y,
                    (unsigned long long)in->dram_base + (uint64_t)y * in->x_stride, in->x_size,
                    elem);
  /* sram element size: the SRAM's own (ACC8 lands in 32-bit lanes) */
  int lanes = c->batch * c->block_out;
  for (uint64_t r = 0; r < rows; r++)
    for (uint64_t x = 0; x < xtotal; x++) {
      uint64_t idx = in->sram_base + r * xtotal + x;
      int data = r >= in->y_pad0 && r < in->y_pad0 + in->y_size && x >= in->x_pad0 &&
                 x < in->x_pad0 + in->x_size;
      const uint8_t *src =
          data ? dram_elems(s, (uint64_t)in->dram_base + (r - in->y_pad0) * in->x_stride +
                                   (x - in->x_pad0), 1, elem)
               : NULL;
      switch (mem) {
      case TL_VTA_MEM_UOP:
        if (src) memcpy(&s->uop[idx], src, 4); else s->uop[idx] = 0;
        break;
      case TL_VTA_MEM_INP:
        if (src) memcpy(s->inp + idx * elem, src, (size_t)elem);
        else memset(s->inp + idx * elem, 0, (size_t)elem);
        break;
      case TL_VTA_MEM_WGT:
        if (src) memcpy(s->wgt + idx * elem, src, (size_t)elem);
        else memset(s->wgt + idx * elem, 0, (size_t)elem);
        break;
      case TL_VTA_MEM_ACC:
        if (src) memcpy(s->acc + idx * lanes, src, (size_t)elem);
        else memset(s->acc + idx * lanes, 0, (size_t)lanes * 4);
        break;
      case TL_VTA_MEM_ACC8:
        for (int l = 0; l < lanes; l++) s->acc[idx * lanes + l] = src ? (int8_t)src[l] : 0;
        break;
      }
    }
  uint64_t nbytes = (uint64_t)in->x_size * in->y_size;
  switch (mem) {
  case TL_VTA_MEM_UOP: s->st.uop_load_nbytes += nbytes * 4; break;
  case TL_VTA_MEM_INP: s->st.inp_load_nbytes += nbytes * c->inp_elem_bytes; break;
  case TL_VTA_MEM_WGT: s->st.wgt_load_nbytes += nbytes * c->wgt_elem_bytes; break;
  default: s->st.acc_load_nbytes += nbytes * c->acc_elem_bytes; break;  /* ACC8 too, as TVM */
  }
  return TL_OK;
}

static int exec_store(tl_ctx *ctx, tl_vta_sim *s, const tl_vta_insn *in) {
  const tl_vta_config *c = &s->cfg;
  if (in->x_size == 0) return TL_OK;
  if (in->y_pad0 || in->y_pad1 || in->x_pad0 || in->x_pad1)
    return tl_err(ctx, TL_E_RUNTIME, "STORE with padding (a store never pads)");
  uint64_t end = in->sram_base + (uint64_t)in->y_size * in->x_size;
  if (end > (uint64_t)c->acc_depth)
    return tl_err(ctx, TL_E_RUNTIME, "output buffer overflow: elements [%u, %llu) of %d",
                  in->sram_base, (unsigned long long)end, c->acc_depth);
  int lanes = c->batch * c->block_out;
  for (uint32_t y = 0; y < in->y_size; y++) {
    uint8_t *dst = dram_elems(s, (uint64_t)in->dram_base + (uint64_t)y * in->x_stride,
                              in->x_size, c->out_elem_bytes);
    if (!dst)
      return tl_err(ctx, TL_E_RUNTIME,
                    "DRAM write out of range: row %u, elements [%llu, +%u) of %d bytes", y,
                    (unsigned long long)in->dram_base + (uint64_t)y * in->x_stride, in->x_size,
                    c->out_elem_bytes);
    const int32_t *src = s->acc + ((uint64_t)in->sram_base + (uint64_t)y * in->x_size) * lanes;
    for (uint64_t i = 0; i < (uint64_t)in->x_size * lanes; i++)
      dst[i] = (uint8_t)(uint32_t)src[i];   /* the low 8 bits, truncated */
  }
  s->st.out_store_nbytes += (uint64_t)in->x_size * in->y_size * c->out_elem_bytes;
  return TL_OK;
}

static int check_uops(tl_ctx *ctx, const tl_vta_sim *s, const tl_vta_insn *in) {
  if (in->uop_end > (uint32_t)s->cfg.uop_depth || in->uop_bgn > in->uop_end)
    return tl_err(ctx, TL_E_RUNTIME, "micro-op buffer overflow: range [%u, %u) of %d",
                  in->uop_bgn, in->uop_end, s->cfg.uop_depth);
  return TL_OK;
}

static int index_err(tl_ctx *ctx, const char *buf, uint64_t idx, int depth, uint32_t u,
                     uint32_t i, uint32_t j) {
  return tl_err(ctx, TL_E_RUNTIME,
                "%s overflow: index %llu of %d (micro-op %u, iteration %u,%u)", buf,
                (unsigned long long)idx, depth, u, i, j);
}

/* acc[o] += sum_k a[k] * wt[o][k] for a 16 x 16 block (int32, wrapping) */
static void block16(int32_t *restrict acc, const int8_t *restrict a, const int8_t *restrict wt) {
  int32_t sum[16];
  for (int o = 0; o < 16; o++) {
    int32_t t = 0;
    for (int k = 0; k < 16; k++) t += (int32_t)a[k] * (int32_t)wt[o * 16 + k];
    sum[o] = t;
  }
  for (int o = 0; o < 16; o++) acc[o] = (int32_t)((uint32_t)acc[o] + (uint32_t)sum[o]);
}

static int exec_gemm(tl_ctx *ctx, tl_vta_sim *s, const tl_vta_insn *in) {
  const tl_vta_config *c = &s->cfg;
  int rc = check_uops(ctx, s, in);
  if (rc) return rc;
  int B = c->batch, BI = c->block_in, BO = c->block_out;
  for (uint32_t i = 0; i < in->iter_out; i++)
    for (uint32_t j = 0; j < in->iter_in; j++)
      for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        tl_vta_uop op;
        tl_vta_uop_decode(c, s->uop[u], &op);
        uint64_t d = op.dst + (uint64_t)i * in->dst_out + (uint64_t)j * in->dst_in;
        uint64_t x = op.src + (uint64_t)i * in->src_out + (uint64_t)j * in->src_in;
        uint64_t w = op.wgt + (uint64_t)i * in->wgt_out + (uint64_t)j * in->wgt_in;
        if (d >= (uint64_t)c->acc_depth)
          return index_err(ctx, "accumulator buffer", d, c->acc_depth, u, i, j);
        int32_t *acc = s->acc + d * B * BO;
        if (in->reset) {
          memset(acc, 0, (size_t)B * BO * sizeof *acc);
          continue;
        }
        if (x >= (uint64_t)c->inp_depth)
          return index_err(ctx, "input buffer", x, c->inp_depth, u, i, j);
        if (w >= (uint64_t)c->wgt_depth)
          return index_err(ctx, "weight buffer", w, c->wgt_depth, u, i, j);
        const int8_t *a = s->inp + x * B * BI, *wt = s->wgt + w * BO * BI;
        if (BI == 16 && BO == 16) {   /* the common block: fixed trip counts vectorize */
          for (int b = 0; b < B; b++) block16(acc + b * 16, a + b * 16, wt);
          continue;
        }
        for (int b = 0; b < B; b++)
          for (int o = 0; o < BO; o++) {
            int32_t sum = 0;   /* at most BLOCK_IN products of 2^14: no overflow */
            for (int k = 0; k < BI; k++) sum += (int32_t)a[b * BI + k] * wt[o * BI + k];
            acc[b * BO + o] = (int32_t)((uint32_t)acc[b * BO + o] + (uint32_t)sum);
          }
      }
  if (!in->reset)
    s->st.gemm_counter += (uint64_t)in->iter_out * in->iter_in * (in->uop_end - in->uop_bgn);
  return TL_OK;
}

/* The ALU's shift: right by y (arithmetic) for y >= 0, left by -y for y < 0;
** shifts of 32 or more give what a shift by 31 (right) or a full shift
** (left, 0) gives. */
static int32_t shr(int32_t x, int32_t y) {
  if (y >= 0) return y >= 31 ? (x < 0 ? -1 : 0) : x >> y;
  return y <= -32 ? 0 : (int32_t)((uint32_t)x << -y);
}

static int exec_alu(tl_ctx *ctx, tl_vta_sim *s, const tl_vta_insn *in) {
  const tl_vta_config *c = &s->cfg;
  int rc = check_uops(ctx, s, in);
  if (rc) return rc;
  int lanes = c->batch * c->block_out;
  for (uint32_t i = 0; i < in->iter_out; i++)
    for (uint32_t j = 0; j < in->iter_in; j++)
      for (uint32_t u = in->uop_bgn; u < in->uop_end; u++) {
        tl_vta_uop op;
        tl_vta_uop_decode(c, s->uop[u], &op);
        uint64_t d = op.dst + (uint64_t)i * in->dst_out + (uint64_t)j * in->dst_in;
        uint64_t x = op.src + (uint64_t)i * in->src_out + (uint64_t)j * in->src_in;
        if (d >= (uint64_t)c->acc_depth)
          return index_err(ctx, "accumulator buffer", d, c->acc_depth, u, i, j);
        int32_t *dst = s->acc + d * lanes;
        if (in->reset) {
          memset(dst, 0, (size_t)lanes * sizeof *dst);
          continue;
        }
        if (!in->use_imm && x >= (uint64_t)c->acc_depth)
          return index_err(ctx, "accumulator buffer", x, c->acc_depth, u, i, j);
        const int32_t *src = s->acc + x * lanes;
        for (int l = 0; l < lanes; l++) {
          int32_t a = dst[l], b = in->use_imm ? in->imm : src[l];
          switch (in->alu_op) {
          case TL_VTA_ALU_MIN: dst[l] = a < b ? a : b; break;
          case TL_VTA_ALU_MAX: dst[l] = a > b ? a : b; break;
          case TL_VTA_ALU_ADD: dst[l] = (int32_t)((uint32_t)a + (uint32_t)b); break;
          case TL_VTA_ALU_SHR: dst[l] = shr(a, b); break;
          case TL_VTA_ALU_MUL: dst[l] = (int32_t)((uint32_t)a * (uint32_t)b); break;
          }
        }
      }
  s->st.alu_counter += (uint64_t)in->iter_out * in->iter_in * (in->uop_end - in->uop_bgn);
  return TL_OK;
}

/* ---- the cycle model -------------------------------------------------------------- */

enum { L2G, G2L, G2S, S2G };
static const char *const token_names[] = {"l2g", "g2l", "g2s", "s2g"};
static const char *const module_names[] = {"load", "compute", "store"};

/* The token queue each flag names for the module q that runs it (-1: none). */
static const int flag_queue[3][4] = {
    /* pop_prev, pop_next, push_prev, push_next */
    {-1, G2L, -1, L2G},
    {L2G, S2G, G2L, G2S},
    {G2S, -1, S2G, -1},
};

typedef struct tokq { uint64_t *t; int head, tail; } tokq;

/* DMA cycles of a LOAD/STORE: (latency, transfer on the DRAM port, padding). */
static void dma_cost(const tl_vta_config *c, const tl_vta_insn *in, uint64_t *xfer,
                     uint64_t *pad) {
  int elem = tl_vta_elem_bytes(c, in->mem_type);
  uint64_t row = (uint64_t)in->x_size * elem, bw = (uint64_t)c->dram_bytes_per_cycle;
  *xfer = (uint64_t)in->y_size * ((row + bw - 1) / bw);
  uint64_t xtotal = (uint64_t)in->x_pad0 + in->x_size + in->x_pad1;
  *pad = ((uint64_t)in->y_pad0 + in->y_pad1) * xtotal +
         (uint64_t)in->y_size * (in->x_pad0 + in->x_pad1);
}

static int flag_of(const tl_vta_insn *in, int f) {
  return f == 0 ? in->pop_prev : f == 1 ? in->pop_next : f == 2 ? in->push_prev : in->push_next;
}

TL_EXPORT int tl_vta_sim_run(tl_ctx *ctx, tl_vta_sim *s, uint32_t insn_phys, int n) {
  const tl_vta_config *c = &s->cfg;
  if (n <= 0) return tl_err(ctx, TL_E_ARG, "vta sim: instruction count %d (expected > 0)", n);
  const uint8_t *raw = tl_vta_sim_host_ptr(s, insn_phys, (size_t)n * 16);
  if (!raw)
    return tl_err(ctx, TL_E_ARG, "vta sim: instructions [0x%x, +%d x 16 bytes) outside DRAM",
                  insn_phys, n);
  tl_vta_insn *ins = tl_malloc((size_t)n * sizeof *ins);
  int *qv = tl_malloc((size_t)n * 3 * sizeof *qv), qn[3] = {0, 0, 0};
  tokq tq[4];
  for (int k = 0; k < 4; k++) tq[k] = (tokq){tl_malloc((size_t)n * sizeof(uint64_t)), 0, 0};
  int rc = TL_OK;
  uint64_t work = 0;
  int bad = 0;
  for (int i = 0; i < n && !rc; i++) {
    bad = i;
    if ((rc = tl_vta_insn_decode(ctx, c, raw + 16 * (size_t)i, &ins[i]))) break;
    int q = tl_vta_insn_queue(&ins[i]);
    for (int f = 0; f < 4; f++)
      if (flag_of(&ins[i], f) && flag_queue[q][f] < 0) {
        static const char *const fn[] = {"pop_prev", "pop_next", "push_prev", "push_next"};
        rc = tl_err(ctx, TL_E_PARSE, "%s on the %s module, which has no such token queue",
                    fn[f], module_names[q]);
        break;
      }
    if (ins[i].opcode == TL_VTA_GEMM || ins[i].opcode == TL_VTA_ALU) {
      uint64_t nu = ins[i].uop_end > ins[i].uop_bgn ? ins[i].uop_end - ins[i].uop_bgn : 0;
      work += (uint64_t)ins[i].iter_out * ins[i].iter_in * nu;
    }
    qv[q * n + qn[q]++] = i;
  }
  if (rc) {
    tl_err_prefix(ctx, "vta sim: instruction %d: ", bad);
    goto done;
  }
  if (work > s->work_limit) {
    rc = tl_err(ctx, TL_E_RUNTIME,
                "vta sim: the stream asks for %llu micro-op iterations, more than the limit of "
                "%llu per run",
                (unsigned long long)work, (unsigned long long)s->work_limit);
    goto done;
  }
  int head[3] = {0, 0, 0};
  uint64_t tfree[3] = {0, 0, 0}, port_free = 0, end_all = 0;
  int finished = 0;
  for (;;) {
    int best = -1;
    uint64_t best_start = 0;
    for (int q = 0; q < 3; q++) {
      if (head[q] >= qn[q]) continue;
      const tl_vta_insn *in = &ins[qv[q * n + head[q]]];
      uint64_t start = tfree[q];
      int ready = 1;
      for (int f = 0; f < 2 && ready; f++)
        if (flag_of(in, f)) {
          tokq *t = &tq[flag_queue[q][f]];
          if (t->head == t->tail) ready = 0;
          else if (t->t[t->head] > start) start = t->t[t->head];
        }
      if (ready && (best < 0 || start < best_start)) best = q, best_start = start;
    }
    if (best < 0) break;
    int q = best, idx = qv[q * n + head[q]++];
    const tl_vta_insn *in = &ins[idx];
    for (int f = 0; f < 2; f++)
      if (flag_of(in, f)) tq[flag_queue[q][f]].head++;
    uint64_t start = best_start, end;
    switch (in->opcode) {
    case TL_VTA_LOAD:
    case TL_VTA_STORE:
      rc = in->opcode == TL_VTA_LOAD ? exec_load(ctx, s, in) : exec_store(ctx, s, in);
      if (in->x_size == 0) {
        end = start + 1;
      } else {
        uint64_t xfer, pad;
        dma_cost(c, in, &xfer, &pad);
        uint64_t t0 = start + (uint64_t)c->dram_latency;
        if (t0 < port_free) t0 = port_free;
        port_free = t0 + xfer;
        end = t0 + xfer + pad;
      }
      break;
    case TL_VTA_GEMM:
    case TL_VTA_ALU: {
      int gemm = in->opcode == TL_VTA_GEMM;
      rc = gemm ? exec_gemm(ctx, s, in) : exec_alu(ctx, s, in);
      uint64_t iters = (uint64_t)in->iter_out * in->iter_in * (in->uop_end - in->uop_bgn);
      uint64_t cost = (uint64_t)(gemm ? c->gemm_depth : c->alu_depth) +
                      iters * (uint64_t)(gemm ? c->gemm_ii : c->alu_ii);
      end = start + cost;
      if (gemm) s->st.gemm_cycles += cost; else s->st.alu_cycles += cost;
      break;
    }
    default:   /* FINISH */
      end = start + 1;
      finished = 1;
      break;
    }
    if (rc) {
      tl_buf b = {0};
      tl_vta_insn_print(&b, in);
      tl_err_prefix(ctx, "vta sim: instruction %d (%s): ", idx, b.s);
      tl_buf_free(&b);
      goto done;
    }
    s->st.busy[q] += end - start;
    tfree[q] = end;
    if (end > end_all) end_all = end;
    for (int f = 2; f < 4; f++)
      if (flag_of(in, f)) {
        tokq *t = &tq[flag_queue[q][f]];
        t->t[t->tail++] = end;
      }
  }
  if (head[0] < qn[0] || head[1] < qn[1] || head[2] < qn[2]) {
    tl_buf b = {0};
    tl_buf_puts(&b, finished ? "vta sim: instructions never ran after FINISH:"
                             : "vta sim: token deadlock:");
    for (int q = 0; q < 3; q++) {
      if (head[q] >= qn[q]) {
        tl_buf_printf(&b, "%s %s done", q ? ";" : "", module_names[q]);
        continue;
      }
      int idx = qv[q * n + head[q]];
      const tl_vta_insn *in = &ins[idx];
      int mem = in->opcode == TL_VTA_LOAD || in->opcode == TL_VTA_STORE;
      tl_buf_printf(&b, "%s %s waits at instruction %d (%s%s%s) for", q ? ";" : "",
                    module_names[q], idx, tl_vta_opcode_name(in->opcode), mem ? " " : "",
                    mem ? tl_vta_mem_name(in->mem_type) : "");
      int first = 1;
      for (int f = 0; f < 2; f++)
        if (flag_of(in, f) && tq[flag_queue[q][f]].head == tq[flag_queue[q][f]].tail) {
          tl_buf_printf(&b, "%s a token on %s", first ? "" : " and", token_names[flag_queue[q][f]]);
          first = 0;
        }
    }
    rc = tl_err(ctx, TL_E_RUNTIME, "%s", b.s);
    tl_buf_free(&b);
    goto done;
  }
  if (!finished) {
    rc = tl_err(ctx, TL_E_RUNTIME, "vta sim: the stream of %d instructions has no FINISH", n);
    goto done;
  }
  for (int k = 0; k < 4; k++)
    if (tq[k].head < tq[k].tail) {   /* hardware would carry them into the next run */
      rc = tl_err(ctx, TL_E_RUNTIME, "vta sim: %d token(s) left on %s after FINISH",
                  tq[k].tail - tq[k].head, token_names[k]);
      goto done;
    }
  s->st.cycles += end_all;
  s->st.insn_count += (uint64_t)n;
  s->st.runs++;
done:
  for (int k = 0; k < 4; k++) free(tq[k].t);
  free(qv);
  free(ins);
  return rc;
}

TL_EXPORT int tl_vta_sim_stats_json(tl_ctx *ctx, const tl_vta_sim *s, char **out) {
  const tl_vta_stats *st = &s->st;
  tl_buf b = {0};
  tl_buf_printf(&b,
                "{\"cycles\":%llu,\"seconds\":%.17g,\"clock_mhz\":%.17g,"
                "\"load_busy_cycles\":%llu,\"compute_busy_cycles\":%llu,"
                "\"store_busy_cycles\":%llu,\"gemm_cycles\":%llu,\"alu_cycles\":%llu,"
                "\"inp_load_nbytes\":%llu,\"wgt_load_nbytes\":%llu,\"acc_load_nbytes\":%llu,"
                "\"uop_load_nbytes\":%llu,\"out_store_nbytes\":%llu,"
                "\"gemm_counter\":%llu,\"alu_counter\":%llu,\"insn_count\":%llu,\"runs\":%llu}",
                (unsigned long long)st->cycles, (double)st->cycles / (s->cfg.clock_mhz * 1e6),
                s->cfg.clock_mhz, (unsigned long long)st->busy[0],
                (unsigned long long)st->busy[1], (unsigned long long)st->busy[2],
                (unsigned long long)st->gemm_cycles, (unsigned long long)st->alu_cycles,
                (unsigned long long)st->inp_load_nbytes, (unsigned long long)st->wgt_load_nbytes,
                (unsigned long long)st->acc_load_nbytes, (unsigned long long)st->uop_load_nbytes,
                (unsigned long long)st->out_store_nbytes, (unsigned long long)st->gemm_counter,
                (unsigned long long)st->alu_counter, (unsigned long long)st->insn_count,
                (unsigned long long)st->runs);
  *out = tl_buf_take(&b);
  (void)ctx;
  return TL_OK;
}
