/*
** fuzz_session.c -- libFuzzer target: what an RPC server reads from a client
** (rpc/net.c): the session handshake (rpc_hello_parse, the plain and the keyed
** form), then session requests (rpc_request_recv: uint32 header length, a JSON
** object, uint64 payload length, payload) read from a socket until the bytes
** run out or one is malformed, exactly as a session child reads them.
**
** Input: the handshake bytes, then the frames. Checked: the parser never
** claims more bytes than it has, asks for more only beyond what it has, and
** every request it returns is a JSON object with the payload length it said.
*/
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc.h"

static tl_ctx *ctx;

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (!ctx) ctx = tl_ctx_new();
  rpc_hello h;
  size_t need = 0;
  long used = rpc_hello_parse(d, n, &h, &need);
  if (used > (long)n) abort();
  if (used == 0 && need <= n) abort();
  if (used > 0 && (strlen(h.key) > RPC_MAX_KEY || h.auth_n > RPC_MAX_AUTH || h.timeout_s < 0)) abort();
  size_t off = used > 0 ? (size_t)used : 0;
  /* the rest through a socket, as the session child reads it */
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  int big = 1 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
  setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  size_t left = n - off;
  const uint8_t *p = d + off;
  while (left) {   /* inputs are small (-max_len): they fit the socket's buffer */
    ssize_t w = write(sv[0], p, left);
    if (w <= 0) break;
    p += w;
    left -= (size_t)w;
  }
  shutdown(sv[0], SHUT_WR);
  for (;;) {
    json_t *req = NULL;
    void *blob = NULL;
    uint64_t bn = 0;
    tl_clearerr(ctx);
    int rc = rpc_request_recv(ctx, sv[1], &req, &blob, &bn, tl_now() + 5);
    if (rc) {
      if (req || blob) abort();
      break;
    }
    if (!json_is_object(req) || bn > RPC_SESSION_MAX_BLOB || (bn && !blob)) abort();
    json_decref(req);
    free(blob);
  }
  close(sv[0]);
  close(sv[1]);
  return 0;
}
