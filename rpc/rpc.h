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
#define RPC_SESSION_VERSION 4
#define RPC_SESSION_MAX_HEADER ((size_t)64 << 10)   /* session frame header (JSON) */
#define RPC_SESSION_MAX_BLOB ((uint64_t)512 << 20)  /* session frame payload */
#define RPC_MAX_KEY 4096
/* The farm's shared secret (docs/rpc.md "Security"). A keyed client opens with the _AUTH magic
** followed by int32 length + key; the peer answers its usual reply, or one of the RPC_AUTH_*
** codes and closes. With no key set on either side the bytes are TVM's. */
#define RPC_MAX_AUTH 1024
#define RPC_TRACKER_MAGIC_AUTH 0x2F2A1
#define RPC_MAGIC_AUTH 0xFF2A1
#define RPC_AUTH_REQUIRED 0x2F2A2   /* the peer has a key and none was given */
#define RPC_AUTH_REFUSED 0x2F2A3    /* the key given is not the peer's */
#define RPC_AUTH_NONE 0x2F2A4       /* the peer has no key and one was given */
#define RPC_HANDSHAKE_S 10.0        /* handshakes (magic, key) complete within this */
/* Tracker messages are dumped as Python's json.dumps does (", " and ": " separators, ASCII),
** so the bytes on the wire are those of TVM's tracker and clients (formats §3). */
#define RPC_TRACKER_JSON (JSON_ENCODE_ANY | JSON_ENSURE_ASCII)

enum { TC_FAIL = -1, TC_SUCCESS = 0, TC_PING = 1, TC_STOP = 2, TC_PUT = 3, TC_REQUEST = 4,
       TC_UPDATE_INFO = 5, TC_SUMMARY = 6, TC_GET_PENDING_MATCHKEYS = 7 };

/* Equal secrets? Time depends only on want's length, never on where they differ. */
int rpc_auth_equal(const char *given, size_t gn, const char *want, size_t wn);
/* The key clients of this process present (tl_rpc_set_auth_key; NULL: none). */
const char *rpc_client_auth_key(void);
/* A message for an RPC_AUTH_* code answered by what ("tracker H:P"), or NULL for other codes. */
const char *rpc_auth_reply_text(int32_t code);

void rpc_sleep(double s);                       /* s seconds, fractions too */
void rpc_keepalive(int fd);
int rpc_listen(tl_ctx *ctx, const char *host, int port, int port_end, int *fd_out, int *port_out);
int rpc_connect(tl_ctx *ctx, const char *host, int port, double timeout_s, int *fd_out);
int rpc_send_all(tl_ctx *ctx, int fd, const void *p, size_t n, double deadline);
int rpc_recv_all(tl_ctx *ctx, int fd, void *p, size_t n, double deadline);
int rpc_send_i32(tl_ctx *ctx, int fd, int32_t v, double deadline);
int rpc_recv_i32(tl_ctx *ctx, int fd, int32_t *v, double deadline);
/* A string as int32 length and bytes (tracker frames, keys); received: at most max bytes,
** malloc'd and NUL-terminated. */
int rpc_send_str(tl_ctx *ctx, int fd, const char *text, double deadline);
int rpc_recv_str(tl_ctx *ctx, int fd, size_t max, char **out, double deadline);
/* A little-endian uint32 at p. */
static inline uint32_t rpc_le32(const void *p) {
  const unsigned char *u = p;
  return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}
/* Connect and exchange the magic (auth: the key to present, NULL or "": none). */
int rpc_tracker_open(tl_ctx *ctx, const char *host, int port, double timeout_s, const char *auth,
                     int *fd_out);
int rpc_tracker_call(tl_ctx *ctx, int fd, const char *req, double timeout_s, json_t **reply);
/* rpc_tracker_call with msg dumped as TVM does (RPC_TRACKER_JSON); msg is consumed. */
int rpc_tracker_call_json(tl_ctx *ctx, int fd, json_t *msg, double timeout_s, json_t **reply);

/* session frames: uint32 header length, header JSON, uint64 blob length, blob */
int rpc_frame_send(tl_ctx *ctx, int fd, const char *header, const void *blob, uint64_t n,
                   double deadline);
int rpc_frame_recv(tl_ctx *ctx, int fd, char **header, void **blob, uint64_t *n, double deadline);
/* A session request: a frame whose header is a JSON object (*req), else TL_E_PARSE. */
int rpc_request_recv(tl_ctx *ctx, int fd, json_t **req, void **blob, uint64_t *n, double deadline);

/* The client's session handshake (formats §4.1, plus the keyed form): RPC_MAGIC, int32 length,
** "client:<match_key>[ -timeout=S]"; or RPC_MAGIC_AUTH, int32 length, key, then the same. */
typedef struct {
  int keyed;                      /* opened with RPC_MAGIC_AUTH */
  char auth[RPC_MAX_AUTH + 1];
  size_t auth_n;
  char key[RPC_MAX_KEY + 1];      /* "client:<match_key>", options cut off */
  double timeout_s;               /* -timeout=S when finite and > 0, else 0 */
} rpc_hello;
/* Parse buf[0..n): the bytes used when complete; 0 when more are needed (*need, when not NULL:
** the length to have before parsing again); -1 when malformed. */
#define RPC_HELLO_MAX (12 + RPC_MAX_AUTH + RPC_MAX_KEY)
long rpc_hello_parse(const unsigned char *buf, size_t n, rpc_hello *h, size_t *need);

/* ---- the tracker's state, apart from its sockets (tracker.c) ------------------------------
** Input goes in by connection, replies come out of each connection's output queue; the
** poll() loop of tl_rpc_tracker_run moves bytes between these and the sockets, and the fuzz
** target drives them directly. */
typedef struct {
  const char *auth_key;      /* NULL or "": none */
  const char *stop_key;      /* NULL or "": a random one */
  double handshake_s;        /* magic (and key) complete within this */
  double idle_s;             /* a connection that is neither a registered server nor waiting
                                for a device, silent this long, is closed (<= 0: never) */
  int max_conns;             /* connections in all */
  int max_per_peer;          /* connections per peer address */
  int max_entries;           /* PUT entries + waiting requests per connection */
  size_t max_out;            /* unsent replies per connection before it is dropped */
  int verbose;
} rpc_tracker_opts;
typedef struct rpc_tracker rpc_tracker;
void rpc_tracker_opts_default(rpc_tracker_opts *o);
rpc_tracker *rpc_tracker_new(const rpc_tracker_opts *o);
void rpc_tracker_free(rpc_tracker *t);
/* A new connection (fd -1 for none) from peer; its id, or 0 when no slot can be freed. */
int rpc_tracker_conn_open(rpc_tracker *t, int fd, const char *peer, double now);
/* Bytes from connection id; -1 when it must close. */
int rpc_tracker_conn_input(rpc_tracker *t, int id, const void *p, size_t n, double now);
/* Its queued output (NULL when none); rpc_tracker_conn_sent drops n bytes of it. */
const char *rpc_tracker_conn_output(rpc_tracker *t, int id, size_t *n);
void rpc_tracker_conn_sent(rpc_tracker *t, int id, size_t n);
void rpc_tracker_conn_close(rpc_tracker *t, int id);
/* Connections past their handshake or idle limits, or that must close, are closed. */
void rpc_tracker_expire(rpc_tracker *t, double now);
int rpc_tracker_stopped(const rpc_tracker *t);
/* The SUMMARY reply (malloc'd text); at most RPC_TRACKER_MAX_FRAME bytes. */
char *rpc_tracker_summary_text(rpc_tracker *t);

#endif
