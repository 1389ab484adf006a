/*
** tunelua_opencl.h -- part of the public API (included by core/tunelua.h):
** OpenCL: code generation and runtime (core/codegen/opencl.c, core/runtime/opencl.c).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_OPENCL_H
#define TUNELUA_OPENCL_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
