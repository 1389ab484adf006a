/*
** tl_runtime.h -- the device runtime: a network exported by lib:export_library
** (one .tlpack file: its kernels as one shared object for the device, the graph,
** the params) loaded and run by an app. Plain C (libc, libdl): an Android or
** Linux app compiles device/runtime.c, device/djson.c, core/base/base.c and
** core/runtime/time.c with it (see docs/tutorials/deploy_android.md).
**
**   tl_runtime *rt;
**   char err[512];
**   if (tl_runtime_load("model.tlpack", &rt, err, sizeof err)) die(err);
**   tl_runtime_set_input(rt, "data", pixels, nbytes);
**   tl_runtime_run(rt);
**   tl_runtime_get_output(rt, 0, scores, nbytes);
**   tl_runtime_free(rt);
**
** Every function returns 0 or -1; tl_runtime_error(rt) says what went wrong
** (naming the file, the input or the output and what was expected).
*/
#ifndef TL_RUNTIME_API_H
#define TL_RUNTIME_API_H

#include <stddef.h>
#include <stdint.h>

typedef struct tl_runtime tl_runtime;

/* Load a .tlpack: on failure *out is NULL and err holds the reason (a truncated
** or malformed file, a pack for another machine, a library that will not load). */
int tl_runtime_load(const char *path, tl_runtime **out, char *err, size_t errn);
void tl_runtime_free(tl_runtime *rt);
const char *tl_runtime_error(const tl_runtime *rt);
const char *tl_runtime_target(const tl_runtime *rt);   /* the target string it was built for */

int tl_runtime_num_inputs(const tl_runtime *rt);
int tl_runtime_num_outputs(const tl_runtime *rt);
const char *tl_runtime_input_name(const tl_runtime *rt, int i);
/* Shape (ndim, dims), dtype name and bytes of input i (output: tl_runtime_output_info). */
int tl_runtime_input_info(const tl_runtime *rt, int i, int *ndim, const int64_t **shape,
                          const char **dtype, size_t *bytes);
int tl_runtime_output_info(const tl_runtime *rt, int i, int *ndim, const int64_t **shape,
                           const char **dtype, size_t *bytes);

/* Copy bytes into the input called name: exactly the input's size. */
int tl_runtime_set_input(tl_runtime *rt, const char *name, const void *data, size_t bytes);
/* Run every kernel of the network once. */
int tl_runtime_run(tl_runtime *rt);
/* Copy output i out: bytes must be its size. */
int tl_runtime_get_output(tl_runtime *rt, int i, void *data, size_t bytes);
/* Time runs as the time evaluator does (core/runtime/time.c: warm-up, number grown
** to min_repeat_ms, repeat): seconds per run into secs[0..repeat). */
int tl_runtime_time(tl_runtime *rt, int number, int repeat, double min_repeat_ms, double *secs);

#endif
