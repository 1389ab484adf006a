/*
** rpc.h -- the device farm's internal table of contents (rpc/); the public API is
** core/tunelua_rpc.h.
**
**   net.c      sockets, deadlines, the tracker's framing and the session's frames
**   tracker.c  the tracker (TVM's wire protocol, one poll() loop)
**   server.c   the RPC server: tracker registration, handshake, sessions in a child
**   client.c   sessions with a server, tracker queries, raw bytes for tests
**   batch.c    RPCRunner's batch: jobs over every free device of a key, in parallel
*/
#ifndef TL_RPC_INTERNAL_H
#define TL_RPC_INTERNAL_H

#include "../core/base/base.h"
#include "../core/measure/measure.h"

#include <jansson.h>
#include <stdint.h>

#define RPC_TRACKER_MAGIC 0x2F271
#define RPC_MAGIC 0xFF271
#define RPC_CODE_SUCCESS (RPC_MAGIC + 0)
#define RPC_CODE_DUPLICATE (RPC_MAGIC + 1)
#define RPC_CODE_MISMATCH (RPC_MAGIC + 2)

#define RPC_TRACKER_MAX_FRAME ((size_t)1 << 20)     /* tracker JSON frames */
#define RPC_SESSION_VERSION 3
#define RPC_SESSION_MAX_HEADER ((size_t)64 << 10)   /* session frame header (JSON) */
#define RPC_SESSION_MAX_BLOB ((uint64_t)512 << 20)  /* session frame payload */
#define RPC_MAX_KEY 4096
/* Tracker messages are dumped as Python's json.dumps does (", " and ": " separators, ASCII),
** so the bytes on the wire are those of TVM's tracker and clients (formats §3). */
#define RPC_TRACKER_JSON (JSON_ENCODE_ANY | JSON_ENSURE_ASCII)

enum { TC_FAIL = -1, TC_SUCCESS = 0, TC_PING = 1, TC_STOP = 2, TC_PUT = 3, TC_REQUEST = 4,
       TC_UPDATE_INFO = 5, TC_SUMMARY = 6, TC_GET_PENDING_MATCHKEYS = 7 };

void rpc_sleep(double s);                       /* s seconds, fractions too */
void rpc_keepalive(int fd);
int rpc_listen(tl_ctx *ctx, const char *host, int port, int port_end, int *fd_out, int *port_out);
int rpc_connect(tl_ctx *ctx, const char *host, int port, double timeout_s, int *fd_out);
int rpc_send_all(tl_ctx *ctx, int fd, const void *p, size_t n, double deadline);
int rpc_recv_all(tl_ctx *ctx, int fd, void *p, size_t n, double deadline);
int rpc_send_i32(tl_ctx *ctx, int fd, int32_t v, double deadline);
int rpc_recv_i32(tl_ctx *ctx, int fd, int32_t *v, double deadline);
int rpc_send_json(tl_ctx *ctx, int fd, const char *text, double deadline);
int rpc_recv_json(tl_ctx *ctx, int fd, size_t max, char **out, double deadline);
int rpc_tracker_open(tl_ctx *ctx, const char *host, int port, double timeout_s, int *fd_out);
int rpc_tracker_call(tl_ctx *ctx, int fd, const char *req, double timeout_s, json_t **reply);
/* rpc_tracker_call with msg dumped as TVM does (RPC_TRACKER_JSON); msg is consumed. */
int rpc_tracker_call_json(tl_ctx *ctx, int fd, json_t *msg, double timeout_s, json_t **reply);

/* session frames: uint32 header length, header JSON, uint64 blob length, blob */
int rpc_frame_send(tl_ctx *ctx, int fd, const char *header, const void *blob, uint64_t n,
                   double deadline);
int rpc_frame_recv(tl_ctx *ctx, int fd, char **header, void **blob, uint64_t *n, double deadline);

#endif
