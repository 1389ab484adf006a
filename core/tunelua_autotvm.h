/*
** tunelua_autotvm.h -- part of the public API (included by core/tunelua.h):
** AutoTVM: config spaces, templates, tasks, records (core/autotvm, targets/x86).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_AUTOTVM_H
#define TUNELUA_AUTOTVM_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
