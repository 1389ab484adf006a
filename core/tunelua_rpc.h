/*
** tunelua_rpc.h -- part of the public API (included by core/tunelua.h):
** measurement and the device farm: builders, runners, RPC (core/measure, rpc).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_RPC_H
#define TUNELUA_RPC_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
