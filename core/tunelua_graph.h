/*
** tunelua_graph.h -- part of the public API (included by core/tunelua.h):
** graph executor: memory plan and run loop (core/graph).
** The region between the cdef markers is LuaJIT-FFI clean (no #define,
** #include, attributes or inline code) and may use core/tunelua.h's types.
*/
#ifndef TUNELUA_GRAPH_H
#define TUNELUA_GRAPH_H

#ifdef __cplusplus
extern "C" {
#endif

/* cdef:begin */

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
