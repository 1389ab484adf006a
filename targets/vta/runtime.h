/*
** runtime.h -- VTA's command queue over vta-sim (runtime.c): 2-D DMA
** instructions, dependence tokens between the load (1), compute (2) and
** store (3) stages, micro-op kernels with their SRAM cache, synchronisation.
** Generated instruction streams (lower.c; conv2d.c) are built through it.
*/
#ifndef TL_VTA_RUNTIME_H
#define TL_VTA_RUNTIME_H

#include "vta.h"

typedef struct tl_vta_cmd tl_vta_cmd;
typedef struct tl_vta_kernel tl_vta_kernel;

enum { TL_VTA_STAGE_LOAD = 1, TL_VTA_STAGE_COMPUTE = 2, TL_VTA_STAGE_STORE = 3 };

int tl_vta_cmd_new(tl_ctx *ctx, tl_vta_sim *sim, tl_vta_cmd **out);
void tl_vta_cmd_free(tl_vta_cmd *q);
/* The sticky status: TL_OK, or the first error (message in the ctx). */
int tl_vta_cmd_status(const tl_vta_cmd *q);
int tl_vta_cmd_count(const tl_vta_cmd *q);
const tl_vta_insn *tl_vta_cmd_insns(const tl_vta_cmd *q);
int tl_vta_cmd_encode(tl_vta_cmd *q, tl_buf *out);

void tl_vta_dep_pop(tl_vta_cmd *q, int from, int to);
void tl_vta_dep_push(tl_vta_cmd *q, int from, int to);
/* DRAM -> SRAM: phys is the buffer's address (aligned to the memory type's
** element), elem_offset counts elements. */
void tl_vta_load_2d(tl_vta_cmd *q, uint32_t phys, uint32_t elem_offset, uint32_t x_size,
                    uint32_t y_size, uint32_t x_stride, uint32_t x_pad0, uint32_t y_pad0,
                    uint32_t x_pad1, uint32_t y_pad1, uint32_t sram, int mem_type);
/* accumulator SRAM -> DRAM, truncated to OUT_WIDTH */
void tl_vta_store_2d(tl_vta_cmd *q, uint32_t sram, uint32_t phys, uint32_t elem_offset,
                     uint32_t x_size, uint32_t y_size, uint32_t x_stride);

/* A micro-op kernel (owned by q): mode 0 GEMM, 1 ALU; up to 2 loops (outer
** first) before the uops. */
tl_vta_kernel *tl_vta_kernel_new(tl_vta_cmd *q, int mode, int reset, int alu_op, int use_imm,
                                 int32_t imm);
void tl_vta_kernel_loop(tl_vta_cmd *q, tl_vta_kernel *k, uint32_t extent, uint32_t dst,
                        uint32_t src, uint32_t wgt);
void tl_vta_kernel_uop(tl_vta_cmd *q, tl_vta_kernel *k, uint32_t dst, uint32_t src,
                       uint32_t wgt);
int tl_vta_kernel_size(const tl_vta_kernel *k);
/* The kernel's GEMM or ALU instruction, preceded by a LOAD UOP when the
** kernel is not resident in the micro-op SRAM in this run. */
void tl_vta_push_kernel(tl_vta_cmd *q, tl_vta_kernel *k);

/* Close the stream (wait for the last load and store, FINISH), run it on the
** simulator, and start a new one. */
int tl_vta_cmd_sync(tl_vta_cmd *q);
/* sync in two halves: close the stream (the final waits and FINISH) into DRAM
** without running it; run the last closed stream (again: it loads its own
** micro-ops, so it can run any number of times while q lives). */
int tl_vta_cmd_close(tl_vta_cmd *q);
int tl_vta_cmd_rerun(tl_vta_cmd *q);

const tl_vta_config *tl_vta_sim_config(const tl_vta_sim *s);

#endif
