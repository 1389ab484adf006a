/*
** net.c -- sockets for the device farm: listen, connect with a deadline,
** read and write exactly n bytes with a deadline, the tracker's framing
** (int32 little-endian length + JSON text, formats §3.2) and the session's
** frames (docs/rpc.md): uint32 LE header length (1..64 KiB), header (a JSON
** object), uint64 LE payload length (<= 512 MiB), payload bytes. The tracker
** (tracker.c), the server (server.c) and the client (client.c) all talk
** through these.
*/
#define _GNU_SOURCE
#include "rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void rpc_keepalive(int fd) {
  int one = 1, idle = 10, intvl = 5, cnt = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int rpc_listen(tl_ctx *ctx, const char *host, int port, int port_end, int *fd_out, int *port_out) {
  if (port < 0 || port > 65535)
    return tl_err(ctx, TL_E_ARG, "port %d out of range (expected 1..65535, or 0 for any)", port);
  if (port_end <= port) port_end = port + 1;
  if (port_end > 65536)
    return tl_err(ctx, TL_E_ARG, "port range end %d out of range (expected at most 65536)", port_end);
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  const char *h = host && *host ? host : "127.0.0.1";
  int e = getaddrinfo(h, NULL, &hints, &ai);
  if (e || !ai) return tl_err(ctx, TL_E_IO, "cannot resolve '%s': %s", h, gai_strerror(e));
  struct sockaddr_in sa;
  memcpy(&sa, ai->ai_addr, sizeof sa);
  freeaddrinfo(ai);
  int last = 0;
  for (int p = port; p < port_end; p++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return tl_err(ctx, TL_E_IO, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sa.sin_port = htons((uint16_t)p);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 64) == 0) {
      if (p == 0) {
        socklen_t len = sizeof sa;
        getsockname(fd, (struct sockaddr *)&sa, &len);
        p = ntohs(sa.sin_port);
      }
      *fd_out = fd;
      *port_out = p;
      return TL_OK;
    }
    last = errno;
    close(fd);
  }
  return tl_err(ctx, TL_E_IO, "cannot bind %s to a port in [%d, %d): %s", h, port, port_end,
                strerror(last));
}

int rpc_connect(tl_ctx *ctx, const char *host, int port, double timeout_s, int *fd_out) {
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  int e = getaddrinfo(host, ps, &hints, &ai);
  if (e || !ai) return tl_err(ctx, TL_E_IO, "cannot resolve '%s': %s", host, gai_strerror(e));
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    freeaddrinfo(ai);
    return tl_err(ctx, TL_E_IO, "socket: %s", strerror(errno));
  }
  int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (rc != 0 && errno == EINPROGRESS) {
    struct pollfd pf = {fd, POLLOUT, 0};
    int ms = timeout_s > 0 ? (int)(timeout_s * 1000) : -1;
    int pr;
    do pr = poll(&pf, 1, ms); while (pr < 0 && errno == EINTR);
    if (pr == 0) {
      close(fd);
      return tl_err(ctx, TL_E_TIMEOUT, "connect to %s:%d timed out", host, port);
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) {
      close(fd);
      return tl_err(ctx, TL_E_IO, "cannot connect to %s:%d: %s", host, port, strerror(err));
    }
  } else if (rc != 0) {
    int err = errno;
    close(fd);
    return tl_err(ctx, TL_E_IO, "cannot connect to %s:%d: %s", host, port, strerror(err));
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  rpc_keepalive(fd);
  *fd_out = fd;
  return TL_OK;
}

void rpc_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static int wait_fd(int fd, short ev, double deadline) {
  if (deadline <= 0) return 1;
  for (;;) {
    double left = deadline - tl_now();
    if (left <= 0) return 0;
    struct pollfd pf = {fd, ev, 0};
    int pr = poll(&pf, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    return pr > 0 ? 1 : pr;
  }
}

int rpc_send_all(tl_ctx *ctx, int fd, const void *p, size_t n, double deadline) {
  const char *s = p;
  while (n) {
    if (!wait_fd(fd, POLLOUT, deadline)) return tl_err(ctx, TL_E_TIMEOUT, "send timed out");
    ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return tl_err(ctx, TL_E_IO, "connection lost while sending: %s", strerror(errno));
    s += w;
    n -= (size_t)w;
  }
  return TL_OK;
}

int rpc_recv_all(tl_ctx *ctx, int fd, void *p, size_t n, double deadline) {
  char *s = p;
  while (n) {
    int w = wait_fd(fd, POLLIN, deadline);
    if (w == 0) return tl_err(ctx, TL_E_TIMEOUT, "receive timed out");
    ssize_t r = recv(fd, s, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r == 0) return tl_err(ctx, TL_E_IO, "connection closed by the peer");
    if (r < 0) return tl_err(ctx, TL_E_IO, "connection lost while receiving: %s", strerror(errno));
    s += r;
    n -= (size_t)r;
  }
  return TL_OK;
}

int rpc_send_i32(tl_ctx *ctx, int fd, int32_t v, double deadline) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  return rpc_send_all(ctx, fd, b, 4, deadline);
}

int rpc_recv_i32(tl_ctx *ctx, int fd, int32_t *v, double deadline) {
  unsigned char b[4];
  int rc = rpc_recv_all(ctx, fd, b, 4, deadline);
  if (rc) return rc;
  *v = (int32_t)rpc_le32(b);
  return TL_OK;
}

int rpc_send_str(tl_ctx *ctx, int fd, const char *text, double deadline) {
  size_t n = strlen(text);
  int rc = rpc_send_i32(ctx, fd, (int32_t)n, deadline);
  if (!rc) rc = rpc_send_all(ctx, fd, text, n, deadline);
  return rc;
}

int rpc_recv_str(tl_ctx *ctx, int fd, size_t max, char **out, double deadline) {
  int32_t n;
  *out = NULL;
  int rc = rpc_recv_i32(ctx, fd, &n, deadline);
  if (rc) return rc;
  if (n < 0 || (size_t)n > max)
    return tl_err(ctx, TL_E_PARSE, "frame of %d bytes (limit %zu)", (int)n, max);
  char *s = tl_malloc((size_t)n + 1);
  rc = rpc_recv_all(ctx, fd, s, (size_t)n, deadline);
  if (rc) {
    free(s);
    return rc;
  }
  s[n] = 0;
  *out = s;
  return TL_OK;
}

/* One tracker exchange on a connected, handshaken socket: send req, parse the reply. */
int rpc_tracker_call(tl_ctx *ctx, int fd, const char *req, double timeout_s, json_t **reply) {
  double dl = timeout_s > 0 ? tl_now() + timeout_s : 0;
  int rc = rpc_send_str(ctx, fd, req, dl);
  char *text = NULL;
  if (!rc) rc = rpc_recv_str(ctx, fd, RPC_TRACKER_MAX_FRAME, &text, dl);
  if (rc) return rc;
  json_error_t je;
  *reply = json_loads(text, JSON_DECODE_ANY, &je);
  free(text);
  if (!*reply) return tl_err(ctx, TL_E_PARSE, "tracker sent malformed JSON: %s", je.text);
  return TL_OK;
}

/* Sends msg (consumed) to the tracker on fd; *reply is its answer (the caller decrefs it). */
int rpc_tracker_call_json(tl_ctx *ctx, int fd, json_t *msg, double timeout_s, json_t **reply) {
  char *req = json_dumps(msg, RPC_TRACKER_JSON);
  json_decref(msg);
  int rc = rpc_tracker_call(ctx, fd, req, timeout_s, reply);
  free(req);
  return rc;
}

/* ---- the shared secret ------------------------------------------------------------- */

int rpc_auth_equal(const char *given, size_t gn, const char *want, size_t wn) {
  volatile unsigned char d = (unsigned char)(gn != wn);
  for (size_t i = 0; i < wn; i++) d |= (unsigned char)(want[i] ^ (i < gn ? given[i] : 0));
  return d == 0;
}

const char *rpc_auth_reply_text(int32_t code) {
  switch (code) {
  case RPC_AUTH_REQUIRED:
    return "requires an auth key (give --auth-key/--auth-key-file, the auth_key option or "
           "TUNELUA_RPC_AUTH_KEY)";
  case RPC_AUTH_REFUSED: return "refused the auth key (not the farm's key)";
  case RPC_AUTH_NONE:
    return "has no auth key, but one was given (start it with the same --auth-key, or unset "
           "the client's key)";
  default: return NULL;
  }
}

int rpc_tracker_open(tl_ctx *ctx, const char *host, int port, double timeout_s, const char *auth,
                     int *fd_out) {
  int fd;
  int rc = rpc_connect(ctx, host, port, timeout_s, &fd);
  if (rc) return tl_err_prefix(ctx, "RPC tracker: ");
  double dl = tl_now() + (timeout_s > 0 ? timeout_s : 10);
  int32_t m = 0;
  int keyed = auth && *auth;
  rc = rpc_send_i32(ctx, fd, keyed ? RPC_TRACKER_MAGIC_AUTH : RPC_TRACKER_MAGIC, dl);
  if (!rc && keyed) rc = rpc_send_str(ctx, fd, auth, dl);
  if (!rc) rc = rpc_recv_i32(ctx, fd, &m, dl);
  if (rc && keyed && rc != TL_E_TIMEOUT)
    rc = tl_err(ctx, TL_E_IO, "closed the connection at the keyed handshake (a tracker without "
                "auth keys?): %s", tl_errmsg(ctx));
  else if (!rc && rpc_auth_reply_text(m))
    rc = tl_err(ctx, TL_E_IO, "%s", rpc_auth_reply_text(m));
  else if (!rc && m != RPC_TRACKER_MAGIC)
    rc = tl_err(ctx, TL_E_IO, "%s:%d is not an RPC tracker (magic %d)", host, port, (int)m);
  if (rc) {
    close(fd);
    return tl_err_prefix(ctx, "tracker %s:%d: ", host, port);
  }
  *fd_out = fd;
  return TL_OK;
}

/* ---- the session handshake, server side ------------------------------------------------- */

#define NEED(k) do { if (n < (k)) { if (need) *need = (k); return 0; } } while (0)
/* The string at buf + off (int32 length, at most max bytes) into dst, NUL-terminated, its
** length in *len: the offset past it, 0 when more bytes are needed, -1 when over max. */
static long lstr_parse(const unsigned char *buf, size_t n, size_t off, uint32_t max, char *dst,
                       size_t *len, size_t *need) {
  NEED(off + 4);
  uint32_t sn = rpc_le32(buf + off);
  if (sn > max) return -1;
  off += 4;
  NEED(off + sn);
  memcpy(dst, buf + off, sn);
  dst[sn] = 0;
  if (len) *len = sn;
  return (long)(off + sn);
}

long rpc_hello_parse(const unsigned char *buf, size_t n, rpc_hello *h, size_t *need) {
  memset(h, 0, sizeof *h);
  NEED(4);
  uint32_t m = rpc_le32(buf);
  if (m != RPC_MAGIC && m != RPC_MAGIC_AUTH) return -1;
  long off = 4;
  if (m == RPC_MAGIC_AUTH) {
    h->keyed = 1;
    off = lstr_parse(buf, n, (size_t)off, RPC_MAX_AUTH, h->auth, &h->auth_n, need);
    if (off <= 0) return off;
  }
  off = lstr_parse(buf, n, (size_t)off, RPC_MAX_KEY, h->key, NULL, need);
  if (off <= 0) return off;
  char *sp = strchr(h->key, ' ');
  if (sp) {
    *sp = 0;
    for (char *t = sp + 1; t && *t;) {
      while (*t == ' ') t++;
      if (!strncmp(t, "-timeout=", 9)) {
        char *end;
        double v = strtod(t + 9, &end);
        if (end != t + 9 && (*end == ' ' || *end == 0) && v > 0 && v < 1e9) h->timeout_s = v;
      }
      t = strchr(t, ' ');
    }
  }
  return off;
}
#undef NEED

/* ---- session frames (docs/rpc.md) -------------------------------------------------- */

int rpc_frame_send(tl_ctx *ctx, int fd, const char *header, const void *blob, uint64_t n,
                   double deadline) {
  size_t hl = strlen(header);
  if (hl == 0 || hl > RPC_SESSION_MAX_HEADER)
    return tl_err(ctx, TL_E_ARG, "session frame header of %zu bytes (limit %zu)", hl,
                  (size_t)RPC_SESSION_MAX_HEADER);
  if (n > RPC_SESSION_MAX_BLOB)
    return tl_err(ctx, TL_E_ARG, "session payload of %llu bytes (limit %llu)",
                  (unsigned long long)n, (unsigned long long)RPC_SESSION_MAX_BLOB);
  unsigned char h[4], b[8];
  for (int i = 0; i < 4; i++) h[i] = (unsigned char)(hl >> (8 * i));
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
  int rc = rpc_send_all(ctx, fd, h, 4, deadline);
  if (!rc) rc = rpc_send_all(ctx, fd, header, hl, deadline);
  if (!rc) rc = rpc_send_all(ctx, fd, b, 8, deadline);
  if (!rc && n) rc = rpc_send_all(ctx, fd, blob, (size_t)n, deadline);
  return rc;
}

int rpc_frame_recv(tl_ctx *ctx, int fd, char **header, void **blob, uint64_t *n, double deadline) {
  *header = NULL;
  *blob = NULL;
  *n = 0;
  unsigned char h[4], b[8];
  int rc = rpc_recv_all(ctx, fd, h, 4, deadline);
  if (rc) return rc;
  uint32_t hl = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
  if (hl == 0 || hl > RPC_SESSION_MAX_HEADER)
    return tl_err(ctx, TL_E_PARSE, "malformed frame: header of %u bytes (limit %zu)", hl,
                  (size_t)RPC_SESSION_MAX_HEADER);
  char *hs = tl_malloc(hl + 1);
  rc = rpc_recv_all(ctx, fd, hs, hl, deadline);
  if (!rc) rc = rpc_recv_all(ctx, fd, b, 8, deadline);
  if (rc) {
    free(hs);
    return rc;
  }
  hs[hl] = 0;
  uint64_t bl = 0;
  for (int i = 0; i < 8; i++) bl |= (uint64_t)b[i] << (8 * i);
  if (bl > RPC_SESSION_MAX_BLOB) {
    free(hs);
    return tl_err(ctx, TL_E_PARSE, "malformed frame: payload of %llu bytes (limit %llu)",
                  (unsigned long long)bl, (unsigned long long)RPC_SESSION_MAX_BLOB);
  }
  /* the payload grows as its bytes arrive: a peer that only claims 512 MiB gets no 512 MiB */
  char *bs = NULL;
  uint64_t got = 0, cap = 0;
  while (got < bl) {
    if (got == cap) {
      cap = cap ? cap * 2 : ((uint64_t)1 << 20);
      if (cap > bl) cap = bl;
      char *nb = realloc(bs, (size_t)cap);
      if (!nb) {
        free(hs);
        free(bs);
        return tl_err(ctx, TL_E_NOMEM, "cannot allocate a payload of %llu bytes", (unsigned long long)bl);
      }
      bs = nb;
    }
    rc = rpc_recv_all(ctx, fd, bs + got, (size_t)(cap - got), deadline);
    if (rc) {
      free(hs);
      free(bs);
      return rc;
    }
    got = cap;
  }
  *header = hs;
  *blob = bs;
  *n = bl;
  return TL_OK;
}

int rpc_request_recv(tl_ctx *ctx, int fd, json_t **req, void **blob, uint64_t *n, double deadline) {
  char *h = NULL;
  *req = NULL;
  int rc = rpc_frame_recv(ctx, fd, &h, blob, n, deadline);
  if (rc) return rc;
  json_t *j = json_loads(h, 0, NULL);
  free(h);
  if (!j || !json_is_object(j)) {
    json_decref(j);
    free(*blob);
    *blob = NULL;
    *n = 0;
    return tl_err(ctx, TL_E_PARSE, "malformed frame: the header is not a JSON object");
  }
  *req = j;
  return TL_OK;
}
