/*
** tunelua_vta.h -- part of the public API (included by core/tunelua.h): VTA,
** the deep-learning accelerator (targets/vta/; docs/vta.md). Its hardware
** configuration (TVM's vta_config.json keys and the parameters derived from
** them), a disassembler for its instruction streams, and a simulator that
** executes them bit-exactly and counts cycles.
** The region between the cdef markers is LuaJIT-FFI clean.
*/
#ifndef TUNELUA_VTA_H
#define TUNELUA_VTA_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

typedef struct tl_vta_config tl_vta_config;
typedef struct tl_vta_sim tl_vta_sim;

/* A configuration from a vta_config.json file or text (name: how errors name
** the text). A missing, mistyped, unknown, out-of-range or inconsistent key is
** TL_E_PARSE naming the key; an unreadable file is TL_E_IO. */
int tl_vta_config_load(tl_ctx *ctx, const char *path, tl_vta_config **out);
int tl_vta_config_from_string(tl_ctx *ctx, const char *text, const char *name,
                              tl_vta_config **out);
void tl_vta_config_free(tl_vta_config *c);
/* Every key and derived parameter as one JSON object (*out: tl_vta_free). */
int tl_vta_config_json(tl_ctx *ctx, const tl_vta_config *c, char **out);

/* The disassembly of nbytes of instructions (16 bytes each), one numbered
** line per instruction (*out: tl_vta_free). A bad instruction is TL_E_PARSE
** naming its index. */
int tl_vta_disasm_bytes(tl_ctx *ctx, const tl_vta_config *c, const void *insns, size_t nbytes,
                        char **out);
void tl_vta_free(void *p);

/* The simulator: DRAM of dram_bytes (0: 256 MiB, reserved lazily), the SRAMs
** of the configuration, the counters and the cycle model. */
int tl_vta_sim_new(tl_ctx *ctx, const tl_vta_config *c, size_t dram_bytes, tl_vta_sim **out);
void tl_vta_sim_free(tl_vta_sim *s);
/* A DRAM buffer of nbytes (page-aligned); *phys is its physical address,
** never 0. */
int tl_vta_sim_alloc(tl_ctx *ctx, tl_vta_sim *s, size_t nbytes, uint32_t *phys);
int tl_vta_sim_release(tl_ctx *ctx, tl_vta_sim *s, uint32_t phys);
/* The host view of [phys, phys+nbytes) of DRAM, or NULL when out of range. */
void *tl_vta_sim_host_ptr(tl_vta_sim *s, uint32_t phys, size_t nbytes);
/* Run insn_count instructions read from DRAM at insn_phys until FINISH.
** Errors name the instruction: a bad encoding (TL_E_PARSE), an SRAM or DRAM
** access out of range, a token deadlock (TL_E_RUNTIME); it never hangs. */
int tl_vta_sim_run(tl_ctx *ctx, tl_vta_sim *s, uint32_t insn_phys, int insn_count);
/* The counters since the last clear as a JSON object (*out: tl_vta_free):
** cycles, seconds, busy cycles per module, bytes per memory type, GEMM and
** ALU counters. */
int tl_vta_sim_stats_json(tl_ctx *ctx, const tl_vta_sim *s, char **out);
void tl_vta_sim_clear_stats(tl_vta_sim *s);

/* ---- conv2d_packed.vta: a tuning task on the simulator ----------------------
** args as TVM's records give them: [["TENSOR", data 6-D, "int8"], ["TENSOR",
** kernel 6-D, "int8"], strides, padding, dilation, "NCHW<b>n<c>c", "int32"].
** The config space is TVM's (tile_b, tile_h, tile_w, tile_ci, tile_co,
** oc_nthread, h_nthread, in TVM's index order); entities are TVM's JSON. */

typedef struct tl_vta_task tl_vta_task;

int tl_vta_task_new(tl_ctx *ctx, const tl_vta_config *c, const char *args_json,
                    tl_vta_task **out);
void tl_vta_task_free(tl_vta_task *t);
int64_t tl_vta_task_space_len(const tl_vta_task *t);
double tl_vta_task_flop(const tl_vta_task *t);
/* The entity of a config index (*out: tl_vta_free), and back. */
int tl_vta_task_entity_json(tl_ctx *ctx, tl_vta_task *t, int64_t index, char **out);
int tl_vta_task_index_of_entity(tl_ctx *ctx, tl_vta_task *t, const char *entity_json,
                                int64_t *index);
/* TL_OK when the config fits the SRAMs, else TL_E_SCHED naming the buffer. */
int tl_vta_task_check(tl_ctx *ctx, tl_vta_task *t, int64_t index);
/* Run config index on a fresh simulator with random data (seed); with check,
** a result that differs from the CPU reference is TL_E_RUNTIME. *stats_json
** (tl_vta_free): cycles, seconds, gops, gemm_busy (share of cycles the GEMM
** core works), busy cycles per module, byte and GEMM/ALU counters, macs. */
int tl_vta_task_run(tl_ctx *ctx, tl_vta_task *t, int64_t index, uint64_t seed, int check,
                    char **stats_json);
/* The same with the caller's data and kernel (packed layouts, int8), the
** simulator's output copied to out (checked against the CPU reference too). */
int tl_vta_task_run_data(tl_ctx *ctx, tl_vta_task *t, int64_t index, const void *data,
                         const void *kernel, void *out, char **stats_json);
/* A network's fused group on VTA: the conv of config index followed by its
** own ending instead of the template's right_shift 8, clip(0, 127):
** epilogue_json lists ops in order, [op] or [op, integer], op one of add,
** shr, shl, min, max (ALU immediates), bias (add bias, int32 of shape
** (CO/BLOCK, 1, 1, 1, BLOCK), through an accumulator load) and res (add
** residual, int8 shaped as the output, loaded into the accumulator and shifted
** left by the integer); the int8 cast ends it. The stream comes from the loop
** IR (docs/vta.md). data, kernel, bias, residual NULL: random (seed); out may
** be NULL; with check, the result is compared with the CPU reference. */
int tl_vta_task_run_fused(tl_ctx *ctx, tl_vta_task *t, int64_t index, const char *epilogue_json,
                          const void *data, const void *kernel, const void *bias,
                          const void *residual, void *out, uint64_t seed, int check,
                          char **stats_json);
/* A network's packed conv group as a graph executor kernel: config index of
** task t with the group's ending (epilogue_json as for run_fused), its stream
** built once on sim (shared by the network's groups; it must outlive the
** group), in DRAM buffers of its own. Attached to an executor, a step runs it
** on arrays data, kernel[, bias][, residual], out: copied in, the stream run
** on the simulator, the int8 output copied back. Cycles: of the last run, or
** (total) summed over the group's runs. */
typedef struct tl_vta_group tl_vta_group;
int tl_vta_group_new(tl_ctx *ctx, tl_vta_sim *sim, tl_vta_task *t, int64_t index,
                     const char *epilogue_json, tl_vta_group **out);
void tl_vta_group_free(tl_vta_group *g);
int tl_vta_group_attach(tl_ctx *ctx, tl_vta_group *g, tl_graph_exec *e, const char *name,
                        int *kernel);
int tl_vta_group_num_args(const tl_vta_group *g);
uint64_t tl_vta_group_cycles(const tl_vta_group *g, int total);
uint64_t tl_vta_group_runs(const tl_vta_group *g);
/* VTA groups in graph artifacts (targets/vta/artifact.c): the host kind
** "vta" for tl_graph_artifact_load_kind (a simulator per artifact, built from
** the section's vta_config.json text and checked against its model; each kernel
** a group rebuilt from its task args, config index and ending), and the cycles of
** a loaded artifact's groups (state: tl_graph_artifact_host_state): the number of
** groups, and each one's cycles of the last run (or of all runs) into cycles[]. */
const tl_graph_host_kind *tl_vta_graph_kind(void);
int tl_vta_graph_cycles(const void *state, int total, uint64_t *cycles, int max);
/* The model of the configuration a loaded artifact's groups were built for (NULL: none). */
const char *tl_vta_graph_model(const void *state);
/* Bytes of the data (0), kernel (1) and output (2) tensors. */
int64_t tl_vta_task_nbytes(const tl_vta_task *t, int which);
/* The config's instruction stream, disassembled (*out: tl_vta_free). */
int tl_vta_task_disasm(tl_ctx *ctx, tl_vta_task *t, int64_t index, char **out);

/* Measure config index of a conv2d_packed.vta task (config_json: the hardware
** configuration's vta_config.json text) in a forked child with a time limit:
** the stream run on vta-sim, checked against the CPU reference. costs[0..
** repeat): the simulated seconds (the same each repeat); error_no: AutoTVM's
** MeasureErrorNo (an SRAM overflow is INSTANTIATION_ERROR, a wrong result
** WRONG_ANSWER); *msg (tl_vta_free): the simulator's counters as JSON on
** success, else the reason. The RPC server's measure kind "vta" runs it. */
int tl_vta_measure(tl_ctx *ctx, const char *config_json, const char *args_json, int64_t index,
                   int repeat, double timeout_s, double *costs, int *ncosts, int *error_no,
                   char **msg);

/* cdef:end */

#ifdef __cplusplus
}
#endif

#endif
