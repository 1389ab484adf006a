/*
** tracker.c -- the RPC tracker: TVM's tracker wire protocol (formats §3), so
** TVM's own servers and query tool can talk to it.
**
** One thread, one poll() loop over the listening socket and every connection.
** A connection first sends the 4-byte magic (answered with the same), or,
** with an auth key set, the keyed magic and the key (docs/rpc.md "Security");
** then int32-length-prefixed JSON frames of at most 1 MiB, each answered with
** one frame (REQUEST is answered when a server is assigned). Per rpc key: a
** FIFO of free servers (each PUT appends one) and the waiting requests, served
** best priority first, FIFO within a priority. A connection that closes (EOF,
** reset, or a dead peer caught by TCP keepalive) takes its free entries and
** its waiting requests with it, so a vanished server is never handed out. A
** malformed or oversized frame, or an unknown code, closes that connection
** only.
**
** The state (rpc_tracker) never touches a socket: input is handed to it per
** connection and replies wait in each connection's output queue, which the
** loop sends without blocking. Limits: a handshake within handshake_s; a
** connection that is neither a registered server nor waiting for a device is
** closed after idle_s of silence; connections per peer and in all are capped,
** and when full the oldest such idle connection makes room; a connection that
** lets more than max_out bytes of replies pile up is dropped; entries per
** connection are capped; empty queues are kept (the query's table keeps its
** width, as TVM's) up to TRACKER_KEEP_EMPTY, the oldest freed beyond; the
** SUMMARY stays within one frame.
*/
#define _GNU_SOURCE
#include "rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRACKER_MAX_QUEUES 4096
#define TRACKER_KEEP_EMPTY 256
#define TRACKER_MAX_KEYLEN 256     /* rpc keys, match keys, addresses */
#define TRACKER_MAX_INFO 4096      /* a connection's UPDATE_INFO, dumped */

typedef struct {
  int fd;
  int id;
  char peer[64];
  int ready;                 /* handshake done */
  int closing;               /* send what is queued, then close */
  int dead;                  /* close now */
  char *in;
  size_t in_n, in_cap;
  char *out;
  size_t out_off, out_n, out_cap;
  json_t *info;              /* object: UPDATE_INFO merged */
  json_t *pending;           /* array of match keys not yet handed out */
  int nput, nreq;            /* its free entries and waiting requests */
  double opened, last;       /* times of connect and of the last input */
} tconn;

typedef struct {
  int conn_id;
  char *host;
  int port;
  char *match_key;
} tfree;

typedef struct {
  int conn_id;
  int priority;
  long seq;
} treq;

typedef struct {
  char *key;
  tfree *fr;
  int nfr, capfr;
  treq *rq;
  int nrq, caprq;
} tqueue;

struct rpc_tracker {
  rpc_tracker_opts o;
  char auth[RPC_MAX_AUTH + 1];
  char stop_key[RPC_MAX_AUTH + 1];
  tconn **conns;
  int nconns;
  int next_id;
  long seq;
  tqueue *qs;                /* in creation order */
  int nq, capq;
  int stop;
};

void rpc_tracker_opts_default(rpc_tracker_opts *o) {
  memset(o, 0, sizeof *o);
  o->handshake_s = RPC_HANDSHAKE_S;
  o->idle_s = 120;
  o->max_conns = 1024;
  o->max_per_peer = 128;
  o->max_entries = 64;
  o->max_out = (size_t)4 << 20;
}

rpc_tracker *rpc_tracker_new(const rpc_tracker_opts *o) {
  rpc_tracker *t = tl_calloc(1, sizeof *t);
  t->o = *o;
  if (t->o.max_conns < 1) t->o.max_conns = 1;
  if (t->o.max_per_peer < 1) t->o.max_per_peer = 1;
  snprintf(t->auth, sizeof t->auth, "%s", o->auth_key ? o->auth_key : "");
  if (o->stop_key && *o->stop_key) {
    snprintf(t->stop_key, sizeof t->stop_key, "%s", o->stop_key);
  } else {
    unsigned long long r = tl_hash_bytes(&t, sizeof t, (uint64_t)(tl_now() * 1e9) ^ (uint64_t)getpid());
    snprintf(t->stop_key, sizeof t->stop_key, "%016llx", r);
  }
  t->o.auth_key = t->auth;
  t->o.stop_key = t->stop_key;
  t->conns = tl_calloc((size_t)t->o.max_conns, sizeof *t->conns);
  return t;
}

int rpc_tracker_stopped(const rpc_tracker *t) { return t->stop; }

static tconn *conn_by_id(rpc_tracker *t, int id, int *idx) {
  for (int i = 0; i < t->nconns; i++)
    if (t->conns[i]->id == id) {
      if (idx) *idx = i;
      return t->conns[i];
    }
  return NULL;
}

static tconn *live_conn(rpc_tracker *t, int id) {
  tconn *c = conn_by_id(t, id, NULL);
  return c && !c->dead && !c->closing ? c : NULL;
}

static int is_server(const tconn *c) { return c->info && json_object_get(c->info, "key") != NULL; }

/* ---- output: queued, sent by the loop without blocking --------------------------------------- */

static void out_put(rpc_tracker *t, tconn *c, const void *p, size_t n) {
  if (c->dead) return;
  if (c->out_n - c->out_off + n > t->o.max_out) {   /* a peer that does not read */
    if (t->o.verbose) fprintf(stderr, "tracker: %s does not read its replies, closing\n", c->peer);
    c->dead = 1;
    return;
  }
  if (c->out_off && c->out_off == c->out_n) c->out_off = c->out_n = 0;
  if (c->out_n + n > c->out_cap) {
    if (c->out_off) {
      memmove(c->out, c->out + c->out_off, c->out_n - c->out_off);
      c->out_n -= c->out_off;
      c->out_off = 0;
    }
    while (c->out_n + n > c->out_cap) c->out_cap = c->out_cap ? c->out_cap * 2 : 4096;
    c->out = tl_realloc(c->out, c->out_cap);
  }
  memcpy(c->out + c->out_n, p, n);
  c->out_n += n;
}

static void out_i32(rpc_tracker *t, tconn *c, int32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  out_put(t, c, b, 4);
}

static int send_text(rpc_tracker *t, tconn *c, const char *text) {
  size_t n = strlen(text);
  out_i32(t, c, (int32_t)n);
  out_put(t, c, text, n);
  return c->dead ? -1 : 0;
}

static int send_json(rpc_tracker *t, tconn *c, json_t *j) {
  char *s = json_dumps(j, RPC_TRACKER_JSON);
  json_decref(j);
  int rc = send_text(t, c, s ? s : "-1");
  free(s);
  return rc;
}

const char *rpc_tracker_conn_output(rpc_tracker *t, int id, size_t *n) {
  tconn *c = conn_by_id(t, id, NULL);
  *n = c ? c->out_n - c->out_off : 0;
  return *n ? c->out + c->out_off : NULL;
}

void rpc_tracker_conn_sent(rpc_tracker *t, int id, size_t n) {
  tconn *c = conn_by_id(t, id, NULL);
  if (!c) return;
  if (n > c->out_n - c->out_off) n = c->out_n - c->out_off;
  c->out_off += n;
  if (c->out_off == c->out_n) c->out_off = c->out_n = 0;
}

/* ---- queues ------------------------------------------------------------------------------ */

static void queue_free(tqueue *q) {
  for (int j = 0; j < q->nfr; j++) {
    free(q->fr[j].host);
    free(q->fr[j].match_key);
  }
  free(q->fr);
  free(q->rq);
  free(q->key);
}

/* Free the oldest empty queues beyond keep. */
static void trim_empty(rpc_tracker *t, int keep) {
  int empty = 0;
  for (int i = 0; i < t->nq; i++) empty += t->qs[i].nfr == 0 && t->qs[i].nrq == 0;
  for (int i = 0; i < t->nq && empty > keep;) {
    if (t->qs[i].nfr == 0 && t->qs[i].nrq == 0) {
      queue_free(&t->qs[i]);
      memmove(&t->qs[i], &t->qs[i + 1], sizeof *t->qs * (size_t)(t->nq - i - 1));
      t->nq--;
      empty--;
    } else {
      i++;
    }
  }
}

static tqueue *queue_of(rpc_tracker *t, const char *key) {
  for (int i = 0; i < t->nq; i++)
    if (!strcmp(t->qs[i].key, key)) return &t->qs[i];
  if (t->nq >= TRACKER_MAX_QUEUES) trim_empty(t, 0);
  if (t->nq >= TRACKER_MAX_QUEUES) return NULL;
  if (t->nq == t->capq) {
    t->capq = t->capq ? t->capq * 2 : 8;
    t->qs = tl_realloc(t->qs, sizeof *t->qs * (size_t)t->capq);
  }
  tqueue *q = &t->qs[t->nq++];
  memset(q, 0, sizeof *q);
  q->key = tl_strdup(key);
  return q;
}

static void pending_remove(tconn *c, const char *mk) {
  for (size_t i = 0; i < json_array_size(c->pending); i++) {
    if (!strcmp(json_string_value(json_array_get(c->pending, i)), mk)) {
      json_array_remove(c->pending, i);
      return;
    }
  }
}

/* Pair free servers with waiting requests (formats §3.6). */
static void schedule(rpc_tracker *t, tqueue *q) {
  while (q->nfr > 0 && q->nrq > 0) {
    int best = 0;
    for (int i = 1; i < q->nrq; i++)
      if (q->rq[i].priority > q->rq[best].priority ||
          (q->rq[i].priority == q->rq[best].priority && q->rq[i].seq < q->rq[best].seq))
        best = i;
    treq r = q->rq[best];
    memmove(&q->rq[best], &q->rq[best + 1], sizeof(treq) * (size_t)(q->nrq - best - 1));
    q->nrq--;
    tfree f = q->fr[0];
    memmove(&q->fr[0], &q->fr[1], sizeof(tfree) * (size_t)(q->nfr - 1));
    q->nfr--;
    tconn *rc = live_conn(t, r.conn_id);
    tconn *sc = conn_by_id(t, f.conn_id, NULL);
    if (rc) rc->nreq--;
    int ok = 0;
    if (rc) ok = send_json(t, rc, json_pack("[i, [s, i, s]]", 0, f.host, f.port, f.match_key)) == 0;
    if (ok) {
      if (sc) {
        pending_remove(sc, f.match_key);
        sc->nput--;
      }
      if (t->o.verbose)
        fprintf(stderr, "tracker: %s:%d (%s) -> %s\n", f.host, f.port, f.match_key, rc->peer);
      free(f.host);
      free(f.match_key);
    } else {   /* requester gone: the server goes back at the end */
      q->fr[q->nfr++] = f;
    }
  }
}

static void drop_conn_entries(rpc_tracker *t, tconn *c) {
  for (int i = 0; i < t->nq; i++) {
    tqueue *q = &t->qs[i];
    int k = 0;
    for (int j = 0; j < q->nrq; j++)
      if (q->rq[j].conn_id != c->id) q->rq[k++] = q->rq[j];
    q->nrq = k;
    /* free entries belong to the connection that PUT them, registered server or not */
    k = 0;
    for (int j = 0; j < q->nfr; j++) {
      if (q->fr[j].conn_id == c->id) {
        free(q->fr[j].host);
        free(q->fr[j].match_key);
      } else {
        q->fr[k++] = q->fr[j];
      }
    }
    q->nfr = k;
  }
  c->nput = c->nreq = 0;
  trim_empty(t, TRACKER_KEEP_EMPTY);
}

static void close_at(rpc_tracker *t, int idx) {
  tconn *c = t->conns[idx];
  drop_conn_entries(t, c);
  if (t->o.verbose && c->info) {
    char *s = json_dumps(c->info, JSON_COMPACT);
    fprintf(stderr, "tracker: connection %s closed %s\n", c->peer, s ? s : "");
    free(s);
  }
  if (c->fd >= 0) close(c->fd);
  free(c->in);
  free(c->out);
  json_decref(c->info);
  json_decref(c->pending);
  free(c);
  t->conns[idx] = t->conns[--t->nconns];
}

void rpc_tracker_conn_close(rpc_tracker *t, int id) {
  int idx;
  if (conn_by_id(t, id, &idx)) close_at(t, idx);
}

/* Connections that may make room: neither a registered server nor waiting for a device. */
static int evictable(const tconn *c) { return !is_server(c) && c->nreq == 0; }

int rpc_tracker_conn_open(rpc_tracker *t, int fd, const char *peer, double now) {
  int same = 0;
  for (int i = 0; i < t->nconns; i++) same += !strcmp(t->conns[i]->peer, peer);
  int per_peer = same >= t->o.max_per_peer;
  if (per_peer || t->nconns >= t->o.max_conns) {
    /* make room: the oldest idle connection (of that peer when the peer is at its cap),
    ** those that never finished their handshake first */
    int victim = -1;
    for (int i = 0; i < t->nconns; i++) {
      tconn *c = t->conns[i];
      if (!evictable(c) || (per_peer && strcmp(c->peer, peer))) continue;
      if (victim < 0) {
        victim = i;
        continue;
      }
      tconn *v = t->conns[victim];
      if ((c->ready < v->ready) || (c->ready == v->ready && c->last < v->last)) victim = i;
    }
    if (victim < 0) return 0;
    if (t->o.verbose) fprintf(stderr, "tracker: full, closing idle %s\n", t->conns[victim]->peer);
    close_at(t, victim);
  }
  tconn *c = tl_calloc(1, sizeof *c);
  c->fd = fd;
  c->id = ++t->next_id;
  if (t->next_id >= 0x7fffffff) t->next_id = 0;
  snprintf(c->peer, sizeof c->peer, "%s", peer ? peer : "?");
  c->pending = json_array();
  c->opened = c->last = now;
  t->conns[t->nconns++] = c;
  return c->id;
}

void rpc_tracker_expire(rpc_tracker *t, double now) {
  for (int i = t->nconns - 1; i >= 0; i--) {
    tconn *c = t->conns[i];
    int late = !c->ready && now - c->opened > t->o.handshake_s;
    int idle = c->ready && t->o.idle_s > 0 && evictable(c) && now - c->last > t->o.idle_s;
    int done = c->closing && c->out_n == c->out_off;
    if (c->closing && now - c->opened > t->o.handshake_s) late = 1;
    if (c->dead || late || idle || done) {
      if (t->o.verbose && (late || idle))
        fprintf(stderr, "tracker: %s %s, closing\n", c->peer, late ? "handshake timed out" : "idle");
      close_at(t, i);
    }
  }
}

/* ---- messages ---------------------------------------------------------------------------- */

static size_t json_text_len(const char *s) {   /* upper bound of its ASCII-escaped length */
  size_t n = 2;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    n += *p < 0x20 || *p >= 0x80 ? 6 : (*p == '"' || *p == '\\') ? 2 : 1;
  return n;
}

char *rpc_tracker_summary_text(rpc_tracker *t) {
  /* within one frame: queues in creation order, then servers, while they fit; what is left
  ** out is counted in "truncated" (absent when nothing is) */
  size_t budget = RPC_TRACKER_MAX_FRAME - 4096, used = 64;
  int left_q = 0, left_s = 0;
  json_t *qi = json_object();
  for (int i = 0; i < t->nq; i++) {
    size_t n = json_text_len(t->qs[i].key) + 48;
    if (used + n > budget) {
      left_q++;
      continue;
    }
    used += n;
    json_object_set_new(qi, t->qs[i].key,
                        json_pack("{s:i, s:i}", "free", t->qs[i].nfr, "pending", t->qs[i].nrq));
  }
  json_t *si = json_array();
  for (int i = 0; i < t->nconns; i++) {
    tconn *c = t->conns[i];
    const char *k = c->info ? json_string_value(json_object_get(c->info, "key")) : NULL;
    if (!k || strncmp(k, "server", 6)) continue;
    char *d = json_dumps(c->info, RPC_TRACKER_JSON);
    size_t n = (d ? strlen(d) : 0) + 4;
    free(d);
    if (used + n > budget) {
      left_s++;
      continue;
    }
    used += n;
    json_array_append(si, c->info);
  }
  json_t *body = json_pack("{s:o, s:o}", "queue_info", qi, "server_info", si);
  if (left_q || left_s)
    json_object_set_new(body, "truncated", json_pack("{s:i, s:i}", "queues", left_q, "servers", left_s));
  json_t *r = json_pack("[i, o]", 0, body);
  char *s = json_dumps(r, RPC_TRACKER_JSON);
  json_decref(r);
  return s;
}

static int bounded(const char *s) { return s && strlen(s) <= TRACKER_MAX_KEYLEN; }

/* A port as a JSON integer or a string of digits, 1..65535; -1 otherwise. */
static int port_of(json_t *p) {
  if (json_is_integer(p)) {
    json_int_t v = json_integer_value(p);
    return v >= 1 && v <= 65535 ? (int)v : -1;
  }
  const char *s = json_string_value(p);
  if (!s || !*s || strlen(s) > 5) return -1;
  int v = 0;
  for (const char *q = s; *q; q++) {
    if (*q < '0' || *q > '9') return -1;
    v = v * 10 + (*q - '0');
  }
  return v >= 1 && v <= 65535 ? v : -1;
}

/* Handle one frame; returns -1 to close the connection. */
static int handle(rpc_tracker *t, tconn *c, const char *text, size_t n) {
  json_t *j = json_loadb(text, n, JSON_DECODE_ANY, NULL);
  if (!j || !json_is_array(j) || !json_is_integer(json_array_get(j, 0))) {
    if (t->o.verbose) fprintf(stderr, "tracker: malformed message from %s, closing\n", c->peer);
    json_decref(j);
    return -1;
  }
  int code = (int)json_integer_value(json_array_get(j, 0));
  int rc = 0;
  switch (code) {
  case TC_PING:
    rc = send_text(t, c, "0");
    break;
  case TC_STOP: {
    const char *k = json_string_value(json_array_get(j, 1));
    if (k && rpc_auth_equal(k, strlen(k), t->stop_key, strlen(t->stop_key))) {
      send_text(t, c, "0");
      t->stop = 1;
    } else {
      rc = send_text(t, c, "-1");
    }
    break;
  }
  case TC_PUT: {
    const char *key = json_string_value(json_array_get(j, 1));
    json_t *pm = json_array_get(j, 2);
    int port = port_of(json_array_get(pm, 0));
    const char *mk = json_string_value(json_array_get(pm, 1));
    const char *addr = json_string_value(json_array_get(j, 3));
    tqueue *q = NULL;
    if (!bounded(key) || !bounded(mk) || port < 0 || (addr && !bounded(addr)) ||
        c->nput + c->nreq >= t->o.max_entries || !(q = queue_of(t, key))) {
      if (t->o.verbose) fprintf(stderr, "tracker: bad or excess PUT from %s, closing\n", c->peer);
      rc = -1;
      break;
    }
    if (q->nfr == q->capfr) {
      q->capfr = q->capfr ? q->capfr * 2 : 8;
      q->fr = tl_realloc(q->fr, sizeof(tfree) * (size_t)q->capfr);
    }
    q->fr[q->nfr++] = (tfree){c->id, tl_strdup(addr ? addr : c->peer), port, tl_strdup(mk)};
    c->nput++;
    json_array_append_new(c->pending, json_string(mk));
    rc = send_text(t, c, "0");
    schedule(t, q);
    break;
  }
  case TC_REQUEST: {
    const char *key = json_string_value(json_array_get(j, 1));
    json_t *pr = json_array_get(j, 3);
    tqueue *q = NULL;
    if (!bounded(key) || c->nput + c->nreq >= t->o.max_entries || !(q = queue_of(t, key))) {
      if (t->o.verbose) fprintf(stderr, "tracker: bad or excess REQUEST from %s, closing\n", c->peer);
      rc = -1;
      break;
    }
    if (q->nrq == q->caprq) {
      q->caprq = q->caprq ? q->caprq * 2 : 8;
      q->rq = tl_realloc(q->rq, sizeof(treq) * (size_t)q->caprq);
    }
    q->rq[q->nrq++] = (treq){c->id, json_is_integer(pr) ? (int)json_integer_value(pr) : 1, t->seq++};
    c->nreq++;
    schedule(t, q);
    break;
  }
  case TC_UPDATE_INFO: {
    json_t *d = json_array_get(j, 1);
    if (!json_is_object(d)) {
      rc = -1;
      break;
    }
    json_t *info = c->info ? json_deep_copy(c->info) : json_object();
    json_object_update(info, d);
    json_t *addr = json_object_get(info, "addr");
    if (json_is_array(addr) && json_is_null(json_array_get(addr, 0)))
      json_array_set_new(addr, 0, json_string(c->peer));
    char *s = json_dumps(info, RPC_TRACKER_JSON);
    int big = !s || strlen(s) > TRACKER_MAX_INFO;
    free(s);
    if (big) {
      if (t->o.verbose) fprintf(stderr, "tracker: UPDATE_INFO over %d bytes from %s, closing\n",
                                TRACKER_MAX_INFO, c->peer);
      json_decref(info);
      rc = -1;
      break;
    }
    json_decref(c->info);
    c->info = info;
    rc = send_text(t, c, "0");
    break;
  }
  case TC_SUMMARY: {
    char *s = rpc_tracker_summary_text(t);
    rc = send_text(t, c, s ? s : "-1");
    free(s);
    break;
  }
  case TC_GET_PENDING_MATCHKEYS:
    rc = send_json(t, c, json_incref(c->pending));
    break;
  default:
    if (t->o.verbose) fprintf(stderr, "tracker: unknown code %d from %s, closing\n", code, c->peer);
    rc = -1;
  }
  json_decref(j);
  return rc ? -1 : 0;
}

/* The handshake at the start of in[0..left): bytes used, 0 for more, -1 to close. */
static long handshake(rpc_tracker *t, tconn *c, const char *in, size_t left) {
  if (left < 4) return 0;
  uint32_t m = rpc_le32(in);
  int keyed = t->auth[0] != 0;
  if (m == RPC_TRACKER_MAGIC) {
    if (keyed) {
      out_i32(t, c, RPC_AUTH_REQUIRED);
      c->closing = 1;
    } else {
      out_i32(t, c, RPC_TRACKER_MAGIC);
      c->ready = 1;
    }
    return 4;
  }
  if (m != RPC_TRACKER_MAGIC_AUTH) return -1;
  if (left < 8) return 0;
  uint32_t an = rpc_le32(in + 4);
  if (an > RPC_MAX_AUTH) return -1;
  if (left < 8 + (size_t)an) return 0;
  if (!keyed) {
    out_i32(t, c, RPC_AUTH_NONE);
    c->closing = 1;
  } else if (!rpc_auth_equal(in + 8, an, t->auth, strlen(t->auth))) {
    if (t->o.verbose) fprintf(stderr, "tracker: wrong auth key from %s\n", c->peer);
    out_i32(t, c, RPC_AUTH_REFUSED);
    c->closing = 1;
  } else {
    out_i32(t, c, RPC_TRACKER_MAGIC);
    c->ready = 1;
  }
  return 8 + (long)an;
}

int rpc_tracker_conn_input(rpc_tracker *t, int id, const void *p, size_t n, double now) {
  tconn *c = conn_by_id(t, id, NULL);
  if (!c || c->dead) return -1;
  if (c->closing || t->stop) return 0;   /* after an auth refusal nothing more is read */
  c->last = now;
  if (c->in_n + n > c->in_cap) {
    while (c->in_n + n > c->in_cap) c->in_cap = c->in_cap ? c->in_cap * 2 : 4096;
    c->in = tl_realloc(c->in, c->in_cap);
  }
  memcpy(c->in + c->in_n, p, n);
  c->in_n += n;
  size_t off = 0;
  int rc = 0;
  while (!c->closing && !c->dead && !t->stop) {
    size_t left = c->in_n - off;
    if (!c->ready) {
      long u = handshake(t, c, c->in + off, left);
      if (u < 0) rc = -1;
      if (u <= 0) break;
      off += (size_t)u;
      continue;
    }
    if (left < 4) break;
    int32_t len = (int32_t)rpc_le32(c->in + off);
    if (len < 0 || (size_t)len > RPC_TRACKER_MAX_FRAME) {   /* exactly 1 MiB is allowed */
      if (t->o.verbose) fprintf(stderr, "tracker: frame of %d bytes from %s, closing\n", (int)len, c->peer);
      rc = -1;
      break;
    }
    if (left < 4 + (size_t)len) break;
    if (handle(t, c, c->in + off + 4, (size_t)len)) {
      rc = -1;
      break;
    }
    off += 4 + (size_t)len;
  }
  memmove(c->in, c->in + off, c->in_n - off);
  c->in_n -= off;
  if (c->in_cap > ((size_t)64 << 10) && c->in_n < c->in_cap / 4) {   /* give back big buffers */
    c->in_cap = c->in_n > 4096 ? c->in_n : 4096;
    c->in = tl_realloc(c->in, c->in_cap);
  }
  return rc || c->dead ? -1 : 0;
}

void rpc_tracker_free(rpc_tracker *t) {
  if (!t) return;
  while (t->nconns) close_at(t, t->nconns - 1);
  for (int i = 0; i < t->nq; i++) queue_free(&t->qs[i]);
  free(t->qs);
  free(t->conns);
  free(t);
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void flush_conn(rpc_tracker *t, tconn *c) {
  size_t n;
  const char *p;
  while ((p = rpc_tracker_conn_output(t, c->id, &n))) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (w <= 0) {
      c->dead = 1;
      return;
    }
    rpc_tracker_conn_sent(t, c->id, (size_t)w);
  }
}

TL_EXPORT int tl_rpc_tracker_run(tl_ctx *ctx, const char *host, int port, int port_end,
                                 const char *stop_key, const char *auth_key, double idle_timeout_s,
                                 int max_conns_per_peer, int verbose) {
  if (auth_key && strlen(auth_key) > RPC_MAX_AUTH)
    return tl_err(ctx, TL_E_ARG, "rpc tracker: the auth key is over %d bytes", RPC_MAX_AUTH);
  int lfd, bound;
  int rc = rpc_listen(ctx, host, port, port_end, &lfd, &bound);
  if (rc) return rc;
  signal(SIGPIPE, SIG_IGN);
  fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
  rpc_tracker_opts o;
  rpc_tracker_opts_default(&o);
  o.auth_key = auth_key;
  o.stop_key = stop_key;
  o.verbose = verbose;
  if (idle_timeout_s >= 0) o.idle_s = idle_timeout_s;
  if (max_conns_per_peer > 0) o.max_per_peer = max_conns_per_peer;
  /* every connection is a descriptor: stay within what the process may open */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && (long long)rl.rlim_cur - 32 < o.max_conns)
      o.max_conns = rl.rlim_cur > 64 ? (int)rl.rlim_cur - 32 : 32;
  }
  rpc_tracker *t = rpc_tracker_new(&o);
  printf("bind to %s:%d\n", host && *host ? host : "127.0.0.1", bound);
  fflush(stdout);
  struct pollfd *pf = tl_calloc((size_t)o.max_conns + 1, sizeof *pf);
  int *ids = tl_calloc((size_t)o.max_conns + 1, sizeof *ids);
  char *buf = tl_malloc(65536);
  double accept_pause = 0;
  while (!t->stop) {
    double now = tl_now();
    pf[0] = (struct pollfd){lfd, now >= accept_pause ? POLLIN : 0, 0};
    int nfds = 1;
    for (int i = 0; i < t->nconns; i++) {
      tconn *c = t->conns[i];
      short ev = c->closing ? 0 : POLLIN;
      if (c->out_n > c->out_off) ev |= POLLOUT;
      pf[nfds] = (struct pollfd){c->fd, ev, 0};
      ids[nfds++] = c->id;
    }
    int pr = poll(pf, (nfds_t)nfds, 250);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    now = tl_now();
    for (int i = 1; i < nfds && !t->stop; i++) {
      if (!pf[i].revents) continue;
      tconn *c = conn_by_id(t, ids[i], NULL);
      if (!c) continue;
      if (pf[i].revents & POLLOUT) flush_conn(t, c);
      if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t r = recv(c->fd, buf, 65536, MSG_DONTWAIT);
        int end = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
        if (!end && r > 0 && rpc_tracker_conn_input(t, c->id, buf, (size_t)r, now)) end = 1;
        if (end) {   /* what was answered before the end still goes out, if the socket takes it */
          if (!c->dead) flush_conn(t, c);
          c->dead = 1;
        }
      }
    }
    /* replies go out at once where the socket takes them (REQUESTs answer other connections) */
    for (int i = 0; i < t->nconns; i++)
      if (!t->conns[i]->dead && t->conns[i]->out_n > t->conns[i]->out_off) flush_conn(t, t->conns[i]);
    rpc_tracker_expire(t, now);
    if (pf[0].revents & POLLIN) {
      for (int k = 0; k < 64; k++) {
        struct sockaddr_in sa;
        socklen_t sl = sizeof sa;
        int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE) accept_pause = now + 0.1;
          break;
        }
        char peer[64];
        inet_ntop(AF_INET, &sa.sin_addr, peer, sizeof peer);
        if (!rpc_tracker_conn_open(t, fd, peer, now)) {
          close(fd);   /* full of registered servers and waiting clients */
          continue;
        }
        rpc_keepalive(fd);
      }
    }
  }
  /* the STOP reply goes out before the tracker does */
  for (int i = 0; i < t->nconns; i++) flush_conn(t, t->conns[i]);
  rpc_tracker_free(t);
  free(pf);
  free(ids);
  free(buf);
  close(lfd);
  return TL_OK;
}
