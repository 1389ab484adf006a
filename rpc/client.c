/*
** client.c -- the client side of the device farm: sessions with an RPC server
** (tl_rpc_connect directly, or tl_rpc_request through the tracker's REQUEST),
** requests and uploads over the session protocol (docs/rpc.md; the frames are
** net.c's), the tracker's SUMMARY and raw tracker messages for `rpc query`, and
** raw bytes to a server for tests and fuzzing. The server side is server.c;
** RPCRunner's batch (batch.c) is built on this API.
*/
#define _GNU_SOURCE
#include "rpc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

TL_EXPORT void tl_rpc_free(void *p) { free(p); }

/* The key this process presents to trackers and servers (docs/rpc.md "Security"). */
static char client_auth[RPC_MAX_AUTH + 1];

TL_EXPORT int tl_rpc_set_auth_key(tl_ctx *ctx, const char *key) {
  if (key && strlen(key) > RPC_MAX_AUTH)
    return tl_err(ctx, TL_E_ARG, "rpc: the auth key is over %d bytes", RPC_MAX_AUTH);
  snprintf(client_auth, sizeof client_auth, "%s", key ? key : "");
  return TL_OK;
}

const char *rpc_client_auth_key(void) { return client_auth[0] ? client_auth : NULL; }

struct tl_rpc_sess {
  int fd;
  char key[300];
  char addr[300];
};

TL_EXPORT int tl_rpc_connect(tl_ctx *ctx, const char *host, int port, const char *match_key,
                             double timeout_s, tl_rpc_sess **out) {
  *out = NULL;
  int fd;
  int rc = rpc_connect(ctx, host, port, timeout_s > 0 ? timeout_s : 10, &fd);
  if (rc) return rc;
  double dl = tl_now() + (timeout_s > 0 ? timeout_s : 10);
  char k[RPC_MAX_KEY];
  snprintf(k, sizeof k, "client:%s", match_key ? match_key : "");
  int32_t code = 0, len = 0;
  const char *auth = rpc_client_auth_key();
  rc = rpc_send_i32(ctx, fd, auth ? RPC_MAGIC_AUTH : RPC_MAGIC, dl);
  if (!rc && auth) rc = rpc_send_str(ctx, fd, auth, dl);
  if (!rc) rc = rpc_send_str(ctx, fd, k, dl);
  if (!rc) rc = rpc_recv_i32(ctx, fd, &code, dl);
  if (rc && auth && rc != TL_E_TIMEOUT)
    rc = tl_err(ctx, TL_E_IO, "RPC server %s:%d closed the connection at the keyed handshake (a "
                "server without auth keys?): %s", host, port, tl_errmsg(ctx));
  else if (!rc && rpc_auth_reply_text(code))
    rc = tl_err(ctx, TL_E_IO, "RPC server %s:%d %s", host, port, rpc_auth_reply_text(code));
  else if (!rc && code == RPC_CODE_MISMATCH) rc = tl_err(ctx, TL_E_IO, "%s:%d refused the key '%s'", host, port, k);
  else if (!rc && code != RPC_CODE_SUCCESS) rc = tl_err(ctx, TL_E_IO, "%s:%d is not an RPC server", host, port);
  if (!rc) rc = rpc_recv_i32(ctx, fd, &len, dl);
  if (!rc && (len < 0 || len >= 300)) rc = tl_err(ctx, TL_E_IO, "%s:%d sent a bad key", host, port);
  tl_rpc_sess *s = tl_calloc(1, sizeof *s);
  if (!rc) rc = rpc_recv_all(ctx, fd, s->key, (size_t)len, dl);
  if (rc) {
    free(s);
    close(fd);
    return rc;
  }
  s->fd = fd;
  snprintf(s->addr, sizeof s->addr, "%s:%d", host, port);
  *out = s;
  return TL_OK;
}

TL_EXPORT int tl_rpc_request(tl_ctx *ctx, const char *tracker_host, int tracker_port,
                             const char *key, int priority, double timeout_s, tl_rpc_sess **out) {
  *out = NULL;
  int tfd;
  int rc = rpc_tracker_open(ctx, tracker_host, tracker_port, 10, rpc_client_auth_key(), &tfd);
  if (rc) return rc;
  json_t *r = NULL;
  rc = rpc_tracker_call_json(ctx, tfd, json_pack("[i, s, s, i]", TC_REQUEST, key, "", priority), timeout_s, &r);
  close(tfd);
  if (rc == TL_E_TIMEOUT)
    return tl_err(ctx, TL_E_TIMEOUT, "no free device of key '%s' within %.0f s", key, timeout_s);
  if (rc) return rc;
  json_t *a = json_array_get(r, 1);
  const char *host = json_string_value(json_array_get(a, 0));
  int port = (int)json_integer_value(json_array_get(a, 1));
  const char *mk = json_string_value(json_array_get(a, 2));
  if (json_integer_value(json_array_get(r, 0)) != 0 || !host || !mk) {
    json_decref(r);
    return tl_err(ctx, TL_E_PARSE, "tracker: unexpected answer to REQUEST");
  }
  rc = tl_rpc_connect(ctx, host, port, mk, 10, out);
  json_decref(r);
  return rc;
}

TL_EXPORT const char *tl_rpc_sess_key(const tl_rpc_sess *s) { return s ? s->key : ""; }
TL_EXPORT const char *tl_rpc_sess_addr(const tl_rpc_sess *s) { return s ? s->addr : ""; }

TL_EXPORT void tl_rpc_close(tl_rpc_sess *s) {
  if (!s) return;
  close(s->fd);
  free(s);
}

TL_EXPORT int tl_rpc_call(tl_ctx *ctx, tl_rpc_sess *s, const char *header, const void *blob,
                          uint64_t n, double timeout_s, char **resp, void **resp_blob,
                          uint64_t *resp_n) {
  *resp = NULL;
  if (resp_blob) *resp_blob = NULL;
  if (resp_n) *resp_n = 0;
  if (!s) return tl_err(ctx, TL_E_ARG, "rpc: the session is closed");
  double dl = timeout_s > 0 ? tl_now() + timeout_s : 0;
  int rc = rpc_frame_send(ctx, s->fd, header, blob, n, dl);
  void *b = NULL;
  uint64_t bn = 0;
  if (!rc) rc = rpc_frame_recv(ctx, s->fd, resp, &b, &bn, dl);
  if (rc) return tl_err_prefix(ctx, "rpc session %s: ", s->addr);
  if (resp_blob) *resp_blob = b;
  else free(b);
  if (resp_n) *resp_n = bn;
  return TL_OK;
}

TL_EXPORT int tl_rpc_upload(tl_ctx *ctx, tl_rpc_sess *s, const char *local_path, const char *name,
                            double timeout_s) {
  FILE *f = fopen(local_path, "rb");
  if (!f) return tl_err(ctx, TL_E_IO, "upload: cannot open '%s': %s", local_path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (sz < 0 || (uint64_t)sz > RPC_SESSION_MAX_BLOB) {
    fclose(f);
    return tl_err(ctx, TL_E_IO, "upload: '%s' is too large", local_path);
  }
  unsigned char *raw = tl_malloc((size_t)sz + 1);
  size_t got = fread(raw, 1, (size_t)sz, f);
  fclose(f);
  if (got != (size_t)sz) {
    free(raw);
    return tl_err(ctx, TL_E_IO, "upload: cannot read '%s'", local_path);
  }
  uLongf zl = compressBound((uLong)sz);
  unsigned char *z = tl_malloc(zl);
  compress2(z, &zl, raw, (uLong)sz, 6);
  free(raw);
  json_t *h = json_pack("{s:s, s:s, s:I}", "op", "upload", "name", name, "size", (json_int_t)sz);
  char *hs = json_dumps(h, JSON_COMPACT);
  json_decref(h);
  char *resp = NULL;
  int rc = tl_rpc_call(ctx, s, hs, z, zl, timeout_s, &resp, NULL, NULL);
  free(hs);
  free(z);
  if (!rc) {
    json_t *r = json_loads(resp, 0, NULL);
    if (!json_is_true(json_object_get(r, "ok")))
      rc = tl_err(ctx, TL_E_IO, "upload: %s", json_string_value(json_object_get(r, "error"))
                  ? json_string_value(json_object_get(r, "error")) : "refused");
    json_decref(r);
  }
  free(resp);
  return rc;
}

/* One message to the tracker at host:port on a connection of its own. */
static int tracker_once(tl_ctx *ctx, const char *host, int port, const char *req,
                        double timeout_s, json_t **reply) {
  int fd;
  int rc = rpc_tracker_open(ctx, host, port, timeout_s, rpc_client_auth_key(), &fd);
  if (rc) return rc;
  rc = rpc_tracker_call(ctx, fd, req, timeout_s, reply);
  close(fd);
  return rc;
}

TL_EXPORT int tl_rpc_tracker_summary(tl_ctx *ctx, const char *host, int port, double timeout_s,
                                     char **json_out) {
  *json_out = NULL;
  json_t *r = NULL;
  int rc = tracker_once(ctx, host, port, "[6]", timeout_s, &r);
  if (rc) return rc;
  if (json_integer_value(json_array_get(r, 0)) != 0) {
    json_decref(r);
    return tl_err(ctx, TL_E_PARSE, "tracker: SUMMARY failed");
  }
  *json_out = json_dumps(json_array_get(r, 1), JSON_COMPACT);
  json_decref(r);
  return TL_OK;
}

TL_EXPORT int tl_rpc_tracker_raw(tl_ctx *ctx, const char *host, int port, const char *req,
                                 double timeout_s, char **json_out) {
  *json_out = NULL;
  json_t *r = NULL;
  int rc = tracker_once(ctx, host, port, req, timeout_s, &r);
  if (rc) return rc;
  *json_out = json_dumps(r, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(r);
  return TL_OK;
}

/* ---- raw bytes, for tests and fuzzing ------------------------------------------------------ */

static int read_until_close(tl_ctx *ctx, int fd, double timeout_s, char **out, size_t *outn) {
  tl_buf b = {0};
  double dl = tl_now() + timeout_s;
  char tmp[4096];
  for (;;) {
    double left = dl - tl_now();
    if (left <= 0) break;
    struct pollfd pf = {fd, POLLIN, 0};
    int pr = poll(&pf, 1, (int)(left * 1000) + 1);
    if (pr <= 0) break;
    ssize_t r = recv(fd, tmp, sizeof tmp, 0);
    if (r <= 0) break;
    if (b.n < (1 << 20)) tl_buf_putn(&b, tmp, (size_t)r);
  }
  *outn = b.n;
  *out = b.s ? b.s : tl_strdup("");
  (void)ctx;
  return TL_OK;
}

TL_EXPORT int tl_rpc_raw_exchange(tl_ctx *ctx, const char *host, int port, const void *data,
                                  size_t n, double timeout_s, char **out, size_t *outn) {
  *out = NULL;
  *outn = 0;
  int fd;
  int rc = rpc_connect(ctx, host, port, 5, &fd);
  if (rc) return rc;
  rpc_send_all(ctx, fd, data, n, tl_now() + 5);   /* the peer may close early */
  tl_clearerr(ctx);
  shutdown(fd, SHUT_WR);
  rc = read_until_close(ctx, fd, timeout_s, out, outn);
  close(fd);
  return rc;
}

TL_EXPORT int tl_rpc_send_raw(tl_ctx *ctx, tl_rpc_sess *s, const void *data, size_t n,
                              double timeout_s, char **out, size_t *outn) {
  *out = NULL;
  *outn = 0;
  if (!s) return tl_err(ctx, TL_E_ARG, "rpc: the session is closed");
  rpc_send_all(ctx, s->fd, data, n, tl_now() + 5);
  tl_clearerr(ctx);
  return read_until_close(ctx, s->fd, timeout_s, out, outn);
}
