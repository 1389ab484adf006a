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

/* ---- measurement (core/measure) ----------------------------------------
** Error numbers of results are TVM's MeasureErrorNo: 0 no error,
** 1 instantiation, 2 compile host, 3 compile device, 4 runtime device,
** 5 wrong answer, 6 build timeout, 7 run timeout, 8 unknown. */

/* Free a string returned by the functions below. */
void tl_measure_str_free(char *s);
/* C source of f (the C backend) and its argument signature as JSON
** {"name": "f", "args": [{"name": "A", "dtype": "float32", "shape": [4, 8]}, ...]};
** both malloc'd (tl_measure_str_free). Symbolic extents are TL_E_UNSUPPORTED. */
int tl_measure_lowered_source(tl_ctx *ctx, tl_lowered *f, char **source, char **sig);
/* The same for a target's toolchain tc (its vector width; NULL: the defaults). */
int tl_measure_lowered_source_for(tl_ctx *ctx, tl_lowered *f, const tl_toolchain *tc,
                                  char **source, char **sig);
/* Compile sources[i] into so_paths[i] on n_parallel threads, each compiler a
** child process group with a timeout_s limit, with toolchain tc (a target's;
** NULL: the defaults, "-O3 -march=native"); cflags, when neither NULL nor "",
** replaces tc's flags.
** codes[i]: TL_OK, TL_E_BUILD (msgs[i]: the diagnostics), TL_E_TIMEOUT, TL_E_IO;
** a NULL source or path is skipped (TL_E_ARG). secs[i]: wall time. msgs[i] is
** malloc'd or NULL. Returns TL_OK unless the arguments are bad. */
int tl_measure_build_batch(tl_ctx *ctx, int n, const char *const *sources,
                           const char *const *so_paths, const tl_toolchain *tc,
                           const char *cflags,
                           double timeout_s, int n_parallel, int *codes, double *secs,
                           char **msgs);
/* Build configs indices[i] of a C task (tunelua_autotvm.h): each is
** instantiated, lowered and turned into C in a forked child, then compiled
** into so_paths[i] (tc and cflags as tl_measure_build_batch); n_parallel at a
** time, timeout_s for both steps together.
** error_no[i]: 0, 1 (instantiation: msgs[i] is the template's message),
** 2 (compile error or a crash while instantiating), 6 (timeout), 8.
** sigs[i]: the argument signature (as tl_measure_lowered_source) or NULL;
** msgs[i] and sigs[i] are malloc'd (tl_measure_str_free). */
int tl_measure_build_task_batch(tl_ctx *ctx, tl_atvm_task *task, int n,
                                const int64_t *indices, const char *const *so_paths,
                                const tl_toolchain *tc, const char *cflags, double timeout_s,
                                int n_parallel,
                                int *error_no, double *secs, char **msgs, char **sigs);
/* In a forked child with a timeout_s limit: load so_path, allocate random
** arrays of sig_json, optionally run once and compare every argument with the
** kernel ref_fname of ref_so_path on the same inputs (rtol; else NULL), then
** time fname (NULL: the signature's name) with the time evaluator. Fills
** costs[0..*ncosts), *error_no (0, 4 crash/kernel error, 5, 7) and *msg
** (malloc'd or NULL). Returns TL_OK unless the machinery itself failed. */
int tl_measure_run(tl_ctx *ctx, const char *so_path, const char *fname,
                   const char *sig_json, int number, int repeat, double min_repeat_ms,
                   int cache_flush, double timeout_s, const char *ref_so_path,
                   const char *ref_fname, double rtol, double *costs, int *ncosts,
                   int *error_no, char **msg);
/* tl_measure_run over n kernels at once on ngroups CPU groups (cpu_groups[g] a CPU list,
** disjoint, as tl_cpu_groups_check wants; a bad list is TL_E_ARG naming the group): up to
** ngroups measurement children run together, each pinned to a group no other one holds, and
** a group that finished one waits cooldown_s before its next. Kernel i (fnames, ref_so_paths
** and ref_fnames NULL or per kernel, as tl_measure_run takes them) fills
** costs[i*repeat ..], ncosts[i], error_no[i], msgs[i] (malloc'd or NULL) exactly as
** tl_measure_run would, and secs[i] (its child's wall time); timeout_s limits each child
** from its own start. Returns TL_OK unless the machinery itself failed. */
int tl_measure_run_batch(tl_ctx *ctx, int n, const char *const *so_paths,
                         const char *const *fnames, const char *const *sigs,
                         const char *const *ref_so_paths, const char *const *ref_fnames,
                         int number, int repeat, double min_repeat_ms, int cache_flush,
                         double timeout_s, double rtol, int ngroups,
                         const char *const *cpu_groups, double cooldown_s, double *costs,
                         int *ncosts, int *error_no, double *secs, char **msgs);

/* ---- OpenCL kernels (core/measure/measure_opencl.c; docs/measure_opencl.md) ----
** One forked child per trial, for the local runner and the RPC session alike:
** build the module for device dev (limit build_timeout_s: BUILD_TIMEOUT 6; a
** work-group the device cannot run is INSTANTIATION_ERROR 1 naming the limit;
** a driver refusal COMPILE_DEVICE 3), fill its arguments with seeded random
** values and launch it once (this first launch gets build_timeout_s on top of
** run_timeout_s: some drivers generate device code when a kernel is first
** enqueued), with a reference run it again and compare every argument (rtol;
** WRONG_ANSWER 5), then time it with the device's time evaluator (limit
** run_timeout_s: RUN_TIMEOUT 7; a launch failure or a crash RUNTIME_DEVICE 4).
** Each fills costs[0..*ncosts), *error_no and *msg (malloc'd or NULL) and
** returns TL_OK unless the machinery itself failed. The calling process never
** initializes OpenCL (drivers are not fork-safe). */

/* The module as OpenCL C (source_path) + manifest (manifest_path, see
** tunelua_opencl.h), the reference likewise (ref_*: NULL for none), built in
** the same child and run on the same inputs. A malformed manifest is
** TL_E_PARSE (nothing is forked). */
int tl_measure_run_opencl(tl_ctx *ctx, const char *source_path, const char *manifest_path,
                          int dev, int number, int repeat, double min_repeat_ms,
                          double build_timeout_s, double run_timeout_s,
                          const char *ref_source_path, const char *ref_manifest_path,
                          double rtol, double *costs, int *ncosts, int *error_no, char **msg);
/* The module as a lowered function f (the child inherits it through fork;
** fname names it in messages); the reference as the argument bytes that
** tl_measure_opencl_reference wrote to ref_path (NULL for none). secs (NULL or
** 2 doubles): the child's wall seconds and the driver's compile seconds. */
int tl_measure_opencl_run(tl_ctx *ctx, tl_lowered *f, const char *fname, int dev, int number,
                          int repeat, double min_repeat_ms, double build_timeout_s,
                          double run_timeout_s, const char *ref_path, double rtol,
                          double *costs, int *ncosts, int *error_no, char **msg, double *secs);
/* A reference run: f built, launched twice on the seeded inputs, and every
** argument's bytes written to out_path; the same error numbers. */
int tl_measure_opencl_reference(tl_ctx *ctx, tl_lowered *f, const char *fname, int dev,
                                double build_timeout_s, double run_timeout_s,
                                const char *out_path, int *error_no, char **msg);
/* OpenCL C and manifest of f without any device (malloc'd, tl_measure_str_free),
** or *error_no: 1 (no array argument, a symbolic extent) or 2 (the code generator
** refused) with *msg. */
int tl_measure_opencl_source(tl_ctx *ctx, tl_lowered *f, char **source, char **manifest,
                             int *error_no, char **msg);
/* Whether a manifest's kernels fit a device (device_info: tl_opencl_device_info's
** JSON): work-items per dimension, per work-group, __local bytes. TL_OK, or
** TL_E_RUNTIME naming the kernel and the limit. */
int tl_measure_opencl_fits(tl_ctx *ctx, const char *manifest, const char *device_info);
/* tl_opencl_device_info of device dev, queried in a forked child (malloc'd,
** tl_measure_str_free); no such device is TL_E_RUNTIME with the reason. */
int tl_measure_opencl_device_info(tl_ctx *ctx, int dev, char **json);
/* Build f for device dev in the background (limit timeout_s, output discarded),
** filling the driver's on-disk program cache: sent to an idle worker of the
** compile pool (persistent tunelua-measure-opencl --worker processes, see
** tl_measure_opencl_compile_workers; waits for one when all are busy), or with the
** pool off in a child of its own (own process group), first waiting for the oldest
** until fewer than max_running run. */
int tl_measure_opencl_compile_ahead(tl_ctx *ctx, tl_lowered *f, int dev, double timeout_s,
                                    int max_running);
/* Wait for every compile ahead (the pool's answers, the children). */
void tl_measure_opencl_wait_ahead(void);
/* How many pool workers compile ahead: k > 0, k of them (at most 32); 0, a child
** per compile; -1, the default: TUNELUA_OCL_COMPILE_WORKERS from the environment,
** else min(the builder's n_parallel, 8). */
void tl_measure_opencl_compile_workers(int k);
/* The compile pool's running workers: their count, the first cap ids in pids. */
int tl_measure_opencl_ahead_pids(int *pids, int cap);
/* Compiles sent to the pool since the process started, and how many of them ended
** their worker (a crash, the build limit, a broken answer). */
void tl_measure_opencl_ahead_counts(int *sent, int *lost);
/* End the compile pool's workers and wait for the compile-ahead children. */
void tl_measure_opencl_ahead_stop(void);
/* Where OpenCL trials run (docs/measure_opencl.md): on = 1, in one persistent
** tunelua-measure-opencl --worker that starts the driver once and serves the
** trials one at a time (a crash or a hang ends it; the next trial starts a
** fresh one); on = 0, in a child per trial; on = -1, the default: the worker
** unless the environment has TUNELUA_OCL_WORKER=0. */
void tl_measure_opencl_use_worker(int on);
/* The running worker's process id, 0 when none runs. */
int tl_measure_opencl_worker_pid(void);
/* End the worker (its process group killed, the worker reaped); the next
** trial starts another. */
void tl_measure_opencl_worker_stop(void);

/* ---- the device farm (rpc/; docs/rpc.md) ----------------------------------
** Tracker: TVM's tracker wire protocol; serves until STOP with stop_key (NULL:
** a random one) or a signal. Prints "bind to HOST:PORT" on stdout. host NULL or
** "": 127.0.0.1. The port is the first free one in [port, port_end)
** (port_end <= port: port only; 0: any). auth_key (NULL or "": none) is the
** farm's shared secret, required before any command (docs/rpc.md "Security").
** idle_timeout_s (< 0: the default 120 s; 0: never) closes silent connections
** that are neither servers nor waiting for one; max_conns_per_peer (<= 0: the
** default 128) caps one address's connections. */
int tl_rpc_tracker_run(tl_ctx *ctx, const char *host, int port, int port_end,
                       const char *stop_key, const char *auth_key, double idle_timeout_s,
                       int max_conns_per_peer, int verbose);
/* Server: registers key with the tracker (tracker_host NULL: standalone, the
** match key is key itself), serves one session at a time, each in a child
** with a session_timeout limit (<= 0: none; a client's -timeout may only
** shorten it), until SIGTERM/SIGINT. auth_key as the tracker's: required of
** clients and presented to the tracker. */
/* The VTA configuration this process's servers simulate (a vta_config.json file; call
** before tl_rpc_server_run): graph_load then refuses a network whose VTA groups were built
** for another configuration, naming both. Without it a network's groups run on a
** simulator of the configuration they were built for. */
int tl_rpc_server_set_vta_config(tl_ctx *ctx, const char *path);
int tl_rpc_server_run(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                      const char *key, const char *host, int port, int port_end,
                      const char *custom_addr, double session_timeout, const char *auth_key,
                      int verbose);
/* The auth key this process presents to trackers and servers as a client
** (NULL or "": none); TL_E_ARG when over 1024 bytes. */
int tl_rpc_set_auth_key(tl_ctx *ctx, const char *key);

typedef struct tl_rpc_sess tl_rpc_sess;
void tl_rpc_free(void *p);
/* A session with the server at host:port (handshake with match_key). */
int tl_rpc_connect(tl_ctx *ctx, const char *host, int port, const char *match_key,
                   double timeout_s, tl_rpc_sess **out);
/* Ask the tracker for a device of key and open a session with it; waits up to
** timeout_s (<= 0: forever) for a free one (TL_E_TIMEOUT). */
int tl_rpc_request(tl_ctx *ctx, const char *tracker_host, int tracker_port, const char *key,
                   int priority, double timeout_s, tl_rpc_sess **out);
const char *tl_rpc_sess_key(const tl_rpc_sess *s);     /* "server:<key>" */
const char *tl_rpc_sess_addr(const tl_rpc_sess *s);    /* "host:port" */
void tl_rpc_close(tl_rpc_sess *s);
/* One request (header: a JSON object text, payload blob[0..n)) and its reply:
** *resp the reply header (tl_rpc_free), *resp_blob (may be NULL) its payload. */
int tl_rpc_call(tl_ctx *ctx, tl_rpc_sess *s, const char *header, const void *blob,
                uint64_t n, double timeout_s, char **resp, void **resp_blob, uint64_t *resp_n);
/* Upload a local file (zlib-compressed on the wire) as name in the session's directory. */
int tl_rpc_upload(tl_ctx *ctx, tl_rpc_sess *s, const char *local_path, const char *name,
                  double timeout_s);
/* The tracker's SUMMARY ({"queue_info": ..., "server_info": [...]}, tl_rpc_free). */
int tl_rpc_tracker_summary(tl_ctx *ctx, const char *host, int port, double timeout_s,
                           char **json_out);
/* Send one raw tracker message (JSON text) and return the reply text (tl_rpc_free). */
int tl_rpc_tracker_raw(tl_ctx *ctx, const char *host, int port, const char *req,
                       double timeout_s, char **json_out);
/* RPCRunner's batch: measure job i (so_paths[i], fnames[i] or NULL, sigs[i]) on
** devices of key, n_parallel sessions at once. costs is n x repeat; error_no[i]
** as MeasureErrorNo, -1 = not measured; msgs[i] malloc'd or NULL (tl_rpc_free).
** A lost device gives its job error 4 and is re-requested. While no device is
** held, a waiting line goes to stderr every say_every_s (<= 0: 60 s). When no
** device comes for wait_limit_s, the rest stay -1 and the call returns
** TL_E_TIMEOUT. ref_so_path (NULL: none) is check_correctness's reference
** kernel ref_fname (NULL: the signature's name), uploaded once per session;
** every argument is compared with rtol (<= 0: 1e-4); a mismatch is error 5. */
int tl_rpc_measure_batch(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                         const char *key, int priority, int n,
                         const char *const *so_paths, const char *const *fnames,
                         const char *const *sigs, int number, int repeat,
                         double min_repeat_ms, int cache_flush, double timeout_s,
                         int n_parallel, double cooldown_s, double wait_limit_s,
                         double say_every_s, const char *ref_so_path, const char *ref_fname,
                         double rtol, double *costs, int *ncosts, int *error_no, char **msgs);

/* The same for OpenCL modules (an AutoTVM task with an "opencl ..." target):
** job i is source_paths[i] (OpenCL C) with manifest_paths[i], measured on
** OpenCL device `device` of the server in a child of its session
** (tl_measure_run_opencl: build_timeout_s for the device compile, timeout_s
** for the run). ref_source_path/ref_manifest_path (NULL: none) is
** check_correctness's reference module, uploaded once per session. */
int tl_rpc_measure_batch_opencl(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                                const char *key, int priority, int n,
                                const char *const *source_paths,
                                const char *const *manifest_paths, int device, int number,
                                int repeat, double min_repeat_ms, double build_timeout_s,
                                double timeout_s, int n_parallel, double cooldown_s,
                                double wait_limit_s, double say_every_s,
                                const char *ref_source_path, const char *ref_manifest_path,
                                double rtol, double *costs, int *ncosts, int *error_no,
                                char **msgs);

/* The same for conv2d_packed.vta configs measured on the VTA simulator of the servers
** (measure kind "vta", tl_vta_measure): the hardware configuration's JSON, the task's args
** and one config index per job; nothing is uploaded. */
int tl_rpc_measure_batch_vta(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                             const char *key, int priority, int n, const char *config_json,
                             const char *args_json, const int64_t *indices, int repeat,
                             double timeout_s, int n_parallel, double cooldown_s,
                             double wait_limit_s, double say_every_s, double *costs, int *ncosts,
                             int *error_no, char **msgs);

/* Tests and fuzzing: connect to host:port, send n raw bytes, and return what
** comes back until the peer closes or timeout_s passes (*out: tl_rpc_free). */
int tl_rpc_raw_exchange(tl_ctx *ctx, const char *host, int port, const void *data, size_t n,
                        double timeout_s, char **out, size_t *outn);
/* The same on an open session (after the handshake). */
int tl_rpc_send_raw(tl_ctx *ctx, tl_rpc_sess *s, const void *data, size_t n, double timeout_s,
                    char **out, size_t *outn);

/* cdef:end */

#ifdef __cplusplus
}
#endif
#endif
