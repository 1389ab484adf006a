/*
** conv2d.h -- conv2d_packed.vta (conv2d.c): the workload, TVM's config space,
** the instruction stream of a config and the CPU reference.
*/
#ifndef TL_VTA_CONV2D_H
#define TL_VTA_CONV2D_H

#include "../../core/autotvm/autotvm.h"
#include "runtime.h"

/* A packed convolution; channel counts are in blocks (CIo = CI / BLOCK_IN). */
typedef struct tl_vta_conv2d {
  int64_t No, CIo, H, W, COo, KH, KW, sh, sw, ph, pw, OH, OW;
  int64_t b, B;                 /* the batch and channel blocks of the layout */
  double flop;                  /* 2 * MACs, as TVM's cfg.add_flop */
} tl_vta_conv2d;

/* The knobs of one config: splits [outer, inner], thread counts. */
typedef struct tl_vta_knobs {
  int64_t tile_b[2], tile_h[2], tile_w[2], tile_ci[2], tile_co[2];
  int oc_nthread, h_nthread;
} tl_vta_knobs;

/* args: [data, kernel, strides, padding, dilation, layout, out_dtype] as in
** TVM's records; the blocks must match the configuration c (NULL: any). */
int tl_vta_conv2d_parse(tl_ctx *ctx, const tl_vta_config *c, const char *args_json,
                        tl_vta_conv2d *w);
/* TVM's space: tile_b, tile_h, tile_w, tile_ci, tile_co (factors, 2 outputs),
** oc_nthread, h_nthread ([1, 2]), in that order. */
int tl_vta_conv2d_space(tl_ctx *ctx, const tl_vta_conv2d *w, tl_atvm_space **out);
int tl_vta_conv2d_define(tl_ctx *ctx, const tl_vta_conv2d *w, tl_atvm_space *sp);
int tl_vta_conv2d_knobs_of(tl_ctx *ctx, const tl_vta_conv2d *w, tl_atvm_space *sp, int64_t index,
                           tl_vta_knobs *k);
/* TL_OK when the config fits the SRAMs (TL_E_SCHED naming the buffer if not). */
int tl_vta_conv2d_check(tl_ctx *ctx, const tl_vta_config *c, const tl_vta_conv2d *w,
                        const tl_vta_knobs *k);
/* Append the config's stream to q (no sync); data, kernel, out: DRAM buffers. */
int tl_vta_conv2d_emit(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c,
                       const tl_vta_conv2d *w, const tl_vta_knobs *k, uint32_t data,
                       uint32_t kernel, uint32_t out);
void tl_vta_conv2d_reference(const tl_vta_config *c, const tl_vta_conv2d *w, const int8_t *data,
                             const int8_t *kernel, int8_t *out);
/* Bytes of the data (0), kernel (1) and output (2) tensors. */
int64_t tl_vta_conv2d_bytes(const tl_vta_config *c, const tl_vta_conv2d *w, int which);


/* The IR route (lower.c): conv2d_packed's VTA schedule in te primitives, its
** lowered function, and the VTA passes over it appending the stream to q. */
int tl_vta_conv2d_ir_schedule(tl_ctx *ctx, const tl_vta_knobs *k, tl_sched *s);
int tl_vta_conv2d_lower(tl_ctx *ctx, const tl_vta_conv2d *w, const tl_vta_knobs *k,
                        tl_lowered **out);
/* arg_phys: the DRAM address of each argument of f, in argument order. */
int tl_vta_lower_emit(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c, tl_lowered *f,
                      const uint32_t *arg_phys);
int tl_vta_conv2d_emit_ir(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c,
                          const tl_vta_conv2d *w, const tl_vta_knobs *k, uint32_t data,
                          uint32_t kernel, uint32_t out);

/* A fused ending of the conv (the ops between the int32 conv and the int8 cast of a
** network's fused group), in order: immediates (add, right and left shift, min, max), the
** per-channel bias (an int32 (COo, 1, 1, 1, B) tensor) and the residual (an int8 tensor
** shaped as the output, cast to int32 and shifted left by imm). */
enum { TL_VTA_EPI_ADD = 0, TL_VTA_EPI_SHR, TL_VTA_EPI_SHL, TL_VTA_EPI_MIN, TL_VTA_EPI_MAX,
       TL_VTA_EPI_BIAS, TL_VTA_EPI_RES };
#define TL_VTA_EPI_NOPS 16
typedef struct tl_vta_epilogue {
  int n, bias, res;
  int res_bits;                  /* the residual's element: 8 (int8) or 32 (int32) */
  int kind[TL_VTA_EPI_NOPS];
  int64_t imm[TL_VTA_EPI_NOPS];
} tl_vta_epilogue;

int tl_vta_epilogue_parse(tl_ctx *ctx, const char *json, tl_vta_epilogue *e);
/* The conv and its ending as a tensor expression: in = data, kernel, then bias and residual
** when the ending has them; out: the int8 result. */
int tl_vta_conv2d_fused_compute(tl_ctx *ctx, const tl_vta_conv2d *w, const tl_vta_epilogue *e,
                                tl_dag *dag, const int *in, int *out);
int tl_vta_conv2d_fused_lower(tl_ctx *ctx, const tl_vta_conv2d *w, const tl_vta_epilogue *e,
                              const tl_vta_knobs *k, tl_lowered **out);
/* phys: data, kernel, [bias], [residual], out. */
int tl_vta_conv2d_fused_emit(tl_vta_cmd *q, tl_ctx *ctx, const tl_vta_config *c,
                             const tl_vta_conv2d *w, const tl_vta_epilogue *e,
                             const tl_vta_knobs *k, const uint32_t *phys);
/* The CPU reference of the fused group (bias, res: NULL when the ending has none). */
void tl_vta_conv2d_fused_reference(const tl_vta_config *c, const tl_vta_conv2d *w,
                                   const tl_vta_epilogue *e, const int8_t *data,
                                   const int8_t *kernel, const int32_t *bias, const void *res,
                                   int8_t *out);

/* A task's config run on a fresh simulator and checked against the CPU
** reference through the IR route (direct 0) or the direct generator of
** conv2d.c (direct 1, kept as the tests' cross-check); disasm: the stream's
** disassembly instead of a run. */
typedef struct tl_vta_task tl_vta_task;
int tl_vta_task_run_route(tl_ctx *ctx, tl_vta_task *t, int64_t index, uint64_t seed, int direct,
                          char **stats_json, char **disasm);
const tl_vta_conv2d *tl_vta_task_workload(const tl_vta_task *t);
int tl_vta_task_knobs(tl_ctx *ctx, tl_vta_task *t, int64_t index, tl_vta_knobs *k);
int tl_vta_task_config(const tl_vta_task *t, tl_vta_config *out);

#endif
