/*
** tunelua_tune.h -- part of the public API (included by core/tunelua.h):
** tuners, cost model, features, search (core/autotvm/tuner*, core/autotvm/feature*).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_TUNE_H
#define TUNELUA_TUNE_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
