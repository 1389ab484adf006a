/*
** codegen.h -- internal interface of the code generators.
**
** Lowering hands a code generator one tl_lowered function (core/ir/ir.h).
** The code generators only print source; the build layer (core/build)
** compiles it and the runtime loads it.
**
** tl_codegen_vectorize rewrites vectorized loops into RAMP/BROADCAST vector
** code (see vectorize.c); tl_codegen_c prints the function as one
** self-contained C11 (GNU dialect) translation unit with the fixed entry ABI
**
**     int32_t NAME(void **args, int32_t nargs);   args[k]: DLTensor *
**     const char *NAME_error(void);               message of the last failure
*/
#ifndef TL_CODEGEN_H
#define TL_CODEGEN_H

#include "../ir/ir.h"
#include "../runtime/runtime.h"

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
/* The same, each vector at most max_bytes wide where a loop allows (0: no
** limit): a loop whose widest vector is wider becomes copies of itself on
** fewer lanes, in lane order. *nsplit (may be NULL): loops so split. */
tl_ref tl_codegen_vectorize_to(tl_ir *ir, tl_ref stmt, int max_bytes, int *nsplit);

/* Print f as C source into out (appended). Runs tl_codegen_vectorize first.
** Deterministic: the same IR gives byte-identical source. Thread and vthread
** loops, barriers and unbound variables are rejected (TL_E_UNSUPPORTED /
** TL_E_ARG) with a message naming the node. */
int tl_codegen_c(tl_ctx *ctx, const tl_lowered *f, tl_buf *out);
/* The same with vectors at most max_bytes wide (16: 128-bit NEON), one
** version, no #if on the machine; max_bytes 0 is tl_codegen_c. */
int tl_codegen_c_width(tl_ctx *ctx, const tl_lowered *f, int max_bytes, tl_buf *out);

/* ---- OpenCL (core/codegen/opencl.c) ------------------------------------------
** Unlike the C backend it takes THREAD/VTHREAD loops, "shared" buffers and
** BARRIER nodes (what lowering makes of bound loops and shared caches).
** tl_codegen_opencl splits f's body into launch regions (top-level statements
** under the global temporaries' ALLOCs), prints one __kernel per region and
** describes how the host launches it (tl_ocl_code, core/runtime/runtime.h). */

int tl_codegen_opencl(tl_ctx *ctx, const tl_lowered *f, tl_ocl_code *out);

#endif
