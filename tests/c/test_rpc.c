/*
** Unit tests for the device farm's parts that need no socket (rpc/): the auth key
** compare, the session handshake parser, and the tracker's state driven through
** rpc_tracker_conn_input/output: frames of exactly 1 MiB, ports in PUT, PUT
** entries bound to their connection, the keyed handshake, a peer that never
** reads, full connection tables, expired handshakes and idle connections,
** empty queues and a SUMMARY of 20,000 keys. The sockets are tested end to end
** in tests/e2e/test_rpc*.sh.
*/
#define _GNU_SOURCE
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../rpc/rpc.h"
#include "tl_test.h"

TL_TEST(rpc_auth_equal) {
  CHECK(rpc_auth_equal("secret", 6, "secret", 6));
  CHECK(!rpc_auth_equal("secreT", 6, "secret", 6));
  CHECK(!rpc_auth_equal("Secret", 6, "secret", 6));
  CHECK(!rpc_auth_equal("secre", 5, "secret", 6));
  CHECK(!rpc_auth_equal("secret!", 7, "secret", 6));
  CHECK(!rpc_auth_equal("", 0, "secret", 6));
  CHECK(rpc_auth_equal("", 0, "", 0));
  CHECK(!rpc_auth_equal("x", 1, "", 0));
}

static size_t put_i32(unsigned char *b, uint32_t v) {
  for (int i = 0; i < 4; i++) b[i] = (unsigned char)(v >> (8 * i));
  return 4;
}

static size_t hello_bytes(unsigned char *b, const char *auth, const char *key) {
  size_t n = 0;
  n += put_i32(b + n, auth ? RPC_MAGIC_AUTH : RPC_MAGIC);
  if (auth) {
    n += put_i32(b + n, (uint32_t)strlen(auth));
    memcpy(b + n, auth, strlen(auth));
    n += strlen(auth);
  }
  n += put_i32(b + n, (uint32_t)strlen(key));
  memcpy(b + n, key, strlen(key));
  return n + strlen(key);
}

TL_TEST(rpc_hello_parse) {
  unsigned char b[256];
  rpc_hello h;
  size_t need = 0;
  size_t n = hello_bytes(b, NULL, "client:k:1.2 -timeout=30");
  CHECK_EQ_INT(rpc_hello_parse(b, n, &h, NULL), (long)n);
  CHECK_STREQ(h.key, "client:k:1.2");
  CHECK(!h.keyed);
  CHECK_NEAR(h.timeout_s, 30, 0);
  for (size_t k = 0; k < n; k++) {   /* every prefix asks for more, never past the end */
    CHECK_EQ_INT(rpc_hello_parse(b, k, &h, &need), 0);
    CHECK(need > k && need <= n);
  }
  /* a timeout that is not a finite positive number is no timeout: the server's applies */
  const char *bad[] = {"client:k -timeout=inf", "client:k -timeout=nan", "client:k -timeout=-5",
                       "client:k -timeout=", "client:k -timeout=1e300", "client:k -timeout=5x"};
  for (int i = 0; i < 6; i++) {
    n = hello_bytes(b, NULL, bad[i]);
    CHECK_EQ_INT(rpc_hello_parse(b, n, &h, NULL), (long)n);
    CHECK_MSG(h.timeout_s == 0, "%s gave %g", bad[i], h.timeout_s);
  }
  n = hello_bytes(b, "sesame", "client:k");
  CHECK_EQ_INT(rpc_hello_parse(b, n, &h, NULL), (long)n);
  CHECK(h.keyed && h.auth_n == 6 && !strcmp(h.auth, "sesame") && !strcmp(h.key, "client:k"));
  put_i32(b, 12345);
  CHECK_EQ_INT(rpc_hello_parse(b, 8, &h, NULL), -1);
  n = 0;
  n += put_i32(b, RPC_MAGIC);
  n += put_i32(b + n, 0x7fffffff);   /* a 2 GiB key */
  CHECK_EQ_INT(rpc_hello_parse(b, n, &h, NULL), -1);
}

/* ---- the tracker's state ------------------------------------------------------------- */

typedef struct {
  char *s;
  size_t n;
} bytes;

static void add(bytes *b, const void *p, size_t n) {
  b->s = realloc(b->s, b->n + n + 1);
  memcpy(b->s + b->n, p, n);
  b->n += n;
}
static void add_i32(bytes *b, uint32_t v) {
  unsigned char x[4];
  put_i32(x, v);
  add(b, x, 4);
}
static void add_frame(bytes *b, const char *text) {
  add_i32(b, (uint32_t)strlen(text));
  add(b, text, strlen(text));
}

/* Feed b to connection id and return what it answered (and drain it). */
static int feed(rpc_tracker *t, int id, bytes *b, char *out, size_t outn, size_t *got) {
  int rc = rpc_tracker_conn_input(t, id, b->s, b->n, 1.0);
  size_t n = 0;
  const char *o = rpc_tracker_conn_output(t, id, &n);
  if (got) *got = n;
  if (out) {
    size_t k = n < outn - 1 ? n : outn - 1;
    if (o) memcpy(out, o, k);
    out[k] = 0;
  }
  rpc_tracker_conn_sent(t, id, n);
  free(b->s);
  b->s = NULL;
  b->n = 0;
  return rc;
}

static json_t *summary(rpc_tracker *t) {
  char *s = rpc_tracker_summary_text(t);
  json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
  free(s);
  return json_array_get(j, 1) ? j : (json_decref(j), NULL);
}

static int free_of(rpc_tracker *t, const char *key) {
  json_t *j = summary(t);
  json_t *q = json_object_get(json_object_get(json_array_get(j, 1), "queue_info"), key);
  int v = q ? (int)json_integer_value(json_object_get(q, "free")) : -1;
  json_decref(j);
  return v;
}

static rpc_tracker *tracker(const char *auth) {
  rpc_tracker_opts o;
  rpc_tracker_opts_default(&o);
  o.auth_key = auth;
  o.stop_key = "stop";
  return rpc_tracker_new(&o);
}

TL_TEST(rpc_tracker_frame_of_1mib) {
  rpc_tracker *t = tracker(NULL);
  int id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
  bytes b = {0};
  add_i32(&b, RPC_TRACKER_MAGIC);
  /* a PING padded with spaces to exactly 1 MiB: allowed, as docs/rpc.md says */
  size_t n = RPC_TRACKER_MAX_FRAME;
  char *big = malloc(n + 1);
  memset(big, ' ', n);
  memcpy(big, "[1]", 3);
  big[n] = 0;
  add_frame(&b, big);
  char out[64];
  size_t got = 0;
  CHECK_EQ_INT(feed(t, id, &b, out, sizeof out, &got), 0);
  CHECK_EQ_INT(got, 9);   /* magic, then the frame "0" */
  CHECK(out[8] == '0');
  /* one byte more: the connection closes */
  big = realloc(big, n + 2);
  memset(big, ' ', n + 1);
  memcpy(big, "[1]", 3);
  big[n + 1] = 0;
  add_frame(&b, big);
  CHECK_EQ_INT(feed(t, id, &b, NULL, 0, NULL), -1);
  free(big);
  rpc_tracker_free(t);
}

TL_TEST(rpc_tracker_put_port_and_owner) {
  rpc_tracker *t = tracker(NULL);
  /* a port that is not a number is refused (it was taken as port 0) */
  const char *bad[] = {"[3, \"k\", [\"abc\", \"k:1\"], null]", "[3, \"k\", [0, \"k:1\"], null]",
                       "[3, \"k\", [65536, \"k:1\"], null]", "[3, \"k\", [\"12x\", \"k:1\"], null]",
                       "[3, \"k\", [-1, \"k:1\"], null]"};
  for (int i = 0; i < 5; i++) {
    int id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
    bytes b = {0};
    add_i32(&b, RPC_TRACKER_MAGIC);
    add_frame(&b, bad[i]);
    CHECK_MSG(feed(t, id, &b, NULL, 0, NULL) == -1, "%s was accepted", bad[i]);
    rpc_tracker_conn_close(t, id);
  }
  /* a port as a string of digits (TVM's C++ server sends strings) is taken */
  int id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
  bytes b = {0};
  add_i32(&b, RPC_TRACKER_MAGIC);
  add_frame(&b, "[3, \"k\", [\"9090\", \"k:1\"], null]");
  CHECK_EQ_INT(feed(t, id, &b, NULL, 0, NULL), 0);
  CHECK_EQ_INT(free_of(t, "k"), 1);
  /* 40 PUTs from a connection that never registered: gone with it */
  for (int i = 0; i < 40; i++) {
    char m[64];
    snprintf(m, sizeof m, "[3, \"k\", [9090, \"k:fake%d\"], null]", i);
    add_frame(&b, m);
  }
  CHECK_EQ_INT(feed(t, id, &b, NULL, 0, NULL), 0);
  CHECK_EQ_INT(free_of(t, "k"), 41);
  rpc_tracker_conn_close(t, id);
  CHECK_EQ_INT(free_of(t, "k"), 0);
  rpc_tracker_free(t);
}

TL_TEST(rpc_tracker_auth) {
  rpc_tracker *t = tracker("sesame");
  char out[64];
  size_t got;
  /* no key: RPC_AUTH_REQUIRED and nothing else is read */
  int id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
  bytes b = {0};
  add_i32(&b, RPC_TRACKER_MAGIC);
  add_frame(&b, "[6]");
  CHECK_EQ_INT(feed(t, id, &b, out, sizeof out, &got), 0);
  CHECK_EQ_INT(got, 4);
  unsigned char want[4];
  put_i32(want, RPC_AUTH_REQUIRED);
  CHECK(!memcmp(out, want, 4));
  /* a wrong key, then the right one */
  const char *keys[] = {"sesamE", "sesam", "sesame"};
  int32_t codes[] = {RPC_AUTH_REFUSED, RPC_AUTH_REFUSED, RPC_TRACKER_MAGIC};
  for (int i = 0; i < 3; i++) {
    id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
    add_i32(&b, RPC_TRACKER_MAGIC_AUTH);
    add_i32(&b, (uint32_t)strlen(keys[i]));
    add(&b, keys[i], strlen(keys[i]));
    add_frame(&b, "[1]");
    CHECK_EQ_INT(feed(t, id, &b, out, sizeof out, &got), 0);
    put_i32(want, (uint32_t)codes[i]);
    CHECK(!memcmp(out, want, 4));
    CHECK_EQ_INT(got, i < 2 ? 4 : 9);   /* only the right key gets the PING answered */
  }
  rpc_tracker_free(t);
  /* a tracker without a key answers a keyed client RPC_AUTH_NONE */
  t = tracker(NULL);
  id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
  add_i32(&b, RPC_TRACKER_MAGIC_AUTH);
  add_i32(&b, 3);
  add(&b, "abc", 3);
  CHECK_EQ_INT(feed(t, id, &b, out, sizeof out, &got), 0);
  put_i32(want, RPC_AUTH_NONE);
  CHECK(got == 4 && !memcmp(out, want, 4));
  rpc_tracker_free(t);
}

TL_TEST(rpc_tracker_limits) {
  rpc_tracker_opts o;
  rpc_tracker_opts_default(&o);
  o.max_conns = 8;
  o.max_per_peer = 4;
  o.max_out = 4096;
  o.idle_s = 60;
  rpc_tracker *t = rpc_tracker_new(&o);
  /* a peer at its cap: its oldest idle connection makes room, another peer is untouched */
  int other = rpc_tracker_conn_open(t, -1, "10.0.0.2", 0);
  int ids[4];
  for (int i = 0; i < 4; i++) ids[i] = rpc_tracker_conn_open(t, -1, "10.0.0.1", 1 + i);
  int n5 = rpc_tracker_conn_open(t, -1, "10.0.0.1", 10);
  CHECK(n5 > 0);
  bytes b = {0};
  add_i32(&b, RPC_TRACKER_MAGIC);
  CHECK_EQ_INT(feed(t, ids[0], &b, NULL, 0, NULL), -1);   /* ids[0] was closed */
  add_i32(&b, RPC_TRACKER_MAGIC);
  CHECK_EQ_INT(feed(t, other, &b, NULL, 0, NULL), 0);
  /* waiting requests are never evicted: a peer full of them is refused */
  int waiting[4] = {n5, ids[1], ids[2], ids[3]};
  for (int i = 0; i < 4; i++) {
    add_i32(&b, RPC_TRACKER_MAGIC);
    add_frame(&b, "[4, \"nokey\", \"\", 1]");
    CHECK_EQ_INT(feed(t, waiting[i], &b, NULL, 0, NULL), 0);
  }
  CHECK_EQ_INT(rpc_tracker_conn_open(t, -1, "10.0.0.1", 20), 0);
  CHECK(rpc_tracker_conn_open(t, -1, "10.0.0.3", 20) > 0);
  /* a peer that never reads: dropped once its replies pile past max_out */
  for (int i = 0; i < 1000; i++) add_frame(&b, "[7]");
  CHECK_EQ_INT(rpc_tracker_conn_input(t, other, b.s, b.n, 30), -1);
  free(b.s);
  b.s = NULL;
  b.n = 0;
  /* expiry: a handshake that never came (opened at 20) and idle connections; the waiting
  ** requests stay */
  rpc_tracker_expire(t, 20 + RPC_HANDSHAKE_S + 1);
  int live = 0;
  for (int i = 0; i < 4; i++) live += rpc_tracker_conn_input(t, waiting[i], "", 0, 40) == 0;
  CHECK_EQ_INT(live, 4);
  rpc_tracker_free(t);
}

TL_TEST(rpc_tracker_many_keys) {
  rpc_tracker_opts o;
  rpc_tracker_opts_default(&o);
  o.max_entries = 1 << 20;
  rpc_tracker *t = rpc_tracker_new(&o);
  /* 20,000 keys requested by connections that leave: the empty queues are freed beyond a
  ** small number, and SUMMARY stays within one frame */
  bytes b = {0};
  for (int c = 0; c < 20; c++) {
    int id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
    add_i32(&b, RPC_TRACKER_MAGIC);
    for (int i = 0; i < 1000; i++) {
      char m[300];
      snprintf(m, sizeof m, "[4, \"key-%d-%d-%0200d\", \"\", 1]", c, i, 0);
      add_frame(&b, m);
    }
    CHECK_EQ_INT(feed(t, id, &b, NULL, 0, NULL), 0);
    rpc_tracker_conn_close(t, id);
  }
  json_t *j = summary(t);
  CHECK(j != NULL);
  CHECK(json_object_size(json_object_get(json_array_get(j, 1), "queue_info")) <= 256);
  json_decref(j);
  /* 4000 live keys of 250 bytes on one connection: the SUMMARY is cut to one frame and says so */
  int id = rpc_tracker_conn_open(t, -1, "127.0.0.1", 0);
  add_i32(&b, RPC_TRACKER_MAGIC);
  for (int i = 0; i < 4000; i++) {
    char m[300];
    snprintf(m, sizeof m, "[4, \"live-%d-%0240d\", \"\", 1]", i, 0);
    add_frame(&b, m);
  }
  CHECK_EQ_INT(feed(t, id, &b, NULL, 0, NULL), 0);
  char *s = rpc_tracker_summary_text(t);
  CHECK(s && strlen(s) <= RPC_TRACKER_MAX_FRAME);
  j = json_loads(s, JSON_DECODE_ANY, NULL);
  free(s);
  json_t *tr = json_object_get(json_array_get(j, 1), "truncated");
  CHECK(tr && json_integer_value(json_object_get(tr, "queues")) > 0);
  json_decref(j);
  rpc_tracker_free(t);
}
