/*
** codegen.h -- internal interface of the code generators.
**
** Lowering hands a code generator one tl_lowered function: a statement tree
** of the loop IR in which every LOAD and STORE carries exactly one flattened
** element index, argument buffers (scope global, buffer->arg = k) stand for
** the DLTensor passed as argument k, ALLOC nodes introduce temporaries, and
** FOR loops are serial, parallel, vectorized or unrolled.
**
** tl_codegen_vectorize rewrites vectorized loops into RAMP/BROADCAST vector
** code (see vectorize.c); tl_codegen_c prints the function as one
** self-contained C11 (GNU dialect) translation unit with the fixed entry ABI
**
**     int32_t NAME(void **args, int32_t nargs);   args[k]: DLTensor *
**     const char *NAME_error(void);               message of the last failure
**
** and tl_build_c compiles that source into a loadable tl_module
** (core/runtime/module.c).
*/
#ifndef TL_CODEGEN_H
#define TL_CODEGEN_H

#include "../ir/ir.h"

typedef struct tl_lowered {
  tl_ir *ir;                      /* nodes, vars and buffers (passes add nodes) */
  tl_ref body;                    /* the statement tree */
  const char *name;               /* C identifier of the entry point */
  int nargs;
  int *arg_bufs;                  /* buffer ids, in argument order */
} tl_lowered;

/* Rewrite each FOR of kind VECTORIZED whose extent is a constant power of
** two in [2, 64] and whose body is straight-line code (stores, lets, ifs on
** lane-invariant conditions) into vector code: the loop variable becomes
** ramp(min, 1, L), invariant values stay scalar and are broadcast where they
** meet vectors, stride-1 accesses become vector loads/stores typed with L
** lanes, others gathers/scatters. A loop that cannot be vectorized (inner
** loops, allocations, a vector condition on a statement, cross-lane memory
** dependences, non-power-of-two extent) is returned unchanged, still of kind
** VECTORIZED; the C backend prints it as a scalar loop with hints. */
tl_ref tl_codegen_vectorize(tl_ir *ir, tl_ref stmt);

/* Print f as C source into out (appended). Runs tl_codegen_vectorize first.
** Deterministic: the same IR gives byte-identical source. Thread and vthread
** loops, barriers and unbound variables are rejected (TL_E_UNSUPPORTED /
** TL_E_ARG) with a message naming the node. */
int tl_codegen_c(tl_ctx *ctx, const tl_lowered *f, tl_buf *out);

/* Generate C for f and compile it into a module (cflags NULL: the default of
** tl_module_from_c). */
int tl_build_c(tl_ctx *ctx, const tl_lowered *f, const char *cflags, tl_module **out);

/* What module.c and the graph executor's library build share (core/runtime/module.c):
** the C compiler ($TUNELUA_CC, else the one libtunelua was built with, else cc) and
** the kernel cache directory (malloc'd, created; see module.c for the candidates). */
const char *tl_kernel_compiler(void);
int tl_kernel_cache_dir(tl_ctx *ctx, char **out);

/* ---- OpenCL (core/codegen/opencl.c) ------------------------------------------
** Unlike the C backend it takes THREAD/VTHREAD loops, "shared" buffers and
** BARRIER nodes (what lowering makes of bound loops and shared caches).
** tl_codegen_opencl splits f's body into launch regions (top-level statements
** under the global temporaries' ALLOCs), prints one __kernel per region and
** describes how the host launches it. Slots name what a kernel argument is:
** slot k < nargs is function argument k, slot nargs + t is global temporary t
** (allocated by the host, temp_bytes[t] bytes). */
typedef struct tl_ocl_kinfo {
  char *name;                     /* kernel function name */
  int nslots;
  int *slots;                     /* its __global pointer arguments, in order */
  int64_t grid[3], block[3];      /* work-groups and work-items per group */
  int64_t local_bytes;            /* static __local memory */
} tl_ocl_kinfo;

typedef struct tl_ocl_code {
  char *source;                   /* OpenCL C */
  int nkernels;
  tl_ocl_kinfo *kernels;
  int nargs;
  int *arg_dtype;                 /* TL_FLOAT32.. per argument */
  int *arg_ndim;
  int64_t **arg_shape;
  int ntemps;
  int64_t *temp_bytes;
  int fp16, fp64;                 /* needs cl_khr_fp16 / cl_khr_fp64 */
} tl_ocl_code;

int tl_codegen_opencl(tl_ctx *ctx, const tl_lowered *f, tl_ocl_code *out);
void tl_ocl_code_free(tl_ocl_code *c);

#endif
